/*
 * Layer slots: the layers above core, their state and their hooks at the
 * stages of rv_job_run (rv_layer.h).
 */
#include "rv_core.h"

rv_status_t rv_layer_install(rv_context_t *ctx, const rv_layer_ops_t *ops,
                             void *ctx_state, int *slot_p)
{
    int slot = rv_layer_find(ctx, ops);
    if (slot >= 0) {
        *slot_p = slot;
        return RV_OK;
    }
    if (ctx->workers != NULL) {
        rv_error("layer '%s' installed while the job runs; install every "
                 "layer before rv_job_run",
                 ops->name);
        return RV_ERR_INVALID;
    }
    if (ctx->nlayers == RV_LAYER_MAX) {
        rv_error("layer '%s': all %d layer slots are taken", ops->name,
                 RV_LAYER_MAX);
        return RV_ERR_NO_MEMORY;
    }
    slot = ctx->nlayers++;
    ctx->layers[slot] = (rv_layer_slot_t){.ops = ops, .state = ctx_state};
    *slot_p = slot;
    return RV_OK;
}

int rv_layer_find(const rv_context_t *ctx, const rv_layer_ops_t *ops)
{
    for (int i = 0; i < ctx->nlayers; i++)
        if (ctx->layers[i].ops == ops)
            return i;
    return -1;
}

void *rv_layer_context(rv_context_t *ctx, int slot)
{
    return slot >= 0 && slot < ctx->nlayers ? ctx->layers[slot].state : NULL;
}

/* Each layer starts on every worker of the job before any worker starts
 * the next one (a barrier of the core's own messages, whose handlers
 * exist from rv_init, after each start). A layer's state on a worker is
 * made by its start, and what reaches that worker for the layer before
 * then has nowhere to go; yet a worker progresses before its layers have
 * started (waiting for the job's next stage, or in a lower layer's start)
 * while a quicker peer's layers may already send to it. The store's start
 * calibrates with a call to worker 0, which was dropped when worker 0's
 * am had not started (a hang in about one job start in 25 under
 * AddressSanitizer). With the barriers, a layer's start may send through
 * the layers below it: they have started everywhere. */
rv_status_t rv__layers_start(rv_worker_t *w)
{
    rv_context_t *ctx = w->ctx;
    for (int i = 0; i < ctx->nlayers; i++) {
        const rv_layer_ops_t *ops = ctx->layers[i].ops;
        if (ops->worker_start == NULL)
            continue;
        rv_status_t st = ops->worker_start(w);
        if (st == RV_OK)
            st = rv_barrier(w);
        if (st != RV_OK) {
            rv_error("layer '%s' cannot start on worker %u: %s", ops->name,
                     w->tid, rv_status_str(st));
            return st;
        }
    }
    return RV_OK;
}

/* The later stages run from the top layer down: a layer still has the
 * layers it is built on while it quiesces, drains and stops. */
#define LAYERS_DOWN(ctx, hook, arg)                                            \
    for (int i_ = (ctx)->nlayers - 1; i_ >= 0; i_--)                           \
        if ((ctx)->layers[i_].ops->hook != NULL)                               \
    (ctx)->layers[i_].ops->hook(arg)

void rv__layers_quiesce(rv_worker_t *w)
{
    LAYERS_DOWN(w->ctx, worker_quiesce, w);
}

void rv__layers_drain(rv_worker_t *w)
{
    LAYERS_DOWN(w->ctx, worker_drain, w);
}

void rv__layers_stop(rv_worker_t *w)
{
    LAYERS_DOWN(w->ctx, worker_stop, w);
}

void rv__layers_fini(rv_context_t *ctx)
{
    LAYERS_DOWN(ctx, context_fini, ctx);
    ctx->nlayers = 0;
}

int rv_worker_numa_node(const rv_worker_t *w)
{
    return w->numa_node;
}

bool rv_worker_in_callback(const rv_worker_t *w)
{
    return w->in_callback;
}

unsigned rv_worker_progress_depth(const rv_worker_t *w)
{
    return w->progress_depth;
}

unsigned rv_worker_idle_polls(const rv_worker_t *w)
{
    return w->idle_polls;
}

void rv_worker_count_drop(rv_worker_t *w, rv_drop_t why)
{
    if (why == RV_DROP_UNKNOWN_HANDLER)
        w->stats.rx_unknown_handler++;
    else
        w->stats.rx_malformed++;
}
