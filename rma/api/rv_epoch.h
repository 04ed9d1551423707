/**
 * @file rv_epoch.h
 * @brief Distributed epoch-based reclamation (after Dewan et al.'s
 * EpochManager for Chapel, itself after Fraser's EBR).
 *
 * Objects (global pointers, rv_gptr.h) unlinked from a shared structure
 * are deferred for deletion instead of freed, and freed — each by its
 * owning process, through the manager's free function — only once no
 * worker of the job can still hold a reference. Readers bracket their
 * accesses with pin/unpin:
 *
 *     rv_epoch_token_t *tok = rv_epoch_register(em);
 *     rv_epoch_pin(tok);
 *     ... read the structure; unlink obj; rv_epoch_defer_delete(tok, obj);
 *     rv_epoch_unpin(tok);
 *     rv_epoch_try_reclaim(w, em, NULL);   // now and then
 *     rv_epoch_deregister(tok);
 *
 * There is one manager instance per process (privatized: pin, unpin and
 * defer_delete touch only process-local memory, never the network). The
 * job shares one epoch. A token pinned in epoch e defers into limbo list
 * e mod 4 of its process; when every token of every process is in the
 * current epoch N or unpinned, the epoch may advance to N+1, and then the
 * limbo list of epoch N-2 is reclaimed — three advances after deferral,
 * one more than Chapel's three-list scheme, which can free an object a
 * reader pinned in the next epoch still holds (see rma_epoch.c).
 *
 * rv_epoch_try_reclaim elects one reclaimer for the whole job, first come
 * first served: a process-local flag stops the other threads of the
 * process without communication, then a job-wide flag (a registered word
 * of rank 0, taken with one remote compare-swap) stops the other
 * processes. The reclaimer asks every process whether its tokens are all
 * in the current epoch (one call each, in parallel), advances the epoch
 * everywhere, and has every process scatter its reclaimable limbo list by
 * owning rank and send each owner its objects in one bulk call.
 *
 * Pin, unpin and defer_delete are wait-free (defer_delete fills a
 * per-token block of objects and publishes a full block with one atomic
 * exchange; blocks come back to their token the same way). A reclamation
 * needs the workers it calls to progress: workers spinning in
 * pin/unpin/try_reclaim progress once per failed try_reclaim.
 *
 * @note Thread mode: the manager is shared by the threads of a process
 * (one instance per process, thread-safe). A token is single-threaded:
 * pin, unpin and defer_delete are called by the thread that registered
 * it. rv_epoch_register and rv_epoch_stats may be called from any thread;
 * the functions taking an rv_worker_t (rv_epoch_try_reclaim from any
 * worker) from that worker's own thread.
 */
#ifndef RIVET_RV_EPOCH_H
#define RIVET_RV_EPOCH_H

#include "rv_gptr.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief An epoch manager: this process's instance of a job-wide
 * manager (opaque). Made by rv_epoch_manager_create, freed by
 * rv_epoch_manager_destroy. @note Thread-safe. */
typedef struct rv_epoch_manager rv_epoch_manager_t;
/** @brief A reader's token (opaque): made by rv_epoch_register, given
 * back by rv_epoch_deregister, freed with its manager.
 * @note Single-threaded: used by one thread (or task) at a time. */
typedef struct rv_epoch_token rv_epoch_token_t;

/**
 * @brief Frees a deferred object at its owner.
 * @param [in] w   the worker of the owning process whose local index is
 *                 the reclaimer's (in the reclaimer's own process, the
 *                 reclaimer), inside rv_epoch_try_reclaim or
 *                 rv_epoch_clear or from a handler inside rv_progress
 * @param [in] obj the object's address, in the calling process
 *                 (rv_gptr_addr of what was deferred)
 * @param [in] arg the @p arg given to rv_epoch_manager_create
 */
typedef void (*rv_epoch_free_fn)(rv_worker_t *w, void *obj, void *arg);

/**
 * @brief Creates a manager shared by the whole job. Collective: every
 * worker of the job calls it, in the same order as its other collective
 * calls (it contains a barrier). Every worker gets its process's instance.
 * @param [in]  w       the calling worker
 * @param [in]  free_fn frees a deferred object at its owner (with @p arg)
 * @param [in]  arg     passed to @p free_fn; stays the caller's
 * @param [out] em_p    this process's instance, the same for every worker
 *                      of the process; NULL when it could not be created.
 *                      Free it with rv_epoch_manager_destroy.
 * @return RV_OK; RV_ERR_INVALID (logged) when rv_rma_init was not called;
 *         RV_ERR_UNSUPPORTED (logged) for a job of more than 65536
 *         processes; RV_ERR_NO_MEMORY (logged at the process that failed,
 *         also when 64 managers are alive in the process); rv_barrier's
 *         errors
 * @note From @p w's own thread; not from an RV_HANDLER_INLINE handler.
 */
RV_EXPORT rv_status_t rv_epoch_manager_create(rv_worker_t *w,
                                              rv_epoch_free_fn free_fn,
                                              void *arg,
                                              rv_epoch_manager_t **em_p);

