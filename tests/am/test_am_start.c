/*
 * A job whose workers start at different times: the job function runs
 * only once every worker has started every layer, so no message of a
 * layer reaches a worker where that layer has not started, and no call
 * made at the job's start is lost.
 *
 * First, the launcher's barrier itself, which the job's stages rest on.
 * Then a layer of the test (the "late starter") makes worker 0 progress for a
 * while in its start, as the store's calibration does, and only then
 * makes its state there. A second layer above it (the "asker") starts on
 * every other worker by asking worker 0, by a message, whether the late
 * starter has started there (the handler sees its state or not), as the
 * store's start calibrates with a call to worker 0. Then every worker
 * calls every other worker at once, as its job function begins. Without
 * a barrier after each layer's start (rv__layers_start), the asker's
 * messages reached worker 0 in the middle of its late start. Without a
 * PMIx barrier that waits (rv_bootstrap_pmix.c), srun's tasks ran their
 * job functions while others still started their layers, and am dropped
 * the first calls that reached a worker whose am had not started.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"
#include "rv_layer.h"

#define MAX_WORKERS 64
#define CALLS 8
#define LATE_MS 300

static rv_context_t *ctx;
static rv_handler_id_t data_id, ask_id;
static int late_slot, asker_slot;
static atomic_uint_least64_t got[MAX_WORKERS];
static atomic_uint asked, early; /* at worker 0's process */
static int started_mark;         /* the late starter's state: its address */

static rv_status_t on_data(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    EXPECT(call->args_len == sizeof(uint32_t), "args of %zu bytes",
           call->args_len);
    atomic_fetch_add(&got[rv_worker_local(w)], 1);
    return RV_OK;
}

/* Whether the late starter has started on the worker asked. */
static rv_status_t on_ask(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)msg;
    (void)arg;
    atomic_fetch_add(&asked, 1);
    if (rv_worker_layer(w, late_slot) == NULL)
        atomic_fetch_add(&early, 1);
    return RV_OK;
}

/* The late starter: worker 0 progresses LATE_MS before its state is
 * made, so it takes what arrives meanwhile. */
static rv_status_t late_start(rv_worker_t *w)
{
    if (rv_worker_tid(w) == 0) {
        double t0 = now_s();
        while (now_s() - t0 < LATE_MS / 1e3)
            rv_progress(w);
    }
    rv_worker_layer_set(w, late_slot, &started_mark);
    return RV_OK;
}

static const rv_layer_ops_t late_ops = {
    .name = "late starter",
    .worker_start = late_start,
};

/* The asker: every worker but 0 asks worker 0 as it starts. */
static rv_status_t asker_start(rv_worker_t *w)
{
    if (rv_worker_tid(w) == 0)
        return RV_OK;
    return rv_send(w, 0, ask_id, NULL, 0, NULL);
}

static const rv_layer_ops_t asker_ops = {
    .name = "asker",
    .worker_start = asker_start,
};

static int body(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    (void)arg;
    for (int c = 0; c < CALLS; c++)
        for (uint32_t k = 1; k < n; k++) {
            rv_status_t st =
                rv_call(w, (me + k) % n, data_id, &me, sizeof(me), NULL, 0);
            EXPECT(st == RV_OK, "call: %s", rv_status_str(st));
        }
    rv_flush(w, RV_TID_ALL);
    uint64_t want = (uint64_t)CALLS * (n - 1);
    double t0 = now_s();
    while (atomic_load(&got[rv_worker_local(w)]) < want && now_s() - t0 < 10)
        rv_progress(w);
    EXPECT(atomic_load(&got[rv_worker_local(w)]) == want,
           "worker %u: %llu calls of %llu arrived", me,
           (unsigned long long)atomic_load(&got[rv_worker_local(w)]),
           (unsigned long long)want);
    if (me == 0) {
        while (atomic_load(&asked) < n - 1 && now_s() - t0 < 10)
            rv_progress(w);
        EXPECT(atomic_load(&early) == 0,
               "%u of %u workers reached worker 0 before its late starter "
               "had started",
               atomic_load(&early), n - 1);
    }
    rv_barrier(w);
    return 0;
}

/* The launcher's barrier waits for every process: rank 0 enters it
 * LATE_MS late (after an allgather, which no process leaves before all
 * have entered it), and no other rank may leave it sooner. */
static void test_barrier_waits(void **state)
{
    (void)state;
    int me = rv_rank(ctx), n = rv_size(ctx);
    int *all = calloc((size_t)n, sizeof(*all));
    assert_non_null(all);
    assert_int_equal(rv_bootstrap_allgather(ctx, all, &me, sizeof(me)), RV_OK);
    free(all);
    double t0 = now_s();
    if (me == 0)
        while (now_s() - t0 < LATE_MS / 1e3)
            ;
    assert_int_equal(rv_bootstrap_barrier(ctx), RV_OK);
    double waited = now_s() - t0;
    if (me != 0 && waited < LATE_MS / 2e3) {
        fprintf(stderr,
                "rank %d left the barrier after %.0f ms, before rank "
                "0 entered it (%d ms late)\n",
                me, waited * 1e3, LATE_MS);
        fail();
    }
}

static void test_late_start(void **state)
{
    (void)state;
    assert_true(rv_threads(ctx) <= MAX_WORKERS);
    assert_int_equal(rv_job_run(ctx, body, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

int main(int argc, char **argv)
{
    const char *group = "am-start";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    /* The test's layers above am, in the order they start. */
    if (rv_am_register(ctx, "test.data", on_data, NULL, &data_id) != RV_OK ||
        rv_layer_install(ctx, &late_ops, NULL, &late_slot) != RV_OK ||
        rv_layer_install(ctx, &asker_ops, NULL, &asker_slot) != RV_OK ||
        rv_handler_register(ctx, "test.ask", on_ask, NULL, RV_HANDLER_INLINE,
                            &ask_id) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_waits),
        cmocka_unit_test(test_late_start),
    };
    int failed = _cmocka_run_group_tests(group, tests, 2, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, 2);
}
