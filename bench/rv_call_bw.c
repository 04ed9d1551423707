/*
 * rv-call-bw: call throughput of the invocation layer (Seriema's Table 2).
 * Worker 0 of rank 0 streams calls of S argument bytes to worker 0 of
 * rank 1 with rv_call, one synchronizer for all of them (progressing
 * while more than WINDOW are unfinished), then flushes, waits for the
 * synchronizer, and makes one RV_NOTIFY_CONSUMED call: calls run in FIFO
 * order, so when that returns every earlier call ran. The rate is calls
 * (and argument bytes) over the time from the first call to that return.
 * The path and aggregation come from the job (am.path, am.aggregation, or
 * RIVET_AM_PATH, RIVET_AM_AGGREGATION), not from options.
 *
 *   rivetrun -c configs/pingpong-shm.yaml build/bin/rv-call-bw [options]
 *   -s SIZES   comma-separated argument sizes (default 8,64,256)
 *   -n ITERS   calls per size (default: about 64 MiB, at least 200000 and
 *              at most 4000000)
 *   -w WARMUP  untimed calls first, per size (default 20000)
 *   -W WINDOW  calls whose arguments may still be in use before the sender
 *              progresses (default 1024): on the send path, transport
 *              sends that have not left yet, which would otherwise queue
 *              up in the transport without bound
 *   --csv      print "size,calls_per_s,mb_per_s" rows only (MB = 10^6 B)
 *   --both     both directions at once: worker 0 of rank 1 streams the
 *              same calls to worker 0 of rank 0 meanwhile, and each runs
 *              the other's calls while it sends; the figures are rank 0's
 *              direction
 *
 * The receiver checks that it ran every call of a round, in order (calls
 * of 8 bytes and more carry their sequence number), and fails the job
 * otherwise. A call that finds the ring full (RV_ERR_AGAIN, am.on_full:
 * fail) is retried after progressing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "rivet.h"
#include "rv_am.h"

/* Argument bytes one round keeps distinct: every call in flight has its
 * own arguments; past this, the round drains before reusing them. */
#define ARGS_BYTES (64u << 20)

static bench_opts_t opt = {.warmup = 20000, .window = 1024};
static struct {
    rv_handler_id_t data, end;
} cb;

/* Receiver state (worker 0 of rank 1). */
static struct {
    uint64_t calls, bytes, misordered;
    long rounds;
    int failed;
} rx;

static rv_status_t on_data(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)arg;
    if (call->args_len >= sizeof(uint64_t)) {
        uint64_t seq;
        memcpy(&seq, call->args, sizeof(seq));
        if (seq != rx.calls && rx.misordered++ == 0)
            fprintf(stderr, "rv-call-bw: call %llu arrived as number %llu\n",
                    (unsigned long long)seq, (unsigned long long)rx.calls);
    }
    rx.calls++;
    rx.bytes += call->args_len;
    return RV_OK;
}

/* The end of a round: its arguments are the calls sent and their size. */
static rv_status_t on_end(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t sent[2];
    (void)w;
    (void)arg;
    memcpy(sent, call->args, sizeof(sent));
    if (rx.calls != sent[0] || rx.bytes != sent[0] * sent[1] ||
        rx.misordered != 0) {
        fprintf(stderr, "rv-call-bw: size %llu: %llu calls of %llu sent "
                        "arrived (%llu bytes, %llu out of order)\n",
                (unsigned long long)sent[1], (unsigned long long)rx.calls,
                (unsigned long long)sent[0], (unsigned long long)rx.bytes,
                (unsigned long long)rx.misordered);
        rx.failed = 1;
    }
    rx.calls = rx.bytes = rx.misordered = 0;
    rx.rounds++;
    return RV_OK;
}

/* Makes one call, retrying while the ring is full. */
static rv_status_t call_retry(rv_worker_t *w, rv_tid_t peer,
                              rv_handler_id_t h, const void *args,
                              size_t size, rv_sync_t *sync, unsigned flags)
{
    rv_status_t st;
    while ((st = rv_call(w, peer, h, args, size, sync, flags)) ==
           RV_ERR_AGAIN)
        rv_progress(w);
    return st;
}

/* Waits until every call made so far has left: their arguments are free. */
static rv_status_t drain(rv_worker_t *w, rv_sync_t *sync)
{
    rv_status_t st = rv_flush(w, RV_TID_ALL);
    if (st == RV_OK)
        st = rv_sync_wait(w, sync);
    return st;
}

/* One round of n calls of size bytes from @p args (room for `slots`
 * calls); *t_p: the seconds until the receiver ran them all. */
