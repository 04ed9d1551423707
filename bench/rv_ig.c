/*
 * rv-ig: Bale classic's index-gather kernel on rivet's remote calls.
 *
 * Every worker owns T entries of a global table of W * T (W: the workers
 * of the job, laid out cyclically as in Bale), entry g holding f(g) =
 * 7 g + 3 (never 0, so a result that was never written is caught). Each
 * worker fetches n entries drawn uniformly over the whole table, its own
 * included: one rv_call_return of the entry's 8-byte local index to the
 * worker that owns it, whose handler returns the 8-byte value straight
 * into the request's slot of the result array. As in Bale, the indices
 * are drawn before the clock starts; the time covers the requests, the
 * wait for every answer, and a barrier, since Bale's conveyor finishes
 * only when every PE is done. The rate per worker is n over the mean of
 * the workers' times.
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-ig [options]
 *   -n N       requests per worker (default 1000000)
 *   -T T       table entries per worker (default 100000)
 *   -s SEED    seed of the index streams (default 1)
 *   -W WINDOW  requests outstanding before the worker progresses and
 *              waits for answers (default 0: no limit, all n on one
 *              synchronizer)
 *
 * It prints "rv-ig rate_per_worker=R time_s=T ..." from worker 0 once
 * every worker has checked every value it fetched, and exits non-zero
 * when one is wrong. The path and aggregation come from the job
 * (am.path, am.aggregation, or RIVET_AM_PATH, RIVET_AM_AGGREGATION).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rivet.h"
#include "rv_am.h"
#include "rv_bale.h"

static bale_opts_t opt = {.n = 1000000, .T = 100000, .seed = 1};
static rv_handler_id_t get_h;

/* The table entries of each worker of this process, by rv_worker_local. */
static uint64_t **table;
/* Requests whose index fell outside the table, per local worker. */
static uint64_t *bad_requests;

static inline uint64_t entry_value(uint64_t g)
{
    return g * 7 + 3;
}

static rv_status_t on_get(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t idx;
    int local = rv_worker_local(w);
    (void)arg;
    if (call->args_len != sizeof(idx) || call->ret_len < sizeof(idx)) {
        bad_requests[local]++;
        return RV_OK;
    }
    memcpy(&idx, call->args, sizeof(idx));
    if (idx >= (uint64_t)opt.T) {
        bad_requests[local]++;
        return RV_OK; /* the requester sees 0 and counts it wrong */
    }
    memcpy(call->ret, &table[local][idx], sizeof(idx));
    call->ret_len = sizeof(idx);
    return RV_OK;
}

/* Makes one request, progressing and retrying while the destination's
 * ring or queue is full. */
