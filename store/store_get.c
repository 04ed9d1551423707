/*
 * Gets, and the owner's side of fetches ("Plasma over RDMA", sections
 * 3.2-3.4).
 *
 * A get is a small state machine that the worker's progress advances, so
 * that many can overlap (rv_store_get_async) and none blocks the worker:
 * look in the process's table; else become the process's one fetcher of
 * the object (an ST_FETCHING entry that other threads' gets wait on), ask
 * the home where a copy is (or wait there for the seal), then fetch it:
 *
 *  - eager, one call: objects whose data and metadata fit
 *    store.rndv_threshold and one 256 KiB result come back as the result
 *    of one call (rivet.store.eager), landing in the new copy behind an
 *    8-byte status word (section 3.2, the two-sided protocol);
 *  - eager, in pieces: larger objects under the threshold are pinned at
 *    the owner (rivet.store.pin), fetched in 256 KiB results
 *    (rivet.store.chunk), all in flight at once, then unpinned
 *    (rivet.store.fin);
 *  - rendezvous: above the threshold, pinned, then read with one RDMA
 *    read straight into the new copy, then unpinned (section 3.3): no
 *    copy on either side, and the owner's CPU only answers the pin.
 *
 * The copy is then sealed here and registered at the home as one more
 * location (later fetchers spread over the copies).
 */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* Fetches retried when a copy vanished between lookup and fetch. */
#define ST_RETRIES 4

typedef struct {
    rv_object_id_t id;
    uint64_t off, len;
} piece_args_t;

/* ---------------------------------------------------------------------- */
/* The owner's side                                                        */

static rv_status_t on_eager(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_proc_t *p = st_of(w)->proc;
    rv_object_id_t id;
    int64_t status = RV_ERR_NOT_FOUND;
    (void)arg;
    if (call->args_len != sizeof(id) || call->ret_len < ST_HEAD)
        return RV_ERR_TRUNCATED;
    memcpy(&id, call->args, sizeof(id));
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &id);
    size_t total = o ? o->data_size + o->meta_size : 0;
    if (o != NULL && o->state == ST_SEALED && !o->deleted &&
        ST_HEAD + total <= call->ret_len) {
        memcpy((uint8_t *)call->ret + ST_HEAD, o->mem, total);
        p->stats.served++;
        status = RV_OK;
    }
    pthread_mutex_unlock(&p->lock);
    memcpy(call->ret, &status, sizeof(status));
    call->ret_len = status == RV_OK ? ST_HEAD + total : ST_HEAD;
    return RV_OK;
}

/* Records a pin of @p o held by worker @p src; false when out of
 * memory. */
static bool pin_add(st_obj_t *o, rv_tid_t src)
{
    if (o->pins == o->pinners_cap) {
        long cap = o->pinners_cap ? 2 * o->pinners_cap : 4;
        rv_tid_t *grown = realloc(o->pinners, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return false;
        o->pinners = grown;
        o->pinners_cap = cap;
    }
    o->pinners[o->pins++] = src;
    return true;
}

/* Whether worker @p src holds a pin of @p o. */
static bool pin_held(const st_obj_t *o, rv_tid_t src)
{
    for (long i = 0; i < o->pins; i++)
        if (o->pinners[i] == src)
            return true;
    return false;
}

/* Releases one of worker @p src's pins of @p o; false when it holds
 * none (a FIN repeated, or from a worker that never pinned it). */
static bool pin_release(st_obj_t *o, rv_tid_t src)
{
    for (long i = 0; i < o->pins; i++) {
        if (o->pinners[i] == src) {
            o->pinners[i] = o->pinners[--o->pins];
            return true;
        }
    }
    return false;
}

/* Counts and logs a piece request or FIN that names no pin of its
 * sender (a forged, repeated or late message), or a piece outside the
 * object. */
static void pin_refused(rv_worker_t *w, const rv_call_t *call, const char *what)
{
    rv_worker_count_drop(w, RV_DROP_MALFORMED);
    rv_warn("store: dropped a %s from worker %u: it holds no pin of the "
            "object it names, or names bytes outside it",
            what, call->src);
}

static rv_status_t on_pin(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_proc_t *p = st_of(w)->proc;
    rv_object_id_t id;
    st_where_t where = {.status = RV_ERR_NOT_FOUND};
    (void)arg;
    if (call->args_len != sizeof(id) || call->ret_len < sizeof(where))
        return RV_ERR_TRUNCATED;
    memcpy(&id, call->args, sizeof(id));
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &id);
    if (o != NULL && o->state == ST_SEALED && !o->deleted &&
        pin_add(o, call->src)) {
        st_lru_remove(p, o);
        p->stats.pinned_bytes += o->data_size + o->meta_size;
        p->stats.served++;
        where = (st_where_t){.status = RV_OK,
                             .owner = rv_worker_tid(w),
                             .data_size = o->data_size,
                             .meta_size = o->meta_size,
                             .rptr = o->rptr};
    }
    pthread_mutex_unlock(&p->lock);
    memcpy(call->ret, &where, sizeof(where));
    call->ret_len = sizeof(where);
    return RV_OK;
}

