/*
 * Internal state of the invocation layer (never installed): the sender's
 * batches and rings, the receiver's runs, the local bypass, the worker
 * and the process. The records they hold are in am_wire.h.
 *
 * The words am uses:
 *   call      one remote invocation: a handler id, arguments, perhaps a
 *             buffer, a synchronizer to answer and a result to fill
 *   record    a call (or a run of calls) serialized: [am_rec_t][body]
 *             padded to 8 bytes, with a footer on the write path
 *   run       consecutive records transmitted together: one AM to
 *             rivet.am.batch over send, one ring record over write
 *   run record  one record holding many plain calls of one handler and
 *             length (AM_REC_RUN, AM_REC_RETRUN): 8 bytes per 8-byte call
 *   stride    the bytes one call of a run record takes
 *   batch     a registered buffer of a destination that runs are
 *             serialized into (am_buf_t); kept for reuse
 *   cursor    the open end of a destination's last run record, which the
 *             inline fast paths append to without bookkeeping (am_cursor.h)
 *   channel   how calls to one destination travel, chosen once (am_chan.h)
 *   messenger the receiver's ring for one sender, written by one-sided
 *             puts (the write path, am_ring.c)
 *   detour    a call too large for a ring, sent over send while a DETOUR
 *             record keeps its place in the ring's order
 *   hop       a worker a routed call goes through (am.routing, am_route.c)
 *   bypass    calls between threads of one process, through a wait-free
 *             queue, never the transport (am_local.c)
 */
#ifndef RIVET_AM_INTERNAL_H
#define RIVET_AM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define _LGPL_SOURCE
#include <urcu/wfcqueue.h>

#include <uthash.h>

#include "am_config.h"
#include "rv_am.h"
#include "rv_am_ext.h"
#include "rv_layer.h"
#include "rv_regmem.h"

#include "am_wire.h"

/* The handler entry of a call handler: rv_am_register's function. */
typedef struct {
    rv_call_fn fn;
    void *arg;
    rv_handler_id_t id;
} am_entry_t;

/* ---------------------------------------------------------------------- */
/* Sender side                                                             */

/* A buffer of registered memory that records are serialized into, in
 * runs: [16 B reserve][records...][8 B reserve]. The reserves take the
 * batch record's header and footer when the run goes as one ring record.
 * Bytes below `sent` have been transmitted; [sent, used) are pending runs
 * (each run's length is kept in the reserve's third word, where a ring
 * record keeps its length: its first word is a ring record's sequence
 * number, which must not be written before the record is whole).
 *
 * A view is no memory of its own: it is the destination's ring, mapped
 * here, from the ring's position on (am_ring_view_at), so that records
 * are serialized straight into the memory the destination reads and a
 * run is transmitted by writing its header in place (am_ring_commit).
 * The destination keeps one (am_dest_t.view); it is never freed. */
typedef struct am_buf {
    uint8_t *base;
    size_t cap, used, sent;
    size_t open;       /* offset of the open run, or SIZE_MAX */
    unsigned inflight; /* transmissions not yet complete */
    bool view;         /* the destination's ring itself */
    bool linked;       /* a view: in its destination's list */
    struct am_buf *next;
} am_buf_t;

struct am_worker;

/* The sender's half of a messenger (Seriema's RDMAMessenger): a ring of
 * chunks in the receiver's NUMA zone. */
typedef struct am_ochunk {
    uint64_t raddr;
    size_t len;
    rv_trkey_t *rkey;
    uint8_t *mapped;   /* the chunk's address here, or NULL (rv_tw_rkey_ptr) */
    uint64_t left_end; /* stream offset when the sender last left it */
} am_ochunk_t;

/* Words of the sender's that the receiver RMA-writes. */
typedef struct am_ctrl {
    volatile uint64_t consumed; /* ring stream offset of drained chunks */
    volatile uint64_t notified; /* AM_NOTIFY_RMA calls run */
} am_ctrl_t;

typedef enum {
    RING_NONE,
    RING_REQUESTED,
    RING_READY,
    RING_FAILED
} am_ring_state_t;