static rv_status_t run_round(rv_worker_t *w, rv_tid_t peer, char *args,
                             long slots, size_t size, long n, double *t_p)
{
    rv_status_t st = RV_OK;
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    double t0 = bench_now_s();
    for (long i = 0; i < n && st == RV_OK; i++) {
        char *a = args + (size_t)(i % slots) * size;
        if (i > 0 && i % slots == 0 && (st = drain(w, &sync)) != RV_OK)
            break;
        while (atomic_load_explicit(&sync.pending, memory_order_relaxed) >=
               opt.window)
            rv_progress(w);
        if (size >= sizeof(uint64_t)) {
            uint64_t seq = (uint64_t)i;
            memcpy(a, &seq, sizeof(seq));
        }
        st = call_retry(w, peer, cb.data, a, size, &sync, 0);
    }
    uint64_t sent[2] = {(uint64_t)n, (uint64_t)size};
    if (st == RV_OK)
        st = drain(w, &sync);
    if (st == RV_OK)
        st = call_retry(w, peer, cb.end, sent, sizeof(sent), NULL,
                        RV_NOTIFY_CONSUMED);
    *t_p = bench_now_s() - t0;
    return st;
}

static int receiver(rv_worker_t *w)
{
    long rounds = (long)opt.nsizes * (opt.warmup > 0 ? 2 : 1);
    while (rx.rounds < rounds)
        rv_progress(w);
    return rx.failed;
}

static int sender(rv_worker_t *w, rv_tid_t peer)
{
    rv_context_t *ctx = rv_worker_context(w);
    const rv_config_t *cfg = rv_context_config(ctx);
    bool quiet = rv_rank(ctx) != 0;
    if (quiet) {
    } else if (!opt.csv) {
        char path[RV_CONFIG_STR_MAX], agg[RV_CONFIG_STR_MAX];
        rv_config_get(cfg, "am.path", path, sizeof(path));
        rv_config_get(cfg, "am.aggregation", agg, sizeof(agg));
        printf("rivet call throughput: %d processes, am.path %s, "
               "am.aggregation %s\n", rv_size(ctx), path, agg);
        printf("transport: %s\n", rv_context_describe(ctx));
        printf("%10s %10s %14s %14s\n", "size", "calls", "calls/s", "MB/s");
    } else {
        printf("size,calls_per_s,mb_per_s\n");
    }
    for (int s = 0; s < opt.nsizes; s++) {
        size_t size = opt.sizes[s];
        long n = bench_iters(&opt, size, 64u << 20, 200000, 4000000);
        long most = n > opt.warmup ? n : opt.warmup;
        long slots = size ? (long)(ARGS_BYTES / size) : most;
        if (slots > most)
            slots = most;
        if (slots < 1)
            slots = 1;
        char *args = malloc((size_t)slots * (size ? size : 1));
        if (args == NULL)
            rv_abort(ctx, 1, "rv-call-bw: out of memory");
        memset(args, 0x5a, (size_t)slots * (size ? size : 1)); /* fault in */
        double t;
        rv_status_t st = RV_OK;
        if (opt.warmup > 0)
            st = run_round(w, peer, args, slots, size, opt.warmup, &t);
        if (st == RV_OK)
            st = run_round(w, peer, args, slots, size, n, &t);
        free(args);
        if (st != RV_OK) {
            fprintf(stderr, "rv-call-bw: a call of %zu bytes failed: %s\n",
                    size, rv_status_str(st));
            rv_abort(ctx, 1, "rv-call-bw: a call failed");
        }
        double rate = (double)n / t;
        if (quiet)
            continue;
        if (opt.csv)
            printf("%zu,%.0f,%.1f\n", size, rate, rate * (double)size / 1e6);
        else
            printf("%10zu %10ld %14.0f %14.1f\n", size, n, rate,
                   rate * (double)size / 1e6);
        fflush(stdout);
    }
    return 0;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    (void)arg;
    rv_tid_t first = 0, second = rv_tid_make(ctx, 1, 0);
    if (rv_worker_tid(w) != first && rv_worker_tid(w) != second)
        return 0;
    if (rv_worker_tid(w) == second && !opt.both)
        return receiver(w);
    int rc = sender(w, rv_worker_tid(w) == first ? second : first);
    return opt.both ? rc | receiver(w) : rc;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;

    int rc = bench_options(ctx, argc, argv, "snwWB",
                           "[-s SIZES] [-n ITERS] [-w WARMUP] [-W WINDOW] "
                           "[--csv] [--both]",
                           "8,64,256", 0, &opt);
    if (rc >= 0)
        return rc;
    if (rv_am_register(ctx, "callbw.data", on_data, NULL, &cb.data) ||
        rv_am_register(ctx, "callbw.end", on_end, NULL, &cb.end))
        return 1;

    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return status == RV_OK ? 0 : 1;
}
