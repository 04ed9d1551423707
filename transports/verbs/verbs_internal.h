/*
 * The verbs transport (librivet-verbs.so): internal types and the functions
 * its files share. One file per object:
 *
 *   verbs_transport.c  device, protection domain, registered memory and
 *                      remote keys, the ops table
 *   verbs_worker.c     a worker: its queues, receive buffers and bounce
 *                      memory; progress; disconnection
 *   verbs_qp.c         queue pairs: creation, state transitions, connection
 *   verbs_post.c       posting work requests with selective signaling, the
 *                      backlog that keeps posting from blocking, bounce
 *                      buffers
 *   verbs_shared.c     queue pairs shared by the threads of a process
 *                      (qp_sharing: process)
 *   verbs_cq.c         operations and their completions: polling the send
 *                      and receive CQs and routing what they report
 *   verbs_am.c         active messages: the eager path through the shared
 *                      receive queue, and rendezvous
 *   verbs_rma.c        put, get, atomics, fence and flush
 *
 * One protection domain per process; per worker thread a send CQ, a
 * receive CQ, a shared receive queue of eager buffers in the worker's NUMA
 * zone and one RC queue pair to every worker of the job (itself included:
 * a QP connected to itself is loopback). transport.verbs.qp_sharing:
 * thread. Connection data (GID, LID, QP numbers) travels in the worker
 * address the bootstrap allgathers.
 *
 * Selective signaling (Seriema, section 4.1): one work request in
 * transport.verbs.signal_interval asks for a completion, or one that needs
 * its own (a get, an atomic, a flush). A QP is used by one thread, so post
 * order is sequence order and a completed signaled WR with sequence s
 * proves every earlier WR of its QP complete. Every bounce buffer a WR
 * used lives in a unit of the worker's circular allocator (rv_regmem.h, which
 * core's services give the plugin), tagged (QP, flush number); the
 * allocator recycles a unit once the flush number is complete.
 */
#ifndef RIVET_VERBS_INTERNAL_H
#define RIVET_VERBS_INTERNAL_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "rv_regmem.h"
#include "rv_transport.h"
#include "verbs_config.h"
#include "verbs_signal.h"

/* ---------------------------------------------------------------------- */
/* Sizes and limits                                                        */

#define VB_MAX_HDR RV_TRANSPORT_AM_HEADER_MIN /* core header bytes */
#define VB_RXBUF 16384                        /* eager receive buffer */
#define VB_NRX                                                                 \
    512 /* receive buffers per worker (its SRQ),                               \
           fewer if the device allows fewer */
#define VB_MAX_AM_SIZE ((size_t)1 << 31) /* largest message (RTS: u32) */
#define VB_UNIT (64u << 10)              /* bounce unit (circular allocator) */
#define VB_ZCOPY_MIN (64u << 10) /* put/get above: registered on the fly */
#define VB_RNDV_COPY (64u << 10) /* rendezvous AM up to: sent from a copy */
#define VB_SQ_DEPTH 512          /* send queue of a worker's own QP */
#define VB_CQ_POLL 32            /* completions one poll of a CQ takes */
#define VB_SH_POLL 8             /* completions one shared-CQ poll takes */
/* Inline data asked of a new QP; a device that refuses gets a QP without
 * inline data (then every send goes from a registered buffer). */
#define VB_MAX_INLINE_WANT 220
#define VB_INLINE_COPY                                                         \
    256 /* inline bytes staged on the stack or                                 \
           copied into a backlog entry */
#define VB_PAGE                                                                \
    4096                           /* alignment of the receive buffers and     \
                                      the flush word's page */
#define VB_WORD sizeof(uint64_t)   /* a flush read, an atomic operand */
#define VB_PSN_MASK 0xffffffu      /* packet sequence numbers are 24 bits */
#define VB_DISCONNECT_TIMEOUT_S 30 /* for every peer's goodbye */

enum { VB_EAGER = 1, VB_RTS, VB_FIN, VB_BYE };

/* Every message starts with this. */
typedef struct {
    uint32_t src; /* sending worker */
    uint8_t type;
    uint8_t hdr_len;
    uint16_t reserved;
    uint32_t len; /* payload bytes (RTS: to be read) */
    uint32_t reserved2;
} vb_wire_t;