typedef struct am_oring {
    am_ring_state_t state;
    am_ochunk_t *chunks;
    uint32_t nchunks, cur;
    size_t pos;         /* in the current chunk */
    uint64_t stream;    /* bytes of the stream written or skipped */
    uint64_t seq;       /* next record's sequence number */
    uint64_t nonce;     /* from the receiver */
    bool growing;       /* a chunk request is out */
    bool grow_refused;  /* the receiver had no chunk: asked no more */
    am_ochunk_t *spare; /* chunks received, not spliced in yet */
    uint32_t nspare;
    am_ctrl_t *ctrl;  /* registered, in this worker's memory */
    uint64_t detours; /* tokens of calls sent over send */
    /* syncs of AM_NOTIFY_RMA calls, completed as ctrl->notified grows */
    rv_sync_t **notes;
    uint64_t notes_head, notes_tail; /* absolute indexes */
    size_t notes_cap;
} am_oring_t;

/* Everything a worker keeps per destination worker. */
typedef struct am_dest {
    rv_tid_t tid;
    am_buf_t *bufs, *last; /* oldest first */
    am_buf_t *unsent;      /* first that may hold unsent runs (or NULL) */
    /* the last AM_REC_RUN record written (trad), at run_at in run_buf;
     * still open for more calls while run_buf's used is run_end */
    am_buf_t *run_buf;
    size_t run_at, run_end;
    size_t pending; /* bytes in runs not yet transmitted */
    bool warned_limit;
    bool write;    /* its runs go by its ring (am_write_to) */
    bool in_place; /* and may be serialized in it (a view), where the
                      ring is mapped here: not under trad (am_dest) */
    bool pushing;  /* inside am_dest_push */
    bool waiting;  /* its next run waits for its messenger (runs_waited) */
    bool warned_lost;
    bool buffered; /* has had a batch buffer (job.stats) */
    bool no_view;  /* the next record must not go in place (a DETOUR) */
    am_oring_t ring;
    am_buf_t view; /* its mapped ring as a buffer (am_buf_t) */
    /* call completions gathered for it (am_reply.c) */
    uint8_t *rbuf;
    size_t rlen, rcap;
    size_t rgroup; /* the last group of rbuf, when rlen > 0 */
    bool rlisted;  /* in the worker's replying list */
} am_dest_t;

/* ---------------------------------------------------------------------- */
/* Receiver side                                                           */

/* A run of records being executed: a batch that came over send (kept
 * message) or from a ring. Calls are taken one at a time with the cursor
 * advanced first, so that a handler that progresses continues the run
 * in order instead of overtaking it. */
typedef struct am_run {
    am_cur_t cur;  /* the records (am_wire.h) */
    unsigned refs; /* calls of the run still executing */
    bool has_msg;
    rv_msg_t msg;   /* released when the run is done */
    uint64_t token; /* a detour call waiting for its ring turn */
    bool detour;
    struct am_run *next;
} am_run_t;

/* Whether @p r has calls left to take. */
static inline bool am_run_more(const am_run_t *r)
{
    return am_cur_more(&r->cur);
}

/* Whether @p r is inside a run record (AM_REC_RUN or AM_REC_RETRUN). */
static inline bool am_run_in_plain(const am_run_t *r)
{
    return am_cur_in_run(&r->cur);
}

/* Takes the next call of @p r (am_cur_next). */
static inline int am_run_next(am_run_t *r, rv_tid_t src, size_t footer,
                              am_call_t *c)
{
    return am_cur_next(&r->cur, src, footer, c);
}

typedef struct am_ichunk {
    uint8_t *addr;
    size_t len;
    rv_mem_chunk_t *chunk;
} am_ichunk_t;

