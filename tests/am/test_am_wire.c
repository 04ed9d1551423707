/*
 * The invocation layer's wire format as a module of its own (am_wire.h,
 * am_wire.c), with no worker: every record kind written as the senders
 * write it (am_rec_write, am_elem_rec and am_elem_write) and taken back
 * with am_cur_next as the receivers take it, and every way its bytes can
 * lie -- truncated records, lengths past the end or near 4 GiB, call
 * headers longer than their record, runs that are not a whole number of
 * calls, kinds that do not belong in a batch -- refused without reading
 * past the bytes given (run under ASan in make check-asan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "am_wire.h"

#define SRC 3 /* the worker the records come from */

/* Records as they lie in a batch: each followed by its pad and a footer
 * (AM_REC_FOOTER bytes), or by its pad alone in a local block. */
typedef struct {
    uint8_t bytes[4096];
    size_t len;
    size_t footer;
} batch_t;

/* A copy of @p b of exactly its length, so that ASan sees a read past
 * it; freed by the caller. */
static uint8_t *exact(const batch_t *b)
{
    uint8_t *p = malloc(b->len ? b->len : 1);
    assert_non_null(p);
    memcpy(p, b->bytes, b->len);
    return p;
}

static am_cur_t cursor(const uint8_t *p, size_t len, bool local)
{
    return (am_cur_t){.p = p, .end = p + len, .local = local};
}

static void add_footer(batch_t *b)
{
    memset(b->bytes + b->len, 0xf0, b->footer);
    b->len += b->footer;
}

static void add_call(batch_t *b, rv_handler_id_t h, const am_hdr_t *hdr,
                     const void *args, size_t len, const void *buf, size_t n)
{
    size_t body = (hdr ? sizeof(*hdr) : 0) + len + n;
    am_rec_write(b->bytes + b->len, h, hdr, args, len, buf, n);
    b->len += sizeof(am_rec_t) + AM_ALIGN8(body);
    add_footer(b);
}

/* A run record of @p n calls like @p e, call i's arguments e->args with
 * their first byte + i. */
static void add_run(batch_t *b, const am_elem_t *e, unsigned n)
{
    size_t stride = am_elem_stride(e->kind, e->alen);
    am_rec_t rec = am_elem_rec(e, stride);
    rec.len = (uint32_t)(stride * n);
    memcpy(b->bytes + b->len, &rec, sizeof(rec));
    b->len += sizeof(rec);
    for (unsigned i = 0; i < n; i++) {
        uint8_t args[64] = {0};
        am_elem_t one = *e;
        memcpy(args, e->args, e->alen);
        args[0] = (uint8_t)(args[0] + i);
        one.args = args;
        one.dst = e->dst + i;
        one.pre[0] = e->pre[0] + i;
        am_elem_write(b->bytes + b->len, &one, stride);
        b->len += stride;
    }
    add_footer(b);
}

/* The bytes of a record header at @p at, changed by the test. */
static am_rec_t *rec_at(batch_t *b, size_t at)
{
    return (am_rec_t *)(void *)(b->bytes + at);
}

/* Takes every call of @p b: the number taken before am_cur_next said
 * @p want (1: the end; -1: a malformed record), with the cursor where
 * it stopped in @p end_p. */
static unsigned take_all(const batch_t *b, bool local, int want, size_t *end_p)
{
    uint8_t *p = exact(b);
    am_cur_t r = cursor(p, b->len, local);
    am_call_t c;
    unsigned n = 0;
    int k;
    while ((k = am_cur_next(&r, SRC, b->footer, &c)) == 0) {
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < c.args_len; i++)
            sink ^= c.args[i];
        for (size_t i = 0; i < c.buf_len; i++)
            sink ^= c.buf[i];
        (void)sink;
        n++;
    }
    assert_int_equal(k, want);
    if (end_p != NULL)
        *end_p = (size_t)(r.p - p);
    free(p);
    return n;
}

/* ---------------------------------------------------------------------- */
/* Call records                                                            */

