/*
 * The verbs transport: one-sided operations.
 *
 * Put and get up to VB_ZCOPY_MIN go through bounce buffers (a put is then
 * complete locally at once; a put that fits the QP's inline data goes
 * inline); larger ones register the user's memory for the operation (zero
 * copy). Atomics are IBV_WR_ATOMIC_*, their old value landing in a bounce
 * buffer. A fence is IBV_SEND_FENCE on the next WR to that peer; puts are
 * already ordered by the RC queue pair. A flush RDMA-reads one word of
 * every peer written since the last flush: on an RC QP the read completes
 * only after every earlier write has been placed.
 */
#include <string.h>

#include "verbs_internal.h"

static bool in_range(const rv_trkey_t *k, uint64_t raddr, size_t len)
{
    return raddr >= k->base && raddr - k->base <= k->len &&
           len <= k->len - (raddr - k->base);
}

/* A put that completes locally at once: inline, or from a bounce copy. */
static rv_status_t put_copy(rv_tworker_t *tw, uint32_t peer,
                            struct ibv_send_wr *wr, const void *src, size_t len)
{
    struct ibv_sge *sge = wr->sg_list;
    if (len <= tw->max_inline) {
        sge->addr = (uintptr_t)src;
        wr->send_flags = IBV_SEND_INLINE;
        return vb_post_to(tw, peer, wr, false, NULL);
    }
    void *b;
    rv_mem_unit_t *unit;
    rv_status_t st = vb_bounce(tw, peer, len, &b, &sge->lkey, &unit);
    if (st != RV_OK)
        return st;
    memcpy(b, src, len);
    sge->addr = (uintptr_t)b;
    return vb_post_to(tw, peer, wr, false, unit);
}

/* Points @p op's WR at its local memory: a small get lands in a bounce
 * buffer (copied out on completion), a large transfer uses @p local,
 * registered for the operation. */
static rv_status_t rma_local(rv_tworker_t *tw, vb_op_t *op, uint32_t peer,
                             void *local, size_t len, struct ibv_sge *sge,
                             rv_mem_unit_t **unit_p)
{
    if (len <= VB_ZCOPY_MIN) {
        rv_status_t st = vb_bounce(tw, peer, len ? len : VB_WORD, &op->bounce,
                                   &sge->lkey, unit_p);
        if (st != RV_OK)
            return st;
        op->dst = local;
        op->len = len;
        sge->addr = (uintptr_t)op->bounce;
        return RV_OK;
    }
    op->mr = vb_reg(tw->tp, local, len);
    if (op->mr == NULL)
        return RV_ERR_NO_MEMORY;
    sge->addr = (uintptr_t)local;
    sge->lkey = op->mr->lkey;
    return RV_OK;
}

