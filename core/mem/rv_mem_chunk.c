/*
 * Per-NUMA-zone chunk allocators (Seriema, section 4.2, `RDMAAllocator`),
 * with what Seriema's public code leaves out:
 *
 * - Real huge pages. The paper's "superpages" are only sizes in Seriema's
 *   code; here a chunk is mmap'ed with MAP_HUGETLB (1 GiB or 2 MiB pages)
 *   when memory.huge_pages allows it and pages are reserved, otherwise with
 *   transparent huge pages, otherwise with normal pages, and the fallback
 *   is reported once per process.
 * - Real placement. Each chunk is bound to its zone with mbind before its
 *   first touch, and faulted in right here, so it does not land on the node
 *   of whichever thread happens to touch it first.
 * - One registration per chunk, done once, never per allocation; the rkey
 *   is packed once too.
 * - Nothing leaks: freed multi-chunk regions are unmapped at once, cached
 *   single chunks on trim or destroy.
 *
 * Exception to "mmap, then register": when the transport's memory is
 * mapped into its peers, or those of this host (caps.mem_alloc_mapped,
 * mem_alloc_host_mapped: UCX with shared memory, where
 * ucp_mem_map(ALLOCATE) places memory in a segment that peers map, so their
 * put/get are plain loads and stores; memory merely registered goes through
 * CMA or copies instead: on UCX 1.13 a 4 MiB get runs at the memcpy limit
 * from ucp_mem_map'ed memory and far below it from registered memory),
 * chunks come from
 * ops->mem_alloc and are then moved to the zone with mbind(MPOL_MF_MOVE).
 * The page size of such chunks is the transport's choice.
 *
 * Thread-safe: one mutex, taken on every call (all of them are slow path:
 * sub-allocators take whole chunks rarely).
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rv_regmem.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)
#define GIB (1024 * MIB)

struct rv_mem_chunk_allocator {
    rv_mem_chunk_params_t p;  /* source resolved */
    size_t page;              /* base page size */
    size_t align;             /* every base is a multiple of this */
    struct bitmask *nodemask; /* {numa_node}, NULL when not binding */

    pthread_mutex_t lock;      /* protects everything below */
    rv_mem_chunk_t *chunks;    /* every chunk and region, in use or not */
    rv_mem_chunk_t *free_list; /* single chunks kept for reuse */
    rv_mem_stats_t stats;
};

/* The fallback from huge pages is reported once per process, not once per
 * zone or chunk. */
static atomic_flag fallback_reported = ATOMIC_FLAG_INIT;

static const char *const kind_names[RV_MEM_PAGE_KINDS] = {
    [RV_MEM_PAGE_1G] = "1GiB-huge",
    [RV_MEM_PAGE_2M] = "2MiB-huge",
    [RV_MEM_PAGE_THP] = "thp",
    [RV_MEM_PAGE_NORMAL] = "normal",
    [RV_MEM_PAGE_TRANSPORT] = "transport",
};

const char *rv_mem_page_kind_str(rv_mem_page_kind_t kind)
{
    return (unsigned)kind < RV_MEM_PAGE_KINDS ? kind_names[kind] : "?";
}

void rv_mem_chunk_params_init(rv_mem_chunk_params_t *params,
                              const rv_config_t *cfg,
                              const rv_transport_ops_t *ops, rv_transport_t *tp,
                              int numa_node)
{
    memset(params, 0, sizeof(*params));
    params->ops = ops;
    params->tp = tp;
    params->numa_node = numa_node;
    const rv_core_config_t *core = rv_core_config(cfg);

    params->chunk_size = core->memory.chunk;
    params->huge_pages = core->memory.huge_pages;
    params->source = RV_MEM_SOURCE_AUTO;
    params->limit = core->memory.limit;
}

/* ---------------------------------------------------------------------- */
/* memory.limit                                                            */

/* Bytes of registered chunks the process holds, every allocator
 * together: memory.limit bounds them. */
static _Atomic uint64_t process_registered;
/* Chunks memory.limit refused. */
static atomic_ulong limit_refusals;

/* Takes @p len bytes from the process's memory.limit @p limit (0: none).
 * RV_ERR_NO_MEMORY, with an error naming the key, when they do not fit. */
