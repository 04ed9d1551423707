/*
 * Global pointers, atomic objects and the epoch manager as multi-process
 * jobs:
 * - compressed pointers round-trip; a pointer word swung by remote
 *   compare-swaps from every worker is linearizable (every value it held
 *   was replaced exactly once);
 * - ABA-counted objects: contended double-width CAS, locally and through
 *   the owner, count exactly; A -> B -> A is caught;
 * - epochs: an object is freed only three advances after it was deferred,
 *   and a token pinned in an older epoch blocks the advance;
 * - try_reclaim from every worker at once elects one reclaimer at a time
 *   (every epoch is reached exactly once);
 * - readers, writers and deleters on every worker of every process, with
 *   objects of every process swung in and out of shared slots: no reader
 *   ever sees a freed object (under ASan, a use after free aborts), and
 *   rv_epoch_clear frees everything deferred (counted; LSan would report a
 *   leak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_test.h"
#include "rv_epoch.h"

static rv_context_t *ctx;
static rv_handler_id_t publish_id, check_id;
static atomic_int published;

/* Shared words, in worker 0's registered memory. */
#define NSLOTS 32
#define LIN_K 100
#define ELECT_R 40
#define MAX_WORKERS 16
typedef struct {
    rv_gptr_t slot[NSLOTS];
    rv_gptr_aba_t aba;
    rv_gptr_t lin;
    uint64_t deferred, freed, successes;
    uint64_t seen[MAX_WORKERS * LIN_K + 1];
    uint64_t hits[MAX_WORKERS * ELECT_R + 2];
} shared_t;
static rv_rptr_t shared_ptr;

#define FIELD(f) rv_rptr_add(shared_ptr, offsetof(shared_t, f))

static rv_status_t on_publish(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    if (call->args_len == sizeof(shared_ptr) && rv_worker_local(w) == 0) {
        memcpy(&shared_ptr, call->args, sizeof(shared_ptr));
        atomic_fetch_add(&published, 1);
    }
    return RV_OK;
}

/* Worker 0 allocates the shared words; everyone learns where. */
static shared_t *share(rv_worker_t *w)
{
    shared_t *mem = NULL;
    if (rv_worker_tid(w) == 0) {
        rv_rptr_t p;
        mem = rv_mem_alloc(w, sizeof(shared_t), &p);
        EXPECT(mem != NULL && p.addr % 16 == 0, "shared words");
        if (mem != NULL)
            memset(mem, 0, sizeof(*mem));
        EXPECT(rv_broadcast(w, publish_id, &p, sizeof(p), NULL,
                            RV_NOTIFY_CONSUMED) == RV_OK, "publish");
    }
    WAIT_UNTIL(w, atomic_load(&published) > 0, "the shared words");
    rv_barrier(w);
    return mem;
}

/* ---------------------------------------------------------------------- */
/* Objects                                                                 */

#define LIVE 0x4c495645u
#define DEAD 0xdeadu

typedef struct {
    uint64_t magic, value, check;
} obj_t;

static _Atomic uint64_t freed_here; /* by this process, as owner */

static rv_gptr_t obj_new(rv_worker_t *w, uint64_t value)
{
    obj_t *o = malloc(sizeof(*o));
    EXPECT(o != NULL, "object");
    if (o == NULL)
        return RV_GPTR_NULL;
    *o = (obj_t){.magic = LIVE, .value = value, .check = ~value * 7};
    int rank = rv_rank(rv_worker_context(w));
    EXPECT(rv_gptr_fits(rank, o), "%p of rank %d fits 48 bits",
           (void *)o, rank);
    return rv_gptr_make(rank, o);
}

static bool obj_ok(const obj_t *o)
{
    return o->magic == LIVE && o->check == ~o->value * 7;
}

