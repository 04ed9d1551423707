/*
 * The invocation layer's wire formats (never installed): call records,
 * run records, call headers and completions, as they travel in batches,
 * messenger rings and local blocks, with the inline helpers that write
 * them on every call's path.
 *
 * Records. Every call that is batched, queued or written into a messenger
 * ring is serialized once, straight into registered memory, as a record:
 *
 *     am_rec_t (16 B) | body (len bytes) | pad to 8 | footer (8 B)
 *
 * The body of a call record is its arguments, or, with AM_REC_XHDR, an
 * am_hdr_t followed by arguments and buffer. A batch is a record whose
 * body is a run of call records (their seq and footer unused). In a ring,
 * seq is the record's sequence number in its ring and the footer proves
 * the record whole (see am_ring.c).
 */
#ifndef RIVET_AM_WIRE_H
#define RIVET_AM_WIRE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rv_am.h"

typedef struct am_rec {
    /* The first word by record kind: */
    union {
        uint32_t seq;     /* ring records: sequence number (low 32 bits) */
        uint32_t ret_len; /* RETRUN, FRET inside a run: the calls' result
                             length */
    };
    uint32_t handler; /* call: handler id; other kinds: 0 */
    uint32_t len;     /* body bytes (excluding pad and footer) */
    uint32_t meta;    /* kind | flags */
} am_rec_t;
_Static_assert(sizeof(am_rec_t) == 16, "am_rec_t is a wire format");

enum {
    AM_REC_CALL = 0,   /* a call */
    AM_REC_BATCH = 1,  /* body: a run of call records */
    AM_REC_ROTATE = 2, /* body: u32 chunks spliced in after this one */
    AM_REC_DETOUR = 3, /* body: u64 token of a call sent over send */
    AM_REC_RUN = 4,    /* body: plain calls of one handler with the same
                          argument length (meta >> AM_REC_ALEN_SHIFT), one
                          after another, each padded to am_run_stride */
    AM_REC_RETRUN = 5, /* as RUN, of rv_call_return calls with the same
                          result length (the record's ret_len): each call is
                          [sync 8][ret 8][arguments, padded to 8] */
    /* Routed runs (am.routing, am_route.c): as RUN and RETRUN, each call
     * led by [destination u32][source u32]; a worker that is not the
     * destination forwards the call. */
    AM_REC_FRUN = 6,
    AM_REC_FRET = 7,
    AM_REC_KIND_MASK = 0xff,
    AM_REC_XHDR = 1u << 8,  /* the body starts with an am_hdr_t */
    AM_REC_LARGE = 1u << 9, /* body written first, header after a fence */
};

#define AM_REC_FOOTER 8u
/* The largest result a run of rv_call_return calls builds in the
 * target's scratch buffer (larger ones take am_run_call). */
#define AM_FAST_RET 256u
/* In size_t before the addition: a record's u32 length near 4 GiB from
 * the wire must not wrap to a small size. */
#define AM_ALIGN8(x) (((size_t)(x) + 7u) & ~(size_t)7u)
/* A run record's argument length, in its meta. */
#define AM_REC_ALEN_SHIFT 16

/* Bytes one call of a run takes: its arguments, padded to 8 (and at
 * least 8, so that a run's length counts its calls). */
static inline size_t am_run_stride(size_t alen)
{
    return alen <= 8 ? 8 : (alen + 7u) & ~(size_t)7u;
}

/* Whether records of @p kind are runs of calls (taken by am_run_next
 * inside a batch, never alone in a ring). */
static inline bool am_rec_is_run(uint32_t kind)
{
    return kind == AM_REC_RUN || kind == AM_REC_RETRUN || kind == AM_REC_FRUN ||
           kind == AM_REC_FRET;
}

/* Whether a run record of @p kind is routed: its calls carry their
 * destination and source. */
static inline bool am_rec_routed(uint32_t kind)
{
    return kind == AM_REC_FRUN || kind == AM_REC_FRET;
}

/* One call of a run record (AM_REC_RUN, _RETRUN, _FRUN, _FRET), to
 * write. */
typedef struct am_elem {
    uint32_t kind;
    rv_tid_t dst, src; /* routed kinds: the call's destination and source */
    rv_handler_id_t h;
    uint32_t alen, ret_len;
    uint64_t pre[2]; /* RETRUN: the caller's sync and ret (local), or
                        the call's token twice (remote: am_pend.c) */
    rv_sync_t *sync; /* RETRUN: the caller's synchronizer */
    const void *args;
} am_elem_t;

