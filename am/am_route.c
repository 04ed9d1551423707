/*
 * am.routing: which worker a worker batches a call for, so that the
 * memory of a worker's batches grows with the hosts or with the square
 * root of the workers rather than with the workers.
 *
 *   direct  every destination worker has its own batch (am_dest_t);
 *   host    a call to a worker of another host goes, batched per host,
 *           to one worker of that host, the proxy, which hands it on
 *           (YGM's node-remote routing: "YGM: A Multi-Purpose
 *           Asynchronous Runtime for Distributed Computing", section
 *           3.2). The proxy of host H for this worker is the worker of H
 *           at this worker's place among its own host's workers, so the
 *           workers of a host spread their proxies over H's workers;
 *   twohop  the processes on a grid of C = ceil(sqrt(P)) columns, each
 *           thread index a plane of its own: a call from thread t goes
 *           first to thread t of the process in the sender's row and the
 *           destination's column, which forwards it down its column to
 *           thread t of the destination's process, which hands it to the
 *           destination thread by the local bypass (Bale's two-hop
 *           conveyor, "Conveyors for Streaming Many-To-Many
 *           Communication", section 3, with the threads of a process as
 *           a third dimension that costs no buffer, as its tensor
 *           conveyor's local one). A worker batches for (C - 1) + (R - 1)
 *           workers of R rows, whatever job.threads is.
 *
 * What is routed: the calls of the fast path, rv_call without buffer,
 * synchronizer or flags, and rv_call_return with small arguments and
 * result (AM_FAST_ARGS, AM_FAST_RET) -- the calls of irregular traffic,
 * which are the ones whose batches grow with the job. Each goes as an
 * AM_REC_FRUN or _FRET run record whose calls carry their destination
 * and source; a worker that is not the destination forwards the call
 * into its own batch for the next hop, so the source a handler sees is
 * the caller's. The answer of an rv_call_return comes back routed too, as
 * a call of rivet.am.answer. Other calls (buffers, notifications,
 * extended calls, broadcasts) go direct.
 *
 * Order: the routed calls from one worker to another all take the same
 * hops, and each hop forwards in the order it runs them, so they run in
 * the order they were made. A routed call and a direct one between the
 * same pair may pass each other.
 *
 * Quiescence: a forward or a routed answer is a call made by the worker
 * that makes it (routed_made), and counted as run where it is handed on
 * (calls_done), so rv_quiesce's sums balance only when every hop is done.
 */
#include <stdlib.h>
#include <string.h>

#include "am_cursor.h"

rv_handler_id_t am_answer_id;

/* The hosts' tables: per host, its workers in ascending order. */
static rv_status_t route_make_hosts(am_proc_t *proc, rv_context_t *ctx)
{
    int P = rv_size(ctx), T = rv_threads(ctx), H = rv_nhosts(ctx);
    if (H < 1)
        return RV_ERR_INVALID;
    proc->host_of = calloc((size_t)P, sizeof(*proc->host_of));
    proc->host_at = calloc((size_t)H + 1, sizeof(*proc->host_at));
    proc->host_n = calloc((size_t)H, sizeof(*proc->host_n));
    proc->host_tids = calloc((size_t)P * (size_t)T, sizeof(*proc->host_tids));
    if (proc->host_of == NULL || proc->host_at == NULL ||
        proc->host_n == NULL || proc->host_tids == NULL)
        return RV_ERR_NO_MEMORY;
    for (int p = 0; p < P; p++) {
        proc->host_of[p] = rv_rank_host(ctx, p);
        proc->host_n[proc->host_of[p]] += (uint32_t)T;
    }
    for (int h = 0; h < H; h++)
        proc->host_at[h + 1] = proc->host_at[h] + proc->host_n[h];
    uint32_t *fill = calloc((size_t)H, sizeof(*fill));
    if (fill == NULL)
        return RV_ERR_NO_MEMORY;
    for (int p = 0; p < P; p++) {
        int h = proc->host_of[p];
        for (int t = 0; t < T; t++)
            proc->host_tids[proc->host_at[h] + fill[h]++] =
                (rv_tid_t)(p * T + t);
    }
    free(fill);
    return RV_OK;
}