/* The receiver's half of a messenger, for one producer. */
typedef struct am_iring {
    rv_tid_t src;
    am_ichunk_t *chunks;
    uint32_t nchunks, cur;
    size_t pos;
    uint64_t stream, seq, nonce;
    am_ichunk_t *pending; /* allocated for the producer, not spliced */
    uint32_t npending;
    /* where to push consumed/notified, in the producer's memory */
    uint64_t ctrl_addr;
    rv_trkey_t *ctrl_rkey;
    uint64_t notified;
    uint64_t drained;     /* stream offset at the last chunk drained */
    uint64_t pushed;      /* consumed offset last pushed */
    uint64_t push_val[2]; /* source of the pushes (stable in flight) */
    bool push_busy, push_due;
    unsigned depth; /* calls of this ring executing */
    bool stopped;   /* a protocol error: nothing more is read */
    am_run_t batch; /* the ring batch being executed */
} am_iring_t;

/* Per source: runs that came over send, kept for FIFO order. */
typedef struct am_src {
    am_run_t *head, *tail;
    unsigned fetching; /* a call hook of it waits (rv_am_ext.h):
                          its later calls wait too */
    am_run_t *detours; /* detour calls waiting for their ring turn */
    am_iring_t *ring;
    bool warned_forged; /* a call of it was dropped by wire_check */
    bool warned_answer; /* an answer of it was dropped (am_pend.c) */
} am_src_t;

/* ---------------------------------------------------------------------- */
/* Local bypass: one wait-free queue per (sender, receiver) thread pair of
 * a process (liburcu's wfcqueue: wait-free enqueue, and a single
 * dequeuer, the receiver, needs no lock), a thread's calls to itself
 * included. What travels on it is a block of call records (am_rec_t and
 * body, no footer), filled by the sender without atomics and published
 * whole: when full, at the end of the sender's progress call, and on
 * rv_flush. One enqueue per block, not per call, keeps a local call at
 * the cost of a function call and a copy of its arguments. */
typedef struct am_lblock {
    struct cds_wfcq_node node;
    am_run_t run;     /* receiver: its records, as a run */
    size_t tail, cap; /* sender: bytes written, bytes room */
    size_t run_at;    /* sender: the open AM_REC_RUN, or SIZE_MAX */
    _Alignas(8) uint8_t data[];
} am_lblock_t;

typedef struct am_lqueue {
    struct __cds_wfcq_head head;
    struct cds_wfcq_tail tail;
} am_lqueue_t;

/* A service call handed to a service thread (job.service_threads > 0):
 * `run` executes on the service thread, then `done` on the worker that
 * submitted it, from its progress (Seriema §4.3: service threads take the
 * slow, no-setup calls off the workers). */
typedef struct am_sjob {
    struct cds_wfcq_node node; /* in the worker's outbox */
    struct am_sjob *next;      /* in the service queue */
    struct am_worker *aw;
    void (*run)(struct am_sjob *job);
    void (*done)(struct am_sjob *job);
    rv_tid_t src;
    uint32_t want, got;
    bool first;
    rv_mem_chunk_t *chunks[64];
} am_sjob_t;

typedef struct am_service {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    am_sjob_t *head, *tail;
    bool stop;
    int users; /* workers started */
    int nthreads;
    pthread_t threads[64];
} am_service_t;

typedef struct am_proc {
    int threads;
    am_lqueue_t *queues; /* [dst local * threads + src local] */
    am_service_t svc;
    rv_am_hook_t hooks[RV_AM_HOOKS_MAX];
    int nhooks;
    struct {
        rv_am_flush_fn fn;
        void *arg;
    } flush_hooks[RV_AM_HOOKS_MAX];
    int nflush_hooks;
    rv_am_xcheck_fn xcheck; /* the addresses of REF and PLACE calls from
                               other processes (rv_am_xcheck_register) */
    void *xcheck_arg;
    /* am.routing's tables (am_route.c), made by the first worker */
    pthread_mutex_t route_lock;
    bool route_made;
    int *host_of;        /* per rank */
    uint32_t *host_at;   /* per host: its first entry in host_tids */
    uint32_t *host_n;    /* per host: its workers */
    rv_tid_t *host_tids; /* the workers, host by host, ascending */
} am_proc_t;

/* The open run record of a destination, extended by the fast path of the
 * calls without bookkeeping (am_cursor.c). */
