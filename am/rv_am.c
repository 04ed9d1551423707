/*
 * The invocation layer: calls, synchronizers, aggregation, local bypass
 * and the send path. The write path (messenger rings) is in am_ring.c.
 *
 * How a call travels, by configuration:
 *
 *   same process, am.local_bypass   a node on the (sender, receiver)
 *                                   thread pair's wait-free queue
 *   am.path send, no aggregation    one transport AM: the call header in
 *                                   the AM header, [args][buffer] as
 *                                   payload, zero-copy
 *   otherwise                       serialized once as a record (see
 *                                   am_internal.h) into a registered
 *                                   batch buffer, then transmitted as a
 *                                   run of records: one AM to
 *                                   "rivet.am.batch" (path send) or one
 *                                   ring record (path write)
 *
 * Aggregation decides when a run is transmitted: none at once; trad once
 * it holds am.flush_bytes, on rv_flush and when the worker goes idle;
 * ovfl only when the messenger cannot take the call right now (ring full
 * or being set up; on path send, when the transport cannot send at once),
 * up to am.ovfl_limit bytes. Runs that cannot be transmitted wait in
 * FIFO order and every later call queues behind them; am.on_full says
 * what a call does when that queue is over its limit (or, without
 * aggregation, not empty).
 *
 * Progress and re-entrancy. Handlers run from rv_progress, and a handler
 * may make calls, progress and wait. Every source of calls (a run of a
 * batch, a ring, a local queue) is consumed one call at a time, with its
 * cursor advanced *before* the handler runs, so a nested rv_progress
 * simply continues with the next call of the same source: FIFO order of
 * starting calls holds, nothing runs twice, and nothing waits for the
 * outer handler. Memory holding a running call's arguments is not
 * released (batch message kept, ring chunk not reported consumed) until
 * that call returns.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"

rv_handler_id_t am_done_id, am_batch_id, am_ring_req_id, am_ring_rep_id;

typedef struct {
    rv_call_fn fn;
    void *arg;
    rv_handler_id_t id;
} am_entry_t;

typedef struct {
    uint64_t sync, ret;
    uint32_t ret_len;       /* result bytes that follow */
    uint32_t reserved;
} am_done_t;

static rv_status_t trampoline(rv_worker_t *w, rv_msg_t *msg, void *arg);
static const rv_layer_ops_t am_layer;

void rv_am_stats(const rv_worker_t *w, rv_am_stats_t *stats)
{
    const am_worker_t *aw = w->layer;
    if (aw == NULL)
        memset(stats, 0, sizeof(*stats));
    else
        *stats = aw->stats;
}

/* ---------------------------------------------------------------------- */
/* Per-destination and per-source state                                    */

am_dest_t *am_dest(am_worker_t *aw, rv_tid_t dest)
{
    am_dest_t *d = aw->dests[dest];
    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        if (d == NULL)
            return NULL;
        d->tid = dest;
        aw->dests[dest] = d;
        aw->used[aw->nused++] = d;
    }
    return d;
}

am_src_t *am_src(am_worker_t *aw, rv_tid_t src)
{
    am_src_t *s = aw->srcs[src];
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return NULL;
        aw->srcs[src] = s;
    }
    return s;
}

/* ---------------------------------------------------------------------- */
/* Batch buffers (registered)                                              */

am_buf_t *am_buf_get(am_worker_t *aw)
{
    am_buf_t *b = aw->free_bufs;
    if (b != NULL) {
        aw->free_bufs = b->next;
    } else {
        b = calloc(1, sizeof(*b));
        if (b == NULL)
            return NULL;
        void *mem;
        if (rv_mem_general_alloc(aw->gen, aw->buf_bytes, 64, &mem, NULL) !=
            RV_OK) {
            free(b);
            return NULL;
        }
        b->base = mem;
        b->cap = aw->buf_bytes;
    }
    b->used = b->sent = 0;
    b->open = SIZE_MAX;
    b->inflight = 0;
    b->next = NULL;
    return b;
}

void am_buf_put(am_worker_t *aw, am_buf_t *b)
{
    b->next = aw->free_bufs;
    aw->free_bufs = b;
}

/* A transmission from a buffer completed. Buffers that are fully sent and
 * no longer the destination's last are recycled by buf_reap. */
void am_buf_done(void *arg, rv_status_t status)
{
    am_buf_t *b = arg;
    if (status != RV_OK)
        rv_error("a batch of calls failed to leave: %s",
                 rv_status_str(status));
    b->inflight--;
}

