/*
 * The requesters' side of the offloading modes (rv_offload.h): the
 * transport operations core and the layers call, turned into commands for
 * an executor (thread, dynamic) or posted under the executor's lock
 * (direct), and the requester's progress, which runs its inbox.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_core.h"
#include "rv_offload.h"

#define OFF(_tp) ((off_tp_t *)(void *)(_tp))
#define REQ(_tw) ((off_req_t *)(void *)(_tw))

/* ---------------------------------------------------------------------- */
/* Commands                                                                */

/* A free command of the requester's executor, filled by the caller and
 * handed over by cmd_submit. In direct mode it is the caller's. */
typedef struct cmd_ref {
    off_cmd_t *c;
    uint32_t count, old;
    off_cmd_t local;
} cmd_ref_t;

/* Reserves a command; false only for a full queue when @p wait is false.
 * A full queue is backpressure from the executor, which drains it on its
 * own: the requester waits for it, never for another requester. */
static bool cmd_get(off_req_t *r, off_exec_t *e, cmd_ref_t *ref, bool wait)
{
    if (r->off->mode == RV_PROGRESS_DIRECT) {
        ref->c = &ref->local;
    } else {
        while (!offq_reserve(&e->q, &ref->count, &ref->old)) {
            if (!wait)
                return false;
            sched_yield();
        }
        ref->c = &e->ring[ref->count & (OFFQ_SIZE - 1)];
    }
    ref->c->req = r;
    ref->c->cb = NULL;
    ref->c->arg = NULL;
    return true;
}

static void cmd_submit(off_req_t *r, off_exec_t *e, cmd_ref_t *ref)
{
    if (r->off->mode == RV_PROGRESS_DIRECT) {
        pthread_mutex_lock(&e->lock);
        off_exec_run(e, ref->c);
        pthread_mutex_unlock(&e->lock);
    } else {
        offq_publish(&e->q, &ref->c->slot, ref->count, ref->old);
    }
}

/* Runs a synchronous command on @p e and waits for its answer. */
static rv_status_t cmd_sync(off_req_t *r, off_exec_t *e, off_op_t op,
                            uint32_t peer, const void *in, size_t in_len,
                            void **out_p, size_t *out_len_p)
{
    off_answer_t answer = {.status = RV_OK};
    cmd_ref_t ref;

    atomic_init(&answer.done, 0);
    cmd_get(r, e, &ref, true);
    ref.c->op = (uint8_t)op;
    ref.c->peer = peer;
    ref.c->u.sync.answer = &answer;
    ref.c->u.sync.in = in;
    ref.c->u.sync.in_len = in_len;
    ref.c->u.sync.out_p = out_p;
    ref.c->u.sync.out_len_p = out_len_p;
    cmd_submit(r, e, &ref);
    while (!atomic_load_explicit(&answer.done, memory_order_acquire))
        sched_yield();
    return answer.status;
}

/* ---------------------------------------------------------------------- */
/* Workers and connections                                                 */

static rv_status_t off_worker_create(rv_transport_t *tp,
                                     const rv_tworker_params_t *params,
                                     rv_tworker_t **tw_p)
{
    off_tp_t *off = OFF(tp);
    off_req_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return RV_ERR_NO_MEMORY;
    r->off = off;
    r->tid = params->tid;
    r->local = (int)(params->tid % (uint32_t)off->T);
    r->exec = &off->exec[r->local % off->K];
    r->am_recv = params->am_recv;
    r->am_arg = params->am_arg;
    cds_wfcq_init(&r->head, &r->tail);
    atomic_store_explicit(&off->reqs[r->local], r, memory_order_release);
    rv_status_t st = cmd_sync(r, r->exec, OFF_CREATE, 0, NULL, 0, NULL, NULL);
    if (st != RV_OK) {
        atomic_store(&off->reqs[r->local], NULL);
        free(r);
        return st;
    }
    *tw_p = (rv_tworker_t *)(void *)r;
    return RV_OK;
}

static void off_worker_destroy(rv_tworker_t *tw)
{
    off_req_t *r = REQ(tw);
    /* Unpublished first: the executor and a completer thread read the
     * requests of every worker they serve (off_exec_may_poll, and the
     * receive path), and the executor takes the destroy command under the
     * lock the completer polls under, after finishing its own reads, so
     * once the command is done neither still holds r (found by
     * ThreadSanitizer: r was freed under a completer's read). */
    atomic_store(&r->off->reqs[r->local], NULL);
    cmd_sync(r, r->exec, OFF_DESTROY, 0, NULL, 0, NULL, NULL);
    struct cds_wfcq_node *node;
    while ((node = __cds_wfcq_dequeue_blocking(&r->head, &r->tail)) != NULL)
        free(caa_container_of(node, off_item_t, node));
    cds_wfcq_destroy(&r->head, &r->tail);
    free(r);
}

