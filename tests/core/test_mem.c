/*
 * Registered memory: the per-NUMA-zone chunk allocator and the circular,
 * linear-circular and general sub-allocators (core/rv_regmem.h).
 *
 * Most tests run over the loop transport, built in, that counts registrations and keeps
 * the registered ranges, so that "one registration per chunk" and "every
 * allocation lies in registered memory" can be checked exactly. One test
 * runs the chunk allocator over the real UCX plugin, on both of its paths.
 * The huge page tests take the real MAP_HUGETLB path when run as root
 * (reserving a few pages and giving them back) and the fallback otherwise.
 *
 * This file holds the chunk allocator's checks and main; the others are in
 * the test_mem_*.c files mem_test.h lists.
 */
#include <numa.h>
#include <numaif.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_test.h"
#include "rv_core.h"
#include "stderr_capture.h"

/* The node of the page at @p addr (faulting it in), or -1. Asked twice:
 * get_mempolicy (the policy layer) and move_pages with no target nodes
 * (where the page really is); they must agree. */
static int node_of(void *addr)
{
    int node = -1, status = -1;
    void *page = (void *)((uintptr_t)addr & ~(uintptr_t)4095);
    if (get_mempolicy(&node, NULL, 0, addr, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return -1;
    if (move_pages(0, 1, &page, NULL, &status, 0) != 0)
        return -1;
    assert_int_equal(status, node);
    return node;
}

void check_placement(void *addr, size_t len, int node)
{
    char *p = addr;
    size_t step = len / 7 > 4096 ? len / 7 : 4096;
    for (size_t off = 0; off < len; off += step)
        assert_int_equal(node_of(p + off), node);
    assert_int_equal(node_of(p + len - 1), node);

    int mode = -1;
    unsigned long mask[16] = {0};
    assert_int_equal(
        get_mempolicy(&mode, mask, sizeof(mask) * 8, addr, MPOL_F_ADDR), 0);
    assert_int_equal(mode, MPOL_BIND);
    assert_true(mask[node / 64] & (1UL << (node % 64)));
}
/* ---------------------------------------------------------------------- */
/* Chunk allocator                                                         */

void test_chunk_register_once(void **state)
{
    const size_t chunk = 64 * KIB;
    rv_mem_chunk_t *c[8], *again, *region;
    (void)state;

    loop_mem_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_MMAP);
    assert_int_equal(rv_mem_chunk_alignment(a), chunk);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(rv_mem_chunk_alloc(a, 1, &c[i]), RV_OK);
        assert_int_equal(c[i]->len, chunk);
        assert_int_equal((uintptr_t)c[i]->addr % chunk, 0);
        assert_int_equal(c[i]->kind, RV_MEM_PAGE_NORMAL);
        assert_non_null(c[i]->rkey);
        assert_int_equal(c[i]->rkey_len, sizeof(void *));
        assert_ptr_equal(*(rv_tmem_t *const *)c[i]->rkey, c[i]->tmem);
        assert_true(loop_mem_registered(c[i]->addr, chunk));
        memset(c[i]->addr, i, chunk);
    }
    assert_int_equal(loop_mem.registers, 8);
    assert_int_equal(loop_mem.packs, 8);
    assert_int_equal(loop_mem.allocs, 0);
    assert_int_equal(loop_mem.overlaps, 0);

    /* A freed chunk comes back registered: no new registration. */
    rv_mem_chunk_free(a, c[3]);
    assert_int_equal(rv_mem_chunk_alloc(a, 1, &again), RV_OK);
    assert_ptr_equal(again, c[3]);
    assert_int_equal(loop_mem.registers, 8);

    /* A region of 3 chunks is one registration, gone when freed. */
    assert_int_equal(rv_mem_chunk_alloc(a, 3, &region), RV_OK);
    assert_int_equal(region->len, 3 * chunk);
    assert_int_equal(loop_mem.registers, 9);
    rv_mem_stats_t s = rv_mem_chunk_stats(a);
    assert_int_equal(s.bytes_reserved, 11 * chunk);
    assert_int_equal(s.bytes_registered, 11 * chunk);
    assert_int_equal(s.bytes_in_use, 11 * chunk);
    assert_int_equal(s.registrations, 9);
    assert_int_equal(s.chunks[RV_MEM_PAGE_NORMAL], 11);
    rv_mem_chunk_free(a, region);
    assert_int_equal(loop_mem.deregisters, 1);

    /* Cached chunks go on trim; the rest on destroy. */
    rv_mem_chunk_free(a, c[0]);
    rv_mem_chunk_free(a, c[1]);
    s = rv_mem_chunk_stats(a);
    assert_int_equal(s.bytes_reserved, 8 * chunk);
    assert_int_equal(s.bytes_in_use, 6 * chunk);
    rv_mem_chunk_allocator_trim(a);
    s = rv_mem_chunk_stats(a);
    assert_int_equal(s.bytes_reserved, 6 * chunk);
    assert_int_equal(s.deregistrations, 3);
    assert_int_equal(loop_mem.registers, 9);

    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(loop_mem.deregisters, 9);
    assert_int_equal(loop_mem.releases, loop_mem.packs);
    assert_int_equal(loop_mem.nlive, 0);
}

