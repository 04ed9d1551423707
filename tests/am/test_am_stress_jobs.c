/*
 * The worker functions of the invocation layer's stress test, one a job
 * (am_stress.h):
 *
 *   all_to_all      every worker calls every worker (itself included) with
 *                   random sizes and call kinds; retried on RV_ERR_AGAIN
 *   slow_receiver   worker 0 sleeps while every other worker streams calls
 *                   to it: the rings fill (and grow afterwards); only
 *                   on_full: fail refuses calls
 *   ovfl_limit      (ovfl + fail) streams until refused, then retries: the
 *                   accepted calls arrive exactly once and in order
 *   job_end_flush   calls made just before the worker function returns,
 *                   without rv_flush, arrive before rv_job_run returns
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "am_stress.h"

static void capture_stats(rv_worker_t *w)
{
    wstate_t *s = state_of(w);
    rv_am_stats(w, &s->rep.am);
    rv_worker_stats(w, &s->rep.core);
}

static void sleep_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* ---------------------------------------------------------------------- */
/* 1. All to all                                                           */

bool rma_waits_for_target(void)
{
    return rv_context_caps(ctx)->rma_target_progress;
}

uint64_t calls_per_pair(void)
{
    return rma_waits_for_target() ? 150 : 400;
}

/* One call to every worker, round robin from worker @p first on; false
 * when one failed. */
static bool send_round(rv_worker_t *w, sender_t *snd, uint32_t first)
{
    uint32_t n = rv_nworkers(ctx);
    for (uint32_t k = 0; k < n; k++)
        if (send_next(w, snd, (first + k) % n, true) != RV_OK)
            return false;
    return true;
}

/* Flushes, waits at a barrier and records the counters. */
static void finish(rv_worker_t *w)
{
    set_phase(w, PH_FLUSH);
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "rv_flush");
    set_phase(w, PH_BARRIER);
    rv_barrier(w);
    capture_stats(w);
    set_phase(w, PH_RETURNED);
}

int body_all_to_all(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint64_t K = calls_per_pair(), seq = 0;
    wstate_t *s = state_of(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    /* A burst: the first half of the calls, without synchronizers (on
     * the write path nothing progresses until a ring is full), to one
     * destination after the other, all workers to the same one at a
     * time: while worker k calls itself, it runs nothing and the others
     * fill their rings to it. */
    set_phase(w, PH_BURST);
    for (uint32_t dest = 0; dest < n; dest++)
        for (seq = 0; seq < K / 2; seq++)
            if (send_call(w, &snd, dest, true, true) != RV_OK)
                goto out;
    /* Then the rest, round robin, some on the shared synchronizer. */
    set_phase(w, PH_STREAM);
    for (seq = K / 2; seq < K; seq++)
        if (!send_round(w, &snd, me + (uint32_t)seq))
            goto out;
out:
    sender_fini(w, &snd);
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "rv_flush");
    set_phase(w, PH_WAIT);
    for (uint32_t src = 0; src < n; src++)
        WAIT_UNTIL(w, s->rep.got[src] >= K, "the calls of every worker");
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 2. A receiver that sleeps while every other worker streams to it        */

/* Calls per sender: 1.5 times more bytes than the largest ring plus the
 * most any mode keeps queued per destination (mean call: 2 KiB). */
uint64_t stream_calls(void)
{
    uint64_t room = (uint64_t)cfg->max_chunks * cfg->chunk_bytes +
                    cfg->ovfl_limit + 2 * cfg->flush_bytes;
    return room * 3 / 2 / 2048 + 100;
}

/* Before the receiver stops progressing: one call from every worker to
 * it, so that its rings exist (a ring being set up is waited for, not
 * full), and a barrier; then one more call each, which the receiver waits
 * for. Every sender is then past the barrier: its release comes from
 * worker 0, the receiver, and where one-sided operations wait for the
 * target it leaves only while that worker progresses. */
static void start_streams(rv_worker_t *w, sender_t *snd)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    set_phase(w, PH_WARM_UP);
    if (me != RECEIVER) {
        send_next(w, snd, RECEIVER, true);
        EXPECT(rv_flush(w, RECEIVER) == RV_OK, "rv_flush");
    } else {
        for (uint32_t src = 0; src < n; src++)
            if (src != RECEIVER)
                WAIT_UNTIL(w, s->rep.got[src] >= 1, "warm-up");
    }
    rv_barrier(w);
    if (me != RECEIVER) {
        send_next(w, snd, RECEIVER, true);
        EXPECT(rv_flush(w, RECEIVER) == RV_OK, "rv_flush");
    } else {
        for (uint32_t src = 0; src < n; src++)
            if (src != RECEIVER)
                WAIT_UNTIL(w, s->rep.got[src] >= 2, "the streams to start");
    }
}

