/*
 * Remote memory: allocation in any worker's NUMA zone, put/get and 64-bit
 * atomics on remote pointers.
 *
 * An operation on a pointer of process r goes to worker r*T + (the
 * caller's local index) of that process: every worker of a process can
 * reach its registered memory, and spreading the callers over the
 * target's endpoints keeps one worker's transport from serializing them.
 * The remote key comes from the worker's cache (rma_mem.c). Pointers
 * into the caller's own process need no transport.
 *
 * The layer installs itself in a slot of core on rv_rma_init (after the
 * invocation layer, which it is built on); its calls on a job where it
 * was never initialised fail with an error naming rv_rma_init.
 */
#include <string.h>

#include <stdlib.h>

#include "rma_internal.h"

int rma_slot = -1;
static rv_handler_id_t alloc_id, free_id;

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
    rv_mem_general_t *gen = rma_region_allocator(rma_of(w)->proc, p.region);
    if (gen == NULL) {
        rv_error("rv_remote_free: no registration %u in this process",
                 p.region);
        return RV_ERR_INVALID;
    }
    rv_mem_general_free(gen, (void *)(uintptr_t)p.addr);
    return RV_OK;
}

rv_status_t rma_not_initialised(const char *what)
{
    rv_error("%s on a worker of a job without the remote memory layer: "
             "call rv_rma_init before rv_job_run, from the main thread",
             what);
    return RV_ERR_INVALID;
}

