/*
 * Selective signaling of the verbs transport under stress, without RDMA
 * hardware (verbs_signal_test.h).
 *
 * Threads run over the model of RC send queues (test_verbs_signal_model.c),
 * which checks at completion that each WR's buffer still holds the WR's
 * stamp: a buffer recycled while its WR is in flight is caught there, and
 * by TSan as a race. Threads post with buffers from their own circular
 * allocator (core's chunk allocator over the loop transport), tagged with
 * (channel, flush); some are delayed between begin and post, some posts
 * and markers fail, some WRs are caller-signaled, pollers are sometimes
 * delayed between taking CQEs and reporting them.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "verbs_signal_test.h"

#define STUCK_POLLS 2000000 /* polls after which a thread gives up */
#define UNIT_HELD UINT64_C(0x48454c44) /* buf[1] while the thread holds it */
#define UNIT_GIVEN UINT64_C(0x47495645) /* buf[1] once given back */

typedef struct pending {
    uint64_t flush, id;
} pending_t;

typedef struct worker {
    model_t *m;
    pthread_t thread;
    uint32_t tid;
    uint64_t max_steps, agains, marker_errors, recycled, polls;
    /* The thread's buffers; per QP, its WRs not yet known complete
     * (fifo[head .. tail)), the last completed_flush it saw and the last
     * flush number it began. */
    rv_mem_circular_t *circ;
    pending_t *fifo[MAX_QPS];
    uint64_t head[MAX_QPS], tail[MAX_QPS];
    uint64_t last_cf[MAX_QPS], last_flush[MAX_QPS];
} worker_t;

/* completed_flush of (qp, tid) is monotone, and every WR of the thread
 * tagged with a flush number it covers has completed. */
static bool check_completed(worker_t *w, uint32_t qp)
{
    model_t *m = w->m;
    pending_t *fifo = w->fifo[qp];
    uint64_t cf = rv_vsig_completed_flush(m->q[qp], w->tid);
    CHECK(cf >= w->last_cf[qp]);
    w->last_cf[qp] = cf;
    while (w->head[qp] < w->tail[qp] && fifo[w->head[qp]].flush <= cf) {
        CHECK(atomic_load_explicit(&m->wr_done[fifo[w->head[qp]].id],
                                   memory_order_acquire));
        w->head[qp]++;
    }
    return w->head[qp] == w->tail[qp];
}

/* A buffer for WR @p id; when every unit waits for completions, flush
 * (close the open runs) and poll, as the transport does. False when the
 * buffers never come back. */
static bool worker_take_unit(worker_t *w, uint64_t id, rv_mem_unit_t **u_p)
{
    model_t *m = w->m;
    const stress_cfg_t *cfg = &m->cfg;
    rv_mem_unit_t *u;
    rv_status_t st;
    uint64_t tries = 0;

    while ((st = rv_mem_circular_alloc(w->circ, &u)) == RV_ERR_AGAIN) {
        if (++tries > STUCK_POLLS) {
            CHECK(!"buffers never came back");
            return false;
        }
        w->agains++;
        for (uint32_t i = 0; i < cfg->nqps; i++)
            if (rv_vsig_flush(m->q[i], w->tid) != RV_OK)
                w->marker_errors++; /* a failed marker: later */
        model_poll(&m->ctx[0], w->tid);
        w->polls++;
    }
    CHECK(st == RV_OK);
    uint64_t *buf = u->addr;
    /* Recycled only after the WR that last used it completed, and
     * only once it was given back. */
    if (buf[0] != 0) {
        CHECK(atomic_load_explicit(&m->wr_done[buf[0] - 1],
                                   memory_order_acquire));
        w->recycled++;
    }
    CHECK(buf[1] != UNIT_HELD);
    buf[1] = UNIT_HELD;
    buf[0] = id + 1;
    *u_p = u;
    return true;
}

/* Begins WR @p id on @p qp, again while the pending marker fails, and
 * checks the ticket. False when the begin gave up (past the step bound,
 * or failing for good). */