typedef struct am_cursor {
    uint8_t *wp;      /* where the run's next call goes */
    uint8_t *lim;     /* calls are appended while they end by here */
    uint8_t *start;   /* wp when opened: what lies between is unsealed */
    uint64_t key;     /* am_cursor_key of the run; 0: none open */
    uint32_t ret_len; /* AM_REC_RETRUN: its calls' result length */
    uint64_t sync;    /* AM_REC_RETRUN: its calls' synchronizer */
    long reserved;    /* operations added to it ahead (am_cursor.c) */
    uint32_t stride;  /* bytes per call */
    uint32_t alen;    /* argument bytes per call */
    int local;        /* the local bypass thread, or -1: a trad batch */
    bool listed;      /* in am_worker_t.copen */
} am_cursor_t;

static inline uint64_t am_cursor_key(rv_handler_id_t h, uint32_t meta)
{
    return (uint64_t)h << 32 | meta;
}

/* ---------------------------------------------------------------------- */

/* A call to another process awaiting its answers (am_pend.c). */
typedef struct am_pend {
    rv_sync_t *sync;  /* completed once per answer */
    void *ret;        /* the caller's result buffer, or NULL */
    uint32_t ret_len; /* its length: no answer may write more */
    uint32_t gen;     /* the token's upper half: changes on every reuse */
    rv_tid_t dest;    /* the only worker that may answer; RV_TID_ALL: any
                         (a broadcast's) */
    uint32_t next;    /* free: the next free slot */
    long answers;     /* still awaited; 0: free */
} am_pend_t;

/* A worker's sending part: its destinations, their channels, batches
 * and cursors, and the calls it waits answers for (am_chan*.c,
 * am_batch.c, am_cursor.c, am_ring.c, am_pend.c, am_reply.c). */
typedef struct am_send {
    am_dest_t **dests; /* per destination, on first use */
    /* per destination, its channel (am_chan.h), chosen on first use */
    const struct am_chan_ops **chans;
    am_dest_t **used; /* the ones made so far, for progress */
    uint32_t nused;
    am_dest_t **replying; /* with completions gathered */
    uint32_t nreplying;
    am_cursor_t *cur; /* append cursor per destination */
    rv_tid_t *copen;  /* destinations whose cursor was opened
                         since am_cursors_seal */
    uint32_t ncopen;
    am_buf_t *free_bufs;
    size_t buf_bytes;        /* size of one batch buffer */
    size_t max_record;       /* largest ring record */
    size_t run_max;          /* largest run of records */
    size_t trad_limit;       /* trad: bytes waiting before on_full */
    bool idle_flush;         /* trad batches waiting for idleness */
    uint32_t buffered_dests; /* destinations that had a batch buffer */
    uint64_t bufs_made;      /* batch buffers allocated (never freed before
                                the end: the most ever held) */
    am_pend_t *pend;         /* calls to other processes awaiting answers */
    uint32_t npend, pend_free;
} am_send_t;

/* A worker's receiving part: its sources, their queued runs and rings,
 * and the handlers running (am_exec.c, am_ring.c). */
typedef struct am_recv {
    uint32_t srcs_busy; /* sources with queued runs */
    am_src_t **srcs;    /* per source, on first use */
    am_iring_t **rings; /* incoming rings, scanned in progress */
    uint32_t nrings;
    const rv_handler_info_t *last_entry; /* the last call handler run */
    unsigned depth;                      /* call handlers running (nested) */
    uint64_t calls_done; /* calls run or dropped here (rv_quiesce) */
} am_recv_t;

/* A worker's part of the local bypass: calls between threads of its
 * process (am_local.c). */
typedef struct am_local {
    am_lblock_t **lout;     /* open block per local destination thread */
    am_lblock_t **lcur;     /* block being run, per local source thread */
    bool lpending;          /* some open block holds records */
    am_lblock_t *lspare[8]; /* consumed blocks kept for reuse */
    unsigned nlspare;
    /* completions of local calls, owed to one synchronizer and made at
     * once (am_owed_flush) */
    rv_sync_t *owed;
    long nowed;
} am_local_t;