static rv_status_t rma(rv_tworker_t *tw, uint32_t peer, bool write, void *local,
                       size_t len, uint64_t raddr, rv_trkey_t *rkey,
                       rv_completion_fn cb, void *arg)
{
    if (peer >= tw->nworkers || !in_range(rkey, raddr, len)) {
        rv_error("verbs: %s of %zu bytes at %#llx outside the remote "
                 "region",
                 write ? "put" : "get", len, (unsigned long long)raddr);
        return RV_ERR_INVALID;
    }
    struct ibv_sge sge = {.length = (uint32_t)len};
    struct ibv_send_wr wr = {.sg_list = &sge,
                             .num_sge = len ? 1 : 0,
                             .opcode =
                                 write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ};
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey->rkey;
    if (write) {
        tw->peers[peer].dirty = true;
        if (len <= VB_ZCOPY_MIN)
            return put_copy(tw, peer, &wr, local, len);
    }
    vb_op_t *op = vb_op_get(tw, write ? VB_OP_PUT : VB_OP_GET, peer, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    rv_mem_unit_t *unit = NULL;
    rv_status_t st = rma_local(tw, op, peer, local, len, &sge, &unit);
    if (st != RV_OK)
        goto err_op;
    wr.wr_id = (uintptr_t)op;
    st = vb_post_to(tw, peer, &wr, true, unit);
    if (st != RV_OK)
        goto err_op;
    return RV_INPROGRESS;

err_op:
    vb_op_put(tw, op);
    return st;
}

rv_status_t vb_put(rv_tworker_t *tw, uint32_t peer, uint64_t raddr,
                   rv_trkey_t *rkey, const void *src, size_t len,
                   rv_completion_fn cb, void *arg)
{
    return rma(tw, peer, true, (void *)src, len, raddr, rkey, cb, arg);
}

rv_status_t vb_get(rv_tworker_t *tw, uint32_t peer, void *dst, size_t len,
                   uint64_t raddr, rv_trkey_t *rkey, rv_completion_fn cb,
                   void *arg)
{
    return rma(tw, peer, false, dst, len, raddr, rkey, cb, arg);
}

static rv_status_t atomic(rv_tworker_t *tw, uint32_t peer, bool cswap,
                          uint64_t v1, uint64_t v2, uint64_t raddr,
                          rv_trkey_t *rkey, uint64_t *result,
                          rv_completion_fn cb, void *arg)
{
    if (tw->tp->dev.atomic_cap == IBV_ATOMIC_NONE) {
        rv_error("verbs: %s has no atomic operations", tw->tp->devname);
        return RV_ERR_UNSUPPORTED;
    }
    if (peer >= tw->nworkers || raddr % VB_WORD != 0 ||
        !in_range(rkey, raddr, VB_WORD))
        return RV_ERR_INVALID;
    vb_op_t *op = vb_op_get(tw, VB_OP_ATOMIC, peer, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    void *b;
    rv_mem_unit_t *unit;
    struct ibv_sge sge = {.length = VB_WORD};
    rv_status_t st = vb_bounce(tw, peer, VB_WORD, &b, &sge.lkey, &unit);
    if (st != RV_OK)
        goto err_op;
    sge.addr = (uintptr_t)b;
    op->result = b;
    op->result_p = result;
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)op,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = cswap ? IBV_WR_ATOMIC_CMP_AND_SWP
                                             : IBV_WR_ATOMIC_FETCH_AND_ADD};
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey->rkey;
    wr.wr.atomic.compare_add = v1;
    wr.wr.atomic.swap = v2;
    tw->peers[peer].dirty = true;
    st = vb_post_to(tw, peer, &wr, true, unit);
    if (st != RV_OK)
        goto err_op;
    return RV_INPROGRESS;

err_op:
    vb_op_put(tw, op);
    return st;
}

rv_status_t vb_atomic_fadd64(rv_tworker_t *tw, uint32_t peer, uint64_t value,
                             uint64_t raddr, rv_trkey_t *rkey, uint64_t *result,
                             rv_completion_fn cb, void *arg)
{
    return atomic(tw, peer, false, value, 0, raddr, rkey, result, cb, arg);
}

rv_status_t vb_atomic_cswap64(rv_tworker_t *tw, uint32_t peer, uint64_t compare,
                              uint64_t swap, uint64_t raddr, rv_trkey_t *rkey,
                              uint64_t *result, rv_completion_fn cb, void *arg)
{
    return atomic(tw, peer, true, compare, swap, raddr, rkey, result, cb, arg);
}

rv_status_t vb_fence(rv_tworker_t *tw, uint32_t peer)
{
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (peer == RV_TID_ALL || peer == i)
            tw->peers[i].fence = true;
    return RV_OK;
}

/* Posts @p part of flush @p op: a read of peer @p i's flush word, whose
 * completion (RC order) proves the writes before it placed. The flush
 * counts its parts in op->len. */
static void flush_read(rv_tworker_t *tw, vb_op_t *op, vb_op_t *part, uint32_t i)
{
    vb_peer_t *p = &tw->peers[i];
    struct ibv_sge sge = {.addr = (uintptr_t)tw->flush_word,
                          .length = VB_WORD,
                          .lkey = tw->flush_lkey};
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)part,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_RDMA_READ};
    wr.wr.rdma.remote_addr = p->flush_addr;
    wr.wr.rdma.rkey = p->flush_rkey;
    if (vb_post_to(tw, i, &wr, true, NULL) != RV_OK) {
        vb_op_put(tw, part);
        return;
    }
    p->dirty = false;
    op->len++;
}

rv_status_t vb_flush(rv_tworker_t *tw, uint32_t peer, rv_completion_fn cb,
                     void *arg)
{
    vb_op_t *op = vb_op_get(tw, VB_OP_FLUSH, RV_TID_ALL, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    op->len = 1; /* held until every read is posted */
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        if ((peer != UINT32_MAX && peer != i) || !tw->peers[i].dirty)
            continue;
        vb_op_t *part = vb_op_get(tw, VB_OP_FLUSH_PART, i, NULL, op);
        if (part == NULL)
            break;
        flush_read(tw, op, part, i);
    }
    if (--op->len == 0) {
        vb_op_put(tw, op);
        return RV_OK;
    }
    return RV_INPROGRESS;
}