/* The grid's columns: the square root of the processes, rounded up. */
static uint32_t grid_cols(uint32_t nprocs)
{
    uint32_t c = 1;
    while (c * c < nprocs)
        c++;
    return c;
}

rv_status_t am_route_start(am_worker_t *aw)
{
    am_proc_t *proc = aw->proc;
    rv_status_t st = RV_OK;
    aw->grid_procs = aw->nworkers / (uint32_t)aw->threads;
    aw->grid_cols = grid_cols(aw->grid_procs);
    if (aw->cfg->routing != RV_ROUTE_HOST)
        return RV_OK;
    pthread_mutex_lock(&proc->route_lock);
    if (!proc->route_made) {
        st = route_make_hosts(proc, aw->ctx);
        proc->route_made = st == RV_OK;
    }
    pthread_mutex_unlock(&proc->route_lock);
    if (st != RV_OK)
        return st;
    int h = proc->host_of[aw->rank];
    for (uint32_t i = 0; i < proc->host_n[h]; i++)
        if (proc->host_tids[proc->host_at[h] + i] == aw->me)
            aw->host_index = i;
    return RV_OK;
}

void am_route_fini(am_proc_t *proc)
{
    free(proc->host_of);
    free(proc->host_at);
    free(proc->host_n);
    free(proc->host_tids);
    proc->route_made = false;
}

rv_tid_t am_route_hop(const am_worker_t *aw, rv_tid_t dst)
{
    rv_tid_t hop;
    switch (aw->cfg->routing) {
    case RV_ROUTE_HOST: {
        const am_proc_t *proc = aw->proc;
        int h = proc->host_of[dst / (uint32_t)aw->threads];
        if (h == proc->host_of[aw->rank])
            return dst;
        hop = proc->host_tids[proc->host_at[h] +
                              aw->host_index % proc->host_n[h]];
        break;
    }
    case RV_ROUTE_TWOHOP: {
        uint32_t T = (uint32_t)aw->threads, c = aw->grid_cols;
        uint32_t p = (uint32_t)aw->rank, q = dst / T;
        if (q == p) /* the destination's process: the local bypass */
            return dst;
        uint32_t m = p / c * c + q % c;
        /* The last row may be short: its processes go through the row
         * above, which forwards down the same column. */
        if (m >= aw->grid_procs)
            m -= c;
        /* In the destination's column already: down it to the
         * destination's process, on this worker's plane. */
        hop = (m == p ? q : m) * T + aw->me % T;
        break;
    }
    default:
        return dst;
    }
    return hop == aw->me ? dst : hop;
}

bool am_route_put(am_worker_t *aw, rv_tid_t hop, const am_elem_t *e)
{
    int local = am_local_thread(aw, hop);
    if (local >= 0)
        return am_local_call(aw, local, e);
    am_dest_t *d = aw->send.dests[hop];
    if (d == NULL && (d = am_dest(aw, hop)) == NULL)
        return false;
    /* Calls appended to hop's open run by the cursor are sealed first. */
    am_cursor_seal(aw, hop);
    return am_trad_put(aw, d, e);
}

/* Hands the routed call @p e on to its next hop, counted as a call made
 * here (rv_quiesce); @p what names it in the error when memory is out. */
static void route_send(am_worker_t *aw, const am_elem_t *e, const char *what)
{
    if (!am_route_put(aw, am_route_next(aw, e->dst), e)) {
        rv_error("out of memory %s of worker %u for worker %u: it is lost",
                 what, e->src, e->dst);
        aw->stats.calls_lost++;
        return;
    }
    aw->routed_made++;
}

/* The routed call @p c as a call record to write again. */
static am_elem_t route_elem(const am_call_t *c)
{
    bool ret = c->hdr.flags & AM_RETURN;
    return (am_elem_t){.kind = ret ? AM_REC_FRET : AM_REC_FRUN,
                       .dst = c->dst,
                       .src = c->src,
                       .h = c->handler,
                       .alen = (uint32_t)c->args_len,
                       .ret_len = ret ? c->hdr.ret_len : 0,
                       .pre = {c->hdr.sync, c->hdr.ret},
                       .args = c->args};
}

void am_route_forward(am_worker_t *aw, const am_call_t *c)
{
    am_elem_t e = route_elem(c);
    route_send(aw, &e, "forwarding a call");
}

