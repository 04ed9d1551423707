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

/** @brief What a call hook sees at the target, before the handler runs. */
typedef struct rv_am_xrun {
    rv_tid_t src;         /**< the calling worker */
    uint64_t addr;        /**< rv_am_xcall_t's, as the caller sent them */
    uint32_t len;
    uint32_t word;
    const void *buf;      /**< [in,out] the buffer the handler will see */
    size_t buf_len;       /**< [in,out] its length */
    void *hook_data;      /**< the hook's own, for its finish */
} rv_am_xrun_t;

/** @brief A call hook of an extending layer. */
typedef struct rv_am_hook {
    const char *name;
    /** Before the handler runs; may wait, progressing. An error drops the
     * call (logged by the hook). */
    rv_status_t (*prepare)(rv_worker_t *w, rv_am_xrun_t *x, void *arg);
    /** After the handler returned (may be NULL): release what prepare
     * took. */
    void (*finish)(rv_worker_t *w, rv_am_xrun_t *x, void *arg);
    void *arg;
} rv_am_hook_t;

/** @brief Registers a call hook; @p *id_p names it in rv_am_xcall_t.
 * @p hook is copied. */
RV_EXPORT rv_status_t rv_am_hook_register(rv_context_t *ctx,
                                          const rv_am_hook_t *hook,
                                          int *id_p);

/** @brief A flush hook: completes the layer's operations towards @p dest
 * (RV_TID_ALL: every worker); may wait, progressing. */
typedef rv_status_t (*rv_am_flush_fn)(rv_worker_t *w, rv_tid_t dest,
                                      void *arg);

/** @brief Registers a flush hook, run by rv_flush after the calls left. */
RV_EXPORT rv_status_t rv_am_flush_hook_register(rv_context_t *ctx,
                                                rv_am_flush_fn fn,
                                                void *arg);

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
    unsigned mode;  /**< RV_AM_X_* */
    int hook;       /**< with RV_AM_X_HOOK: from rv_am_hook_register */
    uint64_t addr;  /**< REF and PLACE: the target's address; else the
                         hook's */
    uint32_t len;   /**< REF: the buffer's length; else the hook's */
    uint32_t word;  /**< the hook's */
} rv_am_xcall_t;

/**
 * @brief rv_call_buffer with an extension: @p dest runs @p h on @p args
 * and the buffer @p x describes.
 * @note Buffers and @p sync as rv_call_buffer; an extended call is not
 * aggregated with plain calls' fast path but keeps their FIFO order.
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
