/*
 * rv-verbs-bw: Seriema's Fig. 2, RDMA WRITE message rate against message
 * size over one RC connection, from rank 0 to rank 1, three ways in one
 * program run (the same 2 processes, the same device):
 *   all_signaled  raw libibverbs on a QP of its own: every WR signaled,
 *                 up to DEPTH-1 in flight, the CQ polled when the send
 *                 queue is full (one completion per message)
 *   manual        the same, but one WR in INTERVAL signaled and polled
 *                 (selective signaling by hand, Seriema's "DTutils (+ss)")
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
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

#define REGION (1u << 20)
#define MAX_INLINE 220 /* asked for, as rivet's QPs */
#define POLL 32

enum { ALL_SIGNALED, MANUAL, AUTOMATIC, NMODES };
static const char *const mode_names[NMODES] = {"all_signaled", "manual",
                                               "automatic"};

static struct {
    bench_opts_t b;
    int modes[NMODES], nmodes;
    long depth, interval, progress;
} opt = {.b = {.iters = 131072, .warmup = 4096}, .depth = 512};

/* Raw libibverbs resources of ranks 0 and 1. */
static struct {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;   /* rank 0: the source; rank 1: the target */
    void *buf;
    int port, gid_index;
    uint32_t max_inline;
    char devname[64];
} raw;

/* What a rank publishes through the bootstrap. */
typedef struct {
    uint8_t gid[16];
    uint64_t addr;
    uint32_t rkey, qpn, psn;
    uint16_t lid;
    uint8_t mtu, valid;
} raw_addr_t;

static raw_addr_t peer_addr; /* rank 0: rank 1's */

static struct {
    rv_handler_id_t key, done;
} h;
static uint8_t keybuf[256];
static size_t keylen;
static uint64_t raddr;
static volatile int have_key, finished;

static rv_status_t on_key(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)arg;
    memcpy(&raddr, msg->data, sizeof(raddr));
    keylen = msg->len - sizeof(raddr);
    memcpy(keybuf, (uint8_t *)msg->data + sizeof(raddr), keylen);
    have_key = 1;
    return RV_OK;
}

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

static bool gid_is_ipv4(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
                                       0xff};
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* Opens the device, creates the QP (INIT) and registers the buffer; fills
 * @p me. */
