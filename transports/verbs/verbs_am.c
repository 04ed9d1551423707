/*
 * The verbs transport: active messages.
 *
 * Up to caps.eager_limit a message is one SEND (inline up to the QP's
 * max_inline_data, else from a bounce buffer) into a buffer of the
 * receiver's shared receive queue, reposted once consumed. Larger ones go
 * by rendezvous: the sender registers the payload and SENDs an RTS; the
 * receiver RDMA-reads it into memory of its own, delivers it, and answers
 * FIN so the sender may reuse the payload. Messages of one sender are
 * delivered in order: while a rendezvous is being read, later messages of
 * that sender wait behind it (held).
 *
 * The RTS names its send by the index and generation of a slot of the
 * sender's table of rendezvous sends, which the FIN echoes: a FIN that
 * names a free slot, an earlier use of its slot, or a send to another
 * worker is stale, duplicated or forged, and is dropped, never used as a
 * pointer. Dropped messages are counted by why (the worker's job.stats
 * line) and logged the first time per sender and why.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_internal.h"

rv_status_t vb_rx_post(rv_tworker_t *tw, uint32_t i)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(tw->rx + (size_t)i * VB_RXBUF),
                          .length = VB_RXBUF,
                          .lkey = tw->rx_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad;
    int rc = ibv_post_srq_recv(tw->srq, &wr, &bad);
    if (rc != 0) {
        rv_error("verbs: cannot post a receive buffer on %s: %s",
                 tw->tp->devname, strerror(rc));
        return RV_ERR_TRANSPORT;
    }
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Drops                                                                   */

#define VB_RNDV_SLOTS_FIRST 64u
#define VB_RNDV_SLOTS_MAX (1u << 20) /* rendezvous sends awaiting FIN */
#define VB_SLOT_NONE UINT32_MAX

static const char *const drop_what[VB_DROP_KINDS] = {
    [VB_DROP_STALE_FIN] = "stale, duplicated or forged FINs",
    [VB_DROP_MALFORMED] = "malformed messages",
};

/* Counts a message dropped for reason @p kind and logs it the first time
 * for its sender @p src (UINT32_MAX: unknown). */
