/*
 * The target side of RMA emulated over active messages: the registry of
 * the memory peers may access, and the requests that arrive (puts, gets,
 * atomics, flushes), executed by the target worker's progress in their
 * turn, fences included. ucx_emu.c has the protocol and the initiator.
 *
 * Nothing read from the wire is used unchecked: every access is checked
 * against the region its remote key names, and one outside it is dropped
 * (a put) or refused with an error reply (a get or an atomic), so that the
 * initiator's operation ends.
 */
#include <stdlib.h>
#include <string.h>

#include "ucx_emu.h"

/* ---------------------------------------------------------------------- */
/* Region registry (target side)                                           */

rv_status_t rv_ucx_region_add(rv_transport_t *tp, uint64_t base, uint64_t len,
                              uint32_t *id_p)
{
    rv_status_t status = RV_OK;
    pthread_rwlock_wrlock(&tp->regions_lock);
    uint32_t id = 0;
    while (id < tp->nregions && tp->regions[id].live)
        id++;
    if (id == tp->regions_cap) {
        uint32_t cap = tp->regions_cap ? 2 * tp->regions_cap : 64;
        void *p = realloc(tp->regions, cap * sizeof(*tp->regions));
        if (p == NULL) {
            status = RV_ERR_NO_MEMORY;
            goto out;
        }
        tp->regions = p;
        tp->regions_cap = cap;
    }
    tp->regions[id] = (ucx_region_t){.base = base, .len = len, .live = true};
    if (id == tp->nregions)
        tp->nregions++;
    *id_p = id;
out:
    pthread_rwlock_unlock(&tp->regions_lock);
    return status;
}

void rv_ucx_region_remove(rv_transport_t *tp, uint32_t id)
{
    pthread_rwlock_wrlock(&tp->regions_lock);
    if (id < tp->nregions)
        tp->regions[id].live = false;
    pthread_rwlock_unlock(&tp->regions_lock);
}

/* Is [addr, addr + len) inside live region @p id? */
static bool region_check(rv_transport_t *tp, uint32_t id, uint64_t addr,
                         uint64_t len)
{
    bool ok = false;
    pthread_rwlock_rdlock(&tp->regions_lock);
    if (id < tp->nregions && tp->regions[id].live) {
        const ucx_region_t *r = &tp->regions[id];
        ok = addr >= r->base && len <= r->len && addr - r->base <= r->len - len;
    }
    pthread_rwlock_unlock(&tp->regions_lock);
    return ok;
}

/* ---------------------------------------------------------------------- */
/* Target side and replies (the RV_UCX_AM_RMA handler)                     */

/* A rendezvous put is landing: the initiator's flushes wait for it. */
typedef struct {
    struct rv_tworker *tw;
    uint32_t src;
} put_landing_t;

static void answer_flushes(struct rv_tworker *tw, uint32_t src)
{
    while (tw->emu_puts_landing[src] == 0 && tw->emu_flush_waiting[src]) {
        ucx_flush_wait_t *fw = tw->emu_flush_waiting[src];
        tw->emu_flush_waiting[src] = fw->next;
        emu_hdr_t req = {.src = src, .cookie = fw->cookie};
        rv_ucx_emu_reply(tw, &req, EMU_FLUSH_REP, RV_OK, NULL, 0);
        free(fw);
    }
}

static void run_deferred(struct rv_tworker *tw, uint32_t src);

static void put_landed(void *request, ucs_status_t status, size_t length,
                       void *user_data)
{
    put_landing_t *pl = user_data;
    (void)length;
    if (request != NULL)
        ucp_request_free(request);
    if (status != UCS_OK)
        rv_error("an emulated put from worker %u failed to land: %s", pl->src,
                 ucs_status_string(status));
    pl->tw->emu_puts_landing[pl->src]--;
    run_deferred(pl->tw, pl->src);
    answer_flushes(pl->tw, pl->src);
    free(pl);
}