static rv_status_t limit_take(uint64_t limit, size_t len)
{
    uint64_t had = atomic_fetch_add(&process_registered, len);
    if (limit == 0 || had + len <= limit)
        return RV_OK;
    atomic_fetch_sub(&process_registered, len);
    /* Said once per process (the callers say what failed): a ring that
     * cannot grow may meet the limit at every turn. */
    if (atomic_fetch_add(&limit_refusals, 1) == 0)
        rv_error("registered memory: %zu KiB more would take this process "
                 "past memory.limit (%llu KiB registered of %llu KiB); "
                 "raise memory.limit (RIVET_MEMORY_LIMIT), or use less",
                 len >> 10, (unsigned long long)had >> 10,
                 (unsigned long long)limit >> 10);
    else
        rv_debug("registered memory: memory.limit refused %zu KiB more",
                 len >> 10);
    return RV_ERR_NO_MEMORY;
}

static void limit_give(size_t len)
{
    atomic_fetch_sub(&process_registered, len);
}

/* ---------------------------------------------------------------------- */
/* Creation                                                                */

static rv_status_t check_node(int node)
{
    if (node < 0)
        return RV_OK;
    if (numa_available() < 0) {
        /* A kernel without NUMA support has one zone, node 0. */
        if (node == 0)
            return RV_OK;
        rv_error("numa node %d requested, but this system has no NUMA "
                 "support (only node 0); use node 0 or -1",
                 node);
        return RV_ERR_INVALID;
    }
    if (node > numa_max_node() ||
        !numa_bitmask_isbitset(numa_all_nodes_ptr, (unsigned)node)) {
        rv_error("numa node %d does not exist or has no memory this process "
                 "may use (nodes 0-%d; `numactl -H` lists them)",
                 node, numa_max_node());
        return RV_ERR_INVALID;
    }
    return RV_OK;
}

/* Whether a chunk size allows huge pages of @p size. */
static bool huge_divides(size_t chunk, size_t size)
{
    return chunk % size == 0;
}

/* Where the chunks of @p a come from (memory the transport allocates
 * where peers map it, or rivet's own mmap), and whether its huge page
 * policy can hold there. */
static rv_status_t choose_source(rv_mem_chunk_allocator_t *a)
{
    if (a->p.source == RV_MEM_SOURCE_AUTO) {
        rv_transport_caps_t caps;
        memset(&caps, 0, sizeof(caps));
        a->p.ops->query(a->p.tp, &caps);
        /* Huge pages can only be required of memory rivet maps itself. */
        /* Mapped into the peers of this host is enough: across hosts,
         * memory of mem_alloc serves the network transports as well as
         * registered memory does, and the peers of the host write it with
         * stores instead of a CMA system call per put. (Where the
         * transport also registers it with an RDMA device, the pages are
         * pinned before the mbind below, which then cannot move them:
         * their zone is where the transport first touched them.) */
        bool mapped = caps.mem_alloc_mapped || caps.mem_alloc_host_mapped;
        a->p.source = mapped && a->p.huge_pages != RV_HUGE_REQUIRE
                          ? RV_MEM_SOURCE_TRANSPORT
                          : RV_MEM_SOURCE_MMAP;
    }
    if (a->p.huge_pages == RV_HUGE_REQUIRE) {
        if (a->p.source == RV_MEM_SOURCE_TRANSPORT) {
            rv_error("memory.huge_pages is require, but chunks come from the "
                     "transport, which chooses its own pages; use auto");
            return RV_ERR_CONFIG;
        }
        if (!huge_divides(a->p.chunk_size, 2 * MIB)) {
            rv_error("memory.huge_pages is require, but memory.chunk %zu is "
                     "not a multiple of a huge page (2MiB or 1GiB); set "
                     "memory.chunk to 2MiB or 1GiB",
                     a->p.chunk_size);
            return RV_ERR_CONFIG;
        }
    }
    return RV_OK;
}

