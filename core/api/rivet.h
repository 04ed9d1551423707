/**
 * @file rivet.h
 * @brief rivet's core API: the job, its worker threads, handlers, messages
 * and progress.
 *
 * A job is P processes, each running T worker threads (job.threads). Every
 * worker thread has a global id (rv_tid_t, rank * T + local index) and its
 * own transport worker. Messages target a thread; messages from one sender
 * thread to one receiver thread run in FIFO order. A receiver runs its
 * messages' handlers when it progresses.
 *
 * @code
 * rv_context_t *ctx;
 * rv_init(&argc, &argv, &ctx);              // config, bootstrap, transport
 * rv_handler_register(ctx, "app.ping", on_ping, NULL, 0, &ping);
 * rv_job_run(ctx, worker_main, NULL);       // job.threads threads
 * rv_finalize(ctx);
 * @endcode
 *
 * Buffers: a call that takes a synchronizer (rv_sync_t) and a buffer may
 * return with the buffer still in use, unless it says otherwise; the
 * buffer may be reused once the synchronizer completes. With sync NULL
 * the call returns only once its buffers may be reused.
 *
 * @note Thread mode. The context (rv_context_t) is made, changed and freed
 * by the process's main thread: rv_init, rv_handler_register (before
 * rv_job_run), rv_job_run, rv_bootstrap_barrier, rv_bootstrap_allgather
 * and rv_finalize. Its read-only getters (rv_rank, rv_size, rv_threads,
 * rv_nworkers, rv_context_config, rv_bootstrap_name,
 * rv_context_transport, rv_context_caps) and rv_abort may be called from
 * any thread. A worker (rv_worker_t) is single-threaded: every call
 * taking one is made by that worker's own thread while the job runs (in
 * its function or in a handler), except the getters rv_worker_tid,
 * rv_worker_local and rv_worker_context. rv_sync_complete is
 * thread-safe.
 */
#ifndef RIVET_RIVET_H
#define RIVET_RIVET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h> /* struct iovec */

#include "rv_config.h"
#include "rv_status.h"
#include "rv_types.h"
#include "rv_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The process's handle on the job: configuration, bootstrap,
 * transport and handler table. One per process, made by rv_init, freed by
 * rv_finalize. @note Main thread; its getters any thread. */
typedef struct rv_context rv_context_t;
/** @brief A worker thread of rv_job_run and its transport worker. Made and
 * freed by rv_job_run; valid only while the job runs. @note
 * Single-threaded: used by its own thread only (but for its id
 * getters). */
typedef struct rv_worker rv_worker_t;
/** @brief A handler's id: the FNV-1a hash of its name (rv_handler_id);
 * never 0. */
typedef uint32_t rv_handler_id_t;

/* ---------------------------------------------------------------------- */
/* Context                                                                 */
/* ---------------------------------------------------------------------- */

/**
 * @brief Loads the configuration, joins the job and loads the transport.
 *
 * The configuration file comes from `-c FILE`, `--config FILE` or
 * `--config=FILE` in @p argv (removed from it), else from RIVET_CONFIG (set
 * by rivetrun), else defaults; environment overrides RIVET_<SECTION>_<KEY>
 * apply on top. The bootstrap is the one rivetrun started
 * (RIVET_BOOTSTRAP), else PMIx when the process was started by
 * mpirun/prterun/srun, else a job of one process.
 *
 * @param [in,out] argc  the program's argument count, lowered when the
 *                       configuration option is removed; may be NULL
 * @param [in,out] argv  the program's arguments (the option is removed by
 *                       moving the later ones down); may be NULL
 * @param [out]    ctx_p the context; set only on success. Free it with
 *                       rv_finalize.
 * @return RV_OK; RV_ERR_CONFIG, RV_ERR_NOT_FOUND or RV_ERR_IO for a bad or
 *         unreadable configuration; RV_ERR_BOOTSTRAP when the job cannot be
 *         joined; RV_ERR_NOT_FOUND or RV_ERR_UNSUPPORTED when the transport
 *         plugin cannot be loaded; the transport's error when it cannot
 *         start; RV_ERR_NO_MEMORY. Errors are logged with their cause.
 * @note Call once per process, from the main thread.
 */
