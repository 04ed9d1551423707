/*
 * The invocation layer: calls, synchronizers, aggregation, local bypass
 * and the send path. The write path (messenger rings) is in am_ring.c.
 *
 * How a call travels, by configuration:
 *
 *   same process, am.local_bypass   a record in the caller's block for
 *                                   the destination thread, published
 *                                   on a wait-free queue (am_local.c)
 *   am.path send, no aggregation    one transport AM: the call header in
 *                                   the AM header, [args][buffer] as
 *                                   payload, zero-copy
 *   otherwise                       serialized once as a record (see
 *                                   am_internal.h) into a registered
 *                                   batch buffer, then transmitted as a
 *                                   run of records: one AM to
 *                                   "rivet.am.batch" (path send) or one
 *                                   ring record (path write)
 *
 * Aggregation decides when a run is transmitted: none at once; trad once
 * it holds am.flush_bytes, on rv_flush and when the worker goes idle;
 * ovfl only when the messenger cannot take the call right now (ring full
 * or being set up; on path send, when the transport cannot send at once),
 * up to am.ovfl_limit bytes. Runs that cannot be transmitted wait in
 * FIFO order and every later call queues behind them; am.on_full says
 * what a call does when that queue is over its limit (or, without
 * aggregation, not empty).
 *
 * Progress and re-entrancy. Handlers run from rv_progress, and a handler
 * may make calls, progress and wait. Every source of calls (a run of a
 * batch, a ring, a local queue) is consumed one call at a time, with its
 * cursor advanced *before* the handler runs, so a nested rv_progress
 * simply continues with the next call of the same source: FIFO order of
 * starting calls holds, nothing runs twice, and nothing waits for the
 * outer handler. Memory holding a running call's arguments is not
 * released (batch message kept, ring chunk not reported consumed) until
 * that call returns.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_cursor.h"

/* ---------------------------------------------------------------------- */
/* Caller side                                                             */

typedef struct {
    rv_tid_t dest;
    rv_handler_id_t h;
    const void *args, *buf;
    size_t len, n;
    void *ret;
    size_t ret_len;
    rv_sync_t *sync; /* the caller's, or NULL */
    unsigned flags;
    uint32_t am_flags;
    long notifications;
    const rv_am_xcall_t *x; /* an extended call's (rv_am_ext.h), or NULL */
    uint64_t token;         /* a call to another process answered by
                               rivet.am.done: its pending slot (am_pend.c),
                               what the call carries instead of pointers */
} call_desc_t;

/* The call header of @p cd (notification flags are the caller's). */
static am_hdr_t hdr_of(const am_worker_t *aw, const call_desc_t *cd)
{
    am_hdr_t hdr = {.args_len = (uint32_t)cd->len,
                    .flags = cd->am_flags,
                    .ret = cd->ret != NULL ? cd->token : 0,
                    .ret_len = (uint32_t)cd->ret_len,
                    .root = aw->me};
    if (cd->x != NULL) {
        /* The extension's words take the places of the result's and the
         * broadcast root's, which an extended call has not. */
        hdr.ret = cd->x->addr;
        hdr.ret_len = cd->x->len;
        hdr.root = cd->x->word;
    }
    return hdr;
}

static rv_status_t wait_local(rv_worker_t *w, rv_sync_t *local, rv_sync_t *sync)
{
    return sync == NULL ? rv_sync_wait(w, local) : RV_OK;
}

/* The synchronizer a call over send gives the transport's send: none
 * when the call notifies (its completion is the target's answer) or when
 * the caller gave none (core's send then waits for the payload, or
 * copies it inside a handler, which must not wait). */
static rv_sync_t *send_sync(const call_desc_t *cd, rv_sync_t *s, bool notify)
{
    return notify || cd->sync == NULL ? NULL : s;
}

/* Through the process's own queue: the record is written once into the
 * destination thread's open block; nothing crosses the transport. */
