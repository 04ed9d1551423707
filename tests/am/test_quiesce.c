/*
 * Collectives among workers (rv_coll_allreduce, rv_coll_allgather) and the barrier
 * of calls (rv_quiesce).
 *
 * allreduce: sums, minima and maxima of u64, i64 and double over every
 * worker, many rounds back to back (a child may report the next round
 * before its parent entered it), each checked against the value computed
 * locally; allgather: every worker's bytes in worker order.
 *
 * quiesce: every worker makes calls whose handlers make further calls a
 * random number of hops away (transitively), then calls rv_quiesce; right
 * after it, the calls run over the job must equal the calls made, counted
 * by the handlers themselves, in every round. A quiesce that returned
 * early (a sleep, a barrier of workers, a flush) fails this: the hops are
 * still running. Also: rv_quiesce and rv_coll_allreduce refuse to run inside a
 * handler.
 *
 * deferred: every call's handler only queues it; the worker's quiesce
 * hook answers a few queued calls a wave (a call back to the caller);
 * rv_quiesce must return only once every answer has run.
 *
 * job-end: every worker starts chains of calls up to JOB_END_HOPS long and
 * returns at once, with no rv_quiesce: the job's end must run every hop
 * (a next job sums what was made and run). A job end that only flushes
 * and then drains until its worker sees nothing to do fails this: the
 * chains go on through workers that stopped draining.
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"

#define ROUNDS 40
#define QUIESCE_ROUNDS 6
#define CALLS_PER_ROUND 20000
#define MAX_HOPS 4
#define JOB_END_HOPS 64

static rv_context_t *ctx;
static rv_handler_id_t hop_id, refuse_id, defer_id, ack_id;

/* Per worker thread of this process: the calls its handlers ran. */
typedef struct {
    uint64_t ran;
    uint64_t rng;
    uint64_t made; /* job-end: the calls its chains will make */
    _Alignas(64) char pad[40];
} counter_t;
static counter_t *counters;
/* Calls each worker starts per round: CALLS_PER_ROUND, or the program's
 * second argument (the emulated RDMA guest runs fewer). */
static int calls_per_round = CALLS_PER_ROUND;

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A call that passes itself on while it has hops left. */
static rv_status_t on_hop(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint32_t hops;
    (void)arg;
    memcpy(&hops, call->args, sizeof(hops));
    counter_t *c = &counters[rv_worker_local(w)];
    c->ran++;
    if (hops > 0) {
        hops--;
        rv_tid_t dest = (rv_tid_t)(next_rand(&c->rng) % rv_nworkers(ctx));
        rv_status_t st = rv_call(w, dest, hop_id, &hops, sizeof(hops), NULL, 0);
        EXPECT(st == RV_OK, "a hop: %s", rv_status_str(st));
    }
    return RV_OK;
}

static rv_status_t on_refuse(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t x = 1, y;
    (void)call;
    (void)arg;
    EXPECT(rv_quiesce(w) == RV_ERR_INVALID, "rv_quiesce inside a handler");
    EXPECT(rv_coll_allreduce(w, &y, &x, 1, RV_COLL_U64, RV_COLL_SUM) ==
               RV_ERR_INVALID,
           "rv_coll_allreduce inside a handler");
    return RV_OK;
}

static int body_allreduce(rv_worker_t *w, void *arg)
{
    (void)arg;
    uint64_t me = rv_worker_tid(w), n = rv_nworkers(ctx);
    for (uint64_t r = 0; r < ROUNDS; r++) {
        uint64_t u[3] = {me + r, me * 3 + r, n - me};
        uint64_t usum[3], umin[3], umax[3];
        int64_t i[2] = {(int64_t)me - (int64_t)r, -(int64_t)me}, imin[2];
        double d[2] = {0.5 * (double)me, -(double)r}, dmax[2];
        EXPECT(rv_coll_allreduce(w, usum, u, 3, RV_COLL_U64, RV_COLL_SUM) == RV_OK,
               "u64 sum");
        EXPECT(rv_coll_allreduce(w, umin, u, 3, RV_COLL_U64, RV_COLL_MIN) == RV_OK,
               "u64 min");
        EXPECT(rv_coll_allreduce(w, umax, u, 3, RV_COLL_U64, RV_COLL_MAX) == RV_OK,
               "u64 max");
        EXPECT(rv_coll_allreduce(w, imin, i, 2, RV_COLL_I64, RV_COLL_MIN) == RV_OK,
               "i64 min");
        EXPECT(rv_coll_allreduce(w, dmax, d, 2, RV_COLL_DOUBLE, RV_COLL_MAX) ==
                   RV_OK,
               "double max");
        uint64_t tri = n * (n - 1) / 2;
        EXPECT(usum[0] == tri + n * r && usum[1] == 3 * tri + n * r &&
                   usum[2] == n * n - tri,
               "round %" PRIu64 ": sums %" PRIu64 " %" PRIu64 " %" PRIu64, r,
               usum[0], usum[1], usum[2]);
        EXPECT(umin[0] == r && umin[1] == r && umin[2] == 1,
               "round %" PRIu64 ": u64 minima", r);
        EXPECT(umax[0] == n - 1 + r && umax[2] == n,
               "round %" PRIu64 ": u64 maxima", r);
        EXPECT(imin[0] == -(int64_t)r && imin[1] == -(int64_t)(n - 1),
               "round %" PRIu64 ": i64 minima", r);
        EXPECT(dmax[0] == 0.5 * (double)(n - 1) && dmax[1] == -(double)r,
               "round %" PRIu64 ": double maxima", r);
        /* The same value in place (out == in). */
        double dsum = (double)me;
        EXPECT(rv_coll_allreduce(w, &dsum, &dsum, 1, RV_COLL_DOUBLE, RV_COLL_SUM) ==
                       RV_OK &&
                   dsum == (double)tri,
               "double sum in place: %g", dsum);
    }
    uint32_t mine[3] = {(uint32_t)me, (uint32_t)me * 7, 0xabcd};
    uint32_t *all = calloc(n * 3, sizeof(*all));
    EXPECT(all != NULL && rv_coll_allgather(w, all, mine, sizeof(mine)) == RV_OK,
           "allgather");
    for (uint64_t t = 0; all != NULL && t < n; t++)
        EXPECT(all[t * 3] == t && all[t * 3 + 1] == t * 7 &&
                   all[t * 3 + 2] == 0xabcd,
               "allgather: worker %" PRIu64 "'s bytes", t);
    free(all);
    uint64_t x = 0;
    EXPECT(rv_coll_allreduce(w, &x, &x, 0, RV_COLL_U64, RV_COLL_SUM) ==
               RV_ERR_INVALID,
           "a count of 0 is refused");
    return 0;
}

