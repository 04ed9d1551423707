/*
 * The set-up and growth of one-sided messengers (Seriema, section 4.3:
 * no-setup service calls over the send path). The sender asks the
 * receiver for chunks ("rivet.am.ring_req"); the receiver takes them from
 * its chunk allocator, on a service thread when the job has some, and
 * answers with their addresses, remote keys and, for a new ring, a random
 * nonce ("rivet.am.ring_rep"). The ring's protocol is in am_ring.c.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "am_internal.h"

typedef struct {
    uint32_t nchunks;
    uint32_t first;
    uint64_t ctrl_addr;
    uint32_t rkey_len;
    uint32_t reserved;
} ring_req_t;

typedef struct {
    uint32_t nchunks; /* 0: refused (no memory) */
    uint32_t first;
    uint64_t nonce;
} ring_rep_t;

typedef struct {
    uint64_t addr, len;
    uint32_t rkey_len;
    uint32_t reserved;
} ring_chunk_desc_t;

rv_status_t am_ring_request(am_worker_t *aw, am_dest_t *d, uint32_t n,
                            bool first)
{
    am_oring_t *r = &d->ring;
    const rv_mem_chunk_t *chunk;
    if (first) {
        void *mem;
        rv_status_t st =
            rv_mem_general_alloc(aw->gen, sizeof(am_ctrl_t), 64, &mem, &chunk);
        if (st != RV_OK)
            return st;
        r->ctrl = mem;
        r->ctrl->consumed = 0;
        r->ctrl->notified = 0;
    } else {
        chunk = rv_mem_general_lookup(aw->gen, r->ctrl);
    }
    ring_req_t req = {.nchunks = n,
                      .first = first,
                      .ctrl_addr = (uintptr_t)r->ctrl,
                      .rkey_len = (uint32_t)chunk->rkey_len};
    /* Sent from a copy, without waiting: the request is made while calls
     * are being transmitted, where progress must not run. */
    uint8_t *copy = malloc(sizeof(req) + chunk->rkey_len);
    if (copy == NULL)
        return RV_ERR_NO_MEMORY;
    memcpy(copy, &req, sizeof(req));
    memcpy(copy + sizeof(req), chunk->rkey, chunk->rkey_len);
    struct iovec iov = {.iov_base = copy,
                        .iov_len = sizeof(req) + chunk->rkey_len};
    rv_status_t st = rv_send_raw(aw->w, d->tid, am_ring_req_id, NULL, 0, &iov,
                                 1, 0, am_free_done, copy);
    if (st == RV_OK)
        free(copy);
    if (st < 0) {
        free(copy);
        if (first)
            r->state = RING_FAILED;
        rv_error("cannot ask worker %u for ring chunks: %s", d->tid,
                 rv_status_str(st));
        return st;
    }
    if (first)
        r->state = RING_REQUESTED;
    else
        r->growing = true;
    return RV_OK;
}

/* Receiver, on a service thread or the worker: takes the chunks. */
static void ring_alloc(am_sjob_t *job)
{
    for (job->got = 0; job->got < job->want; job->got++)
        if (rv_mem_chunk_alloc(job->aw->ring_chunks, 1,
                               &job->chunks[job->got]) != RV_OK)
            break;
}

/* Receiver, on the worker: records the chunks and describes them to the
 * producer. The first request makes the ring; later ones wait in
 * `pending` until the producer's ROTATE splices them in. */
