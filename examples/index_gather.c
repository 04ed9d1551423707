/*
 * index_gather: Bale's index-gather on remote calls with results. The
 * job's workers share a table of W * ENTRIES values, each worker owning
 * ENTRIES of them (cyclically). Every worker reads `reads` entries drawn
 * over the whole table: one rv_call_return of the entry's index to its
 * owner, whose handler writes the value into the call's result. All the
 * reads share one synchronizer, so they are all in flight at once and
 * aggregate as the job's am.* keys say; rv_sync_wait returns once every
 * result has landed. Entry g holds 3g + 1, so each result can be checked.
 *
 *   rivetrun -n 2 -c job.yaml ./index_gather [reads per worker]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rivet.h>
#include <rv_am.h>

#define ENTRIES 4096

static rv_handler_id_t read_entry;
static uint64_t (*table)[ENTRIES]; /* one slice per worker thread here */
static long reads = 100000;

/* Runs on the entry's owner: the index in, the value out (call->ret,
 * zeroed before the handler runs, ret_len bytes). */
static rv_status_t on_read(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint32_t i;
    (void)arg;
    if (call->args_len != sizeof(i) || call->ret_len < sizeof(uint64_t))
        return RV_ERR_INVALID;
    memcpy(&i, call->args, sizeof(i));
    if (i >= ENTRIES)
        return RV_ERR_INVALID;
    memcpy(call->ret, &table[rv_worker_local(w)][i], sizeof(uint64_t));
    call->ret_len = sizeof(uint64_t);
    return RV_OK;
}

static int body(rv_worker_t *w, void *arg)
{
    uint32_t nw = rv_nworkers(rv_worker_context(w));
    rv_tid_t me = rv_worker_tid(w);
    uint64_t rng = 0x2545f4914f6cdd1dull * (me + 1), bad = 0;
    (void)arg;

    /* This worker's slice: its entry i is entry i * nw + me of the table. */
    for (uint32_t i = 0; i < ENTRIES; i++)
        table[rv_worker_local(w)][i] = 3 * ((uint64_t)i * nw + me) + 1;
    if (rv_barrier(w) != RV_OK) /* every slice is filled */
        return 1;

    uint64_t *want = malloc((size_t)reads * sizeof(*want));
    uint64_t *got = malloc((size_t)reads * sizeof(*got));
    if (want == NULL || got == NULL)
        return 1;
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    for (long k = 0; k < reads; k++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t g = rng % ((uint64_t)nw * ENTRIES);
        uint32_t i = (uint32_t)(g / nw);
        want[k] = 3 * g + 1;
        /* &i is copied when the call is made; got[k] must stay valid until
         * sync completes. */
        if (rv_call_return(w, (rv_tid_t)(g % nw), read_entry, &i, sizeof(i),
                           &got[k], sizeof(got[k]), &sync, 0) != RV_OK)
            return 1;
    }
    if (rv_sync_wait(w, &sync) != RV_OK) /* every result has landed */
        return 1;
    for (long k = 0; k < reads; k++)
        bad += got[k] != want[k];
    free(want);
    free(got);

    uint64_t total;
    if (rv_coll_allreduce(w, &total, &bad, 1, RV_COLL_U64, RV_COLL_SUM) !=
        RV_OK)
        return 1;
    if (me == 0)
        printf("index_gather: %u workers read %llu entries, %llu wrong: %s\n",
               nw, (unsigned long long)reads * nw, (unsigned long long)total,
               total == 0 ? "ok" : "WRONG");
    return total == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        reads = atol(argv[1]);
    table = calloc((size_t)rv_threads(ctx), sizeof(*table));
    if (table == NULL || reads < 1 ||
        rv_am_register(ctx, "example.read", on_read, NULL, &read_entry) !=
            RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, body, NULL);
    rv_finalize(ctx);
    free(table);
    return st == RV_OK ? 0 : 1;
}
