/*
 * Fuzz target: am's call records and aggregated batches, as the target of
 * the calls decodes them (am_cur_next and am_call_decode in
 * am/am_wire.c): the payload of a "rivet.am.batch" message, which is also
 * the body of a ring's BATCH record. Records are
 *
 *     am_rec_t (16 B) | body (len bytes) | pad to 8 | footer (8 B)
 *
 * and a batch holds call records (with or without a call header), and run
 * records of plain calls and of rv_call_return calls, whose lengths, kinds
 * and argument lengths come from the sender.
 *
 * The input is the payload. Every call decoded has its arguments and its
 * buffer read in full, as its handler may, and the calls of a run record
 * are taken as am_run_plain takes them: so that a length that reaches
 * past the payload is seen.
 */
#include "am_internal.h"
#include "fuzz.h"

#define SRC 1 /* the sending worker */

static volatile uint64_t sink;

static void touch(const uint8_t *p, size_t len)
{
    fuzz_touch(&sink, p, len);
}

/* The calls of the run record @p r is in, as am_run_plain runs them. */
static void take_plain(am_run_t *r)
{
    while (r->cur.rp < r->cur.rend) {
        const uint8_t *p = r->cur.rp;
        r->cur.rp += r->cur.rstride;
        if (r->cur.rkind == AM_REC_RETRUN) {
            touch(p, 16); /* the caller's synchronizer and result */
            touch(p + 16, r->cur.ralen);
        } else {
            touch(p, r->cur.ralen);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exactly the bytes of the message, so that a read past them is seen. */
    uint8_t *payload = fuzz_copy(data, size);
    am_run_t r = {0};
    am_call_t c;
    int k;

    r.cur.p = payload;
    r.cur.end = payload + size;
    for (;;) {
        /* Routed runs are taken a call at a time (am_route_run reads
         * each call's route first, as am_run_next does). */
        if (am_run_in_plain(&r) && !am_rec_routed(r.cur.rkind)) {
            take_plain(&r);
            continue;
        }
        k = am_run_next(&r, SRC, AM_REC_FOOTER, &c);
        if (k != 0)
            break;
        touch(c.args, c.args_len);
        if (c.buf_len > 0)
            touch(c.buf, c.buf_len);
    }
    fuzz_free(payload, size);
    return 0;
}