RV_EXPORT rv_status_t rv_init(int *argc, char ***argv, rv_context_t **ctx_p);

/**
 * @brief As rv_init, with an explicit configuration (from rv_config_load,
 * changed with rv_config_set if need be), and without looking at the
 * program's arguments or RIVET_CONFIG.
 * @param [in]  cfg   the configuration; copied: the caller still frees it
 *                    (with rv_config_free), and may do so on return
 * @param [out] ctx_p the context; set only on success. Free it with
 *                    rv_finalize.
 * @return as rv_init; RV_ERR_INVALID (not logged) when @p cfg is NULL
 * @note Call once per process, from the main thread.
 */
RV_EXPORT rv_status_t rv_init_config(const rv_config_t *cfg,
                                     rv_context_t **ctx_p);

/**
 * @brief Leaves the job and frees the context: the layers' per-context
 * state (in reverse install order), the transport, the bootstrap, the
 * handler table (and the arguments of handlers registered with
 * RV_HANDLER_OWNS_ARG) and the context's configuration.
 * @param [in] ctx the context, after rv_job_run returned; NULL is accepted
 * @note Main thread. Every pointer the context handed out
 *       (rv_context_config, rv_context_caps, rv_handler_find) is invalid
 *       afterwards. The transport plugin stays loaded.
 */
RV_EXPORT void rv_finalize(rv_context_t *ctx);

/**
 * @brief Ends the whole job now (every process) with @p code: logs @p why
 * as an error, has the bootstrap end the other processes, and exits this
 * one without running atexit handlers.
 * @param [in] ctx  the context
 * @param [in] code the exit status; 0 is turned into 1
 * @param [in] why  what went wrong, for the log and the launcher
 * @note Any thread. Does not return.
 */
RV_EXPORT void rv_abort(rv_context_t *ctx, int code, const char *why)
    __attribute__((noreturn));

/**
 * @brief This process's rank.
 * @param [in] ctx the context
 * @return the rank, 0 .. rv_size() - 1
 * @note Any thread.
 */
RV_EXPORT rv_rank_t rv_rank(const rv_context_t *ctx);
/**
 * @brief The number of processes in the job.
 * @param [in] ctx the context
 * @return the processes, at least 1
 * @note Any thread.
 */
RV_EXPORT rv_rank_t rv_size(const rv_context_t *ctx);
/**
 * @brief The number of worker threads per process (job.threads).
 * @param [in] ctx the context
 * @return the workers rv_job_run starts in each process
 * @note Any thread.
 */
RV_EXPORT int rv_threads(const rv_context_t *ctx);
/**
 * @brief The number of workers in the job: rv_size() * rv_threads().
 * @param [in] ctx the context
 * @return the workers; their ids are 0 .. the result - 1
 * @note Any thread.
 */
RV_EXPORT uint32_t rv_nworkers(const rv_context_t *ctx);

/** Bytes of a host name that tell hosts apart (rv_rank_host). */
#define RV_HOST_NAME_BYTES 56

/**
 * @brief The number of hosts the job's processes run on.
 *
 * Processes whose host names (gethostname, first RV_HOST_NAME_BYTES
 * bytes) are equal share a host, as MPI_COMM_TYPE_SHARED has it.
 * @param [in] ctx the context
 * @return the hosts, at least 1; -1 before the first rv_job_run has
 *         connected the workers (a layer's worker_start sees them)
 * @note Any thread.
 */
RV_EXPORT int rv_nhosts(const rv_context_t *ctx);
/**
 * @brief The host of process @p rank: 0 .. rv_nhosts() - 1, numbered in
 * the order of each host's lowest rank (rank 0's host is 0).
 * @param [in] ctx  the context
 * @param [in] rank a rank of the job
 * @return its host; -1 for a rank out of range, or before the first
 *         rv_job_run has connected the workers
 * @note Any thread.
 */
