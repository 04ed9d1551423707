/*
 * The directory: every object id has a home worker (a hash of the id),
 * which knows the processes holding a sealed copy, the gets waiting for a
 * seal, and whether the object was deleted. "Plasma over RDMA" kept this
 * in Redis, outside the store; here it is a shard per worker, reached by
 * calls, so no external database is needed.
 *
 * The calls: rivet.store.add (a copy sealed, fetched or dropped),
 * rivet.store.lookup (where is it; or wait for its seal), rivet.store.found
 * (the home answers a waiting get), rivet.store.del and rivet.store.drop
 * (delete the object, drop a copy), and the subscriptions' calls
 * rivet.store.sub and rivet.store.sealed.
 */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

typedef struct {
    rv_object_id_t id;
    uint64_t data_size, meta_size;
    uint32_t add; /* 1: a copy now, 0: dropped */
} add_args_t;

typedef struct {
    rv_object_id_t id;
    uint64_t token;
    uint32_t wait;
} lookup_args_t;

typedef struct {
    uint64_t token;
    st_where_t where;
} found_args_t;

typedef struct {
    rv_object_id_t id;
    uint64_t data_size;
    rv_rank_t owner;
} sealed_args_t;

static st_dent_t *dent_get(st_worker_t *sw, const rv_object_id_t *id, bool make)
{
    st_dent_t *d = NULL;
    HASH_FIND(hh, sw->dir, id->bytes, RV_OBJECT_ID_SIZE, d);
    if (d == NULL && make) {
        if ((d = calloc(1, sizeof(*d))) == NULL)
            return NULL;
        d->id = *id;
        ST_HASH_ADD(sw->dir, id.bytes, RV_OBJECT_ID_SIZE, d);
    }
    return d;
}

/* Remembers deleted @p d among the home's last ST_TOMBSTONES deletions,
 * forgetting the oldest: its entry is freed (a get of that id then waits
 * for a seal, as for an id never made). Without this the directory grew
 * with every object ever deleted (found by bench/soak.sh). */
static void tomb_push(st_worker_t *sw, st_dent_t *d)
{
    if (d->in_tomb ||
        (sw->tomb == NULL &&
         (sw->tomb = calloc(ST_TOMBSTONES, sizeof(*sw->tomb))) == NULL))
        return;
    st_dent_t *old = sw->tomb[sw->tomb_at];
    if (old != NULL) {
        old->in_tomb = false;
        if (old->deleted && old->nwait == 0) {
            HASH_DELETE(hh, sw->dir, old);
            free(old->waiters);
            free(old);
        }
    }
    d->in_tomb = true;
    sw->tomb[sw->tomb_at] = d;
    sw->tomb_at = (sw->tomb_at + 1) % ST_TOMBSTONES;
}

/* Answers every get waiting for @p d. */
static void wake_waiters(st_worker_t *sw, st_dent_t *d, const st_where_t *w)
{
    for (size_t i = 0; i < d->nwait; i++) {
        found_args_t a = {.token = d->waiters[i].token, .where = *w};
        rv_status_t st = rv_call(sw->w, d->waiters[i].tid, st_h.found, &a,
                                 sizeof(a), NULL, 0);
        if (st != RV_OK)
            rv_error("store: cannot answer worker %u's get: %s",
                     d->waiters[i].tid, rv_status_str(st));
    }
    free(d->waiters);
    d->waiters = NULL;
    d->nwait = d->capwait = 0;
}

static rv_status_t on_add(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_worker_t *sw = st_of(w);
    add_args_t a;
    (void)arg;
    if (call->args_len != sizeof(a))
        return RV_ERR_TRUNCATED;
    memcpy(&a, call->args, sizeof(a));
    st_dent_t *d = dent_get(sw, &a.id, a.add);
    if (d == NULL)
        return a.add ? RV_ERR_NO_MEMORY : RV_OK;
    unsigned i = 0;
    while (i < d->nloc && d->locs[i] != call->src)
        i++;
    if (!a.add) {
        if (i < d->nloc)
            d->locs[i] = d->locs[--d->nloc];
        return RV_OK;
    }
    if (d->deleted) {
        /* A copy fetched while the object was deleted: drop it too. */
        if (rv_call(w, call->src, st_h.drop, &a.id, sizeof(a.id), NULL, 0) !=
            RV_OK)
            rv_error("store: cannot tell worker %u to drop a deleted object",
                     call->src);
        return RV_OK;
    }
    d->data_size = a.data_size;
    d->meta_size = a.meta_size;
    if (i == d->nloc && d->nloc < ST_MAX_LOCS)
        d->locs[d->nloc++] = call->src;
    st_where_t where = {.status = RV_OK,
                        .owner = call->src,
                        .data_size = a.data_size,
                        .meta_size = a.meta_size};
    wake_waiters(sw, d, &where);
    return RV_OK;
}

