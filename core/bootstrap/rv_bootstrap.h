/*
 * Bootstrap providers (internal to core/).
 *
 * A provider gives the process its rank and the job's size, and the
 * collectives the core needs to wire the job up: allgather, barrier and
 * abort. Two providers exist:
 *   - "rivetrun": the built-in launcher. rivetrun listens on a Unix-domain
 *     socket and exports RIVET_BOOTSTRAP=unix:<path>, RIVET_RANK and
 *     RIVET_SIZE to every process it forks (see rv_launch_proto.h).
 *   - "pmix": jobs started by mpirun/prterun/srun (PMIX_RANK/PMIX_NAMESPACE
 *     in the environment).
 * Without either, the process is a job of one ("singleton").
 */
#ifndef RIVET_RV_BOOTSTRAP_H
#define RIVET_RV_BOOTSTRAP_H

#include <pthread.h>
#include <stddef.h>

#include "rv_status.h"

typedef struct rv_bootstrap rv_bootstrap_t;

typedef struct rv_bootstrap_ops {
    const char *name;
    /** Equal-sized contributions: out receives size * len bytes. */
    rv_status_t (*allgather)(rv_bootstrap_t *bs, const void *in, void *out,
                             size_t len);
    rv_status_t (*barrier)(rv_bootstrap_t *bs);
    /** Ends the whole job; does not return. */
    void (*abort)(rv_bootstrap_t *bs, int code, const char *why);
    void (*fini)(rv_bootstrap_t *bs);
} rv_bootstrap_ops_t;

struct rv_bootstrap {
    const rv_bootstrap_ops_t *ops;
    int rank;
    int size;
    int local_rank; /* rank among the processes of this node */
    int local_size; /* processes of the job on this node */
};

/**
 * Picks the provider from the environment and joins the job.
 * @param [out] bs_p set only on success; free with bs->ops->fini(bs).
 */
rv_status_t rv__bootstrap_create(rv_bootstrap_t **bs_p);

/* Providers, called by rv__bootstrap_create. */
rv_status_t rv__bootstrap_rivetrun_create(const char *addr,
                                          rv_bootstrap_t **bs_p);
rv_status_t rv__bootstrap_pmix_create(rv_bootstrap_t **bs_p);
rv_status_t rv__bootstrap_singleton_create(rv_bootstrap_t **bs_p);

/* The watch on rivetrun's connection @p fd (rv_bootstrap_watch.c): a
 * thread that ends rank @p rank when rivetrun is gone, and sends rivetrun
 * a BEAT every RV_LAUNCH_BEAT_MS meanwhile, holding @p send_lock (the
 * lock every frame this process sends on the connection is written
 * under). Stop it before saying FINI; stop frees it. */
typedef struct rv_launcher_watch rv_launcher_watch_t;
rv_status_t rv__launcher_watch_start(int fd, int rank, const char *sock_path,
                                     pthread_mutex_t *send_lock,
                                     rv_launcher_watch_t **w_p);
void rv__launcher_watch_stop(rv_launcher_watch_t *w);

#endif