/* Worker k < K of a process publishes executor k's address; the others
 * an empty one. */
static rv_status_t off_worker_address(rv_tworker_t *tw, void **addr_p,
                                      size_t *len_p)
{
    off_req_t *r = REQ(tw);
    if (r->local < r->off->K)
        return cmd_sync(r, &r->off->exec[r->local], OFF_ADDRESS, 0, NULL, 0,
                        addr_p, len_p);
    *addr_p = malloc(1);
    *len_p = 0;
    return *addr_p == NULL ? RV_ERR_NO_MEMORY : RV_OK;
}

static void off_address_release(rv_tworker_t *tw, void *addr)
{
    off_req_t *r = REQ(tw);
    if (r->local < r->off->K)
        r->off->ops->address_release(r->off->exec[r->local].tw, addr);
    else
        free(addr);
}

/* Worker k < K connects executor k to the executors of every process. */
static rv_status_t off_connect(rv_tworker_t *tw, uint32_t peer,
                               const void *addr, size_t len)
{
    off_req_t *r = REQ(tw);
    const off_tp_t *off = r->off;
    if (r->local >= off->K || (int)(peer % (uint32_t)off->T) >= off->K)
        return RV_OK;
    return cmd_sync(r, r->exec, OFF_CONNECT, peer, addr, len, NULL, NULL);
}

static rv_status_t off_disconnect(rv_tworker_t *tw)
{
    off_req_t *r = REQ(tw);
    return cmd_sync(r, r->exec, OFF_DISCONNECT, 0, NULL, 0, NULL, NULL);
}

/* Runs the requester's completions and messages, in the order its
 * executor queued them; in direct mode, first polls the shared worker if
 * no other requester is. */
static unsigned off_progress(rv_tworker_t *tw)
{
    off_req_t *r = REQ(tw);
    off_exec_t *e = r->exec;
    unsigned n = 0;

    if (r->off->mode == RV_PROGRESS_DIRECT && e->tw != NULL &&
        off_exec_may_poll(e) && pthread_mutex_trylock(&e->lock) == 0) {
        n += r->off->ops->progress(e->tw);
        pthread_mutex_unlock(&e->lock);
    }
    /* A bounded batch: a handler may progress again, and a flood of
     * messages must not keep rv_progress from returning. */
    for (unsigned i = 0; i < 64; i++) {
        struct cds_wfcq_node *node =
            __cds_wfcq_dequeue_nonblocking(&r->head, &r->tail);
        if (node == NULL || node == CDS_WFCQ_WOULDBLOCK)
            break;
        off_item_t *item = caa_container_of(node, off_item_t, node);
        RV_TSAN_ACQUIRE(item);
        n++;
        if (item->exec != NULL) { /* a completion */
            if (item->cb != NULL)
                item->cb(item->arg, item->status);
            free(item);
            continue;
        }
        atomic_fetch_sub_explicit(&r->pending, 1, memory_order_relaxed);
        rv_am_rx_t rx = {.src = item->wire.src,
                         .hdr = item->hdr,
                         .hdr_len = item->hdr_len,
                         .data = item->data,
                         .len = item->len,
                         .persistent = true};
        if (r->am_recv(r->am_arg, &rx, item) != RV_INPROGRESS)
            free(item);
    }
    if (n == 0 && r->off->mode == RV_PROGRESS_DYNAMIC) {
        if (r->off->completers)
            offw_nudge(&e->cwake); /* the completer polls the network */
        else
            offq_nudge(&e->q);
    }
    /* A worker that offloads cannot make progress itself: with nothing
     * to run it gives its core to the executors (measured on 2 cores, a
     * round trip of 8 bytes went from 20 to 7 us). */
    if (n == 0 && r->off->mode != RV_PROGRESS_DIRECT)
        sched_yield();
    return n;
}

/* ---------------------------------------------------------------------- */
/* Active messages                                                         */

