/*
 * Remote memory: allocation in any worker's NUMA zone, put/get and 64-bit
 * atomics on remote pointers.
 *
 * An operation on a pointer of process r goes to worker r*T + (the
 * caller's local index) of that process: every worker of a process can
 * reach its registered memory, and spreading the callers over the
 * target's endpoints keeps one worker's transport from serializing them.
 * The remote key comes from the invocation layer's per-worker cache
 * (am_mem.c). Pointers into the caller's own process need no transport.
 */
#include <string.h>

#include "am_internal.h"
#include "rma_config.h"
#include "rma_internal.h"
#include "rv_rma.h"

static rv_handler_id_t alloc_id, free_id, landing_id;

/* AM Long payloads up to this size travel inside the envelope (below the
 * transports' eager limits: one message, copied once at the target). */
#define AM_LONG_INLINE_MAX 8192

typedef struct {
    uint64_t len;
} alloc_args_t;

typedef struct {
    int32_t status;
    uint32_t reserved;
    rv_rptr_t ptr;
} alloc_ret_t;

static rv_status_t on_alloc(rv_worker_t *w, rv_call_t *call, void *arg)
{
    alloc_args_t a;
    alloc_ret_t r = {.status = RV_ERR_NO_MEMORY};
    (void)arg;
    if (call->args_len == sizeof(a)) {
        memcpy(&a, call->args, sizeof(a));
        if (rv_mem_alloc(w, a.len, &r.ptr) != NULL)
            r.status = RV_OK;
    } else {
        r.status = RV_ERR_INVALID;
    }
    if (call->ret_len >= sizeof(r)) {
        memcpy(call->ret, &r, sizeof(r));
        call->ret_len = sizeof(r);
    }
    return RV_OK;
}

static rv_status_t on_free(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rv_rptr_t p;
    (void)arg;
    if (call->args_len != sizeof(p))
        return RV_ERR_INVALID;
    memcpy(&p, call->args, sizeof(p));
    /* The allocator of the worker that allocated it (thread-safe). */
    rv_mem_general_t *gen = am_region_allocator(am_of(w)->proc, p.region);
    if (gen == NULL) {
        rv_error("rv_rfree: no registration %u in this process", p.region);
        return RV_ERR_INVALID;
    }
    rv_mem_general_free(gen, (void *)(uintptr_t)p.addr);
    return RV_OK;
}

/* AM Long by reassembly: hands out this worker's landing words (one per
 * source worker, registered), made on first request. */
static rv_status_t on_landing(rv_worker_t *w, rv_call_t *call, void *arg)
{
    am_worker_t *aw = am_of(w);
    (void)arg;
    if (aw->landing == NULL) {
        aw->landing = rv_mem_alloc(w, aw->nworkers * sizeof(uint64_t),
                                   &aw->landing_ptr);
        if (aw->landing == NULL)
            return RV_ERR_NO_MEMORY;
        memset(aw->landing, 0, aw->nworkers * sizeof(uint64_t));
    }
    if (call->ret_len >= sizeof(rv_rptr_t)) {
        memcpy(call->ret, &aw->landing_ptr, sizeof(rv_rptr_t));
        call->ret_len = sizeof(rv_rptr_t);
    }
    return RV_OK;
}

/* Registers the layer's handlers with the invocation layer's. */
static rv_status_t rma_register(rv_context_t *ctx)
{
    if (alloc_id != 0)
        return RV_OK;
    rv_status_t st = rv_am_register(ctx, "rivet.rma.alloc", on_alloc, NULL,
                                    &alloc_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.rma.free", on_free, NULL, &free_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.rma.landing", on_landing, NULL,
                            &landing_id);
    if (st == RV_OK)
        st = rma_gptr_register(ctx);
    if (st == RV_OK)
        st = rma_epoch_register(ctx);
    return st;
}

rv_status_t rv_rma_init(rv_context_t *ctx)
{
    return rma_register(ctx);
}

