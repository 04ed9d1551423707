/*
 * Registered memory for users, the registrations remote pointers name,
 * and the remote keys of peers' registrations.
 *
 * rv_mem_alloc hands out memory of the worker's general allocator (best
 * fit over its NUMA zone's registered chunks). A remote pointer names the
 * registration a piece of memory lies in by a small per-process id, so it
 * stays 16 bytes whatever the transport's remote keys look like. A peer
 * that uses a remote pointer fetches the region's packed key once, with a
 * no-setup service call to the owning process ("rivet.rma.rkey_req"), and
 * keeps it unpacked for its own transport worker (Seriema ships locators
 * with the key inside; rivet's keys are 50-150 bytes on UCX).
 */
#include <stdlib.h>
#include <string.h>

#include "rma_internal.h"

static rv_handler_id_t rkey_req_id, rkey_rep_id;

/* Registered memory is handed out on cache lines: two allocations never
 * share one, so remote atomics on one do not slow the other. */
#define RMA_ALLOC_ALIGN 64
/* The region table's first size; it doubles as it grows. */
#define RMA_REGIONS_MIN 16

typedef struct {
    uint32_t region;
    int32_t status; /* replies: rv_status_t */
    uint64_t key;   /* the requester's cache key, echoed */
} rkey_msg_t;

bool rma_region_holds(rma_proc_t *proc, uint64_t addr, uint64_t len)
{
    bool ok = false;
    pthread_mutex_lock(&proc->lock);
    for (uint32_t i = 0; i < proc->nregions && !ok; i++) {
        const rma_region_t *r = proc->regions[i];
        uint64_t base = (uintptr_t)r->addr;
        ok = r->chunk != NULL && addr >= base && len <= r->len &&
             addr - base <= r->len - len;
    }
    pthread_mutex_unlock(&proc->lock);
    return ok;
}

/* The id of the registration holding @p chunk (registered on first use). */
static rv_status_t region_id(rma_proc_t *proc, const rv_mem_chunk_t *chunk,
                             int owner, uint32_t *id_p)
{
    rv_status_t st = RV_OK;
    pthread_mutex_lock(&proc->lock);
    rma_region_t *r;
    HASH_FIND_PTR(proc->by_chunk, &chunk, r);
    if (r != NULL && (r->tmem != chunk->tmem || r->addr != chunk->addr ||
                      r->len != chunk->len)) {
        /* The allocator freed that registration and made another with
         * the same descriptor: peers hold the old one's key under the old
         * id, so the new one gets an id of its own, and the old id names
         * nothing any more. */
        HASH_DELETE(hh, proc->by_chunk, r);
        r->chunk = NULL;
        r = NULL;
    }
    if (r == NULL) {
        if (proc->nregions == proc->regions_cap) {
            uint32_t cap =
                proc->regions_cap ? 2 * proc->regions_cap : RMA_REGIONS_MIN;
            rma_region_t **grown = realloc(proc->regions, cap * sizeof(*grown));
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
        r->tmem = chunk->tmem;
        r->addr = chunk->addr;
        r->len = chunk->len;
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
    rma_worker_t *rw = rma_of(w);
    void *p;
    const rv_mem_chunk_t *chunk;
    if (rw == NULL) {
        rma_not_initialised("rv_mem_alloc");
        return NULL;
    }
    if (rv_mem_general_alloc(rw->gen, len ? len : 1, RMA_ALLOC_ALIGN, &p,
                             &chunk) != RV_OK) {
        rv_error("cannot allocate %zu bytes of registered memory", len);
        return NULL;
    }
    uint32_t id = 0;
    if (region_id(rw->proc, chunk, rv_worker_local(w), &id) != RV_OK) {
        rv_mem_general_free(rw->gen, p);
        return NULL;
    }
    if (rptr != NULL)
        *rptr =
            (rv_rptr_t){.addr = (uintptr_t)p, .rank = rw->rank, .region = id};
    return p;
}

void rv_mem_free(rv_worker_t *w, void *p)
{
    rma_worker_t *rw = rma_of(w);
    if (rw == NULL)
        rma_not_initialised("rv_mem_free");
    else if (p != NULL)
        rv_mem_general_free(rw->gen, p);
}

rv_status_t rv_mem_reserve(rv_worker_t *w, size_t len)
{
    rma_worker_t *rw = rma_of(w);
    if (rw == NULL) {
        rma_not_initialised("rv_mem_reserve");
        return RV_ERR_INVALID;
    }
    rv_status_t st = rv_mem_general_reserve(rw->gen, len);
    if (st != RV_OK)
        rv_error("cannot reserve %zu bytes of registered memory: %s", len,
                 rv_status_str(st));
    return st;
}

rv_mem_general_t *rma_region_allocator(rma_proc_t *proc, uint32_t region)
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
    rma_worker_t *rw = rma_of(w);
    rkey_msg_t m;
    (void)arg;
    if (rw == NULL || msg->len != sizeof(m)) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        return RV_OK;
    }
    memcpy(&m, msg->data, sizeof(m));
    rma_proc_t *proc = rw->proc;
    const void *key = NULL;
    size_t key_len = 0;
    pthread_mutex_lock(&proc->lock);
    if (m.region < proc->nregions && proc->regions[m.region]->chunk) {
        key = proc->regions[m.region]->chunk->rkey;
        key_len = proc->regions[m.region]->chunk->rkey_len;
    }
    pthread_mutex_unlock(&proc->lock);
    m.status = key ? RV_OK : RV_ERR_INVALID;
    struct iovec iov[2] = {{.iov_base = &m, .iov_len = sizeof(m)},
                           {.iov_base = (void *)key, .iov_len = key_len}};
    rv_status_t st = rv_sendv(w, msg->src, rkey_rep_id, iov, key ? 2 : 1, NULL);
    if (st != RV_OK)
        rv_error("cannot send a remote key to worker %u: %s", msg->src,
                 rv_status_str(st));
    return RV_OK;
}