static rv_status_t off_am_send(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                               size_t hdr_len, const struct iovec *iov,
                               size_t iovcnt, unsigned flags,
                               rv_completion_fn cb, void *arg)
{
    off_req_t *r = REQ(tw);
    off_wire_t wire = {.src = r->tid, .dst = peer};
    size_t len = 0;
    cmd_ref_t ref;

    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (hdr_len > OFF_HDR_MAX || iovcnt > OFF_IOV_MAX)
        return RV_ERR_INVALID;
    bool congested =
        atomic_load_explicit(&r->exec->copies, memory_order_relaxed) >=
        OFF_COPIES_MAX;
    if (congested && (flags & RV_AM_SEND_IMMEDIATE))
        return RV_ERR_AGAIN;
    bool copy =
        cb == NULL ||
        (!congested && (len <= OFF_INLINE || (flags & RV_AM_SEND_IMMEDIATE)));
    off_item_t *owned = NULL;
    if (copy && len > OFF_INLINE) {
        /* Larger than a command: a copy the executor sends and frees. */
        owned = malloc(sizeof(*owned) + sizeof(wire) + len);
        if (owned == NULL)
            return RV_ERR_NO_MEMORY;
    }
    if (!cmd_get(r, r->exec, &ref, !(flags & RV_AM_SEND_IMMEDIATE))) {
        free(owned);
        return RV_ERR_AGAIN;
    }
    off_cmd_t *c = ref.c;
    c->op = OFF_AM;
    c->peer = peer;
    c->hdr_len = (uint16_t)hdr_len;
    memcpy(c->hdr, hdr, hdr_len);
    memcpy(c->wire_data, &wire, sizeof(wire));
    c->u.am.by_ref = !copy;
    c->u.am.owned = owned;
    c->u.am.inline_len = (uint32_t)len;
    if (copy) {
        uint8_t *to = owned != NULL ? owned->data : c->wire_data;
        memcpy(to, &wire, sizeof(wire));
        to += sizeof(wire);
        for (size_t i = 0; i < iovcnt; i++) {
            if (iov[i].iov_len == 0)
                continue; /* an empty piece may have no base */
            memcpy(to, iov[i].iov_base, iov[i].iov_len);
            to += iov[i].iov_len;
        }
    } else {
        c->iovcnt = (uint8_t)iovcnt;
        if (iovcnt > 0)
            memcpy(c->u.am.iov, iov, iovcnt * sizeof(*iov));
        c->cb = cb;
        c->arg = arg;
    }
    cmd_submit(r, r->exec, &ref);
    return copy ? RV_OK : RV_INPROGRESS;
}

static void off_am_release(rv_tworker_t *tw, void *desc)
{
    (void)tw;
    free(desc);
}

/* ---------------------------------------------------------------------- */
/* One-sided operations                                                    */

/* Queues an operation; @p cb (NULL for fence and rkey destroy, which have
 * no completion) runs from the requester's progress. */
static void queue_op(off_req_t *r, cmd_ref_t *ref, off_op_t op, uint32_t peer,
                     rv_completion_fn cb, void *arg)
{
    ref->c->op = (uint8_t)op;
    ref->c->peer = peer;
    ref->c->cb = cb;
    ref->c->arg = arg;
    cmd_submit(r, r->exec, ref);
}

/* A put or a get: the buffer is the source of one, the target of the
 * other, and the executor tells them apart by @p op. */
static rv_status_t queue_rma(rv_tworker_t *tw, off_op_t op, uint32_t peer,
                             void *buf, size_t len, uint64_t raddr,
                             rv_trkey_t *rkey, rv_completion_fn cb, void *arg)
{
    cmd_ref_t ref;
    cmd_get(REQ(tw), REQ(tw)->exec, &ref, true);
    ref.c->u.rma.raddr = raddr;
    ref.c->u.rma.rkey = rkey;
    ref.c->u.rma.buf = buf;
    ref.c->u.rma.len = len;
    queue_op(REQ(tw), &ref, op, peer, cb, arg);
    return RV_INPROGRESS;
}

static rv_status_t off_put(rv_tworker_t *tw, uint32_t peer, uint64_t raddr,
                           rv_trkey_t *rkey, const void *src, size_t len,
                           rv_completion_fn cb, void *arg)
{
    return queue_rma(tw, OFF_PUT, peer, (void *)(uintptr_t)src, len, raddr,
                     rkey, cb, arg);
}

static rv_status_t off_get(rv_tworker_t *tw, uint32_t peer, void *dst,
                           size_t len, uint64_t raddr, rv_trkey_t *rkey,
                           rv_completion_fn cb, void *arg)
{
    return queue_rma(tw, OFF_GET, peer, dst, len, raddr, rkey, cb, arg);
}

