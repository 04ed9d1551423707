/*
 * A rank dies while the others wait for it inside a blocking call of a
 * layer above am: the job must end naming it, never hang (faults.c does
 * rv_call_return and rv_quiesce; this program the rest).
 *
 *   rivetrun -n 2 -c JOB.yaml test_faults_blocking SCENARIO
 *
 * Every worker of rank 0 loops on the scenario's blocking call to rank 1,
 * the victim, which kills itself with SIGKILL (no handler, no goodbye)
 * after WARMUP_ROUNDS of its own, from where the scenario says:
 *
 *   kill-in-amlong  rv_get_handler of AMLONG_BYTES, which waits until the
 *                   victim has read the payload and run the handler; the
 *                   victim dies inside that handler, the caller's
 *                   rendezvous in flight
 *   kill-in-reclaim rv_epoch_try_reclaim from every worker, with objects
 *                   deferred on both ranks: the elected reclaimer waits
 *                   for every process; the victim dies between two of its
 *                   own reclaims
 *   kill-in-fetch   rv_store_get, waiting for ever, of object after
 *                   object of FETCH_BYTES that the victim creates one at a
 *                   time (every CREATE_EVERY_MS) and alone holds: the
 *                   caller waits for the next to be sealed, or fetches it;
 *                   the victim dies as it seals one
 *
 * Output for faults.sh as faults.c's: "faults: rank R pid P pgid G" and
 * "faults: rank R faults at T".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rivet.h"
#include "rv_am.h"
#include "rv_epoch.h"
#include "rv_gptr.h"
#include "rv_rma.h"
#include "rv_store.h"

#define WARMUP_ROUNDS 50
#define AMLONG_BYTES (256u << 10)
#define FETCH_BYTES (256u << 10)
#define CREATE_EVERY_MS 5
#define VICTIM 1

static const char *scenario;
static rv_handler_id_t h_long;
static atomic_uint long_calls; /* the victim's handler ran so often */
static unsigned threads;

static bool is(const char *name)
{
    return strcmp(scenario, name) == 0;
}

/* SIGKILL: nothing of the victim runs after it. */
static void die(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    printf("faults: rank %d faults at %.3f (%s)\n", VICTIM,
           (double)t.tv_sec + (double)t.tv_nsec / 1e9, scenario);
    fflush(stdout);
    kill(getpid(), SIGKILL);
}

static rv_status_t on_long(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)call;
    (void)arg;
    if (atomic_fetch_add(&long_calls, 1) + 1 == WARMUP_ROUNDS * threads)
        die(); /* inside the handler the caller waits for */
    return RV_OK;
}

/* The content of object @p i: its id is the hash of it, so that every
 * rank knows the ids without asking. */
static void object_fill(unsigned char *buf, unsigned i)
{
    for (size_t k = 0; k < FETCH_BYTES; k++)
        buf[k] = (unsigned char)(i * 131 + k * 7);
}

static rv_status_t amlong_caller(rv_worker_t *w, rv_context_t *ctx)
{
    rv_rptr_t rsrc;
    void *src = rv_mem_alloc(w, AMLONG_BYTES, &rsrc);
    rv_tid_t to = rv_tid_make(ctx, VICTIM, 0);
    rv_status_t st = src != NULL ? RV_OK : RV_ERR_NO_MEMORY;

    for (unsigned i = 0; st == RV_OK; i++)
        st = rv_get_handler(w, to, h_long, &i, sizeof(i), rsrc, AMLONG_BYTES,
                            NULL, 0);
    return st;
}

static void obj_free(rv_worker_t *w, void *obj, void *arg)
{
    (void)w;
    (void)arg;
    free(obj);
}

/* Every worker of both ranks defers objects of its own and reclaims; the
 * victim's worker 0 dies after WARMUP_ROUNDS. */
