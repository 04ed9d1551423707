/*
 * Fuzz target: the receive side of am's messenger rings (am/am_ring.c:
 * ring_peek's checks of a record's header and footer, ring_step with its
 * CALL, BATCH, ROTATE and DETOUR records, the calls of the batches), as
 * am_ring_progress runs it: a ring of chunks in this worker's memory that
 * a worker of another process writes by RMA puts.
 *
 * A footer is a hash the input cannot forge, so the records are written
 * by the real sender (am_ring_write, with the ROTATE records and chunk
 * splices of its own) through a transport whose put is a memcpy into the
 * region its key names, refused outside it as a NIC refuses it; the
 * consumed offset the receiver pushes back lands in the sender's control
 * word the same way, so sender and receiver go round the ring together.
 * The input chooses every header field of the records it writes (kinds,
 * flags, handlers and lengths that lie, within the footer's bytes or
 * not), the records inside batches, and lies of the sender's own: its
 * sequence number jumps, it skips bytes, believes its chunk longer than
 * it is, or leaves a chunk without a ROTATE. It may also overwrite bytes
 * of the chunks, as stale or torn data would.
 *
 * The input is: a shape byte (bits 0-1: chunks in the ring, less one;
 * bits 2-3: chunks granted for a growth and not spliced in yet; bits 4-5:
 * the chunk size, 512 << n; bit 6: the transport completes puts later,
 * from progress; bit 7: a small am.flush_bytes, so answers leave one by
 * one), am.max_nesting less one (low 2 bits), the ring's nonce and first
 * sequence number (u64 each), then operations, each an op byte (low 3
 * bits the operation) and its operands:
 *
 *   0 call      sel, u16 length, then with a call header (sel bit 2) its
 *               flags (u16), result length (u16), root (u8), token (u8),
 *               buffer bytes (u16), with sel bit 3 the address an
 *               extended call names (an AM Long envelope: an i16 offset
 *               from the start of the memory this process exposes, inside
 *               it or not), and with sel bit 6 a lying argument length
 *               (u32); then the body
 *   1 record    meta (u32), handler sel, body bytes / 8, lie, the body:
 *               any header, its length n - (lie & 7), or with lie bit 7
 *               a u32 of the input
 *   2 batch     lie (its length n - (lie & 7)), count, then count
 *               records as in 1, each with a u16 seq (in a run of
 *               rv_call_return calls, their result length)
 *   3 progress  the receiver runs (am_ring_progress)
 *   4 poke      chunk, u16 offset, n, n bytes written into the chunk,
 *               where the receiver has not read yet
 *   5 lie       what, u32: the sender's sequence number jumps, its
 *               position skips, its chunk grows, or it moves on to the
 *               next chunk without a ROTATE
 *   6 detour    token, flags (u16), u16 length, arguments: a call that
 *               came over send and waits for its DETOUR record
 *   7 token     a DETOUR record naming the token
 *
 * A handler sel picks the call handler of the record (bits 0-1): one
 * that reads its arguments and fills its result, one that also makes
 * progress from inside (the receiver re-entered, as a handler that waits
 * does), an id nothing has, or a message handler that is no call
 * handler. The receiver runs again until idle at the end.
 *
 * Extended calls (rv_am_ext.h) find what rma gives a real job: memory
 * exposed to RV_AM_X_REF and RV_AM_X_PLACE calls (EXPOSED_BYTES that end
 * where readable memory ends, its check registered as rma registers its
 * regions'), and one call hook, which reads the buffer the call names in
 * full, as AM Long's and rv_get_handler's hooks do. Every call run
 * has its arguments, buffer and result read or written in full, so that
 * a length that reaches past the ring's bytes is seen; the chunks are
 * exactly their size.
 */
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"
#include "fuzz.h"
#include "rv_am_ext.h"
#include "rv_core.h"

#define NPROCS 2
#define NTHREADS 2
#define NWORKERS (NPROCS * NTHREADS)
#define ME 0  /* the receiving worker */
#define SRC 2 /* the producer, a worker of the other process */
#define MAX_CHUNKS (4 + 3)
#define MAX_PENDING 64     /* transport completions held at once */
#define MAX_NEST 2         /* progress re-entered from handlers */
#define BODY_MAX 4096      /* bytes of one record's body */
#define EXPOSED_BYTES 4096 /* memory extended calls may name */