RV_EXPORT int rv_rank_host(const rv_context_t *ctx, rv_rank_t rank);
/**
 * @brief The context's configuration (its own copy; read a layer's keys
 * with rv_config_component, any key with rv_config_get).
 * @param [in] ctx the context
 * @return the configuration; owned by the context, valid until
 *         rv_finalize; never NULL
 * @note Any thread (read-only).
 */
RV_EXPORT const rv_config_t *rv_context_config(const rv_context_t *ctx);
/**
 * @brief The name of the bootstrap in use.
 * @param [in] ctx the context
 * @return "rivetrun", "pmix" or "singleton"; a constant string, never
 *         freed
 * @note Any thread.
 */
RV_EXPORT const char *rv_bootstrap_name(const rv_context_t *ctx);
/**
 * @brief The transport the job runs on, in words, as the job's
 * "transport:" line prints it (for example "ucx 1.13.1, tls sm,self; to
 * peers: sysv/memory.0, posix/memory.0, cma/memory.0 (rank 1)"): what
 * rv_job_run connected, or, before the first job, what the transport
 * offers.
 * @param [in] ctx the context
 * @return a string owned by the context, valid until rv_finalize or the
 *         next rv_job_run; never NULL
 * @note Any thread.
 */
RV_EXPORT const char *rv_context_describe(rv_context_t *ctx);

/**
 * @brief The global id of worker @p local of process @p rank.
 * @param [in] ctx   the context
 * @param [in] rank  a process, 0 .. rv_size() - 1
 * @param [in] local a worker of that process, 0 .. rv_threads() - 1
 * @return rank * rv_threads() + local (not checked)
 * @note Any thread.
 */
static inline rv_tid_t rv_tid_make(const rv_context_t *ctx, rv_rank_t rank,
                                   int local)
{
    return (rv_tid_t)rank * (rv_tid_t)rv_threads(ctx) + (rv_tid_t)local;
}
/**
 * @brief The process that worker @p tid belongs to.
 * @param [in] ctx the context
 * @param [in] tid a worker of the job
 * @return tid / rv_threads()
 * @note Any thread.
 */
static inline rv_rank_t rv_tid_rank(const rv_context_t *ctx, rv_tid_t tid)
{
    return (rv_rank_t)(tid / (rv_tid_t)rv_threads(ctx));
}

/**
 * @brief Barrier of every process of the job, through the bootstrap.
 * @param [in] ctx the context
 * @return RV_OK, or RV_ERR_BOOTSTRAP (logged) when a process is gone or
 *         the launcher fails
 * @note A process-level collective: from the main thread of every
 *       process, outside rv_job_run (it does not progress workers).
 */
RV_EXPORT rv_status_t rv_bootstrap_barrier(rv_context_t *ctx);
/**
 * @brief Gathers @p len bytes from every process into @p out, in rank
 * order (rv_size() * @p len bytes).
 * @param [in]  ctx the context
 * @param [out] out rv_size() * @p len bytes, the caller's; complete on
 *                  return
 * @param [in]  in  this process's @p len bytes; may be reused on return
 * @param [in]  len bytes per process, the same in every process
 * @return RV_OK; RV_ERR_BOOTSTRAP when a process is gone or the
 *         launcher fails; RV_ERR_INVALID when @p len is more than
 *         rivetrun's launcher carries. Errors are logged.
 * @note A process-level collective: from the main thread of every
 *       process, outside rv_job_run (it does not progress workers).
 */
RV_EXPORT rv_status_t rv_bootstrap_allgather(rv_context_t *ctx, void *out,
                                             const void *in, size_t len);

/* ---------------------------------------------------------------------- */
/* Handlers and messages                                                   */
/* ---------------------------------------------------------------------- */

/**
 * @brief A received message, as a handler sees it.
 *
 * Owned by rivet. The struct itself and @c xhdr are valid while the
 * handler runs; @c data too, unless the handler keeps it (below), in which
 * case the handler copies the struct and @c data stays valid until
 * rv_msg_release.
 * @note Single-threaded: the destination worker's thread.
 */
