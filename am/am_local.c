/*
 * The local bypass: calls between the threads of one process, a thread's
 * calls to itself included, through blocks of call records on a
 * wait-free queue per thread pair (see am_lblock_t).
 *
 * Sender: records are appended to the open block of the destination
 * thread with no atomics; the block is published (one wait-free enqueue)
 * when it is full, at the end of the sender's progress call, and on
 * rv_flush, so a call costs a function call and the copy of its
 * arguments, and a published block carries every call made since the
 * last one.
 *
 * Receiver: the block being run is kept per source thread, with its
 * cursor advanced before each call runs, so that a handler that
 * progresses continues the same block in order instead of overtaking it
 * with the next one (FIFO order of starting calls, as for every other
 * source). A block is freed once it is consumed and none of its calls
 * is still executing.
 */
#include <stdlib.h>
#include <string.h>

#include "am_cursor.h"

/* Bytes of a block: a few hundred small calls per published block. */
#define AM_LBLOCK_BYTES ((size_t)16 << 10)

static void local_publish(am_worker_t *aw, int dst)
{
    am_cursor_seal(aw, aw->first_local + (rv_tid_t)dst);
    am_lblock_t *b = aw->local.lout[dst];
    aw->local.lout[dst] = NULL;
    cds_wfcq_node_init(&b->node);
    am_lqueue_t *q = am_lqueue(aw, dst, rv_worker_local(aw->w));
    RV_TSAN_RELEASE(b);
    cds_wfcq_enqueue(&q->head, &q->tail, &b->node);
}

uint8_t *am_local_reserve_new(am_worker_t *aw, int dst, size_t size)
{
    if (aw->local.lout[dst] != NULL) {
        local_publish(aw, dst);
        /* A full block: the worker progresses once (am_stream_progress).
         * Its handlers' calls may open a block to @p dst meanwhile: the
         * call goes behind them. */
        am_stream_progress(aw);
        if (aw->local.lout[dst] != NULL)
            return am_local_reserve(aw, dst, size);
    }
    size_t cap = size > AM_LBLOCK_BYTES ? size : AM_LBLOCK_BYTES;
    am_lblock_t *b = cap == AM_LBLOCK_BYTES && aw->local.nlspare > 0
                         ? aw->local.lspare[--aw->local.nlspare]
                         : malloc(sizeof(*b) + cap);
    if (b == NULL)
        return NULL;
    b->tail = 0;
    b->cap = cap;
    b->run_at = SIZE_MAX;
    aw->local.lout[dst] = b;
    uint8_t *at = b->data + b->tail;
    b->tail += size;
    aw->local.lpending = true;
    return at;
}

bool am_local_call(am_worker_t *aw, int dst, const am_elem_t *e)
{
    /* Consecutive calls of one handler with the same argument (and
     * result) length share one record header (AM_REC_RUN, _RETRUN):
     * 8 bytes per 8-byte call. */
    size_t stride = am_elem_stride(e->kind, e->alen);
    am_cursor_seal(aw, aw->first_local + (rv_tid_t)dst);
    am_lblock_t *b = aw->local.lout[dst];
    if (b != NULL && b->run_at != SIZE_MAX && b->tail + stride <= b->cap) {
        am_rec_t rec;
        memcpy(&rec, b->data + b->run_at, sizeof(rec));
        if (am_elem_matches(&rec, e) &&
            b->run_at + sizeof(rec) + rec.len == b->tail) {
            am_elem_write(b->data + b->tail, e, stride);
            rec.len += (uint32_t)stride;
            memcpy(b->data + b->run_at, &rec, sizeof(rec));
            b->tail += stride;
            return true;
        }
    }
    uint8_t *at = am_local_reserve(aw, dst, sizeof(am_rec_t) + stride);
    if (at == NULL)
        return false;
    am_rec_t rec = am_elem_rec(e, stride);
    memcpy(at, &rec, sizeof(rec));
    am_elem_write(at + sizeof(rec), e, stride);
    b = aw->local.lout[dst];
    b->run_at = (size_t)(at - b->data);
    return true;
}

