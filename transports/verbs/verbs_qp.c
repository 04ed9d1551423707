/*
 * The verbs transport: RC queue pairs. Creation (and the move to INIT),
 * the moves to RTR and RTS toward a peer's QP, and the connection of a
 * worker to a peer from the address the peer published.
 *
 * With qp_sharing thread, worker A's QP for worker B meets B's QP for A.
 * With process, A's process's shared QP to B (its send side) meets B's own
 * QP for A's process (on which B receives, and posts its rendezvous
 * reads), and the other way round.
 */
#include <stdio.h>
#include <string.h>

#include "verbs_internal.h"

/* Remote access every QP grants: rivet's peers write, read and update
 * registered memory one-sided. */
#define VB_QP_ACCESS                                                           \
    (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                        \
     IBV_ACCESS_REMOTE_ATOMIC)

/* Reads and atomics in flight per QP, at most (and at most the device's). */
#define VB_MAX_RD_ATOMIC 16
/* The RNR NAK delay asked of a sender (IB encoding 12: 0.64 ms). */
#define VB_MIN_RNR_TIMER 12
/* The hop limit of routed (RoCE, or LID-less) packets. */
#define VB_HOP_LIMIT 64
/* A lost packet is resent after transport.verbs.timeout (default 1.07 s,
 * the order of UCX's and Open MPI's) up to retry_count times (at most 6:
 * Soft-RoCE takes 7 as "retry for ever", as the spec has it for RNR
 * retries only, and a dead peer would hang its senders). A shorter timeout
 * finds a dead host sooner but takes a slow one for dead: a Soft-RoCE
 * device in a loaded or emulated machine can leave a packet unacknowledged
 * for more than the 0.5 s that 67 ms x 7 gives. An RNR retry count of 7
 * (for ever) is right: receivers repost their buffers, so RNR means slow,
 * not dead. */
#define VB_QP_RNR_RETRY 7

static rv_status_t qp_to_init(rv_transport_t *tp, struct ibv_qp *qp)
{
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = (uint8_t)tp->port,
        .qp_access_flags = VB_QP_ACCESS,
    };
    int rc = ibv_modify_qp(qp, &m,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                               IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        rv_error("verbs: queue pair to INIT on %s port %d: %s", tp->devname,
                 tp->port, strerror(rc));
        return RV_ERR_TRANSPORT;
    }
    return RV_OK;
}

rv_status_t vb_qp_create(rv_transport_t *tp, struct ibv_cq *scq,
                         struct ibv_cq *rcq, struct ibv_srq *srq,
                         uint32_t depth, struct ibv_qp **qp_p,
                         uint32_t *max_inline_p)
{
    struct ibv_qp_init_attr a = {
        .send_cq = scq,
        .recv_cq = rcq,
        .srq = srq,
        .cap = {.max_send_wr = depth,
                .max_send_sge = 1,
                .max_inline_data = VB_MAX_INLINE_WANT},
        .qp_type = IBV_QPT_RC,
    };
    if (srq == NULL) { /* a send side only: one receive for the verbs */
        a.cap.max_recv_wr = 1;
        a.cap.max_recv_sge = 1;
    }
    struct ibv_qp *qp = ibv_create_qp(tp->pd, &a);
    if (qp == NULL) {
        a.cap.max_inline_data = 0;
        qp = ibv_create_qp(tp->pd, &a);
    }
    if (qp == NULL) {
        rv_error("verbs: cannot create a queue pair of %u WRs on %s: %s", depth,
                 tp->devname, strerror(errno));
        return RV_ERR_NO_MEMORY;
    }
    rv_status_t st = qp_to_init(tp, qp);
    if (st != RV_OK)
        goto err_qp;
    *qp_p = qp;
    *max_inline_p = a.cap.max_inline_data;
    return RV_OK;

err_qp:
    ibv_destroy_qp(qp);
    return st;
}

/* Reads and atomics in flight per QP: the device's limit, at most
 * VB_MAX_RD_ATOMIC, at least one. */
static uint8_t max_rd_atomic(const rv_transport_t *tp)
{
    int rd = tp->dev.max_qp_rd_atom < VB_MAX_RD_ATOMIC ? tp->dev.max_qp_rd_atom
                                                       : VB_MAX_RD_ATOMIC;
    return rd > 0 ? (uint8_t)rd : 1;
}

/* Moves @p qp to RTR toward QP @p rqpn of the worker described by @p a,
 * whose packets start at @p rpsn. */
static int qp_to_rtr(rv_transport_t *tp, struct ibv_qp *qp, const vb_addr_t *a,
                     uint32_t rqpn, uint32_t rpsn)
{
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = a->mtu < tp->port_attr.active_mtu
                        ? (enum ibv_mtu)a->mtu
                        : tp->port_attr.active_mtu,
        .dest_qp_num = rqpn,
        .rq_psn = rpsn,
        .max_dest_rd_atomic = max_rd_atomic(tp),
        .min_rnr_timer = VB_MIN_RNR_TIMER,
        .ah_attr = {.dlid = a->lid, .sl = 0, .port_num = (uint8_t)tp->port},
    };
    if (tp->roce || a->lid == 0) {
        m.ah_attr.is_global = 1;
        memcpy(m.ah_attr.grh.dgid.raw, a->gid, sizeof(a->gid));
        m.ah_attr.grh.sgid_index = (uint8_t)tp->gid_index;
        m.ah_attr.grh.hop_limit = VB_HOP_LIMIT;
    }
    int rc = ibv_modify_qp(
        qp, &m,
        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
        rv_error("verbs: queue pair %u to RTR toward %u: %s", qp->qp_num, rqpn,
                 strerror(rc));
    return rc;
}

