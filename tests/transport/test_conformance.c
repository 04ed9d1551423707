/*
 * Transport conformance suite.
 *
 * Written once against the transport interface and the core's messaging,
 * and run as one CMocka group per transport configuration and job shape
 * (the job file given with -c selects the transport; the group is named
 * by the first argument, such as conformance-verbs-2x2). It runs as a
 * multi-process job: every rank runs the same tests in the same order.
 *
 * Worker threads never call CMocka (it is not thread-safe): they record
 * failures, and the main thread asserts once rv_job_run has returned. A
 * check the transport cannot run (its capabilities say so) is skipped
 * from the main thread, and CMocka and ctest report it skipped.
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

/* Core's message header as it travels in the transport's AM header (a
 * wire format: the handler id, then the payload length the header
 * announces), written out here to forge malformed messages. */
typedef struct {
    rv_handler_id_t handler;
    uint32_t len;
} wire_hdr_t;
#include "rv_layer.h"

#define MAX_WORKERS 64

/* ---------------------------------------------------------------------- */
/* Job-wide state                                                          */

static rv_context_t *ctx;
static const char *group_name = "conformance";

static struct {
    rv_handler_id_t data, data_inline, fanin, rkey, check, marker, count;
    rv_handler_id_t probe, probe_reply;
} H;

typedef struct {
    uint64_t seq_from[MAX_WORKERS]; /* next expected sequence per sender */
    uint64_t got_from[MAX_WORKERS]; /* messages received per sender */
    uint64_t markers;
    uint64_t checks;
    uint64_t probes, probe_replies;

    /* RMA */
    void *region_a; /* mem_alloc'ed */
    void *region_b; /* malloc'ed and registered */
    rv_tmem_t *mem_a, *mem_b;
    uint64_t raddr_a[MAX_WORKERS], raddr_b[MAX_WORKERS];
    rv_trkey_t *rkey_a[MAX_WORKERS], *rkey_b[MAX_WORKERS];
    uint64_t rkeys_got;
} wstate_t;

static wstate_t *ws; /* by local worker index */

static wstate_t *state_of(rv_worker_t *w)
{
    return &ws[rv_worker_local(w)];
}

static uint8_t pattern(uint32_t src, uint64_t seq, size_t i)
{
    return (uint8_t)(src * 131u + seq * 17u + i * 7u + (i >> 8));
}

static void fill(uint8_t *buf, size_t len, uint32_t src, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern(src, seq, i);
}

/* Index of the first wrong byte, or len. */
static size_t verify(const uint8_t *buf, size_t len, uint32_t src, uint64_t seq)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != pattern(src, seq, i))
            return i;
    return len;
}

static int setup_job(void **state)
{
    (void)state;
    atomic_store(&failures, 0);
    ws = calloc((size_t)rv_threads(ctx), sizeof(*ws));
    return ws == NULL;
}

static int teardown_job(void **state)
{
    (void)state;
    free(ws);
    ws = NULL;
    return 0;
}

