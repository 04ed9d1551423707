/*
 * The chunk allocator's huge pages (mem_test.h): the fallback when none are
 * reserved, require failing clearly, and the real MAP_HUGETLB path when run
 * as root (reserving a few pages and giving them back).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mem_test.h"
#include "rv_core.h"
#include "stderr_capture.h"

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

#define CHILD_CHECK(cond)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "CHILD FAILED line %d: %s\n", __LINE__, #cond);    \
            fails++;                                                           \
        }                                                                      \
    } while (0)

/* The child of test_huge_fallback, its stderr on @p fd: chunks with huge
 * pages off and auto (@p free2m huge pages free); exits 0 when every check
 * held. */
static void huge_fallback_child(int fd, long free2m)
    __attribute__((noreturn));
static void huge_fallback_child(int fd, long free2m)
{
    int fails = 0;
    rv_mem_chunk_t *c;
    dup2(fd, STDERR_FILENO);
    rv_log_level = RV_LOG_INFO;
    loop_mem_reset(false);

    rv_mem_chunk_params_t p = {
        .ops = &loop_ops,
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
    CHILD_CHECK(loop_mem.nlive == 0);
    fflush(stderr);
    _exit(fails == 0 ? 0 : 1);
}

/* Reads @p fd to its end, into the string @p out of @p size bytes. */
static void read_all(int fd, char *out, size_t size)
{
    size_t len = 0;
    ssize_t n;
    while (len < size - 1 &&
           (n = read(fd, out + len, size - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
}

/*
 * No huge pages reserved: auto falls back to transparent huge pages (or
 * normal pages) and says so once per process at info level; off uses normal
 * pages silently. Run in a child so that "once per process" is this test's.
 */
void test_huge_fallback(void **state)
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
        close(pipefd[0]);
        huge_fallback_child(pipefd[1], free2m);
    }
    close(pipefd[1]);
    char out[16384];
    read_all(pipefd[0], out, sizeof(out));
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
void test_huge_require_fails(void **state)
{
    rv_mem_chunk_t *c = NULL;
    char err[4096];
    (void)state;

    if (read_long(HUGE_2M_DIR "free_hugepages") > 0) {
        print_message("2MiB huge pages are free: require cannot fail\n");
        mem_skip();
    }
    loop_mem_reset(false);
    rv_mem_chunk_allocator_t *a =
        make_chunks(2 * MIB, RV_HUGE_REQUIRE, RV_MEM_SOURCE_MMAP, 0);
    capture_begin();
    assert_int_equal(rv_mem_chunk_alloc(a, 1, &c), RV_ERR_NO_MEMORY);
    capture_end(err, sizeof(err));
    assert_null(c);
    assert_non_null(strstr(err, "error: memory.huge_pages is require"));
    assert_non_null(strstr(err, "nr_hugepages"));
    assert_int_equal(loop_mem.registers, 0);
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

int huge_teardown(void **state)
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

void test_huge_real(void **state)
{
    const long want = 4;
    rv_mem_chunk_t *c[2], *region;
    (void)state;

    if (geteuid() != 0) {
        print_message(
            "not root: cannot reserve huge pages through " NR_HUGEPAGES
            "; the MAP_HUGETLB path is not tested\n");
        mem_skip();
    }
    long old = read_long(NR_HUGEPAGES);
    long free0 = read_long(HUGE_2M_DIR "free_hugepages");
    assert_true(old >= 0 && free0 >= 0);
    saved_nr_hugepages = old;
    assert_int_equal(write_nr_hugepages(old + want), 0);
    long free1 = read_long(HUGE_2M_DIR "free_hugepages");
    assert_true(free1 >= free0 + want);

    loop_mem_reset(false);
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
    assert_int_equal(loop_mem.deregisters, 3);
    if (free0 != 0) {
        /* Huge pages free before ours: require succeeds past our
         * reservation, so its failure is not checked, and says so. */
        print_message("%ld 2MiB huge pages were free before the test's "
                      "reservation: require past it not checked\n", free0);
        mem_skip();
    }
}