static void drop(rv_tworker_t *tw, unsigned kind, uint32_t src, const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));
static void drop(rv_tworker_t *tw, unsigned kind, uint32_t src, const char *fmt,
                 ...)
{
    tw->drops[kind]++;
    uint8_t *logged = src < tw->nworkers ? &tw->peers[src].drops_logged
                                         : &tw->drops_logged_unknown;
    if (*logged & (1u << kind))
        return;
    *logged |= (uint8_t)(1u << kind);
    char what[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    rv_warn("verbs: worker %u dropped %s; further %s from %s are counted "
            "(job.stats), not logged",
            tw->tid, what, drop_what[kind],
            src < tw->nworkers ? "that worker" : "unknown workers");
}

/* job.stats: the worker's drops, beside the layers' counters. */
static const rv_stat_t vb_stats[] = {
    {.name = "stale_fins",
     .help = "FINs naming no rendezvous send of the worker's (dropped)",
     .offset = VB_DROP_STALE_FIN * sizeof(uint64_t)},
    {.name = "malformed",
     .help = "messages cut short, with a bad header or type (dropped)",
     .offset = VB_DROP_MALFORMED * sizeof(uint64_t)},
    {.name = NULL},
};
static const rv_stats_table_t vb_stats_table = {
    .name = "verbs",
    .index_key = "verbs_worker",
    .help = "verbs transport worker",
    .stats = vb_stats,
};
RV_STATS_REGISTER_TABLE(vb_stats_table)

static void print_drops(const rv_tworker_t *tw)
{
    const uint64_t *d = tw->drops;
    if (tw->tp->stats == RV_STATS_OFF) {
        if (d[VB_DROP_STALE_FIN] + d[VB_DROP_MALFORMED] > 0)
            rv_warn("verbs: worker %u dropped %llu messages (set job.stats "
                    "to see why)",
                    tw->tid,
                    (unsigned long long)(d[VB_DROP_STALE_FIN] +
                                         d[VB_DROP_MALFORMED]));
        return;
    }
    rv_stats_print(tw->tp->stats, &vb_stats_table, tw->tp->rank, tw->tid, d);
}

/* ---------------------------------------------------------------------- */
/* Rendezvous sends waiting for their FIN                                  */

/* Doubles the table, up to VB_RNDV_SLOTS_MAX; false when it cannot grow. */
static bool rndv_slots_grow(rv_tworker_t *tw)
{
    uint32_t n = tw->rndv_nslots;
    uint32_t cap = n ? 2 * n : VB_RNDV_SLOTS_FIRST;
    if (n >= VB_RNDV_SLOTS_MAX)
        return false;
    vb_rndv_slot_t *s = realloc(tw->rndv_slots, cap * sizeof(*s));
    if (s == NULL)
        return false;
    if (n == 0)
        tw->rndv_free = VB_SLOT_NONE;
    for (uint32_t i = cap; i-- > n;) {
        s[i] = (vb_rndv_slot_t){.next_free = tw->rndv_free};
        tw->rndv_free = i;
    }
    tw->rndv_slots = s;
    tw->rndv_nslots = cap;
    return true;
}

/* Takes a slot for rendezvous send @p op; its cookie goes in the RTS. A
 * full table is an error the send returns, not a loss. */
static rv_status_t rndv_slot_take(rv_tworker_t *tw, vb_op_t *op,
                                  uint64_t *cookie)
{
    if ((tw->rndv_nslots == 0 || tw->rndv_free == VB_SLOT_NONE) &&
        !rndv_slots_grow(tw)) {
        rv_error("verbs: worker %u has %u rendezvous sends awaiting their "
                 "receivers, the most it keeps (or it is out of memory)",
                 tw->tid, tw->rndv_nslots);
        return RV_ERR_NO_MEMORY;
    }
    uint32_t i = tw->rndv_free;
    vb_rndv_slot_t *s = &tw->rndv_slots[i];
    tw->rndv_free = s->next_free;
    s->op = op;
    s->gen++;
    *cookie = (uint64_t)s->gen << 32 | i;
    return RV_OK;
}

static void rndv_slot_free(rv_tworker_t *tw, uint32_t i)
{
    tw->rndv_slots[i].op = NULL;
    tw->rndv_slots[i].next_free = tw->rndv_free;
    tw->rndv_free = i;
}

/* The send a FIN of worker @p src names, its slot freed; NULL (the FIN
 * dropped and counted) when it names none. */
static vb_op_t *rndv_slot_answer(rv_tworker_t *tw, uint32_t src,
                                 uint64_t cookie)
{
    uint32_t i = (uint32_t)cookie, gen = (uint32_t)(cookie >> 32);
    const vb_rndv_slot_t *s = i < tw->rndv_nslots ? &tw->rndv_slots[i] : NULL;
    const char *why = s == NULL            ? "names no slot of the table"
                      : s->op == NULL      ? "names a slot already answered"
                      : s->gen != gen      ? "names an earlier use of its slot"
                      : s->op->peer != src ? "comes from another worker than "
                                             "the receiver"
                                           : NULL;
    if (why != NULL) {
        drop(tw, VB_DROP_STALE_FIN, src,
             "a FIN (slot %u, generation %u) from worker %u that %s", i, gen,
             src, why);
        return NULL;
    }
    vb_op_t *op = s->op;
    rndv_slot_free(tw, i);
    return op;
}

void vb_rndv_fini(rv_tworker_t *tw)
{
    print_drops(tw);
    free(tw->rndv_slots);
    tw->rndv_slots = NULL;
    tw->rndv_nslots = 0;
}

/* ---------------------------------------------------------------------- */
/* Rendezvous memory                                                       */

/* Registered memory for a rendezvous payload: from the worker's pool
 * (chunks registered once, in its NUMA zone), else malloc'ed and
 * registered for this message alone (*mr_p). Registering per message
 * costs a pinning system call each time; the pool makes it a best-fit
 * allocation. */
static void *rndv_mem(rv_tworker_t *tw, size_t len, uint32_t *lkey_p,
                      uint32_t *rkey_p, struct ibv_mr **mr_p)
{
    const rv_mem_chunk_t *c;
    void *p;
    *mr_p = NULL;
    if (tw->tp->svc->mem_general_alloc(tw->pool, len ? len : 1, 0, &p, &c) ==
        RV_OK) {
        *lkey_p = c->tmem->mr->lkey;
        *rkey_p = c->tmem->mr->rkey;
        return p;
    }
    p = malloc(len ? len : 1);
    if (p == NULL || (*mr_p = vb_reg(tw->tp, p, len)) == NULL) {
        free(p);
        return NULL;
    }
    *lkey_p = (*mr_p)->lkey;
    *rkey_p = (*mr_p)->rkey;
    return p;
}

static void rndv_mem_free(rv_tworker_t *tw, void *p, struct ibv_mr *mr)
{
    if (mr != NULL) {
        ibv_dereg_mr(mr);
        free(p);
    } else if (p != NULL) {
        tw->tp->svc->mem_general_free(tw->pool, p);
    }
}

/* ---------------------------------------------------------------------- */
/* Held messages: one sender's, in order                                   */

/* Delivers the ready messages at the head of @p src's queue. */
static void deliver_held(rv_tworker_t *tw, uint32_t src)
{
    vb_peer_t *p = &tw->peers[src];
    vb_held_t *h;
    while ((h = p->held_head) != NULL && h->ready) {
        p->held_head = h->next;
        if (p->held_head == NULL)
            p->held_tail = NULL;
        rv_am_rx_t rx = {.src = src,
                         .hdr = h->hdr,
                         .hdr_len = h->hdr_len,
                         .data = h->data,
                         .len = h->len,
                         .persistent = true};
        tw->events++;
        if (tw->am_recv(tw->am_arg, &rx, h) != RV_INPROGRESS)
            vb_am_release(tw, h);
    }
}

void vb_am_release(rv_tworker_t *tw, void *desc)
{
    vb_held_t *h = desc;
    /* A held eager message's copy came from malloc (on_eager): given to
     * the pool, it was refused there ("not allocated here") and leaked. */
    if (h->copied)
        free(h->data);
    else
        rndv_mem_free(tw, h->data, h->mr);
    free(h);
}

/* Frees the messages still held from @p p (the worker is destroyed). */
void vb_held_drop(rv_tworker_t *tw, vb_peer_t *p)
{
    for (vb_held_t *h = p->held_head, *n; h != NULL; h = n) {
        n = h->next;
        vb_am_release(tw, h);
    }
    p->held_head = p->held_tail = NULL;
}

static void hold(rv_tworker_t *tw, vb_held_t *h)
{
    vb_peer_t *p = &tw->peers[h->src];
    if (p->held_tail != NULL)
        p->held_tail->next = h;
    else
        p->held_head = h;
    p->held_tail = h;
}

/* ---------------------------------------------------------------------- */
/* Receiving                                                               */

/* An RTS: read the payload, then deliver it in its turn. */
static void start_read(rv_tworker_t *tw, const vb_wire_t *m, const uint8_t *hdr,
                       const vb_rts_t *rts)
{
    vb_held_t *h = calloc(1, sizeof(*h));
    vb_op_t *op = vb_op_get(tw, VB_OP_READ, m->src, NULL, h);
    uint32_t lkey = 0, rkey;
    if (h != NULL)
        h->data = rndv_mem(tw, m->len, &lkey, &rkey, &h->mr);
    if (h == NULL || op == NULL || h->data == NULL) {
        rv_error("verbs: no memory for a %u-byte message from worker %u; "
                 "dropped",
                 m->len, m->src);
        if (h != NULL)
            rndv_mem_free(tw, h->data, h->mr);
        free(h);
        if (op != NULL)
            vb_op_put(tw, op);
        return;
    }
    h->src = m->src;
    h->len = m->len;
    h->hdr_len = m->hdr_len;
    h->cookie = rts->cookie;
    memcpy(h->hdr, hdr, m->hdr_len);
    hold(tw, h);
    struct ibv_sge sge = {
        .addr = (uintptr_t)h->data, .length = m->len, .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)op,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_READ};
    wr.wr.rdma.remote_addr = rts->addr;
    wr.wr.rdma.rkey = rts->rkey;
    op->len = m->len;
    uint32_t lane = tw->tp->shared_qps
                        ? tw->nworkers + (uint32_t)vb_rank_of(tw, m->src)
                        : m->src;
    if (vb_post(tw, lane, &wr, true, NULL) != RV_OK) {
        h->ready = true; /* delivered truncated: the core counts it */
        h->len = 0;
        vb_op_put(tw, op);
    }
}