static void test_call_round_trip(void **state)
{
    (void)state;
    batch_t b = {.footer = AM_REC_FOOTER};
    const char args[] = "thirteen byte";
    add_call(&b, 42, NULL, args, 13, NULL, 0);
    add_call(&b, 43, NULL, NULL, 0, NULL, 0);
    uint8_t *p = exact(&b);
    am_cur_t r = cursor(p, b.len, false);
    am_call_t c;

    assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 0);
    assert_int_equal(c.src, SRC);
    assert_int_equal(c.handler, 42);
    assert_int_equal(c.args_len, 13);
    assert_int_equal(c.hdr.args_len, 13);
    assert_int_equal(c.hdr.flags, 0);
    assert_memory_equal(c.args, args, 13);
    assert_int_equal(c.buf_len, 0);
    assert_null(c.buf);
    assert_false(c.local);
    assert_false(c.routed);
    /* The pad is zeros: the ring's footer hashes it. */
    assert_int_equal(p[sizeof(am_rec_t) + 13], 0);
    assert_int_equal(p[sizeof(am_rec_t) + 15], 0);

    assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 0);
    assert_int_equal(c.handler, 43);
    assert_int_equal(c.args_len, 0);
    assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 1);
    assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 1);
    free(p);
}

/* A call header with every flag, arguments and a buffer: all of it comes
 * back as written (what the flags mean is checked where the call runs). */
static void test_call_header_every_flag(void **state)
{
    (void)state;
    const uint32_t flags[] = {
        AM_NOTIFY,
        AM_NOTIFY | AM_RETURN,
        AM_BCAST,
        AM_NOTIFY_RMA,
        AM_DETOUR,
        AM_LOCAL,
        AM_XREF,
        AM_XPLACE,
        AM_XHOOK | (7u << AM_XHOOK_SHIFT),
        AM_XREF | AM_XPLACE,
    };
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        batch_t b = {.footer = AM_REC_FOOTER};
        uint8_t args[5] = {1, 2, 3, 4, 5}, buf[21];
        for (size_t k = 0; k < sizeof(buf); k++)
            buf[k] = (uint8_t)(100 + k);
        am_hdr_t hdr = {.args_len = sizeof(args),
                        .flags = flags[i],
                        .sync = 0x1111222233334444ull,
                        .ret = 0x5555666677778888ull,
                        .ret_len = 24,
                        .root = 9,
                        .token = 0xabcdefull};
        add_call(&b, 7, &hdr, args, sizeof(args), buf, sizeof(buf));
        assert_int_equal(rec_at(&b, 0)->meta, AM_REC_CALL | AM_REC_XHDR);
        uint8_t *p = exact(&b);
        am_cur_t r = cursor(p, b.len, false);
        am_call_t c;
        assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 0);
        assert_memory_equal(&c.hdr, &hdr, sizeof(hdr));
        assert_int_equal(c.args_len, sizeof(args));
        assert_memory_equal(c.args, args, sizeof(args));
        assert_int_equal(c.buf_len, sizeof(buf));
        assert_memory_equal(c.buf, buf, sizeof(buf));
        assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 1);
        free(p);
    }
}

/* Call records whose lengths lie: refused, the cursor left where it was,
 * nothing read past the bytes. */
static void test_call_lying_lengths(void **state)
{
    (void)state;
    am_hdr_t hdr = {.args_len = 8};
    uint64_t args = 1;
    size_t at;

    /* A header shorter than am_hdr_t. */
    batch_t b = {.footer = AM_REC_FOOTER};
    add_call(&b, 1, NULL, &args, 8, NULL, 0);
    rec_at(&b, 0)->meta |= AM_REC_XHDR;
    assert_int_equal(take_all(&b, false, -1, &at), 0);
    assert_int_equal(at, 0);

    /* Arguments longer than what follows the header. */
    b = (batch_t){.footer = AM_REC_FOOTER};
    add_call(&b, 1, &hdr, &args, 8, NULL, 0);
    hdr.args_len = 9;
    memcpy(b.bytes + sizeof(am_rec_t), &hdr, sizeof(hdr));
    assert_int_equal(take_all(&b, false, -1, NULL), 0);
    hdr.args_len = UINT32_MAX;
    memcpy(b.bytes + sizeof(am_rec_t), &hdr, sizeof(hdr));
    assert_int_equal(take_all(&b, false, -1, NULL), 0);

    /* A length past the end, by one byte, by its footer, and near 4 GiB
     * (which must not wrap when padded). */
    const uint32_t lens[] = {8 + 1, 8 + AM_REC_FOOTER, UINT32_MAX,
                             UINT32_MAX - 6};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        b = (batch_t){.footer = AM_REC_FOOTER};
        add_call(&b, 1, NULL, &args, 8, NULL, 0);
        add_call(&b, 2, NULL, &args, 8, NULL, 0);
        rec_at(&b, b.len / 2)->len = lens[i];
        assert_int_equal(take_all(&b, false, -1, &at), 1);
        assert_int_equal(at, b.len / 2);
    }

    /* The footer missing from the last record. */
    b = (batch_t){.footer = AM_REC_FOOTER};
    add_call(&b, 1, NULL, &args, 8, NULL, 0);
    b.len -= 1;
    assert_int_equal(take_all(&b, false, -1, NULL), 0);
}