void am_sync_done(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* Recycles the destination's leading buffers that are done. */
static void buf_reap(am_worker_t *aw, am_dest_t *d)
{
    while (d->bufs != NULL && d->bufs != d->last &&
           d->bufs->sent == d->bufs->used && d->bufs->inflight == 0) {
        am_buf_t *b = d->bufs;
        d->bufs = b->next;
        am_buf_put(aw, b);
    }
}

/* ---------------------------------------------------------------------- */
/* Decoding and running calls                                              */

bool am_call_decode(am_call_t *c, rv_tid_t src, const am_rec_t *rec,
                    const uint8_t *body)
{
    c->src = src;
    c->handler = rec->handler;
    size_t len = rec->len;
    if (rec->meta & AM_REC_XHDR) {
        if (len < sizeof(am_hdr_t))
            return false;
        memcpy(&c->hdr, body, sizeof(am_hdr_t));
        body += sizeof(am_hdr_t);
        len -= sizeof(am_hdr_t);
        if (c->hdr.args_len > len)
            return false;
    } else {
        c->hdr = (am_hdr_t){.args_len = (uint32_t)len};
    }
    c->args = body;
    c->args_len = c->hdr.args_len;
    c->buf_len = len - c->args_len;
    c->buf = c->buf_len ? body + c->args_len : NULL;
    return true;
}

static void forward(am_worker_t *aw, const am_call_t *c)
{
    const am_hdr_t *h = &c->hdr;
    uint32_t n = aw->nworkers;
    uint32_t rel = (aw->me + n - h->root) % n;
    uint32_t step = 1;
    while (step <= rel)
        step <<= 1;
    size_t len = c->args_len + c->buf_len;
    for (; rel + step < n; step <<= 1) {
        rv_tid_t child = (h->root + rel + step) % n;
        struct iovec iov = {.iov_base = (void *)c->args, .iov_len = len};
        rv_status_t st = rv_sendx(aw->w, child, c->handler, h, sizeof(*h),
                                  &iov, len ? 1 : 0, NULL);
        if (st != RV_OK)
            rv_error("broadcast from worker %u: forwarding to worker %u "
                     "failed: %s", h->root, child, rv_status_str(st));
        else
            aw->stats.broadcasts_forwarded++;
    }
}

static void notify_rma(am_worker_t *aw, rv_tid_t src)
{
    am_src_t *s = aw->srcs[src];
    if (s == NULL || s->ring == NULL) {
        rv_warn("a call from worker %u asks for a ring notification "
                "without a ring", src);
        return;
    }
    s->ring->notified++;
    s->ring->push_due = true;
}

void am_run_call(am_worker_t *aw, const am_call_t *c)
{
    const rv_handler_entry_t *e = aw->last_entry;
    if (e == NULL || e->id != c->handler) {
        e = rv__handler_find(aw->ctx, c->handler);
        if (e != NULL && e->fn == trampoline)
            aw->last_entry = e; /* calls come in runs of one handler */
    }
    if (e == NULL || e->fn != trampoline) {
        aw->w->stats.rx_unknown_handler++;
        rv_warn("dropped a call from worker %u to unknown call handler "
                "0x%08x; every process must register the same handlers",
                c->src, c->handler);
        return;
    }
    const am_entry_t *ae = e->arg;
    const am_hdr_t *h = &c->hdr;
    if (h->flags & AM_BCAST)
        forward(aw, c);
    const uint8_t *buf = c->buf;
    size_t buf_len = c->buf_len;
    uint8_t *fetched = NULL;
    if (h->flags & AM_LONG) {
        /* The envelope came first: wait, in this source's order, until
         * the caller's fenced landing word says the payload is here. */
        am_src_t *s = am_src(aw, c->src);
        if (aw->landing == NULL || s == NULL) {
            rv_error("an AM Long from worker %u before its set-up; dropped",
                     c->src);
            return;
        }
        const uint64_t *word = &aw->landing[c->src];
        if ((int32_t)((uint32_t)__atomic_load_n(word, __ATOMIC_ACQUIRE) -
                      h->root) < 0) {
            s->fetching++;
            while ((int32_t)((uint32_t)__atomic_load_n(word,
                                                       __ATOMIC_ACQUIRE) -
                             h->root) < 0)
                rv_progress(aw->w);
            s->fetching--;
        }
    }
    if (h->flags & AM_LONGCOPY) {
        /* AM Long with the payload in the envelope: into place first. */
        uint8_t *dst = (uint8_t *)(uintptr_t)h->ret;
        if (buf_len > 0)
            memcpy(dst, buf, buf_len);
        buf = dst;
    } else if (h->flags & AM_BUFPUT) {
        buf = (const uint8_t *)(uintptr_t)h->ret;
        buf_len = h->ret_len;
    } else if (h->flags & AM_BUFGET) {
        /* Later calls of this source wait until the buffer is here. */
        am_src_t *s = am_src(aw, c->src);
        fetched = malloc(h->ret_len ? h->ret_len : 1);
        rv_status_t st = fetched && s ? RV_OK : RV_ERR_NO_MEMORY;
        if (st == RV_OK) {
            s->fetching++;
            st = am_fetch(aw, c, fetched);
            s->fetching--;
        }
        if (st != RV_OK) {
            rv_error("a call from worker %u: cannot read its %u-byte buffer: "
                     "%s; the call is dropped", c->src, h->ret_len,
                     rv_status_str(st));
            free(fetched);
            return;
        }
        buf = fetched;
        buf_len = h->ret_len;
    }

    /* The result is built in a scratch buffer and sent back after the
     * call, or written straight into the caller's when it is local. */
    uint8_t small[256];
    uint8_t *reply = NULL;
    size_t ret_cap = (h->flags & AM_RETURN) ? h->ret_len : 0;
    if (ret_cap > 0) {
        if (h->flags & AM_LOCAL)
            reply = (uint8_t *)(uintptr_t)h->ret;
        else
            reply = ret_cap <= sizeof(small) ? small : malloc(ret_cap);
        if (reply == NULL) {
            rv_error("out of memory for a %zu-byte call result", ret_cap);
            return;
        }
        memset(reply, 0, ret_cap);
    }
    rv_call_t call = {
        .src = (h->flags & AM_BCAST) ? h->root : c->src,
        .args = c->args,
        .args_len = c->args_len,
        .buf = buf,
        .buf_len = buf_len,
        .ret = reply,
        .ret_len = ret_cap,
        .broadcast = h->flags & AM_BCAST,
    };
    aw->stats.calls_received++;
    aw->stats.bytes_received += c->args_len + buf_len;
    rv_status_t st = ae->fn(aw->w, &call, ae->arg);
    free(fetched);
    if (st < 0)
        rv_warn("a call handler returned %s", rv_status_str(st));

    if (h->flags & AM_LOCAL) {
        if (h->flags & AM_NOTIFY)
            rv_sync_complete((rv_sync_t *)(uintptr_t)h->sync, RV_OK);
    } else if (h->flags & AM_NOTIFY_RMA) {
        notify_rma(aw, c->src);
    } else if (h->flags & AM_NOTIFY) {
        am_done_t d = {.sync = h->sync, .ret = h->ret,
                       .ret_len = (uint32_t)(call.ret_len < ret_cap
                                                 ? call.ret_len
                                                 : ret_cap)};
        struct iovec iov = {.iov_base = call.ret, .iov_len = d.ret_len};
        rv_status_t s2 = rv_sendx(aw->w, call.src, am_done_id, &d, sizeof(d),
                                  &iov, d.ret_len ? 1 : 0, NULL);
        if (s2 != RV_OK)
            rv_error("cannot report a call's completion to worker %u: %s",
                     call.src, rv_status_str(s2));
    }
    if (reply != NULL && reply != small && !(h->flags & AM_LOCAL))
        free(reply);
}

/* ---------------------------------------------------------------------- */
/* Runs of calls that came over send                                       */

/* Runs the calls of @p s's queued runs in order. A run whose last call
 * is still executing (an outer frame waits in it) does not hold up the
 * runs behind it: its calls have all started. */
static unsigned src_drain(am_worker_t *aw, am_src_t *s, rv_tid_t src)
{
    unsigned n = 0;
    for (am_run_t *r = s->head; r != NULL && !s->fetching;) {
        if (r->p >= r->end) {
            r = r->next;
            continue;
        }
        am_rec_t rec;
        am_call_t c;
        size_t left = (size_t)(r->end - r->p);
        memcpy(&rec, r->p, sizeof(rec));
        size_t size = am_rec_size(rec.len);
        if (left < sizeof(rec) || size > left ||
            (rec.meta & AM_REC_KIND_MASK) != AM_REC_CALL ||
            !am_call_decode(&c, src, &rec, r->p + sizeof(rec))) {
            aw->w->stats.rx_malformed++;
            rv_warn("dropped the rest of a malformed batch of calls from "
                    "worker %u", src);
            r->p = r->end;
            continue;
        }
        r->p += size;
        r->refs++;
        am_run_call(aw, &c);
        r->refs--;
        n++;
    }
    /* Runs are released in order, once done. */
    am_run_t *r;
    while ((r = s->head) != NULL && r->p >= r->end && r->refs == 0) {
        s->head = r->next;
        if (s->head == NULL) {
            s->tail = NULL;
            aw->srcs_busy--;
        }
        if (r->has_msg)
            rv_msg_release(aw->w, &r->msg);
        free(r);
    }
    return n;
}

static void src_enqueue(am_worker_t *aw, am_src_t *s, am_run_t *r)
{
    r->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = r;
    } else {
        s->head = r;
        aw->srcs_busy++;
    }
    s->tail = r;
}

/* A message's payload, kept: the message itself when the handler keeps
 * data, else a copy. */
static am_run_t *run_keep(rv_worker_t *w, rv_msg_t *msg, bool kept)
{
    am_run_t *r = calloc(1, sizeof(*r) + (kept ? 0 : msg->len));
    if (r == NULL)
        return NULL;
    if (kept) {
        r->has_msg = true;
        r->msg = *msg;
        r->p = msg->data;
    } else {
        memcpy(r + 1, msg->data, msg->len);
        r->p = (const uint8_t *)(r + 1);
    }
    r->end = r->p + msg->len;
    (void)w;
    return r;
}

static rv_status_t on_batch(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    (void)arg;
    if (aw == NULL)
        return RV_OK;
    am_src_t *s = am_src(aw, msg->src);
    am_run_t *r = s ? run_keep(w, msg, true) : NULL;
    if (r == NULL) {
        rv_error("out of memory keeping a batch of calls from worker %u",
                 msg->src);
        return RV_OK;
    }
    src_enqueue(aw, s, r);
    src_drain(aw, s, msg->src);
    return RV_INPROGRESS;
}

