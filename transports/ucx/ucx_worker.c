/*
 * UCX workers and endpoints: a rivet worker's UCP worker, its address,
 * its endpoints to every other worker, and its progress. Its active
 * messages are ucx_am_send.c's and ucx_am_recv.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "ucx_internal.h"

/* What a failed ucp_worker_create most likely ran out of, said with the
 * limit and how to raise it: UCX's own lines name the call that failed,
 * not the resource. Its shared-memory transports take a few MiB of
 * /dev/shm per worker for their receive FIFOs and descriptors. */
static void worker_create_hint(ucs_status_t s)
{
    struct statvfs fs;
    if ((s == UCS_ERR_NO_RESOURCE || s == UCS_ERR_NO_MEMORY ||
         s == UCS_ERR_SHMEM_SEGMENT) &&
        statvfs("/dev/shm", &fs) == 0) {
        unsigned long long avail =
            (unsigned long long)fs.f_bavail * fs.f_frsize >> 10;
        unsigned long long size =
            (unsigned long long)fs.f_blocks * fs.f_frsize >> 10;
        rv_error("/dev/shm has %llu KiB free of %llu KiB; UCX's "
                 "shared-memory transports need a few MiB per worker: "
                 "enlarge /dev/shm (mount -o remount,size=...), or leave sm "
                 "out of transport.ucx.tls",
                 avail, size);
    }
}

/* ---------------------------------------------------------------------- */
/* Worker                                                                  */

static void worker_free_arrays(struct rv_tworker *tw)
{
    free(tw->eps);
    free(tw->held);
    free(tw->active);
    free(tw->is_active);
    free(tw->emulate);
    free(tw->emu_dirty);
    free(tw->emu_puts_landing);
    free(tw->emu_flush_waiting);
    free(tw->emu_fence);
    free(tw->emu_deferred);
    free(tw->emu_deferred_tail);
    free(tw->emu_logged);
}

rv_status_t rv_ucx_worker_create(rv_transport_t *tp,
                                 const rv_tworker_params_t *params,
                                 struct rv_tworker **tw_p)
{
    struct rv_tworker *tw = calloc(1, sizeof(*tw));
    ucs_status_t s;

    if (tw == NULL)
        return RV_ERR_NO_MEMORY;
    tw->tp = tp;
    tw->tid = params->tid;
    tw->nworkers = params->nworkers;
    tw->am_recv = params->am_recv;
    tw->am_arg = params->am_arg;
    tw->eps = calloc(params->nworkers, sizeof(*tw->eps));
    tw->held = calloc(params->nworkers, sizeof(*tw->held));
    tw->active = calloc(params->nworkers, sizeof(*tw->active));
    tw->is_active = calloc(params->nworkers, sizeof(*tw->is_active));
    tw->emulate = calloc(params->nworkers, sizeof(*tw->emulate));
    tw->emu_dirty = calloc(params->nworkers, sizeof(*tw->emu_dirty));
    tw->emu_puts_landing =
        calloc(params->nworkers, sizeof(*tw->emu_puts_landing));
    tw->emu_flush_waiting =
        calloc(params->nworkers, sizeof(*tw->emu_flush_waiting));
    tw->emu_fence = calloc(params->nworkers, sizeof(*tw->emu_fence));
    tw->emu_deferred = calloc(params->nworkers, sizeof(*tw->emu_deferred));
    tw->emu_deferred_tail =
        calloc(params->nworkers, sizeof(*tw->emu_deferred_tail));
    if (tw->emu_fence == NULL || tw->emu_deferred == NULL ||
        tw->emu_deferred_tail == NULL || tw->eps == NULL || tw->held == NULL ||
        tw->active == NULL || tw->is_active == NULL || tw->emulate == NULL ||
        tw->emu_dirty == NULL || tw->emu_puts_landing == NULL ||
        tw->emu_flush_waiting == NULL || rv_ucx_emu_worker_init(tw) != RV_OK)
        goto err_free;

    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    s = ucp_worker_create(tp->context, &wp, &tw->worker);
    if (s != UCS_OK) {
        rv_error("cannot create a UCX worker: %s", ucs_status_string(s));
        worker_create_hint(s);
        goto err_free;
    }

    /* Where UCX runs atomics is the same for every worker of the process
     * (one context): its first worker reads it. */
    if (tw->tid % (uint32_t)tp->threads == 0) {
        char *info = rv_ucx_worker_info(tw->worker);
        atomic_store_explicit(&tp->amo_device, rv_ucx_atomics_on_device(info),
                              memory_order_relaxed);
        free(info);
    }

    ucp_am_handler_param_t hp = {
        .field_mask =
            UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
            UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = RV_UCX_AM_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = rv_ucx_am_recv_cb,
        .arg = tw,
    };
    s = ucp_worker_set_am_recv_handler(tw->worker, &hp);
    if (s == UCS_OK) {
        hp.id = RV_UCX_AM_RMA;
        hp.cb = rv_ucx_emu_recv_cb;
        s = ucp_worker_set_am_recv_handler(tw->worker, &hp);
    }
    if (s != UCS_OK) {
        rv_error("cannot set the UCX AM handler: %s", ucs_status_string(s));
        ucp_worker_destroy(tw->worker);
        goto err_free;
    }
    *tw_p = tw;
    return RV_OK;

err_free:
    worker_free_arrays(tw);
    free(tw);
    return RV_ERR_TRANSPORT;
}