/* The read of a rendezvous payload completed: tell the sender (FIN), and
 * deliver what is ready of its messages. */
void vb_read_done(rv_tworker_t *tw, vb_op_t *op, rv_status_t st)
{
    vb_held_t *h = op->arg;
    uint64_t cookie = h->cookie;
    uint32_t src = op->peer;
    h->ready = true;
    if (st != RV_OK)
        h->len = 0;
    vb_op_put(tw, op);
    vb_send_ctrl(tw, src, VB_FIN, &cookie, sizeof(cookie), false);
    deliver_held(tw, src);
}

/* An eager message: delivered from the receive buffer at once, unless
 * earlier messages of its sender are held; then it is held behind them,
 * from a copy. */
static void on_eager(rv_tworker_t *tw, const vb_wire_t *m, const uint8_t *hdr,
                     const uint8_t *body)
{
    if (tw->peers[m->src].held_head == NULL) {
        rv_am_rx_t rx = {.src = m->src,
                         .hdr = hdr,
                         .hdr_len = m->hdr_len,
                         .data = (void *)body,
                         .len = m->len};
        tw->am_recv(tw->am_arg, &rx, NULL);
        return;
    }
    vb_held_t *h = calloc(1, sizeof(*h));
    if (h == NULL || (h->data = malloc(m->len ? m->len : 1)) == NULL) {
        free(h);
        rv_error("verbs: no memory to hold a message from worker %u; "
                 "dropped",
                 m->src);
        return;
    }
    h->src = m->src;
    h->ready = true;
    h->copied = true; /* freed by vb_am_release, not by the pool */
    h->len = m->len;
    h->hdr_len = m->hdr_len;
    memcpy(h->hdr, hdr, m->hdr_len);
    memcpy(h->data, body, m->len);
    hold(tw, h);
}

