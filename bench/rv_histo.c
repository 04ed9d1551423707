/*
 * rv-histo: Bale classic's histogram kernel on rivet's remote calls.
 *
 * Every worker owns T counters of a global table of W * T (W: the workers
 * of the job, laid out cyclically as in Bale) and makes n updates, each
 * to a counter drawn uniformly over the whole table, its own counters
 * included: one rv_call of the counter's 8-byte local index to the
 * worker that owns it, whose handler adds one. As in Bale, the indices
 * are drawn before the clock starts, and the time covers the updates and
 * the step that makes sure every update has run everywhere
 * (rv_quiesce). The rate per worker is n over the mean of the
 * workers' times.
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-histo [options]
 *   -n N     updates per worker (default 1000000)
 *   -T T     counters per worker (default 1000)
 *   -s SEED  seed of the index streams (default 1)
 *
 * It prints "rv-histo rate_per_worker=R time_s=T ..." from worker 0 once
 * the result is checked, and exits non-zero when it is wrong: the sum of
 * all counters of the job must be n * W, and every worker replays every
 * worker's index stream to check each of its own counters exactly. The
 * path and aggregation come from the job (am.path, am.aggregation, or
 * RIVET_AM_PATH, RIVET_AM_AGGREGATION), not from options.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rivet.h"
#include "rv_am.h"
#include "rv_bale.h"

static bale_opts_t opt = {.n = 1000000, .T = 1000, .seed = 1};
static rv_handler_id_t incr_h;

/* The counters of each worker of this process, by rv_worker_local. */
static uint64_t **counters;
/* Updates whose index fell outside the table, per local worker: a call
 * that arrives damaged is counted as an error, never applied. */
static uint64_t *bad_updates;

static rv_status_t on_incr(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t idx;
    int local = rv_worker_local(w);
    (void)arg;
    if (call->args_len != sizeof(idx)) {
        bad_updates[local]++;
        return RV_OK;
    }
    memcpy(&idx, call->args, sizeof(idx));
    if (idx >= (uint64_t)opt.T) {
        bad_updates[local]++;
        return RV_OK;
    }
    counters[local][idx]++;
    return RV_OK;
}

/* Replays every worker's index stream and counts, against this worker's
 * counters, the entries that differ from what the streams put there. */
static uint64_t check_counters(rv_worker_t *w, const uint64_t *mine)
{
    rv_context_t *ctx = rv_worker_context(w);
    uint32_t nw = rv_nworkers(ctx);
    rv_tid_t me = rv_worker_tid(w);
    uint64_t entries = (uint64_t)nw * (uint64_t)opt.T, errors = 0;
    uint64_t *expect = calloc((size_t)opt.T, sizeof(*expect));
    if (expect == NULL)
        rv_abort(ctx, 1, "rv-histo: out of memory");
    for (rv_tid_t t = 0; t < nw; t++) {
        bale_rng_t rng;
        bale_rng_init(&rng, opt.seed, t);
        for (long i = 0; i < opt.n; i++) {
            uint64_t g = bale_rng_index(&rng, entries);
            if (g % nw == me)
                expect[g / nw]++;
        }
    }
    for (long i = 0; i < opt.T; i++)
        if (mine[i] != expect[i] && errors++ < 5)
            fprintf(stderr, "rv-histo: worker %u counter %ld is %llu, "
                            "expected %llu\n", me, i,
                    (unsigned long long)mine[i],
                    (unsigned long long)expect[i]);
    free(expect);
    return errors;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    uint32_t nw = rv_nworkers(ctx);
    rv_tid_t me = rv_worker_tid(w);
    int local = rv_worker_local(w);
    uint64_t entries = (uint64_t)nw * (uint64_t)opt.T;
    rv_status_t st = RV_OK;
    (void)arg;

    /* Bale draws the indices, split into owner and local index, before
     * its clock starts; so does this. */
    uint64_t *idx = malloc((size_t)opt.n * sizeof(*idx));
    rv_tid_t *dest = malloc((size_t)opt.n * sizeof(*dest));
    bale_report_t *all = calloc(nw, sizeof(*all));
    if (idx == NULL || dest == NULL || all == NULL)
        rv_abort(ctx, 1, "rv-histo: out of memory");
    bale_rng_t rng;
    bale_rng_init(&rng, opt.seed, me);
    for (long i = 0; i < opt.n; i++) {
        uint64_t g = bale_rng_index(&rng, entries);
        dest[i] = (rv_tid_t)(g % nw);
        idx[i] = g / nw;
    }

    if ((st = rv_barrier(w)) != RV_OK)
        bale_fail(w, "rv-histo", "the first barrier", st);
    double t0 = bench_now_s();
    /* sync NULL: the call layer copies arguments this small when the call
     * is made, so the call returns at once; a synchronizer per call would
     * cost more than the update. */
    for (long i = 0; i < opt.n; i++)
        if ((st = bale_call(w, dest[i], incr_h, &idx[i], sizeof(idx[i]),
                            NULL, 0)) != RV_OK)
            bale_fail(w, "rv-histo", "an update", st);
    /* Every update has run everywhere (the barrier of calls). */
    if ((st = rv_quiesce(w)) != RV_OK)
        bale_fail(w, "rv-histo", "rv_quiesce", st);
    double t = bench_now_s() - t0;

    bale_report_t mine = {.time_s = t, .errors = bad_updates[local]};
    for (long i = 0; i < opt.T; i++)
        mine.value += counters[local][i];
    mine.errors += check_counters(w, counters[local]);
    if ((st = bale_report_gather(w, &mine, all)) != RV_OK)
        bale_fail(w, "rv-histo", "gathering the reports", st);
    if (me == 0) {
        uint64_t sum = 0, errors = 0;
        for (uint32_t k = 0; k < nw; k++) {
            sum += all[k].value;
            errors += all[k].errors;
        }
        if (sum != (uint64_t)opt.n * nw || errors != 0) {
            fprintf(stderr, "rv-histo: FAILED: the counters sum to %llu, "
                            "expected %llu; %llu counters wrong\n",
                    (unsigned long long)sum,
                    (unsigned long long)opt.n * nw,
                    (unsigned long long)errors);
            st = RV_ERR_INVALID;
        } else {
            bale_print(ctx, "rv-histo", opt.n, opt.T, all);
        }
    }
    free(idx);
    free(dest);
    free(all);
    return st == RV_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = bale_options(ctx, argc, argv, 0, "[-n N] [-T T] [-s SEED]",
                          &opt);
    if (rc >= 0)
        return rc;

    int threads = rv_threads(ctx);
    counters = calloc((size_t)threads, sizeof(*counters));
    bad_updates = calloc((size_t)threads, sizeof(*bad_updates));
    if (counters == NULL || bad_updates == NULL)
        return 1;
    for (int i = 0; i < threads; i++)
        if ((counters[i] = calloc((size_t)opt.T, sizeof(uint64_t))) == NULL)
            return 1;
    if (rv_am_register(ctx, "histo.incr", on_incr, NULL, &incr_h) ||
        bale_report_init(ctx))
        return 1;

    rv_status_t status = rv_job_run(ctx, worker, NULL);
    bale_print_rss(rv_rank(ctx));
    rv_finalize(ctx);
    for (int i = 0; i < threads; i++)
        free(counters[i]);
    free(counters);
    free(bad_updates);
    free(bale_reports);
    return status == RV_OK ? 0 : 1;
}
