/*
 * The object store, as a multi-process job in whatever transport and
 * shape ctest gives it: the calls and their error paths, objects of
 * every size fetched by every worker from every other with every byte
 * checked, one fetch per process however many threads ask, gets that
 * wait for a later seal or time out, deletion, eviction under pressure
 * that never touches an object in use, subscriptions that see every
 * seal exactly once, and deletes and evictions racing rendezvous reads.
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_store.h"

static rv_context_t *ctx;

/* The id of object @p k of worker @p tid in test @p test. */
static rv_object_id_t oid(const char *test, rv_tid_t tid, int k)
{
    char name[64];
    rv_object_id_t id;
    snprintf(name, sizeof(name), "%s/%u/%d", test, tid, k);
    rv_object_id_of(name, strlen(name), &id);
    return id;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint8_t pattern(rv_tid_t tid, int k, size_t i)
{
    return (uint8_t)(tid * 31u + (unsigned)k * 7u + i * 13u + (i >> 11));
}

/* Object @p k's metadata ("meta TID K"), none for odd k >= 100. */
static size_t meta_of(rv_tid_t tid, int k, char meta[32])
{
    if (k >= 100 && k % 2)
        return 0;
    return (size_t)snprintf(meta, 32, "meta %u %d", tid, k);
}

/* Creates, fills and seals object @p k of @p n bytes. */
static void put(rv_worker_t *w, const char *test, int k, size_t n)
{
    rv_tid_t me = rv_worker_tid(w);
    rv_object_id_t id = oid(test, me, k);
    char meta[32];
    size_t ml = meta_of(me, k, meta);
    void *data = NULL;
    rv_status_t st = rv_store_create(w, &id, n, ml ? meta : NULL, ml, &data);
    EXPECT(st == RV_OK, "create %s %d of %zu bytes: %s", test, k, n,
           rv_status_str(st));
    if (st != RV_OK)
        return;
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)data)[i] = pattern(me, k, i);
    EXPECT(rv_store_seal(w, &id) == RV_OK, "seal %s %d", test, k);
}

/* Checks every byte of a got object. */
static void check(const rv_store_buf_t *b, rv_tid_t tid, int k, size_t n)
{
    char meta[32];
    size_t ml = meta_of(tid, k, meta);
    EXPECT(b->data_size == n, "object %u/%d has %zu bytes, expected %zu", tid,
           k, b->data_size, n);
    EXPECT(b->meta_size == ml &&
               (ml == 0 ? b->meta == NULL
                        : b->meta != NULL && memcmp(b->meta, meta, ml) == 0),
           "object %u/%d: wrong metadata", tid, k);
    if (b->data_size != n)
        return;
    const uint8_t *d = b->data;
    for (size_t i = 0; i < n; i++)
        if (d[i] != pattern(tid, k, i)) {
            FAIL("object %u/%d: byte %zu of %zu is %u, expected %u", tid, k,
                 i, n, d[i], pattern(tid, k, i));
            return;
        }
}

/* ---------------------------------------------------------------------- */
/* The calls on one process, and their errors                              */

