/*
 * The table of calls to other processes awaiting their answers
 * (am_pend.c), on the path of every call answered by rivet.am.done.
 */
#ifndef RIVET_AM_PEND_H
#define RIVET_AM_PEND_H

#include "am_internal.h"

/* am_pend.c, the table of calls to other processes awaiting answers.
 * am_pend_add: the token naming a new pending call to @p dest
 * (RV_TID_ALL: answered by any worker) awaiting @p answers answers, each
 * completing @p sync once and writing at most @p ret_len bytes to @p ret;
 * 0 when out of memory. am_pend_answer: takes an answer from @p src to
 * call @p token, writing its result; the synchronizer to complete once,
 * or NULL when the answer names no call awaiting it from @p src (dropped,
 * counted, logged once per source: am_pend_refuse). Both are inline: they
 * are on the path of each rv_call_return to another process (Bale's
 * index-gather). */
uint64_t am_pend_add_slow(am_worker_t *aw, rv_sync_t *sync, void *ret,
                          uint32_t ret_len, rv_tid_t dest, long answers);
rv_sync_t *am_pend_refuse(am_worker_t *aw, rv_tid_t src, uint64_t token,
                          uint32_t ret_len);
/* Frees the slot of a call that was not sent after all. */
void am_pend_cancel(am_worker_t *aw, uint64_t token);

static inline uint64_t am_pend_add(am_worker_t *aw, rv_sync_t *sync, void *ret,
                                   uint32_t ret_len, rv_tid_t dest,
                                   long answers)
{
    uint32_t i = aw->send.pend_free;
    if (i == UINT32_MAX)
        return am_pend_add_slow(aw, sync, ret, ret_len, dest, answers);
    am_pend_t *p = &aw->send.pend[i];
    aw->send.pend_free = p->next;
    *p = (am_pend_t){.sync = sync,
                     .ret = ret,
                     .ret_len = ret_len,
                     .gen = p->gen,
                     .dest = dest,
                     .next = UINT32_MAX,
                     .answers = answers};
    return (uint64_t)p->gen << 32 | i;
}

static inline rv_sync_t *am_pend_answer(am_worker_t *aw, rv_tid_t src,
                                        uint64_t token, uint32_t ret_len,
                                        const void *result)
{
    uint32_t i = (uint32_t)token;
    if (i >= aw->send.npend)
        return am_pend_refuse(aw, src, token, ret_len);
    am_pend_t *p = &aw->send.pend[i];
    if (p->answers <= 0 || p->gen != (uint32_t)(token >> 32) ||
        (p->dest != src && p->dest != RV_TID_ALL) || ret_len > p->ret_len)
        return am_pend_refuse(aw, src, token, ret_len);
    if (ret_len == 8)
        memcpy(p->ret, result, 8);
    else if (ret_len > 0 && p->ret != NULL)
        memcpy(p->ret, result, ret_len);
    rv_sync_t *sync = p->sync;
    if (--p->answers == 0) {
        p->gen++;
        p->next = aw->send.pend_free;
        aw->send.pend_free = i;
    }
    return sync;
}

void am_pend_fini(am_worker_t *aw);

#endif
