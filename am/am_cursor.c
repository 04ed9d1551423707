/*
 * Append cursors: the open run record of each destination, which the
 * next calls of the same handler and argument length extend by a copy of
 * their arguments and a pointer bump (am_cursor_put_plain,
 * am_cursor_put_ret in am_cursor.h).
 *
 * A run record's header, its run's length, the buffer's fill and the
 * destination's pending bytes describe the calls appended so far. Keeping
 * them exact on every call costs more than the call itself on irregular
 * traffic (Bale's histogram: one 8-byte call per update). The cursor
 * instead notes where the run's next call goes and how far it may go
 * before any limit (buffer room, am.flush_bytes, the largest run, the
 * trad limit) would need a decision; the records are brought up to date
 * by am_cursor_seal, which every step that reads them or transmits them
 * takes first: pushing or reserving in a destination's batches, publishing
 * a local block, the progress hook's flush, and the slow paths of the
 * calls. The bytes written past the sealed end are never seen before that.
 */
#include <stdlib.h>
#include <string.h>

#include "am_cursor.h"

rv_status_t am_cursors_init(am_worker_t *aw)
{
    aw->send.cur = calloc(aw->nworkers, sizeof(*aw->send.cur));
    aw->send.copen = calloc(aw->nworkers, sizeof(*aw->send.copen));
    return aw->send.cur == NULL || aw->send.copen == NULL ? RV_ERR_NO_MEMORY
                                                          : RV_OK;
}

void am_cursors_fini(am_worker_t *aw)
{
    free(aw->send.cur);
    free(aw->send.copen);
    aw->send.cur = NULL;
    aw->send.copen = NULL;
}

/* The calls appended at @p c since it was opened, written into the run
 * record and the buffer it extends. */
static void cursor_commit(am_worker_t *aw, rv_tid_t dest, am_cursor_t *c)
{
    size_t nb = (size_t)(c->wp - c->start);
    if (nb == 0)
        return;
    aw->stats.bytes_sent += nb / c->stride * c->alen;
    if (c->local >= 0)
        aw->stats.calls_local += nb / c->stride;
    am_rec_t rec;
    if (c->local >= 0) {
        am_lblock_t *b = aw->local.lout[c->local];
        memcpy(&rec, b->data + b->run_at, sizeof(rec));
        rec.len += (uint32_t)nb;
        memcpy(b->data + b->run_at, &rec, sizeof(rec));
        b->tail += nb;
        return;
    }
    am_dest_t *d = aw->send.dests[dest];
    am_buf_t *b = d->run_buf;
    memcpy(&rec, b->base + d->run_at, sizeof(rec));
    rec.len += (uint32_t)nb;
    memcpy(b->base + d->run_at, &rec, sizeof(rec));
    am_run_set_len(b, b->open, am_run_len(b, b->open) + nb);
    b->used += nb;
    d->run_end = b->used;
    d->pending += nb;
}

void am_cursor_seal_open(am_worker_t *aw, rv_tid_t dest)
{
    am_cursor_t *c = &aw->send.cur[dest];
    cursor_commit(aw, dest, c);
    long unused = c->reserved - (long)((size_t)(c->wp - c->start) / c->stride);
    if (unused > 0)
        atomic_fetch_sub_explicit(&((rv_sync_t *)(uintptr_t)c->sync)->pending,
                                  unused, memory_order_release);
    c->reserved = 0;
    c->key = 0;
    c->wp = c->lim = c->start = NULL;
    /* Closed cursors leave the open list lazily (am_cursors_seal). */
}

void am_cursors_seal(am_worker_t *aw)
{
    for (uint32_t i = 0; i < aw->send.ncopen; i++) {
        am_cursor_seal(aw, aw->send.copen[i]);
        aw->send.cur[aw->send.copen[i]].listed = false;
    }
    aw->send.ncopen = 0;
}

static void cursor_open(am_worker_t *aw, rv_tid_t dest, const am_rec_t *rec,
                        const am_elem_t *e, uint8_t *wp, size_t room, int local)
{
    am_cursor_t *c = &aw->send.cur[dest];
    size_t stride = am_elem_stride(e->kind, e->alen);
    if (room < stride)
        return;
    c->sync = (uintptr_t)e->sync; /* this process's: the cursor's own */
    c->reserved = 0;
    if (e->kind == AM_REC_RETRUN) {
        /* The calls this run may still take are added to their
         * synchronizer now, in one atomic operation instead of one per
         * call; the seal takes back those that were not made. The count
         * is never below the calls outstanding, and is exact again from
         * the next progress (which seals), so rv_sync_wait waits for
         * every call and no longer. */
        c->reserved = (long)(room / stride);
        atomic_fetch_add_explicit(&((rv_sync_t *)(uintptr_t)c->sync)->pending,
                                  c->reserved, memory_order_relaxed);
    }
    if (!c->listed) {
        c->listed = true;
        aw->send.copen[aw->send.ncopen++] = dest;
    }
    c->key = am_cursor_key(rec->handler, rec->meta);
    c->ret_len = rec->ret_len;
    c->alen = rec->meta >> AM_REC_ALEN_SHIFT;
    c->stride = (uint32_t)am_elem_stride(rec->meta & AM_REC_KIND_MASK, c->alen);
    c->wp = c->start = wp;
    c->lim = wp + room;
    c->local = local;
}

void am_cursor_open_trad(am_worker_t *aw, rv_tid_t dest, am_dest_t *d,
                         const am_elem_t *e)
{
    /* Handlers run by the progress of the call that got here may have
     * opened it meanwhile. */
    am_cursor_seal(aw, dest);
    am_buf_t *b = d->last;
    if (b == NULL || b->open == SIZE_MAX || d->run_buf != b ||
        b->used != d->run_end)
        return;
    size_t run = am_run_len(b, b->open);
    /* The call that would reach am.flush_bytes takes the slow path,
     * which transmits the run. */
    size_t room = b->cap - b->used;
    if (run >= aw->cfg->flush_bytes || run >= aw->send.run_max ||
        d->pending >= aw->send.trad_limit)
        return;
    if (aw->cfg->flush_bytes - 1 - run < room)
        room = aw->cfg->flush_bytes - 1 - run;
    if (aw->send.run_max - run < room)
        room = aw->send.run_max - run;
    if (aw->send.trad_limit - d->pending < room)
        room = aw->send.trad_limit - d->pending;
    am_rec_t rec;
    memcpy(&rec, b->base + d->run_at, sizeof(rec));
    /* The next call goes where the record's footer is now (trad_extend). */
    cursor_open(aw, dest, &rec, e, b->base + b->used - 2 * AM_REC_FOOTER, room,
                -1);
}

void am_cursor_open_local(am_worker_t *aw, rv_tid_t dest, int local,
                          const am_elem_t *e)
{
    am_cursor_seal(aw, dest); /* as am_cursor_open_trad */
    am_lblock_t *b = aw->local.lout[local];
    if (b == NULL || b->run_at == SIZE_MAX)
        return;
    am_rec_t rec;
    memcpy(&rec, b->data + b->run_at, sizeof(rec));
    if (b->run_at + sizeof(rec) + rec.len != b->tail)
        return;
    cursor_open(aw, dest, &rec, e, b->data + b->tail, b->cap - b->tail, local);
}
