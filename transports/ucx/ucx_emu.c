/*
 * RMA emulated over active messages, for endpoints where UCX's own RMA
 * would run over TCP.
 *
 * UCX 1.13 carries put/get over its tcp transport by a protocol that costs
 * about a millisecond per get on these machines, while its active messages
 * over the same socket take microseconds and move gigabytes per second. So,
 * per endpoint (transport.ucx.rma_emulation: auto), rivet sends each
 * one-sided operation as an AM of its own (id RV_UCX_AM_RMA) that the
 * target worker's progress executes:
 *
 *   put        header + payload; the target copies eager data into place,
 *              and receives rendezvous data straight into the target
 *              address (ucp_am_recv_data_nbx), so large puts are zero-copy.
 *              Local completion is the send's completion.
 *   get        request -> the target replies with the data, sent from the
 *              target address itself (zero-copy for rendezvous), which the
 *              initiator receives straight into the destination.
 *   atomics    request -> the target applies a CPU atomic (__atomic, so it
 *              is atomic with respect to its own threads and to other
 *              emulated or shared-memory atomics) and replies with the old
 *              value.
 *   flush      request -> the target replies once every put it received
 *              from this initiator before the request has landed (AMs of
 *              one endpoint arrive in order; rendezvous puts still landing
 *              are counted per initiator and the reply waits for them).
 *   fence      the next operation to the peer carries a FENCED flag; the
 *              target holds it, and everything behind it from the same
 *              initiator, until every earlier rendezvous put from that
 *              initiator has landed (a later eager put would otherwise
 *              land before an earlier rendezvous one). No round trip:
 *              the initiator goes on at once, as on an ordered network.
 *
 * The target validates every access against the regions its process
 * registered (the remote key carries the region id, base and length), so
 * a bad remote pointer is an error reported to both sides, not a stray
 * write. As with UCX's tcp RMA, the target worker must progress.
 *
 * Nothing read from the wire is used unchecked. A request carries the
 * index and generation of a slot of the initiator's table of pending
 * operations (ucx_emu_slot_t), never a pointer, and its reply finds the
 * operation through them: a reply naming a free slot, a slot taken again
 * since (another generation), a slot of another kind of operation or of
 * another target, is stale, duplicated or forged, and is dropped. The
 * target drops a put outside its registered memory and refuses a get or an
 * atomic there (with an error reply, so that the initiator's operation
 * ends); a message with a bad header, kind or worker id is dropped. Each
 * drop is counted by why (the worker's job.stats line at the end of the
 * job) and logged the first time per peer and kind.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_emu.h"

#define EMU_SLOTS_FIRST 64u /* the pending table's first size */
#define EMU_SLOTS_MAX                                                          \
    (1u << 20)                   /* and its bound: operations awaiting a       \
                                    reply at once, per worker */
#define EMU_SLOT_NONE UINT32_MAX /* end of the free list */

static const char *const drop_what[RV_UCX_DROP_KINDS] = {
    [RV_UCX_DROP_STALE] = "stale, duplicated or forged replies",
    [RV_UCX_DROP_OUTSIDE] = "accesses outside registered memory",
    [RV_UCX_DROP_MALFORMED] = "malformed messages",
};

/* ---------------------------------------------------------------------- */
/* Drops                                                                   */

/*
 * Counts a message dropped for reason @p kind and logs it the first time
 * for its sender @p src (a peer that sends garbage would flood the log
 * otherwise); the counts are printed at the end of the job.
 */
