/**
 * @file verbs_signal.h
 * @brief Selective signaling for RC queue pairs shared by threads (the
 * verbs transport's send side, Seriema, section 4.1), without libibverbs:
 * pure C11 atomics, so that it is tested on hosts without RDMA hardware.
 *
 * One rv_vsig_t per QP. Around every ibv_post_send a thread calls
 * rv_vsig_begin (which says whether to set IBV_SEND_SIGNALED, which wr_id
 * to use and which flush number to tag the WR's registered buffers with),
 * then rv_vsig_end with the post's outcome. Whoever polls the send CQ hands
 * every reaped wr_id to rv_vsig_completed. The transport supplies two
 * callbacks: post_marker (post a signaled zero-length RDMA write with a
 * given wr_id) and poll_cq (reap send completions into rv_vsig_completed).
 *
 * ## Design: per-thread runs
 *
 * Each thread (tid) cuts its own WRs on a QP into *runs* of S =
 * signal_interval consecutive WRs (fewer when a flush closes a run early).
 * Only the last WR of a run (its *closer*) is signaled; its wr_id names
 * (t, r). The run number r is the flush number: buffers are tagged with
 * (channel = (QP index, t), r) and recycled once completed_flush(t) >= r.
 *
 * Soundness: a thread posts its own WRs in program order, so each of them
 * entered the send queue before its run's closer. RC completes WRs in post
 * order, so the closer's completion proves every WR of runs <= r of
 * thread t complete, whatever other threads posted in between and however
 * long they were delayed. Seriema's assumption "signaled sequence s
 * completed => every s' < s completed", with s reserved by a shared
 * fetch_add, is false when a thread is delayed between its fetch_add and
 * its post (post order is not reservation order); runs never compare
 * sequence numbers of different threads. Closers may be reaped out of
 * order (two pollers), so completed_flush(t) advances by a CAS-max and is
 * monotone; a reaped closer of run r also covers every earlier run of t.
 *
 * Why not one shared flush number per QP (groups of S consecutive shared
 * reservations, each closed by an extra marker WR posted by whoever ends
 * the group's last post): a delayed thread then stalls its group and,
 * through the completed prefix, buffer recycling for every thread of the
 * QP; the per-group counters need a ring that wraps onto a stalled group
 * if the others post a ring's worth meanwhile (then someone must wait);
 * every WR costs two shared read-modify-writes and every S WRs an extra
 * marker WR. Runs cost one shared CAS per S WRs (the credit acquisition
 * below) and no extra WR in steady state. Other threads' delays never
 * hold back a thread's recycling. The price: a flush number means
 * something only together with its thread, hence the (QP, tid) channel.
 *
 * Markers: a run that cannot end with its own closer is closed by a marker
 * (post_marker with the run's wr_id), posted by the run's owner:
 *  - the closer's post failed (rv_vsig_end with post_ok false): the
 *    reservation is not lost, the marker takes its place;
 *  - the run's last WR was a caller-signaled one (want_signal): its wr_id
 *    is the caller's, so it cannot also carry the run's;
 *  - rv_vsig_flush: the thread goes idle, or its circular allocator said
 *    RV_ERR_AGAIN, with a partial run whose buffers must come back.
 * If the marker's post fails too, rv_vsig_end (or flush) returns that
 * error and the run stays open; the thread's next rv_vsig_begin or
 * rv_vsig_flush posts the marker first. A failed non-closer post needs
 * nothing: the WR never entered the queue.
 *
 * Caller-signaled WRs (want_signal): such a WR is signaled with the
 * caller's wr_id (bit 63 clear; rv_vsig_completed returns false for it so
 * that the transport delivers it to its owner). For the accounting it is
 * an ordinary member of its run; it never counts as a closer.
 *
 * ## Overflow control: credits
 *
 * The send queue holds sq_depth WRs. A thread takes S + 1 credits when it
 * opens a run (S WRs and room for one marker; one CAS on a shared counter)
 * and the credits return when the run's closing completion is reaped
 * (rv_vsig_completed: exactly one closer or marker completion per run).
 * The provider frees send queue slots no later than that (a polled CQE
 * frees every WR posted before it), so the queue never holds more than
 * sq_depth WRs. When fewer than S + 1 credits are free, the thread polls
 * the CQ itself (poll_cq) instead of waiting for anyone.
 *
 * Depth needed, so that a thread short of credits never depends on another
 * thread: let T = max_threads (every thread that posts or polls counts)
 * and P = poll_batch (the most CQEs one poll_cq takes from the CQ before
 * it hands them to rv_vsig_completed). Held credits belong to runs that
 * are (a) open: at most one per thread, and none of the thread that is
 * short (it opens a run only after closing its previous one), so T - 1
 * runs; (b) closed, with their closing completion taken from the CQ by a
 * delayed poller and not reported yet: at most P per other thread,
 * (T - 1) P runs; or (c) closed, with the closing WR in the send queue or
 * its CQE in the CQ. Only (c) can be freed by the short thread alone (it
 * polls until the hardware completes it). With
 *
 *     sq_depth >= (T - 1) (S + 1) (P + 1) + S + 1      (rv_vsig_min_sq_depth)
 *
 * a short thread (at least sq_depth - S credits held) always finds at
 * least one run of kind (c): delayed threads never make it spin.
 * rv_vsig_create checks this and says which depth is needed. Acquisition
 * is a CAS loop that retries only when another thread took or returned
 * credits in between (lock-free; every other step of a post is a bounded
 * number of own instructions). The send CQ must hold every signaled WR
 * outstanding: at least sq_depth per QP it serves.
 *
 * Threads: every function may be called from any thread, but a tid belongs
 * to one thread at a time, which alternates rv_vsig_begin and rv_vsig_end
 * (one WR at a time; no chains of WRs across a begin). rv_vsig_completed
 * may run concurrently anywhere.
 */
