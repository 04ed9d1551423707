/*
 * The stress test of the invocation layer: one CMocka group over three
 * files,
 *
 *   test_am_stress.c        the main thread: the checks, each one job, what
 *                           they assert once it has ended, and main
 *   test_am_stress_calls.c  the calls: sizes, kinds and payloads, the
 *                           receiver's handlers and the sender
 *   test_am_stress_jobs.c   the worker functions of the jobs
 *
 * and what they share. Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_AM_STRESS_H
#define RIVET_TESTS_AM_STRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "am_config.h"
#include "job_test.h"
#include "rv_am.h"

#define MAX_WORKERS 64
#define SEED 0x5eed2024c0ffee01ull

extern rv_context_t *ctx;
extern const rv_am_config_t *cfg; /* the am.* keys of the job */

/* The handlers: every call, and a sender's last call. */
typedef struct {
    rv_handler_id_t data, end;
} stress_handlers_t;

extern stress_handlers_t H;

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

typedef struct {
    report_t rep;
    uint64_t next[MAX_WORKERS];  /* sequence number expected, per source */
    /* am.routing other than direct: the least sequence number the next
     * routed call may have, per source (routed and direct calls keep
     * their order each, not between them: rv_am.h) */
    uint64_t next_routed[MAX_WORKERS];
    uint64_t end_at[MAX_WORKERS]; /* calls a source's end marker counts */
    atomic_int phase;
    atomic_ullong calls_out, calls_in;
} wstate_t;

extern wstate_t *ws;            /* this process's workers */
extern report_t *all;           /* every worker of the job, by tid */

static inline wstate_t *state_of(rv_worker_t *w)
{
    return &ws[rv_worker_local(w)];
}

static inline void set_phase(rv_worker_t *w, int phase)
{
    atomic_store_explicit(&state_of(w)->phase, phase, memory_order_relaxed);
}

/* What the calls of a job are like. */
typedef struct {
    unsigned max_log;   /* sizes log-uniform up to 2^max_log bytes, or */
    size_t max_size;    /* (max_log 0) uniform in 0..max_size */
    bool sync_kinds;    /* some calls go on a shared synchronizer */
} profile_t;

extern profile_t prof;

/* The largest payload of a call. */
#define SLOT_PAYLOAD (64u << 10)

/* ---------------------------------------------------------------------- */
/* Calls (test_am_stress_calls.c)                                          */

/* Handlers: a call, whose arguments, payload and order the receiver
 * checks; the last call of a sender (ovfl_limit), which says how many
 * calls came before. */
rv_status_t on_data(rv_worker_t *w, rv_call_t *call, void *arg);
rv_status_t on_end(rv_worker_t *w, rv_call_t *call, void *arg);

/* Arguments and payload of a call, contiguous. */
typedef struct slot slot_t;

typedef struct {
    slot_t *scratch;        /* calls without synchronizer */
    slot_t *pool;           /* calls on the shared synchronizer */
    int pool_next;
    rv_sync_t shared;
} sender_t;

/* Allocates @p snd's slots; false (a failure recorded) when out of
 * memory. */
bool sender_init(sender_t *snd);

/* Waits for the shared synchronizer's calls, and frees @p snd's slots. */
void sender_fini(rv_worker_t *w, sender_t *snd);

/* Makes the next call to @p dest (without synchronizer if @p plain).
 * On RV_ERR_AGAIN: progresses and retries the same call when @p retry,
 * else returns it. */
rv_status_t send_call(rv_worker_t *w, sender_t *snd, rv_tid_t dest,
                      bool retry, bool plain);
rv_status_t send_next(rv_worker_t *w, sender_t *snd, rv_tid_t dest,
                      bool retry);

/* Whether workers @p a and @p b are in different processes. */
static inline bool remote(rv_tid_t a, rv_tid_t b)
{
    return rv_tid_rank(ctx, a) != rv_tid_rank(ctx, b);
}

/* ---------------------------------------------------------------------- */
/* The jobs (test_am_stress_jobs.c)                                        */

/* The worker every other worker streams to (slow_receiver, ovfl_limit),
 * and how long it pauses in slow_receiver where no ring can fill (path
 * send, or puts that wait for it): nothing is required of the rings then. */
#define RECEIVER 0
#define SLOW_MS 300

/* Calls a sender of ovfl_limit makes once refused. */
#define OVFL_MORE 200

/* job_end_flush: calls per pair, of at most END_MAX_SIZE bytes. */
#define END_CALLS 64
#define END_MAX_SIZE 1024

/* Whether the transport's one-sided operations wait for the target
 * worker's progress (RMA emulated over active messages, as over TCP): the
 * write path's puts and fences then wait for the receiver, so its rings
 * rarely fill, and every call costs a round trip. The transport knows once
 * a job has connected the workers: call it during or after a job. */
bool rma_waits_for_target(void);

/* Calls per pair in all_to_all, and per sender in slow_receiver. */
uint64_t calls_per_pair(void);
uint64_t stream_calls(void);

/* ---------------------------------------------------------------------- */
/* What a receiver that does not progress waits for                        */

/* The jobs whose receiver waits for its senders' rings to fill. */
enum { BOARD_SLOW, BOARD_OVFL, BOARD_JOBS };

/* Maps the job's board: a counter per such job, in shared memory that
 * every process of the job maps (named after rivetrun's bootstrap
 * address), on which each remote sender tells the receiver that it met a
 * full ring, or gave up streaming without. The receiver cannot be told
 * through rivet itself: it does not progress. From main, before rv_init;
 * false (with a message) on failure. */
bool board_open(void);

/* Installs the probe layer, whose progress hook tells the board once its
 * worker's rv_am_stats_t.ring_full has grown since board_arm: a sender
 * that waits inside a call for room (am.on_full: retry) is seen meeting
 * the full ring while it waits. Main thread, before the first job. */
rv_status_t probe_install(rv_context_t *c);

int body_all_to_all(rv_worker_t *w, void *arg);
int body_slow_receiver(rv_worker_t *w, void *arg);
int body_ovfl_limit(rv_worker_t *w, void *arg);
int body_job_end(rv_worker_t *w, void *arg);

#endif
