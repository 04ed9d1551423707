/*
 * UCX workers, endpoints and active messages.
 *
 * Every rivet message is one UCP active message (id RV_UCX_AM_ID) whose UCP
 * header is [u32 sender worker][core header] and whose data is the payload.
 * Eager data is delivered from the receive callback; rendezvous data
 * (UCP_AM_RECV_ATTR_FLAG_RNDV) is fetched with ucp_am_recv_data_nbx into a
 * buffer of ours and delivered when it has arrived.
 *
 * Ordering: UCP runs AM callbacks of one endpoint in order, but a
 * rendezvous completes later than the eager messages sent after it. So
 * while a rendezvous from a sender is in flight, that sender's later
 * messages are held (kept by UCX when it allows, copied otherwise) and
 * delivered behind it: per-pair FIFO holds for any mix of sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <time.h>

#include "ucx_internal.h"

/* What a failed ucp_worker_create most likely ran out of, said with the
 * limit and how to raise it: UCX's own lines name the call that failed,
 * not the resource. Its shared-memory transports take a few MiB of
 * /dev/shm per worker for their receive FIFOs and descriptors. */
static void worker_create_hint(ucs_status_t s)
{
    struct statvfs fs;
    if ((s == UCS_ERR_NO_RESOURCE || s == UCS_ERR_NO_MEMORY ||
         s == UCS_ERR_SHMEM_SEGMENT) &&
        statvfs("/dev/shm", &fs) == 0) {
        unsigned long long avail =
            (unsigned long long)fs.f_bavail * fs.f_frsize >> 10;
        unsigned long long size =
            (unsigned long long)fs.f_blocks * fs.f_frsize >> 10;
        rv_error("/dev/shm has %llu KiB free of %llu KiB; UCX's "
                 "shared-memory transports need a few MiB per worker: "
                 "enlarge /dev/shm (mount -o remount,size=...), or leave sm "
                 "out of transport.ucx.tls",
                 avail, size);
    }
}

#define HELD_TAG ((uintptr_t)1) /* marks a held message in a desc */

ucx_op_t *rv_ucx_op_get(struct rv_tworker *tw, rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = tw->free_ops;
    if (op != NULL)
        tw->free_ops = op->next;
    else if ((op = malloc(sizeof(*op))) == NULL)
        return NULL;
    op->tw = tw;
    op->cb = cb;
    op->arg = arg;
    op->result_p = NULL;
    return op;
}

void rv_ucx_op_put(struct rv_tworker *tw, ucx_op_t *op)
{
    op->next = tw->free_ops;
    tw->free_ops = op;
}

/* ---------------------------------------------------------------------- */
/* Receive                                                                 */
/*
 * Ordinary handlers never run inside a UCX callback: UCP forbids calling
 * ucp_worker_progress from its callbacks, and a rivet handler may send and
 * progress (wait on a synchronizer, make calls of its own). The AM callback
 * offers each message to the core first (rx.deferrable): the core runs
 * inline handlers (RV_HANDLER_INLINE, which promise not to wait) right
 * there, with no copy and no queue, and answers RV_ERR_AGAIN for the
 * others. Those are queued on their sender's queue (keeping UCX's buffer
 * when UCX allows it, copying otherwise), and rv_ucx_progress delivers
 * them after ucp_worker_progress has returned. Once a sender has a message
 * queued, its later messages queue behind it, so per-sender FIFO order is
 * kept. A handler that progresses re-enters rv_ucx_progress, which delivers
 * the next messages; the one being handled was dequeued first.
 */

/* Size class of a rendezvous buffer of @p len bytes, or -1 if too big. */
static int rxbuf_class(size_t len)
{
    int k = RV_UCX_RXBUF_MIN_CLASS;
    while (k < RV_UCX_RXBUF_MIN_CLASS + RV_UCX_RXBUF_CLASSES &&
           ((size_t)1 << k) < len)
        k++;
    return k < RV_UCX_RXBUF_MIN_CLASS + RV_UCX_RXBUF_CLASSES
               ? k - RV_UCX_RXBUF_MIN_CLASS
               : -1;
}

