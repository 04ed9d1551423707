/*
 * Selective signaling for RC queue pairs shared by threads: per-thread
 * runs, one closer (or marker) per run, credits for the send queue. The
 * protocol and why it is sound are described in verbs_signal.h.
 *
 * Memory layout: one vsig_thread_t per tid, on its own cache lines. The
 * owner's fields are plain (a tid belongs to one thread at a time); the
 * statistics are atomics the owner updates with relaxed load + store (no
 * read-modify-write: only it writes them) so that rv_vsig_stats may read
 * them from anywhere; completed_run is written by pollers (CAS-max) and
 * sits on a line of its own. The free credit counter is the only datum
 * every thread writes: once per run (S WRs) and once per completion.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_signal.h"

#define CACHE_LINE 64

/* wr_id: bit 63 tag | tid in bits 47..62 | run in bits 0..46. Run 0 is
 * never opened: it names unsignaled WRs (seen only when flushed in
 * error). */
#define TID_SHIFT 47
#define RUN_MASK ((UINT64_C(1) << TID_SHIFT) - 1)

typedef struct vsig_thread {
    /* Owner only. */
    _Alignas(CACHE_LINE) uint64_t run; /* current run, or the last one */
    uint32_t pos;                      /* WRs begun in the current run */
    bool open;        /* the current run holds credits, not closed yet */
    bool need_marker; /* the current run must be closed by a marker */
    bool busy;        /* a ticket is out */

    /* Written by the owner only, read by rv_vsig_stats. */
    _Atomic uint64_t posts, failed_posts, signaled, user_signaled;
    _Atomic uint64_t markers, failed_markers, runs, full_polls, max_steps;

    /* Written by pollers: the highest run known complete. */
    _Alignas(CACHE_LINE) _Atomic uint64_t completed_run;
} vsig_thread_t;

struct rv_vsig {
    rv_vsig_params_t p;
    int64_t run_credits; /* S + 1 */
    vsig_thread_t *threads;

    _Alignas(CACHE_LINE) _Atomic int64_t free_credits;
    _Alignas(CACHE_LINE) _Atomic uint64_t runs_completed;
};