static rv_status_t on_lookup(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_worker_t *sw = st_of(w);
    lookup_args_t a;
    st_where_t where = {.status = RV_ERR_TIMEOUT};
    (void)arg;
    if (call->args_len != sizeof(a) || call->ret_len < sizeof(where))
        return RV_ERR_TRUNCATED;
    memcpy(&a, call->args, sizeof(a));
    st_dent_t *d = dent_get(sw, &a.id, a.wait);
    if (d != NULL && d->deleted) {
        where.status = RV_ERR_NOT_FOUND;
    } else if (d != NULL && d->nloc > 0) {
        /* Spread the fetchers over the copies. */
        where = (st_where_t){.status = RV_OK,
                             .owner = d->locs[a.token % d->nloc],
                             .data_size = d->data_size,
                             .meta_size = d->meta_size};
    } else if (d != NULL && a.wait) {
        if (!st_grow(&d->waiters, d->nwait, &d->capwait, sizeof(*d->waiters)))
            return RV_ERR_NO_MEMORY;
        d->waiters[d->nwait++] = (st_waiter_t){call->src, a.token};
        where.status = 1; /* wait for rivet.store.found */
    } else if (d == NULL && a.wait) {
        where.status = RV_ERR_NO_MEMORY;
    }
    memcpy(call->ret, &where, sizeof(where));
    call->ret_len = sizeof(where);
    return RV_OK;
}

static rv_status_t on_found(rv_worker_t *w, rv_call_t *call, void *arg)
{
    found_args_t a;
    (void)arg;
    if (call->args_len != sizeof(a))
        return RV_ERR_TRUNCATED;
    memcpy(&a, call->args, sizeof(a));
    st_get_found(st_of(w), a.token, &a.where);
    return RV_OK;
}

/* The home deletes @p id: it answers with the other processes' copies,
 * which the deleter tells to drop and waits for (so that once the delete
 * returns no copy serves a get), and the gets waiting for it fail. */
static rv_status_t on_del(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_worker_t *sw = st_of(w);
    rv_object_id_t id;
    st_deleted_t del = {.status = RV_ERR_NOT_FOUND};
    (void)arg;
    if (call->args_len != sizeof(id) || call->ret_len < sizeof(del))
        return RV_ERR_TRUNCATED;
    memcpy(&id, call->args, sizeof(id));
    st_dent_t *d = dent_get(sw, &id, false);
    if (d != NULL && !d->deleted && d->nloc > 0) {
        uint32_t threads = (uint32_t)rv_threads(rv_worker_context(w));
        for (unsigned i = 0; i < d->nloc; i++)
            if (d->locs[i] / threads != call->src / threads)
                del.locs[del.nloc++] = d->locs[i];
        d->deleted = true;
        d->nloc = 0;
        st_where_t gone = {.status = RV_ERR_NOT_FOUND};
        wake_waiters(sw, d, &gone);
        tomb_push(sw, d);
        del.status = RV_OK;
    }
    memcpy(call->ret, &del, sizeof(del));
    call->ret_len = sizeof(del);
    return RV_OK;
}

/* A copy of a deleted object: gone as soon as nobody here uses it. */
static rv_status_t on_drop(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_worker_t *sw = st_of(w);
    rv_object_id_t id;
    (void)arg;
    if (call->args_len != sizeof(id))
        return RV_ERR_TRUNCATED;
    memcpy(&id, call->args, sizeof(id));
    st_proc_t *p = sw->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &id);
    if (o != NULL && o->state == ST_SEALED) {
        o->deleted = true;
        o->located = false;
        st_lru_remove(p, o);
        st_unused_check(sw, o);
    }
    pthread_mutex_unlock(&p->lock);
    return RV_OK;
}

