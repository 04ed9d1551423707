/*
 * rv-rma-bw: one-sided put and get bandwidth, and get latency, through the
 * transport interface, from worker 0 of rank 0 into a region of worker 0
 * of rank 1 (memory the transport allocated: on shm, mapped into rank 0).
 * Over tcp this measures rivet's RMA emulated over active messages
 * (transport.ucx.rma_emulation) against what UCX's own RMA does.
 *
 *   rivetrun -c configs/pingpong-tcp.yaml build/bin/rv-rma-bw [options]
 *   -s SIZES   comma-separated sizes (default 8,4096,65536,4194304)
 *   -n ITERS   operations per size and kind (default: about 64 MiB, at
 *              least 100 and at most 100000)
 *   -W WINDOW  operations in flight for bandwidth (default 32)
 *   --api      through rivet's remote memory layer (rv_remote_alloc on rank 1,
 *              rv_put/rv_get on the remote pointer, rv_flush) instead of
 *              the transport interface, the way ucx_perftest's
 *              ucp_put_bw/ucp_get measure: a registered local buffer
 *              (rv_mem_alloc) and the same remote address every time
 *   --csv      print "op,size,mb_per_s,lat_us" rows only
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "rv_rma.h"

#define REGION (64u << 20)

static bench_opts_t opt = {.window = 32};
static bench_region_t target; /* rank 1's region */
static rv_rptr_t remote;      /* --api */

static void done_cb(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* Runs n operations of one kind with `window` in flight; returns seconds. */
static double run(rv_worker_t *w, int get, uint8_t *buf, size_t size, long n,
                  long window, rv_trkey_t *rkey)
{
    const rv_transport_ops_t *ops =
        rv_context_transport(rv_worker_context(w), NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    size_t slots = REGION / size;
    rv_tid_t peer = rv_tid_make(rv_worker_context(w), 1, 0);
    double t0 = bench_now_s();
    for (long i = 0; i < n; i++) {
        while (atomic_load(&sync.pending) >= window)
            rv_progress(w);
        uint64_t off = opt.api ? 0 : (uint64_t)(i % (long)slots) * size;
        if (opt.api) {
            rv_rptr_t at = rv_rptr_add(remote, off);
            rv_status_t st = get ? rv_get(w, buf, at, size, &sync)
                                 : rv_put(w, at, buf, size, &sync);
            if (st < 0)
                return -1;
            continue;
        }
        atomic_fetch_add(&sync.pending, 1);
        rv_status_t st = get ? ops->get(tw, peer, buf, size, target.addr + off,
                                        rkey, done_cb, &sync)
                             : ops->put(tw, peer, target.addr + off, rkey, buf,
                                        size, done_cb, &sync);
        if (st != RV_INPROGRESS)
            atomic_fetch_sub(&sync.pending, 1);
        if (st < 0)
            return -1;
    }
    if (rv_sync_wait(w, &sync) != RV_OK)
        return -1;
    if (!get && opt.api) {
        if (rv_flush(w, RV_TID_ALL) != RV_OK)
            return -1;
    } else if (!get) { /* puts count once they have landed */
        rv_sync_init(&sync, 1);
        rv_status_t st = ops->flush(tw, UINT32_MAX, done_cb, &sync);
        if (st == RV_INPROGRESS)
            rv_sync_wait(w, &sync);
    }
    return bench_now_s() - t0;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    rv_tmem_t *mem = NULL;
    void *region = NULL;
    int rc = 0;
    (void)arg;

    if (rv_worker_local(w) != 0 || rv_rank(ctx) > 1 ||
        (opt.api && rv_rank(ctx) == 1))
        return rv_barrier(w) == RV_OK ? 0 : 1; /* serving meanwhile */
    rv_trkey_t *rkey = NULL;
    rv_tid_t peer = rv_tid_make(ctx, 1, 0);
    if (opt.api) {
        if (rv_remote_alloc(w, peer, REGION, &remote) != RV_OK)
            return 1;
        goto measure;
    }
    if (rv_rank(ctx) == 1) {
        if (ops->mem_alloc(tp, REGION, &mem, &region) != RV_OK)
            return 1;
        memset(region, 1, REGION);
        if (bench_region_publish(w, &target, rv_tid_make(ctx, 0, 0), mem,
                                 region) != 0)
            return 1;
        rc = rv_barrier(w) == RV_OK ? 0 : 1; /* rank 0 measures meanwhile */
        ops->mem_deregister(tp, mem);
        return rc;
    }

    if (bench_region_fetch(w, &target, peer, &rkey) != 0)
        return 1;
measure:
    if (!opt.csv) {
        printf("rivet RMA: transport %s\n", rv_context_describe(ctx));
        printf("%4s %10s %10s %14s %14s\n", "op", "size", "ops", "MB/s",
               "latency(us)");
    } else {
        printf("op,size,mb_per_s,lat_us\n");
    }
    for (int s = 0; s < opt.nsizes && rc == 0; s++) {
        size_t size = opt.sizes[s];
        long n = opt.iters > 0 ? opt.iters : (long)((64u << 20) / size);
        n = n < 100 ? 100 : n > 100000 ? 100000 : n;
        uint8_t *buf = opt.api ? rv_mem_alloc(w, size, NULL)
                               : calloc(1, size);
        for (int get = 0; get <= 1 && buf != NULL; get++) {
            run(w, get, buf, size, n / 10 + 1, opt.window, rkey); /* warm-up */
            double t = run(w, get, buf, size, n, opt.window, rkey);
            long nl = n < 2000 ? n : 2000;
            double tl = run(w, get, buf, size, nl, 1, rkey);
            if (t < 0 || tl < 0) {
                rc = 1;
                break;
            }
            double mbs = (double)n * (double)size / t / 1e6;
            double lat = tl / (double)nl * 1e6;
            if (opt.csv)
                printf("%s,%zu,%.1f,%.2f\n", get ? "get" : "put", size, mbs,
                       lat);
            else
                printf("%4s %10zu %10ld %14.1f %14.2f\n", get ? "get" : "put",
                       size, n, mbs, lat);
            fflush(stdout);
        }
        if (opt.api)
            rv_mem_free(w, buf);
        else
            free(buf);
    }
    if (rkey != NULL)
        ops->rkey_destroy(rv_worker_tworker(w), rkey);
    if (opt.api)
        rv_remote_free(w, remote);
    return rv_barrier(w) == RV_OK ? rc : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = bench_options(ctx, argc, argv, "snWA",
                           "[-s SIZES] [-n ITERS] [-W WINDOW] [--api] [--csv]",
                           "8,4096,65536,4194304", 1, &opt);
    if (rc >= 0)
        return rc;
    for (int s = 0; s < opt.nsizes; s++)
        if (opt.sizes[s] > REGION) {
            fprintf(stderr, "rv-rma-bw: sizes up to %u bytes\n", REGION);
            rv_finalize(ctx);
            return 2;
        }
    if (bench_region_register(ctx, "rmabw.key", &target) != RV_OK ||
        rv_rma_init(ctx) != RV_OK)
        return 1;
    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return status == RV_OK ? 0 : 1;
}
