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
 * caller's own process are plain loads, stores and CPU atomics, but for
 * atomics where the transport's are not atomic with the CPU's (a NIC that
 * reports IBV_ATOMIC_HCA, as Soft-RoCE and most adapters do): there they
 * go through the NIC too.
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
 * @note Any thread may copy it; the memory it names is used through the
 *       functions below, from workers.
 */
typedef struct rv_rptr {
    uint64_t addr;   /**< address in the owner's process */
    rv_rank_t rank;  /**< owning process */
    uint32_t region; /**< registration id in that process */
} rv_rptr_t;

/**
 * @brief A remote pointer advanced by a number of bytes.
 * @param [in] p   the pointer
 * @param [in] off bytes to add; the result must stay inside the same
 *                 registration (@c region), which is not checked
 * @return @p p with @c addr + @p off
 * @note Any thread (plain data).
 */
static inline rv_rptr_t rv_rptr_add(rv_rptr_t p, uint64_t off)
{
    p.addr += off;
    return p;
}

/**
 * @brief Initialises the layer (and the invocation layer below it) in
 * @p ctx: its slot, handlers and hooks. Idempotent.
 * @param [in] ctx the context, before rv_job_run
 * @return RV_OK (also when it is initialised already); RV_ERR_INVALID for
 *         a NULL @p ctx or while a job runs (logged); RV_ERR_EXISTS when a
 *         handler name of the layer is taken (logged); RV_ERR_NO_MEMORY;
 *         rv_am_init's errors
 * @note Main thread, once in every process, before rv_job_run.
 */
RV_EXPORT rv_status_t rv_rma_init(rv_context_t *ctx);

/**
 * @brief Allocates @p len bytes of registered memory in the calling
 * worker's NUMA zone (from core's chunk allocators: no registration per
 * allocation), and describes it as a remote pointer.
 * @param [in]  w     the calling worker, the memory's owner
 * @param [in]  len   bytes (0 is taken as 1); aligned to a cache line (64
 *                    bytes), and no two allocations share one
 * @param [out] rptr  the remote pointer to it (may be NULL)
 * @return the memory, or NULL (logged, also on a job without the layer).
 *         Free it with rv_mem_free (this worker) or rv_remote_free (any
 *         worker of the job); what is not freed is released when the job
 *         ends, with the worker's allocator.
 * @note From @p w's own thread.
 */
RV_EXPORT void *rv_mem_alloc(rv_worker_t *w, size_t len, rv_rptr_t *rptr);

/**
 * @brief Frees memory of rv_mem_alloc, by the worker that allocated it.
 * @param [in] w the worker that allocated it
 * @param [in] p the address rv_mem_alloc returned; NULL is accepted. A
 *               pointer @p w did not allocate is reported and ignored.
 * @note From @p w's own thread. No operation of any worker may still use
 *       the memory.
 */
RV_EXPORT void rv_mem_free(rv_worker_t *w, void *p);

/**
 * @brief Makes at least @p len bytes of registered memory ready in the
 * calling worker's allocator: mapped, registered and faulted in, so that
 * rv_mem_alloc calls adding up to that much pay none of it (memory a
 * program knows it will fill, taken off its critical path).
 * @param [in] w   the calling worker
 * @param [in] len bytes; what the worker holds unallocated counts
 * @return RV_OK; RV_ERR_INVALID on a job without the layer (logged);
 *         RV_ERR_NO_MEMORY or the chunk allocator's error (logged)
 * @note From @p w's own thread. The memory stays the worker's until the
 *       job ends.
 */
RV_EXPORT rv_status_t rv_mem_reserve(rv_worker_t *w, size_t len);

/**
 * @brief Allocates @p len bytes of registered memory in the NUMA zone of
 * worker @p owner (a service call it runs when it progresses; this waits,
 * progressing).
 * @param [in]  w     the calling worker
 * @param [in]  owner the worker whose zone the memory is in, and which
 *                    allocates it (rv_mem_alloc); may be @p w
 * @param [in]  len   bytes
 * @param [out] ptr   the remote pointer; set only on success
 * @return RV_OK; RV_ERR_NO_MEMORY when the owner has none left;
 *         RV_ERR_INVALID on a job without the layer (logged); the call's
 *         errors (rv_call_return). Free it with rv_remote_free.
 * @note From @p w's own thread; not from an RV_HANDLER_INLINE handler (it
 *       waits).
 */
RV_EXPORT rv_status_t rv_remote_alloc(rv_worker_t *w, rv_tid_t owner,
                                      size_t len, rv_rptr_t *ptr);