static void obj_free(rv_worker_t *w, void *obj, void *arg)
{
    obj_t *o = obj;
    (void)w;
    (void)arg;
    EXPECT(obj_ok(o), "freeing a damaged or freed object");
    o->magic = DEAD;
    free(o);
    atomic_fetch_add(&freed_here, 1);
}

/* At the owner: is the object alive? (Under ASan a freed one aborts.) */
static rv_status_t on_check(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rv_gptr_t g;
    uint64_t ok;
    (void)arg;
    memcpy(&g, call->args, sizeof(g));
    EXPECT((int)rv_gptr_rank(g) == rv_rank(rv_worker_context(w)),
           "check of rank %d's object at rank %d", rv_gptr_rank(g),
           rv_rank(rv_worker_context(w)));
    ok = obj_ok(rv_gptr_addr(g));
    memcpy(call->ret, &ok, sizeof(ok));
    call->ret_len = sizeof(ok);
    return RV_OK;
}

static bool obj_check(rv_worker_t *w, rv_gptr_t g)
{
    rv_context_t *c = rv_worker_context(w);
    if ((int)rv_gptr_rank(g) == rv_rank(c))
        return obj_ok(rv_gptr_addr(g));
    uint64_t ok = 0;
    EXPECT(rv_call_return(w,
                          rv_tid_make(c, (int)rv_gptr_rank(g),
                                      rv_worker_local(w)),
                          check_id, &g, sizeof(g), &ok, sizeof(ok), NULL,
                          0) == RV_OK, "check call");
    return ok == 1;
}

/* ---------------------------------------------------------------------- */
/* Global pointers and ABA objects                                         */

/* Compressed pointers round-trip, within their limits. */
static void gptr_compression(rv_rank_t rank)
{
    int x;
    rv_gptr_t g = rv_gptr_make(rank, &x);
    EXPECT(rv_gptr_rank(g) == rank && rv_gptr_addr(g) == (void *)&x,
           "round trip of %p", (void *)&x);
    EXPECT(rv_gptr_make(7, NULL) == RV_GPTR_NULL, "null");
    EXPECT(!rv_gptr_fits(RV_GPTR_MAX_RANK + 1, &x), "rank limit");
    EXPECT(!rv_gptr_fits(0, (void *)((uintptr_t)1 << 48)), "address limit");
}

/* The counts this worker added with rv_atomic_fadd have landed (a
 * fetch-add without a result completes locally; rv_flush completes it
 * at the target), then every worker is past the barrier: worker 0 may
 * read them. */
static void counts_landed(rv_worker_t *w)
{
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "flush");
    rv_barrier(w);
}

/* Linearizable swings: this worker's LIN_K values go into the shared word
 * by compare-swap, and every value swung out is counted in seen[]. */
static void gptr_swing(rv_worker_t *w, uint32_t n, uint32_t me,
                       rv_rank_t rank)
{
    for (uint32_t i = 0; i < LIN_K; i++) {
        uint64_t id = (uint64_t)me * LIN_K + i + 1;
        rv_gptr_t mine = rv_gptr_make(rank, (void *)(uintptr_t)(id << 4));
        rv_gptr_t seen;
        bool ok = false;
        EXPECT(rv_gptr_read(w, FIELD(lin), &seen) == RV_OK, "read");
        while (!ok) {
            EXPECT(rv_gptr_cswap(w, FIELD(lin), seen, mine, &ok) == RV_OK,
                   "cswap");
            if (!ok)
                EXPECT(rv_gptr_read(w, FIELD(lin), &seen) == RV_OK, "read");
        }
        uint64_t old = (uintptr_t)rv_gptr_addr(seen) >> 4;
        EXPECT(old < (uint64_t)n * LIN_K + 1, "swung out a value never "
               "stored: %#llx", (unsigned long long)seen);
        EXPECT(rv_atomic_fadd(w, rv_rptr_add(FIELD(seen), old * 8), 1, NULL,
                              NULL) == RV_OK, "count");
    }
}

/* At worker 0, after everyone swung: each value was replaced exactly
 * once, the ABA count is every worker's, and A -> B -> A is caught. */