/* A remote key: the region the owner registered, which a put must stay
 * inside. */
struct rv_trkey {
    uintptr_t base;
    size_t len;
};

static rv_context_t ctx;
static rv_bootstrap_t bs = {.size = NPROCS};
static rv_core_config_t core;
static rv_transport_ops_t ops;
static rv_handler_id_t call_id, progress_id, none_id;
static int progress_tag; /* the argument of the handler that progresses */
static uint8_t *exposed; /* EXPOSED_BYTES of it */
static int hook_id;
static volatile uint64_t sink;

/* The state of one input. */
static rv_worker_t w;
static am_worker_t aw;
static rv_am_config_t cfg;
static am_dest_t *dests[NWORKERS], *used[NWORKERS], *replying[NWORKERS];
static am_src_t *srcs[NWORKERS];
static am_iring_t ring, *rings[1];
static am_src_t producer; /* the ring's source */
static am_dest_t sender;  /* the producer's half of the ring */
static am_buf_t sbuf;     /* what the sender's puts complete */
static am_ctrl_t ctrl;    /* the sender's words the receiver writes */
static uint8_t *mem[MAX_CHUNKS];
static struct rv_trkey keys[MAX_CHUNKS], ctrl_key;
static unsigned nmem;
static size_t chunk;
static bool defer;
static unsigned nested;
static struct {
    rv_completion_fn cb;
    void *arg;
} pending[MAX_PENDING];
static unsigned npending;

static void touch(const void *p, size_t len)
{
    fuzz_touch(&sink, p, len);
}

/* The transport's put: a memcpy inside the region of @p rkey, completed
 * at once or, when the input says so, from the next progress. */
static rv_status_t t_put(rv_tworker_t *tw, uint32_t peer, uint64_t raddr,
                         rv_trkey_t *rkey, const void *src, size_t len,
                         rv_completion_fn cb, void *arg)
{
    (void)tw;
    (void)peer;
    if (rkey == NULL || raddr < rkey->base || len > rkey->len ||
        raddr - rkey->base > rkey->len - len)
        return RV_ERR_INVALID;
    memcpy((void *)(uintptr_t)raddr, src, len);
    if (!defer || cb == NULL || npending == MAX_PENDING)
        return RV_OK;
    pending[npending].cb = cb;
    pending[npending].arg = arg;
    npending++;
    return RV_INPROGRESS;
}

/* Messages (answers, forwards of broadcasts) leave at once; their bytes
 * are read as the transport would read them. */
static rv_status_t t_am_send(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                             size_t hdr_len, const struct iovec *iov,
                             size_t iovcnt, unsigned flags, rv_completion_fn cb,
                             void *arg)
{
    (void)tw;
    (void)peer;
    (void)flags;
    (void)cb;
    (void)arg;
    touch(hdr, hdr_len);
    for (size_t i = 0; i < iovcnt; i++)
        touch(iov[i].iov_base, iov[i].iov_len);
    return RV_OK;
}

static rv_status_t t_fence(rv_tworker_t *tw, uint32_t peer)
{
    (void)tw;
    (void)peer;
    return RV_OK;
}

/* Runs the completions of the puts completed later, as the transport's
 * progress does. */
static void t_complete(void)
{
    while (npending > 0) {
        npending--;
        pending[npending].cb(pending[npending].arg, RV_OK);
    }
}

/* What rv_progress does for the ring: the transport's completions, then
 * am's progress as far as rings go (the ring, the calls that came over
 * send and the answers), at the depth of a progress call. */
static unsigned progress(void)
{
    unsigned n = npending;
    t_complete();
    w.progress_depth++;
    n += am_ring_progress(&aw);
    for (rv_tid_t t = 0; aw.recv.srcs_busy > 0 && t < NWORKERS; t++)
        if (srcs[t] != NULL && srcs[t]->head != NULL)
            n += am_src_drain(&aw, srcs[t], t);
    am_reply_flush(&aw);
    w.progress_depth--;
    return n;
}

