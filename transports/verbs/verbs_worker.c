/*
 * The verbs transport: workers, RC connections, active messages and RMA.
 *
 * Active messages: up to caps.eager_limit a message is one SEND (inline up
 * to the QP's max_inline_data, else from a bounce buffer) into a buffer of
 * the receiver's shared receive queue, reposted once consumed. Larger ones
 * go by rendezvous: the sender registers the payload and SENDs an RTS; the
 * receiver RDMA-reads it into memory of its own, delivers it, and answers
 * FIN so the sender may reuse the payload. Messages of one sender are
 * delivered in order: while a rendezvous is being read, later messages of
 * that sender wait behind it.
 *
 * RMA: put and get up to VB_ZCOPY_MIN go through bounce buffers (a put is
 * then complete locally at once); larger ones register the user's memory
 * for the operation (zero copy). Atomics are IBV_WR_ATOMIC_*. A fence is
 * IBV_SEND_FENCE on the next WR to that peer; puts are already ordered by
 * the RC queue pair. A flush RDMA-reads one word of the peer: on an RC QP
 * the read completes only after every earlier write has been placed.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verbs_internal.h"

extern const rv_transport_ops_t rv_transport_ops;

#define MARKER(peer, seq) ((uint64_t)(peer) << 40 | (uint64_t)(seq) << 1 | 1)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static vb_op_t *op_get(rv_tworker_t *tw, uint8_t kind, uint32_t peer,
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

static void op_put(rv_tworker_t *tw, vb_op_t *op)
{
    if (op->mr != NULL)
        ibv_dereg_mr(op->mr);
    op->next = tw->free_ops;
    tw->free_ops = op;
}

static int rank_of(rv_tworker_t *tw, uint32_t peer)
{
    return (int)(peer / (uint32_t)tw->tp->threads);
}

/* The QPs a worker posts on alone ("lanes"): one per worker with
 * qp_sharing thread (lane = peer); with process, its own QP per process
 * (lane nworkers + rank), used for rendezvous reads. */
static vb_peer_t *lane_of(rv_tworker_t *tw, uint32_t lane)
{
    return lane < tw->nworkers ? &tw->peers[lane]
                               : &tw->owned[lane - tw->nworkers];
}

static uint32_t nlanes(rv_tworker_t *tw)
{
    return tw->tp->shared_qps ? tw->nworkers + tw->nprocs : tw->nworkers;
}

/* A work completion failed: the QP is in error for good. Names the peer,
 * device and port, then has the core end the job (a dead peer must not
 * leave operations that never complete). Any thread. */
static void wc_failed(rv_transport_t *tp, uint32_t peer, const char *what,
                      enum ibv_wc_status st, uint32_t vendor)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    bool dead = st == IBV_WC_RETRY_EXC_ERR || st == IBV_WC_RNR_RETRY_EXC_ERR;
    if (atomic_flag_test_and_set(&once))
        return;
    rv_error("verbs: %s to worker %u (rank %u) failed on %s port %d: %s "
             "(vendor error %#x)%s", what, peer,
             peer / (uint32_t)tp->threads, tp->devname, tp->port,
             ibv_wc_status_str(st), vendor,
             dead ? ": the peer is dead or unreachable" : "");
    if (tp->peer_failed != NULL) {
        char why[160];
        snprintf(why, sizeof(why), "%s on %s port %d%s",
                 ibv_wc_status_str(st), tp->devname, tp->port,
                 dead ? " (dead or unreachable)" : "");
        tp->peer_failed(tp->peer_failed_arg, peer, why);
    }
}

static void report(rv_tworker_t *tw, uint32_t peer, const char *what,
                   enum ibv_wc_status st, uint32_t vendor)
{
    tw->error_reported = true;
    wc_failed(tw->tp, peer, what, st, vendor);
}

/* ---------------------------------------------------------------------- */
/* Posting with selective signaling                                        */

static unsigned poll_send(rv_tworker_t *tw);