static rv_status_t on_chunk(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_proc_t *p = st_of(w)->proc;
    piece_args_t a;
    (void)arg;
    if (call->args_len != sizeof(a))
        return RV_ERR_TRUNCATED;
    memcpy(&a, call->args, sizeof(a));
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &a.id);
    /* Pinned by the caller: it stays until its FIN. The piece is checked
     * against the object without overflow (off and len are the
     * caller's). */
    size_t size = o != NULL ? o->data_size + o->meta_size : 0;
    if (o != NULL && pin_held(o, call->src) && a.len <= call->ret_len &&
        a.off <= size && a.len <= size - a.off) {
        if (a.len > 0) /* a call without a result has no buffer */
            memcpy(call->ret, o->mem + a.off, a.len);
        call->ret_len = a.len;
    } else {
        call->ret_len = 0;
        pin_refused(w, call, "piece request");
    }
    pthread_mutex_unlock(&p->lock);
    return RV_OK;
}

static rv_status_t on_fin(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_worker_t *sw = st_of(w);
    st_proc_t *p = sw->proc;
    rv_object_id_t id;
    (void)arg;
    if (call->args_len != sizeof(id))
        return RV_ERR_TRUNCATED;
    memcpy(&id, call->args, sizeof(id));
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &id);
    if (o != NULL && pin_release(o, call->src)) {
        p->stats.pinned_bytes -= o->data_size + o->meta_size;
        st_unused_check(sw, o);
    } else {
        pin_refused(w, call, "FIN");
    }
    pthread_mutex_unlock(&p->lock);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* The getter's side                                                       */

static void get_local(st_worker_t *sw, st_get_t *g);

static void get_finish(st_get_t *g, rv_status_t st, const st_obj_t *o)
{
    if (g->buf != NULL) {
        if (st == RV_OK)
            st_view(o, g->buf);
        else
            memset(g->buf, 0, sizeof(*g->buf));
    }
    if (g->status != NULL)
        *g->status = st;
    g->state = G_DONE;
    rv_sync_complete(g->user, st);
}

/* Takes a reference to sealed @p o for @p g (lock held). */
static void get_hit(st_proc_t *p, st_get_t *g, st_obj_t *o)
{
    o->refs++;
    st_lru_remove(p, o);
    p->stats.hits++;
    get_finish(g, RV_OK, o);
}

static bool expired(const st_get_t *g)
{
    return g->deadline_ns != INT64_MAX && rv_time_ns() >= g->deadline_ns;
}

static void get_lookup(st_worker_t *sw, st_get_t *g)
{
    rv_tid_t home = st_home(&g->id, rv_nworkers(rv_worker_context(sw->w)));
    struct {
        rv_object_id_t id;
        uint64_t token;
        uint32_t wait;
    } a = {.id = g->id, .token = g->token, .wait = g->deadline_ns != 0};
    rv_sync_init(&g->op, 0);
    g->found = false;
    rv_status_t st = rv_call_return(sw->w, home, st_h.lookup, &a, sizeof(a),
                                    &g->where, sizeof(g->where), &g->op, 0);
    g->state = G_LOOKUP;
    if (st != RV_OK) {
        g->where.status = st;
        rv_sync_init(&g->op, 0);
    }
}