rv_status_t rv_mem_chunk_allocator_create(const rv_mem_chunk_params_t *params,
                                          rv_mem_chunk_allocator_t **alloc_p)
{
    rv_mem_chunk_allocator_t *a;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t chunk = params->chunk_size;
    rv_status_t status;

    if (params->ops == NULL || chunk == 0 || chunk % page != 0) {
        rv_error("memory.chunk %zu is not a multiple of the page size (%zu)",
                 chunk, page);
        return RV_ERR_INVALID;
    }
    status = check_node(params->numa_node);
    if (status != RV_OK)
        return status;

    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return RV_ERR_NO_MEMORY;
    a->p = *params;
    a->page = page;

    status = choose_source(a);
    if (status != RV_OK)
        goto err_free;
    if (a->p.source == RV_MEM_SOURCE_MMAP) {
        /* The largest power of two dividing the chunk size, so that a
         * chunk of a power-of-two size is aligned to its size; at least
         * 2 MiB-aligned whenever it is a multiple of 2 MiB (THP needs it). */
        a->align = chunk & -chunk;
    } else {
        a->align = page;
    }

    if (a->p.numa_node >= 0 && numa_available() >= 0) {
        a->nodemask = numa_allocate_nodemask();
        if (a->nodemask == NULL) {
            status = RV_ERR_NO_MEMORY;
            goto err_free;
        }
        numa_bitmask_setbit(a->nodemask, (unsigned)a->p.numa_node);
    }
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        status = RV_ERR_NO_MEMORY;
        goto err_mask;
    }
    rv_debug("chunk allocator: node %d, chunks of %zu bytes from %s, huge "
             "pages %s",
             a->p.numa_node, chunk,
             a->p.source == RV_MEM_SOURCE_MMAP ? "mmap" : "the transport",
             rv_config_enum_name("memory.huge_pages", (int)a->p.huge_pages));
    *alloc_p = a;
    return RV_OK;

err_mask:
    if (a->nodemask != NULL)
        numa_bitmask_free(a->nodemask);
err_free:
    free(a);
    return status;
}

/* ---------------------------------------------------------------------- */
/* Getting memory from the system                                          */

/* Binds [addr, addr+len) to the allocator's zone. */
static int bind_range(rv_mem_chunk_allocator_t *a, void *addr, size_t len,
                      unsigned flags)
{
    if (a->nodemask == NULL)
        return 0;
    return (int)mbind(addr, len, MPOL_BIND, a->nodemask->maskp,
                      a->nodemask->size + 1, flags);
}

/*
 * Faults in [addr, addr+len) for writing. MADV_POPULATE_WRITE (Linux 5.14)
 * reports a failure (e.g. no huge page left on the bound node) as an error
 * instead of SIGBUS; older kernels get a write per page.
 */
static int populate(void *addr, size_t len, size_t page)
{
    if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
        return 0;
    if (errno != EINVAL)
        return -1;
    for (size_t off = 0; off < len; off += page)
        ((volatile char *)addr)[off] = 0;
    return 0;
}

/*
 * Maps @p len bytes at an address aligned to @p align: reserve address
 * space, then map the real thing over the aligned part with MAP_FIXED and
 * give back the slack. @p flags are extra mmap flags (MAP_HUGETLB|...).
 */
static void *map_aligned(size_t len, size_t align, int flags)
{
    if (flags & MAP_HUGETLB) {
        /* The kernel aligns huge page mappings itself: try that first, so
         * that no reservation is replaced (see below). */
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        if (((uintptr_t)p & (align - 1)) == 0)
            return p;
        munmap(p, len);
    }
    size_t span = len + align;
    char *res = mmap(NULL, span, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)res + align - 1) & ~(uintptr_t)(align - 1);
    char *p = mmap((void *)start, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | flags, -1, 0);
    if (p == MAP_FAILED) {
        /* A failed MAP_FIXED may already have removed the reservation
         * under it, and another thread may have mapped something there
         * since: give back only the parts around it, which are ours. */
        int saved = errno;
        if ((char *)start > res)
            munmap(res, (size_t)((char *)start - res));
        if ((char *)start + len < res + span)
            munmap((char *)start + len,
                   (size_t)(res + span - ((char *)start + len)));
        errno = saved;
        return NULL;
    }
    if ((char *)start > res)
        munmap(res, (size_t)((char *)start - res));
    if ((char *)start + len < res + span)
        munmap((char *)start + len,
               (size_t)(res + span - ((char *)start + len)));
    return p;
}

static const char *page_size_name(size_t size)
{
    return size == GIB ? "1GiB" : "2MiB";
}

/*
 * Tries MAP_HUGETLB pages of @p hsize. Returns the bound, faulted-in
 * memory or NULL, with the reason in @p why.
 */
