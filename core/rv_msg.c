/*
 * Handlers, messages, synchronizers, progress and the worker barrier.
 *
 * Progress and re-entrancy: a handler runs inside rv_progress() of its
 * worker and may itself send and progress (rv_sync_wait inside a handler is
 * allowed). The transport delivers each message once, and the dispatch
 * below keeps no state across the handler call, so nested progress only
 * delivers later messages; per-pair FIFO order of *starting* handlers is
 * preserved, as in UCX's own AM callbacks.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_core.h"

rv_handler_id_t rv_handler_id(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    return h == 0 ? 1 : h; /* 0 is never a valid id */
}

static int entry_cmp(const void *a, const void *b)
{
    rv_handler_id_t x = ((const rv_handler_entry_t *)a)->id;
    rv_handler_id_t y = ((const rv_handler_entry_t *)b)->id;
    return x < y ? -1 : x > y;
}

const rv_handler_entry_t *rv_handler_find(const rv_context_t *ctx,
                                          rv_handler_id_t id)
{
    rv_handler_entry_t key = {.id = id};
    if (ctx->nhandlers == 0)
        return NULL;
    return bsearch(&key, ctx->handlers, ctx->nhandlers, sizeof(key), entry_cmp);
}

rv_status_t rv_handler_register(rv_context_t *ctx, const char *name,
                                rv_handler_fn fn, void *arg, unsigned flags,
                                rv_handler_id_t *id_p)
{
    if (name == NULL || *name == '\0' || fn == NULL)
        return RV_ERR_INVALID;
    if (ctx->workers != NULL) {
        rv_error("handler '%s' registered while the job runs; register every "
                 "handler before rv_job_run",
                 name);
        return RV_ERR_INVALID;
    }

    rv_handler_id_t id = rv_handler_id(name);
    const rv_handler_entry_t *old = rv_handler_find(ctx, id);
    if (old != NULL) {
        if (strcmp(old->name, name) == 0)
            rv_error("handler '%s' is already registered", name);
        else
            rv_error("handler name '%s' hashes to id 0x%08x, already taken "
                     "by '%s'; choose another name",
                     name, id, old->name);
        return RV_ERR_EXISTS;
    }
    if (ctx->nhandlers == ctx->handlers_cap) {
        size_t cap = ctx->handlers_cap ? 2 * ctx->handlers_cap : 16;
        void *p = realloc(ctx->handlers, cap * sizeof(*ctx->handlers));
        if (p == NULL)
            return RV_ERR_NO_MEMORY;
        ctx->handlers = p;
        ctx->handlers_cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return RV_ERR_NO_MEMORY;
    ctx->handlers[ctx->nhandlers++] = (rv_handler_entry_t){
        .id = id, .fn = fn, .arg = arg, .flags = flags, .name = copy};
    qsort(ctx->handlers, ctx->nhandlers, sizeof(*ctx->handlers), entry_cmp);
    if (id_p != NULL)
        *id_p = id;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */

void rv_sync_complete_n(rv_sync_t *s, long n, rv_status_t status)
{
    /* Completions may come from other threads (the local bypass): the
     * first error wins, and it is in place before the count drops. */
    int expected = RV_OK;
    if (status < 0)
        atomic_compare_exchange_strong_explicit(
            &s->status, &expected, (int)status, memory_order_relaxed,
            memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->pending, n, memory_order_release);
}

void rv_sync_complete(rv_sync_t *s, rv_status_t status)
{
    rv_sync_complete_n(s, 1, status);
}

static void sync_completion(void *arg, rv_status_t status)
{
    rv_sync_complete(arg, status);
}

/* Core's header and the largest extension fit every transport's header. */
_Static_assert(sizeof(rv_msg_hdr_t) + RV_MSG_XHDR_MAX <=
                   RV_TRANSPORT_AM_HEADER_MIN,
               "the message header outgrows what transports carry");

/* An idle worker spins this many empty polls (latency), then yields its
 * core once every IDLE_YIELD_EVERY polls, so that two busy pollers
 * sharing cores do not starve each other. */
#define IDLE_SPIN_POLLS 1024
#define IDLE_YIELD_EVERY 16

void rv__worker_idle(rv_worker_t *w, unsigned events)
{
    if (events != 0) {
        w->idle_polls = 0;
        return;
    }
    /* Spin briefly (latency), then give the core away now and then. */
    if (++w->idle_polls > IDLE_SPIN_POLLS &&
        w->idle_polls % IDLE_YIELD_EVERY == 0)
        sched_yield();
}

/* Inline handlers run inside the transport's callback, where progress
 * would re-enter the transport: refuse, and say so once. */
static bool refuse_in_callback(rv_worker_t *w, const char *what)
{
    if (!w->in_callback)
        return false;
    if (!w->warned_inline) {
        w->warned_inline = true;
        rv_error("%s called from an RV_HANDLER_INLINE handler, which must "
                 "not wait; register the handler without RV_HANDLER_INLINE",
                 what);
    }
    return true;
}

unsigned rv_progress(rv_worker_t *w)
{
    if (refuse_in_callback(w, "rv_progress"))
        return 0;
    /* Everything below runs "inside a handler" for the sends it makes
     * (rv_sendx): they must not wait, or a reply that waits for room
     * would progress into the next message's reply, without bound. */
    w->progress_depth++;
    unsigned n = w->ctx->ops->progress(w->view.tw);
    n += rv__layers_progress(w);
    w->progress_depth--;
    rv__worker_idle(w, n);
    return n;
}

rv_status_t rv_sync_wait(rv_worker_t *w, rv_sync_t *s)
{
    if (!rv_sync_done(s) && refuse_in_callback(w, "rv_sync_wait"))
        return RV_ERR_INVALID;
    while (!rv_sync_done(s))
        rv_progress(w);
    return (rv_status_t)atomic_load_explicit(&s->status, memory_order_relaxed);
}

static void free_copy(void *arg, rv_status_t status)
{
    (void)status;
    free(arg);
}

/* A send with sync NULL from a handler, which must not wait for the
 * buffer: it goes at once, or from a copy that rivet frees on completion. */
static rv_status_t send_from_callback(rv_worker_t *w, rv_tid_t dest,
                                      const void *hdr, size_t hdr_len,
                                      const struct iovec *iov, size_t iovcnt,
                                      size_t len)
{
    const rv_transport_ops_t *ops = w->ctx->ops;
    rv_status_t status = ops->am_send(w->view.tw, dest, hdr, hdr_len, iov,
                                      iovcnt, RV_AM_SEND_IMMEDIATE, NULL, NULL);
    if (status == RV_ERR_AGAIN) {
        char *copy = malloc(len ? len : 1);
        if (copy == NULL)
            return RV_ERR_NO_MEMORY;
        size_t off = 0;
        for (size_t i = 0; i < iovcnt; i++) {
            memcpy(copy + off, iov[i].iov_base, iov[i].iov_len);
            off += iov[i].iov_len;
        }
        struct iovec one = {.iov_base = copy, .iov_len = len};
        status = ops->am_send(w->view.tw, dest, hdr, hdr_len, &one, 1, 0,
                              free_copy, copy);
        if (status != RV_INPROGRESS)
            free(copy);
    }
    if (status < 0)
        return status;
    w->stats.tx_msgs++;
    w->stats.tx_bytes += len;
    return RV_OK;
}

rv_status_t rv_send_raw(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                        const void *xhdr, size_t xhdr_len,
                        const struct iovec *iov, size_t iovcnt, unsigned flags,
                        rv_completion_fn cb, void *arg)
{
    uint8_t hdr[sizeof(rv_msg_hdr_t) + RV_MSG_XHDR_MAX];
    size_t len = 0;
    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (xhdr_len > RV_MSG_XHDR_MAX || len > RV_MSG_MAX_LEN ||
        dest >= rv_nworkers(w->ctx))
        return RV_ERR_INVALID;
    rv_msg_hdr_t core = {.handler = h, .len = (uint32_t)len};
    memcpy(hdr, &core, sizeof(core));
    if (xhdr_len > 0)
        memcpy(hdr + sizeof(core), xhdr, xhdr_len);
    if (flags & RV_SEND_COPY)
        return send_from_callback(w, dest, hdr, sizeof(core) + xhdr_len, iov,
                                  iovcnt, len);
    rv_status_t status =
        w->ctx->ops->am_send(w->view.tw, dest, hdr, sizeof(core) + xhdr_len,
                             iov, iovcnt, flags, cb, arg);
    if (status >= 0) {
        w->stats.tx_msgs++;
        w->stats.tx_bytes += len;
    }
    return status;
}

rv_status_t rv_sendv(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                     const struct iovec *iov, size_t iovcnt, rv_sync_t *sync)
{
    return rv_sendx(w, dest, h, NULL, 0, iov, iovcnt, sync);
}

rv_status_t rv_sendx(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                     const void *xhdr, size_t xhdr_len, const struct iovec *iov,
                     size_t iovcnt, rv_sync_t *sync)
{
    rv_context_t *ctx = w->ctx;
    if (xhdr_len > RV_MSG_XHDR_MAX) {
        rv_error("a message header extension of %zu bytes is over the %d "
                 "bytes allowed",
                 xhdr_len, RV_MSG_XHDR_MAX);
        return RV_ERR_INVALID;
    }
    if (dest >= rv_nworkers(ctx)) {
        rv_error("send to worker %u: the job has %u workers", dest,
                 rv_nworkers(ctx));
        return RV_ERR_INVALID;
    }

    size_t len = 0;
    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > RV_MSG_MAX_LEN) {
        rv_error("a message of %zu bytes is larger than the %u bytes a message "
                 "can carry; move the data with put/get instead",
                 len, RV_MSG_MAX_LEN);
        return RV_ERR_INVALID;
    }
    /* The core header, then the caller's extension: the transport copies
     * both, so they may live on this stack. */
    uint8_t hdr[sizeof(rv_msg_hdr_t) + RV_MSG_XHDR_MAX];
    rv_msg_hdr_t core = {.handler = h, .len = (uint32_t)len};
    memcpy(hdr, &core, sizeof(core));
    if (xhdr_len > 0)
        memcpy(hdr + sizeof(core), xhdr, xhdr_len);
    size_t hdr_len = sizeof(core) + xhdr_len;

    if (sync == NULL && (w->in_callback || w->progress_depth > 0))
        return send_from_callback(w, dest, hdr, hdr_len, iov, iovcnt, len);

    /* Completion callbacks run only from progress, never inside am_send,
     * so the count is raised only for sends that did not complete. */
    rv_sync_t local;
    rv_sync_t *s = sync ? sync : &local;
    if (sync == NULL)
        rv_sync_init(&local, 0);
    rv_status_t status = ctx->ops->am_send(w->view.tw, dest, hdr, hdr_len, iov,
                                           iovcnt, 0, sync_completion, s);
    if (status == RV_INPROGRESS)
        atomic_fetch_add_explicit(&s->pending, 1, memory_order_relaxed);
    else if (status < 0)
        return status;
    w->stats.tx_msgs++;
    w->stats.tx_bytes += len;
    if (sync == NULL && status == RV_INPROGRESS)
        return rv_sync_wait(w, &local);
    return RV_OK;
}

rv_status_t rv_send(rv_worker_t *w, rv_tid_t dest, rv_handler_id_t h,
                    const void *buf, size_t len, rv_sync_t *sync)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    return rv_sendv(w, dest, h, &iov, len ? 1 : 0, sync);
}

