/*
 * rv-amlong: GASNet testam's "G" pattern for rivet's AM Long
 * (rv_put_handler): worker 0 of rank 0 sends an AM Long request of SIZE
 * bytes from its registered buffer into rank 1's, whose handler answers
 * with an AM Long reply of SIZE bytes sent from the buffer the request
 * just landed in (call->buf) into rank 0's buffer, the one its requests
 * leave from; the next request goes when the reply's handler has run.
 * As in testam, each payload is sent from memory the other side just
 * wrote, so it crosses between the processes' cores both ways every round
 * trip, and the payload is neither initialised nor checked. The protocol
 * is the job's rma.am_long_protocol (reassembly | put_sync_send).
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-amlong [options]
 *   -s SIZES   comma-separated payload sizes (default 0,1,...,1048576:
 *              powers of two)
 *   -n ITERS   round trips per size (default: 20000, fewer for large
 *              sizes: about 1 GiB moved, at least 1000)
 *   -w WARMUP  untimed round trips first (default 1000)
 *   --csv      print "size,rtt_us,bw_mb_per_s" rows only (bandwidth: the
 *              payload bytes moved both ways over the time, 1 MB = 10^6 B)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rv_rma.h"

static bench_opts_t opt = {.warmup = 1000, .window = 1};
static struct {
    rv_handler_id_t req, rep, addr;
    void *mine;            /* this worker's buffer: requests (rank 0) and
                              replies (rank 1) leave from it, replies
                              (rank 0) and requests (rank 1) land in it */
    rv_rptr_t mine_p, peer_p;
    volatile long replies;
} al;

static rv_status_t on_addr(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)arg;
    memcpy(call->ret, &al.mine_p, sizeof(al.mine_p));
    call->ret_len = sizeof(al.mine_p);
    return RV_OK;
}

/** Rank 1: replies from the buffer the request landed in (testam's
 * ping_longhandler: ReplyLong(token, ..., buf, nbytes, reply_addr)). */
static rv_status_t on_req(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    return rv_put_handler(w, call->src, al.rep, NULL, 0, al.peer_p,
                          call->buf, call->buf_len, NULL, 0);
}

static rv_status_t on_rep(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)call;
    (void)arg;
    al.replies++;
    return RV_OK;
}

static size_t max_size(void)
{
    size_t max = 1;
    for (int s = 0; s < opt.nsizes; s++)
        max = opt.sizes[s] > max ? opt.sizes[s] : max;
    return max;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    (void)arg;
    if (rv_worker_local(w) != 0)
        return 0;
    rv_tid_t peer = rv_tid_make(ctx, 1 - rv_rank(ctx), 0);
    al.mine = rv_mem_alloc(w, max_size(), &al.mine_p);
    if (al.mine == NULL)
        return 1;
    rv_barrier(w);
    if (rv_call_return(w, peer, al.addr, NULL, 0, &al.peer_p,
                       sizeof(al.peer_p), NULL, 0) != RV_OK)
        return 1;
    rv_barrier(w);
    if (rv_rank(ctx) != 0) {
        rv_barrier(w); /* serves requests until rank 0 is done */
        return 0;
    }

    char proto[RV_CONFIG_STR_MAX];
    rv_config_get(rv_context_config(ctx), "rma.am_long_protocol", proto,
                  sizeof(proto));
    if (opt.csv) {
        printf("size,rtt_us,bw_mb_per_s\n");
    } else {
        printf("rivet AM Long ping-pong (%s): transport %s\n", proto,
               rv_context_describe(ctx));
        printf("%10s %10s %12s %12s\n", "size", "iters", "rtt(us)", "MB/s");
    }
    for (int s = 0; s < opt.nsizes; s++) {
        size_t size = opt.sizes[s];
        long n = bench_iters(&opt, size, 1u << 30, 1000, 20000);
        double t0 = 0;
        for (long i = 0; i < opt.warmup + n; i++) {
            if (i == opt.warmup)
                t0 = bench_now_s();
            long want = al.replies + 1;
            if (rv_put_handler(w, peer, al.req, NULL, 0, al.peer_p,
                               al.mine, size, NULL, 0) != RV_OK)
                return 1;
            while (al.replies < want)
                rv_progress(w);
        }
        double t = bench_now_s() - t0;
        double rtt = t / (double)n * 1e6;
        double bw = 2.0 * (double)size * (double)n / t / 1e6;
        if (opt.csv)
            printf("%zu,%.3f,%.1f\n", size, rtt, bw);
        else
            printf("%10zu %10ld %12.3f %12.1f\n", size, n, rtt, bw);
        fflush(stdout);
    }
    rv_barrier(w);
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = bench_options(ctx, argc, argv, "snw",
                           "[-s SIZES] [-n ITERS] [-w WARMUP] [--csv]",
                           "0,1,2,4,8,16,32,64,128,256,512,1024,2048,4096,"
                           "8192,16384,32768,65536,131072,262144,524288,"
                           "1048576",
                           0, &opt);
    if (rc >= 0)
        return rc;
    if (rv_rma_init(ctx) != RV_OK ||
        rv_am_register(ctx, "amlong.req", on_req, NULL, &al.req) != RV_OK ||
        rv_am_register(ctx, "amlong.rep", on_rep, NULL, &al.rep) != RV_OK ||
        rv_am_register(ctx, "amlong.addr", on_addr, NULL, &al.addr) != RV_OK)
        return 1;
    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return status == RV_OK ? 0 : 1;
}