/* Receives rendezvous data of @p len bytes into @p dst. */
void rv_ucx_emu_recv_into(struct rv_tworker *tw, void *desc, void *dst,
                          size_t len, ucp_am_recv_data_nbx_callback_t cb,
                          void *arg)
{
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = cb,
        .user_data = arg,
    };
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(tw->worker, desc, dst, len, &p);
    if (UCS_PTR_IS_ERR(r))
        cb(NULL, UCS_PTR_STATUS(r), 0, arg);
    else if (r == NULL)
        cb(NULL, UCS_OK, len, arg);
}

static ucs_status_t on_put(struct rv_tworker *tw, const emu_hdr_t *h,
                           void *data, size_t length, bool rndv)
{
    if (length != h->len) {
        rv_ucx_emu_drop(
            tw, RV_UCX_DROP_MALFORMED, h->src,
            "an emulated put from worker %u announcing %llu bytes and "
            "carrying %zu",
            h->src, (unsigned long long)h->len, length);
        return UCS_OK; /* UCX drops rendezvous data not received */
    }
    if (!region_check(tw->tp, h->region, h->raddr, h->len)) {
        rv_ucx_emu_drop(
            tw, RV_UCX_DROP_OUTSIDE, h->src,
            "an emulated put of %zu bytes at 0x%llx (region %u) from "
            "worker %u: outside the registered memory of its remote key",
            length, (unsigned long long)h->raddr, h->region, h->src);
        return UCS_OK;
    }
    if (!rndv) {
        memcpy((void *)(uintptr_t)h->raddr, data, length);
        return UCS_OK;
    }
    put_landing_t *pl = malloc(sizeof(*pl));
    if (pl == NULL)
        return UCS_ERR_NO_MEMORY;
    pl->tw = tw;
    pl->src = h->src;
    tw->emu_puts_landing[h->src]++;
    rv_ucx_emu_recv_into(tw, data, (void *)(uintptr_t)h->raddr, length,
                         put_landed, pl);
    return UCS_INPROGRESS;
}

static void on_amo(struct rv_tworker *tw, const emu_hdr_t *h)
{
    if (h->amo != EMU_AMO_FADD && h->amo != EMU_AMO_CSWAP) {
        rv_ucx_emu_drop(tw, RV_UCX_DROP_MALFORMED, h->src,
                        "an emulated atomic of unknown kind %u from worker %u",
                        h->amo, h->src);
        rv_ucx_emu_reply(tw, h, EMU_AMO_REP, RV_ERR_INVALID, NULL, 0);
        return;
    }
    if (!region_check(tw->tp, h->region, h->raddr, sizeof(uint64_t)) ||
        h->raddr % sizeof(uint64_t) != 0) {
        rv_ucx_emu_drop(
            tw, RV_UCX_DROP_OUTSIDE, h->src,
            "an emulated atomic at 0x%llx (region %u) from worker %u: "
            "unaligned or outside registered memory",
            (unsigned long long)h->raddr, h->region, h->src);
        rv_ucx_emu_reply(tw, h, EMU_AMO_REP, RV_ERR_INVALID, NULL, 0);
        return;
    }
    uint64_t *p = (uint64_t *)(uintptr_t)h->raddr, old;
    if (h->amo == EMU_AMO_FADD) {
        old = __atomic_fetch_add(p, h->v1, __ATOMIC_SEQ_CST);
    } else {
        old = h->v1;
        __atomic_compare_exchange_n(p, &old, h->v2, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST);
    }
    emu_hdr_t rep = *h;
    rep.v1 = old;
    rv_ucx_emu_reply(tw, &rep, EMU_AMO_REP, RV_OK, NULL, 0);
}