/* A call over send, the header in the message's header extension. */
static rv_status_t trampoline(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    am_entry_t *e = arg;
    am_call_t c = {.src = msg->src, .handler = e->id};

    if (msg->xhdr_len != sizeof(am_hdr_t)) {
        w->stats.rx_malformed++;
        rv_warn("dropped a call from worker %u with a %zu-byte call header",
                msg->src, msg->xhdr_len);
        return RV_OK;
    }
    memcpy(&c.hdr, msg->xhdr, sizeof(c.hdr));
    if (c.hdr.args_len > msg->len) {
        w->stats.rx_malformed++;
        rv_warn("dropped a call from worker %u announcing %u argument bytes "
                "in %zu", msg->src, c.hdr.args_len, msg->len);
        return RV_OK;
    }
    am_src_t *s = aw ? am_src(aw, msg->src) : NULL;
    if (s == NULL)
        return RV_OK;
    if ((c.hdr.flags & AM_DETOUR) || s->head != NULL || s->fetching) {
        /* Its turn has not come: a ring call that travelled over send
         * waits for its DETOUR record; others queue behind earlier runs.
         * Kept as a one-record run. */
        am_rec_t rec = {.handler = e->id, .len = (uint32_t)(sizeof(am_hdr_t) +
                                                            msg->len),
                        .meta = AM_REC_CALL | AM_REC_XHDR};
        size_t size = am_rec_size(rec.len);
        am_run_t *r = calloc(1, sizeof(*r) + size);
        if (r == NULL) {
            rv_error("out of memory keeping a call from worker %u",
                     msg->src);
            return RV_OK;
        }
        uint8_t *p = (uint8_t *)(r + 1);
        memcpy(p, &rec, sizeof(rec));
        memcpy(p + sizeof(rec), &c.hdr, sizeof(c.hdr));
        memcpy(p + sizeof(rec) + sizeof(c.hdr), msg->data, msg->len);
        r->p = p;
        r->end = p + size;
        if (c.hdr.flags & AM_DETOUR) {
            r->detour = true;
            r->token = c.hdr.token;
            r->next = s->detours;
            s->detours = r;
        } else {
            src_enqueue(aw, s, r);
            src_drain(aw, s, msg->src);
        }
        return RV_OK;
    }
    c.args = msg->data;
    c.args_len = c.hdr.args_len;
    c.buf_len = msg->len - c.args_len;
    c.buf = c.buf_len ? (const uint8_t *)msg->data + c.args_len : NULL;
    am_run_call(aw, &c);
    return RV_OK;
}

/* The ring reached a DETOUR record: run the matching call if it came. */
bool am_src_detour_match(am_worker_t *aw, am_src_t *s, rv_tid_t src,
                         uint64_t token)
{
    am_run_t **pp = &s->detours;
    for (am_run_t *r = *pp; r != NULL; pp = &r->next, r = *pp) {
        if (r->token != token)
            continue;
        *pp = r->next;
        am_rec_t rec;
        am_call_t c;
        memcpy(&rec, r->p, sizeof(rec));
        if (am_call_decode(&c, src, &rec, r->p + sizeof(rec))) {
            c.hdr.flags &= ~(uint32_t)AM_DETOUR;
            am_run_call(aw, &c);
        }
        free(r);
        return true;
    }
    return false;
}

