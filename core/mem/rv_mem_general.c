/*
 * General best-fit allocator over registered chunks (what Seriema's
 * `LinearMemoryAllocator` is used for, done better: Seriema's allocator
 * has 7 segregated classes in steps of x8 with no coalescing, so a
 * 121-byte Hex board takes a 4 KiB unit).
 *
 * Bookkeeping lives outside the registered memory: a block descriptor per
 * free or allocated block. Registered memory is written by peers, and a
 * header inside it would be one stray remote write away from corrupting
 * the allocator.
 *
 * - Each chunk keeps its blocks in an address-ordered doubly-linked list,
 *   so a freed block merges with free neighbours in O(1): two neighbouring
 *   blocks are never both free, and when nothing is allocated a chunk is
 *   one free block.
 * - Free blocks sit in bins by floor(log2(length)). Best fit: scan the
 *   bin of the request's size class for the smallest block that fits
 *   (alignment included), and if none does, the next non-empty bins in
 *   turn; every block of a higher bin is longer than any of a lower one,
 *   so the first bin with a fit holds the best fit.
 * - Allocated blocks are found by address in a hash table (uthash).
 * - Requests that cannot fit in one chunk get a dedicated region of whole
 *   chunks, registered as one, given back to the system on free.
 *
 * All sizes and addresses are multiples of RV_MEM_GENERAL_GRANULE, so
 * splitting never leaves a fragment smaller than a granule.
 *
 * Thread-safe: one mutex around every call.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "rv_regmem.h"

#define NBINS 64
#define GRANULE ((size_t)RV_MEM_GENERAL_GRANULE)

typedef struct gblock {
    uintptr_t addr;
    size_t len;
    rv_mem_chunk_t *chunk;
    struct gblock *prev, *next;   /* address order in the chunk */
    struct gblock *bprev, *bnext; /* bin list, while free */
    struct gchunk *gc;            /* NULL for a dedicated region */
    bool free;
    UT_hash_handle hh; /* by addr, while allocated */
} gblock_t;

typedef struct gchunk {
    rv_mem_chunk_t *chunk;
    gblock_t *first;
    struct gchunk *prev, *next;
} gchunk_t;

struct rv_mem_general {
    rv_mem_chunk_allocator_t *chunks;
    size_t chunk_size;
    pthread_mutex_t lock; /* protects everything below */
    gchunk_t *gchunks;
    gblock_t *bins[NBINS];
    gblock_t *used;        /* hash of allocated blocks */
    uint64_t nchunks_held; /* chunks in gchunks and regions */
    uint64_t bytes_held;
    uint64_t bytes_in_use;
    uint64_t free_blocks;
    uint64_t kinds[RV_MEM_PAGE_KINDS];
};

static unsigned bin_of(size_t len)
{
    return (unsigned)(63 - __builtin_clzll((unsigned long long)len));
}

static void bin_insert(rv_mem_general_t *g, gblock_t *b)
{
    unsigned i = bin_of(b->len);
    b->free = true;
    b->bprev = NULL;
    b->bnext = g->bins[i];
    if (b->bnext != NULL)
        b->bnext->bprev = b;
    g->bins[i] = b;
    g->free_blocks++;
}

static void bin_remove(rv_mem_general_t *g, gblock_t *b)
{
    if (b->bprev != NULL)
        b->bprev->bnext = b->bnext;
    else
        g->bins[bin_of(b->len)] = b->bnext;
    if (b->bnext != NULL)
        b->bnext->bprev = b->bprev;
    b->bprev = b->bnext = NULL;
    b->free = false;
    g->free_blocks--;
}

static uintptr_t align_up(uintptr_t x, size_t align)
{
    return (x + align - 1) & ~(uintptr_t)(align - 1);
}

static bool fits(const gblock_t *b, size_t len, size_t align)
{
    uintptr_t start = align_up(b->addr, align);
    return start + len <= b->addr + b->len;
}

/* The best-fitting free block, or NULL. */
static gblock_t *best_fit(rv_mem_general_t *g, size_t len, size_t align)
{
    for (unsigned i = bin_of(len); i < NBINS; i++) {
        gblock_t *best = NULL;
        for (gblock_t *b = g->bins[i]; b != NULL; b = b->bnext) {
            if (fits(b, len, align) &&
                (best == NULL || b->len < best->len ||
                 (b->len == best->len && b->addr < best->addr)))
                best = b;
        }
        if (best != NULL)
            return best;
    }
    return NULL;
}

/* Takes a chunk and makes it one free block. */
static rv_status_t add_chunk(rv_mem_general_t *g)
{
    gchunk_t *gc = calloc(1, sizeof(*gc));
    gblock_t *b = calloc(1, sizeof(*b));
    rv_status_t status;

    if (gc == NULL || b == NULL) {
        status = RV_ERR_NO_MEMORY;
        goto err_free;
    }
    status = rv_mem_chunk_alloc(g->chunks, 1, &gc->chunk);
    if (status != RV_OK)
        goto err_free;
    b->addr = (uintptr_t)gc->chunk->addr;
    b->len = gc->chunk->len;
    b->chunk = gc->chunk;
    b->gc = gc;
    gc->first = b;
    bin_insert(g, b);
    gc->next = g->gchunks;
    if (g->gchunks != NULL)
        g->gchunks->prev = gc;
    g->gchunks = gc;
    g->nchunks_held++;
    g->bytes_held += gc->chunk->len;
    g->kinds[gc->chunk->kind]++;
    return RV_OK;

err_free:
    free(b);
    free(gc);
    return status;
}

