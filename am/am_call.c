/*
 * The invocation layer's calls: rv_call and its siblings, described once
 * and handed to the destination's channel (am_chan.h), which the job's
 * configuration chose when the destination was first called; rv_flush.
 *
 * The route of rv_call: the inline cursor append (am_cursor.h) takes a
 * call that joins the destination's open run record; else call_slow asks
 * the channel's fast entry; else the call is described and call_out hands
 * it to the channel's call entry.
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

#include "am_chan.h"

/* ---------------------------------------------------------------------- */
/* Caller side                                                             */

static rv_status_t wait_local(rv_worker_t *w, rv_sync_t *local, rv_sync_t *sync)
{
    return sync == NULL ? rv_sync_wait(w, local) : RV_OK;
}

/* The arguments (and result) the fast path of the call takes at most. */
#define AM_FAST_ARGS 256

/* The fast path of rv_call and rv_call_return past their cursor: call
 * @p e to @p dest through its channel's fast entry, without building a
 * descriptor. False when it cannot (the caller takes call_out). */
static bool call_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e)
{
    am_cursor_seal(aw, dest);
    const am_chan_ops_t *c = am_chan(aw, dest);
    if (c->fast == NULL || !c->fast(aw, dest, e))
        return false;
    aw->stats.calls_sent++;
    aw->stats.bytes_sent += e->alen;
    return true;
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
    rv_status_t st = cd->am_flags & AM_BCAST
                         ? am_chan_bcast(aw, cd, s, notify)
                         : am_chan(aw, cd->dest)->call(aw, cd, s, notify);
    if (st != RV_OK)
        return st;
    aw->stats.calls_sent++;
    aw->stats.bytes_sent += cd->len + cd->n;
    return wait_local(w, &local, cd->sync);
}

/* Whether rv_call's call is plain, for its fast path: the call of
 * irregular traffic (Bale's histogram: 8 bytes, no synchronizer). */
static inline bool plain_call(const am_worker_t *aw, rv_tid_t dest, size_t len,
                              const rv_sync_t *sync, unsigned flags)
{
    return aw != NULL && sync == NULL && flags == 0 && len <= AM_FAST_ARGS &&
           dest < aw->nworkers;
}

/* A call as rv_call_buffer makes it: described, through its channel. */
static rv_status_t call_described(rv_worker_t *w, rv_tid_t dest,
                                  rv_handler_id_t h, const void *args,
                                  size_t len, void *ret, size_t ret_len,
                                  rv_sync_t *sync, unsigned flags)
{
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

/* A plain rv_call past its open run: kept out of line, so that the fast
 * path stays a few instructions with no stack frame to build. */
static __attribute__((noinline)) rv_status_t
call_slow(rv_worker_t *w, am_worker_t *aw, rv_tid_t dest, rv_handler_id_t h,
          const void *args, size_t len)
{
    if (call_fast(aw, dest,
                  &(am_elem_t){.kind = AM_REC_RUN,
                               .h = h,
                               .alen = (uint32_t)len,
                               .args = args}))
        return RV_OK;
    return call_described(w, dest, h, args, len, NULL, 0, NULL, 0);
}

rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *args, size_t len, rv_sync_t *sync,
                    unsigned flags)
{
    am_worker_t *aw = am_of(w);
    if (!plain_call(aw, dest, len, sync, flags))
        return call_described(w, dest, h, args, len, NULL, 0, sync, flags);
    if (am_cursor_put_plain(aw, dest, h, args, len))
        return RV_OK;
    return call_slow(w, aw, dest, h, args, len);
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

/* Whether rv_call_return's call is plain, for its fast path:
 * index-gather's call (Bale), small arguments and result, one
 * synchronizer for many calls. */
static inline bool plain_return(const am_worker_t *aw, rv_tid_t dest,
                                size_t len, size_t ret_len,
                                const rv_sync_t *sync, unsigned flags)
{
    return aw != NULL && sync != NULL && (flags & ~RV_NOTIFY_CONSUMED) == 0 &&
           len <= AM_FAST_ARGS && ret_len <= AM_FAST_RET && dest < aw->nworkers;
}

/* A plain rv_call_return past its open run (see call_slow). */
static __attribute__((noinline)) rv_status_t
call_return_slow(rv_worker_t *w, am_worker_t *aw, rv_tid_t dest,
                 rv_handler_id_t h, const void *args, size_t len, void *ret,
                 size_t ret_len, rv_sync_t *sync, unsigned flags)
{
    /* A channel without a fast entry takes a described call, which takes
     * its own pending slot: none is taken here only to be given back. */
    if (am_chan(aw, dest)->fast == NULL)
        return call_described(w, dest, h, args, len, ret, ret_len, sync, flags);
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
    return call_described(w, dest, h, args, len, ret, ret_len, sync, flags);
}

rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, void *ret,
                           size_t ret_len, rv_sync_t *sync, unsigned flags)
{
    if (ret == NULL)
        return RV_ERR_INVALID;
    /* A call the open run takes is already counted by the synchronizer
     * (am_cursor.c); else the count is raised first: the local bypass may
     * run it before call_fast returns (another thread). */
    am_worker_t *aw = am_of(w);
    if (!plain_return(aw, dest, len, ret_len, sync, flags))
        return call_described(w, dest, h, args, len, ret, ret_len, sync, flags);
    if (am_cursor_put_ret(aw, dest, h, args, len, sync, ret, ret_len))
        return RV_OK;
    return call_return_slow(w, aw, dest, h, args, len, ret, ret_len, sync,
                            flags);
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
            aw->send.dests[t] == NULL)
            continue;
        rv_status_t st = dest_flush(aw, aw->send.dests[t], true);
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