void rma_sync_done(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* rv_flush's part: one-sided operations completed at their targets. */
static rv_status_t rma_flush(rv_worker_t *w, rv_tid_t dest, void *arg)
{
    rma_worker_t *rw = rma_of(w);
    (void)arg;
    if (rw == NULL || !rw->dirty)
        return RV_OK;
    rv_sync_t s;
    rv_sync_init(&s, 1);
    rv_status_t st = rv_tw_flush(w, dest, rma_sync_done, &s);
    if (st == RV_INPROGRESS)
        st = rv_sync_wait(w, &s);
    if (st == RV_OK && dest == RV_TID_ALL)
        rw->dirty = false;
    return st;
}

static void worker_free(rma_worker_t *rw)
{
    free(rw->long_dests);
    free(rw);
}

static rv_status_t rma_worker_start(rv_worker_t *w)
{
    rv_context_t *ctx = rv_worker_context(w);
    rma_worker_t *rw = calloc(1, sizeof(*rw));
    if (rw == NULL)
        return RV_ERR_NO_MEMORY;
    rw->w = w;
    rw->ctx = ctx;
    rw->proc = rv_layer_context(ctx, rma_slot);
    rw->me = rv_worker_tid(w);
    rw->nworkers = rv_nworkers(ctx);
    rw->rank = rv_rank(ctx);
    rw->mapped = rv_context_caps(ctx)->mem_alloc_mapped;
    rw->long_dests = calloc(rw->nworkers, sizeof(*rw->long_dests));
    if (rw->long_dests == NULL)
        goto err_free;
    if (rma_mem_start(rw) != RV_OK)
        goto err_free;
    pthread_mutex_lock(&rw->proc->lock);
    rw->proc->workers[rv_worker_local(w)] = rw;
    pthread_mutex_unlock(&rw->proc->lock);
    rv_worker_layer_set(w, rma_slot, rw);
    return RV_OK;

err_free:
    rv_error("worker %u: cannot set up the remote memory layer", rw->me);
    worker_free(rw);
    return RV_ERR_NO_MEMORY;
}

static void rma_worker_stop(rv_worker_t *w)
{
    rma_worker_t *rw = rma_of(w);
    if (rw == NULL)
        return;
    pthread_mutex_lock(&rw->proc->lock);
    rw->proc->workers[rv_worker_local(w)] = NULL;
    pthread_mutex_unlock(&rw->proc->lock);
    rma_long_stop(rw);
    rma_mem_stop(rw);
    worker_free(rw);
    rv_worker_layer_set(w, rma_slot, NULL);
}

static void proc_free(rma_proc_t *proc)
{
    rma_proc_mem_fini(proc);
    pthread_mutex_destroy(&proc->lock);
    free(proc->workers);
    free(proc);
}

static void rma_context_fini(rv_context_t *ctx)
{
    rma_proc_t *proc = rv_layer_context(ctx, rma_slot);
    if (proc != NULL)
        proc_free(proc);
    rma_slot = -1;
}

static const rv_layer_ops_t rma_layer = {
    .name = "rma",
    .worker_start = rma_worker_start,
    .worker_stop = rma_worker_stop,
    .context_fini = rma_context_fini,
};

/* AM Long and rv_put_handler name the target's memory by address: a call
 * from another process is run only when it names registered memory. */
static bool rma_xcheck(rv_worker_t *w, uint64_t addr, uint64_t len, void *arg)
{
    (void)w;
    return rma_region_holds(arg, addr, len);
}

/* The layer's handlers, call hooks and flush hook, and its parts'. */
static rv_status_t rma_register(rv_context_t *ctx, rma_proc_t *proc)
{
    rv_status_t st =
        rv_am_register(ctx, "rivet.rma.alloc", on_alloc, NULL, &alloc_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.rma.free", on_free, NULL, &free_id);
    if (st == RV_OK)
        st = rma_mem_register(ctx);
    if (st == RV_OK)
        st = rma_long_register(ctx, proc);
    if (st == RV_OK)
        st = rv_am_flush_hook_register(ctx, rma_flush, NULL);
    if (st == RV_OK)
        st = rv_am_xcheck_register(ctx, rma_xcheck, proc);
    if (st == RV_OK)
        st = rma_gptr_register(ctx);
    if (st == RV_OK)
        st = rma_epoch_register(ctx);
    return st;
}

rv_status_t rv_rma_init(rv_context_t *ctx)
{
    if (ctx == NULL)
        return RV_ERR_INVALID;
    if (rv_layer_find(ctx, &rma_layer) >= 0)
        return RV_OK;
    rv_status_t st = rv_am_init(ctx);
    if (st != RV_OK)
        return st;
    rma_proc_t *proc = calloc(1, sizeof(*proc));
    if (proc == NULL)
        return RV_ERR_NO_MEMORY;
    pthread_mutex_init(&proc->lock, NULL);
    proc->threads = rv_threads(ctx);
    proc->workers = calloc((size_t)proc->threads, sizeof(*proc->workers));
    if (proc->workers == NULL) {
        st = RV_ERR_NO_MEMORY;
        goto err_free;
    }
    st = rma_register(ctx, proc);
    if (st != RV_OK)
        goto err_free;
    st = rv_layer_install(ctx, &rma_layer, proc, &rma_slot);
    if (st != RV_OK)
        goto err_free;
    return RV_OK;

err_free:
    proc_free(proc);
    return st;
}

rv_status_t rv_remote_alloc(rv_worker_t *w, rv_tid_t owner, size_t len,
                            rv_rptr_t *ptr)
{
    alloc_args_t a = {.len = len};
    alloc_ret_t r = {.status = RV_ERR_TRANSPORT};
    if (rma_of(w) == NULL)
        return rma_not_initialised("rv_remote_alloc");
    rv_status_t st = rv_call_return(w, owner, alloc_id, &a, sizeof(a), &r,
                                    sizeof(r), NULL, 0);
    if (st != RV_OK)
        return st;
    if (r.status == RV_OK)
        *ptr = r.ptr;
    return r.status;
}

rv_status_t rv_remote_free(rv_worker_t *w, rv_rptr_t ptr)
{
    if (rma_of(w) == NULL)
        return rma_not_initialised("rv_remote_free");
    rv_context_t *ctx = rv_worker_context(w);
    rv_tid_t any = rv_tid_make(ctx, (int)ptr.rank, rv_worker_local(w));
    return rv_call(w, any, free_id, &ptr, sizeof(ptr), NULL,
                   RV_NOTIFY_CONSUMED);
}

/* ---------------------------------------------------------------------- */

rv_status_t rma_target(rma_worker_t *rw, rv_rptr_t p, rv_tid_t *peer_p,
                       rv_trkey_t **rkey_p)
{
    if (p.rank == rw->rank) {
        *rkey_p = NULL;
        return RV_OK;
    }
    if (p.rank < 0 || p.rank >= rv_size(rw->ctx)) {
        rv_error("a remote pointer to rank %d: the job has %d", p.rank,
                 rv_size(rw->ctx));
        return RV_ERR_INVALID;
    }
    *peer_p = rv_tid_make(rw->ctx, p.rank, rv_worker_local(rw->w));
    rw->dirty = true;
    return rma_rkey(rw, *peer_p, p.region, rkey_p);
}

/* Accounts a transport operation on @p sync (or waits for it). */
static rv_status_t finish(rma_worker_t *rw, rv_status_t st, rv_sync_t *sync,
                          rv_sync_t *local)
{
    if (st == RV_INPROGRESS) {
        if (sync == NULL)
            return rv_sync_wait(rw->w, local);
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
    rma_worker_t *rw = rma_of(w);
    rv_tid_t peer = 0;
    rv_trkey_t *rkey;
    if (rw == NULL)
        return rma_not_initialised(get ? "rv_get" : "rv_put");
    rv_status_t st = rma_target(rw, p, &peer, &rkey);
    if (st != RV_OK)
        return st;
    void *there = (void *)(uintptr_t)p.addr;
    if (rkey == NULL) {
        memcpy(get ? local : there, get ? there : local, n);
        return RV_OK;
    }
    rv_sync_t mine, *s = op_sync(sync, &mine);
    st = get ? rv_tw_get(w, peer, local, n, p.addr, rkey, rma_sync_done, s)
             : rv_tw_put(w, peer, p.addr, rkey, local, n, rma_sync_done, s);
    if (st < 0 && sync != NULL)
        atomic_fetch_sub(&sync->pending, 1);
    return finish(rw, st, sync, &mine);
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
    rma_worker_t *rw = rma_of(w);
    rv_tid_t peer = 0;
    rv_trkey_t *rkey;
    if (rw == NULL)
        return rma_not_initialised("an atomic");
    if (p.addr % sizeof(uint64_t) != 0)
        return RV_ERR_INVALID;
    rv_status_t st = rma_target(rw, p, &peer, &rkey);
    if (st != RV_OK)
        return st;
    if (rkey == NULL) {
        /* CPU atomics: atomic with respect to the transport's, which are
         * CPU atomics on mapped memory (shm) or applied by this process
         * (emulation). */
        uint64_t *at = (uint64_t *)(uintptr_t)p.addr, prev;
        if (cswap) {
            prev = v1;
            __atomic_compare_exchange_n(at, &prev, v2, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
        } else {
            prev = __atomic_fetch_add(at, v1, __ATOMIC_SEQ_CST);
        }
        if (old != NULL)
            *old = prev;
        return RV_OK;
    }
    rv_sync_t local, *s = op_sync(sync, &local);
    st = cswap ? rv_tw_atomic_cswap64(w, peer, v1, v2, p.addr, rkey, old,
                                      rma_sync_done, s)
               : rv_tw_atomic_fadd64(w, peer, v1, p.addr, rkey, old,
                                     rma_sync_done, s);
    if (st < 0 && sync != NULL)
        atomic_fetch_sub(&sync->pending, 1);
    return finish(rw, st, sync, &local);
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
