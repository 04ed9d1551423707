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
 * in FIFO order (with am.routing host or twohop, see Routing below). The target
 * runs its calls when it progresses (rv_progress); a handler may itself make
 * calls and wait on synchronizers. am.path, am.aggregation and am.on_full
 * choose how calls travel (Seriema, sections 3.1 and 4.3-4.4); calls between
 * the threads of one process take a lockless in-memory queue (am.local_bypass).
 *
 * Choosing a completion style. Arguments of up to 256 bytes are copied
 * when the call is made (into a batch, a ring record or a local block), so
 * rv_call with sync NULL and no flag returns at once and is the fast form
 * for streams of small calls; rv_quiesce then waits until they have all
 * run. One synchronizer for many calls (rv_call_return into an array, one
 * rv_sync_wait) is the form for gathering results. A synchronizer waited
 * per call costs a round trip per call; RV_NOTIFY_CONSUMED adds a
 * notification per call. Under am.aggregation trad, consecutive plain
 * calls of one handler with the same argument length share one record
 * header (8 bytes per 8-byte call), and rv_call_return calls with a
 * synchronizer take their arguments plus 16 bytes.
 *
 * Routing (am.routing). direct, the default: a worker batches calls per
 * destination worker, which costs it a batch buffer per destination it
 * calls, right for jobs of up to a few hundred workers. host: calls to
 * the workers of another host are batched per host, for one worker there
 * that hands them on; twohop: the processes on a grid, a call goes to
 * the caller's thread in the process of the caller's row and the
 * destination's column, which hands it on down the column, and the
 * destination's process to the destination thread (buffers per worker
 * grow as the square root of the processes). Routed are the calls of irregular
 * traffic: rv_call with sync NULL, no flag and arguments of up to 256 bytes,
 * and rv_call_return with arguments and result of up to 256 bytes and no flag
 * but RV_NOTIFY_CONSUMED (its answer comes back routed too); they are batched
 * as under am.aggregation trad whatever am.aggregation says. Other calls go
 * direct. A routed call runs on its destination, once, with call->src its
 * caller's, and rv_quiesce counts its hops. Order: the routed calls from one
 * worker to another run in the order they were made, and so do the direct ones,
 * but a routed call and a direct call between the same two workers may pass
 * each other. rv_flush(w, dest) also pushes the batch for dest's first hop.
 *
 * Outstanding calls. With am.on_full progress (the default) a caller that
 * finds its destination's messenger full (more than am.ovfl_limit bytes
 * it cannot take, with ovfl aggregation) waits until the call can go,
 * running incoming calls meanwhile as rv_progress does, so a program
 * needs no retry loop (Bale's conveyors and YGM block the same way); with
 * retry_async every call is kept, in order, in registered memory (about 8
 * to 60 bytes per small call, unbounded); with fail the call returns
 * RV_ERR_AGAIN and the program decides (progress and call again, or do
 * other work). Calls made by handlers are always queued, never refused
 * nor waited for (see rv_call_fn). retry is progress's name before 0.3.
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

/** @brief A call as its handler sees it. Owned by rivet: the struct and
 * the memory it points to are valid until the handler returns.
 * @note Single-threaded: the target worker's thread. */
typedef struct rv_call {
    rv_tid_t src;     /**< calling worker (a broadcast's root) */
    const void *args; /**< argument bytes (no alignment promised) */
    size_t args_len;  /**< bytes of @c args */
    const void *buf;  /**< rv_call_buffer's buffer, or NULL */
    size_t buf_len;   /**< bytes of @c buf */
    void *ret;        /**< rv_call_return: where the result goes
                           (zeroed before the handler runs); NULL
                           for other calls */
    size_t ret_len;   /**< its size; the handler may lower it to the
                           bytes it wrote */
    bool broadcast;   /**< delivered by rv_broadcast* */
} rv_call_t;

/**
 * @brief A call handler, registered with rv_am_register. Runs on the
 * target worker's thread, inside rv_progress; it may make calls, progress
 * and wait.
 *
 * Its calls and sends never wait for room: what cannot leave at once is
 * queued in order, whatever am.on_full says, and the call returns (with
 * sync NULL its arguments are copied). Its result (rv_call_return) and
 * notifications leave at the end of the progress call, never behind
 * queued calls. An explicit wait inside a handler (rv_sync_wait, a call
 * with sync NULL that waits for the target) progresses, and that
 * progress starts further handlers only while fewer than am.max_nesting
 * are on the worker's stack: the stack stays bounded under any load, and
 * a cycle of workers all at the limit, each waiting for a call to run at
 * the next, does not end.
 * @param [in]     w    the target worker
 * @param [in,out] call the call; call->args and call->buf are valid until
 *                      the handler returns (copy what it keeps), the
 *                      result goes to call->ret
 * @param [in]     arg  the @p arg given to rv_am_register
 * @return RV_OK, or an error that is logged at the target (the call is
 *         consumed anyway, and the caller's synchronizer still completes
 *         with RV_OK).
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
 * layer slot and registers its own handlers. Idempotent.
 * @param [in] ctx the context, before rv_job_run
 * @return RV_OK (also when the layer is initialised already);
 *         RV_ERR_INVALID for a NULL @p ctx or while a job runs (logged);
 *         RV_ERR_EXISTS when a handler name of the layer is taken
 *         (logged); RV_ERR_NO_MEMORY
 * @note Main thread, in every process, before rv_job_run (rv_am_register
 *       does it too).
 */
RV_EXPORT rv_status_t rv_am_init(rv_context_t *ctx);

/**
 * @brief Registers call handler @p fn under @p name (same id rules as
 * rv_handler_register), initialising the layer first if need be.
 * @param [in]  ctx  the context, before rv_job_run
 * @param [in]  name the handler's name; copied
 * @param [in]  fn   the handler
 * @param [in]  arg  passed to every run of @p fn; stays the caller's
 *                   (rivet never frees it)
 * @param [out] id_p the handler's id, for rv_call and the others; may be
 *                   NULL; set only on success
 * @return RV_OK; RV_ERR_INVALID for a NULL @p ctx or @p fn, an empty name,
 *         or while a job runs; RV_ERR_EXISTS when the name or its id is
 *         taken (logged); RV_ERR_NO_MEMORY; rv_am_init's errors
 * @note Main thread, before rv_job_run, in every process (with the same
 *       names).
 */
RV_EXPORT rv_status_t rv_am_register(rv_context_t *ctx, const char *name,
                                     rv_call_fn fn, void *arg,
                                     rv_handler_id_t *id_p);

/**
 * @brief Worker @p dest runs handler @p h on @p args.
 *
 * The arguments are copied (into a batch, a ring record or a local queue
 * node) or sent from @p args directly (path send without aggregation), per
 * am.path, am.aggregation and am.local_bypass; either way the rule below
 * says when @p args may be reused. Calls from one worker to another start
 * in the order they were made.
 * @param [in]     w     the calling worker
 * @param [in]     dest  the target worker, 0 .. rv_nworkers() - 1 (itself
 *                       included)
 * @param [in]     h     the call handler's id (rv_am_register)
 * @param [in]     args  the argument bytes
 * @param [in]     len   their length, below 2 GiB
 * @param [in,out] sync  NULL: returns once @p args may be reused (and,
 *              with RV_NOTIFY_CONSUMED, once the target ran the call),
 *              progressing meanwhile. Otherwise one operation is added to
 *              @p sync and completed at that point.
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return RV_OK; RV_ERR_INVALID (logged) on a job without the layer, or
 *         for a @p dest outside the job, or (not logged) for arguments of
 *         2 GiB or more; RV_ERR_AGAIN when the destination's queue is full
 *         and am.on_full is fail (never from a handler, whose calls are
 *         queued); RV_ERR_NO_MEMORY; the transport's error.
 *         With sync NULL, also the error the call completed with. After
 *         RV_ERR_INVALID, RV_ERR_AGAIN or RV_ERR_NO_MEMORY @p sync is
 *         unchanged; after the transport's error too, but for a call too
 *         large for a batch on the write path made with
 *         RV_NOTIFY_CONSUMED, whose operation stays counted in @p sync
 *         (its place in the messenger's order is taken).
 * @note From @p w's own thread. A call the transport refuses after it was
 *       accepted is lost: logged, and counted in rv_am_stats_t.calls_lost;
 *       a synchronizer waiting for it to run (RV_NOTIFY_CONSUMED) then
 *       never completes.
 * @note A call made outside a handler whose batch (am.aggregation trad)
 *       or local block fills and leaves progresses the worker once, so
 *       it may run handlers before it returns: a stream of calls runs the
 *       calls coming the other way as it goes. That progress is not
 *       idleness (trad batches of other destinations keep filling). A
 *       handler's calls never progress.
 * @note When a trad batch leaves: when it holds am.flush_bytes, when
 *       its worker is idle (a progress call that found nothing to do
 *       after one that did not either), on rv_flush and rv_quiesce, when
 *       the worker waits (rv_sync_wait, a blocking call, a collective),
 *       and at the end of the job. A sender that keeps calling fills its
 *       batches to am.flush_bytes.
 */
RV_EXPORT rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                              const void *args, size_t len, rv_sync_t *sync,
                              unsigned flags);

