/*
 * Layer slots (rv_layer.h) and the rule for layers that were never
 * initialised, in a job of one process and two worker threads:
 *
 *   test_layer slots    two layers of the test's own: every hook runs on
 *                       every worker, start and progress bottom-up, the
 *                       rest top-down; per-worker state is the layer's
 *                       own; installing again returns the same slot; the
 *                       slots run out with a clear error
 *   test_layer uninit   calls of am and rma on a job where neither was
 *                       initialised fail with RV_ERR_INVALID and an error
 *                       naming the init call
 *   test_layer hooks    the invocation layer's extension interface, as a
 *                       layer of the test's own uses it: a call hook runs
 *                       at the target before the handler, sees the
 *                       caller's words, replaces the buffer the handler
 *                       sees and is finished after it; a flush hook runs
 *                       from rv_flush; neither kind registers while the
 *                       job runs
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"
#include "rv_am_ext.h"
#include "rv_layer.h"
#include "rv_rma.h"
#include "stderr_capture.h"

#define THREADS 2

/* The hooks of the test's layers, in the order they ran, per worker. */
enum { EV_START, EV_QUIESCE, EV_DRAIN, EV_STOP, EV_MAX };

typedef struct {
    int slot;
    int id;                     /* 0: installed first, 1: second */
    atomic_int progress[THREADS];
    atomic_int fini;
} layer_t;

static layer_t layers[2];
static atomic_int seq[THREADS];
static int order[THREADS][EV_MAX][2]; /* [worker][event][layer] = seq */
static atomic_int fini_seq;
static int fini_order[2];

static void record(rv_worker_t *w, int layer, int ev)
{
    int t = rv_worker_local(w);
    order[t][ev][layer] = atomic_fetch_add(&seq[t], 1) + 1;
}

/* Each layer's per-worker state: its id and the worker's tid. */
typedef struct {
    int layer;
    rv_tid_t tid;
} wstate_t;

#define LAYER_HOOKS(N)                                                        \
    static rv_status_t start_##N(rv_worker_t *w)                              \
    {                                                                         \
        wstate_t *s = malloc(sizeof(*s));                                     \
        if (s == NULL)                                                        \
            return RV_ERR_NO_MEMORY;                                          \
        *s = (wstate_t){.layer = N, .tid = rv_worker_tid(w)};                 \
        rv_worker_layer_set(w, layers[N].slot, s);                            \
        record(w, N, EV_START);                                               \
        return RV_OK;                                                         \
    }                                                                         \
    static unsigned progress_##N(rv_worker_t *w)                              \
    {                                                                         \
        atomic_fetch_add(&layers[N].progress[rv_worker_local(w)], 1);         \
        return 0;                                                             \
    }                                                                         \
    static void quiesce_##N(rv_worker_t *w) { record(w, N, EV_QUIESCE); }     \
    static void drain_##N(rv_worker_t *w) { record(w, N, EV_DRAIN); }         \
    static void stop_##N(rv_worker_t *w)                                      \
    {                                                                         \
        record(w, N, EV_STOP);                                                \
        free(rv_worker_layer(w, layers[N].slot));                             \
        rv_worker_layer_set(w, layers[N].slot, NULL);                         \
    }                                                                         \
    static void fini_##N(rv_context_t *ctx)                                   \
    {                                                                         \
        (void)ctx;                                                            \
        fini_order[N] = atomic_fetch_add(&fini_seq, 1) + 1;                   \
    }                                                                         \
    static const rv_layer_ops_t ops_##N = {                                   \
        .name = "test" #N,                                                    \
        .worker_start = start_##N,                                            \
        .progress = progress_##N,                                             \
        .worker_quiesce = quiesce_##N,                                        \
        .worker_drain = drain_##N,                                            \
        .worker_stop = stop_##N,                                              \
        .context_fini = fini_##N,                                             \
    };

LAYER_HOOKS(0)
LAYER_HOOKS(1)

static int slots_body(rv_worker_t *w, void *arg)
{
    (void)arg;
    for (int l = 0; l < 2; l++) {
        const wstate_t *s = rv_worker_layer(w, layers[l].slot);
        EXPECT(s != NULL && s->layer == l && s->tid == rv_worker_tid(w),
               "worker %u: layer %d's state is its own", rv_worker_tid(w), l);
    }
    int t = rv_worker_local(w);
    int before = atomic_load(&layers[1].progress[t]);
    rv_progress(w);
    EXPECT(atomic_load(&layers[0].progress[t]) > 0 &&
               atomic_load(&layers[1].progress[t]) > before,
           "rv_progress runs every layer's progress hook");
    return 0;
}

