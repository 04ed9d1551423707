/**
 * @file rv_am.h
 * @brief rivet's invocation layer: remote calls of registered handlers on a
 * target worker thread, with synchronizers, return values and broadcast.
 *
 * A call names a handler registered under a stable name on every process
 * (rv_am_register) and carries packed argument bytes, optionally followed
 * by a buffer in the same transfer. Calls from one worker to another run
 * in FIFO order. The target runs its calls when it progresses
 * (rv_progress); a handler may itself make calls and wait on
 * synchronizers.
 *
 * This is the "send" path of DESIGN.md (transport active messages, no
 * setup). One-sided messengers, aggregation, buffer put/get calls and
 * local bypass come later; am.path, am.aggregation and the other am.*
 * keys are rejected as "not supported yet" until they do.
 */
#ifndef RIVET_RV_AM_H
#define RIVET_RV_AM_H

#include "rivet.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A call as its handler sees it. */
typedef struct rv_call {
    rv_tid_t src;           /**< calling worker */
    const void *args;       /**< argument bytes (no alignment promised) */
    size_t args_len;
    const void *buf;        /**< rv_call_buffer's buffer, or NULL */
    size_t buf_len;
    void *ret;              /**< rv_call_return: where the result goes */
    size_t ret_len;         /**< its size; the handler may lower it */
    bool broadcast;         /**< delivered by rv_broadcast* */
} rv_call_t;

/**
 * @brief A call handler. Runs on the target worker's thread, inside
 * rv_progress. call->args and call->buf are valid until it returns.
 * @return RV_OK, or an error that is logged (the call is consumed anyway).
 */
typedef rv_status_t (*rv_call_fn)(rv_worker_t *w, rv_call_t *call, void *arg);

/** @brief Flags of a call. */
enum {
    /** The synchronizer completes when the target has run the handler
     * (not merely when the arguments may be reused). */
    RV_NOTIFY_CONSUMED = 1u << 0,
};

/**
 * @brief Registers call handler @p fn under @p name (same id rules as
 * rv_handler_register). Call before rv_job_run, in every process.
 */
rv_status_t rv_am_register(rv_context_t *ctx, const char *name,
                           rv_call_fn fn, void *arg, rv_handler_id_t *id_p);

/**
 * @brief Worker @p dest runs handler @p h on @p args.
 *
 * @param sync  NULL: returns once @p args may be reused (and, with
 *              RV_NOTIFY_CONSUMED, once the target ran the call),
 *              progressing meanwhile. Otherwise one operation is added to
 *              @p sync and completed at that point.
 * @return RV_OK, or an error (then @p sync is unchanged).
 */
rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *args, size_t len, rv_sync_t *sync,
                    unsigned flags);

/** @brief As rv_call; @p buf travels with the arguments in one transfer
 * and reaches the handler as call->buf. */
rv_status_t rv_call_buffer(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *buf,
                           size_t n, rv_sync_t *sync, unsigned flags);

/**
 * @brief As rv_call; the handler's result (call->ret, up to @p ret_len
 * bytes) is written into @p ret before @p sync completes.
 * @note @p ret must stay valid until then.
 */
rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, void *ret,
                           size_t ret_len, rv_sync_t *sync, unsigned flags);

/**
 * @brief Every worker of the job, the caller included, runs @p h on
 * @p args. The calls travel down a binomial tree rooted at the caller
 * (log2 of the job's workers deep), not as a loop of sends from the root.
 * With RV_NOTIFY_CONSUMED, @p sync completes once every worker ran it.
 */
rv_status_t rv_broadcast(rv_worker_t *w, rv_handler_id_t h, const void *args,
                         size_t len, rv_sync_t *sync, unsigned flags);

/** @brief rv_broadcast with a buffer, as rv_call_buffer. */
rv_status_t rv_broadcast_buffer(rv_worker_t *w, rv_handler_id_t h,
                                const void *args, size_t len,
                                const void *buf, size_t n, rv_sync_t *sync,
                                unsigned flags);

