/*
 * The invocation layer's slot: installation, per-worker state, the
 * progress hook, the job's stages, statistics and handler registration.
 *
 * The layer installs itself in a slot of core (rv_layer.h) on rv_am_init,
 * which every other entry point of the layer that needs it calls first:
 * rv_am_register, rv_am_hook_register, rv_am_flush_hook_register. Calls
 * made on the workers of a job where it was never initialised fail with
 * an error naming rv_am_init.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_cursor.h"

int am_slot = -1;
rv_handler_id_t am_done_id, am_dones_id, am_batch_id, am_ring_req_id,
    am_ring_rep_id;

/* A batch buffer takes several flushes' worth of calls, and at least
 * this much, so that a ring rotation or a large call rarely needs a new
 * one. */
#define AM_BUF_FLUSHES 4
#define AM_BUF_MIN_BYTES ((size_t)256 << 10)
/* Ring chunks are whole pages; huge pages only when they are a multiple
 * of the 2 MiB page. */
#define AM_PAGE 4096u
#define AM_HUGE_PAGE ((size_t)2 << 20)
/* The drain ends after this many consecutive quiet progress calls. */
#define AM_DRAIN_QUIET_POLLS 64
/* How long the job's end waits, once no call is made or run anywhere,
 * for calls that were made and have not run (am_worker_quiesce): longer
 * than a TCP retransmission. */
#define AM_END_STALL_MS 1000

static const rv_layer_ops_t am_layer;

am_proc_t *am_proc(rv_context_t *ctx)
{
    int slot = rv_layer_find(ctx, &am_layer);
    return slot < 0 ? NULL : rv_layer_context(ctx, slot);
}

void rv_am_stats(const rv_worker_t *w, rv_am_stats_t *stats)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL) {
        memset(stats, 0, sizeof(*stats));
        return;
    }
    am_cursors_seal(aw); /* their calls_local and bytes_sent */
    *stats = aw->stats;
}

static unsigned am_progress(rv_worker_t *w)
{
    am_worker_t *aw = am_of(w);
    unsigned n = am_local_poll(aw) + am_service_poll(aw);
    n += am_ring_progress(aw);
    for (rv_tid_t t = 0; aw->recv.srcs_busy > 0 && t < aw->nworkers; t++) {
        am_src_t *s = aw->recv.srcs[t];
        if (s != NULL && s->head != NULL)
            n += am_src_drain(aw, s, t);
    }
    /* Queued runs go when the messenger takes them; trad batches once
     * full, or when the worker has nothing else to do. */
    am_cursors_seal(aw);
    bool trad = aw->cfg->aggregation == RV_AGG_TRAD;
    bool flush_trad = trad && aw->send.idle_flush && !aw->streaming && n == 0 &&
                      rv_worker_idle_polls(w) > 0;
    if (flush_trad)
        aw->send.idle_flush = false;
    for (uint32_t i = 0; i < aw->send.nused; i++) {
        am_dest_t *d = aw->send.used[i];
        if (d->bufs == NULL)
            continue;
        if (flush_trad)
            d->last->open = SIZE_MAX; /* closed: goes as soon as it can */
        if (d->pending > 0) {
            int k = am_dest_push(aw, d, false, !trad || flush_trad);
            if (k > 0)
                n += (unsigned)k;
        } else {
            am_buf_reap(aw, d);
        }
    }
    /* The completions of the calls just run leave together, and the
     * local calls made meanwhile are published. */
    am_reply_flush(aw);
    am_local_flush(aw);
    return n;
}

/* The registered memory of a worker: chunks for the rings it grants
 * (am.chunk_bytes each), and memory.chunk chunks for its batch buffers and
 * control words. */