/* The last call of a sender: how many it made to the receiver before. */
static void send_end(rv_worker_t *w)
{
    wstate_t *s = state_of(w);
    uint64_t count = s->rep.sent[RECEIVER];
    rv_status_t st;
    double t0 = now_s();
    while ((st = rv_call(w, RECEIVER, H.end, &count, sizeof(count), NULL,
                         0)) == RV_ERR_AGAIN &&
           now_s() - t0 < WAIT_LIMIT_S) {
        s->rep.agains++;
        rv_progress(w);
    }
    EXPECT(st == RV_OK, "end marker: %s", rv_status_str(st));
}

/* The receiver: sleeps, then runs every call until each sender's end. */
static void sleep_then_drain(rv_worker_t *w, long ms)
{
    uint32_t n = rv_nworkers(ctx);
    set_phase(w, PH_SLEEP);
    sleep_ms(ms);
    set_phase(w, PH_WAIT);
    WAIT_UNTIL(w, state_of(w)->rep.ends == n - 1,
               "every sender's end marker");
}

#define STREAM_LIMIT_S 2.0

int body_slow_receiver(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    uint64_t K = stream_calls();
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    start_streams(w, &snd);
    if (me == RECEIVER) {
        sleep_then_drain(w, SLOW_MS);
    } else {
        /* K calls; to a ring (write path, another process), until the
         * worker met a full ring too (for STREAM_LIMIT_S at most): a fast
         * sender may have made its K calls before the receiver fell
         * asleep. */
        bool want_full = cfg->path == RV_AM_PATH_WRITE &&
                         remote(me, RECEIVER);
        bool met_full = false;
        rv_am_stats_t st0, st;
        rv_am_stats(w, &st0);
        double t0 = now_s();
        set_phase(w, PH_STREAM);
        for (uint64_t i = 1;
             i < K ||
             (want_full && !met_full && now_s() - t0 < STREAM_LIMIT_S);
             i++) {
            if (send_next(w, &snd, RECEIVER, true) != RV_OK)
                break;
            rv_am_stats(w, &st);
            met_full = st.ring_full > st0.ring_full;
        }
        send_end(w);
    }
    sender_fini(w, &snd);
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 3. ovfl_limit: streams until refused, retries once the receiver wakes   */

#define OVFL_SLEEP_MS 400

int body_ovfl_limit(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    start_streams(w, &snd);
    if (me == RECEIVER) {
        sleep_then_drain(w, OVFL_SLEEP_MS);
    } else {
        /* Until refused (for STREAM_LIMIT_S at most): the ring cannot
         * grow while its receiver sleeps, so that is its chunks plus
         * am.ovfl_limit, give or take a call. A sender of the receiver's
         * process (local queue) is never refused: it makes OVFL_MORE. */
        set_phase(w, PH_STREAM);
        uint64_t start = s->rep.bytes_sent, i = 0;
        bool refused = false;
        double t0 = now_s();
        while (remote(me, RECEIVER) ? now_s() - t0 < STREAM_LIMIT_S
                                    : i++ < OVFL_MORE) {
            rv_status_t st = send_next(w, &snd, RECEIVER, false);
            if (st == RV_ERR_AGAIN) {
                refused = true;
                break;
            }
            if (st != RV_OK)
                break;
        }
        EXPECT(refused || !remote(me, RECEIVER) ||
                   cfg->path != RV_AM_PATH_WRITE,
               "worker %u: no RV_ERR_AGAIN in %.1f s, after %llu bytes to "
               "a receiver that sleeps %d ms (ring of %lld x %llu B, "
               "am.ovfl_limit %llu B)", me, STREAM_LIMIT_S,
               (unsigned long long)(s->rep.bytes_sent - start),
               OVFL_SLEEP_MS, (long long)cfg->max_chunks,
               (unsigned long long)cfg->chunk_bytes,
               (unsigned long long)cfg->ovfl_limit);
        /* then more, retrying each refused call until the receiver
         * drains, and the marker that says how many were accepted */
        for (int k = 0; k < OVFL_MORE; k++)
            if (send_next(w, &snd, RECEIVER, true) != RV_OK)
                break;
        send_end(w);
    }
    sender_fini(w, &snd);
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 4. The job's end flushes what is batched                                */

int body_job_end(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    set_phase(w, PH_STREAM);
    for (uint64_t seq = 0; seq < END_CALLS; seq++)
        if (!send_round(w, &snd, me))
            goto out;
out:
    /* No synchronizer calls in this profile: nothing to wait for. */
    free(snd.scratch);
    free(snd.pool);
    capture_stats(w);
    set_phase(w, PH_RETURNED);
    return 0; /* no rv_flush, no barrier, no progress */
}
