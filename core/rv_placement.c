/*
 * Placement of processes and worker threads (see rv_placement.h), on hwloc.
 *
 * The topology is loaded once per process, on first use, under
 * pthread_once; after that it is only read, which hwloc allows from any
 * number of threads at once. Every function here is thread-safe.
 *
 * A binding that fails (a container that forbids sched_setaffinity, a
 * cgroup that hides cores) is a warning: the job runs, unbound and slower,
 * rather than not at all. Memory is not bound: with the process bound to a
 * zone's cores, first-touch already places it in that zone, and core's
 * chunk allocators pick their zone explicitly.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <hwloc.h>

#include "rv_placement.h"

static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t topo;
static int topo_ok;

static void topo_load(void)
{
    if (hwloc_topology_init(&topo) != 0) {
        rv_warn("placement: hwloc_topology_init failed: %m; not binding");
        return;
    }
    if (hwloc_topology_load(topo) != 0) {
        rv_warn("placement: hwloc_topology_load failed: %m; not binding");
        hwloc_topology_destroy(topo);
        return;
    }
    topo_ok = 1;
}

static int topo_get(void)
{
    pthread_once(&topo_once, topo_load);
    return topo_ok;
}

struct hwloc_topology *rv__placement_topology(void)
{
    return topo_get() ? topo : NULL;
}

static const char *placement_name(rv_placement_t placement)
{
    switch (placement) {
    case RV_PLACEMENT_NONE:
        return "none";
    case RV_PLACEMENT_CORE:
        return "core";
    case RV_PLACEMENT_NUMA:
        return "numa";
    }
    return "?";
}

/* The unit of core placement: cores, or PUs if hwloc found no cores. */
static hwloc_obj_type_t core_type(void)
{
    return hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE
                                                              : HWLOC_OBJ_PU;
}

/* The NUMA zone with the @p idx-th non-empty cpuset, modulo such zones. */
int rv__placement_cores(void)
{
    int n;

    if (!topo_get())
        return 0;
    n = hwloc_get_nbobjs_by_type(topo, core_type());
    return n > 0 ? n : 0;
}

static hwloc_obj_t numa_zone(int idx)
{
    int nzones = 0, n;
    hwloc_obj_t obj = NULL;

    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)) !=
           NULL) {
        if (!hwloc_bitmap_iszero(obj->cpuset))
            nzones++;
    }
    if (nzones == 0)
        return NULL;
    n = idx % nzones;
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)) !=
           NULL) {
        if (!hwloc_bitmap_iszero(obj->cpuset) && n-- == 0)
            return obj;
    }
    return NULL;
}

/*
 * Adds to @p set the cpus of worker @p thread of local process
 * @p local_rank, or of all its workers when @p thread is -1.
 */
static rv_status_t placement_cpuset(rv_placement_t placement, int local_rank,
                                    int threads, int thread, hwloc_bitmap_t set)
{
    if (placement == RV_PLACEMENT_CORE) {
        hwloc_obj_type_t type = core_type();
        int ncores = hwloc_get_nbobjs_by_type(topo, type);
        int first = thread < 0 ? 0 : thread;
        int last = thread < 0 ? threads - 1 : thread;

        if (ncores <= 0)
            return RV_ERR_NOT_FOUND;
        for (int t = first; t <= last; t++) {
            long idx = ((long)local_rank * threads + t) % ncores;
            hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, (unsigned)idx);
            if (obj == NULL)
                return RV_ERR_NOT_FOUND;
            hwloc_bitmap_or(set, set, obj->cpuset);
        }
        return RV_OK;
    }
    if (placement == RV_PLACEMENT_NUMA) {
        hwloc_obj_t zone = numa_zone(local_rank);
        if (zone == NULL)
            return RV_ERR_NOT_FOUND;
        hwloc_bitmap_copy(set, zone->cpuset);
        return RV_OK;
    }
    return RV_ERR_INVALID;
}

/* The OS index of the NUMA zone holding all of @p set, or -1. */
static int numa_of_cpuset(hwloc_const_bitmap_t set)
{
    hwloc_obj_t obj = NULL;

    if (hwloc_bitmap_iszero(set))
        return -1;
    while ((obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, obj)) !=
           NULL) {
        if (!hwloc_bitmap_iszero(obj->cpuset) &&
            hwloc_bitmap_isincluded(set, obj->cpuset))
            return (int)obj->os_index;
    }
    return -1;
}