typedef struct am_worker {
    rv_worker_t *w;
    rv_context_t *ctx;
    const rv_am_config_t *cfg; /* the am.* keys */
    am_proc_t *proc;
    rv_tid_t me;
    uint32_t nworkers;
    int rank, threads;
    rv_tid_t first_local; /* the first worker of this process */
    am_send_t send;
    am_recv_t recv;
    am_local_t local;
    rv_mem_chunk_allocator_t *ring_chunks; /* am.chunk_bytes chunks */
    rv_mem_chunk_allocator_t *own_chunks;  /* memory.chunk chunks */
    rv_mem_general_t *gen;                 /* batch buffers, control words */
    unsigned busy;                         /* inside the progress hook */
    bool streaming;                        /* in am_stream_progress */
    rv_am_stats_t stats;
    /* am.intranode mapped, and this host's peers map registered memory:
     * calls to them go by rings (am_write_to) */
    bool mapped_peers;
    /* am.routing (am_route.c) */
    uint32_t host_index;    /* host: this worker's place among its host's */
    uint32_t grid_cols;     /* twohop: columns of the grid of processes */
    uint32_t grid_procs;    /* twohop: the processes on the grid */
    uint64_t routed_made;   /* calls forwarded, and routed answers made:
                               made by this worker for rv_quiesce */
    bool warned_route;      /* a routed call naming no worker was dropped */
    uint64_t runs_waited;   /* runs its messenger could not take when they
                               were pushed (job.stats; not in rv_am_stats_t,
                               whose size the ABI fixes) */
    uint64_t runs_in_place; /* runs written straight into a mapped ring
                               (a view; job.stats, as runs_waited) */
    /* rv_quiesce_hook: the program's own queues, drained each wave */
    rv_quiesce_hook_fn quiesce_hook;
    void *quiesce_arg;
    /* service calls done by service threads, to finish here */
    struct __cds_wfcq_head outbox_head;
    struct cds_wfcq_tail outbox_tail;
    atomic_uint service_pending;
} am_worker_t;

/* The layer's slot (rv_layer.h), set when it is installed. */
extern int am_slot;

static inline am_worker_t *am_of(const rv_worker_t *w)
{
    return am_slot < 0 ? NULL : (am_worker_t *)rv_worker_layer(w, am_slot);
}

/* The per-process state of the layer; NULL before rv_am_init. */
am_proc_t *am_proc(rv_context_t *ctx);

/* Whether progress may start another call handler now: false once
 * am.max_nesting handlers are on the stack. Calls that arrive meanwhile
 * wait in their source's queue, in order. */
static inline bool am_may_run(const am_worker_t *aw)
{
    return aw->recv.depth < (unsigned)aw->cfg->max_nesting;
}

/* Whether the caller runs inside progress (a handler): then nothing it
 * sends may wait for room (see rv_worker_progress_depth). */
static inline bool am_in_handler(const am_worker_t *aw)
{
    return rv_worker_progress_depth(aw->w) > 0 || rv_worker_in_callback(aw->w);
}

/* The progress a stream of calls makes when one of its batches or local
 * blocks leaves (not from handlers, which never progress for room): it
 * runs the calls coming the other way and recycles their buffers, so
 * that calls both ways flow at once and buffers do not pile up; it is
 * not idleness, so trad batches still wait for am.flush_bytes. */
static inline void am_stream_progress(am_worker_t *aw)
{
    if (am_in_handler(aw))
        return;
    aw->streaming = true;
    rv_progress(aw->w);
    aw->streaming = false;
}

/* Completes what is owed to the synchronizer of local calls. */
static inline void am_owed_flush(am_worker_t *aw)
{
    if (aw->local.nowed > 0)
        rv_sync_complete_n(aw->local.owed, aw->local.nowed, RV_OK);
    aw->local.nowed = 0;
    aw->local.owed = NULL;
}

/* A local call for synchronizer @p s ran: its completion is made with
 * those of the calls after it for the same synchronizer, in one atomic
 * operation, by the end of the local poll (the caller is another thread,
 * or this one waiting further out). */
