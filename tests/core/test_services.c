/*
 * The services core gives transport plugins (rv_transport_services_t):
 * the table itself, the device locality query against sysfs-like folders
 * written here (a local_cpus file as the kernel writes it) with the
 * calling thread bound to chosen CPUs, and the registered-memory
 * allocators called through the table over the loop transport. Each binding
 * runs in a thread of its own, so the test itself stays unbound.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop_transport.h"
#include "mem_check.h"
#include "rv_core.h"
#include "rv_regmem.h"

#define CPU_MASK_WORD_BITS 32 /* local_cpus: comma-separated 32-bit words */

static const rv_transport_services_t *svc = &rv__transport_services;
static int cpu_a = -1, cpu_b = -1; /* two CPUs this process may run on */
static char dir[64];               /* a device's folder, as in sysfs */

/* Writes @p cpus (a bit per CPU, lowest first) to dir/local_cpus in the
 * kernel's format: hex words of 32 bits, most significant first. */
static void write_local_cpus(const int *cpus, int n)
{
    uint32_t words[CPU_SETSIZE / CPU_MASK_WORD_BITS] = {0};
    int top = 0;
    for (int i = 0; i < n; i++) {
        words[cpus[i] / CPU_MASK_WORD_BITS] |=
            UINT32_C(1) << (cpus[i] % CPU_MASK_WORD_BITS);
        if (cpus[i] / CPU_MASK_WORD_BITS > top)
            top = cpus[i] / CPU_MASK_WORD_BITS;
    }
    char path[128];
    snprintf(path, sizeof(path), "%s/local_cpus", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int w = top; w >= 0; w--)
        fprintf(f, "%08x%s", words[w], w > 0 ? "," : "\n");
    fclose(f);
}

static void remove_local_cpus(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/local_cpus", dir);
    unlink(path);
}

typedef struct {
    int cpus[2];
    int ncpus;
    const char *dir;
    rv_locality_t loc;
} query_t;

static void *query_main(void *arg)
{
    query_t *q = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < q->ncpus; i++)
        CPU_SET(q->cpus[i], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
        return q;
    q->loc = svc->device_locality(q->dir);
    return NULL;
}

/* The locality of dir's device from a thread bound to @p ncpus CPUs. */
static rv_locality_t locality_from(int c0, int c1, int ncpus,
                                   const char *where)
{
    query_t q = {.cpus = {c0, c1}, .ncpus = ncpus, .dir = where,
                 .loc = (rv_locality_t)-1};
    pthread_t t;
    void *failed;
    assert_int_equal(pthread_create(&t, NULL, query_main, &q), 0);
    assert_int_equal(pthread_join(t, &failed), 0);
    assert_null(failed);
    return q.loc;
}

static void test_table(void **state)
{
    (void)state;
    assert_int_equal(svc->version, RV_TRANSPORT_SERVICES_VERSION);
    assert_int_equal(svc->size, sizeof(rv_transport_services_t));
    assert_true(RV_TRANSPORT_SERVICES_HAS(svc, mem_general_stats));
    assert_false(RV_TRANSPORT_SERVICES_HAS(
        (const rv_transport_services_t *)NULL, device_locality));
    /* a shorter table (an older core's) lacks the members past its size */
    rv_transport_services_t old = *svc;
    old.size = (uint32_t)offsetof(rv_transport_services_t, mem_chunk_free);
    assert_true(RV_TRANSPORT_SERVICES_HAS(&old, mem_chunk_alloc));
    assert_false(RV_TRANSPORT_SERVICES_HAS(&old, mem_chunk_free));
    assert_non_null(svc->device_locality);
    assert_non_null(svc->mem_chunk_params_init);
    assert_non_null(svc->mem_general_stats);
}