static rv_status_t on_done(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_done_t d;
    (void)w;
    (void)arg;
    if (msg->xhdr_len != sizeof(d)) {
        w->stats.rx_malformed++;
        rv_warn("dropped a malformed call completion (%zu-byte header)",
                msg->xhdr_len);
        return RV_OK;
    }
    memcpy(&d, msg->xhdr, sizeof(d));
    if (d.ret != 0 && d.ret_len <= msg->len)
        memcpy((void *)(uintptr_t)d.ret, msg->data, d.ret_len);
    rv_sync_complete((rv_sync_t *)(uintptr_t)d.sync, RV_OK);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Local bypass                                                            */

static am_lqueue_t *lqueue(am_worker_t *aw, int dst_local, int src_local)
{
    return &aw->proc->queues[dst_local * aw->threads + src_local];
}

static unsigned local_poll(am_worker_t *aw)
{
    unsigned n = 0;
    int me = rv_worker_local(aw->w);
    for (int s = 0; s < aw->threads; s++) {
        am_lqueue_t *q = lqueue(aw, me, s);
        struct cds_wfcq_node *node;
        while ((node = __cds_wfcq_dequeue_nonblocking(&q->head, &q->tail)) !=
                   NULL &&
               node != CDS_WFCQ_WOULDBLOCK) {
            am_lnode_t *ln = caa_container_of(node, am_lnode_t, node);
            am_call_t c;
            am_rec_t rec;
            memcpy(&rec, ln->rec, sizeof(rec));
            if (am_call_decode(&c, ln->src, &rec, ln->rec + sizeof(rec)))
                am_run_call(aw, &c);
            free(ln);
            n++;
        }
    }
    return n;
}

/* ---------------------------------------------------------------------- */
/* Serializing and transmitting runs                                       */

/* The reserve in front of a run holds the run's record bytes. */
static size_t run_len(const am_buf_t *b, size_t off)
{
    uint32_t len;
    memcpy(&len, b->base + off, sizeof(len));
    return len;
}

static void run_set_len(am_buf_t *b, size_t off, size_t len)
{
    uint32_t l = (uint32_t)len;
    memcpy(b->base + off, &l, sizeof(l));
}

static bool path_write(const am_worker_t *aw)
{
    return aw->cfg->path == RV_AM_PATH_WRITE;
}

/* Transmits the run at @p off of @p b: RV_OK or RV_INPROGRESS when it
 * left, RV_ERR_AGAIN when the messenger cannot take it now. */
static rv_status_t run_transmit(am_worker_t *aw, am_dest_t *d, am_buf_t *b,
                                size_t off, bool immediate)
{
    size_t len = run_len(b, off);
    uint8_t *recs = b->base + off + sizeof(am_rec_t);
    rv_status_t st;
    if (path_write(aw)) {
        am_rec_t first;
        memcpy(&first, recs, sizeof(first));
        if (len == am_rec_size(first.len)) {
            st = am_ring_write(aw, d, b, recs, len);
        } else {
            am_rec_t batch = {.len = (uint32_t)len, .meta = AM_REC_BATCH};
            memcpy(b->base + off, &batch, sizeof(batch));
            st = am_ring_write(aw, d, b, b->base + off,
                               am_rec_size(len));
            if (st < 0)
                run_set_len(b, off, len); /* the reserve again */
        }
    } else {
        struct iovec iov = {.iov_base = recs, .iov_len = len};
        st = rv__send_raw(aw->w, d->tid, am_batch_id, NULL, 0, &iov, 1,
                          immediate ? RV_AM_SEND_IMMEDIATE : 0, am_buf_done,
                          b);
        if (st == RV_INPROGRESS)
            b->inflight++;
    }
    if (st == RV_OK || st == RV_INPROGRESS) {
        aw->stats.flushes++;
        if (len > aw->stats.max_aggregated_bytes)
            aw->stats.max_aggregated_bytes = len;
    }
    return st;
}

/* The number of call records in the run at @p off. */
static uint64_t run_calls(const am_buf_t *b, size_t off)
{
    uint64_t n = 0;
    const uint8_t *p = b->base + off + sizeof(am_rec_t);
    const uint8_t *end = p + run_len(b, off);
    while (p + sizeof(am_rec_t) <= end) {
        am_rec_t rec;
        memcpy(&rec, p, sizeof(rec));
        n += (rec.meta & AM_REC_KIND_MASK) == AM_REC_CALL;
        p += am_rec_size(rec.len);
    }
    return n;
}

/* Transmits @p d's pending runs in order, as far as the messenger takes
 * them; the open run too when @p open. Returns the runs transmitted, or
 * -1 on an error. */
static int dest_push(am_worker_t *aw, am_dest_t *d, bool immediate,
                     bool open)
{
    int n = 0;
    /* A transmission may progress (a ring request waits for its send);
     * the progress hook must not push the same runs meanwhile. */
    if (d->pushing)
        return 0;
    d->pushing = true;
    for (am_buf_t *b = d->bufs; b != NULL; b = b->next) {
        while (b->sent < b->used) {
            size_t off = b->sent;
            if (b->open == off && !open)
                goto out;
            size_t size = sizeof(am_rec_t) + run_len(b, off) + AM_REC_FOOTER;
            rv_status_t st = run_transmit(aw, d, b, off, immediate);
            if (st == RV_ERR_AGAIN)
                goto out;
            if (st < 0) {
                /* The transport refused the run for good: its calls are
                 * lost. Say so once, count them, and go on with the next
                 * runs rather than retrying this one for ever. */
                if (!d->warned_lost)
                    rv_error("calls to worker %u are lost: %s", d->tid,
                             rv_status_str(st));
                d->warned_lost = true;
                aw->stats.calls_lost += run_calls(b, off);
                if (b->open == off)
                    b->open = SIZE_MAX;
                b->sent += size;
                d->pending -= size;
                continue;
            }
            if (b->open == off)
                b->open = SIZE_MAX;
            b->sent += size;
            d->pending -= size;
            n++;
        }
    }
out:
    d->pushing = false;
    buf_reap(aw, d);
    return n;
}

/* Largest run a destination batches into one transmission. */
static size_t run_max(const am_worker_t *aw)
{
    size_t m = aw->buf_bytes - sizeof(am_rec_t) - AM_REC_FOOTER;
    if (path_write(aw) && aw->max_record - sizeof(am_rec_t) - AM_REC_FOOTER < m)
        m = aw->max_record - sizeof(am_rec_t) - AM_REC_FOOTER;
    return m;
}

/* Room for a record of @p size bytes: in the open run when @p join and it
 * fits, else in a new run. Returns where the record goes. */
static uint8_t *dest_reserve(am_worker_t *aw, am_dest_t *d, size_t size,
                             bool join)
{
    am_buf_t *b = d->last;
    if (join && b != NULL && b->open != SIZE_MAX) {
        size_t len = run_len(b, b->open);
        if (len + size <= aw->run_max && b->used + size <= b->cap) {
            uint8_t *at = b->base + b->used - AM_REC_FOOTER;
            run_set_len(b, b->open, len + size);
            b->used += size;
            d->pending += size;
            return at;
        }
    }
    size_t need = sizeof(am_rec_t) + size + AM_REC_FOOTER;
    if (b == NULL || b->used + need > b->cap) {
        am_buf_t *nb = am_buf_get(aw);
        if (nb == NULL)
            return NULL;
        if (b != NULL) {
            b->open = SIZE_MAX;
            b->next = nb;
        } else {
            d->bufs = nb;
        }
        d->last = b = nb;
    }
    b->open = b->used;
    run_set_len(b, b->open, size);
    b->used += need;
    d->pending += need;
    return b->base + b->open + sizeof(am_rec_t);
}

/* Takes back the record just reserved by dest_reserve. */
static void dest_unreserve(am_dest_t *d, size_t size)
{
    am_buf_t *b = d->last;
    size_t len = run_len(b, b->open);
    if (len == size) {
        size_t need = sizeof(am_rec_t) + size + AM_REC_FOOTER;
        b->used -= need;
        d->pending -= need;
        b->open = SIZE_MAX;
    } else {
        run_set_len(b, b->open, len - size);
        b->used -= size;
        d->pending -= size;
    }
}

/* Serializes a call record at @p at. */
static void rec_write(uint8_t *at, rv_handler_id_t h, const am_hdr_t *hdr,
                      const void *args, size_t len, const void *buf, size_t n)
{
    size_t body = (hdr ? sizeof(*hdr) : 0) + len + n;
    am_rec_t rec = {.handler = h, .len = (uint32_t)body,
                    .meta = AM_REC_CALL | (hdr ? AM_REC_XHDR : 0)};
    memcpy(at, &rec, sizeof(rec));
    uint8_t *p = at + sizeof(rec);
    if (hdr != NULL) {
        memcpy(p, hdr, sizeof(*hdr));
        p += sizeof(*hdr);
    }
    if (len)
        memcpy(p, args, len);
    if (n)
        memcpy(p + len, buf, n);
    /* Deterministic padding (the ring's footer hashes it). */
    size_t pad = AM_ALIGN8(body) - body;
    if (pad)
        memset(p + len + n, 0, pad);
}

/* ---------------------------------------------------------------------- */
/* Caller side                                                             */

typedef struct {
    rv_tid_t dest;
    rv_handler_id_t h;
    const void *args, *buf;
    size_t len, n;
    void *ret;
    size_t ret_len;
    rv_sync_t *sync;      /* the caller's, or NULL */
    unsigned flags;
    uint32_t am_flags;
    long notifications;
    uint64_t xaddr;       /* AM_BUFPUT/AM_BUFGET: the buffer's address, */
    uint32_t xlen;        /* length */
    uint32_t xregion;     /* and (get) region */
} call_desc_t;

/* The call header of @p cd (notification flags are the caller's). */
static am_hdr_t hdr_of(const am_worker_t *aw, const call_desc_t *cd)
{
    am_hdr_t hdr = {.args_len = (uint32_t)cd->len, .flags = cd->am_flags,
                    .ret = (uintptr_t)cd->ret,
                    .ret_len = (uint32_t)cd->ret_len, .root = aw->me};
    if (cd->am_flags & AM_LONGCOPY) {
        hdr.ret = cd->xaddr;
        hdr.ret_len = 0;
    }
    if (cd->am_flags & (AM_BUFPUT | AM_BUFGET)) {
        hdr.ret = cd->xaddr;
        hdr.ret_len = cd->xlen;
        if (cd->am_flags & (AM_BUFGET | AM_LONG))
            hdr.root = cd->xregion; /* region, or AM Long sequence */
    }
    return hdr;
}

static rv_status_t wait_local(rv_worker_t *w, rv_sync_t *local,
                              rv_sync_t *sync)
{
    return sync == NULL ? rv_sync_wait(w, local) : RV_OK;
}

/* Through the process's own queue: nothing is copied twice, nothing
 * crosses the transport. */
static rv_status_t call_local(am_worker_t *aw, const call_desc_t *cd,
                              rv_sync_t *s)
{
    bool notify = (cd->flags & RV_NOTIFY_CONSUMED) || cd->ret != NULL;
    am_hdr_t hdr = hdr_of(aw, cd);
    hdr.flags |= AM_LOCAL | (notify ? AM_NOTIFY : 0) |
                 (cd->ret ? AM_RETURN : 0);
    hdr.sync = (uintptr_t)s;
    size_t body = sizeof(hdr) + cd->len + cd->n;
    am_lnode_t *ln = malloc(sizeof(*ln) + sizeof(am_rec_t) + AM_ALIGN8(body));
    if (ln == NULL)
        return RV_ERR_NO_MEMORY;
    rec_write(ln->rec, cd->h, &hdr, cd->args, cd->len, cd->buf,
              cd->n);
    ln->src = aw->me;
    cds_wfcq_node_init(&ln->node);
    if (notify)
        atomic_fetch_add(&s->pending, 1);
    am_lqueue_t *q = lqueue(aw, (int)(cd->dest % (rv_tid_t)aw->threads),
                            rv_worker_local(aw->w));
    cds_wfcq_enqueue(&q->head, &q->tail, &ln->node);
    aw->stats.calls_local++;
    return RV_OK;
}

/* The send path without aggregation: one AM, zero-copy. */
static rv_status_t call_am(am_worker_t *aw, const call_desc_t *cd,
                           rv_sync_t *s, bool notify)
{
    am_hdr_t hdr = hdr_of(aw, cd);
    if (notify) {
        hdr.flags |= AM_NOTIFY | (cd->ret != NULL ? AM_RETURN : 0);
        hdr.sync = (uintptr_t)s;
        atomic_fetch_add(&s->pending, cd->notifications);
    }
    struct iovec iov[2] = {{.iov_base = (void *)cd->args, .iov_len = cd->len},
                           {.iov_base = (void *)cd->buf, .iov_len = cd->n}};
    /* Without a notification the send's own completion is the call's. */
    rv_status_t st = rv_sendx(aw->w, cd->dest, cd->h, &hdr, sizeof(hdr), iov,
                              cd->n ? 2 : 1, notify ? NULL : s);
    if (st != RV_OK && notify)
        atomic_fetch_sub(&s->pending, cd->notifications);
    return st;
}

/* Applies am.on_full to a call that found its destination's queue over
 * the limit. @p reserved: the call's record is already queued. */
static rv_status_t on_full(am_worker_t *aw, am_dest_t *d, size_t size,
                           size_t limit, bool reserved)
{
    /* A messenger being set up is not full: wait for it. */
    while (d->ring.state == RING_REQUESTED && !aw->w->in_callback)
        rv_progress(aw->w);
    if (dest_push(aw, d, false, true) < 0)
        return RV_ERR_TRANSPORT;
    if (d->pending + (reserved ? 0 : size) <= limit)
        return reserved ? RV_OK : RV_INPROGRESS;
    aw->stats.ring_full++;
    switch (aw->cfg->on_full) {
    case RV_ON_FULL_RETRY_ASYNC:
        if (!reserved)
            return RV_INPROGRESS; /* queue it */
        return RV_OK;
    case RV_ON_FULL_RETRY:
        if (aw->w->in_callback)
            break;
        while (d->pending + (reserved ? 0 : size) > limit) {
            if (dest_push(aw, d, false, true) < 0)
                return RV_ERR_TRANSPORT;
            if (d->pending + (reserved ? 0 : size) > limit)
                rv_progress(aw->w);
        }
        return reserved ? RV_OK : RV_INPROGRESS;
    case RV_ON_FULL_FAIL:
        break;
    }
    if (reserved)
        dest_unreserve(d, size);
    if (aw->cfg->aggregation == RV_AGG_OVFL && !d->warned_limit) {
        d->warned_limit = true;
        rv_error("calls to worker %u: its ring is full and %zu bytes of "
                 "calls already wait (am.ovfl_limit %" PRIu64 "); the call "
                 "is refused with RV_ERR_AGAIN (am.on_full: fail); every "
                 "call accepted before is kept", d->tid, d->pending,
                 aw->cfg->ovfl_limit);
    }
    return RV_ERR_AGAIN;
}

/* The record paths: aggregation and/or the write path. */
/* The common case of trad aggregation, kept short: a plain call appended
 * to the open run of its destination, which has room. */
static bool trad_append(am_worker_t *aw, am_dest_t *d, const call_desc_t *cd)
{
    am_buf_t *b = d->last;
    size_t size = am_rec_size(cd->len);
    if (b == NULL || b->open == SIZE_MAX || b->used + size > b->cap)
        return false;
    size_t len = run_len(b, b->open) + size;
    if (len > aw->run_max || d->pending + size > aw->trad_limit)
        return false;
    uint8_t *at = b->base + b->used - AM_REC_FOOTER;
    rec_write(at, cd->h, NULL, cd->args, cd->len, NULL, 0);
    run_set_len(b, b->open, len);
    b->used += size;
    d->pending += size;
    if (len >= aw->cfg->flush_bytes)
        dest_push(aw, d, false, true);
    else
        aw->idle_flush = true;
    return true;
}

static rv_status_t call_record(am_worker_t *aw, const call_desc_t *cd,
                               rv_sync_t *s, bool notify)
{
    am_dest_t *d = aw->dests[cd->dest];
    if (d == NULL && (d = am_dest(aw, cd->dest)) == NULL)
        return RV_ERR_NO_MEMORY;
    if (aw->cfg->aggregation == RV_AGG_TRAD && !notify && cd->n == 0 &&
        cd->am_flags == 0 && trad_append(aw, d, cd))
        return RV_OK;
    rv_aggregation_t agg = aw->cfg->aggregation;
    bool write = path_write(aw);
    am_hdr_t hdr = hdr_of(aw, cd);
    bool need_hdr = cd->n > 0 || notify || cd->am_flags != 0;
    bool rma_note = false;
    if (notify) {
        hdr.sync = (uintptr_t)s;
        if (write && cd->ret == NULL) {
            hdr.flags |= AM_NOTIFY_RMA;
            rma_note = true;
        } else {
            hdr.flags |= AM_NOTIFY | (cd->ret != NULL ? AM_RETURN : 0);
        }
    }
    size_t body = (need_hdr ? sizeof(hdr) : 0) + cd->len + cd->n;
    size_t size = am_rec_size(body);

    if (size > aw->run_max) {
        /* Too large for a batch or a ring chunk: what is queued goes
         * first, then the call over send. On the write path a DETOUR
         * record keeps its place in the ring's order. */
        if (dest_push(aw, d, false, true) < 0)
            return RV_ERR_TRANSPORT;
        if (write) {
            uint8_t *at = dest_reserve(aw, d, am_rec_size(8), false);
            if (at == NULL)
                return RV_ERR_NO_MEMORY;
            uint64_t token = ++d->ring.detours;
            am_rec_t rec = {.len = 8, .meta = AM_REC_DETOUR};
            memcpy(at, &rec, sizeof(rec));
            memcpy(at + sizeof(rec), &token, sizeof(token));
            d->last->open = SIZE_MAX; /* a run of its own */
            if (dest_push(aw, d, false, true) < 0)
                return RV_ERR_TRANSPORT;
            hdr.flags |= AM_DETOUR;
            hdr.token = token;
            aw->stats.detours++;
        }
        if (rma_note)
            am_ring_note(aw, d, s);
        else if (notify)
            atomic_fetch_add(&s->pending, 1);
        struct iovec iov[2] = {{.iov_base = (void *)cd->args,
                                .iov_len = cd->len},
                               {.iov_base = (void *)cd->buf,
                                .iov_len = cd->n}};
        rv_status_t st = rv_sendx(aw->w, cd->dest, cd->h, &hdr, sizeof(hdr),
                                  iov, cd->n ? 2 : 1, notify ? NULL : s);
        return st;
    }

    /* Over the limit before this call? */
    size_t limit;
    switch (agg) {
    case RV_AGG_NONE: limit = 0; break;
    case RV_AGG_OVFL: limit = aw->cfg->ovfl_limit; break;
    default: limit = aw->trad_limit; break;
    }
    if (d->pending > 0 &&
        dest_push(aw, d, agg == RV_AGG_OVFL, agg != RV_AGG_TRAD) < 0)
        return RV_ERR_TRANSPORT;
    bool queued = false;
    if (d->pending + size > limit && agg != RV_AGG_NONE) {
        rv_status_t st = on_full(aw, d, size, limit, false);
        if (st == RV_INPROGRESS)
            queued = true;
        else if (st != RV_OK)
            return st;
    }

    uint8_t *at = dest_reserve(aw, d, size, agg != RV_AGG_NONE);
    if (at == NULL)
        return RV_ERR_NO_MEMORY;
    rec_write(at, cd->h, need_hdr ? &hdr : NULL, cd->args, cd->len, cd->buf,
              cd->n);

    if (agg == RV_AGG_TRAD) {
        if (run_len(d->last, d->last->open) >= aw->cfg->flush_bytes) {
            if (dest_push(aw, d, false, true) < 0)
                return RV_ERR_TRANSPORT;
        } else {
            aw->idle_flush = true;
        }
    } else if (!queued) {
        /* none and ovfl: go now if the messenger takes it */
        bool was_alone = d->pending == sizeof(am_rec_t) + size +
                                           AM_REC_FOOTER;
        if ((agg == RV_AGG_NONE || was_alone) &&
            dest_push(aw, d, agg == RV_AGG_OVFL, true) < 0)
            return RV_ERR_TRANSPORT;
        if (d->pending > limit || (agg == RV_AGG_NONE && d->pending > 0)) {
            rv_status_t st = on_full(aw, d, size, limit, true);
            if (st != RV_OK)
                return st;
        }
    }
    if (rma_note)
        am_ring_note(aw, d, s);
    else if (notify)
        atomic_fetch_add(&s->pending, 1);
    return RV_OK;
}

static rv_status_t call_out(rv_worker_t *w, const call_desc_t *cd)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL) {
        rv_error("calls are made from the worker threads of rv_job_run, "
                 "after rv_am_register");
        return RV_ERR_INVALID;
    }
    if (cd->dest >= aw->nworkers) {
        rv_error("call to worker %u: the job has %u workers", cd->dest,
                 aw->nworkers);
        return RV_ERR_INVALID;
    }
    if (cd->len > UINT32_MAX / 2 || cd->n > UINT32_MAX / 2 ||
        cd->ret_len > UINT32_MAX)
        return RV_ERR_INVALID;

    rv_sync_t local;
    rv_sync_t *s = cd->sync;
    bool notify = (cd->flags & RV_NOTIFY_CONSUMED) || cd->ret != NULL;
    if (s == NULL) {
        rv_sync_init(&local, 0);
        s = &local;
    }
    rv_status_t st;
    bool bcast = cd->am_flags & AM_BCAST;
    if (!bcast && aw->cfg->local_bypass &&
        cd->dest / (rv_tid_t)aw->threads == (rv_tid_t)aw->rank)
        st = call_local(aw, cd, s);
    else if (bcast || (aw->cfg->path == RV_AM_PATH_SEND &&
                       aw->cfg->aggregation == RV_AGG_NONE))
        st = call_am(aw, cd, s, notify);
    else
        st = call_record(aw, cd, s, notify);
    if (st != RV_OK)
        return st;
    aw->stats.calls_sent++;
    aw->stats.bytes_sent += cd->len + cd->n;
    return wait_local(w, &local, cd->sync);
}

rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *args, size_t len, rv_sync_t *sync,
                    unsigned flags)
{
    call_desc_t cd = {.dest = dest, .h = h, .args = args, .len = len,
                      .sync = sync, .flags = flags, .notifications = 1};
    return call_out(w, &cd);
}

rv_status_t rv_call_buffer(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *buf,
                           size_t n, rv_sync_t *sync, unsigned flags)
{
    call_desc_t cd = {.dest = dest, .h = h, .args = args, .len = len,
                      .buf = buf, .n = n, .sync = sync, .flags = flags,
                      .notifications = 1};
    return call_out(w, &cd);
}

rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, void *ret,
                           size_t ret_len, rv_sync_t *sync, unsigned flags)
{
    if (ret == NULL)
        return RV_ERR_INVALID;
    call_desc_t cd = {.dest = dest, .h = h, .args = args, .len = len,
                      .ret = ret, .ret_len = ret_len, .sync = sync,
                      .flags = flags, .notifications = 1};
    return call_out(w, &cd);
}

rv_status_t am_call_ref(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                        const void *args, size_t len, uint64_t addr,
                        size_t n, uint32_t region, uint32_t am_flags,
                        rv_sync_t *sync, unsigned flags)
{
    call_desc_t cd = {.dest = dest, .h = h, .args = args, .len = len,
                      .sync = sync, .flags = flags, .am_flags = am_flags,
                      .notifications = 1, .xaddr = addr,
                      .xlen = (uint32_t)n, .xregion = region};
    return call_out(w, &cd);
}

