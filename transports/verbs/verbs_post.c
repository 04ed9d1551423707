/*
 * The verbs transport: posting work requests on a worker's own QPs, with
 * selective signaling (Seriema, section 4.1), the backlog that keeps
 * posting from ever blocking, and the bounce buffers WRs send from.
 *
 * Posting never waits for room in a send queue: a WR that does not fit
 * is copied into its QP's backlog, in sequence order, and posted from
 * progress once completions have made room. Waiting inside a post could
 * deadlock: the completions it would wait for may need this worker's own
 * receive queue drained (a worker sending to itself, or two workers
 * sending to each other).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_internal.h"

static int post_now(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    vb_peer_t *p = vb_lane(tw, lane);
    wr->next = NULL;
    int rc = ibv_post_send(p->qp, wr, &bad);
    if (rc == 0)
        p->posted++;
    else if (rc != ENOMEM)
        rv_error("verbs: cannot post to %s %u on %s: %s",
                 lane < tw->nworkers ? "worker" : "rank",
                 lane < tw->nworkers ? lane : lane - tw->nworkers,
                 tw->tp->devname, strerror(rc));
    return rc;
}

/* Fixes the sequence number of @p wr on lane @p lane and whether it is
 * signaled: when @p signal (an op waits for it) or every
 * signal_interval-th WR of the QP. Returns the sequence number. */
static uint64_t assign(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr,
                       bool signal)
{
    vb_peer_t *p = vb_lane(tw, lane);
    uint64_t seq = ++p->assigned;
    if (signal || seq % tw->tp->signal_interval == 0) {
        wr->send_flags |= IBV_SEND_SIGNALED;
        if (wr->wr_id == 0) {
            wr->wr_id = vb_marker(lane, seq);
        } else {
            vb_op_t *op = (vb_op_t *)(uintptr_t)wr->wr_id;
            op->seq = seq;
            op->lane = lane;
        }
    } else {
        /* no completion unless it fails: then its error names the peer
         * (the first failed WR completes with its status, signaled or
         * not) */
        wr->wr_id = vb_marker(lane, seq);
    }
    if (p->fence) {
        wr->send_flags |= IBV_SEND_FENCE;
        p->fence = false;
    }
    return seq;
}

/* Posts @p wr on lane @p lane, or queues it behind earlier ones when the
 * send queue is full (never waits). Its sequence number is fixed here, and
 * @p unit (a bounce buffer it uses) is tagged with its flush number at
 * once, so the unit cannot be recycled before the WR is even posted. */
rv_status_t vb_post(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr,
                    bool signal, rv_mem_unit_t *unit)
{
    vb_peer_t *p = vb_lane(tw, lane);
    uint32_t S = tw->tp->signal_interval;
    uint64_t seq = assign(tw, lane, wr, signal);
    if (unit != NULL)
        rv_mem_circular_tag(unit, lane, (seq + S - 1) / S);
    if (p->pend_head == NULL && seq - p->done <= VB_SQ_DEPTH - 1) {
        int rc = post_now(tw, lane, wr);
        if (rc == 0)
            return RV_OK;
        if (rc != ENOMEM) {
            p->assigned--;
            return RV_ERR_TRANSPORT;
        }
    }
    rv_status_t st = vb_backlog_push(tw, p, wr);
    if (st != RV_OK)
        p->assigned--;
    return st;
}

/* Posts to worker @p peer: its own QP, or the process's shared one. */
rv_status_t vb_post_to(rv_tworker_t *tw, uint32_t peer, struct ibv_send_wr *wr,
                       bool signal, rv_mem_unit_t *unit)
{
    return tw->tp->shared_qps ? vb_post_shared(tw, peer, wr, signal, unit)
                              : vb_post(tw, peer, wr, signal, unit);
}

/* ---------------------------------------------------------------------- */
/* The backlog                                                             */

/* Appends a copy of @p wr (and of its inline bytes) to @p p's backlog. */
rv_status_t vb_backlog_push(rv_tworker_t *tw, vb_peer_t *p,
                            const struct ibv_send_wr *wr)
{
    vb_pending_t *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return RV_ERR_NO_MEMORY;
    q->wr = *wr;
    q->wr.next = NULL;
    if (wr->num_sge > 0) {
        q->sge = wr->sg_list[0];
        q->wr.sg_list = &q->sge;
        /* inline bytes may live on the caller's stack */
        if ((wr->send_flags & IBV_SEND_INLINE) &&
            q->sge.length <= sizeof(q->data)) {
            memcpy(q->data, (void *)(uintptr_t)q->sge.addr, q->sge.length);
            q->sge.addr = (uintptr_t)q->data;
        }
    }
    q->next = NULL;
    if (p->pend_tail != NULL)
        p->pend_tail->next = q;
    else
        p->pend_head = q;
    p->pend_tail = q;
    tw->backlog++;
    return RV_OK;
}