/* An operation on this worker's memory, in its turn. */
static ucs_status_t target_op(struct rv_tworker *tw, const emu_hdr_t *h,
                              void *data, size_t length, bool rndv)
{
    switch (h->op) {
    case EMU_PUT:
        return on_put(tw, h, data, length, rndv);
    case EMU_GET_REQ:
        if (!region_check(tw->tp, h->region, h->raddr, h->len)) {
            rv_ucx_emu_drop(
                tw, RV_UCX_DROP_OUTSIDE, h->src,
                "an emulated get of %llu bytes at 0x%llx (region %u) "
                "from worker %u: outside registered memory",
                (unsigned long long)h->len, (unsigned long long)h->raddr,
                h->region, h->src);
            rv_ucx_emu_reply(tw, h, EMU_GET_REP, RV_ERR_INVALID, NULL, 0);
        } else {
            rv_ucx_emu_reply(tw, h, EMU_GET_REP, RV_OK,
                             (const void *)(uintptr_t)h->raddr, h->len);
        }
        return UCS_OK;
    case EMU_AMO_REQ:
        on_amo(tw, h);
        return UCS_OK;
    case EMU_FLUSH_REQ: {
        ucx_flush_wait_t *fw = malloc(sizeof(*fw));
        if (fw == NULL) { /* the initiator learns it: no silent loss */
            rv_error("out of memory answering a flush of worker %u", h->src);
            rv_ucx_emu_reply(tw, h, EMU_FLUSH_REP, RV_ERR_NO_MEMORY, NULL, 0);
            return UCS_OK;
        }
        fw->cookie = h->cookie;
        fw->next = NULL;
        ucx_flush_wait_t **tail = &tw->emu_flush_waiting[h->src];
        while (*tail != NULL)
            tail = &(*tail)->next;
        *tail = fw;
        answer_flushes(tw, h->src);
        return UCS_OK;
    }
    default:
        return UCS_OK;
    }
}

/* Holds an operation behind a fence (see the file comment). */
static ucs_status_t defer(struct rv_tworker *tw, const emu_hdr_t *h, void *data,
                          size_t length, bool rndv)
{
    ucx_emu_deferred_t *d =
        malloc(sizeof(*d) + sizeof(*h) + (rndv ? 0 : length));
    if (d == NULL) {
        rv_error("out of memory holding an emulated RMA operation from "
                 "worker %u behind a fence",
                 h->src);
        return UCS_OK;
    }
    d->next = NULL;
    d->length = length;
    d->rndv = rndv;
    memcpy(d->hdr, h, sizeof(*h));
    if (rndv) {
        d->data = data; /* received when its turn comes */
    } else {
        d->data = d->hdr + sizeof(*h);
        memcpy(d->data, data, length);
    }
    if (tw->emu_deferred[h->src] == NULL)
        tw->emu_deferred[h->src] = d;
    else
        tw->emu_deferred_tail[h->src]->next = d;
    tw->emu_deferred_tail[h->src] = d;
    return rndv ? UCS_INPROGRESS : UCS_OK;
}

/* Runs the operations held behind a fence from @p src whose turn came. */
static void run_deferred(struct rv_tworker *tw, uint32_t src)
{
    ucx_emu_deferred_t *d;
    while ((d = tw->emu_deferred[src]) != NULL) {
        emu_hdr_t h;
        memcpy(&h, d->hdr, sizeof(h));
        if ((h.flags & EMU_FENCED) && tw->emu_puts_landing[src] > 0)
            return;
        tw->emu_deferred[src] = d->next;
        /* A held rendezvous put that is dropped now has its data released
         * here: UCX kept it for us (UCS_INPROGRESS when it was held). */
        if (target_op(tw, &h, d->data, d->length, d->rndv) != UCS_INPROGRESS &&
            d->rndv)
            ucp_am_data_release(tw->worker, d->data);
        free(d);
    }
}

/* A request from worker h->src: run now, or held behind a fence or
 * behind operations already held (see ucx_emu.c's file comment). */
ucs_status_t rv_ucx_emu_on_request(struct rv_tworker *tw, const emu_hdr_t *h,
                                   void *data, size_t length, bool rndv)
{
    if (((h->flags & EMU_FENCED) && tw->emu_puts_landing[h->src] > 0) ||
        tw->emu_deferred[h->src] != NULL)
        return defer(tw, h, data, length, rndv);
    return target_op(tw, h, data, length, rndv);
}