static inline size_t am_elem_stride(uint32_t kind, size_t alen)
{
    switch (kind) {
    case AM_REC_RUN:
        return am_run_stride(alen);
    case AM_REC_FRUN:
        return sizeof(uint32_t[2]) + AM_ALIGN8(alen);
    case AM_REC_FRET:
        return sizeof(uint32_t[2]) + sizeof(uint64_t[2]) + AM_ALIGN8(alen);
    default:
        return sizeof(uint64_t[2]) + AM_ALIGN8(alen);
    }
}

/* The header of a run record of @p e's kind holding one call. */
static inline am_rec_t am_elem_rec(const am_elem_t *e, size_t stride)
{
    return (am_rec_t){.ret_len = e->ret_len,
                      .handler = e->h,
                      .len = (uint32_t)stride,
                      .meta = e->kind | e->alen << AM_REC_ALEN_SHIFT};
}

/* Whether the run record @p rec takes @p e as one more call. */
static inline bool am_elem_matches(const am_rec_t *rec, const am_elem_t *e)
{
    return rec->handler == e->h &&
           rec->meta == (e->kind | e->alen << AM_REC_ALEN_SHIFT) &&
           rec->ret_len == e->ret_len;
}

static inline void am_elem_write(uint8_t *at, const am_elem_t *e, size_t stride)
{
    if (am_rec_routed(e->kind)) {
        uint32_t route[2] = {e->dst, e->src};
        memcpy(at, route, sizeof(route));
        at += sizeof(route);
        stride -= sizeof(route);
    }
    uint32_t kind = e->kind == AM_REC_FRUN   ? AM_REC_RUN
                    : e->kind == AM_REC_FRET ? AM_REC_RETRUN
                                             : e->kind;
    if (e->alen == 8 && stride == 8 * (kind == AM_REC_RUN ? 1 : 3)) {
        /* fixed-size copies: a move each */
        if (kind == AM_REC_RUN) {
            memcpy(at, e->args, 8);
        } else {
            memcpy(at, e->pre, sizeof(e->pre));
            memcpy(at + sizeof(e->pre), e->args, 8);
        }
        return;
    }
    size_t pre = kind == AM_REC_RUN ? 0 : sizeof(e->pre);
    memcpy(at, e->pre, pre);
    if (e->alen > 0) /* args may be NULL then */
        memcpy(at + pre, e->args, e->alen);
    if (stride > pre + e->alen)
        memset(at + pre + e->alen, 0, stride - pre - e->alen);
}

static inline size_t am_rec_size(size_t len)
{
    return sizeof(am_rec_t) + AM_ALIGN8(len) + AM_REC_FOOTER;
}

/* The call header of calls that need more than handler and arguments. */
typedef struct am_hdr {
    uint32_t args_len;
    uint32_t flags; /* AM_* below */
    uint64_t sync;  /* caller's rv_sync_t *, for AM_NOTIFY */
    /* An extended call (AM_XREF, AM_XPLACE, AM_XHOOK) has no result and
     * is no broadcast: the extension's words take those places. */
    union {
        uint64_t ret;    /* caller's result buffer, for AM_RETURN */
        uint64_t x_addr; /* extended: rv_am_xcall_t's addr */
    };
    union {
        uint32_t ret_len;
        uint32_t x_len; /* extended: rv_am_xcall_t's len */
    };
    union {
        rv_tid_t root;   /* AM_BCAST: the broadcasting worker */
        uint32_t x_word; /* extended: rv_am_xcall_t's word */
    };
    uint64_t token; /* AM_DETOUR: matches a ring's DETOUR record */
} am_hdr_t;
_Static_assert(sizeof(am_hdr_t) == 40, "am_hdr_t is a wire format");

enum {
    AM_NOTIFY = 1u << 0,     /* answer with rivet.am.done */
    AM_RETURN = 1u << 1,     /* ... carrying the handler's result */
    AM_BCAST = 1u << 2,      /* forward down the tree rooted at root */
    AM_NOTIFY_RMA = 1u << 3, /* count it in the ring's notified word */
    AM_DETOUR = 1u << 4,     /* a ring call that travelled over send */
    AM_LOCAL = 1u << 5,      /* local bypass: sync and ret are pointers
                                of this process, completed directly */
    /* Extended calls (rv_am_ext.h): `ret`, `ret_len` and `root` carry the
     * extension's addr, len and word. */
    AM_XREF = 1u << 6,   /* RV_AM_X_REF */
    AM_XPLACE = 1u << 7, /* RV_AM_X_PLACE */
    AM_XHOOK = 1u << 8,  /* RV_AM_X_HOOK; the hook's index follows */
    AM_XHOOK_SHIFT = 24,
    AM_XHOOK_MASK = 0xffu << 24,
};