static void ring_grant(am_sjob_t *job)
{
    am_worker_t *aw = job->aw;
    am_iring_t *r = aw->recv.srcs[job->src]->ring;
    ring_rep_t rep = {.first = job->first, .nonce = r->nonce};
    am_ichunk_t **list = job->first ? &r->chunks : &r->pending;
    uint32_t *count = job->first ? &r->nchunks : &r->npending;
    struct iovec iov[1 + 2 * 64];
    ring_chunk_desc_t desc[64];
    size_t niov = 1;
    /* No chunk (out of registered memory): the list stays as it is. A
     * realloc to 0 bytes would free it and leave *list dangling, which the
     * producer's next request then freed again. */
    am_ichunk_t *grown = *list;
    if (job->got > 0) {
        grown = realloc(*list, (*count + job->got) * sizeof(**list));
        if (grown == NULL) {
            for (uint32_t i = 0; i < job->got; i++)
                rv_mem_chunk_free(aw->ring_chunks, job->chunks[i]);
            job->got = 0;
        } else {
            *list = grown;
        }
    }
    for (uint32_t i = 0; i < job->got; i++) {
        rv_mem_chunk_t *c = job->chunks[i];
        grown[*count + i] =
            (am_ichunk_t){.addr = c->addr, .len = c->len, .chunk = c};
        desc[i] = (ring_chunk_desc_t){.addr = (uintptr_t)c->addr,
                                      .len = c->len,
                                      .rkey_len = (uint32_t)c->rkey_len};
        iov[niov++] =
            (struct iovec){.iov_base = &desc[i], .iov_len = sizeof(desc[i])};
        iov[niov++] =
            (struct iovec){.iov_base = (void *)c->rkey, .iov_len = c->rkey_len};
    }
    *count += job->got;
    rep.nchunks = job->got;
    iov[0] = (struct iovec){.iov_base = &rep, .iov_len = sizeof(rep)};
    rv_status_t st = rv_sendv(aw->w, job->src, am_ring_rep_id, iov, niov, NULL);
    if (st != RV_OK)
        rv_error("cannot answer the ring request of worker %u: %s", job->src,
                 rv_status_str(st));
    free(job);
}

/* Receiver: the ring of the producer of @p msg, a first request, made
 * with its nonce and the producer's control word; NULL when it cannot
 * be. */
static am_iring_t *ring_in_new(am_worker_t *aw, am_src_t *s,
                               const rv_msg_t *msg, const ring_req_t *req)
{
    am_iring_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->src = msg->src;
    r->ctrl_addr = req->ctrl_addr;
    if (getrandom(&r->nonce, sizeof(r->nonce), 0) != (ssize_t)sizeof(r->nonce))
        r->nonce = (uint64_t)time(NULL) ^ (uintptr_t)r;
    rv_status_t st = rv_tw_rkey_unpack(
        aw->w, msg->src, (const uint8_t *)msg->data + sizeof(*req),
        req->rkey_len, &r->ctrl_rkey);
    if (st != RV_OK) {
        rv_error("ring from worker %u: cannot unpack its remote key: %s",
                 msg->src, rv_status_str(st));
        free(r);
        return NULL;
    }
    s->ring = r;
    aw->recv.rings[aw->recv.nrings++] = r;
    return r;
}

/* Receiver: allocates chunks for a producer and describes them. */
static rv_status_t on_ring_req(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    ring_req_t req;
    (void)arg;
    if (aw == NULL)
        return RV_OK;
    if (msg->len < sizeof(req)) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        return RV_OK;
    }
    memcpy(&req, msg->data, sizeof(req));
    if (msg->len != sizeof(req) + req.rkey_len || req.nchunks == 0 ||
        req.nchunks > AM_MAX_CHUNKS_LIMIT) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped a malformed ring request from worker %u", msg->src);
        return RV_OK;
    }
    am_src_t *s = am_src(aw, msg->src);
    am_iring_t *r = s ? s->ring : NULL;
    ring_rep_t rep = {.first = req.first};
    if (req.first && r == NULL && s != NULL)
        r = ring_in_new(aw, s, msg, &req);
    if (r == NULL || (bool)req.first != (r->nchunks == 0) || req.nchunks > 64) {
        rv_error("cannot set up the ring from worker %u", msg->src);
        rep.nchunks = 0;
        return rv_sendx(w, msg->src, am_ring_rep_id, &rep, sizeof(rep), NULL, 0,
                        NULL);
    }
    /* The chunks are allocated by a service thread if the process has
     * some (it takes milliseconds), else right here. */
    am_sjob_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        rep.nchunks = 0;
        return rv_sendx(w, msg->src, am_ring_rep_id, &rep, sizeof(rep), NULL, 0,
                        NULL);
    }
    job->run = ring_alloc;
    job->done = ring_grant;
    job->src = msg->src;
    job->want = req.nchunks;
    job->first = req.first;
    am_service_submit(aw, job);
    return RV_OK;
}