/* A FIN: worker @p m->src has read the payload of the rendezvous whose
 * slot the FIN names. */
static void on_fin(rv_tworker_t *tw, const vb_wire_t *m, const uint8_t *hdr)
{
    uint64_t cookie;
    memcpy(&cookie, hdr, sizeof(cookie));
    vb_op_t *op = rndv_slot_answer(tw, m->src, cookie);
    if (op == NULL)
        return;
    if (op->bounce != NULL) { /* the payload's copy */
        rndv_mem_free(tw, op->bounce, op->mr);
        op->mr = NULL;
    }
    if (op->cb != NULL)
        op->cb(op->arg, RV_OK);
    vb_op_put(tw, op);
}

/* Whether the message @p m, with @p have bytes after its wire header, is
 * well formed. */
static bool wire_valid(const rv_tworker_t *tw, const vb_wire_t *m, size_t have)
{
    if (m->src >= tw->nworkers || m->hdr_len > VB_MAX_HDR || m->hdr_len > have)
        return false;
    if (m->type == VB_EAGER && have - m->hdr_len != m->len)
        return false;
    /* An RTS makes the receiver allocate and register its length: no
     * more than a sender may send (transport.verbs.max_message). */
    if (m->type == VB_RTS &&
        (have - m->hdr_len != sizeof(vb_rts_t) || m->len > tw->tp->max_message))
        return false;
    if (m->type == VB_FIN && m->hdr_len != sizeof(uint64_t))
        return false;
    return true;
}

