/*
 * A UCX worker's receive side: every rivet message is one UCP active
 * message (id RV_UCX_AM_ID) whose UCP header is [u32 sender worker][core
 * header] and whose data is the payload. Eager data is delivered from the
 * receive callback; rendezvous data (UCP_AM_RECV_ATTR_FLAG_RNDV) is
 * fetched with ucp_am_recv_data_nbx into a buffer of ours and delivered
 * when it has arrived.
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

#include "ucx_internal.h"

#define HELD_TAG ((uintptr_t)1) /* marks a held message in a desc */

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

ucs_status_t rv_ucx_am_recv_cb(void *arg, const void *header,
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

unsigned rv_ucx_recv_progress(struct rv_tworker *tw)
{
    if (tw->rndv_head != NULL)
        rndv_start_pending(tw);
    return tw->active_count > 0 ? deliver_held(tw) : 0;
}

/* The worker's UCX worker is still there: a rendezvous never started gives
 * UCX's descriptor back. */
void rv_ucx_recv_fini(struct rv_tworker *tw)
{
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
}

void rv_ucx_recv_free_pools(struct rv_tworker *tw)
{
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
}
