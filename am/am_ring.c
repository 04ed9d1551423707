/*
 * The write path: one-sided messengers (Seriema, section 4.4.1), with
 * rings that grow and with every record proven whole before it runs.
 * Their set-up and growth (the service calls) are in am_ring_setup.c.
 *
 * A messenger is a ring of chunks in the *receiver's* NUMA zone that only
 * the sender writes, by RMA puts. It is created on the first call from a
 * worker to another (Seriema's RDMAMessengerGlobal, but lazily): the
 * sender asks for am.chunks_per_request chunks with a no-setup service
 * call ("rivet.am.ring_req", over the send path); the receiver takes
 * them from its chunk allocator (am.chunk_bytes each, registered once
 * per chunk) and answers with their addresses and remote keys, and a
 * random 64-bit nonce for the ring.
 *
 * Records (am_internal.h) are appended at the sender's position. Each
 * carries its 64-bit sequence number in the ring (low 32 bits in the
 * header) and an 8-byte footer, and the receiver runs a record only when
 * the header shows the expected sequence number and the footer matches:
 *
 *   - records up to AM_HASH_MAX bytes go in ONE put, and the footer is a
 *     hash of the nonce, the sequence number and every byte before it.
 *     Nothing about the order in which a put's bytes land is assumed (a
 *     shared-memory put is a memcpy whose store order is the C library's
 *     business; RDMA does not promise ascending placement either): a
 *     record is run only once all of its bytes are the ones the sender
 *     hashed. Stale bytes from an earlier lap, or from another ring that
 *     used the chunk before, cannot match: the sequence number and nonce
 *     differ.
 *   - larger records are written in two puts separated by a transport
 *     fence: body and footer first, then the 16-byte header, so a header
 *     with the expected sequence number means the body has landed; the
 *     footer binds every header field, so a header read half-written
 *     never passes. Hashing 64 KiB would cost as much as copying it.
 *
 * Either way the receiver's copy of the header is taken again once the
 * record is proven whole: the first copy, taken to learn the record's
 * length, may hold bytes of an older record that stood there.
 *
 * Every record must leave room for a ROTATE record (32 bytes) at the end
 * of its chunk. When the next record does not fit, the sender writes
 * ROTATE and moves on to the next chunk of the ring, provided the
 * receiver has drained it: the receiver pushes (RMA-writes) into the
 * sender's control word the stream offset it has drained, once per chunk
 * (not per record). If the next chunk is still in use and the ring is
 * below am.max_chunks, the sender requests more chunks; when they arrive
 * its next ROTATE says "splice N new chunks in after this one", and the
 * receiver inserts the chunks it allocated for that request at the same
 * place, so both rings stay symmetric. Until then the ring is full and
 * am.on_full applies.
 *
 * Remote notification (RV_NOTIFY_CONSUMED): calls on this path count, at
 * the receiver, in a per-ring "notified" word that is pushed with the
 * consumed offset (one 16-byte put); the sender completes the
 * synchronizers of those calls in order as the word grows. No reply
 * message is sent.
 *
 * Over UCX's tcp transport, puts run through rivet's RMA emulation (an
 * AM carrying the bytes, copied into place by the receiver's progress),
 * because UCX 1.13's own TCP puts are slow; the protocol is the same.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"

/* Records up to this size are proven whole by a hash of all their bytes;
 * larger ones by a header written after a fence (see above). */
#define AM_HASH_MAX 1024u
/* A ROTATE record: header, the u32 chunks to splice (padded to 8), footer. */
#define AM_ROT_SIZE (sizeof(am_rec_t) + 8 + AM_REC_FOOTER)
/* Records one ring runs per progress call, so that one busy producer
 * does not starve the others. */
#define POLL_BUDGET 256

/* ---------------------------------------------------------------------- */
/* Record validation                                                       */

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* A fast 64-bit hash of @p n bytes (a multiple of 8): four independent
 * multiply lanes, then a final mix. Meant to detect torn records, not to
 * resist an adversary. */