void rv_ucx_emu_drop(struct rv_tworker *tw, unsigned kind, uint32_t src,
                     const char *fmt, ...)
{
    tw->emu_drops[kind]++;
    uint8_t *logged =
        src < tw->nworkers ? &tw->emu_logged[src] : &tw->emu_logged_unknown;
    if (*logged & (1u << kind))
        return;
    *logged |= (uint8_t)(1u << kind);
    char what[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    rv_warn("worker %u dropped %s; further %s from %s are counted "
            "(job.stats), not logged",
            tw->tid, what, drop_what[kind],
            src < tw->nworkers ? "that worker" : "unknown workers");
}

rv_status_t rv_ucx_emu_worker_init(struct rv_tworker *tw)
{
    tw->emu_free = EMU_SLOT_NONE;
    tw->emu_logged = calloc(tw->nworkers, sizeof(*tw->emu_logged));
    return tw->emu_logged != NULL ? RV_OK : RV_ERR_NO_MEMORY;
}

/* job.stats: the worker's drops, beside the layers' counters. */
static const rv_stat_t emu_stats[] = {
    {.name = "emu_stale_replies",
     .help = "emulated RMA replies naming no operation waiting (dropped)",
     .offset = RV_UCX_DROP_STALE * sizeof(uint64_t)},
    {.name = "emu_outside_region",
     .help = "emulated RMA accesses outside registered memory (dropped)",
     .offset = RV_UCX_DROP_OUTSIDE * sizeof(uint64_t)},
    {.name = "emu_malformed",
     .help = "emulated RMA messages with a bad header, kind or worker "
             "(dropped)",
     .offset = RV_UCX_DROP_MALFORMED * sizeof(uint64_t)},
    {.name = NULL},
};
static const rv_stats_table_t emu_stats_table = {
    .name = "ucx",
    .index_key = "ucx_worker",
    .help = "UCX transport worker (RMA emulation)",
    .stats = emu_stats,
};
RV_STATS_REGISTER_TABLE(emu_stats_table)

static void print_drops(const struct rv_tworker *tw)
{
    const uint64_t *d = tw->emu_drops;
    uint64_t total = d[RV_UCX_DROP_STALE] + d[RV_UCX_DROP_OUTSIDE] +
                     d[RV_UCX_DROP_MALFORMED];
    bool emulates = false;
    for (uint32_t peer = 0; peer < tw->nworkers && !emulates; peer++)
        emulates = tw->emulate[peer];
    if (tw->tp->stats == RV_STATS_OFF || (!emulates && total == 0)) {
        if (total > 0)
            rv_warn("worker %u dropped %llu emulated RMA messages (set "
                    "job.stats to see why)",
                    tw->tid, (unsigned long long)total);
        return;
    }
    rv_stats_print(tw->tp->stats, &emu_stats_table, tw->tp->rank, tw->tid, d);
}

void rv_ucx_emu_worker_fini(struct rv_tworker *tw)
{
    print_drops(tw);
    for (uint32_t peer = 0; peer < tw->nworkers; peer++) {
        for (ucx_emu_deferred_t *d = tw->emu_deferred[peer], *n; d; d = n) {
            n = d->next;
            if (d->rndv)
                ucp_am_data_release(tw->worker, d->data);
            free(d);
        }
        tw->emu_deferred[peer] = NULL;
    }
    free(tw->emu_slots);
    free(tw->emu_logged);
    tw->emu_slots = NULL;
    tw->emu_logged = NULL;
}

/* ---------------------------------------------------------------------- */
/* Pending operations (initiator side)                                     */

/* Doubles the table, up to EMU_SLOTS_MAX; false when it cannot grow. */
static bool slots_grow(struct rv_tworker *tw)
{
    uint32_t cap = tw->emu_nslots ? 2 * tw->emu_nslots : EMU_SLOTS_FIRST;
    if (tw->emu_nslots >= EMU_SLOTS_MAX)
        return false;
    ucx_emu_slot_t *s = realloc(tw->emu_slots, cap * sizeof(*s));
    if (s == NULL)
        return false;
    for (uint32_t i = cap; i-- > tw->emu_nslots;) {
        s[i] = (ucx_emu_slot_t){.next_free = tw->emu_free};
        tw->emu_free = i;
    }
    tw->emu_slots = s;
    tw->emu_nslots = cap;
    return true;
}

/*
 * Takes a slot for @p op, whose request goes to @p peer and is answered
 * by a reply of kind @p reply; sets the request's cookie. A full table is
 * an error the caller returns (its operation never starts), not a loss.
 */
static rv_status_t slot_take(struct rv_tworker *tw, ucx_op_t *op, uint32_t peer,
                             uint8_t reply, uint64_t *cookie)
{
    if (tw->emu_free == EMU_SLOT_NONE && !slots_grow(tw)) {
        rv_error("worker %u has %u emulated RMA operations awaiting replies, "
                 "the most it keeps (or it is out of memory): complete "
                 "some (flush) before starting more",
                 tw->tid, tw->emu_nslots);
        return RV_ERR_NO_MEMORY;
    }
    uint32_t i = tw->emu_free;
    ucx_emu_slot_t *s = &tw->emu_slots[i];
    tw->emu_free = s->next_free;
    s->op = op;
    s->gen++;
    s->peer = peer;
    s->reply = reply;
    *cookie = (uint64_t)s->gen << 32 | i;
    return RV_OK;
}

static void slot_free(struct rv_tworker *tw, uint32_t i)
{
    ucx_emu_slot_t *s = &tw->emu_slots[i];
    s->op = NULL;
    s->next_free = tw->emu_free;
    tw->emu_free = i;
}

/* Gives back the slot of a request that could not be sent. */
static void slot_cancel(struct rv_tworker *tw, uint64_t cookie)
{
    slot_free(tw, (uint32_t)cookie);
}

/*
 * The operation reply @p h answers, its slot freed; NULL (the reply
 * dropped and counted) when it answers none: a stale, duplicated or
 * forged reply is never used.
 */
static ucx_op_t *slot_answer(struct rv_tworker *tw, const emu_hdr_t *h)
{
    uint32_t i = (uint32_t)h->cookie, gen = (uint32_t)(h->cookie >> 32);
    const ucx_emu_slot_t *s = i < tw->emu_nslots ? &tw->emu_slots[i] : NULL;
    const char *why = s == NULL           ? "names no slot of the table"
                      : s->op == NULL     ? "names a slot already answered"
                      : s->gen != gen     ? "names an earlier use of its slot"
                      : s->peer != h->src ? "comes from another worker than "
                                            "the one asked"
                      : s->reply != h->op ? "answers another kind of "
                                            "operation"
                                          : NULL;
    if (why != NULL) {
        rv_ucx_emu_drop(
            tw, RV_UCX_DROP_STALE, h->src,
            "a reply (kind %u, slot %u, generation %u) from worker %u "
            "that %s",
            h->op, i, gen, h->src, why);
        return NULL;
    }
    ucx_op_t *op = s->op;
    slot_free(tw, i);
    return op;
}

/*
 * A reply's status, as the target sent it: RV_OK or one of rv_status_t's
 * errors. Any other value (positive, or a negative one that is no error of
 * rv_status_t: only a forged reply carries it) becomes RV_ERR_TRANSPORT,
 * since it reaches the program's completion, which may switch on it or
 * index a table by it. RV_ERR_CANCELED is the last error of rv_status_t.
 */
static rv_status_t reply_status(const emu_hdr_t *h)
{
    if (h->status == RV_OK ||
        (h->status <= RV_ERR_NO_MEMORY && h->status >= RV_ERR_CANCELED))
        return (rv_status_t)h->status;
    return RV_ERR_TRANSPORT;
}

/* ---------------------------------------------------------------------- */
/* Sending                                                                 */

static void emu_send_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_op_t *op = user_data;
    struct rv_tworker *tw = op->tw;

    ucp_request_free(request);
    if (status != UCS_OK)
        rv_error("emulated RMA message failed: %s", ucs_status_string(status));
    if (op->cb != NULL) {
        tw->completions++;
        op->cb(op->arg, rv_ucx_status(status));
    }
    rv_ucx_op_put(tw, op);
}