static void *map_hugetlb(rv_mem_chunk_allocator_t *a, size_t len, size_t hsize,
                         char *why, size_t whylen)
{
    int flag = hsize == GIB ? MAP_HUGE_1GB : MAP_HUGE_2MB;
    size_t align = a->align > hsize ? a->align : hsize;
    void *p = map_aligned(len, align, MAP_HUGETLB | flag);

    if (p == NULL) {
        snprintf(why, whylen, "mmap MAP_HUGETLB %s: %m", page_size_name(hsize));
        return NULL;
    }
    if (bind_range(a, p, len, 0) != 0) {
        snprintf(why, whylen, "mbind %s huge pages to node %d: %m",
                 page_size_name(hsize), a->p.numa_node);
        goto err_unmap;
    }
    if (populate(p, len, hsize) != 0) {
        snprintf(why, whylen, "no %s huge pages free on node %d (%m)",
                 page_size_name(hsize), a->p.numa_node);
        goto err_unmap;
    }
    return p;

err_unmap:
    munmap(p, len);
    return NULL;
}

/* Normal pages, with transparent huge pages advised when @p thp. */
static void *map_normal(rv_mem_chunk_allocator_t *a, size_t len, bool thp,
                        bool *thp_p)
{
    void *p = map_aligned(len, a->align, 0);

    if (p == NULL) {
        rv_error("cannot map %zu bytes for a registered memory chunk: %m", len);
        return NULL;
    }
    /* With huge_pages off the user asked for normal pages: keep THP (in
     * "always" mode) away too. madvise failing only costs the hint. */
    *thp_p = thp && madvise(p, len, MADV_HUGEPAGE) == 0;
    if (!thp)
        madvise(p, len, MADV_NOHUGEPAGE);
    if (bind_range(a, p, len, 0) != 0) {
        rv_error("cannot bind a registered memory chunk to numa node %d "
                 "(mbind: %m)",
                 a->p.numa_node);
        goto err_unmap;
    }
    if (populate(p, len, a->page) != 0) {
        rv_error("cannot fault in %zu bytes on numa node %d (%m); is the "
                 "node out of memory?",
                 len, a->p.numa_node);
        goto err_unmap;
    }
    return p;

err_unmap:
    munmap(p, len);
    return NULL;
}

/* Whether the kernel does transparent huge pages for madvised memory. */
static bool thp_enabled(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL)
        return false;
    if (fgets(buf, sizeof(buf), f) == NULL)
        buf[0] = '\0';
    fclose(f);
    return strstr(buf, "[never]") == NULL && buf[0] != '\0';
}

/*
 * Maps, binds and faults in @p len bytes following the huge page policy.
 * On success sets *kind_p.
 */
static void *map_chunk(rv_mem_chunk_allocator_t *a, size_t len,
                       rv_mem_page_kind_t *kind_p)
{
    char tried[512] = "", why[256];
    size_t n = 0;
    bool thp = false;
    void *p;

    if (a->p.huge_pages != RV_HUGE_OFF) {
        static const size_t sizes[] = {GIB, 2 * MIB};
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            if (!huge_divides(len, sizes[i]) ||
                !huge_divides(a->p.chunk_size, sizes[i]))
                continue;
            p = map_hugetlb(a, len, sizes[i], why, sizeof(why));
            if (p != NULL) {
                *kind_p = sizes[i] == GIB ? RV_MEM_PAGE_1G : RV_MEM_PAGE_2M;
                return p;
            }
            n += (size_t)snprintf(tried + n, sizeof(tried) - n, "%s%s",
                                  n ? "; " : "", why);
            if (n >= sizeof(tried))
                n = sizeof(tried) - 1;
        }
        if (n == 0)
            snprintf(tried, sizeof(tried),
                     "memory.chunk %zu is not a "
                     "multiple of a huge page (2MiB or 1GiB)",
                     a->p.chunk_size);
        if (a->p.huge_pages == RV_HUGE_REQUIRE) {
            rv_error("memory.huge_pages is require, but no huge page is "
                     "available for a %zu-byte chunk on numa node %d (%s). "
                     "As root, reserve some: echo N > "
                     "/proc/sys/vm/nr_hugepages (2MiB pages) or "
                     "/sys/kernel/mm/hugepages/hugepages-1048576kB/"
                     "nr_hugepages (1GiB); or set memory.huge_pages: auto",
                     len, a->p.numa_node, tried);
            return NULL;
        }
        thp = huge_divides(a->p.chunk_size, 2 * MIB) && thp_enabled();
    }

    p = map_normal(a, len, thp, &thp);
    if (p == NULL)
        return NULL;
    *kind_p = thp ? RV_MEM_PAGE_THP : RV_MEM_PAGE_NORMAL;

    if (a->p.huge_pages == RV_HUGE_AUTO &&
        !atomic_flag_test_and_set(&fallback_reported)) {
        rv_info("registered memory: no huge pages (%s); using %s instead. "
                "For huge pages, reserve some as root (echo N > "
                "/proc/sys/vm/nr_hugepages for 2MiB pages, "
                "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages "
                "for 1GiB) with memory.chunk a multiple of their size; "
                "memory.huge_pages: off silences this",
                tried,
                thp ? "transparent huge pages (madvise)" : "normal pages");
    }
    return p;
}

