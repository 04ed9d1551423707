/*
 * rv-epoch-bench: the epoch manager's microbenchmarks of Dewan et al.
 * (Figs. 2-5), beside liburcu in the same run.
 *
 *   rivetrun -n P -c configs/pingpong-shm.yaml rv-epoch-bench
 *            [-m read|delete] [-r every|1024|end] [-p REMOTE_PCT]
 *            [-n ITERS] [--csv]
 *
 * Every worker of the job runs ITERS iterations of
 *     pin; [defer_delete(obj)]; unpin; [try_reclaim (every / 1024)]
 * and, for -r end, worker 0 calls rv_epoch_clear after everyone is done
 * (inside the timed region: Fig. 4 counts the final reclamation). Objects
 * are 16-byte records in an arena of each process; REMOTE_PCT percent of
 * those a worker deletes belong to another process (chosen at random),
 * so their deletion travels in the reclaimer's bulk scatter. The free
 * function counts (the arena is not a heap), so the figure is the epoch
 * machinery's, not malloc's. -m read is Fig. 5 (pin/unpin only).
 *
 * Baseline: liburcu (urcu-memb), the standard userspace RCU, in one
 * process with as many threads as the job has workers (the same cores):
 * rcu_read_lock/unlock for pin/unpin and call_rcu for defer_delete (its
 * reclamation runs in its own thread; rcu_barrier at the end is timed).
 * It has no cross-process mode: with several processes the ratio compares
 * the job's aggregate rate with shared-memory reclamation on as many
 * threads.
 *
 * Prints (rank 0) ops/s of both and rivet/urcu; with --csv, one row
 *   workload,reclaim,remote_pct,procs,threads,ops,rivet_mops,urcu_mops,ratio
 */
#include <getopt.h>
#include <sched.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu/urcu-memb.h>

#include "bench_util.h"
#include "rv_epoch.h"

typedef struct {
    uint64_t word[2];
} obj_t;

static struct {
    int del;                 /* -m delete */
    long every;              /* try_reclaim period; 0: only at the end */
    int remote_pct;
    long iters;
    int csv;
} opt = {.del = 1, .every = 1024, .remote_pct = 0, .iters = 200000};

static rv_context_t *ctx;
static obj_t *arena;                  /* this process's objects */
static uint64_t *bases;               /* every process's arena */
static _Atomic uint64_t freed;
static double job_s;

static void count_free(rv_worker_t *w, void *obj, void *arg)
{
    (void)w;
    (void)arg;
    ((obj_t *)obj)->word[0]++; /* touch it, as a free would */
    atomic_fetch_add_explicit(&freed, 1, memory_order_relaxed);
}

static int body(rv_worker_t *w, void *arg)
{
    rv_epoch_manager_t *em;
    int np = rv_size(ctx), me = rv_rank(ctx), local = rv_worker_local(w);
    unsigned seed = rv_worker_tid(w) * 2654435761u + 7;
    (void)arg;
    if (rv_epoch_manager_create(w, count_free, NULL, &em) != RV_OK)
        return 1;
    rv_epoch_token_t *tok = rv_epoch_register(em);
    rv_barrier(w);
    double t0 = bench_now_s();
    for (long i = 0; i < opt.iters; i++) {
        rv_epoch_pin(tok);
        if (opt.del) {
            int r = me;
            if (np > 1 && (int)(rand_r(&seed) % 100) < opt.remote_pct)
                r = (me + 1 + (int)(rand_r(&seed) % (unsigned)(np - 1))) % np;
            uint64_t idx = (uint64_t)local * (uint64_t)opt.iters +
                           (uint64_t)i;
            rv_epoch_defer_delete(tok,
                                  rv_gptr_make((uint32_t)r,
                                               (void *)(uintptr_t)(
                                                   bases[r] +
                                                   idx * sizeof(obj_t))));
        }
        rv_epoch_unpin(tok);
        if (opt.every > 0 && (i + 1) % opt.every == 0)
            rv_epoch_try_reclaim(w, em, NULL);
    }
    rv_epoch_deregister(tok);
    rv_barrier(w);
    if (rv_worker_tid(w) == 0 && rv_epoch_clear(w, em) != RV_OK)
        return 1;
    rv_barrier(w);
    if (rv_worker_tid(w) == 0)
        job_s = bench_now_s() - t0;
    return rv_epoch_manager_destroy(w, em) == RV_OK ? 0 : 1;
}

/* ---------------------------------------------------------------------- */
/* liburcu, same loop                                                      */

static pthread_barrier_t urcu_bar;

static void urcu_free(struct rcu_head *h)
{
    ((obj_t *)(void *)h)->word[0]++;
    atomic_fetch_add_explicit(&freed, 1, memory_order_relaxed);
}

static void *urcu_thread(void *arg)
{
    obj_t *mine = arg;
    urcu_memb_register_thread();
    pthread_barrier_wait(&urcu_bar);
    for (long i = 0; i < opt.iters; i++) {
        urcu_memb_read_lock();
        if (opt.del)
            urcu_memb_call_rcu((struct rcu_head *)(void *)&mine[i],
                               urcu_free);
        urcu_memb_read_unlock();
    }
    urcu_memb_unregister_thread();
    pthread_barrier_wait(&urcu_bar);
    return NULL;
}

