/*
 * The remote memory layer as a multi-process job: memory allocated in
 * another worker's zone, put and get of 1 B - 64 MiB at odd offsets
 * (checked by reading back), 64-bit atomics contended by every worker of
 * the job (the final count is exact), also between the word's own process
 * and the others, swap, free, and AM Long (handlers
 * run only on whole payloads, under either protocol).
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_rma.h"

static rv_context_t *ctx;
static rv_handler_id_t publish_id, long_id;
static rv_rptr_t counter;          /* worker 0's, published by broadcast */
static atomic_int published;

static uint8_t pattern(uint32_t src, size_t i)
{
    return (uint8_t)(src * 31u + i * 7u + (i >> 11));
}

static rv_status_t on_publish(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)arg;
    if (call->args_len == sizeof(counter) && rv_worker_local(w) == 0) {
        memcpy(&counter, call->args, sizeof(counter));
        atomic_fetch_add(&published, 1);
    }
    return RV_OK;
}

/* ---------------------------------------------------------------------- */

static size_t big_len(void)
{
    /* 64 MiB per worker pair when the job is small, less when not, or
     * what RIVET_TEST_RMA_BIG_MIB says (the two emulated RDMA hosts,
     * whose link is a socket between two software-emulated guests) */
    const char *mib = getenv("RIVET_TEST_RMA_BIG_MIB");
    if (mib != NULL && atoi(mib) > 0)
        return (size_t)atoi(mib) << 20;
    return rv_nworkers(ctx) <= 4 ? (64u << 20) : (8u << 20);
}

static int body_put_get(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n;
    size_t big = big_len();
    const size_t sizes[] = {1, 3, 100, 4097, 65537, (1u << 20) + 3, 0};
    (void)arg;

    rv_rptr_t remote;
    rv_status_t st = rv_remote_alloc(w, right, big + 64, &remote);
    EXPECT(st == RV_OK, "rv_remote_alloc on worker %u: %s", right,
           rv_status_str(st));
    EXPECT((int)remote.rank == rv_tid_rank(ctx, right),
           "memory of worker %u in rank %u", right, remote.rank);
    uint8_t *src = malloc(big + 64), *back = malloc(big + 64);
    EXPECT(src != NULL && back != NULL, "buffers");
    if (st != RV_OK || src == NULL || back == NULL)
        return 1;
    for (size_t i = 0; i < big + 64; i++)
        src[i] = pattern(me, i);

    /* pieces at odd offsets, all in flight on one synchronizer */
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    size_t off = 1;
    for (int i = 0; sizes[i] != 0; i++) {
        EXPECT(rv_put(w, rv_rptr_add(remote, off), src + off, sizes[i],
                      &sync) == RV_OK, "put of %zu", sizes[i]);
        off += sizes[i] + 13;
    }
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "puts");
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "flush");
    memset(back, 0, big + 64);
    EXPECT(rv_get(w, back + 1, rv_rptr_add(remote, 1), off - 1, NULL) ==
               RV_OK, "get");
    off = 1;
    for (int i = 0; sizes[i] != 0; i++) {
        EXPECT(memcmp(back + off, src + off, sizes[i]) == 0,
               "piece of %zu bytes at offset %zu read back wrong", sizes[i],
               off);
        off += sizes[i] + 13;
    }
    /* and the whole thing, at an odd offset */
    EXPECT(rv_put(w, rv_rptr_add(remote, 7), src + 7, big, NULL) == RV_OK,
           "big put");
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "flush");
    memset(back, 0, big + 64);
    EXPECT(rv_get(w, back, rv_rptr_add(remote, 7), big, NULL) == RV_OK,
           "big get");
    EXPECT(memcmp(back, src + 7, big) == 0, "%zu bytes read back wrong",
           big);
    rv_barrier(w);
    EXPECT(rv_remote_free(w, remote) == RV_OK, "rv_remote_free");
    free(src);
    free(back);
    return 0;
}

/* ---------------------------------------------------------------------- */

#define ADDS 500
#define CONTENDED 4096
#define CONTEND_S 3.0

static _Atomic uint64_t owner_adds; /* by the counter's own process */
static _Atomic uint64_t other_adds; /* by this process, if not it */

/*
 * The counter's own process against the others: each worker of another
 * process makes up to CONTENDED fetch-adds, then adds how many to the
 * word two after the counter and counts itself finished in the one after; the workers of the counter's
 * process add for as long as any other still does, so that their atomics
 * meet the transport's in the word. Over a NIC whose atomics are atomic
 * only among themselves (IBV_ATOMIC_HCA: Soft-RoCE, most adapters), CPU
 * atomics there lose some of the NIC's increments, or the NIC some of
 * theirs; rivet then sends the process's own atomics through the NIC too.
 */