static rv_status_t on_call(rv_worker_t *wk, rv_call_t *call, void *arg)
{
    (void)wk;
    touch(call->args, call->args_len);
    if (call->buf_len > 0)
        touch(call->buf, call->buf_len);
    if (call->ret_len > 0)
        memset(call->ret, 0x5a, call->ret_len);
    if (arg == &progress_tag && nested < MAX_NEST) {
        nested++;
        progress();
        nested--;
    }
    return RV_OK;
}

/* What rma's check does for its regions, for the exposed memory. */
static bool xcheck(rv_worker_t *wk, uint64_t addr, uint64_t len, void *arg)
{
    uintptr_t base = (uintptr_t)exposed;
    (void)wk;
    (void)arg;
    return addr >= base && len <= EXPOSED_BYTES &&
           addr - base <= EXPOSED_BYTES - len;
}

/* A call hook that reads the whole buffer the call names, as AM Long's
 * and rv_get_handler's do before the handler runs. */
static rv_status_t hook_prepare(rv_worker_t *wk, rv_am_xrun_t *x, void *arg)
{
    (void)wk;
    (void)arg;
    touch(x->buf, x->buf_len);
    return x->word & 1 ? RV_ERR_INVALID : RV_OK; /* a hook may drop it */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    rv_log_level = RV_LOG_FATAL; /* drops are counted, not read */
    core.job.threads = NTHREADS;
    ops.put = t_put;
    ops.am_send = t_am_send;
    ops.fence = t_fence;
    ctx.bs = &bs;
    ctx.core = &core;
    ctx.ops = &ops;
    none_id = rv_handler_id("fuzz.none");
    exposed = fuzz_alloc(EXPOSED_BYTES);
    memset(exposed, 0x3c, EXPOSED_BYTES);
    rv_am_hook_t hook = {.prepare = hook_prepare};
    if (rv_am_xcheck_register(&ctx, xcheck, NULL) != RV_OK ||
        rv_am_hook_register(&ctx, &hook, &hook_id) != RV_OK)
        abort();
    if (rv_am_register(&ctx, "fuzz.call", on_call, NULL, &call_id) != RV_OK ||
        rv_am_register(&ctx, "fuzz.progress", on_call, &progress_tag,
                       &progress_id) != RV_OK)
        abort();
    return 0;
}

/* The handler of a record, by the low 2 bits of @p sel. */
static rv_handler_id_t handler_of(uint8_t sel)
{
    static const rv_handler_id_t *ids[] = {&call_id, &progress_id, &none_id,
                                           &am_batch_id};
    return *ids[sel & 3];
}

/* A result of any u32 length is a caller's right (rv_call_return), and
 * the target allocates and zeroes it before the handler runs: the calls
 * the input writes ask for 64 KiB at most, which shows the path without
 * measuring the allocator. @p body: the body of call record @p h, @p n
 * bytes of it there. */
static void tame_call(uint8_t *body, const am_rec_t *h, size_t n)
{
    am_hdr_t hdr;
    if ((h->meta & AM_REC_KIND_MASK) != AM_REC_CALL ||
        !(h->meta & AM_REC_XHDR) || n < sizeof(hdr))
        return;
    memcpy(&hdr, body, sizeof(hdr));
    hdr.ret_len &= 0xffff;
    memcpy(body, &hdr, sizeof(hdr));
}

/* The same for record @p rec of @p n body bytes: a call, or the calls of
 * a batch, found as am_run_next finds them. */
static void tame(uint8_t *rec, size_t n)
{
    am_rec_t h;
    memcpy(&h, rec, sizeof(h));
    uint8_t *p = rec + sizeof(h);
    if ((h.meta & AM_REC_KIND_MASK) != AM_REC_BATCH) {
        tame_call(p, &h, n);
        return;
    }
    uint8_t *end = p + (h.len < n ? h.len : n);
    while ((size_t)(end - p) >= sizeof(am_rec_t)) {
        am_rec_t r;
        memcpy(&r, p, sizeof(r));
        size_t size = am_rec_size(r.len);
        if (size > (size_t)(end - p))
            break;
        tame_call(p + sizeof(r), &r, r.len);
        p += size;
    }
}

/* Writes the record of @p body_len body bytes at @p rec (its header
 * written, room for its footer) through the sender; when the ring is
 * full, the receiver runs and the sender tries once more. */
