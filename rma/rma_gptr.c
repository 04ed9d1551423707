/*
 * ABA-counted atomic objects: one double-width compare-swap on local
 * memory; on another process's memory, that CAS run there by a worker as
 * a call (a 16-byte atomic is no network operation).
 */
#include <inttypes.h>
#include <string.h>

#include "rma_internal.h"
#include "rv_gptr.h"

__extension__ typedef unsigned __int128 u128_t;

static rv_handler_id_t aba_id;

static inline u128_t pack(rv_gptr_aba_t v)
{
    return (u128_t)v.count << 64 | v.ptr;
}

static inline rv_gptr_aba_t unpack(u128_t x)
{
    return (rv_gptr_aba_t){.ptr = (uint64_t)x, .count = (uint64_t)(x >> 64)};
}

/* One 16-byte CAS: inline cmpxchg16b on x86-64 (every x86-64 CPU since
 * 2006 has it), libatomic elsewhere (casp on AArch64 LSE). Returns what
 * *obj held. */
#if defined(__x86_64__)
__attribute__((target("cx16")))
#endif
static inline u128_t
cas16(rv_gptr_aba_t *obj, u128_t expect, u128_t val)
{
    u128_t *p = (u128_t *)(void *)obj;
#if defined(__x86_64__)
    return __sync_val_compare_and_swap(p, expect, val);
#else
    __atomic_compare_exchange_n(p, &expect, val, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expect;
#endif
}

rv_gptr_aba_t rv_gptr_aba_load(rv_gptr_aba_t *obj)
{
    /* a CAS that writes back what it found: the only atomic 16-byte
     * read x86-64 has */
    return unpack(cas16(obj, 0, 0));
}

bool rv_gptr_aba_cswap_local(rv_gptr_aba_t *obj, rv_gptr_aba_t expect,
                             rv_gptr_t val, rv_gptr_aba_t *seen)
{
    rv_gptr_aba_t want = {.ptr = val, .count = expect.count + 1};
    u128_t old = cas16(obj, pack(expect), pack(want));
    if (seen != NULL)
        *seen = unpack(old);
    return old == pack(expect);
}

rv_gptr_aba_t rv_gptr_aba_exchange_local(rv_gptr_aba_t *obj, rv_gptr_t val)
{
    rv_gptr_aba_t cur = rv_gptr_aba_load(obj);
    while (!rv_gptr_aba_cswap_local(obj, cur, val, &cur))
        ;
    return cur;
}

/* ---------------------------------------------------------------------- */

enum { ABA_READ, ABA_CSWAP, ABA_EXCHANGE };

typedef struct {
    uint64_t addr;
    uint32_t op;
    uint32_t reserved;
    rv_gptr_aba_t expect;
    uint64_t val;
} aba_args_t;

typedef struct {
    rv_gptr_aba_t seen;
    uint64_t ok;
} aba_ret_t;

static aba_ret_t aba_apply(rv_gptr_aba_t *obj, uint32_t op,
                           rv_gptr_aba_t expect, rv_gptr_t val)
{
    aba_ret_t r = {.ok = 1};
    switch (op) {
    case ABA_READ:
        r.seen = rv_gptr_aba_load(obj);
        break;
    case ABA_CSWAP:
        r.ok = rv_gptr_aba_cswap_local(obj, expect, val, &r.seen);
        break;
    default:
        r.seen = rv_gptr_aba_exchange_local(obj, val);
        break;
    }
    return r;
}

/* The owner's answer to a call it refuses: ok = UINT64_MAX, which no
 * operation returns, since the result buffer reaches the caller whatever
 * the handler returned. */
static rv_status_t aba_refuse(rv_call_t *call)
{
    if (call->ret_len >= sizeof(aba_ret_t)) {
        aba_ret_t r = {.ok = UINT64_MAX};
        memcpy(call->ret, &r, sizeof(r));
        call->ret_len = sizeof(r);
    }
    return RV_ERR_INVALID;
}

static rv_status_t on_aba(rv_worker_t *w, rv_call_t *call, void *arg)
{
    aba_args_t a;
    (void)arg;
    if (call->args_len != sizeof(a) || call->ret_len < sizeof(aba_ret_t))
        return aba_refuse(call);
    memcpy(&a, call->args, sizeof(a));
    if (a.addr % 16 != 0 || a.op > ABA_EXCHANGE)
        return aba_refuse(call);
    /* The object is named by an address from the wire: only one in
     * registered memory of this process is touched. */
    rma_worker_t *rw = rma_of(w);
    if (rw == NULL ||
        !rma_region_holds(rw->proc, a.addr, sizeof(rv_gptr_aba_t))) {
        rv_worker_count_drop(w, RV_DROP_MALFORMED);
        rv_warn("refused an ABA operation from worker %u on 0x%" PRIx64
                ", which is not in registered memory of this process",
                call->src, a.addr);
        return aba_refuse(call);
    }
    aba_ret_t r =
        aba_apply((rv_gptr_aba_t *)(uintptr_t)a.addr, a.op, a.expect, a.val);
    memcpy(call->ret, &r, sizeof(r));
    call->ret_len = sizeof(r);
    return RV_OK;
}

rv_status_t rma_gptr_register(rv_context_t *ctx)
{
    return rv_am_register(ctx, "rivet.rma.aba", on_aba, NULL, &aba_id);
}

static rv_status_t aba_op(rv_worker_t *w, rv_rptr_t obj, uint32_t op,
                          rv_gptr_aba_t expect, rv_gptr_t val, aba_ret_t *r)
{
    if (obj.addr % 16 != 0)
        return RV_ERR_INVALID;
    rv_context_t *ctx = rv_worker_context(w);
    if ((int)obj.rank == rv_rank(ctx)) {
        *r = aba_apply((rv_gptr_aba_t *)(uintptr_t)obj.addr, op, expect, val);
        return RV_OK;
    }
    if (aba_id == 0)
        return RV_ERR_INVALID;
    aba_args_t a = {.addr = obj.addr, .op = op, .expect = expect, .val = val};
    r->ok = UINT64_MAX;
    rv_status_t st =
        rv_call_return(w, rv_tid_make(ctx, (int)obj.rank, rv_worker_local(w)),
                       aba_id, &a, sizeof(a), r, sizeof(*r), NULL, 0);
    if (st == RV_OK && r->ok == UINT64_MAX)
        st = RV_ERR_INVALID; /* the owner refused it (logged there) */
    return st;
}

rv_status_t rv_gptr_aba_cswap(rv_worker_t *w, rv_rptr_t obj,
                              rv_gptr_aba_t expect, rv_gptr_t val, bool *ok,
                              rv_gptr_aba_t *seen)
{
    aba_ret_t r;
    rv_status_t st = aba_op(w, obj, ABA_CSWAP, expect, val, &r);
    *ok = st == RV_OK && r.ok;
    if (st == RV_OK && seen != NULL)
        *seen = r.seen;
    return st;
}

rv_status_t rv_gptr_aba_read(rv_worker_t *w, rv_rptr_t obj, rv_gptr_aba_t *val)
{
    aba_ret_t r;
    rv_status_t st = aba_op(w, obj, ABA_READ, (rv_gptr_aba_t){0}, 0, &r);
    if (st == RV_OK)
        *val = r.seen;
    return st;
}

rv_status_t rv_gptr_aba_exchange(rv_worker_t *w, rv_rptr_t obj, rv_gptr_t val,
                                 rv_gptr_aba_t *old)
{
    aba_ret_t r;
    rv_status_t st = aba_op(w, obj, ABA_EXCHANGE, (rv_gptr_aba_t){0}, val, &r);
    if (st == RV_OK && old != NULL)
        *old = r.seen;
    return st;
}
