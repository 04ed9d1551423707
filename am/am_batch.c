/*
 * The sender's batches: registered buffers that call records are
 * serialized into, and the runs of records transmitted from them, over
 * send (one AM to "rivet.am.batch") or into a messenger ring.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_cursor.h"

am_dest_t *am_dest(am_worker_t *aw, rv_tid_t dest)
{
    am_dest_t *d = aw->send.dests[dest];
    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        if (d == NULL)
            return NULL;
        d->tid = dest;
        d->write = am_write_to(aw, dest);
        /* Not under trad aggregation: its run stays open for many calls,
         * and every call rewrote the run's length and its run record's,
         * in the very cache line whose sequence word an idle receiver
         * polls, so each call paid a coherence miss (write-path trad at
         * 8 B fell from 32 M to 12-20 M calls/s on shm). Such runs go by
         * copy until the ring tells the receiver when to look by a word of
         * its own. */
        d->in_place = d->write && aw->cfg->aggregation != RV_AGG_TRAD;
        aw->send.dests[dest] = d;
        aw->send.used[aw->send.nused++] = d;
    }
    return d;
}

/* ---------------------------------------------------------------------- */
/* Batch buffers (registered)                                              */

am_buf_t *am_buf_get(am_worker_t *aw)
{
    am_buf_t *b = aw->send.free_bufs;
    if (b != NULL) {
        aw->send.free_bufs = b->next;
    } else {
        b = calloc(1, sizeof(*b));
        if (b == NULL)
            return NULL;
        void *mem;
        if (rv_mem_general_alloc(aw->gen, aw->send.buf_bytes, 64, &mem, NULL) !=
            RV_OK) {
            free(b);
            return NULL;
        }
        b->base = mem;
        b->cap = aw->send.buf_bytes;
        aw->send.bufs_made++;
    }
    b->used = b->sent = 0;
    b->open = SIZE_MAX;
    b->inflight = 0;
    b->next = NULL;
    return b;
}

void am_buf_put(am_worker_t *aw, am_buf_t *b)
{
    if (b->view) { /* the destination's own: unlinked, not freed */
        b->linked = false;
        return;
    }
    b->next = aw->send.free_bufs;
    aw->send.free_bufs = b;
}

/* A transmission from a buffer completed. Buffers that are fully sent and
 * no longer the destination's last are recycled by buf_reap. */
void am_buf_done(void *arg, rv_status_t status)
{
    am_buf_t *b = arg;
    if (status != RV_OK)
        rv_error("a batch of calls failed to leave: %s", rv_status_str(status));
    b->inflight--;
}

void am_free_done(void *arg, rv_status_t status)
{
    (void)status;
    free(arg);
}