/* ---------------------------------------------------------------------- */
/* Chunks                                                                  */

/* A chunk of memory the transport allocates where its peers map it, moved
 * to the allocator's zone and faulted in. Nothing is held on error. */
static rv_status_t chunk_from_transport(rv_mem_chunk_allocator_t *a,
                                        rv_mem_chunk_t *c)
{
    rv_status_t status =
        a->p.ops->mem_alloc(a->p.tp, c->len, &c->tmem, &c->addr);
    if (status != RV_OK) {
        rv_error("the transport cannot allocate a %zu-byte registered "
                 "chunk: %s",
                 c->len, rv_status_str(status));
        return status;
    }
    c->from_transport = true;
    c->kind = RV_MEM_PAGE_TRANSPORT;
    if ((uintptr_t)c->addr % a->page != 0) {
        rv_error("the transport allocated a chunk at %p, not page aligned",
                 c->addr);
        status = RV_ERR_TRANSPORT;
    } else if (bind_range(a, c->addr, c->len, MPOL_MF_MOVE) != 0) {
        /* The transport may already have touched the pages: move them. */
        rv_error("cannot move a transport-allocated chunk to numa node %d "
                 "(mbind: %m)",
                 a->p.numa_node);
        status = RV_ERR_IO;
    } else if (populate(c->addr, c->len, a->page) != 0) {
        rv_error("cannot fault in a transport-allocated chunk of %zu bytes "
                 "(%m)",
                 c->len);
        status = RV_ERR_NO_MEMORY;
    }
    if (status != RV_OK)
        a->p.ops->mem_deregister(a->p.tp, c->tmem);
    return status;
}

/* A chunk rivet maps itself (huge pages per policy) and registers. Nothing
 * is held on error. */
static rv_status_t chunk_from_mmap(rv_mem_chunk_allocator_t *a,
                                   rv_mem_chunk_t *c)
{
    c->addr = map_chunk(a, c->len, &c->kind);
    if (c->addr == NULL)
        return RV_ERR_NO_MEMORY;
    rv_status_t status =
        a->p.ops->mem_register(a->p.tp, c->addr, c->len, &c->tmem);
    if (status != RV_OK) {
        rv_error("the transport cannot register a %zu-byte chunk: %s", c->len,
                 rv_status_str(status));
        munmap(c->addr, c->len);
    }
    return status;
}

static rv_status_t chunk_create(rv_mem_chunk_allocator_t *a, size_t nchunks,
                                rv_mem_chunk_t **chunk_p)
{
    const rv_transport_ops_t *ops = a->p.ops;
    size_t len = nchunks * a->p.chunk_size;
    rv_mem_chunk_t *c;
    rv_status_t status;
    void *rkey;

    if (nchunks == 0 || len / nchunks != a->p.chunk_size)
        return RV_ERR_INVALID;
    status = limit_take(a->p.limit, len);
    if (status != RV_OK)
        return status;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        limit_give(len);
        return RV_ERR_NO_MEMORY;
    }
    c->owner = a;
    c->len = len;
    c->numa_node = a->p.numa_node;
    status = a->p.source == RV_MEM_SOURCE_TRANSPORT ? chunk_from_transport(a, c)
                                                    : chunk_from_mmap(a, c);
    if (status != RV_OK)
        goto err_free;
    a->stats.registrations++;

    status = ops->rkey_pack(a->p.tp, c->tmem, &rkey, &c->rkey_len);
    if (status != RV_OK) {
        rv_error("cannot pack the remote key of a registered chunk: %s",
                 rv_status_str(status));
        goto err_dereg;
    }
    c->rkey = rkey;

    a->stats.bytes_reserved += len;
    a->stats.bytes_registered += len;
    a->stats.chunks[c->kind] += nchunks;
    c->next = a->chunks;
    if (a->chunks != NULL)
        a->chunks->prev = c;
    a->chunks = c;
    rv_debug("chunk %p: %zu bytes, %s pages, node %d", c->addr, len,
             rv_mem_page_kind_str(c->kind), c->numa_node);
    *chunk_p = c;
    return RV_OK;

