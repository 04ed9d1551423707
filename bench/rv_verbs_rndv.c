/*
 * rv-verbs-rndv: how to move a large active message over RC, measured.
 * From rank 0 to rank 1, transfers of SIZE bytes with WINDOW of them in
 * flight, three ways in one program run (same processes, same device):
 *   read       raw libibverbs, the RDMA-read rendezvous (Plasma thesis
 *              Sec. 3.3, and rivet's protocol): the sender SENDs an RTS
 *              naming its buffer; the receiver RDMA-READs it into its own
 *              and SENDs a FIN, which frees the sender's buffer
 *   write_imm  raw libibverbs, the RDMA-write rendezvous: the sender SENDs
 *              an RTS; the receiver SENDs a CTS naming a buffer; the sender
 *              RDMA-WRITEs WITH IMMEDIATE into it, which the receiver sees
 *              as a receive completion
 *   rivet      rv_send through rivet's verbs transport (the AM path: its
 *              read rendezvous, the payload registered per message), with
 *              a synchronizer: done when every send completed locally
 * Both raw protocols take three messages per transfer and keep the
 * buffers registered beforehand: what differs is who moves the payload
 * and when. A point ends when the sender may reuse every buffer and the
 * receiver holds every payload. The rate is transfers over that time;
 * with window 1, its inverse is the latency of one transfer.
 *
 *   rivetrun -c configs/test-verbs.yaml build/bin/rv-verbs-rndv [options]
 *   -s SIZES     comma-separated sizes (default 16384,65536,262144,
 *                1048576,4194304)
 *   -n ITERS     transfers per point (default: BYTES' worth, within
 *                20..2000)
 *   -B BYTES     bytes moved per point without -n (default 64 MiB)
 *   -W WINDOWS   transfers in flight, comma-separated (default 1,8)
 *   -m MODES     in the order run at each point (default read,write_imm,
 *                rivet)
 *   --csv        "protocol,size,window,transfers_per_s,mb_per_s" rows;
 *                notes on lines starting with #
 */
#include <endian.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "raw_verbs.h"

#define MAX_SIZE (4u << 20)
#define MAX_WINDOW 16
#define NCTRL (4 * MAX_WINDOW + 4) /* receive slots, send slots */
#define DEPTH NCTRL

enum { READ, WRITE_IMM, RIVET, NMODES };
static const char *const mode_names[NMODES] = {"read", "write_imm", "rivet"};
enum { RTS = 1, CTS, FIN };

/* wr_id: kind in the top byte, an index below */
#define WR(kind, i) (((uint64_t)(kind) << 56) | (uint64_t)(i))
#define WR_KIND(id) ((int)((id) >> 56))
#define WR_INDEX(id) ((uint32_t)(id))
enum { K_SEND = 1, K_RECV, K_READ, K_WRITE };

typedef struct {
    uint32_t type, idx;
    uint64_t addr;
} ctrl_t;

static struct {
    bench_opts_t b;
    int modes[NMODES], nmodes;
    long windows[8];
    int nwindows;
    size_t budget;
} opt = {.budget = 64u << 20};

static raw_verbs_t raw;
static rv_handler_id_t h_data;
static atomic_long delivered; /* rank 1: rivet messages handled */

/* Layout of raw.buf: MAX_WINDOW data slots of MAX_SIZE, then NCTRL
 * receive slots and NCTRL send slots. */
static uint8_t *data_slot(uint32_t i)
{
    return (uint8_t *)raw.buf + (size_t)(i % MAX_WINDOW) * MAX_SIZE;
}
static ctrl_t *ctrl_slot(int send, uint32_t i)
{
    return (ctrl_t *)((uint8_t *)raw.buf + (size_t)MAX_WINDOW * MAX_SIZE) +
           (send ? NCTRL : 0) + i % NCTRL;
}
static int post_recv(uint32_t slot)
{
    struct ibv_sge sge = {.addr = (uintptr_t)ctrl_slot(0, slot),
                          .length = sizeof(ctrl_t), .lkey = raw.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = WR(K_RECV, slot), .sg_list = &sge,
                             .num_sge = 1}, *bad;
    return ibv_post_recv(raw.qp, &wr, &bad);
}

static uint32_t sends, send_done; /* control sends posted, completed */

static int post(struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(raw.qp, wr, &bad);
    if (rc != 0)
        fprintf(stderr, "rv-verbs-rndv: ibv_post_send: %s\n", strerror(rc));
    return rc;
}

static int send_ctrl(uint32_t type, uint32_t idx, uint64_t addr)
{
    ctrl_t *c = ctrl_slot(1, sends);
    *c = (ctrl_t){.type = type, .idx = idx, .addr = addr};
    struct ibv_sge sge = {.addr = (uintptr_t)c, .length = sizeof(*c),
                          .lkey = raw.mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = WR(K_SEND, sends), .sg_list = &sge, .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED |
                      (raw.max_inline >= sizeof(*c) ? IBV_SEND_INLINE : 0)};
    sends++;
    return post(&wr);
}

