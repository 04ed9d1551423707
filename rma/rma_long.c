/*
 * AM Long (rv_put_handler) and the get-then-run call (rv_get_handler):
 * calls whose handler must not run before a payload moved by RMA is in
 * place at the target. Both are calls of the invocation layer extended
 * with a call hook of this layer (rv_am_ext.h): the hook runs at the
 * target before the handler, and while it waits the source's later calls
 * wait too, so per-pair FIFO order holds.
 *
 * AM Long has two protocols behind one call (GASNet-EX's AM Long, as
 * described in "GASNet-EX: A High-Performance, Portable Communication
 * Library for Exascale", Bonachea and Hargrove, 2018):
 *
 * reassembly: up to RMA_LONG_INLINE_MAX bytes, the payload travels in the
 * envelope and is copied into place before the handler runs (one
 * message). Above, the payload put, a transport fence, a put of the
 * call's sequence number into the target's landing word for this caller,
 * and the envelope (the call, with the buffer by reference and the
 * sequence number) -- all injected back to back, nothing waited for. The
 * target runs the handler once the envelope is there and its landing word
 * has reached the envelope's number: the fence orders the word after the
 * payload on the same endpoint, so the word proves the payload landed,
 * whatever the order of the bytes inside the put. How the fence holds on
 * each transport: on UCX shared memory puts are copies done when the call
 * returns, and ucp_worker_fence orders the rest; over UCX tcp, rivet's RMA
 * emulation carries the fence to the target, which applies the word only
 * after every earlier rendezvous put from the caller has landed; on RDMA,
 * the fence is the ordering of writes on one RC queue pair (a fenced
 * write, or the verbs backend's ordering). No round trip on any.
 *
 * put_sync_send: the payload put, a flush (remote completion: a round
 * trip), then the envelope; the target runs the handler at once.
 */
#include <stdlib.h>
#include <string.h>

#include "rma_config.h"
#include "rma_internal.h"

/* AM Long payloads up to this size travel inside the envelope (below the
 * transports' eager limits: one message, copied once at the target). */
#define RMA_LONG_INLINE_MAX 8192

static rv_handler_id_t landing_id;

/* Waits for an operation started with rma_sync_done on @p s. */
static rv_status_t op_wait(rv_worker_t *w, rv_status_t st, rv_sync_t *s)
{
    if (st == RV_INPROGRESS)
        return rv_sync_wait(w, s);
    return st;
}

/* Hands out this worker's landing words (one per source worker,
 * registered), made on the first request. */
static rv_status_t on_landing(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rma_worker_t *rw = rma_of(w);
    (void)arg;
    if (rw->landing == NULL) {
        rw->landing =
            rv_mem_alloc(w, rw->nworkers * sizeof(uint64_t), &rw->landing_ptr);
        if (rw->landing == NULL)
            return RV_ERR_NO_MEMORY;
        memset(rw->landing, 0, rw->nworkers * sizeof(uint64_t));
    }
    if (call->ret_len >= sizeof(rv_rptr_t)) {
        memcpy(call->ret, &rw->landing_ptr, sizeof(rv_rptr_t));
        call->ret_len = sizeof(rv_rptr_t);
    }
    return RV_OK;
}

/* The landing word of source @p src, as the fenced puts left it. */
static uint32_t landed(const rma_worker_t *rw, rv_tid_t src)
{
    return (uint32_t)__atomic_load_n(&rw->landing[src], __ATOMIC_ACQUIRE);
}

/* The target's hook of an AM Long by reassembly: waits, in the source's
 * order, until the caller's fenced landing word says the payload is
 * here.
 *
 * How far ahead of the word an envelope can be: the hook holds the
 * source's later calls, so when envelope N runs every envelope before it
 * ran, each after its own word landed: the word is at least N - 1. An
 * envelope further ahead was forged (or its sender broke the protocol),
 * and waiting for it would spin for ever: it is dropped and counted. */
static rv_status_t long_prepare(rv_worker_t *w, rv_am_xrun_t *x, void *arg)
{
    rma_worker_t *rw = rma_of(w);
    (void)arg;
    if (rw == NULL || rw->landing == NULL) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped an AM Long from worker %u that came before its "
                "set-up",
                x->src);
        return RV_ERR_INVALID;
    }
    if (x->src >= rw->nworkers || (int32_t)(x->word - landed(rw, x->src)) > 1) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped an AM Long from worker %u that names payload %u, "
                "past the next one this worker can wait for (%u)",
                x->src, x->word,
                x->src < rw->nworkers ? landed(rw, x->src) + 1 : 0);
        return RV_ERR_INVALID;
    }
    while ((int32_t)(landed(rw, x->src) - x->word) < 0)
        rv_progress(w);
    return RV_OK;
}

/* The target's hook of rv_get_handler: reads the caller's buffer into a
 * buffer of its own, which the handler sees. */
