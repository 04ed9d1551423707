/**
 * @file rv_coll.h
 * @brief Collectives among the worker threads of a running job:
 * reductions and a gather of small values, usable from inside
 * rv_job_run (rv_bootstrap_allgather is the main thread's, outside it).
 * Every one takes its destination first, as memcpy.
 *
 * Both run up and down a binomial tree of the job's workers rooted at
 * worker 0 (log2 of the workers deep): each worker combines its
 * children's contributions with its own and passes the result to its
 * parent; worker 0's result comes back down the same tree. Every worker
 * receives the same result, bit for bit (a double sum is added once, at
 * each tree node, in an order that may vary from run to run).
 *
 * @note Thread mode: collectives of every worker of the job, each from
 * its own thread, in the same order and with the same count, type and
 * operation everywhere; never from a handler (anything run by
 * rv_progress), where they return RV_ERR_INVALID. They progress while
 * they wait, so handlers run meanwhile.
 */
#ifndef RIVET_RV_COLL_H
#define RIVET_RV_COLL_H

#include "rivet.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The element type of rv_allreduce. */
typedef enum rv_coll_type {
    RV_COLL_U64,    /**< uint64_t */
    RV_COLL_I64,    /**< int64_t */
    RV_COLL_DOUBLE, /**< double */
} rv_coll_type_t;

/** @brief The operation of rv_allreduce, element by element. */
typedef enum rv_coll_op {
    RV_COLL_SUM, /**< sum (wrapping for the integer types) */
    RV_COLL_MIN, /**< minimum */
    RV_COLL_MAX, /**< maximum */
} rv_coll_op_t;

/** Most bytes of one worker's contribution to rv_allreduce, and of the
 * whole result of rv_allgather. */
#define RV_COLL_MAX_BYTES (1u << 20)

/**
 * @brief Combines @p count elements of every worker's @p in with @p op;
 * every worker gets the result in @p out.
 *
 * Destination first, as memcpy, rv_get and rv_bootstrap_allgather (and
 * OpenSHMEM's and GASNet-EX's reductions). Every worker must pass the same
 * @p count, @p type and @p op: a worker that finds another's different
 * ends the job (rv_abort), naming the call and both workers' arguments.
 * @param [in]  w     the calling worker
 * @param [out] out   the result, @p count elements; may be @p in
 * @param [in]  in    this worker's elements; may be reused on return
 * @param [in]  count elements, 1 .. RV_COLL_MAX_BYTES / 8
 * @param [in]  type  their type
 * @param [in]  op    the operation
 * @return RV_OK; RV_ERR_INVALID for a bad count, type or op, or from a
 *         handler (logged); RV_ERR_NO_MEMORY; a send's error
 * @note A collective of every worker (see the file's thread mode).
 */
RV_EXPORT rv_status_t rv_coll_allreduce(rv_worker_t *w, void *out,
                                        const void *in, size_t count,
                                        rv_coll_type_t type, rv_coll_op_t op);

/**
 * @brief Every worker gets every worker's @p len bytes, in worker order:
 * worker t's bytes at @p out + t * @p len.
 *
 * Destination first, as rv_coll_allreduce. Every worker must pass the same
 * @p len: a worker that finds another's different ends the job
 * (rv_abort), naming the call and both lengths.
 * @param [in]  w   the calling worker
 * @param [out] out rv_nworkers() * @p len bytes; must not overlap @p in
 *                  (RV_ERR_INVALID, logged)
 * @param [in]  in  this worker's bytes; may be reused on return
 * @param [in]  len their length, the same on every worker; 1 or more,
 *                  and rv_nworkers() * @p len at most RV_COLL_MAX_BYTES
 * @return as rv_coll_allreduce
 * @note A collective of every worker (see the file's thread mode).
 */
RV_EXPORT rv_status_t rv_coll_allgather(rv_worker_t *w, void *out,
                                        const void *in, size_t len);

/*
 * The collectives before 0.3, source first: kept for one minor release
 * (CHANGELOG.md). Their new names are what makes the new order safe: a
 * call in the old order under the new name would compile silently.
 */
/** @cond RV_DEPRECATED_NAMES */
RV_DEPRECATED("use rv_coll_allreduce(w, out, in, count, type, op): "
              "destination first")
RV_EXPORT rv_status_t rv_allreduce(rv_worker_t *w, const void *in, void *out,
                                   size_t count, rv_coll_type_t type,
                                   rv_coll_op_t op);
RV_DEPRECATED("use rv_coll_allgather(w, out, in, len): destination first")
RV_EXPORT rv_status_t rv_allgather(rv_worker_t *w, const void *in, size_t len,
                                   void *out);
/** @endcond */

#ifdef __cplusplus
}
#endif
#endif
