/*
 * Registered memory: the per-NUMA-zone chunk allocator and the circular,
 * linear-circular and general sub-allocators (core/rv_mem.h).
 *
 * Most tests run over a mock transport that counts registrations and keeps
 * the registered ranges, so that "one registration per chunk" and "every
 * allocation lies in registered memory" can be checked exactly. One test
 * runs the chunk allocator over the real UCX plugin, on both of its paths.
 * The huge page tests take the real MAP_HUGETLB path when run as root
 * (reserving a few pages and giving them back) and the fallback otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rv_core.h"
#include "rv_mem.h"
#include "stderr_capture.h"

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

#include "mock_transport.h"

/* Whether [p, p+len) lies inside one live registration. */
static bool registered(const void *p, size_t len)
{
    bool ok = false;
    pthread_mutex_lock(&mock.lock);
    for (int i = 0; i < mock.nlive && !ok; i++) {
        const char *a = mock.live[i]->addr;
        ok = (const char *)p >= a &&
             (const char *)p + len <= a + mock.live[i]->len;
    }
    pthread_mutex_unlock(&mock.lock);
    return ok;
}

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

static rv_mem_chunk_allocator_t *make_chunks(size_t chunk, rv_huge_pages_t hp,
                                             rv_mem_source_t source, int node)
{
    rv_mem_chunk_params_t p = {
        .ops = &mock_ops,
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

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static long read_long(const char *path)
{
    long v = -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

#define HUGE_2M_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB/"

static bool thp_possible(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL)
        return false;
    if (fgets(buf, sizeof(buf), f) == NULL)
        buf[0] = '\0';
    fclose(f);
    return buf[0] != '\0' && strstr(buf, "[never]") == NULL;
}

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

/* Checks that pages of [addr, addr+len) are on @p node and that the range
 * is bound to it (MPOL_BIND). */
static void check_placement(void *addr, size_t len, int node)
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

static void test_chunk_register_once(void **state)
{
    const size_t chunk = 64 * KIB;
    rv_mem_chunk_t *c[8], *again, *region;
    (void)state;

    mock_reset(false);
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
        assert_true(registered(c[i]->addr, chunk));
        memset(c[i]->addr, i, chunk);
    }
    assert_int_equal(mock.registers, 8);
    assert_int_equal(mock.packs, 8);
    assert_int_equal(mock.allocs, 0);
    assert_int_equal(mock.overlaps, 0);

    /* A freed chunk comes back registered: no new registration. */
    rv_mem_chunk_free(a, c[3]);
    assert_int_equal(rv_mem_chunk_alloc(a, 1, &again), RV_OK);
    assert_ptr_equal(again, c[3]);
    assert_int_equal(mock.registers, 8);

    /* A region of 3 chunks is one registration, gone when freed. */
    assert_int_equal(rv_mem_chunk_alloc(a, 3, &region), RV_OK);
    assert_int_equal(region->len, 3 * chunk);
    assert_int_equal(mock.registers, 9);
    rv_mem_stats_t s = rv_mem_chunk_stats(a);
    assert_int_equal(s.bytes_reserved, 11 * chunk);
    assert_int_equal(s.bytes_registered, 11 * chunk);
    assert_int_equal(s.bytes_in_use, 11 * chunk);
    assert_int_equal(s.registrations, 9);
    assert_int_equal(s.chunks[RV_MEM_PAGE_NORMAL], 11);
    rv_mem_chunk_free(a, region);
    assert_int_equal(mock.deregisters, 1);

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
    assert_int_equal(mock.registers, 9);

    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(mock.deregisters, 9);
    assert_int_equal(mock.releases, mock.packs);
    assert_int_equal(mock.nlive, 0);
}

/* The transport path: chunks from ops->mem_alloc, never mem_register. */
static void test_chunk_transport_source(void **state)
{
    const size_t chunk = 2 * MIB;
    rv_mem_chunk_t *c[3];
    (void)state;

    mock_reset(true);
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_TRANSPORT, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rv_mem_chunk_alloc(a, 1, &c[i]), RV_OK);
        assert_int_equal(c[i]->kind, RV_MEM_PAGE_TRANSPORT);
        assert_int_equal(c[i]->numa_node, 0);
        check_placement(c[i]->addr, chunk, 0);
    }
    assert_int_equal(mock.allocs, 3);
    assert_int_equal(mock.registers, 0);
    rv_mem_stats_t s = rv_mem_chunk_stats(a);
    assert_int_equal(s.registrations, 3);
    assert_int_equal(s.chunks[RV_MEM_PAGE_TRANSPORT], 3);
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(mock.deregisters, 3);
    assert_int_equal(mock.releases, 3);

    /* AUTO follows caps.mem_alloc_mapped, unless huge pages are required. */
    a = make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_AUTO, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_TRANSPORT);
    rv_mem_chunk_allocator_destroy(a);
    a = make_chunks(chunk, RV_HUGE_REQUIRE, RV_MEM_SOURCE_AUTO, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_MMAP);
    rv_mem_chunk_allocator_destroy(a);
    mock_reset(false);
    a = make_chunks(chunk, RV_HUGE_AUTO, RV_MEM_SOURCE_AUTO, -1);
    assert_int_equal(rv_mem_chunk_source(a), RV_MEM_SOURCE_MMAP);
    rv_mem_chunk_allocator_destroy(a);
}

