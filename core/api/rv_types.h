/**
 * @file rv_types.h
 * @brief The identities every rivet header shares: processes (ranks),
 * worker threads (global ids) and their sentinels. Included by rivet.h
 * and rv_transport.h; nothing to include on its own.
 */
#ifndef RIVET_RV_TYPES_H
#define RIVET_RV_TYPES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Global worker thread id: rank * job.threads + local index,
 * 0 .. rv_nworkers() - 1. Transports name their peers by it. */
typedef uint32_t rv_tid_t;

/** @brief A process of the job, 0 .. rv_size() - 1. */
typedef int32_t rv_rank_t;

/** Every worker of the job, where a call takes one or all (rv_flush, and
 * a transport's fence and flush). */
#define RV_TID_ALL UINT32_MAX

/** No worker: a value for a program's own variables; no call of rivet
 * takes it. */
#define RV_TID_NONE (UINT32_MAX - 1)

#ifdef __cplusplus
}
#endif
#endif