static inline void am_owe(am_worker_t *aw, rv_sync_t *s)
{
    if (aw->local.owed != s)
        am_owed_flush(aw);
    aw->local.owed = s;
    aw->local.nowed++;
}

/* Runs the handler @p ae of a plain call (no result to build, buffer to
 * extend or answer to make), counted and nested as every call. */
static inline void am_call_handler(am_worker_t *aw, const am_entry_t *ae,
                                   rv_call_t *call)
{
    aw->stats.calls_received++;
    aw->stats.bytes_received += call->args_len;
    if (++aw->recv.depth > aw->stats.max_nesting)
        aw->stats.max_nesting = aw->recv.depth;
    rv_status_t st = ae->fn(aw->w, call, ae->arg);
    aw->recv.depth--;
    if (st < 0)
        rv_warn("a call handler returned %s", rv_status_str(st));
}

/* Internal handler ids (registered by rv_am_init). */
extern rv_handler_id_t am_done_id, am_dones_id, am_batch_id, am_ring_req_id,
    am_ring_rep_id;

/* The small steps of the call paths, inline: every call takes them. */

/* Whether some destination of this worker takes its runs by a ring:
 * am.path write, or am.intranode mapped where memory is mapped. */
static inline bool am_some_ring(const am_worker_t *aw)
{
    return aw->cfg->path == RV_AM_PATH_WRITE || aw->mapped_peers;
}

/* Whether calls to @p dest go by its ring (the write path): am.path
 * write, or a worker of another process of this host under am.intranode
 * mapped. Fixed for the job: its channel is chosen once. */
static inline bool am_write_to(const am_worker_t *aw, rv_tid_t dest)
{
    if (aw->cfg->path == RV_AM_PATH_WRITE)
        return true;
    return aw->mapped_peers &&
           rv_rank_host(aw->ctx, (rv_rank_t)(dest / (uint32_t)aw->threads)) ==
               rv_rank_host(aw->ctx, aw->rank);
}

/* The record bytes of the run at @p off of @p b (kept in its reserve). */
static inline size_t am_run_len(const am_buf_t *b, size_t off)
{
    uint32_t len;
    memcpy(&len, b->base + off + offsetof(am_rec_t, len), sizeof(len));
    return len;
}

static inline void am_run_set_len(am_buf_t *b, size_t off, size_t len)
{
    uint32_t l = (uint32_t)len;
    memcpy(b->base + off + offsetof(am_rec_t, len), &l, sizeof(l));
}

/* am_batch.c: batch buffers and runs */
am_dest_t *am_dest(am_worker_t *aw, rv_tid_t dest);
am_buf_t *am_buf_get(am_worker_t *aw);
void am_buf_put(am_worker_t *aw, am_buf_t *b);
void am_buf_done(void *arg, rv_status_t status);
void am_buf_reap(am_worker_t *aw, am_dest_t *d);
/* A transport completion that completes the rv_sync_t @p arg. */
void am_sync_done(void *arg, rv_status_t status);
/* A transport completion that frees @p arg (a copy sent without waiting). */
void am_free_done(void *arg, rv_status_t status);
/* Largest run a destination batches into one transmission. */
size_t am_run_max(const am_worker_t *aw);
/* Transmits @p d's pending runs in order, as far as the messenger takes
 * them; the open run too when @p open. Returns the runs transmitted, or
 * -1 on an error. */
int am_dest_push(am_worker_t *aw, am_dest_t *d, bool immediate, bool open);
/* Room for a record of @p size bytes: in the open run when @p join and it
 * fits, else in a new run. Returns where the record goes. */
uint8_t *am_dest_reserve(am_worker_t *aw, am_dest_t *d, size_t size, bool join);
/* Takes back the record just reserved by am_dest_reserve. */
void am_dest_unreserve(am_dest_t *d, size_t size);

/* am_exec.c: running calls */
/* Runs the rest of the run record @p r is in (plain calls, or
 * rv_call_return calls whose results fit am_reply's scratch), with one
 * handler lookup; the calls run, 0 when it cannot (the handler is not a
 * call handler here: am_run_call then drops them one by one, saying why;
 * or results too large: am_run_call runs them). */
