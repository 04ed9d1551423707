/*
 * Remote memory: the layer and remote allocation. The layer installs
 * itself in a slot of core on rv_rma_init (after the invocation layer,
 * which it is built on); its calls on a job where it was never
 * initialised fail with an error naming rv_rma_init. rv_remote_alloc
 * and rv_remote_free are calls to the owning worker, which allocates in
 * its NUMA zone. Put, get and atomics are in rma_ops.c.
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
    const rv_transport_caps_t *caps = rv_context_caps(ctx);
    rw->mapped = caps->mem_alloc_mapped;
    rw->amo_loopback = caps->atomics64 && !caps->atomics_cpu_coherent;
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