typedef struct rv_msg {
    rv_tid_t src;            /**< sending worker */
    rv_handler_id_t handler; /**< the id the message was sent to */
    void *data;              /**< payload (no alignment promised) */
    size_t len;              /**< payload bytes, as the sender sent them */
    const void *xhdr;        /**< rv_sendx's header extension, 8-aligned;
                                  NULL when there is none */
    size_t xhdr_len;         /**< bytes of @c xhdr, at most
                                  RV_MSG_XHDR_MAX */
    void *desc_;             /**< private: how to release a kept payload */
} rv_msg_t;

/**
 * @brief A message handler, registered with rv_handler_register.
 *
 * Runs on the destination worker's thread, from rv_progress (or, with
 * RV_HANDLER_INLINE, from the transport's receive callback). It may send
 * messages, and unless it is inline, progress and wait.
 * @param [in] w   the destination worker
 * @param [in] msg the message; see rv_msg_t for how long it lives
 * @param [in] arg the @p arg given to rv_handler_register
 * @return RV_OK when done with msg->data (it is recycled on return), or
 *         RV_INPROGRESS if the handler was registered with
 *         RV_HANDLER_KEEP_DATA and keeps the payload, to release it later
 *         with rv_msg_release() (without that flag RV_INPROGRESS is
 *         reported and the payload recycled all the same). Errors are not
 *         reported anywhere: a handler logs its own.
 */
typedef rv_status_t (*rv_handler_fn)(rv_worker_t *w, rv_msg_t *msg, void *arg);

/** @brief Flags of rv_handler_register. */
enum {
    /** The handler may return RV_INPROGRESS to keep the payload (copied
     * first when the transport's buffer does not outlive its callback). */
    RV_HANDLER_KEEP_DATA = 1u << 0,
    /**
     * The handler runs inside the transport's receive callback, as a
     * GASNet-EX AM handler does: no copy and no queueing, the fastest
     * path. In exchange it must not wait: no rv_progress, rv_sync_wait or
     * rv_barrier (they return at once with an error, reported once). It may
     * send: with a synchronizer as usual, or with sync NULL, in which case
     * rivet copies the payload when it cannot leave at once. Per-pair FIFO
     * order holds across inline and ordinary handlers.
     */
    RV_HANDLER_INLINE = 1u << 1,
    /** rivet owns @p arg and free()s it when the context is finalized
     * (for layers that register handlers with state of their own). */
    RV_HANDLER_OWNS_ARG = 1u << 2,
};

/**
 * @brief Registers a handler under a stable name such as "mcts.select".
 *
 * The id is a 32-bit FNV-1a hash of the name, the same in every process of
 * the job whatever the registration order or binary layout. Every process
 * registers the same handlers: a message to an id the destination does
 * not know is dropped and counted (rv_worker_stats_t.rx_unknown_handler).
 *
 * @param [in]  ctx   the context, before rv_job_run
 * @param [in]  name  the handler's name, non-empty; copied
 * @param [in]  fn    the handler
 * @param [in]  arg   passed to every run of @p fn; stays the caller's,
 *                    unless @p flags has RV_HANDLER_OWNS_ARG (then rivet
 *                    free()s it in rv_finalize)
 * @param [in]  flags RV_HANDLER_KEEP_DATA, RV_HANDLER_INLINE,
 *                    RV_HANDLER_OWNS_ARG, or 0
 * @param [out] id_p  the handler's id (rv_handler_id(@p name)); may be
 *                    NULL; set only on success
 * @return RV_OK; RV_ERR_INVALID for an empty name or a NULL @p fn (not
 *         logged) or while a job runs (logged); RV_ERR_EXISTS when the name,
 *         or another name with the same id, is registered already (logged:
 *         choose another name); RV_ERR_NO_MEMORY
 * @note Main thread, before rv_job_run: the table is read without locks
 *       while the job runs.
 */
RV_EXPORT rv_status_t rv_handler_register(rv_context_t *ctx, const char *name,
                                          rv_handler_fn fn, void *arg,
                                          unsigned flags,
                                          rv_handler_id_t *id_p);

/**
 * @brief The id a name hashes to (what rv_handler_register assigns).
 * @param [in] name a NUL-terminated name
 * @return its 32-bit FNV-1a hash, or 1 where the hash is 0 (0 is never an
 *         id)
 * @note Any thread; needs no context.
 */
