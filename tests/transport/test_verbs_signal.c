/*
 * Selective signaling of the verbs transport (transports/verbs/
 * verbs_signal.h), without RDMA hardware.
 *
 * Unit tests drive the protocol by hand: parameter errors, run closers,
 * out-of-order closing completions (completed_flush is a CAS-max),
 * caller-signaled WRs, failed posts and failed markers, polling for
 * credits, and recycling through core's circular allocator.
 *
 * The stress tests run threads over a model of RC send queues: each QP is
 * a ring of fixed depth guarded by one mutex (the provider's lock) that
 * records WRs in actual post order; the "hardware" completes them strictly
 * in post order, a random number at each poll, stamps every WR done, checks
 * that each WR's buffer still holds the WR's stamp (a buffer recycled while
 * its WR is in flight is caught here, and by TSan as a race), and produces
 * CQEs for signaled WRs only, into one CQ shared by the QPs. A popped CQE
 * frees the send queue slots up to its WR, as in the providers. Threads
 * post with buffers from their own circular allocator (core's chunk
 * allocator over a mock transport), tagged with (channel, flush); some are
 * delayed between begin and post, some posts and markers fail, some WRs
 * are caller-signaled, pollers are sometimes delayed between taking CQEs
 * and reporting them.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mock_transport.h"
#include "rv_mem.h"
#include "stderr_capture.h"
#include "verbs_signal.h"

#define KIB ((size_t)1024)

/* ---------------------------------------------------------------------- */
/* The chunk allocator over a mock transport (registration is bookkeeping) */

static rv_mem_chunk_allocator_t *make_chunks(size_t chunk)
{
    rv_mem_chunk_params_t p = {
        .ops = &mock_ops,
        .tp = NULL,
        .numa_node = -1,
        .chunk_size = chunk,
        .huge_pages = RV_HUGE_OFF,
        .source = RV_MEM_SOURCE_MMAP,
    };
    rv_mem_chunk_allocator_t *a = NULL;
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_OK);
    return a;
}

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

/* A true with probability 1 / n. */
static bool one_in(uint64_t *s, uint32_t n)
{
    return n != 0 && rng_next(s) % n == 0;
}

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
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[0]);
    rv_mem_circular_free(c, x);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[1]);
    rv_mem_circular_free(c, x);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    /* QP 0's run 1 is open (one WR): the allocator said AGAIN, so flush. */
    assert_int_equal(rv_vsig_flush(qs[0], 0), RV_OK);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    assert_true(rv_vsig_completed(qs[0], h0.markers[0]));
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[2]);
    rv_mem_circular_free(c, x);
    assert_int_equal(rv_vsig_flush(qs[1], 0), RV_OK);
    assert_true(rv_vsig_completed(qs[1], h1.markers[0]));
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[3]);
    rv_mem_circular_free(c, x);
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

/* ---------------------------------------------------------------------- */
/* Model of RC send queues sharing one CQ, for the stress tests            */

#define MAX_QPS 2
#define MAX_BATCH 64
#define NO_ID UINT64_MAX
#define STUCK_POLLS 2000000 /* polls after which a thread gives up */
#define UNIT_HELD UINT64_C(0x48454c44) /* buf[1] while the thread holds it */
#define UNIT_GIVEN UINT64_C(0x47495645) /* buf[1] once given back */

/* Violations seen in threads other than the test's (cmocka's asserts may
 * not run there): counted, the first one kept, asserted at the end. */
static _Atomic int check_failures;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;
static char check_first[256];

static void check_failed(int line, const char *what)
{
    pthread_mutex_lock(&check_lock);
    if (atomic_fetch_add(&check_failures, 1) == 0)
        snprintf(check_first, sizeof(check_first), "line %d: %s", line, what);
    pthread_mutex_unlock(&check_lock);
}

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            check_failed(__LINE__, #cond);                                     \
    } while (0)

static _Thread_local uint64_t tls_rng = 88172645463325252ull;
/* Polls made by the current rv_vsig_begin of this thread, which must stay
 * below the step bound: past it, poll_cq fails the begin, so that a begin
 * that would wait for another thread ends the test instead of hanging. */