unsigned am_run_plain(am_worker_t *aw, am_run_t *r, rv_tid_t src);
am_src_t *am_src(am_worker_t *aw, rv_tid_t src);
void am_run_call(am_worker_t *aw, const am_call_t *c);
unsigned am_src_drain(am_worker_t *aw, am_src_t *s, rv_tid_t src);

rv_status_t am_trampoline(rv_worker_t *w, rv_msg_t *msg, void *arg);
rv_status_t am_on_batch(rv_worker_t *w, rv_msg_t *msg, void *arg);

/* am_reply.c: call completions */
/* Reports the completion @p done (its result at @p ret) to @p dest, at
 * once or gathered with others; never waits. */

rv_status_t am_reply(am_worker_t *aw, rv_tid_t dest, const am_done_t *done,
                     const void *ret);
/* The same, @p d being aw->send.dests[dest] as the caller last saw it (NULL
 * when not made yet): a run of answers looks it up once. */
rv_status_t am_reply_to(am_worker_t *aw, rv_tid_t dest, am_dest_t *d,
                        const am_done_t *done, const void *ret);
/* Sends every completion gathered. */
void am_reply_flush(am_worker_t *aw);
void am_reply_fini(am_worker_t *aw);
rv_status_t am_on_done(rv_worker_t *w, rv_msg_t *msg, void *arg);
rv_status_t am_on_dones(rv_worker_t *w, rv_msg_t *msg, void *arg);
bool am_src_detour_match(am_worker_t *aw, am_src_t *s, rv_tid_t src,
                         uint64_t token);

/* The local bypass's queue from @p src_local to @p dst_local. */
static inline am_lqueue_t *am_lqueue(am_worker_t *aw, int dst_local,
                                     int src_local)
{
    return &aw->proc->queues[dst_local * aw->threads + src_local];
}

/* am_local.c: the local bypass */
/* The local thread of worker @p dest when the local bypass carries calls
 * to it, else -1. */
static inline int am_local_thread(const am_worker_t *aw, rv_tid_t dest)
{
    uint32_t local = dest - aw->first_local;
    return local < (uint32_t)aw->threads && aw->cfg->local_bypass ? (int)local
                                                                  : -1;
}

/* Room for a record of @p size bytes (a multiple of 8) to local thread
 * @p dst in a new block; NULL when out of memory. */
uint8_t *am_local_reserve_new(am_worker_t *aw, int dst, size_t size);

/* Room for a record of @p size bytes (a multiple of 8) to local thread
 * @p dst; NULL when out of memory. */
static inline uint8_t *am_local_reserve(am_worker_t *aw, int dst, size_t size)
{
    am_lblock_t *b = aw->local.lout[dst];
    if (b == NULL || b->tail + size > b->cap)
        return am_local_reserve_new(aw, dst, size);
    uint8_t *at = b->data + b->tail;
    b->tail += size;
    aw->local.lpending = true;
    return at;
}
/* Appends a plain call (no header) to local thread @p dst, sharing the
 * previous record's header when it is a run of the same handler and
 * argument length; false when out of memory. */
bool am_local_call(am_worker_t *aw, int dst, const am_elem_t *e);
/* Publishes every open block (all destinations). */
void am_local_flush(am_worker_t *aw);
/* Runs the calls that other threads (and this one) published here. */
unsigned am_local_poll(am_worker_t *aw);
/* Frees the worker's blocks; the context's queues (am_local_drop). */
void am_local_fini(am_worker_t *aw);
void am_local_drop(am_proc_t *proc);

/* am_route.c: am.routing */
/* Makes the routing tables and the worker's place in them. */
rv_status_t am_route_start(am_worker_t *aw);
void am_route_fini(am_proc_t *proc);
/* The worker a call from this one to @p dst goes to first under
 * am.routing host or twohop: @p dst itself when it goes direct. */
rv_tid_t am_route_hop(const am_worker_t *aw, rv_tid_t dst);
/* The same for any routing; inline, so that a job that routes nothing
 * pays one test per call. */