static void run_job(rv_worker_fn fn)
{
    assert_true(rv_nworkers(ctx) <= MAX_WORKERS);
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

/* ---------------------------------------------------------------------- */
/* AM of every size, all-to-all, with per-pair order                       */

static const size_t am_sizes[] = {
    0,    1,    7,    8,     63,    64,     255,      4095,     4096,
    8191, 8192, 8193, 16384, 65536, 262144, 1u << 20, 4u << 20,
};
#define AM_NSIZES (sizeof(am_sizes) / sizeof(am_sizes[0]))
#define AM_PER_PAIR 64

static size_t am_size_of(uint64_t seq)
{
    return seq < AM_NSIZES ? am_sizes[seq] : (size_t)((seq * 37) % 512);
}

static rv_status_t on_data(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    wstate_t *s = state_of(w);
    uint64_t seq = s->seq_from[msg->src]++;
    (void)arg;
    s->got_from[msg->src]++;
    EXPECT(msg->len == am_size_of(seq),
           "worker %u: message %llu from %u has %zu bytes, expected %zu",
           rv_worker_tid(w), (unsigned long long)seq, msg->src, msg->len,
           am_size_of(seq));
    if (msg->len == am_size_of(seq)) {
        size_t bad = verify(msg->data, msg->len, msg->src, seq);
        EXPECT(bad == msg->len,
               "worker %u: message %llu from %u (%zu bytes) wrong at byte %zu",
               rv_worker_tid(w), (unsigned long long)seq, msg->src, msg->len,
               bad);
    }
    return RV_OK;
}

static int body_am_all_to_all(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    uint8_t *buf = malloc(4u << 20);
    (void)arg;

    EXPECT(buf != NULL, "out of memory");
    if (buf == NULL)
        return 1;
    for (uint64_t seq = 0; seq < AM_PER_PAIR; seq++) {
        size_t len = am_size_of(seq);
        fill(buf, len, me, seq);
        for (uint32_t k = 0; k < n; k++) {
            uint32_t dest = (me + k) % n; /* self included */
            /* odd messages go to an inline handler: one sequence across
             * both kinds checks that per-pair order holds between them */
            rv_status_t st = rv_send(w, dest, seq % 2 ? H.data_inline : H.data,
                                     buf, len, NULL);
            EXPECT(st == RV_OK, "send to %u: %s", dest, rv_status_str(st));
        }
    }
    free(buf);
    for (uint32_t src = 0; src < n; src++)
        WAIT_UNTIL(w, s->got_from[src] >= AM_PER_PAIR, "all-to-all messages");
    rv_barrier(w);
    for (uint32_t src = 0; src < n; src++)
        EXPECT(s->got_from[src] == AM_PER_PAIR,
               "worker %u got %llu messages from %u, expected %d", me,
               (unsigned long long)s->got_from[src], src, AM_PER_PAIR);
    return 0;
}

static void test_am_all_to_all(void **state)
{
    (void)state;
    run_job(body_am_all_to_all);
}

/* ---------------------------------------------------------------------- */
/* Many-to-one fan-in, asynchronous sends with a synchronizer              */

#define FANIN_PER_SENDER 2000

static rv_status_t on_fanin(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    wstate_t *s = state_of(w);
    uint64_t seq;
    (void)arg;
    EXPECT(msg->len == sizeof(seq), "fan-in message of %zu bytes", msg->len);
    memcpy(&seq, msg->data, sizeof(seq));
    EXPECT(seq == s->seq_from[msg->src],
           "fan-in from %u: got sequence %llu, expected %llu (order broken)",
           msg->src, (unsigned long long)seq,
           (unsigned long long)s->seq_from[msg->src]);
    s->seq_from[msg->src] = seq + 1;
    s->got_from[msg->src]++;
    return RV_OK;
}

static int body_fanin(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    uint64_t *seqs = malloc(FANIN_PER_SENDER * sizeof(*seqs));
    rv_sync_t sync;
    (void)arg;

    rv_sync_init(&sync, 0);
    for (uint64_t i = 0; i < FANIN_PER_SENDER; i++) {
        seqs[i] = i; /* each send's buffer stays untouched until done */
        rv_status_t st =
            rv_send(w, 0, H.fanin, &seqs[i], sizeof(seqs[i]), &sync);
        EXPECT(st == RV_OK, "fan-in send: %s", rv_status_str(st));
    }
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "fan-in completion failed");
    free(seqs);
    if (me == 0)
        for (uint32_t src = 0; src < n; src++)
            WAIT_UNTIL(w, s->got_from[src] >= FANIN_PER_SENDER,
                       "fan-in messages");
    rv_barrier(w);
    if (me == 0)
        for (uint32_t src = 0; src < n; src++)
            EXPECT(s->got_from[src] == FANIN_PER_SENDER,
                   "fan-in: %llu messages from %u, expected %d",
                   (unsigned long long)s->got_from[src], src, FANIN_PER_SENDER);
    return 0;
}

static void test_fanin(void **state)
{
    (void)state;
    run_job(body_fanin);
}

/* ---------------------------------------------------------------------- */
/* RMA: regions, keys, put, get, atomics, flush                            */

#define REGION (2u << 20)
#define COUNTER_OFF (REGION - 64)

typedef struct {
    uint64_t addr_a, addr_b;
    uint32_t len_a, len_b;
    uint8_t keys[]; /* rkey a, then rkey b */
} rkey_msg_t;