rv_status_t rv_rmalloc(rv_worker_t *w, rv_tid_t owner, size_t len,
                       rv_rptr_t *ptr)
{
    alloc_args_t a = {.len = len};
    alloc_ret_t r = {.status = RV_ERR_TRANSPORT};
    if (alloc_id == 0)
        return RV_ERR_INVALID;
    rv_status_t st = rv_call_return(w, owner, alloc_id, &a, sizeof(a), &r,
                                    sizeof(r), NULL, 0);
    if (st != RV_OK)
        return st;
    if (r.status == RV_OK)
        *ptr = r.ptr;
    return r.status;
}

rv_status_t rv_rfree(rv_worker_t *w, rv_rptr_t ptr)
{
    if (free_id == 0)
        return RV_ERR_INVALID;
    rv_context_t *ctx = rv_worker_context(w);
    rv_tid_t any = rv_tid_make(ctx, (int)ptr.rank, rv_worker_local(w));
    return rv_call(w, any, free_id, &ptr, sizeof(ptr), NULL,
                   RV_NOTIFY_CONSUMED);
}

/* ---------------------------------------------------------------------- */

/* The worker that serves @p p for the caller, and its remote key; NULL
 * *peer_p for memory of the caller's own process. */
static rv_status_t target(am_worker_t *aw, rv_rptr_t p, rv_tid_t *peer_p,
                          rv_trkey_t **rkey_p)
{
    if ((int)p.rank == aw->rank) {
        *rkey_p = NULL;
        return RV_OK;
    }
    if ((int)p.rank >= rv_size(aw->ctx)) {
        rv_error("a remote pointer to rank %u: the job has %d", p.rank,
                 rv_size(aw->ctx));
        return RV_ERR_INVALID;
    }
    *peer_p = rv_tid_make(aw->ctx, (int)p.rank, rv_worker_local(aw->w));
    aw->rma_dirty = true;
    return am_rkey(aw, *peer_p, p.region, rkey_p);
}

/* Accounts a transport operation on @p sync (or waits for it). */
static rv_status_t finish(am_worker_t *aw, rv_status_t st, rv_sync_t *sync,
                          rv_sync_t *local)
{
    if (st == RV_INPROGRESS) {
        if (sync == NULL)
            return rv_sync_wait(aw->w, local);
        return RV_OK;
    }
    if (sync != NULL && st == RV_OK)
        rv_sync_complete(sync, RV_OK); /* the count was raised up front */
    return st;
}

/* Starts an operation: its completion goes to @p sync, or to @p local
 * when the caller waits. */
static rv_sync_t *op_sync(rv_sync_t *sync, rv_sync_t *local)
{
    if (sync == NULL) {
        rv_sync_init(local, 1);
        return local;
    }
    atomic_fetch_add(&sync->pending, 1);
    return sync;
}

/* A put (@p local -> @p p) or a get (@p p -> @p local). */
static rv_status_t xfer(rv_worker_t *w, rv_rptr_t p, void *local, size_t n,
                        bool get, rv_sync_t *sync)
{
    am_worker_t *aw = am_of(w);
    rv_tid_t peer = 0;
    rv_trkey_t *rkey;
    if (aw == NULL)
        return RV_ERR_INVALID;
    rv_status_t st = target(aw, p, &peer, &rkey);
    if (st != RV_OK)
        return st;
    void *there = (void *)(uintptr_t)p.addr;
    if (rkey == NULL) {
        memcpy(get ? local : there, get ? there : local, n);
        return RV_OK;
    }
    rv_sync_t mine, *s = op_sync(sync, &mine);
    const rv_transport_ops_t *ops = aw->ctx->ops;
    st = get ? ops->get(w->tw, peer, local, n, p.addr, rkey, am_sync_done, s)
             : ops->put(w->tw, peer, local, n, p.addr, rkey, am_sync_done,
                        s);
    if (st < 0 && sync != NULL)
        atomic_fetch_sub(&sync->pending, 1);
    return finish(aw, st, sync, &mine);
}

