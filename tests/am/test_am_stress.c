/*
 * Stress tests of the invocation layer, as multi-process jobs. The mode
 * (am.path, am.aggregation, am.on_full, ring sizes) comes from the job's
 * configuration, which ctest sets through environment overrides; the
 * tests read it back to know what to expect.
 *
 * Four jobs, whose worker functions test_am_stress_jobs.c describes:
 * all_to_all, slow_receiver, ovfl_limit (am.aggregation: ovfl with
 * am.on_full: fail only) and job_end_flush.
 *
 * Every call carries (source, sequence number, payload length, checksum)
 * in its arguments; its size and kind are a function of (seed, source,
 * destination, sequence number), so the receiver checks all of them and
 * the per-pair order on its own. After each job the main threads exchange
 * every worker's counts (calls accepted per destination, run per source)
 * and its counters, and compare them.
 *
 * Worker threads record failures; the main thread asserts after the job.
 * This file holds the main thread; the calls and the jobs' worker
 * functions are in the files am_stress.h lists.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "am_stress.h"

rv_context_t *ctx;
const rv_am_config_t *cfg;
stress_handlers_t H;
wstate_t *ws;
report_t *all;
profile_t prof;

static const char *const phase_names[] = {
    "start", "warm-up", "burst", "stream", "sleep", "wait for calls",
    "flush", "barrier", "returned (job end)"};

/* ---------------------------------------------------------------------- */
/* The main thread                                                         */

static int setup(void **state)
{
    (void)state;
    atomic_store(&failures, 0);
    ws = calloc((size_t)rv_threads(ctx), sizeof(*ws));
    all = calloc(rv_nworkers(ctx), sizeof(*all));
    return ws == NULL || all == NULL;
}

static int teardown(void **state)
{
    (void)state;
    free(ws);
    free(all);
    return 0;
}

static const char *path_name(void)
{
    return cfg->path == RV_AM_PATH_WRITE ? "write" : "send";
}

/* A job that stalls (a lost call, a wedged ring) would otherwise hold
 * the machine until rivetrun's timeout: after JOB_LIMIT_S the watchdog
 * says where every worker of this process is and ends the job. Every
 * job here takes a few seconds. */
#define JOB_LIMIT_S 60

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    const char *name;
} dog = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, NULL};

static void *watchdog(void *arg)
{
    struct timespec until;
    (void)arg;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += JOB_LIMIT_S;
    pthread_mutex_lock(&dog.lock);
    while (!dog.done &&
           pthread_cond_timedwait(&dog.cond, &dog.lock, &until) != ETIMEDOUT)
        ;
    bool done = dog.done;
    pthread_mutex_unlock(&dog.lock);
    if (done)
        return NULL;
    fprintf(stderr, "rank %d: %s still runs after %d s\n", rv_rank(ctx),
            dog.name, JOB_LIMIT_S);
    for (int t = 0; t < rv_threads(ctx); t++)
        fprintf(stderr, "  worker %u: %s; %llu calls accepted, %llu run\n",
                rv_tid_make(ctx, rv_rank(ctx), t),
                phase_names[atomic_load(&ws[t].phase)],
                (unsigned long long)atomic_load(&ws[t].calls_out),
                (unsigned long long)atomic_load(&ws[t].calls_in));
    rv_abort(ctx, 1, "a stress job stalled");
}

/* Runs @p fn as a job, watched; returns its status, and in @p dt_p the
 * seconds it took. */
static rv_status_t run_watched(const char *name, rv_worker_fn fn,
                               double *dt_p)
{
    pthread_t dog_thread;
    dog.done = false;
    dog.name = name;
    assert_int_equal(pthread_create(&dog_thread, NULL, watchdog, NULL), 0);
    double t0 = now_s();
    rv_status_t st = rv_job_run(ctx, fn, NULL);
    *dt_p = now_s() - t0;
    pthread_mutex_lock(&dog.lock);
    dog.done = true;
    pthread_cond_signal(&dog.cond);
    pthread_mutex_unlock(&dog.lock);
    pthread_join(dog_thread, NULL);
    return st;
}

/* Gathers every worker's report, of every process, into all[]. */
static rv_status_t gather_reports(void)
{
    int T = rv_threads(ctx);
    report_t *mine = calloc((size_t)T, sizeof(*mine));
    assert_non_null(mine);
    for (int t = 0; t < T; t++)
        mine[t] = ws[t].rep;
    rv_status_t gst = rv_bootstrap_allgather(ctx, all, mine,
                                             (size_t)T * sizeof(*mine));
    free(mine);
    return gst;
}