/* ---------------------------------------------------------------------- */

/* Drops a bad message: counted, and logged the first few times. */
static rv_status_t drop(uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static rv_status_t drop(uint64_t *counter, const char *fmt, ...)
{
    (*counter)++;
    if (*counter <= 10) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        rv_warn("dropped a message: %s%s", buf,
                *counter == 10 ? " (further drops are counted, not logged)"
                               : "");
    }
    return RV_OK;
}

static rv_status_t run_handler(rv_worker_t *w, const rv_handler_entry_t *e,
                               rv_handler_id_t id, const rv_am_rx_t *rx,
                               void *desc);

rv_status_t rv__msg_recv(void *arg, const rv_am_rx_t *rx, void *desc)
{
    rv_worker_t *w = arg;
    rv_msg_hdr_t h;
    const rv_msg_hdr_t *hdr = &h;

    if (rx->hdr_len < sizeof(h) || rx->hdr_len > sizeof(h) + RV_MSG_XHDR_MAX)
        return drop(&w->stats.rx_malformed,
                    "malformed header from worker %u (%zu bytes, expected "
                    "%zu to %zu)",
                    rx->src, rx->hdr_len, sizeof(h),
                    sizeof(h) + RV_MSG_XHDR_MAX);
    memcpy(&h, rx->hdr, sizeof(h)); /* transports give no alignment */
    if (hdr->len != rx->len)
        return drop(&w->stats.rx_malformed,
                    "truncated message from worker %u (handler 0x%08x): "
                    "%u bytes announced, %zu received",
                    rx->src, hdr->handler, hdr->len, rx->len);

    const rv_handler_entry_t *e = rv_handler_find(w->ctx, hdr->handler);
    if (e == NULL)
        return drop(&w->stats.rx_unknown_handler,
                    "unknown handler id 0x%08x from worker %u (%zu bytes); "
                    "every process must register the same handlers",
                    hdr->handler, rx->src, rx->len);
    bool inline_ok = e->flags & RV_HANDLER_INLINE;
    if (rx->deferrable && !inline_ok)
        return RV_ERR_AGAIN; /* delivered from progress instead */
    /* An inline handler obeys the same rules wherever it runs: also when
     * it is delivered from progress, queued behind an earlier message. */
    w->in_callback += inline_ok;
    rv_status_t status = run_handler(w, e, hdr->handler, rx, desc);
    w->in_callback -= inline_ok;
    return status;
}

