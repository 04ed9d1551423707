/*
 * rv-store-bench: the object store's fetches and local operations, as
 * "Plasma over RDMA" measures them (Figs. 2.6-2.7, 4.3-4.6).
 *
 * Two processes of one thread: rank 1 creates R objects of each size,
 * rank 0 gets them one at a time, each a remote fetch (the objects are
 * new to it), releases it, and times the get; the objects are then
 * deleted (untimed) so that memory is reused from size to size. One
 * untimed fetch per size comes first. Whether a fetch is eager or a
 * rendezvous is store.rndv_threshold's (RIVET_STORE_RNDV_THRESHOLD): the
 * script runs it at 0 (rendezvous only), above the largest size (eager
 * only) and at the default (the hybrid).
 *
 * Rank 0 also measures, on its own objects, put (create + copy + seal),
 * get (+ release) and delete per second, and memcpy of the same sizes
 * (the bound a fetch over shared memory can reach).
 *
 *   rivetrun -c configs/store.yaml build/bin/rv-store-bench [options]
 *   -s SIZES   comma-separated object sizes (default 1 KiB .. 16 MiB,
 *              powers of four, and 32 KiB)
 *   -m NAME    the system column: rivet-eager, rivet-rndv, rivet-hybrid
 *   -T NAME    the transport column: shm or tcp
 *   -l         also the local operations and memcpy
 *
 * It prints CSV rows "system,transport,op,size,latency_us,mb_per_s"
 * (median latency over the repetitions; MB = 10^6 B; throughput = size /
 * median latency). Every fetched object's first and last bytes are
 * checked; the job fails when one differs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "bench_util.h"
#include "rv_store.h"

#define MAX_SIZES 16

static size_t sizes[MAX_SIZES] = {1 << 10,  4 << 10,   16 << 10, 32 << 10,
                                  64 << 10, 256 << 10, 1 << 20,  4 << 20,
                                  16 << 20};
static int nsizes = 9;
static const char *sysname = "rivet-hybrid", *tpname = "shm";
static bool local_ops;


static void row(const char *sys, const char *tp, const char *op, size_t size,
                double lat_s)
{
    printf("%s,%s,%s,%zu,%.3f,%.1f\n", sys, tp, op, size, lat_s * 1e6,
           lat_s > 0 ? (double)size / lat_s / 1e6 : 0.0);
    fflush(stdout);
}

static rv_object_id_t oid(const char *what, size_t size, int i)
{
    char name[64];
    rv_object_id_t id;
    snprintf(name, sizeof(name), "bench/%s/%zu/%d", what, size, i);
    rv_object_id_of(name, strlen(name), &id);
    return id;
}

static void die(rv_worker_t *w, const char *what, rv_status_t st)
{
    char why[160];
    snprintf(why, sizeof(why), "rv-store-bench: %s: %s", what,
             rv_status_str(st));
    rv_abort(rv_worker_context(w), 1, why);
}

static void put(rv_worker_t *w, rv_object_id_t id, size_t size, uint8_t fill)
{
    void *data;
    rv_status_t st = rv_store_create(w, &id, size, NULL, 0, &data);
    if (st != RV_OK)
        die(w, "create", st);
    memset(data, fill, size);
    if ((st = rv_store_seal(w, &id)) != RV_OK)
        die(w, "seal", st);
}

/* Remote fetches of @p size: rank 1 puts, rank 0 gets. */
static void fetches(rv_worker_t *w, size_t size, double *lat)
{
    rv_rank_t me = rv_rank(rv_worker_context(w));
    int reps = bench_reps_of(size);
    if (me == 1)
        for (int i = -1; i < reps; i++)
            put(w, oid("fetch", size, i), size, (uint8_t)(i + 2));
    rv_quiesce(w); /* every copy registered at its home */
    if (me == 0) {
        for (int i = -1; i < reps; i++) {
            rv_object_id_t id = oid("fetch", size, i);
            rv_store_buf_t b;
            double t0 = bench_now_s();
            rv_status_t st = rv_store_get(w, &id, 1, 0, &b, NULL);
            double t = bench_now_s() - t0;
            if (st != RV_OK)
                die(w, "a fetch", st);
            const uint8_t *d = b.data;
            if (b.data_size != size ||
                (size > 0 && (d[0] != (uint8_t)(i + 2) ||
                              d[size - 1] != (uint8_t)(i + 2))))
                die(w, "FAILED: a fetched object's bytes", RV_ERR_INVALID);
            if (i >= 0)
                lat[i] = t;
            rv_store_release(w, &id);
        }
        row(sysname, tpname, "fetch", size, bench_median(lat, reps));
        for (int i = -1; i < reps; i++) {
            rv_object_id_t id = oid("fetch", size, i);
            rv_status_t st = rv_store_delete(w, &id);
            if (st != RV_OK)
                die(w, "a delete", st);
        }
    }
    rv_quiesce(w);
}

