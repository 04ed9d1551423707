/*
 * The invocation layer, as a multi-process job, in whatever mode the job's
 * configuration selects (ctest runs it for every am.path x
 * am.aggregation): calls and call_buffer delivered exactly once and in
 * per-pair order with the right bytes, call_return values, consumed
 * notifications that wait for the handler (which itself waits inside),
 * handlers that make calls, broadcasts reaching every worker exactly
 * once, and buffers moved by RMA (rv_put_handler into lent memory,
 * rv_get_handler from the caller's).
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"
#include "rv_rma.h"

#define MAX_WORKERS 64

static rv_context_t *ctx;

static struct {
    rv_handler_id_t data, triple, slow, release, relay, finish, bcast;
    rv_handler_id_t lend, bufref, order;
} H;

typedef struct {
    uint64_t seq_from[MAX_WORKERS];
    uint64_t got_from[MAX_WORKERS];
    uint64_t bcast_from[MAX_WORKERS];
    int released;
    int finished;
    uint64_t bufref_from[MAX_WORKERS];
    uint64_t order_from[MAX_WORKERS];
    void *landing[MAX_WORKERS];  /* rv_mem_alloc'ed for each source */
} wstate_t;

static wstate_t *ws;

static wstate_t *state_of(rv_worker_t *w)
{
    return &ws[rv_worker_local(w)];
}

static uint8_t pattern(uint32_t src, uint64_t seq, size_t i)
{
    return (uint8_t)(src * 29u + seq * 13u + i * 5u + (i >> 9));
}

/* ---------------------------------------------------------------------- */

typedef struct {
    uint32_t src;
    uint32_t pad;
    uint64_t seq;
    uint64_t buf_len;
} data_args_t;

#define CALLS_PER_PAIR 150

static size_t buf_len_of(uint64_t seq)
{
    static const size_t sizes[] = {0, 1, 100, 4096, 9000, 65536, 300000};
    return seq % 3 == 0 ? 0 : sizes[seq % 7];
}

static rv_status_t on_data(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    data_args_t a;
    (void)arg;
    EXPECT(call->args_len == sizeof(a), "args of %zu bytes", call->args_len);
    memcpy(&a, call->args, sizeof(a));
    EXPECT(a.src == call->src, "call from %u claims to be from %u",
           call->src, a.src);
    EXPECT(a.seq == s->seq_from[call->src],
           "worker %u: call %llu from %u arrived when %llu was expected",
           rv_worker_tid(w), (unsigned long long)a.seq, call->src,
           (unsigned long long)s->seq_from[call->src]);
    s->seq_from[call->src] = a.seq + 1;
    s->got_from[call->src]++;
    EXPECT(call->buf_len == a.buf_len, "buffer of %zu bytes, expected %llu",
           call->buf_len, (unsigned long long)a.buf_len);
    const uint8_t *b = call->buf;
    for (size_t i = 0; i < call->buf_len && i < a.buf_len; i++)
        if (b[i] != pattern(a.src, a.seq, i)) {
            FAIL("buffer of call %llu from %u wrong at byte %zu",
                    (unsigned long long)a.seq, a.src, i);
            break;
        }
    return RV_OK;
}

static int body_calls(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    uint8_t *buf = malloc(300000);
    rv_sync_t sync;
    (void)arg;

    for (uint64_t seq = 0; seq < CALLS_PER_PAIR; seq++) {
        data_args_t a = {.src = me, .seq = seq, .buf_len = buf_len_of(seq)};
        for (size_t i = 0; i < a.buf_len; i++)
            buf[i] = pattern(me, seq, i);
        for (uint32_t k = 0; k < n; k++) {
            uint32_t dest = (me + k) % n;
            rv_status_t st;
            /* one synchronizer per round: the buffer is rewritten after */
            rv_sync_init(&sync, 0);
            if (a.buf_len == 0 && seq % 2)
                st = rv_call(w, dest, H.data, &a, sizeof(a), &sync, 0);
            else
                st = rv_call_buffer(w, dest, H.data, &a, sizeof(a), buf,
                                    a.buf_len, &sync, 0);
            EXPECT(st == RV_OK, "call: %s", rv_status_str(st));
            EXPECT(rv_sync_wait(w, &sync) == RV_OK, "sync");
        }
    }
    free(buf);
    for (uint32_t src = 0; src < n; src++)
        WAIT_UNTIL(w, s->got_from[src] >= CALLS_PER_PAIR, "calls");
    rv_barrier(w);
    for (uint32_t src = 0; src < n; src++)
        EXPECT(s->got_from[src] == CALLS_PER_PAIR,
               "%llu calls from %u, expected %d",
               (unsigned long long)s->got_from[src], src, CALLS_PER_PAIR);
    rv_am_stats_t st;
    rv_am_stats(w, &st);
    EXPECT(st.calls_sent == (uint64_t)CALLS_PER_PAIR * n &&
               st.calls_received == (uint64_t)CALLS_PER_PAIR * n,
           "counters: %llu sent, %llu received",
           (unsigned long long)st.calls_sent,
           (unsigned long long)st.calls_received);
    return 0;
}