static rv_status_t call_local(am_worker_t *aw, const call_desc_t *cd,
                              rv_sync_t *s)
{
    bool notify = (cd->flags & RV_NOTIFY_CONSUMED) || cd->ret != NULL;
    bool plain = !notify && cd->n == 0 && cd->am_flags == 0;
    size_t body = (plain ? 0 : sizeof(am_hdr_t)) + cd->len + cd->n;
    uint8_t *at = am_local_reserve(aw, am_local_thread(aw, cd->dest),
                                   sizeof(am_rec_t) + AM_ALIGN8(body));
    if (at == NULL)
        return RV_ERR_NO_MEMORY;
    if (plain) {
        am_rec_write(at, cd->h, NULL, cd->args, cd->len, NULL, 0);
    } else {
        am_hdr_t hdr = hdr_of(aw, cd);
        hdr.flags |=
            AM_LOCAL | (notify ? AM_NOTIFY : 0) | (cd->ret ? AM_RETURN : 0);
        /* Within the process: the caller's own pointers. */
        hdr.sync = (uintptr_t)s;
        if (cd->ret != NULL && cd->x == NULL)
            hdr.ret = (uintptr_t)cd->ret;
        am_rec_write(at, cd->h, &hdr, cd->args, cd->len, cd->buf, cd->n);
        /* Raised before the block is published, so before the target
         * can complete it. */
        if (notify)
            atomic_fetch_add(&s->pending, 1);
    }
    aw->stats.calls_local++;
    return RV_OK;
}

/* The send path without aggregation: one AM, zero-copy. */
static rv_status_t call_am(am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s,
                           bool notify)
{
    am_hdr_t hdr = hdr_of(aw, cd);
    if (notify) {
        hdr.flags |= AM_NOTIFY | (cd->ret != NULL ? AM_RETURN : 0);
        hdr.sync = cd->token;
        atomic_fetch_add(&s->pending, cd->notifications);
    }
    struct iovec iov[2] = {{.iov_base = (void *)cd->args, .iov_len = cd->len},
                           {.iov_base = (void *)cd->buf, .iov_len = cd->n}};
    /* Without a notification the send's own completion is the call's;
     * with sync NULL core's send waits for it, or copies inside a
     * handler. */
    rv_status_t st = rv_sendx(aw->w, cd->dest, cd->h, &hdr, sizeof(hdr), iov,
                              cd->n ? 2 : 1, send_sync(cd, s, notify));
    if (st != RV_OK && notify)
        atomic_fetch_sub(&s->pending, cd->notifications);
    return st;
}

/* Applies am.on_full to a call that found its destination's queue over
 * the limit. @p reserved: the call's record is already queued, and ends
 * buffer @p mb at @p mark unless records were queued behind it
 * meanwhile (by handlers run while this call waited for its ring). */
static rv_status_t on_full(am_worker_t *aw, am_dest_t *d, size_t size,
                           size_t limit, bool reserved, const am_buf_t *mb,
                           size_t mark)
{
    /* A messenger being set up is not full: wait for it, unless this is
     * a handler, which must not wait (the call is queued instead). */
    bool in_handler = am_in_handler(aw);
    while (d->ring.state == RING_REQUESTED && !in_handler)
        rv_progress(aw->w);
    if (am_dest_push(aw, d, false, true) < 0)
        return RV_ERR_TRANSPORT;
    if (d->pending + (reserved ? 0 : size) <= limit ||
        d->ring.state == RING_REQUESTED)
        return reserved ? RV_OK : RV_INPROGRESS;
    aw->stats.ring_full++;
    rv_on_full_t mode = aw->cfg->on_full;
    /* A handler can neither wait for room (it would progress into the
     * next call, whose handler may wait too, without bound) nor lose the
     * call it makes (its answer, its forward): its call is queued, in
     * order, whatever am.on_full says. */
    if (in_handler)
        mode = RV_ON_FULL_RETRY_ASYNC;
    switch (mode) {
    case RV_ON_FULL_RETRY_ASYNC:
        if (!reserved)
            return RV_INPROGRESS; /* queue it */
        return RV_OK;
    case RV_ON_FULL_RETRY:
        if (rv_worker_in_callback(aw->w))
            break;
        while (d->pending + (reserved ? 0 : size) > limit) {
            if (am_dest_push(aw, d, false, true) < 0)
                return RV_ERR_TRANSPORT;
            if (d->pending + (reserved ? 0 : size) > limit)
                rv_progress(aw->w);
        }
        return reserved ? RV_OK : RV_INPROGRESS;
    case RV_ON_FULL_FAIL:
        break;
    }
    if (reserved) {
        /* Calls queued behind this one keep their order only if it stays:
         * then it is accepted, as if queued by retry_async. */
        if (d->last != mb || mb->used != mark)
            return RV_OK;
        am_dest_unreserve(d, size);
    }
    if (aw->cfg->aggregation == RV_AGG_OVFL && !d->warned_limit) {
        d->warned_limit = true;
        rv_error("calls to worker %u: its ring is full and %zu bytes of "
                 "calls already wait (am.ovfl_limit %" PRIu64 "); the call "
                 "is refused with RV_ERR_AGAIN (am.on_full: fail); every "
                 "call accepted before is kept",
                 d->tid, d->pending, aw->cfg->ovfl_limit);
    }
    return RV_ERR_AGAIN;
}