/* Runs handler @p e on a validated message. */
static rv_status_t run_handler(rv_worker_t *w, const rv_handler_entry_t *e,
                               rv_handler_id_t id, const rv_am_rx_t *rx,
                               void *desc)
{
    w->stats.rx_msgs++;
    w->stats.rx_bytes += rx->len;

    /* The extension, copied so that the handler may read it aligned. */
    uint64_t xhdr[RV_MSG_XHDR_MAX / sizeof(uint64_t)];
    size_t xhdr_len = rx->hdr_len - sizeof(rv_msg_hdr_t);
    memcpy(xhdr, (const uint8_t *)rx->hdr + sizeof(rv_msg_hdr_t), xhdr_len);
    rv_msg_t msg = {.src = rx->src,
                    .handler = id,
                    .data = rx->data,
                    .len = rx->len,
                    .xhdr = xhdr_len ? xhdr : NULL,
                    .xhdr_len = xhdr_len,
                    .desc_ = desc};
    if (!(e->flags & RV_HANDLER_KEEP_DATA)) {
        if (e->fn(w, &msg, e->arg) == RV_INPROGRESS)
            rv_warn("handler '%s' returned RV_INPROGRESS without "
                    "RV_HANDLER_KEEP_DATA; its data is recycled now",
                    e->name);
        return RV_OK;
    }

    if (!rx->persistent) {
        /* The transport's buffer dies with this callback: copy. */
        msg.data = malloc(rx->len ? rx->len : 1);
        if (msg.data == NULL) {
            rv_error("out of memory keeping a %zu-byte message", rx->len);
            return RV_OK;
        }
        memcpy(msg.data, rx->data, rx->len);
        msg.desc_ = NULL;
        if (e->fn(w, &msg, e->arg) != RV_INPROGRESS)
            free(msg.data);
        return RV_OK;
    }
    return e->fn(w, &msg, e->arg) == RV_INPROGRESS ? RV_INPROGRESS : RV_OK;
}

