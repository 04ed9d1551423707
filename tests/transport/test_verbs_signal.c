/*
 * Selective signaling of the verbs transport (transports/verbs/
 * verbs_signal.h), without RDMA hardware.
 *
 * Unit tests drive the protocol by hand: parameter errors, run closers,
 * out-of-order closing completions (completed_flush is a CAS-max),
 * caller-signaled WRs, failed posts and failed markers, polling for
 * credits, and recycling through core's circular allocator.
 *
 * The stress tests, over a model of RC send queues, are in
 * test_verbs_signal_stress.c (verbs_signal_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stderr_capture.h"
#include "verbs_signal_test.h"

/* ---------------------------------------------------------------------- */
/* Hand-driven context for the unit tests                                  */

#define HAND_MAX 256

typedef struct hand {
    rv_vsig_t *q;
    uint64_t markers[HAND_MAX]; /* wr_ids posted by post_marker */
    int nmarkers;
    int marker_failures; /* the next n post_marker calls fail */
    /* What poll_cq reports: wr_ids queued by the test. */
    uint64_t cq[HAND_MAX];
    int cq_head, cq_tail;
    int polls;
    int delay_polls; /* the next n polls find nothing */
    int poll_error;  /* poll_cq returns this when nonzero */
} hand_t;

static rv_status_t hand_post_marker(void *ctx, uint32_t tid, uint64_t wr_id)
{
    hand_t *h = ctx;
    (void)tid;
    if (h->marker_failures > 0) {
        h->marker_failures--;
        return RV_ERR_TRANSPORT;
    }
    assert_true(h->nmarkers < HAND_MAX);
    h->markers[h->nmarkers++] = wr_id;
    return RV_OK;
}

static int hand_poll_cq(void *ctx, uint32_t tid)
{
    hand_t *h = ctx;
    int n = 0;
    (void)tid;
    if (++h->polls > 1000)
        fail_msg("rv_vsig_begin keeps polling for credits that never come");
    if (h->poll_error != 0)
        return h->poll_error;
    if (h->delay_polls > 0) {
        h->delay_polls--;
        return 0;
    }
    while (h->cq_head < h->cq_tail) {
        rv_vsig_completed(h->q, h->cq[h->cq_head++]);
        n++;
    }
    return n;
}

static void hand_cq_push(hand_t *h, uint64_t wr_id)
{
    assert_true(h->cq_tail < HAND_MAX);
    h->cq[h->cq_tail++] = wr_id;
}

static rv_vsig_params_t hand_params(hand_t *h, uint32_t s, uint32_t t,
                                    uint32_t p)
{
    rv_vsig_params_t params = {
        .sq_depth = (uint32_t)rv_vsig_min_sq_depth(s, t, p),
        .signal_interval = s,
        .max_threads = t,
        .poll_batch = p,
        .index = 3,
        .post_marker = hand_post_marker,
        .poll_cq = hand_poll_cq,
        .ctx = h,
    };
    return params;
}

/* Begins and ends one WR that posts fine. */
static rv_vsig_ticket_t post_one(rv_vsig_t *q, uint32_t tid, bool want,
                                 uint64_t user_wr_id)
{
    rv_vsig_ticket_t t;
    assert_int_equal(rv_vsig_begin(q, tid, want, user_wr_id, &t), RV_OK);
    assert_int_equal(rv_vsig_end(q, &t, true), RV_OK);
    return t;
}

#define WR_ID(tid, run)                                                        \
    (RV_VSIG_WR_ID_TAG | ((uint64_t)(tid) << 47) | (uint64_t)(run))

/* ---------------------------------------------------------------------- */
/* Unit tests                                                              */

