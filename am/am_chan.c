/*
 * Channels (am_chan.h): the choice of one per destination, and the local,
 * send and routed channels' entries. The record channels are in
 * am_chan_rec.c.
 */
#include <stdlib.h>
#include <string.h>

#include "am_chan.h"

/* The synchronizer a call over send gives the transport's send: none
 * when the call notifies (its completion is the target's answer) or when
 * the caller gave none (core's send then waits for the payload, or
 * copies it inside a handler, which must not wait). */
rv_sync_t *am_send_sync(const call_desc_t *cd, rv_sync_t *s, bool notify)
{
    return notify || cd->sync == NULL ? NULL : s;
}

/* ---------------------------------------------------------------------- */
/* local                                                                   */

/* Through the process's own queue: the record is written once into the
 * destination thread's open block; nothing crosses the transport. */
static rv_status_t local_call(am_worker_t *aw, const call_desc_t *cd,
                              rv_sync_t *s, bool notify)
{
    bool plain = !notify && cd->n == 0 && cd->am_flags == 0;
    size_t body = (plain ? 0 : sizeof(am_hdr_t)) + cd->len + cd->n;
    uint8_t *at = am_local_reserve(aw, am_local_thread(aw, cd->dest),
                                   sizeof(am_rec_t) + AM_ALIGN8(body));
    if (at == NULL)
        return RV_ERR_NO_MEMORY;
    if (plain) {
        am_rec_write(at, cd->h, NULL, cd->args, cd->len, NULL, 0);
    } else {
        am_hdr_t hdr = am_hdr_of(aw, cd);
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

static bool local_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e)
{
    int local = am_local_thread(aw, dest);
    if (!am_local_call(aw, local, e))
        return false;
    am_cursor_open_local(aw, dest, local, e);
    aw->stats.calls_local++;
    return true;
}

/* ---------------------------------------------------------------------- */
/* send, record: calls to another process                                  */

/* The send path without aggregation: one AM, zero-copy. */
static rv_status_t call_am(am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s,
                           bool notify)
{
    am_hdr_t hdr = am_hdr_of(aw, cd);
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
                              cd->n ? 2 : 1, am_send_sync(cd, s, notify));
    if (st != RV_OK && notify)
        atomic_fetch_sub(&s->pending, cd->notifications);
    return st;
}

rv_status_t am_slot_call(am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s,
                         am_call_fn fn)
{
    bool bcast = cd->am_flags & AM_BCAST;
    call_desc_t remote = *cd; /* copied only to carry the token */
    remote.token =
        am_pend_add(aw, s, cd->ret, (uint32_t)cd->ret_len,
                    bcast ? RV_TID_ALL : cd->dest, cd->notifications);
    if (remote.token == 0)
        return RV_ERR_NO_MEMORY;
    rv_status_t st = fn(aw, &remote, s, true);
    if (st != RV_OK)
        am_pend_cancel(aw, remote.token);
    return st;
}

static rv_status_t send_call(am_worker_t *aw, const call_desc_t *cd,
                             rv_sync_t *s, bool notify)
{
    return notify ? am_slot_call(aw, cd, s, call_am)
                  : call_am(aw, cd, s, false);
}

rv_status_t am_chan_bcast(am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s,
                          bool notify)
{
    return send_call(aw, cd, s, notify);
}

/* ---------------------------------------------------------------------- */
/* routed                                                                  */

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

bool am_routed_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e)
{
    return call_routed(aw, dest, am_route_hop(aw, dest), e);
}

/* ---------------------------------------------------------------------- */
/* The choice                                                              */

static const am_chan_ops_t chan_local = {"local", local_fast, local_call};
static const am_chan_ops_t chan_send = {"send", NULL, send_call};
static const am_chan_ops_t chan_routed_send = {"routed-send", am_routed_fast,
                                               send_call};

const am_chan_ops_t *am_chan_pick(am_worker_t *aw, rv_tid_t dest)
{
    const rv_am_config_t *cfg = aw->cfg;
    bool write = am_write_to(aw, dest);
    bool by_send = !write && cfg->aggregation == RV_AGG_NONE;
    bool routed = am_route_next(aw, dest) != dest;
    const am_chan_ops_t *c;

    if (am_local_thread(aw, dest) >= 0)
        c = &chan_local;
    else if (by_send)
        c = routed ? &chan_routed_send : &chan_send;
    else
        c = am_record_chan(cfg->aggregation, write, routed);
    aw->send.chans[dest] = c;
    return c;
}
