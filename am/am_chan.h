/*
 * A destination's channel: how calls from this worker to one destination
 * travel, chosen once, when the destination is first called, from what
 * the job's configuration fixes (same process or not, am.routing,
 * am.path, am.aggregation), and kept as a const ops table in the
 * worker's per-destination array. A call then costs one indirect call
 * instead of re-deciding per call what the configuration already fixed:
 * the pattern of UCX's endpoints, whose iface ops table is chosen when
 * the endpoint is made (ep->iface->ops.ep_am_short), not per send.
 *
 * The channels (am_chan.c picks one per destination):
 *
 *   local         same process, am.local_bypass: a record in the
 *                 caller's block for the destination thread, published
 *                 on a wait-free queue (am_local.c)
 *   send          am.path send, no aggregation: one transport AM per
 *                 call, the call header in the AM header, [args][buffer]
 *                 as payload, zero-copy
 *   trad          am.aggregation trad: serialized into the destination's
 *                 open run, 8 bytes per 8-byte call of the same handler
 *                 (am_chan_rec.c)
 *   record        none or ovfl on either path, trad's calls that are not
 *                 plain: a record of its own in a batch buffer, transmitted
 *                 as a run over send or into the destination's ring
 *                 (am_chan_rec.c)
 *   routed-send,  am.routing host or twohop, a destination reached
 *   routed-record through another worker: plain calls go as routed
 *                 records to the first hop; the others as send or record
 *
 * The trad, record and routed-record channels are one per aggregation
 * and path (trad/write, record/ovfl/send, ...): their bodies are
 * specialised by the compiler for each, so a call reads neither
 * am.aggregation nor am.path.
 *
 * Every channel has two entries. `fast` takes a plain call or a plain
 * call with a result (an am_elem_t: rv_call's and rv_call_return's fast
 * paths past their cursor) and says false when it cannot (the caller then
 * describes the call and takes `call`). `call` takes any described call.
 * A channel whose calls are all described (send, and record without trad
 * aggregation) has no fast entry: NULL, so that rv_call_return's fast
 * path does not take a pending slot for a call that cannot use it.
 */
#ifndef RIVET_AM_CHAN_H
#define RIVET_AM_CHAN_H

#include "am_cursor.h"

/* A call, described: what rv_call and its siblings take. */
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

/* A described call's entry. */
typedef rv_status_t (*am_call_fn)(am_worker_t *aw, const call_desc_t *cd,
                                  rv_sync_t *s, bool notify);

typedef struct am_chan_ops {
    const char *name; /* as the glossary above and the logs say it */
    /* Plain call @p e to @p dest; false when this channel cannot take it
     * without a descriptor (the caller then takes `call`). NULL where
     * every call is described (send, and record without trad): the
     * caller then prepares nothing for a fast call. */
    bool (*fast)(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e);
    /* Any call; @p s its synchronizer (the caller's or a local one),
     * @p notify whether the target answers it (consumed or a result). */
    am_call_fn call;
} am_chan_ops_t;

/* Chooses @p dest's channel, keeps it in aw->send.chans and returns it. */
const am_chan_ops_t *am_chan_pick(am_worker_t *aw, rv_tid_t dest);

/* @p dest's channel, chosen on the first call to it. */
static inline const am_chan_ops_t *am_chan(am_worker_t *aw, rv_tid_t dest)
{
    const am_chan_ops_t *c = aw->send.chans[dest];
    return c != NULL ? c : am_chan_pick(aw, dest);
}

/* A broadcast: over send whatever the channels, from its root. */
rv_status_t am_chan_bcast(am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s,
                          bool notify);

/* The call header of @p cd (notification flags are the caller's). */
static inline am_hdr_t am_hdr_of(const am_worker_t *aw, const call_desc_t *cd)
{
    am_hdr_t hdr = {.args_len = (uint32_t)cd->len,
                    .flags = cd->am_flags,
                    .ret = cd->ret != NULL ? cd->token : 0,
                    .ret_len = (uint32_t)cd->ret_len,
                    .root = aw->me};
    if (cd->x != NULL) {
        /* The extension's words take the places of the result's and the
         * broadcast root's, which an extended call has not. */
        hdr.x_addr = cd->x->addr;
        hdr.x_len = cd->x->len;
        hdr.x_word = cd->x->word;
    }
    return hdr;
}

/* The synchronizer a call over send gives the transport's send. */
rv_sync_t *am_send_sync(const call_desc_t *cd, rv_sync_t *s, bool notify);

/* Notifying call @p cd to another process, answered through
 * rivet.am.done, made by @p fn with a pending slot (am_pend.c) that the
 * call carries instead of pointers; the slot is given back if the call
 * does not leave. */
rv_status_t am_slot_call(am_worker_t *aw, const call_desc_t *cd, rv_sync_t *s,
                         am_call_fn fn);

/* am_chan.c: the routed channels' fast entry. */
bool am_routed_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e);

/* am_chan_rec.c: trad's fast entry, and the record channel of
 * aggregation @p agg over the write path or send, reached directly or
 * (@p routed) with its plain calls routed; not for aggregation none over
 * send, which is the send channel. */
bool am_trad_fast(am_worker_t *aw, rv_tid_t dest, const am_elem_t *e);
const am_chan_ops_t *am_record_chan(rv_aggregation_t agg, bool write,
                                    bool routed);

#endif