static void gptr_check(rv_worker_t *w, shared_t *mem, uint32_t n)
{
    rv_gptr_t last = mem->lin;
    uint64_t last_id = (uintptr_t)rv_gptr_addr(last) >> 4;
    for (uint64_t id = 0; id <= (uint64_t)n * LIN_K; id++) {
        uint64_t want = id == last_id ? 0 : 1;
        EXPECT(mem->seen[id] == want, "value %llu was swung out %llu "
               "times, expected %llu", (unsigned long long)id,
               (unsigned long long)mem->seen[id],
               (unsigned long long)want);
    }
    rv_gptr_aba_t v = rv_gptr_aba_load(&mem->aba);
    EXPECT(v.count == (uint64_t)n * 50, "ABA count %llu after %u x 50 "
           "swaps", (unsigned long long)v.count, n);
    /* A -> B -> A: same pointer, another count; a stale CAS fails */
    rv_gptr_aba_t a, b;
    EXPECT(rv_gptr_aba_read(w, FIELD(aba), &a) == RV_OK, "read");
    EXPECT(rv_gptr_aba_exchange(w, FIELD(aba), a.ptr + 16, &b) ==
           RV_OK && b.ptr == a.ptr && b.count == a.count, "exchange");
    EXPECT(rv_gptr_aba_exchange(w, FIELD(aba), a.ptr, NULL) == RV_OK,
           "exchange back");
    bool ok = true;
    rv_gptr_aba_t now;
    EXPECT(rv_gptr_aba_cswap(w, FIELD(aba), a, 0, &ok, &now) == RV_OK,
           "stale cswap");
    EXPECT(!ok && now.ptr == a.ptr && now.count == a.count + 2,
           "A -> B -> A went unnoticed (count %llu, was %llu)",
           (unsigned long long)now.count, (unsigned long long)a.count);
    EXPECT(rv_gptr_aba_cswap(w, FIELD(aba), now, 0, &ok, NULL) ==
           RV_OK && ok, "fresh cswap");
}

static int body_gptr(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    rv_rank_t rank = rv_rank(ctx);
    shared_t *mem = share(w);
    (void)arg;

    gptr_compression(rank);
    gptr_swing(w, n, me, rank);

    /* ABA-counted: contended CAS from everyone (the owner's process
     * directly, the others through calls) */
    rv_gptr_t tag = rv_gptr_make(rank, (void *)(uintptr_t)((me + 1) << 4));
    for (int i = 0; i < 50; i++) {
        rv_gptr_aba_t cur;
        bool ok = false;
        EXPECT(rv_gptr_aba_read(w, FIELD(aba), &cur) == RV_OK, "aba read");
        while (!ok)
            EXPECT(rv_gptr_aba_cswap(w, FIELD(aba), cur, tag, &ok, &cur) ==
                   RV_OK, "aba cswap");
    }
    counts_landed(w);

    if (me == 0)
        gptr_check(w, mem, n);
    rv_barrier(w);
    if (mem != NULL)
        rv_mem_free(w, mem);
    return 0;
}

/* Local double-width CAS contended by plain threads. */
static rv_gptr_aba_t local_aba;
static void *aba_thread(void *arg)
{
    rv_gptr_t mine = (rv_gptr_t)(uintptr_t)arg;
    for (int i = 0; i < 100000; i++) {
        rv_gptr_aba_t cur = rv_gptr_aba_load(&local_aba);
        while (!rv_gptr_aba_cswap_local(&local_aba, cur, mine, &cur))
            ;
    }
    return NULL;
}

