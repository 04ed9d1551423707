/*
 * The circular and linear-circular sub-allocators (mem_test.h): units
 * recycled in ring order once their tags complete, by callback or by a
 * completed-sequence array, and records packed into units; statistics that
 * add up across sub-allocators (the general one too) sharing one chunk
 * allocator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_test.h"

/* ---------------------------------------------------------------------- */
/* Circular and linear-circular                                            */

/* What the circular allocators below take as done: a channel's sequence
 * numbers up to done_seq[channel]. */
static uint64_t done_seq[4];

static bool test_completed(void *arg, uint32_t channel, uint64_t seq)
{
    (void)arg;
    return channel < 4 && done_seq[channel] >= seq;
}

/* Over fresh loop transport counts, with nothing done yet: a chunk allocator of @p chunk
 * bytes, returned in @p a_p, and a circular allocator over it of units of
 * @p unit bytes, at most @p max_units (0: no limit), recycled by
 * test_completed. */
static rv_mem_circular_t *make_circular(size_t chunk, size_t unit,
                                        size_t max_units,
                                        rv_mem_chunk_allocator_t **a_p)
{
    loop_mem_reset(false);
    memset(done_seq, 0, sizeof(done_seq));
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_circular_params_t p = {
        .chunks = a,
        .unit_size = unit,
        .max_units = max_units,
        .completed = test_completed,
    };
    rv_mem_circular_t *c = NULL;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_OK);
    *a_p = a;
    return c;
}

void test_circular_recycle(void **state)
{
    const size_t chunk = 64 * KIB, unit = 4 * KIB;
    rv_mem_unit_t *u[32], *x;
    (void)state;

    rv_mem_chunk_allocator_t *a;
    rv_mem_circular_t *c = make_circular(chunk, unit, 32, &a);
    assert_int_equal(loop_mem.registers, 1);

    /* 16 units from the first chunk, in address order, tagged with
     * alternating channels and freed. */
    for (int i = 0; i < 16; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u[i]), RV_OK);
        assert_int_equal(u[i]->len, unit);
        assert_ptr_equal(u[i]->addr, (char *)u[0]->chunk->addr + i * unit);
        assert_true(loop_mem_registered(u[i]->addr, unit));
        rv_mem_circular_tag(u[i], (uint32_t)(i % 2), (uint64_t)(i / 2 + 1));
        rv_mem_circular_free(c, u[i]);
    }
    /* None complete: the ring grows by a chunk (one more registration). */
    for (int i = 16; i < 32; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u[i]), RV_OK);
        assert_ptr_not_equal(u[i]->chunk, u[0]->chunk);
        assert_true(loop_mem_registered(u[i]->addr, unit));
    }
    assert_int_equal(loop_mem.registers, 2);
    rv_mem_stats_t s = rv_mem_circular_stats(c);
    assert_int_equal(s.bytes_reserved, 2 * chunk);
    assert_int_equal(s.bytes_in_use, 32 * unit);
    for (int i = 16; i < 32; i++)
        rv_mem_circular_free(c, u[i]); /* untagged: free at once */
    s = rv_mem_circular_stats(c);
    assert_int_equal(s.bytes_in_use, 16 * unit);

    /* At max_units, with the unit at the cursor (u[0]) pending. */
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    /* u[1]'s tag completes first: still nothing, recycling is in order. */
    done_seq[1] = 1;
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    done_seq[0] = 1;
    expect_recycled(c, u[0]);
    expect_recycled(c, u[1]);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    /* One completion recycles every unit up to it (a flush number). */
    done_seq[0] = done_seq[1] = 8;
    for (int i = 2; i < 16; i++)
        expect_recycled(c, u[i]);
    /* Then the second chunk's units, then the first's again. */
    expect_recycled(c, u[16]);
    assert_int_equal(loop_mem.registers, 2);

    rv_mem_circular_destroy(c);
    rv_mem_stats_t cs = rv_mem_chunk_stats(a);
    assert_int_equal(cs.bytes_in_use, 0);
    assert_int_equal(cs.bytes_reserved, 2 * chunk); /* cached */
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(loop_mem.nlive, 0);
}