static void remove_chunk(rv_mem_general_t *g, gchunk_t *gc)
{
    if (gc->prev != NULL)
        gc->prev->next = gc->next;
    else
        g->gchunks = gc->next;
    if (gc->next != NULL)
        gc->next->prev = gc->prev;
    g->nchunks_held--;
    g->bytes_held -= gc->chunk->len;
    g->kinds[gc->chunk->kind]--;
    rv_mem_chunk_free(g->chunks, gc->chunk);
    free(gc);
}

/*
 * Carves [start, start+len) out of free block @p b, using the spare
 * descriptors in @p spare (two, allocated beforehand so that this cannot
 * fail half-way). Returns the allocated block.
 */
static gblock_t *carve(rv_mem_general_t *g, gblock_t *b, uintptr_t start,
                       size_t len, gblock_t *spare[2])
{
    size_t lead = start - b->addr;
    size_t tail = b->addr + b->len - (start + len);
    gblock_t *u;

    bin_remove(g, b);
    if (lead == 0) {
        u = b;
    } else {
        /* b keeps the leading part, free; u follows it. */
        u = spare[0];
        spare[0] = NULL;
        *u = (gblock_t){.addr = start,
                        .chunk = b->chunk,
                        .gc = b->gc,
                        .prev = b,
                        .next = b->next};
        if (b->next != NULL)
            b->next->prev = u;
        b->next = u;
        b->len = lead;
        bin_insert(g, b);
    }
    u->len = len;
    if (tail != 0) {
        gblock_t *t = spare[1];
        spare[1] = NULL;
        *t = (gblock_t){.addr = start + len,
                        .len = tail,
                        .chunk = u->chunk,
                        .gc = u->gc,
                        .prev = u,
                        .next = u->next};
        if (u->next != NULL)
            u->next->prev = t;
        u->next = t;
        bin_insert(g, t);
    }
    u->free = false;
    return u;
}

/* A dedicated region for a request that does not fit in a chunk. */
static rv_status_t alloc_region(rv_mem_general_t *g, size_t len, size_t align,
                                gblock_t **u_p)
{
    size_t need = len, n;
    gblock_t *u = calloc(1, sizeof(*u));
    rv_mem_chunk_t *c;
    rv_status_t status;

    if (u == NULL)
        return RV_ERR_NO_MEMORY;
    if (align > rv_mem_chunk_alignment(g->chunks))
        need += align; /* room to align inside the region */
    n = (need + g->chunk_size - 1) / g->chunk_size;
    status = rv_mem_chunk_alloc(g->chunks, n, &c);
    if (status != RV_OK) {
        free(u);
        return status;
    }
    u->addr = align_up((uintptr_t)c->addr, align);
    u->len = c->len; /* all of it is in use, alignment padding included */
    u->chunk = c;
    g->nchunks_held += n;
    g->bytes_held += c->len;
    g->kinds[c->kind] += n;
    *u_p = u;
    return RV_OK;
}

rv_status_t rv_mem_general_create(rv_mem_chunk_allocator_t *chunks,
                                  rv_mem_general_t **gen_p)
{
    rv_mem_general_t *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return RV_ERR_NO_MEMORY;
    g->chunks = chunks;
    g->chunk_size = rv_mem_chunk_size(chunks);
    if (pthread_mutex_init(&g->lock, NULL) != 0) {
        free(g);
        return RV_ERR_NO_MEMORY;
    }
    *gen_p = g;
    return RV_OK;
}

static void free_region(rv_mem_general_t *g, gblock_t *u)
{
    size_t n = u->chunk->len / g->chunk_size;
    g->nchunks_held -= n;
    g->bytes_held -= u->chunk->len;
    g->kinds[u->chunk->kind] -= n;
    rv_mem_chunk_free(g->chunks, u->chunk);
    free(u);
}

void rv_mem_general_destroy(rv_mem_general_t *g)
{
    gblock_t *u, *tmp;

    if (g == NULL)
        return;
    /* Regions are known only to the hash; blocks of chunks, free or not,
     * to their chunk's list. */
    HASH_ITER(hh, g->used, u, tmp)
    {
        HASH_DEL(g->used, u);
        if (u->gc == NULL)
            free_region(g, u);
    }
    while (g->gchunks != NULL) {
        gchunk_t *gc = g->gchunks;
        for (gblock_t *b = gc->first, *next; b != NULL; b = next) {
            next = b->next;
            free(b);
        }
        remove_chunk(g, gc);
    }
    pthread_mutex_destroy(&g->lock);
    free(g);
}

