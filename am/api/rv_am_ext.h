/**
 * @file rv_am_ext.h
 * @brief The invocation layer's extension interface, for layers built on
 * it (rivet's rma uses it for AM Long and for calls whose buffer the
 * target reads; a user's layer may too).
 *
 * Two mechanisms, nothing more:
 * - **Call extensions.** A call may name its buffer by reference (it is
 *   already in the target's memory), have its buffer copied to an address
 *   of the target before the handler runs, and pass through a *hook* of
 *   the extending layer at the target before its handler runs. The hook
 *   may wait (progressing): meanwhile later calls from the same source
 *   wait too, so per-pair FIFO order holds.
 * - **Flush hooks.** rv_flush runs them after the calls left, so that a
 *   layer's own operations (rma's one-sided operations) are covered by
 *   the one flush users already call.
 *
 * @note Hooks are registered from the main thread before rv_job_run, in
 * the same order in every process (a hook is named by its index on the
 * wire). The calls below are made from worker threads, like rv_call.
 */
#ifndef RIVET_RV_AM_EXT_H
#define RIVET_RV_AM_EXT_H

#include "rv_am.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most call hooks and flush hooks one context holds. */
#define RV_AM_HOOKS_MAX 4

/** @brief What a call hook sees at the target, before the handler runs.
 * Owned by rivet, valid from prepare to finish. */
typedef struct rv_am_xrun {
    rv_tid_t src;    /**< the calling worker */
    uint64_t addr;   /**< rv_am_xcall_t's addr, as the caller sent it */
    uint32_t len;    /**< rv_am_xcall_t's len, as the caller sent it */
    uint32_t word;   /**< rv_am_xcall_t's word, as the caller sent it */
    const void *buf; /**< [in,out] the buffer the handler will see */
    size_t buf_len;  /**< [in,out] its length */
    void *hook_data; /**< the hook's own, for its finish */
} rv_am_xrun_t;

/** @brief A call hook of an extending layer. Its functions run on the
 * target worker's thread, inside rv_progress. */
typedef struct rv_am_hook {
    const char *name; /**< for messages: "rivet.rma.long" */
    /** Before the handler runs; may wait, progressing (the source's later
     * calls wait meanwhile). May replace x->buf and x->buf_len. An error
     * drops the call (logged by the hook). */
    rv_status_t (*prepare)(rv_worker_t *w, rv_am_xrun_t *x, void *arg);
    /** After the handler returned (may be NULL): release what prepare
     * took. */
    void (*finish)(rv_worker_t *w, rv_am_xrun_t *x, void *arg);
    void *arg; /**< passed to @c prepare and @c finish; stays the
                    registering layer's */
} rv_am_hook_t;

/**
 * @brief Registers a call hook (initialising the invocation layer first if
 * need be).
 * @param [in]  ctx  the context, before rv_job_run
 * @param [in]  hook the hook; copied. @c prepare must be set.
 * @param [out] id_p its id, which names it in rv_am_xcall_t.hook; set only
 *                   on success
 * @return RV_OK; RV_ERR_INVALID for a NULL @p hook or prepare, or
 *         (logged) while a job runs; RV_ERR_NO_MEMORY (logged) when
 *         RV_AM_HOOKS_MAX hooks are taken;
 *         rv_am_init's errors
 * @note Main thread, before rv_job_run, in every process in the same
 *       order (the id travels on the wire).
 */
RV_EXPORT rv_status_t rv_am_hook_register(rv_context_t *ctx,
                                          const rv_am_hook_t *hook, int *id_p);

/**
 * @brief Whether [@p addr, @p addr + @p len) is memory of this process
 * that other processes may name in RV_AM_X_REF and RV_AM_X_PLACE calls
 * (rma: its registered regions).
 * @param [in] w    the target worker
 * @param [in] addr the address the call names, from the wire
 * @param [in] len  the bytes it reads (REF) or writes (PLACE) there
 * @param [in] arg  the @p arg given to rv_am_xcheck_register
 * @return true to run the call, false to drop it
 * @note Runs on the target worker's thread, inside rv_progress; must not
 *       wait.
 */
typedef bool (*rv_am_xcheck_fn)(rv_worker_t *w, uint64_t addr, uint64_t len,
                                void *arg);