/* The transport path: chunks from ops->mem_alloc, never mem_register. */
void test_chunk_transport_source(void **state)
{
    const size_t chunk = 2 * MIB;
    rv_mem_chunk_t *c[3];
    (void)state;

    loop_mem_reset(true);
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_TRANSPORT, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rv_mem_chunk_alloc(a, 1, &c[i]), RV_OK);
        assert_int_equal(c[i]->kind, RV_MEM_PAGE_TRANSPORT);
        assert_int_equal(c[i]->numa_node, 0);
        check_placement(c[i]->addr, chunk, 0);
    }
    assert_int_equal(loop_mem.allocs, 3);
    assert_int_equal(loop_mem.registers, 0);
    rv_mem_stats_t s = rv_mem_chunk_stats(a);
    assert_int_equal(s.registrations, 3);
    assert_int_equal(s.chunks[RV_MEM_PAGE_TRANSPORT], 3);
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(loop_mem.deregisters, 3);
    assert_int_equal(loop_mem.releases, 3);

    /* AUTO follows caps.mem_alloc_mapped, unless huge pages are required. */
    a = make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_AUTO, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_TRANSPORT);
    rv_mem_chunk_allocator_destroy(a);
    a = make_chunks(chunk, RV_HUGE_REQUIRE, RV_MEM_SOURCE_AUTO, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_MMAP);
    rv_mem_chunk_allocator_destroy(a);
    loop_mem_reset(false);
    a = make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_AUTO, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_MMAP);
    rv_mem_chunk_allocator_destroy(a);
}

void test_chunk_bad_params(void **state)
{
    rv_mem_chunk_params_t p = {
        .ops = &loop_ops,
        .numa_node = -1,
        .chunk_size = 2 * MIB,
        .huge_pages = RV_HUGE_AUTO,
        .source = RV_MEM_SOURCE_MMAP,
    };
    rv_mem_chunk_allocator_t *a = NULL;
    char err[4096];
    (void)state;

    loop_mem_reset(false);
    p.chunk_size = 5000;
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_ERR_INVALID);
    p.chunk_size = 2 * MIB;

    /* An out-of-range NUMA node is a clear error. */
    int max = numa_available() >= 0 ? numa_max_node() : 0;
    p.numa_node = max + 1;
    capture_begin();
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_ERR_INVALID);
    capture_end(err, sizeof(err));
    assert_non_null(strstr(err, "numa node"));
    assert_non_null(strstr(err, "does not exist"));
    p.numa_node = 100000;
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_ERR_INVALID);
    p.numa_node = -1;

    /* require with a chunk no huge page divides, or with memory the
     * transport allocates: a configuration error at once. */
    p.huge_pages = RV_HUGE_REQUIRE;
    p.chunk_size = 64 * KIB;
    capture_begin();
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_ERR_CONFIG);
    capture_end(err, sizeof(err));
    assert_non_null(strstr(err, "not a multiple of a huge page"));
    p.chunk_size = 2 * MIB;
    p.source = RV_MEM_SOURCE_TRANSPORT;
    assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_ERR_CONFIG);
    assert_null(a);
}

/* Pages of a chunk sit on the requested node and the range is bound to it,
 * however the first touch happened. */
void test_numa_placement(void **state)
{
    const size_t chunk = 2 * MIB;
    rv_mem_chunk_t *c, *region;
    (void)state;

    if (numa_available() < 0) {
        print_message("no NUMA support in this kernel: placement not "
                      "checked\n");
        mem_skip();
    }
    for (int node = 0; node <= numa_max_node(); node++) {
        if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node))
            continue;
        loop_mem_reset(false);
        rv_mem_chunk_allocator_t *a =
            make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_MMAP, node);
        assert_int_equal(rv_mem_chunk_alloc(a, 1, &c), RV_OK);
        assert_int_equal(c->numa_node, node);
        check_placement(c->addr, c->len, node);
        assert_int_equal(rv_mem_chunk_alloc(a, 2, &region), RV_OK);
        check_placement(region->addr, region->len, node);
        rv_mem_chunk_allocator_destroy(a);
    }
}
/* ---------------------------------------------------------------------- */
/* The real UCX plugin                                                     */

