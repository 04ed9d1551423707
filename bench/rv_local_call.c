/*
 * rv-local-call: what a call to oneself, or to another thread of the same
 * process, costs through the local bypass, beside the floor it is held
 * to: a function call plus a queue append.
 *
 * Each worker makes n calls of an 8-byte argument (a counter's index) to
 * its target, whose handler adds one to that counter, then waits until
 * they have all run (rv_quiesce). Targets:
 *   self   every worker calls itself (a plain per-worker block, no
 *          atomics; the calls run when the worker progresses);
 *   other  worker t calls the next thread of its process, t + 1 mod T
 *          (blocks published on the thread pair's wait-free queue and run
 *          by the other thread while it makes its own calls).
 * The baseline, in the same run on the same threads, is the same work
 * without rivet: each update appended to a per-worker array (the queue
 * append), then the handler called through a function pointer on every
 * entry (the function call). Figures are nanoseconds per call, the mean
 * of the workers' (time from the first call until every call ran) / n,
 * and the caller's side alone (the loop of calls, before rv_quiesce).
 *
 *   rivetrun -n 1 -c configs/pingpong-shm.yaml build/bin/rv-local-call
 *   -n N        calls per worker (default 10000000)
 *   -t TARGETS  comma-separated: self, other (default self,other; other
 *               needs 2 threads or more)
 *   --csv       print "target,threads,rivet_ns,rivet_call_ns,
 *               baseline_ns,ratio" rows only
 *
 * Every counter is checked after each target: the job fails when any
 * update is missing or extra.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rivet.h"
#include "rv_am.h"

#define COUNTERS 1024

static long ncalls = 10000000;
static bool csv;
static bool want_self = true, want_other = true;
static rv_handler_id_t incr_h;
/* Per local thread: its counters, and its figures. */
static uint64_t (*counters)[COUNTERS];
static double *t_total, *t_calls, *t_base;

static rv_status_t on_incr(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t idx;
    (void)arg;
    memcpy(&idx, call->args, sizeof(idx));
    counters[rv_worker_local(w)][idx % COUNTERS]++;
    return RV_OK;
}

/* The baseline's handler, called through a pointer as rivet calls its. */
typedef void (*base_fn)(uint64_t *counters, uint64_t idx);
static void base_incr(uint64_t *c, uint64_t idx)
{
    c[idx % COUNTERS]++;
}
static base_fn volatile base_handler = base_incr;

/* A block of queued calls, as large as rivet's local blocks (16 KiB). */
#define BASE_QUEUE 2048

static double run_baseline(uint64_t *c, uint64_t *queue)
{
    base_fn fn = base_handler;
    double t0 = bench_now_s();
    long tail = 0;
    for (long i = 0; i < ncalls; i++) {
        queue[tail++] = (uint64_t)i; /* the queue append */
        if (tail == BASE_QUEUE || i + 1 == ncalls) {
            for (long k = 0; k < tail; k++)
                fn(c, queue[k]); /* the function call */
            tail = 0;
        }
    }
    return bench_now_s() - t0;
}

/* Every counter of this thread is the calls it received: n per
 * counter's share (the index stream is 0, 1, 2, ...). */
static long check(int local, uint64_t per_stream_factor)
{
    long bad = 0;
    for (long k = 0; k < COUNTERS; k++) {
        uint64_t want = (uint64_t)(ncalls / COUNTERS +
                                   (k < ncalls % COUNTERS ? 1 : 0)) *
                        per_stream_factor;
        if (counters[local][k] != want)
            bad++;
    }
    return bad;
}

