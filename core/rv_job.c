/*
 * rv_job_run: worker threads, wire-up and orderly shutdown.
 *
 * The main thread of each process coordinates its workers through stages;
 * only it talks to the bootstrap, while the workers keep progressing so
 * that peers are never left waiting on a worker that stopped polling.
 *
 *   stage 0  workers bind, create their transport worker, publish address
 *   stage 1  main allgathered the job's addresses; workers connect to all
 *            and flush, so that every connection is made
 *   stage 2  every process connected (bootstrap barrier); main queried the
 *            transport's capabilities once; the installed layers
 *            (rv_layer.h) set up each worker's state, in install order
 *   stage 3  every layer is ready everywhere; workers run fn, then the
 *            layers push out what they hold (top layer first), workers
 *            flush and report done, progressing meanwhile
 *   stage 4  every worker of the job is done; the layers run what has
 *            landed; workers disconnect
 *   stage 5  every worker disconnected; the layers free their state;
 *            workers destroy and exit
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv_core.h"
#include "rv_placement.h"

enum {
    STAGE_CONNECT = 1,
    STAGE_START,
    STAGE_RUN,
    STAGE_DISCONNECT,
    STAGE_EXIT
};

typedef struct {
    rv_worker_t *w;
    rv_worker_fn fn;
    void *arg;
} job_thread_arg_t;

/* Reports one step done and waits, progressing, for the main thread. */
static void step(rv_worker_t *w, int *counter, int next_stage)
{
    rv_context_t *ctx = w->ctx;
    pthread_mutex_lock(&ctx->lock);
    (*counter)++;
    pthread_cond_broadcast(&ctx->cond);
    pthread_mutex_unlock(&ctx->lock);
    while (atomic_load_explicit(&ctx->stage_now, memory_order_acquire) <
           next_stage)
        rv_progress(w);
}

