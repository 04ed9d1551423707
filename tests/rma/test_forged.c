/*
 * Calls whose headers lie, fed through the transport as another process
 * would send them: every one must be dropped and counted at the target,
 * never run, and must leave the target's memory untouched. Worker 0 of
 * rank 0 forges; worker 0 of rank 1 is the target, whose canary (memory of
 * its process that is not registered) each forgery aims at:
 *
 *   local    a call claiming the local bypass (AM_LOCAL with AM_NOTIFY and
 *            AM_RETURN): its result pointer would be written to and its
 *            sync pointer completed;
 *   place    an extended call placing its buffer at the canary (AM_XPLACE);
 *   ref      an extended call naming the canary as its buffer (AM_XREF);
 *   bcast    a broadcast naming a root that is no worker;
 *   routed   a routed call record (am.routing's forwarding) in a job that
 *            does not route, and one naming a worker that does not exist;
 *   aba      rivet.rma.aba on the canary (refused with RV_ERR_INVALID).
 *
 * An AM Long envelope whose landing word is far ahead of any payload the
 * forger put: the target must drop it and count it, not wait for that
 * payload for ever (which held the source's later calls for good). A real
 * AM Long of the forger comes first, so that the target's landing words
 * exist, and its handler runs once.
 *
 * A good call follows them (per-pair FIFO): when it has run, the target
 * checks that no forged one ran, that its canary holds, and that it counted
 * each forgery once in job.stats (rx_malformed). The rest of the rma suite
 * shows that legitimate extended calls and ABA operations still run.
 *
 * Call completions (rivet.am.done, rivet.am.dones) sent to a caller that
 * awaits none: one naming the caller's memory as its synchronizer and
 * result (what a completion carried before calls were named by pending
 * slots), and a batch of two, one of them naming a slot that is free.
 * Each is dropped and counted, and the caller's memory is untouched.
 *
 * The object store's transfer messages, at the owner (rank 1) of an
 * object: a FIN from a worker that holds no pin, a piece request whose
 * offset wraps around past the object's end (from a worker that did pin
 * it), and a FIN repeated after the reader's own. Each is dropped and
 * counted; the object stays, unpinned, and readable.
 *
 * Usage: test_forged (a 2x1 job).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "am_internal.h"
#include "job_test.h"
#include "rv_gptr.h"
#include "rv_rma.h"
#include "rv_store.h"

/* The forgeries sent as calls (four with a call header, two routed
 * records: see forge_routed), and the ABA operation. */
#define FORGED_CALLS 6
#define FORGED_TOTAL (FORGED_CALLS + 1)
#define CANARY 0x5afe5afe5afe5afeull

static rv_context_t *ctx;
static rv_handler_id_t victim_id, addr_id, long_id;
static _Alignas(16) uint64_t canary[4]; /* the target's, not registered */
static atomic_int victim_runs, good_runs, long_runs;
static _Atomic uint64_t target_canary; /* the target's &canary, at rank 0 */
static rv_object_id_t obj_id;          /* the store's part */
static atomic_int obj_sealed, store_done;

static rv_status_t on_victim(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)arg;
    if (call->args_len == 1 && *(const uint8_t *)call->args == 'G')
        atomic_fetch_add(&good_runs, 1);
    else
        atomic_fetch_add(&victim_runs, 1);
    return RV_OK;
}

static rv_status_t on_addr(rv_worker_t *w, rv_call_t *call, void *arg)
{
    uint64_t a;
    (void)w;
    (void)arg;
    if (call->args_len == sizeof(a)) {
        memcpy(&a, call->args, sizeof(a));
        atomic_store(&target_canary, a);
    } else if (atomic_load(&obj_sealed) == 0) {
        atomic_store(&obj_sealed, 1);
    } else {
        atomic_store(&store_done, 1);
    }
    return RV_OK;
}

/* One forged call to @p dest: header @p h, 8 argument bytes, and @p n
 * buffer bytes, as the unaggregated send path carries a call. */
static void forge(rv_worker_t *w, rv_tid_t dest, am_hdr_t h, size_t n)
{
    uint8_t body[16] = {'F',  'O',  'R',  'G',  'E',  'D',  0,    0,
                        0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee};
    struct iovec iov = {.iov_base = body, .iov_len = 8 + n};
    h.args_len = 8;
    EXPECT(rv_send_raw(w, dest, victim_id, &h, sizeof(h), &iov, 1, RV_SEND_COPY,
                       NULL, NULL) == RV_OK,
           "forged send");
}

