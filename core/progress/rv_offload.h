/*
 * The progress engine's offloading modes (progress.mode thread, dynamic
 * and direct), after Endo and Taura, "Parallelized Software Offloading of
 * Low-Level Communication with User-Level Threads".
 *
 * Offloading is a transport of its own, wrapped around the plugin's: its
 * operations table has the plugin's signatures, so that core and every
 * layer above it (calls, messengers, aggregation, rma) run unchanged
 * whoever posts to the network. Each worker thread gets a *requester* in
 * place of a transport worker: its operations become commands in the
 * lockless queue (rv_offload_queue.h) of one of the process's K
 * *executors*, which own the plugin's K transport workers, post the
 * commands, poll their completions and route what they receive. An
 * executor is its own completer, or (progress.completers: threads) a
 * completer thread beside it polls while it only posts, as in the paper's
 * design (Implementation: Completers). A requester's progress runs, on its own
 * thread, the completions of its operations and the messages addressed to
 * it, from its wait-free inbox (liburcu's wfcqueue), in the order its
 * executor put them there: the FIFO order of every sender-receiver pair is
 * the transport's order between executors.
 *
 * On the wire a message carries, before its payload, the job ids of the
 * worker that sent it and of the worker it is for: the plugin's peers are
 * executors (rank * K + k), and worker t of a process uses executor
 * t mod K at both ends.
 */
#ifndef RIVET_RV_OFFLOAD_H
#define RIVET_RV_OFFLOAD_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>

#define _LGPL_SOURCE
#include <urcu/wfcqueue.h>

#include "rivet.h"
#include "rv_config.h"
#include "rv_offload_queue.h"
#include "rv_transport.h"

/* Payload bytes a requester copies into the command: its buffer is free
 * when the call returns and no completion has to come back. */
#define OFF_INLINE 192
/* Payload pieces a command carries by reference (the plugins take 16; one
 * is the wire prefix). */
#define OFF_IOV_MAX 15
#define OFF_HDR_MAX RV_TRANSPORT_AM_HEADER_MIN
/* Backpressure. An executor holding this many copies of sends the plugin
 * could not take at once is congested: requesters then send by reference
 * (their buffers come back on completion, as without offloading), so that
 * the layers' own buffer limits bound what a process queues. */
#define OFF_COPIES_MAX 256
/* An executor stops polling the network while a requester of its has this
 * many messages it has not run: the messages wait in the transport, whose
 * senders then wait for their completions, as they would for a worker
 * thread that does not progress. */
#define OFF_INBOX_MAX 4096

/* What goes on the wire before the payload. */
typedef struct off_wire {
    uint32_t src; /* the sending worker's job id */
    uint32_t dst; /* the receiving worker's job id */
} off_wire_t;

typedef enum off_op {
    OFF_AM, /* am_send */
    OFF_PUT,
    OFF_GET,
    OFF_FADD,
    OFF_CSWAP,
    OFF_FENCE,
    OFF_FLUSH,
    OFF_RKEY_DESTROY,
    /* Synchronous: the requester waits for the executor's answer. */
    OFF_RKEY_UNPACK,
    OFF_CREATE, /* a requester attaches: the first makes the worker */
    OFF_ADDRESS,
    OFF_CONNECT,
    OFF_DISCONNECT, /* the last attached requester's disconnects */
    OFF_DESTROY,    /* a requester detaches: the last destroys */
    OFF_EXIT,       /* the executor thread ends (transport fini) */
} off_op_t;

typedef struct off_req off_req_t;
typedef struct off_exec off_exec_t;
typedef struct off_tp off_tp_t;

/* A synchronous command's answer, on the requester's stack. */
typedef struct off_answer {
    _Atomic int done;
    rv_status_t status;
} off_answer_t;

/* An entry of a requester's inbox: a completion or a received message. */
typedef struct off_item {
    struct cds_wfcq_node node;
    off_req_t *req;
    off_exec_t *exec;    /* completion: counted outstanding there */
    rv_completion_fn cb; /* NULL for a received message */
    void *arg;
    rv_status_t status;
    off_wire_t wire; /* a send's prefix: lives until completion */
    uint32_t hdr_len;
    size_t len;
    uint8_t hdr[OFF_HDR_MAX];
    alignas(16) uint8_t data[]; /* a received message's payload */
} off_item_t;