#ifndef RIVET_VERBS_SIGNAL_H
#define RIVET_VERBS_SIGNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "rv_transport.h"

/** @brief Bit 63 of a wr_id: set on the wr_ids this module hands out,
 * clear on the caller's own (want_signal). */
#define RV_VSIG_WR_ID_TAG (UINT64_C(1) << 63)

/** @brief The largest max_threads (tids fit 16 bits of wr_ids and of
 * channels). */
#define RV_VSIG_MAX_THREADS 65536u

/** @brief The largest QP index (channels hold it in 16 bits). */
#define RV_VSIG_MAX_INDEX 65535u

typedef struct rv_vsig rv_vsig_t;

/**
 * @brief Posts a marker: a signaled zero-length RDMA write (or any
 * signaled WR that touches no buffer) with @p wr_id, on the QP. Called by
 * thread @p tid from rv_vsig_begin, rv_vsig_end or rv_vsig_flush.
 * @return RV_OK when posted; an error otherwise (it is retried later)
 */
typedef rv_status_t (*rv_vsig_post_marker_fn)(void *ctx, uint32_t tid,
                                              uint64_t wr_id);

/**
 * @brief Polls the send CQ once (at most poll_batch completions) and calls
 * rv_vsig_completed for every wr_id reaped, whatever its status (a
 * flushed-in-error WR is done with its buffers too); the others go to
 * their owners. Called by thread @p tid when it is short of credits.
 * @return the number of completions reaped (>= 0), or a negative
 *         rv_status_t, which rv_vsig_begin returns
 */
typedef int (*rv_vsig_poll_cq_fn)(void *ctx, uint32_t tid);

/** @brief Parameters of rv_vsig_create. */
typedef struct rv_vsig_params {
    uint32_t sq_depth;        /**< WRs the send queue holds (max_send_wr) */
    uint32_t signal_interval; /**< S: one signaled WR per S of a thread */
    uint32_t max_threads;     /**< T: tids are 0 .. T-1 */
    uint32_t poll_batch;      /**< P: CQEs one poll_cq may hold before
                                   reporting them; 0 means 1 */
    uint32_t index;           /**< the QP's index, for channels */
    rv_vsig_post_marker_fn post_marker;
    rv_vsig_poll_cq_fn poll_cq;
    void *ctx; /**< passed to the callbacks */
} rv_vsig_params_t;

/** @brief What rv_vsig_begin decided for one WR. */
typedef struct rv_vsig_ticket {
    bool signaled;    /**< set IBV_SEND_SIGNALED */
    uint64_t wr_id;   /**< the WR's wr_id */
    uint32_t channel; /**< tag buffers with (channel, flush) */
    uint64_t flush;   /**< the flush (run) number, >= 1 */
    uint32_t steps;   /**< loop iterations rv_vsig_begin took (polls and
                           CAS retries); for tests and statistics */
    /* private */
    uint32_t tid;
    bool closer;
} rv_vsig_ticket_t;

/** @brief Statistics, summed over threads. */
typedef struct rv_vsig_stats {
    uint64_t posts;          /**< WRs posted (rv_vsig_end with post_ok) */
    uint64_t failed_posts;   /**< rv_vsig_end with !post_ok */
    uint64_t signaled;       /**< posted signaled WRs, markers excluded */
    uint64_t user_signaled;  /**< of which want_signal */
    uint64_t markers;        /**< markers posted */
    uint64_t failed_markers; /**< post_marker errors */
    uint64_t runs;           /**< runs opened (credit acquisitions) */
    uint64_t runs_completed; /**< closing completions reported */
    uint64_t full_polls;     /**< poll_cq calls for want of credits */
    uint64_t max_steps;      /**< the most steps one rv_vsig_begin took */
} rv_vsig_stats_t;