/**
 * @brief Collective: frees everything still deferred (rv_epoch_clear, run
 * by worker 0), then the manager and every token of it.
 * @param [in] w  the calling worker
 * @param [in] em the manager; invalid afterwards, with its tokens
 * @return RV_OK, or rv_barrier's or rv_epoch_clear's error
 * @note Every worker of the job, each from its own thread. Tokens must be
 *       deregistered and no thread may use the manager any more.
 */
RV_EXPORT rv_status_t rv_epoch_manager_destroy(rv_worker_t *w,
                                               rv_epoch_manager_t *em);

/**
 * @brief A token for one thread (or task); not thread-safe itself.
 * @param [in] em the manager
 * @return the token (a free one reused, or a new one), or NULL when out of
 *         memory. The manager's: give it back with rv_epoch_deregister;
 *         it is freed with the manager.
 * @note Thread-safe.
 */
RV_EXPORT rv_epoch_token_t *rv_epoch_register(rv_epoch_manager_t *em);

/**
 * @brief Gives the token back (unpinned); publishes objects it still
 * holds to their limbo lists.
 * @param [in] tok the token; NULL is accepted. The caller may not use it
 *                 again.
 * @note The token's thread.
 */
RV_EXPORT void rv_epoch_deregister(rv_epoch_token_t *tok);

/**
 * @brief Enters the current epoch: objects reachable now stay valid
 * until rv_epoch_unpin. Wait-free; touches process-local memory only.
 * @param [in] tok the token
 * @note The token's thread.
 */
RV_EXPORT void rv_epoch_pin(rv_epoch_token_t *tok);

/**
 * @brief Leaves the epoch. Wait-free.
 * @param [in] tok the token
 * @note The token's thread.
 */
RV_EXPORT void rv_epoch_unpin(rv_epoch_token_t *tok);

/**
 * @brief Defers the deletion of @p obj (already unlinked, so no new
 * reference can be made to it) until no pinned worker can hold it. The
 * token must be pinned. Wait-free.
 * @param [in] tok the token, pinned (else the call is logged as an error
 *                 and the object kept in the current epoch's list)
 * @param [in] obj the object, of any process; RV_GPTR_NULL is ignored.
 *                 Its owner frees it later with the manager's free
 *                 function; the caller may no longer free it. On out of
 *                 memory it is leaked (logged).
 * @note The token's thread.
 */
RV_EXPORT void rv_epoch_defer_delete(rv_epoch_token_t *tok, rv_gptr_t obj);

/**
 * @brief Tries to advance the job's epoch and reclaim what became safe.
 * @param [in]  w        the calling worker
 * @param [in]  em       the manager
 * @param [out] epoch_p  on RV_OK, the new epoch (if not NULL)
 * @return RV_OK: this caller was elected, advanced the epoch and had the
 *         safe objects freed; RV_ERR_AGAIN: another thread or process is
 *         reclaiming, or some token is still pinned in the previous
 *         epoch (nothing to do now); or a transport error.
 * @note From @p w's own thread, any worker; not from an
 *       RV_HANDLER_INLINE handler (the elected caller waits for every
 *       process). It progresses once when not elected.
 */
RV_EXPORT rv_status_t rv_epoch_try_reclaim(rv_worker_t *w,
                                           rv_epoch_manager_t *em,
                                           uint64_t *epoch_p);

/**
 * @brief Frees every deferred object of every process at once, whatever
 * the epochs. Only when no thread of the job uses the manager: one worker
 * calls it while the others progress (e.g. wait in rv_barrier).
 * @param [in] w  the calling worker
 * @param [in] em the manager
 * @return RV_OK, or a transport or call error (objects that could not be
 *         sent to their owners are leaked, logged)
 * @note From @p w's own thread; it waits, progressing, until it is
 *       elected and every process has freed its objects.
 */
RV_EXPORT rv_status_t rv_epoch_clear(rv_worker_t *w, rv_epoch_manager_t *em);

/** @brief Counters of the calling process's instance. */
typedef struct rv_epoch_stats {
    uint64_t epoch; /**< current epoch as this process knows it */
    /** @{ */
    uint64_t pins, deferred; /**< pins and deferred objects, summed over
                                  the process's tokens */
    /** @} */
    uint64_t attempts;  /**< try_reclaim calls */
    uint64_t elected;   /**< ... that won the job-wide election */
    uint64_t advanced;  /**< ... that advanced the epoch */
    uint64_t freed;     /**< objects this process freed as owner */
    uint64_t bulk_sent; /**< bulk delete calls sent to other ranks */
} rv_epoch_stats_t;

/**
 * @brief Reads the counters of the calling process's instance.
 * @param [in]  em    the manager
 * @param [out] stats the counters, read one by one (not a consistent
 *                    snapshot while other threads work)
 * @note Any thread.
 */
RV_EXPORT void rv_epoch_stats(rv_epoch_manager_t *em, rv_epoch_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
