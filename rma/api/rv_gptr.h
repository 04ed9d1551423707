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
 *
 * @note Thread mode: the pure functions on rv_gptr_t and the *_local
 * functions may be called from any thread; the functions taking an
 * rv_worker_t from that worker's own thread, on a job where rv_rma_init
 * was called.
 */
#ifndef RIVET_RV_GPTR_H
#define RIVET_RV_GPTR_H

#include <stdbool.h>
#include <stdint.h>

#include "rv_rma.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A compressed global pointer; 0 (RV_GPTR_NULL) is null.
 * @note Plain data: any thread. */
typedef uint64_t rv_gptr_t;

/** The null global pointer. */
#define RV_GPTR_NULL ((rv_gptr_t)0)
/** Bits of a global pointer that hold the address (the low ones). */
#define RV_GPTR_ADDR_BITS 48
/** The largest rank a global pointer holds (in its top 16 bits). */
#define RV_GPTR_MAX_RANK 0xffffu

/**
 * @brief The global pointer to @p addr in process @p rank.
 * @param [in] rank the process @p addr belongs to
 * @param [in] addr an address of that process
 * @return the compressed pointer; RV_GPTR_NULL for a NULL @p addr. The
 *         caller checks rv_gptr_fits first when the rank or address may be
 *         out of range (then the result is meaningless).
 * @note Any thread.
 */
static inline rv_gptr_t rv_gptr_make(rv_rank_t rank, const void *addr)
{
    if (addr == NULL)
        return RV_GPTR_NULL;
    return (uint64_t)rank << RV_GPTR_ADDR_BITS |
           ((uint64_t)(uintptr_t)addr &
            ((UINT64_C(1) << RV_GPTR_ADDR_BITS) - 1));
}

/**
 * @brief Whether (@p rank, @p addr) can be compressed.
 * @param [in] rank a process
 * @param [in] addr an address of that process
 * @return true when 0 <= @p rank <= RV_GPTR_MAX_RANK and @p addr is below
 *         2^RV_GPTR_ADDR_BITS
 * @note Any thread.
 */
static inline bool rv_gptr_fits(rv_rank_t rank, const void *addr)
{
    return rank >= 0 && (uint32_t)rank <= RV_GPTR_MAX_RANK &&
           (uint64_t)(uintptr_t)addr >> RV_GPTR_ADDR_BITS == 0;
}

/**
 * @brief The process a global pointer points into.
 * @param [in] g the pointer
 * @return its rank (0 for RV_GPTR_NULL)
 * @note Any thread.
 */
static inline rv_rank_t rv_gptr_rank(rv_gptr_t g)
{
    return (rv_rank_t)(g >> RV_GPTR_ADDR_BITS);
}

/**
 * @brief The address a global pointer holds.
 * @param [in] g the pointer
 * @return the address, meaningful in process rv_gptr_rank(@p g) only
 *         (NULL for RV_GPTR_NULL)
 * @note Any thread.
 */
static inline void *rv_gptr_addr(rv_gptr_t g)
{
    return (void *)(uintptr_t)(g & ((UINT64_C(1) << RV_GPTR_ADDR_BITS) - 1));
}

/* ---------------------------------------------------------------------- */
/* Atomic objects: a registered 64-bit word holding a global pointer        */

/**
 * @brief Reads the global pointer held at @p obj (an atomic read: a
 * fetch-add of 0). Waits, progressing.
 * @param [in]  w   the calling worker
 * @param [in]  obj the word, 8-byte aligned, in registered memory
 * @param [out] val the pointer it holds
 * @return as rv_atomic_fadd
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_gptr_read(rv_worker_t *w, rv_rptr_t obj,
                                       rv_gptr_t *val)
{
    return rv_atomic_fadd(w, obj, 0, val, NULL);
}

/**
 * @brief Stores @p val at @p obj if it holds @p expect. Waits,
 * progressing.
 * @param [in]  w      the calling worker
 * @param [in]  obj    the word, 8-byte aligned, in registered memory
 * @param [in]  expect the pointer expected
 * @param [in]  val    the pointer to store
 * @param [out] ok     whether it swapped (false on an error too)
 * @return as rv_atomic_cswap
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_gptr_cswap(rv_worker_t *w, rv_rptr_t obj,
                                        rv_gptr_t expect, rv_gptr_t val,
                                        bool *ok)
{
    uint64_t old = ~expect;
    rv_status_t st = rv_atomic_cswap(w, obj, expect, val, &old, NULL);
    *ok = st == RV_OK && old == expect;
    return st;
}

/**
 * @brief Replaces the pointer at @p obj by @p val (rv_atomic_swap).
 * @param [in]  w   the calling worker
 * @param [in]  obj the word, 8-byte aligned, in registered memory
 * @param [in]  val the pointer to store
 * @param [out] old the pointer replaced (may be NULL)
 * @return as rv_atomic_swap
 * @note From @p w's own thread; it waits, progressing.
 */
static inline rv_status_t rv_gptr_exchange(rv_worker_t *w, rv_rptr_t obj,
                                           rv_gptr_t val, rv_gptr_t *old)
{
    return rv_atomic_swap(w, obj, val, old);
}