/* ---------------------------------------------------------------------- */

static rv_status_t on_triple(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t x, r;
    (void)arg;
    memcpy(&x, call->args, sizeof(x));
    r = 3 * x + rv_worker_tid(w);
    EXPECT(call->ret_len >= sizeof(r), "result room of %zu", call->ret_len);
    memcpy(call->ret, &r, sizeof(r));
    call->ret_len = sizeof(r);
    return RV_OK;
}

static int body_return(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint64_t results[64];
    rv_sync_t sync;
    (void)arg;

    /* many in flight on one synchronizer, to every worker */
    rv_sync_init(&sync, 0);
    for (int i = 0; i < 64; i++) {
        uint64_t x = (uint64_t)me * 1000 + (uint64_t)i;
        results[i] = UINT64_MAX;
        EXPECT(rv_call_return(w, (me + (uint32_t)i) % n, H.triple, &x,
                              sizeof(x), &results[i], sizeof(results[i]),
                              &sync, 0) == RV_OK, "call_return");
    }
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "sync");
    for (int i = 0; i < 64; i++) {
        uint64_t want = 3 * ((uint64_t)me * 1000 + (uint64_t)i) +
                        (me + (uint32_t)i) % n;
        EXPECT(results[i] == want, "result %d is %llu, expected %llu", i,
               (unsigned long long)results[i], (unsigned long long)want);
    }
    /* and one without a synchronizer */
    uint64_t x = 7, r = 0;
    EXPECT(rv_call_return(w, (me + 1) % n, H.triple, &x, sizeof(x), &r,
                          sizeof(r), NULL, 0) == RV_OK, "call_return");
    EXPECT(r == 21 + (me + 1) % n, "blocking call_return gave %llu",
           (unsigned long long)r);
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Runs of rv_call_return calls into one synchronizer are counted in it
 * ahead, a batch's worth at a time (rv_am.h): the count is never below
 * the calls outstanding, it is exact once waited, every result arrives,
 * and plain calls and results to one destination still run in order. */

#define ORDER_CALLS 3000

static rv_status_t on_order(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    uint64_t a[2];
    (void)arg;
    EXPECT(call->args_len == sizeof(a), "args of %zu bytes", call->args_len);
    memcpy(a, call->args, sizeof(a));
    EXPECT(a[0] < MAX_WORKERS && a[1] == s->order_from[a[0]],
           "call %llu from worker %llu, expected call %llu",
           (unsigned long long)a[1], (unsigned long long)a[0],
           (unsigned long long)s->order_from[a[0] % MAX_WORKERS]);
    s->order_from[a[0] % MAX_WORKERS] = a[1] + 1;
    if (call->ret_len >= sizeof(uint64_t)) {
        uint64_t r = a[1] * 5 + 1;
        memcpy(call->ret, &r, sizeof(r));
        call->ret_len = sizeof(r);
    }
    return RV_OK;
}

