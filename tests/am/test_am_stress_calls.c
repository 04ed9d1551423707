/*
 * The calls of the invocation layer's stress test (am_stress.h): sizes,
 * kinds and payloads derived from (source, destination, sequence number),
 * the receiver that checks them, and the sender that makes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "am_stress.h"

/* ---------------------------------------------------------------------- */
/* Calls: sizes, kinds and payloads derived from (source, dest, seq)       */

#define POOL_SLOTS 8

typedef struct {
    uint32_t src;
    uint32_t kind;      /* CALL_ARGS: payload after these args; CALL_BUF */
    uint64_t seq;
    uint64_t len;       /* payload bytes */
    uint64_t sum;       /* checksum of the payload */
} stress_args_t;

enum { CALL_ARGS = 0, CALL_BUF = 1, CALL_ROUTED = 2 /* flag: by am.routing */ };

/* Arguments and payload, contiguous: an args-only call sends both. */
struct slot {
    stress_args_t a;
    uint8_t payload[SLOT_PAYLOAD];
};

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t call_rand(uint32_t src, uint32_t dst, uint64_t seq)
{
    return mix64(SEED ^ mix64((((uint64_t)src << 32) | dst) ^ mix64(seq)));
}

typedef struct {
    size_t len;
    uint32_t kind;
    bool sync, notify;
} plan_t;

static plan_t plan_of(uint32_t src, uint32_t dst, uint64_t seq)
{
    uint64_t r = call_rand(src, dst, seq);
    plan_t p;
    if (prof.max_log > 0) {
        unsigned e = (unsigned)(r % (prof.max_log + 1));
        p.len = (size_t)((r >> 8) % ((1ull << e) + 1));
    } else {
        p.len = (size_t)((r >> 8) % (prof.max_size + 1));
    }
    p.kind = (r >> 48) & 1 ? CALL_BUF : CALL_ARGS;
    p.sync = prof.sync_kinds && ((r >> 49) & 1);
    p.notify = p.sync && ((r >> 50) & 1);
    return p;
}

/* Whether am.routing sends a call by its hops: rv_call's with neither
 * synchronizer nor flags, arguments of 256 bytes at most (rv_am.h). */
static bool routed(const plan_t *p, const rv_sync_t *sync, size_t args_len)
{
    return cfg->routing != RV_ROUTE_DIRECT && p->kind == CALL_ARGS &&
           sync == NULL && args_len <= 256;
}

static void fill(uint8_t *p, size_t n, uint32_t src, uint64_t seq)
{
    uint64_t base = mix64(((uint64_t)src << 40) ^ seq);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = mix64(base + i);
        memcpy(p + i, &v, 8);
    }
    uint64_t v = mix64(base + i);
    memcpy(p + i, &v, n - i);
}

static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = (h ^ v) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
/* ---------------------------------------------------------------------- */
/* Receiver                                                                */

rv_status_t on_data(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    uint32_t me = rv_worker_tid(w), n = rv_nworkers(ctx);
    stress_args_t a;
    (void)arg;
    if (call->args_len < sizeof(a) || call->src >= n) {
        FAIL("worker %u: a call from %u with %zu argument bytes", me,
             call->src, call->args_len);
        return RV_OK;
    }
    memcpy(&a, call->args, sizeof(a));
    EXPECT(a.src == call->src, "call from %u claims to be from %u",
           call->src, a.src);
    EXPECT(!call->broadcast && call->ret == NULL,
           "a plain call seen as broadcast or with a result");
    uint32_t src = call->src;
    s->rep.got[src]++;
    atomic_fetch_add_explicit(&s->calls_in, 1, memory_order_relaxed);
    s->rep.bytes_got += call->args_len + call->buf_len;
    bool by_hops = a.kind & CALL_ROUTED;
    a.kind &= ~(uint32_t)CALL_ROUTED;
    uint64_t *next = by_hops ? &s->next_routed[src] : &s->next[src];
    if (cfg->routing == RV_ROUTE_DIRECT ? a.seq != *next : a.seq < *next)
        FAIL("worker %u: call %llu from %u ran when %s%llu was expected", me,
             (unsigned long long)a.seq, src,
             cfg->routing == RV_ROUTE_DIRECT ? "" : "at least ",
             (unsigned long long)*next);
    *next = a.seq + 1;

    plan_t p = plan_of(src, me, a.seq);
    const uint8_t *data;
    size_t len;
    if (a.kind == CALL_ARGS) {
        data = (const uint8_t *)call->args + sizeof(a);
        len = call->args_len - sizeof(a);
        EXPECT(call->buf_len == 0, "args-only call %llu from %u has a "
               "%zu-byte buffer", (unsigned long long)a.seq, src,
               call->buf_len);
    } else {
        data = call->buf;
        len = call->buf_len;
        EXPECT(call->args_len == sizeof(a), "call %llu from %u: %zu "
               "argument bytes", (unsigned long long)a.seq, src,
               call->args_len);
    }
    if (a.kind != p.kind || a.len != p.len || len != p.len) {
        FAIL("worker %u: call %llu from %u: kind %u, %zu payload bytes "
             "(announced %llu), expected kind %u, %zu bytes", me,
             (unsigned long long)a.seq, src, a.kind, len,
             (unsigned long long)a.len, p.kind, p.len);
        return RV_OK;
    }
    if (checksum(data, len) != a.sum)
        FAIL("worker %u: call %llu from %u: the %zu payload bytes do not "
             "match their checksum", me, (unsigned long long)a.seq, src, len);
    return RV_OK;
}