static void test_chunk_bad_params(void **state)
{
    rv_mem_chunk_params_t p = {
        .ops = &mock_ops,
        .numa_node = -1,
        .chunk_size = 2 * MIB,
        .huge_pages = RV_HUGE_AUTO,
        .source = RV_MEM_SOURCE_MMAP,
    };
    rv_mem_chunk_allocator_t *a = NULL;
    char err[4096];
    (void)state;

    mock_reset(false);
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
static void test_numa_placement(void **state)
{
    const size_t chunk = 2 * MIB;
    rv_mem_chunk_t *c, *region;
    (void)state;

    if (numa_available() < 0) {
        print_message("no NUMA support in this kernel: placement not "
                      "checked\n");
        return;
    }
    for (int node = 0; node <= numa_max_node(); node++) {
        if (!numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node))
            continue;
        mock_reset(false);
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

/*
 * No huge pages reserved: auto falls back to transparent huge pages (or
 * normal pages) and says so once per process at info level; off uses normal
 * pages silently. Run in a child so that "once per process" is this test's.
 */
static void test_huge_fallback(void **state)
{
    int pipefd[2];
    (void)state;

    long free2m = read_long(HUGE_2M_DIR "free_hugepages");
    if (free2m > 0)
        print_message("%ld 2MiB huge pages are free: auto takes them\n",
                      free2m);

    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fails = 0;
        rv_mem_chunk_t *c;
        close(pipefd[0]);
        dup2(pipefd[1], STDERR_FILENO);
        rv_log_level = RV_LOG_INFO;
        mock_reset(false);

#define CHILD_CHECK(cond)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "CHILD FAILED line %d: %s\n", __LINE__, #cond);    \
            fails++;                                                           \
        }                                                                      \
    } while (0)

        rv_mem_chunk_params_t p = {
            .ops = &mock_ops,
            .numa_node = 0,
            .chunk_size = 2 * MIB,
            .huge_pages = RV_HUGE_OFF,
            .source = RV_MEM_SOURCE_MMAP,
        };
        rv_mem_chunk_allocator_t *off, *a1, *a2;
        CHILD_CHECK(rv_mem_chunk_allocator_create(&p, &off) == RV_OK);
        CHILD_CHECK(rv_mem_chunk_alloc(off, 1, &c) == RV_OK);
        CHILD_CHECK(c->kind == RV_MEM_PAGE_NORMAL);
        p.huge_pages = RV_HUGE_AUTO;
        CHILD_CHECK(rv_mem_chunk_allocator_create(&p, &a1) == RV_OK);
        p.numa_node = -1;
        CHILD_CHECK(rv_mem_chunk_allocator_create(&p, &a2) == RV_OK);
        for (int i = 0; i < 3; i++) {
            CHILD_CHECK(rv_mem_chunk_alloc(a1, 1, &c) == RV_OK);
            CHILD_CHECK(rv_mem_chunk_alloc(a2, 1, &c) == RV_OK);
        }
        rv_mem_stats_t s1 = rv_mem_chunk_stats(a1);
        rv_mem_stats_t s2 = rv_mem_chunk_stats(a2);
        rv_mem_stats_t so = rv_mem_chunk_stats(off);
        CHILD_CHECK(so.chunks[RV_MEM_PAGE_NORMAL] == 1);
        if (free2m <= 0) {
            rv_mem_page_kind_t want =
                thp_possible() ? RV_MEM_PAGE_THP : RV_MEM_PAGE_NORMAL;
            CHILD_CHECK(s1.chunks[want] == 3 && s2.chunks[want] == 3);
            CHILD_CHECK(s1.chunks[RV_MEM_PAGE_2M] == 0);
            CHILD_CHECK(s1.chunks[RV_MEM_PAGE_1G] == 0);
        } else {
            CHILD_CHECK(s1.chunks[RV_MEM_PAGE_2M] > 0);
        }
        CHILD_CHECK(s1.registrations == 3 && s2.registrations == 3);
        rv_mem_chunk_allocator_destroy(off);
        rv_mem_chunk_allocator_destroy(a1);
        rv_mem_chunk_allocator_destroy(a2);
        CHILD_CHECK(mock.nlive == 0);
        fflush(stderr);
        _exit(fails == 0 ? 0 : 1);
    }
    close(pipefd[1]);
    char out[16384];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(out) - 1 &&
           (n = read(pipefd[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(pipefd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    fprintf(stderr, "%s", out);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    if (free2m <= 0) {
        assert_int_equal(count_lines_with(out, "info: registered memory: no "
                                               "huge pages"),
                         1);
        assert_non_null(strstr(out, "mmap MAP_HUGETLB 2MiB"));
        assert_non_null(strstr(out, "/proc/sys/vm/nr_hugepages"));
        assert_non_null(strstr(out, thp_possible() ? "transparent huge pages"
                                                   : "normal pages"));
    }
}

/* require with no huge pages free fails clearly, naming the way out. */
static void test_huge_require_fails(void **state)
{
    rv_mem_chunk_t *c = NULL;
    char err[4096];
    (void)state;

    if (read_long(HUGE_2M_DIR "free_hugepages") > 0) {
        print_message("2MiB huge pages are free: require cannot fail\n");
        return;
    }
    mock_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(2 * MIB, RV_HUGE_REQUIRE, RV_MEM_SOURCE_MMAP, 0);
    capture_begin();
    assert_int_equal(rv_mem_chunk_alloc(a, 1, &c), RV_ERR_NO_MEMORY);
    capture_end(err, sizeof(err));
    assert_null(c);
    assert_non_null(strstr(err, "error: memory.huge_pages is require"));
    assert_non_null(strstr(err, "nr_hugepages"));
    assert_int_equal(mock.registers, 0);
    rv_mem_stats_t s = rv_mem_chunk_stats(a);
    assert_int_equal(s.bytes_reserved, 0);
    rv_mem_chunk_allocator_destroy(a);
}

/* The real MAP_HUGETLB path, as root: reserve a few 2 MiB pages, take
 * chunks from them, give them back. */
#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"
static long saved_nr_hugepages = -1;

static int write_nr_hugepages(long v)
{
    FILE *f = fopen(NR_HUGEPAGES, "w");
    if (f == NULL)
        return -1;
    int rc = fprintf(f, "%ld\n", v) < 0;
    rc |= fclose(f) != 0;
    return rc ? -1 : 0;
}

static int huge_teardown(void **state)
{
    (void)state;
    if (saved_nr_hugepages >= 0) {
        if (write_nr_hugepages(saved_nr_hugepages) != 0)
            fprintf(stderr, "cannot restore %s to %ld: %s\n", NR_HUGEPAGES,
                    saved_nr_hugepages, strerror(errno));
        saved_nr_hugepages = -1;
    }
    return 0;
}

/* The KernelPageSize (kB) of the mapping holding @p addr, or -1. */
static long kernel_page_kb(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    bool in = false;
    long kb = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        /* A mapping's header line ("lo-hi perms ..."); field lines
         * ("Name:  value") never parse as two hex numbers. */
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

static void test_huge_real(void **state)
{
    const long want = 4;
    rv_mem_chunk_t *c[2], *region;
    (void)state;

    if (geteuid() != 0) {
        print_message(
            "not root: cannot reserve huge pages through " NR_HUGEPAGES
            "; the MAP_HUGETLB path is not tested\n");
        skip();
    }
    long old = read_long(NR_HUGEPAGES);
    long free0 = read_long(HUGE_2M_DIR "free_hugepages");
    assert_true(old >= 0 && free0 >= 0);
    saved_nr_hugepages = old;
    assert_int_equal(write_nr_hugepages(old + want), 0);
    long free1 = read_long(HUGE_2M_DIR "free_hugepages");
    assert_true(free1 >= free0 + want);

    mock_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(2 * MIB, RV_HUGE_REQUIRE, RV_MEM_SOURCE_MMAP, 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rv_mem_chunk_alloc(a, 1, &c[i]), RV_OK);
        assert_int_equal(c[i]->kind, RV_MEM_PAGE_2M);
        assert_int_equal((uintptr_t)c[i]->addr % (2 * MIB), 0);
        assert_int_equal(kernel_page_kb(c[i]->addr), 2048);
        check_placement(c[i]->addr, c[i]->len, 0);
        memset(c[i]->addr, 0xa5, c[i]->len);
    }
    assert_int_equal(rv_mem_chunk_alloc(a, 2, &region), RV_OK);
    assert_int_equal(region->kind, RV_MEM_PAGE_2M);
    assert_int_equal(kernel_page_kb(region->addr), 2048);
    assert_int_equal(read_long(HUGE_2M_DIR "free_hugepages"), free1 - 4);
    rv_mem_stats_t s = rv_mem_chunk_stats(a);
    assert_int_equal(s.chunks[RV_MEM_PAGE_2M], 4);
    assert_int_equal(s.registrations, 3);
    /* The reservation is used up: require fails, auto falls back. */
    rv_mem_chunk_t *more = NULL;
    if (free0 == 0) {
        char err[4096];
        capture_begin();
        assert_int_equal(rv_mem_chunk_alloc(a, 1, &more), RV_ERR_NO_MEMORY);
        capture_end(err, sizeof(err));
        assert_non_null(strstr(err, "memory.huge_pages is require"));
    }
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(read_long(HUGE_2M_DIR "free_hugepages"), free1);
    assert_int_equal(mock.deregisters, 3);
}

/* ---------------------------------------------------------------------- */
/* Circular and linear-circular                                            */

static uint64_t done_seq[4];

static bool test_completed(void *arg, uint32_t channel, uint64_t seq)
{
    (void)arg;
    return channel < 4 && done_seq[channel] >= seq;
}

static void test_circular_recycle(void **state)
{
    const size_t chunk = 64 * KIB, unit = 4 * KIB;
    rv_mem_unit_t *u[32], *x;
    (void)state;

    mock_reset(false);
    memset(done_seq, 0, sizeof(done_seq));
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_circular_params_t p = {
        .chunks = a,
        .unit_size = unit,
        .max_units = 32,
        .completed = test_completed,
    };
    rv_mem_circular_t *c = NULL;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_OK);
    assert_int_equal(mock.registers, 1);

    /* 16 units from the first chunk, in address order, tagged with
     * alternating channels and freed. */
    for (int i = 0; i < 16; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u[i]), RV_OK);
        assert_int_equal(u[i]->len, unit);
        assert_ptr_equal(u[i]->addr, (char *)u[0]->chunk->addr + i * unit);
        assert_true(registered(u[i]->addr, unit));
        rv_mem_circular_tag(u[i], (uint32_t)(i % 2), (uint64_t)(i / 2 + 1));
        rv_mem_circular_free(c, u[i]);
    }
    /* None complete: the ring grows by a chunk (one more registration). */
    for (int i = 16; i < 32; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &u[i]), RV_OK);
        assert_ptr_not_equal(u[i]->chunk, u[0]->chunk);
        assert_true(registered(u[i]->addr, unit));
    }
    assert_int_equal(mock.registers, 2);
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
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[0]);
    rv_mem_circular_free(c, x);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[1]);
    rv_mem_circular_free(c, x);
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_ERR_AGAIN);
    /* One completion recycles every unit up to it (a flush number). */
    done_seq[0] = done_seq[1] = 8;
    for (int i = 2; i < 16; i++) {
        assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
        assert_ptr_equal(x, u[i]);
        rv_mem_circular_free(c, x);
    }
    /* Then the second chunk's units, then the first's again. */
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[16]);
    rv_mem_circular_free(c, x);
    assert_int_equal(mock.registers, 2);

    rv_mem_circular_destroy(c);
    rv_mem_stats_t cs = rv_mem_chunk_stats(a);
    assert_int_equal(cs.bytes_in_use, 0);
    assert_int_equal(cs.bytes_reserved, 2 * chunk); /* cached */
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(mock.nlive, 0);
}