/* RTS body: where the receiver RDMA-reads the payload from. */
typedef struct {
    uint64_t addr;
    uint64_t cookie; /* the sender's rendezvous slot
                        (generation << 32 | index), echoed
                        by FIN; never a pointer */
    uint32_t rkey;
    uint32_t reserved;
} vb_rts_t;

/* ---------------------------------------------------------------------- */
/* The process: device, protection domain, shared QPs                      */

/* qp_sharing: process. The threads of a process share one QP to each
 * worker of the job (its send side); the worker at the other end owns its
 * side (it receives on its SRQ, and posts its rendezvous reads there).
 * Shared QPs run the wait-free signaling of verbs_signal.c, each with a
 * send CQ of its own that any thread may poll; completions of a thread's
 * operations reaped by another go to the owner's inbox. */
typedef struct vb_shared {
    struct rv_transport *tp;
    struct ibv_qp *qp;
    struct ibv_cq *cq;
    rv_vsig_t *sig;
    uint32_t peer;       /* the remote worker */
    uint64_t flush_addr; /* its flush word, for markers */
    uint32_t flush_rkey;
} vb_shared_t;

struct rv_transport {
    const rv_transport_services_t *svc; /* core's, for the plugin's life */
    struct ibv_context *ibctx;
    struct ibv_pd *pd;
    struct ibv_device_attr dev;
    struct ibv_port_attr port_attr;
    char devname[64];
    int port;
    int gid_index;
    union ibv_gid gid;
    bool roce;
    int rank, size, threads;
    uint32_t signal_interval;
    size_t max_message; /* transport.verbs.max_message, <= VB_MAX_AM_SIZE */
    void (*peer_failed)(void *arg, uint32_t peer, const char *why);
    void *peer_failed_arg;
    rv_verbs_config_t config;
    const rv_config_t *job_config; /* core's keys (memory.*) */
    rv_stats_mode_t stats;         /* job.stats: the drops printed at the end */
    char gid_text[64];
    /* qp_sharing: process */
    bool shared_qps;
    uint32_t nworkers;
    uint32_t sq_depth;      /* of the shared QPs */
    uint32_t sh_max_inline; /* their max_inline_data */
    uint32_t psn;           /* their first packet sequence number */
    vb_shared_t *shared;    /* by remote worker */
    rv_vsig_t **sigs;       /* by remote worker: sig_arg's array */
    rv_vsig_mem_arg_t sig_arg;
    struct rv_tworker *_Atomic *workers; /* by local index, for inboxes */
    _Atomic int live;                    /* workers of the current job */
};

struct rv_tmem {
    struct ibv_mr *mr;
    void *addr;
    size_t len;
    bool allocated;
};

typedef struct {
    uint32_t magic;
    uint32_t rkey;
    uint64_t base, len;
} vb_rkey_wire_t;

#define VB_RKEY_MAGIC 0x52564231u /* "RVB1" */

struct rv_trkey {
    uint32_t rkey;
    uint64_t base, len;
};

/* What a worker publishes: addressing, then QP numbers: one per worker
 * (qp_sharing: thread), or its own QP per process followed by its
 * process's shared QP per worker (qp_sharing: process). */
typedef struct {
    uint8_t gid[16];
    uint16_t lid;
    uint8_t mtu;
    uint8_t shared; /* qp_sharing: process */
    uint32_t psn;   /* of the worker's own QPs */
    uint32_t ppsn;  /* of its process's shared QPs */
    uint32_t nprocs;
    uint64_t flush_addr; /* an 8-byte word a flush reads */
    uint32_t flush_rkey;
    uint32_t nqp;
    uint32_t qpn[];
} vb_addr_t;

/* ---------------------------------------------------------------------- */
/* A worker                                                                */

/* An operation waiting for its completion. */
typedef struct vb_op {
    struct vb_op *next; /* free list, or pending list */
    struct vb_op *_Atomic inbox_next;
    struct rv_tworker *owner;
    uint32_t lane;      /* the QP it was posted on (own QPs) */
    rv_status_t status; /* reaped by another thread */
    rv_completion_fn cb;
    void *arg;
    uint32_t peer;
    uint8_t kind; /* VB_OP_* */
    bool failed;
    uint64_t *result_p; /* atomics */
    uint64_t *result;   /* the registered 8 bytes */
    void *dst;          /* get through a bounce buffer */
    void *bounce;
    size_t len;        /* flush: parts outstanding */
    uint64_t seq;      /* of its WR, when it has one */
    struct ibv_mr *mr; /* registered on the fly */
} vb_op_t;