static uint64_t rec_hash(uint64_t nonce, uint64_t seq, const uint8_t *p,
                         size_t n)
{
    const uint64_t m = 0x9E3779B97F4A7C15ull;
    uint64_t a = nonce ^ m, b = seq * 0xC2B2AE3D27D4EB4Full ^ n;
    uint64_t c = nonce + seq, d = ~nonce;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, sizeof(w));
        a = (a ^ w[0]) * m;
        b = (b ^ w[1]) * m;
        c = (c ^ w[2]) * m;
        d = (d ^ w[3]) * m;
    }
    for (; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof(w));
        a = (a ^ w) * m;
        a ^= a >> 29;
    }
    uint64_t h = a ^ rotl(b, 17) ^ rotl(c, 31) ^ rotl(d, 47);
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    return h;
}

/* The footer of a record written body first, header last: it binds the
 * whole header, so a header read half-written never matches. */
static uint64_t large_footer(uint64_t nonce, uint64_t seq, const am_rec_t *h)
{
    uint64_t x = ((uint64_t)h->handler << 32 | h->len) * 0x9E3779B97F4A7C15ull;
    x ^= (uint64_t)h->meta * 0xD6E8FEB86659FD93ull;
    return nonce ^ (seq * 0xC2B2AE3D27D4EB4Full) ^ x ^ (x >> 29);
}

/* ---------------------------------------------------------------------- */
/* Sender                                                                  */

static rv_status_t put(am_worker_t *aw, am_dest_t *d, const void *src,
                       size_t len, uint64_t raddr, rv_trkey_t *rkey,
                       rv_completion_fn cb, void *arg)
{
    return rv_tw_put(aw->w, d->tid, raddr, rkey, src, len, cb, arg);
}

/* Whether the sender may leave its chunk for chunk @p next: spare chunks
 * wait to be spliced in, or the receiver has drained @p next. If not, the
 * ring asks for more chunks (below am.max_chunks) and the sender waits
 * while they come; at the maximum it moves on anyway. */
static bool ring_next_free(am_worker_t *aw, am_dest_t *d, uint32_t next)
{
    am_oring_t *r = &d->ring;
    if (r->nspare > 0)
        return true;
    uint64_t consumed = __atomic_load_n(&r->ctrl->consumed, __ATOMIC_ACQUIRE);
    if (next != r->cur && r->chunks[next].left_end <= consumed)
        return true;
    uint32_t max = (uint32_t)aw->cfg->max_chunks;
    if (!r->growing && !r->grow_refused && r->nchunks < max) {
        uint32_t n = (uint32_t)aw->cfg->chunks_per_request;
        uint32_t room = max - r->nchunks;
        if (am_ring_request(aw, d, n < room ? n : room, false) == RV_OK)
            aw->stats.chunk_growths++;
    }
    return !r->growing;
}

/* Writes the ROTATE record at the ring's position in its chunk,
 * announcing @p splice chunks spliced in after it. */
static bool rotate_put(am_worker_t *aw, am_dest_t *d, uint32_t splice)
{
    am_oring_t *r = &d->ring;
    const am_ochunk_t *ch = &r->chunks[r->cur];
    uint64_t *rot = malloc(AM_ROT_SIZE);
    if (rot == NULL)
        return false;
    am_rec_t rec = {.seq = (uint32_t)r->seq, .len = 4, .meta = AM_REC_ROTATE};
    memset(rot, 0, AM_ROT_SIZE);
    memcpy(rot, &rec, sizeof(rec));
    memcpy((uint8_t *)rot + sizeof(rec), &splice, sizeof(splice));
    rot[3] = rec_hash(r->nonce, r->seq, (const uint8_t *)rot,
                      AM_ROT_SIZE - AM_REC_FOOTER);
    rv_status_t st = put(aw, d, rot, AM_ROT_SIZE, ch->raddr + r->pos, ch->rkey,
                         am_free_done, rot);
    if (st == RV_INPROGRESS)
        return true;
    free(rot);
    if (st == RV_OK)
        return true;
    rv_error("ring to worker %u: cannot write: %s", d->tid, rv_status_str(st));
    return false;
}

