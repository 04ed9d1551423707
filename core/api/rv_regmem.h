/**
 * @file rv_regmem.h
 * @brief Registered memory: per-NUMA-zone chunk allocators and the
 * sub-allocators on them (Seriema, section 4.2, without leaks and with
 * real NUMA placement and real huge pages), for the layers above core and
 * for transport plugins (which call these functions through the services
 * table core passes them, rv_transport_services_t in rv_transport.h).
 *
 *   rv_mem_chunk_allocator_t  one per NUMA zone: chunks of memory.chunk
 *                             bytes, bound to the zone, faulted in, and
 *                             registered with the transport ONCE per chunk.
 *   rv_mem_circular_t         a ring of fixed-size units carved from
 *                             chunks; a unit is recycled only once the
 *                             transport reports complete the operations
 *                             that used it (its completion tag).
 *   rv_mem_linear_t           a bump pointer over the current unit of a
 *                             circular allocator, for many small records.
 *   rv_mem_general_t          best fit with coalescing over chunks; any size
 *                             and alignment.
 *
 * Every piece of memory handed out lies inside one registered chunk (or
 * multi-chunk region), described by an rv_mem_chunk_t: its base, its
 * rv_tmem_t and its remote key, packed once. That is what a remote
 * pointer to the memory is built from.
 *
 * The transport is passed as an (ops, tp) pair, so that tests can pass a
 * mock ops table.
 *
 * @note Thread mode: a chunk allocator and a general allocator are
 * thread-safe (each has a mutex); a circular allocator and the linear
 * allocators over it are single-threaded, owned by one thread. Creating
 * and destroying an allocator is the owner's, with no other call on it
 * in flight.
 */
#ifndef RIVET_RV_REGMEM_H
#define RIVET_RV_REGMEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_config.h"
#include "rv_status.h"
#include "rv_transport.h"

/* ---------------------------------------------------------------------- */
/* Chunks and statistics                                                   */

/** @brief What backs a chunk's pages. */
typedef enum rv_mem_page_kind {
    RV_MEM_PAGE_1G,        /**< MAP_HUGETLB, 1 GiB pages */
    RV_MEM_PAGE_2M,        /**< MAP_HUGETLB, 2 MiB pages */
    RV_MEM_PAGE_THP,       /**< madvise(MADV_HUGEPAGE): transparent huge
                                pages, which the kernel uses where it can */
    RV_MEM_PAGE_NORMAL,    /**< base pages (4 KiB) */
    RV_MEM_PAGE_TRANSPORT, /**< allocated by the transport (mem_alloc); its
                                page size is the transport's choice */
    RV_MEM_PAGE_KINDS      /**< the number of kinds (an array bound) */
} rv_mem_page_kind_t;

/** @brief Where a chunk allocator takes its memory from. */
typedef enum rv_mem_source {
    /** RV_MEM_SOURCE_TRANSPORT when the transport's caps say
     * mem_alloc_mapped or mem_alloc_host_mapped (and huge pages are not
     * required), else
     * RV_MEM_SOURCE_MMAP. */
    RV_MEM_SOURCE_AUTO,
    /** mmap (huge pages per memory.huge_pages), mbind, fault in, then
     * ops->mem_register once per chunk. */
    RV_MEM_SOURCE_MMAP,
    /** ops->mem_alloc, then mbind(MPOL_MF_MOVE) to the zone. */
    RV_MEM_SOURCE_TRANSPORT,
} rv_mem_source_t;

/**
 * @brief One registered chunk, or a region of several contiguous chunks
 * registered as one. The public fields are read-only for users and valid
 * until the chunk is freed.
 * @note Any thread may read the public fields; the private ones belong to
 *       the chunk allocator, under its lock.
 */