static int post_rdma(enum ibv_wr_opcode op, uint32_t idx, size_t size,
                     uint64_t remote)
{
    struct ibv_sge sge = {.addr = (uintptr_t)data_slot(idx),
                          .length = (uint32_t)size, .lkey = raw.mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = WR(op == IBV_WR_RDMA_READ ? K_READ : K_WRITE, idx),
        .sg_list = &sge, .num_sge = 1, .opcode = op,
        .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(idx),
        .wr = {.rdma = {.remote_addr = remote, .rkey = raw.peer.rkey}}};
    return post(&wr);
}

static int check(const struct ibv_wc *wc)
{
    if (wc->status == IBV_WC_SUCCESS)
        return 0;
    fprintf(stderr, "rv-verbs-rndv: work request %d failed: %s\n",
            WR_KIND(wc->wr_id), ibv_wc_status_str(wc->status));
    return -1;
}

/* One raw point, on rank 0 (@p sender) or rank 1; returns its seconds, or
 * -1. Both sides end with every control send complete, so the send slots
 * start over at the next point. */
static double raw_point(bool sender, int mode, size_t size, uint32_t n,
                        uint32_t window)
{
    uint32_t started = 0, done = 0; /* sender: RTS sent, transfers done;
                                      receiver: payloads held */
    struct ibv_wc wc[32];
    sends = send_done = 0;
    double t0 = bench_now_s();
    while (done < n || send_done < sends) {
        while (sender && started < n && started - done < window) {
            uint64_t addr = mode == READ ? (uintptr_t)data_slot(started) : 0;
            if (send_ctrl(RTS, started++, addr) != 0)
                return -1;
        }
        int k = ibv_poll_cq(raw.cq, 32, wc);
        if (k < 0)
            return -1;
        for (int i = 0; i < k; i++) {
            if (check(&wc[i]) != 0)
                return -1;
            uint32_t idx = WR_INDEX(wc[i].wr_id);
            int rc = 0;
            switch (WR_KIND(wc[i].wr_id)) {
            case K_SEND:
                send_done++;
                break;
            case K_READ: /* receiver: the payload is here */
                done++;
                rc = send_ctrl(FIN, idx, 0);
                break;
            case K_WRITE: /* sender: placed at the receiver */
                done++;
                break;
            case K_RECV: {
                ctrl_t c = *ctrl_slot(0, idx);
                rc = post_recv(idx);
                if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
                    done++; /* receiver: written, and told so */
                else if (c.type == FIN)
                    done++;
                else if (c.type == CTS)
                    rc = rc ? rc : post_rdma(IBV_WR_RDMA_WRITE_WITH_IMM,
                                             c.idx, size, c.addr);
                else if (c.type == RTS && mode == READ)
                    rc = rc ? rc : post_rdma(IBV_WR_RDMA_READ, c.idx, size,
                                             c.addr);
                else if (c.type == RTS)
                    rc = rc ? rc : send_ctrl(CTS, c.idx,
                                             (uintptr_t)data_slot(c.idx));
                break;
            }
            default:
                break;
            }
            if (rc != 0)
                return -1;
        }
    }
    return bench_now_s() - t0;
}

static rv_status_t on_data(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    atomic_fetch_add(&delivered, 1);
    return RV_OK;
}

/* One point through rivet's rv_send; returns rank 0's seconds, or -1. */
static double rivet_point(rv_worker_t *w, bool sender, size_t size,
                          uint32_t n, uint32_t window)
{
    rv_context_t *ctx = rv_worker_context(w);
    double t0 = bench_now_s();
    if (!sender) {
        while ((uint32_t)atomic_load(&delivered) < n)
            rv_progress(w);
        atomic_store(&delivered, 0);
        return 0;
    }
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    for (uint32_t i = 0; i < n; i++) {
        while (atomic_load(&sync.pending) >= (long)window)
            rv_progress(w);
        if (rv_send(w, rv_tid_make(ctx, 1, 0), h_data, data_slot(i), size,
                    &sync) != RV_OK)
            return -1;
    }
    if (rv_sync_wait(w, &sync) != RV_OK)
        return -1;
    return bench_now_s() - t0;
}