/* The routed call at @p p of run @p r, as a call record to write again
 * (its route is @p route). */
static am_elem_t run_elem(const am_run_t *r, const uint8_t *p,
                          const uint32_t route[2])
{
    am_elem_t e = {.kind = r->cur.rkind,
                   .dst = route[0],
                   .src = route[1],
                   .h = r->cur.rh,
                   .alen = r->cur.ralen,
                   .ret_len = r->cur.rret_len,
                   .args = p + sizeof(uint32_t[2])};
    if (r->cur.rkind == AM_REC_FRET) {
        memcpy(e.pre, e.args, sizeof(e.pre));
        e.args = (const uint8_t *)e.args + sizeof(e.pre);
    }
    return e;
}

/* The handler of @p r's calls, or NULL when it is no call handler here
 * (am_run_call then drops the call, saying why). */
static const am_entry_t *run_entry(am_worker_t *aw, const am_run_t *r)
{
    const rv_handler_info_t *e = aw->recv.last_entry;
    if (e == NULL || e->id != r->cur.rh) {
        e = rv_handler_find(aw->ctx, r->cur.rh);
        if (e == NULL || e->fn != am_trampoline)
            return NULL;
        aw->recv.last_entry = e;
    }
    return e->arg;
}

unsigned am_route_run(am_worker_t *aw, am_run_t *r)
{
    /* The calls of a routed run, without decoding each into an am_call_t:
     * forwarded, or run when they are plain calls for this worker. A call
     * that needs more (an answer to build, a route naming no worker, a
     * handler not registered here) stops the loop: am_run_next and
     * am_run_call take it. Each call's cursor is advanced before it runs,
     * as everywhere. */
    unsigned n = 0;
    const am_entry_t *ae = NULL;
    if (aw->cfg->routing == RV_ROUTE_DIRECT)
        return 0; /* am_run_call drops them */
    r->refs++;
    while (r->cur.rp < r->cur.rend) {
        const uint8_t *p = r->cur.rp;
        uint32_t route[2];
        memcpy(route, p, sizeof(route));
        if (route[0] >= aw->nworkers || route[1] >= aw->nworkers)
            break;
        if (route[0] != aw->me) {
            am_elem_t e = run_elem(r, p, route);
            r->cur.rp += r->cur.rstride;
            route_send(aw, &e, "forwarding a call");
        } else {
            if (r->cur.rkind != AM_REC_FRUN ||
                (ae == NULL && (ae = run_entry(aw, r)) == NULL))
                break;
            r->cur.rp += r->cur.rstride;
            rv_call_t call = {.src = route[1],
                              .args = p + sizeof(route),
                              .args_len = r->cur.ralen};
            am_call_handler(aw, ae, &call);
        }
        aw->recv.calls_done++;
        n++;
    }
    r->refs--;
    return n;
}

void am_route_answer(am_worker_t *aw, const am_call_t *c, const void *ret,
                     uint32_t len)
{
    /* [the call's token][its result]: one plain call of rivet.am.answer,
     * routed back to the caller by the same rule. */
    uint8_t args[sizeof(uint64_t) + AM_FAST_RET];
    if (len > AM_FAST_RET)
        len = AM_FAST_RET; /* a routed call's result is at most this */
    memcpy(args, &c->hdr.sync, sizeof(uint64_t));
    if (len > 0)
        memcpy(args + sizeof(uint64_t), ret, len);
    am_elem_t e = {.kind = AM_REC_FRUN,
                   .dst = c->src,
                   .src = aw->me,
                   .h = am_answer_id,
                   .alen = (uint32_t)sizeof(uint64_t) + len,
                   .args = args};
    route_send(aw, &e, "answering a call");
}

rv_status_t am_on_answer(rv_worker_t *w, rv_call_t *call, void *arg)
{
    am_worker_t *aw = am_of(w);
    uint64_t token;
    (void)arg;
    if (call->args_len < sizeof(token)) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        return RV_OK;
    }
    memcpy(&token, call->args, sizeof(token));
    rv_sync_t *s = am_pend_answer(aw, call->src, token,
                                  (uint32_t)(call->args_len - sizeof(token)),
                                  (const uint8_t *)call->args + sizeof(token));
    if (s != NULL)
        rv_sync_complete(s, RV_OK);
    return RV_OK;
}
