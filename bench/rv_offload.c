/*
 * rv-offload: the progress engine's modes measured as Endo and Taura
 * measure software offloading ("Evaluation"), on whatever progress.mode
 * the job file (or RIVET_PROGRESS_MODE) sets. Two processes; rank 1
 * serves, the worker threads of rank 0 are the requesters.
 *
 *   rivetrun -c configs/offload.yaml build/bin/rv-offload [options]
 *   -s SIZES  round-trip sizes (default 8,64,512,4096,32768,65536)
 *   -t SECS   seconds of the message-rate run (default 1)
 *   -W N      operations each requester keeps in flight (default 256)
 *   --rtt     measure round trips (worker 0 of rank 0 only)
 *
 * Prints CSV rows `metric,size,value`:
 *   rtt_us        round trip of an active message to rank 1 and back
 *                 (rivet's messages; the handler replies), per size
 *   msg_rate_mps  million 8-byte RDMA reads completed per second by all
 *                 requesters together, each with W in flight
 *   inject_us     time inside the read's post call, averaged
 *   idle_cpu_pct  CPU the process used over one idle second after the
 *                 traffic, in % of a core (getrusage)
 */
#include <getopt.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.h"
#include "rv_layer.h"

#define REGION (1u << 20)

static size_t sizes[32];
static int nsizes;
static double secs = 1.0;
static long window = 256;
static int do_rtt;

static bench_region_t target;
static rv_handler_id_t ping_id, pong_id;
static _Atomic long pongs;
static _Atomic uint64_t total_ops, total_inject_ns, total_calls;

static rv_status_t on_ping(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    struct iovec iov = {.iov_base = msg->data, .iov_len = msg->len};
    return rv_send_raw(w, msg->src, pong_id, NULL, 0, &iov, 1, RV_SEND_COPY,
                       NULL, NULL);
}

static rv_status_t on_pong(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    atomic_fetch_add(&pongs, 1);
    return RV_OK;
}

static double rtt_us(rv_worker_t *w, size_t size, long iters)
{
    rv_tid_t peer = rv_tid_make(rv_worker_context(w), 1, 0);
    void *buf = calloc(1, size);
    struct iovec iov = {.iov_base = buf, .iov_len = size};
    double t0 = 0;
    for (long i = -iters / 10; i < iters; i++) {
        if (i == 0)
            t0 = bench_now_s();
        long want = atomic_load(&pongs) + 1;
        if (rv_send_raw(w, peer, ping_id, NULL, 0, &iov, 1, RV_SEND_COPY, NULL,
                        NULL) != RV_OK)
            return -1;
        while (atomic_load(&pongs) < want)
            rv_progress(w);
    }
    double t = bench_now_s() - t0;
    free(buf);
    return t / (double)iters * 1e6;
}

typedef struct {
    long inflight;
    uint64_t done;
} rate_state_t;

static void read_done(void *arg, rv_status_t status)
{
    rate_state_t *s = arg;
    (void)status;
    s->inflight--;
    s->done++;
}

