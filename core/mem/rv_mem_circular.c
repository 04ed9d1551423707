/*
 * Circular and linear-circular sub-allocators (Seriema §4.2,
 * `BasicMemoryAllocator` and `LinearAllocator`).
 *
 * Circular: a ring of fixed-size units carved from whole chunks. A unit is
 * in one of three states:
 *
 *   FREE     may be handed out;
 *   HELD     handed out, the user is filling it or posting from it;
 *   PENDING  given back with a completion tag (channel, seq): operations
 *            that read or write it may still be in flight, and it becomes
 *            FREE only once the transport reports that tag complete.
 *
 * The tag is the hook for Seriema's flush-number recycling (§4.1): the
 * verbs backend numbers the flushes (signalled sends) of each QP, a unit
 * is tagged with the flush number of its last send, and every unit of a
 * flush number is recycled as soon as that flush's completion arrives.
 * Nothing here depends on how the numbers are produced: the allocator only
 * asks completed(channel, seq), or reads a per-channel "completed sequence"
 * array.
 *
 * Units are recycled in ring order: the cursor never skips a unit that is
 * not reusable yet. If it did, units freed later (with later sequence
 * numbers) would be reused before earlier ones, which only happens when
 * channels complete out of order; instead the ring grows by one chunk of
 * units inserted at the cursor (Seriema jumps to the new units too), up to
 * max_units, and past that the caller gets RV_ERR_AGAIN.
 *
 * Unlike Seriema's allocator, which grows without bound and never gives
 * memory back, chunks return to the chunk allocator on destroy.
 *
 * Linear-circular: a bump pointer over the current unit of a circular
 * allocator. Each allocation returns its own address (Seriema's returns one
 * object with a moved offset, so a caller had to post before allocating
 * again). When a request does not fit, the current unit is freed to the
 * circular allocator with its tag (the last tag any of its segments got)
 * and the next unit becomes current.
 *
 * Both are single-threaded: one owner thread calls all their functions.
 */
#include <stdlib.h>
#include <string.h>

#include "rv_regmem.h"

enum { UNIT_FREE, UNIT_HELD, UNIT_PENDING };

/* The units carved from one chunk. */
typedef struct circ_chunk {
    rv_mem_chunk_t *chunk;
    rv_mem_unit_t *units;
    struct circ_chunk *next;
} circ_chunk_t;

struct rv_mem_circular {
    rv_mem_circular_params_t p;
    size_t units_per_chunk;
    size_t nunits; /* units in the ring */
    circ_chunk_t *chunks;
    rv_mem_unit_t *last; /* the unit before the cursor */
    size_t unit_align;   /* every unit's address is a multiple */
};

static bool unit_completed(const rv_mem_circular_t *c, const rv_mem_unit_t *u)
{
    if (c->p.completed != NULL)
        return c->p.completed(c->p.completed_arg, u->channel, u->seq);
    if (u->channel >= c->p.nchannels) {
        rv_error("unit %p tagged with channel %u, but there are %u channels",
                 u->addr, u->channel, c->p.nchannels);
        return false;
    }
    return atomic_load_explicit(&c->p.completed_seq[u->channel],
                                memory_order_acquire) >= u->seq;
}

/* Whether the unit can be handed out now; a completed PENDING unit turns
 * FREE. */
static bool unit_reusable(const rv_mem_circular_t *c, rv_mem_unit_t *u)
{
    if (u->state == UNIT_PENDING && unit_completed(c, u)) {
        u->state = UNIT_FREE;
        u->tagged = false;
    }
    return u->state == UNIT_FREE;
}

/* Adds one chunk of units to the ring, right after c->last, so that they
 * are the next ones handed out. */