static rv_status_t reclaim_loop(rv_worker_t *w, rv_context_t *ctx)
{
    rv_epoch_manager_t *em;
    rv_status_t st = rv_epoch_manager_create(w, obj_free, NULL, &em);
    bool victim = rv_rank(ctx) == VICTIM;
    rv_epoch_token_t *tok = st == RV_OK ? rv_epoch_register(em) : NULL;

    if (tok == NULL)
        return st != RV_OK ? st : RV_ERR_NO_MEMORY;
    for (unsigned i = 0;; i++) {
        void *obj = malloc(64);
        if (victim && rv_worker_local(w) == 0 && i == WARMUP_ROUNDS)
            die();
        rv_epoch_pin(tok);
        rv_epoch_defer_delete(tok, rv_gptr_make(rv_rank(ctx), obj));
        rv_epoch_unpin(tok);
        st = rv_epoch_try_reclaim(w, em, NULL);
        if (st != RV_OK && st != RV_ERR_AGAIN)
            return st;
    }
}

/* Object @p i: its bytes, and so its id, are known to every rank. */
static void object_id(unsigned i, unsigned char *buf, rv_object_id_t *id)
{
    object_fill(buf, i);
    rv_object_id_of(buf, FETCH_BYTES, id);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static rv_status_t fetch_owner(rv_worker_t *w)
{
    unsigned char *buf = malloc(FETCH_BYTES);
    rv_status_t st = buf != NULL ? RV_OK : RV_ERR_NO_MEMORY;

    for (unsigned i = 0; st == RV_OK; i++) {
        rv_object_id_t id;
        void *data;
        double next = now_ms() + CREATE_EVERY_MS;
        object_id(i, buf, &id);
        st = rv_store_create(w, &id, FETCH_BYTES, NULL, 0, &data);
        if (st != RV_OK)
            break;
        memcpy(data, buf, FETCH_BYTES);
        st = rv_store_seal(w, &id);
        if (i == WARMUP_ROUNDS)
            die();
        while (now_ms() < next)
            rv_progress(w);
    }
    free(buf);
    return st;
}

static rv_status_t fetch_caller(rv_worker_t *w)
{
    unsigned char *buf = malloc(FETCH_BYTES);
    rv_status_t st = buf != NULL ? RV_OK : RV_ERR_NO_MEMORY;

    for (unsigned i = 0; st == RV_OK; i++) {
        rv_object_id_t id;
        rv_store_buf_t got;
        object_id(i, buf, &id);
        st = rv_store_get(w, &id, 1, RV_STORE_WAIT_FOREVER, &got, NULL);
        if (st == RV_OK)
            st = rv_store_release(w, &id);
    }
    free(buf);
    return st;
}

static int body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = arg;
    bool victim = rv_rank(ctx) == VICTIM;
    rv_status_t st;

    if (rv_barrier(w) != RV_OK)
        return 1;
    if (is("kill-in-reclaim")) {
        st = reclaim_loop(w, ctx);
    } else if (victim) {
        /* Only worker 0 of the victim owns objects; the others serve. */
        if (is("kill-in-fetch") && rv_worker_local(w) == 0)
            st = fetch_owner(w);
        else
            for (;;)
                rv_progress(w);
    } else if (is("kill-in-amlong")) {
        st = amlong_caller(w, ctx);
    } else {
        st = fetch_caller(w);
    }
    /* Any return is a failure: the job had to end while it waited. */
    fprintf(stderr, "faults: worker %u returned: %s\n",
            (unsigned)rv_worker_tid(w), rv_status_str(st));
    return 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;

    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc != 2 || rv_size(ctx) != 2) {
        fprintf(stderr, "usage: rivetrun -n 2 test_faults_blocking "
                        "SCENARIO\n");
        return 2;
    }
    scenario = argv[1];
    if (!is("kill-in-amlong") && !is("kill-in-reclaim") &&
        !is("kill-in-fetch")) {
        fprintf(stderr, "test_faults_blocking: unknown scenario %s\n",
                scenario);
        return 2;
    }
    printf("faults: rank %d pid %d pgid %d\n", (int)rv_rank(ctx), (int)getpid(),
           (int)getpgrp());
    fflush(stdout);
    threads = (unsigned)rv_threads(ctx);
    if (rv_rma_init(ctx) != RV_OK || rv_store_init(ctx) != RV_OK ||
        rv_am_register(ctx, "faults.long", on_long, NULL, &h_long) != RV_OK)
        return 1;
    int rc = rv_job_run(ctx, body, ctx) == RV_OK ? 0 : 1;
    rv_finalize(ctx);
    return rc;
}