static void test_slots(void **state)
{
    rv_context_t *ctx = *state;
    assert_int_equal(rv_layer_install(ctx, &ops_0, &layers[0],
                                      &layers[0].slot),
                     RV_OK);
    assert_int_equal(rv_layer_install(ctx, &ops_1, &layers[1],
                                      &layers[1].slot),
                     RV_OK);
    assert_int_not_equal(layers[0].slot, layers[1].slot);
    int again = -1;
    assert_int_equal(rv_layer_install(ctx, &ops_0, NULL, &again), RV_OK);
    assert_int_equal(again, layers[0].slot);
    assert_ptr_equal(rv_layer_context(ctx, layers[1].slot), &layers[1]);
    assert_int_equal(rv_layer_find(ctx, &ops_1), layers[1].slot);

    assert_int_equal(rv_job_run(ctx, slots_body, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
    for (int t = 0; t < THREADS; t++) {
        for (int ev = 0; ev < EV_MAX; ev++)
            for (int l = 0; l < 2; l++)
                assert_true(order[t][ev][l] > 0);
        /* bottom-up at start, top-down after */
        assert_true(order[t][EV_START][0] < order[t][EV_START][1]);
        assert_true(order[t][EV_QUIESCE][1] < order[t][EV_QUIESCE][0]);
        assert_true(order[t][EV_DRAIN][1] < order[t][EV_DRAIN][0]);
        assert_true(order[t][EV_STOP][1] < order[t][EV_STOP][0]);
    }

    /* The slots run out with a clear error. */
    static rv_layer_ops_t more[RV_LAYER_MAX];
    char log[4096];
    int slot = -1;
    rv_status_t st = RV_OK;
    capture_begin();
    for (int i = 0; i < RV_LAYER_MAX && st == RV_OK; i++) {
        more[i].name = "filler";
        st = rv_layer_install(ctx, &more[i], NULL, &slot);
    }
    capture_end(log, sizeof(log));
    assert_int_equal(st, RV_ERR_NO_MEMORY);
    assert_non_null(strstr(log, "layer slots are taken"));
}

static int uninit_body(rv_worker_t *w, void *arg)
{
    rv_rptr_t p = {0};
    uint64_t x = 0;
    (void)arg;
    EXPECT(rv_call(w, rv_worker_tid(w), 1, NULL, 0, NULL, 0) ==
               RV_ERR_INVALID, "rv_call without rv_am_init");
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_ERR_INVALID,
           "rv_flush without rv_am_init");
    EXPECT(rv_mem_alloc(w, 64, &p) == NULL, "rv_mem_alloc without rv_rma_init");
    EXPECT(rv_put(w, p, &x, sizeof(x), NULL) == RV_ERR_INVALID,
           "rv_put without rv_rma_init");
    EXPECT(rv_remote_alloc(w, 0, 64, &p) == RV_ERR_INVALID,
           "rv_remote_alloc without rv_rma_init");
    return 0;
}

static void test_uninit(void **state)
{
    rv_context_t *ctx = *state;
    char log[8192];
    capture_begin();
    rv_status_t st = rv_job_run(ctx, uninit_body, NULL);
    capture_end(log, sizeof(log));
    assert_int_equal(st, RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
    assert_non_null(strstr(log, "rv_flush on a worker of a job without the "
                                "invocation layer: call rv_am_init"));
    assert_non_null(strstr(log, "rv_mem_alloc on a worker of a job without "
                                "the remote memory layer: call "
                                "rv_rma_init"));
}

/* ---------------------------------------------------------------------- */
/* The extension interface (rv_am_ext.h)                                   */

#define HOOK_ADDR 0x1234u
#define HOOK_LEN 7u
#define HOOK_WORD 42u
#define HOOK_CALLS 5

static rv_handler_id_t hooked_id;
static int hook_id;
static atomic_int prepared, finished, handled, flushed;
static const char hook_text[] = "from the hook";

static rv_status_t hook_prepare(rv_worker_t *w, rv_am_xrun_t *x, void *arg)
{
    (void)arg;
    EXPECT(x->src == rv_worker_tid(w) && x->addr == HOOK_ADDR &&
               x->len == HOOK_LEN && x->word == HOOK_WORD,
           "the hook sees the caller's words");
    x->buf = hook_text;
    x->buf_len = sizeof(hook_text);
    x->hook_data = &prepared;
    atomic_fetch_add(&prepared, 1);
    return RV_OK;
}

static void hook_finish(rv_worker_t *w, rv_am_xrun_t *x, void *arg)
{
    (void)w;
    (void)arg;
    EXPECT(x->hook_data == &prepared, "finish gets prepare's data");
    atomic_fetch_add(&finished, 1);
}

static rv_status_t on_hooked(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)arg;
    EXPECT(atomic_load(&prepared) == atomic_load(&handled) + 1,
           "the hook ran before the handler");
    EXPECT(call->buf_len == sizeof(hook_text) &&
               memcmp(call->buf, hook_text, sizeof(hook_text)) == 0,
           "the handler sees the hook's buffer");
    atomic_fetch_add(&handled, 1);
    return RV_OK;
}

static rv_status_t flush_hook(rv_worker_t *w, rv_tid_t dest, void *arg)
{
    (void)w;
    EXPECT(dest == RV_TID_ALL && arg == &flushed, "flush hook arguments");
    atomic_fetch_add(&flushed, 1);
    return RV_OK;
}

static int hooks_body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = arg;
    rv_am_hook_t late = {.name = "late", .prepare = hook_prepare};
    int id;
    if (rv_worker_local(w) != 0)
        return 0;
    rv_am_xcall_t x = {.mode = RV_AM_X_HOOK, .hook = hook_id,
                       .addr = HOOK_ADDR, .len = HOOK_LEN,
                       .word = HOOK_WORD};
    for (int i = 0; i < HOOK_CALLS; i++)
        EXPECT(rv_am_call_x(w, rv_worker_tid(w), hooked_id, NULL, 0, NULL, 0,
                            &x, NULL, RV_NOTIFY_CONSUMED) == RV_OK,
               "an extended call");
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "rv_flush");
    EXPECT(rv_am_hook_register(ctx, &late, &id) == RV_ERR_INVALID,
           "a call hook registered while the job runs");
    EXPECT(rv_am_flush_hook_register(ctx, flush_hook, &flushed) ==
               RV_ERR_INVALID,
           "a flush hook registered while the job runs");
    return 0;
}