/* Sender: the chunks the receiver's answer @p msg describes, their
 * remote keys unpacked; NULL when it is malformed (or out of memory). */
static am_ochunk_t *chunks_parse(rv_worker_t *w, const rv_msg_t *msg,
                                 const ring_rep_t *rep)
{
    am_ochunk_t *list = calloc(rep->nchunks, sizeof(*list));
    if (list == NULL)
        return NULL;
    const uint8_t *p = (const uint8_t *)msg->data + sizeof(*rep);
    const uint8_t *end = (const uint8_t *)msg->data + msg->len;
    uint32_t i;
    for (i = 0; i < rep->nchunks; i++) {
        ring_chunk_desc_t desc;
        if (p + sizeof(desc) > end)
            break;
        memcpy(&desc, p, sizeof(desc));
        p += sizeof(desc);
        if (p + desc.rkey_len > end ||
            rv_tw_rkey_unpack(w, msg->src, p, desc.rkey_len, &list[i].rkey) !=
                RV_OK)
            break;
        p += desc.rkey_len;
        list[i].raddr = desc.addr;
        list[i].len = desc.len;
        list[i].mapped =
            rv_tw_rkey_ptr(w, msg->src, list[i].rkey, desc.addr, desc.len);
    }
    if (i == rep->nchunks)
        return list;
    for (uint32_t j = 0; j < i; j++)
        rv_tw_rkey_destroy(w, list[j].rkey);
    free(list);
    return NULL;
}

/* Sender: the receiver's chunks arrived. */
static rv_status_t on_ring_rep(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    ring_rep_t rep;
    (void)arg;
    if (aw == NULL || msg->len < sizeof(rep))
        return RV_OK;
    memcpy(&rep, msg->data, sizeof(rep));
    am_dest_t *d = am_dest(aw, msg->src);
    am_oring_t *r = &d->ring;
    if (rep.nchunks == 0) {
        rv_warn("worker %u could not give ring chunks to worker %u (out of "
                "registered memory: its own error says which limit)%s",
                msg->src, aw->me,
                rep.first ? "; calls to it go by the send path"
                          : "; the ring stays at its size");
        if (rep.first) {
            r->state = RING_FAILED;
        } else {
            r->growing = false;
            r->grow_refused = true; /* asking again would only spin */
        }
        return RV_OK;
    }
    am_ochunk_t *list = chunks_parse(w, msg, &rep);
    if (list == NULL) {
        rv_error("cannot take the ring answer of worker %u (malformed, or out "
                 "of memory)%s",
                 msg->src,
                 rep.first ? "; calls to it go by the send path" : "");
        if (rep.first)
            r->state = RING_FAILED;
        return RV_OK;
    }
    aw->stats.chunks_granted += rep.nchunks;
    if (rep.first) {
        r->chunks = list;
        r->nchunks = rep.nchunks;
        r->nonce = rep.nonce;
        r->state = RING_READY;
    } else {
        r->spare = list;
        r->nspare = rep.nchunks;
        r->growing = false;
    }
    return RV_OK;
}

rv_status_t am_ring_register(rv_context_t *ctx)
{
    rv_status_t st = rv_handler_register(ctx, "rivet.am.ring_req", on_ring_req,
                                         NULL, 0, &am_ring_req_id);
    if (st == RV_OK)
        st = rv_handler_register(ctx, "rivet.am.ring_rep", on_ring_rep, NULL, 0,
                                 &am_ring_rep_id);
    return st;
}