/* The get failed; a fetcher's entry goes (gets waiting on it look
 * again). */
static void fetch_fail(st_worker_t *sw, st_get_t *g, rv_status_t st)
{
    st_proc_t *p = sw->proc;
    if (g->obj != NULL) {
        pthread_mutex_lock(&p->lock);
        st_obj_free(sw, g->obj);
        pthread_mutex_unlock(&p->lock);
        g->obj = NULL;
    }
    get_finish(g, st, NULL);
}

/* Memory for the copy the home's answer describes. */
static rv_status_t fetch_alloc(st_worker_t *sw, st_get_t *g)
{
    st_proc_t *p = sw->proc;
    st_obj_t *o = g->obj;
    size_t total = g->where.data_size + g->where.meta_size;
    if (o->mem != NULL)
        return RV_OK; /* a retry */
    if (total < g->where.data_size)
        return RV_ERR_INVALID; /* sizes from the home that overflow */
    pthread_mutex_lock(&p->lock);
    rv_status_t st = st_reserve(sw, total);
    pthread_mutex_unlock(&p->lock);
    if (st != RV_OK)
        return st;
    rv_rptr_t rptr;
    uint8_t *base = rv_mem_alloc(sw->w, ST_HEAD + total, &rptr);
    pthread_mutex_lock(&p->lock);
    if (base == NULL) {
        p->used -= total;
        st = RV_ERR_NO_MEMORY;
    } else {
        o->base = base;
        o->mem = base + ST_HEAD;
        o->rptr = rv_rptr_add(rptr, ST_HEAD);
        o->alloc_local = rv_worker_local(sw->w);
        o->data_size = g->where.data_size;
        o->meta_size = g->where.meta_size;
        o->transferring = true;
    }
    pthread_mutex_unlock(&p->lock);
    return st;
}

/* Starts the transfer from the owner the home named. */
static void fetch_start(st_worker_t *sw, st_get_t *g)
{
    st_proc_t *p = sw->proc;
    rv_status_t st = fetch_alloc(sw, g);
    if (st != RV_OK) {
        fetch_fail(sw, g, st);
        return;
    }
    st_obj_t *o = g->obj;
    size_t total = o->data_size + o->meta_size;
    rv_sync_init(&g->op, 0);
    g->pinned = false;
    if (total <= p->threshold && ST_HEAD + total <= ST_CHUNK) {
        g->eager = true;
        st = rv_call_return(sw->w, g->where.owner, st_h.eager, &g->id,
                            sizeof(g->id), o->mem - ST_HEAD, ST_HEAD + total,
                            &g->op, 0);
        g->state = G_TRANSFER;
    } else {
        g->eager = total <= p->threshold;
        st = rv_call_return(sw->w, g->where.owner, st_h.pin, &g->id,
                            sizeof(g->id), &g->where, sizeof(g->where), &g->op,
                            0);
        g->state = G_PIN;
    }
    if (st != RV_OK)
        fetch_fail(sw, g, st);
}

/* Pinned: the pieces, or the RDMA read. */
static void fetch_pinned(st_worker_t *sw, st_get_t *g)
{
    st_obj_t *o = g->obj;
    size_t total = o->data_size + o->meta_size;
    rv_status_t st = RV_OK;
    g->pinned = true;
    rv_sync_init(&g->op, 0);
    if (g->eager) {
        for (size_t off = 0; off < total && st == RV_OK; off += ST_CHUNK) {
            piece_args_t a = {.id = g->id,
                              .off = off,
                              .len = total - off < ST_CHUNK ? total - off
                                                            : ST_CHUNK};
            st = rv_call_return(sw->w, g->where.owner, st_h.chunk, &a,
                                sizeof(a), o->mem + off, a.len, &g->op, 0);
        }
    } else if (total > 0) {
        st = rv_get(sw->w, o->mem, g->where.rptr, total, &g->op);
    }
    g->state = G_TRANSFER;
    if (st != RV_OK)
        g->where.status = st;
}