static rv_status_t circ_grow(rv_mem_circular_t *c)
{
    size_t n = c->units_per_chunk;
    circ_chunk_t *cc = calloc(1, sizeof(*cc));
    rv_status_t status;

    if (cc == NULL)
        return RV_ERR_NO_MEMORY;
    cc->units = calloc(n, sizeof(*cc->units));
    if (cc->units == NULL) {
        status = RV_ERR_NO_MEMORY;
        goto err_cc;
    }
    status = rv_mem_chunk_alloc(c->p.chunks, 1, &cc->chunk);
    if (status != RV_OK)
        goto err_units;

    for (size_t i = 0; i < n; i++) {
        rv_mem_unit_t *u = &cc->units[i];
        u->addr = (char *)cc->chunk->addr + i * c->p.unit_size;
        u->len = c->p.unit_size;
        u->chunk = cc->chunk;
        u->state = UNIT_FREE;
        u->next = i + 1 < n ? &cc->units[i + 1] : NULL;
    }
    if (c->last == NULL) {
        cc->units[n - 1].next = &cc->units[0];
        c->last = &cc->units[n - 1];
    } else {
        cc->units[n - 1].next = c->last->next;
        c->last->next = &cc->units[0];
    }
    cc->next = c->chunks;
    c->chunks = cc;
    c->nunits += n;
    return RV_OK;

err_units:
    free(cc->units);
err_cc:
    free(cc);
    return status;
}