rv_status_t rv_mem_general_alloc(rv_mem_general_t *g, size_t len, size_t align,
                                 void **addr_p, const rv_mem_chunk_t **chunk_p)
{
    gblock_t *spare[2] = {NULL, NULL}, *b, *u = NULL;
    rv_status_t status = RV_OK;

    if (align == 0)
        align = GRANULE;
    if (len == 0 || (align & (align - 1)) != 0 || len > SIZE_MAX / 2 ||
        align > g->chunk_size) {
        rv_error("general allocator: invalid request of %zu bytes aligned "
                 "to %zu (the alignment must be a power of two at most the "
                 "chunk size %zu)",
                 len, align, g->chunk_size);
        return RV_ERR_INVALID;
    }
    if (align < GRANULE)
        align = GRANULE;
    len = align_up(len, GRANULE);

    pthread_mutex_lock(&g->lock);
    if (len > g->chunk_size) {
        status = alloc_region(g, len, align, &u);
        goto out;
    }
    b = best_fit(g, len, align);
    if (b == NULL) {
        status = add_chunk(g);
        if (status != RV_OK)
            goto out;
        b = best_fit(g, len, align);
        if (b == NULL) { /* the alignment does not fit in a chunk */
            status = alloc_region(g, len, align, &u);
            goto out;
        }
    }
    spare[0] = malloc(sizeof(gblock_t));
    spare[1] = malloc(sizeof(gblock_t));
    if (spare[0] == NULL || spare[1] == NULL) {
        status = RV_ERR_NO_MEMORY;
        goto out;
    }
    u = carve(g, b, align_up(b->addr, align), len, spare);

out:
    free(spare[0]);
    free(spare[1]);
    if (status == RV_OK) {
        HASH_ADD_PTR(g->used, addr, u);
        g->bytes_in_use += u->len;
        *addr_p = (void *)u->addr;
        if (chunk_p != NULL)
            *chunk_p = u->chunk;
    }
    pthread_mutex_unlock(&g->lock);
    return status;
}

void rv_mem_general_free(rv_mem_general_t *g, void *addr)
{
    uintptr_t key = (uintptr_t)addr;
    gblock_t *b;

    if (addr == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    HASH_FIND_PTR(g->used, &key, b);
    if (b == NULL) {
        pthread_mutex_unlock(&g->lock);
        rv_error("general allocator: %p was not allocated here, or was "
                 "freed already",
                 addr);
        return;
    }
    HASH_DEL(g->used, b);
    g->bytes_in_use -= b->len;
    if (b->gc == NULL) {
        free_region(g, b);
        pthread_mutex_unlock(&g->lock);
        return;
    }
    if (b->prev != NULL && b->prev->free) {
        gblock_t *p = b->prev;
        bin_remove(g, p);
        p->len += b->len;
        p->next = b->next;
        if (b->next != NULL)
            b->next->prev = p;
        free(b);
        b = p;
    }
    if (b->next != NULL && b->next->free) {
        gblock_t *n = b->next;
        bin_remove(g, n);
        b->len += n->len;
        b->next = n->next;
        if (n->next != NULL)
            n->next->prev = b;
        free(n);
    }
    bin_insert(g, b);
    pthread_mutex_unlock(&g->lock);
}

const rv_mem_chunk_t *rv_mem_general_lookup(rv_mem_general_t *g,
                                            const void *addr)
{
    uintptr_t key = (uintptr_t)addr;
    gblock_t *b;

    pthread_mutex_lock(&g->lock);
    HASH_FIND_PTR(g->used, &key, b);
    pthread_mutex_unlock(&g->lock);
    return b != NULL ? b->chunk : NULL;
}

rv_status_t rv_mem_general_reserve(rv_mem_general_t *g, size_t len)
{
    rv_status_t status = RV_OK;
    pthread_mutex_lock(&g->lock);
    while (status == RV_OK && g->bytes_held - g->bytes_in_use < len)
        status = add_chunk(g);
    pthread_mutex_unlock(&g->lock);
    return status;
}

void rv_mem_general_trim(rv_mem_general_t *g)
{
    pthread_mutex_lock(&g->lock);
    for (gchunk_t *gc = g->gchunks, *next; gc != NULL; gc = next) {
        next = gc->next;
        if (gc->first->free && gc->first->next == NULL) {
            bin_remove(g, gc->first);
            free(gc->first);
            remove_chunk(g, gc);
        }
    }
    pthread_mutex_unlock(&g->lock);
}

rv_mem_stats_t rv_mem_general_stats(rv_mem_general_t *g)
{
    rv_mem_stats_t s;

    memset(&s, 0, sizeof(s));
    pthread_mutex_lock(&g->lock);
    s.bytes_reserved = g->bytes_held;
    s.bytes_registered = g->bytes_held;
    s.bytes_in_use = g->bytes_in_use;
    s.free_blocks = g->free_blocks;
    memcpy(s.chunks, g->kinds, sizeof(s.chunks));
    pthread_mutex_unlock(&g->lock);
    return s;
}