/* The same protocol driven by a completed-sequence array. */
void test_circular_seq_array(void **state)
{
    _Atomic uint64_t completed[2] = {0, 0};
    rv_mem_unit_t *u[4], *x;
    (void)state;

    loop_mem_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(16 * KIB, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_circular_params_t p = {
        .chunks = a,
        .unit_size = 4 * KIB,
        .max_units = 4,
        .completed_seq = completed,
        .nchannels = 2,
    };
    rv_mem_circular_t *c = NULL;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u[i]), RV_OK);
        rv_mem_circular_tag(u[i], 1, (uint64_t)i + 10);
        rv_mem_circular_free(c, u[i]);
    }
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    atomic_store(&completed[1], 10);
    expect_recycled(c, u[0]);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    rv_mem_circular_destroy(c);
    rv_mem_chunk_allocator_destroy(a);

    /* Bad parameters. */
    a = make_chunks(16 * KIB, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    p.chunks = a;
    p.unit_size = 3000;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_ERR_INVALID);
    p.unit_size = 4 * KIB;
    p.completed_seq = NULL;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_ERR_INVALID);
    rv_mem_chunk_allocator_destroy(a);
}

/* What linear_fill saw. */
typedef struct linear_fill {
    rv_mem_unit_t *first_unit;
    uint64_t seq, last_seq_of_first;
    int units_seen;
} linear_fill_t;

/* Records of 100 bytes, 8-aligned, until the allocator has no unit left:
 * packed back to back (104 bytes apart), 39 per unit, then the next unit;
 * each tagged with its sequence number ("posted"). Returns the status that
 * ended it. */
static rv_status_t linear_fill(rv_mem_linear_t *l, size_t unit,
                               linear_fill_t *f)
{
    rv_mem_unit_t *un, *cur = NULL;
    void *addr, *prev = NULL;
    size_t prev_len = 0;
    rv_status_t st;

    while ((st = rv_mem_linear_alloc(l, 100, 8, &addr, &un)) == RV_OK) {
        f->seq++;
        assert_int_equal((uintptr_t)addr % 8, 0);
        assert_true((char *)addr >= (char *)un->addr &&
                    (char *)addr + 100 <= (char *)un->addr + unit);
        assert_true(loop_mem_registered(addr, 100));
        if (un != cur) {
            /* rollover: the new unit starts at its beginning */
            assert_ptr_equal(addr, un->addr);
            if (cur != NULL)
                assert_int_equal((char *)prev + prev_len + 104 >
                                     (char *)cur->addr + unit,
                                 1);
            cur = un;
            f->units_seen++;
            if (f->first_unit == NULL)
                f->first_unit = un;
        } else {
            assert_ptr_equal(addr, (char *)prev + 104);
        }
        if (un == f->first_unit)
            f->last_seq_of_first = f->seq;
        memset(addr, (int)f->seq, 100);
        rv_mem_circular_tag(un, 0, f->seq); /* "posted" */
        prev = addr;
        prev_len = 100;
    }
    return st;
}

void test_linear(void **state)
{
    const size_t chunk = 64 * KIB, unit = 4 * KIB;
    linear_fill_t f = {0};
    rv_mem_unit_t *un;
    void *addr;
    (void)state;

    rv_mem_chunk_allocator_t *a;
    rv_mem_circular_t *c = make_circular(chunk, unit, 16, &a);
    rv_mem_linear_t *l = NULL;
    assert_int_equal(rv_mem_linear_create(c, &l), RV_OK);

    assert_int_equal(linear_fill(l, unit, &f), RV_ERR_AGAIN);
    assert_int_equal(f.units_seen, 16);
    assert_int_equal(f.last_seq_of_first, 39);
    assert_int_equal(loop_mem.registers, 1);

    /* The first unit comes back only once its last record completed. */
    done_seq[0] = f.last_seq_of_first - 1;
    assert_int_equal(rv_mem_linear_alloc(l, 100, 8, &addr, &un), RV_ERR_AGAIN);
    done_seq[0] = f.last_seq_of_first;
    assert_int_equal(rv_mem_linear_alloc(l, 100, 8, &addr, &un), RV_OK);
    assert_ptr_equal(un, f.first_unit);
    assert_ptr_equal(addr, f.first_unit->addr);

    /* Alignment, and sizes that cannot fit. */
    assert_int_equal(rv_mem_linear_alloc(l, 1, 64, &addr, NULL), RV_OK);
    assert_int_equal((uintptr_t)addr % 64, 0);
    assert_int_equal(rv_mem_linear_alloc(l, unit + 1, 8, &addr, NULL),
                     RV_ERR_INVALID);
    assert_int_equal(rv_mem_linear_alloc(l, 8, 3, &addr, NULL), RV_ERR_INVALID);
    /* A whole unit. */
    done_seq[0] = f.seq;
    assert_int_equal(rv_mem_linear_alloc(l, unit, 8, &addr, &un), RV_OK);
    assert_ptr_equal(addr, un->addr);

    rv_mem_linear_destroy(l);
    rv_mem_stats_t s = rv_mem_circular_stats(c);
    assert_int_equal(s.bytes_in_use, 0); /* all completed */
    rv_mem_circular_destroy(c);
    rv_mem_chunk_allocator_destroy(a);
}

