/*
 * Attentiveness: a worker thread that stops calling into rivet for a while
 * must not hold back the messages of the other worker threads of its
 * process. Designs with an endpoint per thread fail so (a thread's
 * traffic moves only while that thread calls in: the attentiveness
 * problem raised against MPI endpoints), and so can a transport worker
 * shared by the threads (a thread that holds its lock, or owns its
 * completions, while it is away). rivet's progress modes (Endo and Taura,
 * parallelized software offloading: direct injection, static and dynamic
 * offloading) must all pass.
 *
 * Worker 0 of rank 0 makes round trips to rank 1, then stops calling into
 * rivet for STALL_S seconds (it sleeps). Meanwhile the other workers of
 * rank 0 make round trips to rank 1 without a pause; none of their round
 * trips made during the stall may take a large part of it
 * (SLOW_S), and each must complete some. Rank 1's workers serve inside a
 * barrier. Run over every progress mode: inline (a transport worker per
 * worker thread), direct (one shared under a lock), thread and dynamic (an
 * executor per process).
 *
 *   rivetrun -n 2 -c JOB.yaml test_attentive NAME   (2 processes, 2+ threads)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "job_test.h"

#define STALL_S 3.0
#define SLOW_S 1.0 /* a round trip this long saw the stall */
#define MAX_THREADS 64

static rv_context_t *ctx;
static rv_handler_id_t h_ping, h_pong;
static _Atomic double stall_from, stall_to; /* worker 0's sleep, absolute */

/* Per worker of rank 0: pongs received (only its own thread touches it). */
static long pongs[MAX_THREADS];

static rv_status_t on_ping(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    return rv_send(w, msg->src, h_pong, msg->data, msg->len, NULL);
}

static rv_status_t on_pong(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)msg;
    (void)arg;
    pongs[rv_worker_local(w)]++;
    return RV_OK;
}

/* One round trip to worker @p dest; returns its seconds, or -1. */
static double round_trip(rv_worker_t *w, rv_tid_t dest)
{
    int me = rv_worker_local(w);
    long want = pongs[me] + 1;
    uint64_t v = (uint64_t)me;
    double t0 = now_s();
    if (rv_send(w, dest, h_ping, &v, sizeof(v), NULL) != RV_OK)
        return -1;
    while (pongs[me] < want) {
        rv_progress(w);
        if (now_s() - t0 > WAIT_LIMIT_S)
            return -1;
    }
    return now_s() - t0;
}

static int body(rv_worker_t *w, void *arg)
{
    int me = rv_worker_local(w);
    rv_tid_t peer = rv_tid_make(ctx, 1, me);
    (void)arg;

    if (rv_rank(ctx) == 1)
        return rv_barrier(w) == RV_OK ? 0 : 1; /* serves while it waits */
    for (int i = 0; i < 100; i++)
        EXPECT(round_trip(w, peer) >= 0, "worker %d: a round trip failed", me);
    if (me == 0) {
        stall_from = now_s();
        usleep((useconds_t)(STALL_S * 1e6)); /* not a call into rivet */
        stall_to = now_s();
    } else {
        /* Round trips until worker 0 is back; those made while it slept
         * are counted and timed. */
        long during = 0;
        double worst = 0;
        while (stall_to == 0) {
            double t0 = now_s(), rtt = round_trip(w, peer);
            EXPECT(rtt >= 0, "worker %d: a round trip failed", me);
            if (rtt < 0)
                break;
            if (stall_from != 0 && t0 >= stall_from && stall_to == 0) {
                during++;
                worst = rtt > worst ? rtt : worst;
            }
        }
        EXPECT(during >= 10,
               "worker %d made %ld round trips while worker 0 was away "
               "for %.0f s",
               me, during, STALL_S);
        EXPECT(worst < SLOW_S,
               "worker %d: a round trip took %.3f s while worker 0 was away: "
               "it waited for worker 0",
               me, worst);
        printf("worker %d: %ld round trips while worker 0 was away, the "
               "slowest %.1f us\n",
               me, during, worst * 1e6);
    }
    return rv_barrier(w) == RV_OK ? 0 : 1;
}

static void test_attentive(void **state)
{
    (void)state;
    atomic_store(&failures, 0);
    stall_from = stall_to = 0;
    assert_int_equal(rv_job_run(ctx, body, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

int main(int argc, char **argv)
{
    const char *name = "attentive";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        name = argv[1];
    if (rv_size(ctx) != 2 || rv_threads(ctx) < 2 ||
        rv_threads(ctx) > MAX_THREADS) {
        fprintf(stderr, "test_attentive: 2 processes of 2 to %d threads\n",
                MAX_THREADS);
        rv_finalize(ctx);
        return 2;
    }
    if (rv_handler_register(ctx, "attentive.ping", on_ping, NULL, 0,
                            &h_ping) != RV_OK ||
        rv_handler_register(ctx, "attentive.pong", on_pong, NULL, 0,
                            &h_pong) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_attentive)};
    int failed = _cmocka_run_group_tests(name, tests, 1, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, 1);
}