/* The job's totals, on one line (rank 0). */
static void print_totals(const char *name, double dt)
{
    uint32_t n = rv_nworkers(ctx);
    uint64_t calls = 0, full = 0, again = 0, grow = 0, granted = 0,
             det = 0, flushes = 0, maxagg = 0;
    for (uint32_t t = 0; t < n; t++) {
        calls += all[t].am.calls_sent;
        full += all[t].am.ring_full;
        again += all[t].agains;
        grow += all[t].am.chunk_growths;
        granted += all[t].am.chunks_granted;
        det += all[t].am.detours;
        flushes += all[t].am.flushes;
        if (all[t].am.max_aggregated_bytes > maxagg)
            maxagg = all[t].am.max_aggregated_bytes;
    }
    printf("%s: %.2f s; %llu calls, %llu transmissions (largest %llu "
           "B), ring full %llu, RV_ERR_AGAIN %llu, growths %llu, chunks "
           "granted %llu, detours %llu\n",
           name, dt, (unsigned long long)calls,
           (unsigned long long)flushes, (unsigned long long)maxagg,
           (unsigned long long)full, (unsigned long long)again,
           (unsigned long long)grow, (unsigned long long)granted,
           (unsigned long long)det);
    fflush(stdout);
}

/* What every job must come to: every accepted call ran exactly once,
 * nothing was dropped, and only am.on_full: fail refused calls. */