static rv_status_t worker_memory(am_worker_t *aw, size_t ring_chunk)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops = rv_context_transport(aw->ctx, &tp);
    int numa = rv_worker_numa_node(aw->w);
    rv_mem_chunk_params_t p;
    rv_mem_chunk_params_init(&p, rv_context_config(aw->ctx), ops, tp, numa);
    p.chunk_size = ring_chunk;
    if (ring_chunk % AM_HUGE_PAGE != 0 && p.huge_pages == RV_HUGE_AUTO)
        p.huge_pages = RV_HUGE_OFF;
    rv_status_t st = rv_mem_chunk_allocator_create(&p, &aw->ring_chunks);
    if (st != RV_OK)
        return st;
    rv_mem_chunk_params_init(&p, rv_context_config(aw->ctx), ops, tp, numa);
    st = rv_mem_chunk_allocator_create(&p, &aw->own_chunks);
    if (st == RV_OK)
        st = rv_mem_general_create(aw->own_chunks, &aw->gen);
    return st;
}

/* Sizes derived from the configuration. */
static void worker_sizes(am_worker_t *aw, size_t ring_chunk)
{
    const rv_am_config_t *cfg = aw->cfg;
    uint64_t chunk = rv_core_config(rv_context_config(aw->ctx))->memory.chunk;
    aw->send.buf_bytes = AM_BUF_FLUSHES * cfg->flush_bytes;
    if (aw->send.buf_bytes < AM_BUF_MIN_BYTES)
        aw->send.buf_bytes = AM_BUF_MIN_BYTES;
    if (aw->send.buf_bytes > chunk)
        aw->send.buf_bytes = chunk;
    aw->send.max_record = ring_chunk - am_rec_size(8); /* room to rotate */
    aw->send.run_max = am_run_max(aw);
    /* trad: what may wait for a full ring before am.on_full applies */
    aw->send.trad_limit = cfg->ovfl_limit > 2 * cfg->flush_bytes
                              ? cfg->ovfl_limit
                              : 2 * cfg->flush_bytes;
}

static void worker_free(am_worker_t *aw)
{
    if (aw->gen)
        rv_mem_general_destroy(aw->gen);
    if (aw->own_chunks)
        rv_mem_chunk_allocator_destroy(aw->own_chunks);
    if (aw->ring_chunks)
        rv_mem_chunk_allocator_destroy(aw->ring_chunks);
    free(aw->send.dests);
    free(aw->send.chans);
    free(aw->send.used);
    free(aw->send.replying);
    free(aw->local.lout);
    free(aw->local.lcur);
    free(aw->recv.srcs);
    free(aw->recv.rings);
    am_cursors_fini(aw);
    free(aw);
}