/*
 * memcpy as a fetch copies: each repetition copies its own source, written
 * beforehand, into its own destination, both faulted in already (the
 * store's memory is). Copying one pair over and over would measure the
 * caches instead: from the third copy on, a 16 MiB pair runs at twice the
 * speed of a first copy here, as it never leaves the L3 cache.
 */
static void copies(rv_worker_t *w, size_t size, double *lat)
{
    int reps = bench_reps_of(size);
    size_t span = size + 64;
    uint8_t *src = malloc(span * (size_t)reps), *dst = malloc(span * (size_t)reps);
    if (src == NULL || dst == NULL)
        die(w, "malloc", RV_ERR_NO_MEMORY);
    memset(dst, 1, span * (size_t)reps);
    for (int i = 0; i < reps; i++)
        memset(src + span * (size_t)i, i + 2, size);
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now_s();
        memcpy(dst + span * (size_t)i, src + span * (size_t)i, size);
        lat[i] = bench_now_s() - t0;
    }
    for (int i = 0; i < reps; i++)
        if (size > 0 && dst[span * (size_t)i + size - 1] != (uint8_t)(i + 2))
            die(w, "FAILED: a copy", RV_ERR_INVALID);
    row("memcpy", "shm", "fetch", size, bench_median(lat, reps));
    free(src);
    free(dst);
}

/* Put, get and delete of rank 0's own objects; memcpy. */
static void locals(rv_worker_t *w, size_t size, double *lat)
{
    int reps = bench_reps_of(size);
    uint8_t *src = malloc(size + 1), *dst = malloc(size + 1);
    if (src == NULL || dst == NULL)
        die(w, "malloc", RV_ERR_NO_MEMORY);
    memset(src, 7, size + 1);
    memset(dst, 1, size + 1);
    for (int i = 0; i < reps; i++) {
        rv_object_id_t id = oid("local", size, i);
        void *data;
        double t0 = bench_now_s();
        rv_status_t st = rv_store_create(w, &id, size, NULL, 0, &data);
        if (st == RV_OK) {
            memcpy(data, src, size);
            st = rv_store_seal(w, &id);
        }
        lat[i] = bench_now_s() - t0;
        if (st != RV_OK)
            die(w, "a local put", st);
    }
    row(sysname, "local", "put", size, bench_median(lat, reps));
    for (int i = 0; i < reps; i++) {
        rv_object_id_t id = oid("local", size, i);
        rv_store_buf_t b;
        double t0 = bench_now_s();
        rv_status_t st = rv_store_get(w, &id, 1, 0, &b, NULL);
        if (st == RV_OK)
            st = rv_store_release(w, &id);
        lat[i] = bench_now_s() - t0;
        if (st != RV_OK)
            die(w, "a local get", st);
    }
    row(sysname, "local", "get", size, bench_median(lat, reps));
    for (int i = 0; i < reps; i++) {
        rv_object_id_t id = oid("local", size, i);
        double t0 = bench_now_s();
        rv_status_t st = rv_store_delete(w, &id);
        lat[i] = bench_now_s() - t0;
        if (st != RV_OK)
            die(w, "a local delete", st);
    }
    row(sysname, "local", "delete", size, bench_median(lat, reps));
    free(src);
    free(dst);
    copies(w, size, lat);
}

static int worker(rv_worker_t *w, void *arg)
{
    double *lat = malloc(200 * sizeof(double));
    (void)arg;
    if (lat == NULL)
        die(w, "malloc", RV_ERR_NO_MEMORY);
    if (rv_rank(rv_worker_context(w)) == 0)
        printf("# %s over %s: store.rndv_threshold %zu\n", sysname, tpname,
               rv_store_rndv_threshold(w));
    for (int k = 0; k < nsizes; k++) {
        fetches(w, sizes[k], lat);
        if (local_ops && rv_rank(rv_worker_context(w)) == 0)
            locals(w, sizes[k], lat);
        rv_quiesce(w);
    }
    free(lat);
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            if ((nsizes = bench_parse_sizes(argv[++i], sizes, MAX_SIZES, 0)) <
                0)
                return 2;
        } else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            sysname = argv[++i];
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            tpname = argv[++i];
        } else if (strcmp(argv[i], "-l") == 0) {
            local_ops = true;
        } else {
            fprintf(stderr, "usage: rv-store-bench [-s SIZES] [-m SYSTEM] "
                            "[-T TRANSPORT] [-l]\n");
            return 2;
        }
    }
    if (rv_size(ctx) != 2 || rv_threads(ctx) != 1) {
        fprintf(stderr, "rv-store-bench: run it as 2 processes of 1 thread\n");
        return 2;
    }
    if (rv_store_init(ctx) != RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
