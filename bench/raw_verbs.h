/*
 * A raw libibverbs RC connection between ranks 0 and 1 of a rivet job, for
 * benchmarks that compare rivet's verbs transport with hand-written verbs
 * on the same device (rv-verbs-bw, rv-verbs-rndv). The job's
 * transport.verbs.device, port and gid_index choose the device as rivet's
 * transport does; the addresses travel through the job's bootstrap.
 */
#ifndef RIVET_BENCH_RAW_VERBS_H
#define RIVET_BENCH_RAW_VERBS_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "rivet.h"

/* What a rank publishes through the bootstrap. */
typedef struct {
    uint8_t gid[16];
    uint64_t addr;
    uint32_t rkey, qpn, psn;
    uint16_t lid;
    uint8_t mtu, valid;
} raw_addr_t;

typedef struct {
    const char *prog;        /* names the program in messages */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;       /* sends and receives */
    struct ibv_qp *qp;
    struct ibv_mr *mr;       /* over buf */
    void *buf;
    size_t len;
    int port, gid_index;
    uint32_t max_inline;
    uint8_t rd_atomic;       /* RDMA reads in flight, as rivet's QPs */
    char devname[64];
    raw_addr_t me, peer;     /* peer: the other rank's */
} raw_verbs_t;

/* The shape of the connection: send and receive queue depths, the size of
 * the registered buffer (page-aligned, set to 1s) and its remote access
 * flags. */
typedef struct {
    uint32_t send_depth, recv_depth;
    size_t len;
    int access;
} raw_verbs_params_t;

/* Collective over the job (call from every rank's main thread, before
 * rv_job_run): ranks 0 and 1 open the device and connect their QPs to
 * each other; the others only take part in the exchange. Returns 0 once
 * both QPs are ready to send, else -1 on every rank (the failing rank
 * says why). */
int raw_verbs_setup(rv_context_t *ctx, raw_verbs_t *r,
                    const raw_verbs_params_t *p, const char *prog);

void raw_verbs_close(raw_verbs_t *r);

#endif