static uint32_t transfers(size_t size)
{
    return (uint32_t)bench_iters(&opt.b, size, opt.budget, 20, 2000);
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    bool sender = rv_rank(ctx) == 0;
    int rc = 0;
    (void)arg;
    if (rv_worker_local(w) != 0 || rv_rank(ctx) > 1) {
        /* as many barriers as ranks 0 and 1 take */
        for (int i = 0; i < opt.nwindows * opt.b.nsizes * opt.nmodes + 1; i++)
            if (rv_barrier(w) != RV_OK)
                return 1;
        return 0;
    }
    if (sender) {
        if (opt.b.csv) {
            printf("# %s; raw QP: max_inline %u B, %u RDMA reads in flight; "
                   "per point: ", rv_context_describe(ctx),
                   raw.max_inline, raw.rd_atomic);
            if (opt.b.iters > 0)
                printf("%ld transfers\n", opt.b.iters);
            else
                printf("%zu MiB, 20-2000 transfers\n", opt.budget >> 20);
            printf("protocol,size,window,transfers_per_s,mb_per_s\n");
        } else {
            printf("transport: %s\nraw QP on %s: %u RDMA reads in flight\n",
                   rv_context_describe(ctx), raw.devname,
                   raw.rd_atomic);
            printf("%-10s %8s %6s %8s %14s %10s %12s\n", "protocol", "size",
                   "window", "count", "transfers/s", "MB/s", "us/transfer");
        }
        fflush(stdout);
    }
    for (int wi = 0; wi < opt.nwindows && rc == 0; wi++) {
        uint32_t window = (uint32_t)opt.windows[wi];
        for (int s = 0; s < opt.b.nsizes && rc == 0; s++) {
            size_t size = opt.b.sizes[s];
            uint32_t n = transfers(size);
            for (int k = 0; k < opt.nmodes && rc == 0; k++) {
                int mode = opt.modes[k];
                if (rv_barrier(w) != RV_OK)
                    return 1;
                double t = mode == RIVET
                               ? rivet_point(w, sender, size, n, window)
                               : raw_point(sender, mode, size, n, window);
                if (t < 0) {
                    fprintf(stderr, "rv-verbs-rndv: %s at %zu B, window %u "
                            "failed on rank %d\n", mode_names[mode], size,
                            window, rv_rank(ctx));
                    rc = 1;
                    break;
                }
                if (!sender)
                    continue;
                double rate = (double)n / t;
                if (opt.b.csv)
                    printf("%s,%zu,%u,%.1f,%.1f\n", mode_names[mode], size,
                           window, rate, rate * (double)size / 1e6);
                else
                    printf("%-10s %8zu %6u %8u %14.1f %10.1f %12.1f\n",
                           mode_names[mode], size, window, n, rate,
                           rate * (double)size / 1e6, 1e6 / rate);
                fflush(stdout);
            }
        }
    }
    return rv_barrier(w) == RV_OK ? rc : 1;
}

/* -m MODES: names separated by commas. */
static int parse_modes(const char *text)
{
    opt.nmodes = bench_parse_names("rv-verbs-rndv", text, mode_names, NMODES,
                                   opt.modes);
    return opt.nmodes > 0 ? 0 : -1;
}

static int options(int argc, char **argv)
{
    static const struct option longs[] = {{"csv", no_argument, NULL, 'C'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    const char *sizes = "16384,65536,262144,1048576,4194304";
    const char *windows = "1,8";
    int c, bad = 0;
    parse_modes("read,write_imm,rivet");
    while (!bad && (c = getopt_long(argc, argv, "s:n:B:W:m:h", longs,
                                    NULL)) != -1) {
        switch (c) {
        case 's': sizes = optarg; break;
        case 'n': opt.b.iters = atol(optarg); break;
        case 'B': opt.budget = (size_t)atoll(optarg); break;
        case 'W': windows = optarg; break;
        case 'm': bad = parse_modes(optarg) != 0; break;
        case 'C': opt.b.csv = 1; break;
        default: bad = 1; break;
        }
    }
    if (!bad) {
        size_t wins[8];
        opt.nwindows = bench_parse_sizes(windows, wins, 8, 1);
        for (int i = 0; i < opt.nwindows; i++) {
            opt.windows[i] = (long)wins[i];
            bad |= wins[i] > MAX_WINDOW;
        }
        opt.b.nsizes = bench_parse_sizes(sizes, opt.b.sizes, 32, 1);
        bad |= opt.nwindows <= 0 || opt.b.nsizes <= 0 || opt.b.iters < 0 ||
               opt.budget < 1;
        for (int s = 0; !bad && s < opt.b.nsizes; s++)
            bad = opt.b.sizes[s] > MAX_SIZE;
    }
    if (bad) {
        fprintf(stderr, "usage: rivetrun -c JOB.yaml %s [-s SIZES (each at "
                        "most %u)] [-n ITERS] [-B BYTES] [-W WINDOWS (each at "
                        "most %d)] [-m MODES] [--csv]\n", argv[0], MAX_SIZE,
                MAX_WINDOW);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = options(argc, argv);
    if (rc != 0) {
        rv_finalize(ctx);
        return rc;
    }
    raw_verbs_params_t rp = {
        .send_depth = DEPTH, .recv_depth = NCTRL,
        .len = (size_t)MAX_WINDOW * MAX_SIZE + 2 * NCTRL * sizeof(ctrl_t),
        .access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE};
    rc = raw_verbs_setup(ctx, &raw, &rp, "rv-verbs-rndv") != 0;
    for (uint32_t i = 0; rc == 0 && rv_rank(ctx) <= 1 && i < NCTRL; i++)
        rc = post_recv(i) != 0;
    if (rc == 0 &&
        (rv_handler_register(ctx, "verbsrndv.data", on_data, NULL, 0,
                             &h_data) != RV_OK ||
         rv_job_run(ctx, worker, NULL) != RV_OK))
        rc = 1;
    raw_verbs_close(&raw);
    rv_finalize(ctx);
    return rc;
}
