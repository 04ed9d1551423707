/*
 * Handlers that reply under sustained load, with a bounded stack.
 *
 * replies: every worker makes N rv_call_return calls spread over every
 * other worker, all outstanding at once (one synchronizer, no window), and
 * the handlers answer each. An answer that waited for room would
 * progress, run the next request, whose answer would wait in turn, and
 * the stack would grow with the traffic until the process crashes.
 *
 * call_replies: the handler answers with a call of its own (rv_call back
 * to the caller, sync NULL), which must be queued, never waited for,
 * when it cannot leave at once.
 *
 * nested: the handler waits explicitly (an rv_call_return back to the
 * caller with sync NULL, from inside the handler), so handlers nest; the
 * nesting must stay within am.max_nesting, and every answer must arrive.
 * Workers of even ranks call, those of odd ranks answer: a cycle of
 * workers all at am.max_nesting, each waiting for a call to run at the
 * next, would deadlock, as rv_am.h says.
 *
 * Calls spread over every other worker, those of the caller's process
 * included (the local bypass).
 *
 * Every result is checked, and the deepest nesting seen is printed.
 * A caller whose call is refused with RV_ERR_AGAIN (am.on_full: fail)
 * progresses and makes it again, as the API says it should.
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"

#define REPLY_CALLS_DEFAULT 200000
/* The other checks stream fewer calls: they take the same paths. */
#define CALL_REPLIES_SHARE 10
#define NESTED_SHARE 50

static rv_context_t *ctx;
static rv_handler_id_t req_id, callback_id, answer_id, nested_id;
static long reply_calls = REPLY_CALLS_DEFAULT;
static int64_t max_nesting_cfg;
static _Atomic uint64_t deepest;

/* Per worker thread of this process: what call_replies' answers fill. */
typedef struct {
    uint64_t *got;
    long count;
} slot_t;
static slot_t *slots;

/* The answer: the argument transformed, so that a result cannot be a
 * stale or zeroed one. */
static uint64_t answer(uint64_t v)
{
    return v * 2654435761u + 1;
}

/* The i-th call's target: every other worker in turn, those of this
 * process included. */
static rv_tid_t target(rv_tid_t me, long i)
{
    uint32_t n = rv_nworkers(ctx);
    return (rv_tid_t)((me + 1 + (uint64_t)i % (n - 1)) % n);
}

/* The i-th nested call's target: the workers of odd ranks in turn. */
static rv_tid_t odd_target(long i)
{
    uint32_t t = (uint32_t)rv_threads(ctx);
    uint32_t odd = (uint32_t)rv_size(ctx) / 2 * t;
    uint32_t k = (uint32_t)((uint64_t)i % odd);
    return (rv_tid_t)((k / t * 2 + 1) * t + k % t);
}

static rv_status_t on_req(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t v;
    (void)w;
    (void)arg;
    if (call->args_len != sizeof(v) || call->ret_len < sizeof(v))
        return RV_ERR_INVALID;
    memcpy(&v, call->args, sizeof(v));
    v = answer(v);
    memcpy(call->ret, &v, sizeof(v));
    call->ret_len = sizeof(v);
    return RV_OK;
}

/* call_replies: the answer goes back as a call of its own. */
static rv_status_t on_callback(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t v[2];
    (void)arg;
    if (call->args_len != sizeof(v[0]))
        return RV_ERR_INVALID;
    memcpy(&v[0], call->args, sizeof(v[0]));
    v[1] = answer(v[0]);
    rv_status_t st = rv_call(w, call->src, answer_id, v, sizeof(v), NULL, 0);
    EXPECT(st == RV_OK, "a handler's answering call: %s", rv_status_str(st));
    return RV_OK;
}

static rv_status_t on_answer(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t v[2];
    (void)arg;
    if (call->args_len != sizeof(v))
        return RV_ERR_INVALID;
    memcpy(v, call->args, sizeof(v));
    slot_t *s = &slots[rv_worker_local(w)];
    uint64_t i = v[0] & 0xffffffffu;
    if (i < (uint64_t)reply_calls && s->got[i] == 0) {
        s->got[i] = v[1];
        s->count++;
    } else {
        FAIL("worker %u: answer %" PRIu64 " unexpected", rv_worker_tid(w), i);
    }
    return RV_OK;
}

/* nested: the handler asks the caller for the answer and waits for it. */
static rv_status_t on_nested(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t v, r = 0;
    (void)arg;
    if (call->args_len != sizeof(v) || call->ret_len < sizeof(v))
        return RV_ERR_INVALID;
    memcpy(&v, call->args, sizeof(v));
    rv_status_t st = rv_call_return(w, call->src, req_id, &v, sizeof(v), &r,
                                    sizeof(r), NULL, 0);
    EXPECT(st == RV_OK && r == answer(v), "a nested wait's answer: %s",
           rv_status_str(st));
    memcpy(call->ret, &r, sizeof(r));
    call->ret_len = sizeof(r);
    return RV_OK;
}

/* Makes a call, progressing and trying again while it is refused for a
 * full queue (am.on_full: fail). */
#define CALL_RETRYING(w, expr)                                                 \
    ({                                                                         \
        rv_status_t st_;                                                       \
        while ((st_ = (expr)) == RV_ERR_AGAIN)                                 \
            rv_progress(w);                                                    \
        st_;                                                                   \
    })

