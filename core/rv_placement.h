/*
 * Placement of processes and worker threads on cores and NUMA zones
 * (internal to core/; hwloc underneath).
 *
 * job.placement:
 *   none  no binding.
 *   core  worker thread t of local process r gets its own core,
 *         (r * threads + t) modulo the cores of the node; the process is
 *         bound to the union of its threads' cores.
 *   numa  local process r is bound to NUMA zone r modulo the zones; its
 *         threads float inside the zone.
 */
#ifndef RIVET_RV_PLACEMENT_H
#define RIVET_RV_PLACEMENT_H

#include "rv_config.h"
#include "rv_status.h"

/* Binds the calling process (used by rivetrun in the child before exec). */
rv_status_t rv__placement_bind_process(rv_placement_t placement, int local_rank,
                                       int threads);

/* Binds the calling thread; *numa_node_p receives its NUMA zone (or -1). */
rv_status_t rv__placement_bind_thread(rv_placement_t placement, int local_rank,
                                      int threads, int thread,
                                      int *numa_node_p);

/* Describes where the calling thread may run, e.g. "core 1 (numa 0)". */
void rv__placement_describe(char *buf, size_t len);

/* The node's hwloc topology, loaded once per process (read-only), or NULL
 * if hwloc could not load it. Core's services to transport plugins answer
 * their locality queries from it (rv_services.c). */
struct hwloc_topology *rv__placement_topology(void);

/* The cores this process may run on as hwloc sees the machine (its
 * PUs where hwloc finds no cores); 0 when the topology is unknown. */
int rv__placement_cores(void);

#endif