static void contend(rv_worker_t *w, rv_rptr_t finished)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w), others = 0;
    bool owner = rv_tid_rank(ctx, me) == (int)counter.rank;

    for (uint32_t t = 0; t < n; t++)
        others += rv_tid_rank(ctx, t) != (int)counter.rank;
    uint64_t done = 0, mine = 0;
    double t0 = now_s();
    if (!owner) {
        /* 64 in flight at a time, for the most NIC atomics a second;
         * CONTENDED of them, or as many as CONTEND_S allows (an emulated
         * NIC under software emulation does a few hundred a second). */
        while (mine < CONTENDED && now_s() - t0 < CONTEND_S) {
            rv_sync_t sync;
            rv_sync_init(&sync, 0);
            for (int i = 0; i < 64; i++)
                EXPECT(rv_atomic_fadd(w, counter, 1, NULL, &sync) == RV_OK,
                       "contended fadd");
            EXPECT(rv_sync_wait(w, &sync) == RV_OK, "contended fadds");
            mine += 64;
        }
        atomic_fetch_add(&other_adds, mine);
        EXPECT(rv_atomic_fadd(w, finished, 1, NULL, NULL) == RV_OK,
               "finished");
        return;
    }
    while (done < others && now_s() - t0 < WAIT_LIMIT_S) {
        /* Back to back, for the most chances to meet a NIC's atomic. */
        for (int i = 0; i < 64; i++)
            EXPECT(rv_atomic_fadd(w, counter, 1, NULL, NULL) == RV_OK,
                   "owner's fadd");
        mine += 64;
        rv_progress(w); /* emulated atomics need the target's progress */
        sched_yield();  /* and the others' adds need a core */
        EXPECT(rv_atomic_fadd(w, finished, 0, &done, NULL) == RV_OK,
               "read finished");
    }
    EXPECT(done >= others, "the other processes' adds did not finish");
    atomic_fetch_add(&owner_adds, mine);
}

static int body_atomics(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    (void)arg;

    if (me == 0) {
        rv_rptr_t c;
        EXPECT(rv_remote_alloc(w, 0, 3 * sizeof(uint64_t), &c) == RV_OK,
               "counter");
        EXPECT(rv_put(w, c, (uint64_t[3]){0, 0, 0}, 3 * sizeof(uint64_t),
                      NULL) == RV_OK,
               "zero");
        EXPECT(rv_broadcast(w, publish_id, &c, sizeof(c), NULL,
                            RV_NOTIFY_CONSUMED) == RV_OK, "publish");
    }
    WAIT_UNTIL(w, atomic_load(&published) > 0, "the counter's address");
    rv_barrier(w);

    /* fetch-adds with a synchronizer, then compare-swap increments */
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    uint64_t olds[ADDS];
    for (int i = 0; i < ADDS; i++)
        EXPECT(rv_atomic_fadd(w, counter, 1, &olds[i], &sync) == RV_OK,
               "fadd");
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "fadds");
    for (int i = 0; i < ADDS; i++)
        EXPECT(olds[i] < (uint64_t)2 * ADDS * n, "fadd returned %llu",
               (unsigned long long)olds[i]);
    for (int i = 0; i < ADDS; i++) {
        uint64_t seen = 0, prev;
        EXPECT(rv_atomic_fadd(w, counter, 0, &seen, NULL) == RV_OK, "read");
        for (;;) {
            EXPECT(rv_atomic_cswap(w, counter, seen, seen + 1, &prev,
                                   NULL) == RV_OK, "cswap");
            if (prev == seen)
                break;
            seen = prev;
        }
    }
    rv_barrier(w);
    uint64_t total = 0;
    EXPECT(rv_get(w, &total, counter, sizeof(total), NULL) == RV_OK,
           "final read");
    EXPECT(total == (uint64_t)2 * ADDS * n,
           "the counter is %llu after %u workers x %d increments",
           (unsigned long long)total, n, 2 * ADDS);
    rv_barrier(w);

    /* swap: worker 0 alone, so the previous values are known */
    if (me == 0) {
        uint64_t old = 1;
        EXPECT(rv_atomic_swap(w, counter, 42, &old) == RV_OK, "swap");
        EXPECT(old == total, "swap returned %llu, expected %llu",
               (unsigned long long)old, (unsigned long long)total);
        EXPECT(rv_atomic_swap(w, counter, 7, &old) == RV_OK && old == 42,
               "second swap returned %llu", (unsigned long long)old);
    }
    rv_barrier(w);

    contend(w, rv_rptr_add(counter, sizeof(uint64_t)));
    rv_barrier(w);
    /* Each other process's first worker reports its process's adds. */
    if (rv_worker_local(w) == 0 && rv_tid_rank(ctx, me) != (int)counter.rank)
        EXPECT(rv_atomic_fadd(w, rv_rptr_add(counter, 2 * sizeof(uint64_t)),
                              atomic_load(&other_adds), NULL, NULL) == RV_OK,
               "report");
    rv_barrier(w);
    if (me == 0) { /* of the counter's process: owner_adds is complete */
        uint64_t words[3];
        EXPECT(rv_get(w, words, counter, sizeof(words), NULL) == RV_OK,
               "read after contention");
        uint64_t want = 7 + words[2] + atomic_load(&owner_adds);
        EXPECT(words[0] == want,
               "the counter is %llu after contention, expected %llu (%llu "
               "adds by the other processes, %llu by its own)",
               (unsigned long long)words[0], (unsigned long long)want,
               (unsigned long long)words[2],
               (unsigned long long)atomic_load(&owner_adds));
    }
    rv_barrier(w);
    if (me == n - 1)
        EXPECT(rv_remote_free(w, counter) == RV_OK, "free the counter");
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* AM Long: many in flight, payloads up to 4 MiB, every handler sees its
 * whole payload (checksummed), under the job's rma.am_long_protocol. */

