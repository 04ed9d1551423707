/*
 * The services core offers transport plugins (rv_transport_services_t,
 * rv_transport.h): the locality of a device, from the hwloc topology that
 * placement loads once per process, and the allocators of registered
 * memory (rv_regmem.h). A plugin calls core through this table only, so the
 * transport ABI version covers everything it uses of core, and a plugin
 * needs neither core's internal headers nor hwloc to be built.
 */
#include <limits.h>
#include <stdio.h>

#include <hwloc.h>
#include <hwloc/linux.h>

#include "rv_core.h"
#include "rv_placement.h"
#include "rv_regmem.h"

/* The file of a PCI device's sysfs folder that lists its local CPUs. */
#define LOCAL_CPUS_FILE "local_cpus"

/* The locality of the CPUs in @p mine relative to those in @p near. */
static rv_locality_t locality_of(hwloc_const_bitmap_t mine,
                                 hwloc_const_bitmap_t near)
{
    if (hwloc_bitmap_isincluded(mine, near))
        return RV_LOCALITY_FULL;
    return hwloc_bitmap_intersects(mine, near) ? RV_LOCALITY_PARTIAL
                                               : RV_LOCALITY_NONE;
}

/* Thread-safe: the topology is only read once loaded (rv_placement.c). */
static rv_locality_t device_locality(const char *sysfs_dir)
{
    hwloc_topology_t topo = rv__placement_topology();
    char path[PATH_MAX];
    if (topo == NULL || sysfs_dir == NULL ||
        !hwloc_topology_is_thissystem(topo) ||
        snprintf(path, sizeof(path), "%s/%s", sysfs_dir, LOCAL_CPUS_FILE) >=
            (int)sizeof(path))
        return RV_LOCALITY_PARTIAL;

    rv_locality_t loc = RV_LOCALITY_PARTIAL;
    hwloc_bitmap_t near = hwloc_bitmap_alloc();
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    if (near != NULL && mine != NULL &&
        hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_THREAD) == 0) {
        /* A device the kernel gives no locality for (a virtual one) is
         * local to every CPU, as in hwloc's own helpers for verbs and
         * network devices. */
        if (hwloc_linux_read_path_as_cpumask(path, near) < 0 ||
            hwloc_bitmap_iszero(near))
            hwloc_bitmap_copy(near, hwloc_topology_get_complete_cpuset(topo));
        loc = locality_of(mine, near);
    }
    hwloc_bitmap_free(near);
    hwloc_bitmap_free(mine);
    return loc;
}

const rv_transport_services_t rv__transport_services = {
    .version = RV_TRANSPORT_SERVICES_VERSION,
    .size = sizeof(rv_transport_services_t),
    .device_locality = device_locality,
    .mem_chunk_params_init = rv_mem_chunk_params_init,
    .mem_chunk_allocator_create = rv_mem_chunk_allocator_create,
    .mem_chunk_allocator_destroy = rv_mem_chunk_allocator_destroy,
    .mem_chunk_alloc = rv_mem_chunk_alloc,
    .mem_chunk_free = rv_mem_chunk_free,
    .mem_chunk_allocator_trim = rv_mem_chunk_allocator_trim,
    .mem_chunk_size = rv_mem_chunk_size,
    .mem_chunk_alignment = rv_mem_chunk_alignment,
    .mem_chunk_stats = rv_mem_chunk_stats,
    .mem_circular_create = rv_mem_circular_create,
    .mem_circular_destroy = rv_mem_circular_destroy,
    .mem_circular_alloc = rv_mem_circular_alloc,
    .mem_circular_free = rv_mem_circular_free,
    .mem_circular_unit_size = rv_mem_circular_unit_size,
    .mem_circular_unit_alignment = rv_mem_circular_unit_alignment,
    .mem_circular_stats = rv_mem_circular_stats,
    .mem_linear_create = rv_mem_linear_create,
    .mem_linear_destroy = rv_mem_linear_destroy,
    .mem_linear_alloc = rv_mem_linear_alloc,
    .mem_linear_retire = rv_mem_linear_retire,
    .mem_general_create = rv_mem_general_create,
    .mem_general_destroy = rv_mem_general_destroy,
    .mem_general_alloc = rv_mem_general_alloc,
    .mem_general_free = rv_mem_general_free,
    .mem_general_lookup = rv_mem_general_lookup,
    .mem_general_trim = rv_mem_general_trim,
    .mem_general_stats = rv_mem_general_stats,
};
