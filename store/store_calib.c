/*
 * store.rndv_threshold: auto. At job start, worker 0 fetches blocks of
 * 1 KiB - 256 KiB from the first worker of rank 1 both ways a fetch can
 * go: eagerly (as the result of one call) and by rendezvous (a call's
 * round trip standing for the pin, then one RDMA read), and the threshold
 * is the largest size up to which eager was never slower ("Plasma over
 * RDMA", section 3.4, picks its 32 KiB the same way, by measuring both).
 * Every worker waits for the answer before the job's function runs; a job
 * of one process has no remote fetch and keeps 32 KiB.
 *
 * The largest size is one eager result (ST_CHUNK), so auto never picks
 * eager pieces. It stops there for a second reason: over UCX tcp, once a
 * connection has carried a transfer of 1 MiB or more, 256 KiB fetches on
 * it take 10-17 % longer for the rest of the job (measured with and
 * without fixed socket buffers), and a calibration must not leave the job
 * slower than it found it.
 *
 * Only rma operations and calls whose handlers need no worker state of
 * this layer are used: the other workers may still be starting.
 */
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define CAL_REPS 9
#define CAL_MAX ST_CHUNK
#define CAL_DEFAULT ((size_t)32 << 10)

static rv_handler_id_t cal_echo_id, cal_rptr_id, cal_result_id;

static st_proc_t *proc_of(rv_worker_t *w)
{
    return rv_layer_context(rv_worker_context(w), st_slot);
}

static rv_status_t on_cal_echo(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)w;
    (void)arg;
    memset(call->ret, 0x5a, call->ret_len);
    return RV_OK;
}

static rv_status_t on_cal_rptr(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_proc_t *p = proc_of(w);
    (void)arg;
    if (call->args_len != sizeof(p->cal_rptr))
        return RV_ERR_TRUNCATED;
    memcpy(&p->cal_rptr, call->args, sizeof(p->cal_rptr));
    atomic_store(&p->cal_have_rptr, true);
    return RV_OK;
}

static rv_status_t on_cal_result(rv_worker_t *w, rv_call_t *call, void *arg)
{
    st_proc_t *p = proc_of(w);
    uint64_t v;
    (void)arg;
    if (call->args_len != sizeof(v))
        return RV_ERR_TRUNCATED;
    memcpy(&v, call->args, sizeof(v));
    p->threshold = (size_t)v;
    atomic_fetch_add(&p->cal_results, 1);
    return RV_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median time of @p reps eager or rendezvous fetches of @p n bytes. */
static double time_fetch(rv_worker_t *w, rv_tid_t peer, rv_rptr_t src,
                         uint8_t *dst, size_t n, bool eager)
{
    double t[CAL_REPS];
    uint64_t word;
    for (int r = 0; r < CAL_REPS; r++) {
        rv_sync_t sync;
        rv_sync_init(&sync, 0);
        int64_t t0 = rv_time_ns();
        if (eager) {
            rv_call_return(w, peer, cal_echo_id, NULL, 0, dst, n, &sync, 0);
        } else {
            rv_call_return(w, peer, cal_echo_id, NULL, 0, &word, sizeof(word),
                           NULL, 0); /* the pin's round trip */
            rv_get(w, dst, src, n, &sync);
        }
        rv_sync_wait(w, &sync);
        t[r] = (double)(rv_time_ns() - t0);
    }
    qsort(t, CAL_REPS, sizeof(t[0]), cmp_double);
    return t[CAL_REPS / 2];
}

/* Worker 0: measures, decides, and tells every worker. */
static void calibrate(rv_worker_t *w, st_proc_t *p, rv_tid_t peer)
{
    rv_context_t *ctx = rv_worker_context(w);
    while (!atomic_load(&p->cal_have_rptr))
        rv_progress(w);
    uint8_t *dst = rv_mem_alloc(w, CAL_MAX, NULL);
    size_t threshold = 0;
    if (dst == NULL) {
        threshold = CAL_DEFAULT;
    } else {
        /* Warm both paths (connections, the remote key). */
        time_fetch(w, peer, p->cal_rptr, dst, CAL_MAX, true);
        time_fetch(w, peer, p->cal_rptr, dst, CAL_MAX, false);
        for (size_t n = 1024; n <= CAL_MAX; n *= 4) {
            double e = time_fetch(w, peer, p->cal_rptr, dst, n, true);
            double r = time_fetch(w, peer, p->cal_rptr, dst, n, false);
            rv_debug("store calibration: %zu B eager %.1f us, rendezvous "
                     "%.1f us",
                     n, e / 1e3, r / 1e3);
            if (e > r)
                break;
            threshold = n;
        }
        rv_mem_free(w, dst);
    }
    p->threshold = threshold;
    uint64_t v = threshold;
    for (rv_tid_t t = 1; t < rv_nworkers(ctx); t++)
        if (rv_call(w, t, cal_result_id, &v, sizeof(v), NULL, 0) != RV_OK)
            rv_abort(ctx, 1, "store: cannot share store.rndv_threshold");
    rv_info("store.rndv_threshold auto: eager up to %zu bytes, rendezvous "
            "above",
            threshold);
    atomic_fetch_add(&p->cal_results, 1);
}

void st_calibrate(rv_worker_t *w)
{
    rv_context_t *ctx = rv_worker_context(w);
    st_proc_t *p = proc_of(w);
    if (rv_size(ctx) < 2) {
        p->threshold = CAL_DEFAULT;
        return;
    }
    rv_tid_t me = rv_worker_tid(w), peer = (rv_tid_t)rv_threads(ctx);
    void *buf = NULL;
    if (me == peer) {
        rv_rptr_t rptr;
        buf = rv_mem_alloc(w, CAL_MAX, &rptr);
        if (buf == NULL)
            rv_abort(ctx, 1, "store: no registered memory to calibrate");
        memset(buf, 0x5a, CAL_MAX);
        if (rv_call(w, 0, cal_rptr_id, &rptr, sizeof(rptr), NULL, 0) != RV_OK)
            rv_abort(ctx, 1, "store: cannot start the calibration");
    }
    if (me == 0)
        calibrate(w, p, peer);
    /* Every worker of this process waits until the answer is here. */
    while (atomic_load(&p->cal_results) == 0)
        rv_progress(w);
    if (buf != NULL) {
        rv_flush(w, RV_TID_ALL);
        rv_mem_free(w, buf);
    }
}

rv_status_t st_calib_register(rv_context_t *ctx)
{
    rv_status_t st = rv_am_register(ctx, "rivet.store.cal_echo", on_cal_echo,
                                    NULL, &cal_echo_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.store.cal_rptr", on_cal_rptr, NULL,
                            &cal_rptr_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.store.cal_result", on_cal_result, NULL,
                            &cal_result_id);
    return st;
}