static int body_return_runs(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    rv_tid_t dest = (me + 1) % n;
    static _Thread_local uint64_t res[ORDER_CALLS];
    rv_sync_t s[2];
    long made[2] = {0, 0};
    (void)arg;

    rv_sync_init(&s[0], 0);
    rv_sync_init(&s[1], 0);
    for (uint64_t k = 0; k < ORDER_CALLS; k++) {
        uint64_t a[2] = {me, k};
        int which = (int)(k / 700) % 2; /* runs long and short */
        res[k] = UINT64_MAX;
        if (k % 97 == 0) {
            EXPECT(rv_call(w, dest, H.order, a, sizeof(a), NULL, 0) == RV_OK,
                   "call");
            continue;
        }
        EXPECT(rv_call_return(w, dest, H.order, a, sizeof(a), &res[k],
                              sizeof(res[k]), &s[which], 0) == RV_OK,
               "call_return");
        made[which]++;
        /* The count first, then the results: a local target (another
         * thread) writes a result before it completes the call, so every
         * call still unwritten after the load was counted by it. The peek
         * reads results the target may be writing, which the API leaves
         * to the caller only after the synchronizer completes: a race by
         * design, left out under ThreadSanitizer (make check-tsan). */
        long pending = atomic_load(&s[which].pending), outstanding = 0;
        for (uint64_t j = 0; j <= k && !RV_TEST_TSAN; j++)
            if (j % 97 != 0 && (int)(j / 700) % 2 == which &&
                __atomic_load_n(&res[j], __ATOMIC_RELAXED) == UINT64_MAX)
                outstanding++;
        EXPECT(pending >= outstanding,
               "call %llu: the synchronizer counts %ld, %ld are outstanding",
               (unsigned long long)k, pending, outstanding);
        if (k % 500 == 0)
            rv_progress(w);
    }
    for (int which = 0; which < 2; which++) {
        EXPECT(rv_sync_wait(w, &s[which]) == RV_OK, "sync %d", which);
        for (uint64_t k = 0; k < ORDER_CALLS; k++)
            if (k % 97 != 0 && (int)(k / 700) % 2 == which)
                EXPECT(res[k] == k * 5 + 1,
                       "synchronizer %d completed; result %llu is %llu",
                       which, (unsigned long long)k,
                       (unsigned long long)res[k]);
    }
    EXPECT(atomic_load(&s[0].pending) == 0 && atomic_load(&s[1].pending) == 0,
           "after the waits the synchronizers count %ld and %ld",
           (long)atomic_load(&s[0].pending), (long)atomic_load(&s[1].pending));
    for (uint64_t k = 0; k < ORDER_CALLS; k++)
        if (k % 97 != 0)
            EXPECT(res[k] == k * 5 + 1, "result %llu is %llu",
                   (unsigned long long)k, (unsigned long long)res[k]);
    EXPECT(made[0] + made[1] == ORDER_CALLS - (ORDER_CALLS + 96) / 97,
           "made %ld calls", made[0] + made[1]);
    EXPECT(rv_quiesce(w) == RV_OK, "quiesce");
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* A consumed notification waits for the handler, which itself waits (on a
 * release call delivered by nested progress) inside. */

static rv_status_t on_release(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)call;
    (void)arg;
    state_of(w)->released++;
    return RV_OK;
}

static rv_status_t on_slow(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    (void)arg;
    (void)call;
    WAIT_UNTIL(w, s->released > 0, "the release call, inside a handler");
    s->released--;
    return RV_OK;
}

static int body_consumed(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n;
    rv_sync_t sync;
    (void)arg;

    /* in pairs (0 calls 1, 2 calls 3, ...): a ring of handlers each
     * waiting on its neighbour would wait for ever */
    if (me % 2 != 0 || right == 0) {
        rv_barrier(w);
        return 0;
    }
    rv_sync_init(&sync, 0);
    EXPECT(rv_call(w, right, H.slow, NULL, 0, &sync, RV_NOTIFY_CONSUMED) ==
               RV_OK, "slow call");
    double t0 = now_s();
    while (now_s() - t0 < 0.05)
        rv_progress(w);
    EXPECT(!rv_sync_done(&sync),
           "the consumed notification came before the handler finished");
    EXPECT(rv_call(w, right, H.release, NULL, 0, NULL, 0) == RV_OK,
           "release call");
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "consumed sync");
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Handlers that make calls: a relay around every worker and back. */

static rv_status_t on_finish(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)call;
    (void)arg;
    state_of(w)->finished++;
    return RV_OK;
}

static rv_status_t on_relay(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint32_t hops, origin[2];
    (void)arg;
    memcpy(origin, call->args, sizeof(origin));
    hops = origin[1];
    uint32_t n = rv_nworkers(ctx);
    if (hops == 0) {
        EXPECT(rv_call(w, origin[0], H.finish, NULL, 0, NULL,
                       RV_NOTIFY_CONSUMED) == RV_OK, "finish call");
        return RV_OK;
    }
    origin[1] = hops - 1;
    /* a call made, and waited for, from inside a handler */
    EXPECT(rv_call(w, (rv_worker_tid(w) + 1) % n, H.relay, origin,
                   sizeof(origin), NULL, 0) == RV_OK, "relay call");
    return RV_OK;
}