err_dereg:
    ops->mem_deregister(a->p.tp, c->tmem);
    a->stats.deregistrations++;
    if (!c->from_transport)
        munmap(c->addr, len);
err_free:
    free(c);
    limit_give(len);
    return status;
}

static void chunk_destroy(rv_mem_chunk_allocator_t *a, rv_mem_chunk_t *c)
{
    const rv_transport_ops_t *ops = a->p.ops;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        a->chunks = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;

    ops->rkey_buffer_release(a->p.tp, (void *)c->rkey);
    ops->mem_deregister(a->p.tp, c->tmem); /* frees mem_alloc'ed memory */
    a->stats.deregistrations++;
    if (!c->from_transport && munmap(c->addr, c->len) != 0)
        rv_warn("munmap of a registered chunk: %m");
    a->stats.bytes_reserved -= c->len;
    a->stats.bytes_registered -= c->len;
    a->stats.chunks[c->kind] -= c->len / a->p.chunk_size;
    limit_give(c->len);
    free(c);
}

rv_status_t rv_mem_chunk_alloc(rv_mem_chunk_allocator_t *a, size_t nchunks,
                               rv_mem_chunk_t **chunk_p)
{
    rv_mem_chunk_t *c;
    rv_status_t status = RV_OK;

    pthread_mutex_lock(&a->lock);
    if (nchunks == 1 && a->free_list != NULL) {
        c = a->free_list;
        a->free_list = c->next_free;
    } else {
        status = chunk_create(a, nchunks, &c);
    }
    if (status == RV_OK) {
        c->is_free = false;
        c->next_free = NULL;
        a->stats.bytes_in_use += c->len;
        *chunk_p = c;
    }
    pthread_mutex_unlock(&a->lock);
    return status;
}

void rv_mem_chunk_free(rv_mem_chunk_allocator_t *a, rv_mem_chunk_t *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    if (c->owner != a || c->is_free) {
        rv_error("chunk %p freed twice or to the wrong allocator", c->addr);
        pthread_mutex_unlock(&a->lock);
        return;
    }
    a->stats.bytes_in_use -= c->len;
    if (c->len == a->p.chunk_size) {
        c->is_free = true;
        c->next_free = a->free_list;
        a->free_list = c;
    } else {
        chunk_destroy(a, c);
    }
    pthread_mutex_unlock(&a->lock);
}

void rv_mem_chunk_allocator_trim(rv_mem_chunk_allocator_t *a)
{
    pthread_mutex_lock(&a->lock);
    while (a->free_list != NULL) {
        rv_mem_chunk_t *c = a->free_list;
        a->free_list = c->next_free;
        chunk_destroy(a, c);
    }
    pthread_mutex_unlock(&a->lock);
}

void rv_mem_chunk_allocator_destroy(rv_mem_chunk_allocator_t *a)
{
    if (a == NULL)
        return;
    if (a->stats.bytes_in_use != 0)
        rv_debug("chunk allocator destroyed with %llu bytes still handed out",
                 (unsigned long long)a->stats.bytes_in_use);
    while (a->chunks != NULL)
        chunk_destroy(a, a->chunks);
    pthread_mutex_destroy(&a->lock);
    if (a->nodemask != NULL)
        numa_bitmask_free(a->nodemask);
    free(a);
}

size_t rv_mem_chunk_size(const rv_mem_chunk_allocator_t *a)
{
    return a->p.chunk_size;
}

size_t rv_mem_chunk_alignment(const rv_mem_chunk_allocator_t *a)
{
    return a->align;
}

rv_mem_source_t rv_mem_chunk_source(const rv_mem_chunk_allocator_t *a)
{
    return a->p.source;
}

rv_mem_stats_t rv_mem_chunk_stats(rv_mem_chunk_allocator_t *a)
{
    pthread_mutex_lock(&a->lock);
    rv_mem_stats_t s = a->stats;
    pthread_mutex_unlock(&a->lock);
    return s;
}