/*
 * Sends @p h (+ @p data) to @p peer. @p cb, if not NULL, runs when the send
 * completes (then RV_INPROGRESS is returned); RV_OK means it already has.
 */
static rv_status_t emu_send(struct rv_tworker *tw, uint32_t peer,
                            const emu_hdr_t *h, const void *data, size_t len,
                            rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    memcpy(op->hdr, h, sizeof(*h)); /* must outlive the call */
    bool request = h->op == EMU_PUT || h->op == EMU_GET_REQ ||
                   h->op == EMU_AMO_REQ || h->op == EMU_FLUSH_REQ;
    if (request && tw->emu_fence[peer]) {
        emu_hdr_t fenced = *h;
        fenced.flags |= EMU_FENCED;
        memcpy(op->hdr, &fenced, sizeof(fenced));
        tw->emu_fence[peer] = false;
    }
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = emu_send_done,
        .user_data = op,
    };
    RV_TSAN_RELEASE(tw->tp); /* as am_send's (ucx_worker.c) */
    ucs_status_ptr_t r = ucp_am_send_nbx(tw->eps[peer], RV_UCX_AM_RMA, op->hdr,
                                         sizeof(*h), data, len, &p);
    if (r == NULL) {
        rv_ucx_op_put(tw, op);
        return RV_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        rv_ucx_op_put(tw, op);
        rv_error("cannot send an emulated RMA operation to worker %u: %s", peer,
                 ucs_status_string(UCS_PTR_STATUS(r)));
        return rv_ucx_status(UCS_PTR_STATUS(r));
    }
    return RV_INPROGRESS;
}