/* Takes the first WR off @p p's backlog (the caller frees it). */
vb_pending_t *vb_backlog_pop(rv_tworker_t *tw, vb_peer_t *p)
{
    vb_pending_t *q = p->pend_head;
    p->pend_head = q->next;
    if (p->pend_head == NULL)
        p->pend_tail = NULL;
    tw->backlog--;
    return q;
}

/* Posts queued WRs of the worker's own QPs that now fit. */
void vb_post_backlog(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < vb_nlanes(tw) && tw->backlog > 0; i++) {
        vb_peer_t *p = vb_lane(tw, i);
        if (p->qp == NULL) /* shared QPs: vb_shared_progress */
            continue;
        while (p->pend_head != NULL &&
               p->posted + 1 - p->done <= VB_SQ_DEPTH - 1) {
            int rc = post_now(tw, i, &p->pend_head->wr);
            if (rc == ENOMEM)
                break;
            if (rc != 0) { /* the QP is broken: account it as done */
                p->posted++;
                p->done = p->posted;
            }
            free(vb_backlog_pop(tw, p));
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Bounce buffers                                                          */

/* The bounce ring of @p peer: units recycled in ring order, so one ring
 * per peer, made on first use. A ring shared by peers would meet another
 * peer's unit still being filled at every lap, and grow each time. */
static rv_status_t ring_create(rv_tworker_t *tw, uint32_t peer)
{
    rv_transport_t *tp = tw->tp;
    rv_mem_circular_params_t cp = {
        .chunks = tw->chunks,
        .unit_size = VB_UNIT,
        .completed_seq = tw->completed_flush,
        .nchannels = tw->nworkers,
    };
    if (tp->shared_qps) /* (shared QP, thread) channels, verbs_signal */
        cp = (rv_mem_circular_params_t){
            .chunks = tw->chunks,
            .unit_size = VB_UNIT,
            .completed = rv_vsig_mem_completed,
            .completed_arg = &tp->sig_arg,
        };
    rv_status_t st = tp->svc->mem_circular_create(&cp, &tw->circ_by_peer[peer]);
    if (st != RV_OK)
        return st;
    st = tp->svc->mem_linear_create(tw->circ_by_peer[peer],
                                    &tw->lin_by_peer[peer]);
    if (st != RV_OK)
        goto err_circ;
    return RV_OK;

err_circ:
    tp->svc->mem_circular_destroy(tw->circ_by_peer[peer]);
    tw->circ_by_peer[peer] = NULL;
    return st;
}

/* A bounce segment of @p len bytes for @p peer. When every unit of the
 * ring waits for completions (the ring is at its limit), polls the send
 * CQ and tries again. */
rv_status_t vb_bounce(rv_tworker_t *tw, uint32_t peer, size_t len,
                      void **addr_p, uint32_t *lkey_p, rv_mem_unit_t **unit_p)
{
    const rv_transport_services_t *svc = tw->tp->svc;
    rv_status_t st;
    for (;;) {
        if (tw->lin_by_peer[peer] == NULL &&
            (st = ring_create(tw, peer)) != RV_OK)
            return st;
        st = svc->mem_linear_alloc(tw->lin_by_peer[peer], len, VB_WORD, addr_p,
                                   unit_p);
        if (st != RV_ERR_AGAIN)
            break;
        if (vb_poll_send(tw) == 0)
            sched_yield();
    }
    if (st == RV_OK)
        *lkey_p = (*unit_p)->chunk->tmem->mr->lkey;
    return st;
}

/* Destroys every bounce ring (the linear allocators first: they use the
 * circular ones). */
void vb_bounce_destroy(rv_tworker_t *tw)
{
    const rv_transport_services_t *svc = tw->tp->svc;
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        if (tw->lin_by_peer[i] != NULL)
            svc->mem_linear_destroy(tw->lin_by_peer[i]);
        tw->lin_by_peer[i] = NULL;
    }
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        if (tw->circ_by_peer[i] != NULL)
            svc->mem_circular_destroy(tw->circ_by_peer[i]);
        tw->circ_by_peer[i] = NULL;
    }
}
