/*
 * Running calls at the target: decoding records (run records included),
 * the runs of calls that came over send (kept for FIFO order) and detour
 * calls. Completions are in am_reply.c, the local bypass in am_local.c.
 *
 * Every source of calls (a run of a batch, a ring, a local block) is
 * consumed one call at a time, with its cursor advanced *before* the
 * handler runs, so a nested rv_progress simply continues with the next
 * call of the same source: FIFO order of starting calls holds, nothing
 * runs twice, and nothing waits for the outer handler.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"

am_src_t *am_src(am_worker_t *aw, rv_tid_t src)
{
    am_src_t *s = aw->recv.srcs[src];
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return NULL;
        aw->recv.srcs[src] = s;
    }
    return s;
}

/* ---------------------------------------------------------------------- */
/* Running calls (decoding them is am_wire.c's)                            */

/* Sends a message from inside a call's execution without ever waiting
 * (RV_SEND_COPY): a handler's reply or forward that waited would
 * progress, run the next call, whose reply would wait in turn, and under
 * sustained load the stack would grow with the traffic. */
static rv_status_t am_send_nowait(am_worker_t *aw, rv_tid_t dest,
                                  rv_handler_id_t h, const void *xhdr,
                                  size_t xhdr_len, const void *data, size_t len)
{
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    return rv_send_raw(aw->w, dest, h, xhdr, xhdr_len, &iov, len ? 1 : 0,
                       RV_SEND_COPY, NULL, NULL);
}

static void forward(am_worker_t *aw, const am_call_t *c)
{
    const am_hdr_t *h = &c->hdr;
    uint32_t n = aw->nworkers;
    uint32_t rel = (aw->me + n - h->root) % n;
    uint32_t step = 1;
    while (step <= rel)
        step <<= 1;
    size_t len = c->args_len + c->buf_len;
    for (; rel + step < n; step <<= 1) {
        rv_tid_t child = (h->root + rel + step) % n;
        rv_status_t st =
            am_send_nowait(aw, child, c->handler, h, sizeof(*h), c->args, len);
        if (st != RV_OK)
            rv_error("broadcast from worker %u: forwarding to worker %u "
                     "failed: %s",
                     h->root, child, rv_status_str(st));
        else
            aw->stats.broadcasts_forwarded++;
    }
}

static void notify_rma(am_worker_t *aw, rv_tid_t src)
{
    am_src_t *s = aw->recv.srcs[src];
    if (s == NULL || s->ring == NULL) {
        rv_warn("a call from worker %u asks for a ring notification "
                "without a ring",
                src);
        return;
    }
    s->ring->notified++;
    s->ring->push_due = true;
}

/* An extended call (rv_am_ext.h): its buffer by reference or put in
 * place, then its hook, with this source's later calls held while the
 * hook waits. False when the call is dropped. */
static bool call_extend(am_worker_t *aw, const am_call_t *c, rv_am_xrun_t *x,
                        const rv_am_hook_t **hook_p)
{
    const am_hdr_t *h = &c->hdr;
    x->addr = h->x_addr;
    x->len = h->x_len;
    x->word = h->x_word;
    if (h->flags & AM_XPLACE) {
        uint8_t *dst = (uint8_t *)(uintptr_t)h->x_addr;
        if (x->buf_len > 0)
            memcpy(dst, x->buf, x->buf_len);
        x->buf = dst;
    } else if (h->flags & AM_XREF) {
        x->buf = (const void *)(uintptr_t)h->x_addr;
        x->buf_len = h->x_len;
    }
    if (!(h->flags & AM_XHOOK))
        return true;
    unsigned id = (h->flags & AM_XHOOK_MASK) >> AM_XHOOK_SHIFT;
    am_src_t *s = am_src(aw, c->src);
    if (id >= (unsigned)aw->proc->nhooks || s == NULL) {
        rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
        rv_warn("dropped a call from worker %u naming call hook %u, which "
                "is not registered here",
                c->src, id);
        return false;
    }
    const rv_am_hook_t *hook = &aw->proc->hooks[id];
    s->fetching++;
    rv_status_t st = hook->prepare(aw->w, x, hook->arg);
    s->fetching--;
    if (st != RV_OK)
        return false;
    *hook_p = hook;
    return true;
}

