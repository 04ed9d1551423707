/**
 * @file rv_rma.h
 * @brief rivet's remote memory layer: remote pointers, registered memory
 * allocated in the NUMA zone of any worker of the job, one-sided put/get
 * and 64-bit atomics on remote pointers, and calls whose buffer moves by
 * RMA (AM Long and its get-side twin), completed through synchronizers.
 *
 * A remote pointer names a process, an address and the registration it
 * lies in; the first use from a worker fetches that registration's remote
 * key (a service call) and caches it. Operations on memory of the
 * caller's own process are plain loads, stores and CPU atomics.
 * Vocabulary as in rv_am.h: destination before source, `sync` NULL to
 * wait; rv_flush completes one-sided operations at their targets.
 *
 * @note Thread mode: rv_rma_init from the main thread before rv_job_run,
 * in every process (it initialises the invocation layer too); every other
 * call from a worker thread on its own rv_worker_t. A call on a job where
 * rv_rma_init was not called fails with RV_ERR_INVALID and a logged error
 * naming it.
 */
#ifndef RIVET_RV_RMA_H
#define RIVET_RV_RMA_H

#include "rv_am.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief A remote pointer: an address in registered memory of process
 * @c rank, named by the registration (@c region) it lies in. Plain data:
 * copy it into call arguments, store it, send it anywhere. The peer that
 * uses it fetches and caches the region's remote key on first use.
 */
typedef struct rv_rptr {
    uint64_t addr;    /**< address in the owner's process */
    rv_rank_t rank;   /**< owning process */
    uint32_t region;  /**< registration id in that process */
} rv_rptr_t;

/** @brief @p p advanced by @p off bytes (same region). */
static inline rv_rptr_t rv_rptr_add(rv_rptr_t p, uint64_t off)
{
    p.addr += off;
    return p;
}

/** @brief Initialises the layer (and the invocation layer below it) in
 * @p ctx: its slot, handlers and hooks. Idempotent. Call once in every
 * process, before rv_job_run. */
RV_EXPORT rv_status_t rv_rma_init(rv_context_t *ctx);

/**
 * @brief Allocates @p len bytes of registered memory in the calling
 * worker's NUMA zone (from core's chunk allocators: no registration per
 * allocation), and describes it as a remote pointer.
 * @param [out] rptr  the remote pointer to it (may be NULL)
 * @return the memory, or NULL (logged). Free it with rv_mem_free (this
 *         worker) or rv_remote_free (any worker of the job).
 */
RV_EXPORT void *rv_mem_alloc(rv_worker_t *w, size_t len, rv_rptr_t *rptr);

/** @brief Frees memory of rv_mem_alloc, by the worker that allocated it. */
RV_EXPORT void rv_mem_free(rv_worker_t *w, void *p);

/**
 * @brief Allocates @p len bytes of registered memory in the NUMA zone of
 * worker @p owner (a service call it runs when it progresses; this waits,
 * progressing).
 * @return RV_OK with @p *ptr set, or an error (RV_ERR_NO_MEMORY when the
 *         owner has none left). Free it with rv_remote_free.
 */
RV_EXPORT rv_status_t rv_remote_alloc(rv_worker_t *w, rv_tid_t owner, size_t len,
                            rv_rptr_t *ptr);

/** @brief Frees memory of rv_remote_alloc or rv_mem_alloc, from any worker
 * of the job (waits, progressing, until the owner freed it). */
RV_EXPORT rv_status_t rv_remote_free(rv_worker_t *w, rv_rptr_t ptr);

/**
 * @brief Writes @p n bytes at @p src to @p dst. Non-blocking: with
 * @p sync, one operation is added to it and completed when @p src may be
 * reused; with sync NULL the call returns once it may. Remote completion:
 * rv_flush.
 */
RV_EXPORT rv_status_t rv_put(rv_worker_t *w, rv_rptr_t dst, const void *src, size_t n,
                   rv_sync_t *sync);

/** @brief Reads @p n bytes at @p src into @p dst; complete (the bytes are
 * in @p dst) when @p sync completes, or on return with sync NULL. */
RV_EXPORT rv_status_t rv_get(rv_worker_t *w, void *dst, rv_rptr_t src, size_t n,
                   rv_sync_t *sync);

/** @brief Atomically adds @p value to the 64-bit word at @p p; the old
 * value is in @p *old (if not NULL) when @p sync completes. */
RV_EXPORT rv_status_t rv_atomic_fadd(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old, rv_sync_t *sync);

/** @brief Stores @p swap at @p p if it holds @p compare; the old value is
 * in @p *old when @p sync completes. */
RV_EXPORT rv_status_t rv_atomic_cswap(rv_worker_t *w, rv_rptr_t p, uint64_t compare,
                            uint64_t swap, uint64_t *old, rv_sync_t *sync);

/** @brief Atomically replaces the word at @p p by @p value and returns the
 * old one in @p *old (a compare-swap loop; waits, progressing). */
RV_EXPORT rv_status_t rv_atomic_swap(rv_worker_t *w, rv_rptr_t p, uint64_t value,
                           uint64_t *old);

/**
 * @brief AM Long: @p n bytes at @p src are put into @p dst (memory of
 * @p dest's process), and @p dest runs @p h (call->buf = the local address
 * of @p dst, call->buf_len = @p n) only once the whole payload is there.
 * rma.am_long_protocol chooses how: `reassembly` injects payload and
 * envelope back to back and the target matches them (no round trip);
 * `put_sync_send` waits for the put's remote completion, then sends.
 * @p sync completes when @p src is reusable (and, with RV_NOTIFY_CONSUMED,
 * once the handler ran); with sync NULL, @p src is reusable on return.
 */
RV_EXPORT rv_status_t rv_put_handler(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, rv_rptr_t dst,
                           const void *src, size_t n, rv_sync_t *sync,
                           unsigned flags);

/**
 * @brief @p dest RDMA-reads @p n bytes at @p src (registered memory of the
 * caller's process, from rv_mem_alloc) into a buffer of its own, then runs
 * @p h with it as call->buf. @p src must stay unchanged until @p sync
 * completes (with sync NULL: until this returns), which is once the
 * target has run the call. Calls from the same worker that arrive while
 * the read is in flight wait for it (FIFO).
 */
RV_EXPORT rv_status_t rv_get_handler(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, rv_rptr_t src,
                           size_t n, rv_sync_t *sync, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
