/* A raw libibverbs RC connection for the benchmarks (raw_verbs.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raw_verbs.h"

static bool gid_is_ipv4(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
                                       0xff};
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* Opens the device transport.verbs.device names (the first one when it
 * names none) and queries transport.verbs.port into @p pa. */
static int raw_open_device(raw_verbs_t *r, const rv_config_t *cfg,
                           struct ibv_port_attr *pa)
{
    char want[RV_CONFIG_STR_MAX];
    int64_t port = 1;
    int num = 0;

    rv_config_get(cfg, "transport.verbs.device", want, sizeof(want));
    rv_config_get_int(cfg, "transport.verbs.port", &port);
    struct ibv_device **list = ibv_get_device_list(&num);
    for (int i = 0; list != NULL && i < num && r->ctx == NULL; i++)
        if (want[0] == '\0' || strcmp(want, ibv_get_device_name(list[i])) == 0)
            r->ctx = ibv_open_device(list[i]);
    if (list != NULL)
        ibv_free_device_list(list);
    if (r->ctx == NULL) {
        fprintf(stderr, "%s: cannot open RDMA device '%s'\n", r->prog, want);
        return -1;
    }
    snprintf(r->devname, sizeof(r->devname), "%s",
             ibv_get_device_name(r->ctx->device));
    r->port = (int)port;
    if (ibv_query_port(r->ctx, (uint8_t)r->port, pa) != 0) {
        fprintf(stderr, "%s: no port %d on %s\n", r->prog, r->port,
                r->devname);
        return -1;
    }
    return 0;
}

/* The GID transport.verbs.gid_index names, or (when it is negative) the
 * one the verbs transport picks: on RoCE the first RoCE v2 GID of an IPv4
 * address, else 0. */
static int raw_query_gid(raw_verbs_t *r, const rv_config_t *cfg,
                         const struct ibv_port_attr *pa, union ibv_gid *gid)
{
    int64_t gid_index = -1;

    rv_config_get_int(cfg, "transport.verbs.gid_index", &gid_index);
    r->gid_index = (int)gid_index;
    bool roce = pa->link_layer == IBV_LINK_LAYER_ETHERNET;
    if (r->gid_index < 0) { /* as the verbs transport picks it */
        r->gid_index = 0;
        for (int i = 0; roce && i < pa->gid_tbl_len; i++) {
            struct ibv_gid_entry e;
            if (ibv_query_gid_ex(r->ctx, (uint32_t)r->port, (uint32_t)i, &e,
                                 0) == 0 &&
                e.gid_type == IBV_GID_TYPE_ROCE_V2 && gid_is_ipv4(&e.gid)) {
                r->gid_index = i;
                break;
            }
        }
    }
    if (ibv_query_gid(r->ctx, (uint8_t)r->port, r->gid_index, gid) != 0) {
        fprintf(stderr, "%s: no GID %d on %s\n", r->prog, r->gid_index,
                r->devname);
        return -1;
    }
    return 0;
}

/* The PD, the CQ, the registered buffer and the QP, brought to INIT. */
static int raw_create_qp(raw_verbs_t *r, const raw_verbs_params_t *p)
{
    struct ibv_device_attr da;
    r->rd_atomic = 1;
    if (ibv_query_device(r->ctx, &da) == 0 && da.max_qp_rd_atom > 1)
        r->rd_atomic = da.max_qp_rd_atom < 16 ? (uint8_t)da.max_qp_rd_atom
                                              : 16;
    r->pd = ibv_alloc_pd(r->ctx);
    r->cq = ibv_create_cq(r->ctx, (int)(p->send_depth + p->recv_depth), NULL,
                          NULL, 0);
    r->len = p->len;
    if (posix_memalign(&r->buf, 4096, r->len) != 0)
        r->buf = NULL;
    if (r->pd == NULL || r->cq == NULL || r->buf == NULL) {
        fprintf(stderr, "%s: cannot allocate a PD, CQ or buffer\n", r->prog);
        return -1;
    }
    memset(r->buf, 1, r->len);
    r->mr = ibv_reg_mr(r->pd, r->buf, r->len,
                       IBV_ACCESS_LOCAL_WRITE | p->access);
    struct ibv_qp_init_attr a = {
        .send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = p->send_depth,
                .max_recv_wr = p->recv_depth ? p->recv_depth : 1,
                .max_send_sge = 1, .max_recv_sge = 1,
                .max_inline_data = 220}}; /* asked for, as rivet's QPs */
    r->qp = ibv_create_qp(r->pd, &a);
    if (r->qp == NULL) {
        a.cap.max_inline_data = 0;
        r->qp = ibv_create_qp(r->pd, &a);
    }
    if (r->mr == NULL || r->qp == NULL) {
        fprintf(stderr, "%s: cannot register memory or create a queue pair "
                        "on %s\n", r->prog, r->devname);
        return -1;
    }
    r->max_inline = a.cap.max_inline_data;
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT,
                            .port_num = (uint8_t)r->port,
                            .qp_access_flags = (unsigned)p->access};
    if (ibv_modify_qp(r->qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        fprintf(stderr, "%s: queue pair to INIT failed\n", r->prog);
        return -1;
    }
    return 0;
}

