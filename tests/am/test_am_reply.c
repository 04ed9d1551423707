/*
 * Handlers that reply under sustained load: every worker makes
 * REPLY_CALLS rv_call_return calls to a worker of another process, all
 * outstanding at once (one synchronizer, no window), and the handlers
 * reply to each. A reply that waited for room would progress, run the
 * next request, whose reply would wait in turn, and the stack would grow
 * with the traffic until the process crashes; every reply must instead
 * leave without waiting. Every result is checked.
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"

/* Calls per worker: enough for the recursion to overflow a thread's stack
 * when replies wait. */
#define REPLY_CALLS_DEFAULT 200000

static rv_context_t *ctx;
static rv_handler_id_t req_id;
static long reply_calls = REPLY_CALLS_DEFAULT;

/* The reply: the argument transformed, so that a result cannot be a stale
 * or zeroed one. */
static uint64_t answer(uint64_t v)
{
    return v * 2654435761u + 1;
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

static int body_replies(rv_worker_t *w, void *arg)
{
    (void)arg;
    rv_tid_t me = rv_worker_tid(w);
    rv_tid_t peer = (me + (rv_tid_t)rv_threads(ctx)) % rv_nworkers(ctx);
    uint64_t *ret = calloc((size_t)reply_calls, sizeof(*ret));
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    EXPECT(ret != NULL, "memory for the results");
    for (long i = 0; ret != NULL && i < reply_calls; i++) {
        uint64_t v = ((uint64_t)me << 32) | (uint64_t)i;
        rv_status_t st = rv_call_return(w, peer, req_id, &v, sizeof(v),
                                        &ret[i], sizeof(ret[i]), &sync, 0);
        if (st != RV_OK) {
            FAIL("call %ld to worker %u: %s", i, peer, rv_status_str(st));
            break;
        }
    }
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "every reply arrived");
    long bad = 0;
    for (long i = 0; ret != NULL && i < reply_calls; i++)
        bad += ret[i] != answer(((uint64_t)me << 32) | (uint64_t)i);
    EXPECT(bad == 0, "worker %u: %ld of %ld results wrong", me, bad,
           reply_calls);
    free(ret);
    rv_barrier(w);
    return 0;
}

static void test_replies(void **state)
{
    (void)state;
    assert_int_equal(rv_job_run(ctx, body_replies, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
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
    if (rv_size(ctx) < 2) {
        fprintf(stderr, "test_am_reply needs 2 processes or more\n");
        return 1;
    }
    if (rv_am_register(ctx, "test.reply", on_req, NULL, &req_id) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replies),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