static void test_aba_local(void **state)
{
    pthread_t t[4];
    (void)state;
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, aba_thread,
                                        (void *)((i + 1) << 4)), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    rv_gptr_aba_t v = rv_gptr_aba_load(&local_aba);
    assert_int_equal(v.count, 400000);
    assert_true(v.ptr >= 16 && v.ptr <= 64 && v.ptr % 16 == 0);
    rv_gptr_aba_t old = rv_gptr_aba_exchange_local(&local_aba, 5);
    assert_true(old.ptr == v.ptr && old.count == v.count);
    v = rv_gptr_aba_load(&local_aba);
    assert_true(v.ptr == 5 && v.count == 400001);
}

/* ---------------------------------------------------------------------- */
/* Epochs, step by step                                                    */

static int body_epoch_steps(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    rv_epoch_manager_t *em;
    (void)arg;
    atomic_store(&freed_here, 0);
    rv_barrier(w);
    EXPECT(rv_epoch_manager_create(w, obj_free, NULL, &em) == RV_OK,
           "create");
    rv_epoch_token_t *tok = rv_epoch_register(em);
    EXPECT(tok != NULL, "register");
    rv_epoch_stats_t s;
    rv_epoch_stats(em, &s); /* before anyone can advance */
    uint64_t e0 = s.epoch, e = 0;
    rv_barrier(w);

    if (me == 0) {
        rv_gptr_t o = obj_new(w, 1);
        rv_epoch_pin(tok);
        rv_epoch_defer_delete(tok, o);
        rv_epoch_unpin(tok);
        EXPECT(rv_epoch_try_reclaim(w, em, &e) == RV_OK && e == e0 + 1,
               "first advance to %llu", (unsigned long long)e);
        EXPECT(atomic_load(&freed_here) == 0, "freed one epoch after");
        rv_epoch_pin(tok); /* in the new epoch */
        rv_epoch_unpin(tok);
        EXPECT(atomic_load(&freed_here) == 0, "freed one epoch after");
        EXPECT(rv_epoch_try_reclaim(w, em, &e) == RV_OK && e == e0 + 2,
               "second advance to %llu", (unsigned long long)e);
        /* two are not enough: a reader pinned in e0+1 may hold it */
        EXPECT(atomic_load(&freed_here) == 0, "freed two epochs after");
        EXPECT(rv_epoch_try_reclaim(w, em, &e) == RV_OK && e == e0 + 3,
               "third advance to %llu", (unsigned long long)e);
        EXPECT(atomic_load(&freed_here) == 1,
               "not freed three epochs after");
        /* a token pinned in an older epoch blocks the advance */
        rv_epoch_pin(tok);
    }
    rv_barrier(w);
    if (me == n - 1) {
        EXPECT(rv_epoch_try_reclaim(w, em, &e) == RV_OK && e == e0 + 4,
               "advance with worker 0 pinned in the current epoch");
        EXPECT(rv_epoch_try_reclaim(w, em, NULL) == RV_ERR_AGAIN,
               "advanced past a token pinned in an older epoch");
    }
    rv_barrier(w);
    if (me == 0)
        rv_epoch_unpin(tok);
    rv_barrier(w);
    if (me == n - 1)
        EXPECT(rv_epoch_try_reclaim(w, em, &e) == RV_OK && e == e0 + 5,
               "advance once unpinned");
    rv_barrier(w);
    rv_epoch_deregister(tok);
    EXPECT(rv_epoch_manager_destroy(w, em) == RV_OK, "destroy");
    return 0;
}

/* try_reclaim from every worker at once: one reclaimer at a time, so
 * every epoch is reached by exactly one caller. */