static void *rxbuf_get(struct rv_tworker *tw, size_t len)
{
    int c = rxbuf_class(len);
    if (c < 0)
        return malloc(len);
    void *buf = tw->rxbuf_free[c];
    if (buf != NULL) {
        memcpy(&tw->rxbuf_free[c], buf, sizeof(void *));
        tw->rxbuf_cached -= (size_t)1 << (c + RV_UCX_RXBUF_MIN_CLASS);
        return buf;
    }
    size_t size = (size_t)1 << (c + RV_UCX_RXBUF_MIN_CLASS);
    size_t align = size >= RV_UCX_HUGE_PAGE ? RV_UCX_HUGE_PAGE : RV_UCX_PAGE;
    if (posix_memalign(&buf, align, size) != 0)
        return NULL;
    if (size >= RV_UCX_HUGE_PAGE)
        madvise(buf, size, MADV_HUGEPAGE); /* fewer faults and TLB misses */
    return buf;
}

static void rxbuf_put(struct rv_tworker *tw, void *buf, size_t len)
{
    int c = rxbuf_class(len);
    size_t size = c < 0 ? 0 : (size_t)1 << (c + RV_UCX_RXBUF_MIN_CLASS);
    if (c < 0 || tw->rxbuf_cached + size > RV_UCX_RXBUF_CACHE) {
        free(buf);
        return;
    }
    memcpy(buf, &tw->rxbuf_free[c], sizeof(void *));
    tw->rxbuf_free[c] = buf;
    tw->rxbuf_cached += size;
}

static ucx_held_t *held_get(struct rv_tworker *tw)
{
    ucx_held_t *h = tw->free_held;
    if (h != NULL)
        tw->free_held = h->next;
    else if ((h = malloc(sizeof(*h))) == NULL)
        return NULL;
    h->tw = tw;
    h->ready = false;
    h->rxbuf = false;
    h->ucp_desc = NULL;
    h->rndv_desc = NULL;
    return h;
}

static void held_free(ucx_held_t *h)
{
    struct rv_tworker *tw = h->tw;
    if (h->ucp_desc != NULL)
        ucp_am_data_release(tw->worker, h->ucp_desc);
    else if (h->rxbuf)
        rxbuf_put(tw, h->data, h->alloc_len);
    h->next = tw->free_held;
    tw->free_held = h;
}

static void held_enqueue(struct rv_tworker *tw, ucx_held_t *h)
{
    ucx_held_queue_t *q = &tw->held[h->src];
    h->next = NULL;
    if (q->tail != NULL)
        q->tail->next = h;
    else
        q->head = h;
    q->tail = h;
    if (!tw->is_active[h->src]) {
        tw->is_active[h->src] = true;
        tw->active[(tw->active_head + tw->active_count++) % tw->nworkers] =
            h->src;
    }
}

/* Delivers every ready message at the heads of the senders' queues.
 * Re-entrant: a handler may progress, and the nested call delivers what
 * arrives meanwhile (a sender being delivered is not in the ring, so a new
 * message of its puts it back there). */
static unsigned deliver_held(struct rv_tworker *tw)
{
    unsigned delivered = 0;
    for (uint32_t k = tw->active_count; k > 0 && tw->active_count > 0; k--) {
        uint32_t src = tw->active[tw->active_head];
        tw->active_head = (tw->active_head + 1) % tw->nworkers;
        tw->active_count--;
        tw->is_active[src] = false;
        ucx_held_queue_t *q = &tw->held[src];
        ucx_held_t *h;
        while ((h = q->head) != NULL && h->ready) {
            q->head = h->next;
            if (q->head == NULL)
                q->tail = NULL;
            rv_am_rx_t rx = {.src = src,
                             .hdr = h->hdr,
                             .hdr_len = h->hdr_len,
                             .deferrable = false,
                             .data = h->data,
                             .len = h->len,
                             .persistent = true};
            rv_status_t st =
                tw->am_recv(tw->am_arg, &rx, (void *)((uintptr_t)h | HELD_TAG));
            delivered++;
            if (st != RV_INPROGRESS)
                held_free(h);
        }
        if (q->head != NULL && !tw->is_active[src]) {
            /* still waiting for a rendezvous: stays in the ring */
            tw->is_active[src] = true;
            tw->active[(tw->active_head + tw->active_count++) % tw->nworkers] =
                src;
        }
    }
    return delivered;
}

