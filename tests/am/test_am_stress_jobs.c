/*
 * The worker functions of the invocation layer's stress test, one a job
 * (am_stress.h):
 *
 *   all_to_all      every worker calls every worker (itself included) with
 *                   random sizes and call kinds; retried on RV_ERR_AGAIN
 *   slow_receiver   worker 0 stops progressing while every other worker
 *                   streams calls to it, until every remote sender met a
 *                   full ring: the rings fill (and grow afterwards); only
 *                   on_full: fail refuses calls
 *   ovfl_limit      (ovfl + fail) streams until refused, then retries: the
 *                   accepted calls arrive exactly once and in order
 *   job_end_flush   calls made just before the worker function returns,
 *                   without rv_flush, arrive before rv_job_run returns
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "am_stress.h"
#include "rv_layer.h"

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

/* ---------------------------------------------------------------------- */
/* The board, and the probe that tells it                                  */

/* How long a receiver waits for its senders' word: well inside the
 * watchdog's JOB_LIMIT_S, far beyond the ~0.1 s they take. */
#define BOARD_LIMIT_S 30.0

typedef struct {
    atomic_uint told[BOARD_JOBS]; /* remote senders that told, per job */
} board_t;

static board_t *board;
static char board_name[64];

bool board_open(void)
{
    /* FNV-1a of the bootstrap address: unique to one run of rivetrun. */
    const char *addr = getenv("RIVET_BOOTSTRAP");
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = addr ? addr : ""; *c != '\0'; c++)
        h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    snprintf(board_name, sizeof(board_name), "/rivet-am-stress-%d-%016llx",
             (int)getppid(), (unsigned long long)h);
    int fd = shm_open(board_name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        perror("am-stress: shm_open");
        return false;
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(board_t)) == 0)
        p = mmap(NULL, sizeof(board_t), PROT_READ | PROT_WRITE, MAP_SHARED,
                 fd, 0);
    if (p == MAP_FAILED)
        perror("am-stress: the board");
    close(fd);
    board = p == MAP_FAILED ? NULL : p;
    return board != NULL;
}

/* Every process has mapped the board once a job runs: the name goes, so
 * that nothing is left in /dev/shm however the test ends. */
static void board_unlink(void)
{
    shm_unlink(board_name);
}

/* A worker's probe: armed for one job from a ring_full count (and a
 * count of refusals) on. */
typedef struct {
    bool armed, told;
    int job;
    uint64_t base, agains;
} probe_t;

static probe_t probes[MAX_WORKERS];
static int probe_slot = -1;

static void board_add(int job)
{
    atomic_fetch_add(&board->told[job], 1);
}

static void board_tell(probe_t *p)
{
    if (p->armed && !p->told) {
        p->told = true;
        board_add(p->job);
    }
}

static rv_status_t probe_start(rv_worker_t *w)
{
    rv_worker_layer_set(w, probe_slot, &probes[rv_worker_local(w)]);
    return RV_OK;
}

/* Tells once the ring was full and, with am.on_full fail, a call was
 * refused (send_call counts the refusal before it progresses to retry):
 * a call that meets a full ring may still be accepted. */
static unsigned probe_progress(rv_worker_t *w)
{
    probe_t *p = rv_worker_layer(w, probe_slot);
    if (p->armed && !p->told) {
        rv_am_stats_t st;
        rv_am_stats(w, &st);
        if (st.ring_full > p->base &&
            (cfg->on_full != RV_ON_FULL_FAIL ||
             state_of(w)->rep.agains > p->agains))
            board_tell(p);
    }
    return 0;
}

static const rv_layer_ops_t probe_ops = {
    .name = "am-stress probe",
    .worker_start = probe_start,
    .progress = probe_progress,
};

rv_status_t probe_install(rv_context_t *c)
{
    return rv_layer_install(c, &probe_ops, NULL, &probe_slot);
}

/* Arms @p w's probe for @p job: from now on, a full ring tells the
 * board. */
static probe_t *probe_arm(rv_worker_t *w, int job)
{
    probe_t *p = rv_worker_layer(w, probe_slot);
    rv_am_stats_t st;
    rv_am_stats(w, &st);
    *p = (probe_t){.armed = true, .job = job, .base = st.ring_full,
                   .agains = state_of(w)->rep.agains};
    return p;
}

/* Whether the rings of remote senders to the receiver fill while it does
 * not progress: on the write path, unless puts wait for the target's
 * progress (emulated over active messages, as over TCP), where senders
 * wait for the receiver inside the call before a ring fills. */
static bool rings_fill(void)
{
    return cfg->path == RV_AM_PATH_WRITE && !rma_waits_for_target();
}

/* The receiver, without progressing: until every remote sender of @p job
 * told the board (met a full ring, or gave up), where rings fill; else
 * a pause of @p ms. */
static void wait_for_senders(rv_worker_t *w, int job, long ms)
{
    uint32_t n = rv_nworkers(ctx), want = 0;
    if (!rings_fill()) {
        sleep_ms(ms);
        return;
    }
    for (uint32_t t = 0; t < n; t++)
        want += remote(t, rv_worker_tid(w));
    double t0 = now_s();
    while (atomic_load(&board->told[job]) < want) {
        if (now_s() - t0 > BOARD_LIMIT_S) {
            FAIL("%u of %u remote senders met a full ring in %.0f s",
                 atomic_load(&board->told[job]), want, BOARD_LIMIT_S);
            return;
        }
        sleep_ms(1);
    }
}

/* ---------------------------------------------------------------------- */
/* 1. All to all                                                           */

