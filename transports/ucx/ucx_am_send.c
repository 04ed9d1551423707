/*
 * A UCX worker's send side: a rivet message as one UCP active message
 * (ucx_am_recv.c says what it carries), sent at once when UCX can take it
 * (no request), else with a request of the worker's pool completed by
 * send_done.
 */
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

ucx_op_t *rv_ucx_op_get(struct rv_tworker *tw, rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = tw->free_ops;
    if (op != NULL)
        tw->free_ops = op->next;
    else if ((op = malloc(sizeof(*op))) == NULL)
        return NULL;
    op->tw = tw;
    op->cb = cb;
    op->arg = arg;
    op->result_p = NULL;
    return op;
}

void rv_ucx_op_put(struct rv_tworker *tw, ucx_op_t *op)
{
    op->next = tw->free_ops;
    tw->free_ops = op;
}

/* ---------------------------------------------------------------------- */
/* Send                                                                    */

static void send_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_op_t *op = user_data;
    struct rv_tworker *tw = op->tw;

    if (status != UCS_OK)
        rv_error("message send failed: %s", ucs_status_string(status));
    ucp_request_free(request);
    tw->completions++;
    op->cb(op->arg, rv_ucx_status(status));
    rv_ucx_op_put(tw, op);
}

/* The payload of @p iov as UCP takes it: a contiguous buffer, or an iov
 * datatype over @p dt. */
static void am_payload(const struct iovec *iov, size_t iovcnt, ucp_dt_iov_t *dt,
                       ucp_request_param_t *p, const void **buf_p,
                       size_t *count_p)
{
    *buf_p = iovcnt ? iov[0].iov_base : NULL;
    *count_p = iovcnt ? iov[0].iov_len : 0;
    if (iovcnt <= 1)
        return;
    for (size_t i = 0; i < iovcnt; i++) {
        dt[i].buffer = iov[i].iov_base;
        dt[i].length = iov[i].iov_len;
    }
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p->datatype = ucp_dt_make_iov();
    *buf_p = dt;
    *count_p = iovcnt;
}

/* Fast path: a message that UCX can send right now needs no request
 * state; the header (and iov array) live on the stack. RV_ERR_AGAIN when
 * UCX cannot take it at once. */
static inline rv_status_t am_send_now(struct rv_tworker *tw, uint32_t peer,
                                      const void *hdr, size_t hdr_len,
                                      const struct iovec *iov, size_t iovcnt)
{
    uint8_t h[RV_UCX_MAX_HDR + sizeof(uint32_t)];
    ucp_dt_iov_t dt_iov[RV_UCX_MAX_IOV];
    ucp_request_param_t fp = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};
    const void *buf;
    size_t count;
    am_payload(iov, iovcnt, dt_iov, &fp, &buf, &count);
    memcpy(h, &tw->tid, sizeof(tw->tid));
    memcpy(h + sizeof(tw->tid), hdr, hdr_len);
    /* UCX is not instrumented: a message between threads of a process
     * orders what the sender wrote before it for ThreadSanitizer. */
    RV_TSAN_RELEASE(tw->tp);
    ucs_status_ptr_t r =
        ucp_am_send_nbx(tw->eps[peer], RV_UCX_AM_ID, h,
                        sizeof(tw->tid) + hdr_len, buf, count, &fp);
    if (r == NULL)
        return RV_OK;
    if (UCS_PTR_STATUS(r) == UCS_ERR_NO_RESOURCE)
        return RV_ERR_AGAIN;
    rv_error("cannot send to worker %u: %s", peer,
             ucs_status_string(UCS_PTR_STATUS(r)));
    return rv_ucx_status(UCS_PTR_STATUS(r));
}

rv_status_t rv_ucx_am_send(struct rv_tworker *tw, uint32_t peer,
                           const void *hdr, size_t hdr_len,
                           const struct iovec *iov, size_t iovcnt,
                           unsigned flags, rv_completion_fn cb, void *arg)
{
    if (peer >= tw->nworkers || tw->eps[peer] == NULL)
        return RV_ERR_INVALID;
    if (hdr_len > RV_UCX_MAX_HDR || iovcnt > RV_UCX_MAX_IOV)
        return RV_ERR_INVALID;

    bool immediate = flags & RV_AM_SEND_IMMEDIATE;
    if (immediate ||
        (iovcnt <= 1 && (iovcnt == 0 || iov[0].iov_len <= RV_UCX_FAST_MAX))) {
        rv_status_t st = am_send_now(tw, peer, hdr, hdr_len, iov, iovcnt);
        if (st != RV_ERR_AGAIN || immediate)
            return st;
    }

    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    memcpy(op->hdr, &tw->tid, sizeof(tw->tid));
    memcpy(op->hdr + sizeof(tw->tid), hdr, hdr_len);

    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = send_done,
        .user_data = op,
    };
    const void *buf;
    size_t count;
    am_payload(iov, iovcnt, op->iov, &p, &buf, &count);

    RV_TSAN_RELEASE(tw->tp);
    ucs_status_ptr_t r =
        ucp_am_send_nbx(tw->eps[peer], RV_UCX_AM_ID, op->hdr,
                        sizeof(tw->tid) + hdr_len, buf, count, &p);
    if (r == NULL) {
        rv_ucx_op_put(tw, op);
        return RV_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        rv_ucx_op_put(tw, op);
        rv_error("cannot send to worker %u: %s", peer,
                 ucs_status_string(UCS_PTR_STATUS(r)));
        return rv_ucx_status(UCS_PTR_STATUS(r));
    }
    return RV_INPROGRESS;
}
