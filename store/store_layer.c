/*
 * The object store's slot: installation (after rma and am, which it is
 * built on), the workers' start, progress and stop, and statistics. The
 * calls are in store_api.c, ids in store_id.c, the table in store_obj.c,
 * the directory in store_dir.c, gets and fetches in store_get.c.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_internal.h"

int st_slot = -1;
st_handlers_t st_h;

static const rv_layer_ops_t store_layer;

rv_status_t st_not_initialised(const char *what)
{
    rv_error("%s on a worker of a job without the object store: call "
             "rv_store_init before rv_job_run, from the main thread",
             what);
    return RV_ERR_INVALID;
}

/* ---------------------------------------------------------------------- */
/* The layer                                                               */

static rv_status_t store_worker_start(rv_worker_t *w)
{
    st_worker_t *sw = calloc(1, sizeof(*sw));
    if (sw == NULL)
        return RV_ERR_NO_MEMORY;
    sw->w = w;
    sw->proc = rv_layer_context(rv_worker_context(w), st_slot);
    if (sw->proc->cfg->preallocate) {
        size_t share =
            (sw->proc->capacity + sw->proc->threads - 1) / sw->proc->threads;
        rv_status_t st = rv_mem_reserve(w, share);
        if (st != RV_OK) {
            free(sw);
            return st;
        }
    }
    pthread_mutex_lock(&sw->proc->lock);
    sw->proc->running++;
    pthread_mutex_unlock(&sw->proc->lock);
    if (sw->proc->auto_threshold)
        st_calibrate(w);
    rv_worker_layer_set(w, st_slot, sw);
    return RV_OK;
}

static unsigned store_progress(rv_worker_t *w)
{
    st_worker_t *sw = st_of(w);
    if (sw == NULL || sw->busy)
        return 0;
    /* A step may wait (an RDMA read's first remote key fetch): its
     * progress does not re-enter the gets it is iterating. */
    sw->busy = true;
    st_frees_run(sw);
    st_drops_flush(sw);
    unsigned n = st_gets_progress(sw);
    sw->busy = false;
    return n;
}

/* job.stats (RIVET_STATS): the process's store counters, at the end of
 * the job. */
typedef struct {
    rv_store_stats_t s;
    uint64_t rndv_threshold;
} st_stats_line_t;

#define ST_STAT(_key, _field, _help)                                           \
    {                                                                          \
        .name = _key, .help = _help,                                           \
        .offset = offsetof(st_stats_line_t, _field)                            \
    }
static const rv_stat_t st_stats[] = {
    ST_STAT("store_objects", s.objects, "sealed objects held"),
    ST_STAT("store_bytes", s.bytes, "their bytes (data and metadata)"),
    ST_STAT("store_hits", s.hits, "gets served from this process"),
    ST_STAT("store_fetches_eager", s.fetches_eager,
            "remote objects fetched eagerly"),
    ST_STAT("store_fetches_rndv", s.fetches_rndv,
            "remote objects fetched by RDMA read"),
    ST_STAT("store_evictions", s.evictions, "objects evicted for room"),
    ST_STAT("store_pinned_bytes", s.pinned_bytes,
            "bytes pinned for remote readers"),
    ST_STAT("store_served", s.served, "fetches served to other processes"),
    ST_STAT("store_rndv_threshold", rndv_threshold,
            "size from which a fetch is an RDMA read (store.rndv_threshold)"),
    {.name = NULL},
};
static const rv_stats_table_t st_stats_table = {
    .name = "store",
    .index_key = NULL,
    .help = "process",
    .stats = st_stats,
};
RV_STATS_REGISTER_TABLE(st_stats_table)

static void print_stats(rv_worker_t *w, const st_proc_t *p)
{
    st_stats_line_t l = {.s = p->stats, .rndv_threshold = p->threshold};
    rv_stats_print(
        rv_core_config(rv_context_config(rv_worker_context(w)))->job.stats,
        &st_stats_table, p->rank, 0, &l);
}

/* The job ends: the objects' memory goes with the workers' allocators,
 * so the table is emptied by the last worker to stop. */
static void store_worker_stop(rv_worker_t *w)
{
    st_worker_t *sw = st_of(w);
    if (sw == NULL)
        return;
    st_proc_t *p = sw->proc;
    st_gets_fini(sw);
    st_dir_fini(sw);
    free(sw->drops);
    pthread_mutex_lock(&p->lock);
    st_frees_t *f = &p->frees[rv_worker_local(w)];
    free(f->v);
    *f = (st_frees_t){0};
    if (--p->running == 0) {
        print_stats(w, p);
        st_obj_t *o, *tmp;
        HASH_ITER(hh, p->objs, o, tmp)
        {
            HASH_DELETE(hh, p->objs, o);
            free(o->pinners);
            free(o);
        }
        p->lru_head = p->lru_tail = NULL;
        p->used = 0;
        p->nsubs = 0;
        memset(&p->stats, 0, sizeof(p->stats));
        atomic_store(&p->cal_have_rptr, false);
        atomic_store(&p->cal_results, 0);
    }
    pthread_mutex_unlock(&p->lock);
    rv_worker_layer_set(w, st_slot, NULL);
    free(sw);
}

static void proc_free(st_proc_t *p)
{
    pthread_mutex_destroy(&p->lock);
    free(p->frees);
    free(p->subs);
    free(p);
}

static void store_context_fini(rv_context_t *ctx)
{
    st_proc_t *p = rv_layer_context(ctx, st_slot);
    if (p != NULL)
        proc_free(p);
    st_slot = -1;
}

static const rv_layer_ops_t store_layer = {
    .name = "store",
    .worker_start = store_worker_start,
    .progress = store_progress,
    .worker_stop = store_worker_stop,
    .context_fini = store_context_fini,
};

rv_status_t rv_store_init(rv_context_t *ctx)
{
    if (ctx == NULL)
        return RV_ERR_INVALID;
    if (rv_layer_find(ctx, &store_layer) >= 0)
        return RV_OK;
    rv_status_t st = rv_rma_init(ctx);
    if (st != RV_OK)
        return st;
    const rv_store_config_t *cfg = store_config(ctx);
    st_proc_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return RV_ERR_NO_MEMORY;
    pthread_mutex_init(&p->lock, NULL);
    p->cfg = cfg;
    p->capacity = cfg->capacity;
    p->threads = rv_threads(ctx);
    p->rank = rv_rank(ctx);
    p->frees = calloc((size_t)p->threads, sizeof(*p->frees));
    if (p->frees == NULL)
        st = RV_ERR_NO_MEMORY;
    if (st == RV_OK)
        st = store_parse_threshold(cfg->rndv_threshold, &p->threshold,
                                   &p->auto_threshold);
    if (st == RV_OK)
        st = st_calib_register(ctx);
    if (st == RV_OK)
        st = st_dir_register(ctx);
    if (st == RV_OK)
        st = st_fetch_register(ctx);
    if (st == RV_OK)
        st = rv_layer_install(ctx, &store_layer, p, &st_slot);
    if (st != RV_OK)
        proc_free(p);
    return st;
}