/** Every destination, for rv_flush. */
#define RV_ALL_WORKERS UINT32_MAX

/**
 * @brief Sends every call batched for @p dest (RV_ALL_WORKERS: for every
 * destination) by aggregation (am.aggregation) or queued by
 * am.on_full: retry_async, progressing until they have all left this
 * worker; with RV_ALL_WORKERS, also completes at their targets every
 * one-sided operation (rma/rv_rma.h) issued so far. Calls and operations
 * made afterwards are not covered.
 */
rv_status_t rv_flush(rv_worker_t *w, rv_tid_t dest);

/* ---------------------------------------------------------------------- */
/* Registered memory and remote pointers                                   */

/**
 * @brief A remote pointer: an address in registered memory of process
 * @c rank, named by the registration (@c region) it lies in. Plain data:
 * copy it into call arguments, store it, send it anywhere. The peer that
 * uses it fetches and caches the region's remote key on first use.
 */
typedef struct rv_rptr {
    uint64_t addr;   /**< address in the owner's process */
    uint32_t rank;   /**< owning process */
    uint32_t region; /**< registration id in that process */
} rv_rptr_t;

/**
 * @brief Allocates @p len bytes of registered memory in the calling
 * worker's NUMA zone (from the chunk allocators: no registration per
 * allocation), and describes it as a remote pointer.
 * @return the memory, or NULL (logged)
 */
void *rv_mem_alloc(rv_worker_t *w, size_t len, rv_rptr_t *rptr);

/** @brief Frees memory of rv_mem_alloc (by the same worker). */
void rv_mem_free(rv_worker_t *w, void *p);

/** @brief @p p advanced by @p off bytes (same region). */
static inline rv_rptr_t rv_rptr_add(rv_rptr_t p, uint64_t off)
{
    p.addr += off;
    return p;
}

/**
 * @brief @p n bytes at @p src are RDMA-written into the remote @p dst (in
 * @p dest's process), then @p dest runs @p h with call->buf = the local
 * address of @p dst. The put is completed remotely before the call is
 * sent (put, flush, send), so the handler sees every byte. @p src is
 * reusable when this returns.
 */
rv_status_t rv_call_buffer_put(rv_worker_t *w, rv_tid_t dest,
                               rv_handler_id_t h, const void *args,
                               size_t len, const void *src, rv_rptr_t dst,
                               size_t n, rv_sync_t *sync, unsigned flags);

/**
 * @brief @p dest RDMA-reads @p n bytes at @p src (registered memory of the
 * caller's process, from rv_mem_alloc) into a buffer of its own, then runs
 * @p h with it as call->buf. @p src must stay unchanged until @p sync
 * completes, which is once the target has run the call. Calls from the
 * same worker that arrive while the read is in flight wait for it (FIFO).
 */
rv_status_t rv_call_buffer_get(rv_worker_t *w, rv_tid_t dest,
                               rv_handler_id_t h, const void *args,
                               size_t len, rv_rptr_t src, size_t n,
                               rv_sync_t *sync, unsigned flags);

/** @brief Call counters of one worker (the invocation layer's share). */
typedef struct rv_am_stats {
    uint64_t calls_sent, calls_received;
    uint64_t bytes_sent, bytes_received;   /**< arguments + buffers */
    uint64_t calls_local;          /**< sent through the local bypass */
    uint64_t flushes;              /**< transmissions of call records */
    uint64_t max_aggregated_bytes; /**< largest transmission */
    uint64_t ring_full;            /**< calls that met a full queue/ring */
    uint64_t chunk_growths;        /**< chunk requests for larger rings */
    uint64_t chunks_granted;       /**< ring chunks obtained from peers */
    uint64_t detours;              /**< write-path calls too large for a
                                        chunk, sent over send in order */
    uint64_t calls_lost;           /**< accepted, then refused by the
                                        transport (logged) */
    uint64_t broadcasts_forwarded;
} rv_am_stats_t;

void rv_am_stats(const rv_worker_t *w, rv_am_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