static rv_status_t on_rkey(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    wstate_t *s = state_of(w);
    rkey_msg_t m;
    (void)arg;
    memcpy(&m, msg->data, sizeof(m));
    const uint8_t *keys = (const uint8_t *)msg->data + sizeof(m);
    s->raddr_a[msg->src] = m.addr_a;
    s->raddr_b[msg->src] = m.addr_b;
    rv_status_t st = ops->rkey_unpack(rv_worker_tworker(w), msg->src, keys,
                                      m.len_a, &s->rkey_a[msg->src]);
    EXPECT(st == RV_OK, "rkey_unpack a: %s", rv_status_str(st));
    st = ops->rkey_unpack(rv_worker_tworker(w), msg->src, keys + m.len_a,
                          m.len_b, &s->rkey_b[msg->src]);
    EXPECT(st == RV_OK, "rkey_unpack b: %s", rv_status_str(st));
    s->rkeys_got++;
    return RV_OK;
}

/* Allocates and registers this worker's regions and trades keys with
 * every worker of the job. */
static void rma_setup(rv_worker_t *w)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    wstate_t *s = state_of(w);
    uint32_t n = rv_nworkers(ctx);
    void *ka, *kb;
    size_t la, lb;

    rv_status_t st = ops->mem_alloc(tp, REGION, &s->mem_a, &s->region_a);
    EXPECT(st == RV_OK, "mem_alloc: %s", rv_status_str(st));
    s->region_b = aligned_alloc(4096, REGION);
    st = ops->mem_register(tp, s->region_b, REGION, &s->mem_b);
    EXPECT(st == RV_OK, "mem_register: %s", rv_status_str(st));
    memset(s->region_a, 0, REGION);
    memset(s->region_b, 0, REGION);

    EXPECT(ops->rkey_pack(tp, s->mem_a, &ka, &la) == RV_OK, "rkey_pack a");
    EXPECT(ops->rkey_pack(tp, s->mem_b, &kb, &lb) == RV_OK, "rkey_pack b");
    size_t mlen = sizeof(rkey_msg_t) + la + lb;
    rkey_msg_t *m = malloc(mlen);
    m->addr_a = (uintptr_t)s->region_a;
    m->addr_b = (uintptr_t)s->region_b;
    m->len_a = (uint32_t)la;
    m->len_b = (uint32_t)lb;
    memcpy(m->keys, ka, la);
    memcpy(m->keys + la, kb, lb);
    ops->rkey_buffer_release(tp, ka);
    ops->rkey_buffer_release(tp, kb);
    for (uint32_t t = 0; t < n; t++)
        EXPECT(rv_send(w, t, H.rkey, m, mlen, NULL) == RV_OK, "send rkey");
    free(m);
    WAIT_UNTIL(w, s->rkeys_got == n, "remote keys");
    rv_barrier(w);
}

static void rma_teardown(rv_worker_t *w)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    wstate_t *s = state_of(w);

    rv_barrier(w); /* nobody touches our regions any more */
    for (uint32_t t = 0; t < rv_nworkers(ctx); t++) {
        if (s->rkey_a[t] != NULL)
            ops->rkey_destroy(rv_worker_tworker(w), s->rkey_a[t]);
        if (s->rkey_b[t] != NULL)
            ops->rkey_destroy(rv_worker_tworker(w), s->rkey_b[t]);
    }
    ops->mem_deregister(tp, s->mem_a);
    ops->mem_deregister(tp, s->mem_b);
    free(s->region_b);
}

/* Non-overlapping pieces at odd offsets. */
static const struct {
    size_t off, len;
} pieces[] = {
    {1, 1},
    {17, 3},
    {33, 8},
    {101, 100},
    {1001, 4096},
    {8193, 65537},
    {100003, 1u << 20},
};
#define NPIECES (sizeof(pieces) / sizeof(pieces[0]))

