/*
 * The object store's calls (rv_store.h): create, seal and abort on the
 * creating process; get, release, delete and contains on any; the
 * subscriptions and the counters.
 */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* The worker's store state, or NULL with the error logged. */
static st_worker_t *store_of(rv_worker_t *w, const char *what)
{
    st_worker_t *sw = w ? st_of(w) : NULL;
    if (sw == NULL) {
        st_not_initialised(what);
        return NULL;
    }
    if (rv_worker_progress_depth(w) > 0 || rv_worker_in_callback(w)) {
        rv_error("%s called from a handler; the store's calls wait, and "
                 "are made from the worker's own code",
                 what);
        return NULL;
    }
    return sw;
}

static void log_id(const char *what, const rv_object_id_t *id, const char *why)
{
    char hex[41];
    rv_object_id_to_hex(id, hex);
    rv_error("%s: object %s %s", what, hex, why);
}

rv_status_t rv_store_create(rv_worker_t *w, const rv_object_id_t *id,
                            size_t data_size, const void *meta,
                            size_t meta_size, void **data)
{
    st_worker_t *sw = store_of(w, "rv_store_create");
    if (sw == NULL)
        return RV_ERR_INVALID;
    if (id == NULL || data == NULL || meta_size > ST_META_MAX ||
        (meta_size > 0 && meta == NULL) || data_size > SIZE_MAX / 2) {
        rv_error("rv_store_create: bad arguments (metadata of at most %zu "
                 "bytes)",
                 ST_META_MAX);
        return RV_ERR_INVALID;
    }
    st_proc_t *p = sw->proc;
    size_t total = data_size + meta_size;
    pthread_mutex_lock(&p->lock);
    rv_status_t st = st_find(p, id) ? RV_ERR_EXISTS : st_reserve(sw, total);
    pthread_mutex_unlock(&p->lock);
    st_drops_flush(sw);
    if (st == RV_ERR_EXISTS)
        log_id("rv_store_create", id, "exists in this process already");
    if (st != RV_OK)
        return st;

    rv_rptr_t rptr;
    st_obj_t *o = calloc(1, sizeof(*o));
    uint8_t *base = o ? rv_mem_alloc(w, ST_HEAD + total, &rptr) : NULL;
    pthread_mutex_lock(&p->lock);
    if (base == NULL || st_find(p, id) != NULL) {
        /* Out of memory, or another thread of this process created it
         * meanwhile. */
        st = base == NULL ? RV_ERR_NO_MEMORY : RV_ERR_EXISTS;
        p->used -= total;
    } else {
        *o = (st_obj_t){.id = *id,
                        .state = ST_CREATED,
                        .base = base,
                        .mem = base + ST_HEAD,
                        .data_size = data_size,
                        .meta_size = meta_size,
                        .rptr = rv_rptr_add(rptr, ST_HEAD),
                        .alloc_local = rv_worker_local(w),
                        .refs = 1};
        if (meta_size > 0)
            memcpy(o->mem + data_size, meta, meta_size);
        ST_HASH_ADD(p->objs, id.bytes, RV_OBJECT_ID_SIZE, o);
    }
    pthread_mutex_unlock(&p->lock);
    if (st != RV_OK) {
        if (base != NULL)
            rv_mem_free(w, base);
        free(o);
        if (st == RV_ERR_EXISTS)
            log_id("rv_store_create", id, "exists in this process already");
        return st;
    }
    *data = o->mem;
    return RV_OK;
}

rv_status_t rv_store_seal(rv_worker_t *w, const rv_object_id_t *id)
{
    st_worker_t *sw = store_of(w, "rv_store_seal");
    if (sw == NULL || id == NULL)
        return RV_ERR_INVALID;
    st_proc_t *p = sw->proc;
    st_obj_t copy;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, id);
    bool ok = o != NULL && o->state == ST_CREATED;
    if (ok) {
        o->state = ST_SEALED;
        o->located = true;
        o->refs--; /* the creator's */
        p->stats.objects++;
        p->stats.bytes += o->data_size + o->meta_size;
        st_unused_check(sw, o);
        copy = *o;
    }
    pthread_mutex_unlock(&p->lock);
    if (!ok) {
        log_id("rv_store_seal", id,
               "was not created (and left unsealed) "
               "by this process");
        return RV_ERR_NOT_FOUND;
    }
    st_tell_home(sw, id, &copy, true);
    st_tell_subscribers(sw, &copy);
    return RV_OK;
}

