/*
 * A model of RC send queues sharing one CQ, for the stress tests of
 * selective signaling (verbs_signal_test.h): each QP is a ring of fixed
 * depth guarded by one mutex (the provider's lock) that records WRs in
 * actual post order; the "hardware" completes them strictly in post order,
 * a random number at each poll, stamps every WR done, checks that each
 * WR's buffer still holds the WR's stamp, and produces CQEs for signaled
 * WRs only, into the one CQ. A popped CQE frees the send queue slots up to
 * its WR, as in the providers.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "verbs_signal_test.h"

_Atomic int check_failures;
char check_first[256];
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

void check_failed(const char *file, int line, const char *what)
{
    const char *base = strrchr(file, '/');
    pthread_mutex_lock(&check_lock);
    if (atomic_fetch_add(&check_failures, 1) == 0)
        snprintf(check_first, sizeof(check_first), "%s:%d: %s",
                 base != NULL ? base + 1 : file, line, what);
    pthread_mutex_unlock(&check_lock);
}

static _Thread_local vsig_tls_t tls = {.rng = 88172645463325252ull};

vsig_tls_t *vsig_tls(void)
{
    return &tls;
}

bool model_post(model_t *m, uint32_t qp, uint64_t wr_id, bool signaled,
                uint64_t id, const uint64_t *stamp)
{
    model_sq_t *sq = &m->sq[qp];
    bool ok = true;

    pthread_mutex_lock(&m->lock);
    if (sq->tail - sq->head >= m->depth) {
        CHECK(!"the send queue overflowed");
        m->sq_overflows++;
        ok = false;
    } else {
        model_wr_t *w = &sq->ring[sq->tail % m->depth];
        w->wr_id = wr_id;
        w->id = id;
        w->stamp = stamp;
        w->signaled = signaled;
        sq->tail++;
        if (sq->tail - sq->head > m->max_occupancy)
            m->max_occupancy = sq->tail - sq->head;
        if (id == NO_ID)
            m->markers_posted++;
        else if (signaled)
            m->signaled_posted++;
    }
    pthread_mutex_unlock(&m->lock);
    return ok;
}

static rv_status_t model_post_marker(void *ctx, uint32_t tid, uint64_t wr_id)
{
    qp_ctx_t *c = ctx;
    (void)tid;
    CHECK((wr_id & RV_VSIG_WR_ID_TAG) != 0);
    if (one_in(&tls.rng, c->m->cfg.fail_marker))
        return RV_ERR_TRANSPORT;
    return model_post(c->m, c->qp, wr_id, true, NO_ID, NULL) ? RV_OK
                                                             : RV_ERR_AGAIN;
}

void random_sleep(uint32_t max_us)
{
    usleep(1 + (useconds_t)(rng_next(&tls.rng) % (max_us ? max_us : 1)));
}

/* One poll of the shared CQ: the hardware first completes a random number
 * of WRs of each send queue, in post order; then at most poll_batch CQEs
 * are taken (freeing their send queue slots) and reported outside the
 * lock, as a transport does after ibv_poll_cq. */
