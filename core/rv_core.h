/*
 * Internal state of the core (never installed).
 */
#ifndef RIVET_RV_CORE_H
#define RIVET_RV_CORE_H

#include <pthread.h>
#include <stdatomic.h>

#include "rivet.h"
#include "rv_bootstrap.h"
#include "rv_layer.h"

/*
 * The header of every message on the wire: the transport carries it as the
 * AM header, and the payload as AM data; the transport itself identifies
 * the sender. `len` announces the payload's length so that a truncated
 * message is detected, not run. The header is 8 bytes on purpose: shared
 * memory transports send header + payload up to a small limit (about 80
 * bytes with UCX's mm FIFO) in one cache-line-sized copy, and every byte of
 * header moves that cliff. Other header layouts will be told apart by
 * their length.
 */
typedef struct rv_msg_hdr {
    rv_handler_id_t handler;
    uint32_t len;
} rv_msg_hdr_t;

#define RV_MSG_MAX_LEN UINT32_MAX

/* Handlers are registered before the job runs; the table is read-only
 * while it runs, so lookups take no lock. */
typedef rv_handler_info_t rv_handler_entry_t;

/* Reserved handler names used by the core itself. */
#define RV_HANDLER_BARRIER "rivet.barrier"
#define RV_HANDLER_BARRIER_RELEASE "rivet.barrier_release"

/* An installed layer (rv_layer.h). */
typedef struct rv_layer_slot {
    const rv_layer_ops_t *ops;
    void *state;
} rv_layer_slot_t;

/* A collective's contributions for one epoch (rv_coll.c): children may
 * report the next epoch before this worker entered it, so two are kept,
 * by the epoch's parity. */
typedef struct rv_coll_slot {
    uint64_t epoch;
    uint8_t *buf;
    size_t cap;
    unsigned arrived; /* children's contributions combined */
    /* the collective's shape (kind, type, op, len) as the first to report
     * it (a child, or this worker) gave it, and which worker that was */
    bool shaped;
    uint32_t kind, type, op, len, shaper;
} rv_coll_slot_t;

typedef struct rv_coll_state {
    uint64_t epoch; /* collectives entered */
    rv_coll_slot_t slot[2];
    void *out; /* where the result coming down goes */
    size_t out_len;
    uint64_t released; /* last epoch whose result came down */
} rv_coll_state_t;

struct rv_worker {
    rv_worker_view_t view; /* first: what layers read inline */
    rv_context_t *ctx;
    rv_tid_t tid;
    int local;
    int numa_node;
    pthread_t thread;
    int result;

    /* barrier state: worker 0 counts arrivals, others wait for release */
    uint64_t barrier_epoch;    /* barriers this worker entered */
    uint64_t barrier_released; /* epochs released so far */
    uint64_t barrier_arrivals; /* at worker 0: arrivals, all epochs */

    rv_worker_stats_t stats;
    unsigned idle_polls;     /* consecutive empty progress calls */
    int in_callback;         /* running an inline handler */
    unsigned progress_depth; /* rv_progress frames on the stack */
    rv_coll_state_t coll;    /* rv_coll_allreduce, rv_coll_allgather */
    bool warned_inline;      /* reported an inline handler waiting */
};

struct rv_context {
    rv_config_t *config;          /* the context's own copy */
    const rv_core_config_t *core; /* its core keys, read on hot paths */
    rv_bootstrap_t *bs;
    void *plugin_handle;
    const rv_transport_ops_t *ops;
    rv_transport_t *tp;
    rv_transport_caps_t caps;
    bool caps_valid; /* caps queried for the running job */

    rv_handler_entry_t *handlers; /* sorted by id */
    size_t nhandlers, handlers_cap;
    rv_handler_id_t barrier_id, barrier_release_id;
    rv_handler_id_t coll_up_id, coll_down_id;

    /* rv_job_run state */
    rv_worker_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage; /* job start/stop hand-over, under lock */
    int nready;
    void **addrs; /* packed addresses of local workers */
    size_t *addr_lens;
    uint8_t *all_addrs; /* job-wide table after allgather */
    size_t addr_slot;   /* bytes per worker in all_addrs */
    int *host_of;       /* per rank: its host (rv_rank_host), from the
                           first rv_job_run on */
    int nhosts;
    int ndone;
    atomic_int stage_now; /* = stage, read by polling workers */
    rv_worker_fn job_fn;
    void *job_arg;

    rv_layer_slot_t layers[RV_LAYER_MAX]; /* in install order */
    int nlayers;
};

/* The AM dispatch callback given to the transport. */
rv_status_t rv__msg_recv(void *arg, const rv_am_rx_t *rx, void *desc);

/* Loads the transport plugin named in the config; errors are logged. */
rv_status_t rv__plugin_load(const char *name, void **handle_p,
                            const rv_transport_ops_t **ops_p);

/* What core does for the transport plugin (rv_services.c), given to its
 * init in rv_transport_params_t. */
extern const rv_transport_services_t rv__transport_services;

/* As rv__plugin_load, with the error written to @p why instead of the log:
 * RV_ERR_NOT_FOUND when there is no librivet-NAME.so (or it does not
 * load), RV_ERR_UNSUPPORTED for another ABI, RV_ERR_CONFIG for a name that
 * is not a plugin name. The plugin stays loaded. */
rv_status_t rv__plugin_find(const char *name, void **handle_p,
                            const rv_transport_ops_t **ops_p, char *why,
                            size_t whylen);

/* Writes "ucx, verbs" (the plugins in the search folders) or "none". */
void rv__plugin_names(char *buf, size_t len);

/* Calls @p fn with the name of every plugin in the search folders, in
 * alphabetical order. */
void rv__plugin_foreach(void (*fn)(const char *name, void *arg), void *arg);

/* Registers the core's own handlers (barrier). */
rv_status_t rv__msg_init(rv_context_t *ctx);

/* Prints a backtrace when rank @p rank crashes (rv_crash.c); signals that
 * already have a handler keep it. */
void rv__crash_handlers_install(int rank);

/* rv_limits.c: raises the open-file limit to its hard limit where a job
 * of @p size processes x @p threads workers could run out; an error
 * (logged, naming the limit and how to raise it) when it still would. */
rv_status_t rv__limits_check(int size, int threads);
/* rv_coll.c: registers the collectives' handlers; frees a worker's
 * collective state. */
rv_status_t rv__coll_init(rv_context_t *ctx);
void rv__coll_fini(rv_worker_t *w);

/* Runs every started layer's progress hook, in install order; inline,
 * since every rv_progress takes it. */
static inline unsigned rv__layers_progress(rv_worker_t *w)
{
    const rv_context_t *ctx = w->ctx;
    unsigned n = 0;
    for (int i = 0; i < ctx->nlayers; i++)
        if (ctx->layers[i].ops->progress != NULL && w->view.layer[i] != NULL)
            n += ctx->layers[i].ops->progress(w);
    return n;
}

/* Runs the layers' hooks of one stage of rv_job_run (rv_layer.h). */
rv_status_t rv__layers_start(rv_worker_t *w);
void rv__layers_quiesce(rv_worker_t *w);
void rv__layers_drain(rv_worker_t *w);
void rv__layers_stop(rv_worker_t *w);
void rv__layers_fini(rv_context_t *ctx);

/* Yields the CPU after many consecutive empty polls (two busy pollers on
 * two cores must not starve each other). */
void rv__worker_idle(rv_worker_t *w, unsigned events);

#endif