/* The granted spare chunks, spliced in after the current one. */
static void ring_splice_spare(am_oring_t *r, uint32_t splice)
{
    memmove(&r->chunks[r->cur + 1 + splice], &r->chunks[r->cur + 1],
            (r->nchunks - r->cur - 1) * sizeof(*r->chunks));
    memcpy(&r->chunks[r->cur + 1], r->spare, splice * sizeof(*r->spare));
    free(r->spare);
    r->spare = NULL;
    r->nspare = 0;
    r->nchunks += splice;
}

/* Moves the sender to the next chunk, writing ROTATE at the end of the
 * current one. New chunks (from a growth request) are spliced in right
 * after it; otherwise the next chunk of the ring is taken if the receiver
 * has drained it. If it has not, the ring grows (a request goes out and
 * the sender waits for the chunks) while it is below am.max_chunks; at the
 * maximum the sender moves on anyway and waits at the start of the next
 * chunk until the receiver has left it (with a ring of one chunk this is
 * the only way round). False: the ring is full for now. */
static bool ring_rotate(am_worker_t *aw, am_dest_t *d)
{
    am_oring_t *r = &d->ring;
    uint32_t next = (r->cur + 1) % r->nchunks;
    uint32_t splice = r->nspare;
    if (!ring_next_free(aw, d, next))
        return false;
    if (splice) {
        am_ochunk_t *grown =
            realloc(r->chunks, (r->nchunks + splice) * sizeof(*grown));
        if (grown == NULL)
            return false;
        r->chunks = grown;
    }
    if (!rotate_put(aw, d, splice))
        return false;
    am_ochunk_t *ch = &r->chunks[r->cur];
    r->seq++;
    r->stream += ch->len - r->pos;
    ch->left_end = r->stream;
    if (splice) {
        ring_splice_spare(r, splice);
        next = r->cur + 1;
    }
    r->cur = next;
    r->pos = 0;
    return true;
}

/* A ring that is not ready: its first request goes out (RV_ERR_AGAIN
 * while it is answered), or it failed (RV_ERR_NO_MEMORY: the runs take
 * the send path). RV_OK when it is ready. */
static rv_status_t ring_ready(am_worker_t *aw, am_dest_t *d)
{
    am_oring_t *r = &d->ring;
    switch (r->state) {
    case RING_NONE: {
        uint32_t n = (uint32_t)aw->cfg->chunks_per_request;
        if (n > (uint32_t)aw->cfg->max_chunks)
            n = (uint32_t)aw->cfg->max_chunks;
        rv_status_t st = am_ring_request(aw, d, n, true);
        /* A failed request leaves the ring RING_FAILED: the run goes by
         * the send path on the next push (run_transmit). */
        return st == RV_OK || r->state == RING_FAILED ? RV_ERR_AGAIN : st;
    }
    case RING_REQUESTED:
        return RV_ERR_AGAIN;
    case RING_FAILED:
        return RV_ERR_NO_MEMORY;
    case RING_READY:
        break;
    }
    return RV_OK;
}

/* Puts record @p rec (@p len bytes, its header @p hdr with the ring's
 * sequence) at @p raddr of chunk @p ch: a small one in one put, its
 * footer a hash of it; a large one body first, then, after a fence, its
 * header, whose footer hashes the header alone (the receiver sees the
 * header last). */
static rv_status_t record_put(am_worker_t *aw, am_dest_t *d, am_buf_t *b,
                              uint8_t *rec, size_t len, am_rec_t hdr,
                              const am_ochunk_t *ch, uint64_t raddr)
{
    am_oring_t *r = &d->ring;
    uint64_t footer;
    if (len <= AM_HASH_MAX) {
        memcpy(rec, &hdr, sizeof(hdr));
        footer = rec_hash(r->nonce, r->seq, rec, len - AM_REC_FOOTER);
        memcpy(rec + len - AM_REC_FOOTER, &footer, sizeof(footer));
        return put(aw, d, rec, len, raddr, ch->rkey, am_buf_done, b);
    }
    hdr.meta |= AM_REC_LARGE;
    memcpy(rec, &hdr, sizeof(hdr));
    footer = large_footer(r->nonce, r->seq, &hdr);
    memcpy(rec + len - AM_REC_FOOTER, &footer, sizeof(footer));
    rv_status_t st = put(aw, d, rec + sizeof(hdr), len - sizeof(hdr),
                         raddr + sizeof(hdr), ch->rkey, am_buf_done, b);
    if (st < 0)
        return st;
    if (st == RV_INPROGRESS)
        b->inflight++;
    st = rv_tw_fence(aw->w, d->tid);
    if (st < 0)
        return st;
    return put(aw, d, rec, sizeof(hdr), raddr, ch->rkey, am_buf_done, b);
}