static rv_status_t get_prepare(rv_worker_t *w, rv_am_xrun_t *x, void *arg)
{
    rma_worker_t *rw = rma_of(w);
    (void)arg;
    uint8_t *buf = malloc(x->len ? x->len : 1);
    rv_status_t st = buf != NULL && rw != NULL ? RV_OK : RV_ERR_NO_MEMORY;
    if (st == RV_OK && rv_tid_rank(rw->ctx, x->src) == rw->rank) {
        /* The caller's buffer is in this process: read in place, once
         * the address is known to be registered memory. */
        if (rma_region_holds(rw->proc, x->addr, x->len))
            memcpy(buf, (const void *)(uintptr_t)x->addr, x->len);
        else
            st = RV_ERR_INVALID;
    } else if (st == RV_OK) {
        rv_trkey_t *rkey;
        st = rma_rkey(rw, x->src, x->word, &rkey);
        if (st == RV_OK) {
            rv_sync_t s;
            rv_sync_init(&s, 1);
            st = op_wait(w,
                         rv_tw_get(w, x->src, buf, x->len, x->addr, rkey,
                                   rma_sync_done, &s),
                         &s);
        }
    }
    if (st != RV_OK) {
        rv_error("a call from worker %u: cannot read its %u-byte buffer: "
                 "%s; the call is dropped",
                 x->src, x->len, rv_status_str(st));
        free(buf);
        return st;
    }
    x->buf = buf;
    x->buf_len = x->len;
    x->hook_data = buf;
    return RV_OK;
}

static void get_finish(rv_worker_t *w, rv_am_xrun_t *x, void *arg)
{
    (void)w;
    (void)arg;
    free(x->hook_data);
}

rv_status_t rma_long_register(rv_context_t *ctx, rma_proc_t *proc)
{
    rv_status_t st =
        rv_am_register(ctx, "rivet.rma.landing", on_landing, NULL, &landing_id);
    rv_am_hook_t lh = {.name = "rivet.rma.long", .prepare = long_prepare};
    rv_am_hook_t gh = {
        .name = "rivet.rma.get", .prepare = get_prepare, .finish = get_finish};
    if (st == RV_OK)
        st = rv_am_hook_register(ctx, &lh, &proc->long_hook);
    if (st == RV_OK)
        st = rv_am_hook_register(ctx, &gh, &proc->get_hook);
    return st;
}

void rma_long_stop(rma_worker_t *rw)
{
    /* The landing words are registered memory of the worker's allocator,
     * destroyed with it. */
    rw->landing = NULL;
}

/* put_sync_send, and every case where the put is done when it returns:
 * the payload, completed at the target, then the call. */
static rv_status_t long_sync(rma_worker_t *rw, rv_tid_t dest, rv_handler_id_t h,
                             const void *args, size_t len, rv_rptr_t dst,
                             const void *src, size_t n, rv_sync_t *sync,
                             unsigned flags)
{
    rv_worker_t *w = rw->w;
    if (dst.rank == rw->rank) {
        memcpy((void *)(uintptr_t)dst.addr, src, n);
    } else if (n > 0) {
        rv_trkey_t *rkey;
        rv_status_t st = rma_rkey(rw, dest, dst.region, &rkey);
        rv_sync_t s;
        if (st == RV_OK) {
            rv_sync_init(&s, 1);
            st = op_wait(
                w,
                rv_tw_put(w, dest, dst.addr, rkey, src, n, rma_sync_done, &s),
                &s);
        }
        if (st == RV_OK) {
            rv_sync_init(&s, 1);
            st = op_wait(w, rv_tw_flush(w, dest, rma_sync_done, &s), &s);
        }
        if (st != RV_OK)
            return st;
    }
    rv_am_xcall_t x = {
        .mode = RV_AM_X_REF, .addr = dst.addr, .len = (uint32_t)n};
    return rv_am_call_x(w, dest, h, args, len, NULL, 0, &x, sync, flags);
}

/* The landing words of @p dest, fetched on the first AM Long to it. */
static rv_status_t landing_of(rma_worker_t *rw, rv_tid_t dest,
                              rma_long_dest_t **d_p)
{
    rma_long_dest_t *d = &rw->long_dests[dest];
    if (!d->has_landing) {
        rv_status_t st =
            rv_call_return(rw->w, dest, landing_id, NULL, 0, &d->landing,
                           sizeof(d->landing), NULL, 0);
        if (st != RV_OK)
            return st;
        d->has_landing = true;
    }
    *d_p = d;
    return RV_OK;
}

static void free_word(void *arg, rv_status_t status)
{
    (void)status;
    free(arg);
}

/* Marks the payload sent to @p dest landed: a fence, then the next
 * sequence number into the target's landing word for this caller. */