RV_EXPORT rv_handler_id_t rv_handler_id(const char *name);

/**
 * @brief Releases the payload of a message kept by a handler registered
 * with RV_HANDLER_KEEP_DATA that returned RV_INPROGRESS.
 * @param [in]     w   the worker whose handler kept the message
 * @param [in,out] msg the handler's copy of the rv_msg_t; its data is
 *                     set to NULL
 * @note From @p w's own thread: a payload the transport lent is given
 *       back to @p w's transport worker, which rv_job_run destroys at the
 *       end of the job; release kept messages before then.
 */
RV_EXPORT void rv_msg_release(rv_worker_t *w, rv_msg_t *msg);

/**
 * @brief A synchronizer: a counter of operations outstanding and the
 * first error among them.
 *
 * Initialise with rv_sync_init, pass to operations (each adds one to
 * @c pending as it starts and completes it later), wait with rv_sync_wait
 * or poll with rv_sync_done. It lives in the caller's memory, which must
 * stay valid until every operation passed it has completed.
 * @note rv_sync_complete is thread-safe (operations may complete from
 *       another thread of the process, as the local bypass's do); the
 *       waiter is one worker.
 */
typedef struct rv_sync {
    atomic_long pending; /**< operations not yet completed; done at 0 */
    atomic_int status;   /**< first error seen, else RV_OK */
} rv_sync_t;

/**
 * @brief Initialises a synchronizer with @p count operations outstanding
 * (0 for one whose operations add themselves, as rivet's do).
 * @param [out] s     the synchronizer
 * @param [in]  count operations the caller will complete itself
 *                    (rv_sync_complete)
 * @note Not atomic: initialise it before passing it to any operation.
 */
static inline void rv_sync_init(rv_sync_t *s, long count)
{
    atomic_init(&s->pending, count);
    atomic_init(&s->status, RV_OK);
}
/**
 * @brief Whether every operation of @p s has completed. Does not progress.
 * @param [in] s the synchronizer
 * @return true once @c pending is 0 or less; the operations' effects are
 *         then visible to the caller (acquire)
 * @note Any thread.
 */
static inline bool rv_sync_done(rv_sync_t *s)
{
    return atomic_load_explicit(&s->pending, memory_order_acquire) <= 0;
}
/**
 * @brief Marks one operation of @p s complete with @p status. The first
 * error wins: it is stored, atomically, before the count drops.
 * @param [in,out] s      the synchronizer
 * @param [in]     status the operation's outcome; RV_OK leaves
 *                        s->status unchanged
 * @note Thread-safe.
 */
RV_EXPORT void rv_sync_complete(rv_sync_t *s, rv_status_t status);

/**
 * @brief Marks @p n operations of @p s complete with @p status at once,
 * as @p n calls of rv_sync_complete would, with one atomic operation:
 * for completions that come in batches (the answers to a batch of calls).
 * @param [in,out] s      the synchronizer
 * @param [in]     n      operations, 1 or more
 * @param [in]     status their outcome; RV_OK leaves s->status unchanged
 * @note Thread-safe.
 */
RV_EXPORT void rv_sync_complete_n(rv_sync_t *s, long n, rv_status_t status);
/**
 * @brief Progresses @p w until every operation of @p s has completed.
 * @param [in]     w the calling worker
 * @param [in,out] s the synchronizer
 * @return s->status: RV_OK, or the first error an operation completed
 *         with; RV_ERR_INVALID (logged once) when called from an
 *         RV_HANDLER_INLINE handler while @p s is not done
 * @note From @p w's own thread. Handlers of arrived messages run
 *       meanwhile.
 */
RV_EXPORT rv_status_t rv_sync_wait(rv_worker_t *w, rv_sync_t *s);