static int raw_open(const rv_config_t *cfg, raw_addr_t *me)
{
    const char *want = cfg->transport.verbs.device;
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    for (int i = 0; list != NULL && i < num && raw.ctx == NULL; i++)
        if (want[0] == '\0' || strcmp(want, ibv_get_device_name(list[i])) == 0)
            raw.ctx = ibv_open_device(list[i]);
    if (list != NULL)
        ibv_free_device_list(list);
    if (raw.ctx == NULL) {
        fprintf(stderr, "rv-verbs-bw: cannot open RDMA device '%s'\n", want);
        return -1;
    }
    snprintf(raw.devname, sizeof(raw.devname), "%s",
             ibv_get_device_name(raw.ctx->device));
    raw.port = (int)cfg->transport.verbs.port;
    struct ibv_port_attr pa;
    if (ibv_query_port(raw.ctx, (uint8_t)raw.port, &pa) != 0) {
        fprintf(stderr, "rv-verbs-bw: no port %d on %s\n", raw.port,
                raw.devname);
        return -1;
    }
    raw.gid_index = (int)cfg->transport.verbs.gid_index;
    bool roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (raw.gid_index < 0) { /* as the verbs transport picks it */
        raw.gid_index = 0;
        for (int i = 0; roce && i < pa.gid_tbl_len; i++) {
            struct ibv_gid_entry e;
            if (ibv_query_gid_ex(raw.ctx, (uint32_t)raw.port, (uint32_t)i, &e,
                                 0) == 0 &&
                e.gid_type == IBV_GID_TYPE_ROCE_V2 && gid_is_ipv4(&e.gid)) {
                raw.gid_index = i;
                break;
            }
        }
    }
    union ibv_gid gid;
    if (ibv_query_gid(raw.ctx, (uint8_t)raw.port, raw.gid_index, &gid) != 0) {
        fprintf(stderr, "rv-verbs-bw: no GID %d on %s\n", raw.gid_index,
                raw.devname);
        return -1;
    }
    raw.pd = ibv_alloc_pd(raw.ctx);
    raw.cq = ibv_create_cq(raw.ctx, (int)opt.depth + POLL, NULL, NULL, 0);
    if (posix_memalign(&raw.buf, 4096, REGION) != 0)
        raw.buf = NULL;
    if (raw.pd == NULL || raw.cq == NULL || raw.buf == NULL) {
        fprintf(stderr, "rv-verbs-bw: cannot allocate a PD, CQ or buffer\n");
        return -1;
    }
    memset(raw.buf, 1, REGION);
    raw.mr = ibv_reg_mr(raw.pd, raw.buf, REGION,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_qp_init_attr a = {
        .send_cq = raw.cq, .recv_cq = raw.cq, .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = (uint32_t)opt.depth, .max_recv_wr = 1,
                .max_send_sge = 1, .max_recv_sge = 1,
                .max_inline_data = MAX_INLINE}};
    raw.qp = ibv_create_qp(raw.pd, &a);
    if (raw.qp == NULL) {
        a.cap.max_inline_data = 0;
        raw.qp = ibv_create_qp(raw.pd, &a);
    }
    if (raw.mr == NULL || raw.qp == NULL) {
        fprintf(stderr, "rv-verbs-bw: cannot register memory or create a "
                        "queue pair on %s\n", raw.devname);
        return -1;
    }
    raw.max_inline = a.cap.max_inline_data;
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num =
                                (uint8_t)raw.port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    if (ibv_modify_qp(raw.qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        fprintf(stderr, "rv-verbs-bw: queue pair to INIT failed\n");
        return -1;
    }
    memcpy(me->gid, gid.raw, 16);
    me->addr = (uintptr_t)raw.buf;
    me->rkey = raw.mr->rkey;
    me->qpn = raw.qp->qp_num;
    me->psn = (uint32_t)(lrand48() & 0xffffff);
    me->lid = pa.lid;
    me->mtu = (uint8_t)pa.active_mtu;
    me->valid = 1;
    return 0;
}

/* INIT -> RTR -> RTS towards @p p (as verbs_worker.c's vb_connect). */
static int raw_connect(const raw_addr_t *me, const raw_addr_t *p)
{
    struct ibv_port_attr pa;
    ibv_query_port(raw.ctx, (uint8_t)raw.port, &pa);
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = p->mtu < me->mtu ? (enum ibv_mtu)p->mtu
                                     : (enum ibv_mtu)me->mtu,
        .dest_qp_num = p->qpn, .rq_psn = p->psn, .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = p->lid, .port_num = (uint8_t)raw.port}};
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET || p->lid == 0) {
        m.ah_attr.is_global = 1;
        memcpy(m.ah_attr.grh.dgid.raw, p->gid, 16);
        m.ah_attr.grh.sgid_index = (uint8_t)raw.gid_index;
        m.ah_attr.grh.hop_limit = 64;
    }
    int rc = ibv_modify_qp(raw.qp, &m, IBV_QP_STATE | IBV_QP_AV |
                                           IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                           IBV_QP_RQ_PSN |
                                           IBV_QP_MAX_DEST_RD_ATOMIC |
                                           IBV_QP_MIN_RNR_TIMER);
    if (rc == 0) {
        struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .timeout = 14,
                                .retry_cnt = 7, .rnr_retry = 7,
                                .sq_psn = me->psn, .max_rd_atomic = 1};
        rc = ibv_modify_qp(raw.qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT |
                                           IBV_QP_RETRY_CNT |
                                           IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                           IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (rc != 0)
        fprintf(stderr, "rv-verbs-bw: cannot connect the raw queue pair on "
                        "%s, GID index %d: %s\n", raw.devname, raw.gid_index,
                strerror(rc));
    return rc ? -1 : 0;
}

static void raw_close(void)
{
    if (raw.qp != NULL)
        ibv_destroy_qp(raw.qp);
    if (raw.mr != NULL)
        ibv_dereg_mr(raw.mr);
    if (raw.cq != NULL)
        ibv_destroy_cq(raw.cq);
    if (raw.pd != NULL)
        ibv_dealloc_pd(raw.pd);
    if (raw.ctx != NULL)
        ibv_close_device(raw.ctx);
    free(raw.buf);
}

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
 * returns seconds, or -1. */