static rv_status_t on_sub(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_proc_t *p = st_of(w)->proc;
    rv_tid_t tid;
    int32_t status = RV_OK;
    (void)arg;
    if (call->args_len != sizeof(tid) || call->ret_len < sizeof(status))
        return RV_ERR_TRUNCATED;
    memcpy(&tid, call->args, sizeof(tid));
    pthread_mutex_lock(&p->lock);
    if (st_grow(&p->subs, p->nsubs, &p->capsubs, sizeof(*p->subs)))
        p->subs[p->nsubs++] = tid;
    else
        status = RV_ERR_NO_MEMORY;
    pthread_mutex_unlock(&p->lock);
    memcpy(call->ret, &status, sizeof(status));
    call->ret_len = sizeof(status);
    return RV_OK;
}

static rv_status_t on_sealed(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_worker_t *sw = st_of(w);
    sealed_args_t a;
    (void)arg;
    if (call->args_len != sizeof(a))
        return RV_ERR_TRUNCATED;
    memcpy(&a, call->args, sizeof(a));
    if (sw->sub_fn != NULL)
        sw->sub_fn(w, &a.id, a.data_size, a.owner, sw->sub_arg);
    return RV_OK;
}

void st_tell_home(st_worker_t *sw, const rv_object_id_t *id, const st_obj_t *o,
                  bool add)
{
    add_args_t a = {.id = *id, .add = add};
    if (o != NULL) {
        a.data_size = o->data_size;
        a.meta_size = o->meta_size;
    }
    rv_tid_t home = st_home(id, rv_nworkers(rv_worker_context(sw->w)));
    rv_status_t st = rv_call(sw->w, home, st_h.add, &a, sizeof(a), NULL, 0);
    if (st != RV_OK)
        rv_error("store: cannot tell worker %u (an object's home) of a "
                 "copy: %s",
                 home, rv_status_str(st));
}

void st_tell_subscribers(st_worker_t *sw, const st_obj_t *o)
{
    st_proc_t *p = sw->proc;
    sealed_args_t a = {
        .id = o->id, .data_size = o->data_size, .owner = p->rank};
    pthread_mutex_lock(&p->lock);
    size_t n = p->nsubs;
    rv_tid_t *subs = n ? malloc(n * sizeof(*subs)) : NULL;
    if (subs != NULL)
        memcpy(subs, p->subs, n * sizeof(*subs));
    pthread_mutex_unlock(&p->lock);
    if (n > 0 && subs == NULL) {
        rv_error("store: out of memory telling the subscribers of a seal");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (rv_call(sw->w, subs[i], st_h.sealed, &a, sizeof(a), NULL, 0) !=
            RV_OK)
            rv_error("store: cannot tell worker %u of a seal", subs[i]);
    free(subs);
}

void st_dir_fini(st_worker_t *sw)
{
    free(sw->tomb);
    sw->tomb = NULL;
    sw->tomb_at = 0;
    st_dent_t *d, *tmp;
    HASH_ITER(hh, sw->dir, d, tmp)
    {
        HASH_DELETE(hh, sw->dir, d);
        free(d->waiters);
        free(d);
    }
}

rv_status_t st_dir_register(rv_context_t *ctx)
{
    rv_status_t st = RV_OK;
    struct {
        const char *name;
        rv_call_fn fn;
        rv_handler_id_t *id;
    } hs[] = {
        {"rivet.store.add", on_add, &st_h.add},
        {"rivet.store.lookup", on_lookup, &st_h.lookup},
        {"rivet.store.found", on_found, &st_h.found},
        {"rivet.store.del", on_del, &st_h.del},
        {"rivet.store.drop", on_drop, &st_h.drop},
        {"rivet.store.sub", on_sub, &st_h.sub},
        {"rivet.store.sealed", on_sealed, &st_h.sealed},
    };
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]) && st == RV_OK; i++)
        st = rv_am_register(ctx, hs[i].name, hs[i].fn, NULL, hs[i].id);
    return st;
}