/* Drops a call from another process whose header claims what only this
 * process may say: the local bypass's flag (its sync and ret would be
 * taken as pointers of this process), a broadcast root that is no
 * worker, or an extended call's buffer outside the memory this process
 * exposes (rv_am_xcheck_register). Counted, and logged once per source.
 * False when the call is dropped. */
static bool wire_check(am_worker_t *aw, const am_call_t *c)
{
    const am_hdr_t *h = &c->hdr;
    const char *why = NULL;
    if (h->flags & AM_LOCAL) {
        why = "claims to come from this process";
    } else if ((h->flags & AM_BCAST) && h->root >= aw->nworkers) {
        why = "names a broadcast root that is no worker";
    } else if ((h->flags & (AM_XREF | AM_XPLACE)) == (AM_XREF | AM_XPLACE)) {
        /* No sender sets both; the check below would pass the reference's
         * length while call_extend places the buffer's (found by fuzzing:
         * a write past the exposed memory). */
        why = "asks for its buffer both by reference and put in place";
    } else if (h->flags & (AM_XREF | AM_XPLACE)) {
        uint64_t len = (h->flags & AM_XREF) ? h->x_len : c->buf_len;
        const am_proc_t *proc = aw->proc;
        if (proc->xcheck == NULL ||
            !proc->xcheck(aw->w, h->x_addr, len, proc->xcheck_arg))
            why = "names a buffer outside this process's exposed memory";
    }
    if (why == NULL)
        return true;
    rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
    am_src_t *s = am_src(aw, c->src);
    if (s == NULL || !s->warned_forged) {
        rv_warn("dropped a call from worker %u that %s (flags 0x%x); later "
                "ones are counted in job.stats only",
                c->src, why, h->flags);
        if (s != NULL)
            s->warned_forged = true;
    }
    return false;
}

/* The call handler call @p c names; NULL when no call handler has its id
 * (the call is dropped, counted and logged). */
static const am_entry_t *call_entry(am_worker_t *aw, const am_call_t *c)
{
    const rv_handler_info_t *e = aw->recv.last_entry;
    if (e == NULL || e->id != c->handler) {
        e = rv_handler_find(aw->ctx, c->handler);
        if (e != NULL && e->fn == am_trampoline)
            aw->recv.last_entry = e; /* calls come in runs of one handler */
    }
    if (e == NULL || e->fn != am_trampoline) {
        rv_worker_count_drop(aw->w, RV_DROP_UNKNOWN_HANDLER);
        rv_warn("dropped a call from worker %u to unknown call handler "
                "0x%08x; every process must register the same handlers",
                c->src, c->handler);
        return NULL;
    }
    return e->arg;
}

/* Where the handler of a call with header @p h writes its result: the
 * caller's own buffer when it is a thread of this process, else @p small
 * (AM_RESULT_SMALL bytes) or a buffer of its own that run_call frees.
 * *cap: the result's size (0: none). False when out of memory. */
#define AM_RESULT_SMALL 256
static bool result_open(const am_hdr_t *h, uint8_t *small, uint8_t **reply,
                        size_t *cap)
{
    *cap = (h->flags & AM_RETURN) ? h->ret_len : 0;
    *reply = NULL;
    if (*cap == 0)
        return true;
    if (h->flags & AM_LOCAL)
        *reply = (uint8_t *)(uintptr_t)h->ret;
    else
        *reply = *cap <= AM_RESULT_SMALL ? small : malloc(*cap);
    if (*reply == NULL) {
        rv_error("out of memory for a %zu-byte call result", *cap);
        return false;
    }
    memset(*reply, 0, *cap);
    return true;
}