rv_status_t rv_put(rv_worker_t *w, rv_rptr_t dst, const void *src, size_t n,
                   rv_sync_t *sync)
{
    return xfer(w, dst, (void *)src, n, false, sync);
}

rv_status_t rv_get(rv_worker_t *w, void *dst, rv_rptr_t src, size_t n,
                   rv_sync_t *sync)
{
    return xfer(w, src, dst, n, true, sync);
}

static rv_status_t atomic_op(rv_worker_t *w, rv_rptr_t p, bool cswap,
                             uint64_t v1, uint64_t v2, uint64_t *old,
                             rv_sync_t *sync)
{
    am_worker_t *aw = am_of(w);
    rv_tid_t peer = 0;
    rv_trkey_t *rkey;
    if (aw == NULL || p.addr % sizeof(uint64_t) != 0)
        return RV_ERR_INVALID;
    rv_status_t st = target(aw, p, &peer, &rkey);
    if (st != RV_OK)
        return st;
    if (rkey == NULL) {
        /* CPU atomics: atomic with respect to the transport's, which are
         * CPU atomics on mapped memory (shm) or applied by this process
         * (emulation). */
        uint64_t *at = (uint64_t *)(uintptr_t)p.addr, prev;
        if (cswap) {
            prev = v1;
            __atomic_compare_exchange_n(at, &prev, v2, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        } else {
            prev = __atomic_fetch_add(at, v1, __ATOMIC_SEQ_CST);
        }
        if (old != NULL)
            *old = prev;
        return RV_OK;
    }
    rv_sync_t local, *s = op_sync(sync, &local);
    const rv_transport_ops_t *ops = aw->ctx->ops;
    st = cswap ? ops->atomic_cswap64(w->tw, peer, v1, v2, p.addr, rkey, old,
                                     am_sync_done, s)
               : ops->atomic_fadd64(w->tw, peer, v1, p.addr, rkey, old,
                                    am_sync_done, s);
    if (st < 0 && sync != NULL)
        atomic_fetch_sub(&sync->pending, 1);
    return finish(aw, st, sync, &local);
}

rv_status_t rv_atomic_fadd(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old, rv_sync_t *sync)
{
    return atomic_op(w, p, false, value, 0, old, sync);
}

rv_status_t rv_atomic_cswap(rv_worker_t *w, rv_rptr_t p, uint64_t compare,
                            uint64_t swap, uint64_t *old, rv_sync_t *sync)
{
    return atomic_op(w, p, true, compare, swap, old, sync);
}

rv_status_t rv_atomic_swap(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old)
{
    uint64_t seen, prev;
    rv_status_t st = rv_atomic_fadd(w, p, 0, &seen, NULL);
    while (st == RV_OK) {
        st = rv_atomic_cswap(w, p, seen, value, &prev, NULL);
        if (st != RV_OK || prev == seen)
            break;
        seen = prev;
    }
    if (st == RV_OK && old != NULL)
        *old = seen;
    return st;
}

/* ---------------------------------------------------------------------- */
/* AM Long                                                                 */

static void free_word(void *arg, rv_status_t status)
{
    (void)status;
    free(arg);
}

/*
 * reassembly: up to AM_LONG_INLINE_MAX bytes, the payload travels in the
 * envelope and is copied into place before the handler runs (one
 * message). Above, the payload put, a transport fence, a put of the call's
 * sequence number into the target's landing word for this caller, and
 * the envelope (the call, with the buffer by reference and the sequence
 * number) -- all injected back to back, nothing waited for. The target
 * runs the handler once the envelope is there and its landing word has
 * reached the envelope's number: the fence orders the word after the
 * payload on the same endpoint, so the word proves the payload landed,
 * whatever the order of the bytes inside the put. How the fence holds on
 * each transport: on UCX shared memory puts are copies done when the call
 * returns, and ucp_worker_fence orders the rest; over UCX tcp, rivet's
 * RMA emulation carries the fence to the target, which applies the word
 * only after every earlier rendezvous put from the caller has landed; on
 * RDMA, the fence is the ordering of writes on one RC queue pair (a
 * fenced write, or the verbs backend's ordering). No round trip on any.
 *
 * put_sync_send: the payload put, a flush (remote completion: a round
 * trip), then the envelope; the target runs the handler at once.
 */
rv_status_t rv_put_handler(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *src,
                           size_t n, rv_rptr_t dst, rv_sync_t *sync,
                           unsigned flags)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL || dest >= aw->nworkers || n > UINT32_MAX ||
        (int)dst.rank != rv_tid_rank(aw->ctx, dest)) {
        rv_error("rv_put_handler to worker %u: the payload's destination "
                 "must be in that worker's process", dest);
        return RV_ERR_INVALID;
    }
    /* Where memory is mapped into this process (shared memory) a put is a
     * copy done when it returns and a flush costs nothing: both protocols
     * are the same sequence, and the plain one is the cheapest. */
    if ((int)dst.rank == aw->rank || aw->mapped ||
        rma_config(aw->ctx)->am_long_protocol == RV_AMLONG_PUT_SYNC_SEND)
        return rv_call_buffer_put(w, dest, h, args, len, src, dst, n, sync,
                                  flags);

    /* Small payloads ride in the envelope itself, one message, and are
     * copied into place at the target before the handler runs. */
    if (n <= AM_LONG_INLINE_MAX)
        return am_call_copy(w, dest, h, args, len, src, n, dst.addr, sync,
                            flags);
    if (n == 0)
        return am_call_ref(w, dest, h, args, len, dst.addr, 0, 0, AM_BUFPUT,
                           sync, flags);

    rv_tid_t peer = 0;
    rv_trkey_t *pkey, *lkey;
    rv_status_t st = target(aw, dst, &peer, &pkey);
    if (st != RV_OK)
        return st;
    const rv_transport_ops_t *ops = aw->ctx->ops;
    /* The payload: its local completion is the caller's (src reusable). */
    rv_sync_t local, *s = op_sync(sync, &local);
    st = ops->put(w->tw, peer, src, n, dst.addr, pkey, am_sync_done, s);
    if (st < 0) {
        if (sync != NULL)
            atomic_fetch_sub(&sync->pending, 1);
        return st;
    }
    if (st == RV_OK)
        rv_sync_complete(s, RV_OK);
    am_dest_t *d = am_dest(aw, dest);
    if (d == NULL)
        return RV_ERR_NO_MEMORY;
    if (!d->has_landing) {
        rv_status_t st2 = rv_call_return(w, dest, landing_id, NULL, 0,
                                         &d->landing, sizeof(d->landing),
                                         NULL, 0);
        if (st2 != RV_OK)
            return st2;
        d->has_landing = true;
    }
    st = target(aw, d->landing, &peer, &lkey);
    if (st != RV_OK)
        return st;
    uint64_t *word = malloc(sizeof(*word));
    if (word == NULL)
        return RV_ERR_NO_MEMORY;
    uint32_t seq = ++d->long_seq;
    *word = seq;
    rv_status_t st2 = ops->fence(w->tw, peer);
    if (st2 == RV_OK) {
        st2 = ops->put(w->tw, peer, word, sizeof(*word),
                       d->landing.addr + (uint64_t)aw->me * sizeof(uint64_t),
                       lkey, free_word, word);
        if (st2 == RV_OK)
            free(word);
        else if (st2 > 0)
            st2 = RV_OK;
    }
    if (st2 != RV_OK) {
        rv_error("AM Long to worker %u: cannot mark its payload: %s", dest,
                 rv_status_str(st2));
        return st2;
    }
    st2 = am_call_ref(w, dest, h, args, len, dst.addr, n, seq,
                      AM_BUFPUT | AM_LONG, sync, flags);
    if (st2 != RV_OK)
        return st2;
    if (sync == NULL)
        return rv_sync_wait(w, &local);
    return RV_OK;
}