/* A reply from the target side; nothing waits for its completion. */
void rv_ucx_emu_reply(struct rv_tworker *tw, const emu_hdr_t *req, uint8_t op,
                      rv_status_t status, const void *data, size_t len)
{
    emu_hdr_t h = *req;
    h.op = op;
    h.status = (int16_t)status;
    h.src = tw->tid;
    emu_send(tw, req->src, &h, data, len, NULL, NULL);
}

/* Completes an initiator's op (get, atomic or flush). */
static void emu_complete(ucx_op_t *op, rv_status_t status)
{
    struct rv_tworker *tw = op->tw;
    if (op->result_p != NULL && status == RV_OK)
        *op->result_p = op->result;
    tw->completions++;
    op->cb(op->arg, status);
    rv_ucx_op_put(tw, op);
}

/* ---------------------------------------------------------------------- */
/* Initiator side                                                          */

rv_status_t rv_ucx_emu_put(struct rv_tworker *tw, uint32_t peer,
                           const void *src, size_t len, uint64_t raddr,
                           rv_trkey_t *rkey, rv_completion_fn cb, void *arg)
{
    emu_hdr_t h = {.op = EMU_PUT,
                   .src = tw->tid,
                   .region = rkey->region,
                   .raddr = raddr,
                   .len = len};
    tw->emu_dirty[peer] = true;
    return emu_send(tw, peer, &h, src, len, cb, arg);
}

/* Starts a request whose reply (of kind @p reply) completes @p op. */
static rv_status_t emu_request(struct rv_tworker *tw, uint32_t peer,
                               emu_hdr_t *h, uint8_t reply, ucx_op_t *op)
{
    h->src = tw->tid;
    rv_status_t status = slot_take(tw, op, peer, reply, &h->cookie);
    if (status == RV_OK) {
        status = emu_send(tw, peer, h, NULL, 0, NULL, NULL);
        if (status < 0)
            slot_cancel(tw, h->cookie);
    }
    if (status < 0) {
        rv_ucx_op_put(tw, op);
        return status;
    }
    return RV_INPROGRESS;
}

rv_status_t rv_ucx_emu_get(struct rv_tworker *tw, uint32_t peer, void *dst,
                           size_t len, uint64_t raddr, rv_trkey_t *rkey,
                           rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    op->dst = dst;
    op->len = len;
    emu_hdr_t h = {
        .op = EMU_GET_REQ, .region = rkey->region, .raddr = raddr, .len = len};
    return emu_request(tw, peer, &h, EMU_GET_REP, op);
}

rv_status_t rv_ucx_emu_atomic(struct rv_tworker *tw, uint32_t peer, bool cswap,
                              uint64_t v1, uint64_t v2, uint64_t raddr,
                              rv_trkey_t *rkey, uint64_t *result,
                              rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    op->result_p = result;
    emu_hdr_t h = {.op = EMU_AMO_REQ,
                   .amo = cswap ? EMU_AMO_CSWAP : EMU_AMO_FADD,
                   .region = rkey->region,
                   .raddr = raddr,
                   .len = sizeof(uint64_t),
                   .v1 = v1,
                   .v2 = v2};
    tw->emu_dirty[peer] = true;
    return emu_request(tw, peer, &h, EMU_AMO_REP, op);
}

/* Sends a flush request whose reply completes a part of @p op. */
static rv_status_t emu_flush_peer(struct rv_tworker *tw, uint32_t peer,
                                  ucx_op_t *op)
{
    emu_hdr_t h = {.op = EMU_FLUSH_REQ, .src = tw->tid};
    rv_status_t status = slot_take(tw, op, peer, EMU_FLUSH_REP, &h.cookie);
    if (status != RV_OK)
        return status;
    bool dirty = tw->emu_dirty[peer];
    tw->emu_dirty[peer] = false; /* before the reply, which may come at once */
    status = emu_send(tw, peer, &h, NULL, 0, NULL, NULL);
    if (status < 0) {
        slot_cancel(tw, h.cookie);
        tw->emu_dirty[peer] = dirty;
    }
    return status;
}

rv_status_t rv_ucx_emu_flush(struct rv_tworker *tw, uint32_t peer,
                             rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    op->pending = 1;
    op->status = RV_OK;
    rv_status_t status = emu_flush_peer(tw, peer, op);
    if (status < 0) {
        rv_ucx_op_put(tw, op);
        return status;
    }
    return RV_INPROGRESS;
}

/* One part of a worker-wide flush is done. */
static void flush_part_done(ucx_op_t *op, rv_status_t status)
{
    if (status < 0 && op->status == RV_OK)
        op->status = status;
    if (--op->pending == 0)
        emu_complete(op, op->status);
}