/* The same protocol driven by a completed-sequence array. */
static void test_circular_seq_array(void **state)
{
    _Atomic uint64_t completed[2] = {0, 0};
    rv_mem_unit_t *u[4], *x;
    (void)state;

    mock_reset(false);
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
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, u[0]);
    rv_mem_circular_free(c, x);
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

static void test_linear(void **state)
{
    const size_t chunk = 64 * KIB, unit = 4 * KIB;
    rv_mem_unit_t *un, *first_unit = NULL, *cur = NULL;
    void *addr, *prev = NULL;
    size_t prev_len = 0;
    uint64_t seq = 0, last_seq_of_first = 0;
    int units_seen = 0;
    rv_status_t st;
    (void)state;

    mock_reset(false);
    memset(done_seq, 0, sizeof(done_seq));
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_circular_params_t p = {
        .chunks = a,
        .unit_size = unit,
        .max_units = 16,
        .completed = test_completed,
    };
    rv_mem_circular_t *c = NULL;
    rv_mem_linear_t *l = NULL;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_OK);
    assert_int_equal(rv_mem_linear_create(c, &l), RV_OK);

    /* Records of 100 bytes, 8-aligned: packed back to back (104 bytes
     * apart), 39 per unit, then the next unit. */
    while ((st = rv_mem_linear_alloc(l, 100, 8, &addr, &un)) == RV_OK) {
        seq++;
        assert_int_equal((uintptr_t)addr % 8, 0);
        assert_true((char *)addr >= (char *)un->addr &&
                    (char *)addr + 100 <= (char *)un->addr + unit);
        assert_true(registered(addr, 100));
        if (un != cur) {
            /* rollover: the new unit starts at its beginning */
            assert_ptr_equal(addr, un->addr);
            if (cur != NULL)
                assert_int_equal((char *)prev + prev_len + 104 >
                                     (char *)cur->addr + unit,
                                 1);
            cur = un;
            units_seen++;
            if (first_unit == NULL)
                first_unit = un;
        } else {
            assert_ptr_equal(addr, (char *)prev + 104);
        }
        if (un == first_unit)
            last_seq_of_first = seq;
        memset(addr, (int)seq, 100);
        rv_mem_circular_tag(un, 0, seq); /* "posted" */
        prev = addr;
        prev_len = 100;
    }
    assert_int_equal(st, RV_ERR_AGAIN);
    assert_int_equal(units_seen, 16);
    assert_int_equal(last_seq_of_first, 39);
    assert_int_equal(mock.registers, 1);

    /* The first unit comes back only once its last record completed. */
    done_seq[0] = last_seq_of_first - 1;
    assert_int_equal(rv_mem_linear_alloc(l, 100, 8, &addr, &un), RV_ERR_AGAIN);
    done_seq[0] = last_seq_of_first;
    assert_int_equal(rv_mem_linear_alloc(l, 100, 8, &addr, &un), RV_OK);
    assert_ptr_equal(un, first_unit);
    assert_ptr_equal(addr, first_unit->addr);

    /* Alignment, and sizes that cannot fit. */
    assert_int_equal(rv_mem_linear_alloc(l, 1, 64, &addr, NULL), RV_OK);
    assert_int_equal((uintptr_t)addr % 64, 0);
    assert_int_equal(rv_mem_linear_alloc(l, unit + 1, 8, &addr, NULL),
                     RV_ERR_INVALID);
    assert_int_equal(rv_mem_linear_alloc(l, 8, 3, &addr, NULL), RV_ERR_INVALID);
    /* A whole unit. */
    done_seq[0] = seq;
    assert_int_equal(rv_mem_linear_alloc(l, unit, 8, &addr, &un), RV_OK);
    assert_ptr_equal(addr, un->addr);

    rv_mem_linear_destroy(l);
    rv_mem_stats_t s = rv_mem_circular_stats(c);
    assert_int_equal(s.bytes_in_use, 0); /* all completed */
    rv_mem_circular_destroy(c);
    rv_mem_chunk_allocator_destroy(a);
}