static _Thread_local bool tls_in_begin;
static _Thread_local uint64_t tls_begin_polls;

typedef struct stress_cfg {
    uint32_t threads, nqps, signal_interval, poll_batch;
    uint32_t wrs_per_thread;
    uint32_t max_complete; /* the hardware completes 1 .. n WRs per poll */
    /* "1 in n" probabilities (0: never) */
    uint32_t fail_post, fail_marker, want_signal;
    uint32_t yield, sleep;  /* between begin and post */
    uint32_t poller_sleep;  /* between taking CQEs and reporting them */
    uint32_t sleep_us;      /* the longest of those sleeps */
    uint32_t units;         /* max_units of each thread's allocator */
    uint32_t progress;      /* a thread polls once every n of its posts */
    bool expect_full;       /* the send queues must fill up at times */
} stress_cfg_t;

typedef struct model_wr {
    uint64_t wr_id;
    uint64_t id;           /* the test's WR number, NO_ID for a marker */
    const uint64_t *stamp; /* the WR's buffer, NULL for a marker */
    bool signaled;
} model_wr_t;

typedef struct model_cqe {
    uint32_t qp;
    uint64_t wr_id;
    uint64_t pos; /* the WR's position in its send queue */
} model_cqe_t;

typedef struct model_sq {
    model_wr_t *ring; /* depth entries */
    uint64_t head;    /* first slot not freed by a polled CQE */
    uint64_t done;    /* first WR the hardware has not completed */
    uint64_t tail;    /* next post */
} model_sq_t;

typedef struct model model_t;

typedef struct qp_ctx {
    model_t *m;
    uint32_t qp;
} qp_ctx_t;

struct model {
    stress_cfg_t cfg;
    pthread_mutex_t lock; /* the provider's lock: send queues and CQ */
    uint32_t depth;
    model_sq_t sq[MAX_QPS];
    model_cqe_t *cq;
    uint64_t cq_size, cq_head, cq_tail;
    uint64_t seed;
    uint64_t hw_rng; /* under the lock, like the rest of the hardware */
    /* under the lock */
    uint64_t sq_overflows, cq_overflows, stamp_errors, max_occupancy;
    uint64_t markers_posted, signaled_posted;

    rv_vsig_t *q[MAX_QPS];
    qp_ctx_t ctx[MAX_QPS];
    rv_mem_chunk_allocator_t *chunks;
    _Atomic uint8_t *wr_done; /* per test WR: completed (or never posted) */
    uint64_t total_wrs;
    _Atomic uint64_t user_completions;
    _Atomic bool stop;
    uint64_t step_bound;
};

/* ibv_post_send under the provider's lock. A full queue fails the post
 * (ENOMEM), and is counted: it must never happen. */
static bool model_post(model_t *m, uint32_t qp, uint64_t wr_id, bool signaled,
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
    if (one_in(&tls_rng, c->m->cfg.fail_marker))
        return RV_ERR_TRANSPORT;
    return model_post(c->m, c->qp, wr_id, true, NO_ID, NULL) ? RV_OK
                                                             : RV_ERR_AGAIN;
}

static void random_sleep(uint32_t max_us)
{
    usleep(1 + (useconds_t)(rng_next(&tls_rng) % (max_us ? max_us : 1)));
}

/* One poll of the shared CQ: the hardware first completes a random number
 * of WRs of each send queue, in post order; then at most poll_batch CQEs
 * are taken (freeing their send queue slots) and reported outside the
 * lock, as a transport does after ibv_poll_cq. */
