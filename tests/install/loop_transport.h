/*
 * The loop transport (loop_transport.c), rivet's one test transport, as
 * the unit tests use it in their own process: its ops table, and the
 * bookkeeping of its registered memory, which those tests read (how many
 * registrations, allocations, packed keys, overlaps between live
 * registrations). The install test builds the same file alone, as the
 * plugin librivet-loop.so.
 *
 * The bookkeeping is one per process and shared by the transports the
 * process makes; the tests that read it run one at a time.
 */
#ifndef RIVET_TESTS_LOOP_TRANSPORT_H
#define RIVET_TESTS_LOOP_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <rv_transport.h>

#define LOOP_MAX_REGS 4096 /* live registrations listed */

struct rv_tmem {
    void *addr;
    size_t len;
    bool allocated; /* by mem_alloc: unmapped at deregistration */
};

typedef struct {
    pthread_mutex_t lock;
    bool mapped; /* caps.mem_alloc_mapped: mem_alloc maps shared memory */
    int registers, allocs, deregisters, packs, releases;
    int overlaps; /* a registration overlapping a live one */
    struct rv_tmem *live[LOOP_MAX_REGS];
    int nlive;
} loop_mem_t;

/* The process's bookkeeping; read under its lock. */
extern loop_mem_t loop_mem;

/* Zeroes the counts and the live list; @p mapped sets the capability
 * mem_alloc_mapped the transport reports from now on. */
void loop_mem_reset(bool mapped);

/* Whether [p, p+len) lies inside one live registration. */
bool loop_mem_registered(const void *p, size_t len);

/* The ops table, under the plugin's exported name in librivet-loop.so and
 * as loop_ops in a test's process (RIVET_LOOP_IN_PROCESS), where a real
 * plugin's rv_transport_ops may be loaded beside it. */
#ifdef RIVET_LOOP_IN_PROCESS
#define LOOP_OPS loop_ops
#else
#define LOOP_OPS rv_transport_ops
#endif
extern const rv_transport_ops_t LOOP_OPS;

#endif
