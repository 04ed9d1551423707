/*
 * The general sub-allocator (mem_test.h): randomized against a shadow
 * list, coalescing and best fit, threads at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_test.h"
#include "stderr_capture.h"

/* ---------------------------------------------------------------------- */
/* General allocator                                                       */

typedef struct live {
    char *addr;
    size_t len;
    unsigned char fill;
    const rv_mem_chunk_t *chunk;
} live_t;

/* A general allocator over 64 KiB chunks, with the loop transport's counts reset;
 * *@p a_p gets the chunk allocator, destroyed after it. */
static rv_mem_general_t *general_64k(rv_mem_chunk_allocator_t **a_p)
{
    loop_mem_reset(false);
    *a_p = make_chunks(64 * KIB, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_general_t *g = NULL;
    assert_int_equal(rv_mem_general_create(*a_p, &g), RV_OK);
    return g;
}

/* Randomized alloc/free against a shadow list. */
enum { NLIVE = 300, OPS = 20000 };
typedef struct shadow {
    rv_mem_general_t *g;
    live_t lv[NLIVE];
    int nlive;
    uint64_t expect_in_use;
    unsigned seed;
} shadow_t;

/* One allocation of a random size and alignment (at times a region of
 * several chunks): aligned, in registered memory, overlapping no live
 * allocation; filled with a pattern of @p op. */
static void general_alloc_one(shadow_t *sh, size_t chunk, int op)
{
    size_t len, align;
    unsigned r = (unsigned)rand_r(&sh->seed);
    if (r % 100 == 0)
        len = chunk + (size_t)rand_r(&sh->seed) % (2 * chunk); /* region */
    else if (r % 10 == 0)
        len = 1 + (size_t)rand_r(&sh->seed) % chunk;
    else
        len = 1 + (size_t)rand_r(&sh->seed) % 2000;
    align = (size_t)1 << (rand_r(&sh->seed) % 17); /* 1 .. 64 KiB */
    if (rand_r(&sh->seed) % 4 == 0)
        align = 0;
    void *p = NULL;
    const rv_mem_chunk_t *ch = NULL;
    assert_int_equal(rv_mem_general_alloc(sh->g, len, align, &p, &ch), RV_OK);
    char *cp = p;
    size_t eff =
        align < RV_MEM_GENERAL_GRANULE ? RV_MEM_GENERAL_GRANULE : align;
    assert_int_equal((uintptr_t)cp % eff, 0);
    assert_true(cp >= (char *)ch->addr &&
                cp + len <= (char *)ch->addr + ch->len);
    assert_true(loop_mem_registered(cp, len));
    assert_ptr_equal(rv_mem_general_lookup(sh->g, cp), ch);
    for (int i = 0; i < sh->nlive; i++)
        assert_true(cp + len <= sh->lv[i].addr ||
                    sh->lv[i].addr + sh->lv[i].len <= cp);
    unsigned char fill = (unsigned char)(op * 7 + 1);
    memset(cp, fill, len);
    sh->lv[sh->nlive++] = (live_t){cp, len, fill, ch};
    sh->expect_in_use += len > chunk ? ch->len : round_up(len, 64);
}

/* Frees a random live allocation, whose pattern must be intact. */
static void general_free_one(shadow_t *sh, size_t chunk)
{
    live_t *lv = sh->lv;
    int i = rand_r(&sh->seed) % sh->nlive;
    for (size_t k = 0; k < lv[i].len; k += 61)
        assert_int_equal((unsigned char)lv[i].addr[k], lv[i].fill);
    assert_int_equal((unsigned char)lv[i].addr[lv[i].len - 1], lv[i].fill);
    /* (a region's descriptor goes with it: read it first) */
    sh->expect_in_use -=
        lv[i].len > chunk ? lv[i].chunk->len : round_up(lv[i].len, 64);
    rv_mem_general_free(sh->g, lv[i].addr);
    lv[i] = lv[--sh->nlive];
}

/* The statistics of the general and chunk allocators agree with the
 * shadow list and with the loop transport's registrations. */
static void general_check_stats(const shadow_t *sh,
                                rv_mem_chunk_allocator_t *a)
{
    rv_mem_stats_t gs = rv_mem_general_stats(sh->g);
    rv_mem_stats_t cs = rv_mem_chunk_stats(a);
    assert_int_equal(gs.bytes_in_use, sh->expect_in_use);
    assert_int_equal(gs.bytes_reserved, cs.bytes_in_use);
    assert_true(cs.bytes_reserved >= cs.bytes_in_use);
    assert_int_equal(cs.registrations, (uint64_t)loop_mem.registers);
    assert_int_equal(loop_mem.overlaps, 0);
}

/* Randomized alloc/free against a shadow list: no overlap (checked
 * against every live allocation, and by fill patterns), alignment,
 * registration, stats. */
void test_general_random(void **state)
{
    const size_t chunk = 64 * KIB;
    shadow_t shadow = {.seed = 12345}, *sh = &shadow;
    (void)state;

    rv_mem_chunk_allocator_t *a;
    rv_mem_general_t *g = sh->g = general_64k(&a);

    for (int op = 0; op < OPS; op++) {
        bool do_alloc = sh->nlive == 0 ||
                        (sh->nlive < NLIVE && rand_r(&sh->seed) % 5 < 3);
        if (do_alloc)
            general_alloc_one(sh, chunk, op);
        else
            general_free_one(sh, chunk);
        if (op % 1000 == 0)
            general_check_stats(sh, a);
    }
    /* Freeing everything leaves one free block per chunk. */
    while (sh->nlive > 0)
        rv_mem_general_free(g, sh->lv[--sh->nlive].addr);
    rv_mem_stats_t gs = rv_mem_general_stats(g);
    uint64_t held = 0;
    for (int k = 0; k < RV_MEM_PAGE_KINDS; k++)
        held += gs.chunks[k];
    assert_int_equal(gs.bytes_in_use, 0);
    assert_true(held > 0);
    assert_int_equal(gs.free_blocks, held);
    assert_int_equal(gs.bytes_reserved, held * chunk);

    /* Freeing an unknown pointer is reported and ignored. */
    char err[4096];
    capture_begin();
    rv_mem_general_free(g, (char *)sh->lv[0].addr + 64);
    capture_end(err, sizeof(err));
    assert_non_null(strstr(err, "was not allocated here"));

    rv_mem_general_trim(g);
    gs = rv_mem_general_stats(g);
    assert_int_equal(gs.bytes_reserved, 0);
    assert_int_equal(rv_mem_chunk_stats(a).bytes_in_use, 0);
    rv_mem_general_destroy(g);
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(loop_mem.deregisters, loop_mem.registers);
    assert_int_equal(loop_mem.nlive, 0);
}

/* Coalescing in detail: neighbours merge on either side. */
void test_general_coalesce(void **state)
{
    const size_t chunk = 64 * KIB;
    void *p[8];
    (void)state;

    rv_mem_chunk_allocator_t *a;
    rv_mem_general_t *g = general_64k(&a);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(rv_mem_general_alloc(g, 1000, 0, &p[i], NULL), RV_OK);
        if (i > 0) /* best fit packs them from the start of the chunk */
            assert_ptr_equal(p[i], (char *)p[i - 1] + 1024);
    }
    assert_int_equal(rv_mem_general_stats(g).free_blocks, 1); /* the tail */
    rv_mem_general_free(g, p[1]);
    rv_mem_general_free(g, p[3]);
    assert_int_equal(rv_mem_general_stats(g).free_blocks, 3);
    rv_mem_general_free(g, p[2]); /* merges with both neighbours */
    assert_int_equal(rv_mem_general_stats(g).free_blocks, 2);
    /* Best fit: a 3 KiB request takes the 3 KiB hole, not the tail. */
    void *q;
    assert_int_equal(rv_mem_general_alloc(g, 3000, 0, &q, NULL), RV_OK);
    assert_ptr_equal(q, p[1]);
    rv_mem_general_free(g, q);
    /* A large alignment leaves the leading part free. */
    void *big;
    assert_int_equal(rv_mem_general_alloc(g, 100, 32 * KIB, &big, NULL), RV_OK);
    assert_int_equal((uintptr_t)big % (32 * KIB), 0);
    for (int i = 0; i < 8; i++)
        if (i < 1 || i > 3)
            rv_mem_general_free(g, p[i]);
    rv_mem_general_free(g, big);
    assert_int_equal(rv_mem_general_stats(g).free_blocks, 1);
    assert_int_equal(loop_mem.registers, 1);

    /* Bad requests. */
    assert_int_equal(rv_mem_general_alloc(g, 0, 0, &q, NULL), RV_ERR_INVALID);
    assert_int_equal(rv_mem_general_alloc(g, 8, 48, &q, NULL), RV_ERR_INVALID);
    assert_int_equal(rv_mem_general_alloc(g, 8, 2 * chunk, &q, NULL),
                     RV_ERR_INVALID);
    rv_mem_general_destroy(g);
    rv_mem_chunk_allocator_destroy(a);
}