/* The answer the caller of @p c is owed once its handler ran: its
 * synchronizer (same process), its ring note, a routed answer, or a
 * completion with the result through rivet.am.done. */
static void call_answer(am_worker_t *aw, const am_call_t *c,
                        const rv_call_t *call, size_t ret_cap)
{
    const am_hdr_t *h = &c->hdr;
    uint32_t ret_len =
        (uint32_t)(call->ret_len < ret_cap ? call->ret_len : ret_cap);
    if (h->flags & AM_LOCAL) {
        if (h->flags & AM_NOTIFY)
            am_owe(aw, (rv_sync_t *)(uintptr_t)h->sync);
    } else if (h->flags & AM_NOTIFY_RMA) {
        notify_rma(aw, c->src);
    } else if ((h->flags & AM_NOTIFY) && c->routed) {
        am_route_answer(aw, c, call->ret, ret_len);
    } else if (h->flags & AM_NOTIFY) {
        am_done_t d = {.sync = h->sync, .ret = h->ret, .ret_len = ret_len};
        rv_status_t st = am_reply(aw, call->src, &d, call->ret);
        if (st != RV_OK)
            rv_error("cannot report a call's completion to worker %u: %s",
                     call->src, rv_status_str(st));
    }
}

/* Runs call @p c: its handler, with what it forwards (a broadcast), the
 * extension it asks for, and the answer it owes. */
static void run_call(am_worker_t *aw, const am_call_t *c)
{
    const am_entry_t *ae = call_entry(aw, c);
    if (ae == NULL)
        return;
    const am_hdr_t *h = &c->hdr;
    if (h->flags != 0 && !c->local && !wire_check(aw, c))
        return;
    if (h->flags == 0 && c->buf_len == 0) {
        /* A plain call (most of irregular traffic): nothing to forward,
         * extend or answer. */
        rv_call_t call = {
            .src = c->src, .args = c->args, .args_len = c->args_len};
        am_call_handler(aw, ae, &call);
        return;
    }
    if (h->flags & AM_BCAST)
        forward(aw, c);
    rv_am_xrun_t x = {.src = c->src, .buf = c->buf, .buf_len = c->buf_len};
    const rv_am_hook_t *hook = NULL;
    if ((h->flags & (AM_XREF | AM_XPLACE | AM_XHOOK)) &&
        !call_extend(aw, c, &x, &hook))
        return;

    /* The result is built in a scratch buffer and sent back after the
     * call, or written straight into the caller's when it is local. */
    uint8_t small[AM_RESULT_SMALL];
    uint8_t *reply;
    size_t ret_cap;
    if (!result_open(h, small, &reply, &ret_cap))
        return;
    rv_call_t call = {
        .src = (h->flags & AM_BCAST) ? h->root : c->src,
        .args = c->args,
        .args_len = c->args_len,
        .buf = x.buf,
        .buf_len = x.buf_len,
        .ret = reply,
        .ret_len = ret_cap,
        .broadcast = h->flags & AM_BCAST,
    };
    aw->stats.calls_received++;
    aw->stats.bytes_received += c->args_len + x.buf_len;
    if (++aw->recv.depth > aw->stats.max_nesting)
        aw->stats.max_nesting = aw->recv.depth;
    rv_status_t st = ae->fn(aw->w, &call, ae->arg);
    aw->recv.depth--;
    if (hook != NULL && hook->finish != NULL)
        hook->finish(aw->w, &x, hook->arg);
    if (st < 0)
        rv_warn("a call handler returned %s", rv_status_str(st));
    call_answer(aw, c, &call, ret_cap);
    if (reply != NULL && reply != small && !(h->flags & AM_LOCAL))
        free(reply);
}

