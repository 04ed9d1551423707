/*
 * Forged messages against the UCX plugin's RMA emulation
 * (transports/ucx/ucx_emu.c).
 *
 * Each worker opens a UCP endpoint of its own, from a UCP context outside
 * rivet's, to its own process's transport worker, and sends it emulation
 * messages (UCP AM id 1) that no rivet worker would send: replies naming
 * no pending operation, an operation already answered or another one;
 * accesses outside registered memory; bad headers, kinds and worker ids.
 * Each must be dropped and counted, never used, and the worker must go on:
 * real emulated operations still complete with the right data afterwards.
 * The counts are read where users read them, in the worker's job.stats
 * line (JSON; RIVET_JOB_STATS=json), captured from stderr.
 *
 * Run as 2x1 jobs with transport.ucx.rma_emulation: on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <ucp/api/ucp.h>

#include "job_test.h"
#include "rv_layer.h"
#include "stderr_capture.h"
#include "ucx_emu.h"

/* The emulation's wire format, from the plugin's own header, to forge
 * messages (the packed remote key's head is written out below). */
#define EMU_AM_ID RV_UCX_AM_RMA

/* The head of a packed remote key. */
typedef struct {
    uint32_t magic;
    uint32_t region;
    uint64_t base, len;
} rkey_hdr_t;

static uint64_t cookie(uint32_t gen, uint32_t index)
{
    return (uint64_t)gen << 32 | index;
}

/* ---------------------------------------------------------------------- */
/* Job-wide state                                                          */

#define REGION (64u << 10)    /* registered, of a buffer twice as long */
#define MARK_OFF 0            /* where a forged valid put lands */
#define DATA_OFF 4096         /* what the peer reads */
#define RNDV_LEN (256u << 10) /* a forged put sent by rendezvous */

static rv_context_t *ctx;
static const char *group_name = "ucx-emu";
static rv_handler_id_t h_rkey;

typedef struct {
    uint8_t *buf; /* 2 * REGION; the first half registered */
    rv_tmem_t *mem;
    uint32_t region;     /* its id in this process's registry */
    rv_trkey_t *rkey[2]; /* by worker */
    uint64_t raddr[2];
    int rkeys_got;
    /* the forger */
    ucp_context_h uctx;
    ucp_worker_h uworker;
    ucp_ep_h uep;
} wstate_t;

static wstate_t ws; /* one worker per process (2x1) */

static void sync_cb(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

static rv_status_t op_wait(rv_worker_t *w, rv_status_t st, rv_sync_t *sync)
{
    return st == RV_INPROGRESS ? rv_sync_wait(w, sync) : st;
}

static uint8_t pattern(uint32_t tid, size_t i)
{
    return (uint8_t)(tid * 71u + i * 13u + 5u);
}

/* ---------------------------------------------------------------------- */
/* Registered memory and keys                                              */

static rv_status_t on_rkey(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    uint64_t addr;
    (void)arg;
    memcpy(&addr, msg->data, sizeof(addr));
    ws.raddr[msg->src] = addr;
    rv_status_t st = ops->rkey_unpack(rv_worker_tworker(w), msg->src,
                                      (const uint8_t *)msg->data + 8,
                                      msg->len - 8, &ws.rkey[msg->src]);
    EXPECT(st == RV_OK, "rkey_unpack: %s", rv_status_str(st));
    ws.rkeys_got++;
    return RV_OK;
}

static void rma_setup(rv_worker_t *w)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    uint32_t me = rv_worker_tid(w);
    void *key;
    size_t klen;

    ws.buf = aligned_alloc(4096, 2 * REGION);
    for (size_t i = 0; i < 2 * REGION; i++)
        ws.buf[i] = pattern(me, i);
    ws.buf[MARK_OFF] = 0; /* the forger's markers count from 1 */
    rv_status_t st = ops->mem_register(tp, ws.buf, REGION, &ws.mem);
    EXPECT(st == RV_OK, "mem_register: %s", rv_status_str(st));
    EXPECT(ops->rkey_pack(tp, ws.mem, &key, &klen) == RV_OK, "rkey_pack");
    rkey_hdr_t kh;
    memcpy(&kh, key, sizeof(kh));
    ws.region = kh.region;
    EXPECT(kh.base == (uintptr_t)ws.buf && kh.len == REGION,
           "the packed key names [0x%llx, +%llu), not the region",
           (unsigned long long)kh.base, (unsigned long long)kh.len);

    uint8_t *m = malloc(8 + klen);
    uint64_t addr = (uintptr_t)ws.buf;
    memcpy(m, &addr, 8);
    memcpy(m + 8, key, klen);
    ops->rkey_buffer_release(tp, key);
    for (uint32_t t = 0; t < rv_nworkers(ctx); t++)
        EXPECT(rv_send(w, t, h_rkey, m, 8 + klen, NULL) == RV_OK, "send rkey");
    free(m);
    WAIT_UNTIL(w, ws.rkeys_got == (int)rv_nworkers(ctx), "remote keys");
    rv_barrier(w);
}

static void rma_teardown(rv_worker_t *w)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, &tp);
    rv_barrier(w);
    for (uint32_t t = 0; t < rv_nworkers(ctx); t++)
        ops->rkey_destroy(rv_worker_tworker(w), ws.rkey[t]);
    ops->mem_deregister(tp, ws.mem);
    /* Nothing past the registered half was written. */
    uint32_t me = rv_worker_tid(w);
    for (size_t i = REGION; i < 2 * REGION; i++)
        if (ws.buf[i] != pattern(me, i)) {
            FAIL("worker %u: byte %zu, outside the registered region, was "
                 "written",
                 me, i);
            break;
        }
    free(ws.buf);
    memset(&ws, 0, sizeof(ws));
}

/* Reads 64 bytes at DATA_OFF of @p peer by an emulated get and checks
 * them: the worker goes on after what it dropped. */
static void check_get(rv_worker_t *w, uint32_t peer)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    uint8_t got[64];
    rv_sync_t sync;
    rv_sync_init(&sync, 1);
    rv_status_t st =
        ops->get(rv_worker_tworker(w), peer, got, sizeof(got),
                 ws.raddr[peer] + DATA_OFF, ws.rkey[peer], sync_cb, &sync);
    st = op_wait(w, st, &sync);
    EXPECT(st == RV_OK, "get from worker %u: %s", peer, rv_status_str(st));
    for (size_t i = 0; i < sizeof(got); i++)
        if (got[i] != pattern(peer, DATA_OFF + i)) {
            FAIL("worker %u: byte %zu of a get from worker %u is wrong",
                 rv_worker_tid(w), i, peer);
            break;
        }
}

/* ---------------------------------------------------------------------- */
/* The forger: a UCP endpoint from outside rivet                          */

static bool forger_open(rv_worker_t *w)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    const rv_config_t *cfg = rv_context_config(ctx);
    char tls[256] = "", devices[256] = "";
    ucp_config_t *ucfg;

    rv_config_get(cfg, "transport.ucx.tls", tls, sizeof(tls));
    rv_config_get(cfg, "transport.ucx.net_devices", devices, sizeof(devices));
    if (ucp_config_read(NULL, NULL, &ucfg) != UCS_OK)
        return false;
    if (tls[0])
        ucp_config_modify(ucfg, "TLS", tls);
    if (devices[0])
        ucp_config_modify(ucfg, "NET_DEVICES", devices);
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features = UCP_FEATURE_AM};
    ucs_status_t s = ucp_init(&up, ucfg, &ws.uctx);
    ucp_config_release(ucfg);
    if (s != UCS_OK)
        return false;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_worker_create(ws.uctx, &wp, &ws.uworker) != UCS_OK)
        return false;

    void *addr;
    size_t len;
    if (ops->worker_address(rv_worker_tworker(w), &addr, &len) != RV_OK)
        return false;
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                          .address = addr};
    s = ucp_ep_create(ws.uworker, &ep, &ws.uep);
    ops->address_release(rv_worker_tworker(w), addr);
    return s == UCS_OK;
}

/* Progresses the forger and the worker until @p req completes. */
static ucs_status_t forger_wait(rv_worker_t *w, void *req)
{
    if (req == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(req))
        return UCS_PTR_STATUS(req);
    ucs_status_t s;
    double t0 = now_s();
    while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS &&
           now_s() - t0 < WAIT_LIMIT_S) {
        ucp_worker_progress(ws.uworker);
        rv_progress(w);
    }
    ucp_request_free(req);
    return s;
}

static void forger_close(rv_worker_t *w)
{
    if (ws.uep != NULL) {
        ucp_request_param_t p = {.op_attr_mask = 0};
        EXPECT(forger_wait(w, ucp_ep_close_nbx(ws.uep, &p)) == UCS_OK,
               "closing the forger's endpoint");
    }
    if (ws.uworker != NULL)
        ucp_worker_destroy(ws.uworker);
    if (ws.uctx != NULL)
        ucp_cleanup(ws.uctx);
    ws.uep = NULL;
    ws.uworker = NULL;
    ws.uctx = NULL;
}

/* Sends @p hlen bytes of @p h and @p len bytes of @p data to the worker's
 * own transport worker, as an emulation message. */
static void forge_raw(rv_worker_t *w, const emu_hdr_t *h, size_t hlen,
                      const void *data, size_t len, unsigned flags)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = flags};
    ucs_status_t s = forger_wait(
        w, ucp_am_send_nbx(ws.uep, EMU_AM_ID, h, hlen, data, len, &p));
    EXPECT(s == UCS_OK, "forged send: %s", ucs_status_string(s));
}

static void forge(rv_worker_t *w, emu_hdr_t h)
{
    forge_raw(w, &h, sizeof(h), NULL, 0, 0);
}

/* A valid put from the forger, which lands behind everything it sent
 * before (one endpoint's messages are handled in order): once it has,
 * the worker has handled them. */
static void forger_fence(rv_worker_t *w)
{
    static uint8_t mark;
    uint8_t v = ++mark;
    emu_hdr_t h = {.op = EMU_PUT,
                   .src = rv_worker_tid(w),
                   .region = ws.region,
                   .raddr = (uintptr_t)ws.buf + MARK_OFF,
                   .len = 1};
    forge_raw(w, &h, sizeof(h), &v, 1, 0);
    WAIT_UNTIL(w, __atomic_load_n(&ws.buf[MARK_OFF], __ATOMIC_ACQUIRE) == v,
               "the forger's marker");
}

/* ---------------------------------------------------------------------- */
/* The drops each job expects, read from its job.stats line                */

typedef struct {
    unsigned long long stale, outside, malformed;
} drops_t;

static drops_t expect_drops[2]; /* by rank */

/* Runs @p fn as a job and checks the drops this process's worker printed
 * at its end. */
static void run_job_counted(rv_worker_fn fn)
{
    static char text[1 << 16];
    atomic_store(&failures, 0);
    capture_begin();
    rv_status_t st = rv_job_run(ctx, fn, NULL);
    capture_end(text, sizeof(text));
    assert_int_equal(st, RV_OK);
    assert_int_equal(atomic_load(&failures), 0);

    char want[64];
    snprintf(want, sizeof(want), "{\"rank\":%d,\"ucx_worker\":", rv_rank(ctx));
    const char *line = strstr(text, want);
    drops_t got;
    assert_non_null(line);
    const char *p = strstr(line, "\"emu_stale_replies\":");
    assert_non_null(p);
    assert_int_equal(sscanf(p,
                            "\"emu_stale_replies\":%llu,\"emu_outside_region\""
                            ":%llu,\"emu_malformed\":%llu",
                            &got.stale, &got.outside, &got.malformed),
                     3);
    const drops_t *e = &expect_drops[rv_rank(ctx)];
    printf("rank %d dropped: %llu stale replies (%llu expected), %llu "
           "outside registered memory (%llu), %llu malformed (%llu)\n",
           rv_rank(ctx), got.stale, e->stale, got.outside, e->outside,
           got.malformed, e->malformed);
    assert_int_equal(got.stale, e->stale);
    assert_int_equal(got.outside, e->outside);
    assert_int_equal(got.malformed, e->malformed);
}

/* ---------------------------------------------------------------------- */
/* Replies naming no operation waiting for them                            */

/*
 * Worker 1 (the initiator) is sent forged replies: one repeating the
 * reply of a get already answered, ones naming slots the table does not
 * have, and, while a get of its own waits for worker 0 (which does not
 * progress for a while), ones naming that get's slot with an earlier
 * generation, from the wrong worker, or as the wrong kind of reply. The
 * get must then complete with worker 0's data.
 */
static int body_forged_replies(rv_worker_t *w, void *arg)
{
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    uint32_t me = rv_worker_tid(w);
    (void)arg;
    rma_setup(w);
    EXPECT(forger_open(w), "worker %u cannot open its forger", me);

    if (me == 1) {
        /* The first operation takes slot 0, generation 1; its reply is
         * then repeated. */
        check_get(w, 0);
        forge(w,
              (emu_hdr_t){.op = EMU_GET_REP, .src = 0, .cookie = cookie(1, 0)});
        forge(w, (emu_hdr_t){.op = EMU_GET_REP,
                             .src = 0,
                             .len = 8,
                             .cookie = cookie(1, 1000000)});
        forge(w, (emu_hdr_t){.op = EMU_AMO_REP,
                             .src = 0,
                             .v1 = 42,
                             .cookie = cookie(7, 12345)});
        forge(w, (emu_hdr_t){.op = EMU_FLUSH_REP,
                             .src = 0,
                             .cookie = UINT64_C(0xdeadbeefdeadbeef)});
        forger_fence(w);
    }
    rv_barrier(w);

    if (me == 0) {
        usleep(500 * 1000); /* worker 1's get waits meanwhile */
    } else {
        /* Slot 0 again, generation 2. */
        uint8_t got[64];
        rv_sync_t sync;
        rv_sync_init(&sync, 1);
        rv_status_t st =
            ops->get(rv_worker_tworker(w), 0, got, sizeof(got),
                     ws.raddr[0] + DATA_OFF, ws.rkey[0], sync_cb, &sync);
        forge(w,
              (emu_hdr_t){.op = EMU_GET_REP, .src = 0, .cookie = cookie(1, 0)});
        forge(w,
              (emu_hdr_t){.op = EMU_GET_REP, .src = 1, .cookie = cookie(2, 0)});
        forge(w, (emu_hdr_t){.op = EMU_AMO_REP,
                             .src = 0,
                             .v1 = 42,
                             .cookie = cookie(2, 0)});
        forger_fence(w);
        st = op_wait(w, st, &sync);
        EXPECT(st == RV_OK, "get: %s", rv_status_str(st));
        for (size_t i = 0; i < sizeof(got); i++)
            if (got[i] != pattern(0, DATA_OFF + i)) {
                FAIL("byte %zu of the get is wrong", i);
                break;
            }
    }
    forger_close(w);
    check_get(w, 1 - me);
    rma_teardown(w);
    return 0;
}

static void test_forged_replies(void **state)
{
    (void)state;
    expect_drops[0] = (drops_t){0, 0, 0};
    expect_drops[1] = (drops_t){.stale = 7};
    run_job_counted(body_forged_replies);
}

/* ---------------------------------------------------------------------- */
/* Accesses outside registered memory                                      */

/*
 * Each worker is sent puts, gets and atomics outside its registered
 * region: across its end, in a region that does not exist, by
 * rendezvous, unaligned. Puts are dropped; gets and atomics are refused
 * with an error reply, which goes to the worker the request names (the
 * worker itself here) and, naming no operation of its, is dropped there
 * too. Nothing past the region is written (rma_teardown checks).
 */
static int body_outside(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    static uint8_t big[RNDV_LEN];
    (void)arg;
    rma_setup(w);
    EXPECT(forger_open(w), "worker %u cannot open its forger", me);
    uint64_t base = (uintptr_t)ws.buf;
    memset(big, 0xee, sizeof(big));

    emu_hdr_t h = {.op = EMU_PUT,
                   .src = me,
                   .region = ws.region,
                   .raddr = base + REGION - 4,
                   .len = 8};
    forge_raw(w, &h, sizeof(h), big, 8, 0); /* across the end */
    h.region = 999;
    h.raddr = base;
    forge_raw(w, &h, sizeof(h), big, 8, 0); /* no such region */
    h.region = ws.region;
    h.raddr = base + REGION;
    h.len = RNDV_LEN;
    forge_raw(w, &h, sizeof(h), big, RNDV_LEN,
              UCP_AM_SEND_FLAG_RNDV); /* by rendezvous */
    forge(w, (emu_hdr_t){.op = EMU_GET_REQ,
                         .src = me,
                         .region = ws.region,
                         .raddr = base - 8,
                         .len = 16,
                         .cookie = cookie(1, 99999)});
    forge(w, (emu_hdr_t){.op = EMU_AMO_REQ,
                         .amo = EMU_AMO_FADD,
                         .src = me,
                         .region = ws.region,
                         .raddr = base + 1,
                         .len = 8,
                         .v1 = 1,
                         .cookie = cookie(1, 99998)});
    forge(w, (emu_hdr_t){.op = EMU_AMO_REQ,
                         .amo = EMU_AMO_CSWAP,
                         .src = me,
                         .region = 999,
                         .raddr = base,
                         .len = 8,
                         .cookie = cookie(1, 99997)});
    forger_fence(w);
    /* The refusals travel to this worker ahead of a get of its own. */
    check_get(w, me);
    forger_close(w);
    check_get(w, 1 - me);
    rma_teardown(w);
    return 0;
}

static void test_outside(void **state)
{
    (void)state;
    for (int r = 0; r < 2; r++)
        expect_drops[r] = (drops_t){.stale = 3, .outside = 6};
    run_job_counted(body_outside);
}

/* ---------------------------------------------------------------------- */
/* Malformed messages                                                      */

static int body_malformed(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    uint8_t data[64] = {0};
    (void)arg;
    rma_setup(w);
    EXPECT(forger_open(w), "worker %u cannot open its forger", me);
    uint64_t base = (uintptr_t)ws.buf;

    emu_hdr_t h = {.op = EMU_PUT,
                   .src = me,
                   .region = ws.region,
                   .raddr = base + 64,
                   .len = 8};
    forge_raw(w, &h, 20, data, 8, 0); /* header cut short */
    h.src = 1000;
    forge_raw(w, &h, sizeof(h), data, 8, 0); /* no such worker */
    h.src = me;
    h.op = 77;
    forge_raw(w, &h, sizeof(h), data, 8, 0); /* no such kind */
    h.op = EMU_PUT;
    h.len = 64;
    forge_raw(w, &h, sizeof(h), data, 32, 0); /* announces more */
    forge(w, (emu_hdr_t){.op = EMU_AMO_REQ,
                         .amo = 9,
                         .src = me,
                         .region = ws.region,
                         .raddr = base + 64,
                         .len = 8,
                         .v1 = 5,
                         .cookie = cookie(1, 99999)});
    forger_fence(w);
    check_get(w, me);
    for (size_t i = 64; i < 128; i++)
        EXPECT(ws.buf[i] == pattern(me, i), "byte %zu was written", i);
    forger_close(w);
    check_get(w, 1 - me);
    rma_teardown(w);
    return 0;
}

static void test_malformed(void **state)
{
    (void)state;
    for (int r = 0; r < 2; r++)
        expect_drops[r] = (drops_t){.stale = 1, .malformed = 5};
    run_job_counted(body_malformed);
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group_name = argv[1];
    if (rv_handler_register(ctx, "ucx_emu.rkey", on_rkey, NULL, 0, &h_rkey) !=
        RV_OK)
        return 1;
    const rv_transport_ops_t *ops = rv_context_transport(ctx, NULL);
    char emu[32] = "";
    rv_config_get(rv_context_config(ctx), "transport.ucx.rma_emulation", emu,
                  sizeof(emu));
    if (strcmp(ops->name, "ucx") != 0 || strcmp(emu, "on") != 0 ||
        rv_nworkers(ctx) != 2) {
        fprintf(stderr,
                "%s: runs over ucx with transport.ucx.rma_emulation: "
                "on, as 2 workers\n",
                group_name);
        rv_finalize(ctx);
        return 1;
    }

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_forged_replies, capture_teardown),
        cmocka_unit_test_teardown(test_outside, capture_teardown),
        cmocka_unit_test_teardown(test_malformed, capture_teardown),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed =
        _cmocka_run_group_tests(group_name, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