enum {
    VB_OP_PUT = 1,
    VB_OP_GET,
    VB_OP_ATOMIC,
    VB_OP_FLUSH,
    VB_OP_FLUSH_PART,
    VB_OP_RTS,
    VB_OP_READ
};

/* A slot of a worker's table of rendezvous sends waiting for their FIN
 * (verbs_am.c): an RTS carries the slot's index and generation, and the
 * FIN finds its send through them, never through a pointer. */
typedef struct {
    struct vb_op *op;   /* NULL: free */
    uint32_t gen;       /* bumped each time the slot is taken */
    uint32_t next_free; /* free list, while free */
} vb_rndv_slot_t;

/* Why a worker dropped a message it received (verbs_am.c). */
enum {
    VB_DROP_STALE_FIN, /* a FIN naming no rendezvous of ours */
    VB_DROP_MALFORMED, /* cut short, bad header or type */
    VB_DROP_KINDS,
};

/* A received message held so that one sender's messages are delivered in
 * order (a rendezvous is read before later messages are delivered). */
typedef struct vb_held {
    struct vb_held *next;
    uint32_t src;
    bool ready;
    /* data is a malloc'ed copy (an eager message held behind a
     * rendezvous), not rendezvous memory from the pool or registered with
     * mr: vb_am_release must free it, not hand it to the pool. */
    bool copied;
    void *data;
    size_t len;
    struct ibv_mr *mr;
    uint64_t cookie; /* RTS: the sender's, for FIN */
    size_t hdr_len;
    uint8_t hdr[VB_MAX_HDR];
} vb_held_t;

/* A WR waiting for room in its send queue (posting never blocks). */
typedef struct vb_pending {
    struct vb_pending *next;
    rv_mem_unit_t *unit; /* shared QPs: tagged when posted */
    bool signal;
    struct ibv_send_wr wr;
    struct ibv_sge sge;
    uint8_t data[VB_INLINE_COPY]; /* an inline WR's bytes */
} vb_pending_t;

typedef struct {
    struct ibv_qp *qp;
    uint64_t assigned; /* WR sequence numbers, from 1 */
    uint64_t posted;   /* handed to the QP */
    uint64_t done;     /* highest completed */
    bool fence;        /* next WR carries IBV_SEND_FENCE */
    bool dirty;        /* writes since the last flush */
    bool connected;
    bool bye;             /* the peer said goodbye */
    uint8_t drops_logged; /* drop kinds logged for it (bits) */
    uint64_t flush_addr;  /* the peer's word a flush reads */
    uint32_t flush_rkey;
    vb_held_t *held_head, *held_tail;
    vb_pending_t *pend_head, *pend_tail; /* in sequence order */
} vb_peer_t;

struct rv_tworker {
    rv_transport_t *tp;
    uint32_t tid, nworkers;
    int numa_node;
    rv_am_recv_fn am_recv;
    void *am_arg;
    struct ibv_cq *scq, *rcq;
    struct ibv_srq *srq;
    vb_peer_t *peers;
    vb_peer_t *owned; /* process sharing: own QP per process */
    uint32_t nprocs, local;
    unsigned *sh_ops;            /* ops outstanding per shared QP */
    bool *sh_open;               /* a run may be open on it */
    uint64_t *sh_last;           /* flush number of our last WR there */
    struct vb_op *_Atomic inbox; /* ops reaped by other threads */
    uint32_t psn;
    /* receive buffers */
    struct ibv_mr *rx_mr;
    uint8_t *rx;
    uint32_t nrx;
    /* bounce memory: tagged (peer, flush number) */
    rv_mem_chunk_allocator_t *chunks;
    rv_mem_general_t *pool;           /* rendezvous payloads, both ends */
    rv_mem_circular_t **circ_by_peer; /* bounce rings, made on first use */
    rv_mem_linear_t **lin_by_peer;    /* a unit serves one QP at a time */
    uint32_t max_inline;
    _Atomic uint64_t *completed_flush; /* by peer */
    /* flush target */
    uint64_t *flush_word;
    struct ibv_mr *flush_mr;
    uint32_t flush_lkey;
    vb_op_t *free_ops;
    unsigned events;
    unsigned backlog; /* WRs waiting, all peers */
    uint32_t byes;
    bool error_reported;
    /* rendezvous sends waiting for their FIN, and the drops */
    vb_rndv_slot_t *rndv_slots;
    uint32_t rndv_nslots, rndv_free;
    uint64_t drops[VB_DROP_KINDS];
    uint8_t drops_logged_unknown; /* drop kinds logged, sender unknown */
};

