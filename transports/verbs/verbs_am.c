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
 */
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
        rv_am_rx_t rx = {.src = src, .hdr = h->hdr, .hdr_len = h->hdr_len,
                         .data = h->data, .len = h->len, .persistent = true};
        tw->events++;
        if (tw->am_recv(tw->am_arg, &rx, h) != RV_INPROGRESS)
            vb_am_release(tw, h);
    }
}

void vb_am_release(rv_tworker_t *tw, void *desc)
{
    vb_held_t *h = desc;
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
static void start_read(rv_tworker_t *tw, const vb_wire_t *m,
                       const uint8_t *hdr, const vb_rts_t *rts)
{
    vb_held_t *h = calloc(1, sizeof(*h));
    vb_op_t *op = vb_op_get(tw, VB_OP_READ, m->src, NULL, h);
    uint32_t lkey = 0, rkey;
    if (h != NULL)
        h->data = rndv_mem(tw, m->len, &lkey, &rkey, &h->mr);
    if (h == NULL || op == NULL || h->data == NULL) {
        rv_error("verbs: no memory for a %u-byte message from worker %u; "
                 "dropped", m->len, m->src);
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
    struct ibv_sge sge = {.addr = (uintptr_t)h->data, .length = m->len,
                          .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)op, .sg_list = &sge,
                             .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
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
        rv_am_rx_t rx = {.src = m->src, .hdr = hdr, .hdr_len = m->hdr_len,
                         .data = (void *)body, .len = m->len};
        tw->am_recv(tw->am_arg, &rx, NULL);
        return;
    }
    vb_held_t *h = calloc(1, sizeof(*h));
    if (h == NULL || (h->data = malloc(m->len ? m->len : 1)) == NULL) {
        free(h);
        rv_error("verbs: no memory to hold a message from worker %u; "
                 "dropped", m->src);
        return;
    }
    h->src = m->src;
    h->ready = true;
    h->len = m->len;
    h->hdr_len = m->hdr_len;
    memcpy(h->hdr, hdr, m->hdr_len);
    memcpy(h->data, body, m->len);
    hold(tw, h);
}

/* A FIN: the receiver has read the payload of rendezvous @p cookie. */
static void on_fin(rv_tworker_t *tw, const uint8_t *hdr)
{
    uint64_t cookie;
    memcpy(&cookie, hdr, sizeof(cookie));
    vb_op_t *op = (vb_op_t *)(uintptr_t)cookie;
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
static bool wire_valid(const rv_tworker_t *tw, const vb_wire_t *m,
                       size_t have)
{
    if (m->src >= tw->nworkers || m->hdr_len > VB_MAX_HDR ||
        m->hdr_len > have)
        return false;
    if (m->type == VB_EAGER && have - m->hdr_len != m->len)
        return false;
    if (m->type == VB_RTS && have - m->hdr_len != sizeof(vb_rts_t))
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
        rv_error("verbs: a %u-byte message, shorter than its header; "
                 "dropped", wc->byte_len);
        goto repost;
    }
    memcpy(&m, buf, sizeof(m));
    const uint8_t *hdr = buf + sizeof(m), *body = hdr + m.hdr_len;
    if (!wire_valid(tw, &m, wc->byte_len - sizeof(m))) {
        rv_error("verbs: malformed message (type %u, %u bytes, from %u); "
                 "dropped", m.type, wc->byte_len, m.src);
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
        on_fin(tw, hdr);
        break;
    case VB_BYE:
        if (!p->bye) {
            p->bye = true;
            tw->byes++;
        }
        break;
    default:
        rv_error("verbs: unknown message type %u from worker %u; dropped",
                 m.type, m.src);
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
    vb_wire_t m = {.src = tw->tid, .type = type, .hdr_len = (uint8_t)hdr_len,
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
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)total,
                          .lkey = lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
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
    vb_rts_t rts = {.cookie = (uintptr_t)op};
    rv_status_t st = rndv_source(tw, op, iov, iovcnt, len, &rts);
    if (st != RV_OK)
        goto err_op;
    struct iovec body = {.iov_base = &rts, .iov_len = sizeof(rts)};
    st = send_eager(tw, peer, VB_RTS, hdr, hdr_len, &body, 1, sizeof(rts),
                    len, false);
    if (st != RV_OK)
        goto err_source;
    return RV_INPROGRESS;

err_source:
    if (op->bounce != NULL) {
        rndv_mem_free(tw, op->bounce, op->mr);
        op->mr = NULL;
    }
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
        return send_eager(tw, peer, VB_EAGER, hdr, hdr_len, iov, iovcnt,
                          len, len, false);
    if (len > UINT32_MAX)
        return RV_ERR_INVALID;
    if (flags & RV_AM_SEND_IMMEDIATE)
        return RV_ERR_AGAIN; /* a rendezvous cannot complete now */
    return send_rndv(tw, peer, hdr, hdr_len, iov, iovcnt, len, cb, arg);
}