static void note_nesting(rv_worker_t *w)
{
    rv_am_stats_t st;
    rv_am_stats(w, &st);
    uint64_t d = atomic_load(&deepest);
    while (st.max_nesting > d &&
           !atomic_compare_exchange_weak(&deepest, &d, st.max_nesting))
        ;
    EXPECT(st.max_nesting <= (uint64_t)max_nesting_cfg,
           "worker %u: %" PRIu64 " handlers nested, am.max_nesting is %" PRId64,
           rv_worker_tid(w), st.max_nesting, max_nesting_cfg);
}

/* Streams @p n calls of handler @p h returning a result, all outstanding,
 * and checks every result. */
static void stream_returns(rv_worker_t *w, rv_handler_id_t h, long n)
{
    bool odd_only = h == nested_id;
    rv_tid_t me = rv_worker_tid(w);
    uint64_t *ret = calloc((size_t)n, sizeof(*ret));
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    EXPECT(ret != NULL, "memory for the results");
    for (long i = 0; ret != NULL && i < n; i++) {
        uint64_t v = ((uint64_t)me << 32) | (uint64_t)i;
        rv_tid_t dest = odd_only ? odd_target(i) : target(me, i);
        rv_status_t st = CALL_RETRYING(
            w, rv_call_return(w, dest, h, &v, sizeof(v), &ret[i],
                              sizeof(ret[i]), &sync, 0));
        if (st != RV_OK) {
            FAIL("call %ld to worker %u: %s", i, dest, rv_status_str(st));
            break;
        }
    }
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "every answer arrived");
    long bad = 0;
    for (long i = 0; ret != NULL && i < n; i++)
        bad += ret[i] != answer(((uint64_t)me << 32) | (uint64_t)i);
    EXPECT(bad == 0, "worker %u: %ld of %ld results wrong", me, bad, n);
    free(ret);
}

static int body_replies(rv_worker_t *w, void *arg)
{
    (void)arg;
    stream_returns(w, req_id, reply_calls);
    rv_barrier(w);
    note_nesting(w);
    return 0;
}

static int body_call_replies(rv_worker_t *w, void *arg)
{
    (void)arg;
    rv_tid_t me = rv_worker_tid(w);
    long n = reply_calls / CALL_REPLIES_SHARE;
    slot_t *s = &slots[rv_worker_local(w)];
    s->got = calloc((size_t)n, sizeof(*s->got));
    s->count = 0;
    EXPECT(s->got != NULL, "memory for the answers");
    for (long i = 0; s->got != NULL && i < n; i++) {
        uint64_t v = ((uint64_t)me << 32) | (uint64_t)i;
        rv_tid_t dest = target(me, i);
        rv_status_t st = CALL_RETRYING(
            w, rv_call(w, dest, callback_id, &v, sizeof(v), NULL, 0));
        if (st != RV_OK) {
            FAIL("call %ld to worker %u: %s", i, dest, rv_status_str(st));
            break;
        }
    }
    rv_flush(w, RV_TID_ALL);
    time_t limit = time(NULL) + WAIT_LIMIT_S;
    while (s->got != NULL && s->count < n && time(NULL) < limit)
        rv_progress(w);
    EXPECT(s->count == n, "worker %u: %ld of %ld answers arrived", me,
           s->count, n);
    long bad = 0;
    for (long i = 0; i < s->count && i < n; i++)
        bad += s->got[i] != answer(((uint64_t)me << 32) | (uint64_t)i);
    EXPECT(bad == 0, "worker %u: %ld answers wrong", me, bad);
    /* Answers of others may still be running here: wait for all. */
    rv_barrier(w);
    free(s->got);
    s->got = NULL;
    note_nesting(w);
    return 0;
}

static int body_nested(rv_worker_t *w, void *arg)
{
    (void)arg;
    if (rv_rank(ctx) % 2 == 0 && rv_rank(ctx) + 1 < rv_size(ctx))
        stream_returns(w, nested_id, reply_calls / NESTED_SHARE);
    /* The answering workers nest while the callers wait here. */
    rv_barrier(w);
    note_nesting(w);
    return 0;
}

static void run(rv_worker_fn fn)
{
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_replies(void **state)
{
    (void)state;
    run(body_replies);
}

static void test_call_replies(void **state)
{
    (void)state;
    run(body_call_replies);
}

static void test_nested(void **state)
{
    (void)state;
    run(body_nested);
}

int main(int argc, char **argv)
{
    const char *group = "am-reply";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    if (argc > 2)
        reply_calls = atol(argv[2]);
    if (rv_size(ctx) < 2 || reply_calls < NESTED_SHARE ||
        reply_calls > UINT32_MAX) {
        fprintf(stderr, "test_am_reply needs 2 processes or more, and "
                        "%d to 2^32 calls\n", NESTED_SHARE);
        return 1;
    }
    slots = calloc((size_t)rv_threads(ctx), sizeof(*slots));
    if (slots == NULL ||
        rv_am_register(ctx, "test.reply", on_req, NULL, &req_id) != RV_OK ||
        rv_am_register(ctx, "test.callback", on_callback, NULL,
                       &callback_id) != RV_OK ||
        rv_am_register(ctx, "test.answer", on_answer, NULL, &answer_id) !=
            RV_OK ||
        rv_am_register(ctx, "test.nested", on_nested, NULL, &nested_id) !=
            RV_OK ||
        rv_config_get_int(rv_context_config(ctx), "am.max_nesting",
                      &max_nesting_cfg) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replies),
        cmocka_unit_test(test_call_replies),
        cmocka_unit_test(test_nested),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    printf("%s: rank %d: %ld calls per worker; deepest handler nesting "
           "seen: %" PRIu64 " (am.max_nesting %" PRId64 ")\n", group,
           rv_rank(ctx), reply_calls, atomic_load(&deepest), max_nesting_cfg);
    free(slots);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