static void send_record(uint8_t *rec, size_t body_len)
{
    size_t size = am_rec_size(body_len);
    tame(rec, body_len);
    for (int tries = 0; tries < 2; tries++) {
        if (am_ring_write(&aw, &sender, &sbuf, rec, size) != RV_ERR_AGAIN)
            return;
        progress();
    }
}

/* A record's header as op 1 reads it; its body bytes in *@p n. */
static am_rec_t read_rec(fuzz_in_t *in, size_t *n)
{
    am_rec_t rec = {0};
    uint8_t lie;
    fuzz_take(in, &rec.meta, sizeof(rec.meta));
    rec.handler = handler_of(fuzz_u8(in));
    *n = (size_t)fuzz_u8(in) * 8;
    lie = fuzz_u8(in);
    if (lie & 0x80)
        fuzz_take(in, &rec.len, sizeof(rec.len));
    else
        rec.len = (uint32_t)(*n > (lie & 7u) ? *n - (lie & 7u) : 0);
    return rec;
}

static void op_call(fuzz_in_t *in, uint8_t *rec)
{
    uint8_t sel = fuzz_u8(in);
    size_t len = fuzz_u16(in) % (BODY_MAX - sizeof(am_hdr_t));
    am_hdr_t hdr = {0}, *hp = NULL;
    size_t args = len, buf = 0;
    if (sel & 4) {
        hdr.flags = fuzz_u16(in);
        hdr.ret_len = fuzz_u16(in);
        hdr.root = fuzz_u8(in);
        hdr.token = fuzz_u8(in);
        buf = fuzz_u16(in) % (len + 1);
        args = len - buf;
        hp = &hdr;
        if (sel & 8) { /* an envelope: the address of its buffer */
            int16_t off = (int16_t)fuzz_u16(in);
            hdr.ret = (uint64_t)((uintptr_t)exposed + (intptr_t)off);
            /* the hook's index, in the high bits of the 32-bit flags */
            hdr.flags |= (uint32_t)fuzz_u8(in) << AM_XHOOK_SHIFT;
        }
    }
    hdr.args_len = (uint32_t)args;
    uint8_t body[BODY_MAX];
    fuzz_take(in, body, len);
    am_rec_write(rec, handler_of(sel), hp, body, args, body + args, buf);
    if (hp != NULL && (sel & 0x40)) { /* an argument length that lies */
        fuzz_take(in, &hdr.args_len, sizeof(hdr.args_len));
        memcpy(rec + sizeof(am_rec_t), &hdr, sizeof(hdr));
    }
    send_record(rec, (hp ? sizeof(hdr) : 0) + len);
}

static void op_record(fuzz_in_t *in, uint8_t *rec)
{
    size_t n;
    am_rec_t h = read_rec(in, &n);
    memcpy(rec, &h, sizeof(h));
    fuzz_take(in, rec + sizeof(h), n);
    send_record(rec, n);
}

static void op_batch(fuzz_in_t *in, uint8_t *rec)
{
    uint8_t lie = fuzz_u8(in);
    unsigned count = fuzz_u8(in) % 16;
    uint8_t *body = rec + sizeof(am_rec_t);
    size_t len = 0;
    for (unsigned i = 0; i < count; i++) {
        size_t n;
        am_rec_t h = read_rec(in, &n);
        h.seq = fuzz_u16(in);
        if (len + am_rec_size(n) > BODY_MAX)
            break;
        memcpy(body + len, &h, sizeof(h));
        fuzz_take(in, body + len + sizeof(h), n);
        /* The footer of a record inside a batch is not read. */
        memset(body + len + sizeof(h) + n, 0, AM_REC_FOOTER);
        len += am_rec_size(n);
    }
    am_rec_t b = {.len = (uint32_t)(len > (lie & 7u) ? len - (lie & 7u) : 0),
                  .meta = AM_REC_BATCH};
    memcpy(rec, &b, sizeof(b));
    send_record(rec, len);
}

/* Bytes of a chunk overwritten where the receiver reads next or has not
 * read yet (stale data of an earlier ring, a put landing torn); not those
 * of the records it took, which the sender leaves alone until it has
 * reported them consumed. */