rv_status_t am_ring_write(am_worker_t *aw, am_dest_t *d, am_buf_t *b,
                          uint8_t *rec, size_t len)
{
    am_oring_t *r = &d->ring;
    rv_status_t st = ring_ready(aw, d);
    if (st != RV_OK)
        return st;
    if (len > aw->send.max_record)
        return RV_ERR_INVALID;
    am_ochunk_t *ch = &r->chunks[r->cur];
    if (r->pos + len + AM_ROT_SIZE > ch->len) {
        if (!ring_rotate(aw, d))
            return RV_ERR_AGAIN;
        ch = &r->chunks[r->cur];
    }
    /* A chunk is written again only once the receiver has left it. */
    if (r->pos == 0 &&
        ch->left_end > __atomic_load_n(&r->ctrl->consumed, __ATOMIC_ACQUIRE))
        return RV_ERR_AGAIN;
    am_rec_t hdr;
    memcpy(&hdr, rec, sizeof(hdr));
    hdr.seq = (uint32_t)r->seq;
    st = record_put(aw, d, b, rec, len, hdr, ch, ch->raddr + r->pos);
    if (st < 0)
        return st;
    if (st == RV_INPROGRESS)
        b->inflight++;
    r->seq++;
    r->pos += len;
    r->stream += len;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Serializing in place (a ring mapped here)                               */

/*
 * On a peer of this host whose memory is mapped here (UCX's shared-memory
 * transports), the sender need not build a run in a buffer of its own and
 * copy it into the ring: it serializes the calls at the ring's position
 * directly (a view, am_buf_t), and transmits a run by writing its footer
 * and then, with a release store, the sequence word of its header. That
 * is the large-record protocol above with the CPU's store order for the
 * fence: the receiver's acquire load of the sequence word sees the whole
 * body, and until then the word holds an older record's bytes, which do
 * not match its sequence number. Every byte of a call is copied once,
 * from the caller's arguments into the destination's memory, as GASNet-EX
 * smp's AM Medium does into a peer's segment.
 */

uint8_t *am_ring_view_at(am_worker_t *aw, am_dest_t *d, size_t need,
                         size_t *cap)
{
    am_oring_t *r = &d->ring;
    if (r->state != RING_READY || need > aw->send.max_record)
        return NULL;
    am_ochunk_t *ch = &r->chunks[r->cur];
    if (ch->mapped == NULL)
        return NULL;
    if (r->pos + need + AM_ROT_SIZE > ch->len) {
        if (!ring_rotate(aw, d))
            return NULL;
        ch = &r->chunks[r->cur];
        if (ch->mapped == NULL || need + AM_ROT_SIZE > ch->len)
            return NULL;
    }
    /* A chunk is written again only once the receiver has left it. */
    if (r->pos == 0 &&
        ch->left_end > __atomic_load_n(&r->ctrl->consumed, __ATOMIC_ACQUIRE))
        return NULL;
    *cap = ch->len - AM_ROT_SIZE - r->pos;
    return ch->mapped + r->pos;
}

rv_status_t am_ring_commit(am_dest_t *d, am_buf_t *b, size_t off, size_t len)
{
    am_oring_t *r = &d->ring;
    uint8_t *at = b->base + off;
    if (at != r->chunks[r->cur].mapped + r->pos) {
        /* The view's runs are the ring's next bytes: anything else is a
         * defect of this file, and the run must not be half-published. */
        rv_error("ring to worker %u: a run serialized in place is not at the "
                 "ring's position",
                 d->tid);
        return RV_ERR_INVALID;
    }
    /* Every run goes as a batch, a lone call too: a view never holds a
     * record that must stand alone (a DETOUR goes by copy, call_large). */
    am_rec_t hdr = {.seq = (uint32_t)r->seq,
                    .len = (uint32_t)len,
                    .meta = AM_REC_BATCH | AM_REC_LARGE};
    size_t size = am_rec_size(len);
    uint64_t footer = large_footer(r->nonce, r->seq, &hdr);
    memcpy(at + size - AM_REC_FOOTER, &footer, sizeof(footer));
    memcpy(at + sizeof(hdr.seq), (const uint8_t *)&hdr + sizeof(hdr.seq),
           sizeof(hdr) - sizeof(hdr.seq));
    __atomic_store_n((uint32_t *)(void *)at, hdr.seq, __ATOMIC_RELEASE);
    r->seq++;
    r->pos += size;
    r->stream += size;
    return RV_OK;
}

void am_ring_note(am_worker_t *aw, am_dest_t *d, rv_sync_t *s)
{
    am_oring_t *r = &d->ring;
    (void)aw;
    if (r->notes_tail - r->notes_head == r->notes_cap) {
        size_t cap = r->notes_cap ? 2 * r->notes_cap : 64;
        rv_sync_t **grown = malloc(cap * sizeof(*grown));
        if (grown == NULL) {
            rv_error("out of memory tracking a call's notification");
            return; /* the call's synchronizer completes locally */
        }
        for (uint64_t i = r->notes_head; i < r->notes_tail; i++)
            grown[i % cap] = r->notes[i % r->notes_cap];
        free(r->notes);
        r->notes = grown;
        r->notes_cap = cap;
    }
    atomic_fetch_add(&s->pending, 1);
    r->notes[r->notes_tail % r->notes_cap] = s;
    r->notes_tail++;
}

/* Completes the synchronizers whose calls the receiver reported run. */
static unsigned notes_poll(am_dest_t *d)
{
    am_oring_t *r = &d->ring;
    if (r->notes_head == r->notes_tail)
        return 0;
    uint64_t done = __atomic_load_n(&r->ctrl->notified, __ATOMIC_ACQUIRE);
    unsigned n = 0;
    while (r->notes_head < r->notes_tail && r->notes_head < done) {
        rv_sync_complete(r->notes[r->notes_head % r->notes_cap], RV_OK);
        r->notes_head++;
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------------- */
/* Receiver                                                                */

static void push_done(void *arg, rv_status_t status)
{
    am_iring_t *r = arg;
    if (status != RV_OK)
        rv_error("cannot report ring progress to worker %u: %s", r->src,
                 rv_status_str(status));
    r->push_busy = false;
}

/* Reports drained chunks and run notifications to the producer. */
static void ring_push(am_worker_t *aw, am_iring_t *r)
{
    if (!r->push_due || r->push_busy)
        return;
    bool idle = r->depth == 0 && !am_run_more(&r->batch) && r->batch.refs == 0;
    if (idle)
        r->pushed = r->drained;
    r->push_val[0] = r->pushed;
    r->push_val[1] = r->notified;
    r->push_due = !idle; /* push again once the running calls return */
    rv_status_t st = rv_tw_put(aw->w, r->src, r->ctrl_addr, r->ctrl_rkey,
                               r->push_val, sizeof(r->push_val), push_done, r);
    if (st == RV_INPROGRESS)
        r->push_busy = true;
    else if (st != RV_OK)
        rv_error("cannot report ring progress to worker %u: %s", r->src,
                 rv_status_str(st));
}

static void ring_splice(am_iring_t *r, uint32_t splice)
{
    am_ichunk_t *grown =
        realloc(r->chunks, (r->nchunks + splice) * sizeof(*grown));
    if (grown == NULL)
        abort(); /* cannot keep the rings symmetric */
    r->chunks = grown;
    memmove(&r->chunks[r->cur + 1 + splice], &r->chunks[r->cur + 1],
            (r->nchunks - r->cur - 1) * sizeof(*r->chunks));
    memcpy(&r->chunks[r->cur + 1], r->pending, splice * sizeof(*r->pending));
    memmove(r->pending, r->pending + splice,
            (r->npending - splice) * sizeof(*r->pending));
    r->npending -= splice;
    r->nchunks += splice;
}

/* The record at the ring's position if it is whole, else NULL. */
static const uint8_t *ring_peek(am_iring_t *r, am_rec_t *hdr, size_t *size_p)
{
    am_ichunk_t *ch = &r->chunks[r->cur];
    if (r->pos + AM_ROT_SIZE > ch->len) {
        /* Every record leaves room for a ROTATE after it: a sender whose
         * record did not cannot rotate any more, and a header read here
         * would read past the chunk. */
        rv_error("ring from worker %u: a record ends %zu bytes before the "
                 "end of its chunk, with no room to rotate; the ring is "
                 "stopped",
                 r->src, ch->len - r->pos);
        r->stopped = true;
        return NULL;
    }
    const uint8_t *at = ch->addr + r->pos;
    uint32_t seq = __atomic_load_n((const uint32_t *)at, __ATOMIC_ACQUIRE);
    if (seq != (uint32_t)r->seq)
        return NULL;
    memcpy(hdr, at, sizeof(*hdr));
    size_t size = am_rec_size(hdr->len);
    if (hdr->len > ch->len || r->pos + size > ch->len)
        return NULL; /* not (yet) a record */
    uint64_t footer = __atomic_load_n(
        (const uint64_t *)(const void *)(at + size - AM_REC_FOOTER),
        __ATOMIC_ACQUIRE);
    if (hdr->meta & AM_REC_LARGE) {
        if (footer != large_footer(r->nonce, r->seq, hdr))
            return NULL;
    } else if (size > AM_HASH_MAX ||
               footer != rec_hash(r->nonce, r->seq, at, size - AM_REC_FOOTER)) {
        return NULL;
    }
    /* The copy of the header was taken before the record was proven
     * whole, and may hold bytes of an older record: it must be what was
     * proven (the bytes are stable now, until this record is consumed). */
    am_rec_t again;
    memcpy(&again, at, sizeof(again));
    if (memcmp(&again, hdr, sizeof(again)) != 0)
        return NULL;
    *size_p = size;
    return at;
}

/* Runs the next call of the ring batch being executed; 1 if one ran. */
static unsigned batch_step(am_worker_t *aw, am_iring_t *r)
{
    am_run_t *b = &r->batch;
    am_call_t c;
    unsigned plain = am_run_in_plain(b) ? am_run_plain(aw, b, r->src) : 0;
    if (plain > 0)
        return plain;
    int k = am_run_next(b, r->src, AM_REC_FOOTER, &c);
    if (k != 0) {
        if (k < 0) {
            rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
            rv_warn("dropped the rest of a malformed batch from worker %u",
                    r->src);
        }
        b->cur.p = b->cur.end;
        return 0;
    }
    b->refs++;
    am_run_call(aw, &c);
    b->refs--;
    return 1;
}

/* Steps over the record of @p size bytes at the ring's position. */
static void ring_advance(am_iring_t *r, size_t size)
{
    r->pos += size;
    r->stream += size;
    r->seq++;
}

/* A ROTATE record: on to the next chunk, splicing in the chunks granted
 * for the sender's growth request. False when the ring is stopped. */
static bool ring_rotate_in(am_iring_t *r, const uint8_t *body)
{
    uint32_t splice;
    memcpy(&splice, body, sizeof(splice));
    if (splice > r->npending) {
        rv_error("ring from worker %u: asked to splice %u chunks, %u were "
                 "granted; the ring is stopped",
                 r->src, splice, r->npending);
        r->stopped = true;
        return false;
    }
    r->stream += r->chunks[r->cur].len - r->pos;
    r->seq++;
    if (splice) {
        ring_splice(r, splice);
        r->cur++;
    } else {
        r->cur = (r->cur + 1) % r->nchunks;
    }
    r->pos = 0;
    r->drained = r->stream;
    r->push_due = true;
    return true;
}

/* Runs the record at the ring's position: the calls run, RING_WAIT when
 * the ring must wait, RING_STOP when it stopped for good. */
enum { RING_WAIT = -1, RING_STOP = -2 };
static int ring_step(am_worker_t *aw, am_iring_t *r, am_src_t *s)
{
    am_rec_t hdr;
    size_t size;
    const uint8_t *at = ring_peek(r, &hdr, &size);
    if (at == NULL)
        return RING_WAIT;
    const uint8_t *body = at + sizeof(hdr);
    am_call_t c;
    uint64_t token;
    switch (hdr.meta & AM_REC_KIND_MASK) {
    case AM_REC_CALL:
        ring_advance(r, size);
        if (!am_call_decode(&c, r->src, &hdr, body)) {
            rv_worker_count_drop(aw->w, RV_DROP_MALFORMED);
            rv_warn("dropped a malformed call from worker %u", r->src);
            return 0;
        }
        r->depth++;
        am_run_call(aw, &c);
        r->depth--;
        return 1;
    case AM_REC_BATCH:
        ring_advance(r, size);
        r->batch.cur.p = body;
        r->batch.cur.end = body + hdr.len;
        return 0;
    case AM_REC_ROTATE:
        return ring_rotate_in(r, body) ? 0 : RING_STOP;
    case AM_REC_DETOUR:
        memcpy(&token, body, sizeof(token));
        /* The call itself travels over send; run it in its turn. */
        if (s == NULL || !am_src_detour_match(aw, s, r->src, token))
            return RING_WAIT;
        ring_advance(r, size);
        return 1;
    default:
        rv_error("ring from worker %u: unknown record kind %u; the ring is "
                 "stopped",
                 r->src, hdr.meta & AM_REC_KIND_MASK);
        r->stopped = true;
        return RING_STOP;
    }
}

static unsigned ring_poll(am_worker_t *aw, am_iring_t *r)
{
    unsigned n = 0;
    am_src_t *s = aw->recv.srcs[r->src];
    while (n < POLL_BUDGET && r->nchunks > 0 && !r->stopped &&
           !(s != NULL && s->fetching) && am_may_run(aw)) {
        if (am_run_more(&r->batch)) {
            n += batch_step(aw, r);
            continue;
        }
        int k = ring_step(aw, r, s);
        if (k == RING_STOP)
            return n;
        if (k == RING_WAIT)
            break;
        n += (unsigned)k;
    }
    ring_push(aw, r);
    return n;
}

unsigned am_ring_progress(am_worker_t *aw)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < aw->recv.nrings; i++)
        n += ring_poll(aw, aw->recv.rings[i]);
    for (uint32_t i = 0; i < aw->send.nused; i++)
        if (aw->send.used[i]->ring.state == RING_READY)
            n += notes_poll(aw->send.used[i]);
    return n;
}

void am_ring_fini(am_worker_t *aw)
{
    for (rv_tid_t t = 0; t < aw->nworkers; t++) {
        am_dest_t *d = aw->send.dests[t];
        if (d == NULL)
            continue;
        am_oring_t *r = &d->ring;
        for (uint32_t i = 0; i < r->nchunks; i++)
            rv_tw_rkey_destroy(aw->w, r->chunks[i].rkey);
        for (uint32_t i = 0; i < r->nspare; i++)
            rv_tw_rkey_destroy(aw->w, r->spare[i].rkey);
        free(r->chunks);
        free(r->spare);
        free(r->notes);
        if (r->ctrl != NULL)
            rv_mem_general_free(aw->gen, r->ctrl);
    }
    for (uint32_t i = 0; i < aw->recv.nrings; i++) {
        am_iring_t *r = aw->recv.rings[i];
        for (uint32_t j = 0; j < r->nchunks; j++)
            rv_mem_chunk_free(aw->ring_chunks, r->chunks[j].chunk);
        for (uint32_t j = 0; j < r->npending; j++)
            rv_mem_chunk_free(aw->ring_chunks, r->pending[j].chunk);
        if (r->ctrl_rkey != NULL)
            rv_tw_rkey_destroy(aw->w, r->ctrl_rkey);
        free(r->chunks);
        free(r->pending);
        free(r);
    }
    aw->recv.nrings = 0;
}

bool am_ring_busy(am_worker_t *aw)
{
    for (uint32_t i = 0; i < aw->recv.nrings; i++)
        if (aw->recv.rings[i]->push_busy || aw->recv.rings[i]->push_due)
            return true;
    return false;
}
