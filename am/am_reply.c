/*
 * Call completions (rivet.am.done): the answers to calls made with
 * RV_NOTIFY_CONSUMED or rv_call_return, sent by the target once the
 * handler has run.
 *
 * An answer never waits and never travels in the call stream. Waiting
 * for room inside a handler would progress into the next call, whose
 * answer would wait in turn, without bound; and an answer queued behind
 * calls that the target cannot run yet (it is at am.max_nesting, waiting
 * for this very answer) would deadlock. So answers go as transport
 * messages to an RV_HANDLER_INLINE handler, which the caller runs from
 * any progress at any depth.
 *
 * The answers to one destination are gathered while the worker
 * progresses and leave as one message at the end of the progress call
 * (or once am.flush_bytes are gathered): the answers to the calls run in
 * one progress call leave as one batch (Seriema's aggregation, section
 * 4.4, applied to the return path, whatever am.aggregation says of
 * calls). The end of the progress call comes before anything else the
 * worker does, so an answer is not held back. Wire format of a batch:
 * groups of an am_dgroup_t (synchronizer, result length, count) and
 * `count` entries of [result address][result bytes, padded to 8]; the
 * answers to a batch of rv_call_return calls into one synchronizer are
 * one group, completed with one atomic operation.
 */
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"

/* Sends @p d's gathered answers; they are copied when the transport
 * cannot take them at once, so the buffer is free again on return. */
static void reply_push(am_worker_t *aw, am_dest_t *d)
{
    if (d->rlen == 0)
        return;
    struct iovec iov = {.iov_base = d->rbuf, .iov_len = d->rlen};
    rv_status_t st = rv_send_raw(aw->w, d->tid, am_dones_id, NULL, 0, &iov,
                                 1, RV_SEND_COPY, NULL, NULL);
    if (st != RV_OK)
        rv_error("cannot report %zu bytes of call completions to worker "
                 "%u: %s", d->rlen, d->tid, rv_status_str(st));
    d->rlen = 0;
}

void am_reply_flush(am_worker_t *aw)
{
    while (aw->nreplying > 0) {
        am_dest_t *d = aw->replying[--aw->nreplying];
        d->rlisted = false;
        reply_push(aw, d);
    }
}

/* Room for @p size more bytes in @p d's answers. */
static bool reply_room(am_dest_t *d, size_t size)
{
    if (d->rlen + size <= d->rcap)
        return true;
    size_t cap = d->rcap ? d->rcap : 4096;
    while (cap < d->rlen + size)
        cap *= 2;
    uint8_t *p = realloc(d->rbuf, cap);
    if (p == NULL)
        return false;
    d->rbuf = p;
    d->rcap = cap;
    return true;
}

rv_status_t am_reply(am_worker_t *aw, rv_tid_t dest, const am_done_t *done,
                     const void *ret)
{
    return am_reply_to(aw, dest, aw->dests[dest], done, ret);
}

rv_status_t am_reply_to(am_worker_t *aw, rv_tid_t dest, am_dest_t *d,
                        const am_done_t *done, const void *ret)
{
    size_t size = 8 + AM_ALIGN8(done->ret_len);
    if (size + sizeof(am_dgroup_t) > aw->cfg->flush_bytes)
        d = NULL;
    else if (d == NULL)
        d = am_dest(aw, dest);
    if (d == NULL || !reply_room(d, size + sizeof(am_dgroup_t))) {
        struct iovec iov = {.iov_base = (void *)ret,
                            .iov_len = done->ret_len};
        return rv_send_raw(aw->w, dest, am_done_id, done, sizeof(*done),
                           &iov, done->ret_len ? 1 : 0, RV_SEND_COPY, NULL,
                           NULL);
    }
    /* Answers to one synchronizer with results of one length (a batch
     * of rv_call_return calls) share a group header: 16 bytes per 8-byte
     * result. */
    am_dgroup_t g;
    if (d->rlen > 0)
        memcpy(&g, d->rbuf + d->rgroup, sizeof(g));
    if (d->rlen == 0 || g.sync != done->sync || g.ret_len != done->ret_len) {
        g = (am_dgroup_t){.sync = done->sync, .ret_len = done->ret_len};
        d->rgroup = d->rlen;
        d->rlen += sizeof(g);
    }
    g.count++;
    memcpy(d->rbuf + d->rgroup, &g, sizeof(g));
    uint8_t *at = d->rbuf + d->rlen;
    memcpy(at, &done->ret, 8);
    if (done->ret_len == 8) {
        memcpy(at + 8, ret, 8);
    } else {
        memset(at + size - 8, 0, 8); /* padding */
        if (done->ret_len > 0)
            memcpy(at + 8, ret, done->ret_len);
    }
    d->rlen += size;
    if (d->rlen >= aw->cfg->flush_bytes) {
        reply_push(aw, d);
    } else if (!d->rlisted) {
        d->rlisted = true;
        aw->replying[aw->nreplying++] = d;
    }
    return RV_OK;
}

/* Writes the result of the call behind @p d, at @p data. */
static void done_result(const am_done_t *d, const void *data)
{
    if (d->ret != 0 && d->ret_len > 0)
        memcpy((void *)(uintptr_t)d->ret, data, d->ret_len);
}

rv_status_t am_on_done(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_done_t d = {.ret_len = 0};
    (void)arg;
    if (msg->xhdr_len == sizeof(d))
        memcpy(&d, msg->xhdr, sizeof(d));
    if (msg->xhdr_len != sizeof(d) || msg->len < d.ret_len) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped a malformed call completion (%zu-byte header, %zu "
                "bytes)", msg->xhdr_len, msg->len);
        return RV_OK;
    }
    done_result(&d, msg->data);
    rv_sync_complete((rv_sync_t *)(uintptr_t)d.sync, RV_OK);
    return RV_OK;
}

/* Writes the results of group @p g (its entries at @p p) into the
 * callers' buffers. */
static void group_results(const am_dgroup_t *g, const uint8_t *p,
                          size_t stride)
{
    for (uint32_t i = 0; i < g->count; i++, p += stride) {
        uint64_t ret;
        memcpy(&ret, p, sizeof(ret));
        if (ret == 0)
            continue;
        if (g->ret_len == 8)
            memcpy((void *)(uintptr_t)ret, p + 8, 8);
        else
            memcpy((void *)(uintptr_t)ret, p + 8, g->ret_len);
    }
}

rv_status_t am_on_dones(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    const uint8_t *p = msg->data, *end = p + msg->len;
    (void)arg;
    while ((size_t)(end - p) >= sizeof(am_dgroup_t)) {
        am_dgroup_t g;
        memcpy(&g, p, sizeof(g));
        size_t stride = 8 + AM_ALIGN8((size_t)g.ret_len);
        size_t left = (size_t)(end - p) - sizeof(g);
        if (g.count == 0 || g.ret_len > msg->len || left / stride < g.count)
            break;
        p += sizeof(g);
        group_results(&g, p, stride);
        /* One atomic operation completes the whole group. */
        rv_sync_complete_n((rv_sync_t *)(uintptr_t)g.sync, g.count, RV_OK);
        p += (size_t)g.count * stride;
    }
    if (p != end) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped the rest of a malformed batch of call completions "
                "from worker %u", msg->src);
    }
    return RV_OK;
}

void am_reply_fini(am_worker_t *aw)
{
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->dests[t];
        if (d != NULL) {
            free(d->rbuf);
            d->rbuf = NULL;
            d->rlen = d->rcap = 0;
        }
    }
    aw->nreplying = 0;
}