static rv_status_t am_worker_start(rv_worker_t *w)
{
    rv_context_t *ctx = rv_worker_context(w);
    am_worker_t *aw = calloc(1, sizeof(*aw));
    if (aw == NULL)
        return RV_ERR_NO_MEMORY;
    aw->w = w;
    aw->ctx = ctx;
    aw->send.pend_free = UINT32_MAX; /* no slot yet (am_pend.c) */
    aw->cfg = am_config(ctx);
    aw->proc = rv_layer_context(ctx, am_slot);
    aw->me = rv_worker_tid(w);
    aw->nworkers = rv_nworkers(ctx);
    aw->rank = rv_rank(ctx);
    aw->threads = rv_threads(ctx);
    aw->first_local = (rv_tid_t)(aw->rank * aw->threads);
    aw->send.dests = calloc(aw->nworkers, sizeof(*aw->send.dests));
    aw->send.chans = calloc(aw->nworkers, sizeof(*aw->send.chans));
    aw->recv.srcs = calloc(aw->nworkers, sizeof(*aw->recv.srcs));
    aw->send.used = calloc(aw->nworkers, sizeof(*aw->send.used));
    aw->send.replying = calloc(aw->nworkers, sizeof(*aw->send.replying));
    aw->local.lout = calloc((size_t)aw->threads, sizeof(*aw->local.lout));
    aw->local.lcur = calloc((size_t)aw->threads, sizeof(*aw->local.lcur));
    aw->recv.rings = calloc(aw->nworkers, sizeof(*aw->recv.rings));
    if (aw->send.dests == NULL || aw->send.chans == NULL ||
        aw->recv.srcs == NULL || aw->recv.rings == NULL ||
        aw->send.used == NULL || aw->send.replying == NULL ||
        aw->local.lout == NULL || aw->local.lcur == NULL)
        goto err_free;
    size_t ring_chunk =
        (aw->cfg->chunk_bytes + AM_PAGE - 1) & ~(size_t)(AM_PAGE - 1);
    if (worker_memory(aw, ring_chunk) != RV_OK)
        goto err_free;
    /* am.intranode mapped: the rings of same-host destinations are in
     * memory this process maps, so a write to them is a store. */
    aw->mapped_peers = aw->cfg->intranode == RV_AM_INTRANODE_MAPPED &&
                       rv_context_caps(ctx)->mem_alloc_host_mapped;
    worker_sizes(aw, ring_chunk);
    if (am_cursors_init(aw) != RV_OK || am_route_start(aw) != RV_OK)
        goto err_free;
    if (am_service_start(aw) != RV_OK)
        goto err_service;
    rv_worker_layer_set(w, am_slot, aw);
    return RV_OK;

err_service:
    am_service_stop(aw);
err_free:
    rv_error("worker %u: cannot set up the invocation layer's registered "
             "memory",
             aw->me);
    worker_free(aw);
    return RV_ERR_NO_MEMORY;
}

/* Transmissions whose completion callbacks point into this layer's
 * memory (batch buffers, ring pushes). */
static bool am_busy(am_worker_t *aw)
{
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->send.dests[t];
        for (am_buf_t *b = d ? d->bufs : NULL; b != NULL; b = b->next)
            if (b->inflight > 0)
                return true;
    }
    return am_ring_busy(aw) || atomic_load(&aw->service_pending) > 0;
}

/* The job's end is a barrier of calls (rv_quiesce), not a flush and a
 * drain alone: a call that a handler makes, or that a routing hop hands
 * on, while the last calls run is made after its worker flushed, and the
 * drain that runs it stops at the first quiet moment, which its target
 * may have reached already. The counting waves end when every call made
 * anywhere has run. Unlike rv_quiesce they give up once the sums stop
 * moving without balancing for a while (calls dropped at their targets,
 * or forged ones run), so that a message that lies cannot hang the job's
 * end: what is left then is the drain's. The program's hook is cleared
 * first: its argument may have lived on the stack of the function that
 * returned. */
static void am_worker_quiesce(rv_worker_t *w)
{
    am_worker_t *aw = am_of(w);
    uint64_t sums[2];
    aw->quiesce_hook = NULL;
    rv_status_t st = am_quiesce(aw, AM_END_STALL_MS, sums);
    if (st == RV_ERR_TIMEOUT && aw->me == 0)
        rv_warn("the job ends with %" PRIu64 " calls made and %" PRIu64
                " run or dropped at their targets, and none moved for %d ms: "
                "forged or malformed messages (see job.stats)",
                sums[0], sums[1], AM_END_STALL_MS);
    else if (st != RV_OK && st != RV_ERR_TIMEOUT)
        rv_error("worker %u: calls still queued at the end of the job: %s",
                 rv_worker_tid(w), rv_status_str(st));
    /* Wait for the transmissions out of registered memory. */
    while (am_busy(aw))
        rv_progress(w);
}

static void am_worker_drain(rv_worker_t *w)
{
    /* Everything sent has landed (every worker flushed): run it, and let
     * the last pushes complete before the endpoints close. */
    am_worker_t *aw = am_of(w);
    for (int quiet = 0; quiet < AM_DRAIN_QUIET_POLLS;) {
        unsigned n = rv_progress(w);
        quiet = n != 0 || am_busy(aw) ? 0 : quiet + 1;
    }
}

