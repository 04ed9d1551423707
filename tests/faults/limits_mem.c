/*
 * Registered memory running out (memory.limit small): every call that
 * needs memory the limit refuses fails with RV_ERR_NO_MEMORY, and every
 * call that was accepted runs. Nothing crashes, and the error names the
 * key.
 *
 *   rivetrun -n 2 -c JOB.yaml test_limits_mem
 *
 * with memory.limit a few chunks and the write path (rings of small
 * chunks that want to grow, past what the limit leaves): each worker
 * calls every worker of the other rank CALLS times as fast as am.on_full
 * lets it, counting the calls accepted (RV_OK) and refused (an error),
 * and every worker counts the calls it ran. After rv_quiesce, the calls
 * run must equal the calls accepted. Rank 1 starts late and runs each
 * call slowly (SLOW_NS), so that rank 0's rings fill and ask to grow
 * whatever the timing of the two processes: each of its four rings then
 * wants 8 chunks, more than memory.limit leaves. Then each worker allocates
 * registered memory until the limit refuses it, which it must.
 * The messages the limit makes (the refusal naming memory.limit, a ring
 * that stays at its size) are checked by the test's expect.sh patterns.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "job_test.h"
#include "rv_am.h"
#include "rv_rma.h"

#define CALLS 100000
#define SLOW_NS 2000
#define ALLOC_BYTES (256u << 10)
#define MAX_ALLOCS 1024
#define LATE_START_US 300000

static rv_handler_id_t h_count;
static atomic_ulong ran;
static bool slow; /* rank 1: its handler takes SLOW_NS */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static rv_status_t on_count(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)call;
    (void)arg;
    atomic_fetch_add(&ran, 1);
    if (slow)
        for (uint64_t t0 = now_ns(); now_ns() - t0 < SLOW_NS;)
            ;
    return RV_OK;
}

/* Registered memory until the limit says no: it must, and say so. */
static void exhaust(rv_worker_t *w, void **held, int *nheld)
{
    rv_rptr_t r;
    *nheld = 0;
    while (*nheld < MAX_ALLOCS) {
        void *p = rv_mem_alloc(w, ALLOC_BYTES, &r);
        if (p == NULL)
            break;
        held[(*nheld)++] = p;
    }
    EXPECT(*nheld < MAX_ALLOCS,
           "memory.limit never refused memory (%d x "
           "%u bytes)",
           *nheld, ALLOC_BYTES);
}

static int body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = arg;
    void **held = calloc(MAX_ALLOCS, sizeof(*held));
    uint64_t counts[3] = {0}; /* accepted, refused, ran */
    int nheld = 0;

    if (held == NULL)
        return 1;
    rv_barrier(w);
    /* Rank 1 starts late, so that rank 0's rings fill and ask to grow. */
    if (rv_rank(ctx) == 1)
        usleep(LATE_START_US);
    int peer = 1 - rv_rank(ctx);
    for (uint64_t i = 0; i < CALLS; i++) {
        rv_tid_t to =
            rv_tid_make(ctx, peer, (int)(i % (uint64_t)rv_threads(ctx)));
        rv_status_t st;
        while ((st = rv_call(w, to, h_count, &i, sizeof(i), NULL, 0)) ==
               RV_ERR_AGAIN)
            rv_progress(w);
        counts[st == RV_OK ? 0 : 1]++;
        EXPECT(st == RV_OK || st == RV_ERR_NO_MEMORY, "a call refused with %s",
               rv_status_str(st));
    }
    EXPECT(rv_quiesce(w) == RV_OK, "quiesce");
    rv_barrier(w);
    counts[2] = rv_worker_local(w) == 0 ? atomic_load(&ran) : 0;
    uint64_t sum[3];
    EXPECT(rv_coll_allreduce(w, sum, counts, 3, RV_COLL_U64, RV_COLL_SUM) == RV_OK,
           "allreduce");
    EXPECT(sum[2] == sum[0], "%llu calls accepted, %llu ran (%llu refused)",
           (unsigned long long)sum[0], (unsigned long long)sum[2],
           (unsigned long long)sum[1]);
    if (rv_worker_tid(w) == 0)
        printf("limits_mem: %llu calls accepted, %llu ran, %llu refused\n",
               (unsigned long long)sum[0], (unsigned long long)sum[2],
               (unsigned long long)sum[1]);
    rv_barrier(w);
    exhaust(w, held, &nheld);
    for (int i = 0; i < nheld; i++)
        rv_mem_free(w, held[i]);
    free(held);
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    slow = rv_rank(ctx) == 1;
    if (rv_rma_init(ctx) != RV_OK ||
        rv_am_register(ctx, "limits.count", on_count, NULL, &h_count) != RV_OK)
        return 1;
    if (rv_job_run(ctx, body, ctx) != RV_OK)
        atomic_fetch_add(&failures, 1);
    rv_finalize(ctx);
    return atomic_load(&failures) != 0 ? 1 : 0;
}