/* The record paths: aggregation and/or the write path. */
/* The arguments (and result) the fast path of the call takes at most. */
#define AM_FAST_ARGS 256

/* A trad run grew to @p run bytes: it leaves once it holds
 * am.flush_bytes, else when the worker goes idle. */
static void trad_grown(am_worker_t *aw, am_dest_t *d, size_t run)
{
    if (run < aw->cfg->flush_bytes) {
        aw->idle_flush = true;
        return;
    }
    am_dest_push(aw, d, false, true);
    am_stream_progress(aw);
}

/* Extends @p d's open run record by call @p e when it is the last record
 * of the open run and of the same handler, kind and lengths: 8 bytes per
 * 8-byte plain call instead of a record each. */
static bool trad_extend(am_worker_t *aw, am_dest_t *d, am_buf_t *b,
                        const am_elem_t *e, size_t stride)
{
    if (d->run_buf != b || b->used != d->run_end || b->open >= d->run_at)
        return false;
    am_rec_t rec;
    memcpy(&rec, b->base + d->run_at, sizeof(rec));
    if (!am_elem_matches(&rec, e))
        return false;
    size_t run = am_run_len(b, b->open) + stride;
    if (run > aw->run_max || d->pending + stride > aw->trad_limit ||
        b->used + stride > b->cap)
        return false;
    /* The run of records ends [record's footer][run's reserve]: the new
     * call goes where the record's footer was; both move behind it. */
    am_elem_write(b->base + b->used - 2 * AM_REC_FOOTER, e, stride);
    rec.len += (uint32_t)stride;
    memcpy(b->base + d->run_at, &rec, sizeof(rec));
    am_run_set_len(b, b->open, run);
    b->used += stride;
    d->run_end = b->used;
    d->pending += stride;
    trad_grown(aw, d, run);
    return true;
}

/* The common case of trad aggregation, kept short: call @p e appended to
 * the open run of its destination, which has room: as one more call of
 * the run record at its end, or as a new run record. */
static bool trad_append(am_worker_t *aw, am_dest_t *d, const am_elem_t *e)
{
    am_buf_t *b = d->last;
    size_t stride = am_elem_stride(e->kind, e->alen);
    if (b == NULL || b->open == SIZE_MAX)
        return false;
    if (trad_extend(aw, d, b, e, stride))
        return true;
    size_t size = sizeof(am_rec_t) + stride + AM_REC_FOOTER;
    if (b->used + size > b->cap)
        return false;
    size_t run = am_run_len(b, b->open) + size;
    if (run > aw->run_max || d->pending + size > aw->trad_limit)
        return false;
    uint8_t *at = b->base + b->used - AM_REC_FOOTER;
    am_rec_t rec = am_elem_rec(e, stride);
    memcpy(at, &rec, sizeof(rec));
    am_elem_write(at + sizeof(rec), e, stride);
    am_run_set_len(b, b->open, run);
    d->run_buf = b;
    d->run_at = (size_t)(at - b->base);
    b->used += size;
    d->run_end = b->used;
    d->pending += size;
    trad_grown(aw, d, run);
    return true;
}