/* Fewer bytes than a record header, at the start or after a record. */
static void test_truncated(void **state)
{
    (void)state;
    uint64_t args = 5;
    for (size_t cut = 1; cut < sizeof(am_rec_t); cut++) {
        batch_t b = {.footer = AM_REC_FOOTER};
        add_call(&b, 1, NULL, &args, 8, NULL, 0);
        size_t one = b.len;
        add_call(&b, 1, NULL, &args, 8, NULL, 0);
        b.len = one + cut;
        assert_int_equal(take_all(&b, false, -1, NULL), 1);
        b.len = cut;
        assert_int_equal(take_all(&b, false, -1, NULL), 0);
    }
    batch_t empty = {.footer = AM_REC_FOOTER};
    assert_int_equal(take_all(&empty, false, 1, NULL), 0);
}

/* ---------------------------------------------------------------------- */
/* Run records                                                             */

/* Every run kind, with arguments of 8 bytes (the fixed-size copies) and
 * of 13 (padded), three calls each: what each call carries comes back. */
static void test_runs_round_trip(void **state)
{
    (void)state;
    const uint32_t kinds[] = {AM_REC_RUN, AM_REC_RETRUN, AM_REC_FRUN,
                              AM_REC_FRET};
    const uint32_t alens[] = {8, 13, 0};
    for (size_t k = 0; k < 4; k++)
        for (size_t a = 0; a < 3; a++) {
            uint8_t args[16] = {10, 11, 12, 13, 14, 15, 16,
                                17, 18, 19, 20, 21, 22};
            am_elem_t e = {
                .kind = kinds[k],
                .dst = 20,
                .src = 5,
                .h = 77,
                .alen = alens[a],
                .ret_len =
                    kinds[k] == AM_REC_RUN || kinds[k] == AM_REC_FRUN ? 0 : 24,
                .pre = {1000, 2000},
                .args = args};
            bool ret = e.ret_len != 0,
                 routed = kinds[k] == AM_REC_FRUN || kinds[k] == AM_REC_FRET;
            batch_t b = {.footer = AM_REC_FOOTER};
            add_run(&b, &e, 3);
            uint8_t *p = exact(&b);
            am_cur_t r = cursor(p, b.len, false);
            for (unsigned i = 0; i < 3; i++) {
                am_call_t c;
                assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 0);
                assert_int_equal(c.handler, 77);
                assert_int_equal(c.args_len, alens[a]);
                if (alens[a] > 0) {
                    assert_int_equal(c.args[0], 10 + i);
                    assert_memory_equal(c.args + 1, args + 1, alens[a] - 1);
                }
                assert_int_equal(c.routed, routed);
                assert_int_equal(c.src, routed ? 5 : SRC);
                if (routed)
                    assert_int_equal(c.dst, 20 + i);
                if (ret) {
                    assert_int_equal(c.hdr.flags, AM_NOTIFY | AM_RETURN);
                    assert_int_equal(c.hdr.sync, 1000 + i);
                    assert_int_equal(c.hdr.ret, 2000);
                    assert_int_equal(c.hdr.ret_len, 24);
                } else {
                    assert_int_equal(c.hdr.flags, 0);
                }
                assert_int_equal(c.buf_len, 0);
            }
            am_call_t c;
            assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 1);
            free(p);
        }
}

/* A run's length must be a whole number of its calls; a kind that is no
 * call or run (a batch, a rotation, a detour, anything else) does not
 * belong in a batch. */