static void test_params(void **state)
{
    hand_t h;
    rv_vsig_t *q = NULL;
    char log[4096];
    (void)state;
    memset(&h, 0, sizeof(h));

    /* The depth bound: (T-1)(S+1)(P+1) + S + 1. */
    assert_int_equal(rv_vsig_min_sq_depth(16, 8, 4), 7 * 17 * 5 + 17);
    assert_int_equal(rv_vsig_min_sq_depth(16, 8, 0), 7 * 17 * 2 + 17);
    assert_int_equal(rv_vsig_min_sq_depth(64, 1, 16), 65);
    assert_int_equal(rv_vsig_min_sq_depth(1, 2, 1), 2 * 2 + 2);
    assert_true(rv_vsig_min_sq_depth(UINT32_MAX, 65536, UINT32_MAX) ==
                UINT64_MAX);

    rv_vsig_params_t p = hand_params(&h, 16, 8, 4);
    assert_int_equal(p.sq_depth, 612);

    /* One WR too few: an error naming the depth needed. */
    p.sq_depth = 611;
    capture_begin();
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);
    capture_end(log, sizeof(log));
    assert_null(q);
    assert_non_null(strstr(log, "a send queue of 611 WRs is too small"));
    assert_non_null(strstr(log, "it needs at least 612 WRs"));

    p = hand_params(&h, 16, 8, 4);
    p.signal_interval = 0;
    capture_begin();
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);
    capture_end(log, sizeof(log));
    assert_non_null(strstr(log, "signal_interval must be at least 1"));

    p = hand_params(&h, 16, 8, 4);
    p.max_threads = 0;
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);
    p.max_threads = RV_VSIG_MAX_THREADS + 1;
    capture_begin();
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);
    capture_end(log, sizeof(log));
    assert_non_null(strstr(log, "max_threads 65537 must be 1 .. 65536"));

    p = hand_params(&h, 16, 8, 4);
    p.index = RV_VSIG_MAX_INDEX + 1;
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);

    p = hand_params(&h, 16, 8, 4);
    p.post_marker = NULL;
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);
    p = hand_params(&h, 16, 8, 4);
    p.poll_cq = NULL;
    assert_int_equal(rv_vsig_create(&p, &q), RV_ERR_INVALID);
    assert_int_equal(rv_vsig_create(NULL, &q), RV_ERR_INVALID);
    assert_int_equal(rv_vsig_create(&p, NULL), RV_ERR_INVALID);
    assert_null(q);

    /* Exactly the minimum is fine; so is P = 0 (read as 1). */
    p = hand_params(&h, 16, 8, 4);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    assert_int_equal(rv_vsig_outstanding(q), 0);
    rv_vsig_destroy(q);
    p = hand_params(&h, 16, 8, 0);
    assert_int_equal(p.sq_depth, 7 * 17 * 2 + 17);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    rv_vsig_destroy(q);
    rv_vsig_destroy(NULL);

    /* Bad arguments to the per-WR calls. */
    p = hand_params(&h, 4, 2, 1);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    rv_vsig_ticket_t t;
    assert_int_equal(rv_vsig_begin(q, 2, false, 0, &t), RV_ERR_INVALID);
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, NULL), RV_ERR_INVALID);
    assert_int_equal(rv_vsig_flush(q, 2), RV_ERR_INVALID);
    assert_int_equal(rv_vsig_completed_flush(q, 2), 0);
    rv_vsig_destroy(q);
}

/* Runs, closers, flush numbers, channels, and closing completions reported
 * out of order. */