static double run_urcu(int threads, obj_t *objs)
{
    pthread_t t[64];
    /* rank 0's threads are confined to its workers' cores: the baseline
     * gets every core the job had, one thread pinned per core, as the
     * job's workers were */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pthread_barrier_init(&urcu_bar, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        pthread_attr_t attr;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((int)(i % (ncpu > 0 ? ncpu : 1)), &set);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
        pthread_create(&t[i], &attr, urcu_thread,
                       objs + (size_t)i * (size_t)opt.iters);
        pthread_attr_destroy(&attr);
    }
    pthread_barrier_wait(&urcu_bar);
    double t0 = bench_now_s();
    pthread_barrier_wait(&urcu_bar);
    urcu_memb_barrier(); /* every call_rcu callback has run */
    double s = bench_now_s() - t0;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&urcu_bar);
    return s;
}

/* ---------------------------------------------------------------------- */

static int options(int argc, char **argv)
{
    static const struct option longopts[] = {{"csv", no_argument, NULL, 'c'},
                                             {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "m:r:p:n:", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (strcmp(optarg, "read") && strcmp(optarg, "delete"))
                goto usage;
            opt.del = strcmp(optarg, "delete") == 0;
            break;
        case 'r':
            opt.every = strcmp(optarg, "every") == 0 ? 1
                        : strcmp(optarg, "end") == 0 ? 0
                                                     : atol(optarg);
            if (opt.every < 0 || (opt.every == 0 && strcmp(optarg, "end")))
                goto usage;
            break;
        case 'p':
            opt.remote_pct = atoi(optarg);
            if (opt.remote_pct < 0 || opt.remote_pct > 100)
                goto usage;
            break;
        case 'n':
            opt.iters = atol(optarg);
            if (opt.iters <= 0)
                goto usage;
            break;
        case 'c':
            opt.csv = 1;
            break;
        default:
            goto usage;
        }
    }
    return 0;
usage:
    fprintf(stderr, "usage: rv-epoch-bench [-m read|delete] "
                    "[-r every|N|end] [-p REMOTE_PCT] [-n ITERS] [--csv]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = options(argc, argv);
    if (rc != 0 || rv_rma_init(ctx) != RV_OK) {
        rv_finalize(ctx);
        return rc ? rc : 1;
    }
    int np = rv_size(ctx), threads = rv_threads(ctx);
    size_t nobj = (size_t)threads * (size_t)opt.iters;
    arena = calloc(nobj, sizeof(obj_t));
    bases = calloc((size_t)np, sizeof(uint64_t));
    uint64_t mine = (uint64_t)(uintptr_t)arena;
    if (arena == NULL || bases == NULL ||
        rv_bootstrap_allgather(ctx, bases, &mine, sizeof(mine)) != RV_OK) {
        fprintf(stderr, "rv-epoch-bench: no arena\n");
        return 1;
    }
    const char *reclaim = !opt.del        ? "none"
                          : opt.every == 0 ? "end"
                          : opt.every == 1 ? "every"
                                           : NULL;
    char rbuf[32];
    if (reclaim == NULL) {
        snprintf(rbuf, sizeof(rbuf), "%ld", opt.every);
        reclaim = rbuf;
    }
    atomic_store(&freed, 0);
    rc = rv_job_run(ctx, body, NULL) == RV_OK ? 0 : 1;
    uint64_t freed_job = atomic_load(&freed);
    if (rc == 0 && opt.del) {
        /* every deferred object freed exactly once, job-wide */
        uint64_t *all = calloc((size_t)np, sizeof(uint64_t));
        rv_bootstrap_allgather(ctx, all, &freed_job, sizeof(freed_job));
        uint64_t sum = 0;
        for (int r = 0; r < np; r++)
            sum += all[r];
        free(all);
        if (sum != (uint64_t)np * nobj) {
            fprintf(stderr, "rv-epoch-bench: %llu objects freed, %llu "
                            "deferred\n", (unsigned long long)sum,
                    (unsigned long long)np * nobj);
            rc = 1;
        }
    }
    if (rc == 0 && rv_rank(ctx) == 0) {
        double ops = (double)np * (double)nobj;
        double rivet = ops / job_s / 1e6;
        int nt = np * threads > 64 ? 64 : np * threads;
        size_t nu = (size_t)nt * (size_t)opt.iters;
        obj_t *objs = calloc(nu, sizeof(obj_t));
        atomic_store(&freed, 0);
        double urcu = objs ? (double)nu / run_urcu(nt, objs) / 1e6 : 0;
        if (objs == NULL || (opt.del && atomic_load(&freed) != nu)) {
            fprintf(stderr, "rv-epoch-bench: urcu freed %llu of %zu\n",
                    (unsigned long long)atomic_load(&freed), nu);
            rc = 1;
        }
        free(objs);
        const char *wl = opt.del ? "delete" : "read";
        if (opt.csv)
            printf("%s,%s,%d,%d,%d,%.0f,%.3f,%.3f,%.3f\n", wl, reclaim,
                   opt.remote_pct, np, threads, ops, rivet, urcu,
                   rivet / urcu);
        else
            printf("%s, reclaim %s, %d%% remote, %d x %d workers: rivet "
                   "%.2f Mops/s, urcu (1 x %d) %.2f Mops/s, ratio %.2f\n",
                   wl, reclaim, opt.remote_pct, np, threads, rivet, nt,
                   urcu, rivet / urcu);
    }
    rv_bootstrap_barrier(ctx);
    free(arena);
    free(bases);
    rv_finalize(ctx);
    return rc;
}