static rv_status_t long_mark(rma_worker_t *rw, rv_tid_t dest, uint32_t *seq_p)
{
    rma_long_dest_t *d;
    rv_tid_t peer = 0;
    rv_trkey_t *lkey;
    rv_status_t st = landing_of(rw, dest, &d);
    if (st == RV_OK)
        st = rma_target(rw, d->landing, &peer, &lkey);
    if (st != RV_OK)
        return st;
    uint64_t *word = malloc(sizeof(*word));
    if (word == NULL)
        return RV_ERR_NO_MEMORY;
    *seq_p = ++d->seq;
    *word = *seq_p;
    st = rv_tw_fence(rw->w, peer);
    if (st == RV_OK) {
        st = rv_tw_put(rw->w, peer,
                       d->landing.addr + (uint64_t)rw->me * sizeof(uint64_t),
                       lkey, word, sizeof(*word), free_word, word);
        if (st == RV_OK)
            free(word);
        else if (st > 0)
            st = RV_OK;
    } else {
        free(word);
    }
    if (st != RV_OK)
        rv_error("AM Long to worker %u: cannot mark its payload: %s", dest,
                 rv_status_str(st));
    return st;
}

/* reassembly above RMA_LONG_INLINE_MAX: payload, fence, landing word and
 * envelope back to back. */
static rv_status_t long_reassembly(rma_worker_t *rw, rv_tid_t dest,
                                   rv_handler_id_t h, const void *args,
                                   size_t len, rv_rptr_t dst, const void *src,
                                   size_t n, rv_sync_t *sync, unsigned flags)
{
    rv_worker_t *w = rw->w;
    rv_tid_t peer = 0;
    rv_trkey_t *pkey;
    rv_status_t st = rma_target(rw, dst, &peer, &pkey);
    if (st != RV_OK)
        return st;
    /* The payload: its local completion is the caller's (src reusable). */
    rv_sync_t local, *s = sync;
    if (sync == NULL)
        rv_sync_init(s = &local, 1);
    else
        atomic_fetch_add(&sync->pending, 1);
    st = rv_tw_put(w, peer, dst.addr, pkey, src, n, rma_sync_done, s);
    if (st < 0) {
        if (sync != NULL)
            atomic_fetch_sub(&sync->pending, 1);
        return st;
    }
    if (st == RV_OK)
        rv_sync_complete(s, RV_OK);
    uint32_t seq;
    st = long_mark(rw, dest, &seq);
    if (st != RV_OK)
        return st;
    rv_am_xcall_t x = {.mode = RV_AM_X_REF | RV_AM_X_HOOK,
                       .hook = rw->proc->long_hook,
                       .addr = dst.addr,
                       .len = (uint32_t)n,
                       .word = seq};
    st = rv_am_call_x(w, dest, h, args, len, NULL, 0, &x, sync, flags);
    if (st != RV_OK)
        return st;
    return sync == NULL ? rv_sync_wait(w, &local) : RV_OK;
}

rv_status_t rv_put_handler(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, rv_rptr_t dst,
                           const void *src, size_t n, rv_sync_t *sync,
                           unsigned flags)
{
    rma_worker_t *rw = rma_of(w);
    if (rw == NULL)
        return rma_not_initialised("rv_put_handler");
    if (dest >= rw->nworkers || n > UINT32_MAX ||
        dst.rank != rv_tid_rank(rw->ctx, dest)) {
        rv_error("rv_put_handler to worker %u: the payload's destination "
                 "must be in that worker's process",
                 dest);
        return RV_ERR_INVALID;
    }
    /* Where memory is mapped into this process (shared memory) a put is a
     * copy done when it returns and a flush costs nothing: both protocols
     * are the same sequence, and the plain one is the cheapest. */
    if (dst.rank == rw->rank || rw->mapped ||
        rma_config(rw->ctx)->am_long_protocol == RV_AMLONG_PUT_SYNC_SEND)
        return long_sync(rw, dest, h, args, len, dst, src, n, sync, flags);
    /* Small payloads ride in the envelope itself, one message, and are
     * copied into place at the target before the handler runs. */
    if (n <= RMA_LONG_INLINE_MAX) {
        rv_am_xcall_t x = {.mode = RV_AM_X_PLACE, .addr = dst.addr};
        return rv_am_call_x(w, dest, h, args, len, src, n, &x, sync, flags);
    }
    return long_reassembly(rw, dest, h, args, len, dst, src, n, sync, flags);
}

rv_status_t rv_get_handler(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, rv_rptr_t src,
                           size_t n, rv_sync_t *sync, unsigned flags)
{
    rma_worker_t *rw = rma_of(w);
    if (rw == NULL)
        return rma_not_initialised("rv_get_handler");
    if (src.rank != rw->rank || n > UINT32_MAX) {
        rv_error("rv_get_handler: the buffer must be registered memory of "
                 "the calling process (rv_mem_alloc)");
        return RV_ERR_INVALID;
    }
    /* The source is reusable once the target has read it: only the
     * target knows, so the call always reports back. */
    rv_am_xcall_t x = {.mode = RV_AM_X_HOOK,
                       .hook = rw->proc->get_hook,
                       .addr = src.addr,
                       .len = (uint32_t)n,
                       .word = src.region};
    return rv_am_call_x(w, dest, h, args, len, NULL, 0, &x, sync,
                        flags | RV_NOTIFY_CONSUMED);
}