void am_sync_done(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* Recycles the destination's leading buffers that are done. */
void am_buf_reap(am_worker_t *aw, am_dest_t *d)
{
    while (d->bufs != NULL && d->bufs != d->last &&
           d->bufs->sent == d->bufs->used && d->bufs->inflight == 0) {
        am_buf_t *b = d->bufs;
        d->bufs = b->next;
        if (d->unsent == b)
            d->unsent = b->next;
        am_buf_put(aw, b);
    }
}

/* ---------------------------------------------------------------------- */
/* Serializing and transmitting runs                                       */

/* The reserve in front of a run holds the run's record bytes. */
/* Transmits the run at @p off of @p b: RV_OK or RV_INPROGRESS when it
 * left, RV_ERR_AGAIN when the messenger cannot take it now. */
static rv_status_t run_transmit(am_worker_t *aw, am_dest_t *d, am_buf_t *b,
                                size_t off, bool immediate)
{
    size_t len = am_run_len(b, off);
    uint8_t *recs = b->base + off + sizeof(am_rec_t);
    rv_status_t st;
    if (b->view) {
        st = am_ring_commit(d, b, off, len);
        aw->runs_in_place++;
        goto out;
    }
    /* A destination whose ring could not be set up (its process out of
     * registered memory) takes its runs by the send path instead: no run
     * went by its ring, so the order holds, and no call is lost. */
    if (d->write && d->ring.state != RING_FAILED) {
        am_rec_t first;
        memcpy(&first, recs, sizeof(first));
        /* A lone record goes as a ring record of its own, but for a run
         * record, which goes inside a batch (a ring record outside
         * batches is one call). */
        if (len == am_rec_size(first.len) &&
            !am_rec_is_run(first.meta & AM_REC_KIND_MASK)) {
            st = am_ring_write(aw, d, b, recs, len);
        } else {
            am_rec_t batch = {.len = (uint32_t)len, .meta = AM_REC_BATCH};
            memcpy(b->base + off, &batch, sizeof(batch));
            st = am_ring_write(aw, d, b, b->base + off, am_rec_size(len));
            if (st < 0)
                am_run_set_len(b, off, len); /* the reserve again */
        }
    } else {
        struct iovec iov = {.iov_base = recs, .iov_len = len};
        st = rv_send_raw(aw->w, d->tid, am_batch_id, NULL, 0, &iov, 1,
                         immediate ? RV_AM_SEND_IMMEDIATE : 0, am_buf_done, b);
        if (st == RV_INPROGRESS)
            b->inflight++;
    }
out:
    if (st == RV_OK || st == RV_INPROGRESS) {
        aw->stats.flushes++;
        if (len > aw->stats.max_aggregated_bytes)
            aw->stats.max_aggregated_bytes = len;
    }
    return st;
}

/* The number of call records in the run at @p off. */
static uint64_t run_calls(const am_buf_t *b, size_t off)
{
    uint64_t n = 0;
    const uint8_t *p = b->base + off + sizeof(am_rec_t);
    const uint8_t *end = p + am_run_len(b, off);
    while (p + sizeof(am_rec_t) <= end) {
        am_rec_t rec;
        memcpy(&rec, p, sizeof(rec));
        uint32_t kind = rec.meta & AM_REC_KIND_MASK;
        if (kind == AM_REC_CALL)
            n++;
        else if (am_rec_is_run(kind))
            n += rec.len / am_elem_stride(kind, rec.meta >> AM_REC_ALEN_SHIFT);
        p += am_rec_size(rec.len);
    }
    return n;
}

/* Transmits @p d's pending runs in order, as far as the messenger takes
 * them; the open run too when @p open. Returns the runs transmitted, or
 * -1 on an error. */
int am_dest_push(am_worker_t *aw, am_dest_t *d, bool immediate, bool open)
{
    int n = 0;
    am_cursor_seal(aw, d->tid);
    /* A transmission may progress (a ring request waits for its send);
     * the progress hook must not push the same runs meanwhile. */
    if (d->pushing)
        return 0;
    d->pushing = true;
    /* Buffers before d->unsent are all sent (some still in flight):
     * starting there keeps a push O(1) however many wait for their
     * completions. */
    am_buf_t *b = d->unsent != NULL ? d->unsent : d->bufs;
    for (; b != NULL; b = b->next) {
        d->unsent = b;
        while (b->sent < b->used) {
            size_t off = b->sent;
            if (b->open == off && !open)
                goto out;
            size_t size = sizeof(am_rec_t) + am_run_len(b, off) + AM_REC_FOOTER;
            rv_status_t st = run_transmit(aw, d, b, off, immediate);
            if (st == RV_ERR_AGAIN) {
                /* The run waits, and an open one goes on gathering calls
                 * past am.flush_bytes (up to the buffer) until it can
                 * leave: counted once per run. */
                aw->runs_waited += !d->waiting;
                d->waiting = true;
                goto out;
            }
            d->waiting = false;
            if (st < 0) {
                /* The transport refused the run for good: its calls are
                 * lost. Say so once, count them, and go on with the next
                 * runs rather than retrying this one for ever. */
                if (!d->warned_lost)
                    rv_error("calls to worker %u are lost: %s", d->tid,
                             rv_status_str(st));
                d->warned_lost = true;
                aw->stats.calls_lost += run_calls(b, off);
                if (b->open == off)
                    b->open = SIZE_MAX;
                b->sent += size;
                d->pending -= size;
                continue;
            }
            if (b->open == off)
                b->open = SIZE_MAX;
            b->sent += size;
            d->pending -= size;
            n++;
        }
    }
out:
    d->pushing = false;
    am_buf_reap(aw, d);
    return n;
}

/* Largest run a destination batches into one transmission. */
size_t am_run_max(const am_worker_t *aw)
{
    size_t m = aw->send.buf_bytes - sizeof(am_rec_t) - AM_REC_FOOTER;
    if (am_some_ring(aw) &&
        aw->send.max_record - sizeof(am_rec_t) - AM_REC_FOOTER < m)
        m = aw->send.max_record - sizeof(am_rec_t) - AM_REC_FOOTER;
    return m;
}

/* @p d's only buffer is full: transmits what it holds, and when every
 * run of it has left and completed (a send the transport copied, a ring
 * write done), starts it again from the top instead of taking a second
 * buffer. A destination that many calls go to (a hop of am.routing) would
 * otherwise hold two buffers whenever it crosses from one to the next.
 * The push may run handlers that call d: the caller looks at d->last
 * again after it. */
static void buf_recycle(am_worker_t *aw, am_dest_t *d, size_t need)
{
    am_buf_t *b = d->last;
    if (d->bufs != b || d->pushing)
        return;
    am_dest_push(aw, d, false, true);
    b = d->last;
    if (d->bufs != b || b->sent != b->used || b->inflight != 0)
        return;
    if (b->view) {
        /* A view goes on from the ring's new position, if it has room. */
        size_t cap;
        if (d->no_view)
            return;
        uint8_t *at = am_ring_view_at(aw, d, need, &cap);
        if (at == NULL) {
            /* The ring may have rotated past the view meanwhile: closed,
             * so that no record lands where its ROTATE now lies. */
            b->cap = b->used;
            return;
        }
        b->base = at;
        b->cap = cap;
    }
    b->used = b->sent = 0;
    b->open = SIZE_MAX;
}

/* @p d's ring as the buffer of its next records, when it is mapped here
 * and every run before has gone into it (so the ring's position is where
 * the next run goes); NULL otherwise. */
static am_buf_t *view_open(am_worker_t *aw, am_dest_t *d, size_t need)
{
    am_buf_t *v = &d->view;
    size_t cap;
    if (!d->in_place || v->linked || d->pending != 0 || d->no_view)
        return NULL;
    uint8_t *at = am_ring_view_at(aw, d, need, &cap);
    if (at == NULL)
        return NULL;
    *v = (am_buf_t){
        .base = at, .cap = cap, .open = SIZE_MAX, .view = true, .linked = true};
    return v;
}

/* Room for a record of @p size bytes: in the open run when @p join and it
 * fits, else in a new run. Returns where the record goes. */
uint8_t *am_dest_reserve(am_worker_t *aw, am_dest_t *d, size_t size, bool join)
{
    am_cursor_seal(aw, d->tid);
    am_buf_t *b = d->last;
    if (join && b != NULL && b->open != SIZE_MAX) {
        size_t len = am_run_len(b, b->open);
        if (len + size <= aw->send.run_max && b->used + size <= b->cap) {
            uint8_t *at = b->base + b->used - AM_REC_FOOTER;
            am_run_set_len(b, b->open, len + size);
            b->used += size;
            d->pending += size;
            return at;
        }
    }
    size_t need = sizeof(am_rec_t) + size + AM_REC_FOOTER;
    if (b != NULL && b->used + need > b->cap) {
        buf_recycle(aw, d, need);
        b = d->last;
    }
    /* A destination whose ring is mapped here takes its runs there as
     * soon as none waits before them: from its first ring on, and again
     * after a full ring sent runs through buffers of the worker's. */
    am_buf_t *nb =
        d->in_place && (b == NULL || !b->view) ? view_open(aw, d, need) : NULL;
    if (nb == NULL && (b == NULL || b->used + need > b->cap) &&
        (nb = am_buf_get(aw)) == NULL)
        return NULL;
    if (nb != NULL) {
        if (b != NULL) {
            b->open = SIZE_MAX;
            b->next = nb;
        } else {
            d->bufs = nb;
        }
        if (!d->buffered) {
            d->buffered = true;
            aw->send.buffered_dests++;
        }
        d->last = b = nb;
    }
    b->open = b->used;
    am_run_set_len(b, b->open, size);
    b->used += need;
    d->pending += need;
    return b->base + b->open + sizeof(am_rec_t);
}

/* Takes back the record just reserved by dest_reserve. */
void am_dest_unreserve(am_dest_t *d, size_t size)
{
    am_buf_t *b = d->last;
    size_t len = am_run_len(b, b->open);
    if (len == size) {
        size_t need = sizeof(am_rec_t) + size + AM_REC_FOOTER;
        b->used -= need;
        d->pending -= need;
        b->open = SIZE_MAX;
    } else {
        am_run_set_len(b, b->open, len - size);
        b->used -= size;
        d->pending -= size;
    }
}