int model_poll(void *ctx, uint32_t tid)
{
    model_t *m = ((qp_ctx_t *)ctx)->m;
    model_cqe_t got[MAX_BATCH];
    int n = 0;
    (void)tid;

    if (tls.in_begin && ++tls.begin_polls > m->step_bound) {
        CHECK(!"rv_vsig_begin polled past the step bound");
        return RV_ERR_TIMEOUT;
    }
    pthread_mutex_lock(&m->lock);
    for (uint32_t qp = 0; qp < m->cfg.nqps; qp++) {
        model_sq_t *sq = &m->sq[qp];
        uint64_t k = 1 + rng_next(&m->hw_rng) % m->cfg.max_complete;
        for (; k > 0 && sq->done < sq->tail; k--, sq->done++) {
            const model_wr_t *w = &sq->ring[sq->done % m->depth];
            /* The HCA reads the buffer now: it must still be this WR's. */
            if (w->stamp != NULL && *w->stamp != w->id + 1)
                m->stamp_errors++;
            if (w->id != NO_ID)
                atomic_store_explicit(&m->wr_done[w->id], 1,
                                      memory_order_release);
            if (!w->signaled)
                continue;
            if (m->cq_tail - m->cq_head >= m->cq_size) {
                m->cq_overflows++;
                continue;
            }
            m->cq[m->cq_tail++ % m->cq_size] =
                (model_cqe_t){.qp = qp, .wr_id = w->wr_id, .pos = sq->done};
        }
    }
    while (n < (int)m->cfg.poll_batch && m->cq_head < m->cq_tail) {
        got[n] = m->cq[m->cq_head++ % m->cq_size];
        model_sq_t *sq = &m->sq[got[n].qp];
        if (got[n].pos + 1 > sq->head)
            sq->head = got[n].pos + 1; /* frees every WR up to it */
        n++;
    }
    pthread_mutex_unlock(&m->lock);

    if (n > 0 && one_in(&tls.rng, m->cfg.poller_sleep))
        random_sleep(m->cfg.sleep_us); /* a delayed poller holds CQEs */
    for (int i = 0; i < n; i++) {
        if (rv_vsig_completed(m->q[got[i].qp], got[i].wr_id))
            continue;
        /* A caller-signaled WR: its own completion, after the WR. */
        uint64_t id = got[i].wr_id - 1;
        CHECK(id < m->total_wrs);
        CHECK(id < m->total_wrs && atomic_load_explicit(
                                       &m->wr_done[id], memory_order_acquire));
        atomic_fetch_add(&m->user_completions, 1);
    }
    return n;
}

model_t *model_create(const stress_cfg_t *cfg, uint64_t seed)
{
    model_t *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    m->cfg = *cfg;
    pthread_mutex_init(&m->lock, NULL);
    m->seed = seed;
    m->hw_rng = seed;
    m->depth = (uint32_t)rv_vsig_min_sq_depth(
        cfg->signal_interval, cfg->threads, cfg->poll_batch);
    /* A closer in the queue is at most depth WRs from the hardware's
     * position (one completed per poll at least); then at most
     * nqps * depth CQEs are ahead of its own, poll_batch per poll. Each
     * credit acquisition is bounded by that, with room for races with
     * other threads taking the credits a poll returned. */
    m->step_bound = 4 * ((uint64_t)m->depth +
                         (uint64_t)cfg->nqps * m->depth / cfg->poll_batch) +
                    64;
    m->cq_size = (uint64_t)cfg->nqps * m->depth;
    m->cq = calloc(m->cq_size, sizeof(*m->cq));
    m->total_wrs = (uint64_t)cfg->threads * cfg->wrs_per_thread;
    m->wr_done = calloc(m->total_wrs, sizeof(*m->wr_done));
    assert_non_null(m->cq);
    assert_non_null(m->wr_done);
    m->chunks = make_chunks(16 * KIB); /* 64 units of 256 bytes */
    for (uint32_t qp = 0; qp < cfg->nqps; qp++) {
        m->sq[qp].ring = calloc(m->depth, sizeof(model_wr_t));
        assert_non_null(m->sq[qp].ring);
        m->ctx[qp] = (qp_ctx_t){.m = m, .qp = qp};
        rv_vsig_params_t p = {
            .sq_depth = m->depth,
            .signal_interval = cfg->signal_interval,
            .max_threads = cfg->threads,
            .poll_batch = cfg->poll_batch,
            .index = qp,
            .post_marker = model_post_marker,
            .poll_cq = model_poll,
            .ctx = &m->ctx[qp],
        };
        assert_int_equal(rv_vsig_create(&p, &m->q[qp]), RV_OK);
    }
    return m;
}

void model_destroy(model_t *m)
{
    for (uint32_t qp = 0; qp < m->cfg.nqps; qp++) {
        rv_vsig_destroy(m->q[qp]);
        free(m->sq[qp].ring);
    }
    rv_mem_chunk_allocator_destroy(m->chunks);
    free(m->cq);
    free(m->wr_done);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