/* A batch of one routed call record (AM_REC_FRUN) from worker @p src to
 * worker @p dst, as a forwarding worker's batch carries it: dropped in a
 * job that does not route calls (this one: am.routing direct), and in
 * any job when it names no worker. */
static void forge_routed(rv_worker_t *w, rv_tid_t dest, uint32_t dst,
                         uint32_t src)
{
    uint8_t batch[sizeof(am_rec_t) + 16 + AM_REC_FOOTER] = {0};
    am_rec_t rec = {.handler = victim_id,
                    .len = 16,
                    .meta = AM_REC_FRUN | 8u << AM_REC_ALEN_SHIFT};
    uint32_t route[2] = {dst, src};
    memcpy(batch, &rec, sizeof(rec));
    memcpy(batch + sizeof(rec), route, sizeof(route));
    memcpy(batch + sizeof(rec) + sizeof(route), "FORGED!", 8);
    struct iovec iov = {.iov_base = batch, .iov_len = sizeof(batch)};
    EXPECT(rv_send_raw(w, dest, rv_handler_id("rivet.am.batch"), NULL, 0, &iov,
                       1, RV_SEND_COPY, NULL, NULL) == RV_OK,
           "forged routed batch");
}

static void forger(rv_worker_t *w)
{
    rv_tid_t target = rv_tid_make(ctx, 1, 0);
    WAIT_UNTIL(w, atomic_load(&target_canary) != 0, "the target's address");
    uint64_t at = atomic_load(&target_canary);
    uint32_t flags = AM_LOCAL | AM_NOTIFY | AM_RETURN;
    forge(w, target,
          (am_hdr_t){.flags = flags, .sync = at, .ret = at, .ret_len = 16}, 0);
    forge(w, target, (am_hdr_t){.flags = AM_XPLACE, .ret = at}, 8);
    forge(w, target, (am_hdr_t){.flags = AM_XREF, .ret = at, .ret_len = 8}, 0);
    forge(w, target, (am_hdr_t){.flags = AM_BCAST, .root = 1000}, 0);
    forge_routed(w, target, target, 0);
    forge_routed(w, target, 1000, 0);

    rv_rptr_t obj = {.addr = at, .rank = 1, .region = 0};
    rv_gptr_aba_t old;
    rv_status_t st = rv_gptr_aba_exchange(w, obj, 0x1234, &old);
    EXPECT(st == RV_ERR_INVALID,
           "an ABA exchange on unregistered memory of rank 1 returned %s",
           rv_status_str(st));

    uint8_t g = 'G';
    EXPECT(rv_call(w, target, victim_id, &g, 1, NULL, 0) == RV_OK, "good call");
    EXPECT(rv_flush(w, target) == RV_OK, "flush");
}

static void target(rv_worker_t *w)
{
    rv_worker_stats_t before, after;
    rv_worker_stats(w, &before);
    uint64_t at = (uintptr_t)canary;
    EXPECT(rv_call(w, 0, addr_id, &at, sizeof(at), NULL, 0) == RV_OK,
           "publish the canary's address");
    EXPECT(rv_flush(w, 0) == RV_OK, "flush");
    WAIT_UNTIL(w, atomic_load(&good_runs) == 1, "the good call");
    rv_worker_stats(w, &after);
    EXPECT(atomic_load(&victim_runs) == 0, "%d forged calls ran",
           atomic_load(&victim_runs));
    for (int i = 0; i < 4; i++)
        EXPECT(canary[i] == CANARY, "canary word %d became 0x%llx", i,
               (unsigned long long)canary[i]);
    uint64_t dropped = after.rx_malformed - before.rx_malformed;
    EXPECT(dropped == FORGED_TOTAL,
           "%llu forgeries counted as malformed, expected %d",
           (unsigned long long)dropped, FORGED_TOTAL);
}

static rv_status_t on_long(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)call;
    (void)arg;
    atomic_fetch_add(&long_runs, 1);
    return RV_OK;
}

/* Above the payload that travels inside the envelope (8 KiB): by
 * reassembly, with a landing word. */