static void test_runs_out_of_order(void **state)
{
    hand_t h;
    rv_vsig_t *q = NULL;
    rv_vsig_ticket_t t[12];
    (void)state;
    memset(&h, 0, sizeof(h));

    rv_vsig_params_t p = hand_params(&h, 4, 2, 1); /* depth 1*5*2+5 = 15 */
    assert_int_equal(p.sq_depth, 15);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    h.q = q;

    for (int i = 0; i < 10; i++) {
        t[i] = post_one(q, 1, false, 0);
        uint64_t run = (uint64_t)i / 4 + 1;
        assert_int_equal(t[i].flush, run);
        assert_int_equal(t[i].channel, (3u << 16) | 1u);
        assert_int_equal(t[i].channel, rv_vsig_channel(3, 1));
        assert_int_equal(t[i].steps, 0);
        if (i % 4 == 3) {
            assert_true(t[i].signaled);
            assert_true(t[i].wr_id == WR_ID(1, run));
        } else {
            assert_false(t[i].signaled);
            assert_true(t[i].wr_id == WR_ID(1, 0));
        }
    }
    /* Three runs opened, each holding S + 1 credits: the whole queue. */
    assert_int_equal(rv_vsig_outstanding(q), 15);
    assert_int_equal(h.polls, 0);
    assert_int_equal(rv_vsig_completed_flush(q, 1), 0);
    assert_int_equal(rv_vsig_completed_flush(q, 0), 0);

    /* Run 2's closer is reported before run 1's: completed_flush jumps to
     * 2 (run 2 completing proves run 1 complete) and stays there. */
    assert_true(rv_vsig_completed(q, t[7].wr_id));
    assert_int_equal(rv_vsig_completed_flush(q, 1), 2);
    assert_int_equal(rv_vsig_outstanding(q), 10);
    assert_true(rv_vsig_completed(q, t[3].wr_id));
    assert_int_equal(rv_vsig_completed_flush(q, 1), 2);
    assert_int_equal(rv_vsig_outstanding(q), 5);
    assert_int_equal(rv_vsig_completed_flush(q, 0), 0); /* other thread */

    /* An unsignaled WR flushed in error: ours, nothing to do. A wr_id with
     * bit 63 clear is the caller's. */
    assert_true(rv_vsig_completed(q, t[0].wr_id));
    assert_false(rv_vsig_completed(q, 0x1234));
    assert_int_equal(rv_vsig_outstanding(q), 5);

    /* Run 3 has 2 WRs: flush closes it with a marker named after it. */
    assert_int_equal(rv_vsig_flush(q, 1), RV_OK);
    assert_int_equal(h.nmarkers, 1);
    assert_true(h.markers[0] == WR_ID(1, 3));
    assert_int_equal(rv_vsig_flush(q, 1), RV_OK); /* nothing open */
    assert_int_equal(rv_vsig_flush(q, 0), RV_OK);
    assert_int_equal(h.nmarkers, 1);
    assert_true(rv_vsig_completed(q, h.markers[0]));
    assert_int_equal(rv_vsig_completed_flush(q, 1), 3);
    assert_int_equal(rv_vsig_outstanding(q), 0);

    /* The next WR opens run 4. */
    t[10] = post_one(q, 1, false, 0);
    assert_int_equal(t[10].flush, 4);

    rv_vsig_stats_t s;
    rv_vsig_stats(q, &s);
    assert_int_equal(s.posts, 11);
    assert_int_equal(s.signaled, 2);
    assert_int_equal(s.user_signaled, 0);
    assert_int_equal(s.markers, 1);
    assert_int_equal(s.runs, 4);
    assert_int_equal(s.runs_completed, 3);
    assert_int_equal(s.full_polls, 0);
    assert_int_equal(rv_vsig_flush(q, 1), RV_OK);
    assert_true(rv_vsig_completed(q, h.markers[1]));
    assert_int_equal(rv_vsig_outstanding(q), 0);
    rv_vsig_destroy(q);
}