/* ---------------------------------------------------------------------- */
/* General allocator                                                       */

typedef struct live {
    char *addr;
    size_t len;
    unsigned char fill;
    const rv_mem_chunk_t *chunk;
} live_t;

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Randomized alloc/free against a shadow list: no overlap (checked
 * against every live allocation, and by fill patterns), alignment,
 * registration, stats. */
static void test_general_random(void **state)
{
    const size_t chunk = 64 * KIB;
    enum { NLIVE = 300, OPS = 20000 };
    live_t lv[NLIVE];
    int nlive = 0;
    uint64_t expect_in_use = 0;
    unsigned seed = 12345;
    (void)state;

    mock_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_general_t *g = NULL;
    assert_int_equal(rv_mem_general_create(a, &g), RV_OK);

    for (int op = 0; op < OPS; op++) {
        bool do_alloc = nlive == 0 || (nlive < NLIVE && rand_r(&seed) % 5 < 3);
        if (do_alloc) {
            size_t len, align;
            unsigned r = (unsigned)rand_r(&seed);
            if (r % 100 == 0)
                len = chunk + (size_t)rand_r(&seed) % (2 * chunk); /* region */
            else if (r % 10 == 0)
                len = 1 + (size_t)rand_r(&seed) % chunk;
            else
                len = 1 + (size_t)rand_r(&seed) % 2000;
            align = (size_t)1 << (rand_r(&seed) % 17); /* 1 .. 64 KiB */
            if (rand_r(&seed) % 4 == 0)
                align = 0;
            void *p = NULL;
            const rv_mem_chunk_t *ch = NULL;
            assert_int_equal(rv_mem_general_alloc(g, len, align, &p, &ch),
                             RV_OK);
            char *cp = p;
            size_t eff =
                align < RV_MEM_GENERAL_GRANULE ? RV_MEM_GENERAL_GRANULE : align;
            assert_int_equal((uintptr_t)cp % eff, 0);
            assert_true(cp >= (char *)ch->addr &&
                        cp + len <= (char *)ch->addr + ch->len);
            assert_true(registered(cp, len));
            assert_ptr_equal(rv_mem_general_lookup(g, cp), ch);
            for (int i = 0; i < nlive; i++)
                assert_true(cp + len <= lv[i].addr ||
                            lv[i].addr + lv[i].len <= cp);
            unsigned char fill = (unsigned char)(op * 7 + 1);
            memset(cp, fill, len);
            lv[nlive++] = (live_t){cp, len, fill, ch};
            expect_in_use += len > chunk ? ch->len : round_up(len, 64);
        } else {
            int i = rand_r(&seed) % nlive;
            for (size_t k = 0; k < lv[i].len; k += 61)
                assert_int_equal((unsigned char)lv[i].addr[k], lv[i].fill);
            assert_int_equal((unsigned char)lv[i].addr[lv[i].len - 1],
                             lv[i].fill);
            /* (a region's descriptor goes with it: read it first) */
            expect_in_use -=
                lv[i].len > chunk ? lv[i].chunk->len : round_up(lv[i].len, 64);
            rv_mem_general_free(g, lv[i].addr);
            lv[i] = lv[--nlive];
        }
        if (op % 1000 == 0) {
            rv_mem_stats_t gs = rv_mem_general_stats(g);
            rv_mem_stats_t cs = rv_mem_chunk_stats(a);
            assert_int_equal(gs.bytes_in_use, expect_in_use);
            assert_int_equal(gs.bytes_reserved, cs.bytes_in_use);
            assert_true(cs.bytes_reserved >= cs.bytes_in_use);
            assert_int_equal(cs.registrations, (uint64_t)mock.registers);
            assert_int_equal(mock.overlaps, 0);
        }
    }
    /* Freeing everything leaves one free block per chunk. */
    while (nlive > 0)
        rv_mem_general_free(g, lv[--nlive].addr);
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
    rv_mem_general_free(g, (char *)lv[0].addr + 64);
    capture_end(err, sizeof(err));
    assert_non_null(strstr(err, "was not allocated here"));

    rv_mem_general_trim(g);
    gs = rv_mem_general_stats(g);
    assert_int_equal(gs.bytes_reserved, 0);
    assert_int_equal(rv_mem_chunk_stats(a).bytes_in_use, 0);
    rv_mem_general_destroy(g);
    rv_mem_chunk_allocator_destroy(a);
    assert_int_equal(mock.deregisters, mock.registers);
    assert_int_equal(mock.nlive, 0);
}