void am_local_flush(am_worker_t *aw)
{
    if (!aw->local.lpending)
        return;
    aw->local.lpending = false;
    for (int t = 0; t < aw->threads; t++)
        if (aw->local.lout[t] != NULL)
            local_publish(aw, t);
}

/* A consumed block: kept for this worker's next one (a worker receives
 * about as many blocks as it sends), so that blocks are not faulted in
 * afresh from the allocator. */
static void block_free(am_worker_t *aw, am_lblock_t *b)
{
    size_t most = sizeof(aw->local.lspare) / sizeof(aw->local.lspare[0]);
    if (b->cap == AM_LBLOCK_BYTES && aw->local.nlspare < most)
        aw->local.lspare[aw->local.nlspare++] = b;
    else
        free(b);
}

/* Runs the calls of source thread @p s's blocks; stops early at
 * am.max_nesting. */
static unsigned local_run(am_worker_t *aw, int s, am_lqueue_t *q)
{
    unsigned n = 0;
    rv_tid_t src = aw->first_local + (rv_tid_t)s;
    for (;;) {
        am_lblock_t *b = aw->local.lcur[s];
        if (b == NULL) {
            struct cds_wfcq_node *node =
                __cds_wfcq_dequeue_nonblocking(&q->head, &q->tail);
            if (node == NULL || node == CDS_WFCQ_WOULDBLOCK)
                return n;
            b = aw->local.lcur[s] = caa_container_of(node, am_lblock_t, node);
            RV_TSAN_ACQUIRE(b);
            b->run = (am_run_t){
                .cur = {.p = b->data, .end = b->data + b->tail, .local = true}};
        }
        am_call_t c;
        int k = 0;
        while (am_may_run(aw)) {
            unsigned plain =
                am_run_in_plain(&b->run) ? am_run_plain(aw, &b->run, src) : 0;
            n += plain;
            if (plain > 0)
                continue;
            if ((k = am_run_next(&b->run, src, 0, &c)) != 0)
                break;
            b->run.refs++;
            am_run_call(aw, &c);
            b->run.refs--;
            n++;
        }
        if (k < 0) {
            rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
            rv_warn("dropped the rest of a malformed block of local calls "
                    "from worker %u",
                    src);
            b->run.cur.p = b->run.cur.end;
        }
        if (am_run_more(&b->run))
            return n; /* at am.max_nesting */
        /* Consumed. A frame further out that still runs one of its calls
         * frees it when that call returns (it finds it consumed and no
         * longer current). */
        if (aw->local.lcur[s] == b)
            aw->local.lcur[s] = NULL;
        if (b->run.refs == 0)
            block_free(aw, b);
    }
}

unsigned am_local_poll(am_worker_t *aw)
{
    unsigned n = 0;
    int me = rv_worker_local(aw->w);
    for (int s = 0; s < aw->threads && am_may_run(aw); s++)
        n += local_run(aw, s, am_lqueue(aw, me, s));
    am_owed_flush(aw);
    return n;
}

void am_local_fini(am_worker_t *aw)
{
    for (int t = 0; aw->local.lout != NULL && t < aw->threads; t++)
        free(aw->local.lout[t]);
    for (int t = 0; aw->local.lcur != NULL && t < aw->threads; t++)
        free(aw->local.lcur[t]);
    while (aw->local.nlspare > 0)
        free(aw->local.lspare[--aw->local.nlspare]);
}

void am_local_drop(am_proc_t *proc)
{
    /* Calls still queued locally at the end are dropped with the job. */
    for (int i = 0; i < proc->threads * proc->threads; i++) {
        struct cds_wfcq_node *node;
        am_lqueue_t *q = &proc->queues[i];
        while ((node = __cds_wfcq_dequeue_nonblocking(&q->head, &q->tail)) !=
                   NULL &&
               node != CDS_WFCQ_WOULDBLOCK)
            free(caa_container_of(node, am_lblock_t, node));
    }
}