typedef struct rv_mem_chunk {
    void *addr;              /**< base of the registered memory */
    size_t len;              /**< bytes: a multiple of the chunk size */
    rv_tmem_t *tmem;         /**< the transport's registration */
    const void *rkey;        /**< remote key, packed once (ops->rkey_pack) */
    size_t rkey_len;         /**< bytes of @c rkey */
    rv_mem_page_kind_t kind; /**< what backs the pages */
    int numa_node;           /**< the zone it is bound to, or -1 */

    /* private to rv_mem_chunk.c */
    struct rv_mem_chunk_allocator *owner; /**< private: the allocator
                                               that made it */
    /** @{ */
    struct rv_mem_chunk *next, *prev; /**< private: the list of every chunk
                                           of the allocator */
    /** @} */
    struct rv_mem_chunk *next_free; /**< private: the list of cached
                                         single chunks */
    bool from_transport;            /**< private: allocated by the transport
                                         (mem_alloc), not mapped by rivet */
    bool is_free; /**< private: in the cache, not handed out */
} rv_mem_chunk_t;

/**
 * @brief Statistics of an allocator. A chunk allocator reports what it took
 * from the system; a sub-allocator reports the chunks it holds (reserved)
 * and what its users hold (in use). Summed over the sub-allocators of a
 * chunk allocator, bytes_reserved equals the chunk allocator's bytes_in_use.
 */
typedef struct rv_mem_stats {
    uint64_t bytes_reserved;   /**< taken from the OS or transport, or held */
    uint64_t bytes_registered; /**< of which registered with the transport */
    uint64_t bytes_in_use;     /**< handed out to users */
    uint64_t registrations;    /**< mem_register + mem_alloc calls, ever */
    uint64_t deregistrations;  /**< mem_deregister calls, ever */
    uint64_t chunks[RV_MEM_PAGE_KINDS]; /**< chunks held, by page kind (a
                                             region counts its chunks) */
    uint64_t free_blocks;               /**< general allocator: free blocks */
} rv_mem_stats_t;

/**
 * @brief A short name of a page kind, for messages.
 * @param [in] kind the kind
 * @return "1GiB-huge", "2MiB-huge", "thp", "normal", "transport", or "?"
 *         for a value out of range; a constant string, never freed
 * @note Any thread.
 */
RV_EXPORT const char *rv_mem_page_kind_str(rv_mem_page_kind_t kind);

/* ---------------------------------------------------------------------- */
/* Chunk allocator (one per NUMA zone)                                     */

/** @brief A chunk allocator of one NUMA zone (opaque): made by
 * rv_mem_chunk_allocator_create, freed by rv_mem_chunk_allocator_destroy.
 * @note Thread-safe. */
typedef struct rv_mem_chunk_allocator rv_mem_chunk_allocator_t;

/** @brief Parameters of rv_mem_chunk_allocator_create. */
typedef struct rv_mem_chunk_params {
    const rv_transport_ops_t *ops; /**< the transport that registers the
                                        chunks; must outlive the allocator */
    rv_transport_t *tp;            /**< its process state */
    int numa_node;                 /**< the zone, or -1 for no binding */
    size_t chunk_size;             /**< memory.chunk: a multiple of 4 KiB */
    rv_huge_pages_t huge_pages;    /**< memory.huge_pages */
    rv_mem_source_t source;        /**< where chunks come from */
    uint64_t limit;                /**< memory.limit: registered bytes of the
                                        process, all allocators; 0: none */
} rv_mem_chunk_params_t;

/**
 * @brief Fills @p params from @p cfg (memory.chunk, memory.huge_pages,
 * memory.limit),
 * with source RV_MEM_SOURCE_AUTO; every other member is zeroed.
 * @param [out] params    the parameters
 * @param [in]  cfg       the configuration (rv_context_config, or the
 *                        one a plugin got in its init parameters)
 * @param [in]  ops       the transport that will register the chunks
 * @param [in]  tp        its process state
 * @param [in]  numa_node the zone, or -1 for no binding
 * @note Any thread.
 */
RV_EXPORT void rv_mem_chunk_params_init(rv_mem_chunk_params_t *params,
                                        const rv_config_t *cfg,
                                        const rv_transport_ops_t *ops,
                                        rv_transport_t *tp, int numa_node);