static inline rv_tid_t am_route_next(const am_worker_t *aw, rv_tid_t dst)
{
    return aw->cfg->routing == RV_ROUTE_DIRECT ? dst : am_route_hop(aw, dst);
}
/* Appends the routed call @p e (AM_REC_FRUN or _FRET) to the batch for
 * worker @p hop (or its local block); false when out of memory. */
bool am_route_put(am_worker_t *aw, rv_tid_t hop, const am_elem_t *e);
/* Forwards, or runs, the calls of the routed run @p r from its cursor on,
 * as far as it can without am_run_call; the calls taken. */
unsigned am_route_run(am_worker_t *aw, am_run_t *r);
/* A routed call that reached a worker other than its destination: handed
 * on, in order, never waiting. */
void am_route_forward(am_worker_t *aw, const am_call_t *c);
/* The answer to routed call @p c (its result @p ret, @p len bytes),
 * routed back to its source as a call of rivet.am.answer. */
void am_route_answer(am_worker_t *aw, const am_call_t *c, const void *ret,
                     uint32_t len);
extern rv_handler_id_t am_answer_id;
rv_status_t am_on_answer(rv_worker_t *w, rv_call_t *call, void *arg);

/* am_call.c: appends @p e to @p d's open trad run, or to a new run;
 * a caller outside a handler first waits (progressing) while @p d holds
 * more than the trad limit. False when out of memory. */
bool am_trad_put(am_worker_t *aw, am_dest_t *d, const am_elem_t *e);

/* am_call.c: pushes out every call held for @p dest (RV_TID_ALL: all),
 * waiting, progressing */
rv_status_t am_flush_calls(am_worker_t *aw, rv_tid_t dest);
/* Logs that @p what needs rv_am_init; returns RV_ERR_INVALID. */
rv_status_t am_not_initialised(const char *what);
rv_status_t am_quiesce(am_worker_t *aw, unsigned give_up_ms, uint64_t sums[2]);

/* am_service.c: service threads */
void am_service_init(am_proc_t *proc);
void am_service_fini(am_proc_t *proc);
rv_status_t am_service_start(am_worker_t *aw);
void am_service_stop(am_worker_t *aw);
/* Runs @p job on a service thread if the job has some, else here. */
void am_service_submit(am_worker_t *aw, am_sjob_t *job);
unsigned am_service_poll(am_worker_t *aw);

/* am_ring_setup.c: ring set-up and growth */
rv_status_t am_ring_register(rv_context_t *ctx);
/* Asks @p d's worker for @p n chunks: a new ring when @p first, else more
 * for the ring it has. */
rv_status_t am_ring_request(am_worker_t *aw, am_dest_t *d, uint32_t n,
                            bool first);

/* am_ring.c: the write path */
/* Transmits @p len bytes at @p rec (one record, with room for its
 * footer) into @p d's ring: RV_OK, RV_INPROGRESS (@p b's inflight was
 * raised), RV_ERR_AGAIN (no room now) or an error. */
rv_status_t am_ring_write(am_worker_t *aw, am_dest_t *d, am_buf_t *b,
                          uint8_t *rec, size_t len);
/* Where @p d's next records may be serialized in place: the address
 * here of its ring's position, with *cap bytes of room (at least
 * @p need), moving to the next chunk when this one has less. NULL when
 * the ring is not mapped here, not ready, or full for now. */
uint8_t *am_ring_view_at(am_worker_t *aw, am_dest_t *d, size_t need,
                         size_t *cap);
/* Transmits the run of @p len bytes at @p off of view @p b, which is the
 * ring's position, by writing its header and footer in place. */
rv_status_t am_ring_commit(am_dest_t *d, am_buf_t *b, size_t off, size_t len);
unsigned am_ring_progress(am_worker_t *aw);
void am_ring_note(am_worker_t *aw, am_dest_t *d, rv_sync_t *s);
void am_ring_fini(am_worker_t *aw);
bool am_ring_busy(am_worker_t *aw);

#endif