rv_status_t am_call_copy(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                         const void *args, size_t len, const void *buf,
                         size_t n, uint64_t addr, rv_sync_t *sync,
                         unsigned flags)
{
    call_desc_t cd = {.dest = dest, .h = h, .args = args, .len = len,
                      .buf = buf, .n = n, .sync = sync, .flags = flags,
                      .am_flags = AM_LONGCOPY, .notifications = 1,
                      .xaddr = addr};
    return call_out(w, &cd);
}

rv_status_t rv_call_buffer_get(rv_worker_t *w, rv_tid_t dest,
                               rv_handler_id_t h, const void *args,
                               size_t len, rv_rptr_t src, size_t n,
                               rv_sync_t *sync, unsigned flags)
{
    if ((int)src.rank != rv_rank(rv_worker_context(w)) || n > UINT32_MAX) {
        rv_error("rv_call_buffer_get: the buffer must be registered memory "
                 "of the calling process (rv_mem_alloc)");
        return RV_ERR_INVALID;
    }
    /* The source is reusable once the target has read it: only the
     * target knows, so the call always reports back. */
    return am_call_ref(w, dest, h, args, len, src.addr, n, src.region,
                       AM_BUFGET, sync, flags | RV_NOTIFY_CONSUMED);
}

rv_status_t rv_broadcast_buffer(rv_worker_t *w, rv_handler_id_t h,
                                const void *args, size_t len,
                                const void *buf, size_t n, rv_sync_t *sync,
                                unsigned flags)
{
    /* The root sends to itself: its own delivery forwards to its children
     * and runs the handler, like every other worker's. */
    call_desc_t cd = {.dest = rv_worker_tid(w), .h = h, .args = args,
                      .len = len, .buf = buf, .n = n, .sync = sync,
                      .flags = flags, .am_flags = AM_BCAST,
                      .notifications =
                          (long)rv_nworkers(rv_worker_context(w))};
    return call_out(w, &cd);
}

rv_status_t rv_broadcast(rv_worker_t *w, rv_handler_id_t h, const void *args,
                         size_t len, rv_sync_t *sync, unsigned flags)
{
    return rv_broadcast_buffer(w, h, args, len, NULL, 0, sync, flags);
}

/* Sends every open run of @p d and waits until nothing is pending. */
static rv_status_t dest_flush(am_worker_t *aw, am_dest_t *d, bool wait)
{
    for (;;) {
        if (dest_push(aw, d, false, true) < 0)
            return RV_ERR_TRANSPORT;
        if (d->pending == 0 || !wait)
            return RV_OK;
        if (aw->w->in_callback)
            return RV_ERR_AGAIN;
        rv_progress(aw->w);
    }
}

