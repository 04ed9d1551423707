/*
 * UCX one-sided operations: put, get, 64-bit atomics, fence and flush.
 */
#include <string.h>

#include "ucx_internal.h"

static void op_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_op_t *op = user_data;
    struct rv_tworker *tw = op->tw;

    if (op->result_p != NULL)
        *op->result_p = op->result;
    ucp_request_free(request);
    tw->completions++;
    op->cb(op->arg, rv_ucx_status(status));
    rv_ucx_op_put(tw, op);
}

/* Finishes posting @p op: immediate completion, error, or in flight. */
static rv_status_t op_posted(struct rv_tworker *tw, ucx_op_t *op,
                             ucs_status_ptr_t r, const char *what,
                             uint32_t peer)
{
    if (r == NULL) {
        if (op->result_p != NULL)
            *op->result_p = op->result;
        rv_ucx_op_put(tw, op);
        return RV_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        rv_ucx_op_put(tw, op);
        rv_error("%s to worker %u failed: %s", what, peer,
                 ucs_status_string(UCS_PTR_STATUS(r)));
        return rv_ucx_status(UCS_PTR_STATUS(r));
    }
    return RV_INPROGRESS;
}

static ucx_op_t *op_start(struct rv_tworker *tw, uint32_t peer,
                          rv_completion_fn cb, void *arg,
                          ucp_request_param_t *p)
{
    if (peer >= tw->nworkers || tw->eps[peer] == NULL)
        return NULL;
    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return NULL;
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = op_done;
    p->user_data = op;
    return op;
}

/*
 * The address here of [raddr, raddr+len) when the peer's region is mapped
 * into this process (shm), else NULL. UCX's mm transports copy such a
 * transfer through their bcopy path, a fragment of at most a segment per
 * call; rivet does the same copy itself in one memcpy, with no request
 * and no callback. Every put and get of a mapped region goes this way, so
 * none is ever in flight inside UCX for a get to overtake.
 */
static uint8_t *mapped_at(const struct rv_tworker *tw, uint32_t peer,
                          const rv_trkey_t *rkey, uint64_t raddr, size_t len)
{
    if (peer >= tw->nworkers || rkey->mapped == NULL || raddr < rkey->base ||
        len > rkey->len || raddr - rkey->base > rkey->len - len)
        return NULL;
    return rkey->mapped + (raddr - rkey->base);
}

void *rv_ucx_rkey_ptr(struct rv_tworker *tw, uint32_t peer, rv_trkey_t *rkey,
                      uint64_t raddr, size_t len)
{
    /* A peer whose RMA is emulated is reached through messages even when
     * its memory is mapped: its writes are applied by its own progress. */
    if (peer < tw->nworkers && tw->emulate[peer])
        return NULL;
    return mapped_at(tw, peer, rkey, raddr, len);
}

rv_status_t rv_ucx_put(struct rv_tworker *tw, uint32_t peer, uint64_t raddr,
                       rv_trkey_t *rkey, const void *src, size_t len,
                       rv_completion_fn cb, void *arg)
{
    if (peer < tw->nworkers && tw->emulate[peer])
        return rv_ucx_emu_put(tw, peer, src, len, raddr, rkey, cb, arg);
    uint8_t *there = mapped_at(tw, peer, rkey, raddr, len);
    if (there != NULL) {
        memcpy(there, src, len);
        return RV_OK;
    }
    ucp_request_param_t p;
    ucx_op_t *op = op_start(tw, peer, cb, arg, &p);
    if (op == NULL)
        return RV_ERR_INVALID;
    return op_posted(
        tw, op, ucp_put_nbx(tw->eps[peer], src, len, raddr, rkey->rkey, &p),
        "put", peer);
}