static int body_quiesce(rv_worker_t *w, void *arg)
{
    (void)arg;
    counter_t *c = &counters[rv_worker_local(w)];
    c->rng = 0x9e3779b97f4a7c15ull * (rv_worker_tid(w) + 1);
    uint64_t made = 0;
    for (int r = 0; r < QUIESCE_ROUNDS; r++) {
        for (int i = 0; i < calls_per_round; i++) {
            uint32_t hops = (uint32_t)(next_rand(&c->rng) % (MAX_HOPS + 1));
            rv_tid_t dest = (rv_tid_t)(next_rand(&c->rng) % rv_nworkers(ctx));
            rv_status_t st;
            while ((st = rv_call(w, dest, hop_id, &hops, sizeof(hops), NULL,
                                 0)) == RV_ERR_AGAIN)
                rv_progress(w);
            EXPECT(st == RV_OK, "a call: %s", rv_status_str(st));
            made += hops + 1;
        }
        EXPECT(rv_quiesce(w) == RV_OK, "rv_quiesce");
        /* Nothing may run between rv_quiesce and these reads: every call
         * has run already. */
        uint64_t counts[2] = {made, c->ran}, sums[2];
        EXPECT(rv_coll_allreduce(w, sums, counts, 2, RV_COLL_U64, RV_COLL_SUM) ==
                   RV_OK,
               "allreduce");
        EXPECT(sums[0] == sums[1],
               "round %d: %" PRIu64 " calls made, %" PRIu64
               " run when rv_quiesce returned",
               r, sums[0], sums[1]);
    }
    if (rv_worker_tid(w) == 0)
        EXPECT(rv_call(w, rv_nworkers(ctx) - 1, refuse_id, NULL, 0, NULL,
                       RV_NOTIFY_CONSUMED) == RV_OK,
               "the refusing call");
    EXPECT(rv_quiesce(w) == RV_OK, "the last rv_quiesce");
    return 0;
}

static int body_job_end(rv_worker_t *w, void *arg)
{
    (void)arg;
    counter_t *c = &counters[rv_worker_local(w)];
    c->rng = 0x2545f4914f6cdd1dull * (rv_worker_tid(w) + 1);
    /* 256 chains a worker on the host, fewer where calls are dearer. */
    int chains = calls_per_round / 80 > 16 ? calls_per_round / 80 : 16;
    for (int i = 0; i < chains; i++) {
        uint32_t hops = (uint32_t)(next_rand(&c->rng) % (JOB_END_HOPS + 1));
        rv_tid_t dest = (rv_tid_t)(next_rand(&c->rng) % rv_nworkers(ctx));
        rv_status_t st;
        while ((st = rv_call(w, dest, hop_id, &hops, sizeof(hops), NULL, 0)) ==
               RV_ERR_AGAIN)
            rv_progress(w);
        EXPECT(st == RV_OK, "a call: %s", rv_status_str(st));
        c->made += hops + 1;
    }
    return 0; /* no rv_quiesce: the job's end runs the chains */
}

static int body_job_end_sums(rv_worker_t *w, void *arg)
{
    (void)arg;
    counter_t *c = &counters[rv_worker_local(w)];
    uint64_t counts[2] = {c->made, c->ran}, sums[2];
    EXPECT(rv_coll_allreduce(w, sums, counts, 2, RV_COLL_U64, RV_COLL_SUM) ==
               RV_OK,
           "allreduce");
    EXPECT(sums[0] == sums[1],
           "%" PRIu64 " calls made before the job ended, %" PRIu64 " run",
           sums[0], sums[1]);
    return 0;
}

