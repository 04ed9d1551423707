/*
 * The invocation layer's append cursors (am_cursor.c): the calls and
 * fast paths of the caller's side that extend a destination's open run
 * record without bookkeeping, and the seal every reader of the records
 * takes first.
 */
#ifndef RIVET_AM_CURSOR_H
#define RIVET_AM_CURSOR_H

#include "am_pend.h"

rv_status_t am_cursors_init(am_worker_t *aw);
void am_cursors_fini(am_worker_t *aw);
/* Brings the run record of @p dest's cursor up to date and closes it;
 * every step that reads or transmits @p dest's records takes it first. */
void am_cursor_seal_open(am_worker_t *aw, rv_tid_t dest);
static inline void am_cursor_seal(am_worker_t *aw, rv_tid_t dest)
{
    if (aw->send.cur[dest].key != 0)
        am_cursor_seal_open(aw, dest);
}
/* The same for every destination. */
void am_cursors_seal(am_worker_t *aw);
/* Opens @p dest's cursor at the end of the run record just written by
 * trad_append (trad batch) or am_local_call (local thread @p local), when
 * it is the last record and more calls fit before a limit. */
void am_cursor_open_trad(am_worker_t *aw, rv_tid_t dest, am_dest_t *d,
                         const am_elem_t *e);
void am_cursor_open_local(am_worker_t *aw, rv_tid_t dest, int local,
                          const am_elem_t *e);

/* Appends an rv_call_return call at @p dest's cursor when its open run
 * takes it (same handler, lengths and synchronizer, which already counts
 * the call: am_cursor.c). calls_sent is counted at once (rv_quiesce
 * samples it); calls_local and bytes_sent when the cursor is sealed. */
static inline bool am_cursor_put_ret(am_worker_t *aw, rv_tid_t dest,
                                     rv_handler_id_t h, const void *args,
                                     size_t len, rv_sync_t *sync, void *ret,
                                     size_t ret_len)
{
    am_cursor_t *c = &aw->send.cur[dest];
    size_t stride = 16 + AM_ALIGN8(len);
    uint64_t s = (uintptr_t)sync, r = (uintptr_t)ret;
    if (c->key != am_cursor_key(h, AM_REC_RETRUN | (uint32_t)len
                                                       << AM_REC_ALEN_SHIFT) ||
        c->ret_len != ret_len || c->sync != s || c->wp + stride > c->lim)
        return false;
    if (c->local < 0) {
        /* Another process: the call carries its pending slot
         * (am_pend.c), never the caller's pointers. */
        s = r = am_pend_add(aw, sync, ret, (uint32_t)ret_len, dest, 1);
        if (s == 0)
            return false;
    }
    memcpy(c->wp, &s, 8);
    memcpy(c->wp + 8, &r, 8);
    if (len == 8) {
        memcpy(c->wp + 16, args, 8);
    } else if (len > 0) {
        memset(c->wp + stride - 8, 0, 8); /* deterministic padding */
        memcpy(c->wp + 16, args, len);
    }
    c->wp += stride;
    aw->stats.calls_sent++;
    return true;
}

/* The same for a plain call of @p len bytes (AM_REC_RUN, no result):
 * rv_call's fast path, the call of irregular traffic. */
static inline bool am_cursor_put_plain(am_worker_t *aw, rv_tid_t dest,
                                       rv_handler_id_t h, const void *args,
                                       size_t len)
{
    am_cursor_t *c = &aw->send.cur[dest];
    size_t stride = am_run_stride(len);
    if (c->key !=
            am_cursor_key(h, AM_REC_RUN | (uint32_t)len << AM_REC_ALEN_SHIFT) ||
        c->wp + stride > c->lim)
        return false;
    if (len == 8) {
        memcpy(c->wp, args, 8); /* a fixed-size copy: one move */
    } else {
        memset(c->wp + stride - 8, 0, 8); /* deterministic padding */
        if (len > 0)
            memcpy(c->wp, args, len);
    }
    c->wp += stride;
    aw->stats.calls_sent++;
    return true;
}

#endif