/* Threads allocating and freeing at once. */
typedef struct gthread {
    rv_mem_general_t *g;
    unsigned seed;
    int errors;
} gthread_t;

static void *general_thread(void *arg)
{
    gthread_t *t = arg;
    struct {
        unsigned char *p;
        size_t len;
    } lv[64];
    int n = 0;

    for (int op = 0; op < 5000; op++) {
        if (n < 64 && (n == 0 || rand_r(&t->seed) % 2)) {
            size_t len = 1 + (size_t)rand_r(&t->seed) % 3000;
            void *p;
            if (rv_mem_general_alloc(t->g, len, 0, &p, NULL) != RV_OK) {
                t->errors++;
                continue;
            }
            memset(p, (int)(t->seed & 0xff) | 1, len);
            lv[n].p = p;
            lv[n++].len = len;
        } else {
            int i = rand_r(&t->seed) % n;
            unsigned char want = lv[i].p[0];
            for (size_t k = 0; k < lv[i].len; k++)
                if (lv[i].p[k] != want) {
                    t->errors++;
                    break;
                }
            rv_mem_general_free(t->g, lv[i].p);
            lv[i] = lv[--n];
        }
    }
    while (n > 0)
        rv_mem_general_free(t->g, lv[--n].p);
    return NULL;
}