static void sync_cb(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* Waits for an operation that returned @p st with @p sync. */
static rv_status_t op_wait(rv_worker_t *w, rv_status_t st, rv_sync_t *sync)
{
    if (st == RV_INPROGRESS)
        return rv_sync_wait(w, sync);
    return st;
}

static int body_put_get(rv_worker_t *w, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    wstate_t *s = state_of(w);
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n, left = (me + n - 1) % n;
    uint8_t *buf = malloc(REGION);
    rv_sync_t sync;
    (void)arg;

    rma_setup(w);

    /* put: my pieces into the right neighbour's region a */
    for (size_t p = 0; p < NPIECES; p++) {
        fill(buf + pieces[p].off, pieces[p].len, me, p);
        rv_sync_init(&sync, 1);
        rv_status_t st = ops->put(tw, right, s->raddr_a[right] + pieces[p].off,
                                  s->rkey_a[right], buf + pieces[p].off,
                                  pieces[p].len, sync_cb, &sync);
        EXPECT(op_wait(w, st, &sync) == RV_OK, "put of %zu bytes: %s",
               pieces[p].len, rv_status_str(st));
    }
    rv_sync_init(&sync, 1);
    EXPECT(op_wait(w, ops->flush(tw, UINT32_MAX, sync_cb, &sync), &sync) ==
               RV_OK,
           "flush");
    rv_barrier(w);
    for (size_t p = 0; p < NPIECES; p++) {
        const uint8_t *at = (const uint8_t *)s->region_a + pieces[p].off;
        size_t bad = verify(at, pieces[p].len, left, p);
        EXPECT(bad == pieces[p].len,
               "put of %zu bytes at offset %zu from %u wrong at byte %zu",
               pieces[p].len, pieces[p].off, left, bad);
        EXPECT(at[-1] == 0 && at[pieces[p].len] == 0,
               "put of %zu bytes at offset %zu wrote outside its range",
               pieces[p].len, pieces[p].off);
    }

    /* get: the right neighbour's region b, filled by its owner */
    for (size_t p = 0; p < NPIECES; p++)
        fill((uint8_t *)s->region_b + pieces[p].off, pieces[p].len, me,
             100 + p);
    rv_barrier(w);
    memset(buf, 0, REGION);
    for (size_t p = 0; p < NPIECES; p++) {
        rv_sync_init(&sync, 1);
        rv_status_t st = ops->get(tw, right, buf + pieces[p].off, pieces[p].len,
                                  s->raddr_b[right] + pieces[p].off,
                                  s->rkey_b[right], sync_cb, &sync);
        EXPECT(op_wait(w, st, &sync) == RV_OK, "get of %zu bytes: %s",
               pieces[p].len, rv_status_str(st));
        size_t bad = verify(buf + pieces[p].off, pieces[p].len, right, 100 + p);
        EXPECT(bad == pieces[p].len,
               "get of %zu bytes at offset %zu from %u wrong at byte %zu",
               pieces[p].len, pieces[p].off, right, bad);
    }
    free(buf);
    rma_teardown(w);
    return 0;
}

static void test_put_get(void **state)
{
    (void)state;
    run_job(body_put_get);
}

#define ATOMICS_PER_WORKER 200

static int body_atomics(rv_worker_t *w, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    wstate_t *s = state_of(w);
    uint32_t n = rv_nworkers(ctx);
    rv_sync_t sync;
    (void)arg;

    rma_setup(w);
    uint64_t raddr = s->raddr_a[0] + COUNTER_OFF;

    /* fetch-add from every worker on worker 0's counter */
    uint64_t prev = 0;
    for (int i = 0; i < ATOMICS_PER_WORKER; i++) {
        uint64_t old = UINT64_MAX;
        rv_sync_init(&sync, 1);
        rv_status_t st = ops->atomic_fadd64(tw, 0, 1, raddr, s->rkey_a[0], &old,
                                            sync_cb, &sync);
        EXPECT(op_wait(w, st, &sync) == RV_OK, "fetch-add: %s",
               rv_status_str(st));
        EXPECT(old < (uint64_t)n * ATOMICS_PER_WORKER,
               "fetch-add returned %llu", (unsigned long long)old);
        EXPECT(i == 0 || old > prev, "fetch-add values not increasing");
        prev = old;
    }

    rv_barrier(w); /* every fetch-add is done before the first swap */

    /* compare-swap increments, retrying on contention */
    for (int i = 0; i < ATOMICS_PER_WORKER; i++) {
        uint64_t guess = 0, old;
        for (int tries = 0;; tries++) {
            rv_sync_init(&sync, 1);
            rv_status_t st =
                ops->atomic_cswap64(tw, 0, guess, guess + 1, raddr,
                                    s->rkey_a[0], &old, sync_cb, &sync);
            EXPECT(op_wait(w, st, &sync) == RV_OK, "compare-swap: %s",
                   rv_status_str(st));
            if (old == guess || tries > 100000)
                break;
            guess = old;
        }
        EXPECT(old == guess, "compare-swap never succeeded");
    }
    rv_sync_init(&sync, 1);
    EXPECT(op_wait(w, ops->flush(tw, UINT32_MAX, sync_cb, &sync), &sync) ==
               RV_OK,
           "flush");
    rv_barrier(w);
    if (rv_worker_tid(w) == 0) {
        uint64_t v;
        memcpy(&v, (uint8_t *)s->region_a + COUNTER_OFF, sizeof(v));
        EXPECT(v == 2ull * n * ATOMICS_PER_WORKER,
               "counter is %llu after %u workers x %d fetch-adds and as many "
               "compare-swaps, expected %llu",
               (unsigned long long)v, n, ATOMICS_PER_WORKER,
               2ull * n * ATOMICS_PER_WORKER);
    }
    rma_teardown(w);
    return 0;
}

static void test_atomics(void **state)
{
    (void)state;
    if (!rv_context_caps(ctx)->atomics64)
        JOB_SKIP("atomics: the transport has none");
    run_job(body_atomics);
}

/* flush(peer) completes puts remotely: a message sent after the flush
 * finds the data in place when its handler runs. */
#define FLUSH_ROUNDS 20
#define FLUSH_LEN 65536

static rv_status_t on_check(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    wstate_t *s = state_of(w);
    uint64_t round;
    (void)arg;
    memcpy(&round, msg->data, sizeof(round));
    const uint8_t *at = (const uint8_t *)s->region_a + round * 64;
    size_t bad = verify(at, FLUSH_LEN, msg->src, 1000 + round);
    EXPECT(bad == FLUSH_LEN,
           "round %llu: data put and flushed before this message is not "
           "there (byte %zu)",
           (unsigned long long)round, bad);
    s->checks++;
    return RV_OK;
}

static int body_flush(rv_worker_t *w, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    wstate_t *s = state_of(w);
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n;
    uint8_t *buf = malloc(FLUSH_LEN);
    rv_sync_t sync;
    (void)arg;

    rma_setup(w);
    for (uint64_t r = 0; r < FLUSH_ROUNDS; r++) {
        fill(buf, FLUSH_LEN, me, 1000 + r);
        rv_sync_init(&sync, 1);
        rv_status_t st =
            ops->put(tw, right, s->raddr_a[right] + r * 64, s->rkey_a[right],
                     buf, FLUSH_LEN, sync_cb, &sync);
        EXPECT(op_wait(w, st, &sync) == RV_OK, "put");
        rv_sync_init(&sync, 1);
        st = ops->flush(tw, right, sync_cb, &sync);
        EXPECT(op_wait(w, st, &sync) == RV_OK, "flush: %s", rv_status_str(st));
        EXPECT(rv_send(w, right, H.check, &r, sizeof(r), NULL) == RV_OK,
               "send");
        /* the next round overwrites: wait for this one to be checked */
        WAIT_UNTIL(w, s->checks == r + 1, "flush check");
        rv_barrier(w);
    }
    free(buf);
    rma_teardown(w);
    return 0;
}

static void test_flush(void **state)
{
    (void)state;
    run_job(body_flush);
}

/* fence(peer) orders puts: a flag put after a fence is never seen before
 * the large put issued before the fence has landed, though neither is
 * waited for by the initiator. The target polls the flag in its own
 * memory. */
#define FENCE_ROUNDS 20
#define FENCE_LEN (1u << 20)
#define FENCE_FLAG_OFF (REGION - 128)

static int body_fence(rv_worker_t *w, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    rv_tworker_t *tw = rv_worker_tworker(w);
    wstate_t *s = state_of(w);
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n, left = (me + n - 1) % n;
    uint8_t *buf = malloc(FENCE_LEN);
    uint64_t flag;
    rv_sync_t sync;
    (void)arg;

    rma_setup(w);
    volatile uint64_t *mine =
        (volatile uint64_t *)((uint8_t *)s->region_a + FENCE_FLAG_OFF);
    for (uint64_t r = 0; r < FENCE_ROUNDS; r++) {
        fill(buf, FENCE_LEN, me, 2000 + r);
        rv_sync_init(&sync, 2);
        rv_status_t st =
            ops->put(tw, right, s->raddr_a[right], s->rkey_a[right], buf,
                     FENCE_LEN, sync_cb, &sync);
        if (st != RV_INPROGRESS)
            rv_sync_complete(&sync, st);
        EXPECT(ops->fence(tw, right) == RV_OK, "fence");
        flag = r + 1;
        st = ops->put(tw, right, s->raddr_a[right] + FENCE_FLAG_OFF,
                      s->rkey_a[right], &flag, sizeof(flag), sync_cb, &sync);
        if (st != RV_INPROGRESS)
            rv_sync_complete(&sync, st);
        /* the left neighbour's data, once its flag says it is there */
        WAIT_UNTIL(w, __atomic_load_n(mine, __ATOMIC_ACQUIRE) == r + 1,
                   "fence flag");
        size_t bad = verify(s->region_a, FENCE_LEN, left, 2000 + r);
        EXPECT(bad == FENCE_LEN,
               "round %llu: the flag put after a fence landed before the "
               "data put before it (byte %zu)",
               (unsigned long long)r, bad);
        EXPECT(rv_sync_wait(w, &sync) == RV_OK, "puts");
        rv_barrier(w); /* the next round overwrites */
    }
    free(buf);
    rma_teardown(w);
    return 0;
}

static void test_fence(void **state)
{
    (void)state;
    run_job(body_fence);
}

/* ---------------------------------------------------------------------- */
/* Inline handlers: they run in the transport's callback, may send (rivet  */
/* copies a payload that cannot leave at once) and may not wait.           */

#define PROBE_LEN 65536 /* a rendezvous: cannot leave at once */

static rv_status_t on_probe(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    wstate_t *s = state_of(w);
    uint8_t *reply = malloc(PROBE_LEN);
    rv_sync_t pending;
    (void)arg;

    EXPECT(rv_progress(w) == 0, "rv_progress ran inside an inline handler");
    rv_sync_init(&pending, 1);
    EXPECT(rv_sync_wait(w, &pending) == RV_ERR_INVALID,
           "rv_sync_wait waited inside an inline handler");
    EXPECT(rv_barrier(w) == RV_ERR_INVALID,
           "rv_barrier waited inside an inline handler");

    fill(reply, PROBE_LEN, rv_worker_tid(w), 7);
    EXPECT(rv_send(w, msg->src, H.probe_reply, reply, PROBE_LEN, NULL) == RV_OK,
           "send from an inline handler");
    memset(reply, 0xee, PROBE_LEN); /* the buffer is ours again */
    free(reply);
    s->probes++;
    return RV_OK;
}

static rv_status_t on_probe_reply(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    size_t bad = verify(msg->data, msg->len, msg->src, 7);
    EXPECT(msg->len == PROBE_LEN && bad == PROBE_LEN,
           "reply of an inline handler: %zu bytes, wrong at byte %zu", msg->len,
           bad);
    state_of(w)->probe_replies++;
    return RV_OK;
}

static int body_inline(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    (void)arg;
    for (int i = 0; i < 10; i++)
        EXPECT(rv_send(w, (me + 1) % n, H.probe, &i, sizeof(i), NULL) == RV_OK,
               "send probe");
    WAIT_UNTIL(w, s->probe_replies == 10 && s->probes == 10, "probe replies");
    rv_barrier(w);
    return 0;
}

static void test_inline_handlers(void **state)
{
    (void)state;
    run_job(body_inline);
}

/* ---------------------------------------------------------------------- */
/* Bad messages: unknown handler ids and truncated or malformed messages   */
/* are counted and logged, never run, never a crash.                       */

static rv_status_t on_marker(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)msg;
    (void)arg;
    state_of(w)->markers++;
    return RV_OK;
}