static void test_locality_one_cpu(void **state)
{
    (void)state;
    int both[] = {cpu_a, cpu_b};
    write_local_cpus(&cpu_a, 1);
    assert_int_equal(locality_from(cpu_a, -1, 1, dir), RV_LOCALITY_FULL);
    if (cpu_b < 0)
        skip(); /* one CPU: nothing can be remote */
    assert_int_equal(locality_from(cpu_b, -1, 1, dir), RV_LOCALITY_NONE);
    write_local_cpus(both, 2);
    assert_int_equal(locality_from(cpu_b, -1, 1, dir), RV_LOCALITY_FULL);
}

static void test_locality_two_cpus(void **state)
{
    (void)state;
    if (cpu_b < 0)
        skip();
    int both[] = {cpu_a, cpu_b};
    write_local_cpus(&cpu_a, 1);
    assert_int_equal(locality_from(cpu_a, cpu_b, 2, dir),
                     RV_LOCALITY_PARTIAL);
    write_local_cpus(both, 2);
    assert_int_equal(locality_from(cpu_a, cpu_b, 2, dir), RV_LOCALITY_FULL);
}

/* A device without locality (no local_cpus, or an empty mask, as virtual
 * devices have) is local to every CPU; a query without a folder cannot
 * tell. */
static void test_locality_unknown(void **state)
{
    (void)state;
    int c1 = cpu_b < 0 ? -1 : cpu_b;
    remove_local_cpus();
    assert_int_equal(locality_from(cpu_a, -1, 1, dir), RV_LOCALITY_FULL);
    write_local_cpus(NULL, 0);
    assert_int_equal(locality_from(cpu_a, c1, c1 < 0 ? 1 : 2, dir),
                     RV_LOCALITY_FULL);
    assert_int_equal(locality_from(cpu_a, -1, 1, NULL), RV_LOCALITY_PARTIAL);
}

/* The allocators, called through the table as a plugin calls them. */
static void test_allocators(void **state)
{
    (void)state;
    rv_mem_chunk_params_t cp;
    rv_config_t *cfg;
    rv_mem_chunk_allocator_t *chunks;
    rv_mem_general_t *gen;
    const rv_mem_chunk_t *chunk;
    void *p;
    loop_mem_reset(false);
    assert_int_equal(rv_config_load(NULL, &cfg, NULL, 0), RV_OK);
    svc->mem_chunk_params_init(&cp, cfg, &loop_ops, NULL, -1);
    cp.huge_pages = RV_HUGE_OFF;
    cp.source = RV_MEM_SOURCE_MMAP;
    assert_int_equal(svc->mem_chunk_allocator_create(&cp, &chunks), RV_OK);
    assert_int_equal(svc->mem_general_create(chunks, &gen), RV_OK);
    assert_int_equal(svc->mem_general_alloc(gen, 100, 0, &p, &chunk), RV_OK);
    assert_ptr_equal(svc->mem_general_lookup(gen, p), chunk);
    assert_int_equal(loop_mem.registers, 1);
    memset(p, 0xab, 100);
    assert_true(svc->mem_general_stats(gen).bytes_in_use >= 100);
    svc->mem_general_free(gen, p);
    assert_int_equal(svc->mem_general_stats(gen).bytes_in_use, 0);
    svc->mem_general_destroy(gen);
    svc->mem_chunk_allocator_destroy(chunks);
    rv_config_free(cfg);
    assert_int_equal(loop_mem.deregisters, loop_mem.registers);
}

static int setup(void **state)
{
    cpu_set_t set;
    (void)state;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE && cpu_b < 0; c++)
        if (CPU_ISSET(c, &set))
            *(cpu_a < 0 ? &cpu_a : &cpu_b) = c;
    snprintf(dir, sizeof(dir), "/tmp/rivet-services-XXXXXX");
    return cpu_a >= 0 && mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    remove_local_cpus();
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_locality_one_cpu),
        cmocka_unit_test(test_locality_two_cpus),
        cmocka_unit_test(test_locality_unknown),
        cmocka_unit_test(test_allocators),
    };
    return cmocka_run_group_tests_name("services", tests, setup, teardown);
}
