/**
 * @file rv_rma.h
 * @brief rivet's remote memory layer: registered memory allocated in the
 * NUMA zone of any worker of the job, one-sided put/get and 64-bit
 * atomics on remote pointers (rv_rptr_t, from am/rv_am.h), completed
 * through synchronizers.
 *
 * A remote pointer names a process, an address and the registration it
 * lies in; the first use from a worker fetches that registration's remote
 * key (a service call) and caches it. Operations on memory of the
 * caller's own process are plain loads, stores and CPU atomics.
 */
#ifndef RIVET_RV_RMA_H
#define RIVET_RV_RMA_H

#include "rv_am.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Registers the layer's service calls. Call once in every
 * process, before rv_job_run (like rv_am_register). */
rv_status_t rv_rma_init(rv_context_t *ctx);

/**
 * @brief Allocates @p len bytes of registered memory in the NUMA zone of
 * worker @p owner (a service call it runs when it progresses; this waits,
 * progressing).
 * @return RV_OK with @p *ptr set, or an error (RV_ERR_NO_MEMORY when the
 *         owner has none left)
 */
rv_status_t rv_rmalloc(rv_worker_t *w, rv_tid_t owner, size_t len,
                       rv_rptr_t *ptr);

/** @brief Frees memory of rv_rmalloc or rv_mem_alloc, from any worker of
 * the job (waits, progressing). */
rv_status_t rv_rfree(rv_worker_t *w, rv_rptr_t ptr);

/**
 * @brief Writes @p n bytes at @p src to @p dst. Non-blocking: with
 * @p sync, one operation is added to it and completed when @p src may be
 * reused; with sync NULL the call returns once it may. Remote completion:
 * rv_flush.
 */
rv_status_t rv_put(rv_worker_t *w, rv_rptr_t dst, const void *src, size_t n,
                   rv_sync_t *sync);

/** @brief Reads @p n bytes at @p src into @p dst; complete (the bytes are
 * in @p dst) when @p sync completes, or on return with sync NULL. */
rv_status_t rv_get(rv_worker_t *w, void *dst, rv_rptr_t src, size_t n,
                   rv_sync_t *sync);

/** @brief Atomically adds @p value to the 64-bit word at @p p; the old
 * value is in @p *old (if not NULL) when @p sync completes. */
rv_status_t rv_atomic_fadd(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old, rv_sync_t *sync);

/** @brief Stores @p swap at @p p if it holds @p compare; the old value is
 * in @p *old when @p sync completes. */
rv_status_t rv_atomic_cswap(rv_worker_t *w, rv_rptr_t p, uint64_t compare,
                            uint64_t swap, uint64_t *old, rv_sync_t *sync);

/** @brief Atomically replaces the word at @p p by @p value and returns the
 * old one in @p *old (a compare-swap loop; waits, progressing). */
rv_status_t rv_atomic_swap(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old);

/**
 * @brief AM Long: @p n bytes at @p src are put into @p dst (memory of
 * @p dest's process), and @p dest runs @p h (call->buf = the local address
 * of @p dst, call->buf_len = @p n) only once the whole payload is there.
 * rma.am_long_protocol chooses how: `reassembly` injects payload and
 * envelope back to back and the target matches them (no round trip);
 * `put_sync_send` waits for the put's remote completion, then sends.
 * @p sync completes when @p src is reusable (and, with RV_NOTIFY_CONSUMED,
 * once the handler ran).
 */
rv_status_t rv_put_handler(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *src,
                           size_t n, rv_rptr_t dst, rv_sync_t *sync,
                           unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