/* A command in an executor's queue. */
typedef struct off_cmd {
    offq_slot_t slot; /* first: the queue's sequence */
    uint8_t op;       /* off_op_t */
    uint8_t iovcnt;   /* OFF_AM by reference: pieces in iov */
    uint16_t hdr_len;
    uint32_t peer; /* the job id of the peer worker */
    off_req_t *req;
    rv_completion_fn cb;
    void *arg;
    union {
        struct {
            uint32_t inline_len; /* payload bytes in wire_data */
            bool by_ref;         /* payload in iov */
            void *owned;         /* a copy the executor frees */
            struct iovec iov[OFF_IOV_MAX];
        } am;
        struct {
            uint64_t raddr;
            rv_trkey_t *rkey;
            void *buf;
            size_t len;
        } rma;
        struct {
            uint64_t raddr;
            rv_trkey_t *rkey;
            uint64_t v1, v2;
            uint64_t *result;
        } amo;
        struct {
            off_answer_t *answer;
            const void *in;
            size_t in_len;
            void **out_p;
            size_t *out_len_p;
        } sync;
    } u;
    uint8_t hdr[OFF_HDR_MAX];
    /* The wire prefix and an inline payload, contiguous: one piece. */
    alignas(8) uint8_t wire_data[sizeof(off_wire_t) + OFF_INLINE];
} off_cmd_t;

/* One executor: a transport worker of the plugin, its command queue and,
 * in thread and dynamic modes, its thread. */
struct off_exec {
    offq_t q;
    off_tp_t *off;
    int index;
    off_cmd_t *ring;          /* OFFQ_SIZE commands */
    rv_tworker_t *tw;         /* the plugin's worker */
    int users, disconnects;   /* attached requesters; their disconnects */
    _Atomic long outstanding; /* operations whose completion is due */
    _Atomic long copies;      /* of those, sends from copies */
    _Atomic bool exit;
    bool has_thread;
    pthread_t thread;
    /* Direct mode: the requesters share tw under it. Completer threads:
     * the executor and its completer do. */
    pthread_mutex_t lock;
    /* progress.completers: threads. The completer's wake word
     * (rv_offload_queue.h: offw_*) and its thread. */
    _Alignas(64) _Atomic uint32_t cwake;
    bool has_completer;
    pthread_t completer;
};

/* A worker thread's stand-in for a transport worker. */
struct off_req {
    off_tp_t *off;
    off_exec_t *exec;
    uint32_t tid;
    int local;
    rv_am_recv_fn am_recv;
    void *am_arg;
    struct cds_wfcq_head head;
    struct cds_wfcq_tail tail;
    _Atomic long pending; /* messages in the inbox */
};

/* The offloading transport. */
struct off_tp {
    rv_context_t *ctx;
    rv_transport_ops_t vtable;     /* rv_offload.c's, named as the plugin */
    const rv_transport_ops_t *ops; /* the plugin's */
    rv_transport_t *tp;
    rv_progress_mode_t mode;
    bool completers; /* progress.completers: threads */
    int K, T;
    uint32_t rank, size;
    long spin_ns, sleep_us;
    off_exec_t *exec;           /* K */
    _Atomic(off_req_t *) *reqs; /* T, by local index */
    void (*peer_failed)(void *arg, uint32_t peer, const char *why);
    void *peer_failed_arg;
};

/* rv_offload.c: wraps the plugin @p ops. @p params are the job's (threads
 * = T); the plugin is started with K. On success *ops_p and *tp_p are
 * the offloading transport's, which core uses in place of the plugin's. */
rv_status_t rv__offload_init(rv_context_t *ctx, const rv_transport_ops_t *ops,
                             const rv_transport_params_t *params,
                             const rv_transport_ops_t **ops_p,
                             rv_transport_t **tp_p);

/* rv_offload_exec.c: the executor's side. */
rv_status_t off_exec_start(off_tp_t *off, off_exec_t *e, int index);
void off_exec_stop(off_exec_t *e);
void off_exec_run(off_exec_t *e, off_cmd_t *c);
rv_status_t off_exec_recv(void *arg, const rv_am_rx_t *rx, void *desc);
uint32_t off_real_peer(const off_tp_t *off, uint32_t tid);
void off_inbox_push(off_req_t *r, off_item_t *item);
bool off_exec_may_poll(const off_exec_t *e);

#endif
