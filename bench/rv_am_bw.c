/*
 * rv-am-bw: one-way active-message stream from worker 0 of rank 0 to
 * worker 0 of rank 1, with up to WINDOW sends in flight. The receiver
 * acknowledges the last message; the rate is messages (and bytes) over the
 * time from the first send to that acknowledgement.
 *
 * It mirrors ucx_perftest's ucp_am_bw, its baseline: every message of a
 * size goes out of one page-aligned send buffer whose pages are present
 * (written once, before the timing, and not per send), the handlers only
 * count, and WINDOW bounds the sends not yet completed, as ucx_perftest's
 * -O does.
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-am-bw [options]
 *   -s SIZES   comma-separated payload sizes (default 8,64,256,4096,65536,4194304)
 *   -n ITERS   messages per size (default: scaled to about 256 MiB, at
 *              least 2000 and at most 2000000)
 *   -W WINDOW  sends in flight (default 64)
 *   --csv      print "size,msgs_per_s,mb_per_s" rows only (MB = 10^6 B)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "rivet.h"

static bench_opts_t opt = {.window = 64};
static struct {
    rv_handler_id_t data, last, ack;
} bw;
static long received, acks;

static rv_status_t on_data(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    received++;
    return RV_OK;
}

/* The last message of a round, which carries the round's count, goes to
 * a handler of its own, so the other messages' payload is not read. */
static rv_status_t on_last(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    long expect;
    (void)arg;
    received++;
    memcpy(&expect, msg->data, sizeof(expect));
    if (expect != received)
        fprintf(stderr, "rv-am-bw: %ld of %ld messages arrived\n", received,
                expect);
    received = 0;
    return rv_send(w, msg->src, bw.ack, NULL, 0, NULL);
}

static rv_status_t on_ack(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    acks++;
    return RV_OK;
}

/* Sends one round of n messages; returns seconds until acknowledged.
 * The last message comes from its own buffer, which carries the round's
 * count: in-flight rendezvous sends still read @p buf. */
static double send_round(rv_worker_t *w, rv_tid_t peer, const char *buf,
                         char *last, size_t size, long n)
{
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    long want = acks + 1;
    memcpy(last, &n, sizeof(n));
    double t0 = bench_now_s();
    for (long i = 0; i < n; i++) {
        while (atomic_load(&sync.pending) >= opt.window)
            rv_progress(w);
        bool final = i == n - 1;
        if (rv_send(w, peer, final ? bw.last : bw.data, final ? last : buf,
                    size, &sync) != RV_OK)
            return -1;
    }
    rv_sync_wait(w, &sync);
    while (acks < want)
        rv_progress(w);
    return bench_now_s() - t0;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    (void)arg;
    if (rv_worker_tid(w) != 0)
        return 0;

    rv_tid_t peer = rv_tid_make(ctx, 1, 0);
    if (!opt.csv) {
        printf("rivet AM bandwidth: %d processes, window %ld\n", rv_size(ctx),
               opt.window);
        printf("transport: %s\n", rv_context_describe(ctx));
        printf("%10s %10s %14s %14s\n", "size", "messages", "msgs/s", "MB/s");
    } else {
        printf("size,msgs_per_s,mb_per_s\n");
    }
    for (int s = 0; s < opt.nsizes; s++) {
        size_t size = opt.sizes[s];
        long n = bench_iters(&opt, size, 256u << 20, 2000, 2000000);
        char *buf = bench_buffer(size), *last = bench_buffer(size);
        if (buf == NULL || last == NULL)
            return 1;
        double t = send_round(w, peer, buf, last, size, n / 10 + 1); /* warm-up */
        if (t >= 0)
            t = send_round(w, peer, buf, last, size, n);
        free(buf);
        free(last);
        if (t < 0)
            return 1;
        double rate = (double)n / t;
        if (opt.csv)
            printf("%zu,%.0f,%.1f\n", size, rate, rate * (double)size / 1e6);
        else
            printf("%10zu %10ld %14.0f %14.1f\n", size, n, rate,
                   rate * (double)size / 1e6);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;

    int rc = bench_options(ctx, argc, argv, "snW",
                           "[-s SIZES] [-n ITERS] [-W WINDOW] [--csv]",
                           "8,64,256,4096,65536,4194304", sizeof(long), &opt);
    if (rc >= 0)
        return rc;
    /* Both handlers only count or reply: they run inline, in the
     * transport's receive callback, like ucp_am_bw's. */
    if (rv_handler_register(ctx, "ambw.data", on_data, NULL,
                            RV_HANDLER_INLINE, &bw.data) ||
        rv_handler_register(ctx, "ambw.last", on_last, NULL,
                            RV_HANDLER_INLINE, &bw.last) ||
        rv_handler_register(ctx, "ambw.ack", on_ack, NULL, RV_HANDLER_INLINE,
                            &bw.ack))
        return 1;

    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return status == RV_OK ? 0 : 1;
}