typedef struct {
    uint32_t src, i;
    uint64_t len, sum;
} long_args_t;

static _Atomic uint64_t long_got[64];

static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static rv_status_t on_long(rv_worker_t *w, rv_call_t *call, void *arg)
{
    long_args_t a;
    (void)arg;
    memcpy(&a, call->args, sizeof(a));
    EXPECT(call->buf_len == a.len, "AM Long %u from %u: %zu bytes, expected "
           "%llu", a.i, a.src, call->buf_len, (unsigned long long)a.len);
    EXPECT(checksum(call->buf, call->buf_len) == a.sum,
           "AM Long %u from %u: the handler ran before its %llu-byte "
           "payload was whole", a.i, a.src, (unsigned long long)a.len);
    atomic_fetch_add(&long_got[rv_worker_local(w)], 1);
    return RV_OK;
}

#define LONGS 24
#define SLOT ((size_t)4 << 20)

static int body_am_long(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint32_t right = (me + 1) % n;
    const size_t sizes[] = {1, 4096, 65536, 1u << 20, SLOT, 8192 + 5};
    size_t slots = n <= 4 ? LONGS : 6; /* memory in the target's zone */
    (void)arg;

    rv_rptr_t region;
    EXPECT(rv_remote_alloc(w, right, slots * SLOT, &region) == RV_OK,
           "landing region");
    uint8_t *src = malloc(slots * SLOT);
    EXPECT(src != NULL, "sources");
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    for (uint32_t i = 0; i < LONGS; i++) {
        size_t slot = i % slots, len = sizes[i % 6];
        uint8_t *p = src + slot * SLOT;
        if (i >= slots) /* the slot is reused: its last call must be done */
            EXPECT(rv_sync_wait(w, &sync) == RV_OK, "earlier AM Longs");
        for (size_t k = 0; k < len; k++)
            p[k] = (uint8_t)(me * 7 + i * 13 + k * 3 + (k >> 12));
        long_args_t a = {.src = me, .i = i, .len = len,
                         .sum = checksum(p, len)};
        EXPECT(rv_put_handler(w, right, long_id, &a, sizeof(a),
                              rv_rptr_add(region, slot * SLOT), p, len, &sync,
                              RV_NOTIFY_CONSUMED) == RV_OK, "rv_put_handler");
    }
    EXPECT(rv_sync_wait(w, &sync) == RV_OK, "AM Longs");
    WAIT_UNTIL(w, atomic_load(&long_got[rv_worker_local(w)]) >= LONGS,
               "AM Longs from the left");
    rv_barrier(w);
    EXPECT(atomic_load(&long_got[rv_worker_local(w)]) == LONGS,
           "%llu AM Longs ran, expected %d",
           (unsigned long long)atomic_load(&long_got[rv_worker_local(w)]),
           LONGS);
    EXPECT(rv_remote_free(w, region) == RV_OK, "free");
    free(src);
    return 0;
}

/* ---------------------------------------------------------------------- */

static void run_job(rv_worker_fn fn)
{
    atomic_store(&failures, 0);
    atomic_store(&published, 0);
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_put_get(void **state)
{
    (void)state;
    run_job(body_put_get);
}

static void test_atomics(void **state)
{
    (void)state;
    run_job(body_atomics);
}

static void test_am_long(void **state)
{
    (void)state;
    for (int i = 0; i < 64; i++)
        atomic_store(&long_got[i], 0);
    run_job(body_am_long);
}

int main(int argc, char **argv)
{
    const char *group = "rma";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    if (rv_rma_init(ctx) != RV_OK ||
        rv_am_register(ctx, "test.publish", on_publish, NULL, &publish_id) !=
            RV_OK ||
        rv_am_register(ctx, "test.long", on_long, NULL, &long_id) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_atomics),
        cmocka_unit_test(test_am_long),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