bool am_trad_put(am_worker_t *aw, am_dest_t *d, const am_elem_t *e)
{
    if (trad_append(aw, d, e))
        return true;
    size_t stride = am_elem_stride(e->kind, e->alen);
    size_t size = am_rec_size(stride);
    /* The caller's own call waits for room, progressing, as Bale's
     * conveyors and YGM do; a handler's is queued (see on_full). */
    while (!am_in_handler(aw) && d->pending + size > aw->trad_limit) {
        if (am_dest_push(aw, d, false, true) < 0)
            return false;
        if (d->pending + size > aw->trad_limit)
            rv_progress(aw->w);
    }
    if (trad_append(aw, d, e))
        return true;
    uint8_t *at = am_dest_reserve(aw, d, size, true);
    if (at == NULL)
        return false;
    am_rec_t rec = am_elem_rec(e, stride);
    memcpy(at, &rec, sizeof(rec));
    am_elem_write(at + sizeof(rec), e, stride);
    am_buf_t *b = d->last;
    d->run_buf = b;
    d->run_at = (size_t)(at - b->base);
    d->run_end = b->used;
    trad_grown(aw, d, am_run_len(b, b->open));
    return true;
}

/* A call @p e to @p dest that am.routing sends through worker @p hop:
 * as a routed call, carrying its destination and source. */
static bool call_routed(am_worker_t *aw, rv_tid_t dest, rv_tid_t hop,
                        const am_elem_t *e)
{
    am_elem_t f = *e;
    f.kind = e->kind == AM_REC_RUN ? AM_REC_FRUN : AM_REC_FRET;
    f.dst = dest;
    f.src = aw->me;
    return am_route_put(aw, hop, &f);
}

/* The fast path of rv_call and rv_call_return: call @p e to @p dest,
 * written straight into a local block or a trad batch without building a
 * descriptor. False when it cannot (the caller takes call_out). */
static bool call_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e)
{
    am_cursor_seal(aw, dest);
    int local = am_local_thread(aw, dest);
    rv_tid_t hop = local < 0 ? am_route_next(aw, dest) : dest;
    if (hop != dest) {
        /* No cursor is opened: the next call may take another hop. */
        if (!call_routed(aw, dest, hop, e))
            return false;
    } else if (local >= 0) {
        if (!am_local_call(aw, local, e))
            return false;
        am_cursor_open_local(aw, dest, local, e);
        aw->stats.calls_local++;
    } else if (aw->cfg->aggregation != RV_AGG_TRAD || aw->dests[dest] == NULL ||
               !trad_append(aw, aw->dests[dest], e)) {
        return false;
    } else {
        am_cursor_open_trad(aw, dest, aw->dests[dest], e);
    }
    aw->stats.calls_sent++;
    aw->stats.bytes_sent += e->alen;
    return true;
}

/* Too large for a batch or a ring chunk: what is queued goes first, then
 * the call over send. On the write path a DETOUR record keeps its place
 * in the ring's order. */