/* Opens the device, creates the QP (INIT) and registers the buffer; fills
 * r->me. */
static int raw_open(raw_verbs_t *r, const rv_config_t *cfg,
                    const raw_verbs_params_t *p)
{
    struct ibv_port_attr pa;
    union ibv_gid gid;

    if (raw_open_device(r, cfg, &pa) != 0 ||
        raw_query_gid(r, cfg, &pa, &gid) != 0 || raw_create_qp(r, p) != 0)
        return -1;
    memcpy(r->me.gid, gid.raw, 16);
    r->me.addr = (uintptr_t)r->buf;
    r->me.rkey = r->mr->rkey;
    r->me.qpn = r->qp->qp_num;
    r->me.psn = (uint32_t)(lrand48() & 0xffffff);
    r->me.lid = pa.lid;
    r->me.mtu = (uint8_t)pa.active_mtu;
    r->me.valid = 1;
    return 0;
}

/* INIT -> RTR -> RTS towards r->peer (as verbs_qp.c's vb_connect). */
static int raw_connect(raw_verbs_t *r)
{
    const raw_addr_t *me = &r->me, *p = &r->peer;
    struct ibv_port_attr pa;
    ibv_query_port(r->ctx, (uint8_t)r->port, &pa);
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = p->mtu < me->mtu ? (enum ibv_mtu)p->mtu
                                     : (enum ibv_mtu)me->mtu,
        .dest_qp_num = p->qpn, .rq_psn = p->psn, .max_dest_rd_atomic = r->rd_atomic,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = p->lid, .port_num = (uint8_t)r->port}};
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET || p->lid == 0) {
        m.ah_attr.is_global = 1;
        memcpy(m.ah_attr.grh.dgid.raw, p->gid, 16);
        m.ah_attr.grh.sgid_index = (uint8_t)r->gid_index;
        m.ah_attr.grh.hop_limit = 64;
    }
    int rc = ibv_modify_qp(r->qp, &m, IBV_QP_STATE | IBV_QP_AV |
                                          IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                          IBV_QP_RQ_PSN |
                                          IBV_QP_MAX_DEST_RD_ATOMIC |
                                          IBV_QP_MIN_RNR_TIMER);
    if (rc == 0) {
        struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .timeout = 14,
                                .retry_cnt = 6, .rnr_retry = 7,
                                .sq_psn = me->psn, .max_rd_atomic = r->rd_atomic};
        rc = ibv_modify_qp(r->qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT |
                                          IBV_QP_RETRY_CNT |
                                          IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                          IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (rc != 0)
        fprintf(stderr, "%s: cannot connect the raw queue pair on %s, GID "
                        "index %d: %s\n", r->prog, r->devname, r->gid_index,
                strerror(rc));
    return rc ? -1 : 0;
}

int raw_verbs_setup(rv_context_t *ctx, raw_verbs_t *r,
                    const raw_verbs_params_t *p, const char *prog)
{
    int rank = rv_rank(ctx), rc = 0;
    memset(r, 0, sizeof(*r));
    r->prog = prog;
    if (rv_size(ctx) < 2) {
        fprintf(stderr, "%s needs 2 processes (this job has %d); run it with "
                        "rivetrun\n", prog, rv_size(ctx));
        return -1;
    }
    raw_addr_t *all = calloc((size_t)rv_size(ctx), sizeof(raw_addr_t));
    srand48((long)getpid());
    if (all == NULL ||
        (rank <= 1 && raw_open(r, rv_context_config(ctx), p) != 0))
        rc = -1;
    if (rv_bootstrap_allgather(ctx, all, &r->me, sizeof(r->me)) != RV_OK)
        rc = -1;
    if (rc == 0 && (!all[0].valid || !all[1].valid))
        rc = -1; /* the other rank said why */
    if (rc == 0 && rank <= 1) {
        r->peer = all[1 - rank];
        rc = raw_connect(r);
    }
    /* both QPs in RTS before the first WR, or every rank gives up */
    int ok = rc == 0, *oks = calloc((size_t)rv_size(ctx), sizeof(ok));
    if (oks == NULL ||
        rv_bootstrap_allgather(ctx, oks, &ok, sizeof(ok)) != RV_OK)
        rc = -1;
    for (int i = 0; rc == 0 && i < rv_size(ctx); i++)
        rc = oks[i] ? 0 : -1;
    free(oks);
    free(all);
    return rc;
}

void raw_verbs_close(raw_verbs_t *r)
{
    if (r->qp != NULL)
        ibv_destroy_qp(r->qp);
    if (r->mr != NULL)
        ibv_dereg_mr(r->mr);
    if (r->cq != NULL)
        ibv_destroy_cq(r->cq);
    if (r->pd != NULL)
        ibv_dealloc_pd(r->pd);
    if (r->ctx != NULL)
        ibv_close_device(r->ctx);
    free(r->buf);
    memset(r, 0, sizeof(*r));
}
