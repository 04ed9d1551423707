/*
 * The objects of a process: one table shared by its worker threads (a
 * mutex; a store operation costs a hash lookup, not a nanosecond-scale
 * call), reference counts, pins of remote readers, and least-recently-used
 * eviction of what nobody uses.
 *
 * An object's memory comes from the registered memory of the worker that
 * created or fetched it (rv_mem_alloc: no registration per object), so it
 * is freed on that worker's thread: a thread that drops the last use of an
 * object allocated by another queues the memory for it (st_frees_run).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

st_obj_t *st_find(st_proc_t *p, const rv_object_id_t *id)
{
    st_obj_t *o = NULL;
    HASH_FIND(hh, p->objs, id->bytes, RV_OBJECT_ID_SIZE, o);
    return o;
}

void st_view(const st_obj_t *o, rv_store_buf_t *buf)
{
    buf->data = o->mem;
    buf->data_size = o->data_size;
    buf->meta = o->meta_size ? o->mem + o->data_size : NULL;
    buf->meta_size = o->meta_size;
}

void st_lru_remove(st_proc_t *p, st_obj_t *o)
{
    if (!o->in_lru)
        return;
    if (o->lru_prev)
        o->lru_prev->lru_next = o->lru_next;
    else
        p->lru_head = o->lru_next;
    if (o->lru_next)
        o->lru_next->lru_prev = o->lru_prev;
    else
        p->lru_tail = o->lru_prev;
    o->lru_prev = o->lru_next = NULL;
    o->in_lru = false;
}

void st_lru_push(st_proc_t *p, st_obj_t *o)
{
    if (o->in_lru)
        return;
    o->lru_prev = p->lru_tail;
    o->lru_next = NULL;
    if (p->lru_tail)
        p->lru_tail->lru_next = o;
    else
        p->lru_head = o;
    p->lru_tail = o;
    o->in_lru = true;
}

/* Queues @p mem for the worker whose allocator holds it. */
static void defer_free(st_proc_t *p, int local, void *mem)
{
    st_frees_t *f = &p->frees[local];
    if (!st_grow(&f->v, f->n, &f->cap, sizeof(*f->v))) {
        /* Kept until the job ends, when the allocator goes. */
        rv_warn("store: out of memory queueing a free; %p is kept", mem);
        return;
    }
    f->v[f->n++] = mem;
}

void st_obj_free(st_worker_t *sw, st_obj_t *o)
{
    st_proc_t *p = sw->proc;
    st_lru_remove(p, o);
    HASH_DELETE(hh, p->objs, o);
    if (o->state == ST_SEALED) {
        p->stats.objects--;
        p->stats.bytes -= o->data_size + o->meta_size;
    }
    if (o->base != NULL) {
        p->used -= o->data_size + o->meta_size;
#if defined(__SANITIZE_ADDRESS__)
        /* AddressSanitizer sees neither the registered-memory allocator's
         * reuse nor a peer reading this memory by RDMA or a mapped
         * segment: the freed object's bytes are scribbled on instead, so
         * that a read racing the free returns bytes a check sees as wrong
         * (store-churn under make check-asan). */
        memset(o->mem, 0xdb, o->data_size + o->meta_size);
#endif
        defer_free(p, o->alloc_local, o->base);
    }
    free(o->pinners);
    free(o);
}

void st_frees_run(st_worker_t *sw)
{
    st_proc_t *p = sw->proc;
    st_frees_t *f = &p->frees[rv_worker_local(sw->w)];
    if (f->n == 0)
        return;
    pthread_mutex_lock(&p->lock);
    size_t n = f->n;
    void **v = f->v;
    f->v = NULL;
    f->n = f->cap = 0;
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n; i++)
        rv_mem_free(sw->w, v[i]);
    free(v);
}

void st_unused_check(st_worker_t *sw, st_obj_t *o)
{
    if (o->refs > 0 || o->pins > 0 || o->state != ST_SEALED)
        return;
    if (o->deleted) {
        st_obj_free(sw, o);
        return;
    }
    st_lru_push(sw->proc, o);
}

/* Notes that this process's copy of @p id is gone, for its home. */
static void drop_note(st_worker_t *sw, const rv_object_id_t *id)
{
    if (!st_grow(&sw->drops, sw->ndrops, &sw->capdrops, sizeof(*sw->drops))) {
        /* The home keeps naming this copy; a fetch from it then fails
         * and tries the next location. */
        rv_warn("store: out of memory noting an eviction");
        return;
    }
    sw->drops[sw->ndrops++] = *id;
}

void st_drops_flush(st_worker_t *sw)
{
    while (sw->ndrops > 0) {
        rv_object_id_t id = sw->drops[--sw->ndrops];
        st_tell_home(sw, &id, NULL, false);
    }
}

/* Says why store.capacity cannot take @p size more bytes. */
static void say_full(st_proc_t *p, size_t size)
{
    uint64_t referenced = 0, pinned = 0, unsealed = 0;
    unsigned long nref = 0;
    for (st_obj_t *o = p->objs; o != NULL; o = o->hh.next) {
        uint64_t b = o->data_size + o->meta_size;
        if (o->state != ST_SEALED) {
            unsealed += b;
        } else if (o->refs > 0) {
            referenced += b;
            nref++;
        } else if (o->pins > 0) {
            pinned += b;
        }
    }
    rv_error("store: no room for %zu bytes: store.capacity is %" PRIu64
             " bytes and %" PRIu64 " are held by objects in use (%" PRIu64
             " by %lu referenced objects, %" PRIu64
             " pinned for remote readers, %" PRIu64
             " being created or fetched); release objects, or raise "
             "store.capacity",
             size, p->capacity, p->used, referenced, nref, pinned, unsealed);
}

rv_status_t st_reserve(st_worker_t *sw, size_t size)
{
    st_proc_t *p = sw->proc;
    if (size > p->capacity) {
        rv_error(
            "store: an object of %zu bytes exceeds store.capacity (%" PRIu64
            " bytes)",
            size, p->capacity);
        return RV_ERR_NO_MEMORY;
    }
    while (p->used + size > p->capacity && p->lru_head != NULL) {
        st_obj_t *o = p->lru_head;
        if (o->located)
            drop_note(sw, &o->id);
        p->stats.evictions++;
        st_obj_free(sw, o);
    }
    if (p->used + size > p->capacity) {
        say_full(p, size);
        return RV_ERR_NO_MEMORY;
    }
    p->used += size;
    return RV_OK;
}