static rv_status_t on_rkey_rep(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    rma_worker_t *rw = rma_of(w);
    rkey_msg_t m;
    (void)arg;
    if (rw == NULL || msg->len < sizeof(m)) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        return RV_OK;
    }
    memcpy(&m, msg->data, sizeof(m));
    rma_fetch_t *f = rw->fetches;
    while (f != NULL && (f->key != m.key || f->done))
        f = f->next;
    if (f == NULL)
        return RV_OK; /* nobody waits for it */
    f->status = m.status;
    if (m.status == RV_OK)
        f->status = rv_tw_rkey_unpack(w, msg->src,
                                      (const uint8_t *)msg->data + sizeof(m),
                                      msg->len - sizeof(m), &f->rkey);
    f->done = true;
    return RV_OK;
}

rv_status_t rma_rkey(rma_worker_t *rw, rv_tid_t tid, uint32_t region,
                     rv_trkey_t **rkey_p)
{
    uint64_t key = (uint64_t)tid << 32 | region;
    rma_rkey_t *k;
    HASH_FIND(hh, rw->rkeys, &key, sizeof(key), k);
    if (k != NULL) {
        *rkey_p = k->rkey;
        return RV_OK;
    }
    if (rv_worker_in_callback(rw->w))
        return RV_ERR_AGAIN; /* cannot wait here */
    rma_fetch_t f = {.key = key, .next = rw->fetches};
    rw->fetches = &f;
    rkey_msg_t m = {.region = region, .key = key};
    rv_status_t st = rv_send(rw->w, tid, rkey_req_id, &m, sizeof(m), NULL);
    while (st == RV_OK && !f.done)
        rv_progress(rw->w);
    for (rma_fetch_t **pp = &rw->fetches; *pp != NULL; pp = &(*pp)->next)
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
    HASH_FIND(hh, rw->rkeys, &key, sizeof(key), k);
    if (k != NULL) {
        rv_tw_rkey_destroy(rw->w, f.rkey);
        *rkey_p = k->rkey;
        return RV_OK;
    }
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        rv_tw_rkey_destroy(rw->w, f.rkey);
        return RV_ERR_NO_MEMORY;
    }
    k->key = key;
    k->rkey = f.rkey;
    HASH_ADD(hh, rw->rkeys, key, sizeof(k->key), k);
    *rkey_p = k->rkey;
    return RV_OK;
}

void rma_mem_stop(rma_worker_t *rw)
{
    rma_rkey_t *k, *tmp;
    HASH_ITER(hh, rw->rkeys, k, tmp)
    {
        HASH_DEL(rw->rkeys, k);
        rv_tw_rkey_destroy(rw->w, k->rkey);
        free(k);
    }
    if (rw->gen != NULL)
        rv_mem_general_destroy(rw->gen);
    if (rw->chunks != NULL)
        rv_mem_chunk_allocator_destroy(rw->chunks);
}

void rma_proc_mem_fini(rma_proc_t *proc)
{
    HASH_CLEAR(hh, proc->by_chunk);
    for (uint32_t i = 0; i < proc->nregions; i++)
        free(proc->regions[i]);
    free(proc->regions);
    proc->regions = NULL;
    proc->nregions = proc->regions_cap = 0;
}

rv_status_t rma_mem_register(rv_context_t *ctx)
{
    rv_status_t st = rv_handler_register(ctx, "rivet.rma.rkey_req", on_rkey_req,
                                         NULL, 0, &rkey_req_id);
    if (st == RV_OK)
        st = rv_handler_register(ctx, "rivet.rma.rkey_rep", on_rkey_rep, NULL,
                                 0, &rkey_rep_id);
    return st;
}

/* The worker's registered memory: memory.chunk chunks of its NUMA zone,
 * taken on first use. */
rv_status_t rma_mem_start(rma_worker_t *rw)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(rw->ctx, &tp);
    rv_mem_chunk_params_t p;
    rv_mem_chunk_params_init(&p, rv_context_config(rw->ctx), ops, tp,
                             rv_worker_numa_node(rw->w));
    rv_status_t st = rv_mem_chunk_allocator_create(&p, &rw->chunks);
    if (st != RV_OK)
        return st;
    st = rv_mem_general_create(rw->chunks, &rw->gen);
    if (st != RV_OK) {
        rv_mem_chunk_allocator_destroy(rw->chunks);
        rw->chunks = NULL;
    }
    return st;
}
