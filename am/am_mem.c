/*
 * Registered memory for users, remote pointers, and the buffer put/get
 * calls built on them.
 *
 * rv_mem_alloc hands out memory of the worker's general allocator (best
 * fit over its NUMA zone's registered chunks). A remote pointer names the
 * registration a piece of memory lies in by a small per-process id, so it
 * stays 16 bytes whatever the transport's remote keys look like. A peer
 * that uses a remote pointer fetches the region's packed key once, with a
 * no-setup service call to the owning process ("rivet.am.rkey_req"), and
 * keeps it unpacked for its own transport worker (Seriema ships locators
 * with the key inside; rivet's keys are 50-150 bytes on UCX).
 */
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"

rv_handler_id_t am_rkey_req_id, am_rkey_rep_id;

typedef struct {
    uint32_t region;
    int32_t status;     /* replies: rv_status_t */
    uint64_t key;       /* the requester's cache key, echoed */
} rkey_msg_t;

/* The id of the registration holding @p chunk (registered on first use). */
static rv_status_t region_id(am_proc_t *proc, const rv_mem_chunk_t *chunk,
                             int owner, uint32_t *id_p)
{
    rv_status_t st = RV_OK;
    pthread_mutex_lock(&proc->lock);
    am_region_t *r;
    HASH_FIND_PTR(proc->by_chunk, &chunk, r);
    if (r == NULL) {
        if (proc->nregions == proc->regions_cap) {
            uint32_t cap = proc->regions_cap ? 2 * proc->regions_cap : 16;
            am_region_t **grown = realloc(proc->regions,
                                          cap * sizeof(*grown));
            if (grown == NULL) {
                st = RV_ERR_NO_MEMORY;
                goto out;
            }
            proc->regions = grown;
            proc->regions_cap = cap;
        }
        r = calloc(1, sizeof(*r));
        if (r == NULL) {
            st = RV_ERR_NO_MEMORY;
            goto out;
        }
        r->chunk = chunk;
        r->owner = owner;
        r->id = proc->nregions;
        HASH_ADD_PTR(proc->by_chunk, chunk, r);
        proc->regions[proc->nregions++] = r;
    }
    *id_p = r->id;
out:
    pthread_mutex_unlock(&proc->lock);
    return st;
}

void *rv_mem_alloc(rv_worker_t *w, size_t len, rv_rptr_t *rptr)
{
    am_worker_t *aw = am_of(w);
    void *p;
    const rv_mem_chunk_t *chunk;
    if (aw == NULL || rv_mem_general_alloc(aw->gen, len ? len : 1, 64, &p,
                                           &chunk) != RV_OK) {
        rv_error("cannot allocate %zu bytes of registered memory", len);
        return NULL;
    }
    uint32_t id = 0;
    if (region_id(aw->proc, chunk, rv_worker_local(w), &id) != RV_OK) {
        rv_mem_general_free(aw->gen, p);
        return NULL;
    }
    if (rptr != NULL)
        *rptr = (rv_rptr_t){.addr = (uintptr_t)p, .rank = (uint32_t)aw->rank,
                            .region = id};
    return p;
}

void rv_mem_free(rv_worker_t *w, void *p)
{
    am_worker_t *aw = am_of(w);
    if (aw != NULL && p != NULL)
        rv_mem_general_free(aw->gen, p);
}

rv_mem_general_t *am_region_allocator(am_proc_t *proc, uint32_t region)
{
    rv_mem_general_t *gen = NULL;
    pthread_mutex_lock(&proc->lock);
    if (region < proc->nregions && proc->workers != NULL &&
        proc->workers[proc->regions[region]->owner] != NULL)
        gen = proc->workers[proc->regions[region]->owner]->gen;
    pthread_mutex_unlock(&proc->lock);
    return gen;
}

/* ---------------------------------------------------------------------- */
/* Remote keys                                                             */