/* The calls of an AM_REC_RETRUN run: [sync][ret][arguments] each; the
 * result is written straight into the caller's buffer when the caller
 * is a thread of this process (its synchronizer completed by the end of
 * the local poll), else built in a scratch buffer and gathered for the
 * caller by am_reply. */
static unsigned run_retrun(am_worker_t *aw, am_run_t *r, rv_tid_t src,
                           const am_entry_t *ae)
{
    unsigned n = 0;
    uint64_t small[AM_FAST_RET / 8];
    size_t ret_len = r->cur.rret_len;
    while (r->cur.rp < r->cur.rend) {
        const uint8_t *p = r->cur.rp;
        r->cur.rp += r->cur.rstride;
        am_done_t done = {.ret_len = (uint32_t)ret_len};
        memcpy(&done.sync, p, 8);
        memcpy(&done.ret, p + 8, 8);
        void *reply = r->cur.local ? (void *)(uintptr_t)done.ret : small;
        if (ret_len == 8)
            memset(reply, 0, 8);
        else
            memset(reply, 0, ret_len);
        rv_call_t call = {.src = src,
                          .args = p + 16,
                          .args_len = r->cur.ralen,
                          .ret = reply,
                          .ret_len = ret_len};
        rv_status_t st = ae->fn(aw->w, &call, ae->arg);
        if (st < 0)
            rv_warn("a call handler returned %s", rv_status_str(st));
        n++;
        if (r->cur.local) {
            am_owe(aw, (rv_sync_t *)(uintptr_t)done.sync);
            continue;
        }
        if (call.ret_len < done.ret_len)
            done.ret_len = (uint32_t)call.ret_len;
        if ((st = am_reply_to(aw, src, aw->send.dests[src], &done, reply)) !=
            RV_OK)
            rv_error("cannot report a call's completion to worker %u: %s", src,
                     rv_status_str(st));
    }
    return n;
}

unsigned am_run_plain(am_worker_t *aw, am_run_t *r, rv_tid_t src)
{
    if (r->cur.rkind == AM_REC_RETRUN && r->cur.rret_len > AM_FAST_RET)
        return 0; /* am_run_call builds its larger results */
    if (am_rec_routed(r->cur.rkind))
        return am_route_run(aw, r);
    const rv_handler_info_t *e = aw->recv.last_entry;
    if (e == NULL || e->id != r->cur.rh) {
        e = rv_handler_find(aw->ctx, r->cur.rh);
        if (e == NULL || e->fn != am_trampoline)
            return 0; /* am_run_call drops it, saying why */
        aw->recv.last_entry = e;
    }
    const am_entry_t *ae = e->arg;
    unsigned n = 0;
    if (++aw->recv.depth > aw->stats.max_nesting)
        aw->stats.max_nesting = aw->recv.depth;
    /* One handler for the whole run: each call's cursor is advanced
     * before it runs, as everywhere, so a handler that progresses
     * continues this run in order. */
    r->refs++;
    if (r->cur.rkind == AM_REC_RETRUN) {
        n = run_retrun(aw, r, src, ae);
    } else {
        while (r->cur.rp < r->cur.rend) {
            rv_call_t call = {
                .src = src, .args = r->cur.rp, .args_len = r->cur.ralen};
            r->cur.rp += r->cur.rstride;
            rv_status_t st = ae->fn(aw->w, &call, ae->arg);
            if (st < 0)
                rv_warn("a call handler returned %s", rv_status_str(st));
            n++;
        }
    }
    r->refs--;
    aw->recv.depth--;
    aw->stats.calls_received += n;
    aw->stats.bytes_received += (uint64_t)n * r->cur.ralen;
    aw->recv.calls_done += n;
    return n;
}

/* Counted once it has run, or was dropped, whatever the path: the count
 * rv_quiesce compares with the calls made. */