void rv_msg_release(rv_worker_t *w, rv_msg_t *msg)
{
    if (msg->desc_ == NULL)
        free(msg->data);
    else
        w->ctx->ops->am_release(w->view.tw, msg->desc_);
    msg->data = NULL;
}

/* ---------------------------------------------------------------------- */
/* Barrier: every worker reports to worker 0, which releases them all.     */

static rv_status_t on_barrier(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)msg;
    (void)arg;
    w->barrier_arrivals++;
    return RV_OK;
}

static rv_status_t on_barrier_release(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    uint64_t epoch;
    (void)arg;
    if (msg->len != sizeof(epoch))
        return drop(&w->stats.rx_malformed,
                    "a barrier release of %zu bytes from worker %u", msg->len,
                    msg->src);
    memcpy(&epoch, msg->data, sizeof(epoch));
    if (epoch > w->barrier_released)
        w->barrier_released = epoch;
    return RV_OK;
}

rv_status_t rv_barrier(rv_worker_t *w)
{
    rv_context_t *ctx = w->ctx;
    uint32_t n = rv_nworkers(ctx);
    if (refuse_in_callback(w, "rv_barrier"))
        return RV_ERR_INVALID;
    uint64_t epoch = ++w->barrier_epoch;
    rv_status_t status;

    if (w->tid != 0) {
        status = rv_send(w, 0, ctx->barrier_id, &epoch, sizeof(epoch), NULL);
        if (status != RV_OK)
            return status;
        while (w->barrier_released < epoch)
            rv_progress(w);
        return RV_OK;
    }

    w->barrier_arrivals++;
    while (w->barrier_arrivals < epoch * n)
        rv_progress(w);
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    for (rv_tid_t t = 1; t < n; t++) {
        status = rv_send(w, t, ctx->barrier_release_id, &epoch, sizeof(epoch),
                         &sync);
        if (status != RV_OK)
            return status;
    }
    w->barrier_released = epoch;
    return rv_sync_wait(w, &sync);
}

rv_status_t rv__msg_init(rv_context_t *ctx)
{
    rv_status_t status =
        rv_handler_register(ctx, RV_HANDLER_BARRIER, on_barrier, NULL,
                            RV_HANDLER_INLINE, &ctx->barrier_id);
    if (status == RV_OK)
        status = rv_handler_register(
            ctx, RV_HANDLER_BARRIER_RELEASE, on_barrier_release, NULL,
            RV_HANDLER_INLINE, &ctx->barrier_release_id);
    return status == RV_OK ? rv__coll_init(ctx) : status;
}

void rv_worker_stats(const rv_worker_t *w, rv_worker_stats_t *stats)
{
    *stats = w->stats;
}

rv_tid_t rv_worker_tid(const rv_worker_t *w)
{
    return w->tid;
}
int rv_worker_local(const rv_worker_t *w)
{
    return w->local;
}
rv_context_t *rv_worker_context(rv_worker_t *w)
{
    return w->ctx;
}
rv_tworker_t *rv_worker_tworker(rv_worker_t *w)
{
    return w->view.tw;
}
