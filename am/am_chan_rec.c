/*
 * The record channels (am_chan.h): trad, whose plain calls join the
 * destination's open run, and record, every call a record of its own in
 * a batch buffer; both transmit runs over send or into the destination's
 * ring (am_batch.c, am_ring.c).
 *
 * Aggregation decides when a run is transmitted: none at once; trad once
 * it holds am.flush_bytes, on rv_flush and when the worker goes idle;
 * ovfl only when the messenger cannot take the call right now (ring full
 * or being set up; on path send, when the transport cannot send at once),
 * up to am.ovfl_limit bytes. Runs that cannot be transmitted wait in
 * FIFO order and every later call queues behind them; am.on_full says
 * what a call does when that queue is over its limit (or, without
 * aggregation, not empty).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_chan.h"

/* The record channels' bodies are specialised per aggregation and path
 * (record_call's instances at the end): inlined into each. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

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
    case RV_ON_FULL_PROGRESS:
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

/* ---------------------------------------------------------------------- */
/* trad                                                                    */

/* A trad run grew to @p run bytes: it leaves once it holds
 * am.flush_bytes, else when the worker goes idle. */
static void trad_grown(am_worker_t *aw, am_dest_t *d, size_t run)
{
    if (run < aw->cfg->flush_bytes) {
        aw->send.idle_flush = true;
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
    if (run > aw->send.run_max || d->pending + stride > aw->send.trad_limit ||
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
    if (run > aw->send.run_max || d->pending + size > aw->send.trad_limit)
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
    while (!am_in_handler(aw) && d->pending + size > aw->send.trad_limit) {
        if (am_dest_push(aw, d, false, true) < 0)
            return false;
        if (d->pending + size > aw->send.trad_limit)
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

bool am_trad_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e)
{
    am_dest_t *d = aw->send.dests[dest];
    if (d == NULL || !trad_append(aw, d, e))
        return false;
    am_cursor_open_trad(aw, dest, d, e);
    return true;
}

/* ---------------------------------------------------------------------- */
/* record                                                                  */

/* Too large for a batch or a ring chunk: what is queued goes first, then
 * the call over send. On the write path a DETOUR record keeps its place
 * in the ring's order. */
static rv_status_t call_large(am_worker_t *aw, am_dest_t *d,
                              const call_desc_t *cd, am_hdr_t *hdr,
                              rv_sync_t *s, bool notify, bool rma_note,
                              bool write)
{
    if (am_dest_push(aw, d, false, true) < 0)
        return RV_ERR_TRANSPORT;
    if (write) {
        uint64_t token = ++d->ring.detours;
        /* A DETOUR stands alone in the ring, never inside a batch: it is
         * not serialized in place (a view's runs all go as batches). */
        am_cursor_seal(aw, d->tid);
        if (d->last != NULL && d->last->view)
            d->last->cap = d->last->used;
        d->no_view = true;
        uint8_t *at = am_dest_reserve(aw, d, am_rec_size(sizeof(token)), false);
        d->no_view = false;
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
                              cd->n ? 2 : 1, am_send_sync(cd, s, notify));
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
        return aw->send.trad_limit;
    }
}

/* The header of record call @p cd: notify flags and where the answer
 * goes. *rma_note: the call is completed by its ring's order (a ring
 * note of the write path) instead of by rivet.am.done. */
static am_hdr_t record_hdr(const am_worker_t *aw, const call_desc_t *cd,
                           bool notify, bool write, bool *rma_note)
{
    am_hdr_t hdr = am_hdr_of(aw, cd);
    *rma_note = false;
    if (notify) {
        hdr.sync = cd->token; /* 0 for a ring note: the ring's order */
        if (write && cd->ret == NULL) {
            hdr.flags |= AM_NOTIFY_RMA;
            *rma_note = true;
        } else {
            hdr.flags |= AM_NOTIFY | (cd->ret != NULL ? AM_RETURN : 0);
        }
    }
    return hdr;
}

/* After a record of @p size bytes was queued for @p d (ending buffer
 * @p mb at @p mark): transmits what aggregation @p agg says goes now, and
 * applies am.on_full when the queue is over @p limit. */
static rv_status_t record_queued(am_worker_t *aw, am_dest_t *d,
                                 rv_aggregation_t agg, bool queued, size_t size,
                                 size_t limit, const am_buf_t *mb, size_t mark)
{
    if (agg == RV_AGG_TRAD) {
        if (am_run_len(d->last, d->last->open) >= aw->cfg->flush_bytes) {
            if (am_dest_push(aw, d, false, true) < 0)
                return RV_ERR_TRANSPORT;
        } else {
            aw->send.idle_flush = true;
        }
        return RV_OK;
    }
    if (queued)
        return RV_OK;
    /* none and ovfl: go now if the messenger takes it */
    bool was_alone = d->pending == sizeof(am_rec_t) + size + AM_REC_FOOTER;
    if ((agg == RV_AGG_NONE || was_alone) &&
        am_dest_push(aw, d, agg == RV_AGG_OVFL, true) < 0)
        return RV_ERR_TRANSPORT;
    if (d->pending > limit || (agg == RV_AGG_NONE && d->pending > 0))
        return on_full(aw, d, size, limit, true, mb, mark);
    return RV_OK;
}

/* A record channel's call with aggregation @p agg over the write path or
 * not (@p write): both constants of each instance below, so that no call
 * reads what the configuration fixed. */
static ALWAYS_INLINE rv_status_t record_call(am_worker_t *aw,
                                             const call_desc_t *cd,
                                             rv_sync_t *s, bool notify,
                                             rv_aggregation_t agg, bool write)
{
    am_dest_t *d = aw->send.dests[cd->dest];
    if (d == NULL && (d = am_dest(aw, cd->dest)) == NULL)
        return RV_ERR_NO_MEMORY;
    if (agg == RV_AGG_TRAD && !notify && cd->n == 0 && cd->am_flags == 0 &&
        trad_append(aw, d,
                    &(am_elem_t){.kind = AM_REC_RUN,
                                 .h = cd->h,
                                 .alen = (uint32_t)cd->len,
                                 .args = cd->args}))
        return RV_OK;
    bool need_hdr = cd->n > 0 || notify || cd->am_flags != 0;
    size_t body = (need_hdr ? sizeof(am_hdr_t) : 0) + cd->len + cd->n;
    size_t size = am_rec_size(body);
    /* A plain call's record has no header: none is built. */
    bool rma_note = false;
    am_hdr_t hdr;
    if (need_hdr || size > aw->send.run_max)
        hdr = record_hdr(aw, cd, notify, write, &rma_note);

    if (size > aw->send.run_max)
        return call_large(aw, d, cd, &hdr, s, notify, rma_note, write);

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
    rv_status_t st = record_queued(aw, d, agg, queued, size, limit, mb, mark);
    if (st != RV_OK)
        return st;
    if (rma_note)
        am_ring_note(aw, d, s);
    else if (notify)
        atomic_fetch_add(&s->pending, 1);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* The record channels, one per aggregation and path                       */

/* A call its target answers through rivet.am.done carries a pending slot
 * (am_chan.h, am_slot_call); a ring note of the write path is completed
 * by the ring's order instead and needs none. */
#define RECORD_CHANNEL(agg_name, AGG, path, WRITE)                             \
    static rv_status_t record_##agg_name##_##path(                             \
        am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s, bool notify)     \
    {                                                                          \
        return record_call(aw, cd, s, notify, AGG, WRITE);                     \
    }                                                                          \
    static rv_status_t call_##agg_name##_##path(                               \
        am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s, bool notify)     \
    {                                                                          \
        if (notify && (!(WRITE) || cd->ret != NULL))                           \
            return am_slot_call(aw, cd, s, record_##agg_name##_##path);        \
        return record_##agg_name##_##path(aw, cd, s, notify);                  \
    }

RECORD_CHANNEL(none, RV_AGG_NONE, write, true)
RECORD_CHANNEL(ovfl, RV_AGG_OVFL, send, false)
RECORD_CHANNEL(ovfl, RV_AGG_OVFL, write, true)
RECORD_CHANNEL(trad, RV_AGG_TRAD, send, false)
RECORD_CHANNEL(trad, RV_AGG_TRAD, write, true)

/* [aggregation][write path][routed]. am.aggregation none over send is
 * the send channel (am_chan.c), never a record channel: its entries stay
 * empty. */
static const am_chan_ops_t record_chans[3][2][2] = {
    [RV_AGG_NONE][1] = {{"record/none/write", NULL, call_none_write},
                        {"routed-record/none/write", am_routed_fast,
                         call_none_write}},
    [RV_AGG_OVFL] =
        {{{"record/ovfl/send", NULL, call_ovfl_send},
          {"routed-record/ovfl/send", am_routed_fast, call_ovfl_send}},
         {{"record/ovfl/write", NULL, call_ovfl_write},
          {"routed-record/ovfl/write", am_routed_fast, call_ovfl_write}}},
    [RV_AGG_TRAD] =
        {{{"trad/send", am_trad_fast, call_trad_send},
          {"routed-record/trad/send", am_routed_fast, call_trad_send}},
         {{"trad/write", am_trad_fast, call_trad_write},
          {"routed-record/trad/write", am_routed_fast, call_trad_write}}},
};

const am_chan_ops_t *am_record_chan(rv_aggregation_t agg, bool write,
                                    bool routed)
{
    return &record_chans[agg][write][routed];
}