#define LONG_BYTES (64u << 10)
#define FORGED_WORD_AHEAD 1000

static void long_forger(rv_worker_t *w)
{
    rv_tid_t target = rv_tid_make(ctx, 1, 0);
    rv_rptr_t dst;
    uint8_t *src = malloc(LONG_BYTES);
    EXPECT(src != NULL, "memory");
    if (src == NULL)
        return;
    memset(src, 0x4c, LONG_BYTES);
    EXPECT(rv_remote_alloc(w, target, LONG_BYTES, &dst) == RV_OK,
           "remote allocation at the target");
    uint8_t l = 'L';
    EXPECT(rv_put_handler(w, target, long_id, &l, 1, dst, src, LONG_BYTES, NULL,
                          0) == RV_OK,
           "a real AM Long");
    EXPECT(rv_flush(w, target) == RV_OK, "flush");
    /* The envelope of an AM Long whose payload was never put. */
    /* The first call hook registered in the process: rma registers AM
     * Long's, then rv_get_handler's, in rv_rma_init, before anything
     * else of this program registers one. */
    unsigned hook = 0;
    am_hdr_t h = {.flags = AM_XREF | AM_XHOOK | (hook << AM_XHOOK_SHIFT),
                  .ret = dst.addr,
                  .ret_len = LONG_BYTES,
                  .root = FORGED_WORD_AHEAD,
                  .args_len = 1};
    struct iovec iov = {.iov_base = &l, .iov_len = 1};
    EXPECT(rv_send_raw(w, target, long_id, &h, sizeof(h), &iov, 1, RV_SEND_COPY,
                       NULL, NULL) == RV_OK,
           "forged envelope");
    uint8_t g = 'G';
    EXPECT(rv_call(w, target, victim_id, &g, 1, NULL, 0) == RV_OK, "good call");
    EXPECT(rv_flush(w, target) == RV_OK, "flush");
    free(src);
}

static void long_target(rv_worker_t *w)
{
    rv_worker_stats_t before, after;
    rv_worker_stats(w, &before);
    WAIT_UNTIL(w, atomic_load(&good_runs) == 1, "the call after the forgery");
    rv_worker_stats(w, &after);
    EXPECT(atomic_load(&long_runs) == 1,
           "%d AM Long handlers ran, expected "
           "the real one only",
           atomic_load(&long_runs));
    uint64_t dropped = after.rx_malformed - before.rx_malformed;
    EXPECT(dropped == 1, "%llu forgeries counted as malformed, expected 1",
           (unsigned long long)dropped);
}

static int body_long(rv_worker_t *w, void *arg)
{
    (void)arg;
    atomic_store(&good_runs, 0);
    rv_barrier(w);
    if (rv_worker_tid(w) == 0)
        long_forger(w);
    else if (rv_worker_tid(w) == rv_tid_make(ctx, 1, 0))
        long_target(w);
    rv_barrier(w);
    return 0;
}

static int body_forged(rv_worker_t *w, void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++)
        canary[i] = CANARY;
    rv_barrier(w);
    if (rv_worker_tid(w) == 0)
        forger(w);
    else if (rv_worker_tid(w) == rv_tid_make(ctx, 1, 0))
        target(w);
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Forged completions                                                      */

static _Alignas(16) uint64_t caller_canary[4]; /* rank 0's */

static void answer_forger(rv_worker_t *w)
{
    rv_tid_t caller = 0;
    WAIT_UNTIL(w, atomic_load(&target_canary) != 0, "the caller's address");
    uint64_t at = atomic_load(&target_canary);
    uint8_t result[8];
    memset(result, 0xee, sizeof(result));
    struct iovec iov = {.iov_base = result, .iov_len = sizeof(result)};
    am_done_t d = {.sync = at, .ret = at + 16, .ret_len = 8};
    EXPECT(rv_send_raw(w, caller, rv_handler_id("rivet.am.done"), &d, sizeof(d),
                       &iov, 1, RV_SEND_COPY, NULL, NULL) == RV_OK,
           "forged am.done");
    struct {
        am_dgroup_t g;
        uint64_t e[2][2]; /* [token][result] */
    } dones = {.g = {.ret_len = 8, .count = 2},
               .e = {{at, 0xeeeeeeeeeeeeeeeeull},
                     {(uint64_t)1 << 32 | 7, 0xeeeeeeeeeeeeeeeeull}}};
    iov = (struct iovec){.iov_base = &dones, .iov_len = sizeof(dones)};
    EXPECT(rv_send_raw(w, caller, rv_handler_id("rivet.am.dones"), NULL, 0,
                       &iov, 1, RV_SEND_COPY, NULL, NULL) == RV_OK,
           "forged am.dones");
    uint8_t g = 'G';
    EXPECT(rv_call(w, caller, victim_id, &g, 1, NULL, 0) == RV_OK, "good");
    EXPECT(rv_flush(w, caller) == RV_OK, "flush");
}