/**
 * @brief Creates a chunk allocator. No memory is taken until the first
 * rv_mem_chunk_alloc.
 *
 * Chunk source policy (source MMAP): with huge_pages auto or require, and a
 * chunk size that is a multiple of a huge page size, MAP_HUGETLB with 1 GiB
 * then 2 MiB pages; under auto, when none are free, transparent huge pages
 * (madvise(MADV_HUGEPAGE) on a 2 MiB-aligned chunk) and then normal pages,
 * reported once per process at info level; under require, a clear error.
 * With off, normal pages only (MADV_NOHUGEPAGE). Each chunk is bound to the
 * zone with mbind before it is first touched, faulted in, then registered.
 *
 * @param [in]  params  see rv_mem_chunk_params_t; copied
 * @param [out] alloc_p the allocator; set only on success. Free it with
 *                      rv_mem_chunk_allocator_destroy.
 * @return RV_OK; RV_ERR_INVALID for a NUMA node that does not exist or a
 *         bad chunk size; RV_ERR_CONFIG for require with a chunk size no
 *         huge page divides, or with source TRANSPORT; RV_ERR_NO_MEMORY.
 *         Errors are logged, but for RV_ERR_NO_MEMORY.
 * @note Thread-safe object: every function may be called from any thread,
 *       but for rv_mem_chunk_allocator_destroy. With source AUTO it queries
 *       the transport (ops->query).
 */
RV_EXPORT rv_status_t rv_mem_chunk_allocator_create(
    const rv_mem_chunk_params_t *params, rv_mem_chunk_allocator_t **alloc_p);

/**
 * @brief Deregisters and returns every chunk to the OS (or transport),
 * including chunks still handed out: destroy sub-allocators first.
 * @param [in] alloc the allocator; NULL is accepted
 * @note No other call on @p alloc may be in flight; every chunk and
 *       pointer it handed out is invalid afterwards.
 */
RV_EXPORT void rv_mem_chunk_allocator_destroy(rv_mem_chunk_allocator_t *alloc);

/**
 * @brief Hands out a region of @p nchunks contiguous chunks, registered as
 * one. Single chunks are reused from earlier rv_mem_chunk_free calls
 * (already registered); regions of several chunks are made on demand.
 * @param [in]  alloc   the allocator
 * @param [in]  nchunks chunks in the region, at least 1
 * @param [out] chunk_p the region; set only on success. The allocator's:
 *                      give it back with rv_mem_chunk_free.
 * @return RV_OK; RV_ERR_NO_MEMORY (logged with what to do); RV_ERR_INVALID
 *         for 0 chunks or a size that overflows; RV_ERR_IO when the
 *         memory cannot be bound to its zone; the transport's error when
 *         it cannot allocate, register or pack the key of it (logged)
 * @note Thread-safe.
 */
RV_EXPORT rv_status_t rv_mem_chunk_alloc(rv_mem_chunk_allocator_t *alloc,
                                         size_t nchunks,
                                         rv_mem_chunk_t **chunk_p);

/**
 * @brief Gives a chunk back: a single chunk is kept, registered, for
 * reuse; a region is deregistered and unmapped at once.
 * @param [in] alloc the allocator that handed it out
 * @param [in] chunk the chunk or region; NULL is accepted. A chunk freed
 *                   twice or to another allocator is reported and ignored.
 * @note Thread-safe. No transport operation may still use the memory.
 */
RV_EXPORT void rv_mem_chunk_free(rv_mem_chunk_allocator_t *alloc,
                                 rv_mem_chunk_t *chunk);

/**
 * @brief Returns the cached free chunks to the OS (deregistered).
 * @param [in] alloc the allocator
 * @note Thread-safe.
 */
RV_EXPORT void rv_mem_chunk_allocator_trim(rv_mem_chunk_allocator_t *alloc);

/**
 * @brief The chunk size.
 * @param [in] alloc the allocator
 * @return its params' chunk_size (memory.chunk by default)
 * @note Thread-safe.
 */