rv_status_t rv_flush(rv_worker_t *w, rv_tid_t dest)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL)
        return RV_OK;
    if (dest != RV_ALL_WORKERS && dest >= aw->nworkers)
        return RV_ERR_INVALID;
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        if ((dest != RV_ALL_WORKERS && t != dest) || aw->dests[t] == NULL)
            continue;
        rv_status_t st = dest_flush(aw, aw->dests[t], true);
        if (st != RV_OK)
            return st;
    }
    if (!aw->rma_dirty)
        return RV_OK;
    /* One-sided operations (rma/): completed at their targets. */
    rv_sync_t s;
    rv_sync_init(&s, 1);
    rv_status_t st = aw->ctx->ops->flush(w->tw, dest == RV_ALL_WORKERS
                                                    ? UINT32_MAX
                                                    : dest,
                                         am_sync_done, &s);
    if (st == RV_INPROGRESS)
        st = rv_sync_wait(w, &s);
    if (st == RV_OK && dest == RV_ALL_WORKERS)
        aw->rma_dirty = false;
    return st;
}

/* ---------------------------------------------------------------------- */
/* The layer's hooks                                                       */

static unsigned am_progress(rv_worker_t *w)
{
    am_worker_t *aw = am_of(w);
    unsigned n = local_poll(aw) + am_service_poll(aw);
    n += am_ring_progress(aw);
    for (rv_tid_t t = 0; aw->srcs_busy > 0 && t < aw->nworkers; t++) {
        am_src_t *s = aw->srcs[t];
        if (s != NULL && s->head != NULL)
            n += src_drain(aw, s, t);
    }
    /* Queued runs go when the messenger takes them; trad batches once
     * full, or when the worker has nothing else to do. */
    bool trad = aw->cfg->aggregation == RV_AGG_TRAD;
    bool flush_trad = trad && aw->idle_flush && n == 0 && w->idle_polls > 0;
    if (flush_trad)
        aw->idle_flush = false;
    for (uint32_t i = 0; i < aw->nused; i++) {
        am_dest_t *d = aw->used[i];
        if (d->bufs == NULL)
            continue;
        if (flush_trad)
            d->last->open = SIZE_MAX; /* closed: goes as soon as it can */
        if (d->pending > 0) {
            int k = dest_push(aw, d, false, !trad || flush_trad);
            if (k > 0)
                n += (unsigned)k;
        } else {
            buf_reap(aw, d);
        }
    }
    return n;
}

static rv_status_t am_worker_start(rv_worker_t *w)
{
    rv_context_t *ctx = w->ctx;
    am_worker_t *aw = calloc(1, sizeof(*aw));
    if (aw == NULL)
        return RV_ERR_NO_MEMORY;
    aw->w = w;
    aw->ctx = ctx;
    aw->cfg = am_config(ctx);
    aw->proc = ctx->layer_state;
    aw->me = w->tid;
    aw->nworkers = rv_nworkers(ctx);
    aw->rank = rv_rank(ctx);
    aw->mapped = rv_context_caps(ctx)->mem_alloc_mapped;
    aw->threads = rv_threads(ctx);
    aw->dests = calloc(aw->nworkers, sizeof(*aw->dests));
    aw->srcs = calloc(aw->nworkers, sizeof(*aw->srcs));
    aw->used = calloc(aw->nworkers, sizeof(*aw->used));
    aw->rings = calloc(aw->nworkers, sizeof(*aw->rings));
    if (aw->dests == NULL || aw->srcs == NULL || aw->rings == NULL ||
        aw->used == NULL)
        goto err;

    const rv_config_t *cfg = rv_context_config(ctx);
    const rv_am_config_t *acfg = aw->cfg;
    size_t ring_chunk = (acfg->chunk_bytes + 4095) & ~(size_t)4095;
    rv_mem_chunk_params_t p;
    rv_mem_chunk_params_init(&p, cfg, ctx->ops, ctx->tp, w->numa_node);
    p.chunk_size = ring_chunk;
    if (ring_chunk % (2u << 20) != 0 && p.huge_pages == RV_HUGE_AUTO)
        p.huge_pages = RV_HUGE_OFF;
    if (rv_mem_chunk_allocator_create(&p, &aw->ring_chunks) != RV_OK)
        goto err;
    rv_mem_chunk_params_init(&p, cfg, ctx->ops, ctx->tp, w->numa_node);
    if (rv_mem_chunk_allocator_create(&p, &aw->own_chunks) != RV_OK ||
        rv_mem_general_create(aw->own_chunks, &aw->gen) != RV_OK)
        goto err;
    /* A batch buffer takes several flushes' worth of calls. */
    aw->buf_bytes = 4 * acfg->flush_bytes;
    if (aw->buf_bytes < 256u << 10)
        aw->buf_bytes = 256u << 10;
    if (aw->buf_bytes > rv_core_config(cfg)->memory.chunk)
        aw->buf_bytes = rv_core_config(cfg)->memory.chunk;
    if (am_service_start(aw) != RV_OK) {
        am_service_stop(aw);
        goto err;
    }
    aw->max_record = ring_chunk - am_rec_size(8); /* room to rotate */
    aw->run_max = run_max(aw);
    /* trad: what may wait for a full ring before am.on_full applies */
    aw->trad_limit = acfg->ovfl_limit > 2 * acfg->flush_bytes
                         ? acfg->ovfl_limit
                         : 2 * acfg->flush_bytes;
    pthread_mutex_lock(&aw->proc->lock);
    aw->proc->workers[w->local] = aw;
    pthread_mutex_unlock(&aw->proc->lock);
    w->layer = aw;
    return RV_OK;
err:
    rv_error("worker %u: cannot set up the invocation layer's registered "
             "memory", w->tid);
    if (aw->gen)
        rv_mem_general_destroy(aw->gen);
    if (aw->own_chunks)
        rv_mem_chunk_allocator_destroy(aw->own_chunks);
    if (aw->ring_chunks)
        rv_mem_chunk_allocator_destroy(aw->ring_chunks);
    free(aw->dests);
    free(aw->used);
    free(aw->srcs);
    free(aw->rings);
    free(aw);
    return RV_ERR_NO_MEMORY;
}

/* Transmissions whose completion callbacks point into this layer's
 * memory (batch buffers, ring pushes). */
static bool am_busy(am_worker_t *aw)
{
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->dests[t];
        for (am_buf_t *b = d ? d->bufs : NULL; b != NULL; b = b->next)
            if (b->inflight > 0)
                return true;
    }
    return am_ring_busy(aw) ||
           atomic_load(&aw->service_pending) > 0;
}

static void am_worker_quiesce(rv_worker_t *w)
{
    rv_status_t st = rv_flush(w, RV_ALL_WORKERS);
    if (st != RV_OK)
        rv_error("worker %u: calls still queued at the end of the job: %s",
                 w->tid, rv_status_str(st));
    /* Wait for the transmissions out of registered memory. */
    while (am_busy(am_of(w)))
        rv_progress(w);
}

static void am_worker_drain(rv_worker_t *w)
{
    /* Everything sent has landed (every worker flushed): run it, and let
     * the last pushes complete before the endpoints close. */
    am_worker_t *aw = am_of(w);
    for (int quiet = 0; quiet < 64;) {
        unsigned n = rv_progress(w);
        quiet = n != 0 || am_busy(aw) ? 0 : quiet + 1;
    }
}