rv_status_t rv_ucx_get(struct rv_tworker *tw, uint32_t peer, void *dst,
                       size_t len, uint64_t raddr, rv_trkey_t *rkey,
                       rv_completion_fn cb, void *arg)
{
    if (peer < tw->nworkers && tw->emulate[peer])
        return rv_ucx_emu_get(tw, peer, dst, len, raddr, rkey, cb, arg);
    const uint8_t *there = mapped_at(tw, peer, rkey, raddr, len);
    if (there != NULL) {
        memcpy(dst, there, len);
        return RV_OK;
    }
    ucp_request_param_t p;
    ucx_op_t *op = op_start(tw, peer, cb, arg, &p);
    if (op == NULL)
        return RV_ERR_INVALID;
    return op_posted(
        tw, op, ucp_get_nbx(tw->eps[peer], dst, len, raddr, rkey->rkey, &p),
        "get", peer);
}

/* The operand and the result live in the op until completion; the
 * caller's result pointer is written when the operation completes. */
static rv_status_t atomic(struct rv_tworker *tw, uint32_t peer,
                          ucp_atomic_op_t opcode, uint64_t value,
                          uint64_t reply, uint64_t raddr, rv_trkey_t *rkey,
                          uint64_t *result, bool fetch, rv_completion_fn cb,
                          void *arg)
{
    if (peer < tw->nworkers && tw->emulate[peer])
        return rv_ucx_emu_atomic(tw, peer, opcode == UCP_ATOMIC_OP_CSWAP, value,
                                 reply, raddr, rkey, result, cb, arg);
    ucp_request_param_t p;
    ucx_op_t *op = op_start(tw, peer, cb, arg, &p);
    if (op == NULL)
        return RV_ERR_INVALID;
    op->value = value;
    op->result = reply;
    op->result_p = result;
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p.datatype = ucp_dt_make_contig(sizeof(uint64_t));
    if (fetch) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        p.reply_buffer = &op->result;
    }
    return op_posted(tw, op,
                     ucp_atomic_op_nbx(tw->eps[peer], opcode, &op->value, 1,
                                       raddr, rkey->rkey, &p),
                     "atomic", peer);
}

rv_status_t rv_ucx_atomic_fadd64(struct rv_tworker *tw, uint32_t peer,
                                 uint64_t value, uint64_t raddr,
                                 rv_trkey_t *rkey, uint64_t *result,
                                 rv_completion_fn cb, void *arg)
{
    return atomic(tw, peer, UCP_ATOMIC_OP_ADD, value, 0, raddr, rkey, result,
                  result != NULL, cb, arg);
}

rv_status_t rv_ucx_atomic_cswap64(struct rv_tworker *tw, uint32_t peer,
                                  uint64_t compare, uint64_t swap,
                                  uint64_t raddr, rv_trkey_t *rkey,
                                  uint64_t *result, rv_completion_fn cb,
                                  void *arg)
{
    /* UCP: buffer holds the compare value, reply_buffer the value to swap
     * in, which is replaced by the old value. */
    return atomic(tw, peer, UCP_ATOMIC_OP_CSWAP, compare, swap, raddr, rkey,
                  result, true, cb, arg);
}

rv_status_t rv_ucx_fence(struct rv_tworker *tw, uint32_t peer)
{
    /* Emulated operations carry the fence to the target, which holds
     * back what follows until what came before has landed (ucx_emu.c):
     * no round trip here. */
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if ((peer == RV_TID_ALL || peer == i) && tw->emulate[i])
            tw->emu_fence[i] = tw->emu_fence[i] || tw->emu_dirty[i];
    return rv_ucx_status(ucp_worker_fence(tw->worker));
}

rv_status_t rv_ucx_flush(struct rv_tworker *tw, uint32_t peer,
                         rv_completion_fn cb, void *arg)
{
    /* The worker-wide flush covers emulated peers too (ucx_emu.c). */
    if (peer == RV_TID_ALL)
        return rv_ucx_emu_flush_all(tw, cb, arg);
    if (peer < tw->nworkers && tw->emulate[peer])
        return rv_ucx_emu_flush(tw, peer, cb, arg);
    ucp_request_param_t p;
    ucx_op_t *op = op_start(tw, peer, cb, arg, &p);
    if (op == NULL)
        return RV_ERR_INVALID;
    return op_posted(tw, op, ucp_ep_flush_nbx(tw->eps[peer], &p), "flush",
                     peer);
}