static double raw_run(size_t size, long n, long interval)
{
    struct ibv_sge sge = {.addr = (uintptr_t)raw.buf, .length =
                              (uint32_t)size, .lkey = raw.mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE}, *bad;
    unsigned inl = size <= raw.max_inline ? IBV_SEND_INLINE : 0;
    uint64_t slots = REGION / size, done = 0, last = (uint64_t)n;
    wr.wr.rdma.rkey = peer_addr.rkey;
    double t0 = bench_now_s();
    for (uint64_t seq = 1; seq <= last; seq++) {
        if (seq - done > (uint64_t)opt.depth - 1 &&
            raw_wait(&done, seq - ((uint64_t)opt.depth - 1)) != 0)
            return -1;
        wr.wr_id = seq;
        wr.send_flags = inl;
        if (seq % (uint64_t)interval == 0 || seq == last)
            wr.send_flags |= IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = peer_addr.addr + (seq - 1) % slots * size;
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
        rv_status_t st = ops->put(tw, peer, src, size,
                                  raddr + (uint64_t)i % slots * size, rkey,
                                  done_cb, &sync);
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
    case ALL_SIGNALED: return raw_run(size, n, 1);
    case MANUAL: return raw_run(size, n, opt.interval);
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
    void *region, *key;
    size_t len;
    if (ops->mem_alloc(tp, REGION, &mem, &region) != RV_OK)
        return 1;
    memset(region, 1, REGION);
    if (ops->rkey_pack(tp, mem, &key, &len) != RV_OK ||
        len > sizeof(keybuf)) {
        ops->mem_deregister(tp, mem);
        return 1;
    }
    uint8_t msg[sizeof(uint64_t) + sizeof(keybuf)];
    uint64_t addr = (uintptr_t)region;
    memcpy(msg, &addr, sizeof(addr));
    memcpy(msg + sizeof(addr), key, len);
    ops->rkey_buffer_release(tp, key);
    int rc = rv_send(w, rv_tid_make(ctx, 0, 0), h.key, msg,
                     sizeof(addr) + len, NULL) == RV_OK ? 0 : 1;
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
    while (!have_key)
        rv_progress(w);
    if (ops->rkey_unpack(tw, rv_tid_make(ctx, 1, 0), keybuf, keylen, &rkey))
        return 1;
    void *src = calloc(1, REGION);
    if (src == NULL)
        return 1;
    if (opt.b.csv) {
        printf("# %s; raw QP: depth %ld, max_inline %u B (writes up to it "
               "inline), manual signal interval %ld; automatic: rv_progress "
               "every %ld puts; %ld transmissions per point\n",
               rv_context_caps(ctx)->description, opt.depth, raw.max_inline,
               opt.interval, opt.progress, opt.b.iters);
        printf("mode,size,msgs_per_s\n");
    } else {
        printf("transport: %s\n", rv_context_caps(ctx)->description);
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
    opt.nmodes = 0;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        int m = 0;
        while (m < NMODES && (strlen(mode_names[m]) != len ||
                              strncmp(mode_names[m], p, len) != 0))
            m++;
        if (m == NMODES || opt.nmodes == NMODES) {
            fprintf(stderr, "rv-verbs-bw: bad mode list '%s' (modes: "
                            "all_signaled, manual, automatic)\n", text);
            return -1;
        }
        opt.modes[opt.nmodes++] = m;
        p += len + (p[len] == ',');
    }
    return opt.nmodes > 0 ? 0 : -1;
}

static int options(rv_context_t *ctx, int argc, char **argv)
{
    static const struct option longs[] = {{"csv", no_argument, NULL, 'C'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    const char *sizes = "8,16,32,64,128,256,512,1024,2048,4096";
    long dflt = rv_context_config(ctx)->transport.verbs.signal_interval;
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
    if (rv_size(ctx) < 2) {
        fprintf(stderr, "%s needs 2 processes (this job has %d); run it with "
                        "rivetrun\n", argv[0], rv_size(ctx));
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
     * bootstrap; every rank takes part in the allgather */
    int rank = rv_rank(ctx);
    raw_addr_t me = {0}, *all = calloc((size_t)rv_size(ctx), sizeof(me));
    srand48((long)getpid());
    if (all == NULL ||
        (rank <= 1 && raw_open(rv_context_config(ctx), &me) != 0))
        rc = 1;
    if (rv_bootstrap_allgather(ctx, &me, all, sizeof(me)) != RV_OK)
        rc = 1;
    if (rc == 0 && (!all[0].valid || !all[1].valid))
        rc = 1; /* the other rank said why */
    if (rc == 0 && rank <= 1) {
        peer_addr = all[1 - rank];
        rc = raw_connect(&me, &peer_addr) != 0;
    }
    /* both QPs in RTS before the first write, or every rank gives up */
    int ok = rc == 0, *oks = calloc((size_t)rv_size(ctx), sizeof(ok));
    if (oks == NULL ||
        rv_bootstrap_allgather(ctx, &ok, oks, sizeof(ok)) != RV_OK)
        rc = 1;
    for (int r = 0; rc == 0 && r < rv_size(ctx); r++)
        rc = !oks[r];
    free(oks);
    free(all);
    if (rc == 0 &&
        (rv_handler_register(ctx, "verbsbw.key", on_key, NULL, 0, &h.key) ||
         rv_handler_register(ctx, "verbsbw.done", on_done, NULL, 0, &h.done) ||
         rv_job_run(ctx, worker, NULL) != RV_OK))
        rc = 1;
    raw_close();
    rv_finalize(ctx);
    return rc;
}