static rv_status_t queue_amo(rv_tworker_t *tw, off_op_t op, uint32_t peer,
                             uint64_t v1, uint64_t v2, uint64_t raddr,
                             rv_trkey_t *rkey, uint64_t *result,
                             rv_completion_fn cb, void *arg)
{
    cmd_ref_t ref;
    cmd_get(REQ(tw), REQ(tw)->exec, &ref, true);
    ref.c->u.amo.raddr = raddr;
    ref.c->u.amo.rkey = rkey;
    ref.c->u.amo.v1 = v1;
    ref.c->u.amo.v2 = v2;
    ref.c->u.amo.result = result;
    queue_op(REQ(tw), &ref, op, peer, cb, arg);
    return RV_INPROGRESS;
}

static rv_status_t off_fadd(rv_tworker_t *tw, uint32_t peer, uint64_t value,
                            uint64_t raddr, rv_trkey_t *rkey, uint64_t *result,
                            rv_completion_fn cb, void *arg)
{
    return queue_amo(tw, OFF_FADD, peer, value, 0, raddr, rkey, result, cb,
                     arg);
}

static rv_status_t off_cswap(rv_tworker_t *tw, uint32_t peer, uint64_t compare,
                             uint64_t swap, uint64_t raddr, rv_trkey_t *rkey,
                             uint64_t *result, rv_completion_fn cb, void *arg)
{
    return queue_amo(tw, OFF_CSWAP, peer, compare, swap, raddr, rkey, result,
                     cb, arg);
}

static rv_status_t off_fence(rv_tworker_t *tw, uint32_t peer)
{
    cmd_ref_t ref;
    cmd_get(REQ(tw), REQ(tw)->exec, &ref, true);
    queue_op(REQ(tw), &ref, OFF_FENCE, peer, NULL, NULL);
    return RV_OK;
}

static rv_status_t off_flush(rv_tworker_t *tw, uint32_t peer,
                             rv_completion_fn cb, void *arg)
{
    cmd_ref_t ref;
    cmd_get(REQ(tw), REQ(tw)->exec, &ref, true);
    queue_op(REQ(tw), &ref, OFF_FLUSH, peer, cb, arg);
    return RV_INPROGRESS;
}

static rv_status_t off_rkey_unpack(rv_tworker_t *tw, uint32_t peer,
                                   const void *buf, size_t len,
                                   rv_trkey_t **rkey_p)
{
    off_req_t *r = REQ(tw);
    return cmd_sync(r, r->exec, OFF_RKEY_UNPACK, peer, buf, len,
                    (void **)rkey_p, NULL);
}

static void off_rkey_destroy(rv_tworker_t *tw, rv_trkey_t *rkey)
{
    cmd_ref_t ref;
    cmd_get(REQ(tw), REQ(tw)->exec, &ref, true);
    ref.c->u.rma.rkey = rkey;
    queue_op(REQ(tw), &ref, OFF_RKEY_DESTROY, 0, NULL, NULL);
}

/* ---------------------------------------------------------------------- */
/* The process's transport: registered memory is the plugin's, as it is    */

static rv_status_t off_mem_alloc(rv_transport_t *tp, size_t len,
                                 rv_tmem_t **mem_p, void **addr_p)
{
    return OFF(tp)->ops->mem_alloc(OFF(tp)->tp, len, mem_p, addr_p);
}

static rv_status_t off_mem_register(rv_transport_t *tp, void *addr, size_t len,
                                    rv_tmem_t **mem_p)
{
    return OFF(tp)->ops->mem_register(OFF(tp)->tp, addr, len, mem_p);
}

static void off_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem)
{
    OFF(tp)->ops->mem_deregister(OFF(tp)->tp, mem);
}

static rv_status_t off_rkey_pack(rv_transport_t *tp, rv_tmem_t *mem,
                                 void **buf_p, size_t *len_p)
{
    return OFF(tp)->ops->rkey_pack(OFF(tp)->tp, mem, buf_p, len_p);
}

static void off_rkey_buffer_release(rv_transport_t *tp, void *buf)
{
    OFF(tp)->ops->rkey_buffer_release(OFF(tp)->tp, buf);
}

static void off_query(rv_transport_t *tp, rv_transport_caps_t *caps)
{
    off_tp_t *off = OFF(tp);
    off->ops->query(off->tp, caps);
    caps->max_am_size -= sizeof(off_wire_t);
    if (caps->eager_limit > caps->max_am_size)
        caps->eager_limit = caps->max_am_size;
    size_t used = strlen(caps->description);
    snprintf(caps->description + used, sizeof(caps->description) - used,
             "; progress %s, %d executor%s%s",
             rv_config_enum_name("progress.mode", (int)off->mode), off->K,
             off->K == 1 ? "" : "s",
             off->completers ? " and completer threads" : "");
}