bool rma_waits_for_target(void)
{
    return rv_context_caps(ctx)->rma_target_progress;
}

uint64_t calls_per_pair(void)
{
    return rma_waits_for_target() ? 150 : 400;
}

/* One call to every worker, round robin from worker @p first on; false
 * when one failed. */
static bool send_round(rv_worker_t *w, sender_t *snd, uint32_t first)
{
    uint32_t n = rv_nworkers(ctx);
    for (uint32_t k = 0; k < n; k++)
        if (send_next(w, snd, (first + k) % n, true) != RV_OK)
            return false;
    return true;
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

int body_all_to_all(rv_worker_t *w, void *arg)
{
    uint32_t n = rv_nworkers(ctx), me = rv_worker_tid(w);
    uint64_t K = calls_per_pair(), seq = 0;
    wstate_t *s = state_of(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
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
        if (!send_round(w, &snd, me + (uint32_t)seq))
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

/* Calls per sender: 1.5 times more bytes than the largest ring plus the
 * most any mode keeps queued per destination (mean call: 2 KiB). */
uint64_t stream_calls(void)
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
    if (me == RECEIVER)
        board_unlink();
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

/* The receiver: waits for its senders without progressing, then runs
 * every call until each sender's end. */
static void sleep_then_drain(rv_worker_t *w, int job, long ms)
{
    uint32_t n = rv_nworkers(ctx);
    set_phase(w, PH_SLEEP);
    wait_for_senders(w, job, ms);
    set_phase(w, PH_WAIT);
    WAIT_UNTIL(w, state_of(w)->rep.ends == n - 1,
               "every sender's end marker");
    for (uint32_t src = 0; src < n; src++)
        WAIT_UNTIL(w, state_of(w)->rep.got[src] >= state_of(w)->end_at[src],
                   "the calls each end marker counts");
}

/* Calls a sender streams at most looking for a full ring: twice the K
 * that carry 1.5 times the room of the receiver's rings. */
#define STREAM_MOST(K) (2 * (K))

int body_slow_receiver(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    uint64_t K = stream_calls();
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    start_streams(w, &snd);
    if (me == RECEIVER) {
        sleep_then_drain(w, BOARD_SLOW, SLOW_MS);
    } else {
        /* K calls; to a ring that fills (another process), until the
         * worker met a full ring too, which its probe tells the receiver
         * (even from inside a call that waits for room); one that never
         * does gives up after STREAM_MOST(K) calls and tells it too. */
        bool want_full = rings_fill() && remote(me, RECEIVER);
        probe_t *p = want_full ? probe_arm(w, BOARD_SLOW) : NULL;
        set_phase(w, PH_STREAM);
        for (uint64_t i = 1;
             i < K || (want_full && !p->told && i < STREAM_MOST(K)); i++)
            if (send_next(w, &snd, RECEIVER, true) != RV_OK)
                break;
        if (want_full)
            board_tell(p);
        send_end(w);
    }
    sender_fini(w, &snd);
    finish(w);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* 3. ovfl_limit: streams until refused, retries once the receiver wakes   */

#define OVFL_SLEEP_MS 400

int body_ovfl_limit(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    wstate_t *s = state_of(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    start_streams(w, &snd);
    if (me == RECEIVER) {
        sleep_then_drain(w, BOARD_OVFL, OVFL_SLEEP_MS);
    } else {
        /* Until refused (STREAM_MOST calls at most, then it tells the
         * receiver it gave up): the ring cannot grow while its receiver
         * does not progress, so that is its chunks plus am.ovfl_limit,
         * give or take a call. A sender of the receiver's process (local
         * queue) is never refused: it makes OVFL_MORE. */
        bool remote_ring = rings_fill() && remote(me, RECEIVER);
        set_phase(w, PH_STREAM);
        uint64_t start = s->rep.bytes_sent, i = 0;
        uint64_t most = remote(me, RECEIVER) ? STREAM_MOST(stream_calls())
                                             : OVFL_MORE;
        bool refused = false;
        while (i++ < most) {
            rv_status_t st = send_next(w, &snd, RECEIVER, false);
            if (st == RV_ERR_AGAIN) {
                refused = true;
                break;
            }
            if (st != RV_OK)
                break;
        }
        /* Told here, not by the probe: the receiver must sleep until the
         * refusal, which may come a call after the ring was full. */
        if (remote_ring)
            board_add(BOARD_OVFL);
        EXPECT(refused || !remote(me, RECEIVER) ||
                   cfg->path != RV_AM_PATH_WRITE,
               "worker %u: no RV_ERR_AGAIN in %llu calls, %llu bytes, to a "
               "receiver that does not progress (ring of %lld x %llu B, "
               "am.ovfl_limit %llu B)", me, (unsigned long long)(i - 1),
               (unsigned long long)(s->rep.bytes_sent - start),
               (long long)cfg->max_chunks,
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

int body_job_end(rv_worker_t *w, void *arg)
{
    uint32_t me = rv_worker_tid(w);
    sender_t snd;
    (void)arg;

    if (!sender_init(&snd))
        return 1;
    set_phase(w, PH_STREAM);
    for (uint64_t seq = 0; seq < END_CALLS; seq++)
        if (!send_round(w, &snd, me))
            goto out;
out:
    /* No synchronizer calls in this profile: nothing to wait for. */
    free(snd.scratch);
    free(snd.pool);
    capture_stats(w);
    set_phase(w, PH_RETURNED);
    return 0; /* no rv_flush, no barrier, no progress */
}
