/*
 * Shared by rv-histo and rv-ig, rivet's versions of Bale classic's
 * histogram and index-gather kernels: options, the random index stream,
 * the distributed table's layout, and the report worker 0 gathers.
 *
 * The layout follows Bale's: a global table of T entries per worker is
 * spread cyclically, global index g living at worker g % W as local entry
 * g / W (W: the workers of the job). Every worker draws its n indices
 * uniformly over all W * T entries, its own included, from a stream that
 * depends only on the seed and its id, so any worker can replay any
 * other's stream to check the result.
 */
#ifndef RIVET_BENCH_RV_BALE_H
#define RIVET_BENCH_RV_BALE_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "rivet.h"
#include "rv_am.h"

/* The options both kernels take. */
typedef struct {
    long n;        /* -n: updates or requests per worker */
    long T;        /* -T: table entries per worker */
    uint64_t seed; /* -s: seed of the index streams */
    long window;   /* -W (rv-ig only): requests outstanding; 0: no limit */
} bale_opts_t;

/*
 * Parses -n, -T, -s and (when @p with_window) -W after rv_init has taken
 * its own options; on a problem prints @p usage and finalizes @p ctx.
 * @return -1 to go on, else the exit code to return from main.
 */
static inline int bale_options(rv_context_t *ctx, int argc, char **argv,
                               int with_window, const char *usage,
                               bale_opts_t *o)
{
    int c, rc = -1;
    const char *accept = with_window ? "n:T:s:W:h" : "n:T:s:h";
    while (rc < 0 && (c = getopt(argc, argv, accept)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'n': o->n = strtol(optarg, &end, 0); break;
        case 'T': o->T = strtol(optarg, &end, 0); break;
        case 's': o->seed = strtoull(optarg, &end, 0); break;
        case 'W': o->window = strtol(optarg, &end, 0); break;
        default: rc = c == 'h' ? 0 : 2; break;
        }
        if (end != NULL && (*end != '\0' || end == optarg))
            rc = 2;
    }
    if (rc < 0 && (optind < argc || o->n < 1 || o->T < 1 || o->window < 0))
        rc = 2;
    if (rc >= 0) {
        fprintf(stderr, "usage: rivetrun -c JOB.yaml %s %s\n", argv[0],
                usage);
        rv_finalize(ctx);
    }
    return rc;
}

/* A worker's index stream: splitmix64, seeded from the seed and the
 * worker's id so that streams differ between workers and repeat between
 * runs. */
typedef struct {
    uint64_t s;
} bale_rng_t;

static inline void bale_rng_init(bale_rng_t *r, uint64_t seed, rv_tid_t tid)
{
    r->s = seed ^ (0x632be59bd9b4e019ull * ((uint64_t)tid + 1));
}

static inline uint64_t bale_rng_next(bale_rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The next global index, uniform over @p entries (the modulo's bias is
 * below 2^-40 for any table this benchmark builds). */
static inline uint64_t bale_rng_index(bale_rng_t *r, uint64_t entries)
{
    return bale_rng_next(r) % entries;
}

/* What each worker hands worker 0 at the end: a kernel-defined count
 * (counter sum, errors) and the seconds it measured. */
typedef struct {
    uint64_t value;
    uint64_t errors;
    double time_s;
} bale_report_t;

/* One report per worker of this process, indexed by rv_worker_local. */
static bale_report_t *bale_reports;
static rv_handler_id_t bale_report_h;

static rv_status_t bale_on_report(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    if (call->ret_len < sizeof(bale_report_t))
        return RV_ERR_INVALID;
    memcpy(call->ret, &bale_reports[rv_worker_local(w)],
           sizeof(bale_report_t));
    call->ret_len = sizeof(bale_report_t);
    return RV_OK;
}

/* Registers the report handler and allocates this process's reports;
 * main thread, before rv_job_run. 0 or -1. */
static inline int bale_report_init(rv_context_t *ctx)
{
    bale_reports = calloc((size_t)rv_threads(ctx), sizeof(bale_report_t));
    if (bale_reports == NULL)
        return -1;
    return rv_am_register(ctx, "bale.report", bale_on_report, NULL,
                          &bale_report_h) == RV_OK
               ? 0
               : -1;
}

/*
 * Collective: stores this worker's report, then worker 0 fetches every
 * worker's into @p all (rv_nworkers() entries, read at worker 0 only)
 * while the others wait in a barrier, which runs the fetches. The first
 * barrier makes sure every report is stored before it is fetched; the
 * last keeps every worker serving until worker 0 has them all.
 */
static inline rv_status_t bale_report_gather(rv_worker_t *w,
                                             const bale_report_t *mine,
                                             bale_report_t *all)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_status_t st;
    bale_reports[rv_worker_local(w)] = *mine;
    if ((st = rv_barrier(w)) != RV_OK)
        return st;
    /* One fetch at a time (sync NULL): a handful of calls, and each
     * one's argument stays put until it has run. */
    for (rv_tid_t t = 0; rv_worker_tid(w) == 0 && t < rv_nworkers(ctx) &&
                         st == RV_OK;
         t++)
        st = rv_call_return(w, t, bale_report_h, &t, sizeof(t), &all[t],
                            sizeof(all[t]), NULL, 0);
    rv_status_t st3 = rv_barrier(w);
    return st != RV_OK ? st : st3;
}

