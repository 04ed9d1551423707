/*
 * Calls to other processes that await their completion (rivet.am.done):
 * a table of pending calls per worker, each named on the wire by a token,
 * its slot's index and generation, never by the caller's pointers.
 *
 * A call made with a synchronizer or a result buffer is answered by its
 * target with what the call carried. Carrying the caller's rv_sync_t and
 * result addresses (as the local bypass still does, within one process)
 * let any peer write its bytes at any address of the caller and
 * "complete" any memory as a synchronizer with a forged or repeated
 * answer. A token instead names a slot that holds the synchronizer, the
 * result buffer and its length, the worker the call went to and how many
 * answers it still awaits (a broadcast's, one per worker); an answer is
 * taken only from that worker (any worker for a broadcast), for a slot in
 * use with the same generation, with a result no longer than the buffer.
 * Anything else is dropped and counted (RV_DROP_MALFORMED), and logged
 * once per source. The same scheme as the UCX plugin's emulated RMA.
 *
 * The table belongs to the worker: answers run as RV_HANDLER_INLINE
 * handlers on the worker's own thread, as the calls are made there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_pend.h"

/* A slot that is free: its next free slot, or AM_PEND_NONE. */
#define AM_PEND_NONE UINT32_MAX
#define AM_PEND_FIRST 256u

static bool pend_grow(am_worker_t *aw)
{
    uint32_t cap = aw->send.npend ? 2 * aw->send.npend : AM_PEND_FIRST;
    if (cap <= aw->send.npend)
        return false; /* 2^32 calls in flight */
    am_pend_t *grown = realloc(aw->send.pend, cap * sizeof(*grown));
    if (grown == NULL)
        return false;
    for (uint32_t i = aw->send.npend; i < cap; i++)
        grown[i] = (am_pend_t){
            .gen = 1, .next = i + 1 < cap ? i + 1 : aw->send.pend_free};
    aw->send.pend_free = aw->send.npend;
    aw->send.pend = grown;
    aw->send.npend = cap;
    return true;
}

uint64_t am_pend_add_slow(am_worker_t *aw, rv_sync_t *sync, void *ret,
                          uint32_t ret_len, rv_tid_t dest, long answers)
{
    if (!pend_grow(aw))
        return 0;
    return am_pend_add(aw, sync, ret, ret_len, dest, answers);
}

void am_pend_cancel(am_worker_t *aw, uint64_t token)
{
    uint32_t i = (uint32_t)token;
    if (token == 0 || i >= aw->send.npend)
        return;
    am_pend_t *p = &aw->send.pend[i];
    p->answers = 0;
    p->gen++;
    p->next = aw->send.pend_free;
    aw->send.pend_free = i;
}

/* Counts and logs (once per source) an answer that names no call of
 * this worker awaiting it from @p src. */
static void pend_refused(am_worker_t *aw, rv_tid_t src, uint64_t token,
                         const char *why)
{
    rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
    am_src_t *s = src < aw->nworkers ? am_src(aw, src) : NULL;
    if (s == NULL || !s->warned_answer) {
        rv_warn("dropped a call completion from worker %u naming call "
                "0x%016llx: %s; later ones are counted in job.stats only",
                src, (unsigned long long)token, why);
        if (s != NULL)
            s->warned_answer = true;
    }
}

rv_sync_t *am_pend_refuse(am_worker_t *aw, rv_tid_t src, uint64_t token,
                          uint32_t ret_len)
{
    uint32_t i = (uint32_t)token;
    const am_pend_t *p = i < aw->send.npend ? &aw->send.pend[i] : NULL;
    const char *why;
    if (p == NULL || p->answers <= 0 || p->gen != (uint32_t)(token >> 32))
        why = "no such call awaits an answer (forged, stale or repeated)";
    else if (p->dest != RV_TID_ALL && p->dest != src)
        why = "the call went to another worker";
    else if (ret_len > p->ret_len)
        why = "its result is longer than the caller's buffer";
    else
        return NULL; /* not reached: am_pend_answer refused it */
    pend_refused(aw, src, token, why);
    return NULL;
}

void am_pend_fini(am_worker_t *aw)
{
    free(aw->send.pend);
    aw->send.pend = NULL;
    aw->send.npend = 0;
    aw->send.pend_free = AM_PEND_NONE;
}
