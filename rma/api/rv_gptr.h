/**
 * @file rv_gptr.h
 * @brief Global pointers and atomic objects (after Dewan et al.,
 * "Scalable atomic objects and epoch-based reclamation for PGAS").
 *
 * A global pointer names an object anywhere in the job: its process and
 * its address there, compressed into one 64-bit word (16-bit rank,
 * 48-bit virtual address — what x86-64 and AArch64 user space use), so
 * that a word holding one can be swung with a single remote 64-bit
 * compare-swap (rv_atomic_cswap: a NIC atomic on RDMA). Jobs of more than
 * 65536 processes, or addresses above 2^48, need the 128-bit form.
 *
 * The ABA-counted variant (rv_gptr_aba_t) pairs the pointer with a
 * counter bumped by every successful compare-swap, so a pointer that went
 * A -> B -> A is not mistaken for unchanged. It is updated with one
 * double-width compare-swap (cmpxchg16b / casp) by the owning process: a
 * remote caller's operation runs there as a call (networks have no
 * 128-bit atomics), as in the paper.
 */
#ifndef RIVET_RV_GPTR_H
#define RIVET_RV_GPTR_H

#include <stdbool.h>
#include <stdint.h>

#include "rv_rma.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A compressed global pointer; 0 (RV_GPTR_NULL) is null. */
typedef uint64_t rv_gptr_t;

#define RV_GPTR_NULL ((rv_gptr_t)0)
#define RV_GPTR_ADDR_BITS 48
#define RV_GPTR_MAX_RANK 0xffffu

/** @brief The global pointer to @p addr in process @p rank; RV_GPTR_NULL
 * for a NULL @p addr. The caller checks rv_gptr_fits first when the rank
 * or address may be out of range (then the result is meaningless). */
static inline rv_gptr_t rv_gptr_make(rv_rank_t rank, const void *addr)
{
    if (addr == NULL)
        return RV_GPTR_NULL;
    return (uint64_t)rank << RV_GPTR_ADDR_BITS |
           ((uint64_t)(uintptr_t)addr &
            ((UINT64_C(1) << RV_GPTR_ADDR_BITS) - 1));
}

/** @brief Whether (@p rank, @p addr) can be compressed. */
static inline bool rv_gptr_fits(rv_rank_t rank, const void *addr)
{
    return rank >= 0 && (uint32_t)rank <= RV_GPTR_MAX_RANK &&
           (uint64_t)(uintptr_t)addr >> RV_GPTR_ADDR_BITS == 0;
}

/** @brief The process a global pointer points into. */
static inline rv_rank_t rv_gptr_rank(rv_gptr_t g)
{
    return (rv_rank_t)(g >> RV_GPTR_ADDR_BITS);
}

/** @brief The address, meaningful in process rv_gptr_rank(g). */
static inline void *rv_gptr_addr(rv_gptr_t g)
{
    return (void *)(uintptr_t)(g & ((UINT64_C(1) << RV_GPTR_ADDR_BITS) - 1));
}

/* ---------------------------------------------------------------------- */
/* Atomic objects: a registered 64-bit word holding a global pointer        */

/** @brief Reads the global pointer held at @p obj (an atomic read). */
static inline rv_status_t rv_gptr_read(rv_worker_t *w, rv_rptr_t obj,
                                       rv_gptr_t *val)
{
    return rv_atomic_fadd(w, obj, 0, val, NULL);
}

/** @brief Stores @p val at @p obj if it holds @p expect; *@p ok tells. */
static inline rv_status_t rv_gptr_cswap(rv_worker_t *w, rv_rptr_t obj,
                                        rv_gptr_t expect, rv_gptr_t val,
                                        bool *ok)
{
    uint64_t old = ~expect;
    rv_status_t st = rv_atomic_cswap(w, obj, expect, val, &old, NULL);
    *ok = st == RV_OK && old == expect;
    return st;
}

/** @brief Replaces the pointer at @p obj by @p val; the old one in *@p old
 * (if not NULL). */
static inline rv_status_t rv_gptr_exchange(rv_worker_t *w, rv_rptr_t obj,
                                           rv_gptr_t val, rv_gptr_t *old)
{
    return rv_atomic_swap(w, obj, val, old);
}

/** @brief Stores @p val at @p obj (an atomic write). */
static inline rv_status_t rv_gptr_write(rv_worker_t *w, rv_rptr_t obj,
                                        rv_gptr_t val)
{
    return rv_atomic_swap(w, obj, val, NULL);
}

/* ---------------------------------------------------------------------- */
/* ABA-counted atomic objects (16 bytes, 16-byte aligned)                   */

/** @brief A pointer and the count of its successful updates. */
typedef struct rv_gptr_aba {
    _Alignas(16) rv_gptr_t ptr;
    uint64_t count;
} rv_gptr_aba_t;

/** @brief Atomic 16-byte read of a local ABA object. */
RV_EXPORT rv_gptr_aba_t rv_gptr_aba_load(rv_gptr_aba_t *obj);

/**
 * @brief If the local @p obj holds exactly @p expect (pointer and count),
 * replaces it by (@p val, expect.count + 1), in one double-width CAS.
 * @return true on success; else false with @p *seen (if not NULL) set to
 *         what @p obj held.
 */
RV_EXPORT bool rv_gptr_aba_cswap_local(rv_gptr_aba_t *obj, rv_gptr_aba_t expect,
                             rv_gptr_t val, rv_gptr_aba_t *seen);

/** @brief Stores @p val at the local @p obj (bumping its count); returns
 * what it held before. */
RV_EXPORT rv_gptr_aba_t rv_gptr_aba_exchange_local(rv_gptr_aba_t *obj, rv_gptr_t val);

/**
 * @brief rv_gptr_aba_cswap_local on an ABA object anywhere: memory of the
 * caller's process directly, else as a call run by a worker of the owning
 * process (waits, progressing). *@p ok tells whether it swapped; *@p seen
 * (if not NULL) gets the value found.
 */
RV_EXPORT rv_status_t rv_gptr_aba_cswap(rv_worker_t *w, rv_rptr_t obj,
                              rv_gptr_aba_t expect, rv_gptr_t val, bool *ok,
                              rv_gptr_aba_t *seen);

/** @brief Atomic read of an ABA object anywhere (as rv_gptr_aba_cswap). */
RV_EXPORT rv_status_t rv_gptr_aba_read(rv_worker_t *w, rv_rptr_t obj,
                             rv_gptr_aba_t *val);

/** @brief Exchange on an ABA object anywhere (as rv_gptr_aba_cswap). */
RV_EXPORT rv_status_t rv_gptr_aba_exchange(rv_worker_t *w, rv_rptr_t obj,
                                 rv_gptr_t val, rv_gptr_aba_t *old);

#ifdef __cplusplus
}
#endif
#endif