static void rndv_done(void *request, ucs_status_t status, size_t length,
                      void *user_data)
{
    ucx_held_t *h = user_data;
    if (request != NULL)
        ucp_request_free(request);

    if (status != UCS_OK) {
        rv_error("rendezvous data of %zu bytes from worker %u was lost: %s",
                 h->len, h->src, ucs_status_string(status));
        h->len = 0; /* the core sees a truncated message and drops it */
    } else {
        h->len = length;
    }
    h->ready = true;
    h->tw->rndv_inflight--;
}

static ucs_status_t am_recv_cb(void *arg, const void *header,
                               size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param)
{
    struct rv_tworker *tw = arg;
    uint32_t src;
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    RV_TSAN_ACQUIRE(tw->tp); /* the sender's RV_TSAN_RELEASE */
    bool persistent = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA;

    if (header_length < sizeof(src) ||
        header_length - sizeof(src) > RV_UCX_MAX_HDR) {
        rv_warn("dropped a message with a %zu-byte header (not from rivet?)",
                header_length);
        return UCS_OK;
    }
    memcpy(&src, header, sizeof(src));
    if (src >= tw->nworkers) {
        rv_warn("dropped a message from unknown worker %u", src);
        return UCS_OK;
    }

    if (!rndv && tw->held[src].head == NULL) {
        /* Nothing from this sender is held back: offer the message to the
         * core now; it runs inline handlers here and defers the rest. */
        rv_am_rx_t rx = {.src = src,
                         .hdr = (const uint8_t *)header + sizeof(src),
                         .hdr_len = header_length - sizeof(src),
                         .data = data,
                         .len = length,
                         .persistent = persistent,
                         .deferrable = true};
        rv_status_t st = tw->am_recv(tw->am_arg, &rx, data);
        if (st != RV_ERR_AGAIN) {
            tw->completions++;
            return (st == RV_INPROGRESS && persistent) ? UCS_INPROGRESS
                                                       : UCS_OK;
        }
    }

    ucx_held_t *h = held_get(tw);
    if (h == NULL) {
        rv_error("out of memory receiving a message from worker %u", src);
        return UCS_OK;
    }
    h->src = src;
    h->hdr_len = header_length - sizeof(src);
    memcpy(h->hdr, (const uint8_t *)header + sizeof(src), h->hdr_len);
    h->len = length;

    if (!rndv) {
        h->ready = true;
        if (persistent) {
            h->ucp_desc = data; /* keep UCX's buffer: no copy */
            h->data = data;
        } else if (length <= RV_UCX_INLINE_DATA) {
            h->data = h->inline_data;
            memcpy(h->data, data, length);
        } else if ((h->data = rxbuf_get(tw, length)) != NULL) {
            h->rxbuf = true; /* a reused buffer: no page faults */
            h->alloc_len = length;
            memcpy(h->data, data, length);
        } else {
            rv_error("out of memory holding %zu bytes from worker %u", length,
                     src);
            held_free(h);
            return UCS_OK;
        }
        held_enqueue(tw, h);
        return h->ucp_desc != NULL ? UCS_INPROGRESS : UCS_OK;
    }

    /* A rendezvous: its data is fetched when its turn comes (see
     * rndv_start_pending), so the desc is kept. */
    h->rndv_desc = data;
    held_enqueue(tw, h);
    h->rndv_next = NULL;
    if (tw->rndv_tail != NULL)
        tw->rndv_tail->rndv_next = h;
    else
        tw->rndv_head = h;
    tw->rndv_tail = h;
    return UCS_INPROGRESS;
}

/*
 * Starts fetching rendezvous data, in arrival order, while fewer than
 * RV_UCX_RNDV_INFLIGHT fetches are under way. Fetching further ahead gains
 * nothing, since handlers run in order, and costs a buffer per message: a
 * window of 64 messages of 4 MiB would otherwise cycle 256 MiB through the
 * caches, and over TCP would interleave 64 transfers on one socket.
 */