static void op_poke(fuzz_in_t *in)
{
    unsigned k = fuzz_u8(in) % (ring.nchunks + ring.npending);
    const am_ichunk_t *ch =
        k < ring.nchunks ? &ring.chunks[k] : &ring.pending[k - ring.nchunks];
    size_t from = k == ring.cur ? ring.pos : 0;
    size_t off = fuzz_u16(in), n = fuzz_u8(in);
    if (from >= ch->len)
        return;
    off = from + off % (ch->len - from);
    if (n > ch->len - off)
        n = ch->len - off;
    fuzz_take(in, ch->addr + off, n);
}

static void op_lie(fuzz_in_t *in)
{
    uint8_t what = fuzz_u8(in);
    uint32_t v;
    fuzz_take(in, &v, sizeof(v));
    am_oring_t *r = &sender.ring;
    switch (what % 4) {
    case 0:
        r->seq += v;
        break;
    case 1:
        r->pos += 8 * (v % 16);
        r->stream += 8 * (v % 16);
        break;
    case 2:
        r->chunks[r->cur].len += 8 * (v % 16);
        break;
    default:
        r->stream += r->chunks[r->cur].len - r->pos;
        r->chunks[r->cur].left_end = r->stream;
        r->cur = (r->cur + 1) % r->nchunks;
        r->pos = 0;
        break;
    }
}

/* A call of the producer's that travelled over send (too large for the
 * ring), delivered to its handler as core delivers it. */
static void op_detour(fuzz_in_t *in)
{
    am_hdr_t hdr = {.token = fuzz_u8(in)};
    hdr.flags = fuzz_u16(in) ^ AM_DETOUR;
    size_t len = fuzz_u16(in) % BODY_MAX;
    hdr.args_len = (uint32_t)len;
    uint8_t *data = fuzz_alloc(len);
    fuzz_take(in, data, len);
    const rv_handler_info_t *e = rv_handler_find(&ctx, call_id);
    rv_msg_t msg = {.src = SRC,
                    .handler = call_id,
                    .data = data,
                    .len = len,
                    .xhdr = &hdr,
                    .xhdr_len = sizeof(hdr)};
    w.progress_depth++;
    e->fn(&w, &msg, e->arg);
    w.progress_depth--;
    fuzz_free(data, len);
}

static void op_token(fuzz_in_t *in, uint8_t *rec)
{
    uint64_t token = fuzz_u8(in);
    am_rec_t h = {.len = sizeof(token), .meta = AM_REC_DETOUR};
    memcpy(rec, &h, sizeof(h));
    memcpy(rec + sizeof(h), &token, sizeof(token));
    send_record(rec, sizeof(token));
}

/* The ring and both its halves, as a ring request and its answer leave
 * them, with the chunks of a growth granted and not spliced in yet. */