static rv_status_t on_count(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    FAIL("worker %u ran a truncated message of %zu bytes", rv_worker_tid(w),
         msg->len);
    return RV_OK;
}

static int body_bad_messages(rv_worker_t *w, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n;
    uint8_t payload[100] = {0};
    rv_sync_t sync;
    rv_worker_stats_t before, after;
    (void)arg;

    rv_worker_stats(w, &before);
    rv_barrier(w);

    /* 1. a handler id nobody registered */
    EXPECT(rv_send(w, right, rv_handler_id("conformance.nobody"), payload, 10,
                   NULL) == RV_OK,
           "send to unknown handler");

    /* 2. a header announcing 100 bytes, followed by 50 */
    wire_hdr_t hdr = {.handler = H.count, .len = 100};
    struct iovec iov = {.iov_base = payload, .iov_len = 50};
    rv_sync_init(&sync, 1);
    rv_status_t st = ops->am_send(rv_worker_tworker(w), right, &hdr,
                                  sizeof(hdr), &iov, 1, 0, sync_cb, &sync);
    EXPECT(op_wait(w, st, &sync) == RV_OK, "forged send: %s",
           rv_status_str(st));

    /* 3. a header cut short */
    rv_sync_init(&sync, 1);
    st = ops->am_send(rv_worker_tworker(w), right, &hdr, 4, &iov, 1, 0, sync_cb,
                      &sync);
    EXPECT(op_wait(w, st, &sync) == RV_OK, "forged send: %s",
           rv_status_str(st));

    /* 4. a good message behind them (per-pair FIFO) */
    EXPECT(rv_send(w, right, H.marker, NULL, 0, NULL) == RV_OK, "marker");
    WAIT_UNTIL(w, state_of(w)->markers == 1, "marker");
    rv_barrier(w);

    rv_worker_stats(w, &after);
    EXPECT(after.rx_unknown_handler - before.rx_unknown_handler == 1,
           "worker %u counted %llu unknown-handler drops, expected 1", me,
           (unsigned long long)(after.rx_unknown_handler -
                                before.rx_unknown_handler));
    EXPECT(after.rx_malformed - before.rx_malformed == 2,
           "worker %u counted %llu malformed drops, expected 2", me,
           (unsigned long long)(after.rx_malformed - before.rx_malformed));
    return 0;
}