/* The plugin's ops table (verbs_transport.c): its chunk allocators register
 * memory through it. */
extern const rv_transport_ops_t rv_transport_ops;

static inline int vb_rank_of(const rv_tworker_t *tw, uint32_t peer)
{
    return (int)(peer / (uint32_t)tw->tp->threads);
}

/* The QPs a worker posts on alone ("lanes"): one per worker with
 * qp_sharing thread (lane = peer); with process, its own QP per process
 * (lane nworkers + rank), used for rendezvous reads. */
static inline vb_peer_t *vb_lane(rv_tworker_t *tw, uint32_t lane)
{
    return lane < tw->nworkers ? &tw->peers[lane]
                               : &tw->owned[lane - tw->nworkers];
}

static inline uint32_t vb_nlanes(const rv_tworker_t *tw)
{
    return tw->tp->shared_qps ? tw->nworkers + tw->nprocs : tw->nworkers;
}

/* A first packet sequence number: random, as is usual, so that packets of
 * an earlier connection between the same QP numbers hardly match. */
static inline uint32_t vb_random_psn(void)
{
    return (uint32_t)rand() & VB_PSN_MASK;
}

/* The bytes of an MTU enum: IBV_MTU_256 is 1 and each next one doubles. */
static inline int vb_mtu_bytes(enum ibv_mtu mtu)
{
    return 128 << mtu;
}

/* ---------------------------------------------------------------------- */
/* Markers: the wr_id of a WR on a worker's own QP that has no operation   */

/* Bit 0 set (operations are aligned pointers, bit 0 clear), the sequence
 * number in bits 1-39, the lane from bit 40 up. */
#define VB_MARKER_LANE_SHIFT 40

static inline uint64_t vb_marker(uint32_t lane, uint64_t seq)
{
    return (uint64_t)lane << VB_MARKER_LANE_SHIFT | seq << 1 | 1;
}

static inline bool vb_is_marker(uint64_t wr_id)
{
    return (wr_id & 1) != 0;
}

static inline uint32_t vb_marker_lane(uint64_t wr_id)
{
    return (uint32_t)(wr_id >> VB_MARKER_LANE_SHIFT);
}

static inline uint64_t vb_marker_seq(uint64_t wr_id)
{
    return (wr_id & ((UINT64_C(1) << VB_MARKER_LANE_SHIFT) - 1)) >> 1;
}

/* ---------------------------------------------------------------------- */
/* Shared functions, by file                                               */

/* verbs_transport.c */
rv_status_t vb_mem_register(rv_transport_t *tp, void *addr, size_t len,
                            rv_tmem_t **mem_p);
void vb_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem);
struct ibv_mr *vb_reg(rv_transport_t *tp, void *addr, size_t len);

/* verbs_worker.c */
rv_status_t vb_worker_create(rv_transport_t *tp,
                             const rv_tworker_params_t *params,
                             rv_tworker_t **tw_p);
void vb_worker_destroy(rv_tworker_t *tw);
rv_status_t vb_worker_address(rv_tworker_t *tw, void **addr_p, size_t *len_p);
void vb_address_release(rv_tworker_t *tw, void *addr);
unsigned vb_progress(rv_tworker_t *tw);
rv_status_t vb_disconnect(rv_tworker_t *tw);

/* verbs_qp.c. vb_qp_create: an RC QP of @p depth send WRs completing on
 * @p scq and @p rcq, receiving through @p srq (NULL: a send side only),
 * moved to INIT; its inline limit goes to *max_inline_p. */
rv_status_t vb_qp_create(rv_transport_t *tp, struct ibv_cq *scq,
                         struct ibv_cq *rcq, struct ibv_srq *srq,
                         uint32_t depth, struct ibv_qp **qp_p,
                         uint32_t *max_inline_p);
rv_status_t vb_connect(rv_tworker_t *tw, uint32_t peer, const void *addr,
                       size_t len);