static int body_local(rv_worker_t *w, void *arg)
{
    rv_tid_t me = rv_worker_tid(w);
    rv_object_id_t id = oid("local", me, 0), other = oid("local", me, 1);
    void *data;
    bool has = true;
    (void)arg;

    EXPECT(rv_store_contains(w, &id, &has) == RV_OK && !has, "contains");
    put(w, "local", 0, 1000);
    EXPECT(rv_store_contains(w, &id, &has) == RV_OK && has, "contains");
    EXPECT(rv_store_create(w, &id, 10, NULL, 0, &data) == RV_ERR_EXISTS,
           "double create");
    EXPECT(rv_store_seal(w, &id) == RV_ERR_NOT_FOUND, "double seal");
    EXPECT(rv_store_seal(w, &other) == RV_ERR_NOT_FOUND, "seal unknown");
    EXPECT(rv_store_release(w, &id) == RV_ERR_NOT_FOUND,
           "release without a get");
    rv_store_buf_t b;
    EXPECT(rv_store_get(w, &id, 1, 0, &b, NULL) == RV_OK, "get local");
    check(&b, me, 0, 1000);
    EXPECT(rv_store_release(w, &id) == RV_OK, "release");
    EXPECT(rv_store_release(w, &id) == RV_ERR_NOT_FOUND, "release twice");

    /* An aborted create leaves nothing. */
    EXPECT(rv_store_create(w, &other, 64, NULL, 0, &data) == RV_OK, "create");
    EXPECT(rv_store_abort(w, &other) == RV_OK, "abort");
    EXPECT(rv_store_abort(w, &other) == RV_ERR_NOT_FOUND, "abort twice");
    EXPECT(rv_store_contains(w, &other, &has) == RV_OK && !has,
           "an aborted object is gone");
    /* Metadata too large, NULL metadata with a size. */
    EXPECT(rv_store_create(w, &other, 1, NULL, 4, &data) == RV_ERR_INVALID,
           "NULL metadata");
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Every size, from every worker to every other                           */

/* Objects 100.. of the remote test: 0 B, 1 B, the threshold's
 * neighbours (without metadata, so that the data is the whole size), and
 * larger ones. Odd ones have no metadata. */
#define NSIZES 8

static void sizes_of(rv_worker_t *w, size_t s[NSIZES])
{
    size_t t = rv_store_rndv_threshold(w);
    size_t v[NSIZES] = {0, 1, t ? t - 1 : 2, t, t + 1, (size_t)100 << 10,
                        (size_t)1 << 20, (size_t)3 << 20};
    memcpy(s, v, sizeof(v));
}

/* Object k's number: boundaries (t-1, t, t+1) odd, without metadata. */
static int knum(int k)
{
    return 100 + 2 * k + (k >= 2 && k <= 4);
}

static int body_remote(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    int threads = rv_threads(ctx), nsizes = NSIZES;
    size_t sizes[NSIZES];
    (void)arg;
    sizes_of(w, sizes);
    for (int k = 0; k < nsizes; k++)
        put(w, "remote", knum(k), sizes[k]);
    /* And one of 64 MiB, from worker 0, fetched by every other process. */
    size_t big = (size_t)64 << 20;
    if (me == 0)
        put(w, "remote-big", 0, big);
    rv_barrier(w);
    rv_object_id_t bid = oid("remote-big", 0, 0);
    rv_store_buf_t bb;
    EXPECT(rv_store_get(w, &bid, 1, RV_STORE_WAIT_FOREVER, &bb, NULL) ==
               RV_OK, "get of 64 MiB");
    if (bb.data_size == big) {
        check(&bb, 0, 0, big);
        rv_store_release(w, &bid);
    }

    /* Every object of every worker, all in one get: the threads of a
     * process ask for the same remote objects at the same time. */
    size_t total = (size_t)n * (size_t)nsizes;
    rv_object_id_t *ids = calloc(total, sizeof(*ids));
    rv_store_buf_t *bufs = calloc(total, sizeof(*bufs));
    rv_status_t *sts = calloc(total, sizeof(*sts));
    for (uint32_t t = 0; t < n; t++)
        for (int k = 0; k < nsizes; k++)
            ids[t * (size_t)nsizes + (size_t)k] = oid("remote", t, knum(k));
    rv_status_t st = rv_store_get(w, ids, total, RV_STORE_WAIT_FOREVER, bufs,
                                  sts);
    EXPECT(st == RV_OK, "get of every object: %s", rv_status_str(st));
    for (uint32_t t = 0; t < n; t++)
        for (int k = 0; k < nsizes; k++) {
            size_t i = t * (size_t)nsizes + (size_t)k;
            EXPECT(sts[i] == RV_OK, "object %u/%d: %s", t, knum(k),
                   rv_status_str(sts[i]));
            if (sts[i] == RV_OK)
                check(&bufs[i], t, knum(k), sizes[k]);
        }
    rv_barrier(w);
    /* One fetch per remote object per process. */
    rv_store_stats_t s;
    rv_store_stats(w, &s);
    uint64_t remote = (uint64_t)(n - (uint32_t)threads) * (uint64_t)nsizes +
                      (me >= (uint32_t)threads);
    EXPECT(s.fetches_eager + s.fetches_rndv == remote,
           "worker %u: %llu eager and %llu rendezvous fetches, expected %llu "
           "in all", me, (unsigned long long)s.fetches_eager,
           (unsigned long long)s.fetches_rndv, (unsigned long long)remote);
    EXPECT(s.evictions == 0, "evictions");
    for (size_t i = 0; i < total; i++)
        if (sts[i] == RV_OK)
            EXPECT(rv_store_release(w, &ids[i]) == RV_OK, "release");
    free(ids);
    free(bufs);
    free(sts);
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Gets that wait for a later seal, or time out                            */

static int body_wait(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    rv_tid_t last = n - 1;
    rv_object_id_t later = oid("wait", last, 0), never = oid("wait", me, 99);
    rv_store_buf_t b, b2;
    rv_status_t st = RV_ERR_INVALID, st2;
    rv_sync_t sync;
    (void)arg;

    /* Not sealed anywhere: timeout 0 answers at once, 50 ms waits. */
    EXPECT(rv_store_get(w, &never, 1, 0, &b2, &st2) == RV_ERR_TIMEOUT,
           "timeout 0");
    EXPECT(b2.data == NULL, "no view after a timeout");
    int64_t t0 = now_ms();
    EXPECT(rv_store_get(w, &never, 1, 50, &b2, &st2) == RV_ERR_TIMEOUT,
           "timeout 50 ms");
    EXPECT(now_ms() - t0 >= 45, "the get waited %lld ms",
           (long long)(now_ms() - t0));

    /* Every worker asks for an object the last one seals after the
     * barrier. */
    rv_sync_init(&sync, 0);
    EXPECT(rv_store_get_async(w, &later, 1, RV_STORE_WAIT_FOREVER, &b, &st,
                              &sync) == RV_OK, "get_async");
    rv_barrier(w);
    if (me == last)
        put(w, "wait", 0, 5000);
    EXPECT(rv_sync_wait(w, &sync) == RV_OK && st == RV_OK,
           "the waiting get: %s", rv_status_str(st));
    if (st == RV_OK) {
        check(&b, last, 0, 5000);
        rv_store_release(w, &later);
    }
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Deletion                                                                */

static int body_delete(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    rv_object_id_t id = oid("delete", 0, 0);
    rv_store_buf_t b;
    (void)arg;
    if (me == 0)
        put(w, "delete", 0, (size_t)200 << 10);
    rv_barrier(w);
    rv_status_t got = rv_store_get(w, &id, 1, RV_STORE_WAIT_FOREVER, &b, NULL);
    EXPECT(got == RV_OK, "get: %s", rv_status_str(got));
    check(&b, 0, 0, (size_t)200 << 10);
    if (me == 0)
        EXPECT(rv_store_delete(w, &id) == RV_ERR_AGAIN,
               "delete of an object in use here");
    rv_store_release(w, &id);
    /* Every fetched copy is registered at the home (its calls ran). */
    rv_quiesce(w);
    if (me == 0) {
        EXPECT(rv_store_delete(w, &id) == RV_OK, "delete");
        EXPECT(rv_store_delete(w, &id) == RV_ERR_NOT_FOUND, "delete twice");
    }
    rv_barrier(w);
    rv_status_t st = rv_store_get(w, &id, 1, 100, &b, NULL);
    EXPECT(st == RV_ERR_NOT_FOUND, "get of a deleted object: %s",
           rv_status_str(st));
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Subscriptions                                                           */

#define SUB_SEALS 3

typedef struct {
    uint32_t seen[64][SUB_SEALS];
} subs_t;

static subs_t *subs;

static void on_seal(rv_worker_t *w, const rv_object_id_t *id,
                    size_t data_size, rv_rank_t owner, void *arg)
{
    subs_t *s = &subs[rv_worker_local(w)];
    uint32_t n = rv_nworkers(ctx);
    (void)arg;
    for (uint32_t t = 0; t < n && t < 64; t++)
        for (int k = 0; k < SUB_SEALS; k++) {
            rv_object_id_t want = oid("sub", t, k);
            if (memcmp(&want, id, sizeof(want)) == 0) {
                EXPECT(data_size == (size_t)k * 10 &&
                           owner == (rv_rank_t)(t / (uint32_t)rv_threads(ctx)),
                       "seal of %u/%d: size %zu, rank %d", t, k, data_size,
                       (int)owner);
                s->seen[t][k]++;
                return;
            }
        }
    FAIL("a seal of an object this test did not make");
}

static int body_subscribe(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx);
    (void)arg;
    EXPECT(rv_store_subscribe(w, RV_STORE_SCOPE_JOB, on_seal, NULL) == RV_OK,
           "subscribe");
    EXPECT(rv_store_subscribe(w, RV_STORE_SCOPE_JOB, on_seal, NULL) ==
               RV_ERR_EXISTS, "subscribe twice");
    rv_barrier(w);
    for (int k = 0; k < SUB_SEALS; k++)
        put(w, "sub", k, (size_t)k * 10);
    rv_quiesce(w);
    rv_barrier(w);
    subs_t *s = &subs[rv_worker_local(w)];
    for (uint32_t t = 0; t < n && t < 64; t++)
        for (int k = 0; k < SUB_SEALS; k++)
            EXPECT(s->seen[t][k] == 1, "worker %u saw the seal of %u/%d %u "
                   "times", rv_worker_tid(w), t, k, s->seen[t][k]);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Eviction (run with store.capacity 4 MiB)                                */

static int body_evict(rv_worker_t *w, void *arg)
{
    rv_tid_t me = rv_worker_tid(w);
    size_t mib = (size_t)1 << 20;
    rv_store_buf_t keep;
    (void)arg;
    /* One worker per process fills the store: 1 MiB objects, the first
     * kept referenced. */
    if (rv_worker_local(w) == 0) {
        put(w, "evict", 0, mib);
        rv_object_id_t id0 = oid("evict", me, 0);
        EXPECT(rv_store_get(w, &id0, 1, 0, &keep, NULL) == RV_OK, "get");
        for (int k = 1; k < 12; k++)
            put(w, "evict", k, mib);
        rv_store_stats_t s;
        rv_store_stats(w, &s);
        EXPECT(s.evictions >= 8, "%llu evictions",
               (unsigned long long)s.evictions);
        EXPECT(s.bytes <= 4 * mib, "%llu bytes held over the capacity",
               (unsigned long long)s.bytes);
        /* The referenced one is intact. */
        check(&keep, me, 0, mib);
        /* Everything referenced: the store is full, and says so. */
        rv_store_buf_t more[3];
        rv_object_id_t ids[3];
        int got = 0;
        for (int k = 9; k < 12; k++) {
            ids[got] = oid("evict", me, k);
            if (rv_store_get(w, &ids[got], 1, 0, &more[got], NULL) == RV_OK)
                got++;
        }
        void *data;
        rv_object_id_t big = oid("evict", me, 50);
        EXPECT(rv_store_create(w, &big, 2 * mib, NULL, 0, &data) ==
                   RV_ERR_NO_MEMORY, "a create beyond capacity");
        for (int i = 0; i < got; i++)
            rv_store_release(w, &ids[i]);
        rv_object_id_t id0b = oid("evict", me, 0);
        rv_store_release(w, &id0b);
        EXPECT(rv_store_create(w, &big, 2 * mib, NULL, 0, &data) == RV_OK,
               "a create once released");
        rv_store_abort(w, &big);
    }
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* An owner that dies (run under expect.sh --fail): the job ends naming
 * it, the fetch neither hangs nor leaves a process behind, and what the
 * fetch saw is printed: an error naming the dead rank passes, a get that
 * returns RV_OK (with whatever data) fails. rivetrun ends the job with
 * SIGTERM as soon as the owner dies; main blocks it in this group, so
 * that a get that returns in the 2 s before rivetrun's SIGKILL is
 * reported, not cut short.                                               */

#define DEATH_SIZE ((size_t)8 << 20)

/* Job starts: with store.rndv_threshold auto, every job's start sends
 * the calibration's first call the moment the job's connections are made
 * (a call UCX's tcp transport lost now and then while two workers'
 * connections to each other were still being settled). */
#define STARTS 60

static int body_start(rv_worker_t *w, void *arg)
{
    (void)arg;
    rv_barrier(w);
    return 0;
}

static void run_job(rv_worker_fn fn);

/* The fetcher: what its get from the dead owner returned. */
static void death_fetch(rv_worker_t *w, const rv_object_id_t *id)
{
    rv_store_buf_t b;
    printf("store-death: worker %u fetches an object of rank 1\n",
           rv_worker_tid(w));
    fflush(stdout);
    rv_status_t st = rv_store_get(w, id, 1, RV_STORE_WAIT_FOREVER, &b, NULL);
    if (st != RV_OK) {
        printf("store-death: the get from rank 1, which died, failed: %s\n",
               rv_status_str(st));
        fflush(stdout);
        return;
    }
    check(&b, 1, 0, DEATH_SIZE);
    FAIL("the get from rank 1, which died, returned RV_OK");
    rv_store_release(w, id);
}

static int body_death(rv_worker_t *w, void *arg)
{
    rv_object_id_t id = oid("death", 1, 0);
    (void)arg;
    if (rv_worker_tid(w) == 1) {
        put(w, "death", 0, DEATH_SIZE);
        rv_quiesce(w);
        /* Dies holding the only copy, once the fetch has begun (pinned
         * for the reader, or served eagerly). */
        rv_store_stats_t s = {0};
        while (s.pinned_bytes == 0 && s.served == 0) {
            rv_progress(w);
            rv_store_stats(w, &s);
        }
        _exit(3);
    }
    rv_quiesce(w);
    death_fetch(w, &id);
    return 0;
}

static void test_death(void **state)
{
    (void)state;
    run_job(body_death);
}

/* ---------------------------------------------------------------------- */

/* ---------------------------------------------------------------------- */
/* Churn: deletes and evictions racing reads                               */

#define CHURN_ROUNDS 120

/* Round @p r's object, of 64, 128 or 256 KiB, owned by worker r % n. */
static size_t churn_size(int r)
{
    return ((size_t)64 << 10) << (r % 3);
}

/* The owner deletes its object as soon as everyone may have started
 * reading it, while the others fetch it (by rendezvous reads, with the
 * store's capacity small enough that copies are evicted under them): a
 * get returns the object with every byte right, or RV_ERR_NOT_FOUND;
 * nothing is freed under a read in flight (AddressSanitizer's build runs
 * this too). */
static int body_churn(rv_worker_t *w, void *arg)
{
    rv_tid_t me = rv_worker_tid(w);
    uint32_t n = rv_nworkers(ctx);
    int got = 0, gone = 0;
    (void)arg;
    for (int r = 0; r < CHURN_ROUNDS; r++) {
        rv_tid_t owner = (rv_tid_t)(r % (int)n);
        rv_object_id_t id = oid("churn", owner, r);
        if (me == owner)
            put(w, "churn", r, churn_size(r));
        rv_barrier(w);
        if (me == owner) {
            rv_status_t st;
            while ((st = rv_store_delete(w, &id)) == RV_ERR_AGAIN)
                rv_progress(w); /* a thread of this process still reads */
            EXPECT(st == RV_OK, "round %d: delete: %s", r,
                   rv_status_str(st));
        } else {
            rv_store_buf_t b;
            rv_status_t st = rv_store_get(w, &id, 1, RV_STORE_WAIT_FOREVER,
                                          &b, NULL);
            if (st == RV_OK) {
                check(&b, owner, r, churn_size(r));
                rv_store_release(w, &id);
                got++;
            } else {
                EXPECT(st == RV_ERR_NOT_FOUND, "round %d: get: %s", r,
                       rv_status_str(st));
                gone++;
            }
        }
        rv_barrier(w);
    }
    printf("store-churn: worker %u got %d objects, %d were deleted first\n",
           me, got, gone);
    return 0;
}

static void run_job(rv_worker_fn fn)
{
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_local(void **state)
{
    (void)state;
    run_job(body_local);
}

static void test_remote(void **state)
{
    (void)state;
    run_job(body_remote);
}

static void test_wait(void **state)
{
    (void)state;
    run_job(body_wait);
}

static void test_delete(void **state)
{
    (void)state;
    run_job(body_delete);
}

static void test_subscribe(void **state)
{
    (void)state;
    subs = calloc((size_t)rv_threads(ctx), sizeof(*subs));
    run_job(body_subscribe);
    free(subs);
}

static void test_evict(void **state)
{
    (void)state;
    run_job(body_evict);
}

static void test_starts(void **state)
{
    (void)state;
    for (int i = 0; i < STARTS; i++)
        run_job(body_start);
}

static void test_churn(void **state)
{
    (void)state;
    run_job(body_churn);
}

/* Blocks rivetrun's SIGTERM in every thread of the process (store-death:
 * see above); its SIGKILL still ends the process. */
static void block_sigterm(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int main(int argc, char **argv)
{
    const char *group = "store";
    /* Before rv_init, so that the threads it starts inherit the mask. */
    if (argc > 1 && strstr(argv[argc - 1], "death") != NULL)
        block_sigterm();
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    if (rv_store_init(ctx) != RV_OK)
        return 1;
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_local),    cmocka_unit_test(test_remote),
        cmocka_unit_test(test_wait),     cmocka_unit_test(test_delete),
        cmocka_unit_test(test_subscribe),
    };
    const struct CMUnitTest evict[] = {cmocka_unit_test(test_evict)};
    const struct CMUnitTest death[] = {cmocka_unit_test(test_death)};
    const struct CMUnitTest churn[] = {cmocka_unit_test(test_churn)};
    const struct CMUnitTest starts[] = {cmocka_unit_test(test_starts)};
    const struct CMUnitTest *tests = all;
    size_t nchecks = sizeof(all) / sizeof(all[0]);
    if (strstr(group, "evict") != NULL)
        tests = evict, nchecks = 1;
    else if (strstr(group, "death") != NULL)
        tests = death, nchecks = 1;
    else if (strstr(group, "churn") != NULL)
        tests = churn, nchecks = 1;
    else if (strstr(group, "starts") != NULL)
        tests = starts, nchecks = 1;
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