static int body_election(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    shared_t *mem = share(w);
    rv_epoch_manager_t *em;
    (void)arg;
    EXPECT(n <= MAX_WORKERS, "at most %d workers", MAX_WORKERS);
    EXPECT(rv_epoch_manager_create(w, obj_free, NULL, &em) == RV_OK,
           "create");
    rv_epoch_stats_t s;
    rv_epoch_stats(em, &s);
    uint64_t e0 = s.epoch, wins = 0;
    rv_barrier(w);
    for (int i = 0; i < ELECT_R; i++) {
        uint64_t e = 0;
        rv_status_t st = rv_epoch_try_reclaim(w, em, &e);
        EXPECT(st == RV_OK || st == RV_ERR_AGAIN, "try_reclaim: %s",
               rv_status_str(st));
        if (st != RV_OK)
            continue;
        wins++;
        EXPECT(e > e0 && e - e0 <= (uint64_t)n * ELECT_R, "epoch %llu",
               (unsigned long long)e);
        if (e > e0 && e - e0 <= (uint64_t)n * ELECT_R)
            EXPECT(rv_atomic_fadd(w, rv_rptr_add(FIELD(hits), (e - e0) * 8),
                                  1, NULL, NULL) == RV_OK, "hit");
    }
    EXPECT(rv_atomic_fadd(w, FIELD(successes), wins, NULL, NULL) == RV_OK,
           "wins");
    counts_landed(w);
    if (me == 0) {
        rv_epoch_stats(em, &s);
        uint64_t adv = s.epoch - e0;
        EXPECT(mem->successes == adv, "%llu elected advances, but the "
               "epoch moved %llu", (unsigned long long)mem->successes,
               (unsigned long long)adv);
        EXPECT(adv > 0, "nobody was elected");
        for (uint64_t k = 1; k <= adv; k++)
            EXPECT(mem->hits[k] == 1, "epoch +%llu reached %llu times",
                   (unsigned long long)k, (unsigned long long)mem->hits[k]);
    }
    rv_barrier(w);
    EXPECT(rv_epoch_manager_destroy(w, em) == RV_OK, "destroy");
    if (mem != NULL)
        rv_mem_free(w, mem);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Readers, writers and deleters everywhere                                */

static unsigned stress_iters(void)
{
    const char *s = getenv("RIVET_TEST_EPOCH_ITERS");
    return s != NULL ? (unsigned)atoi(s) : 3000;
}

/* The stress job's reads, swings and reclaims by this worker, pinned in
 * @p tok: no read may see a freed object. Returns how many objects it
 * deferred. */
static uint64_t stress_rounds(rv_worker_t *w, rv_epoch_manager_t *em,
                              rv_epoch_token_t *tok)
{
    uint32_t me = rv_worker_tid(w);
    unsigned seed = me * 2654435761u + 1, iters = stress_iters();
    uint64_t deferred = 0, reads = 0, bad = 0;
    for (unsigned i = 0; i < iters; i++) {
        unsigned r = rand_r(&seed);
        rv_rptr_t slot = rv_rptr_add(FIELD(slot), (r % NSLOTS) * 8);
        rv_epoch_pin(tok);
        rv_gptr_t cur;
        EXPECT(rv_gptr_read(w, slot, &cur) == RV_OK, "read slot");
        if ((r >> 8) % 10 < 3) {
            rv_gptr_t fresh = obj_new(w, ((uint64_t)me << 32) | i);
            bool ok = false;
            EXPECT(rv_gptr_cswap(w, slot, cur, fresh, &ok) == RV_OK,
                   "swing");
            if (ok) {
                rv_epoch_defer_delete(tok, cur);
                deferred++;
            } else {
                free(rv_gptr_addr(fresh)); /* never published */
            }
        } else {
            /* hold the reference a while: a reclaimer that does not wait
             * for this pin frees it under our feet */
            reads++;
            if (!obj_check(w, cur))
                bad++;
            if ((r >> 16) % 4 == 0) {
                sched_yield();
                rv_epoch_try_reclaim(w, em, NULL); /* inside a pin */
                if (!obj_check(w, cur))
                    bad++;
            }
        }
        rv_epoch_unpin(tok);
        if (i % 16 == 15) {
            rv_status_t st = rv_epoch_try_reclaim(w, em, NULL);
            EXPECT(st == RV_OK || st == RV_ERR_AGAIN, "try_reclaim: %s",
                   rv_status_str(st));
        }
    }
    EXPECT(bad == 0, "%llu of %llu reads saw a freed object",
           (unsigned long long)bad, (unsigned long long)reads);
    return deferred;
}

/* Adds what this process freed to the shared count (one worker of each
 * process), between barriers. */
static void count_freed_here(rv_worker_t *w)
{
    rv_barrier(w);
    if (rv_worker_local(w) == 0)
        EXPECT(rv_atomic_fadd(w, FIELD(freed), atomic_load(&freed_here),
                              NULL, NULL) == RV_OK, "count");
    counts_landed(w);
}

/* At worker 0: everything deferred was freed by clear; the objects still
 * in the slots are deferred too, for destroy's clear. */
static void stress_check_clear(rv_epoch_manager_t *em, shared_t *mem)
{
    EXPECT(mem->freed == mem->deferred, "%llu objects deferred, %llu "
           "freed", (unsigned long long)mem->deferred,
           (unsigned long long)mem->freed);
    EXPECT(mem->deferred > 0, "nothing was deferred");
    rv_epoch_stats_t s;
    rv_epoch_stats(em, &s);
    EXPECT(s.advanced > 0 || rv_nworkers(ctx) > 1, "no advance");
    /* the survivors go the same way, through destroy's clear */
    rv_epoch_token_t *tok = rv_epoch_register(em);
    rv_epoch_pin(tok);
    for (int i = 0; i < NSLOTS; i++)
        rv_epoch_defer_delete(tok, mem->slot[i]);
    rv_epoch_unpin(tok);
    rv_epoch_deregister(tok);
}

static int body_stress(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    shared_t *mem = share(w);
    rv_epoch_manager_t *em;
    (void)arg;
    atomic_store(&freed_here, 0);
    EXPECT(rv_epoch_manager_create(w, obj_free, NULL, &em) == RV_OK,
           "create");
    if (me == 0)
        for (int i = 0; i < NSLOTS; i++)
            mem->slot[i] = obj_new(w, (uint64_t)i);
    rv_barrier(w);

    rv_epoch_token_t *tok = rv_epoch_register(em);
    uint64_t deferred = stress_rounds(w, em, tok);
    rv_epoch_deregister(tok);
    EXPECT(rv_atomic_fadd(w, FIELD(deferred), deferred, NULL, NULL) == RV_OK,
           "count");
    counts_landed(w);

    /* everything deferred is freed by clear */
    if (me == 0)
        EXPECT(rv_epoch_clear(w, em) == RV_OK, "clear");
    count_freed_here(w);
    if (me == 0)
        stress_check_clear(em, mem);
    EXPECT(rv_epoch_manager_destroy(w, em) == RV_OK, "destroy");
    count_freed_here(w);
    if (me == 0) {
        /* freed_here counted twice: the first share again, plus slots */
        EXPECT(mem->freed == 2 * mem->deferred + NSLOTS,
               "%llu freed in all, expected %llu",
               (unsigned long long)mem->freed,
               (unsigned long long)(2 * mem->deferred + NSLOTS));
        rv_mem_free(w, mem);
    }
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

static void test_gptr(void **state)
{
    (void)state;
    run_job(body_gptr);
}

static void test_epoch_steps(void **state)
{
    (void)state;
    run_job(body_epoch_steps);
}

static void test_election(void **state)
{
    (void)state;
    run_job(body_election);
}

static void test_stress(void **state)
{
    (void)state;
    run_job(body_stress);
}

int main(int argc, char **argv)
{
    const char *group = "epoch";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    if (rv_rma_init(ctx) != RV_OK ||
        rv_am_register(ctx, "test.publish", on_publish, NULL, &publish_id) !=
            RV_OK ||
        rv_am_register(ctx, "test.check", on_check, NULL, &check_id) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aba_local),
        cmocka_unit_test(test_gptr),
        cmocka_unit_test(test_epoch_steps),
        cmocka_unit_test(test_election),
        cmocka_unit_test(test_stress),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