void test_ucx(void **state)
{
    const rv_transport_ops_t *ops = NULL;
    void *handle = NULL;
    rv_transport_t *tp = NULL;
    rv_config_t *cfg;
    char err[512];
    (void)state;

    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)), RV_OK);
    assert_int_equal(rv__plugin_load("ucx", &handle, &ops), RV_OK);
    rv_transport_params_t params = {
        .config = cfg,
        .tconfig = rv_config_component(cfg, "transport.ucx"),
        .rank = 0,
        .size = 1,
        .threads = 1,
    };
    assert_int_equal(ops->init(&params, &tp), RV_OK);

    static const rv_mem_source_t sources[] = {RV_MEM_SOURCE_MMAP,
                                              RV_MEM_SOURCE_TRANSPORT};
    for (int s = 0; s < 2; s++) {
        rv_mem_chunk_params_t p;
        rv_mem_chunk_allocator_t *a = NULL;
        rv_mem_chunk_t *c[2], *region;
        int node = numa_available() >= 0 ? 0 : -1;

        rv_mem_chunk_params_init(&p, cfg, ops, tp, node);
        p.source = sources[s];
        assert_int_equal(rv_mem_chunk_allocator_create(&p, &a), RV_OK);
        assert_int_equal(rv_mem_chunk_source(a), sources[s]);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(rv_mem_chunk_alloc(a, 1, &c[i]), RV_OK);
            assert_int_equal(c[i]->len, rv_core_config(cfg)->memory.chunk);
            assert_non_null(c[i]->tmem);
            assert_non_null(c[i]->rkey);
            assert_true(c[i]->rkey_len > 0);
            memset(c[i]->addr, 0x5a, c[i]->len);
            if (node >= 0)
                check_placement(c[i]->addr, c[i]->len, node);
        }
        if (sources[s] == RV_MEM_SOURCE_TRANSPORT)
            assert_int_equal(c[0]->kind, RV_MEM_PAGE_TRANSPORT);
        else
            assert_int_not_equal(c[0]->kind, RV_MEM_PAGE_TRANSPORT);
        assert_int_equal(rv_mem_chunk_alloc(a, 2, &region), RV_OK);
        assert_true(region->rkey_len > 0);
        memset(region->addr, 0x33, region->len);

        /* A general allocator on top: allocations carry the chunk's
         * registration. */
        rv_mem_general_t *g = NULL;
        void *x;
        const rv_mem_chunk_t *xc;
        assert_int_equal(rv_mem_general_create(a, &g), RV_OK);
        assert_int_equal(rv_mem_general_alloc(g, 1000, 0, &x, &xc), RV_OK);
        assert_non_null(xc->rkey);
        rv_mem_general_destroy(g);

        rv_mem_stats_t st = rv_mem_chunk_stats(a);
        assert_int_equal(st.registrations, 4);
        rv_mem_chunk_free(a, region);
        rv_mem_chunk_allocator_destroy(a);
    }
    ops->fini(tp);
    rv_config_free(cfg);
    /* The plugin stays loaded, as in rv_context: UCX keeps atexit handlers
     * in it. */
}

/* The checks whose outcome depends on the machine (a NUMA kernel, huge
 * pages that can be reserved) each run as a test of their own, named on
 * the command line, so that ctest lists one that could not check anything
 * as skipped (SKIP_STATUS) rather than folding it into a passed "mem". */
#define SKIP_STATUS 77

static const struct CMUnitTest machine_tests[] = {
    cmocka_unit_test(test_numa_placement),
    cmocka_unit_test(test_huge_require_fails),
    cmocka_unit_test_teardown(test_huge_real, huge_teardown),
};

int mem_skipped;

static int run_machine_test(const char *name)
{
    size_t n = sizeof(machine_tests) / sizeof(machine_tests[0]);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(machine_tests[i].name, name) != 0)
            continue;
        int failed = _cmocka_run_group_tests(name, &machine_tests[i], 1,
                                             NULL, NULL);
        return failed == 0 && mem_skipped > 0 ? SKIP_STATUS : failed;
    }
    fprintf(stderr, "test_mem: no test %s\n", name);
    return 2;
}

int main(int argc, char **argv)
{
    /* test_huge_fallback comes first: the fallback is reported once per
     * process, and its child inherits this process's "reported" state, so
     * nothing may take a chunk with huge_pages auto before it. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_fallback),
        cmocka_unit_test(test_chunk_register_once),
        cmocka_unit_test(test_chunk_transport_source),
        cmocka_unit_test(test_chunk_bad_params),
        cmocka_unit_test(test_circular_recycle),
        cmocka_unit_test(test_circular_seq_array),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_general_random),
        cmocka_unit_test(test_general_coalesce),
        cmocka_unit_test(test_general_threads),
        cmocka_unit_test(test_general_reserve),
        cmocka_unit_test(test_stats_add_up),
        cmocka_unit_test(test_ucx),
    };
    if (argc > 1)
        return run_machine_test(argv[1]);
    return cmocka_run_group_tests_name("mem", tests, NULL, NULL);
}