/* job.stats: a worker's counters, and the memory its batches took (the
 * measure of am.routing). */
typedef struct {
    rv_am_stats_t s;
    uint64_t routed_made, batch_dests, batch_buffer_bytes, reply_buffer_bytes;
    uint64_t runs_waited, runs_in_place;
} am_stats_line_t;

#define AM_STAT(_name, _help)                                                  \
    {                                                                          \
        .name = #_name, .help = _help,                                         \
        .offset = offsetof(am_stats_line_t, s._name)                           \
    }
#define AM_STAT_X(_name, _help)                                                \
    {                                                                          \
        .name = #_name, .help = _help,                                         \
        .offset = offsetof(am_stats_line_t, _name)                             \
    }
static const rv_stat_t am_stats[] = {
    AM_STAT(calls_sent, "calls made by the worker"),
    AM_STAT(calls_received, "calls it ran"),
    AM_STAT(bytes_sent, "arguments and buffers of the calls it made"),
    AM_STAT(bytes_received, "arguments and buffers of the calls it ran"),
    AM_STAT(calls_local, "calls made through the local bypass"),
    AM_STAT(flushes, "transmissions of call records"),
    AM_STAT(ring_full, "calls that met a full queue or ring"),
    AM_STAT(chunk_growths, "chunk requests for larger rings"),
    AM_STAT(chunks_granted, "ring chunks obtained from peers"),
    AM_STAT(max_aggregated_bytes,
            "largest transmission, bytes: a run that waits for its "
            "messenger gathers calls past am.flush_bytes"),
    AM_STAT_X(runs_waited, "runs the messenger could not take at once (ring "
                           "not yet granted or full, send queue full)"),
    AM_STAT_X(runs_in_place, "runs serialized straight into a ring mapped "
                             "here (a same-host destination on the write "
                             "path), with no copy of their own"),
    AM_STAT(detours, "write-path calls too large for a chunk, sent over "
                     "send in order"),
    AM_STAT(calls_lost, "calls accepted, then refused by the transport"),
    AM_STAT(broadcasts_forwarded, "broadcast calls passed on down the tree"),
    AM_STAT(max_nesting, "most call handlers on the worker's stack at once"),
    AM_STAT_X(routed_made, "calls forwarded or answers routed (am.routing)"),
    AM_STAT_X(batch_dests, "workers the worker kept a batch buffer for"),
    AM_STAT_X(batch_buffer_bytes, "bytes of the batch buffers it made"),
    AM_STAT_X(reply_buffer_bytes, "bytes of its answers' buffers"),
    {.name = NULL},
};
static const rv_stats_table_t am_stats_table = {
    .name = "am",
    .index_key = "worker",
    .help = "worker",
    .stats = am_stats,
};
RV_STATS_REGISTER_TABLE(am_stats_table)

static void print_stats(am_worker_t *aw)
{
    if (aw->stats.calls_lost > 0)
        rv_error("worker %u: %" PRIu64 " accepted calls were lost (see the "
                 "transport errors above)",
                 aw->me, aw->stats.calls_lost);
    rv_stats_mode_t mode =
        rv_core_config(rv_context_config(aw->ctx))->job.stats;
    if (mode == RV_STATS_OFF)
        return;
    am_stats_line_t l = {.s = aw->stats,
                         .routed_made = aw->routed_made,
                         .runs_waited = aw->runs_waited,
                         .runs_in_place = aw->runs_in_place,
                         .batch_dests = aw->send.buffered_dests,
                         .batch_buffer_bytes =
                             aw->send.bufs_made * aw->send.buf_bytes};
    /* The batch buffers are kept for reuse once made: the most held. */
    for (uint32_t i = 0; i < aw->send.nused; i++)
        l.reply_buffer_bytes += aw->send.used[i]->rcap;
    rv_stats_print(mode, &am_stats_table, aw->rank, aw->me, &l);
}