/* Ends the job, saying why (rv_abort takes a fixed text). */
static void fail(rv_context_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(rv_context_t *ctx, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    rv_abort(ctx, 1, why);
}

static int run_target(rv_worker_t *w, bool other, double *sum)
{
    rv_context_t *ctx = rv_worker_context(w);
    int local = rv_worker_local(w), threads = rv_threads(ctx);
    rv_tid_t me = rv_worker_tid(w), first = me - (rv_tid_t)local;
    rv_tid_t dest = other ? first + (rv_tid_t)((local + 1) % threads) : me;
    uint64_t queue[BASE_QUEUE];

    memset(counters[local], 0, sizeof(counters[local]));
    rv_status_t st = rv_barrier(w);
    double t0 = bench_now_s();
    for (long i = 0; i < ncalls && st == RV_OK; i++) {
        uint64_t idx = (uint64_t)i;
        st = rv_call(w, dest, incr_h, &idx, sizeof(idx), NULL, 0);
    }
    double t1 = bench_now_s();
    if (st == RV_OK)
        st = rv_quiesce(w);
    double t2 = bench_now_s();
    if (st != RV_OK)
        fail(ctx, "rv-local-call: %s", rv_status_str(st));
    long bad = check(local, 1);
    if (bad != 0)
        fail(ctx, "rv-local-call: FAILED: worker %u: %ld counters wrong "
                  "after the %s calls", me, bad, other ? "other" : "self");

    /* The baseline on the same thread, same counters. */
    if ((st = rv_barrier(w)) != RV_OK)
        fail(ctx, "rv-local-call: %s", rv_status_str(st));
    t_base[local] = run_baseline(counters[local], queue);
    if (check(local, 2) != 0)
        fail(ctx, "rv-local-call: FAILED: the baseline's counters");
    t_total[local] = t2 - t0;
    t_calls[local] = t1 - t0;

    double mine[3] = {t_total[local], t_calls[local], t_base[local]};
    if ((st = rv_coll_allreduce(w, sum, mine, 3, RV_COLL_DOUBLE, RV_COLL_SUM)) !=
        RV_OK)
        fail(ctx, "rv-local-call: %s", rv_status_str(st));
    return 0;
}

static void print_row(rv_context_t *ctx, const char *target,
                      const double *sum)
{
    double nw = rv_nworkers(ctx);
    double total = sum[0] / nw * 1e9 / (double)ncalls;
    double calls = sum[1] / nw * 1e9 / (double)ncalls;
    double base = sum[2] / nw * 1e9 / (double)ncalls;
    if (csv)
        printf("%s,%d,%.2f,%.2f,%.2f,%.3f\n", target, rv_threads(ctx), total,
               calls, base, total / base);
    else
        printf("rv-local-call target=%s threads=%d rivet_ns=%.2f "
               "rivet_call_ns=%.2f baseline_ns=%.2f ratio=%.3f\n",
               target, rv_threads(ctx), total, calls, base, total / base);
    fflush(stdout);
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    double sum[3];
    (void)arg;
    if (want_self) {
        run_target(w, false, sum);
        if (rv_worker_tid(w) == 0)
            print_row(ctx, "self", sum);
    }
    if (want_other && rv_threads(ctx) >= 2) {
        run_target(w, true, sum);
        if (rv_worker_tid(w) == 0)
            print_row(ctx, "other", sum);
    }
    return 0;
}

static int parse_targets(const char *text)
{
    want_self = strstr(text, "self") != NULL;
    want_other = strstr(text, "other") != NULL;
    return want_self || want_other ? 0 : -1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            ncalls = atol(argv[++i]);
        } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            if (parse_targets(argv[++i]) != 0) {
                fprintf(stderr, "rv-local-call: -t takes self, other\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = true;
        } else {
            fprintf(stderr, "usage: rv-local-call [-n N] [-t self,other] "
                            "[--csv]\n");
            return 2;
        }
    }
    if (ncalls <= 0) {
        fprintf(stderr, "rv-local-call: -n takes a positive count\n");
        return 2;
    }
    int threads = rv_threads(ctx);
    counters = calloc((size_t)threads, sizeof(*counters));
    t_total = calloc((size_t)threads, sizeof(double));
    t_calls = calloc((size_t)threads, sizeof(double));
    t_base = calloc((size_t)threads, sizeof(double));
    if (counters == NULL || t_total == NULL || t_calls == NULL ||
        t_base == NULL)
        return 1;
    if (rv_am_register(ctx, "local-call.incr", on_incr, NULL, &incr_h))
        return 1;
    rv_status_t st = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    free(counters);
    free(t_total);
    free(t_calls);
    free(t_base);
    return st == RV_OK ? 0 : 1;
}
