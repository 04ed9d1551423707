/*
 * rv-soak: continuous load for bench/soak.sh, which samples every rank's
 * memory, descriptors and shared memory while it runs.
 *
 *   rivetrun -c JOB.yaml build/bin/rv-soak -m am|store -d SECONDS [-s BYTES]
 *
 *   -m am     every worker calls every worker: a blocking rv_call_return
 *             to one, asynchronous rv_call to all, an rv_quiesce per
 *             round; the handlers check the arguments they get
 *   -m store  object churn: every worker creates and seals an object of
 *             BYTES (default 64 KiB, above the rendezvous threshold) per
 *             step, gets the object its neighbour sealed the step before
 *             (a fetch, often while its owner deletes it), releases it,
 *             and deletes its own object of two steps before, so that
 *             deletes race the fetches of other workers
 *   -d SECONDS how long (default 60)
 *
 * Every worker makes STEPS steps per round; the workers then sum their
 * operations with rv_coll_allreduce, which also tells them all, at once, that
 * the time is up. Worker 0 of rank 0 prints one line per second:
 *   soak: t=SECONDS ops_per_s=RATE
 * Under -m store the first worker of every process also prints, after a
 * round, each new peak of the objects its process's store holds:
 *   soak: rank R t=SECONDS store_peak_objects=N store_peak_kib=K
 * The process's memory grows with that peak (a new record of objects live
 * at once needs heap it never needed before), not with time: soak.sh's
 * RSS steps are read against these lines.
 * A failed operation, or a wrong byte, ends the job with a message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rivet.h"
#include "rv_am.h"
#include "rv_coll.h"
#include "rv_store.h"

#define STEPS 32
#define DEFAULT_SECONDS 60
#define DEFAULT_OBJECT (64u << 10)
/* A get that waits longer than this for its neighbour's object fails. */
#define GET_TIMEOUT_MS 30000

static enum { MODE_AM, MODE_STORE } mode = MODE_AM;
static double seconds = DEFAULT_SECONDS;
static size_t object_size = DEFAULT_OBJECT;
static rv_handler_id_t h_work;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(rv_worker_t *w, const char *what, rv_status_t st)
{
    fprintf(stderr, "rv-soak: worker %u: %s: %s\n", (unsigned)rv_worker_tid(w),
            what, rv_status_str(st));
    fflush(stderr);
    _exit(1);
}

/* Arguments: the caller and a sequence number, and their sum as a check. */
typedef struct {
    uint64_t src, seq, check;
} work_args_t;

static rv_status_t on_work(rv_worker_t *w, rv_call_t *call, void *arg)
{
    work_args_t a;
    (void)arg;
    if (call->args_len != sizeof(a))
        die(w, "a call with arguments of the wrong length", RV_ERR_INVALID);
    memcpy(&a, call->args, sizeof(a));
    if (a.src != call->src || a.check != a.src + a.seq)
        die(w, "a call with wrong arguments", RV_ERR_INVALID);
    if (call->ret != NULL && call->ret_len >= sizeof(a.seq)) {
        memcpy(call->ret, &a.seq, sizeof(a.seq));
        call->ret_len = sizeof(a.seq);
    }
    return RV_OK;
}

/* One step of the AM load; returns the calls made. */
static uint64_t am_step(rv_worker_t *w, uint64_t seq)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_tid_t me = rv_worker_tid(w), n = rv_nworkers(ctx);
    work_args_t a = {.src = me, .seq = seq, .check = me + seq};
    uint64_t ret = 0;
    rv_status_t st = rv_call_return(w, (rv_tid_t)(seq % n), h_work, &a,
                                    sizeof(a), &ret, sizeof(ret), NULL, 0);
    if (st != RV_OK || ret != seq)
        die(w, "rv_call_return", st != RV_OK ? st : RV_ERR_INVALID);
    for (rv_tid_t d = 0; d < n; d++) {
        st = rv_call(w, d, h_work, &a, sizeof(a), NULL, 0);
        if (st != RV_OK)
            die(w, "rv_call", st);
    }
    return 1 + n;
}

/* The id of worker @p tid's object of step @p seq. */
static rv_object_id_t object_id(rv_tid_t tid, uint64_t seq)
{
    uint64_t key[2] = {tid, seq};
    rv_object_id_t id;
    rv_object_id_of(key, sizeof(key), &id);
    return id;
}

/* The worker's deletes refused for now (RV_ERR_AGAIN), retried. */
#define MAX_LATER 256
static _Thread_local rv_object_id_t later[MAX_LATER];
static _Thread_local unsigned nlater;

static void delete_later(rv_worker_t *w, const rv_object_id_t *id)
{
    if (nlater == MAX_LATER)
        die(w, "too many objects still referenced", RV_ERR_AGAIN);
    later[nlater++] = *id;
}

/* Retries the deletes refused before; returns the operations made. */
static uint64_t deletes_retry(rv_worker_t *w)
{
    unsigned kept = 0, n = nlater;
    for (unsigned i = 0; i < n; i++) {
        rv_status_t st = rv_store_delete(w, &later[i]);
        if (st == RV_ERR_AGAIN)
            later[kept++] = later[i];
        else if (st != RV_OK && st != RV_ERR_NOT_FOUND)
            die(w, "rv_store_delete", st);
    }
    nlater = kept;
    return n;
}