/* A thread short of credits polls the CQ itself. */
static void test_full_queue_polls(void **state)
{
    hand_t h;
    rv_vsig_t *q = NULL;
    rv_vsig_ticket_t t;
    (void)state;
    memset(&h, 0, sizeof(h));

    rv_vsig_params_t p = hand_params(&h, 4, 1, 1); /* depth 5: one run */
    assert_int_equal(p.sq_depth, 5);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    h.q = q;
    uint64_t closer = 0;
    for (int i = 0; i < 4; i++)
        closer = post_one(q, 0, false, 0).wr_id;
    assert_int_equal(rv_vsig_outstanding(q), 5);

    /* The CQ fails: begin says so and has begun nothing. */
    h.poll_error = RV_ERR_TRANSPORT;
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t), RV_ERR_TRANSPORT);
    assert_int_equal(h.polls, 1);
    h.poll_error = 0;

    /* The "hardware" completes run 1 only at the third poll; the CQ also
     * holds a caller's completion, which poll_cq delivers elsewhere. */
    int before = h.polls;
    hand_cq_push(&h, 0x40);
    hand_cq_push(&h, closer);
    h.delay_polls = 2;
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t), RV_OK);
    assert_int_equal(h.polls - before, 3);
    assert_int_equal(t.steps, 3);
    assert_int_equal(t.flush, 2);
    assert_int_equal(rv_vsig_end(q, &t, true), RV_OK);
    assert_int_equal(rv_vsig_completed_flush(q, 0), 1);

    rv_vsig_stats_t s;
    rv_vsig_stats(q, &s);
    assert_int_equal(s.full_polls, 4);
    assert_int_equal(s.max_steps, 3);
    assert_int_equal(rv_vsig_flush(q, 0), RV_OK);
    assert_true(rv_vsig_completed(q, h.markers[0]));
    assert_int_equal(rv_vsig_outstanding(q), 0);
    rv_vsig_destroy(q);
}

/* Caller-signaled WRs carry the caller's wr_id and do not disturb runs. */
static void test_want_signal(void **state)
{
    hand_t h;
    rv_vsig_t *q = NULL;
    rv_vsig_ticket_t t;
    char log[1024];
    (void)state;
    memset(&h, 0, sizeof(h));

    rv_vsig_params_t p = hand_params(&h, 4, 1, 1);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    h.q = q;

    /* Bit 63 is ours. */
    capture_begin();
    assert_int_equal(rv_vsig_begin(q, 0, true, RV_VSIG_WR_ID_TAG | 8, &t),
                     RV_ERR_INVALID);
    capture_end(log, sizeof(log));
    assert_non_null(strstr(log, "bit 63 set"));

    /* Second WR of run 1 caller-signaled: its own wr_id, not a closer;
     * the run still closes at its fourth WR. */
    t = post_one(q, 0, false, 0);
    assert_false(t.signaled);
    t = post_one(q, 0, true, 0x1000);
    assert_true(t.signaled);
    assert_true(t.wr_id == 0x1000);
    assert_int_equal(t.flush, 1);
    assert_false(rv_vsig_completed(q, t.wr_id)); /* the caller's */
    t = post_one(q, 0, false, 0);
    assert_false(t.signaled);
    t = post_one(q, 0, false, 0);
    assert_true(t.signaled);
    assert_true(t.wr_id == WR_ID(0, 1));
    assert_int_equal(h.nmarkers, 0);
    assert_true(rv_vsig_completed(q, t.wr_id));

    /* Caller-signaled at the last position of run 2: the run is closed by
     * a marker, posted by rv_vsig_end. */
    for (int i = 0; i < 3; i++)
        assert_false(post_one(q, 0, false, 0).signaled);
    t = post_one(q, 0, true, 0x2000);
    assert_true(t.signaled);
    assert_true(t.wr_id == 0x2000);
    assert_int_equal(t.flush, 2);
    assert_int_equal(h.nmarkers, 1);
    assert_true(h.markers[0] == WR_ID(0, 2));
    assert_false(rv_vsig_completed(q, 0x2000));
    assert_true(rv_vsig_completed(q, h.markers[0]));
    assert_int_equal(rv_vsig_completed_flush(q, 0), 2);
    assert_int_equal(rv_vsig_outstanding(q), 0);
    /* The next WR opens run 3 without polling. */
    t = post_one(q, 0, false, 0);
    assert_int_equal(t.flush, 3);
    assert_int_equal(h.polls, 0);

    rv_vsig_stats_t s;
    rv_vsig_stats(q, &s);
    assert_int_equal(s.signaled, 3);
    assert_int_equal(s.user_signaled, 2);
    assert_int_equal(s.markers, 1);
    assert_int_equal(rv_vsig_flush(q, 0), RV_OK);
    assert_true(rv_vsig_completed(q, h.markers[1]));
    rv_vsig_destroy(q);
}

