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
 * groups of an am_dgroup_t (result length, count; its sync word is 0)
 * and `count` entries of [the call's token][result bytes, padded to 8].
 * A token names the caller's pending call (am_pend.c), never its memory;
 * the caller completes consecutive answers into one synchronizer with
 * one atomic operation.
 */
#include <stdlib.h>
#include <string.h>

#include "am_pend.h"

/* Sends @p d's gathered answers; they are copied when the transport
 * cannot take them at once, so the buffer is free again on return. */
static void reply_push(am_worker_t *aw, am_dest_t *d)
{
    if (d->rlen == 0)
        return;
    struct iovec iov = {.iov_base = d->rbuf, .iov_len = d->rlen};
    rv_status_t st = rv_send_raw(aw->w, d->tid, am_dones_id, NULL, 0, &iov, 1,
                                 RV_SEND_COPY, NULL, NULL);
    if (st != RV_OK)
        rv_error("cannot report %zu bytes of call completions to worker "
                 "%u: %s",
                 d->rlen, d->tid, rv_status_str(st));
    d->rlen = 0;
}

void am_reply_flush(am_worker_t *aw)
{
    while (aw->send.nreplying > 0) {
        am_dest_t *d = aw->send.replying[--aw->send.nreplying];
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
    return am_reply_to(aw, dest, aw->send.dests[dest], done, ret);
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
        struct iovec iov = {.iov_base = (void *)ret, .iov_len = done->ret_len};
        return rv_send_raw(aw->w, dest, am_done_id, done, sizeof(*done), &iov,
                           done->ret_len ? 1 : 0, RV_SEND_COPY, NULL, NULL);
    }
    /* Answers to one synchronizer with results of one length (a batch
     * of rv_call_return calls) share a group header: 16 bytes per 8-byte
     * result. */
    am_dgroup_t g;
    if (d->rlen > 0)
        memcpy(&g, d->rbuf + d->rgroup, sizeof(g));
    if (d->rlen == 0 || g.ret_len != done->ret_len) {
        g = (am_dgroup_t){.ret_len = done->ret_len};
        d->rgroup = d->rlen;
        d->rlen += sizeof(g);
    }
    g.count++;
    memcpy(d->rbuf + d->rgroup, &g, sizeof(g));
    uint8_t *at = d->rbuf + d->rlen;
    memcpy(at, &done->sync, 8); /* the call's token */
    if (done->ret_len == 8) {
        memcpy(at + 8, ret, 8);
    } else if (done->ret_len > 0) {
        memset(at + size - 8, 0, 8); /* padding (not the token's word) */
        memcpy(at + 8, ret, done->ret_len);
    }
    d->rlen += size;
    if (d->rlen >= aw->cfg->flush_bytes) {
        reply_push(aw, d);
    } else if (!d->rlisted) {
        d->rlisted = true;
        aw->send.replying[aw->send.nreplying++] = d;
    }
    return RV_OK;
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
                "bytes)",
                msg->xhdr_len, msg->len);
        return RV_OK;
    }
    rv_sync_t *s =
        am_pend_answer(am_of(w), msg->src, d.sync, d.ret_len, msg->data);
    if (s != NULL)
        rv_sync_complete(s, RV_OK);
    return RV_OK;
}

/* Takes the answers of group @p g (its entries at @p p) from @p src:
 * results into the callers' buffers, and each run of answers into one
 * synchronizer completed with one atomic operation. */
static void group_answers(am_worker_t *aw, rv_tid_t src, const am_dgroup_t *g,
                          const uint8_t *p, size_t stride)
{
    rv_sync_t *run = NULL;
    long n = 0;
    for (uint32_t i = 0; i < g->count; i++, p += stride) {
        uint64_t token;
        memcpy(&token, p, sizeof(token));
        rv_sync_t *s = am_pend_answer(aw, src, token, g->ret_len, p + 8);
        if (s == NULL)
            continue;
        if (s != run && n > 0) {
            rv_sync_complete_n(run, n, RV_OK);
            n = 0;
        }
        run = s;
        n++;
    }
    if (n > 0)
        rv_sync_complete_n(run, n, RV_OK);
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
        group_answers(am_of(w), msg->src, &g, p, stride);
        p += (size_t)g.count * stride;
    }
    if (p != end) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped the rest of a malformed batch of call completions "
                "from worker %u",
                msg->src);
    }
    return RV_OK;
}

void am_reply_fini(am_worker_t *aw)
{
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->send.dests[t];
        if (d != NULL) {
            free(d->rbuf);
            d->rbuf = NULL;
            d->rlen = d->rcap = 0;
        }
    }
    aw->send.nreplying = 0;
}