/* One step of the store churn; returns the operations made. */
static uint64_t store_step(rv_worker_t *w, uint64_t seq)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_tid_t me = rv_worker_tid(w), n = rv_nworkers(ctx);
    rv_tid_t from = (me + 1) % n;
    rv_object_id_t id = object_id(me, seq);
    uint64_t ops = 2;
    void *data;
    rv_status_t st = rv_store_create(w, &id, object_size, NULL, 0, &data);
    if (st != RV_OK)
        die(w, "rv_store_create", st);
    memset(data, (int)((me + seq) & 0xff), object_size);
    if ((st = rv_store_seal(w, &id)) != RV_OK)
        die(w, "rv_store_seal", st);
    if (seq > 0) {
        /* The neighbour's object of the step before: it may delete it
         * while we fetch it; then the get fails with not found, and that
         * is part of the churn. */
        rv_object_id_t nid = object_id(from, seq - 1);
        rv_store_buf_t b;
        st = rv_store_get(w, &nid, 1, GET_TIMEOUT_MS, &b, NULL);
        if (st == RV_OK) {
            const uint8_t *p = b.data;
            uint8_t want = (uint8_t)((from + seq - 1) & 0xff);
            if (b.data_size != object_size || p[0] != want ||
                p[object_size - 1] != want)
                die(w, "a fetched object with wrong bytes", RV_ERR_INVALID);
            rv_store_release(w, &nid);
        } else if (st != RV_ERR_NOT_FOUND) {
            die(w, "rv_store_get", st);
        }
        ops += 2;
    }
    if (seq >= 2) {
        /* RV_ERR_AGAIN: another worker of this process still references
         * the object (its neighbour fetched it); the delete is retried at
         * the next steps, or the object would stay for good. */
        ops += deletes_retry(w);
        rv_object_id_t old = object_id(me, seq - 2);
        st = rv_store_delete(w, &old);
        if (st == RV_ERR_AGAIN)
            delete_later(w, &old);
        else if (st != RV_OK)
            die(w, "rv_store_delete", st);
        ops++;
    }
    return ops;
}

/* Prints a new peak of the objects this process's store holds. */
static void store_peak(rv_worker_t *w, double t)
{
    static uint64_t peak_objects, peak_bytes;
    rv_store_stats_t s;
    rv_store_stats(w, &s);
    if (s.objects <= peak_objects && s.bytes <= peak_bytes)
        return;
    peak_objects = s.objects > peak_objects ? s.objects : peak_objects;
    peak_bytes = s.bytes > peak_bytes ? s.bytes : peak_bytes;
    printf("soak: rank %u t=%.1f store_peak_objects=%llu store_peak_kib=%llu\n",
           (unsigned)rv_rank(rv_worker_context(w)), t,
           (unsigned long long)peak_objects,
           (unsigned long long)(peak_bytes >> 10));
    fflush(stdout);
}

static int body(rv_worker_t *w, void *arg)
{
    bool lead = rv_worker_tid(w) == 0;
    double t0 = now_s(), last_print = 0;
    uint64_t seq = 0, ops_since = 0, total[2];
    (void)arg;

    for (;;) {
        uint64_t mine = 0;
        for (int s = 0; s < STEPS; s++, seq++)
            mine += mode == MODE_AM ? am_step(w, seq) : store_step(w, seq);
        if (mode == MODE_AM) {
            rv_status_t st = rv_quiesce(w);
            if (st != RV_OK)
                die(w, "rv_quiesce", st);
        }
        double t = now_s() - t0;
        if (mode == MODE_STORE && rv_worker_local(w) == 0)
            store_peak(w, t);
        uint64_t in[2] = {mine, t >= seconds};
        rv_status_t st =
            rv_coll_allreduce(w, total, in, 2, RV_COLL_U64, RV_COLL_SUM);
        if (st != RV_OK)
            die(w, "rv_coll_allreduce", st);
        ops_since += total[0];
        if (lead && t - last_print >= 1) {
            printf("soak: t=%.1f ops_per_s=%.0f\n", t,
                   (double)ops_since / (t - last_print));
            fflush(stdout);
            ops_since = 0;
            last_print = t;
        }
        if (total[1] > 0)
            break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    int c;

    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    while ((c = getopt(argc, argv, "m:d:s:")) != -1) {
        if (c == 'm' && strcmp(optarg, "store") == 0)
            mode = MODE_STORE;
        else if (c == 'm' && strcmp(optarg, "am") == 0)
            mode = MODE_AM;
        else if (c == 'd' && atof(optarg) > 0)
            seconds = atof(optarg);
        else if (c == 's' && atol(optarg) > 0)
            object_size = (size_t)atol(optarg);
        else {
            fprintf(stderr, "usage: rv-soak -m am|store [-d SECONDS] "
                            "[-s BYTES]\n");
            return 2;
        }
    }
    if (rv_am_register(ctx, "soak.work", on_work, NULL, &h_work) != RV_OK)
        return 1;
    if (mode == MODE_STORE && rv_store_init(ctx) != RV_OK)
        return 1;
    int rc = rv_job_run(ctx, body, NULL) == RV_OK ? 0 : 1;
    rv_finalize(ctx);
    return rc;
}
