/*
 * rv-verbs-bw: Seriema's Fig. 2, RDMA WRITE message rate against message
 * size over one RC connection, from rank 0 to rank 1, three ways in one
 * program run (the same 2 processes, the same device):
 *   all_signaled  raw libibverbs on a QP of its own: every WR signaled,
 *                 up to DEPTH-1 in flight, the CQ polled when the send
 *                 queue is full (one completion per message)
 *   manual        the same, but one WR in INTERVAL signaled and polled
 *                 (selective signaling by hand, Seriema's "DTutils (+ss)")
 *   manual_copy   manual, but each message first copied from the source
 *                 into the next slot of the registered buffer, which it
 *                 walks as rivet walks its bounce ring (not in the default
 *                 list: it tells the cost of that copy from rivet's own)
 *   automatic     rivet's verbs transport through the transport interface:
 *                 ops->put into rank 1's registered memory, signaling and
 *                 bounce buffers (circular allocator, flush numbers) left
 *                 to rivet ("DTutils (auto)"); rv_progress every PROGRESS
 *                 puts, then one ops->flush
 * Every mode writes from one source buffer to successive slots of a 1 MiB
 * target region, inline when the size fits the QP's max_inline_data (as
 * rivet's put does), and ends once the last write has completed (raw: its
 * signaled completion; automatic: the flush). The rate is transmissions
 * over that time. Rank 1 sleeps in between progress polls meanwhile. The
 * table also shows rank 0's resident memory after each point (rivet's
 * bounce memory lives there).
 *
 *   rivetrun -c configs/test-verbs.yaml build/bin/rv-verbs-bw [options]
 *   -s SIZES     comma-separated sizes (default 8,16,...,4096)
 *   -n ITERS     transmissions per size and mode (default 131072)
 *   -w WARMUP    untimed transmissions first (default 4096)
 *   -m MODES     modes, in the order run at each size
 *                (default all_signaled,manual,automatic)
 *   -W DEPTH     raw send queue depth (default 512, as rivet's QPs)
 *   -I INTERVAL  manual's signal interval (default
 *                transport.verbs.signal_interval)
 *   -P PROGRESS  automatic: rv_progress every PROGRESS puts (default
 *                transport.verbs.signal_interval)
 *   --csv        print "mode,size,msgs_per_s" rows only, and notes (the
 *                settings, rank 0's resident memory after each point) on
 *                lines starting with #
 * The raw QP uses transport.verbs.device, port and gid_index (-1: the
 * RoCE v2 GID of an IPv4 address) of the job file.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "raw_verbs.h"

#define REGION (1u << 20)
#define POLL 32

enum { ALL_SIGNALED, MANUAL, AUTOMATIC, MANUAL_COPY, NMODES };
static const char *const mode_names[NMODES] = {"all_signaled", "manual",
                                               "automatic", "manual_copy"};

static struct {
    bench_opts_t b;
    int modes[NMODES], nmodes;
    long depth, interval, progress;
} opt = {.b = {.iters = 131072, .warmup = 4096}, .depth = 512};

static raw_verbs_t raw; /* ranks 0 and 1: a QP of their own */

static struct {
    rv_handler_id_t done;
} h;
static bench_region_t target; /* rank 1's region */
static volatile int finished;

static rv_status_t on_done(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    finished = 1;
    return RV_OK;
}

static void done_cb(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* ---------------------------------------------------------------------- */
/* Raw libibverbs                                                          */

/* Polls until every WR up to @p want completed; *done: the highest
 * completed (WRs complete in order, wr_id is the sequence number). */
static int raw_wait(uint64_t *done, uint64_t want)
{
    struct ibv_wc wc[POLL];
    while (*done < want) {
        int k = ibv_poll_cq(raw.cq, POLL, wc);
        if (k < 0)
            return -1;
        for (int i = 0; i < k; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "rv-verbs-bw: RDMA write failed: %s\n",
                        ibv_wc_status_str(wc[i].status));
                return -1;
            }
            if (wc[i].wr_id > *done)
                *done = wc[i].wr_id;
        }
    }
    return 0;
}

/* n RDMA WRITEs of @p size, one in @p interval signaled (and the last);
 * with @p copy_from, each copied first into the next slot of the
 * registered buffer (a slot is reused only once its WR completed);
 * returns seconds, or -1. */