/* Failed posts and failed markers never leave a run stuck. */
static void test_failures(void **state)
{
    hand_t h;
    rv_vsig_t *q = NULL;
    rv_vsig_ticket_t t, t2;
    char log[1024];
    (void)state;
    memset(&h, 0, sizeof(h));

    rv_vsig_params_t p = hand_params(&h, 4, 1, 1);
    assert_int_equal(rv_vsig_create(&p, &q), RV_OK);
    h.q = q;

    /* A failed ordinary post: nothing to do, the run goes on. */
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t), RV_OK);
    assert_int_equal(rv_vsig_end(q, &t, false), RV_OK);
    post_one(q, 0, false, 0);
    post_one(q, 0, false, 0);
    /* The closer fails: a marker takes its place. */
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t), RV_OK);
    assert_true(t.signaled);
    assert_int_equal(rv_vsig_end(q, &t, false), RV_OK);
    assert_int_equal(h.nmarkers, 1);
    assert_true(h.markers[0] == t.wr_id);
    assert_true(rv_vsig_completed(q, h.markers[0]));
    assert_int_equal(rv_vsig_completed_flush(q, 0), 1);
    assert_int_equal(rv_vsig_outstanding(q), 0);

    /* Run 2: the closer fails and so does the marker (twice): end reports
     * it, the run stays open, the next begin posts the marker first. */
    for (int i = 0; i < 3; i++)
        post_one(q, 0, false, 0);
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t), RV_OK);
    h.marker_failures = 2;
    assert_int_equal(rv_vsig_end(q, &t, false), RV_ERR_TRANSPORT);
    assert_int_equal(h.nmarkers, 1);
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t2), RV_ERR_TRANSPORT);
    /* The queue holds one run: after posting run 2's marker, begin polls
     * until the marker's completion returns run 2's credits. */
    hand_cq_push(&h, WR_ID(0, 2));
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t2), RV_OK);
    assert_int_equal(h.nmarkers, 2);
    assert_true(h.markers[1] == WR_ID(0, 2));
    assert_int_equal(t2.flush, 3);
    assert_int_equal(t2.steps, 1);
    assert_int_equal(rv_vsig_completed_flush(q, 0), 2);
    assert_int_equal(rv_vsig_end(q, &t2, true), RV_OK);

    rv_vsig_stats_t s;
    rv_vsig_stats(q, &s);
    assert_int_equal(s.failed_posts, 3);
    assert_int_equal(s.failed_markers, 2);
    assert_int_equal(s.markers, 2);

    /* A failed marker on flush, then a good one. */
    h.marker_failures = 1;
    assert_int_equal(rv_vsig_flush(q, 0), RV_ERR_TRANSPORT);
    assert_int_equal(rv_vsig_flush(q, 0), RV_OK);
    assert_true(h.markers[2] == WR_ID(0, 3));
    assert_true(rv_vsig_completed(q, h.markers[2]));
    assert_int_equal(rv_vsig_completed_flush(q, 0), 3);
    assert_int_equal(rv_vsig_outstanding(q), 0);

    /* Misuse: begin twice, end without begin, flush in between. */
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t), RV_OK);
    capture_begin();
    assert_int_equal(rv_vsig_begin(q, 0, false, 0, &t2), RV_ERR_INVALID);
    assert_int_equal(rv_vsig_flush(q, 0), RV_ERR_INVALID);
    capture_end(log, sizeof(log));
    assert_non_null(strstr(log, "before ending its previous one"));
    assert_int_equal(rv_vsig_end(q, &t, true), RV_OK);
    capture_begin();
    assert_int_equal(rv_vsig_end(q, &t, true), RV_ERR_INVALID);
    capture_end(log, sizeof(log));
    assert_non_null(strstr(log, "did not begin"));
    assert_int_equal(rv_vsig_flush(q, 0), RV_OK);
    assert_true(rv_vsig_completed(q, h.markers[3]));
    assert_int_equal(rv_vsig_outstanding(q), 0);
    rv_vsig_destroy(q);
}

/* Buffers from core's circular allocator, tagged with (channel, flush)
 * and recycled through rv_vsig_mem_completed, over two QPs. */
