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
 */
#ifndef RIVET_RIVET_H
#define RIVET_RIVET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_config.h"
#include "rv_status.h"
#include "rv_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rv_context rv_context_t; /**< one per process */
typedef struct rv_worker rv_worker_t;   /**< one per worker thread */
typedef uint32_t rv_tid_t;              /**< global worker thread id */
typedef int32_t rv_rank_t;              /**< a process of the job */
typedef uint32_t rv_handler_id_t;       /**< hash of a handler's name */

/** Every worker of the job, where a call takes one or all (rv_flush). */
#define RV_TID_ALL UINT32_MAX
/** No worker. */
#define RV_TID_NONE (UINT32_MAX - 1)

/* ---------------------------------------------------------------------- */
/* Context                                                                 */
/* ---------------------------------------------------------------------- */

/**
 * @brief Loads the configuration, joins the job and loads the transport.
 *
 * The configuration file comes from `-c FILE` / `--config FILE` in
 * @p argv (removed from it), else from RIVET_CONFIG (set by rivetrun), else
 * defaults; environment overrides RIVET_<SECTION>_<KEY> apply on top. The
 * bootstrap is the one rivetrun started (RIVET_BOOTSTRAP), else PMIx when the
 * process was started by mpirun/prterun/srun, else a job of one process.
 *
 * @param [in,out] argc, argv  the program's arguments; may be NULL
 * @param [out]    ctx_p       the context; set only on success
 * @return RV_OK, or an error already logged with its cause
 * @note Call once per process, from the main thread.
 */
RV_EXPORT rv_status_t rv_init(int *argc, char ***argv, rv_context_t **ctx_p);

/**
 * @brief As rv_init, with an explicit configuration (from rv_config_load,
 * changed with rv_config_set if need be). @p cfg is copied: the caller
 * still frees it.
 */
RV_EXPORT rv_status_t rv_init_config(const rv_config_t *cfg, rv_context_t **ctx_p);

/** @brief Leaves the job and frees the context. */
RV_EXPORT void rv_finalize(rv_context_t *ctx);

/** @brief Ends the whole job now (every process) with @p code. */
RV_EXPORT void rv_abort(rv_context_t *ctx, int code, const char *why)
    __attribute__((noreturn));

RV_EXPORT rv_rank_t rv_rank(const rv_context_t *ctx);   /**< this process */
RV_EXPORT rv_rank_t rv_size(const rv_context_t *ctx);   /**< processes in the job */
RV_EXPORT int rv_threads(const rv_context_t *ctx);      /**< workers per process */
RV_EXPORT uint32_t rv_nworkers(const rv_context_t *ctx); /**< workers in the job */
/** @brief The context's configuration (its own copy; read a layer's keys
 * with rv_config_component, any key with rv_config_get). Lives until
 * rv_finalize. */
RV_EXPORT const rv_config_t *rv_context_config(const rv_context_t *ctx);
/** @brief Name of the bootstrap in use: "rivetrun", "pmix" or "singleton". */
RV_EXPORT const char *rv_bootstrap_name(const rv_context_t *ctx);
/** @brief The transport's capabilities, including what it really uses
 * (known once rv_job_run has connected the workers). */
RV_EXPORT const rv_transport_caps_t *rv_context_caps(rv_context_t *ctx);

static inline rv_tid_t rv_tid_make(const rv_context_t *ctx, rv_rank_t rank,
                                   int local)
{
    return (rv_tid_t)rank * (rv_tid_t)rv_threads(ctx) + (rv_tid_t)local;
}
static inline rv_rank_t rv_tid_rank(const rv_context_t *ctx, rv_tid_t tid)
{
    return (rv_rank_t)(tid / (rv_tid_t)rv_threads(ctx));
}

/** @brief Process-level collectives, from the main thread, outside
 * rv_job_run (they do not progress workers). */
RV_EXPORT rv_status_t rv_bootstrap_barrier(rv_context_t *ctx);
/** @brief Gathers @p len bytes from every process into @p out
 * (size * len bytes, in rank order). */
RV_EXPORT rv_status_t rv_bootstrap_allgather(rv_context_t *ctx, const void *in,
                                   void *out, size_t len);

/* ---------------------------------------------------------------------- */
/* Handlers and messages                                                   */
/* ---------------------------------------------------------------------- */

/** @brief A received message, as a handler sees it. */
typedef struct rv_msg {
    rv_tid_t src;           /**< sending worker */
    rv_handler_id_t handler;
    void *data;             /**< payload (no alignment promised) */
    size_t len;
    const void *xhdr;       /**< rv_sendx's header extension, 8-aligned */
    size_t xhdr_len;
    void *desc_;            /**< private */
} rv_msg_t;

/**
 * @brief A message handler. Runs on the destination worker's thread.
 * @return RV_OK when done with msg->data (it is recycled on return), or
 *         RV_INPROGRESS if the handler was registered with
 *         RV_HANDLER_KEEP_DATA and keeps the message, to release it later
 *         with rv_msg_release(). A handler may send messages and progress.
 */
typedef rv_status_t (*rv_handler_fn)(rv_worker_t *w, rv_msg_t *msg, void *arg);