static bool worker_begin(worker_t *w, uint32_t qp, bool want, uint64_t id,
                         rv_vsig_ticket_t *t)
{
    model_t *m = w->m;
    rv_status_t st;
    uint64_t tries = 0;

    vsig_tls()->in_begin = true;
    vsig_tls()->begin_polls = 0;
    while ((st = rv_vsig_begin(m->q[qp], w->tid, want, id + 1, t)) != RV_OK) {
        if (st == RV_ERR_TIMEOUT) /* reported by model_poll */
            return false;
        CHECK(st == RV_ERR_TRANSPORT); /* the pending marker failed */
        w->marker_errors++;
        if (++tries > STUCK_POLLS) {
            CHECK(!"begin keeps failing");
            return false;
        }
    }
    vsig_tls()->in_begin = false;
    CHECK(t->steps <= m->step_bound);
    if (t->steps > w->max_steps)
        w->max_steps = t->steps;
    CHECK(t->channel == rv_vsig_channel(qp, w->tid));
    CHECK(t->flush >= w->last_flush[qp] && t->flush <= w->last_flush[qp] + 1);
    CHECK(want ? t->signaled && t->wr_id == id + 1
               : (t->wr_id & RV_VSIG_WR_ID_TAG) != 0);
    w->last_flush[qp] = t->flush;
    return true;
}

/* Posts begun WR @p id (delayed between reserving and posting, and
 * failing, at times), gives its buffer back tagged, and ends it. */
static void worker_post(worker_t *w, uint32_t qp, uint64_t id,
                        rv_mem_unit_t *u, rv_vsig_ticket_t *t)
{
    model_t *m = w->m;
    const stress_cfg_t *cfg = &m->cfg;
    uint64_t *buf = u->addr;
    rv_status_t st;

    /* Delayed between reserving and posting. */
    if (one_in(&vsig_tls()->rng, cfg->yield))
        sched_yield();
    if (one_in(&vsig_tls()->rng, cfg->sleep))
        random_sleep(cfg->sleep_us);

    bool ok = !one_in(&vsig_tls()->rng, cfg->fail_post) &&
              model_post(m, qp, t->wr_id, t->signaled, id, buf);
    if (!ok) /* never in flight */
        atomic_store_explicit(&m->wr_done[id], 1, memory_order_release);
    rv_mem_circular_tag(u, t->channel, t->flush);
    buf[1] = UNIT_GIVEN;
    rv_mem_circular_free(w->circ, u);
    w->fifo[qp][w->tail[qp]++] = (pending_t){.flush = t->flush, .id = id};
    st = rv_vsig_end(m->q[qp], t, ok);
    if (st != RV_OK) {
        CHECK(st == RV_ERR_TRANSPORT); /* the marker failed: later */
        w->marker_errors++;
    }
}

/* Drain: close every run, then poll until all of this thread's WRs are
 * known complete. False when that never happens. */