void am_run_call(am_worker_t *aw, const am_call_t *c)
{
    if (c->routed && (aw->cfg->routing == RV_ROUTE_DIRECT ||
                      c->src >= aw->nworkers || c->dst >= aw->nworkers)) {
        /* No worker of a job routes calls unless am.routing says so. */
        rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
        if (!aw->warned_route)
            rv_warn("dropped a routed call from worker %u to worker %u: %s; "
                    "later ones are counted in job.stats only",
                    c->src, c->dst,
                    aw->cfg->routing == RV_ROUTE_DIRECT
                        ? "the job does not route calls (am.routing direct)"
                        : "the job has no such worker");
        aw->warned_route = true;
    } else if (c->routed && c->dst != aw->me)
        am_route_forward(aw, c);
    else
        run_call(aw, c);
    aw->recv.calls_done++;
}

/* ---------------------------------------------------------------------- */
/* Runs of calls that came over send                                       */

/* Runs the calls of @p s's queued runs in order. A run whose last call
 * is still executing (an outer frame waits in it) does not hold up the
 * runs behind it: its calls have all started. */
unsigned am_src_drain(am_worker_t *aw, am_src_t *s, rv_tid_t src)
{
    unsigned n = 0;
    for (am_run_t *r = s->head; r != NULL && !s->fetching && am_may_run(aw);) {
        am_call_t c;
        unsigned plain = am_run_in_plain(r) ? am_run_plain(aw, r, src) : 0;
        n += plain;
        if (plain > 0)
            continue;
        int k = am_run_next(r, src, AM_REC_FOOTER, &c);
        if (k > 0) {
            r = r->next;
            continue;
        }
        if (k < 0) {
            rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
            rv_warn("dropped the rest of a malformed batch of calls from "
                    "worker %u",
                    src);
            r->cur.p = r->cur.end;
            continue;
        }
        r->refs++;
        am_run_call(aw, &c);
        r->refs--;
        n++;
    }
    /* Runs are released in order, once done. */
    am_run_t *r;
    while ((r = s->head) != NULL && !am_run_more(r) && r->refs == 0) {
        s->head = r->next;
        if (s->head == NULL) {
            s->tail = NULL;
            aw->recv.srcs_busy--;
        }
        if (r->has_msg)
            rv_msg_release(aw->w, &r->msg);
        free(r);
    }
    return n;
}

static void src_enqueue(am_worker_t *aw, am_src_t *s, am_run_t *r)
{
    r->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = r;
    } else {
        s->head = r;
        aw->recv.srcs_busy++;
    }
    s->tail = r;
}

/* A message's payload, kept: the message itself when the handler keeps
 * data, else a copy. */
static am_run_t *run_keep(rv_worker_t *w, rv_msg_t *msg, bool kept)
{
    am_run_t *r = calloc(1, sizeof(*r) + (kept ? 0 : msg->len));
    if (r == NULL)
        return NULL;
    if (kept) {
        r->has_msg = true;
        r->msg = *msg;
        r->cur.p = msg->data;
    } else {
        memcpy(r + 1, msg->data, msg->len);
        r->cur.p = (const uint8_t *)(r + 1);
    }
    r->cur.end = r->cur.p + msg->len;
    (void)w;
    return r;
}

/* Calls that reach a worker where am is not running: no worker of a job
 * sends to another before every worker has started am
 * (rv__layers_start), nor after the job's end has drained it, so this is
 * a defect, said rather than lost in silence (it once cost a hang with
 * nothing in the log). */
static rv_status_t not_running(rv_worker_t *w, rv_tid_t src, const char *what)
{
    static atomic_uint said;
    if (atomic_fetch_add(&said, 1) < 10)
        rv_warn("dropped %s from worker %u: am is not running on worker %u",
                what, src, rv_worker_tid(w));
    return RV_OK;
}