static rv_status_t on_rkey_req(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    rkey_msg_t m;
    (void)arg;
    if (aw == NULL || msg->len != sizeof(m)) {
        w->stats.rx_malformed++;
        return RV_OK;
    }
    memcpy(&m, msg->data, sizeof(m));
    am_proc_t *proc = aw->proc;
    const void *key = NULL;
    size_t key_len = 0;
    pthread_mutex_lock(&proc->lock);
    if (m.region < proc->nregions) {
        key = proc->regions[m.region]->chunk->rkey;
        key_len = proc->regions[m.region]->chunk->rkey_len;
    }
    pthread_mutex_unlock(&proc->lock);
    m.status = key ? RV_OK : RV_ERR_INVALID;
    struct iovec iov[2] = {{.iov_base = &m, .iov_len = sizeof(m)},
                           {.iov_base = (void *)key, .iov_len = key_len}};
    rv_status_t st = rv_sendv(w, msg->src, am_rkey_rep_id, iov, key ? 2 : 1,
                              NULL);
    if (st != RV_OK)
        rv_error("cannot send a remote key to worker %u: %s", msg->src,
                 rv_status_str(st));
    return RV_OK;
}

static rv_status_t on_rkey_rep(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    rkey_msg_t m;
    (void)arg;
    if (aw == NULL || msg->len < sizeof(m)) {
        w->stats.rx_malformed++;
        return RV_OK;
    }
    memcpy(&m, msg->data, sizeof(m));
    am_fetch_t *f = aw->fetches;
    while (f != NULL && (f->key != m.key || f->done))
        f = f->next;
    if (f == NULL)
        return RV_OK; /* nobody waits for it */
    f->status = m.status;
    if (m.status == RV_OK)
        f->status = aw->ctx->ops->rkey_unpack(
            w->tw, msg->src, (const uint8_t *)msg->data + sizeof(m),
            msg->len - sizeof(m), &f->rkey);
    f->done = true;
    return RV_OK;
}

rv_status_t am_rkey(am_worker_t *aw, rv_tid_t tid, uint32_t region,
                    rv_trkey_t **rkey_p)
{
    uint64_t key = (uint64_t)tid << 32 | region;
    am_rkey_t *k;
    HASH_FIND(hh, aw->rkeys, &key, sizeof(key), k);
    if (k != NULL) {
        *rkey_p = k->rkey;
        return RV_OK;
    }
    if (aw->w->in_callback)
        return RV_ERR_AGAIN; /* cannot wait here */
    am_fetch_t f = {.key = key, .next = aw->fetches};
    aw->fetches = &f;
    rkey_msg_t m = {.region = region, .key = key};
    rv_status_t st = rv_send(aw->w, tid, am_rkey_req_id, &m, sizeof(m), NULL);
    while (st == RV_OK && !f.done)
        rv_progress(aw->w);
    for (am_fetch_t **pp = &aw->fetches; *pp != NULL; pp = &(*pp)->next)
        if (*pp == &f) {
            *pp = f.next;
            break;
        }
    if (st == RV_OK)
        st = f.status;
    if (st != RV_OK) {
        rv_error("no remote key for region %u of worker %u's process: %s",
                 region, tid, rv_status_str(st));
        return st;
    }
    /* A nested frame may have cached it meanwhile. */
    HASH_FIND(hh, aw->rkeys, &key, sizeof(key), k);
    if (k != NULL) {
        aw->ctx->ops->rkey_destroy(aw->w->tw, f.rkey);
        *rkey_p = k->rkey;
        return RV_OK;
    }
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        aw->ctx->ops->rkey_destroy(aw->w->tw, f.rkey);
        return RV_ERR_NO_MEMORY;
    }
    k->key = key;
    k->rkey = f.rkey;
    HASH_ADD(hh, aw->rkeys, key, sizeof(k->key), k);
    *rkey_p = k->rkey;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Waiting for one-sided operations                                        */