/* A message in receive buffer @p wc->wr_id; the buffer is reposted once
 * the message is handled (an eager payload is delivered from it). */
void vb_on_recv(rv_tworker_t *tw, const struct ibv_wc *wc)
{
    uint32_t i = (uint32_t)wc->wr_id;
    const uint8_t *buf = tw->rx + (size_t)i * VB_RXBUF;
    vb_wire_t m;
    if (wc->byte_len < sizeof(m)) {
        drop(tw, VB_DROP_MALFORMED, UINT32_MAX,
             "a %u-byte message, shorter than its header", wc->byte_len);
        goto repost;
    }
    memcpy(&m, buf, sizeof(m));
    const uint8_t *hdr = buf + sizeof(m), *body = hdr + m.hdr_len;
    if (!wire_valid(tw, &m, wc->byte_len - sizeof(m))) {
        drop(tw, VB_DROP_MALFORMED, m.src < tw->nworkers ? m.src : UINT32_MAX,
             "a malformed message (type %u, %u bytes, from %u)", m.type,
             wc->byte_len, m.src);
        goto repost;
    }
    vb_peer_t *p = &tw->peers[m.src];
    tw->events++;
    switch (m.type) {
    case VB_EAGER:
        on_eager(tw, &m, hdr, body);
        break;
    case VB_RTS: {
        vb_rts_t rts;
        memcpy(&rts, body, sizeof(rts));
        start_read(tw, &m, hdr, &rts);
        break;
    }
    case VB_FIN:
        on_fin(tw, &m, hdr);
        break;
    case VB_BYE:
        if (!p->bye) {
            p->bye = true;
            tw->byes++;
        }
        break;
    default:
        drop(tw, VB_DROP_MALFORMED, m.src,
             "a message of unknown type %u from worker %u", m.type, m.src);
    }
repost:
    vb_rx_post(tw, i);
}

/* ---------------------------------------------------------------------- */
/* Sending                                                                 */

/* Sends type @p type with @p hdr and the gathered @p len bytes, eagerly;
 * the wire header announces @p announce bytes of payload. */