static void rndv_start_pending(struct rv_tworker *tw)
{
    ucx_held_t *h;
    while (tw->rndv_inflight < RV_UCX_RNDV_INFLIGHT &&
           (h = tw->rndv_head) != NULL) {
        tw->rndv_head = h->rndv_next;
        if (tw->rndv_head == NULL)
            tw->rndv_tail = NULL;
        void *desc = h->rndv_desc;
        h->rndv_desc = NULL;
        h->data = rxbuf_get(tw, h->len ? h->len : 1);
        if (h->data == NULL) {
            rv_error("out of memory receiving %zu bytes from worker %u", h->len,
                     h->src);
            ucp_am_data_release(tw->worker, desc);
            h->len = 0; /* delivered as truncated, and dropped */
            h->ready = true;
            continue;
        }
        h->rxbuf = true;
        h->alloc_len = h->len ? h->len : 1;
        tw->rndv_inflight++;
        ucp_request_param_t p = {
            .op_attr_mask =
                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb.recv_am = rndv_done,
            .user_data = h,
        };
        ucs_status_ptr_t r =
            ucp_am_recv_data_nbx(tw->worker, desc, h->data, h->len, &p);
        if (UCS_PTR_IS_ERR(r))
            rndv_done(NULL, UCS_PTR_STATUS(r), 0, h);
        else if (r == NULL)
            rndv_done(NULL, UCS_OK, h->len, h);
        /* else rndv_done runs on completion and frees the request
         * (freeing it now would cancel the callback). */
    }
}

void rv_ucx_am_release(struct rv_tworker *tw, void *desc)
{
    if ((uintptr_t)desc & HELD_TAG)
        held_free((ucx_held_t *)((uintptr_t)desc & ~HELD_TAG));
    else
        ucp_am_data_release(tw->worker, desc);
}

/* ---------------------------------------------------------------------- */
/* Send                                                                    */

static void send_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_op_t *op = user_data;
    struct rv_tworker *tw = op->tw;

    if (status != UCS_OK)
        rv_error("message send failed: %s", ucs_status_string(status));
    ucp_request_free(request);
    tw->completions++;
    op->cb(op->arg, rv_ucx_status(status));
    rv_ucx_op_put(tw, op);
}

/* The payload of @p iov as UCP takes it: a contiguous buffer, or an iov
 * datatype over @p dt. */
static void am_payload(const struct iovec *iov, size_t iovcnt, ucp_dt_iov_t *dt,
                       ucp_request_param_t *p, const void **buf_p,
                       size_t *count_p)
{
    *buf_p = iovcnt ? iov[0].iov_base : NULL;
    *count_p = iovcnt ? iov[0].iov_len : 0;
    if (iovcnt <= 1)
        return;
    for (size_t i = 0; i < iovcnt; i++) {
        dt[i].buffer = iov[i].iov_base;
        dt[i].length = iov[i].iov_len;
    }
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p->datatype = ucp_dt_make_iov();
    *buf_p = dt;
    *count_p = iovcnt;
}

/* Fast path: a message that UCX can send right now needs no request
 * state; the header (and iov array) live on the stack. RV_ERR_AGAIN when
 * UCX cannot take it at once. */
static inline rv_status_t am_send_now(struct rv_tworker *tw, uint32_t peer,
                                      const void *hdr, size_t hdr_len,
                                      const struct iovec *iov, size_t iovcnt)
{
    uint8_t h[RV_UCX_MAX_HDR + sizeof(uint32_t)];
    ucp_dt_iov_t dt_iov[RV_UCX_MAX_IOV];
    ucp_request_param_t fp = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};
    const void *buf;
    size_t count;
    am_payload(iov, iovcnt, dt_iov, &fp, &buf, &count);
    memcpy(h, &tw->tid, sizeof(tw->tid));
    memcpy(h + sizeof(tw->tid), hdr, hdr_len);
    /* UCX is not instrumented: a message between threads of a process
     * orders what the sender wrote before it for ThreadSanitizer. */
    RV_TSAN_RELEASE(tw->tp);
    ucs_status_ptr_t r =
        ucp_am_send_nbx(tw->eps[peer], RV_UCX_AM_ID, h,
                        sizeof(tw->tid) + hdr_len, buf, count, &fp);
    if (r == NULL)
        return RV_OK;
    if (UCS_PTR_STATUS(r) == UCS_ERR_NO_RESOURCE)
        return RV_ERR_AGAIN;
    rv_error("cannot send to worker %u: %s", peer,
             ucs_status_string(UCS_PTR_STATUS(r)));
    return rv_ucx_status(UCS_PTR_STATUS(r));
}