static int model_poll(void *ctx, uint32_t tid)
{
    model_t *m = ((qp_ctx_t *)ctx)->m;
    model_cqe_t got[MAX_BATCH];
    int n = 0;
    (void)tid;

    if (tls_in_begin && ++tls_begin_polls > m->step_bound) {
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

    if (n > 0 && one_in(&tls_rng, m->cfg.poller_sleep))
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

typedef struct worker {
    model_t *m;
    pthread_t thread;
    uint32_t tid;
    uint64_t max_steps, agains, marker_errors, recycled, polls;
} worker_t;

typedef struct pending {
    uint64_t flush, id;
} pending_t;

/* completed_flush of (qp, tid) is monotone, and every WR of the thread
 * tagged with a flush number it covers has completed. */
static bool check_completed(model_t *m, uint32_t qp, uint32_t tid,
                            uint64_t *last_cf, pending_t *fifo,
                            uint64_t *head, uint64_t tail)
{
    uint64_t cf = rv_vsig_completed_flush(m->q[qp], tid);
    CHECK(cf >= *last_cf);
    *last_cf = cf;
    while (*head < tail && fifo[*head].flush <= cf) {
        CHECK(atomic_load_explicit(&m->wr_done[fifo[*head].id],
                                   memory_order_acquire));
        (*head)++;
    }
    return *head == tail;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    model_t *m = w->m;
    const stress_cfg_t *cfg = &m->cfg;
    const uint32_t tid = w->tid;
    const uint64_t n = cfg->wrs_per_thread;
    pending_t *fifo[MAX_QPS];
    uint64_t head[MAX_QPS] = {0}, tail[MAX_QPS] = {0};
    uint64_t last_cf[MAX_QPS] = {0}, last_flush[MAX_QPS] = {0};
    rv_vsig_ticket_t t;
    rv_mem_unit_t *u;
    rv_status_t st;

    tls_rng = (UINT64_C(0x9e3779b97f4a7c15) * (tid + 1)) ^ m->seed;
    rv_vsig_mem_arg_t marg = {.qps = m->q, .nqps = cfg->nqps};
    rv_mem_circular_params_t cp = {
        .chunks = m->chunks,
        .unit_size = 256,
        .max_units = cfg->units,
        .completed = rv_vsig_mem_completed,
        .completed_arg = &marg,
    };
    rv_mem_circular_t *circ = NULL;
    CHECK(rv_mem_circular_create(&cp, &circ) == RV_OK);
    if (circ == NULL)
        return NULL;
    for (uint32_t qp = 0; qp < cfg->nqps; qp++)
        fifo[qp] = malloc(n * sizeof(pending_t));

    for (uint64_t k = 0; k < n; k++) {
        uint32_t qp = (uint32_t)(rng_next(&tls_rng) % cfg->nqps);
        uint64_t id = tid * n + k;
        rv_vsig_t *q = m->q[qp];

        /* A buffer; when every unit waits for completions, flush (close
         * the open runs) and poll, as the transport does. */
        uint64_t tries = 0;
        while ((st = rv_mem_circular_alloc(circ, &u)) == RV_ERR_AGAIN) {
            if (++tries > STUCK_POLLS) {
                CHECK(!"buffers never came back");
                goto out;
            }
            w->agains++;
            for (uint32_t i = 0; i < cfg->nqps; i++)
                if (rv_vsig_flush(m->q[i], tid) != RV_OK)
                    w->marker_errors++; /* a failed marker: later */
            model_poll(&m->ctx[0], tid);
            w->polls++;
        }
        CHECK(st == RV_OK);
        uint64_t *buf = u->addr;
        /* Recycled only after the WR that last used it completed, and
         * only once it was given back. */
        if (buf[0] != 0) {
            CHECK(atomic_load_explicit(&m->wr_done[buf[0] - 1],
                                       memory_order_acquire));
            w->recycled++;
        }
        CHECK(buf[1] != UNIT_HELD);
        buf[1] = UNIT_HELD;
        buf[0] = id + 1;

        bool want = one_in(&tls_rng, cfg->want_signal);
        tries = 0;
        tls_in_begin = true;
        tls_begin_polls = 0;
        while ((st = rv_vsig_begin(q, tid, want, id + 1, &t)) != RV_OK) {
            if (st == RV_ERR_TIMEOUT) /* reported by model_poll */
                goto out;
            CHECK(st == RV_ERR_TRANSPORT); /* the pending marker failed */
            w->marker_errors++;
            if (++tries > STUCK_POLLS) {
                CHECK(!"begin keeps failing");
                goto out;
            }
        }
        tls_in_begin = false;
        CHECK(t.steps <= m->step_bound);
        if (t.steps > w->max_steps)
            w->max_steps = t.steps;
        CHECK(t.channel == rv_vsig_channel(qp, tid));
        CHECK(t.flush >= last_flush[qp] && t.flush <= last_flush[qp] + 1);
        CHECK(want ? t.signaled && t.wr_id == id + 1
                   : (t.wr_id & RV_VSIG_WR_ID_TAG) != 0);
        last_flush[qp] = t.flush;

        /* Delayed between reserving and posting. */
        if (one_in(&tls_rng, cfg->yield))
            sched_yield();
        if (one_in(&tls_rng, cfg->sleep))
            random_sleep(cfg->sleep_us);

        bool ok = !one_in(&tls_rng, cfg->fail_post) &&
                  model_post(m, qp, t.wr_id, t.signaled, id, buf);
        if (!ok) /* never in flight */
            atomic_store_explicit(&m->wr_done[id], 1, memory_order_release);
        rv_mem_circular_tag(u, t.channel, t.flush);
        buf[1] = UNIT_GIVEN;
        rv_mem_circular_free(circ, u);
        fifo[qp][tail[qp]++] = (pending_t){.flush = t.flush, .id = id};
        st = rv_vsig_end(q, &t, ok);
        if (st != RV_OK) {
            CHECK(st == RV_ERR_TRANSPORT); /* the marker failed: later */
            w->marker_errors++;
        }

        if (k % cfg->progress == 0) {
            model_poll(&m->ctx[0], tid); /* this thread's progress */
            w->polls++;
        }
        check_completed(m, qp, tid, &last_cf[qp], fifo[qp], &head[qp],
                        tail[qp]);
    }

    /* Drain: close every run, then poll until all of this thread's WRs
     * are known complete. */
    for (uint32_t qp = 0; qp < cfg->nqps; qp++) {
        uint64_t tries = 0;
        while ((st = rv_vsig_flush(m->q[qp], tid)) != RV_OK) {
            CHECK(st == RV_ERR_TRANSPORT);
            w->marker_errors++;
            if (++tries > STUCK_POLLS) {
                CHECK(!"flush keeps failing");
                goto out;
            }
        }
    }
    for (uint64_t tries = 0;; tries++) {
        bool all = true;
        for (uint32_t qp = 0; qp < cfg->nqps; qp++)
            all &= check_completed(m, qp, tid, &last_cf[qp], fifo[qp],
                                   &head[qp], tail[qp]);
        if (all)
            break;
        if (tries > STUCK_POLLS) {
            CHECK(!"runs never completed");
            goto out;
        }
        model_poll(&m->ctx[0], tid);
        w->polls++;
    }
    for (uint32_t qp = 0; qp < cfg->nqps; qp++)
        CHECK(last_cf[qp] == last_flush[qp]);
    /* Every unit came back. */
    CHECK(rv_mem_circular_stats(circ).bytes_in_use == 0);
    rv_mem_circular_destroy(circ);
out:
    tls_in_begin = false;
    for (uint32_t qp = 0; qp < cfg->nqps; qp++)
        free(fifo[qp]);
    return NULL;
}

/* Watches completed_flush of every (QP, thread) from outside: monotone. */
static void *observer_main(void *arg)
{
    model_t *m = arg;
    uint64_t last[MAX_QPS][64] = {{0}};
    uint64_t rounds = 0;

    while (!atomic_load(&m->stop) || rounds < 2) {
        if (atomic_load(&m->stop))
            rounds++;
        for (uint32_t qp = 0; qp < m->cfg.nqps; qp++)
            for (uint32_t t = 0; t < m->cfg.threads && t < 64; t++) {
                uint64_t cf = rv_vsig_completed_flush(m->q[qp], t);
                CHECK(cf >= last[qp][t]);
                last[qp][t] = cf;
            }
        sched_yield();
    }
    return NULL;
}

static void run_stress(const stress_cfg_t *cfg, uint64_t seed)
{
    model_t *m = calloc(1, sizeof(*m));
    worker_t *w = calloc(cfg->threads, sizeof(*w));
    pthread_t observer;
    struct timespec t0, t1;
    assert_non_null(m);
    assert_non_null(w);
    assert_true(cfg->nqps <= MAX_QPS && cfg->poll_batch <= MAX_BATCH);

    atomic_store(&check_failures, 0);
    check_first[0] = '\0';
    m->cfg = *cfg;
    pthread_mutex_init(&m->lock, NULL);
    m->seed = seed;
    m->hw_rng = seed;
    /* The smallest depth the module accepts: the tightest test. */
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

    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pthread_create(&observer, NULL, observer_main, m), 0);
    for (uint32_t i = 0; i < cfg->threads; i++) {
        w[i].m = m;
        w[i].tid = i;
        assert_int_equal(
            pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
    }
    for (uint32_t i = 0; i < cfg->threads; i++)
        pthread_join(w[i].thread, NULL);
    atomic_store(&m->stop, true);
    pthread_join(observer, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    if (atomic_load(&check_failures) != 0)
        fail_msg("%d violations; first: %s", atomic_load(&check_failures),
                 check_first);

    /* Whatever is left in the CQ (caller-signaled completions): drain. */
    while (model_poll(&m->ctx[0], 0) > 0 || m->cq_head < m->cq_tail)
        ;

    uint64_t max_steps = 0, agains = 0, marker_errors = 0;
    uint64_t recycled = 0, polls = 0;
    for (uint32_t i = 0; i < cfg->threads; i++) {
        if (w[i].max_steps > max_steps)
            max_steps = w[i].max_steps;
        agains += w[i].agains;
        marker_errors += w[i].marker_errors;
        recycled += w[i].recycled;
        polls += w[i].polls;
    }
    rv_vsig_stats_t sum = {0};
    for (uint32_t qp = 0; qp < cfg->nqps; qp++) {
        rv_vsig_stats_t s;
        rv_vsig_stats(m->q[qp], &s);
        sum.posts += s.posts;
        sum.failed_posts += s.failed_posts;
        sum.signaled += s.signaled;
        sum.user_signaled += s.user_signaled;
        sum.markers += s.markers;
        sum.failed_markers += s.failed_markers;
        sum.runs += s.runs;
        sum.runs_completed += s.runs_completed;
        sum.full_polls += s.full_polls;
        if (s.max_steps > sum.max_steps)
            sum.max_steps = s.max_steps;
        /* Everything completed: no credit held. */
        assert_int_equal(rv_vsig_outstanding(m->q[qp]), 0);
        assert_int_equal(s.runs, s.runs_completed);
        assert_true(m->sq[qp].done == m->sq[qp].tail);
    }
    double secs = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("  %u threads, %u QPs of depth %u, S=%u, P=%u: %llu WRs in "
           "%.2f s; signaled %llu (caller %llu), markers %llu (failed "
           "%llu), failed posts %llu, runs %llu, polls for credits %llu, "
           "allocator AGAIN %llu, progress polls %llu, recycled units "
           "%llu, most steps in one begin %llu (bound %llu), highest SQ "
           "occupancy %llu\n",
           cfg->threads, cfg->nqps, m->depth, cfg->signal_interval,
           cfg->poll_batch, (unsigned long long)m->total_wrs, secs,
           (unsigned long long)sum.signaled,
           (unsigned long long)sum.user_signaled,
           (unsigned long long)sum.markers,
           (unsigned long long)sum.failed_markers,
           (unsigned long long)sum.failed_posts,
           (unsigned long long)sum.runs,
           (unsigned long long)sum.full_polls, (unsigned long long)agains,
           (unsigned long long)polls, (unsigned long long)recycled, (unsigned long long)max_steps,
           (unsigned long long)m->step_bound,
           (unsigned long long)m->max_occupancy);
    fflush(stdout);

    if (atomic_load(&check_failures) != 0)
        fail_msg("%d violations; first: %s", atomic_load(&check_failures),
                 check_first);
    /* The send queues never overflowed, no buffer was reused in flight,
     * the CQ never overflowed. */
    assert_int_equal(m->sq_overflows, 0);
    assert_int_equal(m->stamp_errors, 0);
    assert_int_equal(m->cq_overflows, 0);
    assert_true(m->max_occupancy <= m->depth);
    /* Every WR was begun and ended once; the counts add up. */
    assert_int_equal(sum.posts + sum.failed_posts, m->total_wrs);
    assert_int_equal(sum.markers, m->markers_posted);
    assert_int_equal(sum.signaled, m->signaled_posted);
    assert_int_equal(atomic_load(&m->user_completions), sum.user_signaled);
    assert_int_equal(sum.max_steps, max_steps);
    assert_true(max_steps <= m->step_bound);
    /* Only about one WR in S is signaled (closers; markers replace
     * failed closers and close partial runs). */
    assert_true(sum.signaled - sum.user_signaled <=
                m->total_wrs / cfg->signal_interval);
    assert_int_equal(marker_errors, sum.failed_markers);
    if (cfg->expect_full)
        assert_true(sum.full_polls > 0);
    if (cfg->fail_post != 0)
        assert_true(sum.failed_posts > 0);
    if (cfg->fail_marker != 0)
        assert_true(sum.failed_markers > 0);
    assert_true(recycled > 0);

    for (uint32_t qp = 0; qp < cfg->nqps; qp++) {
        rv_vsig_destroy(m->q[qp]);
        free(m->sq[qp].ring);
    }
    rv_mem_chunk_allocator_destroy(m->chunks);
    free(m->cq);
    free(m->wr_done);
    pthread_mutex_destroy(&m->lock);
    free(m);
    free(w);
}

static uint64_t stress_seed(void)
{
    const char *env = getenv("VSIG_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : 0x5eed1234abcdull;
    printf("  seed %#llx (VSIG_SEED)\n", (unsigned long long)seed);
    return seed | 1;
}

/* 8 threads, 2 QPs, 200k WRs, at the smallest depth allowed; three
 * seeds. */
static void test_stress(void **state)
{
    uint64_t seed = stress_seed();
    (void)state;
    stress_cfg_t cfg = {
        .threads = 8,
        .nqps = 2,
        .signal_interval = 16,
        .poll_batch = 4,
        .wrs_per_thread = 25000,
        .max_complete = 2,
        .fail_post = 100,
        .fail_marker = 20,
        .want_signal = 50,
        .yield = 8,
        .sleep = 4000,
        .poller_sleep = 2000,
        .sleep_us = 2000,
        .units = 256,
        .progress = 32,
        .expect_full = true,
    };
    for (int i = 0; i < 3; i++)
        run_stress(&cfg, seed + 2 * (uint64_t)i * 0x10001);
}

/* Every WR signaled (S = 1), one QP. */
static void test_stress_every_wr(void **state)
{
    (void)state;
    stress_cfg_t cfg = {
        .threads = 8,
        .nqps = 1,
        .signal_interval = 1,
        .poll_batch = 1,
        .wrs_per_thread = 5000,
        .max_complete = 2,
        .fail_post = 50,
        .fail_marker = 10,
        .want_signal = 10,
        .yield = 20,
        .sleep = 2000,
        .poller_sleep = 1000,
        .sleep_us = 1000,
        .units = 64,
        .progress = 8,
        .expect_full = true,
    };
    run_stress(&cfg, stress_seed() + 2);
}

/* A long interval and a large poll batch; few units, so allocations
 * often wait for completions (flush, poll, retry). */
static void test_stress_long_runs(void **state)
{
    (void)state;
    stress_cfg_t cfg = {
        .threads = 4,
        .nqps = 2,
        .signal_interval = 64,
        .poll_batch = 16,
        .wrs_per_thread = 20000,
        .max_complete = 24,
        .fail_post = 200,
        .fail_marker = 5,
        .want_signal = 100,
        .yield = 100,
        .sleep = 5000,
        .poller_sleep = 500,
        .sleep_us = 3000,
        .units = 128,
        .progress = 32,
    };
    run_stress(&cfg, stress_seed() + 4);
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