static void test_runs_lying(void **state)
{
    (void)state;
    uint64_t args = 9;
    am_elem_t e = {.kind = AM_REC_RUN, .h = 1, .alen = 8, .args = &args};
    for (uint32_t extra = 1; extra < 8; extra++) {
        batch_t b = {.footer = AM_REC_FOOTER};
        add_run(&b, &e, 2);
        rec_at(&b, 0)->len += extra;
        b.len += 8; /* room for the longer record */
        assert_int_equal(take_all(&b, false, -1, NULL), 0);
    }
    /* An argument length whose stride does not divide the run (routed
     * calls are 8 bytes longer). */
    batch_t b = {.footer = AM_REC_FOOTER};
    add_run(&b, &e, 3);
    rec_at(&b, 0)->meta = AM_REC_FRUN | 8u << AM_REC_ALEN_SHIFT;
    assert_int_equal(take_all(&b, false, -1, NULL), 0);

    const uint32_t kinds[] = {AM_REC_BATCH, AM_REC_ROTATE, AM_REC_DETOUR, 8,
                              0xff};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        b = (batch_t){.footer = AM_REC_FOOTER};
        add_run(&b, &e, 1);
        rec_at(&b, 0)->meta = kinds[i] | 8u << AM_REC_ALEN_SHIFT;
        assert_int_equal(take_all(&b, false, -1, NULL), 0);
    }

    /* An empty run is nothing to take, not an error. */
    b = (batch_t){.footer = AM_REC_FOOTER};
    add_run(&b, &e, 0);
    add_run(&b, &e, 1);
    assert_int_equal(take_all(&b, false, 1, NULL), 1);
}

/* Calls, runs and calls again, in one batch: taken in order. */
static void test_mixed_batch(void **state)
{
    (void)state;
    uint64_t args = 1;
    am_elem_t e = {.kind = AM_REC_RUN, .h = 2, .alen = 8, .args = &args};
    batch_t b = {.footer = AM_REC_FOOTER};
    add_call(&b, 1, NULL, &args, 8, NULL, 0);
    add_run(&b, &e, 4);
    add_call(&b, 3, NULL, &args, 8, NULL, 0);
    uint8_t *p = exact(&b);
    am_cur_t r = cursor(p, b.len, false);
    const rv_handler_id_t want[] = {1, 2, 2, 2, 2, 3};
    for (size_t i = 0; i < 6; i++) {
        am_call_t c;
        assert_true(am_cur_more(&r));
        assert_int_equal(am_cur_next(&r, SRC, AM_REC_FOOTER, &c), 0);
        assert_int_equal(c.handler, want[i]);
        assert_int_equal(am_cur_in_run(&r), i >= 1 && i < 4);
    }
    assert_false(am_cur_more(&r));
    free(p);
}

/* A local block: no footers, and its calls' pointers are this process's
 * (AM_LOCAL on the answers of a RETRUN), but never a routed call's. */
static void test_local_block(void **state)
{
    (void)state;
    uint64_t args = 4;
    am_elem_t ret = {
        .kind = AM_REC_RETRUN, .h = 5, .alen = 8, .ret_len = 8, .args = &args};
    am_elem_t fret = ret;
    fret.kind = AM_REC_FRET;
    batch_t b = {.footer = 0};
    add_call(&b, 4, NULL, &args, 8, NULL, 0);
    add_run(&b, &ret, 1);
    add_run(&b, &fret, 1);
    uint8_t *p = exact(&b);
    am_cur_t r = cursor(p, b.len, true);
    am_call_t c;
    assert_int_equal(am_cur_next(&r, SRC, 0, &c), 0);
    assert_true(c.local);
    assert_int_equal(am_cur_next(&r, SRC, 0, &c), 0);
    assert_true(c.local);
    assert_int_equal(c.hdr.flags, AM_NOTIFY | AM_RETURN | AM_LOCAL);
    assert_int_equal(am_cur_next(&r, SRC, 0, &c), 0);
    assert_false(c.local);
    assert_true(c.routed);
    assert_int_equal(c.hdr.flags, AM_NOTIFY | AM_RETURN);
    assert_int_equal(am_cur_next(&r, SRC, 0, &c), 1);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_round_trip),
        cmocka_unit_test(test_call_header_every_flag),
        cmocka_unit_test(test_call_lying_lengths),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_runs_round_trip),
        cmocka_unit_test(test_runs_lying),
        cmocka_unit_test(test_mixed_batch),
        cmocka_unit_test(test_local_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
