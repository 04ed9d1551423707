/*
 * rv-pingpong: active-message ping-pong between worker 0 of rank 0 and
 * worker 0 of rank 1. Prints the one-way latency (half the round trip,
 * median and mean) and the round trips per second for each size.
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-pingpong [options]
 *   -s SIZES   comma-separated payload sizes in bytes (default 8,4096)
 *   -n ITERS   round trips per size (default 20000)
 *   -w WARMUP  untimed round trips first (default 1000)
 *   --echo     reply with the received bytes (default: reply from a buffer
 *              of the responder's own, as ucx_perftest's ucp_am_lat does, so
 *              the two measure the same thing)
 *   --csv      print "size,lat_median_us,lat_mean_us,rtt_per_s" rows only
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "rivet.h"

static bench_opts_t opt = {.iters = 20000, .warmup = 1000, .window = 1};
static struct {
    char *reply;                /* the responder's own reply buffer */
    rv_handler_id_t ping, pong;
} pp;
static volatile long pongs;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static rv_status_t on_ping(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    return rv_send(w, msg->src, pp.pong, opt.echo ? msg->data : pp.reply,
                   msg->len, NULL);
}

static rv_status_t on_pong(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    pongs++;
    return RV_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_size(rv_worker_t *w, rv_tid_t peer, size_t size, double *rtt)
{
    char *buf = bench_buffer(size);
    if (buf == NULL)
        return 1;
    for (long i = 0; i < opt.warmup + opt.iters; i++) {
        long want = pongs + 1;
        double t0 = now_us();
        if (rv_send(w, peer, pp.ping, buf, size, NULL) != RV_OK) {
            free(buf);
            return 1;
        }
        while (pongs < want)
            rv_progress(w);
        if (i >= opt.warmup)
            rtt[i - opt.warmup] = now_us() - t0;
    }
    free(buf);
    return 0;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    (void)arg;
    if (rv_worker_tid(w) != 0)
        return 0;

    rv_tid_t peer = rv_tid_make(ctx, 1, 0);
    double *rtt = malloc(sizeof(double) * (size_t)opt.iters);
    if (rtt == NULL)
        return 1;
    if (!opt.csv) {
        printf("rivet ping-pong: %d processes, bootstrap %s\n", rv_size(ctx),
               rv_bootstrap_name(ctx));
        printf("transport: %s\n", rv_context_describe(ctx));
        printf("%10s %10s %14s %14s %14s\n", "size", "iterations",
               "latency(us)", "mean(us)", "round trips/s");
    } else {
        printf("size,lat_median_us,lat_mean_us,rtt_per_s\n");
    }
    for (int s = 0; s < opt.nsizes; s++) {
        if (run_size(w, peer, opt.sizes[s], rtt) != 0) {
            free(rtt);
            return 1;
        }
        double sum = 0;
        for (long i = 0; i < opt.iters; i++)
            sum += rtt[i];
        qsort(rtt, (size_t)opt.iters, sizeof(double), cmp_double);
        double median = rtt[opt.iters / 2] / 2, mean = sum / (double)opt.iters / 2;
        double rate = (double)opt.iters / (sum / 1e6);
        if (opt.csv)
            printf("%zu,%.3f,%.3f,%.0f\n", opt.sizes[s], median, mean, rate);
        else
            printf("%10zu %10ld %14.3f %14.3f %14.0f\n", opt.sizes[s],
                   opt.iters, median, mean, rate);
        fflush(stdout);
    }
    free(rtt);
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;

    int rc = bench_options(ctx, argc, argv, "snwE",
                           "[-s SIZES] [-n ITERS] [-w WARMUP] [--echo] [--csv]",
                           "8,4096", 0, &opt);
    if (rc >= 0)
        return rc;
    if (opt.iters < 1) {
        rv_finalize(ctx);
        return 2;
    }
    size_t max = 1;
    for (int s = 0; s < opt.nsizes; s++)
        max = opt.sizes[s] > max ? opt.sizes[s] : max;
    pp.reply = bench_buffer(max);
    if (pp.reply == NULL)
        return 1;
    /* Both handlers only count or reply: they run inline, in the
     * transport's receive callback, like ucp_am_lat's. */
    if (rv_handler_register(ctx, "pingpong.ping", on_ping, NULL,
                            RV_HANDLER_INLINE, &pp.ping) != RV_OK ||
        rv_handler_register(ctx, "pingpong.pong", on_pong, NULL,
                            RV_HANDLER_INLINE, &pp.pong) != RV_OK)
        return 1;

    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    free(pp.reply);
    return status == RV_OK ? 0 : 1;
}