static void test_hooks(void **state)
{
    rv_context_t *ctx = *state;
    rv_am_hook_t hook = {.name = "test.hook", .prepare = hook_prepare,
                         .finish = hook_finish};
    char log[8192];
    assert_int_equal(rv_am_register(ctx, "test.hooked", on_hooked, NULL,
                                    &hooked_id),
                     RV_OK);
    assert_int_equal(rv_am_hook_register(ctx, &hook, &hook_id), RV_OK);
    assert_int_equal(rv_am_flush_hook_register(ctx, flush_hook, &flushed),
                     RV_OK);
    capture_begin();
    rv_status_t st = rv_job_run(ctx, hooks_body, ctx);
    capture_end(log, sizeof(log));
    assert_int_equal(st, RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
    assert_int_equal(atomic_load(&handled), HOOK_CALLS);
    assert_int_equal(atomic_load(&prepared), HOOK_CALLS);
    assert_int_equal(atomic_load(&finished), HOOK_CALLS);
    /* rv_flush from the body, and the quiesce's on every worker */
    assert_true(atomic_load(&flushed) >= 1 + THREADS);
    assert_non_null(strstr(log, "call hook 'late' registered while the job "
                                "runs"));
    assert_non_null(strstr(log, "a flush hook registered while the job "
                                "runs"));
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (rv_threads(ctx) != THREADS || rv_size(ctx) != 1) {
        fprintf(stderr, "test_layer runs as 1 process of %d threads\n",
                THREADS);
        return 1;
    }
    const char *which = argc > 1 ? argv[1] : "slots";
    const struct CMUnitTest slots[] = {
        cmocka_unit_test_prestate_setup_teardown(test_slots, NULL,
                                                 capture_teardown, ctx),
    };
    const struct CMUnitTest hooks[] = {
        cmocka_unit_test_prestate_setup_teardown(test_hooks, NULL,
                                                 capture_teardown, ctx),
    };
    const struct CMUnitTest uninit[] = {
        cmocka_unit_test_prestate_setup_teardown(test_uninit, NULL,
                                                 capture_teardown, ctx),
    };
    int rc;
    if (strcmp(which, "uninit") == 0)
        rc = cmocka_run_group_tests_name("layer-uninit", uninit, NULL, NULL);
    else if (strcmp(which, "hooks") == 0)
        rc = cmocka_run_group_tests_name("layer-hooks", hooks, NULL, NULL);
    else
        rc = cmocka_run_group_tests_name("layer-slots", slots, NULL, NULL);
    rv_finalize(ctx);
    if (strcmp(which, "slots") == 0 && rc == 0 &&
        !(fini_order[1] > 0 && fini_order[0] > fini_order[1])) {
        fprintf(stderr, "context_fini: layer 1 (top) must run before "
                        "layer 0\n");
        rc = 1;
    }
    return rc;
}
