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
 *     rv_epoch_unregister(tok);
 *
 * There is one manager instance per process (privatized: pin, unpin and
 * defer_delete touch only process-local memory, never the network). The
 * job shares one epoch. A token pinned in epoch e defers into limbo list
 * e mod 4 of its process; when every token of every process is in the
 * current epoch N or unpinned, the epoch may advance to N+1, and then the
 * limbo list of epoch N-2 is reclaimed — three advances after deferral,
 * one more than Chapel's three-list scheme, which can free an object a
 * reader pinned in the next epoch still holds (see rv_epoch.c).
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
 */
#ifndef RIVET_RV_EPOCH_H
#define RIVET_RV_EPOCH_H

#include "rv_gptr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rv_epoch_manager rv_epoch_manager_t;
typedef struct rv_epoch_token rv_epoch_token_t;

/** @brief Frees object @p obj, an address of the calling process; run by
 * a worker of the owning process. */
typedef void (*rv_epoch_free_fn)(rv_worker_t *w, void *obj, void *arg);

/**
 * @brief Creates a manager shared by the whole job. Collective: every
 * worker of the job calls it, in the same order as its other collective
 * calls (it contains a barrier). Every worker gets its process's instance.
 * @param free_fn  frees a deferred object at its owner (with @p arg)
 */
RV_EXPORT rv_status_t rv_epoch_manager_create(rv_worker_t *w, rv_epoch_free_fn free_fn,
                                    void *arg, rv_epoch_manager_t **em_p);

/** @brief Collective: frees everything still deferred (rv_epoch_clear),
 * then the manager. Tokens must be unregistered. */
RV_EXPORT rv_status_t rv_epoch_manager_destroy(rv_worker_t *w, rv_epoch_manager_t *em);

/** @brief A token for one thread (or task); not thread-safe itself. */
RV_EXPORT rv_epoch_token_t *rv_epoch_register(rv_epoch_manager_t *em);

/** @brief Gives the token back; publishes objects it still holds. */
RV_EXPORT void rv_epoch_unregister(rv_epoch_token_t *tok);

/** @brief Enters the current epoch: objects reachable now stay valid
 * until rv_epoch_unpin. */
RV_EXPORT void rv_epoch_pin(rv_epoch_token_t *tok);

/** @brief Leaves the epoch. */
RV_EXPORT void rv_epoch_unpin(rv_epoch_token_t *tok);

/** @brief Defers the deletion of @p obj (already unlinked, so no new
 * reference can be made to it) until no pinned worker can hold it. The
 * token must be pinned. */
RV_EXPORT void rv_epoch_defer_delete(rv_epoch_token_t *tok, rv_gptr_t obj);

/**
 * @brief Tries to advance the job's epoch and reclaim what became safe.
 * @param epoch_p  on RV_OK, the new epoch (if not NULL)
 * @return RV_OK: this caller was elected, advanced the epoch and had the
 *         safe objects freed; RV_ERR_AGAIN: another thread or process is
 *         reclaiming, or some token is still pinned in the previous
 *         epoch (nothing to do now); or a transport error.
 */
RV_EXPORT rv_status_t rv_epoch_try_reclaim(rv_worker_t *w, rv_epoch_manager_t *em,
                                 uint64_t *epoch_p);

/**
 * @brief Frees every deferred object of every process at once, whatever
 * the epochs. Only when no thread of the job uses the manager: one worker
 * calls it while the others progress (e.g. wait in rv_barrier).
 */
RV_EXPORT rv_status_t rv_epoch_clear(rv_worker_t *w, rv_epoch_manager_t *em);

/** @brief Counters of the calling process's instance. */
typedef struct rv_epoch_stats {
    uint64_t epoch;          /**< current epoch as this process knows it */
    uint64_t pins, deferred; /**< summed over tokens (at unregister/read) */
    uint64_t attempts;       /**< try_reclaim calls */
    uint64_t elected;        /**< ... that won the job-wide election */
    uint64_t advanced;       /**< ... that advanced the epoch */
    uint64_t freed;          /**< objects this process freed as owner */
    uint64_t bulk_sent;      /**< bulk delete calls sent to other ranks */
} rv_epoch_stats_t;

RV_EXPORT void rv_epoch_stats(rv_epoch_manager_t *em, rv_epoch_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif
