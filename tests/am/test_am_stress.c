/*
 * Stress tests of the invocation layer, as multi-process jobs. The mode
 * (am.path, am.aggregation, am.on_full, ring sizes) comes from the job's
 * configuration, which ctest sets through environment overrides; the
 * tests read it back to know what to expect.
 *
 *   all_to_all      every worker calls every worker (itself included) with
 *                   random sizes and call kinds; retried on RV_ERR_AGAIN
 *   slow_receiver   worker 0 sleeps while every other worker streams calls
 *                   to it: the rings fill (and grow afterwards); only
 *                   on_full: fail refuses calls
 *   ovfl_limit      (ovfl + fail) streams until refused, then retries: the
 *                   accepted calls arrive exactly once and in order
 *   job_end_flush   calls made just before the worker function returns,
 *                   without rv_flush, arrive before rv_job_run returns
 *
 * Every call carries (source, sequence number, payload length, checksum)
 * in its arguments; its size and kind are a function of (seed, source,
 * destination, sequence number), so the receiver checks all of them and
 * the per-pair order on its own. After each job the main threads exchange
 * every worker's counts (calls accepted per destination, run per source)
 * and its counters, and compare them.
 *
 * Worker threads record failures; the main thread asserts after the job.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "am_config.h"
#include "job_test.h"
#include "rv_am.h"

#define MAX_WORKERS 64
#define SEED 0x5eed2024c0ffee01ull

static rv_context_t *ctx;
static const rv_am_config_t *cfg; /* the am.* keys of the job */

static struct {
    rv_handler_id_t data, end;
} H;

/* ---------------------------------------------------------------------- */
/* What one worker reports to every process after a job                   */

typedef struct {
    uint64_t sent[MAX_WORKERS];  /* calls accepted, per destination */
    uint64_t got[MAX_WORKERS];   /* calls run, per source */
    uint64_t bytes_sent, bytes_got; /* arguments + buffers */
    uint64_t agains;             /* RV_ERR_AGAIN returns seen */
    uint64_t ends;               /* end markers run (the receiver) */
    rv_am_stats_t am;            /* at the end of the worker function */
    rv_worker_stats_t core;
} report_t;

/* Where a worker is, for the watchdog (read from another thread). */
enum { PH_START, PH_WARM_UP, PH_BURST, PH_STREAM, PH_SLEEP, PH_WAIT,
       PH_FLUSH, PH_BARRIER, PH_RETURNED };
static const char *const phase_names[] = {
    "start", "warm-up", "burst", "stream", "sleep", "wait for calls",
    "flush", "barrier", "returned (job end)"};

typedef struct {
    report_t rep;
    uint64_t next[MAX_WORKERS];  /* sequence number expected, per source */
    atomic_int phase;
    atomic_ullong calls_out, calls_in;
} wstate_t;

static wstate_t *ws;            /* this process's workers */
static report_t *all;           /* every worker of the job, by tid */

static wstate_t *state_of(rv_worker_t *w)
{
    return &ws[rv_worker_local(w)];
}

static void set_phase(rv_worker_t *w, int phase)
{
    atomic_store_explicit(&state_of(w)->phase, phase, memory_order_relaxed);
}

/* ---------------------------------------------------------------------- */
/* Calls: sizes, kinds and payloads derived from (source, dest, seq)       */

typedef struct {
    unsigned max_log;   /* sizes log-uniform up to 2^max_log bytes, or */
    size_t max_size;    /* (max_log 0) uniform in 0..max_size */
    bool sync_kinds;    /* some calls go on a shared synchronizer */
} profile_t;

static profile_t prof;

#define SLOT_PAYLOAD (64u << 10)
#define POOL_SLOTS 8

typedef struct {
    uint32_t src;
    uint32_t kind;      /* CALL_ARGS: payload after these args; CALL_BUF */
    uint64_t seq;
    uint64_t len;       /* payload bytes */
    uint64_t sum;       /* checksum of the payload */
} stress_args_t;

enum { CALL_ARGS = 0, CALL_BUF = 1 };

/* Arguments and payload, contiguous: an args-only call sends both. */
typedef struct {
    stress_args_t a;
    uint8_t payload[SLOT_PAYLOAD];
} slot_t;

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t call_rand(uint32_t src, uint32_t dst, uint64_t seq)
{
    return mix64(SEED ^ mix64((((uint64_t)src << 32) | dst) ^ mix64(seq)));
}

typedef struct {
    size_t len;
    uint32_t kind;
    bool sync, notify;
} plan_t;

static plan_t plan_of(uint32_t src, uint32_t dst, uint64_t seq)
{
    uint64_t r = call_rand(src, dst, seq);
    plan_t p;
    if (prof.max_log > 0) {
        unsigned e = (unsigned)(r % (prof.max_log + 1));
        p.len = (size_t)((r >> 8) % ((1ull << e) + 1));
    } else {
        p.len = (size_t)((r >> 8) % (prof.max_size + 1));
    }
    p.kind = (r >> 48) & 1 ? CALL_BUF : CALL_ARGS;
    p.sync = prof.sync_kinds && ((r >> 49) & 1);
    p.notify = p.sync && ((r >> 50) & 1);
    return p;
}

static void fill(uint8_t *p, size_t n, uint32_t src, uint64_t seq)
{
    uint64_t base = mix64(((uint64_t)src << 40) ^ seq);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = mix64(base + i);
        memcpy(p + i, &v, 8);
    }
    uint64_t v = mix64(base + i);
    memcpy(p + i, &v, n - i);
}

static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = (h ^ v) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---------------------------------------------------------------------- */
/* Receiver                                                                */

static rv_status_t on_data(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    uint32_t me = rv_worker_tid(w), n = rv_nworkers(ctx);
    stress_args_t a;
    (void)arg;
    if (call->args_len < sizeof(a) || call->src >= n) {
        FAIL("worker %u: a call from %u with %zu argument bytes", me,
             call->src, call->args_len);
        return RV_OK;
    }
    memcpy(&a, call->args, sizeof(a));
    EXPECT(a.src == call->src, "call from %u claims to be from %u",
           call->src, a.src);
    EXPECT(!call->broadcast && call->ret == NULL,
           "a plain call seen as broadcast or with a result");
    uint32_t src = call->src;
    s->rep.got[src]++;
    atomic_fetch_add_explicit(&s->calls_in, 1, memory_order_relaxed);
    s->rep.bytes_got += call->args_len + call->buf_len;
    if (a.seq != s->next[src])
        FAIL("worker %u: call %llu from %u ran when %llu was expected", me,
             (unsigned long long)a.seq, src,
             (unsigned long long)s->next[src]);
    s->next[src] = a.seq + 1;

    plan_t p = plan_of(src, me, a.seq);
    const uint8_t *data;
    size_t len;
    if (a.kind == CALL_ARGS) {
        data = (const uint8_t *)call->args + sizeof(a);
        len = call->args_len - sizeof(a);
        EXPECT(call->buf_len == 0, "args-only call %llu from %u has a "
               "%zu-byte buffer", (unsigned long long)a.seq, src,
               call->buf_len);
    } else {
        data = call->buf;
        len = call->buf_len;
        EXPECT(call->args_len == sizeof(a), "call %llu from %u: %zu "
               "argument bytes", (unsigned long long)a.seq, src,
               call->args_len);
    }
    if (a.kind != p.kind || a.len != p.len || len != p.len) {
        FAIL("worker %u: call %llu from %u: kind %u, %zu payload bytes "
             "(announced %llu), expected kind %u, %zu bytes", me,
             (unsigned long long)a.seq, src, a.kind, len,
             (unsigned long long)a.len, p.kind, p.len);
        return RV_OK;
    }
    if (checksum(data, len) != a.sum)
        FAIL("worker %u: call %llu from %u: the %zu payload bytes do not "
             "match their checksum", me, (unsigned long long)a.seq, src, len);
    return RV_OK;
}

/* The last call of a sender (ovfl_limit): how many calls came before. */
static rv_status_t on_end(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    uint64_t count;
    (void)arg;
    EXPECT(call->args_len == sizeof(count), "end marker of %zu bytes",
           call->args_len);
    memcpy(&count, call->args, sizeof(count));
    EXPECT(s->rep.got[call->src] == count,
           "worker %u: the end marker of %u came after %llu of its %llu "
           "accepted calls", rv_worker_tid(w), call->src,
           (unsigned long long)s->rep.got[call->src],
           (unsigned long long)count);
    s->rep.ends++;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Sender                                                                  */

typedef struct {
    slot_t *scratch;        /* calls without synchronizer */
    slot_t *pool;           /* calls on the shared synchronizer */
    int pool_next;
    rv_sync_t shared;
} sender_t;

static bool sender_init(sender_t *snd)
{
    snd->scratch = malloc(sizeof(slot_t));
    snd->pool = malloc(POOL_SLOTS * sizeof(slot_t));
    snd->pool_next = 0;
    rv_sync_init(&snd->shared, 0);
    return snd->scratch != NULL && snd->pool != NULL;
}

static void sender_fini(rv_worker_t *w, sender_t *snd)
{
    EXPECT(rv_sync_wait(w, &snd->shared) == RV_OK, "shared synchronizer");
    free(snd->scratch);
    free(snd->pool);
}

/* Makes the next call to @p dest (without synchronizer if @p plain).
 * On RV_ERR_AGAIN: progresses and retries the same call when @p retry,
 * else returns it. */
static rv_status_t send_call(rv_worker_t *w, sender_t *snd, rv_tid_t dest,
                             bool retry, bool plain)
{
    wstate_t *s = state_of(w);
    uint32_t me = rv_worker_tid(w);
    uint64_t seq = s->rep.sent[dest];
    plan_t p = plan_of(me, dest, seq);
    if (plain)
        p.sync = p.notify = false;
    slot_t *slot = snd->scratch;
    rv_sync_t *sync = NULL;

    if (p.sync) {
        /* the pool's slots are reused once all their calls completed */
        if (snd->pool_next == POOL_SLOTS) {
            EXPECT(rv_sync_wait(w, &snd->shared) == RV_OK,
                   "shared synchronizer");
            snd->pool_next = 0;
        }
        slot = &snd->pool[snd->pool_next];
        sync = &snd->shared;
    }
    slot->a = (stress_args_t){.src = me, .kind = p.kind, .seq = seq,
                              .len = p.len};
    fill(slot->payload, p.len, me, seq);
    slot->a.sum = checksum(slot->payload, p.len);
    unsigned flags = p.notify ? RV_NOTIFY_CONSUMED : 0;

    double t0 = now_s();
    rv_status_t st;
    for (;;) {
        long before = atomic_load(&snd->shared.pending);
        if (p.kind == CALL_ARGS)
            st = rv_call(w, dest, H.data, &slot->a, sizeof(slot->a) + p.len,
                         sync, flags);
        else
            st = rv_call_buffer(w, dest, H.data, &slot->a, sizeof(slot->a),
                                slot->payload, p.len, sync, flags);
        if (st != RV_ERR_AGAIN)
            break;
        s->rep.agains++;
        EXPECT(atomic_load(&snd->shared.pending) <= before,
               "a refused call was added to its synchronizer");
        if (!retry)
            return st;
        rv_progress(w);
        if (now_s() - t0 > WAIT_LIMIT_S) {
            FAIL("worker %u: call %llu to %u refused for %d s", me,
                 (unsigned long long)seq, dest, WAIT_LIMIT_S);
            return st;
        }
    }
    if (st != RV_OK) {
        FAIL("worker %u: call %llu to %u: %s", me, (unsigned long long)seq,
             dest, rv_status_str(st));
        return st;
    }
    s->rep.sent[dest]++;
    s->rep.bytes_sent += sizeof(slot->a) + p.len;
    atomic_fetch_add_explicit(&s->calls_out, 1, memory_order_relaxed);
    if (p.sync)
        snd->pool_next++;
    return RV_OK;
}

static rv_status_t send_next(rv_worker_t *w, sender_t *snd, rv_tid_t dest,
                             bool retry)
{
    return send_call(w, snd, dest, retry, false);
}

static void capture_stats(rv_worker_t *w)
{
    wstate_t *s = state_of(w);
    rv_am_stats(w, &s->rep.am);
    rv_worker_stats(w, &s->rep.core);
}

static void sleep_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Whether workers @p a and @p b are in different processes. */
static bool remote(rv_tid_t a, rv_tid_t b)
{
    return rv_tid_rank(ctx, a) != rv_tid_rank(ctx, b);
}

/* ---------------------------------------------------------------------- */
/* 1. All to all                                                           */

/* Whether the transport's one-sided operations wait for the target
 * worker's progress (RMA emulated over active messages, as over TCP): the
 * write path's puts and fences then wait for the receiver, so its rings
 * rarely fill, and every call costs a round trip. The transport knows once
 * a job has connected the workers: call it during or after a job. */
static bool rma_waits_for_target(void)
{
    return rv_context_caps(ctx)->rma_target_progress;
}

static uint64_t calls_per_pair(void)
{
    return rma_waits_for_target() ? 150 : 400;
}

/* Flushes, waits at a barrier and records the counters. */
static void finish(rv_worker_t *w)
{
    set_phase(w, PH_FLUSH);
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "rv_flush");
    set_phase(w, PH_BARRIER);
    rv_barrier(w);
    capture_stats(w);
    set_phase(w, PH_RETURNED);
}

static int body_all_to_all(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint64_t K = calls_per_pair(), seq = 0;
    wstate_t *s = state_of(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd)) {
        FAIL("out of memory");
        return 1;
    }
    /* A burst: the first half of the calls, without synchronizers (on
     * the write path nothing progresses until a ring is full), to one
     * destination after the other, all workers to the same one at a
     * time: while worker k calls itself, it runs nothing and the others
     * fill their rings to it. */
    set_phase(w, PH_BURST);
    for (uint32_t dest = 0; dest < n; dest++)
        for (seq = 0; seq < K / 2; seq++)
            if (send_call(w, &snd, dest, true, true) != RV_OK)
                goto out;
    /* Then the rest, round robin, some on the shared synchronizer. */
    set_phase(w, PH_STREAM);
    for (seq = K / 2; seq < K; seq++)
        for (uint32_t k = 0; k < n; k++)
            if (send_next(w, &snd, (me + (uint32_t)seq + k) % n, true) !=
                RV_OK)
                goto out;
out:
    sender_fini(w, &snd);
    EXPECT(rv_flush(w, RV_TID_ALL) == RV_OK, "rv_flush");
    set_phase(w, PH_WAIT);
    for (uint32_t src = 0; src < n; src++)
        WAIT_UNTIL(w, s->rep.got[src] >= K, "the calls of every worker");
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 2. A receiver that sleeps while every other worker streams to it        */

#define SLOW_MS 300
#define RECEIVER 0

/* Calls per sender: 1.5 times more bytes than the largest ring plus the
 * most any mode keeps queued per destination (mean call: 2 KiB). */
static uint64_t stream_calls(void)
{
    uint64_t room = (uint64_t)cfg->max_chunks * cfg->chunk_bytes +
                    cfg->ovfl_limit + 2 * cfg->flush_bytes;
    return room * 3 / 2 / 2048 + 100;
}

/* Before the receiver stops progressing: one call from every worker to
 * it, so that its rings exist (a ring being set up is waited for, not
 * full), and a barrier; then one more call each, which the receiver waits
 * for. Every sender is then past the barrier: its release comes from
 * worker 0, the receiver, and where one-sided operations wait for the
 * target it leaves only while that worker progresses. */
static void start_streams(rv_worker_t *w, sender_t *snd)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    set_phase(w, PH_WARM_UP);
    if (me != RECEIVER) {
        send_next(w, snd, RECEIVER, true);
        EXPECT(rv_flush(w, RECEIVER) == RV_OK, "rv_flush");
    } else {
        for (uint32_t src = 0; src < n; src++)
            if (src != RECEIVER)
                WAIT_UNTIL(w, s->rep.got[src] >= 1, "warm-up");
    }
    rv_barrier(w);
    if (me != RECEIVER) {
        send_next(w, snd, RECEIVER, true);
        EXPECT(rv_flush(w, RECEIVER) == RV_OK, "rv_flush");
    } else {
        for (uint32_t src = 0; src < n; src++)
            if (src != RECEIVER)
                WAIT_UNTIL(w, s->rep.got[src] >= 2, "the streams to start");
    }
}

/* The last call of a sender: how many it made to the receiver before. */
static void send_end(rv_worker_t *w)
{
    wstate_t *s = state_of(w);
    uint64_t count = s->rep.sent[RECEIVER];
    rv_status_t st;
    double t0 = now_s();
    while ((st = rv_call(w, RECEIVER, H.end, &count, sizeof(count), NULL,
                         0)) == RV_ERR_AGAIN &&
           now_s() - t0 < WAIT_LIMIT_S) {
        s->rep.agains++;
        rv_progress(w);
    }
    EXPECT(st == RV_OK, "end marker: %s", rv_status_str(st));
}

/* The receiver: sleeps, then runs every call until each sender's end. */
static void sleep_then_drain(rv_worker_t *w, long ms)
{
    uint32_t n = rv_nworkers(ctx);
    set_phase(w, PH_SLEEP);
    sleep_ms(ms);
    set_phase(w, PH_WAIT);
    WAIT_UNTIL(w, state_of(w)->rep.ends == n - 1,
               "every sender's end marker");
}

#define STREAM_LIMIT_S 2.0

static int body_slow_receiver(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    uint64_t K = stream_calls();
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd)) {
        FAIL("out of memory");
        return 1;
    }
    start_streams(w, &snd);
    if (me == RECEIVER) {
        sleep_then_drain(w, SLOW_MS);
    } else {
        /* K calls; to a ring (write path, another process), until the
         * worker met a full ring too (for STREAM_LIMIT_S at most): a fast
         * sender may have made its K calls before the receiver fell
         * asleep. */
        bool want_full = cfg->path == RV_AM_PATH_WRITE &&
                         remote(me, RECEIVER);
        bool met_full = false;
        rv_am_stats_t st0, st;
        rv_am_stats(w, &st0);
        double t0 = now_s();
        set_phase(w, PH_STREAM);
        for (uint64_t i = 1;
             i < K ||
             (want_full && !met_full && now_s() - t0 < STREAM_LIMIT_S);
             i++) {
            if (send_next(w, &snd, RECEIVER, true) != RV_OK)
                break;
            rv_am_stats(w, &st);
            met_full = st.ring_full > st0.ring_full;
        }
        send_end(w);
    }
    sender_fini(w, &snd);
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 3. ovfl_limit: streams until refused, retries once the receiver wakes   */

#define OVFL_SLEEP_MS 400
#define OVFL_MORE 200

static int body_ovfl_limit(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd)) {
        FAIL("out of memory");
        return 1;
    }
    start_streams(w, &snd);
    if (me == RECEIVER) {
        sleep_then_drain(w, OVFL_SLEEP_MS);
    } else {
        /* Until refused (for STREAM_LIMIT_S at most): the ring cannot
         * grow while its receiver sleeps, so that is its chunks plus
         * am.ovfl_limit, give or take a call. A sender of the receiver's
         * process (local queue) is never refused: it makes OVFL_MORE. */
        set_phase(w, PH_STREAM);
        uint64_t start = s->rep.bytes_sent, i = 0;
        bool refused = false;
        double t0 = now_s();
        while (remote(me, RECEIVER) ? now_s() - t0 < STREAM_LIMIT_S
                                    : i++ < OVFL_MORE) {
            rv_status_t st = send_next(w, &snd, RECEIVER, false);
            if (st == RV_ERR_AGAIN) {
                refused = true;
                break;
            }
            if (st != RV_OK)
                break;
        }
        EXPECT(refused || !remote(me, RECEIVER) ||
                   cfg->path != RV_AM_PATH_WRITE,
               "worker %u: no RV_ERR_AGAIN in %.1f s, after %llu bytes to "
               "a receiver that sleeps %d ms (ring of %lld x %llu B, "
               "am.ovfl_limit %llu B)", me, STREAM_LIMIT_S,
               (unsigned long long)(s->rep.bytes_sent - start),
               OVFL_SLEEP_MS, (long long)cfg->max_chunks,
               (unsigned long long)cfg->chunk_bytes,
               (unsigned long long)cfg->ovfl_limit);
        /* then more, retrying each refused call until the receiver
         * drains, and the marker that says how many were accepted */
        for (int k = 0; k < OVFL_MORE; k++)
            if (send_next(w, &snd, RECEIVER, true) != RV_OK)
                break;
        send_end(w);
    }
    sender_fini(w, &snd);
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 4. The job's end flushes what is batched                                */

#define END_CALLS 64
#define END_MAX_SIZE 1024

static int body_job_end(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd)) {
        FAIL("out of memory");
        return 1;
    }
    set_phase(w, PH_STREAM);
    for (uint64_t seq = 0; seq < END_CALLS; seq++)
        for (uint32_t k = 0; k < n; k++)
            if (send_next(w, &snd, (me + k) % n, true) != RV_OK)
                goto out;
out:
    /* No synchronizer calls in this profile: nothing to wait for. */
    free(snd.scratch);
    free(snd.pool);
    capture_stats(w);
    set_phase(w, PH_RETURNED);
    return 0; /* no rv_flush, no barrier, no progress */
}

/* ---------------------------------------------------------------------- */
/* The main thread                                                         */

static int setup(void **state)
{
    (void)state;
    atomic_store(&failures, 0);
    ws = calloc((size_t)rv_threads(ctx), sizeof(*ws));
    all = calloc(rv_nworkers(ctx), sizeof(*all));
    return ws == NULL || all == NULL;
}

static int teardown(void **state)
{
    (void)state;
    free(ws);
    free(all);
    return 0;
}

static const char *path_name(void)
{
    return cfg->path == RV_AM_PATH_WRITE ? "write" : "send";
}

/* A job that stalls (a lost call, a wedged ring) would otherwise hold
 * the machine until rivetrun's timeout: after JOB_LIMIT_S the watchdog
 * says where every worker of this process is and ends the job. Every
 * job here takes a few seconds. */
#define JOB_LIMIT_S 60

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    const char *name;
} dog = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, NULL};

static void *watchdog(void *arg)
{
    struct timespec until;
    (void)arg;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += JOB_LIMIT_S;
    pthread_mutex_lock(&dog.lock);
    while (!dog.done &&
           pthread_cond_timedwait(&dog.cond, &dog.lock, &until) != ETIMEDOUT)
        ;
    bool done = dog.done;
    pthread_mutex_unlock(&dog.lock);
    if (done)
        return NULL;
    fprintf(stderr, "rank %d: %s still runs after %d s\n", rv_rank(ctx),
            dog.name, JOB_LIMIT_S);
    for (int t = 0; t < rv_threads(ctx); t++)
        fprintf(stderr, "  worker %u: %s; %llu calls accepted, %llu run\n",
                rv_tid_make(ctx, rv_rank(ctx), t),
                phase_names[atomic_load(&ws[t].phase)],
                (unsigned long long)atomic_load(&ws[t].calls_out),
                (unsigned long long)atomic_load(&ws[t].calls_in));
    rv_abort(ctx, 1, "a stress job stalled");
}

/* Runs one job, then (before asserting anything, so that every process
 * takes part) gathers every worker's report. */
static void run_job(const char *name, rv_worker_fn fn)
{
    uint32_t n = rv_nworkers(ctx);
    int T = rv_threads(ctx);
    assert_true(n <= MAX_WORKERS);

    pthread_t dog_thread;
    dog.done = false;
    dog.name = name;
    assert_int_equal(pthread_create(&dog_thread, NULL, watchdog, NULL), 0);
    double t0 = now_s();
    rv_status_t st = rv_job_run(ctx, fn, NULL);
    double dt = now_s() - t0;
    pthread_mutex_lock(&dog.lock);
    dog.done = true;
    pthread_cond_signal(&dog.cond);
    pthread_mutex_unlock(&dog.lock);
    pthread_join(dog_thread, NULL);

    report_t *mine = calloc((size_t)T, sizeof(*mine));
    assert_non_null(mine);
    for (int t = 0; t < T; t++)
        mine[t] = ws[t].rep;
    rv_status_t gst = rv_bootstrap_allgather(ctx, all, mine,
                                             (size_t)T * sizeof(*mine));
    free(mine);

    if (rv_rank(ctx) == 0) {
        uint64_t calls = 0, full = 0, again = 0, grow = 0, granted = 0,
                 det = 0, flushes = 0, maxagg = 0;
        for (uint32_t t = 0; t < n; t++) {
            calls += all[t].am.calls_sent;
            full += all[t].am.ring_full;
            again += all[t].agains;
            grow += all[t].am.chunk_growths;
            granted += all[t].am.chunks_granted;
            det += all[t].am.detours;
            flushes += all[t].am.flushes;
            if (all[t].am.max_aggregated_bytes > maxagg)
                maxagg = all[t].am.max_aggregated_bytes;
        }
        printf("%s: %.2f s; %llu calls, %llu transmissions (largest %llu "
               "B), ring full %llu, RV_ERR_AGAIN %llu, growths %llu, chunks "
               "granted %llu, detours %llu\n",
               name, dt, (unsigned long long)calls,
               (unsigned long long)flushes, (unsigned long long)maxagg,
               (unsigned long long)full, (unsigned long long)again,
               (unsigned long long)grow, (unsigned long long)granted,
               (unsigned long long)det);
        fflush(stdout);
    }

    assert_int_equal(st, RV_OK);
    assert_int_equal(gst, RV_OK);
    assert_int_equal(atomic_load(&failures), 0);

    /* every accepted call ran exactly once: accepted == run, per pair */
    int bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++)
            if (all[s].sent[d] != all[d].got[s] && bad++ < 10)
                fprintf(stderr, "worker %u accepted %llu calls to %u, which "
                        "ran %llu\n", s, (unsigned long long)all[s].sent[d],
                        d, (unsigned long long)all[d].got[s]);
    for (uint32_t t = 0; t < n; t++) {
        if (all[t].core.rx_unknown_handler || all[t].core.rx_malformed) {
            fprintf(stderr, "worker %u dropped %llu unknown and %llu "
                    "malformed messages\n", t,
                    (unsigned long long)all[t].core.rx_unknown_handler,
                    (unsigned long long)all[t].core.rx_malformed);
            bad++;
        }
        /* only am.on_full: fail refuses calls */
        if (cfg->on_full != RV_ON_FULL_FAIL && all[t].agains > 0) {
            fprintf(stderr, "worker %u saw RV_ERR_AGAIN %llu times with "
                    "am.on_full other than fail\n", t,
                    (unsigned long long)all[t].agains);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Every pair accepted and ran @p want calls (when @p only_to is
 * RV_TID_NONE), or every worker but @p only_to sent it @p want. */
static void assert_pairs(uint64_t want, rv_tid_t only_to)
{
    uint32_t n = rv_nworkers(ctx);
    int bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t d = 0; d < n; d++) {
            uint64_t w = want;
            if (only_to != RV_TID_NONE)
                w = d == only_to && s != only_to ? want : 0;
            if (all[d].got[s] != w && bad++ < 10)
                fprintf(stderr, "worker %u ran %llu calls from %u, expected "
                        "%llu\n", d, (unsigned long long)all[d].got[s], s,
                        (unsigned long long)w);
        }
    assert_int_equal(bad, 0);
}

static void test_all_to_all(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    int T = rv_threads(ctx), P = rv_size(ctx);
    (void)state;

    prof = (profile_t){.max_log = 16, .sync_kinds = true};
    run_job("all_to_all", body_all_to_all);
    /* what the workers sent, now that the job has connected them */
    uint64_t K = calls_per_pair();
    assert_pairs(K, RV_TID_NONE);

    uint64_t bytes_sent = 0, bytes_got = 0;
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        bytes_sent += r->bytes_sent;
        bytes_got += r->bytes_got;
        assert_int_equal(r->am.calls_sent, K * n);
        assert_int_equal(r->am.calls_received, K * n);
        assert_int_equal(r->am.bytes_sent, r->bytes_sent);
        assert_int_equal(r->am.bytes_received, r->bytes_got);
        assert_int_equal(r->am.calls_local,
                         cfg->local_bypass ? K * (uint64_t)T : 0);
    }
    assert_int_equal(bytes_sent, bytes_got);

    if (cfg->path != RV_AM_PATH_WRITE) {
        print_message("all_to_all: no messenger rings on path send; ring "
                      "growth not checked\n");
        return;
    }
    /* Each worker has one ring per worker of another process, made of
     * chunks_per_request chunks and grown chunks_per_request at a time
     * up to max_chunks. */
    uint64_t rings = (uint64_t)(P - 1) * (uint64_t)T;
    uint64_t cpr = (uint64_t)cfg->chunks_per_request;
    uint64_t max = (uint64_t)cfg->max_chunks;
    uint64_t first = cpr < max ? cpr : max;
    uint64_t growths_here = 0, most_grown = 0;
    for (uint32_t t = 0; t < n; t++) {
        const rv_am_stats_t *a = &all[t].am;
        if (rv_tid_rank(ctx, t) == rv_rank(ctx))
            growths_here += a->chunk_growths;
        if (a->chunks_granted < rings * first ||
            a->chunks_granted > rings * max ||
            a->chunks_granted > rings * first + a->chunk_growths * cpr ||
            a->chunk_growths > rings * (max - first))
            fail_msg("worker %u: %llu chunks granted in %llu growths, for "
                     "%llu rings of %llu..%llu chunks (%llu per request)", t,
                     (unsigned long long)a->chunks_granted,
                     (unsigned long long)a->chunk_growths,
                     (unsigned long long)rings, (unsigned long long)first,
                     (unsigned long long)max, (unsigned long long)cpr);
        uint64_t grown = a->chunks_granted - rings * first;
        if (grown > most_grown)
            most_grown = grown;
        /* no call is larger than a chunk here */
        if (cfg->chunk_bytes >= 2 * SLOT_PAYLOAD)
            assert_int_equal(a->detours, 0);
    }
    if (rma_waits_for_target()) {
        /* see test_slow_receiver: senders wait for the receiver in every
         * record's fence, so rings rarely fill */
        print_message("all_to_all: puts wait for the receiver's progress; "
                      "ring growth not required\n");
    } else if (max > first) {
        if (growths_here == 0)
            fail_msg("rank %d: no ring grew (%llu-byte chunks)", rv_rank(ctx),
                     (unsigned long long)cfg->chunk_bytes);
        /* at least one worker got as many chunks as growing one ring
         * to max_chunks takes (necessary for a ring to have reached it;
         * the counters do not say how the chunks went to rings) */
        if (most_grown < max - first)
            fail_msg("the workers that grew their rings most got %llu more "
                     "chunks; one ring from %llu to %llu takes %llu",
                     (unsigned long long)most_grown,
                     (unsigned long long)first, (unsigned long long)max,
                     (unsigned long long)(max - first));
    }
}

static void test_slow_receiver(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    uint64_t K = stream_calls();
    (void)state;

    prof = (profile_t){.max_size = 4096};
    run_job("slow_receiver", body_slow_receiver);

    assert_int_equal(all[RECEIVER].ends, n - 1);
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        for (uint32_t d = 0; d < n; d++)
            if (d != RECEIVER || t == RECEIVER)
                assert_int_equal(r->sent[d], 0);
        if (t != RECEIVER) {
            assert_true(r->sent[RECEIVER] >= K + 1);
            /* accepted calls and the end marker: exactly those */
            assert_int_equal(r->am.calls_sent, r->sent[RECEIVER] + 1);
        }
    }
    /* Where puts are emulated by active messages (over TCP), every ring
     * record above 1 KiB waits in a fence (a round trip to the receiver)
     * before its header goes: senders wait for the sleeping receiver
     * inside the call before their rings fill. */
    bool rings_fill =
        cfg->path == RV_AM_PATH_WRITE && !rma_waits_for_target();
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        if (t == RECEIVER || !remote(t, RECEIVER))
            continue;
        if (rings_fill && r->am.ring_full == 0)
            fail_msg("worker %u streamed %llu calls to a receiver that "
                     "slept %d ms and never met a full ring", t,
                     (unsigned long long)r->sent[RECEIVER], SLOW_MS);
        /* whatever the transport, fail refuses instead of waiting */
        if (cfg->path == RV_AM_PATH_WRITE &&
            cfg->on_full == RV_ON_FULL_FAIL && r->agains == 0)
            fail_msg("worker %u: never refused (RV_ERR_AGAIN) with "
                     "am.on_full: fail", t);
    }
    if (cfg->path != RV_AM_PATH_WRITE)
        print_message("slow_receiver: no messenger rings on path send; "
                      "ring-full expectations not checked\n");
    else if (!rings_fill)
        print_message("slow_receiver: puts wait for the receiver's "
                      "progress; ring full not required\n");
}

static void test_ovfl_limit(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    (void)state;

    prof = (profile_t){.max_size = 4096};
    run_job("ovfl_limit", body_ovfl_limit);

    assert_int_equal(all[RECEIVER].ends, n - 1);
    for (uint32_t t = 0; t < n; t++) {
        const report_t *r = &all[t];
        if (t == RECEIVER)
            continue;
        /* accepted calls and the end marker: exactly what was counted */
        assert_int_equal(r->am.calls_sent, r->sent[RECEIVER] + 1);
        assert_true(r->sent[RECEIVER] > OVFL_MORE);
        if (remote(t, RECEIVER) && cfg->path == RV_AM_PATH_WRITE) {
            if (r->agains == 0 || r->am.ring_full == 0)
                fail_msg("worker %u: %llu refusals, ring full %llu", t,
                         (unsigned long long)r->agains,
                         (unsigned long long)r->am.ring_full);
        }
    }
    if (cfg->path != RV_AM_PATH_WRITE)
        print_message("ovfl_limit: path send; refusals not required\n");
}

static void test_job_end_flush(void **state)
{
    uint32_t n = rv_nworkers(ctx);
    (void)state;

    prof = (profile_t){.max_size = END_MAX_SIZE};
    run_job("job_end_flush", body_job_end);
    assert_pairs(END_CALLS, RV_TID_NONE);

    /* With trad aggregation and flush_bytes above what each destination
     * was given, nothing left before the worker function returned: the
     * job's end did all the sending. */
    uint64_t most = END_CALLS * (uint64_t)(END_MAX_SIZE + 256);
    if (cfg->aggregation == RV_AGG_TRAD && cfg->flush_bytes > most) {
        for (uint32_t t = 0; t < n; t++)
            if (all[t].am.flushes != 0)
                fail_msg("worker %u transmitted %llu batches before "
                         "returning (trad, am.flush_bytes %llu)", t,
                         (unsigned long long)all[t].am.flushes,
                         (unsigned long long)cfg->flush_bytes);
    }
}

static const char *agg_name(void)
{
    switch (cfg->aggregation) {
    case RV_AGG_TRAD: return "trad";
    case RV_AGG_OVFL: return "ovfl";
    default: return "none";
    }
}

static const char *on_full_name(void)
{
    switch (cfg->on_full) {
    case RV_ON_FULL_RETRY: return "retry";
    case RV_ON_FULL_RETRY_ASYNC: return "retry_async";
    default: return "fail";
    }
}

int main(int argc, char **argv)
{
    const char *group = "am-stress";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    cfg = am_config(ctx);
    if ((rv_am_register(ctx, "stress.data", on_data, NULL, &H.data) |
         rv_am_register(ctx, "stress.end", on_end, NULL, &H.end)) != RV_OK)
        return 1;
    if (rv_rank(ctx) == 0) {
        printf("%d x %d workers, %s; am.path %s, aggregation %s, "
               "on_full %s, chunk_bytes %llu, max_chunks %lld, "
               "chunks_per_request %lld, ovfl_limit %llu, flush_bytes %llu, "
               "local_bypass %d; seed 0x%llx\n",
               rv_size(ctx), rv_threads(ctx),
               rv_context_caps(ctx)->description,
               path_name(), agg_name(), on_full_name(),
               (unsigned long long)cfg->chunk_bytes,
               (long long)cfg->max_chunks,
               (long long)cfg->chunks_per_request,
               (unsigned long long)cfg->ovfl_limit,
               (unsigned long long)cfg->flush_bytes,
               (int)cfg->local_bypass, (unsigned long long)SEED);
        fflush(stdout);
    }

    /* The ovfl_limit case belongs to the mode it tests (am.aggregation:
     * ovfl, am.on_full: fail): other variants leave it out, not skip it. */
    bool ovfl_fail = cfg->aggregation == RV_AGG_OVFL &&
                     cfg->on_full == RV_ON_FULL_FAIL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_to_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_receiver, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_end_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ovfl_limit, setup, teardown),
    };
    size_t ntests = sizeof(tests) / sizeof(tests[0]) - (ovfl_fail ? 0 : 1);
    int failed = _cmocka_run_group_tests(group, tests, ntests,
                                         NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, ntests);
}
