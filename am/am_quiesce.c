/*
 * rv_quiesce: the barrier of calls. It returns once every call made
 * before it anywhere in the job, and every call those calls' handlers
 * made, transitively, has run: the semantics of YGM's barrier and of
 * Bale's convey_advance(..., done), which rv_barrier (core's barrier of
 * workers) does not give.
 *
 * Termination is detected by counting, with Mattern's four-counter
 * method ("Algorithms for distributed termination detection", Distributed
 * Computing 2(3), 1987, section 4): every worker counts the calls it
 * made (forwards of broadcasts and of routed calls, and routed answers,
 * included, calls the transport lost
 * excluded) and the calls it ran; waves of rv_coll_allreduce sum both over the
 * job. The job is quiet when one wave finds the sums equal and the next
 * finds the same sums again: a call counted as made in the second wave
 * but not run in the first would have changed a sum. Each worker reads
 * its counters in its own code, never with a handler on its stack, so a
 * call counted as run has finished, and the calls it made are counted.
 * Between waves, and while a wave's reduction waits, workers progress and
 * run calls; what the workers hold back (trad batches, queued calls) is
 * pushed out before every wave. Work the program holds in its own
 * queues takes part through its hook (rv_quiesce_hook): called before
 * each wave, it makes the calls it can and says what it still holds, and
 * a wave that finds anything held is not quiet.
 */
#include <inttypes.h>
#include <string.h>

#include "am_internal.h"

/* The job's end stops waiting (am_quiesce with a time to give up) only
 * after more than this many waves found the same unbalanced sums. */
#define AM_STALL_WAVES 8

/* The waves of rv_quiesce for @p aw. With @p give_up_ms 0 they go on
 * until the job is quiet. Otherwise they stop with RV_ERR_TIMEOUT once the
 * sums have stayed the same, unequal, with nothing held and no call on a
 * service thread, for more than AM_STALL_WAVES waves and @p give_up_ms ms
 * (the workers' mean, so that every worker decides alike): no call was
 * made or run anywhere meanwhile, so the calls missing from the sums were
 * dropped at their targets, or forged ones were run (a worker counts what
 * it drops as run, and a message sent around the layer counts as made
 * nowhere). The time covers a call that a transport retransmits. @p sums
 * gets the last sums of calls made and run. */
rv_status_t am_quiesce(am_worker_t *aw, unsigned give_up_ms, uint64_t sums[2])
{
    rv_worker_t *w = aw->w;
    uint64_t prev[2] = {UINT64_MAX, 0};
    unsigned same = 0;
    int64_t stalled = 0; /* when the sums stopped moving, here */
    rv_status_t st = rv_flush(w, RV_TID_ALL);
    for (unsigned wave = 0; st == RV_OK; wave++) {
        /* The program's own queues first: the calls its hook makes are
         * counted in this wave, and what it still holds keeps the job
         * from being quiet. */
        uint64_t held =
            aw->quiesce_hook != NULL ? aw->quiesce_hook(w, aw->quiesce_arg) : 0;
        if (aw->quiesce_hook != NULL)
            st = am_flush_calls(aw, RV_TID_ALL);
        /* A reduction need not wait (a job of one worker does not): each
         * wave progresses at least once, so the calls to oneself run. */
        rv_progress(w);
        const rv_am_stats_t *s = &aw->stats;
        uint64_t mine[4] = {
            s->calls_sent + s->broadcasts_forwarded + aw->routed_made -
                s->calls_lost,
            aw->recv.calls_done, held + atomic_load(&aw->service_pending),
            same > 0 ? (uint64_t)(rv_time_ns() - stalled) / 1000000u : 0};
        uint64_t sum[4];
        if (st == RV_OK)
            st = rv_coll_allreduce(w, sum, mine, 4, RV_COLL_U64, RV_COLL_SUM);
        if (st != RV_OK)
            break;
        bool unchanged = sum[0] == prev[0] && sum[1] == prev[1];
        if (unchanged && sum[0] == sum[1] && sum[2] == 0) {
            rv_debug("rv_quiesce: quiet after %u waves, %" PRIu64
                     " calls made and run",
                     wave + 1, sum[0]);
            return RV_OK;
        }
        same = unchanged && sum[2] == 0 ? same + 1 : 0;
        if (same == 1)
            stalled = rv_time_ns();
        if (give_up_ms != 0 && same > AM_STALL_WAVES &&
            sum[3] >= (uint64_t)give_up_ms * aw->nworkers) {
            memcpy(sums, sum, sizeof(uint64_t[2]));
            return RV_ERR_TIMEOUT;
        }
        prev[0] = sum[0];
        prev[1] = sum[1];
        st = am_flush_calls(aw, RV_TID_ALL);
    }
    return st;
}

rv_status_t rv_quiesce(rv_worker_t *w)
{
    am_worker_t *aw = am_of(w);
    uint64_t sums[2];
    if (aw == NULL)
        return am_not_initialised("rv_quiesce");
    if (am_in_handler(aw)) {
        rv_error("rv_quiesce called from a handler; it is called from the "
                 "worker's own code, by every worker");
        return RV_ERR_INVALID;
    }
    return am_quiesce(aw, 0, sums);
}

rv_status_t rv_quiesce_hook(rv_worker_t *w, rv_quiesce_hook_fn fn, void *arg)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL)
        return am_not_initialised("rv_quiesce_hook");
    aw->quiesce_hook = fn;
    aw->quiesce_arg = arg;
    return RV_OK;
}
