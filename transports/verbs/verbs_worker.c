/*
 * The verbs transport: a worker. What it owns (its completion queues, the
 * shared receive queue and its buffers, its bounce memory, the word
 * flushes read, its queue pairs), its address, its progress and its
 * disconnection.
 *
 * A worker is made in steps, each undone by a destroy function that also
 * undoes a step left half done; destruction runs them in reverse order.
 * Its QPs come last: they only refer to the queues made before them.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verbs_internal.h"

static double now_s(void)
{
    return (double)rv_time_ns() * 1e-9;
}

/* ---------------------------------------------------------------------- */
/* Making and unmaking a worker, step by step                              */

static rv_status_t arrays_create(rv_tworker_t *tw)
{
    uint32_t n = tw->nworkers;
    tw->peers = calloc(n, sizeof(*tw->peers));
    tw->lin_by_peer = calloc(n, sizeof(*tw->lin_by_peer));
    tw->circ_by_peer = calloc(n, sizeof(*tw->circ_by_peer));
    tw->completed_flush = calloc(n, sizeof(*tw->completed_flush));
    tw->owned = calloc(tw->nprocs, sizeof(*tw->owned));
    tw->sh_ops = calloc(n, sizeof(*tw->sh_ops));
    tw->sh_open = calloc(n, sizeof(*tw->sh_open));
    tw->sh_last = calloc(n, sizeof(*tw->sh_last));
    bool ok = tw->peers && tw->lin_by_peer && tw->circ_by_peer &&
              tw->completed_flush && tw->owned && tw->sh_ops && tw->sh_open &&
              tw->sh_last;
    return ok ? RV_OK : RV_ERR_NO_MEMORY;
}

static void arrays_destroy(rv_tworker_t *tw)
{
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
}

/* The receive buffers, touched by this thread: in its NUMA zone. */
static rv_status_t rx_create(rv_tworker_t *tw)
{
    rv_transport_t *tp = tw->tp;
    tw->nrx = VB_NRX;
    if (tp->dev.max_srq_wr > 0 && tw->nrx > (uint32_t)tp->dev.max_srq_wr)
        tw->nrx = (uint32_t)tp->dev.max_srq_wr;
    size_t len = (size_t)tw->nrx * VB_RXBUF;
    if (posix_memalign((void **)&tw->rx, VB_PAGE, len) != 0) {
        tw->rx = NULL;
        return RV_ERR_NO_MEMORY;
    }
    memset(tw->rx, 0, len);
    tw->rx_mr = vb_reg(tp, tw->rx, len);
    return tw->rx_mr != NULL ? RV_OK : RV_ERR_NO_MEMORY;
}

static void rx_destroy(rv_tworker_t *tw)
{
    if (tw->rx_mr != NULL)
        ibv_dereg_mr(tw->rx_mr);
    free(tw->rx);
}

/* The send and receive CQs and the shared receive queue. */
static rv_status_t queues_create(rv_tworker_t *tw)
{
    rv_transport_t *tp = tw->tp;
    int scqe = (int)tw->nworkers * VB_SQ_DEPTH;
    if (scqe > tp->dev.max_cqe)
        scqe = tp->dev.max_cqe;
    tw->scq = ibv_create_cq(tp->ibctx, scqe, NULL, NULL, 0);
    /* every receive buffer's completion, with room to spare */
    tw->rcq = ibv_create_cq(tp->ibctx, (int)tw->nrx * 2, NULL, NULL, 0);
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = tw->nrx, .max_sge = 1}};
    tw->srq = ibv_create_srq(tp->pd, &sa);
    if (tw->scq == NULL || tw->rcq == NULL || tw->srq == NULL) {
        rv_error("verbs: cannot create completion or shared receive queues "
                 "on %s: %s",
                 tp->devname, strerror(errno));
        return RV_ERR_NO_MEMORY;
    }
    for (uint32_t i = 0; i < tw->nrx; i++) {
        rv_status_t st = vb_rx_post(tw, i);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}