/* The transfer completed: the copy is sealed here. */
static void fetch_done(st_worker_t *sw, st_get_t *g)
{
    st_proc_t *p = sw->proc;
    st_obj_t *o = g->obj;
    if (g->pinned && rv_call(sw->w, g->where.owner, st_h.fin, &g->id,
                             sizeof(g->id), NULL, 0) != RV_OK)
        rv_error("store: cannot unpin an object at worker %u", g->where.owner);
    rv_status_t st = g->op.status;
    if (st == RV_OK && g->pinned) {
        st = g->where.status;
    } else if (st == RV_OK) {
        int64_t word;
        memcpy(&word, o->mem - ST_HEAD, sizeof(word));
        st = (rv_status_t)word;
    }
    if (st == RV_ERR_NOT_FOUND && g->retries++ < ST_RETRIES) {
        get_lookup(sw, g); /* that copy went: ask the home again */
        return;
    }
    if (st != RV_OK) {
        fetch_fail(sw, g, st);
        return;
    }
    pthread_mutex_lock(&p->lock);
    o->state = ST_SEALED;
    o->transferring = false;
    o->located = true;
    p->stats.objects++;
    p->stats.bytes += o->data_size + o->meta_size;
    if (g->eager)
        p->stats.fetches_eager++;
    else
        p->stats.fetches_rndv++;
    o->refs++;
    /* Once the get finishes its caller may release the copy, and another
     * thread evict it: what the home is told is read before. */
    st_obj_t copy = *o;
    get_finish(g, RV_OK, o);
    pthread_mutex_unlock(&p->lock);
    st_tell_home(sw, &g->id, &copy, true);
}

/* The owner did not pin it (the copy went): look again, or fail. */
static void pin_failed(st_worker_t *sw, st_get_t *g)
{
    rv_status_t st = g->op.status != RV_OK ? g->op.status : g->where.status;
    if (st == RV_ERR_NOT_FOUND && g->retries++ < ST_RETRIES)
        get_lookup(sw, g);
    else
        fetch_fail(sw, g, st);
}

/* A copy exists at g->where.owner: unless this process has one by now
 * (sealed here meanwhile, or fetched by another get), this get becomes
 * the process's one fetcher of it. */
static void get_fetch(st_worker_t *sw, st_get_t *g)
{
    st_proc_t *p = sw->proc;
    if (g->obj != NULL) { /* a retry */
        fetch_start(sw, g);
        return;
    }
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &g->id);
    if (o != NULL) {
        g->state = G_WAIT_LOCAL;
    } else if ((o = calloc(1, sizeof(*o))) != NULL) {
        o->id = g->id;
        o->state = ST_FETCHING;
        o->transferring = true;
        ST_HASH_ADD(p->objs, id.bytes, RV_OBJECT_ID_SIZE, o);
        g->obj = o;
    }
    pthread_mutex_unlock(&p->lock);
    if (g->obj != NULL)
        fetch_start(sw, g);
    else if (g->state != G_WAIT_LOCAL)
        fetch_fail(sw, g, RV_ERR_NO_MEMORY);
    else
        get_local(sw, g);
}

/* The home's answer (to a lookup, or a waiting get's rivet.store.found). */
static void get_where(st_worker_t *sw, st_get_t *g)
{
    if (g->where.status == 1 && g->found)
        g->where = g->fwhere;
    if (g->where.status == RV_OK)
        get_fetch(sw, g);
    else if (g->where.status == 1)
        g->state = G_WAIT_SEAL;
    else
        fetch_fail(sw, g, g->where.status);
}

