/*
 * The selective signaling test: one CMocka group ("verbs_signal") over
 * three files,
 *
 *   test_verbs_signal.c         the unit tests, driven by hand, and main
 *   test_verbs_signal_model.c   a model of RC send queues sharing one CQ
 *   test_verbs_signal_stress.c  the stress tests: threads over the model
 *
 * and what they share. Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_VERBS_SIGNAL_TEST_H
#define RIVET_TESTS_VERBS_SIGNAL_TEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "loop_transport.h"
#include "mem_check.h"
#include "rv_regmem.h"
#include "verbs_signal.h"

#define KIB ((size_t)1024)

/* The chunk allocator over the loop transport (registration is
 * bookkeeping). */
static inline rv_mem_chunk_allocator_t *make_chunks(size_t chunk)
{
    rv_mem_chunk_params_t p = {
        .ops = &loop_ops,
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
/* Randomness                                                              */

static inline uint64_t rng_next(uint64_t *s)
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
static inline bool one_in(uint64_t *s, uint32_t n)
{
    return n != 0 && rng_next(s) % n == 0;
}

/* What each thread of the model keeps: its random numbers, and whether it
 * is inside rv_vsig_begin (and how many polls it took there). */
typedef struct {
    uint64_t rng;
    bool in_begin;
    uint64_t begin_polls;
} vsig_tls_t;

/* The calling thread's. Reached through a function rather than extern
 * thread-locals: the sanitizer builds mis-resolve an extern _Thread_local
 * defined in another file of a PIE. */
vsig_tls_t *vsig_tls(void);

/* Sleeps 1 .. @p max_us microseconds, at random. */
void random_sleep(uint32_t max_us);

/* ---------------------------------------------------------------------- */
/* Violations seen in threads other than the test's (cmocka's asserts may  */
/* not run there): counted, the first one kept, asserted at the end.      */

extern _Atomic int check_failures;
extern char check_first[256];

void check_failed(const char *file, int line, const char *what);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            check_failed(__FILE__, __LINE__, #cond);                           \
    } while (0)

/* ---------------------------------------------------------------------- */
/* The model of RC send queues sharing one CQ (test_verbs_signal_model.c)  */

#define MAX_QPS 2
#define MAX_BATCH 64
#define NO_ID UINT64_MAX

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

/* Polls made by the current rv_vsig_begin of this thread, which must stay
 * below the step bound: past it, poll_cq fails the begin, so that a begin
 * that would wait for another thread ends the test instead of hanging. */

/* The model for @p cfg: send queues of the smallest depth the module
 * accepts (the tightest test), their CQ and rv_vsig_t, the buffers. */
model_t *model_create(const stress_cfg_t *cfg, uint64_t seed);
void model_destroy(model_t *m);

/* ibv_post_send under the provider's lock. A full queue fails the post
 * (ENOMEM), and is counted: it must never happen. */
bool model_post(model_t *m, uint32_t qp, uint64_t wr_id, bool signaled,
                uint64_t id, const uint64_t *stamp);

/* One poll of the shared CQ (the poll_cq of rv_vsig_params_t; @p ctx is
 * a QP's &m->ctx[qp]). */
int model_poll(void *ctx, uint32_t tid);

/* ---------------------------------------------------------------------- */
/* The stress tests (test_verbs_signal_stress.c)                           */

void test_stress(void **state);
void test_stress_every_wr(void **state);
void test_stress_long_runs(void **state);

#endif