/**
 * @brief Sends @p len bytes at @p buf to worker @p dest, which runs handler
 * @p h on them. Messages from one worker to another start their handlers
 * in the order they were sent.
 *
 * @param [in] w    the sending worker
 * @param [in] dest the destination worker, 0 .. rv_nworkers() - 1 (itself
 *                  included)
 * @param [in] h    the handler's id (rv_handler_register, rv_handler_id)
 * @param [in] buf  the payload; see @p sync for when it may be reused
 * @param [in] len  its length, at most UINT32_MAX
 * @param [in,out] sync if NULL, the call returns once @p buf is reusable
 *              (it progresses meanwhile). Otherwise the caller increments
 *              nothing: rv_send adds one to @p sync and completes it when
 *              @p buf is reusable, possibly before returning. From a
 *              handler (anything run by rv_progress), sync NULL does not
 *              wait: the payload leaves at once or from a copy rivet
 *              makes and frees, so that a handler that sends under load
 *              never progresses into the next handler's send.
 * @return RV_OK; RV_ERR_INVALID (logged) for a @p dest outside the job or
 *         a payload over UINT32_MAX bytes; the transport's error
 *         (RV_ERR_NO_MEMORY, RV_ERR_TRANSPORT, ...); with sync NULL, also
 *         the error the send completed with. On an error returned at once
 *         @p sync is left unchanged.
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_send(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                              const void *buf, size_t len, rv_sync_t *sync);

/**
 * @brief As rv_send, with a payload gathered from @p iovcnt pieces (the
 * handler sees them concatenated).
 * @param [in] w      the sending worker
 * @param [in] dest   the destination worker
 * @param [in] h      the handler's id
 * @param [in] iov    the pieces; the array may be reused on return, the
 *                    bytes it points to as rv_send's @p buf
 * @param [in] iovcnt number of pieces (0: an empty payload)
 * @param [in,out] sync as rv_send's
 * @return as rv_send
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_sendv(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                               const struct iovec *iov, size_t iovcnt,
                               rv_sync_t *sync);

/** Largest header extension rv_sendx carries, in bytes. */
#define RV_MSG_XHDR_MAX 48

/**
 * @brief As rv_sendv, with a header extension of up to RV_MSG_XHDR_MAX
 * bytes that travels in the transport's AM header and reaches the handler
 * as msg->xhdr. For the layers above core (the invocation layer puts its
 * call header there).
 * @param [in] w        the sending worker
 * @param [in] dest     the destination worker
 * @param [in] h        the handler's id
 * @param [in] xhdr     the extension; copied: it may be reused on return
 * @param [in] xhdr_len its length, at most RV_MSG_XHDR_MAX (0: none)
 * @param [in] iov      the payload's pieces, as rv_sendv's
 * @param [in] iovcnt   number of pieces
 * @param [in,out] sync as rv_send's
 * @return as rv_send; RV_ERR_INVALID (logged) also for an extension over
 *         RV_MSG_XHDR_MAX bytes
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_sendx(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                               const void *xhdr, size_t xhdr_len,
                               const struct iovec *iov, size_t iovcnt,
                               rv_sync_t *sync);

/**
 * @brief Runs handlers of arrived messages and completes operations: the
 * transport's progress, then each installed layer's (rv_layer.h).
 * @param [in] w the calling worker
 * @return the number of events handled (0: nothing to do). Callers that
 *         poll in a loop should yield the CPU when it returns 0 repeatedly;
 *         rv_sync_wait and rv_barrier do. From an RV_HANDLER_INLINE
 *         handler it does nothing and returns 0 (logged once).
 * @note From @p w's own thread; re-entrant: a handler may call it.
 */
RV_EXPORT unsigned rv_progress(rv_worker_t *w);

/**
 * @brief Job-wide barrier of all worker threads; progresses meanwhile, so
 * handlers run while it waits. Every worker arrives at worker 0, which
 * releases them all.
 * @param [in] w the calling worker
 * @return RV_OK; RV_ERR_INVALID (logged once) from an RV_HANDLER_INLINE
 *         handler; a send's error
 * @note A collective of every worker of the job, each from its own
 *       thread, the same number of times. It orders the barrier's messages
 *       only: calls and one-sided operations issued before it may still be
 *       in flight or not run yet. To wait until every call made before it
 *       (and every call their handlers made) has run, use the invocation
 *       layer's rv_quiesce instead.
 */