static void setup(fuzz_in_t *in)
{
    uint8_t shape = fuzz_u8(in);
    uint32_t nring = 1 + (shape & 3), nspare = (shape >> 2) & 3;
    uint64_t nonce, seq;
    chunk = (size_t)512 << ((shape >> 4) & 3);
    defer = shape & 0x40;
    memset(&cfg, 0, sizeof(cfg));
    cfg.path = RV_AM_PATH_WRITE;
    cfg.flush_bytes = shape & 0x80 ? 64 : 64 << 10;
    cfg.ovfl_limit = 1 << 20;
    cfg.chunks_per_request = 1;
    /* The ring is at its most: the sender never asks for more. */
    cfg.max_chunks = nring + nspare;
    cfg.chunk_bytes = chunk;
    cfg.max_nesting = 1 + (fuzz_u8(in) & 3);
    fuzz_take(in, &nonce, sizeof(nonce));
    fuzz_take(in, &seq, sizeof(seq));

    memset(&w, 0, sizeof(w));
    w.ctx = &ctx;
    w.tid = ME;
    w.view.tops = &ops;
    w.view.layer[am_slot] = &aw;
    memset(&aw, 0, sizeof(aw));
    aw.w = &w;
    aw.ctx = &ctx;
    aw.cfg = &cfg;
    aw.proc = am_proc(&ctx);
    aw.me = ME;
    aw.nworkers = NWORKERS;
    aw.threads = NTHREADS;
    aw.send.dests = dests;
    aw.send.used = used;
    aw.send.replying = replying;
    aw.recv.srcs = srcs;
    aw.recv.rings = rings;
    aw.recv.nrings = 1;
    aw.send.max_record = chunk - am_rec_size(8);

    nmem = nring + nspare;
    for (unsigned i = 0; i < nmem; i++) {
        mem[i] = fuzz_alloc(chunk);
        memset(mem[i], 0, chunk);
        keys[i] = (struct rv_trkey){(uintptr_t)mem[i], chunk};
    }
    memset(&ctrl, 0, sizeof(ctrl));
    ctrl_key = (struct rv_trkey){(uintptr_t)&ctrl, sizeof(ctrl)};

    memset(&ring, 0, sizeof(ring));
    ring.src = SRC;
    ring.chunks = malloc(nring * sizeof(*ring.chunks));
    ring.pending = nspare ? malloc(nspare * sizeof(*ring.pending)) : NULL;
    memset(&sender, 0, sizeof(sender));
    sender.tid = ME;
    sender.ring.chunks = malloc(nring * sizeof(*sender.ring.chunks));
    sender.ring.spare =
        nspare ? malloc(nspare * sizeof(*sender.ring.spare)) : NULL;
    if (ring.chunks == NULL || sender.ring.chunks == NULL ||
        (nspare && (ring.pending == NULL || sender.ring.spare == NULL)))
        abort();
    for (unsigned i = 0; i < nmem; i++) {
        am_ichunk_t ic = {.addr = mem[i], .len = chunk};
        am_ochunk_t oc = {
            .raddr = (uintptr_t)mem[i], .len = chunk, .rkey = &keys[i]};
        if (i < nring) {
            ring.chunks[i] = ic;
            sender.ring.chunks[i] = oc;
        } else {
            ring.pending[i - nring] = ic;
            sender.ring.spare[i - nring] = oc;
        }
    }
    ring.nchunks = sender.ring.nchunks = nring;
    ring.npending = sender.ring.nspare = nspare;
    ring.seq = sender.ring.seq = seq;
    ring.nonce = sender.ring.nonce = nonce;
    ring.ctrl_addr = (uintptr_t)&ctrl;
    ring.ctrl_rkey = &ctrl_key;
    sender.ring.state = RING_READY;
    sender.ring.ctrl = &ctrl;
    memset(&sbuf, 0, sizeof(sbuf));
    rings[0] = &ring;
    memset(&producer, 0, sizeof(producer));
    producer.ring = &ring;
    srcs[SRC] = &producer;
}

static void teardown(void)
{
    t_complete();
    for (rv_tid_t t = 0; t < NWORKERS; t++) {
        am_src_t *s = srcs[t];
        if (s != NULL) {
            for (am_run_t *r = s->head, *next; r != NULL; r = next) {
                next = r->next;
                free(r);
            }
            for (am_run_t *r = s->detours, *next; r != NULL; r = next) {
                next = r->next;
                free(r);
            }
            if (s != &producer)
                free(s);
            srcs[t] = NULL;
        }
    }
    am_reply_fini(&aw);
    for (rv_tid_t t = 0; t < NWORKERS; t++) {
        free(dests[t]);
        dests[t] = NULL;
    }
    free(ring.chunks);
    free(ring.pending);
    free(sender.ring.chunks);
    free(sender.ring.spare);
    free(sender.ring.notes);
    for (unsigned i = 0; i < nmem; i++)
        fuzz_free(mem[i], chunk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    /* A record being written: header, body, pad and footer. */
    static uint8_t rec[sizeof(am_rec_t) + BODY_MAX + AM_REC_FOOTER];

    if (call_id == 0)
        LLVMFuzzerInitialize(NULL, NULL);
    setup(&in);
    while (in.left > 0) {
        switch (fuzz_u8(&in) & 7) {
        case 0:
            op_call(&in, rec);
            break;
        case 1:
            op_record(&in, rec);
            break;
        case 2:
            op_batch(&in, rec);
            break;
        case 3:
            progress();
            break;
        case 4:
            op_poke(&in);
            break;
        case 5:
            op_lie(&in);
            break;
        case 6:
            op_detour(&in);
            break;
        default:
            op_token(&in, rec);
            break;
        }
    }
    /* The receiver runs what it can still run. */
    for (int i = 0; i < 64 && progress() > 0; i++)
        ;
    teardown();
    return 0;
}