/* rivet.am.dones carries groups of completions with results of one
 * length: the header, then `count` entries of [the call's token
 * (am_pend.c), 8][result, padded to 8]. */
typedef struct {
    uint64_t reserved; /* 0 */
    uint32_t ret_len, count;
} am_dgroup_t;

/* The completion of a call with AM_NOTIFY, in rivet.am.done's header:
 * what the call carried, its token (am_pend.c) in sync; ret as the call
 * carried it (the token again, or an extended call's address). */
typedef struct {
    uint64_t sync, ret;
    uint32_t ret_len; /* result bytes that follow */
    uint32_t reserved;
} am_done_t;

/* Serializes a call record at @p at. */
static inline void am_rec_write(uint8_t *at, rv_handler_id_t h,
                                const am_hdr_t *hdr, const void *args,
                                size_t len, const void *buf, size_t n)
{
    size_t body = (hdr ? sizeof(*hdr) : 0) + len + n;
    am_rec_t rec = {.handler = h,
                    .len = (uint32_t)body,
                    .meta = AM_REC_CALL | (hdr ? AM_REC_XHDR : 0)};
    memcpy(at, &rec, sizeof(rec));
    uint8_t *p = at + sizeof(rec);
    if (hdr != NULL) {
        memcpy(p, hdr, sizeof(*hdr));
        p += sizeof(*hdr);
    }
    if (len)
        memcpy(p, args, len);
    if (n)
        memcpy(p + len, buf, n);
    /* Deterministic padding (the ring's footer hashes it). */
    size_t pad = AM_ALIGN8(body) - body;
    if (pad)
        memset(p + len + n, 0, pad);
}

/* ---------------------------------------------------------------------- */
/* Decoding (am_wire.c)                                                    */

/* A call decoded, before it runs: what its record says, pointing into
 * the record (nothing is copied). */
typedef struct am_call {
    rv_tid_t src;
    rv_handler_id_t handler;
    am_hdr_t hdr; /* zero but args_len when the record had none */
    const uint8_t *args;
    size_t args_len;
    const uint8_t *buf;
    size_t buf_len;
    bool local;  /* from a thread of this process (the local bypass): its
                    header's pointers are this process's own */
    bool routed; /* from a routed run: src is what the record says, and
                    dst may be another worker (am_route_forward) */
    rv_tid_t dst;
} am_call_t;

/* A cursor over records (a batch's body, a ring's batch, a local block),
 * taken one call at a time: the records not yet opened are [p, end); the
 * calls of the run record opened last, [rp, rend), come before them. */
typedef struct am_cur {
    const uint8_t *p, *end;
    const uint8_t *rp, *rend;
    rv_handler_id_t rh; /* the open run record's handler, */
    uint32_t ralen;     /* argument length, */
    uint32_t rstride;   /* bytes per call, */
    uint32_t rkind;     /* kind (AM_REC_RUN, ...) */
    uint32_t rret_len;  /* and result length (RETRUN, FRET) */
    bool local;         /* a local block: pointers are this process's */
} am_cur_t;

/* Whether @p r has calls left to take. */
static inline bool am_cur_more(const am_cur_t *r)
{
    return r->rp < r->rend || r->p < r->end;
}

/* Whether @p r is inside a run record. */
static inline bool am_cur_in_run(const am_cur_t *r)
{
    return r->rp < r->rend;
}

/* Decodes the body of the call record @p rec (AM_REC_CALL), whose
 * rec->len bytes are at @p body, into @p c from worker @p src; false if
 * the record is malformed (a call header longer than the body, arguments
 * longer than what follows it). */
bool am_call_decode(am_call_t *c, rv_tid_t src, const am_rec_t *rec,
                    const uint8_t *body);

/* Takes the next call of @p r, whose records carry @p footer bytes of
 * footer each (AM_REC_FOOTER in batches and rings, 0 in local blocks):
 * 0 with *c decoded and the cursor past the call, 1 when no record is
 * left, -1 when the next record is malformed (shorter than its header,
 * a length past the end, a run whose length is not a whole number of
 * calls, an unknown kind); the cursor is then not moved. Calls from
 * worker @p src; a routed call's src and dst are its record's. */
int am_cur_next(am_cur_t *r, rv_tid_t src, size_t footer, am_call_t *c);

#endif