static int post_now(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr)
{
    struct ibv_send_wr *bad;
    vb_peer_t *p = lane_of(tw, lane);
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

static rv_status_t enqueue(rv_tworker_t *tw, vb_peer_t *p,
                           struct ibv_send_wr *wr);

/* Posts @p wr to @p peer, or queues it behind earlier ones when the send
 * queue is full (never waits). Its sequence number is fixed here: the WR
 * is signaled when @p signal (an op waits for it) or every
 * signal_interval-th WR of the QP, and @p unit (a bounce buffer it uses)
 * is tagged with its flush number at once, so the unit cannot be recycled
 * before the WR is even posted. */
static rv_status_t post(rv_tworker_t *tw, uint32_t peer,
                        struct ibv_send_wr *wr, bool signal,
                        rv_mem_unit_t *unit)
{
    vb_peer_t *p = lane_of(tw, peer);
    uint32_t S = tw->tp->signal_interval;
    uint64_t seq = ++p->assigned;
    if (signal || seq % S == 0) {
        wr->send_flags |= IBV_SEND_SIGNALED;
        if (wr->wr_id == 0)
            wr->wr_id = MARKER(peer, seq);
        else {
            ((vb_op_t *)(uintptr_t)wr->wr_id)->seq = seq;
            ((vb_op_t *)(uintptr_t)wr->wr_id)->lane = peer;
        }
    } else {
        /* no completion unless it fails: then its error names the peer
         * (the first failed WR completes with its status, signaled or
         * not) */
        wr->wr_id = MARKER(peer, seq);
    }
    if (p->fence) {
        wr->send_flags |= IBV_SEND_FENCE;
        p->fence = false;
    }
    if (unit != NULL)
        rv_mem_circular_tag(unit, peer, (seq + S - 1) / S);
    if (p->pend_head == NULL && seq - p->done <= VB_SQ_DEPTH - 1) {
        int rc = post_now(tw, peer, wr);
        if (rc == 0)
            return RV_OK;
        if (rc != ENOMEM) {
            p->assigned--;
            return RV_ERR_TRANSPORT;
        }
    }
    rv_status_t st = enqueue(tw, p, wr);
    if (st != RV_OK)
        p->assigned--;
    return st;
}

/* Appends a copy of @p wr (and of its inline bytes) to @p p's backlog. */
static rv_status_t enqueue(rv_tworker_t *tw, vb_peer_t *p,
                           struct ibv_send_wr *wr)
{
    vb_pending_t *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return RV_ERR_NO_MEMORY;
    q->wr = *wr;
    q->wr.next = NULL;
    if (wr->num_sge > 0) {
        q->sge = wr->sg_list[0];
        q->wr.sg_list = &q->sge;
        if ((wr->send_flags & IBV_SEND_INLINE) && q->sge.length <= 256) {
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

/* Posts queued WRs that now fit. */
static void post_backlog(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < nlanes(tw) && tw->backlog > 0; i++) {
        vb_peer_t *p = lane_of(tw, i);
        vb_pending_t *q;
        if (p->qp == NULL) /* shared QPs: progress_shared */
            continue;
        while ((q = p->pend_head) != NULL &&
               p->posted + 1 - p->done <= VB_SQ_DEPTH - 1) {
            int rc = post_now(tw, i, &q->wr);
            if (rc == ENOMEM)
                break;
            if (rc != 0) { /* the QP is broken: account it as done */
                p->posted++;
                p->done = p->posted;
            }
            p->pend_head = q->next;
            if (p->pend_head == NULL)
                p->pend_tail = NULL;
            tw->backlog--;
            free(q);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Shared QPs (qp_sharing: process)                                        */

static void inbox_push(rv_tworker_t *owner, vb_op_t *op)
{
    vb_op_t *head = atomic_load(&owner->inbox);
    do {
        atomic_store_explicit(&op->inbox_next, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak(&owner->inbox, &head, op));
}

/* Reaps one batch of @p sh's completions: the module's go to it, the
 * operations' to their owners' inboxes. Any thread. */
static int reap_shared(vb_shared_t *sh)
{
    struct ibv_wc wc[VB_SH_POLL];
    int n = ibv_poll_cq(sh->cq, VB_SH_POLL, wc);
    for (int k = 0; k < n; k++) {
        bool ok = wc[k].status == IBV_WC_SUCCESS;
        if (!ok && wc[k].status != IBV_WC_WR_FLUSH_ERR)
            wc_failed(sh->tp, sh->peer, "a work request", wc[k].status,
                      wc[k].vendor_err);
        if (rv_vsig_completed(sh->sig, wc[k].wr_id))
            continue;
        vb_op_t *op = (vb_op_t *)(uintptr_t)wc[k].wr_id;
        op->status = ok ? RV_OK : RV_ERR_PEER;
        inbox_push(op->owner, op);
    }
    return n;
}

static int sh_poll(void *ctx, uint32_t tid)
{
    (void)tid;
    return reap_shared(ctx);
}

/* A marker: a signaled zero-length write to the peer's flush word. */
static rv_status_t sh_marker(void *ctx, uint32_t tid, uint64_t wr_id)
{
    vb_shared_t *sh = ctx;
    struct ibv_send_wr wr = {.wr_id = wr_id, .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr *bad;
    (void)tid;
    wr.wr.rdma.remote_addr = sh->flush_addr;
    wr.wr.rdma.rkey = sh->flush_rkey;
    int rc = ibv_post_send(sh->qp, &wr, &bad);
    return rc == 0 ? RV_OK : rc == ENOMEM ? RV_ERR_AGAIN : RV_ERR_TRANSPORT;
}

static rv_status_t shared_qps_create(rv_transport_t *tp);

rv_status_t vb_shared_init(rv_transport_t *tp)
{
    uint32_t T = (uint32_t)tp->threads, S = tp->signal_interval;
    uint64_t depth = rv_vsig_min_sq_depth(S, T, VB_SH_POLL);
    if (depth < VB_SQ_DEPTH)
        depth = VB_SQ_DEPTH;
    if (depth > (uint64_t)tp->dev.max_qp_wr ||
        depth > (uint64_t)tp->dev.max_cqe) {
        rv_error("verbs: qp_sharing: process with %u threads and "
                 "signal_interval %u needs send queues of %llu WRs; %s "
                 "allows %d (lower transport.verbs.signal_interval)", T, S,
                 (unsigned long long)depth, tp->devname, tp->dev.max_qp_wr);
        return RV_ERR_CONFIG;
    }
    tp->sq_depth = (uint32_t)depth;
    tp->shared = calloc(tp->nworkers, sizeof(*tp->shared));
    tp->sigs = calloc(tp->nworkers, sizeof(*tp->sigs));
    tp->workers = calloc(T, sizeof(*tp->workers));
    if (tp->shared == NULL || tp->sigs == NULL || tp->workers == NULL)
        return RV_ERR_NO_MEMORY;
    return shared_qps_create(tp);
}

/* The shared QPs of one job (rv_job_run connects them afresh). */
static rv_status_t shared_qps_create(rv_transport_t *tp)
{
    uint32_t T = (uint32_t)tp->threads, S = tp->signal_interval;
    uint64_t depth = tp->sq_depth;
    tp->psn = (uint32_t)(rand() & 0xffffff);
    for (uint32_t i = 0; i < tp->nworkers; i++) {
        vb_shared_t *sh = &tp->shared[i];
        sh->tp = tp;
        sh->peer = i;
        sh->cq = ibv_create_cq(tp->ibctx, (int)depth + 1, NULL, NULL, 0);
        struct ibv_qp_init_attr a = {
            .send_cq = sh->cq, .recv_cq = sh->cq,
            .cap = {.max_send_wr = (uint32_t)depth, .max_recv_wr = 1,
                    .max_send_sge = 1, .max_recv_sge = 1,
                    .max_inline_data = 220},
            .qp_type = IBV_QPT_RC,
        };
        if (sh->cq != NULL)
            sh->qp = ibv_create_qp(tp->pd, &a);
        if (sh->cq != NULL && sh->qp == NULL) {
            a.cap.max_inline_data = 0;
            sh->qp = ibv_create_qp(tp->pd, &a);
        }
        if (sh->qp != NULL &&
            (i == 0 || a.cap.max_inline_data < tp->sh_max_inline))
            tp->sh_max_inline = a.cap.max_inline_data;
        if (sh->qp == NULL) {
            rv_error("verbs: cannot create a shared queue pair of %llu WRs "
                     "on %s: %s", (unsigned long long)depth, tp->devname,
                     strerror(errno));
            return RV_ERR_NO_MEMORY;
        }
        struct ibv_qp_attr m = {
            .qp_state = IBV_QPS_INIT, .port_num = (uint8_t)tp->port,
            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC};
        if (ibv_modify_qp(sh->qp, &m,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                              IBV_QP_ACCESS_FLAGS) != 0)
            return RV_ERR_TRANSPORT;
        rv_vsig_params_t vp = {.sq_depth = (uint32_t)depth,
                               .signal_interval = S, .max_threads = T,
                               .poll_batch = VB_SH_POLL, .index = i,
                               .post_marker = sh_marker, .poll_cq = sh_poll,
                               .ctx = sh};
        rv_status_t st = rv_vsig_create(&vp, &sh->sig);
        if (st != RV_OK)
            return st;
        tp->sigs[i] = sh->sig;
    }
    tp->sig_arg = (rv_vsig_mem_arg_t){.qps = tp->sigs, .nqps = tp->nworkers};
    return RV_OK;
}

static void shared_qps_destroy(rv_transport_t *tp)
{
    for (uint32_t i = 0; tp->shared != NULL && i < tp->nworkers; i++) {
        vb_shared_t *sh = &tp->shared[i];
        /* report what is still in flight, so the module's credits balance */
        for (int spins = 0; sh->sig != NULL && sh->qp != NULL &&
                            rv_vsig_outstanding(sh->sig) > 0 &&
                            spins < 100000;
             spins++)
            if (reap_shared(sh) == 0)
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

void vb_shared_fini(rv_transport_t *tp)
{
    shared_qps_destroy(tp);
    free(tp->shared);
    free(tp->sigs);
    free((void *)tp->workers);
    tp->shared = NULL;
}

/* Whether a thread may open a run on @p sh now without polling: room for
 * every thread of the process to open one is left. A thread must not
 * wait for credits inside a post: the completions it would wait for may
 * need its own receive queue drained (a worker sending to itself, or two
 * workers sending to each other). */
static bool sh_room(rv_tworker_t *tw, vb_shared_t *sh)
{
    uint64_t need = (uint64_t)tw->tp->threads *
                    (tw->tp->signal_interval + 1);
    return rv_vsig_outstanding(sh->sig) + need <= tw->tp->sq_depth;
}

static rv_status_t shared_now(rv_tworker_t *tw, uint32_t peer,
                              struct ibv_send_wr *wr, bool signal,
                              rv_mem_unit_t *unit)
{
    vb_shared_t *sh = &tw->tp->shared[peer];
    rv_vsig_ticket_t t;
    vb_op_t *op = signal ? (vb_op_t *)(uintptr_t)wr->wr_id : NULL;
    rv_status_t st = rv_vsig_begin(sh->sig, tw->local, op != NULL,
                                   (uintptr_t)op, &t);
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
                 rank_of(tw, peer), tw->tp->devname, strerror(rc));
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
static rv_status_t post_shared(rv_tworker_t *tw, uint32_t peer,
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
        reap_shared(sh);
    if (p->pend_head == NULL && sh_room(tw, sh))
        return shared_now(tw, peer, wr, signal, unit);
    rv_status_t st = enqueue(tw, p, wr);
    if (st != RV_OK) {
        if (op != NULL)
            tw->sh_ops[peer]--;
        return st;
    }
    p->pend_tail->unit = unit;
    p->pend_tail->signal = signal;
    if (unit != NULL)
        rv_mem_circular_tag(unit, rv_vsig_channel(peer, tw->local),
                            UINT64_MAX);
    return RV_OK;
}

/* Posts to worker @p peer: its own QP, or the process's shared one. */
static rv_status_t post_to(rv_tworker_t *tw, uint32_t peer,
                           struct ibv_send_wr *wr, bool signal,
                           rv_mem_unit_t *unit)
{
    return tw->tp->shared_qps ? post_shared(tw, peer, wr, signal, unit)
                              : post(tw, peer, wr, signal, unit);
}

static void op_done(rv_tworker_t *tw, vb_op_t *op, rv_status_t st);

/* Progress on shared QPs: reap where this worker waits for operations,
 * finish what other threads reaped for it; when idle, close open runs so
 * that their bounce buffers come back. */
static void progress_shared(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (tw->sh_ops[i] > 0 || tw->peers[i].pend_head != NULL)
            reap_shared(&tw->tp->shared[i]);
    for (uint32_t i = 0; i < tw->nworkers && tw->backlog > 0; i++) {
        vb_peer_t *p = &tw->peers[i];
        vb_pending_t *q;
        while ((q = p->pend_head) != NULL &&
               sh_room(tw, &tw->tp->shared[i])) {
            p->pend_head = q->next;
            if (p->pend_head == NULL)
                p->pend_tail = NULL;
            tw->backlog--;
            if (q->wr.num_sge > 0)
                q->wr.sg_list = &q->sge;
            shared_now(tw, i, &q->wr, q->signal, q->unit);
            free(q);
            tw->events++;
        }
    }
    vb_op_t *op = atomic_exchange(&tw->inbox, NULL);
    while (op != NULL) {
        vb_op_t *next = atomic_load_explicit(&op->inbox_next,
                                             memory_order_relaxed);
        tw->sh_ops[op->peer]--;
        tw->events++;
        op_done(tw, op, op->status);
        op = next;
    }
    if (tw->events == 0)
        for (uint32_t i = 0; i < tw->nworkers; i++)
            if (tw->sh_open[i]) {
                tw->sh_open[i] = false;
                rv_vsig_flush(tw->tp->shared[i].sig, tw->local);
            }
}

/* A signaled WR of @p peer with sequence @p seq completed: so did every
 * earlier WR of its QP. */
static void completed(rv_tworker_t *tw, uint32_t peer, uint64_t seq)
{
    vb_peer_t *p = lane_of(tw, peer);
    if (seq > p->done) {
        p->done = seq;
        if (peer < tw->nworkers)
            atomic_store_explicit(&tw->completed_flush[peer],
                              seq / tw->tp->signal_interval,
                              memory_order_release);
    }
}

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
    rv_status_t st = rv_mem_circular_create(&cp, &tw->circ_by_peer[peer]);
    if (st == RV_OK)
        st = rv_mem_linear_create(tw->circ_by_peer[peer],
                                  &tw->lin_by_peer[peer]);
    return st;
}

/* A bounce segment of @p len bytes for @p peer. */
static rv_status_t bounce(rv_tworker_t *tw, uint32_t peer, size_t len,
                          void **addr_p, uint32_t *lkey_p,
                          rv_mem_unit_t **unit_p)
{
    rv_status_t st;
    for (;;) {
        if (tw->lin_by_peer[peer] == NULL &&
            (st = ring_create(tw, peer)) != RV_OK)
            return st;
        st = rv_mem_linear_alloc(tw->lin_by_peer[peer], len, 8, addr_p,
                                 unit_p);
        if (st != RV_ERR_AGAIN)
            break;
        if (poll_send(tw) == 0)
            sched_yield();
    }
    if (st == RV_OK)
        *lkey_p = (*unit_p)->chunk->tmem->mr->lkey;
    return st;
}

/* ---------------------------------------------------------------------- */
/* Receiving                                                               */

static rv_status_t post_recv(rv_tworker_t *tw, uint32_t i)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(tw->rx + (size_t)i * VB_RXBUF),
                          .length = VB_RXBUF,
                          .lkey = tw->rx_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad;
    int rc = ibv_post_srq_recv(tw->srq, &wr, &bad);
    if (rc != 0) {
        rv_error("verbs: cannot post a receive buffer on %s: %s",
                 tw->tp->devname, strerror(rc));
        return RV_ERR_TRANSPORT;
    }
    return RV_OK;
}

static rv_status_t send_ctrl(rv_tworker_t *tw, uint32_t peer, uint8_t type,
                             const void *body, size_t len, bool signal);

/* Registered memory for a rendezvous payload: from the worker's pool
 * (chunks registered once, in its NUMA zone), else malloc'ed and
 * registered for this message alone (*mr_p). Registering per message
 * costs a pinning system call each time; the pool makes it a best-fit
 * allocation. */
static void *rndv_mem(rv_tworker_t *tw, size_t len, uint32_t *lkey_p,
                      uint32_t *rkey_p, struct ibv_mr **mr_p)
{
    const rv_mem_chunk_t *c;
    void *p;
    *mr_p = NULL;
    if (rv_mem_general_alloc(tw->pool, len ? len : 1, 0, &p, &c) == RV_OK) {
        *lkey_p = c->tmem->mr->lkey;
        *rkey_p = c->tmem->mr->rkey;
        return p;
    }
    p = malloc(len ? len : 1);
    if (p == NULL || (*mr_p = vb_reg(tw->tp, p, len)) == NULL) {
        free(p);
        return NULL;
    }
    *lkey_p = (*mr_p)->lkey;
    *rkey_p = (*mr_p)->rkey;
    return p;
}

static void rndv_mem_free(rv_tworker_t *tw, void *p, struct ibv_mr *mr)
{
    if (mr != NULL) {
        ibv_dereg_mr(mr);
        free(p);
    } else if (p != NULL) {
        rv_mem_general_free(tw->pool, p);
    }
}

/* Delivers the ready messages at the head of @p src's queue. */
static void deliver_held(rv_tworker_t *tw, uint32_t src)
{
    vb_peer_t *p = &tw->peers[src];
    vb_held_t *h;
    while ((h = p->held_head) != NULL && h->ready) {
        p->held_head = h->next;
        if (p->held_head == NULL)
            p->held_tail = NULL;
        rv_am_rx_t rx = {.src = src, .hdr = h->hdr, .hdr_len = h->hdr_len,
                         .data = h->data, .len = h->len, .persistent = true};
        tw->events++;
        if (tw->am_recv(tw->am_arg, &rx, h) != RV_INPROGRESS)
            vb_am_release(tw, h);
    }
}

void vb_am_release(rv_tworker_t *tw, void *desc)
{
    vb_held_t *h = desc;
    rndv_mem_free(tw, h->data, h->mr);
    free(h);
}

static void hold(rv_tworker_t *tw, vb_held_t *h)
{
    vb_peer_t *p = &tw->peers[h->src];
    if (p->held_tail != NULL)
        p->held_tail->next = h;
    else
        p->held_head = h;
    p->held_tail = h;
}

/* An RTS: read the payload, then deliver it in its turn. */
static void start_read(rv_tworker_t *tw, const vb_wire_t *m,
                       const uint8_t *hdr, const vb_rts_t *rts)
{
    vb_held_t *h = calloc(1, sizeof(*h));
    vb_op_t *op = op_get(tw, VB_OP_READ, m->src, NULL, h);
    uint32_t lkey = 0, rkey;
    if (h != NULL)
        h->data = rndv_mem(tw, m->len, &lkey, &rkey, &h->mr);
    if (h == NULL || op == NULL || h->data == NULL) {
        rv_error("verbs: no memory for a %u-byte message from worker %u; "
                 "dropped", m->len, m->src);
        if (h != NULL)
            rndv_mem_free(tw, h->data, h->mr);
        free(h);
        if (op != NULL)
            op_put(tw, op);
        return;
    }
    h->src = m->src;
    h->len = m->len;
    h->hdr_len = m->hdr_len;
    h->cookie = rts->cookie;
    memcpy(h->hdr, hdr, m->hdr_len);
    hold(tw, h);
    struct ibv_sge sge = {.addr = (uintptr_t)h->data, .length = m->len,
                          .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)op, .sg_list = &sge,
                             .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
    wr.wr.rdma.remote_addr = rts->addr;
    wr.wr.rdma.rkey = rts->rkey;
    op->len = m->len;
    uint32_t lane = tw->tp->shared_qps
                        ? tw->nworkers + (uint32_t)rank_of(tw, m->src)
                        : m->src;
    if (post(tw, lane, &wr, true, NULL) != RV_OK) {
        h->ready = true; /* delivered truncated: the core counts it */
        h->len = 0;
        op_put(tw, op);
    }
}

static void on_recv(rv_tworker_t *tw, const struct ibv_wc *wc)
{
    uint32_t i = (uint32_t)wc->wr_id;
    const uint8_t *buf = tw->rx + (size_t)i * VB_RXBUF;
    vb_wire_t m;
    if (wc->byte_len < sizeof(m)) {
        rv_error("verbs: a %u-byte message, shorter than its header; "
                 "dropped", wc->byte_len);
        post_recv(tw, i);
        return;
    }
    memcpy(&m, buf, sizeof(m));
    const uint8_t *hdr = buf + sizeof(m), *body = hdr + m.hdr_len;
    size_t have = wc->byte_len - sizeof(m);
    bool bad = m.src >= tw->nworkers || m.hdr_len > VB_MAX_HDR ||
               m.hdr_len > have;
    if (!bad && m.type == VB_EAGER && have - m.hdr_len != m.len)
        bad = true;
    if (!bad && m.type == VB_RTS && have - m.hdr_len != sizeof(vb_rts_t))
        bad = true;
    if (bad) {
        rv_error("verbs: malformed message (type %u, %u bytes, from %u); "
                 "dropped", m.type, wc->byte_len, m.src);
        post_recv(tw, i);
        return;
    }
    vb_peer_t *p = &tw->peers[m.src];
    tw->events++;
    switch (m.type) {
    case VB_EAGER:
        if (p->held_head == NULL) {
            rv_am_rx_t rx = {.src = m.src, .hdr = hdr, .hdr_len = m.hdr_len,
                             .data = (void *)body, .len = m.len};
            tw->am_recv(tw->am_arg, &rx, NULL);
        } else {
            vb_held_t *h = calloc(1, sizeof(*h));
            if (h != NULL && (h->data = malloc(m.len ? m.len : 1)) != NULL) {
                h->src = m.src;
                h->ready = true;
                h->len = m.len;
                h->hdr_len = m.hdr_len;
                memcpy(h->hdr, hdr, m.hdr_len);
                memcpy(h->data, body, m.len);
                hold(tw, h);
            } else {
                free(h);
                rv_error("verbs: no memory to hold a message from worker "
                         "%u; dropped", m.src);
            }
        }
        break;
    case VB_RTS: {
        vb_rts_t rts;
        memcpy(&rts, body, sizeof(rts));
        start_read(tw, &m, hdr, &rts);
        break;
    }
    case VB_FIN: {
        uint64_t cookie;
        memcpy(&cookie, hdr, sizeof(cookie));
        vb_op_t *op = (vb_op_t *)(uintptr_t)cookie;
        if (op->bounce != NULL) { /* the payload's copy */
            rndv_mem_free(tw, op->bounce, op->mr);
            op->mr = NULL;
        }
        if (op->cb != NULL)
            op->cb(op->arg, RV_OK);
        op_put(tw, op);
        break;
    }
    case VB_BYE:
        if (!p->bye) {
            p->bye = true;
            tw->byes++;
        }
        break;
    default:
        rv_error("verbs: unknown message type %u from worker %u; dropped",
                 m.type, m.src);
    }
    post_recv(tw, i);
}

/* ---------------------------------------------------------------------- */
/* Completions                                                             */

static void op_done(rv_tworker_t *tw, vb_op_t *op, rv_status_t st)
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
    case VB_OP_FLUSH_PART: {
        vb_op_t *parent = op->arg;
        op_put(tw, op);
        if (st != RV_OK)
            parent->failed = true;
        if (--parent->len > 0) /* parts still outstanding */
            return;
        op = parent;
        if (op->failed)
            st = RV_ERR_PEER;
        break;
    }
    case VB_OP_READ: {
        vb_held_t *h = op->arg;
        uint64_t cookie = h->cookie;
        h->ready = true;
        if (st != RV_OK)
            h->len = 0;
        uint32_t src = op->peer;
        op_put(tw, op);
        send_ctrl(tw, src, VB_FIN, &cookie, sizeof(cookie), false);
        deliver_held(tw, src);
        return;
    }
    default:
        break;
    }
    rv_completion_fn cb = op->cb;
    void *arg = op->arg;
    op_put(tw, op);
    if (cb != NULL)
        cb(arg, st);
}

static unsigned poll_send(rv_tworker_t *tw)
{
    struct ibv_wc wc[VB_CQ_POLL];
    int n = ibv_poll_cq(tw->scq, VB_CQ_POLL, wc);
    for (int k = 0; k < n; k++) {
        uint64_t id = wc[k].wr_id;
        uint32_t peer;
        vb_op_t *op = NULL;
        uint64_t seq;
        if (id & 1) {
            peer = (uint32_t)(id >> 40);
            seq = (id & ((UINT64_C(1) << 40) - 1)) >> 1;
        } else {
            op = (vb_op_t *)(uintptr_t)id;
            peer = op->lane;
            seq = op->seq;
        }
        rv_status_t st = RV_OK;
        if (wc[k].status != IBV_WC_SUCCESS) {
            if (wc[k].status != IBV_WC_WR_FLUSH_ERR)
                report(tw, peer, "a work request", wc[k].status,
                       wc[k].vendor_err);
            st = RV_ERR_PEER;
        }
        completed(tw, peer, seq);
        if (op != NULL)
            op_done(tw, op, st);
    }
    if (n > 0)
        tw->events += (unsigned)n;
    return n > 0 ? (unsigned)n : 0;
}

unsigned vb_progress(rv_tworker_t *tw)
{
    tw->events = 0;
    poll_send(tw);
    if (tw->backlog > 0)
        post_backlog(tw);
    if (tw->tp->shared_qps)
        progress_shared(tw);
    struct ibv_wc wc[VB_CQ_POLL];
    int n = ibv_poll_cq(tw->rcq, VB_CQ_POLL, wc);
    for (int k = 0; k < n; k++) {
        if (wc[k].status == IBV_WC_SUCCESS) {
            on_recv(tw, &wc[k]);
        } else if (wc[k].status != IBV_WC_WR_FLUSH_ERR) {
            report(tw, tw->tid, "a receive", wc[k].status,
                   wc[k].vendor_err);
        }
    }
    return tw->events;
}

/* ---------------------------------------------------------------------- */
/* Active messages                                                         */

/* Sends type @p type with @p hdr and the gathered @p len bytes, eagerly;
 * the wire header announces @p announce bytes of payload. */
static rv_status_t send_eager(rv_tworker_t *tw, uint32_t peer, uint8_t type,
                              const void *hdr, size_t hdr_len,
                              const struct iovec *iov, size_t iovcnt,
                              size_t len, size_t announce, bool signal)
{
    vb_wire_t m = {.src = tw->tid, .type = type, .hdr_len = (uint8_t)hdr_len,
                   .len = (uint32_t)announce};
    size_t total = sizeof(m) + hdr_len + len;
    uint8_t stack[256];
    uint8_t *buf;
    uint32_t lkey = 0;
    rv_mem_unit_t *unit = NULL;
    bool inl = total <= tw->max_inline && total <= sizeof(stack);
    if (inl) {
        buf = stack;
    } else {
        void *a;
        rv_status_t st = bounce(tw, peer, total, &a, &lkey, &unit);
        if (st != RV_OK)
            return st;
        buf = a;
    }
    memcpy(buf, &m, sizeof(m));
    memcpy(buf + sizeof(m), hdr, hdr_len);
    size_t off = sizeof(m) + hdr_len;
    for (size_t i = 0; i < iovcnt; i++) {
        memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)total,
                          .lkey = lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = inl ? IBV_SEND_INLINE : 0};
    return post_to(tw, peer, &wr, signal, unit);
}

static rv_status_t send_ctrl(rv_tworker_t *tw, uint32_t peer, uint8_t type,
                             const void *body, size_t len, bool signal)
{
    return send_eager(tw, peer, type, body, len, NULL, 0, 0, 0, signal);
}

rv_status_t vb_am_send(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                       size_t hdr_len, const struct iovec *iov, size_t iovcnt,
                       unsigned flags, rv_completion_fn cb, void *arg)
{
    size_t len = 0;
    if (peer >= tw->nworkers || hdr_len > VB_MAX_HDR)
        return RV_ERR_INVALID;
    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (sizeof(vb_wire_t) + hdr_len + len <= VB_RXBUF)
        return send_eager(tw, peer, VB_EAGER, hdr, hdr_len, iov, iovcnt,
                          len, len, false);
    if (len > UINT32_MAX)
        return RV_ERR_INVALID;
    if (flags & RV_AM_SEND_IMMEDIATE)
        return RV_ERR_AGAIN; /* a rendezvous cannot complete now */

    /* rendezvous: the receiver reads the payload, then says FIN */
    vb_op_t *op = op_get(tw, VB_OP_RTS, peer, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    /* up to VB_RNDV_COPY, and gathered ones, from a copy in the pool;
     * larger ones from the caller's memory, registered for the message */
    void *src = iov[0].iov_base;
    uint32_t lkey, rkey;
    if (iovcnt > 1 || len <= VB_RNDV_COPY) {
        op->bounce = rndv_mem(tw, len, &lkey, &rkey, &op->mr);
        if (op->bounce == NULL) {
            op_put(tw, op);
            return RV_ERR_NO_MEMORY;
        }
        size_t off = 0;
        for (size_t i = 0; i < iovcnt; i++) {
            memcpy((uint8_t *)op->bounce + off, iov[i].iov_base,
                   iov[i].iov_len);
            off += iov[i].iov_len;
        }
        src = op->bounce;
    } else {
        op->mr = vb_reg(tw->tp, src, len);
        if (op->mr == NULL) {
            op_put(tw, op);
            return RV_ERR_NO_MEMORY;
        }
        rkey = op->mr->rkey;
    }
    vb_rts_t rts = {.addr = (uintptr_t)src, .cookie = (uintptr_t)op,
                    .rkey = rkey};
    struct iovec body = {.iov_base = &rts, .iov_len = sizeof(rts)};
    rv_status_t st = send_eager(tw, peer, VB_RTS, hdr, hdr_len, &body, 1,
                                sizeof(rts), len, false);
    if (st != RV_OK) {
        if (op->bounce != NULL) {
            rndv_mem_free(tw, op->bounce, op->mr);
            op->mr = NULL;
        }
        op_put(tw, op);
        return st;
    }
    return RV_INPROGRESS;
}

/* ---------------------------------------------------------------------- */
/* RMA                                                                     */

static bool in_range(rv_trkey_t *k, uint64_t raddr, size_t len)
{
    return raddr >= k->base && raddr - k->base <= k->len &&
           len <= k->len - (raddr - k->base);
}

static rv_status_t rma(rv_tworker_t *tw, uint32_t peer, bool write,
                       void *local, size_t len, uint64_t raddr,
                       rv_trkey_t *rkey, rv_completion_fn cb, void *arg)
{
    if (peer >= tw->nworkers || !in_range(rkey, raddr, len)) {
        rv_error("verbs: %s of %zu bytes at %#llx outside the remote "
                 "region", write ? "put" : "get", len,
                 (unsigned long long)raddr);
        return RV_ERR_INVALID;
    }
    struct ibv_sge sge = {.length = (uint32_t)len};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = len ? 1 : 0,
                             .opcode = write ? IBV_WR_RDMA_WRITE
                                             : IBV_WR_RDMA_READ};
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey->rkey;
    if (write)
        tw->peers[peer].dirty = true;

    if (write && len <= tw->max_inline) {
        sge.addr = (uintptr_t)local;
        wr.send_flags = IBV_SEND_INLINE;
        return post_to(tw, peer, &wr, false, NULL);
    }
    vb_op_t *op = NULL;
    if (len <= VB_ZCOPY_MIN && write) { /* bounce: complete at once */
        void *b;
        rv_mem_unit_t *unit;
        rv_status_t st = bounce(tw, peer, len, &b, &sge.lkey, &unit);
        if (st != RV_OK)
            return st;
        memcpy(b, local, len);
        sge.addr = (uintptr_t)b;
        return post_to(tw, peer, &wr, false, unit);
    }
    op = op_get(tw, write ? VB_OP_PUT : VB_OP_GET, peer, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    rv_mem_unit_t *unit = NULL;
    if (len <= VB_ZCOPY_MIN) { /* a small get: into a bounce buffer */
        rv_status_t st = bounce(tw, peer, len ? len : 8, &op->bounce,
                                &sge.lkey, &unit);
        if (st != RV_OK) {
            op_put(tw, op);
            return st;
        }
        op->dst = local;
        op->len = len;
        sge.addr = (uintptr_t)op->bounce;
    } else if ((op->mr = vb_reg(tw->tp, local, len)) == NULL) {
        op_put(tw, op);
        return RV_ERR_NO_MEMORY;
    } else {
        sge.addr = (uintptr_t)local;
        sge.lkey = op->mr->lkey;
    }
    wr.wr_id = (uintptr_t)op;
    rv_status_t st = post_to(tw, peer, &wr, true, unit);
    if (st != RV_OK) {
        op_put(tw, op);
        return st;
    }
    return RV_INPROGRESS;
}

rv_status_t vb_put(rv_tworker_t *tw, uint32_t peer, const void *src,
                   size_t len, uint64_t raddr, rv_trkey_t *rkey,
                   rv_completion_fn cb, void *arg)
{
    return rma(tw, peer, true, (void *)src, len, raddr, rkey, cb, arg);
}

rv_status_t vb_get(rv_tworker_t *tw, uint32_t peer, void *dst, size_t len,
                   uint64_t raddr, rv_trkey_t *rkey, rv_completion_fn cb,
                   void *arg)
{
    return rma(tw, peer, false, dst, len, raddr, rkey, cb, arg);
}

static rv_status_t atomic(rv_tworker_t *tw, uint32_t peer, bool cswap,
                          uint64_t v1, uint64_t v2, uint64_t raddr,
                          rv_trkey_t *rkey, uint64_t *result,
                          rv_completion_fn cb, void *arg)
{
    if (tw->tp->dev.atomic_cap == IBV_ATOMIC_NONE) {
        rv_error("verbs: %s has no atomic operations", tw->tp->devname);
        return RV_ERR_UNSUPPORTED;
    }
    if (peer >= tw->nworkers || raddr % 8 != 0 || !in_range(rkey, raddr, 8))
        return RV_ERR_INVALID;
    vb_op_t *op = op_get(tw, VB_OP_ATOMIC, peer, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    void *b;
    rv_mem_unit_t *unit;
    struct ibv_sge sge = {.length = 8};
    rv_status_t st = bounce(tw, peer, 8, &b, &sge.lkey, &unit);
    if (st != RV_OK) {
        op_put(tw, op);
        return st;
    }
    sge.addr = (uintptr_t)b;
    op->result = b;
    op->result_p = result;
    struct ibv_send_wr wr = {.wr_id = (uintptr_t)op, .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = cswap ? IBV_WR_ATOMIC_CMP_AND_SWP
                                             : IBV_WR_ATOMIC_FETCH_AND_ADD};
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey->rkey;
    wr.wr.atomic.compare_add = v1;
    wr.wr.atomic.swap = v2;
    tw->peers[peer].dirty = true;
    st = post_to(tw, peer, &wr, true, unit);
    if (st != RV_OK) {
        op_put(tw, op);
        return st;
    }
    return RV_INPROGRESS;
}

rv_status_t vb_atomic_fadd64(rv_tworker_t *tw, uint32_t peer, uint64_t value,
                             uint64_t raddr, rv_trkey_t *rkey,
                             uint64_t *result, rv_completion_fn cb, void *arg)
{
    return atomic(tw, peer, false, value, 0, raddr, rkey, result, cb, arg);
}

rv_status_t vb_atomic_cswap64(rv_tworker_t *tw, uint32_t peer,
                              uint64_t compare, uint64_t swap, uint64_t raddr,
                              rv_trkey_t *rkey, uint64_t *result,
                              rv_completion_fn cb, void *arg)
{
    return atomic(tw, peer, true, compare, swap, raddr, rkey, result, cb,
                  arg);
}

rv_status_t vb_fence(rv_tworker_t *tw, uint32_t peer)
{
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (peer == UINT32_MAX || peer == i)
            tw->peers[i].fence = true;
    return RV_OK;
}

rv_status_t vb_flush(rv_tworker_t *tw, uint32_t peer, rv_completion_fn cb,
                     void *arg)
{
    vb_op_t *op = op_get(tw, VB_OP_FLUSH, UINT32_MAX, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    op->len = 1; /* held until every read is posted */
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        vb_peer_t *p = &tw->peers[i];
        if ((peer != UINT32_MAX && peer != i) || !p->dirty)
            continue;
        /* one read per peer; its completion (RC order) proves the writes
         * before it placed; the op counts the reads in op->len */
        vb_op_t *part = op_get(tw, VB_OP_FLUSH_PART, i, NULL, op);
        if (part == NULL)
            break;
        struct ibv_sge sge = {.addr = (uintptr_t)tw->flush_word,
                              .length = 8, .lkey = tw->flush_lkey};
        struct ibv_send_wr wr = {.wr_id = (uintptr_t)part, .sg_list = &sge,
                                 .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
        wr.wr.rdma.remote_addr = p->flush_addr;
        wr.wr.rdma.rkey = p->flush_rkey;
        if (post_to(tw, i, &wr, true, NULL) != RV_OK) {
            op_put(tw, part);
            continue;
        }
        p->dirty = false;
        op->len++;
    }
    if (--op->len == 0) {
        op_put(tw, op);
        return RV_OK;
    }
    return RV_INPROGRESS;
}

/* ---------------------------------------------------------------------- */
/* Workers and connections                                                 */

static rv_status_t qp_init(rv_tworker_t *tw, vb_peer_t *p)
{
    rv_transport_t *tp = tw->tp;
    struct ibv_qp_init_attr a = {
        .send_cq = tw->scq,
        .recv_cq = tw->rcq,
        .srq = tw->srq,
        .cap = {.max_send_wr = VB_SQ_DEPTH, .max_send_sge = 1,
                .max_inline_data = 220},
        .qp_type = IBV_QPT_RC,
    };
    p->qp = ibv_create_qp(tp->pd, &a);
    if (p->qp == NULL) {
        a.cap.max_inline_data = 0;
        p->qp = ibv_create_qp(tp->pd, &a);
    }
    if (p->qp == NULL) {
        rv_error("verbs: cannot create a queue pair on %s: %s", tp->devname,
                 strerror(errno));
        return RV_ERR_NO_MEMORY;
    }
    if (tw->max_inline == 0 || a.cap.max_inline_data < tw->max_inline)
        tw->max_inline = a.cap.max_inline_data;
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = (uint8_t)tp->port,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC,
    };
    int rc = ibv_modify_qp(p->qp, &m,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                               IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        rv_error("verbs: queue pair to INIT on %s port %d: %s", tp->devname,
                 tp->port, strerror(rc));
        return RV_ERR_TRANSPORT;
    }
    return RV_OK;
}

rv_status_t vb_worker_create(rv_transport_t *tp,
                             const rv_tworker_params_t *params,
                             rv_tworker_t **tw_p)
{
    rv_tworker_t *tw = calloc(1, sizeof(*tw));
    if (tw == NULL)
        return RV_ERR_NO_MEMORY;
    tw->tp = tp;
    tw->tid = params->tid;
    tw->nworkers = params->nworkers;
    tw->numa_node = params->numa_node;
    tw->am_recv = params->am_recv;
    tw->am_arg = params->am_arg;
    tw->psn = (uint32_t)(rand() & 0xffffff);
    tw->peers = calloc(tw->nworkers, sizeof(*tw->peers));
    tw->lin_by_peer = calloc(tw->nworkers, sizeof(*tw->lin_by_peer));
    tw->circ_by_peer = calloc(tw->nworkers, sizeof(*tw->circ_by_peer));
    tw->completed_flush = calloc(tw->nworkers, sizeof(*tw->completed_flush));
    tw->nprocs = (uint32_t)tp->size;
    tw->local = tw->tid % (uint32_t)tp->threads;
    tw->owned = calloc(tw->nprocs, sizeof(*tw->owned));
    tw->sh_ops = calloc(tw->nworkers, sizeof(*tw->sh_ops));
    tw->sh_open = calloc(tw->nworkers, sizeof(*tw->sh_open));
    tw->sh_last = calloc(tw->nworkers, sizeof(*tw->sh_last));
    rv_status_t st = tw->peers && tw->lin_by_peer && tw->circ_by_peer &&
                             tw->completed_flush &&
                             tw->owned && tw->sh_ops && tw->sh_open &&
                             tw->sh_last
                         ? RV_OK
                         : RV_ERR_NO_MEMORY;

    int scqe = (int)tw->nworkers * VB_SQ_DEPTH;
    if (scqe > tp->dev.max_cqe)
        scqe = tp->dev.max_cqe;
    tw->nrx = 512;
    if (tp->dev.max_srq_wr > 0 && tw->nrx > (uint32_t)tp->dev.max_srq_wr)
        tw->nrx = (uint32_t)tp->dev.max_srq_wr;
    if (st == RV_OK) {
        tw->scq = ibv_create_cq(tp->ibctx, scqe, NULL, NULL, 0);
        tw->rcq = ibv_create_cq(tp->ibctx, (int)tw->nrx * 2, NULL, NULL, 0);
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = tw->nrx,
                                                .max_sge = 1}};
        tw->srq = ibv_create_srq(tp->pd, &sa);
        if (tw->scq == NULL || tw->rcq == NULL || tw->srq == NULL) {
            rv_error("verbs: cannot create completion or shared receive "
                     "queues on %s: %s", tp->devname, strerror(errno));
            st = RV_ERR_NO_MEMORY;
        }
    }
    /* receive buffers, touched by this thread: in its NUMA zone */
    if (st == RV_OK &&
        posix_memalign((void **)&tw->rx, 4096, (size_t)tw->nrx * VB_RXBUF) !=
            0)
        st = RV_ERR_NO_MEMORY;
    if (st == RV_OK) {
        memset(tw->rx, 0, (size_t)tw->nrx * VB_RXBUF);
        tw->rx_mr = vb_reg(tp, tw->rx, (size_t)tw->nrx * VB_RXBUF);
        if (tw->rx_mr == NULL)
            st = RV_ERR_NO_MEMORY;
    }
    for (uint32_t i = 0; st == RV_OK && i < tw->nrx; i++)
        st = post_recv(tw, i);
    /* qp_sharing thread: a QP per worker; process: a QP per process
     * (the other ends of the processes' shared QPs) */
    for (uint32_t i = 0; st == RV_OK && i < nlanes(tw); i++)
        if (i >= tw->nworkers || !tp->shared_qps)
            st = qp_init(tw, lane_of(tw, i));

    /* bounce memory: chunks registered once, units tagged with flushes */
    if (st == RV_OK) {
        rv_mem_chunk_params_t cp;
        rv_mem_chunk_params_init(&cp, tp->job_config, &rv_transport_ops, tp,
                                 tw->numa_node);
        cp.source = RV_MEM_SOURCE_MMAP;
        st = rv_mem_chunk_allocator_create(&cp, &tw->chunks);
    }
    if (st == RV_OK)
        st = rv_mem_general_create(tw->chunks, &tw->pool);
    /* the word flushes read: a page of its own, outside every ring */
    if (st == RV_OK &&
        posix_memalign((void **)&tw->flush_word, 4096, 4096) != 0)
        st = RV_ERR_NO_MEMORY;
    if (st == RV_OK) {
        memset(tw->flush_word, 0, 4096);
        tw->flush_mr = vb_reg(tp, tw->flush_word, 4096);
        if (tw->flush_mr == NULL)
            st = RV_ERR_NO_MEMORY;
        else
            tw->flush_lkey = tw->flush_mr->lkey;
    }
    if (st != RV_OK) {
        vb_worker_destroy(tw);
        return st;
    }
    if (tp->shared_qps) {
        /* sends go over the shared QPs: their inline limit */
        tw->max_inline = tp->sh_max_inline;
        atomic_store(&tp->workers[tw->local], tw);
        atomic_fetch_add(&tp->live, 1);
    }
    *tw_p = tw;
    return RV_OK;
}

void vb_worker_destroy(rv_tworker_t *tw)
{
    if (tw == NULL)
        return;
    if (tw->tp->shared_qps && tw->tp->workers != NULL &&
        atomic_exchange(&tw->tp->workers[tw->local], NULL) != NULL &&
        atomic_fetch_sub(&tw->tp->live, 1) == 1) {
        /* the job's last worker: fresh shared QPs for the next job */
        shared_qps_destroy(tw->tp);
        if (shared_qps_create(tw->tp) != RV_OK)
            rv_error("verbs: cannot recreate the shared queue pairs");
    }
    for (uint32_t i = 0; tw->owned != NULL && i < tw->nprocs; i++)
        if (tw->owned[i].qp != NULL)
            ibv_destroy_qp(tw->owned[i].qp);
    for (uint32_t i = 0; tw->peers != NULL && i < tw->nworkers; i++) {
        vb_peer_t *p = &tw->peers[i];
        if (p->qp != NULL)
            ibv_destroy_qp(p->qp);
        for (vb_held_t *h = p->held_head, *n; h != NULL; h = n) {
            n = h->next;
            vb_am_release(tw, h);
        }
        for (vb_pending_t *q = p->pend_head, *n; q != NULL; q = n) {
            n = q->next;
            free(q);
        }
    }
    for (uint32_t i = 0; tw->lin_by_peer != NULL && i < tw->nworkers; i++)
        if (tw->lin_by_peer[i] != NULL)
            rv_mem_linear_destroy(tw->lin_by_peer[i]);
    for (uint32_t i = 0; tw->circ_by_peer != NULL && i < tw->nworkers; i++)
        if (tw->circ_by_peer[i] != NULL)
            rv_mem_circular_destroy(tw->circ_by_peer[i]);
    if (tw->flush_mr != NULL)
        ibv_dereg_mr(tw->flush_mr);
    free(tw->flush_word);
    if (tw->pool != NULL)
        rv_mem_general_destroy(tw->pool);
    if (tw->chunks != NULL)
        rv_mem_chunk_allocator_destroy(tw->chunks);
    if (tw->srq != NULL)
        ibv_destroy_srq(tw->srq);
    if (tw->scq != NULL)
        ibv_destroy_cq(tw->scq);
    if (tw->rcq != NULL)
        ibv_destroy_cq(tw->rcq);
    if (tw->rx_mr != NULL)
        ibv_dereg_mr(tw->rx_mr);
    free(tw->rx);
    for (vb_op_t *op = tw->free_ops, *n; op != NULL; op = n) {
        n = op->next;
        free(op);
    }
    free(tw->peers);
    free(tw->owned);
    free(tw->sh_ops);
    free(tw->sh_open);
    free(tw->sh_last);
    free(tw->lin_by_peer);
    free(tw->circ_by_peer);
    free(tw->completed_flush);
    free(tw);
}

rv_status_t vb_worker_address(rv_tworker_t *tw, void **addr_p, size_t *len_p)
{
    rv_transport_t *tp = tw->tp;
    uint32_t nqp = tp->shared_qps ? tw->nprocs + tw->nworkers : tw->nworkers;
    size_t len = sizeof(vb_addr_t) + nqp * sizeof(uint32_t);
    vb_addr_t *a = calloc(1, len);
    if (a == NULL)
        return RV_ERR_NO_MEMORY;
    memcpy(a->gid, tp->gid.raw, 16);
    a->lid = tp->port_attr.lid;
    a->mtu = (uint8_t)tp->port_attr.active_mtu;
    a->shared = tp->shared_qps;
    a->psn = tw->psn;
    a->ppsn = tp->psn;
    a->nprocs = tw->nprocs;
    a->flush_addr = (uintptr_t)tw->flush_word;
    a->flush_rkey = tw->flush_mr->rkey;
    a->nqp = nqp;
    if (!tp->shared_qps) {
        for (uint32_t i = 0; i < tw->nworkers; i++)
            a->qpn[i] = tw->peers[i].qp->qp_num;
    } else {
        for (uint32_t i = 0; i < tw->nprocs; i++)
            a->qpn[i] = tw->owned[i].qp->qp_num;
        for (uint32_t i = 0; i < tw->nworkers; i++)
            a->qpn[tw->nprocs + i] = tp->shared[i].qp->qp_num;
    }
    *addr_p = a;
    *len_p = len;
    return RV_OK;
}

void vb_address_release(rv_tworker_t *tw, void *addr)
{
    (void)tw;
    free(addr);
}

/* Moves @p qp to RTR then RTS, toward QP @p rqpn of the worker described
 * by @p a, whose packets start at @p rpsn; ours at @p lpsn. */
static int qp_connect(rv_transport_t *tp, struct ibv_qp *qp,
                      const vb_addr_t *a, uint32_t rqpn, uint32_t rpsn,
                      uint32_t lpsn)
{
    uint8_t rd = tp->dev.max_qp_rd_atom < 16 ? (uint8_t)tp->dev.max_qp_rd_atom
                                             : 16;
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = a->mtu < tp->port_attr.active_mtu
                        ? (enum ibv_mtu)a->mtu
                        : tp->port_attr.active_mtu,
        .dest_qp_num = rqpn,
        .rq_psn = rpsn,
        .max_dest_rd_atomic = rd ? rd : 1,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = a->lid, .sl = 0, .port_num = (uint8_t)tp->port},
    };
    if (tp->roce || a->lid == 0) {
        m.ah_attr.is_global = 1;
        memcpy(m.ah_attr.grh.dgid.raw, a->gid, 16);
        m.ah_attr.grh.sgid_index = (uint8_t)tp->gid_index;
        m.ah_attr.grh.hop_limit = 64;
    }
    int rc = ibv_modify_qp(qp, &m,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                               IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC |
                               IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
        rv_error("verbs: queue pair %u to RTR toward %u: %s", qp->qp_num,
                 rqpn, strerror(rc));
    if (rc == 0) {
        /* A lost packet is resent after 4.096 us << 14 = 67 ms, six times:
         * a dead peer shows as "retry exceeded" after about 0.5 s. Not 7:
         * Soft-RoCE (rxe) takes a retry count of 7 as "retry for ever", as
         * the spec has it for RNR retries only, and a dead peer would hang
         * its senders. rnr_retry 7 (for ever) is right: our receivers
         * repost their buffers, so RNR means slow, not dead. */
        struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .timeout = 14,
                                .retry_cnt = 6, .rnr_retry = 7,
                                .sq_psn = lpsn,
                                .max_rd_atomic = rd ? rd : 1};
        rc = ibv_modify_qp(qp, &r,
                           IBV_QP_STATE | IBV_QP_TIMEOUT |
                               IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        if (rc != 0)
            rv_error("verbs: queue pair %u to RTS: %s", qp->qp_num,
                     strerror(rc));
    }
    return rc;
}

rv_status_t vb_connect(rv_tworker_t *tw, uint32_t peer, const void *addr,
                       size_t len)
{
    rv_transport_t *tp = tw->tp;
    const vb_addr_t *a = addr;
    uint32_t nqp = tp->shared_qps ? tw->nprocs + tw->nworkers : tw->nworkers;
    if (peer >= tw->nworkers || len < sizeof(*a) ||
        len != sizeof(*a) + a->nqp * sizeof(uint32_t) || a->nqp != nqp ||
        a->shared != tp->shared_qps || a->nprocs != tw->nprocs) {
        rv_error("verbs: the address of worker %u is not a verbs address "
                 "of this job (do all processes use transport.name: verbs "
                 "with the same qp_sharing?)", peer);
        return RV_ERR_INVALID;
    }
    vb_peer_t *p = &tw->peers[peer];
    p->flush_addr = a->flush_addr;
    p->flush_rkey = a->flush_rkey;
    int rc = 0;
    uint32_t T = (uint32_t)tp->threads, me = tw->tid;
    uint32_t prank = peer / T, mrank = me / T;
    if (!tp->shared_qps) {
        rc = qp_connect(tp, p->qp, a, a->qpn[me], a->psn, tw->psn);
    } else {
        /* our own QP for the peer's process meets that process's shared
         * QP to us (once per process: at its first worker) */
        if (peer % T == 0)
            rc = qp_connect(tp, tw->owned[prank].qp, a,
                            a->qpn[tw->nprocs + me], a->ppsn, tw->psn);
        /* our process's shared QP to the peer meets the peer's own QP for
         * our process (connected once, by the process's first worker) */
        if (rc == 0 && tw->local == 0) {
            vb_shared_t *sh = &tp->shared[peer];
            sh->flush_addr = a->flush_addr;
            sh->flush_rkey = a->flush_rkey;
            rc = qp_connect(tp, sh->qp, a, a->qpn[mrank], a->psn, tp->psn);
        }
    }
    if (rc != 0) {
        struct ibv_qp_attr qa;
        struct ibv_qp_init_attr qi;
        struct ibv_qp *qp = !tp->shared_qps ? p->qp
                            : peer % T == 0 ? tw->owned[prank].qp
                                            : tp->shared[peer].qp;
        const char *state = "unknown";
        if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0)
            state = qa.qp_state == IBV_QPS_RESET ? "RESET"
                    : qa.qp_state == IBV_QPS_INIT ? "INIT"
                    : qa.qp_state == IBV_QPS_RTR  ? "RTR"
                    : qa.qp_state == IBV_QPS_RTS  ? "RTS"
                                                  : "error";
        rv_error("verbs: cannot connect to worker %u (rank %d) on %s port "
                 "%d, GID index %d: %s (queue pair left in %s)", peer,
                 rank_of(tw, peer), tp->devname, tp->port, tp->gid_index,
                 strerror(rc), state);
        return RV_ERR_PEER;
    }
    p->connected = true;
    return RV_OK;
}

rv_status_t vb_disconnect(rv_tworker_t *tw)
{
    /* say goodbye to everyone (signaled: its completion covers every
     * earlier WR), wait for everyone's goodbye, then for our own WRs */
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (tw->peers[i].connected)
            send_ctrl(tw, i, VB_BYE, NULL, 0, true);
    double t0 = now_s();
    bool done = false;
    while (!done && now_s() - t0 < 30) {
        if (vb_progress(tw) == 0)
            sched_yield();
        done = (tw->byes == tw->nworkers && tw->backlog == 0) ||
               tw->error_reported;
        for (uint32_t i = 0; done && i < nlanes(tw); i++)
            if (lane_of(tw, i)->done < lane_of(tw, i)->assigned)
                done = tw->error_reported;
        /* shared QPs: our runs closed and complete (the bounce memory of
         * our WRs is freed with this worker) */
        for (uint32_t i = 0; done && tw->tp->shared_qps && i < tw->nworkers;
             i++) {
            rv_vsig_t *sig = tw->tp->shared[i].sig;
            if (tw->sh_open[i]) {
                tw->sh_open[i] = false;
                rv_vsig_flush(sig, tw->local);
            }
            if (tw->sh_ops[i] > 0 ||
                rv_vsig_completed_flush(sig, tw->local) < tw->sh_last[i]) {
                reap_shared(&tw->tp->shared[i]);
                done = tw->error_reported;
            }
        }
    }
    if (!done) {
        for (uint32_t i = 0; i < tw->nworkers; i++)
            if (!tw->peers[i].bye) {
                rv_error("verbs: worker %u (rank %d) did not close its "
                         "connection within 30 s", i, rank_of(tw, i));
                break;
            }
        return RV_ERR_TIMEOUT;
    }
    return RV_OK;
}