static int body_relay(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t origin[2] = {me, 2 * n};
    (void)arg;
    EXPECT(rv_call(w, (me + 1) % n, H.relay, origin, sizeof(origin), NULL,
                   0) == RV_OK, "relay");
    WAIT_UNTIL(w, state_of(w)->finished == 1, "the relay to come back");
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */

#define BCAST_BUF 100000

static rv_status_t on_bcast(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint32_t root;
    (void)arg;
    EXPECT(call->broadcast, "a broadcast not marked as one");
    memcpy(&root, call->args, sizeof(root));
    EXPECT(root == call->src, "broadcast from %u claims %u", call->src, root);
    state_of(w)->bcast_from[root]++;
    if (call->buf_len > 0) {
        EXPECT(call->buf_len == BCAST_BUF, "broadcast buffer of %zu bytes",
               call->buf_len);
        const uint8_t *b = call->buf;
        for (size_t i = 0; i < call->buf_len; i++)
            if (b[i] != pattern(root, 99, i)) {
                FAIL("broadcast buffer from %u wrong at %zu",
                        root, i);
                break;
            }
    }
    return RV_OK;
}

static int body_broadcast(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    uint8_t *buf = malloc(BCAST_BUF);
    rv_sync_t sync;
    (void)arg;

    for (size_t i = 0; i < BCAST_BUF; i++)
        buf[i] = pattern(me, 99, i);
    /* every worker broadcasts: plain, then with a buffer and a consumed
     * notification, which completes only once all n workers ran it */
    EXPECT(rv_broadcast(w, H.bcast, &me, sizeof(me), NULL, 0) == RV_OK,
           "broadcast");
    rv_sync_init(&sync, 0);
    EXPECT(rv_broadcast_buffer(w, H.bcast, &me, sizeof(me), buf, BCAST_BUF,
                               &sync, RV_NOTIFY_CONSUMED) == RV_OK,
           "broadcast_buffer");
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "broadcast sync");
    free(buf);
    for (uint32_t r = 0; r < n; r++)
        WAIT_UNTIL(w, s->bcast_from[r] >= 2, "broadcasts");
    rv_barrier(w);
    for (uint32_t r = 0; r < n; r++)
        EXPECT(s->bcast_from[r] == 2,
               "worker %u ran %llu broadcasts from %u, expected 2", me,
               (unsigned long long)s->bcast_from[r], r);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Buffers by RMA: rv_put_handler into memory the target lent, and
 * rv_get_handler from the caller's registered memory. */

#define BUFREF_LEN ((size_t)3 << 20) /* several rendezvous fragments */

typedef struct {
    uint32_t src;
    uint32_t how;   /* 0: put, 1: get */
    uint64_t len;
} bufref_args_t;

/* Lends a landing buffer of registered memory to the calling worker. */
static rv_status_t on_lend(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rv_rptr_t p;
    (void)arg;
    void *mem = rv_mem_alloc(w, BUFREF_LEN, &p);
    EXPECT(mem != NULL, "rv_mem_alloc");
    state_of(w)->landing[call->src] = mem;
    EXPECT(call->ret_len >= sizeof(p), "room for a remote pointer");
    memcpy(call->ret, &p, sizeof(p));
    call->ret_len = sizeof(p);
    return RV_OK;
}

static rv_status_t on_bufref(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    bufref_args_t a;
    (void)arg;
    memcpy(&a, call->args, sizeof(a));
    EXPECT(call->buf_len == a.len, "%s buffer of %zu bytes, expected %llu",
           a.how ? "get" : "put", call->buf_len, (unsigned long long)a.len);
    if (a.how == 0)
        EXPECT(call->buf == s->landing[a.src],
               "a put buffer not where it was lent");
    const uint8_t *b = call->buf;
    for (size_t i = 0; i < call->buf_len; i++)
        if (b[i] != pattern(a.src, 40 + a.how, i)) {
            FAIL("%s buffer from %u wrong at byte %zu", a.how ? "get" : "put",
                 a.src, i);
            break;
        }
    s->bufref_from[a.src]++;
    return RV_OK;
}

static int body_bufref(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    (void)arg;

    uint8_t *src = malloc(BUFREF_LEN);
    rv_rptr_t gp;
    uint8_t *gsrc = rv_mem_alloc(w, BUFREF_LEN, &gp);
    EXPECT(src != NULL && gsrc != NULL, "buffers");
    for (size_t i = 0; i < BUFREF_LEN; i++) {
        src[i] = pattern(me, 40, i);
        gsrc[i] = pattern(me, 41, i);
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t dest = (me + k) % n;
        rv_rptr_t landing;
        EXPECT(rv_call_return(w, dest, H.lend, NULL, 0, &landing,
                              sizeof(landing), NULL, 0) == RV_OK, "lend");
        EXPECT((int)landing.rank == rv_tid_rank(ctx, dest),
               "a landing buffer of rank %d from worker %u", landing.rank,
               dest);
        /* small and large, both ways */
        size_t lens[2] = {64, BUFREF_LEN};
        for (int j = 0; j < 2; j++) {
            bufref_args_t a = {.src = me, .how = 0, .len = lens[j]};
            EXPECT(rv_put_handler(w, dest, H.bufref, &a, sizeof(a), landing,
                                  src, a.len, NULL, 0) == RV_OK,
                   "rv_put_handler");
            a.how = 1;
            rv_sync_t sync;
            rv_sync_init(&sync, 0);
            EXPECT(rv_get_handler(w, dest, H.bufref, &a, sizeof(a), gp,
                                      a.len, &sync, 0) == RV_OK,
                   "rv_get_handler");
            EXPECT(rv_sync_wait(w, &sync) == RV_OK, "get sync");
            /* the target has run it: the source may change now */
            EXPECT(s != NULL, "state");
        }
    }
    for (uint32_t r = 0; r < n; r++)
        WAIT_UNTIL(w, s->bufref_from[r] >= 4, "buffer calls");
    rv_barrier(w);
    for (uint32_t r = 0; r < n; r++) {
        EXPECT(s->bufref_from[r] == 4, "%llu buffer calls from %u, expected 4",
               (unsigned long long)s->bufref_from[r], r);
        rv_mem_free(w, s->landing[r]);
    }
    rv_mem_free(w, gsrc);
    free(src);
    return 0;
}

/* ---------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    atomic_store(&failures, 0);
    ws = calloc((size_t)rv_threads(ctx), sizeof(*ws));
    return ws == NULL;
}

static int teardown(void **state)
{
    (void)state;
    free(ws);
    return 0;
}

static void run_job(rv_worker_fn fn)
{
    assert_true(rv_nworkers(ctx) <= MAX_WORKERS);
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_calls(void **state)
{
    (void)state;
    run_job(body_calls);
}

static void test_call_return(void **state)
{
    (void)state;
    run_job(body_return);
}

static void test_return_runs(void **state)
{
    (void)state;
    run_job(body_return_runs);
}

static void test_consumed(void **state)
{
    (void)state;
    run_job(body_consumed);
}

static void test_handlers_make_calls(void **state)
{
    (void)state;
    run_job(body_relay);
}

static void test_broadcast(void **state)
{
    (void)state;
    run_job(body_broadcast);
}

static void test_buffer_put_get(void **state)
{
    (void)state;
    run_job(body_bufref);
}

int main(int argc, char **argv)
{
    const char *group = "am";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    if ((rv_rma_init(ctx) |
         rv_am_register(ctx, "test.data", on_data, NULL, &H.data) |
         rv_am_register(ctx, "test.triple", on_triple, NULL, &H.triple) |
         rv_am_register(ctx, "test.slow", on_slow, NULL, &H.slow) |
         rv_am_register(ctx, "test.release", on_release, NULL, &H.release) |
         rv_am_register(ctx, "test.relay", on_relay, NULL, &H.relay) |
         rv_am_register(ctx, "test.finish", on_finish, NULL, &H.finish) |
         rv_am_register(ctx, "test.bcast", on_bcast, NULL, &H.bcast) |
         rv_am_register(ctx, "test.lend", on_lend, NULL, &H.lend) |
         rv_am_register(ctx, "test.bufref", on_bufref, NULL, &H.bufref) |
         rv_am_register(ctx, "test.order", on_order, NULL, &H.order)) !=
        RV_OK)
        return 1;

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_return, setup, teardown),
        cmocka_unit_test_setup_teardown(test_return_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consumed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handlers_make_calls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_broadcast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffer_put_get, setup,
                                        teardown),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