RV_EXPORT size_t rv_mem_chunk_size(const rv_mem_chunk_allocator_t *alloc);

/**
 * @brief What every chunk and region base is aligned to.
 * @param [in] alloc the allocator
 * @return the largest power of two dividing the chunk size for MMAP, the
 *         page size for TRANSPORT
 * @note Thread-safe.
 */
RV_EXPORT size_t rv_mem_chunk_alignment(const rv_mem_chunk_allocator_t *alloc);

/**
 * @brief The source in use.
 * @param [in] alloc the allocator
 * @return RV_MEM_SOURCE_MMAP or RV_MEM_SOURCE_TRANSPORT (AUTO resolved)
 * @note Thread-safe.
 */
RV_EXPORT rv_mem_source_t
rv_mem_chunk_source(const rv_mem_chunk_allocator_t *alloc);

/**
 * @brief Statistics of the chunk allocator.
 * @param [in] alloc the allocator
 * @return a copy: what it took from the system (reserved, registered),
 *         the chunks handed out (in use), registrations so far, chunks by
 *         page kind
 * @note Thread-safe.
 */
RV_EXPORT rv_mem_stats_t rv_mem_chunk_stats(rv_mem_chunk_allocator_t *alloc);

/* ---------------------------------------------------------------------- */
/* Circular allocator                                                      */

/**
 * @brief Tells whether the transport has completed every operation of
 * @p channel up to and including sequence number @p seq. Called by the
 * allocator's owner thread, from rv_mem_circular_alloc and
 * rv_mem_circular_stats.
 * @param [in] arg     rv_mem_circular_params_t.completed_arg
 * @param [in] channel the channel a unit was tagged with
 * @param [in] seq     the sequence number it was tagged with
 * @return true once that operation and every earlier one of the channel
 *         completed
 */
typedef bool (*rv_mem_completed_fn)(void *arg, uint32_t channel, uint64_t seq);

/** @brief Parameters of rv_mem_circular_create. */
typedef struct rv_mem_circular_params {
    rv_mem_chunk_allocator_t *chunks; /**< where units come from */
    size_t unit_size; /**< divides the chunk size; a multiple of 64 */
    size_t max_units; /**< growth limit (rounded up to whole chunks);
                           0: no limit */
    /** How completion is learned: the callback if set, else
     * completed_seq[channel] >= seq (the array is read with acquire loads,
     * so another thread may advance it). */
    rv_mem_completed_fn completed;
    void *completed_arg;                   /**< @c completed's first argument */
    const _Atomic uint64_t *completed_seq; /**< with no callback: per
                                 channel, the last sequence number
                                 completed; the caller's, valid as long as
                                 the allocator */
    uint32_t nchannels; /**< entries of completed_seq (checked) */
} rv_mem_circular_params_t;

/** @brief A unit. addr, len and chunk are read-only for users.
 * @note Single-threaded: its circular allocator's owner thread. */
typedef struct rv_mem_unit {
    void *addr;                  /**< the unit's memory, unit_size bytes */
    size_t len;                  /**< its size: the allocator's unit size */
    const rv_mem_chunk_t *chunk; /**< its registration */

    /* private to rv_mem_circular.c */
    struct rv_mem_unit *next; /**< private: the next unit in ring order */
    uint32_t channel;         /**< private: the tag's channel
                                   (rv_mem_circular_tag) */
    uint64_t seq;             /**< private: the tag's sequence number */
    uint8_t state;            /**< private: free, held, or freed and
                                   waiting for its tag */
    bool tagged;              /**< private: a tag was set while held */
} rv_mem_unit_t;

/** @brief A circular allocator (opaque): made by rv_mem_circular_create,
 * freed by rv_mem_circular_destroy. @note Single-threaded. */
typedef struct rv_mem_circular rv_mem_circular_t;