/**
 * @brief Registers the check of the addresses that RV_AM_X_REF and
 * RV_AM_X_PLACE calls from other processes name (initialising the
 * invocation layer first if need be). Such a call is run only when the
 * check accepts its range; without a check, or when it refuses, the call
 * is dropped, counted as malformed in the worker's statistics and logged
 * once per source. Calls between threads of one process are not checked.
 * @param [in] ctx the context, before rv_job_run
 * @param [in] fn  the check
 * @param [in] arg passed to @p fn; stays the caller's
 * @return RV_OK; RV_ERR_INVALID for a NULL @p fn, or (logged) while a job
 *         runs or when a check is registered already; rv_am_init's errors
 * @note Main thread, before rv_job_run.
 */
RV_EXPORT rv_status_t rv_am_xcheck_register(rv_context_t *ctx,
                                            rv_am_xcheck_fn fn, void *arg);

/**
 * @brief A flush hook: completes the layer's operations towards @p dest;
 * may wait, progressing.
 * @param [in] w    the worker calling rv_flush
 * @param [in] dest rv_flush's @p dest: a worker, or RV_TID_ALL for every
 *                  worker
 * @param [in] arg  the @p arg given to rv_am_flush_hook_register
 * @return RV_OK, or an error, which rv_flush returns (later hooks do not
 *         run)
 */
typedef rv_status_t (*rv_am_flush_fn)(rv_worker_t *w, rv_tid_t dest, void *arg);

/**
 * @brief Registers a flush hook, run by rv_flush after the calls left, in
 * registration order (initialising the invocation layer first if need be).
 * @param [in] ctx the context, before rv_job_run
 * @param [in] fn  the hook
 * @param [in] arg passed to @p fn; stays the caller's
 * @return RV_OK; RV_ERR_INVALID for a NULL @p fn, or (logged) while a
 *         job runs; RV_ERR_NO_MEMORY (logged) when RV_AM_HOOKS_MAX flush
 *         hooks are taken;
 *         rv_am_init's errors
 * @note Main thread, before rv_job_run.
 */
RV_EXPORT rv_status_t rv_am_flush_hook_register(rv_context_t *ctx,
                                                rv_am_flush_fn fn, void *arg);

/** Modes of rv_am_xcall_t, combinable as noted. */
enum {
    /** The buffer is already in the target's memory, @c len bytes at
     * @c addr; rv_am_call_x's @p buf must be NULL. */
    RV_AM_X_REF = 1u << 0,
    /** The buffer travels in the call and is copied to @c addr in the
     * target before the handler runs (the handler sees it there). */
    RV_AM_X_PLACE = 1u << 1,
    /** The call passes through hook @c hook at the target (with REF,
     * PLACE or neither). */
    RV_AM_X_HOOK = 1u << 2,
};

/** @brief How a call is extended. */
typedef struct rv_am_xcall {
    unsigned mode; /**< RV_AM_X_* */
    int hook;      /**< with RV_AM_X_HOOK: from rv_am_hook_register */
    uint64_t addr; /**< REF and PLACE: the target's address; else the
                        hook's */
    uint32_t len;  /**< REF: the buffer's length; else the hook's */
    uint32_t word; /**< the hook's */
} rv_am_xcall_t;

/**
 * @brief rv_call_buffer with an extension: @p dest runs @p h on @p args
 * and the buffer @p x describes.
 * @param [in]     w     the calling worker
 * @param [in]     dest  the target worker
 * @param [in]     h     the call handler's id
 * @param [in]     args  the argument bytes
 * @param [in]     len   their length, below 2 GiB
 * @param [in]     buf   the buffer that travels in the call (PLACE, or
 *                       neither mode); NULL with RV_AM_X_REF
 * @param [in]     n     its length, below 2 GiB
 * @param [in]     x     the extension; copied into the call: reusable on
 *                       return
 * @param [in,out] sync  as rv_call's, for @p args and @p buf
 * @param [in]     flags 0 or RV_NOTIFY_CONSUMED
 * @return as rv_call; RV_ERR_INVALID (logged) for a NULL @p x, a @p buf
 *         with RV_AM_X_REF, or a hook id that is not registered
 * @note From @p w's own thread. Buffers and @p sync as rv_call_buffer; an
 * extended call is not aggregated with plain calls' fast path but keeps
 * their FIFO order.
 */
RV_EXPORT rv_status_t rv_am_call_x(rv_worker_t *w, rv_tid_t dest,
                                   rv_handler_id_t h, const void *args,
                                   size_t len, const void *buf, size_t n,
                                   const rv_am_xcall_t *x, rv_sync_t *sync,
                                   unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
