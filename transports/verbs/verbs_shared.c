/*
 * The verbs transport: queue pairs shared by the threads of a process
 * (transport.verbs.qp_sharing: process).
 *
 * The process has one QP to every worker of the job, created at init and
 * afresh for every job; any of its threads posts on it. Each shared QP has
 * a send CQ of its own, which any thread may poll, and runs the wait-free
 * selective signaling of verbs_signal.h: a thread's WRs are cut into runs
 * whose closing completion returns the run's credits and recycles the
 * bounce units tagged (QP, thread) with the run's flush number. A
 * completion of a thread's operation reaped by another thread is pushed
 * to the owner's inbox, which the owner empties from its progress.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_internal.h"

/* How many polls a shared QP being destroyed gets for its WRs in flight to
 * complete (so that the signaling module's credits balance). */
#define VB_SHARED_DRAIN_POLLS 100000

/* Reaps one batch of @p sh's completions: the module's go to it, the
 * operations' to their owners' inboxes. Any thread. */
int vb_shared_reap(vb_shared_t *sh)
{
    struct ibv_wc wc[VB_SH_POLL];
    int n = ibv_poll_cq(sh->cq, VB_SH_POLL, wc);
    for (int k = 0; k < n; k++) {
        bool ok = wc[k].status == IBV_WC_SUCCESS;
        if (!ok && wc[k].status != IBV_WC_WR_FLUSH_ERR)
            vb_wc_failed(sh->tp, sh->peer, "a work request", wc[k].status,
                         wc[k].vendor_err);
        if (rv_vsig_completed(sh->sig, wc[k].wr_id))
            continue;
        vb_op_t *op = (vb_op_t *)(uintptr_t)wc[k].wr_id;
        op->status = ok ? RV_OK : RV_ERR_PEER;
        vb_inbox_push(op->owner, op);
    }
    return n;
}

static int sh_poll(void *ctx, uint32_t tid)
{
    (void)tid;
    return vb_shared_reap(ctx);
}

