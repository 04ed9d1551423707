/*
 * The command queue of one executor (progress.mode thread and dynamic):
 * many requesters enqueue, one executor dequeues, and in dynamic mode the
 * executor sleeps when the queue is empty and the requester that enqueues
 * next wakes it.
 *
 * The protocol is the one of Endo and Taura, "Parallelized Software
 * Offloading of Low-Level Communication with User-Level Threads"
 * (Implementation: Requesters, Executors): the queue's tail counter
 * carries, in its least significant bit, whether the executor is awake.
 * A requester reserves a slot by a compare-and-swap of the tail from
 * [count, any] to [count + 1, 1]; if the bit it replaced was 0 the
 * executor was asleep (or about to sleep) and the requester wakes it. The
 * executor, finding the queue empty, clears the bit with a compare-and-
 * swap and sleeps only if that succeeded, on a futex whose expected value
 * is the tail it wrote: a requester that enqueued in between changed the
 * tail, so the futex does not sleep, and its wake-up is never lost. The
 * paper wakes the executor by forking a user-level thread; rivet's
 * executors are kernel threads, so it is a futex.
 *
 * core/rv_offload.pml models this file in Promela; its steps are named
 * in the comments below ("model: ...") and `make check` runs SPIN on it.
 */
#ifndef RIVET_RV_OFFLOAD_QUEUE_H
#define RIVET_RV_OFFLOAD_QUEUE_H

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Commands one queue holds; a power of two. */
#define OFFQ_SIZE 1024u
/* Counts are 31 bits: the 32-bit tail word holds count << 1 | awake. */
#define OFFQ_MASK 0x7fffffffu

/* The part of a command the queue itself reads: its sequence, written
 * last by the requester (count + 1) and read first by the executor. */
typedef struct offq_slot {
    _Atomic uint32_t seq;
} offq_slot_t;

typedef struct offq {
    /* [count, awake]: requesters CAS it; the executor clears the bit. A
     * 32-bit word because it is also the futex the executor sleeps on. */
    _Alignas(64) _Atomic uint32_t tail;
    /* Commands consumed, published by the executor for the requesters'
     * full-queue test. */
    _Alignas(64) _Atomic uint32_t head;
    uint32_t next; /* the executor's own copy of head */
} offq_t;

static inline void offq_init(offq_t *q)
{
    /* Awake at first: no requester needs to wake an executor that has not
     * slept yet. */
    atomic_init(&q->tail, 1u);
    atomic_init(&q->head, 0u);
    q->next = 0;
}

static inline void offq_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * A wake word, [count, awake], on its own: what a completer thread sleeps
 * on (progress.completers: threads). Its count is the operations its
 * executor posted; the executor signals after posting, the completer
 * sleeps only when nothing is outstanding, by the same compare-and-swap
 * and futex as the command queue's executor below.
 */

/* Executor: one more post; wakes the completer if it slept. */
static inline void offw_signal(_Atomic uint32_t *w)
{
    uint32_t t = atomic_load_explicit(w, memory_order_relaxed);
    uint32_t next;
    do {
        /* model: executor "signal": [count, b] -> [count + 1, 1] */
        next = ((((t >> 1) + 1) & OFFQ_MASK) << 1) | 1u;
    } while (!atomic_compare_exchange_weak_explicit(
        w, &t, next, memory_order_acq_rel, memory_order_relaxed));
    if (!(t & 1u))
        offq_futex_wake(w);
}

/* Anyone: sets the awake bit of a sleeper, and wakes it, without a
 * count. */
static inline void offw_nudge(_Atomic uint32_t *w)
{
    uint32_t t = atomic_load_explicit(w, memory_order_relaxed);
    if (!(t & 1u) &&
        atomic_compare_exchange_strong_explicit(
            w, &t, t | 1u, memory_order_acq_rel, memory_order_relaxed))
        offq_futex_wake(w);
}

/* What offq_sleep and offw_sleep did. */
enum { OFFQ_AWAKE, OFFQ_WOKEN, OFFQ_TIMED_OUT };

/*
 * The sleeper, which read @p t from @p w before it found nothing to do:
 * clears the awake bit unless @p w moved since, then sleeps up to
 * @p timeout_us while @p w is still [count, 0].
 */