static void queues_destroy(rv_tworker_t *tw)
{
    if (tw->srq != NULL)
        ibv_destroy_srq(tw->srq);
    if (tw->scq != NULL)
        ibv_destroy_cq(tw->scq);
    if (tw->rcq != NULL)
        ibv_destroy_cq(tw->rcq);
}

/* Bounce memory: chunks registered once, in the worker's NUMA zone; the
 * rings of units tagged with flush numbers are made on first use
 * (verbs_post.c), the pool of rendezvous payloads here. */
static rv_status_t mem_create(rv_tworker_t *tw)
{
    rv_transport_t *tp = tw->tp;
    rv_mem_chunk_params_t cp;
    tp->svc->mem_chunk_params_init(&cp, tp->job_config, &rv_transport_ops, tp,
                                   tw->numa_node);
    cp.source = RV_MEM_SOURCE_MMAP;
    rv_status_t st = tp->svc->mem_chunk_allocator_create(&cp, &tw->chunks);
    if (st != RV_OK)
        return st;
    return tp->svc->mem_general_create(tw->chunks, &tw->pool);
}

static void mem_destroy(rv_tworker_t *tw)
{
    const rv_transport_services_t *svc = tw->tp->svc;
    vb_bounce_destroy(tw);
    if (tw->pool != NULL)
        svc->mem_general_destroy(tw->pool);
    if (tw->chunks != NULL)
        svc->mem_chunk_allocator_destroy(tw->chunks);
}

/* The word flushes read: a page of its own, outside every ring. */
static rv_status_t flush_word_create(rv_tworker_t *tw)
{
    if (posix_memalign((void **)&tw->flush_word, VB_PAGE, VB_PAGE) != 0) {
        tw->flush_word = NULL;
        return RV_ERR_NO_MEMORY;
    }
    memset(tw->flush_word, 0, VB_PAGE);
    tw->flush_mr = vb_reg(tw->tp, tw->flush_word, VB_PAGE);
    if (tw->flush_mr == NULL)
        return RV_ERR_NO_MEMORY;
    tw->flush_lkey = tw->flush_mr->lkey;
    return RV_OK;
}

static void flush_word_destroy(rv_tworker_t *tw)
{
    if (tw->flush_mr != NULL)
        ibv_dereg_mr(tw->flush_mr);
    free(tw->flush_word);
}

/* The worker's own QPs. qp_sharing thread: one per worker; process: one
 * per process (the other ends of the processes' shared QPs). */
static rv_status_t lanes_create(rv_tworker_t *tw)
{
    bool first = true;
    for (uint32_t i = 0; i < vb_nlanes(tw); i++) {
        uint32_t max_inline;
        if (i < tw->nworkers && tw->tp->shared_qps)
            continue;
        rv_status_t st =
            vb_qp_create(tw->tp, tw->scq, tw->rcq, tw->srq, VB_SQ_DEPTH,
                         &vb_lane(tw, i)->qp, &max_inline);
        if (st != RV_OK)
            return st;
        if (first || max_inline < tw->max_inline)
            tw->max_inline = max_inline;
        first = false;
    }
    return RV_OK;
}

