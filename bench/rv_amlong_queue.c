/*
 * rv-amlong-queue: GASNet testqueue's pattern (-l -i, "gex_AM_RequestLong0
 * (implicit handle for LC)") for rivet's AM Long (rv_put_handler): the
 * injection overhead of DEPTH back-to-back AM Long requests, for DEPTH =
 * 1, 2, 4, ... and each payload SIZE. Worker 0 of rank 0 issues DEPTH
 * requests from one registered buffer, all with one synchronizer
 * (non-blocking: the call returns before the source is reusable where the
 * protocol allows; testqueue's implicit handle), and every one lands at
 * the same address at rank 1 (one buffer of SIZE bytes there, as
 * testqueue lands every op at one address). It times the DEPTH calls
 * (injection), then waits for the synchronizer and for rank 1's reply,
 * sent by the handler that completes the round (completion: every handler
 * ran). Both are reported per message, averaged over the rounds. The
 * protocol is the job's rma.am_long_protocol (reassembly | put_sync_send).
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-amlong-queue [options]
 *   -s SIZES   comma-separated payload sizes (default 4096,65536,1048576)
 *   -W DEPTH   deepest queue: depths 1, 2, 4, ... up to DEPTH (default 256)
 *   -n ITERS   timed rounds per size and depth (default: about 256 MiB
 *              injected per point, within [10, 2000])
 *   -w WARMUP  untimed rounds first, per size and depth (default 1)
 *   --csv      print "size,depth,iters,inject_us,complete_us" rows only
 *              (microseconds per message)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rv_rma.h"

static bench_opts_t opt = {.warmup = 1, .window = 256};
static struct {
    rv_handler_id_t req, done;
    uint32_t seen;          /* rank 1: handlers run in this round */
    volatile long rounds;   /* rank 0: rounds rank 1 reported complete */
} q;

/** Rank 1: one AM Long arrived; args carry the round's depth. The last of
 * the round answers rank 0. */
static rv_status_t on_req(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint32_t depth;
    (void)arg;
    if (call->args_len != sizeof(depth))
        return RV_ERR_INVALID;
    memcpy(&depth, call->args, sizeof(depth));
    if (++q.seen < depth)
        return RV_OK;
    q.seen = 0;
    return rv_call(w, call->src, q.done, NULL, 0, NULL, 0);
}

static rv_status_t on_done(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)call;
    (void)arg;
    q.rounds++;
    return RV_OK;
}

/** One round: @p depth requests of @p size bytes from @p src, all into
 * @p dst; adds the injection and completion times (seconds) to @p inject
 * and @p complete. */
static int run_round(rv_worker_t *w, rv_tid_t peer, rv_rptr_t dst,
                     const void *src, size_t size, uint32_t depth,
                     double *inject, double *complete)
{
    long want = q.rounds + 1;
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    double t0 = bench_now_s();
    for (uint32_t i = 0; i < depth; i++) {
        if (rv_put_handler(w, peer, q.req, &depth, sizeof(depth), dst, src,
                           size, &sync, 0) != RV_OK) {
            rv_sync_wait(w, &sync); /* the ones issued still use it */
            return 1;
        }
    }
    double t1 = bench_now_s();
    if (rv_sync_wait(w, &sync) != RV_OK)
        return 1;
    while (q.rounds < want)
        rv_progress(w);
    double t2 = bench_now_s();
    *inject += t1 - t0;
    *complete += t2 - t0;
    return 0;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    (void)arg;
    if (rv_worker_local(w) != 0)
        return 0;
    rv_barrier(w);
    if (rv_rank(ctx) != 0) {
        rv_barrier(w); /* serves requests until rank 0 is done */
        return 0;
    }
    rv_tid_t peer = rv_tid_make(ctx, 1, 0);
    size_t len = 1;
    for (int s = 0; s < opt.nsizes; s++)
        len = opt.sizes[s] > len ? opt.sizes[s] : len;
    rv_rptr_t dst;
    void *src = rv_mem_alloc(w, len, NULL);
    if (src == NULL || rv_remote_alloc(w, peer, len, &dst) != RV_OK) {
        fprintf(stderr, "rv-amlong-queue: cannot allocate %zu bytes\n", len);
        rv_mem_free(w, src);
        rv_barrier(w); /* lets rank 1 go */
        return 1;
    }

    char proto[RV_CONFIG_STR_MAX];
    rv_config_get(rv_context_config(ctx), "rma.am_long_protocol", proto,
                  sizeof(proto));
    if (opt.csv) {
        printf("size,depth,iters,inject_us,complete_us\n");
    } else {
        printf("rivet AM Long injection queue (%s): transport %s\n", proto,
               rv_context_describe(ctx));
        printf("%10s %6s %8s %16s %16s\n", "size", "depth", "iters",
               "inject(us/msg)", "complete(us/msg)");
    }
    int rc = 0;
    for (int s = 0; s < opt.nsizes && rc == 0; s++) {
        size_t size = opt.sizes[s];
        for (long d = 1; d <= opt.window && rc == 0; d *= 2) {
            long n = bench_iters(&opt, size * (size_t)d, (size_t)256 << 20,
                                 10, 2000);
            double inj = 0, comp = 0;
            for (long i = 0; i < opt.warmup && rc == 0; i++)
                rc = run_round(w, peer, dst, src, size, (uint32_t)d, &inj,
                               &comp);
            inj = comp = 0;
            for (long i = 0; i < n && rc == 0; i++)
                rc = run_round(w, peer, dst, src, size, (uint32_t)d, &inj,
                               &comp);
            if (rc != 0)
                break;
            double per = 1e6 / (double)n / (double)d;
            if (opt.csv)
                printf("%zu,%ld,%ld,%.3f,%.3f\n", size, d, n, inj * per,
                       comp * per);
            else
                printf("%10zu %6ld %8ld %16.3f %16.3f\n", size, d, n,
                       inj * per, comp * per);
            fflush(stdout);
        }
    }
    if (rc != 0)
        fprintf(stderr, "rv-amlong-queue: an AM Long request failed\n");
    else if (rv_remote_free(w, dst) != RV_OK)
        rc = 1;
    rv_mem_free(w, src);
    rv_barrier(w);
    return rc;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = bench_options(ctx, argc, argv, "snWw",
                           "[-s SIZES] [-W DEPTH] [-n ITERS] [-w WARMUP] "
                           "[--csv]",
                           "4096,65536,1048576", 1, &opt);
    if (rc >= 0)
        return rc;
    if (opt.window > 65536) {
        fprintf(stderr, "%s: -W DEPTH is at most 65536\n", argv[0]);
        rv_finalize(ctx);
        return 2;
    }
    if (rv_rma_init(ctx) != RV_OK ||
        rv_am_register(ctx, "amlong_queue.req", on_req, NULL, &q.req) !=
            RV_OK ||
        rv_am_register(ctx, "amlong_queue.done", on_done, NULL, &q.done) !=
            RV_OK)
        return 1;
    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return status == RV_OK ? 0 : 1;
}