static void am_worker_stop(rv_worker_t *w)
{
    am_worker_t *aw = am_of(w);
    am_cursors_seal(aw);
    print_stats(aw);
    am_service_stop(aw);
    am_ring_fini(aw);
    am_reply_fini(aw);
    am_pend_fini(aw);
    am_local_fini(aw);
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->send.dests[t];
        if (d != NULL) {
            for (am_buf_t *b = d->bufs, *nb; b != NULL; b = nb) {
                nb = b->next;
                am_buf_put(aw, b);
            }
            free(d);
        }
        am_src_t *s = aw->recv.srcs[t];
        if (s != NULL) {
            for (am_run_t *r = s->head, *nr; r != NULL; r = nr) {
                nr = r->next;
                if (r->has_msg)
                    rv_msg_release(w, &r->msg);
                free(r);
            }
            for (am_run_t *r = s->detours, *nr; r != NULL; r = nr) {
                nr = r->next;
                free(r);
            }
            free(s);
        }
    }
    for (am_buf_t *b = aw->send.free_bufs, *nb; b != NULL; b = nb) {
        nb = b->next;
        free(b);
    }
    worker_free(aw);
    rv_worker_layer_set(w, am_slot, NULL);
}

static void proc_free(am_proc_t *proc)
{
    free(proc->queues);
    free(proc);
}

static void am_context_fini(rv_context_t *ctx)
{
    am_proc_t *proc = rv_layer_context(ctx, am_slot);
    if (proc == NULL)
        return;
    am_local_drop(proc);
    am_service_fini(proc);
    am_route_fini(proc);
    proc_free(proc);
    am_slot = -1;
}

static const rv_layer_ops_t am_layer = {
    .name = "am",
    .worker_start = am_worker_start,
    .progress = am_progress,
    .worker_quiesce = am_worker_quiesce,
    .worker_drain = am_worker_drain,
    .worker_stop = am_worker_stop,
    .context_fini = am_context_fini,
};

static rv_status_t register_own(rv_context_t *ctx)
{
    struct {
        const char *name;
        rv_handler_fn fn;
        unsigned flags;
        rv_handler_id_t *id;
    } own[] = {
        {"rivet.am.done", am_on_done, RV_HANDLER_INLINE, &am_done_id},
        {"rivet.am.dones", am_on_dones, RV_HANDLER_INLINE, &am_dones_id},
        {"rivet.am.batch", am_on_batch, RV_HANDLER_KEEP_DATA, &am_batch_id},
    };
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        rv_status_t st = rv_handler_register(ctx, own[i].name, own[i].fn, NULL,
                                             own[i].flags, own[i].id);
        if (st != RV_OK)
            return st;
    }
    return am_ring_register(ctx);
}

rv_status_t rv_am_init(rv_context_t *ctx)
{
    if (ctx == NULL)
        return RV_ERR_INVALID;
    if (am_proc(ctx) != NULL)
        return RV_OK;
    am_proc_t *proc = calloc(1, sizeof(*proc));
    if (proc == NULL)
        return RV_ERR_NO_MEMORY;
    proc->threads = rv_threads(ctx);
    pthread_mutex_init(&proc->route_lock, NULL);
    proc->queues = calloc((size_t)proc->threads * (size_t)proc->threads,
                          sizeof(*proc->queues));
    if (proc->queues == NULL)
        goto err_free;
    for (int i = 0; i < proc->threads * proc->threads; i++)
        __cds_wfcq_init(&proc->queues[i].head, &proc->queues[i].tail);
    rv_status_t st = register_own(ctx);
    if (st != RV_OK)
        goto err_free_st;
    am_service_init(proc);
    st = rv_layer_install(ctx, &am_layer, proc, &am_slot);
    if (st != RV_OK)
        goto err_service;
    /* A call handler of its own (am_route.c), registered once the layer
     * is installed. */
    return rv_am_register(ctx, "rivet.am.answer", am_on_answer, NULL,
                          &am_answer_id);

err_service:
    am_service_fini(proc);
err_free_st:
    proc_free(proc);
    return st;
err_free:
    proc_free(proc);
    return RV_ERR_NO_MEMORY;
}

