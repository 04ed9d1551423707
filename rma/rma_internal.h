/*
 * Internal state of the remote memory layer (never installed).
 *
 * The layer has a slot of its own (rv_layer.h): per process, the
 * registrations that remote pointers name; per worker, its registered
 * memory allocator, the remote keys it fetched, and the AM Long state
 * towards each destination and from each source. It reaches the
 * transport through core's dispatchers and runs its protocols inside
 * calls through the invocation layer's extension interface
 * (rv_am_ext.h).
 */
#ifndef RIVET_RMA_INTERNAL_H
#define RIVET_RMA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <uthash.h>

#include "rv_am_ext.h"
#include "rv_layer.h"
#include "rv_regmem.h"
#include "rv_rma.h"

/* A registration named by remote pointers. */
typedef struct rma_region {
    const rv_mem_chunk_t *chunk; /* NULL once its registration is gone */
    const rv_tmem_t *tmem;       /* the registration it names: a chunk
                                    descriptor reused for a new one is a new
                                    region, with a new id */
    void *addr;
    size_t len;
    uint32_t id;
    int owner;         /* local index of the worker whose allocator
                          holds the chunk */
    UT_hash_handle hh; /* by chunk */
} rma_region_t;

/* A remote key being fetched, on the waiting frame's stack. */
typedef struct rma_fetch {
    uint64_t key;
    bool done;
    rv_status_t status;
    rv_trkey_t *rkey;
    struct rma_fetch *next;
} rma_fetch_t;

/* A peer's remote key, unpacked for this worker. */
typedef struct rma_rkey {
    uint64_t key; /* peer tid << 32 | region */
    rv_trkey_t *rkey;
    UT_hash_handle hh;
} rma_rkey_t;

/* AM Long towards one destination: its landing words. */
typedef struct rma_long_dest {
    rv_rptr_t landing;
    bool has_landing;
    uint32_t seq; /* AM Longs sent to it */
} rma_long_dest_t;

struct rma_worker;

typedef struct rma_proc {
    pthread_mutex_t lock;   /* regions, workers */
    rma_region_t **regions; /* by id */
    uint32_t nregions, regions_cap;
    rma_region_t *by_chunk;
    struct rma_worker **workers; /* by local index, while the job runs */
    int threads;
    int long_hook, get_hook; /* call hooks (rv_am_ext.h) */
} rma_proc_t;

typedef struct rma_worker {
    rv_worker_t *w;
    rv_context_t *ctx;
    rma_proc_t *proc;
    rv_tid_t me;
    uint32_t nworkers;
    int rank;
    bool mapped; /* transport memory is load/store to peers */
    /* atomics on this process's memory go through the transport: its
     * atomics are not atomic with the CPU's (atomics_cpu_coherent) */
    bool amo_loopback;
    bool dirty; /* one-sided operations since rv_flush */
    rv_mem_chunk_allocator_t *chunks;
    rv_mem_general_t *gen; /* rv_mem_alloc's memory */
    rma_rkey_t *rkeys;     /* peers' remote keys, cached */
    rma_fetch_t *fetches;  /* remote keys being fetched (nested
                              frames each wait for their own) */
    /* AM Long by reassembly */
    rma_long_dest_t *long_dests; /* per destination */
    uint64_t *landing;           /* per source, the last payload known
                                    landed (written by peers) */
    rv_rptr_t landing_ptr;
} rma_worker_t;

/* The layer's slot (rv_layer.h), set by rv_rma_init. */
extern int rma_slot;

static inline rma_worker_t *rma_of(const rv_worker_t *w)
{
    return rma_slot < 0 ? NULL : (rma_worker_t *)rv_worker_layer(w, rma_slot);
}

/* Logs that @p what needs rv_rma_init; returns RV_ERR_INVALID. */
rv_status_t rma_not_initialised(const char *what);

/* A transport completion that completes the rv_sync_t @p arg. */
void rma_sync_done(void *arg, rv_status_t status);

/* rma_mem.c: registered memory, regions and remote keys */
rv_status_t rma_mem_register(rv_context_t *ctx);
rv_status_t rma_mem_start(rma_worker_t *rw);
void rma_mem_stop(rma_worker_t *rw);
void rma_proc_mem_fini(rma_proc_t *proc);
/* The allocator of process-local registered memory in @p region, or
 * NULL. Thread-safe. */
rv_mem_general_t *rma_region_allocator(rma_proc_t *proc, uint32_t region);
/* Whether [@p addr, @p addr + @p len) lies inside one live registration
 * of this process: the memory other processes may name. Thread-safe. */
bool rma_region_holds(rma_proc_t *proc, uint64_t addr, uint64_t len);
/* The remote key of @p region of worker @p tid's process, for this
 * worker (fetched and cached on first use; waits, progressing). */
rv_status_t rma_rkey(rma_worker_t *rw, rv_tid_t tid, uint32_t region,
                     rv_trkey_t **rkey_p);
/* The worker that serves @p p for the caller, and its remote key; NULL
 * *rkey_p for memory of the caller's own process. */
rv_status_t rma_target(rma_worker_t *rw, rv_rptr_t p, rv_tid_t *peer_p,
                       rv_trkey_t **rkey_p);

/* rma_long.c: AM Long and the get-then-run call */
rv_status_t rma_long_register(rv_context_t *ctx, rma_proc_t *proc);
void rma_long_stop(rma_worker_t *rw);

/* The parts' handler registrations, run by rv_rma_init. */
rv_status_t rma_gptr_register(rv_context_t *ctx);
rv_status_t rma_epoch_register(rv_context_t *ctx);

#endif