/* Moves @p qp to RTS; our packets start at @p lpsn. */
static int qp_to_rts(rv_transport_t *tp, struct ibv_qp *qp, uint32_t lpsn)
{
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS,
                            .timeout = (uint8_t)tp->config.timeout,
                            .retry_cnt = (uint8_t)tp->config.retry_count,
                            .rnr_retry = VB_QP_RNR_RETRY,
                            .sq_psn = lpsn,
                            .max_rd_atomic = max_rd_atomic(tp)};
    int rc = ibv_modify_qp(qp, &r,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                               IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0)
        rv_error("verbs: queue pair %u to RTS: %s", qp->qp_num, strerror(rc));
    return rc;
}

/* Moves @p qp to RTR then RTS, toward QP @p rqpn of the worker described
 * by @p a, whose packets start at @p rpsn; ours at @p lpsn. */
static int qp_connect(rv_transport_t *tp, struct ibv_qp *qp, const vb_addr_t *a,
                      uint32_t rqpn, uint32_t rpsn, uint32_t lpsn)
{
    int rc = qp_to_rtr(tp, qp, a, rqpn, rpsn);
    return rc != 0 ? rc : qp_to_rts(tp, qp, lpsn);
}

static const char *qp_state_str(struct ibv_qp *qp)
{
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) != 0)
        return "unknown";
    switch (qa.qp_state) {
    case IBV_QPS_RESET:
        return "RESET";
    case IBV_QPS_INIT:
        return "INIT";
    case IBV_QPS_RTR:
        return "RTR";
    case IBV_QPS_RTS:
        return "RTS";
    default:
        return "error";
    }
}

/* Whether @p a, of @p len bytes, is the address of a worker of this job. */
static bool addr_valid(rv_tworker_t *tw, uint32_t peer, const vb_addr_t *a,
                       size_t len)
{
    rv_transport_t *tp = tw->tp;
    uint32_t nqp = tp->shared_qps ? tw->nprocs + tw->nworkers : tw->nworkers;
    return peer < tw->nworkers && len >= sizeof(*a) &&
           len == sizeof(*a) + a->nqp * sizeof(uint32_t) && a->nqp == nqp &&
           a->shared == tp->shared_qps && a->nprocs == tw->nprocs;
}

/* qp_sharing process: connects what joins this worker to @p peer. Returns
 * the QP it failed on in *qp_p. */
static int connect_shared(rv_tworker_t *tw, uint32_t peer, const vb_addr_t *a,
                          struct ibv_qp **qp_p)
{
    rv_transport_t *tp = tw->tp;
    uint32_t T = (uint32_t)tp->threads, me = tw->tid;
    uint32_t prank = peer / T, mrank = me / T;
    int rc = 0;
    /* our own QP for the peer's process meets that process's shared QP to
     * us (once per process: at its first worker) */
    if (peer % T == 0) {
        *qp_p = tw->owned[prank].qp;
        rc =
            qp_connect(tp, *qp_p, a, a->qpn[tw->nprocs + me], a->ppsn, tw->psn);
    }
    /* our process's shared QP to the peer meets the peer's own QP for our
     * process (connected once, by the process's first worker) */
    if (rc == 0 && tw->local == 0) {
        vb_shared_t *sh = &tp->shared[peer];
        sh->flush_addr = a->flush_addr;
        sh->flush_rkey = a->flush_rkey;
        *qp_p = sh->qp;
        rc = qp_connect(tp, sh->qp, a, a->qpn[mrank], a->psn, tp->psn);
    }
    return rc;
}

rv_status_t vb_connect(rv_tworker_t *tw, uint32_t peer, const void *addr,
                       size_t len)
{
    rv_transport_t *tp = tw->tp;
    const vb_addr_t *a = addr;
    if (!addr_valid(tw, peer, a, len)) {
        rv_error("verbs: the address of worker %u is not a verbs address "
                 "of this job (do all processes use transport.name: verbs "
                 "with the same qp_sharing?)",
                 peer);
        return RV_ERR_INVALID;
    }
    vb_peer_t *p = &tw->peers[peer];
    p->flush_addr = a->flush_addr;
    p->flush_rkey = a->flush_rkey;
    struct ibv_qp *qp = p->qp;
    int rc = tp->shared_qps
                 ? connect_shared(tw, peer, a, &qp)
                 : qp_connect(tp, p->qp, a, a->qpn[tw->tid], a->psn, tw->psn);
    if (rc != 0) {
        rv_error("verbs: cannot connect to worker %u (rank %d) on %s port "
                 "%d, GID index %d: %s (queue pair left in %s)",
                 peer, vb_rank_of(tw, peer), tp->devname, tp->port,
                 tp->gid_index, strerror(rc), qp_state_str(qp));
        return RV_ERR_PEER;
    }
    p->connected = true;
    return RV_OK;
}