void test_general_threads(void **state)
{
    gthread_t t[4];
    pthread_t th[4];
    (void)state;

    rv_mem_chunk_allocator_t *a;
    rv_mem_general_t *g = general_64k(&a);
    for (int i = 0; i < 4; i++) {
        t[i] = (gthread_t){g, (unsigned)i * 7919 + 1, 0};
        assert_int_equal(pthread_create(&th[i], NULL, general_thread, &t[i]),
                         0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(t[i].errors, 0);
    }
    rv_mem_stats_t s = rv_mem_general_stats(g);
    assert_int_equal(s.bytes_in_use, 0);
    assert_int_equal(s.free_blocks, s.bytes_reserved / (64 * KIB));
    assert_int_equal(loop_mem.overlaps, 0);
    rv_mem_general_destroy(g);
    rv_mem_chunk_allocator_destroy(a);
}

/* A reserve takes chunks once; allocations up to it register nothing. */
void test_general_reserve(void **state)
{
    (void)state;
    rv_mem_chunk_allocator_t *a;
    rv_mem_general_t *g = general_64k(&a);
    assert_int_equal(rv_mem_general_reserve(g, 3 * 64 * KIB - 1), RV_OK);
    rv_mem_stats_t s = rv_mem_general_stats(g);
    assert_int_equal(s.bytes_reserved, 3 * 64 * KIB);
    assert_int_equal(loop_mem.registers, 3);
    /* What is held and free already counts. */
    assert_int_equal(rv_mem_general_reserve(g, 64 * KIB), RV_OK);
    assert_int_equal(loop_mem.registers, 3);

    void *p[6];
    for (int i = 0; i < 6; i++)
        assert_int_equal(rv_mem_general_alloc(g, 32 * KIB, 0, &p[i], NULL),
                         RV_OK);
    assert_int_equal(loop_mem.registers, 3);
    assert_int_equal(rv_mem_general_stats(g).bytes_in_use, 6 * 32 * KIB);
    /* Past the reserve, chunks are taken as before. */
    void *q;
    assert_int_equal(rv_mem_general_alloc(g, 32 * KIB, 0, &q, NULL), RV_OK);
    assert_int_equal(loop_mem.registers, 4);
    rv_mem_general_free(g, q);
    for (int i = 0; i < 6; i++)
        rv_mem_general_free(g, p[i]);
    rv_mem_general_destroy(g);
    rv_mem_chunk_allocator_destroy(a);
}