static rv_status_t send_eager(rv_tworker_t *tw, uint32_t peer, uint8_t type,
                              const void *hdr, size_t hdr_len,
                              const struct iovec *iov, size_t iovcnt,
                              size_t len, size_t announce, bool signal)
{
    vb_wire_t m = {.src = tw->tid,
                   .type = type,
                   .hdr_len = (uint8_t)hdr_len,
                   .len = (uint32_t)announce};
    size_t total = sizeof(m) + hdr_len + len;
    uint8_t stack[VB_INLINE_COPY];
    uint8_t *buf = stack;
    uint32_t lkey = 0;
    rv_mem_unit_t *unit = NULL;
    bool inl = total <= tw->max_inline && total <= sizeof(stack);
    if (!inl) {
        void *a;
        rv_status_t st = vb_bounce(tw, peer, total, &a, &lkey, &unit);
        if (st != RV_OK)
            return st;
        buf = a;
    }
    memcpy(buf, &m, sizeof(m));
    memcpy(buf + sizeof(m), hdr, hdr_len);
    size_t off = sizeof(m) + hdr_len;
    for (size_t i = 0; i < iovcnt; i++) {
        memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    struct ibv_sge sge = {
        .addr = (uintptr_t)buf, .length = (uint32_t)total, .lkey = lkey};
    struct ibv_send_wr wr = {.sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = inl ? IBV_SEND_INLINE : 0};
    return vb_post_to(tw, peer, &wr, signal, unit);
}

rv_status_t vb_send_ctrl(rv_tworker_t *tw, uint32_t peer, uint8_t type,
                         const void *body, size_t len, bool signal)
{
    return send_eager(tw, peer, type, body, len, NULL, 0, 0, 0, signal);
}

/* Where the receiver of a rendezvous reads the @p len bytes of @p iov
 * from: up to VB_RNDV_COPY, and gathered ones, a copy in the pool; larger
 * ones the caller's memory, registered for the message. */
static rv_status_t rndv_source(rv_tworker_t *tw, vb_op_t *op,
                               const struct iovec *iov, size_t iovcnt,
                               size_t len, vb_rts_t *rts)
{
    uint32_t lkey;
    if (iovcnt > 1 || len <= VB_RNDV_COPY) {
        op->bounce = rndv_mem(tw, len, &lkey, &rts->rkey, &op->mr);
        if (op->bounce == NULL)
            return RV_ERR_NO_MEMORY;
        size_t off = 0;
        for (size_t i = 0; i < iovcnt; i++) {
            memcpy((uint8_t *)op->bounce + off, iov[i].iov_base,
                   iov[i].iov_len);
            off += iov[i].iov_len;
        }
        rts->addr = (uintptr_t)op->bounce;
        return RV_OK;
    }
    op->mr = vb_reg(tw->tp, iov[0].iov_base, len);
    if (op->mr == NULL)
        return RV_ERR_NO_MEMORY;
    rts->addr = (uintptr_t)iov[0].iov_base;
    rts->rkey = op->mr->rkey;
    return RV_OK;
}

/* A rendezvous: the receiver reads the payload, then says FIN, which
 * completes the send. */
static rv_status_t send_rndv(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                             size_t hdr_len, const struct iovec *iov,
                             size_t iovcnt, size_t len, rv_completion_fn cb,
                             void *arg)
{
    vb_op_t *op = vb_op_get(tw, VB_OP_RTS, peer, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    vb_rts_t rts = {0};
    rv_status_t st = rndv_slot_take(tw, op, &rts.cookie);
    if (st != RV_OK)
        goto err_op;
    st = rndv_source(tw, op, iov, iovcnt, len, &rts);
    if (st != RV_OK)
        goto err_slot;
    struct iovec body = {.iov_base = &rts, .iov_len = sizeof(rts)};
    st = send_eager(tw, peer, VB_RTS, hdr, hdr_len, &body, 1, sizeof(rts), len,
                    false);
    if (st != RV_OK)
        goto err_source;
    return RV_INPROGRESS;

err_source:
    if (op->bounce != NULL) {
        rndv_mem_free(tw, op->bounce, op->mr);
        op->mr = NULL;
    }
err_slot:
    rndv_slot_free(tw, (uint32_t)rts.cookie);
err_op:
    vb_op_put(tw, op); /* deregisters the caller's memory, if registered */
    return st;
}

rv_status_t vb_am_send(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                       size_t hdr_len, const struct iovec *iov, size_t iovcnt,
                       unsigned flags, rv_completion_fn cb, void *arg)
{
    size_t len = 0;
    if (peer >= tw->nworkers || hdr_len > VB_MAX_HDR)
        return RV_ERR_INVALID;
    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (sizeof(vb_wire_t) + hdr_len + len <= VB_RXBUF)
        return send_eager(tw, peer, VB_EAGER, hdr, hdr_len, iov, iovcnt, len,
                          len, false);
    /* The receiver drops an RTS announcing more (wire_valid): such a send
     * would never see its FIN. */
    if (len > tw->tp->max_message) {
        rv_error("verbs: a %zu-byte message to worker %u is over the "
                 "largest one the job allows (%zu bytes: "
                 "transport.verbs.max_message)",
                 len, peer, tw->tp->max_message);
        return RV_ERR_INVALID;
    }
    if (flags & RV_AM_SEND_IMMEDIATE)
        return RV_ERR_AGAIN; /* a rendezvous cannot complete now */
    return send_rndv(tw, peer, hdr, hdr_len, iov, iovcnt, len, cb, arg);
}