static inline int offw_sleep(_Atomic uint32_t *w, uint32_t t, long timeout_us)
{
    if (t & 1u) {
        /* model: "clear": [count, 1] -> [count, 0] */
        if (!atomic_compare_exchange_strong_explicit(
                w, &t, t & ~1u, memory_order_acq_rel, memory_order_relaxed))
            return OFFQ_AWAKE;
        t &= ~1u;
    }
    /* model: "sleep": only while the word is still [count, 0] */
    struct timespec ts = {.tv_sec = timeout_us / 1000000,
                          .tv_nsec = (timeout_us % 1000000) * 1000};
    long rc =
        syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, t, &ts, NULL, 0);
    return rc != 0 && errno == ETIMEDOUT ? OFFQ_TIMED_OUT : OFFQ_WOKEN;
}

/*
 * Requester: reserves the next slot. Returns false when the queue is full
 * (the requester waits for the executor, never for another requester).
 * On success *count_p is the slot's count and *old_p the tail replaced,
 * whose bit offq_publish reads.
 */
static inline bool offq_reserve(offq_t *q, uint32_t *count_p, uint32_t *old_p)
{
    uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    for (;;) {
        uint32_t count = t >> 1;
        uint32_t head = atomic_load_explicit(&q->head, memory_order_acquire);
        if (((count - head) & OFFQ_MASK) >= OFFQ_SIZE)
            return false;
        /* model: requester "reserve": [count, b] -> [count + 1, 1] */
        uint32_t next = (((count + 1) & OFFQ_MASK) << 1) | 1u;
        if (atomic_compare_exchange_weak_explicit(&q->tail, &t, next,
                                                  memory_order_acq_rel,
                                                  memory_order_relaxed)) {
            *count_p = count;
            *old_p = t;
            return true;
        }
    }
}

/* Requester: the command in @p slot (of @p count) is written; hands it to
 * the executor, waking it if the tail replaced said it slept. */
static inline void offq_publish(offq_t *q, offq_slot_t *slot, uint32_t count,
                                uint32_t old)
{
    /* model: requester "fill" */
    atomic_store_explicit(&slot->seq, (count + 1) & OFFQ_MASK,
                          memory_order_release);
    /* model: requester "wake" (only when the bit replaced was 0) */
    if (!(old & 1u))
        offq_futex_wake(&q->tail);
}

/*
 * Requester, finding nothing to run: wakes a sleeping executor without a
 * command ([count, 0] -> [count, 1]), because a worker thread polling for
 * messages is waiting for the network, which only its executor polls.
 * The executor then polls for progress.spin_us again before it sleeps.
 * It is one more waker in the protocol, never one less, so the model's
 * properties hold with it.
 */
static inline void offq_nudge(offq_t *q)
{
    offw_nudge(&q->tail);
}

/* Executor: whether @p slot, the slot of the next count, is filled. */
static inline bool offq_ready(const offq_t *q, offq_slot_t *slot)
{
    /* model: executor "take" waits for "fill" */
    return atomic_load_explicit(&slot->seq, memory_order_acquire) ==
           ((q->next + 1) & OFFQ_MASK);
}

/* Executor: the command at q->next is posted; its slot may be reused. */
static inline void offq_pop(offq_t *q)
{
    q->next = (q->next + 1) & OFFQ_MASK;
    atomic_store_explicit(&q->head, q->next, memory_order_release);
}

/*
 * Executor (dynamic mode), finding nothing to do: sleeps up to
 * @p timeout_us unless a command is reserved. Returns OFFQ_AWAKE if it
 * did not sleep, OFFQ_WOKEN if a requester woke it (or changed the tail
 * before it could sleep), OFFQ_TIMED_OUT if nobody did.
 */
static inline int offq_sleep(offq_t *q, long timeout_us)
{
    uint32_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
    /* model: executor "check": a reserved command keeps it awake, even
     * one whose requester has not filled it yet */
    if ((t >> 1) != q->next)
        return OFFQ_AWAKE;
    /* model: executor "clear", then "sleep" */
    return offw_sleep(&q->tail, t, timeout_us);
}

#endif