static rv_status_t placement_bind(rv_placement_t placement, int local_rank,
                                  int threads, int thread, int flags,
                                  int *numa_node_p)
{
    hwloc_bitmap_t set;
    rv_status_t status;
    char what[64];
    char cpus[256];

    if (placement != RV_PLACEMENT_NONE && placement != RV_PLACEMENT_CORE &&
        placement != RV_PLACEMENT_NUMA)
        return RV_ERR_INVALID;
    if (local_rank < 0 || threads < 1 || thread >= threads) {
        rv_error("placement: bad arguments: local rank %d, thread %d of %d",
                 local_rank, thread, threads);
        return RV_ERR_INVALID;
    }
    if (numa_node_p != NULL)
        *numa_node_p = -1;
    if (!topo_get())
        return RV_OK; /* already warned */

    set = hwloc_bitmap_alloc();
    if (set == NULL)
        return RV_ERR_NO_MEMORY;
    if (thread < 0)
        snprintf(what, sizeof(what), "local process %d", local_rank);
    else
        snprintf(what, sizeof(what), "thread %d of local process %d", thread,
                 local_rank);

    if (placement != RV_PLACEMENT_NONE) {
        status = placement_cpuset(placement, local_rank, threads, thread, set);
        if (status != RV_OK) {
            rv_warn("placement: no %s found by hwloc to place %s; not binding",
                    placement == RV_PLACEMENT_CORE ? "cores" : "NUMA zones",
                    what);
        } else if (hwloc_set_cpubind(topo, set, flags) != 0) {
            hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), set);
            rv_warn("placement: cannot bind %s to cpus %s (job.placement "
                    "%s): %m; running unbound",
                    what, cpus, placement_name(placement));
        } else {
            hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), set);
            rv_debug("placement: bound %s to cpus %s", what, cpus);
        }
    }

    if (numa_node_p != NULL) {
        /* Report where the caller may actually run, bound or not. */
        if (hwloc_get_cpubind(topo, set, flags) != 0)
            hwloc_bitmap_copy(set, hwloc_topology_get_allowed_cpuset(topo));
        *numa_node_p = numa_of_cpuset(set);
    }
    hwloc_bitmap_free(set);
    return RV_OK;
}

rv_status_t rv__placement_bind_process(rv_placement_t placement, int local_rank,
                                       int threads)
{
    return placement_bind(placement, local_rank, threads, -1,
                          HWLOC_CPUBIND_PROCESS, NULL);
}

rv_status_t rv__placement_bind_thread(rv_placement_t placement, int local_rank,
                                      int threads, int thread, int *numa_node_p)
{
    int numa_node;
    rv_status_t status;

    if (thread < 0) {
        rv_error("placement: bad thread index %d", thread);
        return RV_ERR_INVALID;
    }
    status = placement_bind(placement, local_rank, threads, thread,
                            HWLOC_CPUBIND_THREAD, &numa_node);
    if (status == RV_OK && numa_node_p != NULL)
        *numa_node_p = numa_node;
    return status;
}

/* The object of @p type whose cpuset is exactly @p set, or NULL. */
static hwloc_obj_t find_equal(hwloc_obj_type_t type, hwloc_const_bitmap_t set)
{
    hwloc_obj_t obj = NULL;

    while ((obj = hwloc_get_next_obj_by_type(topo, type, obj)) != NULL) {
        if (hwloc_bitmap_isequal(obj->cpuset, set))
            return obj;
    }
    return NULL;
}

void rv__placement_describe(char *buf, size_t len)
{
    hwloc_bitmap_t set;
    hwloc_obj_t obj;
    char cpus[256];
    int numa;

    if (len == 0)
        return;
    if (!topo_get()) {
        snprintf(buf, len, "unknown (no topology)");
        return;
    }
    set = hwloc_bitmap_alloc();
    if (set == NULL || hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD)) {
        snprintf(buf, len, "unknown (%s)", strerror(set ? errno : ENOMEM));
        hwloc_bitmap_free(set);
        return;
    }
    numa = numa_of_cpuset(set);
    obj = find_equal(HWLOC_OBJ_CORE, set);
    if (obj == NULL)
        obj = find_equal(HWLOC_OBJ_PU, set);
    if (obj != NULL) {
        snprintf(buf, len, "%s %u (numa %d)",
                 obj->type == HWLOC_OBJ_CORE ? "core" : "pu",
                 obj->logical_index, numa);
    } else {
        hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), set);
        if (numa >= 0)
            snprintf(buf, len, "cpus %s (numa %d)", cpus, numa);
        else
            snprintf(buf, len, "cpus %s (several numa zones)", cpus);
    }
    hwloc_bitmap_free(set);
}
