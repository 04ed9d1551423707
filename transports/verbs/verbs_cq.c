/*
 * The verbs transport: operations and their completions.
 *
 * An operation (vb_op_t) is what waits for a completion: a get, an atomic,
 * a zero-copy put, a flush and its per-peer reads, a rendezvous send
 * (until FIN) or read. Its address is the wr_id of its signaled WR; WRs
 * without an operation carry a marker (lane, sequence number) instead, so
 * that a completion on a worker's own QP always tells how far that QP's
 * WRs are done: a signaled WR completed proves every earlier WR of its QP
 * complete (RC completes in post order), which recycles the bounce units
 * tagged with flush numbers up to it.
 *
 * A failed completion means the QP is in error for good: the peer is
 * named once per process and the core ends the job (a dead peer must not
 * leave operations that never complete).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_internal.h"

/* ---------------------------------------------------------------------- */
/* Operations                                                              */

vb_op_t *vb_op_get(rv_tworker_t *tw, uint8_t kind, uint32_t peer,
                   rv_completion_fn cb, void *arg)
{
    vb_op_t *op = tw->free_ops;
    if (op != NULL)
        tw->free_ops = op->next;
    else if ((op = malloc(sizeof(*op))) == NULL)
        return NULL;
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->peer = peer;
    op->cb = cb;
    op->arg = arg;
    return op;
}

void vb_op_put(rv_tworker_t *tw, vb_op_t *op)
{
    if (op->mr != NULL)
        ibv_dereg_mr(op->mr);
    op->next = tw->free_ops;
    tw->free_ops = op;
}

/* A flush part completed: the flush completes with its last part. Returns
 * the flush when it does, else NULL. */
static vb_op_t *flush_part_done(rv_tworker_t *tw, vb_op_t *part,
                                rv_status_t *st)
{
    vb_op_t *flush = part->arg;
    vb_op_put(tw, part);
    if (*st != RV_OK)
        flush->failed = true;
    if (--flush->len > 0) /* parts still outstanding */
        return NULL;
    if (flush->failed)
        *st = RV_ERR_PEER;
    return flush;
}

/* Finishes @p op with status @p st: what its kind needs done with the
 * data, then its callback. */
void vb_op_done(rv_tworker_t *tw, vb_op_t *op, rv_status_t st)
{
    switch (op->kind) {
    case VB_OP_GET:
        if (st == RV_OK && op->bounce != NULL)
            memcpy(op->dst, op->bounce, op->len);
        break;
    case VB_OP_ATOMIC:
        if (st == RV_OK && op->result_p != NULL)
            *op->result_p = *op->result;
        break;
    case VB_OP_FLUSH_PART:
        op = flush_part_done(tw, op, &st);
        if (op == NULL)
            return;
        break;
    case VB_OP_READ:
        vb_read_done(tw, op, st);
        return;
    default:
        break;
    }
    rv_completion_fn cb = op->cb;
    void *arg = op->arg;
    vb_op_put(tw, op);
    if (cb != NULL)
        cb(arg, st);
}

/* ---------------------------------------------------------------------- */
/* Failures                                                                */

/* A work completion failed: the QP is in error for good. Names the peer,
 * device and port, then has the core end the job. Any thread; reports the
 * first failure of the process only. */
void vb_wc_failed(rv_transport_t *tp, uint32_t peer, const char *what,
                  enum ibv_wc_status st, uint32_t vendor)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    bool dead = st == IBV_WC_RETRY_EXC_ERR || st == IBV_WC_RNR_RETRY_EXC_ERR;
    if (atomic_flag_test_and_set(&once))
        return;
    rv_error("verbs: %s to worker %u (rank %u) failed on %s port %d: %s "
             "(vendor error %#x)%s",
             what, peer, peer / (uint32_t)tp->threads, tp->devname, tp->port,
             ibv_wc_status_str(st), vendor,
             dead ? ": the peer is dead or unreachable" : "");
    if (tp->peer_failed != NULL) {
        char why[160];
        snprintf(why, sizeof(why), "%s on %s port %d%s", ibv_wc_status_str(st),
                 tp->devname, tp->port, dead ? " (dead or unreachable)" : "");
        tp->peer_failed(tp->peer_failed_arg, peer, why);
    }
}