/* An owner-written statistic: no read-modify-write needed. */
static inline void stat_add(_Atomic uint64_t *s, uint64_t n)
{
    atomic_store_explicit(s, atomic_load_explicit(s, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline uint64_t stat_get(_Atomic uint64_t *s)
{
    return atomic_load_explicit(s, memory_order_relaxed);
}

static inline uint64_t run_wr_id(uint32_t tid, uint64_t run)
{
    return RV_VSIG_WR_ID_TAG | ((uint64_t)tid << TID_SHIFT) | (run & RUN_MASK);
}

uint64_t rv_vsig_min_sq_depth(uint32_t signal_interval, uint32_t max_threads,
                              uint32_t poll_batch)
{
    uint64_t s1 = (uint64_t)signal_interval + 1;
    uint64_t p1 = (uint64_t)(poll_batch == 0 ? 1 : poll_batch) + 1;
    uint64_t others = max_threads > 0 ? (uint64_t)max_threads - 1 : 0;
    uint64_t held, need;

    if (__builtin_mul_overflow(others, s1, &held) ||
        __builtin_mul_overflow(held, p1, &held) ||
        __builtin_add_overflow(held, s1, &need))
        return UINT64_MAX;
    return need;
}

rv_status_t rv_vsig_create(const rv_vsig_params_t *params, rv_vsig_t **q_p)
{
    rv_vsig_t *q;
    size_t tsize;

    if (params == NULL || q_p == NULL)
        return RV_ERR_INVALID;
    if (params->signal_interval == 0) {
        rv_error("verbs signaling: signal_interval must be at least 1");
        return RV_ERR_INVALID;
    }
    if (params->max_threads == 0 || params->max_threads > RV_VSIG_MAX_THREADS) {
        rv_error("verbs signaling: max_threads %u must be 1 .. %u",
                 params->max_threads, RV_VSIG_MAX_THREADS);
        return RV_ERR_INVALID;
    }
    if (params->index > RV_VSIG_MAX_INDEX) {
        rv_error("verbs signaling: QP index %u is above %u", params->index,
                 RV_VSIG_MAX_INDEX);
        return RV_ERR_INVALID;
    }
    if (params->post_marker == NULL || params->poll_cq == NULL) {
        rv_error("verbs signaling: the post_marker and poll_cq callbacks "
                 "are required");
        return RV_ERR_INVALID;
    }
    uint64_t need = rv_vsig_min_sq_depth(
        params->signal_interval, params->max_threads, params->poll_batch);
    if (params->sq_depth < need) {
        rv_error("verbs signaling: a send queue of %u WRs is too small for "
                 "signal_interval %u, %u threads and a poll batch of %u: "
                 "it needs at least %llu WRs ((threads - 1) x "
                 "(signal_interval + 1) x (poll batch + 1) + signal_interval "
                 "+ 1), or a smaller signal_interval, thread count or poll "
                 "batch",
                 params->sq_depth, params->signal_interval, params->max_threads,
                 params->poll_batch == 0 ? 1 : params->poll_batch,
                 (unsigned long long)need);
        return RV_ERR_INVALID;
    }

    q = aligned_alloc(CACHE_LINE, sizeof(*q));
    if (q == NULL)
        return RV_ERR_NO_MEMORY;
    memset(q, 0, sizeof(*q));
    tsize = sizeof(vsig_thread_t) * params->max_threads;
    q->threads = aligned_alloc(CACHE_LINE, tsize);
    if (q->threads == NULL) {
        free(q);
        return RV_ERR_NO_MEMORY;
    }
    memset(q->threads, 0, tsize);
    q->p = *params;
    if (q->p.poll_batch == 0)
        q->p.poll_batch = 1;
    q->run_credits = (int64_t)params->signal_interval + 1;
    for (uint32_t i = 0; i < params->max_threads; i++)
        atomic_init(&q->threads[i].completed_run, 0);
    atomic_init(&q->free_credits, (int64_t)params->sq_depth);
    atomic_init(&q->runs_completed, 0);
    *q_p = q;
    return RV_OK;
}

void rv_vsig_destroy(rv_vsig_t *q)
{
    if (q == NULL)
        return;
    uint64_t held = rv_vsig_outstanding(q);
    if (held != 0)
        rv_warn("verbs signaling: QP %u destroyed with %llu send credits "
                "held (runs not flushed or completions not reaped)",
                q->p.index, (unsigned long long)held);
    free(q->threads);
    free(q);
}

/* Takes S + 1 credits, polling the CQ (this thread's own work) while too
 * few are free. Lock-free: a failed CAS means another thread took or
 * returned credits. */
static rv_status_t vsig_acquire(rv_vsig_t *q, vsig_thread_t *th, uint32_t tid,
                                uint32_t *steps)
{
    const int64_t need = q->run_credits;
    int64_t f = atomic_load_explicit(&q->free_credits, memory_order_acquire);

    for (;;) {
        if (f >= need) {
            if (atomic_compare_exchange_weak_explicit(
                    &q->free_credits, &f, f - need, memory_order_acq_rel,
                    memory_order_acquire))
                return RV_OK;
            (*steps)++; /* raced with another thread; f was reloaded */
            continue;
        }
        (*steps)++;
        stat_add(&th->full_polls, 1);
        int n = q->p.poll_cq(q->p.ctx, tid);
        if (n < 0)
            return (rv_status_t)n;
        f = atomic_load_explicit(&q->free_credits, memory_order_acquire);
    }
}

/* Closes the thread's current run with a marker. */
static rv_status_t vsig_post_marker(rv_vsig_t *q, vsig_thread_t *th,
                                    uint32_t tid)
{
    rv_status_t st = q->p.post_marker(q->p.ctx, tid, run_wr_id(tid, th->run));
    if (st != RV_OK) {
        stat_add(&th->failed_markers, 1);
        th->need_marker = true;
        return st < 0 ? st : RV_ERR_TRANSPORT;
    }
    stat_add(&th->markers, 1);
    th->need_marker = false;
    th->open = false;
    return RV_OK;
}

rv_status_t rv_vsig_begin(rv_vsig_t *q, uint32_t tid, bool want_signal,
                          uint64_t user_wr_id, rv_vsig_ticket_t *t)
{
    vsig_thread_t *th;
    uint32_t steps = 0;
    rv_status_t st;

    if (q == NULL || t == NULL || tid >= q->p.max_threads)
        return RV_ERR_INVALID;
    if (want_signal && (user_wr_id & RV_VSIG_WR_ID_TAG) != 0) {
        rv_error("verbs signaling: wr_id %#llx has bit 63 set, which is "
                 "reserved for the signaling module",
                 (unsigned long long)user_wr_id);
        return RV_ERR_INVALID;
    }
    th = &q->threads[tid];
    if (th->busy) {
        rv_error("verbs signaling: thread %u began a WR before ending its "
                 "previous one",
                 tid);
        return RV_ERR_INVALID;
    }
    if (th->need_marker) {
        st = vsig_post_marker(q, th, tid);
        if (st != RV_OK)
            return st;
    }
    if (!th->open) {
        st = vsig_acquire(q, th, tid, &steps);
        if (st != RV_OK)
            return st;
        th->run++;
        th->pos = 0;
        th->open = true;
        stat_add(&th->runs, 1);
    }

    uint32_t pos = th->pos++;
    t->closer = pos + 1 == q->p.signal_interval && !want_signal;
    t->signaled = t->closer || want_signal;
    if (t->closer)
        t->wr_id = run_wr_id(tid, th->run);
    else if (want_signal)
        t->wr_id = user_wr_id;
    else
        t->wr_id = run_wr_id(tid, 0);
    t->channel = rv_vsig_channel(q->p.index, tid);
    t->flush = th->run;
    t->steps = steps;
    t->tid = tid;
    th->busy = true;
    if (steps > stat_get(&th->max_steps))
        atomic_store_explicit(&th->max_steps, steps, memory_order_relaxed);
    return RV_OK;
}

rv_status_t rv_vsig_end(rv_vsig_t *q, rv_vsig_ticket_t *t, bool post_ok)
{
    vsig_thread_t *th;

    if (q == NULL || t == NULL || t->tid >= q->p.max_threads)
        return RV_ERR_INVALID;
    th = &q->threads[t->tid];
    if (!th->busy) {
        rv_error("verbs signaling: thread %u ended a WR it did not begin",
                 t->tid);
        return RV_ERR_INVALID;
    }
    th->busy = false;
    if (post_ok) {
        stat_add(&th->posts, 1);
        if (t->signaled) {
            stat_add(&th->signaled, 1);
            if (!t->closer)
                stat_add(&th->user_signaled, 1);
        }
    } else {
        stat_add(&th->failed_posts, 1);
    }

    if (t->closer && post_ok) {
        th->open = false; /* its completion returns the credits */
        return RV_OK;
    }
    /* A closer that did not enter the queue, or a full run whose last WR
     * carried the caller's wr_id: a marker closes the run (in the room
     * the run's credits keep for it). */
    if (t->closer || th->pos == q->p.signal_interval)
        th->need_marker = true;
    if (th->need_marker)
        return vsig_post_marker(q, th, t->tid);
    return RV_OK;
}

bool rv_vsig_completed(rv_vsig_t *q, uint64_t wr_id)
{
    if ((wr_id & RV_VSIG_WR_ID_TAG) == 0)
        return false;
    uint32_t tid = (uint32_t)((wr_id >> TID_SHIFT) & 0xffffu);
    uint64_t run = wr_id & RUN_MASK;
    if (tid >= q->p.max_threads) {
        rv_error("verbs signaling: completion with wr_id %#llx names thread "
                 "%u of %u",
                 (unsigned long long)wr_id, tid, q->p.max_threads);
        return true;
    }
    if (run == 0)
        return true; /* an unsignaled WR, flushed in error */

    /* The run's closer (or marker) completed: by RC post order, so did
     * every earlier WR of this thread. Closers may be reported out of
     * order by concurrent pollers: CAS-max. */
    vsig_thread_t *th = &q->threads[tid];
    uint64_t old =
        atomic_load_explicit(&th->completed_run, memory_order_relaxed);
    while (old < run && !atomic_compare_exchange_weak_explicit(
                            &th->completed_run, &old, run, memory_order_release,
                            memory_order_relaxed))
        ;
    /* Exactly one closing completion per run: its credits come back. */
    atomic_fetch_add_explicit(&q->free_credits, q->run_credits,
                              memory_order_release);
    atomic_fetch_add_explicit(&q->runs_completed, 1, memory_order_relaxed);
    return true;
}

rv_status_t rv_vsig_flush(rv_vsig_t *q, uint32_t tid)
{
    if (q == NULL || tid >= q->p.max_threads)
        return RV_ERR_INVALID;
    vsig_thread_t *th = &q->threads[tid];
    if (th->busy) {
        rv_error("verbs signaling: thread %u flushed between begin and end",
                 tid);
        return RV_ERR_INVALID;
    }
    if (!th->open)
        return RV_OK;
    return vsig_post_marker(q, th, tid);
}

uint64_t rv_vsig_completed_flush(rv_vsig_t *q, uint32_t tid)
{
    if (q == NULL || tid >= q->p.max_threads)
        return 0;
    return atomic_load_explicit(&q->threads[tid].completed_run,
                                memory_order_acquire);
}

uint64_t rv_vsig_outstanding(rv_vsig_t *q)
{
    int64_t f = atomic_load_explicit(&q->free_credits, memory_order_relaxed);
    int64_t held = (int64_t)q->p.sq_depth - f;
    return held > 0 ? (uint64_t)held : 0;
}

void rv_vsig_stats(rv_vsig_t *q, rv_vsig_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    for (uint32_t i = 0; i < q->p.max_threads; i++) {
        vsig_thread_t *th = &q->threads[i];
        s->posts += stat_get(&th->posts);
        s->failed_posts += stat_get(&th->failed_posts);
        s->signaled += stat_get(&th->signaled);
        s->user_signaled += stat_get(&th->user_signaled);
        s->markers += stat_get(&th->markers);
        s->failed_markers += stat_get(&th->failed_markers);
        s->runs += stat_get(&th->runs);
        s->full_polls += stat_get(&th->full_polls);
        if (stat_get(&th->max_steps) > s->max_steps)
            s->max_steps = stat_get(&th->max_steps);
    }
    s->runs_completed =
        atomic_load_explicit(&q->runs_completed, memory_order_relaxed);
}

bool rv_vsig_mem_completed(void *arg, uint32_t channel, uint64_t flush)
{
    const rv_vsig_mem_arg_t *a = arg;
    uint32_t qi = channel >> 16, tid = channel & 0xffffu;

    if (a == NULL || qi >= a->nqps || a->qps[qi] == NULL ||
        tid >= a->qps[qi]->p.max_threads) {
        rv_error("verbs signaling: buffer tagged with channel %#x (QP %u, "
                 "thread %u), which does not exist",
                 channel, qi, tid);
        return false;
    }
    return rv_vsig_completed_flush(a->qps[qi], tid) >= flush;
}