/* The last worker makes another call than the others (@p arg: "count",
 * another size; "kind", another collective): the job must end, naming
 * both calls, instead of hanging or reading past a buffer. */
static int body_mismatch(rv_worker_t *w, void *arg)
{
    uint64_t in[2] = {1, 2}, out[64];
    bool odd = rv_worker_tid(w) == rv_nworkers(ctx) - 1;
    if (odd && strcmp(arg, "kind") == 0)
        rv_coll_allgather(w, out, in, sizeof(in[0]));
    else
        rv_coll_allreduce(w, out, in, odd ? 2 : 1, RV_COLL_U64, RV_COLL_SUM);
    printf("a mismatched collective returned on worker %u\n",
           rv_worker_tid(w));
    return 1;
}

/* Deferred answers: per worker thread of this process, the callers of
 * test.defer waiting for their answer, and the answers it got. */
#define DEFER_CALLS 2000
typedef struct {
    rv_tid_t *src;
    size_t n, cap;
    uint64_t acks;
} defer_q_t;
static defer_q_t *deferred;

static rv_status_t on_defer(rv_worker_t *w, rv_call_t *call, void *arg)
{
    defer_q_t *q = &deferred[rv_worker_local(w)];
    (void)arg;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        rv_tid_t *p = realloc(q->src, cap * sizeof(*p));
        if (p == NULL)
            return RV_ERR_NO_MEMORY;
        q->src = p;
        q->cap = cap;
    }
    q->src[q->n++] = call->src;
    return RV_OK;
}

static rv_status_t on_ack(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)call;
    (void)arg;
    deferred[rv_worker_local(w)].acks++;
    return RV_OK;
}

/* The quiesce hook: answers up to 64 queued calls, says how many wait. */
static uint64_t answer_some(rv_worker_t *w, void *arg)
{
    defer_q_t *q = &deferred[rv_worker_local(w)];
    uint64_t one = 1;
    (void)arg;
    for (int i = 0; i < 64 && q->n > 0; i++)
        EXPECT(rv_call(w, q->src[--q->n], ack_id, &one, sizeof(one), NULL,
                       0) == RV_OK,
               "an answer");
    return q->n;
}

static int body_deferred(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint64_t one = 1;
    (void)arg;
    EXPECT(rv_quiesce_hook(w, answer_some, NULL) == RV_OK, "the hook");
    for (uint32_t i = 0; i < DEFER_CALLS; i++)
        EXPECT(rv_call(w, (me + 1 + i) % n, defer_id, &one, sizeof(one),
                       NULL, 0) == RV_OK,
               "a deferred call");
    EXPECT(rv_quiesce(w) == RV_OK, "rv_quiesce");
    defer_q_t *q = &deferred[rv_worker_local(w)];
    EXPECT(q->acks == DEFER_CALLS && q->n == 0,
           "worker %u: %" PRIu64 " of %d answers when rv_quiesce returned, "
           "%zu calls still queued",
           me, q->acks, DEFER_CALLS, q->n);
    free(q->src);
    return 0;
}

static void test_allreduce(void **state)
{
    (void)state;
    assert_int_equal(rv_job_run(ctx, body_allreduce, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_quiesce(void **state)
{
    (void)state;
    assert_int_equal(rv_job_run(ctx, body_quiesce, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_deferred(void **state)
{
    (void)state;
    assert_int_equal(rv_job_run(ctx, body_deferred, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_job_end(void **state)
{
    (void)state;
    memset(counters, 0, (size_t)rv_threads(ctx) * sizeof(*counters));
    assert_int_equal(rv_job_run(ctx, body_job_end, NULL), RV_OK);
    assert_int_equal(rv_job_run(ctx, body_job_end_sums, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

int main(int argc, char **argv)
{
    const char *group = "quiesce";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    if (argc > 2 && strcmp(group, "coll-mismatch") != 0)
        calls_per_round = atoi(argv[2]);
    counters = calloc((size_t)rv_threads(ctx), sizeof(*counters));
    deferred = calloc((size_t)rv_threads(ctx), sizeof(*deferred));
    if (counters == NULL || deferred == NULL ||
        rv_am_register(ctx, "test.defer", on_defer, NULL, &defer_id) !=
            RV_OK ||
        rv_am_register(ctx, "test.ack", on_ack, NULL, &ack_id) != RV_OK ||
        rv_am_register(ctx, "test.hop", on_hop, NULL, &hop_id) != RV_OK ||
        rv_am_register(ctx, "test.refuse", on_refuse, NULL, &refuse_id) !=
            RV_OK)
        return 1;
    if (strcmp(group, "coll-mismatch") == 0)
        return rv_job_run(ctx, body_mismatch,
                          argc > 2 ? argv[2] : (char *)"count") ==
                       RV_OK
                   ? 0
                   : 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_quiesce),
        cmocka_unit_test(test_deferred),
        cmocka_unit_test(test_job_end),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    free(counters);
    free(deferred);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