/* Destroys the QPs, with the messages held and the WRs queued for them. */
static void lanes_destroy(rv_tworker_t *tw)
{
    for (uint32_t i = 0; i < tw->nprocs; i++)
        if (tw->owned[i].qp != NULL)
            ibv_destroy_qp(tw->owned[i].qp);
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        vb_peer_t *p = &tw->peers[i];
        if (p->qp != NULL)
            ibv_destroy_qp(p->qp);
        vb_held_drop(tw, p);
        for (vb_pending_t *q = p->pend_head, *n; q != NULL; q = n) {
            n = q->next;
            free(q);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* The worker                                                              */

/* qp_sharing process: the worker joins its process's shared QPs. */
static void shared_join(rv_tworker_t *tw)
{
    rv_transport_t *tp = tw->tp;
    /* sends go over the shared QPs: their inline limit */
    tw->max_inline = tp->sh_max_inline;
    atomic_store(&tp->workers[tw->local], tw);
    atomic_fetch_add(&tp->live, 1);
}

/* The job's last worker to leave makes fresh shared QPs for the next job
 * (rv_job_run connects every job afresh). */
static void shared_leave(rv_tworker_t *tw)
{
    rv_transport_t *tp = tw->tp;
    if (atomic_exchange(&tp->workers[tw->local], NULL) != NULL &&
        atomic_fetch_sub(&tp->live, 1) == 1) {
        vb_shared_qps_destroy(tp);
        if (vb_shared_qps_create(tp) != RV_OK)
            rv_error("verbs: cannot recreate the shared queue pairs");
    }
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
    tw->psn = vb_random_psn();
    tw->nprocs = (uint32_t)tp->size;
    tw->local = tw->tid % (uint32_t)tp->threads;

    rv_status_t st = arrays_create(tw);
    if (st != RV_OK)
        goto err_arrays;
    if ((st = rx_create(tw)) != RV_OK)
        goto err_rx;
    if ((st = queues_create(tw)) != RV_OK)
        goto err_queues;
    if ((st = mem_create(tw)) != RV_OK)
        goto err_mem;
    if ((st = flush_word_create(tw)) != RV_OK)
        goto err_flush_word;
    if ((st = lanes_create(tw)) != RV_OK)
        goto err_lanes;
    if (tp->shared_qps)
        shared_join(tw);
    *tw_p = tw;
    return RV_OK;

err_lanes:
    lanes_destroy(tw);
err_flush_word:
    flush_word_destroy(tw);
err_mem:
    mem_destroy(tw);
err_queues:
    queues_destroy(tw);
err_rx:
    rx_destroy(tw);
err_arrays:
    arrays_destroy(tw);
    free(tw);
    return st;
}

void vb_worker_destroy(rv_tworker_t *tw)
{
    if (tw == NULL)
        return;
    if (tw->tp->shared_qps)
        shared_leave(tw);
    vb_rndv_fini(tw);
    lanes_destroy(tw);
    flush_word_destroy(tw);
    mem_destroy(tw);
    queues_destroy(tw);
    rx_destroy(tw);
    arrays_destroy(tw);
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
    memcpy(a->gid, tp->gid.raw, sizeof(a->gid));
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

unsigned vb_progress(rv_tworker_t *tw)
{
    tw->events = 0;
    vb_poll_send(tw);
    if (tw->backlog > 0)
        vb_post_backlog(tw);
    if (tw->tp->shared_qps)
        vb_shared_progress(tw);
    vb_poll_recv(tw);
    return tw->events;
}

/* ---------------------------------------------------------------------- */
/* Disconnection                                                           */

/* Whether every peer said goodbye and every WR of this worker completed
 * (or a failure was reported: then nothing more will). */
static bool disconnected(rv_tworker_t *tw)
{
    bool done =
        (tw->byes == tw->nworkers && tw->backlog == 0) || tw->error_reported;
    for (uint32_t i = 0; done && i < vb_nlanes(tw); i++)
        if (vb_lane(tw, i)->done < vb_lane(tw, i)->assigned)
            done = tw->error_reported;
    if (done && tw->tp->shared_qps)
        done = vb_shared_quiet(tw);
    return done;
}

rv_status_t vb_disconnect(rv_tworker_t *tw)
{
    /* say goodbye to everyone (signaled: its completion covers every
     * earlier WR), wait for everyone's goodbye, then for our own WRs */
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (tw->peers[i].connected)
            vb_send_ctrl(tw, i, VB_BYE, NULL, 0, true);
    double t0 = now_s();
    bool done = false;
    while (!done && now_s() - t0 < VB_DISCONNECT_TIMEOUT_S) {
        if (vb_progress(tw) == 0)
            sched_yield();
        done = disconnected(tw);
    }
    if (done)
        return RV_OK;
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (!tw->peers[i].bye) {
            rv_error("verbs: worker %u (rank %d) did not close its "
                     "connection within %d s",
                     i, vb_rank_of(tw, i), VB_DISCONNECT_TIMEOUT_S);
            break;
        }
    return RV_ERR_TIMEOUT;
}