rv_status_t rv_am_register(rv_context_t *ctx, const char *name, rv_call_fn fn,
                           void *arg, rv_handler_id_t *id_p)
{
    if (fn == NULL || ctx == NULL)
        return RV_ERR_INVALID;
    rv_status_t st = rv_am_init(ctx);
    if (st != RV_OK)
        return st;
    am_entry_t *e = malloc(sizeof(*e));
    if (e == NULL)
        return RV_ERR_NO_MEMORY;
    *e = (am_entry_t){.fn = fn, .arg = arg};
    st = rv_handler_register(ctx, name, am_trampoline, e, RV_HANDLER_OWNS_ARG,
                             &e->id);
    if (st != RV_OK) {
        free(e);
        return st;
    }
    if (id_p != NULL)
        *id_p = e->id;
    return RV_OK;
}

/* The invocation layer of @p ctx for a registration of @p what, made
 * before rv_job_run; NULL (logged, *st_p set) when it cannot be. */
static am_proc_t *registering(rv_context_t *ctx, const char *what,
                              rv_status_t *st_p)
{
    *st_p = rv_am_init(ctx);
    if (*st_p != RV_OK)
        return NULL;
    am_proc_t *proc = am_proc(ctx);
    if (proc->svc.users > 0) {
        rv_error("%s registered while the job runs; register it before "
                 "rv_job_run",
                 what);
        *st_p = RV_ERR_INVALID;
        return NULL;
    }
    return proc;
}

rv_status_t rv_am_hook_register(rv_context_t *ctx, const rv_am_hook_t *hook,
                                int *id_p)
{
    if (hook == NULL || hook->prepare == NULL)
        return RV_ERR_INVALID;
    rv_status_t st;
    char what[96];
    snprintf(what, sizeof(what), "call hook '%s'",
             hook->name ? hook->name : "");
    am_proc_t *proc = registering(ctx, what, &st);
    if (proc == NULL)
        return st;
    if (proc->nhooks == RV_AM_HOOKS_MAX) {
        rv_error("call hook '%s': all %d call hooks are taken", hook->name,
                 RV_AM_HOOKS_MAX);
        return RV_ERR_NO_MEMORY;
    }
    proc->hooks[proc->nhooks] = *hook;
    *id_p = proc->nhooks++;
    return RV_OK;
}

rv_status_t rv_am_xcheck_register(rv_context_t *ctx, rv_am_xcheck_fn fn,
                                  void *arg)
{
    if (fn == NULL)
        return RV_ERR_INVALID;
    rv_status_t st;
    am_proc_t *proc = registering(ctx, "an extended calls' check", &st);
    if (proc == NULL)
        return st;
    if (proc->xcheck != NULL) {
        rv_error("rv_am_xcheck_register: a check is registered already");
        return RV_ERR_INVALID;
    }
    proc->xcheck = fn;
    proc->xcheck_arg = arg;
    return RV_OK;
}

rv_status_t rv_am_flush_hook_register(rv_context_t *ctx, rv_am_flush_fn fn,
                                      void *arg)
{
    if (fn == NULL)
        return RV_ERR_INVALID;
    rv_status_t st;
    am_proc_t *proc = registering(ctx, "a flush hook", &st);
    if (proc == NULL)
        return st;
    if (proc->nflush_hooks == RV_AM_HOOKS_MAX) {
        rv_error("all %d flush hooks are taken", RV_AM_HOOKS_MAX);
        return RV_ERR_NO_MEMORY;
    }
    proc->flush_hooks[proc->nflush_hooks].fn = fn;
    proc->flush_hooks[proc->nflush_hooks].arg = arg;
    proc->nflush_hooks++;
    return RV_OK;
}