static void worker_flush_done(void *request, ucs_status_t status,
                              void *user_data)
{
    ucp_request_free(request);
    flush_part_done(user_data, rv_ucx_status(status));
}

rv_status_t rv_ucx_emu_flush_all(struct rv_tworker *tw, rv_completion_fn cb,
                                 void *arg)
{
    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    op->status = RV_OK;
    op->pending = 1; /* held until every part has been started */

    for (uint32_t peer = 0; peer < tw->nworkers; peer++) {
        if (!tw->emulate[peer] || !tw->emu_dirty[peer])
            continue;
        /* Counted first: over UCX's self transport the reply may be
         * handled before the send returns. */
        op->pending++;
        rv_status_t st = emu_flush_peer(tw, peer, op);
        if (st < 0) {
            op->pending--;
            if (op->status == RV_OK)
                op->status = st; /* the flush fails rather than lie */
        }
    }
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = worker_flush_done,
        .user_data = op,
    };
    ucs_status_ptr_t r = ucp_worker_flush_nbx(tw->worker, &p);
    if (UCS_PTR_IS_PTR(r))
        op->pending++;
    else if (UCS_PTR_IS_ERR(r) && op->status == RV_OK)
        op->status = rv_ucx_status(UCS_PTR_STATUS(r));

    if (--op->pending == 0) { /* nothing to wait for */
        rv_status_t status = op->status;
        rv_ucx_op_put(tw, op);
        return status;
    }
    return RV_INPROGRESS;
}

static void get_landed(void *request, ucs_status_t status, size_t length,
                       void *user_data)
{
    (void)length;
    if (request != NULL)
        ucp_request_free(request);
    emu_complete(user_data, rv_ucx_status(status));
}

/* A reply to one of this worker's requests, found through its slot. */
static ucs_status_t on_reply(struct rv_tworker *tw, const emu_hdr_t *h,
                             void *data, size_t length, bool rndv)
{
    ucx_op_t *op = slot_answer(tw, h);
    if (op == NULL)
        return UCS_OK; /* UCX drops rendezvous data not received */
    rv_status_t status = reply_status(h);
    switch (h->op) {
    case EMU_GET_REP:
        if (status != RV_OK || length != op->len) {
            emu_complete(op, status != RV_OK ? status : RV_ERR_TRUNCATED);
            return UCS_OK;
        }
        if (!rndv) {
            memcpy(op->dst, data, length);
            emu_complete(op, RV_OK);
            return UCS_OK;
        }
        rv_ucx_emu_recv_into(tw, data, op->dst, length, get_landed, op);
        return UCS_INPROGRESS;
    case EMU_AMO_REP:
        op->result = h->v1;
        emu_complete(op, status);
        return UCS_OK;
    default: /* EMU_FLUSH_REP: the slot's kind was checked */
        flush_part_done(op, status);
        return UCS_OK;
    }
}

ucs_status_t rv_ucx_emu_recv_cb(void *arg, const void *header,
                                size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param)
{
    struct rv_tworker *tw = arg;
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    emu_hdr_t h;
    RV_TSAN_ACQUIRE(tw->tp);

    if (header_length != sizeof(h)) {
        rv_ucx_emu_drop(tw, RV_UCX_DROP_MALFORMED, UINT32_MAX,
                        "an emulated RMA message with a %zu-byte header (%zu "
                        "expected)",
                        header_length, sizeof(h));
        return UCS_OK;
    }
    memcpy(&h, header, sizeof(h));
    if (h.src >= tw->nworkers) {
        rv_ucx_emu_drop(
            tw, RV_UCX_DROP_MALFORMED, UINT32_MAX,
            "an emulated RMA message from worker %u, not of the job", h.src);
        return UCS_OK;
    }
    tw->completions++;

    switch (h.op) {
    case EMU_PUT:
    case EMU_GET_REQ:
    case EMU_AMO_REQ:
    case EMU_FLUSH_REQ:
        return rv_ucx_emu_on_request(tw, &h, data, length, rndv);
    case EMU_GET_REP:
    case EMU_AMO_REP:
    case EMU_FLUSH_REP:
        return on_reply(tw, &h, data, length, rndv);
    default:
        rv_ucx_emu_drop(
            tw, RV_UCX_DROP_MALFORMED, h.src,
            "an emulated RMA message of unknown kind %u from worker %u", h.op,
            h.src);
        return UCS_OK;
    }
}