/* The plugin names a broken connection by its executor: core names the
 * process, through its first worker. */
static void off_peer_failed(void *arg, uint32_t peer, const char *why)
{
    off_tp_t *off = arg;
    uint32_t tid = (peer / (uint32_t)off->K) * (uint32_t)off->T;
    off->peer_failed(off->peer_failed_arg, tid, why);
}

static void off_fini(rv_transport_t *tp)
{
    off_tp_t *off = OFF(tp);
    for (int k = 0; k < off->K; k++) {
        off_exec_t *e = &off->exec[k];
        if (e->has_thread) {
            off_req_t stand_in = {.off = off, .exec = e};
            cmd_sync(&stand_in, e, OFF_EXIT, 0, NULL, 0, NULL, NULL);
        }
        off_exec_stop(e);
    }
    off->ops->fini(off->tp);
    free(off->exec);
    free(off->reqs);
    free(off);
}

static const rv_transport_ops_t off_template = {
    .abi_version = RV_TRANSPORT_ABI_VERSION,
    .fini = off_fini,
    .query = off_query,
    .worker_create = off_worker_create,
    .worker_destroy = off_worker_destroy,
    .worker_address = off_worker_address,
    .address_release = off_address_release,
    .connect = off_connect,
    .disconnect = off_disconnect,
    .progress = off_progress,
    .am_send = off_am_send,
    .am_release = off_am_release,
    .mem_alloc = off_mem_alloc,
    .mem_register = off_mem_register,
    .mem_deregister = off_mem_deregister,
    .rkey_pack = off_rkey_pack,
    .rkey_buffer_release = off_rkey_buffer_release,
    .rkey_unpack = off_rkey_unpack,
    .rkey_destroy = off_rkey_destroy,
    .put = off_put,
    .get = off_get,
    .atomic_fadd64 = off_fadd,
    .atomic_cswap64 = off_cswap,
    .fence = off_fence,
    .flush = off_flush,
};

rv_status_t rv__offload_init(rv_context_t *ctx, const rv_transport_ops_t *ops,
                             const rv_transport_params_t *params,
                             const rv_transport_ops_t **ops_p,
                             rv_transport_t **tp_p)
{
    const rv_core_config_t *core = ctx->core;
    int K = (int)core->progress.executors, T = params->threads;
    if (K > T) {
        rv_error("progress.executors is %d but a process has %d worker "
                 "thread%s (job.threads): executors are shared by worker "
                 "threads, so there can be at most as many",
                 K, T, T == 1 ? "" : "s");
        return RV_ERR_CONFIG;
    }
    off_tp_t *off = calloc(1, sizeof(*off));
    if (off == NULL)
        return RV_ERR_NO_MEMORY;
    off->ctx = ctx;
    off->vtable = off_template;
    off->vtable.name = ops->name;
    off->vtable.config = ops->config;
    off->ops = ops;
    off->mode = core->progress.mode;
    off->completers = core->progress.completers == RV_COMPLETERS_THREADS &&
                      off->mode != RV_PROGRESS_DIRECT;
    off->K = K;
    off->T = T;
    off->rank = params->rank;
    off->size = params->size;
    off->spin_ns = (long)core->progress.spin_us * 1000;
    off->sleep_us = (long)core->progress.sleep_us;
    off->peer_failed = params->peer_failed;
    off->peer_failed_arg = params->peer_failed_arg;
    off->exec = calloc((size_t)K, sizeof(*off->exec));
    off->reqs = calloc((size_t)T, sizeof(*off->reqs));
    if (off->exec == NULL || off->reqs == NULL)
        goto err_free;

    rv_transport_params_t mine = *params;
    mine.threads = K;
    mine.peer_failed = off_peer_failed;
    mine.peer_failed_arg = off;
    rv_status_t st = ops->init(&mine, &off->tp);
    if (st != RV_OK) {
        free(off->exec);
        free(off->reqs);
        free(off);
        return st;
    }
    for (int k = 0; k < K; k++) {
        if (off_exec_start(off, &off->exec[k], k) != RV_OK) {
            rv_error("cannot start executor %d of progress.mode %s", k,
                     rv_config_enum_name("progress.mode", (int)off->mode));
            off->K = k + 1; /* fini stops those started */
            off_fini((rv_transport_t *)(void *)off);
            return RV_ERR_NO_MEMORY;
        }
    }
    *ops_p = &off->vtable;
    *tp_p = (rv_transport_t *)(void *)off;
    return RV_OK;

err_free:
    free(off->exec);
    free(off->reqs);
    free(off);
    return RV_ERR_NO_MEMORY;
}
