/*
 * The invocation layer's wire formats decoded (am_wire.h): a call record's
 * body, and the records of a batch, a ring's batch or a local block taken
 * one call at a time. Nothing here knows a worker: every length, count
 * and kind comes from the bytes and is checked against them before use,
 * so this is what the fuzz target am-batch feeds and what test_am_wire
 * checks record by record.
 */
#include "am_wire.h"

bool am_call_decode(am_call_t *c, rv_tid_t src, const am_rec_t *rec,
                    const uint8_t *body)
{
    c->src = src;
    c->handler = rec->handler;
    c->local = false;
    c->routed = false;
    size_t len = rec->len;
    if (rec->meta & AM_REC_XHDR) {
        if (len < sizeof(am_hdr_t))
            return false;
        memcpy(&c->hdr, body, sizeof(am_hdr_t));
        body += sizeof(am_hdr_t);
        len -= sizeof(am_hdr_t);
        if (c->hdr.args_len > len)
            return false;
    } else {
        c->hdr = (am_hdr_t){.args_len = (uint32_t)len};
    }
    c->args = body;
    c->args_len = c->hdr.args_len;
    c->buf_len = len - c->args_len;
    c->buf = c->buf_len ? body + c->args_len : NULL;
    return true;
}

/* The call at the run cursor of @p r, from worker @p src: a routed
 * call's source and destination are the ones its record names, whoever
 * forwarded it (its tokens are that source's, never pointers); a call
 * with a result carries its synchronizer and result tokens first. */
static void run_call(const am_cur_t *r, rv_tid_t src, am_call_t *c)
{
    const uint8_t *p = r->rp;
    bool routed = am_rec_routed(r->rkind);
    *c = (am_call_t){.src = src,
                     .handler = r->rh,
                     .hdr = {.args_len = r->ralen},
                     .args_len = r->ralen,
                     .local = r->local && !routed,
                     .routed = routed};
    if (routed) {
        uint32_t route[2];
        memcpy(route, p, sizeof(route));
        c->dst = route[0];
        c->src = route[1];
        p += sizeof(route);
    }
    if (r->rkind == AM_REC_RETRUN || r->rkind == AM_REC_FRET) {
        memcpy(&c->hdr.sync, p, sizeof(c->hdr.sync));
        memcpy(&c->hdr.ret, p + 8, sizeof(c->hdr.ret));
        c->hdr.ret_len = r->rret_len;
        c->hdr.flags = AM_NOTIFY | AM_RETURN | (c->local ? AM_LOCAL : 0);
        p += 16;
    }
    c->args = p;
}

int am_cur_next(am_cur_t *r, rv_tid_t src, size_t footer, am_call_t *c)
{
    while (r->rp >= r->rend) {
        am_rec_t rec;
        size_t left = (size_t)(r->end - r->p);
        if (left == 0)
            return 1;
        if (left < sizeof(rec))
            return -1;
        memcpy(&rec, r->p, sizeof(rec));
        size_t size = sizeof(rec) + AM_ALIGN8(rec.len) + footer;
        const uint8_t *body = r->p + sizeof(rec);
        if (size > left)
            return -1;
        if ((rec.meta & AM_REC_KIND_MASK) == AM_REC_CALL) {
            if (!am_call_decode(c, src, &rec, body))
                return -1;
            c->local = r->local;
            r->p += size;
            return 0;
        }
        uint32_t kind = rec.meta & AM_REC_KIND_MASK;
        uint32_t alen = rec.meta >> AM_REC_ALEN_SHIFT;
        size_t stride = am_elem_stride(kind, alen);
        if (!am_rec_is_run(kind) || rec.len % stride != 0)
            return -1;
        r->rp = body;
        r->rend = body + rec.len;
        r->rh = rec.handler;
        r->ralen = alen;
        r->rstride = (uint32_t)stride;
        r->rkind = kind;
        r->rret_len = rec.ret_len;
        r->p += size;
    }
    run_call(r, src, c);
    r->rp += r->rstride;
    return 0;
}