/* Keeps `window` 8-byte reads of rank 1's region in flight for `secs`. */
static int rate(rv_worker_t *w, rv_trkey_t *rkey)
{
    const rv_transport_ops_t *ops =
        rv_context_transport(rv_worker_context(w), NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    rv_tid_t peer = rv_tid_make(rv_worker_context(w), 1, 0);
    uint64_t *buf = calloc((size_t)window, sizeof(uint64_t));
    rate_state_t s = {0, 0};
    uint64_t calls = 0;
    double inject = 0, t_end = bench_now_s() + secs;
    size_t slot = 0;

    while (bench_now_s() < t_end) {
        /* Tops the window up once per round: a read that completes at
         * once (RV_OK) does not hold a slot. */
        for (long room = window - s.inflight; room > 0; room--) {
            uint64_t off = (uint64_t)(slot % (REGION / 8)) * 8;
            double a = bench_now_s();
            rv_status_t st = ops->get(tw, peer, &buf[slot++ % (size_t)window], 8,
                                      target.addr + off, rkey, read_done, &s);
            inject += bench_now_s() - a;
            calls++;
            if (st == RV_OK)
                s.done++;
            else if (st == RV_INPROGRESS)
                s.inflight++;
            else
                return -1;
        }
        rv_progress(w);
    }
    while (s.inflight > 0)
        rv_progress(w);
    atomic_fetch_add(&total_ops, s.done);
    atomic_fetch_add(&total_inject_ns, (uint64_t)(inject * 1e9));
    atomic_fetch_add(&total_calls, calls);
    free(buf);
    return 0;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    rv_tmem_t *mem = NULL;
    void *region = NULL;
    rv_trkey_t *rkey = NULL;
    int rc = 0;
    (void)arg;

    if (rv_rank(ctx) == 1 && rv_worker_local(w) == 0) {
        if (ops->mem_alloc(tp, REGION, &mem, &region) != RV_OK)
            return 1;
        memset(region, 1, REGION);
        for (int t = 0; t < rv_threads(ctx); t++)
            if (bench_region_publish(w, &target, rv_tid_make(ctx, 0, t), mem,
                                     region) != 0)
                return 1;
    }
    if (rv_rank(ctx) == 0 &&
        bench_region_fetch(w, &target, rv_tid_make(ctx, 1, 0), &rkey) != 0)
        return 1;
    rv_barrier(w);

    /* Round trips: worker 0 of rank 0 alone. */
    if (do_rtt && rv_rank(ctx) == 0 && rv_worker_local(w) == 0)
        for (int i = 0; i < nsizes && rc == 0; i++) {
            long iters = sizes[i] <= 4096 ? 5000 : 1000;
            double us = rtt_us(w, sizes[i], iters);
            rc = us < 0;
            printf("rtt_us,%zu,%.3f\n", sizes[i], us);
            fflush(stdout);
        }
    rv_barrier(w);

    /* Message rate and injection overhead: every requester at once. */
    if (rv_rank(ctx) == 0 && rc == 0)
        rc = rate(w, rkey);
    rv_barrier(w);
    if (rv_rank(ctx) == 0 && rv_worker_local(w) == 0) {
        double ops_n = (double)atomic_load(&total_ops);
        printf("msg_rate_mps,8,%.4f\n", ops_n / secs / 1e6);
        printf("inject_us,8,%.4f\n",
               (double)atomic_load(&total_inject_ns) / 1e3 /
                   (double)(atomic_load(&total_calls) + !total_calls));
        fflush(stdout);
    }
    if (rkey != NULL)
        ops->rkey_destroy(rv_worker_tworker(w), rkey);
    rv_barrier(w);

    /* Idle: nobody progresses for a second and a half; the middle second
     * is measured. */
    if (rv_rank(ctx) == 0 && rv_worker_local(w) == 0) {
        usleep(250000);
        double c0 = cpu_s(), t0 = bench_now_s();
        usleep(1000000);
        double c1 = cpu_s(), t1 = bench_now_s();
        usleep(250000);
        printf("idle_cpu_pct,0,%.3f\n", (c1 - c0) / (t1 - t0) * 100.0);
        fflush(stdout);
    } else {
        usleep(1500000);
    }
    rv_barrier(w);
    if (mem != NULL)
        ops->mem_deregister(tp, mem);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"rtt", no_argument, NULL, 'R'},
                                         {NULL, 0, NULL, 0}};
    const char *size_text = "8,64,512,4096,32768,65536";
    rv_context_t *ctx;
    int c;

    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    while ((c = getopt_long(argc, argv, "s:t:W:", opts, NULL)) != -1) {
        switch (c) {
        case 's': size_text = optarg; break;
        case 't': secs = atof(optarg); break;
        case 'W': window = atol(optarg); break;
        case 'R': do_rtt = 1; break;
        default:
            fprintf(stderr, "usage: rivetrun -c JOB.yaml %s [-s SIZES] "
                            "[-t SECS] [-W N] [--rtt]\n", argv[0]);
            rv_finalize(ctx);
            return 2;
        }
    }
    nsizes = bench_parse_sizes(size_text, sizes, 32, 1);
    if (nsizes <= 0 || secs <= 0 || window < 1 || rv_size(ctx) != 2) {
        fprintf(stderr, "rv-offload: 2 processes, sizes >= 1, -t > 0, "
                        "-W >= 1\n");
        rv_finalize(ctx);
        return 2;
    }
    if (bench_region_register(ctx, "offload.key", &target) != RV_OK ||
        rv_handler_register(ctx, "offload.ping", on_ping, NULL, 0,
                            &ping_id) != RV_OK ||
        rv_handler_register(ctx, "offload.pong", on_pong, NULL, 0,
                            &pong_id) != RV_OK)
        return 1;
    rv_status_t status = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return status == RV_OK ? 0 : 1;
}