static void assert_reports(void)
{
    uint32_t n = rv_nworkers(ctx);
    int bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++)
            if (all[s].sent[d] != all[d].got[s] && bad++ < 10)
                fprintf(stderr, "worker %u accepted %llu calls to %u, which "
                        "ran %llu\n", s, (unsigned long long)all[s].sent[d],
                        d, (unsigned long long)all[d].got[s]);
    for (uint32_t t = 0; t < n; t++) {
        if (all[t].core.rx_unknown_handler || all[t].core.rx_malformed) {
            fprintf(stderr, "worker %u dropped %llu unknown and %llu "
                    "malformed messages\n", t,
                    (unsigned long long)all[t].core.rx_unknown_handler,
                    (unsigned long long)all[t].core.rx_malformed);
            bad++;
        }
        /* only am.on_full: fail refuses calls */
        if (cfg->on_full != RV_ON_FULL_FAIL && all[t].agains > 0) {
            fprintf(stderr, "worker %u saw RV_ERR_AGAIN %llu times with "
                    "am.on_full other than fail\n", t,
                    (unsigned long long)all[t].agains);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Runs one job, then (before asserting anything, so that every process
 * takes part) gathers every worker's report. */
static void run_job(const char *name, rv_worker_fn fn)
{
    double dt;
    assert_true(rv_nworkers(ctx) <= MAX_WORKERS);

    rv_status_t st = run_watched(name, fn, &dt);
    rv_status_t gst = gather_reports();
    if (rv_rank(ctx) == 0)
        print_totals(name, dt);
    assert_int_equal(st, RV_OK);
    assert_int_equal(gst, RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
    assert_reports();
}

/* Every pair accepted and ran @p want calls (when @p only_to is
 * RV_TID_NONE), or every worker but @p only_to sent it @p want. */
static void assert_pairs(uint64_t want, rv_tid_t only_to)
{
    uint32_t n = rv_nworkers(ctx);
    int bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++) {
            uint64_t w = want;
            if (only_to != RV_TID_NONE)
                w = d == only_to && s != only_to ? want : 0;
            if (all[d].got[s] != w && bad++ < 10)
                fprintf(stderr, "worker %u ran %llu calls from %u, expected "
                        "%llu\n", d, (unsigned long long)all[d].got[s], s,
                        (unsigned long long)w);
        }
    assert_int_equal(bad, 0);
}

/* Each worker has @p rings rings, one per worker of another process, made
 * of chunks_per_request chunks and grown chunks_per_request at a time up
 * to max_chunks: its grants fit that, and (unless puts wait for the
 * receiver) rings grew, one as far as max_chunks takes. */
static void assert_ring_growth(uint64_t rings)
{
    uint32_t n = rv_nworkers(ctx);
    uint64_t cpr = (uint64_t)cfg->chunks_per_request;
    uint64_t max = (uint64_t)cfg->max_chunks;
    uint64_t first = cpr < max ? cpr : max;
    uint64_t growths_here = 0, most_grown = 0;
    for (uint32_t t = 0; t < n; t++) {
        const rv_am_stats_t *a = &all[t].am;
        if (rv_tid_rank(ctx, t) == rv_rank(ctx))
            growths_here += a->chunk_growths;
        if (a->chunks_granted < rings * first ||
            a->chunks_granted > rings * max ||
            a->chunks_granted > rings * first + a->chunk_growths * cpr ||
            a->chunk_growths > rings * (max - first))
            fail_msg("worker %u: %llu chunks granted in %llu growths, for "
                     "%llu rings of %llu..%llu chunks (%llu per request)", t,
                     (unsigned long long)a->chunks_granted,
                     (unsigned long long)a->chunk_growths,
                     (unsigned long long)rings, (unsigned long long)first,
                     (unsigned long long)max, (unsigned long long)cpr);
        uint64_t grown = a->chunks_granted - rings * first;
        if (grown > most_grown)
            most_grown = grown;
        /* no call is larger than a chunk here */
        if (cfg->chunk_bytes >= 2 * SLOT_PAYLOAD)
            assert_int_equal(a->detours, 0);
    }
    if (rma_waits_for_target()) {
        /* see test_slow_receiver: senders wait for the receiver in every
         * record's fence, so rings rarely fill */
        print_message("all_to_all: puts wait for the receiver's progress; "
                      "ring growth not required\n");
    } else if (max > first) {
        if (growths_here == 0)
            fail_msg("rank %d: no ring grew (%llu-byte chunks)", rv_rank(ctx),
                     (unsigned long long)cfg->chunk_bytes);
        /* at least one worker got as many chunks as growing one ring
         * to max_chunks takes (necessary for a ring to have reached it;
         * the counters do not say how the chunks went to rings) */
        if (most_grown < max - first)
            fail_msg("the workers that grew their rings most got %llu more "
                     "chunks; one ring from %llu to %llu takes %llu",
                     (unsigned long long)most_grown,
                     (unsigned long long)first, (unsigned long long)max,
                     (unsigned long long)(max - first));
    }
}

static void test_all_to_all(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    int T = rv_threads(ctx), P = rv_size(ctx);
    (void)state;

    prof = (profile_t){.max_log = 16, .sync_kinds = true};
    run_job("all_to_all", body_all_to_all);
    /* what the workers sent, now that the job has connected them */
    uint64_t K = calls_per_pair();
    assert_pairs(K, RV_TID_NONE);

    uint64_t bytes_sent = 0, bytes_got = 0;
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        bytes_sent += r->bytes_sent;
        bytes_got += r->bytes_got;
        assert_int_equal(r->am.calls_sent, K * n);
        assert_int_equal(r->am.calls_received, K * n);
        assert_int_equal(r->am.bytes_sent, r->bytes_sent);
        assert_int_equal(r->am.bytes_received, r->bytes_got);
        assert_int_equal(r->am.calls_local,
                         cfg->local_bypass ? K * (uint64_t)T : 0);
    }
    assert_int_equal(bytes_sent, bytes_got);

    if (cfg->path != RV_AM_PATH_WRITE) {
        print_message("all_to_all: no messenger rings on path send; ring "
                      "growth not checked\n");
        return;
    }
    assert_ring_growth((uint64_t)(P - 1) * (uint64_t)T);
}

static void test_slow_receiver(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    uint64_t K = stream_calls();
    (void)state;

    prof = (profile_t){.max_size = 4096};
    run_job("slow_receiver", body_slow_receiver);

    assert_int_equal(all[RECEIVER].ends, n - 1);
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        for (uint32_t d = 0; d < n; d++)
            if (d != RECEIVER || t == RECEIVER)
                assert_int_equal(r->sent[d], 0);
        if (t != RECEIVER) {
            assert_true(r->sent[RECEIVER] >= K + 1);
            /* accepted calls and the end marker: exactly those */
            assert_int_equal(r->am.calls_sent, r->sent[RECEIVER] + 1);
        }
    }
    /* Where puts are emulated by active messages (over TCP), every ring
     * record above 1 KiB waits in a fence (a round trip to the receiver)
     * before its header goes: senders wait for the sleeping receiver
     * inside the call before their rings fill. */
    bool rings_fill =
        cfg->path == RV_AM_PATH_WRITE && !rma_waits_for_target();
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        if (t == RECEIVER || !remote(t, RECEIVER))
            continue;
        if (rings_fill && r->am.ring_full == 0)
            fail_msg("worker %u streamed %llu calls to a receiver that "
                     "did not progress and never met a full ring", t,
                     (unsigned long long)r->sent[RECEIVER]);
        /* whatever the transport, fail refuses instead of waiting */
        if (cfg->path == RV_AM_PATH_WRITE &&
            cfg->on_full == RV_ON_FULL_FAIL && r->agains == 0)
            fail_msg("worker %u: never refused (RV_ERR_AGAIN) with "
                     "am.on_full: fail", t);
    }
    if (cfg->path != RV_AM_PATH_WRITE)
        print_message("slow_receiver: no messenger rings on path send; "
                      "ring-full expectations not checked\n");
    else if (!rings_fill)
        print_message("slow_receiver: puts wait for the receiver's "
                      "progress; ring full not required\n");
}

