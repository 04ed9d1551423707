/*
 * Remote memory: put/get and 64-bit atomics on remote pointers.
 *
 * An operation on a pointer of process r goes to worker r*T + (the
 * caller's local index) of that process: every worker of a process can
 * reach its registered memory, and spreading the callers over the
 * target's endpoints keeps one worker's transport from serializing them.
 * The remote key comes from the worker's cache (rma_mem.c). Pointers
 * into the caller's own process need no transport, but for atomics where
 * the transport's are not atomic with the CPU's (amo_target).
 */
#include <string.h>

#include "rma_internal.h"

rv_status_t rma_target(rma_worker_t *rw, rv_rptr_t p, rv_tid_t *peer_p,
                       rv_trkey_t **rkey_p)
{
    if (p.rank == rw->rank) {
        *rkey_p = NULL;
        return RV_OK;
    }
    if (p.rank < 0 || p.rank >= rv_size(rw->ctx)) {
        rv_error("a remote pointer to rank %d: the job has %d", p.rank,
                 rv_size(rw->ctx));
        return RV_ERR_INVALID;
    }
    *peer_p = rv_tid_make(rw->ctx, p.rank, rv_worker_local(rw->w));
    rw->dirty = true;
    return rma_rkey(rw, *peer_p, p.region, rkey_p);
}

/* Accounts a transport operation on @p sync (or waits for it). */
static rv_status_t finish(rma_worker_t *rw, rv_status_t st, rv_sync_t *sync,
                          rv_sync_t *local)
{
    if (st == RV_INPROGRESS) {
        if (sync == NULL)
            return rv_sync_wait(rw->w, local);
        return RV_OK;
    }
    if (sync != NULL && st == RV_OK)
        rv_sync_complete(sync, RV_OK); /* the count was raised up front */
    return st;
}

/* Starts an operation: its completion goes to @p sync, or to @p local
 * when the caller waits. */
static rv_sync_t *op_sync(rv_sync_t *sync, rv_sync_t *local)
{
    if (sync == NULL) {
        rv_sync_init(local, 1);
        return local;
    }
    atomic_fetch_add(&sync->pending, 1);
    return sync;
}

/* A put (@p local -> @p p) or a get (@p p -> @p local). */
static rv_status_t xfer(rv_worker_t *w, rv_rptr_t p, void *local, size_t n,
                        bool get, rv_sync_t *sync)
{
    rma_worker_t *rw = rma_of(w);
    rv_tid_t peer = 0;
    rv_trkey_t *rkey;
    if (rw == NULL)
        return rma_not_initialised(get ? "rv_get" : "rv_put");
    rv_status_t st = rma_target(rw, p, &peer, &rkey);
    if (st != RV_OK)
        return st;
    void *there = (void *)(uintptr_t)p.addr;
    if (rkey == NULL) {
        memcpy(get ? local : there, get ? there : local, n);
        return RV_OK;
    }
    rv_sync_t mine, *s = op_sync(sync, &mine);
    st = get ? rv_tw_get(w, peer, local, n, p.addr, rkey, rma_sync_done, s)
             : rv_tw_put(w, peer, p.addr, rkey, local, n, rma_sync_done, s);
    if (st < 0 && sync != NULL)
        atomic_fetch_sub(&sync->pending, 1);
    return finish(rw, st, sync, &mine);
}

rv_status_t rv_put(rv_worker_t *w, rv_rptr_t dst, const void *src, size_t n,
                   rv_sync_t *sync)
{
    return xfer(w, dst, (void *)src, n, false, sync);
}

rv_status_t rv_get(rv_worker_t *w, void *dst, rv_rptr_t src, size_t n,
                   rv_sync_t *sync)
{
    return xfer(w, src, dst, n, true, sync);
}

/*
 * The target of an atomic: rma_target's, except that a word of this
 * process is reached through the transport too, on this worker's own
 * connection, where the transport's atomics are not atomic with the CPU's.
 * A NIC that reports IBV_ATOMIC_HCA applies another process's atomic as a
 * read and a write of its own; a CPU atomic between the two is lost, or
 * the two elect two winners (OpenSHMEM implementations over such NICs
 * send their own atomics through the NIC for the same reason).
 */
static rv_status_t amo_target(rma_worker_t *rw, rv_rptr_t p, rv_tid_t *peer_p,
                              rv_trkey_t **rkey_p)
{
    if (p.rank != rw->rank || !rw->amo_loopback)
        return rma_target(rw, p, peer_p, rkey_p);
    *peer_p = rw->me;
    rw->dirty = true;
    return rma_rkey(rw, rw->me, p.region, rkey_p);
}

static rv_status_t atomic_op(rv_worker_t *w, rv_rptr_t p, bool cswap,
                             uint64_t v1, uint64_t v2, uint64_t *old,
                             rv_sync_t *sync)
{
    rma_worker_t *rw = rma_of(w);
    rv_tid_t peer = 0;
    rv_trkey_t *rkey;
    if (rw == NULL)
        return rma_not_initialised("an atomic");
    if (p.addr % sizeof(uint64_t) != 0)
        return RV_ERR_INVALID;
    rv_status_t st = amo_target(rw, p, &peer, &rkey);
    if (st != RV_OK)
        return st;
    if (rkey == NULL) {
        /* CPU atomics: atomic with respect to the transport's, which are
         * CPU atomics on mapped memory (shm), applied by this process
         * (emulation), or a NIC's that says so (IBV_ATOMIC_GLOB). */
        uint64_t *at = (uint64_t *)(uintptr_t)p.addr, prev;
        if (cswap) {
            prev = v1;
            __atomic_compare_exchange_n(at, &prev, v2, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
        } else {
            prev = __atomic_fetch_add(at, v1, __ATOMIC_SEQ_CST);
        }
        if (old != NULL)
            *old = prev;
        return RV_OK;
    }
    rv_sync_t local, *s = op_sync(sync, &local);
    st = cswap ? rv_tw_atomic_cswap64(w, peer, v1, v2, p.addr, rkey, old,
                                      rma_sync_done, s)
               : rv_tw_atomic_fadd64(w, peer, v1, p.addr, rkey, old,
                                     rma_sync_done, s);
    if (st < 0 && sync != NULL)
        atomic_fetch_sub(&sync->pending, 1);
    return finish(rw, st, sync, &local);
}

rv_status_t rv_atomic_fadd(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old, rv_sync_t *sync)
{
    return atomic_op(w, p, false, value, 0, old, sync);
}

rv_status_t rv_atomic_cswap(rv_worker_t *w, rv_rptr_t p, uint64_t compare,
                            uint64_t swap, uint64_t *old, rv_sync_t *sync)
{
    return atomic_op(w, p, true, compare, swap, old, sync);
}

rv_status_t rv_atomic_swap(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old)
{
    uint64_t seen, prev;
    rv_status_t st = rv_atomic_fadd(w, p, 0, &seen, NULL);
    while (st == RV_OK) {
        st = rv_atomic_cswap(w, p, seen, value, &prev, NULL);
        if (st != RV_OK || prev == seen)
            break;
        seen = prev;
    }
    if (st == RV_OK && old != NULL)
        *old = seen;
    return st;
}