/* Looks in the process's table; asks the home when it has no copy. */
static void get_local(st_worker_t *sw, st_get_t *g)
{
    st_proc_t *p = sw->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &g->id);
    if (o != NULL && o->state == ST_SEALED && !o->deleted) {
        get_hit(p, g, o);
    } else if (o != NULL && o->deleted) {
        get_finish(g, RV_ERR_NOT_FOUND, NULL);
    } else if (o != NULL) {
        /* Created and not sealed here, or fetched by another get: wait
         * for it (a fetch under way is not a seal to wait for). */
        if (expired(g) && !o->transferring)
            get_finish(g, RV_ERR_TIMEOUT, NULL);
        else
            g->state = G_WAIT_LOCAL;
    } else {
        g->state = G_LOOKUP;
    }
    pthread_mutex_unlock(&p->lock);
    if (g->state == G_LOOKUP)
        get_lookup(sw, g);
}

/* Advances @p g as far as it can go now. */
static void get_step(st_worker_t *sw, st_get_t *g)
{
    switch (g->state) {
    case G_START:
    case G_WAIT_LOCAL:
        get_local(sw, g);
        break;
    case G_LOOKUP:
        if (rv_sync_done(&g->op))
            get_where(sw, g);
        break;
    case G_WAIT_SEAL:
        if (g->found)
            get_where(sw, g); /* takes fwhere */
        else if (expired(g))
            fetch_fail(sw, g, RV_ERR_TIMEOUT);
        break;
    case G_PIN:
        if (!rv_sync_done(&g->op))
            break;
        if (g->op.status == RV_OK && g->where.status == RV_OK)
            fetch_pinned(sw, g);
        else
            pin_failed(sw, g);
        break;
    case G_TRANSFER:
        if (rv_sync_done(&g->op))
            fetch_done(sw, g);
        break;
    case G_DONE:
        break;
    }
}

rv_status_t st_get_start(st_worker_t *sw, const rv_object_id_t *id,
                         int64_t timeout_ms, rv_store_buf_t *buf,
                         rv_status_t *status, rv_sync_t *user)
{
    st_get_t *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return RV_ERR_NO_MEMORY;
    g->id = *id;
    g->buf = buf;
    g->status = status;
    g->user = user;
    g->token = ++sw->next_token;
    g->deadline_ns = timeout_ms < 0    ? INT64_MAX
                     : timeout_ms == 0 ? 0
                                       : rv_time_ns() + timeout_ms * 1000000;
    atomic_fetch_add(&user->pending, 1);
    g->next = sw->gets;
    sw->gets = g;
    /* Its first step may progress (a call over the write path waits for
     * its ring): that progress must not step the gets, this one among
     * them, while this step is under way (store_progress's guard). */
    bool busy = sw->busy;
    sw->busy = true;
    get_step(sw, g);
    sw->busy = busy;
    return RV_OK;
}

unsigned st_gets_progress(st_worker_t *sw)
{
    unsigned n = 0;
    for (st_get_t **pg = &sw->gets; *pg != NULL;) {
        st_get_t *g = *pg;
        st_gstate_t before = g->state;
        get_step(sw, g);
        n += g->state != before;
        if (g->state == G_DONE) {
            *pg = g->next;
            free(g);
        } else {
            pg = &g->next;
        }
    }
    return n;
}

void st_get_found(st_worker_t *sw, uint64_t token, const st_where_t *where)
{
    for (st_get_t *g = sw->gets; g != NULL; g = g->next)
        if (g->token == token &&
            (g->state == G_WAIT_SEAL || g->state == G_LOOKUP)) {
            g->fwhere = *where;
            g->found = true;
            return;
        }
    /* A get that timed out meanwhile: nothing waits any more. */
}

void st_gets_fini(st_worker_t *sw)
{
    while (sw->gets != NULL) {
        st_get_t *g = sw->gets;
        sw->gets = g->next;
        free(g);
    }
}

rv_status_t st_fetch_register(rv_context_t *ctx)
{
    rv_status_t st =
        rv_am_register(ctx, "rivet.store.eager", on_eager, NULL, &st_h.eager);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.store.pin", on_pin, NULL, &st_h.pin);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.store.chunk", on_chunk, NULL,
                            &st_h.chunk);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.store.fin", on_fin, NULL, &st_h.fin);
    return st;
}