/**
 * @brief As rv_call; @p buf travels with the arguments in one transfer
 * and reaches the handler as call->buf.
 * @param [in]     w     the calling worker
 * @param [in]     dest  the target worker
 * @param [in]     h     the call handler's id
 * @param [in]     args  the argument bytes
 * @param [in]     len   their length, below 2 GiB
 * @param [in]     buf   the buffer; reusable as @p args is (see @p sync)
 * @param [in]     n     its length, below 2 GiB
 * @param [in,out] sync  as rv_call's, for @p args and @p buf
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return as rv_call
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_call_buffer(rv_worker_t *w, rv_tid_t dest,
                                     rv_handler_id_t h, const void *args,
                                     size_t len, const void *buf, size_t n,
                                     rv_sync_t *sync, unsigned flags);

/**
 * @brief As rv_call; the handler's result (call->ret, up to @p ret_len
 * bytes) is written into @p ret before @p sync completes. The call always
 * reports back, so @p sync completes (and, with sync NULL, the call
 * returns) only once the target has run it.
 * @param [in]     w       the calling worker
 * @param [in]     dest    the target worker
 * @param [in]     h       the call handler's id
 * @param [in]     args    the argument bytes; reusable as rv_call's
 * @param [in]     len     their length, below 2 GiB
 * @param [out]    ret     where the result goes; the caller's, and must
 *                         stay valid until @p sync completes. The bytes
 *                         past what the handler wrote are unspecified.
 * @param [in]     ret_len its size
 * @param [in,out] sync    as rv_call's. Calls that share one synchronizer
 *                         and go to one destination one after another
 *                         may be counted in it ahead, a batch's worth at
 *                         a time: @p sync may count more operations than
 *                         were made until the worker next progresses
 *                         (which rv_sync_wait does), never fewer.
 * @param [in]     flags   0 or RV_NOTIFY_CONSUMED (implied)
 * @return as rv_call; RV_ERR_INVALID (not logged) for a NULL @p ret
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest,
                                     rv_handler_id_t h, const void *args,
                                     size_t len, void *ret, size_t ret_len,
                                     rv_sync_t *sync, unsigned flags);

/**
 * @brief Every worker of the job, the caller included, runs @p h on
 * @p args. The calls travel down a binomial tree rooted at the caller
 * (log2 of the job's workers deep), not as a loop of sends from the root;
 * each worker forwards to its children before it runs the handler, which
 * sees call->src as the root and call->broadcast set.
 * @param [in]     w     the calling worker, the root
 * @param [in]     h     the call handler's id
 * @param [in]     args  the argument bytes
 * @param [in]     len   their length, below 2 GiB
 * @param [in,out] sync  as rv_call's: without RV_NOTIFY_CONSUMED it
 *                       completes once @p args may be reused; with it,
 *                       once every worker ran the call
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return as rv_call. A forward that fails inside the tree is logged
 *         where it fails; the workers below it do not run the call, and a
 *         RV_NOTIFY_CONSUMED synchronizer does not complete.
 * @note From @p w's own thread. Broadcasts always travel as transport
 *       messages (no aggregation, no local bypass).
 */