rv_status_t on_end(rv_worker_t *w, rv_call_t *call, void *arg)
{
    wstate_t *s = state_of(w);
    uint64_t count;
    (void)arg;
    EXPECT(call->args_len == sizeof(count), "end marker of %zu bytes",
           call->args_len);
    memcpy(&count, call->args, sizeof(count));
    /* Routed, the marker may pass the calls that went direct: the
     * receiver then waits for them (sleep_then_drain). */
    s->end_at[call->src] = count;
    EXPECT(s->rep.got[call->src] == count ||
               (cfg->routing != RV_ROUTE_DIRECT &&
                s->rep.got[call->src] < count),
           "worker %u: the end marker of %u came after %llu of its %llu "
           "accepted calls", rv_worker_tid(w), call->src,
           (unsigned long long)s->rep.got[call->src],
           (unsigned long long)count);
    s->rep.ends++;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Sender                                                                  */


bool sender_init(sender_t *snd)
{
    snd->scratch = malloc(sizeof(slot_t));
    snd->pool = malloc(POOL_SLOTS * sizeof(slot_t));
    snd->pool_next = 0;
    rv_sync_init(&snd->shared, 0);
    if (snd->scratch == NULL || snd->pool == NULL) {
        FAIL("out of memory");
        return false;
    }
    return true;
}

void sender_fini(rv_worker_t *w, sender_t *snd)
{
    EXPECT(rv_sync_wait(w, &snd->shared) == RV_OK, "shared synchronizer");
    free(snd->scratch);
    free(snd->pool);
}

rv_status_t send_call(rv_worker_t *w, sender_t *snd, rv_tid_t dest,
                      bool retry, bool plain)
{
    wstate_t *s = state_of(w);
    uint32_t me = rv_worker_tid(w);
    uint64_t seq = s->rep.sent[dest];
    plan_t p = plan_of(me, dest, seq);
    if (plain)
        p.sync = p.notify = false;
    slot_t *slot = snd->scratch;
    rv_sync_t *sync = NULL;

    if (p.sync) {
        /* the pool's slots are reused once all their calls completed */
        if (snd->pool_next == POOL_SLOTS) {
            EXPECT(rv_sync_wait(w, &snd->shared) == RV_OK,
                   "shared synchronizer");
            snd->pool_next = 0;
        }
        slot = &snd->pool[snd->pool_next];
        sync = &snd->shared;
    }
    slot->a = (stress_args_t){.src = me, .kind = p.kind, .seq = seq,
                              .len = p.len};
    if (routed(&p, sync, sizeof(slot->a) + p.len))
        slot->a.kind |= CALL_ROUTED;
    fill(slot->payload, p.len, me, seq);
    slot->a.sum = checksum(slot->payload, p.len);
    unsigned flags = p.notify ? RV_NOTIFY_CONSUMED : 0;

    double t0 = now_s();
    rv_status_t st;
    for (;;) {
        long before = atomic_load(&snd->shared.pending);
        if (p.kind == CALL_ARGS)
            st = rv_call(w, dest, H.data, &slot->a, sizeof(slot->a) + p.len,
                         sync, flags);
        else
            st = rv_call_buffer(w, dest, H.data, &slot->a, sizeof(slot->a),
                                slot->payload, p.len, sync, flags);
        if (st != RV_ERR_AGAIN)
            break;
        s->rep.agains++;
        EXPECT(atomic_load(&snd->shared.pending) <= before,
               "a refused call was added to its synchronizer");
        if (!retry)
            return st;
        rv_progress(w);
        if (now_s() - t0 > WAIT_LIMIT_S) {
            FAIL("worker %u: call %llu to %u refused for %d s", me,
                 (unsigned long long)seq, dest, WAIT_LIMIT_S);
            return st;
        }
    }
    if (st != RV_OK) {
        FAIL("worker %u: call %llu to %u: %s", me, (unsigned long long)seq,
             dest, rv_status_str(st));
        return st;
    }
    s->rep.sent[dest]++;
    s->rep.bytes_sent += sizeof(slot->a) + p.len;
    atomic_fetch_add_explicit(&s->calls_out, 1, memory_order_relaxed);
    if (p.sync)
        snd->pool_next++;
    return RV_OK;
}

rv_status_t send_next(rv_worker_t *w, sender_t *snd, rv_tid_t dest,
                      bool retry)
{
    return send_call(w, snd, dest, retry, false);
}
