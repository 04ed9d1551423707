/**
 * @file rv_am.h
 * @brief rivet's invocation layer: remote calls of registered handlers on a
 * target worker thread, with synchronizers, return values, broadcast,
 * aggregation and two paths (transport active messages, or one-sided
 * messenger rings).
 *
 * A call names a handler registered under a stable name on every process
 * (rv_am_register) and carries packed argument bytes, optionally followed
 * by a buffer in the same transfer. Calls from one worker to another run
 * in FIFO order. The target runs its calls when it progresses
 * (rv_progress); a handler may itself make calls and wait on
 * synchronizers. am.path, am.aggregation and am.on_full choose how calls
 * travel (Seriema, sections 3.1 and 4.3-4.4); calls between the threads of
 * one process take a lockless in-memory queue (am.local_bypass).
 *
 * Vocabulary, for every call of this header and the layers above it:
 * a transfer names its destination before its source (memcpy order);
 * `w` is the calling worker, `dest` the target worker; `sync` is NULL
 * (the call waits, progressing, until its buffers may be reused) or a
 * synchronizer that gets one operation added and completed at that point;
 * RV_TID_ALL means every worker.
 *
 * @note Thread mode: rv_am_init and rv_am_register are called from the
 * main thread before rv_job_run; every other call from a worker thread
 * of rv_job_run, on its own rv_worker_t (single-threaded per worker). The
 * layer must be initialised (rv_am_init, or implicitly by rv_am_register)
 * in every process before rv_job_run; a call on a job without it fails
 * with RV_ERR_INVALID and a logged error naming rv_am_init.
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
 * @brief Initialises the invocation layer in @p ctx: installs it in a
 * layer slot and registers its own handlers. Idempotent. Call in every
 * process before rv_job_run (rv_am_register does it too).
 */
RV_EXPORT rv_status_t rv_am_init(rv_context_t *ctx);

/**
 * @brief Registers call handler @p fn under @p name (same id rules as
 * rv_handler_register). Call before rv_job_run, in every process.
 */
RV_EXPORT rv_status_t rv_am_register(rv_context_t *ctx, const char *name,
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
RV_EXPORT rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *args, size_t len, rv_sync_t *sync,
                    unsigned flags);

/** @brief As rv_call; @p buf travels with the arguments in one transfer
 * and reaches the handler as call->buf. */
RV_EXPORT rv_status_t rv_call_buffer(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *buf,
                           size_t n, rv_sync_t *sync, unsigned flags);

/**
 * @brief As rv_call; the handler's result (call->ret, up to @p ret_len
 * bytes) is written into @p ret before @p sync completes.
 * @note @p ret must stay valid until then.
 */
RV_EXPORT rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, void *ret,
                           size_t ret_len, rv_sync_t *sync, unsigned flags);

/**
 * @brief Every worker of the job, the caller included, runs @p h on
 * @p args. The calls travel down a binomial tree rooted at the caller
 * (log2 of the job's workers deep), not as a loop of sends from the root.
 * With RV_NOTIFY_CONSUMED, @p sync completes once every worker ran it.
 */
RV_EXPORT rv_status_t rv_broadcast(rv_worker_t *w, rv_handler_id_t h, const void *args,
                         size_t len, rv_sync_t *sync, unsigned flags);

/** @brief rv_broadcast with a buffer, as rv_call_buffer. */
RV_EXPORT rv_status_t rv_broadcast_buffer(rv_worker_t *w, rv_handler_id_t h,
                                const void *args, size_t len,
                                const void *buf, size_t n, rv_sync_t *sync,
                                unsigned flags);

/**
 * @brief Sends every call batched for @p dest (RV_TID_ALL: for every
 * destination) by aggregation (am.aggregation) or queued by
 * am.on_full: retry_async, progressing until they have all left this
 * worker; then completes what the layers above registered flush hooks
 * for (with rma, every one-sided operation towards @p dest issued so far
 * completes at its target). Calls and operations made afterwards are not
 * covered. It says nothing of whether the calls have run.
 */
RV_EXPORT rv_status_t rv_flush(rv_worker_t *w, rv_tid_t dest);

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

RV_EXPORT void rv_am_stats(const rv_worker_t *w, rv_am_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