/**
 * @brief Frees memory of rv_remote_alloc or rv_mem_alloc, from any worker
 * of the job (waits, progressing, until the owner freed it).
 * @param [in] w   the calling worker
 * @param [in] ptr the remote pointer rv_remote_alloc or rv_mem_alloc gave
 *                 (its address is the allocation's start)
 * @return RV_OK once the memory was freed at its process; RV_ERR_INVALID
 *         on a job without the layer (logged); the call's errors. A
 *         pointer its process does not know is logged there and not
 *         reported here.
 * @note From @p w's own thread; not from an RV_HANDLER_INLINE handler. No
 *       operation of any worker may still use the memory.
 */
RV_EXPORT rv_status_t rv_remote_free(rv_worker_t *w, rv_rptr_t ptr);

/**
 * @brief Writes @p n bytes at @p src to @p dst. Non-blocking: with
 * @p sync, one operation is added to it and completed when @p src may be
 * reused; with sync NULL the call returns once it may. Remote completion:
 * rv_flush.
 *
 * Memory of the caller's own process is written with memcpy before the
 * call returns. The first operation from @p w on a registration of
 * another process waits, progressing, for its remote key.
 * @param [in]     w    the calling worker
 * @param [in]     dst  the destination, in registered memory of any
 *                      process
 * @param [in]     src  the source bytes; see @p sync
 * @param [in]     n    bytes
 * @param [in,out] sync NULL to wait until @p src is reusable, or a
 *                      synchronizer completed then
 * @return RV_OK; RV_ERR_INVALID on a job without the layer (logged) or for
 *         a @p dst of a rank outside the job (logged); RV_ERR_AGAIN from
 *         an RV_HANDLER_INLINE handler when the remote key is not cached
 *         yet; the remote key fetch's or the transport's error (@p sync
 *         then unchanged); with sync NULL, the error the put completed
 *         with
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_put(rv_worker_t *w, rv_rptr_t dst, const void *src,
                             size_t n, rv_sync_t *sync);

/**
 * @brief Reads @p n bytes at @p src into @p dst; complete (the bytes are
 * in @p dst) when @p sync completes, or on return with sync NULL.
 * @param [in]     w    the calling worker
 * @param [out]    dst  where the bytes go; the caller's, not to be read or
 *                      written until the read is complete
 * @param [in]     src  the source, in registered memory of any process
 * @param [in]     n    bytes
 * @param [in,out] sync NULL to wait, or a synchronizer completed once the
 *                      bytes are in @p dst
 * @return as rv_put
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_get(rv_worker_t *w, void *dst, rv_rptr_t src, size_t n,
                             rv_sync_t *sync);

/**
 * @brief Atomically adds @p value to the 64-bit word at @p p; the old
 * value is in @p *old (if not NULL) when @p sync completes.
 *
 * On memory of the caller's own process it is a CPU atomic, done on
 * return, where the transport's atomics are atomic with the CPU's;
 * elsewhere, and on a NIC whose atomics are atomic only among themselves
 * (IBV_ATOMIC_HCA) even on the caller's own memory, the transport's (a NIC
 * atomic on RDMA; on shared memory a CPU atomic; applied by the target's
 * CPU where RMA is emulated). Either way it is atomic with every other
 * rv_atomic_* on the word, not with plain loads and stores.
 * @param [in]     w     the calling worker
 * @param [in]     p     the word, 8-byte aligned, in registered memory
 * @param [in]     value what to add
 * @param [out]    old   the previous value (may be NULL); must stay valid
 *                       until the operation completes
 * @param [in,out] sync  NULL to wait, or a synchronizer
 * @return as rv_put; RV_ERR_INVALID (not logged) also for a word that is
 *         not 8-byte aligned
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_atomic_fadd(rv_worker_t *w, rv_rptr_t p,
                                     uint64_t value, uint64_t *old,
                                     rv_sync_t *sync);

/**
 * @brief Stores @p swap at @p p if it holds @p compare; the old value is
 * in @p *old when @p sync completes (equal to @p compare if it swapped).
 * @param [in]     w       the calling worker
 * @param [in]     p       the word, 8-byte aligned, in registered memory
 * @param [in]     compare the value expected
 * @param [in]     swap    the value to store
 * @param [out]    old     the previous value (may be NULL); must stay
 *                         valid until the operation completes
 * @param [in,out] sync    NULL to wait, or a synchronizer
 * @return as rv_atomic_fadd
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_atomic_cswap(rv_worker_t *w, rv_rptr_t p,
                                      uint64_t compare, uint64_t swap,
                                      uint64_t *old, rv_sync_t *sync);

/**
 * @brief Atomically replaces the word at @p p by @p value and returns the
 * old one in @p *old (a compare-swap loop; waits, progressing).
 * @param [in]  w     the calling worker
 * @param [in]  p     the word, 8-byte aligned, in registered memory
 * @param [in]  value the value to store
 * @param [out] old   the value replaced (may be NULL); set only on success
 * @return as rv_atomic_fadd
 * @note From @p w's own thread; it waits, so not from an
 *       RV_HANDLER_INLINE handler.
 */