/* ---------------------------------------------------------------------- */
/* With the general allocator                                              */

/* Statistics add up across sub-allocators sharing one chunk allocator. */
void test_stats_add_up(void **state)
{
    const size_t chunk = 64 * KIB;
    (void)state;

    rv_mem_chunk_allocator_t *a;
    rv_mem_circular_t *c = make_circular(chunk, 16 * KIB, 0, &a);
    rv_mem_general_t *g;
    rv_mem_linear_t *l;
    rv_mem_unit_t *u;
    void *x;
    assert_int_equal(rv_mem_linear_create(c, &l), RV_OK);
    assert_int_equal(rv_mem_general_create(a, &g), RV_OK);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u), RV_OK); /* kept */
        assert_int_equal(rv_mem_linear_alloc(l, 5000, 8, &x, &u), RV_OK);
        rv_mem_circular_tag(u, 0, 1); /* never completes in this test */
        assert_int_equal(rv_mem_general_alloc(g, 20000, 0, &x, NULL), RV_OK);
    }
    assert_int_equal(rv_mem_general_alloc(g, 3 * chunk, 0, &x, NULL), RV_OK);

    rv_mem_stats_t cs = rv_mem_chunk_stats(a);
    rv_mem_stats_t s1 = rv_mem_circular_stats(c);
    rv_mem_stats_t s2 = rv_mem_general_stats(g);
    assert_int_equal(s1.bytes_reserved + s2.bytes_reserved, cs.bytes_in_use);
    assert_int_equal(cs.bytes_reserved, cs.bytes_in_use); /* nothing cached */
    assert_int_equal(cs.bytes_registered, cs.bytes_reserved);
    assert_int_equal(cs.registrations, (uint64_t)loop_mem.registers);
    /* regions count their chunks */
    assert_int_equal(cs.chunks[RV_MEM_PAGE_NORMAL] * chunk, cs.bytes_reserved);
    assert_int_equal(s1.chunks[RV_MEM_PAGE_NORMAL] +
                         s2.chunks[RV_MEM_PAGE_NORMAL],
                     cs.chunks[RV_MEM_PAGE_NORMAL]);
    assert_true(s1.bytes_in_use <= s1.bytes_reserved);
    assert_true(s2.bytes_in_use <= s2.bytes_reserved);
    /* 10 kept units + the 4 units of 10 linear records (5000 B each, 3 per
     * 16 KiB unit), pending or current */
    assert_int_equal(s1.bytes_in_use, 14 * 16 * KIB);
    assert_int_equal(s2.bytes_in_use, 10 * round_up(20000, 64) + 3 * chunk);

    rv_mem_linear_destroy(l);
    rv_mem_circular_destroy(c);
    rv_mem_general_destroy(g);
    cs = rv_mem_chunk_stats(a);
    assert_int_equal(cs.bytes_in_use, 0);
    rv_mem_chunk_allocator_trim(a);
    cs = rv_mem_chunk_stats(a);
    assert_int_equal(cs.bytes_reserved, 0);
    assert_int_equal(cs.registrations, cs.deregistrations);
    rv_mem_chunk_allocator_destroy(a);
}
