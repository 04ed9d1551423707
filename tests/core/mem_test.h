/*
 * The registered memory test: one CMocka group ("mem") over several files,
 * one for each allocator,
 *
 *   test_mem.c           the chunk allocator, over the loop transport and
 *                        over the real UCX plugin; main
 *   test_mem_huge.c      the chunk allocator's huge pages
 *   test_mem_circular.c  the circular and linear-circular sub-allocators,
 *                        and the statistics of every sub-allocator
 *   test_mem_general.c   the general sub-allocator
 *
 * and what they share. The chunk allocators a test makes with make_chunks
 * register through the loop transport, rivet's test transport, built into
 * this program (tests/install/loop_transport.h), whose counts its checks
 * read; each test resets them first. Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_MEM_TEST_H
#define RIVET_TESTS_MEM_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "loop_transport.h"
#include "mem_check.h"
#include "rv_regmem.h"

/* skip(), counted: test_mem's main tells ctest a machine-dependent test
 * skipped by its exit status. */
extern int mem_skipped;
#define mem_skip()                                                           \
    do {                                                                     \
        mem_skipped++;                                                       \
        skip();                                                              \
    } while (0)

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

/* A chunk allocator over the loop transport. */
static inline rv_mem_chunk_allocator_t *
make_chunks(size_t chunk, rv_huge_pages_t hp, rv_mem_source_t source, int node)
{
    rv_mem_chunk_params_t p = {
        .ops = &loop_ops,
        .tp = NULL,
        .numa_node = node,
        .chunk_size = chunk,
        .huge_pages = hp,
        .source = source,
    };
    rv_mem_chunk_allocator_t *a = NULL;
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_OK);
    assert_non_null(a);
    return a;
}

/* Checks that pages of [addr, addr+len) are on @p node and that the range
 * is bound to it (MPOL_BIND). */
void check_placement(void *addr, size_t len, int node);

static inline size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* The checks, in the files above. */
void test_chunk_register_once(void **state);
void test_chunk_transport_source(void **state);
void test_chunk_bad_params(void **state);
void test_numa_placement(void **state);
void test_ucx(void **state);

void test_huge_fallback(void **state);
void test_huge_require_fails(void **state);
void test_huge_real(void **state);
int huge_teardown(void **state);

void test_circular_recycle(void **state);
void test_circular_seq_array(void **state);
void test_linear(void **state);
void test_stats_add_up(void **state);

void test_general_random(void **state);
void test_general_coalesce(void **state);
void test_general_threads(void **state);
void test_general_reserve(void **state);

#endif