/**
 * @brief Stores @p val at @p obj (an atomic write: rv_atomic_swap).
 * @param [in] w   the calling worker
 * @param [in] obj the word, 8-byte aligned, in registered memory
 * @param [in] val the pointer to store
 * @return as rv_atomic_swap
 * @note From @p w's own thread; it waits, progressing.
 */
static inline rv_status_t rv_gptr_write(rv_worker_t *w, rv_rptr_t obj,
                                        rv_gptr_t val)
{
    return rv_atomic_swap(w, obj, val, NULL);
}

/* ---------------------------------------------------------------------- */
/* ABA-counted atomic objects (16 bytes, 16-byte aligned)                   */

/** @brief A pointer and the count of its successful updates; 16 bytes,
 * 16-byte aligned, updated as one.
 * @note Shared: any thread of the owning process updates it with the
 *       *_local functions, any worker of the job with the others. */
typedef struct rv_gptr_aba {
    _Alignas(16) rv_gptr_t ptr; /**< the global pointer */
    uint64_t count;             /**< successful updates so far */
} rv_gptr_aba_t;

/**
 * @brief Atomic 16-byte read of a local ABA object (a compare-swap that
 * writes back what it found, so the memory must be writable).
 * @param [in] obj the object, in memory of the calling process
 * @return what it holds
 * @note Any thread.
 */
RV_EXPORT rv_gptr_aba_t rv_gptr_aba_load(rv_gptr_aba_t *obj);

/**
 * @brief If the local @p obj holds exactly @p expect (pointer and count),
 * replaces it by (@p val, expect.count + 1), in one double-width CAS.
 * @param [in,out] obj    the object, in memory of the calling process
 * @param [in]     expect the value expected, pointer and count
 * @param [in]     val    the pointer to store
 * @param [out]    seen   what @p obj held (equal to @p expect on success);
 *                        may be NULL
 * @return true on success; else false with @p *seen (if not NULL) set to
 *         what @p obj held.
 * @note Any thread.
 */
RV_EXPORT bool rv_gptr_aba_cswap_local(rv_gptr_aba_t *obj, rv_gptr_aba_t expect,
                                       rv_gptr_t val, rv_gptr_aba_t *seen);

/**
 * @brief Stores @p val at the local @p obj (bumping its count), with a
 * compare-swap loop.
 * @param [in,out] obj the object, in memory of the calling process
 * @param [in]     val the pointer to store
 * @return what it held before
 * @note Any thread.
 */
RV_EXPORT rv_gptr_aba_t rv_gptr_aba_exchange_local(rv_gptr_aba_t *obj,
                                                   rv_gptr_t val);

/**
 * @brief rv_gptr_aba_cswap_local on an ABA object anywhere: memory of the
 * caller's process directly, else as a call run by a worker of the owning
 * process (waits, progressing). *@p ok tells whether it swapped; *@p seen
 * (if not NULL) gets the value found.
 * @param [in]  w      the calling worker
 * @param [in]  obj    the object, 16-byte aligned: in memory of the
 *                     caller's process, or in registered memory
 *                     (rv_mem_alloc) of another process, whose owner
 *                     applies the operation and refuses an object outside
 *                     its registered memory
 * @param [in]  expect the value expected, pointer and count
 * @param [in]  val    the pointer to store
 * @param [out] ok     whether it swapped (false on an error too)
 * @param [out] seen   what @p obj held (may be NULL); set only on RV_OK
 * @return RV_OK; RV_ERR_INVALID for an object that is not 16-byte
 *         aligned, or, for another process's object, on a job without the
 *         layer or when the owner refused the call (an object outside its
 *         registered memory: logged there, counted as malformed in its
 *         job.stats);
 *         rv_call_return's errors
 * @note From @p w's own thread; not from an RV_HANDLER_INLINE handler.
 */
RV_EXPORT rv_status_t rv_gptr_aba_cswap(rv_worker_t *w, rv_rptr_t obj,
                                        rv_gptr_aba_t expect, rv_gptr_t val,
                                        bool *ok, rv_gptr_aba_t *seen);

/**
 * @brief Atomic read of an ABA object anywhere (as rv_gptr_aba_cswap).
 * @param [in]  w   the calling worker
 * @param [in]  obj the object, 16-byte aligned, as rv_gptr_aba_cswap's
 * @param [out] val what it holds; set only on RV_OK
 * @return as rv_gptr_aba_cswap
 * @note From @p w's own thread; not from an RV_HANDLER_INLINE handler.
 */
RV_EXPORT rv_status_t rv_gptr_aba_read(rv_worker_t *w, rv_rptr_t obj,
                                       rv_gptr_aba_t *val);

/**
 * @brief Exchange on an ABA object anywhere (as rv_gptr_aba_cswap): stores
 * @p val, bumping the count.
 * @param [in]  w   the calling worker
 * @param [in]  obj the object, 16-byte aligned, as rv_gptr_aba_cswap's
 * @param [in]  val the pointer to store
 * @param [out] old what it held before (may be NULL); set only on RV_OK
 * @return as rv_gptr_aba_cswap
 * @note From @p w's own thread; not from an RV_HANDLER_INLINE handler.
 */
RV_EXPORT rv_status_t rv_gptr_aba_exchange(rv_worker_t *w, rv_rptr_t obj,
                                           rv_gptr_t val, rv_gptr_aba_t *old);

#ifdef __cplusplus
}
#endif
#endif