rv_status_t am_on_batch(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    (void)arg;
    if (aw == NULL)
        return not_running(w, msg->src, "a batch of calls");
    am_src_t *s = am_src(aw, msg->src);
    am_run_t *r = s ? run_keep(w, msg, true) : NULL;
    if (r == NULL) {
        rv_error("out of memory keeping a batch of calls from worker %u",
                 msg->src);
        return RV_OK;
    }
    src_enqueue(aw, s, r);
    am_src_drain(aw, s, msg->src);
    return RV_INPROGRESS;
}

/* A call over send whose turn has not come: a ring call that travelled
 * over send waits for its DETOUR record; others queue behind earlier
 * runs, or until the handlers on the stack return. Kept as a one-record
 * run. */
static void call_keep(am_worker_t *aw, am_src_t *s, const rv_msg_t *msg,
                      const am_hdr_t *hdr, rv_handler_id_t id)
{
    am_rec_t rec = {.handler = id,
                    .len = (uint32_t)(sizeof(am_hdr_t) + msg->len),
                    .meta = AM_REC_CALL | AM_REC_XHDR};
    size_t size = am_rec_size(rec.len);
    am_run_t *r = calloc(1, sizeof(*r) + size);
    if (r == NULL) {
        rv_error("out of memory keeping a call from worker %u", msg->src);
        return;
    }
    uint8_t *p = (uint8_t *)(r + 1);
    memcpy(p, &rec, sizeof(rec));
    memcpy(p + sizeof(rec), hdr, sizeof(*hdr));
    memcpy(p + sizeof(rec) + sizeof(*hdr), msg->data, msg->len);
    r->cur.p = p;
    r->cur.end = p + size;
    if (hdr->flags & AM_DETOUR) {
        r->detour = true;
        r->token = hdr->token;
        r->next = s->detours;
        s->detours = r;
    } else {
        src_enqueue(aw, s, r);
        am_src_drain(aw, s, msg->src);
    }
}

/* A call over send, the header in the message's header extension. */
rv_status_t am_trampoline(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    am_worker_t *aw = am_of(w);
    am_entry_t *e = arg;
    am_call_t c = {.src = msg->src, .handler = e->id};

    if (msg->xhdr_len != sizeof(am_hdr_t)) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped a call from worker %u with a %zu-byte call header",
                msg->src, msg->xhdr_len);
        return RV_OK;
    }
    memcpy(&c.hdr, msg->xhdr, sizeof(c.hdr));
    if (c.hdr.args_len > msg->len) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("dropped a call from worker %u announcing %u argument bytes "
                "in %zu",
                msg->src, c.hdr.args_len, msg->len);
        return RV_OK;
    }
    if (aw == NULL)
        return not_running(w, msg->src, "a call");
    am_src_t *s = am_src(aw, msg->src);
    if (s == NULL)
        return RV_OK;
    if ((c.hdr.flags & AM_DETOUR) || s->head != NULL || s->fetching ||
        !am_may_run(aw)) {
        call_keep(aw, s, msg, &c.hdr, e->id);
        return RV_OK;
    }
    c.args = msg->data;
    c.args_len = c.hdr.args_len;
    c.buf_len = msg->len - c.args_len;
    c.buf = c.buf_len ? (const uint8_t *)msg->data + c.args_len : NULL;
    am_run_call(aw, &c);
    return RV_OK;
}

/* The ring reached a DETOUR record: run the matching call if it came. */
bool am_src_detour_match(am_worker_t *aw, am_src_t *s, rv_tid_t src,
                         uint64_t token)
{
    am_run_t **pp = &s->detours;
    for (am_run_t *r = *pp; r != NULL; pp = &r->next, r = *pp) {
        if (r->token != token)
            continue;
        *pp = r->next;
        am_rec_t rec;
        am_call_t c;
        memcpy(&rec, r->cur.p, sizeof(rec));
        if (am_call_decode(&c, src, &rec, r->cur.p + sizeof(rec))) {
            c.hdr.flags &= ~(uint32_t)AM_DETOUR;
            am_run_call(aw, &c);
        }
        free(r);
        return true;
    }
    return false;
}