RV_EXPORT rv_status_t rv_atomic_swap(rv_worker_t *w, rv_rptr_t p,
                                     uint64_t value, uint64_t *old);

/**
 * @brief AM Long: @p n bytes at @p src are put into @p dst (memory of
 * @p dest's process), and @p dest runs @p h (call->buf = the local address
 * of @p dst, call->buf_len = @p n) only once the whole payload is there.
 * rma.am_long_protocol chooses how: `reassembly` injects payload and
 * envelope back to back and the target matches them (no round trip);
 * `put_sync_send` waits for the put's remote completion, then sends.
 * @p sync completes when @p src is reusable (and, with RV_NOTIFY_CONSUMED,
 * once the handler ran); with sync NULL, @p src is reusable on return.
 *
 * Where @p dst is in the caller's process or in memory mapped into it
 * (shared memory), and with put_sync_send, the payload is in place at the
 * target before the call returns (it waits, progressing). With
 * reassembly, payloads up to 8 KiB travel inside the call itself and are
 * copied into @p dst before the handler runs. The first AM Long to a
 * worker by reassembly fetches its landing words (a call; it waits).
 * @param [in]     w     the calling worker
 * @param [in]     dest  the target worker; @p dst must be memory of its
 *                       process
 * @param [in]     h     the call handler's id (rv_am_register)
 * @param [in]     args  the argument bytes; reusable as rv_call's
 * @param [in]     len   their length, below 2 GiB
 * @param [in]     dst   where the payload goes, registered memory of
 *                       @p dest's process
 * @param [in]     src   the payload; see @p sync
 * @param [in]     n     its length, at most UINT32_MAX
 * @param [in,out] sync  NULL to wait until @p src is reusable, or a
 *                       synchronizer completed then (and, with
 *                       RV_NOTIFY_CONSUMED, once the handler ran)
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return RV_OK; RV_ERR_INVALID (logged) on a job without the layer, for
 *         a @p dest outside the job, a @p dst outside @p dest's process or
 *         an @p n over UINT32_MAX; rv_put's and rv_call's errors
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_put_handler(rv_worker_t *w, rv_tid_t dest,
                                     rv_handler_id_t h, const void *args,
                                     size_t len, rv_rptr_t dst, const void *src,
                                     size_t n, rv_sync_t *sync, unsigned flags);

/**
 * @brief @p dest RDMA-reads @p n bytes at @p src (registered memory of the
 * caller's process, from rv_mem_alloc) into a buffer of its own, then runs
 * @p h with it as call->buf. @p src must stay unchanged until @p sync
 * completes (with sync NULL: until this returns), which is once the
 * target has run the call. Calls from the same worker that arrive while
 * the read is in flight wait for it (FIFO).
 * @param [in]     w     the calling worker
 * @param [in]     dest  the target worker
 * @param [in]     h     the call handler's id; call->buf is the target's
 *                       copy, valid until the handler returns
 * @param [in]     args  the argument bytes; reusable as rv_call's
 * @param [in]     len   their length, below 2 GiB
 * @param [in]     src   the buffer, registered memory of the caller's
 *                       process
 * @param [in]     n     its length, at most UINT32_MAX
 * @param [in,out] sync  NULL to wait until the target ran the call, or a
 *                       synchronizer completed then
 *                       (RV_NOTIFY_CONSUMED is implied)
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return RV_OK; RV_ERR_INVALID (logged) on a job without the layer, for
 *         a @p src of another process or an @p n over UINT32_MAX;
 *         rv_call's errors. A read that fails at the target drops the call
 *         there (logged); the synchronizer then does not complete.
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_get_handler(rv_worker_t *w, rv_tid_t dest,
                                     rv_handler_id_t h, const void *args,
                                     size_t len, rv_rptr_t src, size_t n,
                                     rv_sync_t *sync, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