/**
 * @brief Creates a circular allocator with one chunk's worth of units.
 * @param [in]  params see rv_mem_circular_params_t; copied
 * @param [out] circ_p the allocator; set only on success. Free it with
 *                     rv_mem_circular_destroy.
 * @return RV_OK; RV_ERR_INVALID (logged) for no chunk allocator, a unit
 *         size that is not a multiple of 64 dividing the chunk size, or
 *         neither a callback nor a sequence array; RV_ERR_NO_MEMORY or the
 *         chunk allocator's error for its first chunk
 * @note Single-threaded: owned by one worker thread, which calls every
 *       function of this object (the chunk allocator below is shared).
 */
RV_EXPORT rv_status_t rv_mem_circular_create(
    const rv_mem_circular_params_t *params, rv_mem_circular_t **circ_p);

/**
 * @brief Gives every chunk back to the chunk allocator, and frees the
 * allocator. Every operation that used a unit must have completed (the
 * allocator cannot wait for them).
 * @param [in] circ the allocator; NULL is accepted. Its units, and the
 *                  linear allocators over it, are invalid afterwards.
 * @note The owner thread.
 */
RV_EXPORT void rv_mem_circular_destroy(rv_mem_circular_t *circ);

/**
 * @brief Hands out the next unit in ring order.
 *
 * The recycling protocol: a unit is handed out again only when it was
 * freed untagged, or freed with tag (channel, seq) and the transport
 * reports that tag complete. Units are recycled strictly in ring order:
 * when the unit at the cursor is still in use or its tag is not complete,
 * the allocator does not look past it (completions arrive in order on a
 * channel, as with the verbs backend's flush numbers, Seriema §4.1, so
 * there is rarely anything to gain); it grows by a chunk of units,
 * inserted at the cursor, up to max_units.
 *
 * @param [in]  circ   the allocator
 * @param [out] unit_p the unit; set only on success. Held by the caller
 *                     until rv_mem_circular_free.
 * @return RV_OK; RV_ERR_AGAIN when every unit is in use at max_units (try
 *         again after progress); RV_ERR_NO_MEMORY or the chunk
 *         allocator's error when it cannot grow
 * @note The owner thread.
 */
RV_EXPORT rv_status_t rv_mem_circular_alloc(rv_mem_circular_t *circ,
                                            rv_mem_unit_t **unit_p);

/**
 * @brief Records that an operation of @p channel with sequence number
 * @p seq uses @p unit. Call it when posting; the last call wins, so tag
 * with the last operation (sequence numbers grow on a channel). A unit used
 * on several channels must be tagged with one whose completion implies the
 * others'.
 * @param [in,out] unit    a unit the caller holds
 * @param [in]     channel the operation's channel, below the params'
 *                         nchannels when completion is read from
 *                         completed_seq
 * @param [in]     seq     the operation's sequence number on it
 * @note The owner thread.
 */
static inline void rv_mem_circular_tag(rv_mem_unit_t *unit, uint32_t channel,
                                       uint64_t seq)
{
    unit->channel = channel;
    unit->seq = seq;
    unit->tagged = true;
}

/**
 * @brief Gives @p unit back: reusable at once when untagged, else once its
 * tag is reported complete.
 * @param [in] circ the allocator it came from
 * @param [in] unit the unit; the caller may no longer touch it. A unit
 *                  freed twice is reported and ignored.
 * @note The owner thread.
 */
RV_EXPORT void rv_mem_circular_free(rv_mem_circular_t *circ,
                                    rv_mem_unit_t *unit);

/**
 * @brief The unit size.
 * @param [in] circ the allocator
 * @return its params' unit_size
 * @note The owner thread.
 */
RV_EXPORT size_t rv_mem_circular_unit_size(const rv_mem_circular_t *circ);

/**
 * @brief What every unit's address is a multiple of.
 * @param [in] circ the allocator
 * @return the largest power of two dividing the unit size, at most the
 *         chunk alignment
 * @note The owner thread.
 */
RV_EXPORT size_t rv_mem_circular_unit_alignment(const rv_mem_circular_t *circ);

