/*
 * The UCX transport plugin (private).
 *
 * One ucp_context per process (shared by the workers: mt_workers_shared),
 * one ucp_worker per worker thread in UCS_THREAD_MODE_SINGLE, and one
 * endpoint from every worker to every worker of the job, itself included.
 */
#ifndef RIVET_UCX_INTERNAL_H
#define RIVET_UCX_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <ucp/api/ucp.h>

#include "rv_layer.h" /* RV_TSAN_RELEASE, RV_TSAN_ACQUIRE */
#include "rv_transport.h"
#include "ucx_config.h"

#define RV_UCX_AM_ID 0  /* rivet messages */
#define RV_UCX_AM_RMA 1 /* RMA emulated over AM (ucx_emu.c) */
#define RV_UCX_MAX_HDR RV_TRANSPORT_AM_HEADER_MIN /* core header bytes */
#define RV_UCX_PAGE 4096u /* receive buffers: page-aligned, */
#define RV_UCX_HUGE_PAGE                                                       \
    ((size_t)2 << 20) /* and huge-page-aligned when large */
#define RV_UCX_MAX_IOV 16
#define RV_UCX_RXBUF_MIN_CLASS 12 /* 4 KiB */
#define RV_UCX_RXBUF_CLASSES 15   /* up to 64 MiB */
#define RV_UCX_RXBUF_CACHE (256u << 20)
#define RV_UCX_RNDV_INFLIGHT 2 /* rendezvous fetches at once */
#define RV_UCX_FAST_MAX 4096   /* payloads tried with immediate completion */

/* A registered region, as the target checks emulated accesses. */
typedef struct {
    uint64_t base, len;
    bool live;
} ucx_region_t;

/* The processes whose endpoints use the same UCX transports. */
#define RV_UCX_MAX_CLASSES 4
typedef struct {
    char lanes[96];  /* "posix/memory, cma/memory", "tcp/eth0" */
    bool emulated;   /* RMA to them goes over active messages */
    int nranks;      /* how many processes, */
    int first, last; /* the lowest and highest of them */
} rv_ucx_peer_class_t;

struct rv_transport {
    ucp_context_h context;
    rv_stats_mode_t stats; /* job.stats: the drops printed at the end */
    pthread_rwlock_t regions_lock;
    ucx_region_t *regions; /* by region id */
    uint32_t nregions, regions_cap;
    rv_ucx_config_t config;
    int rank, size, threads;
    char tls[128]; /* what was asked for */
    /* What the endpoints to other processes use, by class: the processes
     * whose endpoints UCX built of the same transports (on a cluster, the
     * processes of this host and those of the others). Recorded by the
     * process's first worker as it connects (ucx_ep_info.c). */
    rv_ucx_peer_class_t classes[RV_UCX_MAX_CLASSES];
    unsigned nclasses;
    bool classes_full; /* a further class was seen, not recorded */
    /* UCX runs the workers' atomics on a NIC (set by the first worker) */
    _Atomic bool amo_device;
    int described_upto; /* the highest rank counted in a class, or -1 */
    char version[32];
};

struct rv_tmem {
    ucp_mem_h memh;
    void *addr;
    size_t len;
    bool allocated;  /* by UCX (mem_alloc) */
    uint32_t region; /* id in the region registry */
};

/* A packed remote key: this header, then UCX's packed rkey. */
typedef struct {
    uint32_t magic;
    uint32_t region;
    uint64_t base, len;
} ucx_rkey_hdr_t;

#define RV_UCX_RKEY_MAGIC 0x52564b31u /* "RVK1" */

struct rv_trkey {
    ucp_rkey_h rkey;
    uint32_t region;
    uint64_t base, len;
    uint8_t *mapped; /* the region mapped here (shm), or NULL */
};

/* A slot of the initiator's table of emulated operations waiting for
 * their reply (ucx_emu.c). A request carries the slot's index and
 * generation, never a pointer: a reply names its operation through them. */