RV_EXPORT rv_status_t rv_barrier(rv_worker_t *w);

/* ---------------------------------------------------------------------- */
/* Job                                                                     */
/* ---------------------------------------------------------------------- */

/**
 * @brief A worker thread's body, run by rv_job_run on every worker.
 * @param [in] w   the worker; valid until the function returns (and for
 *                 the handlers that run on it afterwards, until the job
 *                 ends)
 * @param [in] arg rv_job_run's @p arg
 * @return 0 on success; any other value makes rv_job_run return
 *         RV_ERR_CANCELED in this process (the job still winds down
 *         normally everywhere)
 */
typedef int (*rv_worker_fn)(rv_worker_t *w, void *arg);

/**
 * @brief Starts job.threads worker threads in this process, pinned per
 * job.placement, connects every worker to every other worker of the job,
 * starts the installed layers on each, runs @p fn on each, and returns
 * when all workers of the job are done: after @p fn returned, each
 * worker's layers push out what they hold and its transport operations
 * are flushed, then every worker of the job runs what has landed before
 * the connections close. With the invocation layer the job's end is an
 * rv_quiesce of every worker (without its hook): a call that a handler
 * makes meanwhile, or that am.routing forwards, runs before rv_job_run
 * returns. It stops waiting, and warns, when calls made and calls run
 * have stayed unequal for a second with nothing moving (forged or
 * malformed messages dropped at their targets).
 *
 * A failure to create a worker, to connect, or to start a layer ends the
 * whole job (rv_abort) naming the cause: it does not return.
 * @param [in] ctx the context, with every handler registered and every
 *                 layer installed
 * @param [in] fn  the workers' body
 * @param [in] arg passed to every @p fn; stays the caller's
 * @return RV_OK if every @p fn returned 0 here; RV_ERR_CANCELED if one
 *         did not; RV_ERR_NO_MEMORY
 * @note Main thread; a collective of every process of the job. The
 *       rv_worker_t of each thread is valid only inside the job.
 */
RV_EXPORT rv_status_t rv_job_run(rv_context_t *ctx, rv_worker_fn fn, void *arg);

/**
 * @brief The worker's global id.
 * @param [in] w the worker
 * @return rv_tid_make(ctx, rv_rank(ctx), rv_worker_local(w))
 * @note Any thread (the id does not change).
 */
RV_EXPORT rv_tid_t rv_worker_tid(const rv_worker_t *w);
/**
 * @brief The worker's index in its process.
 * @param [in] w the worker
 * @return 0 .. rv_threads() - 1
 * @note Any thread (the index does not change).
 */
RV_EXPORT int rv_worker_local(const rv_worker_t *w);
/**
 * @brief The context the worker belongs to.
 * @param [in] w the worker
 * @return the context; owned by the program (rv_init, rv_finalize)
 * @note Any thread.
 */
RV_EXPORT rv_context_t *rv_worker_context(rv_worker_t *w);

/** @brief Counters of one worker (messages of core's send calls, all
 * layers' messages included). */
typedef struct rv_worker_stats {
    /** @{ */
    uint64_t tx_msgs, tx_bytes; /**< messages sent, and their payload
                                     bytes */
    /** @} */
    /** @{ */
    uint64_t rx_msgs, rx_bytes; /**< messages whose handler ran, and their
                                     payload bytes */
    /** @} */
    uint64_t rx_unknown_handler; /**< dropped: no such handler id */
    uint64_t rx_malformed;       /**< dropped: truncated or bad header */
} rv_worker_stats_t;

/**
 * @brief Copies the worker's counters.
 * @param [in]  w     the worker
 * @param [out] stats the counters as they are now
 * @note From @p w's own thread (the counters are not atomic).
 */
RV_EXPORT void rv_worker_stats(const rv_worker_t *w, rv_worker_stats_t *stats);

#ifdef __cplusplus
}
#endif

/* Collectives among the running job's workers (rv_coll_allreduce,
 * rv_coll_allgather). */
#include "rv_coll.h"

#endif