/** @brief The smallest sq_depth rv_vsig_create accepts:
 * (T - 1)(S + 1)(P + 1) + S + 1, with P = 0 read as 1. */
uint64_t rv_vsig_min_sq_depth(uint32_t signal_interval, uint32_t max_threads,
                              uint32_t poll_batch);

/**
 * @brief Creates the signaling state of one QP.
 * @param [in]  params  copied
 * @param [out] q_p     set only on success
 * @return RV_OK; RV_ERR_INVALID (logged: which parameter, and for the
 *         depth, the depth needed); RV_ERR_NO_MEMORY
 */
rv_status_t rv_vsig_create(const rv_vsig_params_t *params, rv_vsig_t **q_p);

/** @brief Frees @p q (NULL is fine). Warns when WRs are still outstanding:
 * destroy the QP first. */
void rv_vsig_destroy(rv_vsig_t *q);

/**
 * @brief Before posting one WR from thread @p tid. Posts the thread's
 * pending marker first, if any; opens a run when needed, polling the CQ
 * while fewer than S + 1 credits are free.
 * @param [in]  want_signal  the caller needs this WR's own completion:
 *                           it is signaled with @p user_wr_id
 * @param [in]  user_wr_id   used only with want_signal; bit 63 clear
 * @param [out] t            the decision; pass it to rv_vsig_end
 * @return RV_OK (post now, then call rv_vsig_end); RV_ERR_INVALID; the
 *         marker's or poll_cq's error (nothing begun: do not post)
 */
rv_status_t rv_vsig_begin(rv_vsig_t *q, uint32_t tid, bool want_signal,
                          uint64_t user_wr_id, rv_vsig_ticket_t *t);

/**
 * @brief After the post of @p t's WR returned. @p post_ok false means the
 * WR did not enter the send queue; its reservation still counts, and if it
 * was its run's closer a marker replaces it.
 * @return RV_OK; a marker's post error (the run stays open and its marker
 *         is posted by this thread's next begin or flush)
 */
rv_status_t rv_vsig_end(rv_vsig_t *q, rv_vsig_ticket_t *t, bool post_ok);

/**
 * @brief Reports a reaped send completion (any status).
 * @return true when @p wr_id is this module's (a closer, a marker, or an
 *         unsignaled WR flushed in error): done with it; false when it is
 *         the caller's own (want_signal), to be delivered to its owner
 * @note Any thread, concurrently with everything else. Report every
 *       completion exactly once: a closing completion returns credits.
 */
bool rv_vsig_completed(rv_vsig_t *q, uint64_t wr_id);

/**
 * @brief Closes thread @p tid's open run with a marker, so that its
 * buffers come back without further posts (going idle; the circular
 * allocator said RV_ERR_AGAIN). Not between begin and end.
 * @return RV_OK (also when nothing is open); the marker's error
 */
rv_status_t rv_vsig_flush(rv_vsig_t *q, uint32_t tid);

/** @brief The highest flush number of thread @p tid known complete
 * (every WR tagged with it or a lower one completed); 0 at first.
 * Monotone. Any thread. */
uint64_t rv_vsig_completed_flush(rv_vsig_t *q, uint32_t tid);

/** @brief Credits held: WRs (and marker room) of open runs and of runs
 * whose closing completion was not reported yet. 0 when all is done. */
uint64_t rv_vsig_outstanding(rv_vsig_t *q);

/** @brief Statistics (approximate while threads post). */
void rv_vsig_stats(rv_vsig_t *q, rv_vsig_stats_t *stats);

/** @brief The channel of buffers posted by thread @p tid on the QP with
 * index @p qp_index: what rv_vsig_ticket_t.channel holds. */
static inline uint32_t rv_vsig_channel(uint32_t qp_index, uint32_t tid)
{
    return (qp_index << 16) | (tid & 0xffffu);
}

/** @brief The argument of rv_vsig_mem_completed: the QPs by index
 * (qps[i] created with index i). */
typedef struct rv_vsig_mem_arg {
    rv_vsig_t *const *qps;
    uint32_t nqps;
} rv_vsig_mem_arg_t;

/**
 * @brief A completion test with the signature of core's
 * rv_mem_completed_fn: whether every WR of channel @p channel
 * (rv_vsig_channel) with flush number @p flush or lower completed. Pass
 * it to rv_mem_circular_create with an rv_vsig_mem_arg_t as its argument.
 * Any allocator may hold buffers of any thread's channels.
 */
bool rv_vsig_mem_completed(void *arg, uint32_t channel, uint64_t flush);

#endif