typedef struct {
    struct ucx_op *op;  /* NULL: the slot is free */
    uint32_t gen;       /* bumped each time the slot is taken */
    uint32_t peer;      /* the target: only it may answer */
    uint32_t next_free; /* free list, while free */
    uint8_t reply;      /* the kind of reply that answers it */
} ucx_emu_slot_t;

/* Why an emulated RMA message was dropped (ucx_emu.c). */
enum {
    RV_UCX_DROP_STALE,     /* a reply naming no operation waiting for it */
    RV_UCX_DROP_OUTSIDE,   /* an access outside the target's registered
                              memory */
    RV_UCX_DROP_MALFORMED, /* a bad header, kind or worker id */
    RV_UCX_DROP_KINDS,
};

/* An initiator waiting for its flush to be answered (target side). */
typedef struct ucx_flush_wait {
    struct ucx_flush_wait *next;
    uint64_t cookie;
} ucx_flush_wait_t;

#define RV_UCX_INLINE_DATA 256 /* payloads copied into the held entry */

/* A received message waiting in its sender's queue until the worker's
 * progress delivers it (see ucx_worker.c). */
typedef struct ucx_held {
    struct ucx_held *next;
    struct rv_tworker *tw;
    uint32_t src;               /* sending worker */
    bool ready;                 /* data complete */
    bool rxbuf;                 /* data from the receive buffer cache */
    void *rndv_desc;            /* rendezvous not started yet: UCX's desc */
    struct ucx_held *rndv_next; /* in the worker's pending rendezvous */
    void *ucp_desc;             /* eager data kept by UCX, or NULL */
    void *data;
    size_t len;
    size_t alloc_len; /* rxbuf: the size asked for */
    size_t hdr_len;
    uint8_t hdr[RV_UCX_MAX_HDR];
    uint8_t inline_data[RV_UCX_INLINE_DATA];
} ucx_held_t;

typedef struct {
    ucx_held_t *head, *tail;
} ucx_held_queue_t;

/* State of one operation in flight (send, put, get, atomic, flush). */
typedef struct ucx_op {
    struct ucx_op *next; /* free list */
    struct rv_tworker *tw;
    rv_completion_fn cb;
    void *arg;
    uint64_t value;  /* atomic operand */
    uint64_t result; /* atomic result when the caller gave none */
    uint64_t *result_p;
    void *dst; /* emulated get: where the data goes */
    size_t len;
    unsigned pending; /* emulated flush: parts outstanding */
    rv_status_t status;
    ucp_dt_iov_t iov[RV_UCX_MAX_IOV];
    uint8_t hdr[RV_UCX_MAX_HDR + sizeof(uint32_t)];
} ucx_op_t;

struct rv_tworker {
    rv_transport_t *tp;
    ucp_worker_h worker;
    uint32_t tid;
    uint32_t nworkers;
    ucp_ep_h *eps;          /* by peer tid */
    ucx_held_queue_t *held; /* by peer tid */
    uint32_t *active;       /* senders with held messages (a ring) */
    uint32_t active_head, active_count;
    bool *is_active; /* by peer tid */
    ucx_held_t *free_held;
    /* Receive buffers (rendezvous data, and eager data UCX does not let us
     * keep), kept for reuse by power-of-two class: fresh memory costs a
     * page fault per page on every message. */
    void *rxbuf_free[RV_UCX_RXBUF_CLASSES];
    size_t rxbuf_cached;               /* bytes in rxbuf_free */
    ucx_held_t *rndv_head, *rndv_tail; /* rendezvous waiting to start */
    unsigned rndv_inflight;            /* rendezvous fetches under way */
    rv_am_recv_fn am_recv;
    void *am_arg;
    ucx_op_t *free_ops;
    /* RMA emulation (ucx_emu.c), by peer worker */
    bool *emulate;              /* RMA to this peer goes over AM */
    bool *emu_dirty;            /* puts/atomics since the last flush */
    unsigned *emu_puts_landing; /* target: rendezvous puts still landing */
    ucx_flush_wait_t **emu_flush_waiting; /* target: flushes to answer */
    bool *emu_fence; /* the next operation carries a fence */
    struct ucx_emu_deferred **emu_deferred; /* target: operations behind a
                                              fence, in arrival order */
    struct ucx_emu_deferred **emu_deferred_tail;
    ucx_emu_slot_t *emu_slots;     /* initiator: operations awaiting replies */
    uint32_t emu_nslots, emu_free; /* slots made; first free (or NONE) */
    uint64_t emu_drops[RV_UCX_DROP_KINDS]; /* messages dropped, by why */
    uint8_t *emu_logged;        /* by peer: drop kinds logged (bits) */
    uint8_t emu_logged_unknown; /* the same, when no peer can be named */
    unsigned completions;       /* events since the last progress call */
};