/* Makes one call, progressing and retrying while the destination's
 * ring or queue is full (am.on_full: fail answers RV_ERR_AGAIN). */
static inline rv_status_t bale_call(rv_worker_t *w, rv_tid_t dest,
                                    rv_handler_id_t h, const void *args,
                                    size_t len, rv_sync_t *sync,
                                    unsigned flags)
{
    rv_status_t st;
    while ((st = rv_call(w, dest, h, args, len, sync, flags)) ==
           RV_ERR_AGAIN)
        rv_progress(w);
    return st;
}

/* Ends the whole job when a step fails (a worker that merely returned
 * would leave the others waiting in a barrier). */
static inline void __attribute__((noreturn))
bale_fail(rv_worker_t *w, const char *prog, const char *what, rv_status_t st)
{
    char why[160];
    snprintf(why, sizeof(why), "%s: worker %u: %s failed: %s", prog,
             rv_worker_tid(w), what, rv_status_str(st));
    rv_abort(rv_worker_context(w), 1, why);
}

/* Prints the line bench/bale.sh parses: the rate per worker is n over
 * the mean of the workers' times, as Bale reports n over the mean of its
 * PEs' times. */
static inline void bale_print(rv_context_t *ctx, const char *prog, long n,
                              long T, const bale_report_t *all)
{
    uint32_t nw = rv_nworkers(ctx);
    double sum = 0, max = 0;
    char path[RV_CONFIG_STR_MAX] = "?", agg[RV_CONFIG_STR_MAX] = "?";
    for (uint32_t t = 0; t < nw; t++) {
        sum += all[t].time_s;
        if (all[t].time_s > max)
            max = all[t].time_s;
    }
    double mean = sum / nw;
    rv_config_get(rv_context_config(ctx), "am.path", path, sizeof(path));
    rv_config_get(rv_context_config(ctx), "am.aggregation", agg,
                  sizeof(agg));
    char routing[RV_CONFIG_STR_MAX] = "?";
    rv_config_get(rv_context_config(ctx), "am.routing", routing,
                  sizeof(routing));
    printf("%s rate_per_worker=%.0f time_s=%.6f time_max_s=%.6f n=%ld T=%ld "
           "workers=%u processes=%d threads=%d path=%s aggregation=%s "
           "routing=%s\n",
           prog, (double)n / mean, mean, max, n, T, nw, rv_size(ctx),
           rv_threads(ctx), path, agg, routing);
    fflush(stdout);
}

/* With RV_BENCH_RSS=1 in the environment, each process says how much
 * resident memory it held at most (bench/routing.sh reads it). */
static inline void bale_print_rss(rv_rank_t rank)
{
    struct rusage ru;
    const char *on = getenv("RV_BENCH_RSS");
    if (on == NULL || strcmp(on, "1") != 0 || getrusage(RUSAGE_SELF, &ru))
        return;
    fprintf(stderr, "rv-bale: rank %d rss_kib=%ld\n", (int)rank,
            ru.ru_maxrss);
}

#endif