rv_status_t rv_mem_circular_create(const rv_mem_circular_params_t *params,
                                   rv_mem_circular_t **circ_p)
{
    rv_mem_circular_t *c;
    rv_status_t status;
    size_t chunk;

    if (params->chunks == NULL) {
        rv_error("circular allocator: no chunk allocator given");
        return RV_ERR_INVALID;
    }
    chunk = rv_mem_chunk_size(params->chunks);
    if (params->unit_size == 0 || params->unit_size % 64 != 0 ||
        chunk % params->unit_size != 0) {
        rv_error("circular allocator: unit size %zu must be a multiple of 64 "
                 "that divides the chunk size %zu",
                 params->unit_size, chunk);
        return RV_ERR_INVALID;
    }
    if (params->completed == NULL && params->completed_seq == NULL) {
        rv_error("circular allocator: give either a completed callback or a "
                 "completed-sequence array");
        return RV_ERR_INVALID;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return RV_ERR_NO_MEMORY;
    c->p = *params;
    c->units_per_chunk = chunk / params->unit_size;
    if (c->p.max_units != 0 && c->p.max_units < c->units_per_chunk)
        c->p.max_units = c->units_per_chunk;
    c->unit_align = params->unit_size & -params->unit_size;
    if (c->unit_align > rv_mem_chunk_alignment(params->chunks))
        c->unit_align = rv_mem_chunk_alignment(params->chunks);
    status = circ_grow(c);
    if (status != RV_OK)
        goto err_free;
    *circ_p = c;
    return RV_OK;

err_free:
    free(c);
    return status;
}

void rv_mem_circular_destroy(rv_mem_circular_t *c)
{
    if (c == NULL)
        return;
    while (c->chunks != NULL) {
        circ_chunk_t *cc = c->chunks;
        c->chunks = cc->next;
        rv_mem_chunk_free(c->p.chunks, cc->chunk);
        free(cc->units);
        free(cc);
    }
    free(c);
}

rv_status_t rv_mem_circular_alloc(rv_mem_circular_t *c, rv_mem_unit_t **unit_p)
{
    rv_mem_unit_t *u = c->last->next;

    if (!unit_reusable(c, u)) {
        if (c->p.max_units != 0 &&
            c->nunits + c->units_per_chunk > c->p.max_units)
            return RV_ERR_AGAIN;
        rv_status_t status = circ_grow(c);
        if (status != RV_OK)
            return status;
        u = c->last->next; /* the first new unit */
    }
    u->state = UNIT_HELD;
    u->tagged = false;
    c->last = u;
    *unit_p = u;
    return RV_OK;
}

void rv_mem_circular_free(rv_mem_circular_t *c, rv_mem_unit_t *u)
{
    (void)c; /* the state lives in the unit; c keeps the call symmetric */
    if (u->state != UNIT_HELD) {
        rv_error("circular allocator: unit %p freed twice", u->addr);
        return;
    }
    u->state = u->tagged ? UNIT_PENDING : UNIT_FREE;
}

size_t rv_mem_circular_unit_size(const rv_mem_circular_t *c)
{
    return c->p.unit_size;
}

size_t rv_mem_circular_unit_alignment(const rv_mem_circular_t *c)
{
    return c->unit_align;
}

rv_mem_stats_t rv_mem_circular_stats(const rv_mem_circular_t *c)
{
    rv_mem_stats_t s;
    size_t nchunks = 0;

    memset(&s, 0, sizeof(s));
    for (const circ_chunk_t *cc = c->chunks; cc != NULL; cc = cc->next) {
        s.chunks[cc->chunk->kind]++;
        nchunks++;
    }
    s.bytes_reserved = nchunks * rv_mem_chunk_size(c->p.chunks);
    s.bytes_registered = s.bytes_reserved;
    /* A PENDING unit is in use until its tag completes: the network may
     * still be reading it. */
    s.bytes_in_use = 0;
    for (const circ_chunk_t *cc = c->chunks; cc != NULL; cc = cc->next) {
        for (size_t i = 0; i < c->units_per_chunk; i++) {
            const rv_mem_unit_t *u = &cc->units[i];
            if (u->state == UNIT_HELD ||
                (u->state == UNIT_PENDING && !unit_completed(c, u)))
                s.bytes_in_use += c->p.unit_size;
        }
    }
    return s;
}

/* ---------------------------------------------------------------------- */
/* Linear-circular                                                         */

struct rv_mem_linear {
    rv_mem_circular_t *circ;
    rv_mem_unit_t *unit; /* current unit, HELD, or NULL */
    size_t offset;       /* bytes used in it */
};

rv_status_t rv_mem_linear_create(rv_mem_circular_t *circ,
                                 rv_mem_linear_t **lin_p)
{
    rv_mem_linear_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return RV_ERR_NO_MEMORY;
    l->circ = circ;
    *lin_p = l;
    return RV_OK;
}

void rv_mem_linear_retire(rv_mem_linear_t *l)
{
    if (l->unit != NULL) {
        rv_mem_circular_free(l->circ, l->unit);
        l->unit = NULL;
    }
}

void rv_mem_linear_destroy(rv_mem_linear_t *l)
{
    if (l == NULL)
        return;
    rv_mem_linear_retire(l);
    free(l);
}

rv_status_t rv_mem_linear_alloc(rv_mem_linear_t *l, size_t len, size_t align,
                                void **addr_p, rv_mem_unit_t **unit_p)
{
    size_t unit = rv_mem_circular_unit_size(l->circ);
    size_t start = 0;

    if (align == 0)
        align = 8;
    if (len == 0 || len > unit || (align & (align - 1)) != 0 ||
        align > rv_mem_circular_unit_alignment(l->circ)) {
        rv_error("linear allocator: cannot take %zu bytes aligned to %zu "
                 "from units of %zu bytes aligned to %zu",
                 len, align, unit, rv_mem_circular_unit_alignment(l->circ));
        return RV_ERR_INVALID;
    }
    if (l->unit != NULL) {
        /* Every unit is aligned to at least align: aligning the offset
         * aligns the address. */
        start = (l->offset + align - 1) & ~(align - 1);
        if (start + len > unit) {
            rv_mem_linear_retire(l);
            start = 0;
        }
    }
    if (l->unit == NULL) {
        rv_status_t status = rv_mem_circular_alloc(l->circ, &l->unit);
        if (status != RV_OK)
            return status;
    }
    l->offset = start + len;
    *addr_p = (char *)l->unit->addr + start;
    if (unit_p != NULL)
        *unit_p = l->unit;
    return RV_OK;
}