static void test_ovfl_limit(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    (void)state;

    prof = (profile_t){.max_size = 4096};
    run_job("ovfl_limit", body_ovfl_limit);

    assert_int_equal(all[RECEIVER].ends, n - 1);
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        if (t == RECEIVER)
            continue;
        /* accepted calls and the end marker: exactly what was counted */
        assert_int_equal(r->am.calls_sent, r->sent[RECEIVER] + 1);
        assert_true(r->sent[RECEIVER] > OVFL_MORE);
        if (remote(t, RECEIVER) && cfg->path == RV_AM_PATH_WRITE) {
            if (r->agains == 0 || r->am.ring_full == 0)
                fail_msg("worker %u: %llu refusals, ring full %llu", t,
                         (unsigned long long)r->agains,
                         (unsigned long long)r->am.ring_full);
        }
    }
    if (cfg->path != RV_AM_PATH_WRITE)
        print_message("ovfl_limit: path send; refusals not required\n");
}

static void test_job_end_flush(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    (void)state;

    prof = (profile_t){.max_size = END_MAX_SIZE};
    run_job("job_end_flush", body_job_end);
    assert_pairs(END_CALLS, RV_TID_NONE);

    /* With trad aggregation and flush_bytes above what each destination
     * was given, nothing left before the worker function returned: the
     * job's end did all the sending. */
    uint64_t most = END_CALLS * (uint64_t)(END_MAX_SIZE + 256);
    if (cfg->aggregation == RV_AGG_TRAD && cfg->flush_bytes > most) {
        for (uint32_t t = 0; t < n; t++)
            if (all[t].am.flushes != 0)
                fail_msg("worker %u transmitted %llu batches before "
                         "returning (trad, am.flush_bytes %llu)", t,
                         (unsigned long long)all[t].am.flushes,
                         (unsigned long long)cfg->flush_bytes);
    }
}

static const char *agg_name(void)
{
    switch (cfg->aggregation) {
    case RV_AGG_TRAD: return "trad";
    case RV_AGG_OVFL: return "ovfl";
    default: return "none";
    }
}

static const char *on_full_name(void)
{
    switch (cfg->on_full) {
    case RV_ON_FULL_PROGRESS: return "progress";
    case RV_ON_FULL_RETRY: return "retry";
    case RV_ON_FULL_RETRY_ASYNC: return "retry_async";
    default: return "fail";
    }
}

int main(int argc, char **argv)
{
    const char *group = "am-stress";
    if (!board_open())
        return 1;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    cfg = am_config(ctx);
    if ((rv_am_register(ctx, "stress.data", on_data, NULL, &H.data) |
         rv_am_register(ctx, "stress.end", on_end, NULL, &H.end) |
         probe_install(ctx)) != RV_OK)
        return 1;
    if (rv_rank(ctx) == 0) {
        printf("%d x %d workers, %s; am.path %s, aggregation %s, "
               "on_full %s, chunk_bytes %llu, max_chunks %lld, "
               "chunks_per_request %lld, ovfl_limit %llu, flush_bytes %llu, "
               "local_bypass %d; seed 0x%llx\n",
               rv_size(ctx), rv_threads(ctx),
               rv_context_describe(ctx),
               path_name(), agg_name(), on_full_name(),
               (unsigned long long)cfg->chunk_bytes,
               (long long)cfg->max_chunks,
               (long long)cfg->chunks_per_request,
               (unsigned long long)cfg->ovfl_limit,
               (unsigned long long)cfg->flush_bytes,
               (int)cfg->local_bypass, (unsigned long long)SEED);
        fflush(stdout);
    }

    /* The ovfl_limit case belongs to the mode it tests (am.aggregation:
     * ovfl, am.on_full: fail): other variants leave it out, not skip it. */
    bool ovfl_fail = cfg->aggregation == RV_AGG_OVFL &&
                     cfg->on_full == RV_ON_FULL_FAIL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_to_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_receiver, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_end_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ovfl_limit, setup, teardown),
    };
    size_t ntests = sizeof(tests) / sizeof(tests[0]) - (ovfl_fail ? 0 : 1);
    int failed = _cmocka_run_group_tests(group, tests, ntests,
                                         NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, ntests);
}
