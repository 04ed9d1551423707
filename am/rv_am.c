/*
 * The invocation layer's send path: calls, call_buffer, call_return,
 * consumed notifications and broadcast over a binomial tree, on the core's
 * messages (one transport active message per call).
 *
 * A call is a core message to the handler's own id, with the call header
 * (am_hdr_t) as the message's header extension (rv_sendx: it travels in
 * the transport's AM header, copied, so it may live on the caller's stack)
 * and the payload
 *
 *     [args][buffer]
 *
 * The handler registered with the core is a trampoline that unpacks it
 * and runs the user's rv_call_fn. When the caller wants to know that the
 * call ran (RV_NOTIFY_CONSUMED) or wants its result (rv_call_return), the
 * header carries the caller's synchronizer and result pointers as cookies,
 * and the target answers with a "rivet.am.done" message carrying them back
 * with the result bytes. Seriema does the same with a callback call over
 * send (seriema-notes §5); a one-sided write of the result comes with the
 * messengers of the write path.
 */
#include <stdlib.h>
#include <string.h>

#include "rv_am.h"

enum {
    AM_NOTIFY = 1u << 0,    /* answer with rivet.am.done */
    AM_RETURN = 1u << 1,    /* ... carrying the handler's result */
    AM_BCAST = 1u << 2,     /* forward down the tree rooted at root */
};

typedef struct {
    uint32_t args_len;
    uint32_t flags;
    uint64_t sync;          /* caller's rv_sync_t *, for AM_NOTIFY */
    uint64_t ret;           /* caller's result buffer, for AM_RETURN */
    uint32_t ret_len;
    rv_tid_t root;          /* AM_BCAST: the broadcasting worker */
} am_hdr_t;

typedef struct {
    uint64_t sync, ret;
    uint32_t ret_len;       /* result bytes that follow */
    uint32_t reserved;
} am_done_t;

typedef struct {
    rv_call_fn fn;
    void *arg;
    rv_handler_id_t id;
} am_entry_t;

static _Thread_local rv_am_stats_t am_stats;
static rv_handler_id_t done_id;

void rv_am_stats(const rv_worker_t *w, rv_am_stats_t *stats)
{
    (void)w; /* counters live in the worker's thread */
    *stats = am_stats;
}

/* ---------------------------------------------------------------------- */
/* Target side                                                             */

static rv_status_t on_done(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_done_t d;
    (void)w;
    (void)arg;
    if (msg->xhdr_len != sizeof(d)) {
        rv_warn("dropped a malformed call completion (%zu-byte header)",
                msg->xhdr_len);
        return RV_OK;
    }
    memcpy(&d, msg->xhdr, sizeof(d));
    if (d.ret != 0 && d.ret_len <= msg->len)
        memcpy((void *)(uintptr_t)d.ret, msg->data, d.ret_len);
    rv_sync_complete((rv_sync_t *)(uintptr_t)d.sync, RV_OK);
    return RV_OK;
}

/* Forwards a broadcast to this worker's children in the binomial tree
 * rooted at h->root: child = me + 2^k for every 2^k above my relative rank
 * (all of them at the root), within the job. */
static void forward(rv_worker_t *w, const am_hdr_t *h, const void *payload,
                    size_t len, rv_handler_id_t id)
{
    uint32_t n = rv_nworkers(rv_worker_context(w));
    uint32_t rel = (rv_worker_tid(w) + n - h->root) % n;
    uint32_t step = 1;
    while (step <= rel)
        step <<= 1;
    for (; rel + step < n; step <<= 1) {
        rv_tid_t child = (h->root + rel + step) % n;
        struct iovec iov = {.iov_base = (void *)payload, .iov_len = len};
        rv_status_t st = rv_sendx(w, child, id, h, sizeof(*h), &iov,
                                  len ? 1 : 0, NULL);
        if (st != RV_OK)
            rv_error("broadcast from worker %u: forwarding to worker %u "
                     "failed: %s", h->root, child, rv_status_str(st));
        else
            am_stats.broadcasts_forwarded++;
    }
}

static rv_status_t trampoline(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_entry_t *e = arg;
    am_hdr_t h;

    if (msg->xhdr_len != sizeof(h)) {
        rv_warn("dropped a call from worker %u with a %zu-byte call header",
                msg->src, msg->xhdr_len);
        return RV_OK;
    }
    memcpy(&h, msg->xhdr, sizeof(h));
    const uint8_t *body = msg->data;
    size_t body_len = msg->len;
    if (h.args_len > body_len) {
        rv_warn("dropped a call from worker %u announcing %u argument bytes "
                "in %zu", msg->src, h.args_len, body_len);
        return RV_OK;
    }
    if (h.flags & AM_BCAST)
        forward(w, &h, msg->data, msg->len, e->id);

    /* The result is built in a scratch buffer sent back after the call. */
    uint8_t small[256];
    uint8_t *reply = NULL;
    size_t ret_cap = (h.flags & AM_RETURN) ? h.ret_len : 0;
    if (ret_cap > 0) {
        reply = ret_cap <= sizeof(small) ? small : malloc(ret_cap);
        if (reply == NULL) {
            rv_error("out of memory for a %zu-byte call result", ret_cap);
            return RV_OK;
        }
        memset(reply, 0, ret_cap);
    }
    rv_call_t call = {
        .src = (h.flags & AM_BCAST) ? h.root : msg->src,
        .args = body,
        .args_len = h.args_len,
        .buf = body_len > h.args_len ? body + h.args_len : NULL,
        .buf_len = body_len - h.args_len,
        .ret = reply,
        .ret_len = ret_cap,
        .broadcast = h.flags & AM_BCAST,
    };
    am_stats.calls_received++;
    am_stats.bytes_received += body_len;
    rv_status_t st = e->fn(w, &call, e->arg);
    if (st < 0)
        rv_warn("a call handler returned %s", rv_status_str(st));

    if (h.flags & AM_NOTIFY) {
        am_done_t d = {.sync = h.sync, .ret = h.ret,
                       .ret_len = (uint32_t)(call.ret_len < ret_cap
                                                 ? call.ret_len
                                                 : ret_cap)};
        struct iovec iov = {.iov_base = call.ret, .iov_len = d.ret_len};
        rv_status_t s2 = rv_sendx(w, call.src, done_id, &d, sizeof(d), &iov,
                                  d.ret_len ? 1 : 0, NULL);
        if (s2 != RV_OK)
            rv_error("cannot report a call's completion to worker %u: %s",
                     call.src, rv_status_str(s2));
    }
    if (reply != NULL && reply != small)
        free(reply);
    return RV_OK;
}