enum {
    /** The handler may return RV_INPROGRESS to keep the payload. */
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
 * the job whatever the registration order or binary layout. Registering a
 * second name with the same id is rejected (RV_ERR_EXISTS). Register every
 * handler before rv_job_run.
 */
RV_EXPORT rv_status_t rv_handler_register(rv_context_t *ctx, const char *name,
                                rv_handler_fn fn, void *arg, unsigned flags,
                                rv_handler_id_t *id_p);

/** @brief The id a name hashes to (what rv_handler_register assigns). */
RV_EXPORT rv_handler_id_t rv_handler_id(const char *name);

/** @brief Releases a message kept by a handler that returned RV_INPROGRESS. */
RV_EXPORT void rv_msg_release(rv_worker_t *w, rv_msg_t *msg);

/**
 * @brief A synchronizer: a counter of operations outstanding.
 * Initialise with rv_sync_init, pass to operations, wait with rv_sync_wait.
 */
typedef struct rv_sync {
    atomic_long pending;
    atomic_int status;      /**< first error seen, else RV_OK */
} rv_sync_t;

static inline void rv_sync_init(rv_sync_t *s, long count)
{
    atomic_init(&s->pending, count);
    atomic_init(&s->status, RV_OK);
}
static inline bool rv_sync_done(rv_sync_t *s)
{
    return atomic_load_explicit(&s->pending, memory_order_acquire) <= 0;
}
/** @brief Marks one operation of @p s complete with @p status. */
RV_EXPORT void rv_sync_complete(rv_sync_t *s, rv_status_t status);
/** @brief Progresses @p w until @p s reaches zero; returns s->status. */
RV_EXPORT rv_status_t rv_sync_wait(rv_worker_t *w, rv_sync_t *s);

/**
 * @brief Sends @p len bytes at @p buf to worker @p dest, which runs handler
 * @p h on them.
 *
 * @param sync  if NULL, the call returns once @p buf is reusable (it
 *              progresses meanwhile). Otherwise the caller increments
 *              nothing: rv_send adds one to @p sync and completes it when
 *              @p buf is reusable, possibly before returning.
 * @return RV_OK, or an error (then @p sync is left unchanged).
 */
RV_EXPORT rv_status_t rv_send(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *buf, size_t len, rv_sync_t *sync);

/** @brief As rv_send, with a payload gathered from @p iovcnt pieces. */
RV_EXPORT rv_status_t rv_sendv(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                     const struct iovec *iov, size_t iovcnt, rv_sync_t *sync);

/** Largest header extension rv_sendx carries. */
#define RV_MSG_XHDR_MAX 48

/**
 * @brief As rv_sendv, with a header extension of up to RV_MSG_XHDR_MAX
 * bytes that travels in the transport's AM header and reaches the handler
 * as msg->xhdr. For the layers above core (the invocation layer puts its
 * call header there). @p xhdr is copied: it may be reused on return.
 */
RV_EXPORT rv_status_t rv_sendx(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                     const void *xhdr, size_t xhdr_len,
                     const struct iovec *iov, size_t iovcnt, rv_sync_t *sync);

/**
 * @brief Runs handlers of arrived messages and completes operations.
 * @return the number of events handled (0: nothing to do). Callers that
 *         poll in a loop should yield the CPU when it returns 0 repeatedly;
 *         rv_sync_wait and rv_barrier do.
 */
RV_EXPORT unsigned rv_progress(rv_worker_t *w);

/** @brief Job-wide barrier of all worker threads; progresses meanwhile. */
RV_EXPORT rv_status_t rv_barrier(rv_worker_t *w);

/* ---------------------------------------------------------------------- */
/* Job                                                                     */
/* ---------------------------------------------------------------------- */

/** @brief A worker thread's body; a non-zero return fails the job. */
typedef int (*rv_worker_fn)(rv_worker_t *w, void *arg);

/**
 * @brief Starts job.threads worker threads in this process, pinned per
 * job.placement, connects every worker to every other worker of the job,
 * runs @p fn on each, and returns when all workers of the job are done.
 * @return RV_OK if every @p fn returned 0 here.
 */
RV_EXPORT rv_status_t rv_job_run(rv_context_t *ctx, rv_worker_fn fn, void *arg);

RV_EXPORT rv_tid_t rv_worker_tid(const rv_worker_t *w);
RV_EXPORT int rv_worker_local(const rv_worker_t *w);   /**< index in the process */
RV_EXPORT rv_context_t *rv_worker_context(rv_worker_t *w);

/** @brief The transport worker of @p w, for the layers above core. */
RV_EXPORT rv_tworker_t *rv_worker_tworker(rv_worker_t *w);
/** @brief The transport of @p ctx, for the layers above core. */
RV_EXPORT const rv_transport_ops_t *rv_context_transport(rv_context_t *ctx,
                                               rv_transport_t **tp_p);

/** @brief Counters of one worker. */
typedef struct rv_worker_stats {
    uint64_t tx_msgs, tx_bytes;
    uint64_t rx_msgs, rx_bytes;
    uint64_t rx_unknown_handler; /**< dropped: no such handler id */
    uint64_t rx_malformed;       /**< dropped: truncated or bad header */
} rv_worker_stats_t;

RV_EXPORT void rv_worker_stats(const rv_worker_t *w, rv_worker_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