static rv_status_t request(rv_worker_t *w, rv_tid_t dest, const uint64_t *idx,
                           uint64_t *ret, rv_sync_t *sync)
{
    rv_status_t st;
    while ((st = rv_call_return(w, dest, get_h, idx, sizeof(*idx), ret,
                                sizeof(*ret), sync, 0)) == RV_ERR_AGAIN)
        rv_progress(w);
    return st;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    uint32_t nw = rv_nworkers(ctx);
    rv_tid_t me = rv_worker_tid(w);
    int local = rv_worker_local(w);
    uint64_t entries = (uint64_t)nw * (uint64_t)opt.T;
    rv_status_t st;
    (void)arg;

    for (long i = 0; i < opt.T; i++)
        table[local][i] = entry_value((uint64_t)i * nw + me);

    /* The arguments of request i stay in idx[i] until its answer is in:
     * they are never rewritten while a request may still read them. */
    uint64_t *idx = malloc((size_t)opt.n * sizeof(*idx));
    rv_tid_t *dest = malloc((size_t)opt.n * sizeof(*dest));
    /* Bale's target array comes from calloc and is first written inside
     * the timed loop; this one is allocated the same way so that neither
     * side gets its pages faulted in ahead of the clock. */
    uint64_t *tgt = calloc((size_t)opt.n, sizeof(*tgt));
    bale_report_t *all = calloc(nw, sizeof(*all));
    if (idx == NULL || dest == NULL || tgt == NULL || all == NULL)
        rv_abort(ctx, 1, "rv-ig: out of memory");
    bale_rng_t rng;
    bale_rng_init(&rng, opt.seed, me);
    for (long i = 0; i < opt.n; i++) {
        uint64_t g = bale_rng_index(&rng, entries);
        dest[i] = (rv_tid_t)(g % nw);
        idx[i] = g / nw;
    }

    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    if ((st = rv_barrier(w)) != RV_OK)
        bale_fail(w, "rv-ig", "the first barrier", st);
    double t0 = bench_now_s();
    for (long i = 0; i < opt.n; i++) {
        while (opt.window > 0 &&
               atomic_load_explicit(&sync.pending, memory_order_relaxed) >=
                   opt.window)
            rv_progress(w);
        if ((st = request(w, dest[i], &idx[i], &tgt[i], &sync)) != RV_OK)
            bale_fail(w, "rv-ig", "a request", st);
    }
    /* Batched requests (am.aggregation trad) leave now rather than when
     * the worker next finds itself idle. */
    if ((st = rv_flush(w, RV_TID_ALL)) != RV_OK)
        bale_fail(w, "rv-ig", "the flush", st);
    if ((st = rv_sync_wait(w, &sync)) != RV_OK)
        bale_fail(w, "rv-ig", "waiting for the answers", st);
    if ((st = rv_barrier(w)) != RV_OK)
        bale_fail(w, "rv-ig", "the last barrier", st);
    double t = bench_now_s() - t0;

    bale_report_t mine = {.time_s = t, .errors = bad_requests[local]};
    for (long i = 0; i < opt.n; i++) {
        uint64_t g = idx[i] * nw + dest[i];
        if (tgt[i] != entry_value(g) && mine.errors++ < 5)
            fprintf(stderr, "rv-ig: worker %u request %ld (entry %llu) got "
                            "%llu, expected %llu\n", me, i,
                    (unsigned long long)g, (unsigned long long)tgt[i],
                    (unsigned long long)entry_value(g));
    }
    mine.value = (uint64_t)opt.n;
    if ((st = bale_report_gather(w, &mine, all)) != RV_OK)
        bale_fail(w, "rv-ig", "gathering the reports", st);
    if (me == 0) {
        uint64_t errors = 0, checked = 0;
        for (uint32_t k = 0; k < nw; k++) {
            errors += all[k].errors;
            checked += all[k].value;
        }
        if (errors != 0 || checked != (uint64_t)opt.n * nw) {
            fprintf(stderr, "rv-ig: FAILED: %llu of %llu fetched values "
                            "wrong\n", (unsigned long long)errors,
                    (unsigned long long)checked);
            st = RV_ERR_INVALID;
        } else {
            bale_print(ctx, "rv-ig", opt.n, opt.T, all);
        }
    }
    free(idx);
    free(dest);
    free(tgt);
    free(all);
    return st == RV_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = bale_options(ctx, argc, argv, 1,
                          "[-n N] [-T T] [-s SEED] [-W WINDOW]", &opt);
    if (rc >= 0)
        return rc;

    int threads = rv_threads(ctx);
    table = calloc((size_t)threads, sizeof(*table));
    bad_requests = calloc((size_t)threads, sizeof(*bad_requests));
    if (table == NULL || bad_requests == NULL)
        return 1;
    for (int i = 0; i < threads; i++)
        if ((table[i] = malloc((size_t)opt.T * sizeof(uint64_t))) == NULL)
            return 1;
    if (rv_am_register(ctx, "ig.get", on_get, NULL, &get_h) ||
        bale_report_init(ctx))
        return 1;

    rv_status_t status = rv_job_run(ctx, worker, NULL);
    bale_print_rss(rv_rank(ctx));
    rv_finalize(ctx);
    for (int i = 0; i < threads; i++)
        free(table[i]);
    free(table);
    free(bad_requests);
    free(bale_reports);
    return status == RV_OK ? 0 : 1;
}