static void report(rv_tworker_t *tw, uint32_t peer, const char *what,
                   enum ibv_wc_status st, uint32_t vendor)
{
    tw->error_reported = true;
    vb_wc_failed(tw->tp, peer, what, st, vendor);
}

/* ---------------------------------------------------------------------- */
/* Polling                                                                 */

/* A signaled WR of lane @p lane with sequence @p seq completed: so did
 * every earlier WR of its QP. */
static void completed(rv_tworker_t *tw, uint32_t lane, uint64_t seq)
{
    vb_peer_t *p = vb_lane(tw, lane);
    if (seq > p->done) {
        p->done = seq;
        if (lane < tw->nworkers)
            atomic_store_explicit(&tw->completed_flush[lane],
                                  seq / tw->tp->signal_interval,
                                  memory_order_release);
    }
}

/* Polls the send CQ of the worker's own QPs once. */
unsigned vb_poll_send(rv_tworker_t *tw)
{
    struct ibv_wc wc[VB_CQ_POLL];
    int n = ibv_poll_cq(tw->scq, VB_CQ_POLL, wc);
    for (int k = 0; k < n; k++) {
        uint64_t id = wc[k].wr_id;
        vb_op_t *op = NULL;
        uint32_t lane;
        uint64_t seq;
        if (vb_is_marker(id)) {
            lane = vb_marker_lane(id);
            seq = vb_marker_seq(id);
        } else {
            op = (vb_op_t *)(uintptr_t)id;
            lane = op->lane;
            seq = op->seq;
        }
        rv_status_t st = RV_OK;
        if (wc[k].status != IBV_WC_SUCCESS) {
            if (wc[k].status != IBV_WC_WR_FLUSH_ERR)
                report(tw, lane, "a work request", wc[k].status,
                       wc[k].vendor_err);
            st = RV_ERR_PEER;
        }
        completed(tw, lane, seq);
        if (op != NULL)
            vb_op_done(tw, op, st);
    }
    if (n > 0)
        tw->events += (unsigned)n;
    return n > 0 ? (unsigned)n : 0;
}

/* Polls the receive CQ once: messages go to the AM path. */
void vb_poll_recv(rv_tworker_t *tw)
{
    struct ibv_wc wc[VB_CQ_POLL];
    int n = ibv_poll_cq(tw->rcq, VB_CQ_POLL, wc);
    for (int k = 0; k < n; k++) {
        if (wc[k].status == IBV_WC_SUCCESS)
            vb_on_recv(tw, &wc[k]);
        else if (wc[k].status != IBV_WC_WR_FLUSH_ERR)
            report(tw, tw->tid, "a receive", wc[k].status, wc[k].vendor_err);
    }
}

/* ---------------------------------------------------------------------- */
/* The inbox: completions of shared QPs reaped by another thread           */

/* Hands @p op, whose completion (op->status) another thread reaped from a
 * shared QP's CQ, to its owner. Any thread: a lock-free stack. */
void vb_inbox_push(rv_tworker_t *owner, vb_op_t *op)
{
    vb_op_t *head = atomic_load(&owner->inbox);
    do {
        atomic_store_explicit(&op->inbox_next, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak(&owner->inbox, &head, op));
}

/* Finishes the operations other threads reaped for this worker. Owner
 * thread only. */
void vb_inbox_drain(rv_tworker_t *tw)
{
    vb_op_t *op = atomic_exchange(&tw->inbox, NULL);
    while (op != NULL) {
        vb_op_t *next =
            atomic_load_explicit(&op->inbox_next, memory_order_relaxed);
        tw->sh_ops[op->peer]--;
        tw->events++;
        vb_op_done(tw, op, op->status);
        op = next;
    }
}