static bool worker_drain(worker_t *w)
{
    model_t *m = w->m;
    const stress_cfg_t *cfg = &m->cfg;
    rv_status_t st;

    for (uint32_t qp = 0; qp < cfg->nqps; qp++) {
        uint64_t tries = 0;
        while ((st = rv_vsig_flush(m->q[qp], w->tid)) != RV_OK) {
            CHECK(st == RV_ERR_TRANSPORT);
            w->marker_errors++;
            if (++tries > STUCK_POLLS) {
                CHECK(!"flush keeps failing");
                return false;
            }
        }
    }
    for (uint64_t tries = 0;; tries++) {
        bool all = true;
        for (uint32_t qp = 0; qp < cfg->nqps; qp++)
            all &= check_completed(w, qp);
        if (all)
            return true;
        if (tries > STUCK_POLLS) {
            CHECK(!"runs never completed");
            return false;
        }
        model_poll(&m->ctx[0], w->tid);
        w->polls++;
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    model_t *m = w->m;
    const stress_cfg_t *cfg = &m->cfg;
    const uint32_t tid = w->tid;
    const uint64_t n = cfg->wrs_per_thread;

    vsig_tls()->rng = (UINT64_C(0x9e3779b97f4a7c15) * (tid + 1)) ^ m->seed;
    rv_vsig_mem_arg_t marg = {.qps = m->q, .nqps = cfg->nqps};
    rv_mem_circular_params_t cp = {
        .chunks = m->chunks,
        .unit_size = 256,
        .max_units = cfg->units,
        .completed = rv_vsig_mem_completed,
        .completed_arg = &marg,
    };
    CHECK(rv_mem_circular_create(&cp, &w->circ) == RV_OK);
    if (w->circ == NULL)
        return NULL;
    for (uint32_t qp = 0; qp < cfg->nqps; qp++)
        w->fifo[qp] = malloc(n * sizeof(pending_t));

    for (uint64_t k = 0; k < n; k++) {
        uint32_t qp = (uint32_t)(rng_next(&vsig_tls()->rng) % cfg->nqps);
        uint64_t id = tid * n + k;
        rv_mem_unit_t *u;
        rv_vsig_ticket_t t;

        if (!worker_take_unit(w, id, &u))
            goto out;
        bool want = one_in(&vsig_tls()->rng, cfg->want_signal);
        if (!worker_begin(w, qp, want, id, &t))
            goto out;
        worker_post(w, qp, id, u, &t);
        if (k % cfg->progress == 0) {
            model_poll(&m->ctx[0], tid); /* this thread's progress */
            w->polls++;
        }
        check_completed(w, qp);
    }
    if (!worker_drain(w))
        goto out;
    for (uint32_t qp = 0; qp < cfg->nqps; qp++)
        CHECK(w->last_cf[qp] == w->last_flush[qp]);
    /* Every unit came back. */
    CHECK(rv_mem_circular_stats(w->circ).bytes_in_use == 0);
    rv_mem_circular_destroy(w->circ);
out:
    vsig_tls()->in_begin = false;
    for (uint32_t qp = 0; qp < cfg->nqps; qp++)
        free(w->fifo[qp]);
    return NULL;
}

/* Watches completed_flush of every (QP, thread) from outside: monotone. */
static void *observer_main(void *arg)
{
    model_t *m = arg;
    uint64_t last[MAX_QPS][64] = {{0}};
    uint64_t rounds = 0;

    while (!atomic_load(&m->stop) || rounds < 2) {
        if (atomic_load(&m->stop))
            rounds++;
        for (uint32_t qp = 0; qp < m->cfg.nqps; qp++)
            for (uint32_t t = 0; t < m->cfg.threads && t < 64; t++) {
                uint64_t cf = rv_vsig_completed_flush(m->q[qp], t);
                CHECK(cf >= last[qp][t]);
                last[qp][t] = cf;
            }
        sched_yield();
    }
    return NULL;
}

/* Runs the workers and the observer to their end; returns the seconds
 * they took. */
static double model_run(model_t *m, worker_t *w)
{
    pthread_t observer;
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pthread_create(&observer, NULL, observer_main, m), 0);
    for (uint32_t i = 0; i < m->cfg.threads; i++) {
        w[i].m = m;
        w[i].tid = i;
        assert_int_equal(
            pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
    }
    for (uint32_t i = 0; i < m->cfg.threads; i++)
        pthread_join(w[i].thread, NULL);
    atomic_store(&m->stop, true);
    pthread_join(observer, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) +
           (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static void assert_no_violation(void)
{
    if (atomic_load(&check_failures) != 0)
        fail_msg("%d violations; first: %s", atomic_load(&check_failures),
                 check_first);
}

/* What the workers and the QPs counted, added up. */
typedef struct stress_totals {
    uint64_t max_steps, agains, marker_errors, recycled, polls;
    rv_vsig_stats_t sum; /* of every QP; max_steps the largest */
} stress_totals_t;

/* Adds up the counts; on the way, checks that every QP is idle: every
 * WR completed, no credit held. */
static void stress_totals(model_t *m, const worker_t *w, stress_totals_t *tot)
{
    memset(tot, 0, sizeof(*tot));
    for (uint32_t i = 0; i < m->cfg.threads; i++) {
        if (w[i].max_steps > tot->max_steps)
            tot->max_steps = w[i].max_steps;
        tot->agains += w[i].agains;
        tot->marker_errors += w[i].marker_errors;
        tot->recycled += w[i].recycled;
        tot->polls += w[i].polls;
    }
    rv_vsig_stats_t *sum = &tot->sum;
    for (uint32_t qp = 0; qp < m->cfg.nqps; qp++) {
        rv_vsig_stats_t s;
        rv_vsig_stats(m->q[qp], &s);
        sum->posts += s.posts;
        sum->failed_posts += s.failed_posts;
        sum->signaled += s.signaled;
        sum->user_signaled += s.user_signaled;
        sum->markers += s.markers;
        sum->failed_markers += s.failed_markers;
        sum->runs += s.runs;
        sum->runs_completed += s.runs_completed;
        sum->full_polls += s.full_polls;
        if (s.max_steps > sum->max_steps)
            sum->max_steps = s.max_steps;
        /* Everything completed: no credit held. */
        assert_int_equal(rv_vsig_outstanding(m->q[qp]), 0);
        assert_int_equal(s.runs, s.runs_completed);
        assert_true(m->sq[qp].done == m->sq[qp].tail);
    }
}

static void stress_report(const model_t *m, const stress_totals_t *tot,
                          double secs)
{
    const stress_cfg_t *cfg = &m->cfg;
    const rv_vsig_stats_t *sum = &tot->sum;
    printf("  %u threads, %u QPs of depth %u, S=%u, P=%u: %llu WRs in "
           "%.2f s; signaled %llu (caller %llu), markers %llu (failed "
           "%llu), failed posts %llu, runs %llu, polls for credits %llu, "
           "allocator AGAIN %llu, progress polls %llu, recycled units "
           "%llu, most steps in one begin %llu (bound %llu), highest SQ "
           "occupancy %llu\n",
           cfg->threads, cfg->nqps, m->depth, cfg->signal_interval,
           cfg->poll_batch, (unsigned long long)m->total_wrs, secs,
           (unsigned long long)sum->signaled,
           (unsigned long long)sum->user_signaled,
           (unsigned long long)sum->markers,
           (unsigned long long)sum->failed_markers,
           (unsigned long long)sum->failed_posts,
           (unsigned long long)sum->runs,
           (unsigned long long)sum->full_polls,
           (unsigned long long)tot->agains, (unsigned long long)tot->polls,
           (unsigned long long)tot->recycled,
           (unsigned long long)tot->max_steps,
           (unsigned long long)m->step_bound,
           (unsigned long long)m->max_occupancy);
    fflush(stdout);
}

/* What a run must come to, from the model's and the module's counts. */
static void stress_check(model_t *m, const stress_totals_t *tot)
{
    const stress_cfg_t *cfg = &m->cfg;
    const rv_vsig_stats_t *sum = &tot->sum;

    /* The send queues never overflowed, no buffer was reused in flight,
     * the CQ never overflowed. */
    assert_int_equal(m->sq_overflows, 0);
    assert_int_equal(m->stamp_errors, 0);
    assert_int_equal(m->cq_overflows, 0);
    assert_true(m->max_occupancy <= m->depth);
    /* Every WR was begun and ended once; the counts add up. */
    assert_int_equal(sum->posts + sum->failed_posts, m->total_wrs);
    assert_int_equal(sum->markers, m->markers_posted);
    assert_int_equal(sum->signaled, m->signaled_posted);
    assert_int_equal(atomic_load(&m->user_completions), sum->user_signaled);
    assert_int_equal(sum->max_steps, tot->max_steps);
    assert_true(tot->max_steps <= m->step_bound);
    /* Only about one WR in S is signaled (closers; markers replace
     * failed closers and close partial runs). */
    assert_true(sum->signaled - sum->user_signaled <=
                m->total_wrs / cfg->signal_interval);
    assert_int_equal(tot->marker_errors, sum->failed_markers);
    if (cfg->expect_full)
        assert_true(sum->full_polls > 0);
    if (cfg->fail_post != 0)
        assert_true(sum->failed_posts > 0);
    if (cfg->fail_marker != 0)
        assert_true(sum->failed_markers > 0);
    assert_true(tot->recycled > 0);
}

static void run_stress(const stress_cfg_t *cfg, uint64_t seed)
{
    worker_t *w = calloc(cfg->threads, sizeof(*w));
    stress_totals_t tot;
    assert_non_null(w);
    assert_true(cfg->nqps <= MAX_QPS && cfg->poll_batch <= MAX_BATCH);

    atomic_store(&check_failures, 0);
    check_first[0] = '\0';
    model_t *m = model_create(cfg, seed);
    double secs = model_run(m, w);
    assert_no_violation();

    /* Whatever is left in the CQ (caller-signaled completions): drain. */
    while (model_poll(&m->ctx[0], 0) > 0 || m->cq_head < m->cq_tail)
        ;
    stress_totals(m, w, &tot);
    stress_report(m, &tot, secs);
    assert_no_violation();
    stress_check(m, &tot);
    model_destroy(m);
    free(w);
}

static uint64_t stress_seed(void)
{
    const char *env = getenv("VSIG_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : 0x5eed1234abcdull;
    printf("  seed %#llx (VSIG_SEED)\n", (unsigned long long)seed);
    return seed | 1;
}

/* 8 threads, 2 QPs, 200k WRs, at the smallest depth allowed; three
 * seeds. */
void test_stress(void **state)
{
    uint64_t seed = stress_seed();
    (void)state;
    stress_cfg_t cfg = {
        .threads = 8,
        .nqps = 2,
        .signal_interval = 16,
        .poll_batch = 4,
        .wrs_per_thread = 25000,
        .max_complete = 2,
        .fail_post = 100,
        .fail_marker = 20,
        .want_signal = 50,
        .yield = 8,
        .sleep = 4000,
        .poller_sleep = 2000,
        .sleep_us = 2000,
        .units = 256,
        .progress = 32,
        .expect_full = true,
    };
    for (int i = 0; i < 3; i++)
        run_stress(&cfg, seed + 2 * (uint64_t)i * 0x10001);
}

/* Every WR signaled (S = 1), one QP. */
void test_stress_every_wr(void **state)
{
    (void)state;
    stress_cfg_t cfg = {
        .threads = 8,
        .nqps = 1,
        .signal_interval = 1,
        .poll_batch = 1,
        .wrs_per_thread = 5000,
        .max_complete = 2,
        .fail_post = 50,
        .fail_marker = 10,
        .want_signal = 10,
        .yield = 20,
        .sleep = 2000,
        .poller_sleep = 1000,
        .sleep_us = 1000,
        .units = 64,
        .progress = 8,
        .expect_full = true,
    };
    run_stress(&cfg, stress_seed() + 2);
}

/* A long interval and a large poll batch; few units, so allocations
 * often wait for completions (flush, poll, retry). */
void test_stress_long_runs(void **state)
{
    (void)state;
    stress_cfg_t cfg = {
        .threads = 4,
        .nqps = 2,
        .signal_interval = 64,
        .poll_batch = 16,
        .wrs_per_thread = 20000,
        .max_complete = 24,
        .fail_post = 200,
        .fail_marker = 5,
        .want_signal = 100,
        .yield = 100,
        .sleep = 5000,
        .poller_sleep = 500,
        .sleep_us = 3000,
        .units = 128,
        .progress = 32,
    };
    run_stress(&cfg, stress_seed() + 4);
}