rv_status_t rv_ucx_status(ucs_status_t status);
ucx_op_t *rv_ucx_op_get(struct rv_tworker *tw, rv_completion_fn cb, void *arg);
void rv_ucx_op_put(struct rv_tworker *tw, ucx_op_t *op);

/* ucx_mem.c */
rv_status_t rv_ucx_mem_alloc(rv_transport_t *tp, size_t len, rv_tmem_t **mem_p,
                             void **addr_p);
rv_status_t rv_ucx_mem_register(rv_transport_t *tp, void *addr, size_t len,
                                rv_tmem_t **mem_p);
void rv_ucx_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem);
rv_status_t rv_ucx_rkey_pack(rv_transport_t *tp, rv_tmem_t *mem, void **buf_p,
                             size_t *len_p);
void rv_ucx_rkey_buffer_release(rv_transport_t *tp, void *buf);
rv_status_t rv_ucx_rkey_unpack(struct rv_tworker *tw, uint32_t peer,
                               const void *buf, size_t len,
                               rv_trkey_t **rkey_p);
void rv_ucx_rkey_destroy(struct rv_tworker *tw, rv_trkey_t *rkey);

/* ucx_worker.c */
rv_status_t rv_ucx_worker_create(rv_transport_t *tp,
                                 const rv_tworker_params_t *params,
                                 struct rv_tworker **tw_p);
void rv_ucx_worker_destroy(struct rv_tworker *tw);
rv_status_t rv_ucx_worker_address(struct rv_tworker *tw, void **addr_p,
                                  size_t *len_p);
void rv_ucx_address_release(struct rv_tworker *tw, void *addr);

/* ucx_ep_info.c: what UCX says of an endpoint, read when it connects. */
/* What ucp_ep_print_info says of @p ep (malloc'ed), or NULL. */
char *rv_ucx_ep_info(ucp_ep_h ep);
/* Counts process @p peer_rank in the class of the UCX transports of
 * @p info's lanes (RMA to it emulated or not), making the class if new;
 * returns true when it made one. */
bool rv_ucx_record_lanes(rv_transport_t *tp, int peer_rank, const char *info,
                         bool emulated);
/* The classes in words: "posix/memory, cma/memory (rank 1); tcp/eth0
 * (2 ranks, 2..3; RMA over active messages)". */
void rv_ucx_describe_classes(const rv_transport_t *tp, char *out, size_t len);
/* What ucp_worker_print_info says of @p worker (malloc'ed), or NULL; and
 * whether it runs atomics on a network device (or one not known to be the
 * CPU's). */
char *rv_ucx_worker_info(ucp_worker_h worker);
bool rv_ucx_atomics_on_device(const char *worker_info);
/* True when UCX would carry @p info's RMA over TCP, or has no RMA lane. */
bool rv_ucx_rma_needs_emulation(const char *info);
/* At log level info, logs @p info's lanes and AM protocols by size. */
void rv_ucx_log_ep_info(int peer_rank, const char *info);
rv_status_t rv_ucx_connect(struct rv_tworker *tw, uint32_t peer,
                           const void *addr, size_t len);