RV_EXPORT rv_status_t rv_broadcast(rv_worker_t *w, rv_handler_id_t h,
                                   const void *args, size_t len,
                                   rv_sync_t *sync, unsigned flags);

/**
 * @brief rv_broadcast with a buffer, as rv_call_buffer.
 * @param [in]     w     the calling worker, the root
 * @param [in]     h     the call handler's id
 * @param [in]     args  the argument bytes
 * @param [in]     len   their length
 * @param [in]     buf   the buffer; reusable as @p args is
 * @param [in]     n     its length
 * @param [in,out] sync  as rv_broadcast's
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return as rv_broadcast
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_broadcast_buffer(rv_worker_t *w, rv_handler_id_t h,
                                          const void *args, size_t len,
                                          const void *buf, size_t n,
                                          rv_sync_t *sync, unsigned flags);

/**
 * @brief Sends every call batched for @p dest (RV_TID_ALL: for every
 * destination) by aggregation (am.aggregation) or queued by
 * am.on_full: retry_async, progressing until they have all left this
 * worker; then completes what the layers above registered flush hooks
 * for. Calls and operations made afterwards are not covered. It says
 * nothing of whether the calls have run.
 *
 * With rma, the flush hook completes one-sided operations at their
 * targets: all of them with RV_TID_ALL; with one @p dest, those the
 * transport carried through worker @p dest (an operation on memory of
 * process r goes through worker rv_tid_make(ctx, r, rv_worker_local(w))).
 * @param [in] w    the calling worker
 * @param [in] dest a worker, or RV_TID_ALL
 * @return RV_OK; RV_ERR_INVALID on a job without the layer (logged) or
 *         for a @p dest outside the job; RV_ERR_AGAIN from an
 *         RV_HANDLER_INLINE handler while calls are still held; a flush
 *         hook's error (the transport's)
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_flush(rv_worker_t *w, rv_tid_t dest);

/**
 * @brief The barrier of calls: returns, on every worker, once every call
 * made before it by any worker of the job, and every call made by those
 * calls' handlers, transitively, has run (YGM's barrier; Bale's
 * convey_advance with done). rv_barrier, core's barrier of workers, says
 * nothing of calls; rv_flush only that they left.
 *
 * Counting termination detection (Mattern's four counters): calls held
 * back are pushed out, then waves of rv_coll_allreduce sum the calls every
 * worker made and ran, until two waves in a row find both sums equal and
 * unchanged. A quiet job takes two waves, each about two tree traversals
 * of small messages (log2 of the workers deep); workers run calls while
 * they wait.
 * @param [in] w the calling worker
 * @return RV_OK; RV_ERR_INVALID on a job without the layer, or from a
 *         handler (logged); a flush's or a send's error
 * @note A collective of every worker of the job, each from its own code
 *       (never from a handler), the same number of times, in the same
 *       order relative to every other collective (rv_barrier,
 *       rv_coll_allreduce, rv_coll_allgather): a worker in rv_barrier
 *       while another is in rv_quiesce waits for ever. Calls made
 *       during it by handlers are covered; calls the worker's own code
 *       makes after it returns are not. A call the transport lost
 *       (rv_am_stats_t.calls_lost) is not waited for; a malformed batch
 *       dropped at its target (logged there) makes it wait for ever.
 * @note It does not complete synchronizers: the answers of rv_call_return
 *       and RV_NOTIFY_CONSUMED travel outside the calls it counts, so one
 *       may still be on its way when it returns. Wait on the synchronizer
 *       after it (rv_sync_wait returns as soon as the answer lands: the
 *       call has run).
 * @note Work a program holds in its own queues (a handler that keeps a
 *       call to answer later, from the worker's own code) is not a call
 *       until it is made: rv_quiesce would return while such work waits.
 *       rv_quiesce_hook makes it part of rv_quiesce: before each wave,
 *       the hook makes the calls the program holds and says how many
 *       items remain; rv_quiesce returns once every call has run and
 *       every worker's hook said 0.
 */