/**
 * @brief Statistics of the circular allocator.
 * @param [in] circ the allocator
 * @return a copy: chunks held (reserved, registered, by page kind) and
 *         units handed out or waiting for completion (in use)
 * @note The owner thread (it may call the completion callback).
 */
RV_EXPORT rv_mem_stats_t rv_mem_circular_stats(const rv_mem_circular_t *circ);

/* ---------------------------------------------------------------------- */
/* Linear-circular allocator                                               */

/** @brief A bump allocator over a circular allocator's units (opaque):
 * made by rv_mem_linear_create, freed by rv_mem_linear_destroy.
 * @note Single-threaded, like its circular allocator. */
typedef struct rv_mem_linear rv_mem_linear_t;

/**
 * @brief Creates a bump allocator over the units of @p circ (which it uses
 * but does not own; destroy it after this one).
 * @param [in]  circ  the circular allocator it takes units from
 * @param [out] lin_p the allocator; set only on success. Free it with
 *                    rv_mem_linear_destroy.
 * @return RV_OK or RV_ERR_NO_MEMORY
 * @note Single-threaded, like the circular allocator it draws from.
 */
RV_EXPORT rv_status_t rv_mem_linear_create(rv_mem_circular_t *circ,
                                           rv_mem_linear_t **lin_p);

/**
 * @brief Frees the current unit (with its tag) to the circular allocator,
 * and the allocator.
 * @param [in] lin the allocator; NULL is accepted
 * @note The owner thread.
 */
RV_EXPORT void rv_mem_linear_destroy(rv_mem_linear_t *lin);

/**
 * @brief Takes @p len bytes aligned to @p align (a power of two, at most
 * rv_mem_circular_unit_alignment; 0 means 8) from the current unit. When they
 * do not fit, the current unit is freed to the circular allocator with its tag
 * and the next unit becomes current.
 *
 * Segments are not freed one by one: after posting the operation that uses
 * a segment, tag its unit (rv_mem_circular_tag(*unit_p, channel, seq)); the
 * whole unit is recycled once its last tag completes.
 *
 * @param [in]  lin    the allocator
 * @param [in]  len    bytes, 1 .. the unit size
 * @param [in]  align  a power of two, at most the unit alignment; 0
 *                     means 8
 * @param [out] addr_p the segment; set only on success
 * @param [out] unit_p its unit (registration: (*unit_p)->chunk); may be
 *                     NULL; set only on success
 * @return RV_OK; RV_ERR_INVALID (logged) when @p len is 0 or exceeds the
 *         unit size or @p align is not allowed; the circular allocator's
 *         RV_ERR_AGAIN or RV_ERR_NO_MEMORY
 * @note The owner thread.
 */
RV_EXPORT rv_status_t rv_mem_linear_alloc(rv_mem_linear_t *lin, size_t len,
                                          size_t align, void **addr_p,
                                          rv_mem_unit_t **unit_p);

/**
 * @brief Frees the current unit now (e.g. when going idle), so it can be
 * recycled once its tag completes; the next allocation starts a unit.
 * @param [in] lin the allocator
 * @note The owner thread.
 */
RV_EXPORT void rv_mem_linear_retire(rv_mem_linear_t *lin);

/* ---------------------------------------------------------------------- */
/* General allocator                                                       */

/** @brief A best-fit allocator of registered memory (opaque): made by
 * rv_mem_general_create, freed by rv_mem_general_destroy.
 * @note Thread-safe. */
typedef struct rv_mem_general rv_mem_general_t;

/** @brief The smallest alignment and size granule of the general
 * allocator (a cache line). */
#define RV_MEM_GENERAL_GRANULE 64

/**
 * @brief Creates a best-fit allocator over chunks of @p chunks. It takes
 * no chunk until its first allocation.
 * @param [in]  chunks the chunk allocator (used, not owned: destroy it
 *                     after this one)
 * @param [out] gen_p  the allocator; set only on success. Free it with
 *                     rv_mem_general_destroy.
 * @return RV_OK or RV_ERR_NO_MEMORY
 * @note Thread-safe (one mutex), but for rv_mem_general_destroy.
 */