rv_status_t rv_store_abort(rv_worker_t *w, const rv_object_id_t *id)
{
    st_worker_t *sw = store_of(w, "rv_store_abort");
    if (sw == NULL || id == NULL)
        return RV_ERR_INVALID;
    st_proc_t *p = sw->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, id);
    bool ok = o != NULL && o->state == ST_CREATED;
    if (ok)
        st_obj_free(sw, o);
    pthread_mutex_unlock(&p->lock);
    st_frees_run(sw);
    if (!ok) {
        log_id("rv_store_abort", id, "is not being created by this process");
        return RV_ERR_NOT_FOUND;
    }
    return RV_OK;
}

rv_status_t rv_store_get_async(rv_worker_t *w, const rv_object_id_t *ids,
                               size_t n, int64_t timeout_ms,
                               rv_store_buf_t *bufs, rv_status_t *status,
                               rv_sync_t *sync)
{
    st_worker_t *sw = store_of(w, "rv_store_get");
    if (sw == NULL || (n > 0 && (ids == NULL || bufs == NULL)) ||
        sync == NULL || timeout_ms < RV_STORE_WAIT_FOREVER)
        return RV_ERR_INVALID;
    for (size_t i = 0; i < n; i++) {
        rv_status_t st = st_get_start(sw, &ids[i], timeout_ms, &bufs[i],
                                      status ? &status[i] : NULL, sync);
        if (st != RV_OK) {
            memset(&bufs[i], 0, sizeof(bufs[i]));
            if (status != NULL)
                status[i] = st;
            atomic_fetch_add(&sync->pending, 1);
            rv_sync_complete(sync, st);
        }
    }
    st_drops_flush(sw);
    return RV_OK;
}

rv_status_t rv_store_get(rv_worker_t *w, const rv_object_id_t *ids, size_t n,
                         int64_t timeout_ms, rv_store_buf_t *bufs,
                         rv_status_t *status)
{
    rv_status_t *mine = status;
    if (mine == NULL && n > 0 && (mine = calloc(n, sizeof(*mine))) == NULL)
        return RV_ERR_NO_MEMORY;
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    rv_status_t st =
        rv_store_get_async(w, ids, n, timeout_ms, bufs, mine, &sync);
    if (st == RV_OK)
        rv_sync_wait(w, &sync);
    for (size_t i = 0; i < n && st == RV_OK; i++)
        st = mine[i];
    if (mine != status)
        free(mine);
    return st;
}

rv_status_t rv_store_release(rv_worker_t *w, const rv_object_id_t *id)
{
    st_worker_t *sw = store_of(w, "rv_store_release");
    if (sw == NULL || id == NULL)
        return RV_ERR_INVALID;
    st_proc_t *p = sw->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, id);
    bool ok = o != NULL && o->state == ST_SEALED && o->refs > 0;
    if (ok) {
        o->refs--;
        st_unused_check(sw, o);
    }
    pthread_mutex_unlock(&p->lock);
    st_frees_run(sw);
    if (!ok) {
        log_id("rv_store_release", id,
               "has no reference of this process to give back");
        return RV_ERR_NOT_FOUND;
    }
    return RV_OK;
}