/* Coalescing in detail: neighbours merge on either side. */
static void test_general_coalesce(void **state)
{
    const size_t chunk = 64 * KIB;
    void *p[8];
    (void)state;

    mock_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_general_t *g = NULL;
    assert_int_equal(rv_mem_general_create(a, &g), RV_OK);
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
    assert_int_equal(mock.registers, 1);

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

static void test_general_threads(void **state)
{
    gthread_t t[4];
    pthread_t th[4];
    (void)state;

    mock_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(64 * KIB, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_general_t *g = NULL;
    assert_int_equal(rv_mem_general_create(a, &g), RV_OK);
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
    assert_int_equal(mock.overlaps, 0);
    rv_mem_general_destroy(g);
    rv_mem_chunk_allocator_destroy(a);
}

/* Statistics add up across sub-allocators sharing one chunk allocator. */
static void test_stats_add_up(void **state)
{
    const size_t chunk = 64 * KIB;
    (void)state;

    mock_reset(false);
    memset(done_seq, 0, sizeof(done_seq));
    rv_mem_chunk_allocator_t *a =
        make_chunks(chunk, RV_HUGE_OFF, RV_MEM_SOURCE_MMAP, -1);
    rv_mem_circular_params_t p = {
        .chunks = a,
        .unit_size = 16 * KIB,
        .completed = test_completed,
    };
    rv_mem_circular_t *c;
    rv_mem_general_t *g;
    rv_mem_linear_t *l;
    rv_mem_unit_t *u;
    void *x;
    assert_int_equal(rv_mem_circular_create(&p, &c), RV_OK);
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
    assert_int_equal(cs.registrations, (uint64_t)mock.registers);
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

/* ---------------------------------------------------------------------- */
/* The real UCX plugin                                                     */

static void test_ucx(void **state)
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

int main(void)
{
    /* test_huge_fallback comes first: the fallback is reported once per
     * process, and its child inherits this process's "reported" state, so
     * nothing may take a chunk with huge_pages auto before it. */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_fallback),
        cmocka_unit_test(test_chunk_register_once),
        cmocka_unit_test(test_chunk_transport_source),
        cmocka_unit_test(test_chunk_bad_params),
        cmocka_unit_test(test_numa_placement),
        cmocka_unit_test(test_huge_require_fails),
        cmocka_unit_test_teardown(test_huge_real, huge_teardown),
        cmocka_unit_test(test_circular_recycle),
        cmocka_unit_test(test_circular_seq_array),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_general_random),
        cmocka_unit_test(test_general_coalesce),
        cmocka_unit_test(test_general_threads),
        cmocka_unit_test(test_stats_add_up),
        cmocka_unit_test(test_ucx),
    };
    return cmocka_run_group_tests_name("mem", tests, NULL, NULL);
}
