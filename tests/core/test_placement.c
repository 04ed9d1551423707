/*
 * Placement on hwloc: where threads and processes land for each
 * job.placement, what rv__placement_describe reports, argument checks.
 * Each binding runs in its own thread or child so the test stays unbound.
 */
#include <pthread.h>
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
#include <hwloc.h>

#include "rv_placement.h"

static int ncores;      /* cores (or PUs) hwloc sees */
static const char *unit = "core"; /* what core placement binds to */
static int nnuma;       /* NUMA zones with cpus */

typedef struct bind_case {
    rv_placement_t placement;
    int local_rank, threads, thread;
    rv_status_t status;
    int numa;
    char where[256];
} bind_case_t;

static void *bind_main(void *arg)
{
    bind_case_t *c = arg;

    c->numa = -2;
    c->status = rv__placement_bind_thread(c->placement, c->local_rank,
                                          c->threads, c->thread, &c->numa);
    rv__placement_describe(c->where, sizeof(c->where));
    return NULL;
}

static void bind_in_thread(bind_case_t *c)
{
    pthread_t t;

    assert_int_equal(pthread_create(&t, NULL, bind_main, c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static void test_core(void **state)
{
    (void)state;
    if (ncores < 2) {
        print_message("one core: every thread lands on it, so where each "
                      "thread goes is not checked\n");
        skip();
    }
    /* Thread t of local process r gets core (r * threads + t) % ncores:
     * exactly that core, or that PU where hwloc sees no cores. */
    for (int r = 0; r < 3; r++) {
        for (int t = 0; t < 2; t++) {
            bind_case_t c = {RV_PLACEMENT_CORE, r, 2, t, 0, 0, ""};
            char want[64];

            bind_in_thread(&c);
            assert_int_equal(c.status, RV_OK);
            snprintf(want, sizeof(want), "%s %d ", unit, (r * 2 + t) % ncores);
            if (strncmp(c.where, want, strlen(want)) != 0)
                fail_msg("rank %d thread %d: \"%s\", expected \"%s...\"", r, t,
                         c.where, want);
            assert_true(c.numa >= 0);
        }
    }
}

static void test_numa(void **state)
{
    bind_case_t c = {RV_PLACEMENT_NUMA, 0, 4, 3, 0, 0, ""};

    (void)state;
    bind_in_thread(&c);
    assert_int_equal(c.status, RV_OK);
    assert_true(c.numa >= 0);
    if (nnuma == 1 && ncores > 1)
        assert_non_null(strstr(c.where, "(numa 0)"));
}

static void test_none(void **state)
{
    bind_case_t c = {RV_PLACEMENT_NONE, 5, 1, 0, 0, 0, ""};

    (void)state;
    bind_in_thread(&c);
    assert_int_equal(c.status, RV_OK);
    assert_true(c.numa >= -1);
    if (nnuma == 1)
        assert_int_equal(c.numa, 0);
    if (ncores > 1)
        assert_non_null(strstr(c.where, "cpus "));
}

static void test_bad_arguments(void **state)
{
    int numa = 7;

    (void)state;
    assert_int_equal(rv__placement_bind_thread(RV_PLACEMENT_CORE, 0, 0, 0,
                                               &numa), RV_ERR_INVALID);
    assert_int_equal(rv__placement_bind_thread(RV_PLACEMENT_CORE, 0, 2, 2,
                                               &numa), RV_ERR_INVALID);
    assert_int_equal(rv__placement_bind_thread(RV_PLACEMENT_CORE, 0, 2, -1,
                                               &numa), RV_ERR_INVALID);
    assert_int_equal(rv__placement_bind_thread(RV_PLACEMENT_CORE, -1, 2, 0,
                                               &numa), RV_ERR_INVALID);
    assert_int_equal(rv__placement_bind_process(RV_PLACEMENT_CORE, 0, 0),
                     RV_ERR_INVALID);
    assert_int_equal(numa, 7); /* untouched on error */
}

/* A process of 2 threads is bound to the union of its threads' cores. */
static void test_process(void **state)
{
    int wstatus;
    pid_t pid;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char where[256];
        hwloc_topology_t topo;
        hwloc_bitmap_t set, want;
        int ok;

        if (rv__placement_bind_process(RV_PLACEMENT_CORE, 1, 2) != RV_OK)
            _exit(1);
        rv__placement_describe(where, sizeof(where));
        hwloc_topology_init(&topo);
        hwloc_topology_load(topo);
        set = hwloc_bitmap_alloc();
        want = hwloc_bitmap_alloc();
        hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS);
        for (int t = 0; t < 2; t++) {
            hwloc_obj_t core = hwloc_get_obj_by_type(
                topo, HWLOC_OBJ_CORE, (unsigned)((2 + t) % ncores));
            if (core == NULL)
                core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU,
                                             (unsigned)((2 + t) % ncores));
            hwloc_bitmap_or(want, want, core->cpuset);
        }
        ok = hwloc_bitmap_isequal(set, want);
        if (!ok)
            fprintf(stderr, "process bound to: %s\n", where);
        _exit(ok ? 0 : 2);
    }
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
}

static int setup(void **state)
{
    hwloc_topology_t topo;
    hwloc_obj_t obj = NULL;

    (void)state;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0)
        return -1;
    ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (ncores <= 0) {
        ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
        unit = "pu";
    }
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)))
        nnuma += !hwloc_bitmap_iszero(obj->cpuset);
    hwloc_topology_destroy(topo);
    return ncores > 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core),
        cmocka_unit_test(test_numa),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_process),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