rv_status_t rv_ucx_am_send(struct rv_tworker *tw, uint32_t peer,
                           const void *hdr, size_t hdr_len,
                           const struct iovec *iov, size_t iovcnt,
                           unsigned flags, rv_completion_fn cb, void *arg)
{
    if (peer >= tw->nworkers || tw->eps[peer] == NULL)
        return RV_ERR_INVALID;
    if (hdr_len > RV_UCX_MAX_HDR || iovcnt > RV_UCX_MAX_IOV)
        return RV_ERR_INVALID;

    bool immediate = flags & RV_AM_SEND_IMMEDIATE;
    if (immediate ||
        (iovcnt <= 1 && (iovcnt == 0 || iov[0].iov_len <= RV_UCX_FAST_MAX))) {
        rv_status_t st = am_send_now(tw, peer, hdr, hdr_len, iov, iovcnt);
        if (st != RV_ERR_AGAIN || immediate)
            return st;
    }

    ucx_op_t *op = rv_ucx_op_get(tw, cb, arg);
    if (op == NULL)
        return RV_ERR_NO_MEMORY;
    memcpy(op->hdr, &tw->tid, sizeof(tw->tid));
    memcpy(op->hdr + sizeof(tw->tid), hdr, hdr_len);

    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = send_done,
        .user_data = op,
    };
    const void *buf;
    size_t count;
    am_payload(iov, iovcnt, op->iov, &p, &buf, &count);

    RV_TSAN_RELEASE(tw->tp);
    ucs_status_ptr_t r =
        ucp_am_send_nbx(tw->eps[peer], RV_UCX_AM_ID, op->hdr,
                        sizeof(tw->tid) + hdr_len, buf, count, &p);
    if (r == NULL) {
        rv_ucx_op_put(tw, op);
        return RV_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        rv_ucx_op_put(tw, op);
        rv_error("cannot send to worker %u: %s", peer,
                 ucs_status_string(UCS_PTR_STATUS(r)));
        return rv_ucx_status(UCS_PTR_STATUS(r));
    }
    return RV_INPROGRESS;
}

/* ---------------------------------------------------------------------- */
/* Worker                                                                  */

static void worker_free_arrays(struct rv_tworker *tw)
{
    free(tw->eps);
    free(tw->held);
    free(tw->active);
    free(tw->is_active);
    free(tw->emulate);
    free(tw->emu_dirty);
    free(tw->emu_puts_landing);
    free(tw->emu_flush_waiting);
    free(tw->emu_fence);
    free(tw->emu_deferred);
    free(tw->emu_deferred_tail);
    free(tw->emu_logged);
}

rv_status_t rv_ucx_worker_create(rv_transport_t *tp,
                                 const rv_tworker_params_t *params,
                                 struct rv_tworker **tw_p)
{
    struct rv_tworker *tw = calloc(1, sizeof(*tw));
    ucs_status_t s;