void rv_ucx_worker_destroy(struct rv_tworker *tw)
{
    rv_ucx_emu_worker_fini(tw);
    rv_ucx_recv_fini(tw);
    ucp_worker_destroy(tw->worker);
    while (tw->free_ops != NULL) {
        ucx_op_t *op = tw->free_ops;
        tw->free_ops = op->next;
        free(op);
    }
    rv_ucx_recv_free_pools(tw);
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        while (tw->emu_flush_waiting[i] != NULL) {
            ucx_flush_wait_t *fw = tw->emu_flush_waiting[i];
            tw->emu_flush_waiting[i] = fw->next;
            free(fw);
        }
    }
    worker_free_arrays(tw);
    free(tw);
}

rv_status_t rv_ucx_worker_address(struct rv_tworker *tw, void **addr_p,
                                  size_t *len_p)
{
    ucp_address_t *addr;
    size_t len;
    ucs_status_t s = ucp_worker_get_address(tw->worker, &addr, &len);
    if (s != UCS_OK) {
        rv_error("cannot get the UCX worker address: %s", ucs_status_string(s));
        return rv_ucx_status(s);
    }
    *addr_p = addr;
    *len_p = len;
    return RV_OK;
}

void rv_ucx_address_release(struct rv_tworker *tw, void *addr)
{
    ucp_worker_release_address(tw->worker, addr);
}

rv_status_t rv_ucx_connect(struct rv_tworker *tw, uint32_t peer,
                           const void *addr, size_t len)
{
    (void)len;
    if (peer >= tw->nworkers)
        return RV_ERR_INVALID;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address = addr,
    };
    ucs_status_t s = ucp_ep_create(tw->worker, &ep, &tw->eps[peer]);
    if (s != UCS_OK) {
        rv_error("cannot connect to worker %u: %s", peer, ucs_status_string(s));
        return rv_ucx_status(s);
    }
    rv_transport_t *tp = tw->tp;
    int local = (int)(tw->tid % (uint32_t)tp->threads);
    int peer_rank = (int)(peer / (uint32_t)tp->threads);
    rv_rma_emulation_t emu = tp->config.rma_emulation;
    /* The process's first worker describes its endpoint to the first
     * worker of every other process (to its own second one, in a job of
     * one process). */
    bool describe = local == 0 && (tp->size > 1 ? peer_rank != tp->rank &&
                                                      peer % tp->threads == 0
                                                : peer == 1);
    /* The endpoint's lanes are read when auto needs them or the user is
     * told them; on and off apply to every endpoint alike, the described
     * ones included. */
    char *info = emu == RV_RMA_EMU_AUTO || describe
                     ? rv_ucx_ep_info(tw->eps[peer])
                     : NULL;
    tw->emulate[peer] = emu == RV_RMA_EMU_AUTO
                            ? rv_ucx_rma_needs_emulation(info)
                            : emu == RV_RMA_EMU_ON;
    /* At log level info, the lanes of the first endpoint of each class
     * (not one line set per process of a large job). */
    if (describe && info != NULL &&
        rv_ucx_record_lanes(tp, peer_rank, info, tw->emulate[peer]))
        rv_ucx_log_ep_info(peer_rank, info);
    free(info);
    return RV_OK;
}

rv_status_t rv_ucx_disconnect(struct rv_tworker *tw)
{
    void **reqs = calloc(tw->nworkers, sizeof(*reqs));
    unsigned pending = 0;
    if (reqs == NULL)
        return RV_ERR_NO_MEMORY;

    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = 0};
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        if (tw->eps[i] == NULL)
            continue;
        ucs_status_ptr_t r = ucp_ep_close_nbx(tw->eps[i], &p);
        tw->eps[i] = NULL;
        if (UCS_PTR_IS_PTR(r)) {
            reqs[i] = r;
            pending++;
        }
    }

    int64_t t0 = rv_time_ns();
    while (pending > 0) {
        ucp_worker_progress(tw->worker);
        pending = 0;
        for (uint32_t i = 0; i < tw->nworkers; i++) {
            if (reqs[i] == NULL)
                continue;
            if (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS) {
                pending++;
                continue;
            }
            ucp_request_free(reqs[i]);
            reqs[i] = NULL;
        }
        if (pending > 0 && rv_time_ns() - t0 > 5 * (int64_t)1000000000) {
            rv_warn("%u endpoints did not close within 5 s", pending);
            break;
        }
    }
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (reqs[i] != NULL)
            ucp_request_free(reqs[i]);
    free(reqs);
    return pending ? RV_ERR_TIMEOUT : RV_OK;
}

unsigned rv_ucx_progress(struct rv_tworker *tw)
{
    unsigned n = ucp_worker_progress(tw->worker);
    n += tw->completions;
    tw->completions = 0;
    return n + rv_ucx_recv_progress(tw);
}