static void flush_done(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* Completes everything the worker's endpoints have under way, their
 * connections included. */
static void flush_all(rv_worker_t *w)
{
    rv_sync_t sync;
    rv_sync_init(&sync, 1);
    rv_status_t status =
        w->ctx->ops->flush(w->view.tw, RV_TID_ALL, flush_done, &sync);
    if (status == RV_INPROGRESS)
        rv_sync_wait(w, &sync);
}

static void *worker_main(void *p)
{
    rv_worker_t *w = p;
    rv_context_t *ctx = w->ctx;
    int T = rv_threads(ctx);
    char where[128];
    rv_status_t status;

    rv_log_set_identity(rv_rank(ctx), w->local);
    rv__placement_bind_thread(ctx->core->job.placement, ctx->bs->local_rank, T,
                              w->local, &w->numa_node);
    rv__placement_describe(where, sizeof(where));
    rv_debug("worker %u runs on %s", w->tid, where);

    rv_tworker_params_t params = {
        .tid = w->tid,
        .nworkers = rv_nworkers(ctx),
        .numa_node = w->numa_node,
        .am_recv = rv__msg_recv,
        .am_arg = w,
    };
    w->view.tops = ctx->ops;
    status = ctx->ops->worker_create(ctx->tp, &params, &w->view.tw);
    if (status == RV_OK)
        status = ctx->ops->worker_address(w->view.tw, &ctx->addrs[w->local],
                                          &ctx->addr_lens[w->local]);
    if (status != RV_OK)
        rv_abort(ctx, 1, "cannot create the transport worker");
    step(w, &ctx->nready, STAGE_CONNECT);

    for (uint32_t peer = 0; peer < rv_nworkers(ctx); peer++) {
        const uint8_t *slot = ctx->all_addrs + (size_t)peer * ctx->addr_slot;
        uint64_t len;
        memcpy(&len, slot, sizeof(len));
        status = ctx->ops->connect(w->view.tw, peer, slot + sizeof(len), len);
        if (status != RV_OK)
            rv_abort(ctx, 1, "cannot connect to a peer worker");
    }
    /* Every connection is made before any layer sends: the flush waits
     * until each endpoint is connected, and the workers still progress
     * the others' connections while they wait below. (A call lost at job
     * start, once blamed on UCX's tcp connections, was a layer's message
     * reaching a worker that had not started that layer: see
     * rv__layers_start.) */
    flush_all(w);
    step(w, &ctx->nready, STAGE_START);
    if (rv__layers_start(w) != RV_OK)
        rv_abort(ctx, 1, "a layer cannot start");
    step(w, &ctx->nready, STAGE_RUN);

    w->result = ctx->job_fn(w, ctx->job_arg);
    rv__layers_quiesce(w);

    flush_all(w);
    step(w, &ctx->ndone, STAGE_DISCONNECT);
    rv__layers_drain(w);

    ctx->ops->disconnect(w->view.tw);
    step(w, &ctx->ndone, STAGE_EXIT);
    rv__layers_stop(w);

    ctx->ops->worker_destroy(w->view.tw);
    w->view.tw = NULL;
    rv__coll_fini(w);
    return NULL;
}

/* Waits until *counter reaches want. */
static void wait_count(rv_context_t *ctx, int *counter, int want)
{
    pthread_mutex_lock(&ctx->lock);
    while (*counter < want)
        pthread_cond_wait(&ctx->cond, &ctx->lock);
    pthread_mutex_unlock(&ctx->lock);
}

static void set_stage(rv_context_t *ctx, int stage)
{
    pthread_mutex_lock(&ctx->lock);
    if (stage == STAGE_START) {
        /* Every endpoint is up: what the transport really uses is known.
         * Queried once, here, before the workers run: they only read it. */
        ctx->ops->query(ctx->tp, &ctx->caps);
        ctx->caps_valid = true;
    }
    ctx->stage = stage;
    atomic_store_explicit(&ctx->stage_now, stage, memory_order_release);
    pthread_cond_broadcast(&ctx->cond);
    pthread_mutex_unlock(&ctx->lock);
}

/* Waits for the local workers, then for every process, then moves the
 * workers on to @p stage. */
static void job_step(rv_context_t *ctx, int *counter, int want, int stage)
{
    wait_count(ctx, counter, want);
    if (rv_bootstrap_barrier(ctx) != RV_OK)
        rv_abort(ctx, 1, "bootstrap barrier failed");
    set_stage(ctx, stage);
}

/* What each process says of itself before the addresses: the longest
 * address of its workers, and its host's name. */
typedef struct {
    uint64_t addr_len;
    char host[RV_HOST_NAME_BYTES];
} proc_info_t;

/* A process's host name and rank, sorted to find who shares a host. */
typedef struct {
    const char *host;
    int rank;
} host_key_t;

static int host_key_cmp(const void *a, const void *b)
{
    const host_key_t *x = a, *y = b;
    int c = strncmp(x->host, y->host, RV_HOST_NAME_BYTES);
    return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Numbers the hosts of the job from the processes' host names: host 0 is
 * the host of rank 0, and so on in the order of each host's lowest rank.
 * Processes that share a host name share a host, as an MPI
 * implementation's node-local communicator (MPI_COMM_TYPE_SHARED) has it
 * under a launcher: two network namespaces with their own host names are
 * two hosts. Sorted, not compared pairwise: start-up stays O(P log P). */
static rv_status_t number_hosts(rv_context_t *ctx, const proc_info_t *info)
{
    int P = rv_size(ctx);
    host_key_t *keys = calloc((size_t)P, sizeof(*keys));
    int *leader = calloc((size_t)P, sizeof(*leader));
    free(ctx->host_of);
    ctx->host_of = calloc((size_t)P, sizeof(*ctx->host_of));
    if (keys == NULL || leader == NULL || ctx->host_of == NULL) {
        free(keys);
        free(leader);
        return RV_ERR_NO_MEMORY;
    }
    for (int p = 0; p < P; p++)
        keys[p] = (host_key_t){.host = info[p].host, .rank = p};
    qsort(keys, (size_t)P, sizeof(*keys), host_key_cmp);
    /* leader[rank]: the lowest rank of its host, the first of its run. */
    for (int k = 0; k < P; k++) {
        bool same = k > 0 && strncmp(keys[k - 1].host, keys[k].host,
                                     RV_HOST_NAME_BYTES) == 0;
        leader[keys[k].rank] = same ? leader[keys[k - 1].rank] : keys[k].rank;
    }
    ctx->nhosts = 0;
    for (int p = 0; p < P; p++)
        ctx->host_of[p] =
            leader[p] == p ? ctx->nhosts++ : ctx->host_of[leader[p]];
    free(keys);
    free(leader);
    return RV_OK;
}

/* Allgathers the packed addresses of every worker of the job into
 * ctx->all_addrs: one slot per worker, [u64 len][address]; the hosts of
 * the processes come with the first round. */
static rv_status_t exchange_addresses(rv_context_t *ctx)
{
    int T = rv_threads(ctx), P = rv_size(ctx);
    proc_info_t mine = {0}, *info = calloc((size_t)P, sizeof(*info));
    rv_status_t status;

    if (info == NULL)
        return RV_ERR_NO_MEMORY;
    for (int t = 0; t < T; t++)
        if (ctx->addr_lens[t] > mine.addr_len)
            mine.addr_len = ctx->addr_lens[t];
    /* A name cut at the size keeps apart hosts whose names differ early,
     * as cluster names do (node0017); gethostname leaves it unterminated
     * then, which strncmp above tolerates. */
    if (gethostname(mine.host, sizeof(mine.host)) != 0)
        strcpy(mine.host, "localhost");
    status = rv_bootstrap_allgather(ctx, info, &mine, sizeof(mine));
    if (status == RV_OK)
        status = number_hosts(ctx, info);
    if (status != RV_OK)
        goto out;
    uint64_t max = 0;
    for (int p = 0; p < P; p++)
        max = info[p].addr_len > max ? info[p].addr_len : max;
    ctx->addr_slot = (size_t)(sizeof(uint64_t) + max + 7) & ~(size_t)7;

    size_t local_bytes = (size_t)T * ctx->addr_slot;
    uint8_t *local = calloc(1, local_bytes);
    ctx->all_addrs = malloc(local_bytes * (size_t)P);
    if (local == NULL || ctx->all_addrs == NULL) {
        free(local);
        status = RV_ERR_NO_MEMORY;
        goto out;
    }
    for (int t = 0; t < T; t++) {
        uint64_t len = ctx->addr_lens[t];
        memcpy(local + (size_t)t * ctx->addr_slot, &len, sizeof(len));
        memcpy(local + (size_t)t * ctx->addr_slot + sizeof(len), ctx->addrs[t],
               len);
    }
    status = rv_bootstrap_allgather(ctx, ctx->all_addrs, local, local_bytes);
    free(local);
out:
    free(info);
    return status;
}

rv_status_t rv_job_run(rv_context_t *ctx, rv_worker_fn fn, void *arg)
{
    int T = rv_threads(ctx);
    rv_status_t status;

    ctx->workers = calloc((size_t)T, sizeof(*ctx->workers));
    ctx->addrs = calloc((size_t)T, sizeof(*ctx->addrs));
    ctx->addr_lens = calloc((size_t)T, sizeof(*ctx->addr_lens));
    if (ctx->workers == NULL || ctx->addrs == NULL || ctx->addr_lens == NULL)
        return RV_ERR_NO_MEMORY;
    ctx->stage = 0;
    ctx->nready = ctx->ndone = 0;
    atomic_store(&ctx->stage_now, 0);
    ctx->job_fn = fn;
    ctx->job_arg = arg;

    ctx->caps_valid = false;
    for (int t = 0; t < T; t++) {
        rv_worker_t *w = &ctx->workers[t];
        w->ctx = ctx;
        w->local = t;
        w->tid = rv_tid_make(ctx, rv_rank(ctx), t);
        w->numa_node = -1;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            rv_abort(ctx, 1, "cannot start a worker thread");
    }

    wait_count(ctx, &ctx->nready, T);
    status = exchange_addresses(ctx);
    for (int t = 0; t < T; t++)
        ctx->ops->address_release(ctx->workers[t].view.tw, ctx->addrs[t]);
    if (status != RV_OK)
        rv_abort(ctx, 1, "worker address exchange failed");
    set_stage(ctx, STAGE_CONNECT);
    job_step(ctx, &ctx->nready, 2 * T, STAGE_START);
    job_step(ctx, &ctx->nready, 3 * T, STAGE_RUN);
    job_step(ctx, &ctx->ndone, T, STAGE_DISCONNECT);
    job_step(ctx, &ctx->ndone, 2 * T, STAGE_EXIT);

    status = RV_OK;
    for (int t = 0; t < T; t++) {
        pthread_join(ctx->workers[t].thread, NULL);
        if (ctx->workers[t].result != 0)
            status = RV_ERR_CANCELED;
    }
    free(ctx->all_addrs);
    free(ctx->addrs);
    free(ctx->addr_lens);
    free(ctx->workers);
    ctx->all_addrs = NULL;
    ctx->addrs = NULL;
    ctx->addr_lens = NULL;
    ctx->workers = NULL;
    return status;
}