static double raw_run(size_t size, long n, long interval,
                      const void *copy_from)
{
    struct ibv_sge sge = {.addr = (uintptr_t)raw.buf, .length =
                              (uint32_t)size, .lkey = raw.mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE}, *bad;
    unsigned inl = size <= raw.max_inline ? IBV_SEND_INLINE : 0;
    uint64_t slots = REGION / size, done = 0, last = (uint64_t)n;
    uint64_t window = (uint64_t)opt.depth - 1;
    if (copy_from != NULL && window > slots - 1)
        window = slots - 1;
    wr.wr.rdma.rkey = raw.peer.rkey;
    double t0 = bench_now_s();
    for (uint64_t seq = 1; seq <= last; seq++) {
        if (seq - done > window && raw_wait(&done, seq - window) != 0)
            return -1;
        if (copy_from != NULL) {
            sge.addr = (uintptr_t)raw.buf + (seq - 1) % slots * size;
            memcpy((void *)(uintptr_t)sge.addr, copy_from, size);
        }
        wr.wr_id = seq;
        wr.send_flags = inl;
        if (seq % (uint64_t)interval == 0 || seq == last)
            wr.send_flags |= IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = raw.peer.addr + (seq - 1) % slots * size;
        int rc = ibv_post_send(raw.qp, &wr, &bad);
        if (rc != 0) {
            fprintf(stderr, "rv-verbs-bw: ibv_post_send: %s\n", strerror(rc));
            return -1;
        }
    }
    if (raw_wait(&done, last) != 0)
        return -1;
    return bench_now_s() - t0;
}

/* ---------------------------------------------------------------------- */
/* rivet                                                                   */

/* n ops->put of @p size to rank 1, then one flush; returns seconds. */
static double auto_run(rv_worker_t *w, const void *src, size_t size, long n,
                       rv_trkey_t *rkey)
{
    rv_context_t *ctx = rv_worker_context(w);
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    rv_tid_t peer = rv_tid_make(ctx, 1, 0);
    uint64_t slots = REGION / size;
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    double t0 = bench_now_s();
    for (long i = 0; i < n; i++) {
        atomic_fetch_add(&sync.pending, 1);
        rv_status_t st = ops->put(tw, peer,
                                  target.addr + (uint64_t)i % slots * size, rkey,
                                  src, size, done_cb, &sync);
        if (st != RV_INPROGRESS)
            atomic_fetch_sub(&sync.pending, 1);
        if (st < 0)
            return -1;
        if ((i + 1) % opt.progress == 0)
            rv_progress(w);
    }
    if (rv_sync_wait(w, &sync) != RV_OK)
        return -1;
    rv_sync_init(&sync, 1);
    rv_status_t st = ops->flush(tw, peer, done_cb, &sync);
    if (st == RV_INPROGRESS)
        st = rv_sync_wait(w, &sync);
    return st == RV_OK ? bench_now_s() - t0 : -1;
}

/* This process's resident memory (rivet's bounce ring grows in it). */
static double rss_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static double run(rv_worker_t *w, int mode, const void *src, size_t size,
                  long n, rv_trkey_t *rkey)
{
    switch (mode) {
    case ALL_SIGNALED: return raw_run(size, n, 1, NULL);
    case MANUAL: return raw_run(size, n, opt.interval, NULL);
    case MANUAL_COPY: return raw_run(size, n, opt.interval, src);
    default: return auto_run(w, src, size, n, rkey);
    }
}

/* Rank 1: publishes a region, then waits for rank 0 to finish. */
static int serve(rv_worker_t *w)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    rv_tmem_t *mem;
    void *region;
    if (ops->mem_alloc(tp, REGION, &mem, &region) != RV_OK)
        return 1;
    memset(region, 1, REGION);
    int rc = bench_region_publish(w, &target, rv_tid_make(ctx, 0, 0), mem,
                                  region) == 0 ? 0 : 1;
    while (rc == 0 && !finished) /* nothing to do: one-sided writes */
        if (rv_progress(w) == 0)
            usleep(200);
    rc = rv_barrier(w) == RV_OK ? rc : 1;
    ops->mem_deregister(tp, mem);
    return rc;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    int rc = 0;
    (void)arg;
    if (rv_worker_local(w) != 0 || rv_rank(ctx) > 1)
        return rv_barrier(w) == RV_OK ? 0 : 1;
    if (rv_rank(ctx) == 1)
        return serve(w);

    rv_trkey_t *rkey = NULL;
    if (bench_region_fetch(w, &target, rv_tid_make(ctx, 1, 0), &rkey) != 0)
        return 1;
    void *src = calloc(1, REGION);
    if (src == NULL)
        return 1;
    if (opt.b.csv) {
        printf("# %s; raw QP: depth %ld, max_inline %u B (writes up to it "
               "inline), manual signal interval %ld; automatic: rv_progress "
               "every %ld puts; %ld transmissions per point\n",
               rv_context_describe(ctx), opt.depth, raw.max_inline,
               opt.interval, opt.progress, opt.b.iters);
        printf("mode,size,msgs_per_s\n");
    } else {
        printf("transport: %s\n", rv_context_describe(ctx));
        printf("raw QP on %s: depth %ld, max_inline %u B, manual: one WR in "
               "%ld signaled\n", raw.devname, opt.depth, raw.max_inline,
               opt.interval);
        printf("%-13s %6s %10s %14s %10s %8s\n", "mode", "size", "msgs",
               "msgs/s", "MB/s", "RSS MiB");
    }
    fflush(stdout);
    for (int s = 0; s < opt.b.nsizes && rc == 0; s++) {
        size_t size = opt.b.sizes[s];
        for (int k = 0; k < opt.nmodes && rc == 0; k++) {
            int mode = opt.modes[k];
            double t = opt.b.warmup > 0
                           ? run(w, mode, src, size, opt.b.warmup, rkey)
                           : 0;
            if (t >= 0)
                t = run(w, mode, src, size, opt.b.iters, rkey);
            if (t < 0) {
                fprintf(stderr, "rv-verbs-bw: %s at %zu B failed\n",
                        mode_names[mode], size);
                rc = 1;
                break;
            }
            double rate = (double)opt.b.iters / t;
            if (opt.b.csv)
                printf("%s,%zu,%.0f\n# %s %zu: rank 0 RSS %.0f MiB\n",
                       mode_names[mode], size, rate, mode_names[mode], size,
                       rss_mib());
            else
                printf("%-13s %6zu %10ld %14.0f %10.2f %8.0f\n",
                       mode_names[mode], size, opt.b.iters, rate,
                       rate * (double)size / 1e6, rss_mib());
            fflush(stdout);
        }
    }
    free(src);
    ops->rkey_destroy(tw, rkey);
    if (rv_send(w, rv_tid_make(ctx, 1, 0), h.done, NULL, 0, NULL) != RV_OK)
        rc = 1;
    return rv_barrier(w) == RV_OK ? rc : 1;
}