/* A marker: a signaled zero-length write to the peer's flush word. */
static rv_status_t sh_marker(void *ctx, uint32_t tid, uint64_t wr_id)
{
    vb_shared_t *sh = ctx;
    struct ibv_send_wr wr = {.wr_id = wr_id,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr *bad;
    (void)tid;
    wr.wr.rdma.remote_addr = sh->flush_addr;
    wr.wr.rdma.rkey = sh->flush_rkey;
    int rc = ibv_post_send(sh->qp, &wr, &bad);
    return rc == 0 ? RV_OK : rc == ENOMEM ? RV_ERR_AGAIN : RV_ERR_TRANSPORT;
}

/* ---------------------------------------------------------------------- */
/* Creation                                                                */

/* The shared QP to worker @p i: its CQ, the QP in INIT, its signaling. */
static rv_status_t shared_qp_create(rv_transport_t *tp, uint32_t i)
{
    vb_shared_t *sh = &tp->shared[i];
    uint32_t depth = tp->sq_depth, max_inline;
    sh->tp = tp;
    sh->peer = i;
    /* every WR may be signaled (markers), plus the receive side's one */
    sh->cq = ibv_create_cq(tp->ibctx, (int)depth + 1, NULL, NULL, 0);
    if (sh->cq == NULL) {
        rv_error("verbs: cannot create a completion queue of %u entries on "
                 "%s: %s",
                 depth + 1, tp->devname, strerror(errno));
        return RV_ERR_NO_MEMORY;
    }
    rv_status_t st =
        vb_qp_create(tp, sh->cq, sh->cq, NULL, depth, &sh->qp, &max_inline);
    if (st != RV_OK)
        return st;
    if (i == 0 || max_inline < tp->sh_max_inline)
        tp->sh_max_inline = max_inline;
    rv_vsig_params_t vp = {.sq_depth = depth,
                           .signal_interval = tp->signal_interval,
                           .max_threads = (uint32_t)tp->threads,
                           .poll_batch = VB_SH_POLL,
                           .index = i,
                           .post_marker = sh_marker,
                           .poll_cq = sh_poll,
                           .ctx = sh};
    st = rv_vsig_create(&vp, &sh->sig);
    if (st != RV_OK)
        return st;
    tp->sigs[i] = sh->sig;
    return RV_OK;
}

/* The shared QPs of one job (rv_job_run connects them afresh). On failure,
 * vb_shared_qps_destroy undoes what was made. */
rv_status_t vb_shared_qps_create(rv_transport_t *tp)
{
    tp->psn = vb_random_psn();
    for (uint32_t i = 0; i < tp->nworkers; i++) {
        rv_status_t st = shared_qp_create(tp, i);
        if (st != RV_OK)
            return st;
    }
    tp->sig_arg = (rv_vsig_mem_arg_t){.qps = tp->sigs, .nqps = tp->nworkers};
    return RV_OK;
}

void vb_shared_qps_destroy(rv_transport_t *tp)
{
    for (uint32_t i = 0; tp->shared != NULL && i < tp->nworkers; i++) {
        vb_shared_t *sh = &tp->shared[i];
        /* report what is still in flight, so the module's credits balance */
        for (int polls = 0;
             sh->sig != NULL && sh->qp != NULL &&
             rv_vsig_outstanding(sh->sig) > 0 && polls < VB_SHARED_DRAIN_POLLS;
             polls++)
            if (vb_shared_reap(sh) == 0)
                sched_yield();
        if (sh->qp != NULL)
            ibv_destroy_qp(sh->qp);
        rv_vsig_destroy(sh->sig);
        if (sh->cq != NULL)
            ibv_destroy_cq(sh->cq);
        memset(sh, 0, sizeof(*sh));
        tp->sigs[i] = NULL;
    }
}

/* The send queues must hold what verbs_signal.h's credit argument needs
 * (rv_vsig_min_sq_depth), and the device must allow it. */
static rv_status_t shared_depth(rv_transport_t *tp)
{
    uint32_t T = (uint32_t)tp->threads, S = tp->signal_interval;
    uint64_t depth = rv_vsig_min_sq_depth(S, T, VB_SH_POLL);
    if (depth < VB_SQ_DEPTH)
        depth = VB_SQ_DEPTH;
    if (depth > (uint64_t)tp->dev.max_qp_wr ||
        depth > (uint64_t)tp->dev.max_cqe) {
        rv_error("verbs: qp_sharing: process with %u threads and "
                 "signal_interval %u needs send queues of %llu WRs; %s "
                 "allows %d (lower transport.verbs.signal_interval)",
                 T, S, (unsigned long long)depth, tp->devname,
                 tp->dev.max_qp_wr);
        return RV_ERR_CONFIG;
    }
    tp->sq_depth = (uint32_t)depth;
    return RV_OK;
}

rv_status_t vb_shared_init(rv_transport_t *tp)
{
    rv_status_t st = shared_depth(tp);
    if (st != RV_OK)
        return st;
    st = RV_ERR_NO_MEMORY;
    tp->shared = calloc(tp->nworkers, sizeof(*tp->shared));
    if (tp->shared == NULL)
        goto err;
    tp->sigs = calloc(tp->nworkers, sizeof(*tp->sigs));
    if (tp->sigs == NULL)
        goto err_shared;
    tp->workers = calloc((size_t)tp->threads, sizeof(*tp->workers));
    if (tp->workers == NULL)
        goto err_sigs;
    st = vb_shared_qps_create(tp);
    if (st != RV_OK)
        goto err_qps;
    return RV_OK;

err_qps:
    vb_shared_qps_destroy(tp);
    free((void *)tp->workers);
    tp->workers = NULL;
err_sigs:
    free(tp->sigs);
    tp->sigs = NULL;
err_shared:
    free(tp->shared);
    tp->shared = NULL;
err:
    return st;
}

void vb_shared_fini(rv_transport_t *tp)
{
    vb_shared_qps_destroy(tp);
    free(tp->shared);
    free(tp->sigs);
    free((void *)tp->workers);
    tp->shared = NULL;
    tp->sigs = NULL;
    tp->workers = NULL;
}

/* ---------------------------------------------------------------------- */
/* Posting                                                                 */

/* Whether a thread may open a run on @p sh now without polling: room for
 * every thread of the process to open one is left. A thread must not
 * wait for credits inside a post: the completions it would wait for may
 * need its own receive queue drained (a worker sending to itself, or two
 * workers sending to each other). */
static bool sh_room(rv_tworker_t *tw, vb_shared_t *sh)
{
    uint64_t need = (uint64_t)tw->tp->threads * (tw->tp->signal_interval + 1);
    return rv_vsig_outstanding(sh->sig) + need <= tw->tp->sq_depth;
}

static rv_status_t shared_now(rv_tworker_t *tw, uint32_t peer,
                              struct ibv_send_wr *wr, bool signal,
                              rv_mem_unit_t *unit)
{
    vb_shared_t *sh = &tw->tp->shared[peer];
    rv_vsig_ticket_t t;
    vb_op_t *op = signal ? (vb_op_t *)(uintptr_t)wr->wr_id : NULL;
    rv_status_t st =
        rv_vsig_begin(sh->sig, tw->local, op != NULL, (uintptr_t)op, &t);
    if (st != RV_OK)
        return st;
    wr->wr_id = t.wr_id;
    if (t.signaled)
        wr->send_flags |= IBV_SEND_SIGNALED;
    if (unit != NULL)
        rv_mem_circular_tag(unit, t.channel, t.flush);
    tw->sh_last[peer] = t.flush;
    struct ibv_send_wr *bad;
    wr->next = NULL;
    int rc = ibv_post_send(sh->qp, wr, &bad);
    if (rc != 0) {
        rv_error("verbs: cannot post to worker %u (rank %d) on %s: %s", peer,
                 vb_rank_of(tw, peer), tw->tp->devname, strerror(rc));
        if (op != NULL)
            tw->sh_ops[peer]--;
    }
    tw->sh_open[peer] = true;
    rv_status_t est = rv_vsig_end(sh->sig, &t, rc == 0);
    return rc != 0 ? RV_ERR_TRANSPORT : est;
}

/* Posts @p wr to worker @p peer over the process's shared QP, or queues
 * it (never waits) behind earlier ones; queued WRs are posted from
 * progress, in order. A queued WR's bounce unit is held (tagged with a
 * flush number that never completes) until it is posted. */
rv_status_t vb_post_shared(rv_tworker_t *tw, uint32_t peer,
                           struct ibv_send_wr *wr, bool signal,
                           rv_mem_unit_t *unit)
{
    vb_peer_t *p = &tw->peers[peer];
    vb_op_t *op = signal ? (vb_op_t *)(uintptr_t)wr->wr_id : NULL;
    if (p->fence) {
        wr->send_flags |= IBV_SEND_FENCE;
        p->fence = false;
    }
    if (op != NULL) {
        op->owner = tw;
        tw->sh_ops[peer]++;
    }
    vb_shared_t *sh = &tw->tp->shared[peer];
    if (p->pend_head == NULL && !sh_room(tw, sh))
        vb_shared_reap(sh);
    if (p->pend_head == NULL && sh_room(tw, sh))
        return shared_now(tw, peer, wr, signal, unit);
    rv_status_t st = vb_backlog_push(tw, p, wr);
    if (st != RV_OK) {
        if (op != NULL)
            tw->sh_ops[peer]--;
        return st;
    }
    p->pend_tail->unit = unit;
    p->pend_tail->signal = signal;
    if (unit != NULL)
        rv_mem_circular_tag(unit, rv_vsig_channel(peer, tw->local), UINT64_MAX);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Progress                                                                */

/* Posts this worker's queued WRs that now fit on their shared QPs. */
static void shared_backlog(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < tw->nworkers && tw->backlog > 0; i++) {
        vb_peer_t *p = &tw->peers[i];
        while (p->pend_head != NULL && sh_room(tw, &tw->tp->shared[i])) {
            vb_pending_t *q = vb_backlog_pop(tw, p);
            if (q->wr.num_sge > 0)
                q->wr.sg_list = &q->sge;
            shared_now(tw, i, &q->wr, q->signal, q->unit);
            free(q);
            tw->events++;
        }
    }
}

/* Closes this worker's open run on every shared QP, so that the bounce
 * units of its WRs come back. */
static void close_runs(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (tw->sh_open[i]) {
            tw->sh_open[i] = false;
            rv_vsig_flush(tw->tp->shared[i].sig, tw->local);
        }
}

/* Progress on shared QPs: reap where this worker waits for operations,
 * finish what other threads reaped for it; when idle, close open runs so
 * that their bounce buffers come back. */
void vb_shared_progress(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (tw->sh_ops[i] > 0 || tw->peers[i].pend_head != NULL)
            vb_shared_reap(&tw->tp->shared[i]);
    shared_backlog(tw);
    vb_inbox_drain(tw);
    if (tw->events == 0)
        close_runs(tw);
}

/* For disconnection: whether this worker's runs are closed and complete
 * and its operations done (the bounce memory of its WRs is freed with the
 * worker), or a failure was reported (then nothing more will complete).
 * Closes open runs and reaps on the way. */
bool vb_shared_quiet(rv_tworker_t *tw)
{
    bool quiet = true;
    for (uint32_t i = 0; quiet && i < tw->nworkers; i++) {
        rv_vsig_t *sig = tw->tp->shared[i].sig;
        if (tw->sh_open[i]) {
            tw->sh_open[i] = false;
            rv_vsig_flush(sig, tw->local);
        }
        if (tw->sh_ops[i] > 0 ||
            rv_vsig_completed_flush(sig, tw->local) < tw->sh_last[i]) {
            vb_shared_reap(&tw->tp->shared[i]);
            quiet = tw->error_reported;
        }
    }
    return quiet;
}