static void answer_caller(rv_worker_t *w)
{
    rv_worker_stats_t before, after;
    rv_worker_stats(w, &before);
    uint64_t at = (uintptr_t)caller_canary;
    EXPECT(rv_call(w, rv_tid_make(ctx, 1, 0), addr_id, &at, sizeof(at), NULL,
                   0) == RV_OK,
           "publish the canary's address");
    EXPECT(rv_flush(w, rv_tid_make(ctx, 1, 0)) == RV_OK, "flush");
    WAIT_UNTIL(w, atomic_load(&good_runs) == 1, "the good call");
    rv_worker_stats(w, &after);
    for (int i = 0; i < 4; i++)
        EXPECT(caller_canary[i] == CANARY,
               "caller canary word %d became "
               "0x%llx",
               i, (unsigned long long)caller_canary[i]);
    uint64_t dropped = after.rx_malformed - before.rx_malformed;
    EXPECT(dropped == 3, "%llu forged completions counted, expected 3",
           (unsigned long long)dropped);
}

static int body_answers(rv_worker_t *w, void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++)
        caller_canary[i] = CANARY;
    atomic_store(&target_canary, 0);
    rv_barrier(w);
    if (rv_worker_tid(w) == 0)
        answer_caller(w);
    else if (rv_worker_tid(w) == rv_tid_make(ctx, 1, 0))
        answer_forger(w);
    rv_barrier(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The store's transfer messages                                           */

#define OBJ_BYTES 64

typedef struct {
    rv_object_id_t id;
    uint64_t off, len;
} piece_t; /* rivet.store.chunk's arguments */

static void store_forger(rv_worker_t *w)
{
    rv_tid_t owner = rv_tid_make(ctx, 1, 0);
    rv_handler_id_t pin = rv_handler_id("rivet.store.pin");
    rv_handler_id_t chunk = rv_handler_id("rivet.store.chunk");
    rv_handler_id_t fin = rv_handler_id("rivet.store.fin");
    uint8_t where[256], piece[16];
    WAIT_UNTIL(w, atomic_load(&obj_sealed) == 1, "the object");

    EXPECT(rv_call(w, owner, fin, &obj_id, sizeof(obj_id), NULL, 0) == RV_OK,
           "FIN without a pin");
    EXPECT(rv_call_return(w, owner, pin, &obj_id, sizeof(obj_id), where,
                          sizeof(where), NULL, 0) == RV_OK,
           "pin");
    piece_t bad = {.id = obj_id, .off = UINT64_MAX - 7, .len = 16};
    memset(piece, 0x77, sizeof(piece));
    EXPECT(rv_call_return(w, owner, chunk, &bad, sizeof(bad), piece,
                          sizeof(piece), NULL, 0) == RV_OK,
           "bad piece");
    for (size_t i = 0; i < sizeof(piece); i++)
        EXPECT(piece[i] == 0x77 || piece[i] == 0,
               "a wrapped piece request read byte %zu: 0x%02x", i, piece[i]);
    piece_t good = {.id = obj_id, .off = 8, .len = 16};
    EXPECT(rv_call_return(w, owner, chunk, &good, sizeof(good), piece,
                          sizeof(piece), NULL, 0) == RV_OK,
           "good piece");
    EXPECT(memcmp(piece, "SSSSSSSSSSSSSSSS", 16) == 0,
           "a pinned reader's piece differs");
    for (int i = 0; i < 2; i++)
        EXPECT(rv_call(w, owner, fin, &obj_id, sizeof(obj_id), NULL, 0) ==
                   RV_OK,
               "FIN %d", i);
    EXPECT(rv_flush(w, owner) == RV_OK, "flush");
    uint8_t g = 'G';
    EXPECT(rv_call(w, owner, victim_id, &g, 1, NULL, 0) == RV_OK, "good");
    EXPECT(rv_flush(w, owner) == RV_OK, "flush");
    WAIT_UNTIL(w, atomic_load(&store_done) == 1, "the owner's checks");
    rv_store_buf_t b;
    EXPECT(rv_store_get(w, &obj_id, 1, RV_STORE_WAIT_FOREVER, &b, NULL) ==
               RV_OK,
           "the object, after the forgeries");
    EXPECT(b.data_size == OBJ_BYTES && ((const uint8_t *)b.data)[63] == 'S',
           "the object's bytes");
    rv_store_release(w, &obj_id);
}

static void store_owner(rv_worker_t *w)
{
    rv_worker_stats_t before, after;
    rv_store_stats_t s;
    void *data;
    rv_worker_stats(w, &before);
    EXPECT(rv_store_create(w, &obj_id, OBJ_BYTES, NULL, 0, &data) == RV_OK,
           "create");
    memset(data, 'S', OBJ_BYTES);
    EXPECT(rv_store_seal(w, &obj_id) == RV_OK, "seal");
    uint8_t one = 1;
    EXPECT(rv_call(w, 0, addr_id, &one, 1, NULL, 0) == RV_OK, "sealed");
    EXPECT(rv_flush(w, 0) == RV_OK, "flush");
    WAIT_UNTIL(w, atomic_load(&good_runs) == 2, "the good call");
    rv_worker_stats(w, &after);
    rv_store_stats(w, &s);
    uint64_t dropped = after.rx_malformed - before.rx_malformed;
    EXPECT(dropped == 3, "%llu store forgeries counted, expected 3",
           (unsigned long long)dropped);
    EXPECT(s.pinned_bytes == 0, "%llu bytes still pinned",
           (unsigned long long)s.pinned_bytes);
    EXPECT(rv_call(w, 0, addr_id, &one, 1, NULL, 0) == RV_OK, "done");
    EXPECT(rv_flush(w, 0) == RV_OK, "flush");
}

static int body_store(rv_worker_t *w, void *arg)
{
    (void)arg;
    rv_object_id_of("forged", 6, &obj_id);
    rv_barrier(w);
    if (rv_worker_tid(w) == 0)
        store_forger(w);
    else if (rv_worker_tid(w) == rv_tid_make(ctx, 1, 0))
        store_owner(w);
    rv_barrier(w);
    return 0;
}

static void run_job(rv_worker_fn fn)
{
    atomic_store(&failures, 0);
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

static void test_forged(void **state)
{
    (void)state;
    if (rv_size(ctx) != 2 || rv_nworkers(ctx) != 2)
        JOB_SKIP("test_forged needs a 2x1 job");
    run_job(body_forged);
}

static void test_forged_answers(void **state)
{
    (void)state;
    if (rv_size(ctx) != 2 || rv_nworkers(ctx) != 2)
        JOB_SKIP("test_forged needs a 2x1 job");
    run_job(body_answers);
}

static void test_forged_long(void **state)
{
    (void)state;
    if (rv_size(ctx) != 2 || rv_nworkers(ctx) != 2)
        JOB_SKIP("test_forged needs a 2x1 job");
    run_job(body_long);
}

static void test_forged_store(void **state)
{
    (void)state;
    if (rv_size(ctx) != 2 || rv_nworkers(ctx) != 2)
        JOB_SKIP("test_forged needs a 2x1 job");
    run_job(body_store);
}

int main(int argc, char **argv)
{
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (rv_rma_init(ctx) != RV_OK || rv_store_init(ctx) != RV_OK ||
        rv_am_register(ctx, "test.victim", on_victim, NULL, &victim_id) !=
            RV_OK ||
        rv_am_register(ctx, "test.addr", on_addr, NULL, &addr_id) != RV_OK ||
        rv_am_register(ctx, "test.long", on_long, NULL, &long_id) != RV_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forged),
        cmocka_unit_test(test_forged_answers),
        cmocka_unit_test(test_forged_long),
        cmocka_unit_test(test_forged_store),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests("forged", tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