    if (tw == NULL)
        return RV_ERR_NO_MEMORY;
    tw->tp = tp;
    tw->tid = params->tid;
    tw->nworkers = params->nworkers;
    tw->am_recv = params->am_recv;
    tw->am_arg = params->am_arg;
    tw->eps = calloc(params->nworkers, sizeof(*tw->eps));
    tw->held = calloc(params->nworkers, sizeof(*tw->held));
    tw->active = calloc(params->nworkers, sizeof(*tw->active));
    tw->is_active = calloc(params->nworkers, sizeof(*tw->is_active));
    tw->emulate = calloc(params->nworkers, sizeof(*tw->emulate));
    tw->emu_dirty = calloc(params->nworkers, sizeof(*tw->emu_dirty));
    tw->emu_puts_landing =
        calloc(params->nworkers, sizeof(*tw->emu_puts_landing));
    tw->emu_flush_waiting =
        calloc(params->nworkers, sizeof(*tw->emu_flush_waiting));
    tw->emu_fence = calloc(params->nworkers, sizeof(*tw->emu_fence));
    tw->emu_deferred = calloc(params->nworkers, sizeof(*tw->emu_deferred));
    tw->emu_deferred_tail =
        calloc(params->nworkers, sizeof(*tw->emu_deferred_tail));
    if (tw->emu_fence == NULL || tw->emu_deferred == NULL ||
        tw->emu_deferred_tail == NULL || tw->eps == NULL || tw->held == NULL ||
        tw->active == NULL || tw->is_active == NULL || tw->emulate == NULL ||
        tw->emu_dirty == NULL || tw->emu_puts_landing == NULL ||
        tw->emu_flush_waiting == NULL || rv_ucx_emu_worker_init(tw) != RV_OK)
        goto err_free;

    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    s = ucp_worker_create(tp->context, &wp, &tw->worker);
    if (s != UCS_OK) {
        rv_error("cannot create a UCX worker: %s", ucs_status_string(s));
        worker_create_hint(s);
        goto err_free;
    }

    ucp_am_handler_param_t hp = {
        .field_mask =
            UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
            UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = RV_UCX_AM_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = am_recv_cb,
        .arg = tw,
    };
    s = ucp_worker_set_am_recv_handler(tw->worker, &hp);
    if (s == UCS_OK) {
        hp.id = RV_UCX_AM_RMA;
        hp.cb = rv_ucx_emu_recv_cb;
        s = ucp_worker_set_am_recv_handler(tw->worker, &hp);
    }
    if (s != UCS_OK) {
        rv_error("cannot set the UCX AM handler: %s", ucs_status_string(s));
        ucp_worker_destroy(tw->worker);
        goto err_free;
    }
    *tw_p = tw;
    return RV_OK;

err_free:
    worker_free_arrays(tw);
    free(tw);
    return RV_ERR_TRANSPORT;
}

void rv_ucx_worker_destroy(struct rv_tworker *tw)
{
    rv_ucx_emu_worker_fini(tw);
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        ucx_held_t *h = tw->held[i].head;
        while (h != NULL) {
            ucx_held_t *next = h->next;
            if (h->ready) {
                held_free(h);
            } else if (h->rndv_desc != NULL) { /* never started */
                ucp_am_data_release(tw->worker, h->rndv_desc);
                free(h);
            } else { /* a rendezvous that will never complete */
                free(h->data);
                free(h);
            }
            h = next;
        }
    }
    ucp_worker_destroy(tw->worker);
    while (tw->free_ops != NULL) {
        ucx_op_t *op = tw->free_ops;
        tw->free_ops = op->next;
        free(op);
    }
    for (int c = 0; c < RV_UCX_RXBUF_CLASSES; c++) {
        while (tw->rxbuf_free[c] != NULL) {
            void *buf = tw->rxbuf_free[c];
            memcpy(&tw->rxbuf_free[c], buf, sizeof(void *));
            free(buf);
        }
    }
    while (tw->free_held != NULL) {
        ucx_held_t *h = tw->free_held;
        tw->free_held = h->next;
        free(h);
    }
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        while (tw->emu_flush_waiting[i] != NULL) {
            ucx_flush_wait_t *fw = tw->emu_flush_waiting[i];
            tw->emu_flush_waiting[i] = fw->next;
            free(fw);
        }
    }
    worker_free_arrays(tw);
    free(tw);
}

