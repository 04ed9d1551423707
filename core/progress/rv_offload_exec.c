/*
 * The executors of the offloading modes (rv_offload.h): they post the
 * requesters' commands to the plugin's transport workers, complete them,
 * and route what arrives to the requesters' inboxes. In direct mode the
 * requesters run the same code themselves, under the executor's lock.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "rv_core.h"
#include "rv_offload.h"

uint32_t off_real_peer(const off_tp_t *off, uint32_t tid)
{
    if (tid == RV_TID_ALL)
        return RV_TID_ALL;
    uint32_t rank = tid / (uint32_t)off->T, local = tid % (uint32_t)off->T;
    return rank * (uint32_t)off->K + local % (uint32_t)off->K;
}

void off_inbox_push(off_req_t *r, off_item_t *item)
{
    cds_wfcq_node_init(&item->node);
    RV_TSAN_RELEASE(item);
    cds_wfcq_enqueue(&r->head, &r->tail, &item->node);
}

/* ---------------------------------------------------------------------- */
/* Completions                                                             */

/* A completion record for command @p c, which goes to its requester. */
static off_item_t *done_new(off_exec_t *e, const off_cmd_t *c)
{
    off_item_t *item = malloc(sizeof(*item));
    if (item == NULL)
        rv_abort(e->off->ctx, 1,
                 "out of memory completing an offloaded operation");
    item->req = c->req;
    item->exec = e;
    item->cb = c->cb;
    item->arg = c->arg;
    item->status = RV_OK;
    return item;
}

/* The plugin's completion of an operation started with done_new's record. */
static void done_cb(void *arg, rv_status_t status)
{
    off_item_t *item = arg;
    atomic_fetch_sub_explicit(&item->exec->outstanding, 1,
                              memory_order_relaxed);
    item->status = status;
    off_inbox_push(item->req, item);
}

/* Settles what the plugin answered for an operation carrying @p item. */
static void done_post(off_exec_t *e, off_item_t *item, rv_status_t st)
{
    if (st == RV_INPROGRESS) {
        atomic_fetch_add_explicit(&e->outstanding, 1, memory_order_relaxed);
        return;
    }
    item->status = st;
    off_inbox_push(item->req, item);
}

static void free_owned(void *arg, rv_status_t status)
{
    off_item_t *item = arg;
    (void)status;
    atomic_fetch_sub_explicit(&item->exec->outstanding, 1,
                              memory_order_relaxed);
    atomic_fetch_sub_explicit(&item->exec->copies, 1, memory_order_relaxed);
    free(item);
}