RV_EXPORT rv_status_t rv_quiesce(rv_worker_t *w);

/**
 * @brief What rv_quiesce calls, from the worker's own code, before each
 * of its waves: the program makes the calls its own queues hold (answers
 * it deferred, work it batched itself) and returns how many items it
 * still holds. rv_quiesce returns only once the calls have run and no
 * worker holds any.
 * @param [in] w   the worker in rv_quiesce
 * @param [in] arg rv_quiesce_hook's @p arg
 * @return the items this worker still holds
 */
typedef uint64_t (*rv_quiesce_hook_fn)(rv_worker_t *w, void *arg);

/**
 * @brief Makes @p fn part of @p w's rv_quiesce, so that work a program
 * holds in its own queues is drained by it: the deferred-reply pattern
 * needs no loop around rv_quiesce (see its notes).
 * @param [in] w   the worker
 * @param [in] fn  the hook, or NULL for none
 * @param [in] arg passed to @p fn
 * @return RV_OK; RV_ERR_INVALID on a job without the layer
 * @note From @p w's own thread; its hook runs on that thread, outside
 *       handlers, so it may make calls and wait. Set for the job: a
 *       worker's hook is cleared when its function returns, and the
 *       rv_quiesce of the job's end (rv_job_run) does not call it, since
 *       @p arg may have lived on that function's stack.
 */
RV_EXPORT rv_status_t rv_quiesce_hook(rv_worker_t *w, rv_quiesce_hook_fn fn,
                                      void *arg);

/** @brief Call counters of one worker (the invocation layer's share). */
typedef struct rv_am_stats {
    /** @{ */
    uint64_t calls_sent, calls_received; /**< calls made by this worker,
                                              and calls it ran */
    /** @} */
    /** @{ */
    uint64_t bytes_sent, bytes_received; /**< arguments + buffers */
    /** @} */
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
    uint64_t broadcasts_forwarded; /**< broadcast calls this worker passed
                                        on to its children in the tree */
    uint64_t max_nesting;          /**< most call handlers seen on this
                                        worker's stack at once (bounded by
                                        am.max_nesting) */
} rv_am_stats_t;

/**
 * @brief Copies the invocation layer's counters of a worker.
 * @param [in]  w     the worker
 * @param [out] stats the counters; all zero on a job without the layer
 * @note From @p w's own thread (the counters are not atomic).
 */
RV_EXPORT void rv_am_stats(const rv_worker_t *w, rv_am_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