rv_status_t rv_ucx_worker_address(struct rv_tworker *tw, void **addr_p,
                                  size_t *len_p)
{
    ucp_address_t *addr;
    size_t len;
    ucs_status_t s = ucp_worker_get_address(tw->worker, &addr, &len);
    if (s != UCS_OK) {
        rv_error("cannot get the UCX worker address: %s", ucs_status_string(s));
        return rv_ucx_status(s);
    }
    *addr_p = addr;
    *len_p = len;
    return RV_OK;
}

void rv_ucx_address_release(struct rv_tworker *tw, void *addr)
{
    ucp_worker_release_address(tw->worker, addr);
}

rv_status_t rv_ucx_connect(struct rv_tworker *tw, uint32_t peer,
                           const void *addr, size_t len)
{
    (void)len;
    if (peer >= tw->nworkers)
        return RV_ERR_INVALID;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address = addr,
    };
    ucs_status_t s = ucp_ep_create(tw->worker, &ep, &tw->eps[peer]);
    if (s != UCS_OK) {
        rv_error("cannot connect to worker %u: %s", peer, ucs_status_string(s));
        return rv_ucx_status(s);
    }
    rv_transport_t *tp = tw->tp;
    int local = (int)(tw->tid % (uint32_t)tp->threads);
    int peer_rank = (int)(peer / (uint32_t)tp->threads);
    rv_rma_emulation_t emu = tp->config.rma_emulation;
    /* The process's first worker describes its endpoint to the first
     * worker of every other process (to its own second one, in a job of
     * one process). */
    bool describe = local == 0 && (tp->size > 1 ? peer_rank != tp->rank &&
                                                      peer % tp->threads == 0
                                                : peer == 1);
    /* The endpoint's lanes are read when auto needs them or the user is
     * told them; on and off apply to every endpoint alike, the described
     * ones included. */
    char *info = emu == RV_RMA_EMU_AUTO || describe
                     ? rv_ucx_ep_info(tw->eps[peer])
                     : NULL;
    tw->emulate[peer] = emu == RV_RMA_EMU_AUTO
                            ? rv_ucx_rma_needs_emulation(info)
                            : emu == RV_RMA_EMU_ON;
    /* At log level info, the lanes of the first endpoint of each class
     * (not one line set per process of a large job). */
    if (describe && info != NULL &&
        rv_ucx_record_lanes(tp, peer_rank, info, tw->emulate[peer]))
        rv_ucx_log_ep_info(peer_rank, info);
    free(info);
    return RV_OK;
}

rv_status_t rv_ucx_disconnect(struct rv_tworker *tw)
{
    void **reqs = calloc(tw->nworkers, sizeof(*reqs));
    unsigned pending = 0;
    if (reqs == NULL)
        return RV_ERR_NO_MEMORY;

    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = 0};
    for (uint32_t i = 0; i < tw->nworkers; i++) {
        if (tw->eps[i] == NULL)
            continue;
        ucs_status_ptr_t r = ucp_ep_close_nbx(tw->eps[i], &p);
        tw->eps[i] = NULL;
        if (UCS_PTR_IS_PTR(r)) {
            reqs[i] = r;
            pending++;
        }
    }

    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (pending > 0) {
        ucp_worker_progress(tw->worker);
        pending = 0;
        for (uint32_t i = 0; i < tw->nworkers; i++) {
            if (reqs[i] == NULL)
                continue;
            if (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS) {
                pending++;
                continue;
            }
            ucp_request_free(reqs[i]);
            reqs[i] = NULL;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (pending > 0 && t.tv_sec - t0.tv_sec > 5) {
            rv_warn("%u endpoints did not close within 5 s", pending);
            break;
        }
    }
    for (uint32_t i = 0; i < tw->nworkers; i++)
        if (reqs[i] != NULL)
            ucp_request_free(reqs[i]);
    free(reqs);
    return pending ? RV_ERR_TIMEOUT : RV_OK;
}

unsigned rv_ucx_progress(struct rv_tworker *tw)
{
    unsigned n = ucp_worker_progress(tw->worker);
    n += tw->completions;
    tw->completions = 0;
    if (tw->rndv_head != NULL)
        rndv_start_pending(tw);
    if (tw->active_count > 0)
        n += deliver_held(tw);
    return n;
}