/* Waits for an operation started with am_sync_done on @p s. */
static rv_status_t op_wait(am_worker_t *aw, rv_status_t st, rv_sync_t *s)
{
    if (st == RV_INPROGRESS)
        return rv_sync_wait(aw->w, s);
    return st;
}

rv_status_t am_fetch(am_worker_t *aw, const am_call_t *c, void *buf)
{
    const am_hdr_t *h = &c->hdr;
    if (rv_tid_rank(aw->ctx, c->src) == aw->rank) {
        memcpy(buf, (const void *)(uintptr_t)h->ret, h->ret_len);
        return RV_OK;
    }
    rv_trkey_t *rkey;
    rv_status_t st = am_rkey(aw, c->src, h->root, &rkey);
    if (st != RV_OK)
        return st;
    rv_sync_t s;
    rv_sync_init(&s, 1);
    st = aw->ctx->ops->get(aw->w->tw, c->src, buf, h->ret_len, h->ret, rkey,
                           am_sync_done, &s);
    return op_wait(aw, st, &s);
}

void am_mem_fini(am_worker_t *aw)
{
    am_rkey_t *k, *tmp;
    HASH_ITER(hh, aw->rkeys, k, tmp) {
        HASH_DEL(aw->rkeys, k);
        aw->ctx->ops->rkey_destroy(aw->w->tw, k->rkey);
        free(k);
    }
}

void am_proc_mem_fini(am_proc_t *proc)
{
    HASH_CLEAR(hh, proc->by_chunk);
    for (uint32_t i = 0; i < proc->nregions; i++)
        free(proc->regions[i]);
    free(proc->regions);
    proc->regions = NULL;
    proc->nregions = proc->regions_cap = 0;
}

rv_status_t am_mem_register(rv_context_t *ctx)
{
    rv_status_t st = rv_handler_register(ctx, "rivet.am.rkey_req",
                                         on_rkey_req, NULL, 0,
                                         &am_rkey_req_id);
    if (st == RV_OK)
        st = rv_handler_register(ctx, "rivet.am.rkey_rep", on_rkey_rep,
                                 NULL, 0, &am_rkey_rep_id);
    return st;
}

/* ---------------------------------------------------------------------- */
/* The buffer put call (the get call is in rv_am.c, with the others)       */

rv_status_t rv_call_buffer_put(rv_worker_t *w, rv_tid_t dest,
                               rv_handler_id_t h, const void *args,
                               size_t len, const void *src, rv_rptr_t dst,
                               size_t n, rv_sync_t *sync, unsigned flags)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL || dest >= aw->nworkers ||
        (int)dst.rank != rv_tid_rank(aw->ctx, dest) || n > UINT32_MAX) {
        rv_error("rv_call_buffer_put to worker %u: the destination buffer "
                 "must be in that worker's process", dest);
        return RV_ERR_INVALID;
    }
    if ((int)dst.rank == aw->rank) {
        memcpy((void *)(uintptr_t)dst.addr, src, n);
    } else if (n > 0) {
        rv_trkey_t *rkey;
        rv_status_t st = am_rkey(aw, dest, dst.region, &rkey);
        if (st != RV_OK)
            return st;
        /* put_sync_send: the put, completed at the target, then the call */
        rv_sync_t s;
        rv_sync_init(&s, 1);
        st = op_wait(aw, aw->ctx->ops->put(w->tw, dest, src, n, dst.addr,
                                           rkey, am_sync_done, &s), &s);
        if (st == RV_OK) {
            rv_sync_init(&s, 1);
            st = op_wait(aw, aw->ctx->ops->flush(w->tw, dest, am_sync_done, &s),
                         &s);
        }
        if (st != RV_OK)
            return st;
    }
    return am_call_ref(w, dest, h, args, len, dst.addr, n, 0, AM_BUFPUT, sync,
                       flags);
}