rv_status_t rv_store_delete(rv_worker_t *w, const rv_object_id_t *id)
{
    st_worker_t *sw = store_of(w, "rv_store_delete");
    if (sw == NULL || id == NULL)
        return RV_ERR_INVALID;
    st_proc_t *p = sw->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, id);
    bool busy = o != NULL && o->refs > 0;
    pthread_mutex_unlock(&p->lock);
    if (busy)
        return RV_ERR_AGAIN;
    st_deleted_t del = {.status = RV_ERR_TRANSPORT};
    rv_tid_t home = st_home(id, rv_nworkers(rv_worker_context(w)));
    rv_status_t st = rv_call_return(w, home, st_h.del, id, sizeof(*id), &del,
                                    sizeof(del), NULL, 0);
    if (st == RV_OK)
        st = del.status;
    if (st == RV_ERR_NOT_FOUND)
        log_id("rv_store_delete", id, "is not a sealed object of the job");
    if (st != RV_OK)
        return st;
    /* The other copies go first (each once nobody uses it there). */
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    for (uint32_t i = 0; i < del.nloc && i < ST_MAX_LOCS && st == RV_OK; i++)
        st = rv_call(w, del.locs[i], st_h.drop, id, sizeof(*id), &sync,
                     RV_NOTIFY_CONSUMED);
    rv_status_t wst = rv_sync_wait(w, &sync);
    if (st == RV_OK)
        st = wst;
    pthread_mutex_lock(&p->lock);
    if ((o = st_find(p, id)) != NULL && o->state == ST_SEALED) {
        o->deleted = true;
        o->located = false;
        st_lru_remove(p, o);
        st_unused_check(sw, o);
    }
    pthread_mutex_unlock(&p->lock);
    st_frees_run(sw);
    return RV_OK;
}

rv_status_t rv_store_contains(rv_worker_t *w, const rv_object_id_t *id,
                              bool *has)
{
    st_worker_t *sw = w ? st_of(w) : NULL;
    if (sw == NULL || id == NULL || has == NULL)
        return sw == NULL ? st_not_initialised("rv_store_contains")
                          : RV_ERR_INVALID;
    pthread_mutex_lock(&sw->proc->lock);
    st_obj_t *o = st_find(sw->proc, id);
    *has = o != NULL && o->state == ST_SEALED && !o->deleted;
    pthread_mutex_unlock(&sw->proc->lock);
    return RV_OK;
}

rv_status_t rv_store_subscribe(rv_worker_t *w, rv_store_scope_t scope,
                               rv_store_seal_fn fn, void *arg)
{
    st_worker_t *sw = store_of(w, "rv_store_subscribe");
    if (sw == NULL || fn == NULL ||
        (scope != RV_STORE_SCOPE_RANK && scope != RV_STORE_SCOPE_JOB))
        return RV_ERR_INVALID;
    if (sw->subscribed)
        return RV_ERR_EXISTS;
    sw->sub_fn = fn;
    sw->sub_arg = arg;
    sw->subscribed = true;
    rv_context_t *ctx = rv_worker_context(w);
    rv_tid_t me = rv_worker_tid(w);
    rv_rank_t first = scope == RV_STORE_SCOPE_JOB ? 0 : rv_rank(ctx);
    rv_rank_t last =
        scope == RV_STORE_SCOPE_JOB ? rv_size(ctx) - 1 : rv_rank(ctx);
    size_t n = (size_t)(last - first + 1);
    int32_t *status = calloc(n, sizeof(*status));
    if (status == NULL)
        return RV_ERR_NO_MEMORY;
    /* One worker of each process records the subscription for all. */
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    rv_status_t st = RV_OK;
    for (rv_rank_t r = first; r <= last && st == RV_OK; r++)
        st =
            rv_call_return(w, rv_tid_make(ctx, r, 0), st_h.sub, &me, sizeof(me),
                           &status[r - first], sizeof(status[0]), &sync, 0);
    rv_status_t wst = rv_sync_wait(w, &sync);
    if (st == RV_OK)
        st = wst;
    for (size_t i = 0; i < n && st == RV_OK; i++)
        st = status[i];
    free(status);
    return st;
}

void rv_store_stats(rv_worker_t *w, rv_store_stats_t *stats)
{
    st_worker_t *sw = w ? st_of(w) : NULL;
    if (sw == NULL) {
        memset(stats, 0, sizeof(*stats));
        return;
    }
    pthread_mutex_lock(&sw->proc->lock);
    *stats = sw->proc->stats;
    pthread_mutex_unlock(&sw->proc->lock);
}

size_t rv_store_rndv_threshold(rv_worker_t *w)
{
    st_worker_t *sw = w ? st_of(w) : NULL;
    return sw ? sw->proc->threshold : 0;
}