static rv_status_t call_large(am_worker_t *aw, am_dest_t *d,
                              const call_desc_t *cd, am_hdr_t *hdr,
                              rv_sync_t *s, bool notify, bool rma_note)
{
    if (am_dest_push(aw, d, false, true) < 0)
        return RV_ERR_TRANSPORT;
    if (am_path_write(aw)) {
        uint64_t token = ++d->ring.detours;
        uint8_t *at = am_dest_reserve(aw, d, am_rec_size(sizeof(token)), false);
        if (at == NULL)
            return RV_ERR_NO_MEMORY;
        am_rec_t rec = {.len = sizeof(token), .meta = AM_REC_DETOUR};
        memcpy(at, &rec, sizeof(rec));
        memcpy(at + sizeof(rec), &token, sizeof(token));
        d->last->open = SIZE_MAX; /* a run of its own */
        if (am_dest_push(aw, d, false, true) < 0)
            return RV_ERR_TRANSPORT;
        hdr->flags |= AM_DETOUR;
        hdr->token = token;
        aw->stats.detours++;
    }
    if (rma_note)
        am_ring_note(aw, d, s);
    else if (notify)
        atomic_fetch_add(&s->pending, 1);
    struct iovec iov[2] = {{.iov_base = (void *)cd->args, .iov_len = cd->len},
                           {.iov_base = (void *)cd->buf, .iov_len = cd->n}};
    rv_status_t st = rv_sendx(aw->w, cd->dest, cd->h, hdr, sizeof(*hdr), iov,
                              cd->n ? 2 : 1, send_sync(cd, s, notify));
    /* A call that did not leave leaves @p s as it was (a ring note stays:
     * its place in the ring's order is taken). */
    if (st != RV_OK && notify && !rma_note)
        atomic_fetch_sub(&s->pending, 1);
    return st;
}

/* The bytes a destination may hold back before am.on_full applies. */
static size_t agg_limit(const am_worker_t *aw, rv_aggregation_t agg)
{
    switch (agg) {
    case RV_AGG_NONE:
        return 0;
    case RV_AGG_OVFL:
        return aw->cfg->ovfl_limit;
    default:
        return aw->trad_limit;
    }
}

static rv_status_t call_record(am_worker_t *aw, const call_desc_t *cd,
                               rv_sync_t *s, bool notify)
{
    am_dest_t *d = aw->dests[cd->dest];
    if (d == NULL && (d = am_dest(aw, cd->dest)) == NULL)
        return RV_ERR_NO_MEMORY;
    if (aw->cfg->aggregation == RV_AGG_TRAD && !notify && cd->n == 0 &&
        cd->am_flags == 0 &&
        trad_append(aw, d,
                    &(am_elem_t){.kind = AM_REC_RUN,
                                 .h = cd->h,
                                 .alen = (uint32_t)cd->len,
                                 .args = cd->args}))
        return RV_OK;
    rv_aggregation_t agg = aw->cfg->aggregation;
    am_hdr_t hdr = hdr_of(aw, cd);
    bool need_hdr = cd->n > 0 || notify || cd->am_flags != 0;
    bool rma_note = false;
    if (notify) {
        hdr.sync = cd->token; /* 0 for a ring note: the ring's order */
        if (am_path_write(aw) && cd->ret == NULL) {
            hdr.flags |= AM_NOTIFY_RMA;
            rma_note = true;
        } else {
            hdr.flags |= AM_NOTIFY | (cd->ret != NULL ? AM_RETURN : 0);
        }
    }
    size_t body = (need_hdr ? sizeof(hdr) : 0) + cd->len + cd->n;
    size_t size = am_rec_size(body);

    if (size > aw->run_max)
        return call_large(aw, d, cd, &hdr, s, notify, rma_note);

    /* Over the limit before this call? */
    size_t limit = agg_limit(aw, agg);
    if (d->pending > 0 &&
        am_dest_push(aw, d, agg == RV_AGG_OVFL, agg != RV_AGG_TRAD) < 0)
        return RV_ERR_TRANSPORT;
    bool queued = false;
    if (d->pending + size > limit && agg != RV_AGG_NONE) {
        rv_status_t st = on_full(aw, d, size, limit, false, NULL, 0);
        if (st == RV_INPROGRESS)
            queued = true;
        else if (st != RV_OK)
            return st;
    }

    uint8_t *at = am_dest_reserve(aw, d, size, agg != RV_AGG_NONE);
    if (at == NULL)
        return RV_ERR_NO_MEMORY;
    const am_buf_t *mb = d->last;
    size_t mark = mb->used;
    am_rec_write(at, cd->h, need_hdr ? &hdr : NULL, cd->args, cd->len, cd->buf,
                 cd->n);

    if (agg == RV_AGG_TRAD) {
        if (am_run_len(d->last, d->last->open) >= aw->cfg->flush_bytes) {
            if (am_dest_push(aw, d, false, true) < 0)
                return RV_ERR_TRANSPORT;
        } else {
            aw->idle_flush = true;
        }
    } else if (!queued) {
        /* none and ovfl: go now if the messenger takes it */
        bool was_alone = d->pending == sizeof(am_rec_t) + size + AM_REC_FOOTER;
        if ((agg == RV_AGG_NONE || was_alone) &&
            am_dest_push(aw, d, agg == RV_AGG_OVFL, true) < 0)
            return RV_ERR_TRANSPORT;
        if (d->pending > limit || (agg == RV_AGG_NONE && d->pending > 0)) {
            rv_status_t st = on_full(aw, d, size, limit, true, mb, mark);
            if (st != RV_OK)
                return st;
        }
    }
    if (rma_note)
        am_ring_note(aw, d, s);
    else if (notify)
        atomic_fetch_add(&s->pending, 1);
    return RV_OK;
}