static void test_bad_messages(void **state)
{
    (void)state;
    run_job(body_bad_messages);
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group_name = argv[1];
    if ((rv_handler_register(ctx, "conformance.data", on_data, NULL, 0,
                             &H.data) |
         rv_handler_register(ctx, "conformance.data_inline", on_data, NULL,
                             RV_HANDLER_INLINE, &H.data_inline) |
         rv_handler_register(ctx, "conformance.fanin", on_fanin, NULL,
                             RV_HANDLER_INLINE, &H.fanin) |
         rv_handler_register(ctx, "conformance.probe", on_probe, NULL,
                             RV_HANDLER_INLINE, &H.probe) |
         rv_handler_register(ctx, "conformance.probe_reply", on_probe_reply,
                             NULL, 0, &H.probe_reply) |
         rv_handler_register(ctx, "conformance.rkey", on_rkey, NULL, 0,
                             &H.rkey) |
         rv_handler_register(ctx, "conformance.check", on_check, NULL, 0,
                             &H.check) |
         rv_handler_register(ctx, "conformance.marker", on_marker, NULL, 0,
                             &H.marker) |
         rv_handler_register(ctx, "conformance.count", on_count, NULL, 0,
                             &H.count)) != RV_OK)
        return 1;

    if (rv_rank(ctx) == 0)
        printf("conformance group %s: %d processes x %d threads, %s\n",
               group_name, rv_size(ctx), rv_threads(ctx),
               rv_context_describe(ctx));

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_am_all_to_all, setup_job,
                                        teardown_job),
        cmocka_unit_test_setup_teardown(test_fanin, setup_job, teardown_job),
        cmocka_unit_test_setup_teardown(test_put_get, setup_job, teardown_job),
        cmocka_unit_test_setup_teardown(test_atomics, setup_job, teardown_job),
        cmocka_unit_test_setup_teardown(test_flush, setup_job, teardown_job),
        cmocka_unit_test_setup_teardown(test_fence, setup_job, teardown_job),
        cmocka_unit_test_setup_teardown(test_inline_handlers, setup_job,
                                        teardown_job),
        cmocka_unit_test_setup_teardown(test_bad_messages, setup_job,
                                        teardown_job),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed =
        _cmocka_run_group_tests(group_name, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