/* -m MODES: names separated by commas. */
static int parse_modes(const char *text)
{
    opt.nmodes = bench_parse_names("rv-verbs-bw", text, mode_names, NMODES,
                                   opt.modes);
    return opt.nmodes > 0 ? 0 : -1;
}

static int options(rv_context_t *ctx, int argc, char **argv)
{
    static const struct option longs[] = {{"csv", no_argument, NULL, 'C'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    const char *sizes = "8,16,32,64,128,256,512,1024,2048,4096";
    int64_t interval = 0;
    rv_config_get_int(rv_context_config(ctx), "transport.verbs.signal_interval",
                      &interval);
    long dflt = (long)interval;
    int c, bad = 0;
    opt.interval = opt.progress = dflt;
    parse_modes("all_signaled,manual,automatic");
    while (!bad && (c = getopt_long(argc, argv, "s:n:w:m:W:I:P:h", longs,
                                    NULL)) != -1) {
        switch (c) {
        case 's': sizes = optarg; break;
        case 'n': opt.b.iters = atol(optarg); break;
        case 'w': opt.b.warmup = atol(optarg); break;
        case 'm': bad = parse_modes(optarg) != 0; break;
        case 'W': opt.depth = atol(optarg); break;
        case 'I': opt.interval = atol(optarg); break;
        case 'P': opt.progress = atol(optarg); break;
        case 'C': opt.b.csv = 1; break;
        default: bad = 1; break;
        }
    }
    if (!bad) {
        opt.b.nsizes = bench_parse_sizes(sizes, opt.b.sizes, 32, 1);
        bad = opt.b.nsizes <= 0 || opt.b.iters < 1 || opt.b.warmup < 0 ||
              opt.depth < 2 || opt.interval < 1 ||
              opt.interval > opt.depth - 1 || opt.progress < 1;
        for (int s = 0; !bad && s < opt.b.nsizes; s++)
            bad = opt.b.sizes[s] > 65536;
    }
    if (bad) {
        fprintf(stderr, "usage: rivetrun -c JOB.yaml %s [-s SIZES (each at "
                        "most 65536)] [-n ITERS] [-w WARMUP] [-m MODES] "
                        "[-W DEPTH] [-I INTERVAL (< DEPTH)] [-P PROGRESS] "
                        "[--csv]\n", argv[0]);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = options(ctx, argc, argv);
    if (rc != 0) {
        rv_finalize(ctx);
        return rc;
    }
    /* the raw connection, set up from the main thread through the
     * bootstrap; every rank takes part */
    raw_verbs_params_t rp = {.send_depth = (uint32_t)opt.depth,
                             .recv_depth = 1, .len = REGION,
                             .access = IBV_ACCESS_REMOTE_WRITE};
    rc = raw_verbs_setup(ctx, &raw, &rp, "rv-verbs-bw") != 0;
    if (rc == 0 &&
        (bench_region_register(ctx, "verbsbw.key", &target) != RV_OK ||
         rv_handler_register(ctx, "verbsbw.done", on_done, NULL, 0, &h.done) ||
         rv_job_run(ctx, worker, NULL) != RV_OK))
        rc = 1;
    raw_verbs_close(&raw);
    rv_finalize(ctx);
    return rc;
}
