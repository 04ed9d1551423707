/*
 * histogram: Bale's histogram kernel on remote calls. The job's workers
 * share a table of W * COUNTERS counters, each worker owning COUNTERS of
 * them (cyclically, as Bale lays them out). Every worker makes `updates`
 * updates to counters drawn over the whole table: one rv_call of the
 * counter's index to its owner, whose handler adds one. rv_quiesce waits
 * until every update has run everywhere; an allreduce checks that none
 * was lost or counted twice.
 *
 *   rivetrun -n 2 -c job.yaml ./histogram [updates per worker]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rivet.h>
#include <rv_am.h>

#define COUNTERS 1000

static rv_handler_id_t add_one;
static uint64_t (*counters)[COUNTERS]; /* one row per worker thread here */
static long updates = 100000;

/* Runs on the counter's owner, inside its rv_progress. call->args holds
 * the index; arguments are not aligned, so it is copied out. */
static rv_status_t on_add_one(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint32_t i;
    (void)arg;
    if (call->args_len != sizeof(i))
        return RV_ERR_INVALID;
    memcpy(&i, call->args, sizeof(i));
    if (i >= COUNTERS)
        return RV_ERR_INVALID;
    counters[rv_worker_local(w)][i]++; /* only this thread touches its row */
    return RV_OK;
}

static uint64_t next(uint64_t *s) /* xorshift64 */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int body(rv_worker_t *w, void *arg)
{
    uint32_t nw = rv_nworkers(rv_worker_context(w));
    uint64_t rng = 0x9e3779b97f4a7c15ull * (rv_worker_tid(w) + 1);
    (void)arg;

    for (long k = 0; k < updates; k++) {
        uint64_t cell = next(&rng) % ((uint64_t)nw * COUNTERS);
        uint32_t i = (uint32_t)(cell / nw);
        /* sync NULL: small arguments are copied when the call is made, so
         * it returns at once and &i may be reused. A full queue makes it
         * wait, running incoming calls (am.on_full: progress). */
        if (rv_call(w, (rv_tid_t)(cell % nw), add_one, &i, sizeof(i), NULL,
                    0) != RV_OK)
            return 1;
    }
    /* The barrier of calls: every update made anywhere has run. */
    if (rv_quiesce(w) != RV_OK)
        return 1;

    uint64_t mine = 0, total;
    for (int i = 0; i < COUNTERS; i++)
        mine += counters[rv_worker_local(w)][i];
    if (rv_coll_allreduce(w, &total, &mine, 1, RV_COLL_U64, RV_COLL_SUM) !=
        RV_OK)
        return 1;
    uint64_t want = (uint64_t)updates * nw;
    if (rv_worker_tid(w) == 0)
        printf("histogram: %u workers counted %llu updates of %llu: %s\n", nw,
               (unsigned long long)total, (unsigned long long)want,
               total == want ? "ok" : "WRONG");
    return total == want ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK) /* reads -c FILE */
        return 1;
    if (argc > 1)
        updates = atol(argv[1]);
    counters = calloc((size_t)rv_threads(ctx), sizeof(*counters));
    if (counters == NULL || updates < 0 ||
        rv_am_register(ctx, "example.add_one", on_add_one, NULL, &add_one) !=
            RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, body, NULL); /* job.threads workers */
    rv_finalize(ctx);
    free(counters);
    return st == RV_OK ? 0 : 1;
}