static void test_mem_recycling(void **state)
{
    hand_t h0, h1;
    rv_vsig_t *qs[2];
    char log[1024];
    (void)state;
    memset(&h0, 0, sizeof(h0));
    memset(&h1, 0, sizeof(h1));

    rv_vsig_params_t p = hand_params(&h0, 2, 1, 1);
    p.index = 0;
    assert_int_equal(rv_vsig_create(&p, &qs[0]), RV_OK);
    p = hand_params(&h1, 2, 1, 1);
    p.index = 1;
    p.sq_depth = 64;
    assert_int_equal(rv_vsig_create(&p, &qs[1]), RV_OK);
    h0.q = qs[0];
    h1.q = qs[1];

    rv_vsig_mem_arg_t arg = {.qps = qs, .nqps = 2};
    rv_mem_chunk_allocator_t *a = make_chunks(4 * KIB);
    rv_mem_circular_params_t cp = {
        .chunks = a,
        .unit_size = 1 * KIB,
        .max_units = 4,
        .completed = rv_vsig_mem_completed,
        .completed_arg = &arg,
    };
    rv_mem_circular_t *c = NULL;
    assert_int_equal(rv_mem_circular_create(&cp, &c), RV_OK);

    /* Units 0, 1 on QP 1 (run 1), unit 2 on QP 0 (run 1), unit 3 on QP 1
     * (run 2, open). */
    rv_mem_unit_t *u[4], *x;
    rv_vsig_ticket_t t[4];
    const int qp_of[4] = {1, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u[i]), RV_OK);
        t[i] = post_one(qs[qp_of[i]], 0, false, 0);
        rv_mem_circular_tag(u[i], t[i].channel, t[i].flush);
        rv_mem_circular_free(c, u[i]);
    }
    assert_int_equal(t[1].flush, 1);
    assert_true(t[1].signaled);
    assert_int_equal(t[3].flush, 2);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    /* QP 1's run 1 completes: units 0 and 1 come back, unit 2 (QP 0) not
     * yet, so recycling stops there (ring order). */
    assert_true(rv_vsig_completed(qs[1], t[1].wr_id));
    expect_recycled(c, u[0]);
    expect_recycled(c, u[1]);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    /* QP 0's run 1 is open (one WR): the allocator said AGAIN, so flush. */
    assert_int_equal(rv_vsig_flush(qs[0], 0), RV_OK);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    assert_true(rv_vsig_completed(qs[0], h0.markers[0]));
    expect_recycled(c, u[2]);
    assert_int_equal(rv_vsig_flush(qs[1], 0), RV_OK);
    assert_true(rv_vsig_completed(qs[1], h1.markers[0]));
    expect_recycled(c, u[3]);
    assert_int_equal(rv_mem_circular_stats(c).bytes_in_use, 0);

    /* A channel naming no QP or no thread. */
    capture_begin();
    assert_false(rv_vsig_mem_completed(&arg, rv_vsig_channel(2, 0), 1));
    assert_false(rv_vsig_mem_completed(&arg, rv_vsig_channel(1, 1), 0));
    capture_end(log, sizeof(log));
    assert_non_null(strstr(log, "channel 0x20000 (QP 2, thread 0)"));

    rv_mem_circular_destroy(c);
    rv_mem_chunk_allocator_destroy(a);
    rv_vsig_destroy(qs[0]);
    rv_vsig_destroy(qs[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_params, capture_teardown),
        cmocka_unit_test(test_runs_out_of_order),
        cmocka_unit_test(test_full_queue_polls),
        cmocka_unit_test_teardown(test_want_signal, capture_teardown),
        cmocka_unit_test_teardown(test_failures, capture_teardown),
        cmocka_unit_test_teardown(test_mem_recycling, capture_teardown),
        cmocka_unit_test(test_stress),
        cmocka_unit_test(test_stress_every_wr),
        cmocka_unit_test(test_stress_long_runs),
    };
    return cmocka_run_group_tests_name("verbs_signal", tests, NULL, NULL);
}