rv_status_t rv_ucx_disconnect(struct rv_tworker *tw);
unsigned rv_ucx_progress(struct rv_tworker *tw);
rv_status_t rv_ucx_am_send(struct rv_tworker *tw, uint32_t peer,
                           const void *hdr, size_t hdr_len,
                           const struct iovec *iov, size_t iovcnt,
                           unsigned flags, rv_completion_fn cb, void *arg);
void rv_ucx_am_release(struct rv_tworker *tw, void *desc);

/* ucx_am_recv.c: the AM handler of RV_UCX_AM_ID (set in the worker's
 * UCP worker); the held messages and pending rendezvous progressed (the
 * events counted); at the worker's end, the held messages given back
 * (while its UCP worker exists) and the pools freed (after). */
ucs_status_t rv_ucx_am_recv_cb(void *arg, const void *header,
                               size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param);
unsigned rv_ucx_recv_progress(struct rv_tworker *tw);
void rv_ucx_recv_fini(struct rv_tworker *tw);
void rv_ucx_recv_free_pools(struct rv_tworker *tw);

/* ucx_emu.c */
rv_status_t rv_ucx_emu_worker_init(struct rv_tworker *tw);
void rv_ucx_emu_worker_fini(struct rv_tworker *tw);
rv_status_t rv_ucx_region_add(rv_transport_t *tp, uint64_t base, uint64_t len,
                              uint32_t *id_p);
void rv_ucx_region_remove(rv_transport_t *tp, uint32_t id);
ucs_status_t rv_ucx_emu_recv_cb(void *arg, const void *header,
                                size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param);
rv_status_t rv_ucx_emu_put(struct rv_tworker *tw, uint32_t peer,
                           const void *src, size_t len, uint64_t raddr,
                           rv_trkey_t *rkey, rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_emu_get(struct rv_tworker *tw, uint32_t peer, void *dst,
                           size_t len, uint64_t raddr, rv_trkey_t *rkey,
                           rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_emu_atomic(struct rv_tworker *tw, uint32_t peer, bool cswap,
                              uint64_t v1, uint64_t v2, uint64_t raddr,
                              rv_trkey_t *rkey, uint64_t *result,
                              rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_emu_flush(struct rv_tworker *tw, uint32_t peer,
                             rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_emu_flush_all(struct rv_tworker *tw, rv_completion_fn cb,
                                 void *arg);

/* ucx_rma.c */
void *rv_ucx_rkey_ptr(struct rv_tworker *tw, uint32_t peer, rv_trkey_t *rkey,
                      uint64_t raddr, size_t len);
rv_status_t rv_ucx_put(struct rv_tworker *tw, uint32_t peer, uint64_t raddr,
                       rv_trkey_t *rkey, const void *src, size_t len,
                       rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_get(struct rv_tworker *tw, uint32_t peer, void *dst,
                       size_t len, uint64_t raddr, rv_trkey_t *rkey,
                       rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_atomic_fadd64(struct rv_tworker *tw, uint32_t peer,
                                 uint64_t value, uint64_t raddr,
                                 rv_trkey_t *rkey, uint64_t *result,
                                 rv_completion_fn cb, void *arg);
rv_status_t rv_ucx_atomic_cswap64(struct rv_tworker *tw, uint32_t peer,
                                  uint64_t compare, uint64_t swap,
                                  uint64_t raddr, rv_trkey_t *rkey,
                                  uint64_t *result, rv_completion_fn cb,
                                  void *arg);
rv_status_t rv_ucx_fence(struct rv_tworker *tw, uint32_t peer);
rv_status_t rv_ucx_flush(struct rv_tworker *tw, uint32_t peer,
                         rv_completion_fn cb, void *arg);

#endif