/* verbs_post.c */
rv_status_t vb_post(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr,
                    bool signal, rv_mem_unit_t *unit);
rv_status_t vb_post_to(rv_tworker_t *tw, uint32_t peer, struct ibv_send_wr *wr,
                       bool signal, rv_mem_unit_t *unit);
rv_status_t vb_backlog_push(rv_tworker_t *tw, vb_peer_t *p,
                            const struct ibv_send_wr *wr);
vb_pending_t *vb_backlog_pop(rv_tworker_t *tw, vb_peer_t *p);
void vb_post_backlog(rv_tworker_t *tw);
rv_status_t vb_bounce(rv_tworker_t *tw, uint32_t peer, size_t len,
                      void **addr_p, uint32_t *lkey_p, rv_mem_unit_t **unit_p);
void vb_bounce_destroy(rv_tworker_t *tw);

/* verbs_shared.c */
rv_status_t vb_shared_init(rv_transport_t *tp);
void vb_shared_fini(rv_transport_t *tp);
rv_status_t vb_shared_qps_create(rv_transport_t *tp);
void vb_shared_qps_destroy(rv_transport_t *tp);
int vb_shared_reap(vb_shared_t *sh);
rv_status_t vb_post_shared(rv_tworker_t *tw, uint32_t peer,
                           struct ibv_send_wr *wr, bool signal,
                           rv_mem_unit_t *unit);
void vb_shared_progress(rv_tworker_t *tw);
bool vb_shared_quiet(rv_tworker_t *tw);

/* verbs_cq.c */
vb_op_t *vb_op_get(rv_tworker_t *tw, uint8_t kind, uint32_t peer,
                   rv_completion_fn cb, void *arg);
void vb_op_put(rv_tworker_t *tw, vb_op_t *op);
void vb_op_done(rv_tworker_t *tw, vb_op_t *op, rv_status_t st);
void vb_wc_failed(rv_transport_t *tp, uint32_t peer, const char *what,
                  enum ibv_wc_status st, uint32_t vendor);
void vb_inbox_push(rv_tworker_t *owner, vb_op_t *op);
void vb_inbox_drain(rv_tworker_t *tw);
unsigned vb_poll_send(rv_tworker_t *tw);
void vb_poll_recv(rv_tworker_t *tw);

/* verbs_am.c */
rv_status_t vb_rx_post(rv_tworker_t *tw, uint32_t i);
void vb_on_recv(rv_tworker_t *tw, const struct ibv_wc *wc);
void vb_read_done(rv_tworker_t *tw, vb_op_t *op, rv_status_t st);
void vb_held_drop(rv_tworker_t *tw, vb_peer_t *p);
void vb_rndv_fini(rv_tworker_t *tw);
rv_status_t vb_send_ctrl(rv_tworker_t *tw, uint32_t peer, uint8_t type,
                         const void *body, size_t len, bool signal);
rv_status_t vb_am_send(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                       size_t hdr_len, const struct iovec *iov, size_t iovcnt,
                       unsigned flags, rv_completion_fn cb, void *arg);
void vb_am_release(rv_tworker_t *tw, void *desc);

/* verbs_rma.c */
rv_status_t vb_put(rv_tworker_t *tw, uint32_t peer, uint64_t raddr,
                   rv_trkey_t *rkey, const void *src, size_t len,
                   rv_completion_fn cb, void *arg);
rv_status_t vb_get(rv_tworker_t *tw, uint32_t peer, void *dst, size_t len,
                   uint64_t raddr, rv_trkey_t *rkey, rv_completion_fn cb,
                   void *arg);
rv_status_t vb_atomic_fadd64(rv_tworker_t *tw, uint32_t peer, uint64_t value,
                             uint64_t raddr, rv_trkey_t *rkey, uint64_t *result,
                             rv_completion_fn cb, void *arg);
rv_status_t vb_atomic_cswap64(rv_tworker_t *tw, uint32_t peer, uint64_t compare,
                              uint64_t swap, uint64_t raddr, rv_trkey_t *rkey,
                              uint64_t *result, rv_completion_fn cb, void *arg);
rv_status_t vb_fence(rv_tworker_t *tw, uint32_t peer);
rv_status_t vb_flush(rv_tworker_t *tw, uint32_t peer, rv_completion_fn cb,
                     void *arg);

#endif