rv_status_t am_not_initialised(const char *what)
{
    rv_error("%s on a worker of a job without the invocation layer: call "
             "rv_am_init (or rv_am_register) before rv_job_run, from the "
             "main thread",
             what);
    return RV_ERR_INVALID;
}

static rv_status_t call_out(rv_worker_t *w, const call_desc_t *cd)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL)
        return am_not_initialised("a call");
    if (cd->dest >= aw->nworkers) {
        rv_error("call to worker %u: the job has %u workers", cd->dest,
                 aw->nworkers);
        return RV_ERR_INVALID;
    }
    if (cd->len > UINT32_MAX / 2 || cd->n > UINT32_MAX / 2 ||
        cd->ret_len > UINT32_MAX)
        return RV_ERR_INVALID;
    am_cursor_seal(aw, cd->dest);

    rv_sync_t local;
    rv_sync_t *s = cd->sync;
    bool notify = (cd->flags & RV_NOTIFY_CONSUMED) || cd->ret != NULL;
    if (s == NULL) {
        rv_sync_init(&local, 0);
        s = &local;
    }
    rv_status_t st;
    bool bcast = cd->am_flags & AM_BCAST;
    bool by_send = bcast || (aw->cfg->path == RV_AM_PATH_SEND &&
                             aw->cfg->aggregation == RV_AGG_NONE);
    if (!bcast && am_local_thread(aw, cd->dest) >= 0) {
        st = call_local(aw, cd, s);
    } else {
        call_desc_t remote = *cd;
        /* Answered by rivet.am.done (not a ring note of the write path,
         * which the ring's own order completes): named by a pending
         * slot. */
        if (notify && (by_send || !am_path_write(aw) || cd->ret != NULL)) {
            remote.token =
                am_pend_add(aw, s, cd->ret, (uint32_t)cd->ret_len,
                            bcast ? RV_TID_ALL : cd->dest, cd->notifications);
            if (remote.token == 0)
                return RV_ERR_NO_MEMORY;
        }
        st = by_send ? call_am(aw, &remote, s, notify)
                     : call_record(aw, &remote, s, notify);
        if (st != RV_OK)
            am_pend_cancel(aw, remote.token);
    }
    if (st != RV_OK)
        return st;
    aw->stats.calls_sent++;
    aw->stats.bytes_sent += cd->len + cd->n;
    return wait_local(w, &local, cd->sync);
}

/* rv_call past its open run: kept out of line, so that the fast path
 * stays a few instructions with no stack frame to build. */
static __attribute__((noinline)) rv_status_t
call_slow(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h, const void *args,
          size_t len, rv_sync_t *sync, unsigned flags)
{
    am_worker_t *aw = am_of(w);
    if (aw != NULL && sync == NULL && flags == 0 && len <= AM_FAST_ARGS &&
        dest < aw->nworkers &&
        call_fast(aw, dest,
                  &(am_elem_t){.kind = AM_REC_RUN,
                               .h = h,
                               .alen = (uint32_t)len,
                               .args = args}))
        return RV_OK;
    call_desc_t cd = {.dest = dest,
                      .h = h,
                      .args = args,
                      .len = len,
                      .sync = sync,
                      .flags = flags,
                      .notifications = 1};
    return call_out(w, &cd);
}

rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *args, size_t len, rv_sync_t *sync,
                    unsigned flags)
{
    /* The call of irregular traffic (Bale's histogram: 8 bytes, no
     * synchronizer); anything else takes call_out. */
    am_worker_t *aw = am_of(w);
    if (aw != NULL && sync == NULL && flags == 0 && len <= AM_FAST_ARGS &&
        dest < aw->nworkers) {
        if (am_cursor_put_plain(aw, dest, h, args, len))
            return RV_OK;
        return call_slow(w, dest, h, args, len, sync, flags);
    }
    call_desc_t cd = {.dest = dest,
                      .h = h,
                      .args = args,
                      .len = len,
                      .sync = sync,
                      .flags = flags,
                      .notifications = 1};
    return call_out(w, &cd);
}

rv_status_t rv_call_buffer(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *buf,
                           size_t n, rv_sync_t *sync, unsigned flags)
{
    call_desc_t cd = {.dest = dest,
                      .h = h,
                      .args = args,
                      .len = len,
                      .buf = buf,
                      .n = n,
                      .sync = sync,
                      .flags = flags,
                      .notifications = 1};
    return call_out(w, &cd);
}

/* rv_call_return past its open run (see call_slow). */
static __attribute__((noinline)) rv_status_t
call_return_slow(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                 const void *args, size_t len, void *ret, size_t ret_len,
                 rv_sync_t *sync, unsigned flags)
{
    am_worker_t *aw = am_of(w);
    if (aw != NULL && sync != NULL && (flags & ~RV_NOTIFY_CONSUMED) == 0 &&
        len <= AM_FAST_ARGS && ret_len <= AM_FAST_RET && dest < aw->nworkers) {
        am_elem_t e = {.kind = AM_REC_RETRUN,
                       .h = h,
                       .alen = (uint32_t)len,
                       .ret_len = (uint32_t)ret_len,
                       .pre = {(uintptr_t)sync, (uintptr_t)ret},
                       .sync = sync,
                       .args = args};
        uint64_t token = 0;
        bool remote = am_local_thread(aw, dest) < 0;
        if (remote) {
            /* Another process: the call carries its pending slot. */
            token = am_pend_add(aw, sync, ret, (uint32_t)ret_len, dest, 1);
            e.pre[0] = e.pre[1] = token;
        }
        atomic_fetch_add_explicit(&sync->pending, 1, memory_order_relaxed);
        if ((!remote || token != 0) && call_fast(aw, dest, &e))
            return RV_OK;
        atomic_fetch_sub_explicit(&sync->pending, 1, memory_order_relaxed);
        am_pend_cancel(aw, token);
    }
    call_desc_t cd = {.dest = dest,
                      .h = h,
                      .args = args,
                      .len = len,
                      .ret = ret,
                      .ret_len = ret_len,
                      .sync = sync,
                      .flags = flags,
                      .notifications = 1};
    return call_out(w, &cd);
}

rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, void *ret,
                           size_t ret_len, rv_sync_t *sync, unsigned flags)
{
    if (ret == NULL)
        return RV_ERR_INVALID;
    /* Index-gather's call (Bale): small arguments and result, one
     * synchronizer for many calls. A call the open run takes is already
     * counted by the synchronizer (am_cursor.c); else the count is raised
     * first: the local bypass may run it before call_fast returns
     * (another thread). */
    am_worker_t *aw = am_of(w);
    if (aw != NULL && sync != NULL && (flags & ~RV_NOTIFY_CONSUMED) == 0 &&
        len <= AM_FAST_ARGS && ret_len <= AM_FAST_RET && dest < aw->nworkers &&
        am_cursor_put_ret(aw, dest, h, args, len, sync, ret, ret_len))
        return RV_OK;
    return call_return_slow(w, dest, h, args, len, ret, ret_len, sync, flags);
}