bool off_exec_may_poll(const off_exec_t *e)
{
    const off_tp_t *off = e->off;
    for (int t = e->index; t < off->T; t += off->K) {
        const off_req_t *r =
            atomic_load_explicit(&off->reqs[t], memory_order_acquire);
        if (r != NULL &&
            atomic_load_explicit(&r->pending, memory_order_relaxed) >=
                OFF_INBOX_MAX)
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* Posting                                                                 */

/* A send whose requester was told it is done: its bytes are in the
 * command (or in a copy it owns). It goes at once if the plugin can, else
 * from a copy freed on completion. */
static void post_am_copied(off_exec_t *e, off_cmd_t *c, uint32_t peer)
{
    const rv_transport_ops_t *ops = e->off->ops;
    size_t len = sizeof(off_wire_t) + c->u.am.inline_len;
    struct iovec one = {.iov_base = c->wire_data, .iov_len = len};
    rv_status_t st;

    if (c->u.am.owned == NULL) {
        st = ops->am_send(e->tw, peer, c->hdr, c->hdr_len, &one, 1,
                          RV_AM_SEND_IMMEDIATE, NULL, NULL);
        if (st != RV_ERR_AGAIN)
            goto out;
    }
    /* The copy and its completion record are one block. */
    off_item_t *item = c->u.am.owned;
    if (item == NULL) {
        item = malloc(sizeof(*item) + len);
        if (item == NULL)
            rv_abort(e->off->ctx, 1,
                     "out of memory sending an offloaded message");
        memcpy(item->data, c->wire_data, len);
    }
    item->exec = e;
    one.iov_base = item->data;
    st = ops->am_send(e->tw, peer, c->hdr, c->hdr_len, &one, 1, 0, free_owned,
                      item);
    if (st == RV_INPROGRESS) {
        atomic_fetch_add_explicit(&e->outstanding, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->copies, 1, memory_order_relaxed);
    } else {
        free(item);
    }
out:
    if (st < 0)
        rv_error("offloaded send to worker %u failed: %s", c->peer,
                 rv_status_str(st));
}

static void post_am(off_exec_t *e, off_cmd_t *c)
{
    const rv_transport_ops_t *ops = e->off->ops;
    uint32_t peer = off_real_peer(e->off, c->peer);
    if (!c->u.am.by_ref) {
        post_am_copied(e, c, peer);
        return;
    }
    /* By reference: the prefix lives in the completion record, the
     * payload in the requester's buffers, until the completion. */
    off_item_t *item = done_new(e, c);
    struct iovec iov[OFF_IOV_MAX + 1];
    memcpy(&item->wire, c->wire_data, sizeof(item->wire));
    iov[0].iov_base = &item->wire;
    iov[0].iov_len = sizeof(item->wire);
    memcpy(iov + 1, c->u.am.iov, c->iovcnt * sizeof(iov[0]));
    rv_status_t st = ops->am_send(e->tw, peer, c->hdr, c->hdr_len, iov,
                                  c->iovcnt + 1u, 0, done_cb, item);
    done_post(e, item, st);
}

/* Runs a synchronous command on the executor's worker. */
static rv_status_t run_sync(off_exec_t *e, off_cmd_t *c)
{
    const off_tp_t *off = e->off;
    const rv_transport_ops_t *ops = off->ops;
    switch ((off_op_t)c->op) {
    case OFF_CREATE: {
        if (e->users++ > 0)
            return RV_OK;
        rv_tworker_params_t params = {
            .tid = off->rank * (uint32_t)off->K + (uint32_t)e->index,
            .nworkers = off->size * (uint32_t)off->K,
            .numa_node = -1,
            .am_recv = off_exec_recv,
            .am_arg = e,
        };
        e->disconnects = 0;
        rv_status_t st = ops->worker_create(off->tp, &params, &e->tw);
        if (st != RV_OK)
            e->users--;
        return st;
    }
    case OFF_ADDRESS:
        return ops->worker_address(e->tw, c->u.sync.out_p, c->u.sync.out_len_p);
    case OFF_CONNECT:
        return ops->connect(e->tw, off_real_peer(off, c->peer), c->u.sync.in,
                            c->u.sync.in_len);
    case OFF_DISCONNECT:
        /* The worker is shared: it closes when the last requester using
         * it is done, so that the others' last messages still go. */
        if (++e->disconnects < e->users)
            return RV_OK;
        return ops->disconnect(e->tw);
    case OFF_DESTROY:
        if (--e->users == 0) {
            ops->worker_destroy(e->tw);
            e->tw = NULL;
        }
        return RV_OK;
    case OFF_RKEY_UNPACK:
        return ops->rkey_unpack(e->tw, off_real_peer(off, c->peer),
                                c->u.sync.in, c->u.sync.in_len,
                                (rv_trkey_t **)c->u.sync.out_p);
    case OFF_EXIT:
        e->exit = true;
        return RV_OK;
    default:
        return RV_ERR_INVALID;
    }
}

void off_exec_run(off_exec_t *e, off_cmd_t *c)
{
    const rv_transport_ops_t *ops = e->off->ops;
    uint32_t peer = off_real_peer(e->off, c->peer);
    off_item_t *item;
    rv_status_t st;

    switch ((off_op_t)c->op) {
    case OFF_AM:
        post_am(e, c);
        return;
    case OFF_PUT:
        item = done_new(e, c);
        st = ops->put(e->tw, peer, c->u.rma.raddr, c->u.rma.rkey, c->u.rma.buf,
                      c->u.rma.len, done_cb, item);
        break;
    case OFF_GET:
        item = done_new(e, c);
        st = ops->get(e->tw, peer, c->u.rma.buf, c->u.rma.len, c->u.rma.raddr,
                      c->u.rma.rkey, done_cb, item);
        break;
    case OFF_FADD:
        item = done_new(e, c);
        st = ops->atomic_fadd64(e->tw, peer, c->u.amo.v1, c->u.amo.raddr,
                                c->u.amo.rkey, c->u.amo.result, done_cb, item);
        break;
    case OFF_CSWAP:
        item = done_new(e, c);
        st = ops->atomic_cswap64(e->tw, peer, c->u.amo.v1, c->u.amo.v2,
                                 c->u.amo.raddr, c->u.amo.rkey, c->u.amo.result,
                                 done_cb, item);
        break;
    case OFF_FLUSH:
        item = done_new(e, c);
        st = ops->flush(e->tw, peer, done_cb, item);
        break;
    case OFF_FENCE:
        st = ops->fence(e->tw, peer);
        if (st != RV_OK)
            rv_error("offloaded fence failed: %s", rv_status_str(st));
        return;
    case OFF_RKEY_DESTROY:
        ops->rkey_destroy(e->tw, c->u.rma.rkey);
        return;
    default: {
        off_answer_t *answer = c->u.sync.answer;
        answer->status = run_sync(e, c);
        atomic_store_explicit(&answer->done, 1, memory_order_release);
        return;
    }
    }
    done_post(e, item, st);
}

/* ---------------------------------------------------------------------- */
/* Receiving                                                               */

/* The plugin's AM dispatch: the message goes, copied, to the inbox of the
 * worker it is for, which runs it when it progresses. */
rv_status_t off_exec_recv(void *arg, const rv_am_rx_t *rx, void *desc)
{
    off_exec_t *e = arg;
    const off_tp_t *off = e->off;
    off_wire_t wire;
    (void)desc;

    if (rx->len < sizeof(wire) || rx->hdr_len > OFF_HDR_MAX) {
        rv_error("malformed offloaded message from executor %u (%zu bytes, "
                 "header %zu bytes): dropped",
                 rx->src, rx->len, rx->hdr_len);
        return RV_OK;
    }
    memcpy(&wire, rx->data, sizeof(wire));
    uint32_t local = wire.dst % (uint32_t)off->T;
    off_req_t *r = NULL;
    if (wire.dst / (uint32_t)off->T == off->rank)
        r = atomic_load_explicit(&off->reqs[local], memory_order_acquire);
    if (r == NULL) {
        rv_error("offloaded message for worker %u, which is not a running "
                 "worker of this process: dropped",
                 wire.dst);
        return RV_OK;
    }
    size_t len = rx->len - sizeof(wire);
    off_item_t *item = malloc(sizeof(*item) + (len ? len : 1));
    if (item == NULL)
        rv_abort(off->ctx, 1, "out of memory receiving an offloaded message");
    item->req = r;
    item->exec = NULL; /* a message, not a completion */
    item->cb = NULL;
    item->wire = wire;
    item->hdr_len = (uint32_t)rx->hdr_len;
    item->len = len;
    memcpy(item->hdr, rx->hdr, rx->hdr_len);
    memcpy(item->data, (const uint8_t *)rx->data + sizeof(wire), len);
    atomic_fetch_add_explicit(&r->pending, 1, memory_order_relaxed);
    off_inbox_push(r, item);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* The executor thread                                                     */

/* Posts the commands waiting in the queue, up to a batch, so that polling
 * the network is never starved by a stream of commands. With a completer
 * thread the batch is posted under the lock they share, and the completer
 * is told. */
static off_cmd_t *next_cmd(off_exec_t *e)
{
    off_cmd_t *c = &e->ring[e->q.next & (OFFQ_SIZE - 1)];
    return offq_ready(&e->q, &c->slot) ? c : NULL;
}

static unsigned exec_drain(off_exec_t *e)
{
    bool shared = e->off->completers;
    unsigned n = 0;
    off_cmd_t *c = next_cmd(e);
    if (c == NULL)
        return 0; /* nothing to post: the completer keeps the lock */
    if (shared)
        pthread_mutex_lock(&e->lock);
    for (; c != NULL && n < 64 &&
           !atomic_load_explicit(&e->exit, memory_order_relaxed);
         c = next_cmd(e)) {
        off_exec_run(e, c); /* model: executor "take" and "post" */
        offq_pop(&e->q);
        n++;
    }
    if (shared)
        pthread_mutex_unlock(&e->lock);
    if (shared && n > 0)
        offw_signal(&e->cwake); /* model: executor "signal" */
    return n;
}

/* How long a thread with nothing to do has been idle (dynamic mode). */
typedef struct {
    unsigned polls;    /* empty polls in a row */
    long since;        /* when the first was, in ns; 0: not idle */
    unsigned timeouts; /* sleeps in a row that nobody ended */
} off_idle_t;

static void idle_reset(off_idle_t *s)
{
    s->polls = 0;
    s->since = 0;
    s->timeouts = 0;
}

/*
 * One empty poll. Busy-polling yields the core to the requesters it
 * serves when there are more threads than cores. In dynamic mode, returns
 * the microseconds to sleep for, once the spin before sleeping is over,
 * and 0 while it is not. The spin follows activity only: a timed wake-up
 * that finds nothing sleeps again at once, and longer (up to 8
 * progress.sleep_us), so that an idle process costs little.
 */
static long idle_poll(const off_tp_t *off, off_idle_t *s)
{
    if (++s->polls % 64 == 0)
        sched_yield();
    if (off->mode != RV_PROGRESS_DYNAMIC)
        return 0;
    int64_t now = rv_time_ns();
    if (s->since == 0)
        s->since = now;
    if (s->timeouts == 0 && now - s->since < off->spin_ns)
        return 0;
    return off->sleep_us << (s->timeouts < 3 ? s->timeouts : 3);
}

static void idle_slept(off_idle_t *s, int slept)
{
    s->timeouts = slept == OFFQ_TIMED_OUT ? s->timeouts + 1 : 0;
    s->since = 0;
}

static bool nothing_outstanding(const off_exec_t *e)
{
    return atomic_load_explicit(&e->outstanding, memory_order_relaxed) == 0;
}

static void *exec_main(void *arg)
{
    off_exec_t *e = arg;
    const off_tp_t *off = e->off;
    off_idle_t idle = {0};

    rv_log_set_identity((int)off->rank, -1);
    while (!atomic_load_explicit(&e->exit, memory_order_relaxed)) {
        unsigned n = exec_drain(e);
        if (!off->completers && e->tw != NULL && off_exec_may_poll(e))
            n += off->ops->progress(e->tw); /* model: "complete" */
        if (n > 0) {
            idle_reset(&idle);
            continue;
        }
        /* An executor that is its own completer sleeps only when nothing
         * is outstanding. */
        long us = idle_poll(off, &idle);
        if (us == 0 || (!off->completers && !nothing_outstanding(e)))
            continue;
        idle_slept(&idle, offq_sleep(&e->q, us));
    }
    return NULL;
}

/* progress.completers: threads. Polls the executor's worker, under the
 * lock they share, and sleeps (dynamic mode) when nothing is outstanding,
 * until the executor posts again ("Implementation: Completers"). */
static void *completer_main(void *arg)
{
    off_exec_t *e = arg;
    const off_tp_t *off = e->off;
    off_idle_t idle = {0};

    rv_log_set_identity((int)off->rank, -1);
    while (!atomic_load_explicit(&e->exit, memory_order_relaxed)) {
        /* Read before polling: a post after this changes the word, and
         * the sleep below then does not happen. */
        uint32_t seen = atomic_load_explicit(&e->cwake, memory_order_acquire);
        unsigned n = 0;
        pthread_mutex_lock(&e->lock);
        if (e->tw != NULL && off_exec_may_poll(e))
            n = off->ops->progress(e->tw); /* model: completer "complete" */
        pthread_mutex_unlock(&e->lock);
        if (n > 0) {
            idle_reset(&idle);
            continue;
        }
        long us = idle_poll(off, &idle);
        /* model: completer "check" */
        if (us == 0 || !nothing_outstanding(e))
            continue;
        idle_slept(&idle, offw_sleep(&e->cwake, seen, us));
    }
    return NULL;
}

rv_status_t off_exec_start(off_tp_t *off, off_exec_t *e, int index)
{
    e->off = off;
    e->index = index;
    offq_init(&e->q);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&e->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    e->ring = aligned_alloc(64, OFFQ_SIZE * sizeof(off_cmd_t));
    if (e->ring == NULL)
        return RV_ERR_NO_MEMORY;
    for (unsigned i = 0; i < OFFQ_SIZE; i++)
        atomic_init(&e->ring[i].slot.seq, 0);
    if (off->mode == RV_PROGRESS_DIRECT)
        return RV_OK;
    atomic_init(&e->cwake, 1u); /* awake at first, as offq_init */
    if (pthread_create(&e->thread, NULL, exec_main, e) != 0)
        return RV_ERR_NO_MEMORY;
    e->has_thread = true;
    if (off->completers) {
        if (pthread_create(&e->completer, NULL, completer_main, e) != 0)
            return RV_ERR_NO_MEMORY;
        e->has_completer = true;
    }
    return RV_OK;
}

void off_exec_stop(off_exec_t *e)
{
    if (e->has_thread)
        pthread_join(e->thread, NULL);
    if (e->has_completer) {
        atomic_store(&e->exit, true);
        offw_nudge(&e->cwake);
        pthread_join(e->completer, NULL);
    }
    if (e->tw != NULL) /* a job that never ran its workers' destroy */
        e->off->ops->worker_destroy(e->tw);
    pthread_mutex_destroy(&e->lock);
    free(e->ring);
}