static void print_stats(am_worker_t *aw)
{
    if (aw->stats.calls_lost > 0)
        rv_error("worker %u: %" PRIu64 " accepted calls were lost (see the "
                 "transport errors above)", aw->me, aw->stats.calls_lost);
    rv_stats_mode_t mode =
        rv_core_config(rv_context_config(aw->ctx))->job.stats;
    if (mode == RV_STATS_OFF)
        return;
    const rv_am_stats_t *s = &aw->stats;
    if (mode == RV_STATS_JSON)
        fprintf(stderr,
                "{\"rank\":%d,\"worker\":%u,\"calls_sent\":%" PRIu64
                ",\"calls_received\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
                ",\"bytes_received\":%" PRIu64 ",\"calls_local\":%" PRIu64
                ",\"flushes\":%" PRIu64 ",\"ring_full\":%" PRIu64
                ",\"chunk_growths\":%" PRIu64 ",\"chunks_granted\":%" PRIu64
                ",\"max_aggregated_bytes\":%" PRIu64 ",\"detours\":%" PRIu64
                ",\"calls_lost\":%" PRIu64
                ",\"broadcasts_forwarded\":%" PRIu64 "}\n",
                aw->rank, aw->me, s->calls_sent, s->calls_received,
                s->bytes_sent, s->bytes_received, s->calls_local, s->flushes,
                s->ring_full, s->chunk_growths, s->chunks_granted,
                s->max_aggregated_bytes, s->detours, s->calls_lost,
                s->broadcasts_forwarded);
    else
        fprintf(stderr,
                "[rivet r%d] worker %u: calls sent %" PRIu64 " (%" PRIu64
                " B, %" PRIu64 " local), received %" PRIu64 " (%" PRIu64
                " B); transmissions %" PRIu64 ", largest batch %" PRIu64
                " B; ring full %" PRIu64 ", ring growths %" PRIu64
                ", chunks granted %" PRIu64 ", detours %" PRIu64 "\n",
                aw->rank, aw->me, s->calls_sent, s->bytes_sent,
                s->calls_local, s->calls_received, s->bytes_received,
                s->flushes, s->max_aggregated_bytes, s->ring_full,
                s->chunk_growths, s->chunks_granted, s->detours);
}

static void am_worker_stop(rv_worker_t *w)
{
    am_worker_t *aw = am_of(w);
    print_stats(aw);
    pthread_mutex_lock(&aw->proc->lock);
    aw->proc->workers[w->local] = NULL;
    pthread_mutex_unlock(&aw->proc->lock);
    am_service_stop(aw);
    am_ring_fini(aw);
    am_mem_fini(aw);
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->dests[t];
        if (d != NULL) {
            for (am_buf_t *b = d->bufs, *nb; b != NULL; b = nb) {
                nb = b->next;
                am_buf_put(aw, b);
            }
            free(d);
        }
        am_src_t *s = aw->srcs[t];
        if (s != NULL) {
            for (am_run_t *r = s->head, *nr; r != NULL; r = nr) {
                nr = r->next;
                if (r->has_msg)
                    rv_msg_release(w, &r->msg);
                free(r);
            }
            for (am_run_t *r = s->detours, *nr; r != NULL; r = nr) {
                nr = r->next;
                free(r);
            }
            free(s);
        }
    }
    for (am_buf_t *b = aw->free_bufs, *nb; b != NULL; b = nb) {
        nb = b->next;
        free(b);
    }
    rv_mem_general_destroy(aw->gen);
    rv_mem_chunk_allocator_destroy(aw->own_chunks);
    rv_mem_chunk_allocator_destroy(aw->ring_chunks);
    free(aw->dests);
    free(aw->used);
    free(aw->srcs);
    free(aw->rings);
    free(aw);
    w->layer = NULL;
}

static void am_context_fini(rv_context_t *ctx)
{
    am_proc_t *proc = ctx->layer_state;
    if (proc == NULL)
        return;
    /* Calls still queued locally at the end are dropped with the job. */
    for (int i = 0; i < proc->threads * proc->threads; i++) {
        struct cds_wfcq_node *node;
        am_lqueue_t *q = &proc->queues[i];
        while ((node = __cds_wfcq_dequeue_nonblocking(&q->head, &q->tail)) !=
                   NULL &&
               node != CDS_WFCQ_WOULDBLOCK)
            free(caa_container_of(node, am_lnode_t, node));
    }
    am_proc_mem_fini(proc);
    am_service_fini(proc);
    pthread_mutex_destroy(&proc->lock);
    free(proc->queues);
    free(proc->workers);
    free(proc);
    ctx->layer_state = NULL;
}

static const rv_layer_ops_t am_layer = {
    .worker_start = am_worker_start,
    .progress = am_progress,
    .worker_quiesce = am_worker_quiesce,
    .worker_drain = am_worker_drain,
    .worker_stop = am_worker_stop,
    .context_fini = am_context_fini,
};

/* Installs the layer and its own handlers on the first registration. */
static rv_status_t am_install(rv_context_t *ctx)
{
    if (ctx->layer == &am_layer)
        return RV_OK;
    am_proc_t *proc = calloc(1, sizeof(*proc));
    if (proc == NULL)
        return RV_ERR_NO_MEMORY;
    proc->threads = rv_threads(ctx);
    proc->queues = calloc((size_t)proc->threads * (size_t)proc->threads,
                          sizeof(*proc->queues));
    proc->workers = calloc((size_t)proc->threads, sizeof(*proc->workers));
    if (proc->queues == NULL || proc->workers == NULL) {
        free(proc->workers);
        free(proc->queues);
        free(proc);
        return RV_ERR_NO_MEMORY;
    }
    for (int i = 0; i < proc->threads * proc->threads; i++)
        __cds_wfcq_init(&proc->queues[i].head, &proc->queues[i].tail);
    pthread_mutex_init(&proc->lock, NULL);
    am_service_init(proc);

    struct {
        const char *name;
        rv_handler_fn fn;
        unsigned flags;
        rv_handler_id_t *id;
    } own[] = {
        {"rivet.am.done", on_done, RV_HANDLER_INLINE, &am_done_id},
        {"rivet.am.batch", on_batch, RV_HANDLER_KEEP_DATA, &am_batch_id},
    };
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        rv_status_t st = rv_handler_register(ctx, own[i].name, own[i].fn,
                                             NULL, own[i].flags, own[i].id);
        if (st != RV_OK) {
            free(proc->queues);
            free(proc->workers);
            free(proc);
            return st;
        }
    }
    rv_status_t st = am_ring_register(ctx);
    if (st == RV_OK)
        st = am_mem_register(ctx);
    if (st != RV_OK) {
        free(proc->queues);
        free(proc->workers);
        free(proc);
        return st;
    }
    rv__layer_install(ctx, &am_layer, proc);
    return RV_OK;
}

rv_status_t rv_am_register(rv_context_t *ctx, const char *name,
                           rv_call_fn fn, void *arg, rv_handler_id_t *id_p)
{
    if (fn == NULL || ctx == NULL)
        return RV_ERR_INVALID;
    rv_status_t st = am_install(ctx);
    if (st != RV_OK)
        return st;
    am_entry_t *e = malloc(sizeof(*e));
    if (e == NULL)
        return RV_ERR_NO_MEMORY;
    *e = (am_entry_t){.fn = fn, .arg = arg};
    st = rv_handler_register(ctx, name, trampoline, e, RV_HANDLER_OWNS_ARG,
                             &e->id);
    if (st != RV_OK) {
        free(e);
        return st;
    }
    if (id_p != NULL)
        *id_p = e->id;
    return RV_OK;
}