/* The wire flags of extension @p x. */
static uint32_t xcall_flags(const rv_am_xcall_t *x)
{
    uint32_t f = 0;
    if (x->mode & RV_AM_X_REF)
        f |= AM_XREF;
    else if (x->mode & RV_AM_X_PLACE)
        f |= AM_XPLACE;
    if (x->mode & RV_AM_X_HOOK)
        f |= AM_XHOOK | (uint32_t)x->hook << AM_XHOOK_SHIFT;
    return f;
}

rv_status_t rv_am_call_x(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                         const void *args, size_t len, const void *buf,
                         size_t n, const rv_am_xcall_t *x, rv_sync_t *sync,
                         unsigned flags)
{
    am_worker_t *aw = am_of(w);
    if (x == NULL || ((x->mode & RV_AM_X_REF) && buf != NULL) ||
        ((x->mode & RV_AM_X_HOOK) &&
         (aw == NULL || x->hook < 0 || x->hook >= aw->proc->nhooks))) {
        rv_error("rv_am_call_x to worker %u: an invalid extension", dest);
        return RV_ERR_INVALID;
    }
    call_desc_t cd = {.dest = dest,
                      .h = h,
                      .args = args,
                      .len = len,
                      .buf = buf,
                      .n = n,
                      .sync = sync,
                      .flags = flags,
                      .am_flags = xcall_flags(x),
                      .notifications = 1,
                      .x = x};
    return call_out(w, &cd);
}

rv_status_t rv_broadcast_buffer(rv_worker_t *w, rv_handler_id_t h,
                                const void *args, size_t len, const void *buf,
                                size_t n, rv_sync_t *sync, unsigned flags)
{
    /* The root sends to itself: its own delivery forwards to its children
     * and runs the handler, like every other worker's. */
    call_desc_t cd = {.dest = rv_worker_tid(w),
                      .h = h,
                      .args = args,
                      .len = len,
                      .buf = buf,
                      .n = n,
                      .sync = sync,
                      .flags = flags,
                      .am_flags = AM_BCAST,
                      .notifications = (long)rv_nworkers(rv_worker_context(w))};
    return call_out(w, &cd);
}

rv_status_t rv_broadcast(rv_worker_t *w, rv_handler_id_t h, const void *args,
                         size_t len, rv_sync_t *sync, unsigned flags)
{
    return rv_broadcast_buffer(w, h, args, len, NULL, 0, sync, flags);
}

/* Sends every open run of @p d and waits until nothing is pending. */
static rv_status_t dest_flush(am_worker_t *aw, am_dest_t *d, bool wait)
{
    for (;;) {
        if (am_dest_push(aw, d, false, true) < 0)
            return RV_ERR_TRANSPORT;
        if (d->pending == 0 || !wait)
            return RV_OK;
        if (rv_worker_in_callback(aw->w))
            return RV_ERR_AGAIN;
        rv_progress(aw->w);
    }
}

rv_status_t am_flush_calls(am_worker_t *aw, rv_tid_t dest)
{
    am_local_flush(aw);
    /* Routed calls to @p dest wait in the batch for the first hop. */
    rv_tid_t hop = dest != RV_TID_ALL ? am_route_next(aw, dest) : dest;
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        if ((dest != RV_TID_ALL && t != dest && t != hop) ||
            aw->dests[t] == NULL)
            continue;
        rv_status_t st = dest_flush(aw, aw->dests[t], true);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}

rv_status_t rv_flush(rv_worker_t *w, rv_tid_t dest)
{
    am_worker_t *aw = am_of(w);
    if (aw == NULL)
        return am_not_initialised("rv_flush");
    if (dest != RV_TID_ALL && dest >= aw->nworkers)
        return RV_ERR_INVALID;
    rv_status_t st = am_flush_calls(aw, dest);
    /* Then the operations of the layers above (rma's one-sided ones). */
    for (int i = 0; st == RV_OK && i < aw->proc->nflush_hooks; i++)
        st = aw->proc->flush_hooks[i].fn(w, dest, aw->proc->flush_hooks[i].arg);
    return st;
}