RV_EXPORT rv_status_t rv_mem_general_create(rv_mem_chunk_allocator_t *chunks,
                                            rv_mem_general_t **gen_p);

/**
 * @brief Gives every chunk back to the chunk allocator and frees the
 * allocator; outstanding allocations become invalid.
 * @param [in] gen the allocator; NULL is accepted
 * @note No other call on @p gen may be in flight.
 */
RV_EXPORT void rv_mem_general_destroy(rv_mem_general_t *gen);

/**
 * @brief Allocates @p len bytes aligned to @p align.
 *
 * Best fit among the free blocks of the chunks held; requests that do not
 * fit in one chunk get a dedicated region of whole chunks, returned to the
 * system when freed. Bookkeeping is kept outside the registered memory, so
 * peers writing into it cannot corrupt the allocator.
 *
 * @param [in]  gen     the allocator
 * @param [in]  len     bytes, > 0 (rounded up to RV_MEM_GENERAL_GRANULE)
 * @param [in]  align   a power of two; 0 means RV_MEM_GENERAL_GRANULE
 * @param [out] addr_p  set only on success
 * @param [out] chunk_p its registration; may be NULL; set only on success
 * @return RV_OK; RV_ERR_INVALID (logged) for a length of 0 or an
 *         alignment that is not a power of two or exceeds the chunk size;
 *         RV_ERR_NO_MEMORY or the chunk allocator's error
 * @note Thread-safe. The memory is the caller's until
 *       rv_mem_general_free.
 */
RV_EXPORT rv_status_t rv_mem_general_alloc(rv_mem_general_t *gen, size_t len,
                                           size_t align, void **addr_p,
                                           const rv_mem_chunk_t **chunk_p);

/**
 * @brief Frees @p addr (from rv_mem_general_alloc); coalesces it with free
 * neighbours. A pointer not allocated here is reported and ignored.
 * @param [in] gen  the allocator that allocated it
 * @param [in] addr the address rv_mem_general_alloc returned; NULL is
 *                  accepted. A dedicated region goes back to the chunk
 *                  allocator at once.
 * @note Thread-safe: any thread may free what another allocated. No
 *       transport operation may still use the memory.
 */
RV_EXPORT void rv_mem_general_free(rv_mem_general_t *gen, void *addr);

/**
 * @brief The registration of an allocation.
 * @param [in] gen  the allocator
 * @param [in] addr an address rv_mem_general_alloc returned (its start,
 *                  not an address inside it)
 * @return the chunk or region it lies in (owned by the chunk allocator),
 *         or NULL when @p addr is not a live allocation of @p gen
 * @note Thread-safe.
 */
RV_EXPORT const rv_mem_chunk_t *rv_mem_general_lookup(rv_mem_general_t *gen,
                                                      const void *addr);

/**
 * @brief Takes chunks until at least @p len bytes of the chunks held are
 * not allocated, so that allocations up to that much take no chunk (no
 * mapping, registration or page fault) when they are made.
 * @param [in] gen the allocator
 * @param [in] len bytes
 * @return RV_OK; the chunk allocator's error (the chunks taken so far are
 *         kept)
 * @note Thread-safe. rv_mem_general_trim gives the unused ones back.
 */
RV_EXPORT rv_status_t rv_mem_general_reserve(rv_mem_general_t *gen, size_t len);

/**
 * @brief Gives chunks with nothing allocated back to the chunk
 * allocator.
 * @param [in] gen the allocator
 * @note Thread-safe.
 */
RV_EXPORT void rv_mem_general_trim(rv_mem_general_t *gen);

/**
 * @brief Statistics of the general allocator.
 * @param [in] gen the allocator
 * @return a copy: chunks held (reserved, registered, by page kind), bytes
 *         allocated including rounding (in use), free blocks
 * @note Thread-safe.
 */
RV_EXPORT rv_mem_stats_t rv_mem_general_stats(rv_mem_general_t *gen);

#endif