rv_status_t rv_am_register(rv_context_t *ctx, const char *name,
                           rv_call_fn fn, void *arg, rv_handler_id_t *id_p)
{
    if (fn == NULL)
        return RV_ERR_INVALID;
    if (done_id == 0) {
        rv_status_t st = rv_handler_register(ctx, "rivet.am.done", on_done,
                                             NULL, RV_HANDLER_INLINE,
                                             &done_id);
        if (st != RV_OK && st != RV_ERR_EXISTS)
            return st;
        done_id = rv_handler_id("rivet.am.done");
    }
    am_entry_t *e = malloc(sizeof(*e));
    if (e == NULL)
        return RV_ERR_NO_MEMORY;
    *e = (am_entry_t){.fn = fn, .arg = arg};
    rv_status_t st = rv_handler_register(ctx, name, trampoline, e,
                                         RV_HANDLER_OWNS_ARG, &e->id);
    if (st != RV_OK) {
        free(e);
        return st;
    }
    if (id_p != NULL)
        *id_p = e->id;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Caller side                                                             */

/* Sends one call (or broadcast) and handles its synchronizer. */
static rv_status_t call_send(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                             const void *args, size_t len, const void *buf,
                             size_t n, void *ret, size_t ret_len,
                             rv_sync_t *sync, unsigned flags, uint32_t am_flags,
                             long notifications)
{
    if (len > UINT32_MAX || ret_len > UINT32_MAX)
        return RV_ERR_INVALID;
    rv_sync_t local;
    rv_sync_t *s = sync;
    bool notify = (flags & RV_NOTIFY_CONSUMED) || ret != NULL;
    if (s == NULL) {
        rv_sync_init(&local, 0);
        s = &local;
    }
    am_hdr_t hdr = {.args_len = (uint32_t)len, .flags = am_flags,
                    .ret = (uintptr_t)ret, .ret_len = (uint32_t)ret_len,
                    .root = rv_worker_tid(w)};
    if (notify) {
        hdr.flags |= AM_NOTIFY | (ret != NULL ? AM_RETURN : 0);
        hdr.sync = (uintptr_t)s;
        atomic_fetch_add(&s->pending, notifications);
    }
    struct iovec iov[2] = {{.iov_base = (void *)args, .iov_len = len},
                           {.iov_base = (void *)buf, .iov_len = n}};
    /* Without a notification the send's own completion is the call's:
     * the arguments are reusable. With one, the notification completes
     * the call, and the send still has to finish before returning when
     * the caller gave no synchronizer. */
    rv_status_t st = rv_sendx(w, dest, h, &hdr, sizeof(hdr), iov, n ? 2 : 1,
                              notify ? NULL : s);
    if (st != RV_OK) {
        if (notify)
            atomic_fetch_sub(&s->pending, notifications);
        return st;
    }
    am_stats.calls_sent++;
    am_stats.bytes_sent += len + n;
    if (sync == NULL)
        return rv_sync_wait(w, &local);
    return RV_OK;
}

rv_status_t rv_call(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *args, size_t len, rv_sync_t *sync,
                    unsigned flags)
{
    return call_send(w, dest, h, args, len, NULL, 0, NULL, 0, sync, flags, 0,
                     1);
}

rv_status_t rv_call_buffer(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, const void *buf,
                           size_t n, rv_sync_t *sync, unsigned flags)
{
    return call_send(w, dest, h, args, len, buf, n, NULL, 0, sync, flags, 0,
                     1);
}

rv_status_t rv_call_return(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                           const void *args, size_t len, void *ret,
                           size_t ret_len, rv_sync_t *sync, unsigned flags)
{
    if (ret == NULL)
        return RV_ERR_INVALID;
    return call_send(w, dest, h, args, len, NULL, 0, ret, ret_len, sync,
                     flags, 0, 1);
}

rv_status_t rv_broadcast_buffer(rv_worker_t *w, rv_handler_id_t h,
                                const void *args, size_t len,
                                const void *buf, size_t n, rv_sync_t *sync,
                                unsigned flags)
{
    /* The root sends to itself: its own delivery forwards to its children
     * and runs the handler, like every other worker's. */
    long workers = (long)rv_nworkers(rv_worker_context(w));
    return call_send(w, rv_worker_tid(w), h, args, len, buf, n, NULL, 0, sync,
                     flags, AM_BCAST, workers);
}

rv_status_t rv_broadcast(rv_worker_t *w, rv_handler_id_t h, const void *args,
                         size_t len, rv_sync_t *sync, unsigned flags)
{
    return rv_broadcast_buffer(w, h, args, len, NULL, 0, sync, flags);
}
