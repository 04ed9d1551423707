/*
 * Every way a rank can die, one per run (after GASNet-EX's testexit).
 *
 *   rivetrun -n 2 -c JOB.yaml test_faults SCENARIO
 *
 * Every worker of every rank calls every worker of the victim, rank 1 (of
 * the last rank with "return-early": rank 0 is the one that leaves), in
 * a loop: blocking rv_call_return calls to it, asynchronous calls to
 * every worker, and an rv_quiesce every QUIESCE_EVERY rounds, so that
 * when the victim dies the others are blocked in a reply, in a
 * termination detection or in the transport. Once every worker made
 * WARMUP_ROUNDS rounds, worker 0 of the victim faults:
 *
 *   exit-collective  no fault: every rank quiesces and finalizes (exit 0)
 *   return-early     rank 0 returns from main without rv_finalize, before
 *                    the job starts; the others wait for it there
 *   exit-mid-traffic exit(3) from a worker thread between two calls
 *   exit-in-handler  exit(4) from inside a call handler
 *   exit-thread      exit(5) from a thread of the program's own, not a
 *                    worker, while the workers call
 *   abort            abort()
 *   segv             a store through a null pointer
 *   sigbus           a load past the end of a file mapping
 *   sigfpe           an integer division by zero
 *   sigkill-rank     SIGKILL to itself
 *   sigkill-in-segment
 *                    SIGKILL to itself while it makes a shared-memory
 *                    segment as UCX's posix transport does (a file in
 *                    UCX_POSIX_DIR, else /dev/shm, filled before it is
 *                    unlinked): the file must not outlive the job
 *   sigkill-in-sysv  SIGKILL to itself between making a private SysV
 *                    segment and marking it removed, as a rank killed
 *                    inside UCX's sysv allocation is: the segment must
 *                    not outlive the job
 *   stall            no fault, but the victim's workers stop progressing
 *                    for STALL_S seconds while the others wait on them;
 *                    the job must finish (exit 0): no false death
 *   wait             no fault: call for ever, for faults.sh to signal or
 *                    kill rivetrun (sigint-, sigterm-, sigkill-rivetrun)
 *
 * Each rank prints "faults: rank R pid P pgid G" at the start and the
 * victim "faults: rank R faults at T" (CLOCK_REALTIME, seconds) just
 * before it faults, for faults.sh, which checks how the job ended.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <time.h>
#include <unistd.h>

#include "rivet.h"
#include "rv_am.h"

#define WARMUP_ROUNDS 200
#define QUIESCE_EVERY 50
#define STALL_S 10
/* The call of the victim's handler that exits (exit-in-handler). */
#define HANDLER_EXIT_AT 100

static const char *scenario;
static rv_handler_id_t h_work;
static rv_rank_t victim = 1;
static atomic_uint warm_workers;
static atomic_ulong handled;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static bool is(const char *name)
{
    return strcmp(scenario, name) == 0;
}

static void say_fault(rv_rank_t r)
{
    printf("faults: rank %d faults at %.3f (%s)\n", (int)r, now_s(), scenario);
    fflush(stdout);
}

static rv_status_t on_work(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rv_context_t *ctx = arg;
    unsigned long n = atomic_fetch_add(&handled, 1) + 1;
    (void)w;
    if (is("exit-in-handler") && rv_rank(ctx) == victim &&
        n == HANDLER_EXIT_AT) {
        say_fault(victim);
        exit(4);
    }
    if (call->ret != NULL && call->ret_len >= sizeof(n)) {
        memcpy(call->ret, &n, sizeof(n));
        call->ret_len = sizeof(n);
    }
    return RV_OK;
}

/* SIGFPE from a real division, which the undefined-behaviour sanitizer
 * would otherwise report and step over. Neither operand is a constant:
 * GCC turns 1 / b into a comparison, which does not trap. */
__attribute__((no_sanitize("undefined"))) static int divide(int a, int b)
{
    return a / b;
}

/* SIGSEGV from a store through a null pointer, out of the
 * undefined-behaviour sanitizer's sight as divide() is. */
__attribute__((no_sanitize("undefined"))) static void poke_null(void)
{
    volatile int *volatile p = NULL; /* unknown to the compiler */
    *p = 1;
}

/* Makes and attaches a private SysV segment as UCX's sysv transport does
 * (ucs_sysv_alloc), and dies of SIGKILL before marking it removed. */
static void die_in_sysv(void)
{
    int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    if (id < 0 || shmat(id, NULL, 0) == (void *)-1) {
        fprintf(stderr, "faults: cannot make a SysV segment: %s\n",
                strerror(errno));
        _exit(9);
    }
    kill(getpid(), SIGKILL);
}

/* Makes a segment file where UCX's posix transport would, and dies of
 * SIGKILL between filling it and unlinking it, as a rank killed inside
 * UCX's uct_posix_mem_alloc does. */
static void die_in_segment(void)
{
    const char *dir = getenv("UCX_POSIX_DIR");
    char path[4096];
    char page[4096] = {0};
    int fd;

    snprintf(path, sizeof(path), "%s/ucx_shm_posix_faults_%d",
             dir != NULL ? dir : "/dev/shm", (int)getpid());
    fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, page, sizeof(page)) != (ssize_t)sizeof(page)) {
        fprintf(stderr, "faults: cannot make %s\n", path);
        _exit(9);
    }
    kill(getpid(), SIGKILL);
}

/* The victim's fault, from its worker 0. */
static void fault(void)
{
    if (is("wait") || is("exit-collective"))
        return;
    say_fault(victim);
    if (is("exit-mid-traffic")) {
        exit(3);
    } else if (is("abort")) {
        abort();
    } else if (is("segv")) {
        poke_null();
    } else if (is("sigbus")) {
        char path[] = "/tmp/rivet-faults-XXXXXX";
        int fd = mkstemp(path);
        unlink(path);
        volatile char *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED)
            (void)p[0]; /* the file is empty: SIGBUS */
    } else if (is("sigfpe")) {
        volatile int zero = 0;
        printf("faults: %d\n", divide((int)getpid(), zero));
    } else if (is("sigkill-rank")) {
        kill(getpid(), SIGKILL);
    } else if (is("sigkill-in-segment")) {
        die_in_segment();
    } else if (is("sigkill-in-sysv")) {
        die_in_sysv();
    } else if (is("stall")) {
        sleep(STALL_S); /* no progress at all meanwhile */
        return;
    } else {
        return;
    }
    fprintf(stderr, "faults: rank %d survived its fault (%s)\n", (int)victim,
            scenario);
    _exit(9);
}

static void *exit_thread(void *arg)
{
    (void)arg;
    while (atomic_load(&warm_workers) == 0)
        usleep(1000);
    say_fault(victim);
    exit(5);
}

/* One round: a blocking call with a result to one of the victim's
 * workers, an asynchronous one to every other worker. */
static rv_status_t round_of_calls(rv_worker_t *w, rv_context_t *ctx, uint64_t i)
{
    uint32_t nw = rv_nworkers(ctx);
    rv_tid_t to =
        rv_tid_make(ctx, victim, (int)(i % (uint64_t)rv_threads(ctx)));
    unsigned long ret;
    rv_status_t st = rv_call_return(w, to, h_work, &i, sizeof(i), &ret,
                                    sizeof(ret), NULL, 0);
    for (rv_tid_t d = 0; st == RV_OK && d < nw; d++)
        st = rv_call(w, d, h_work, &i, sizeof(i), NULL, 0);
    return st;
}

static int body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = arg;
    bool me_victim = rv_rank(ctx) == victim && rv_worker_local(w) == 0;
    bool forever = is("wait");
    rv_status_t st = RV_OK;
    uint64_t i;

    if (rv_barrier(w) != RV_OK)
        return 1;
    for (i = 0; st == RV_OK && (forever || i < 2 * WARMUP_ROUNDS); i++) {
        if (i == WARMUP_ROUNDS) {
            atomic_fetch_add(&warm_workers, 1);
            if (me_victim)
                fault();
        }
        st = round_of_calls(w, ctx, i);
        if (st == RV_OK && (i + 1) % QUIESCE_EVERY == 0)
            st = rv_quiesce(w);
    }
    if (st == RV_OK)
        st = rv_quiesce(w);
    if (st != RV_OK) {
        fprintf(stderr, "faults: worker %u: %s after %llu rounds\n",
                (unsigned)rv_worker_tid(w), rv_status_str(st),
                (unsigned long long)i);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    pthread_t t;

    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc != 2 || rv_size(ctx) < 2) {
        fprintf(stderr, "usage: rivetrun -n 2 test_faults SCENARIO\n");
        return 2;
    }
    scenario = argv[1];
    if (is("return-early"))
        victim = 0;
    printf("faults: rank %d pid %d pgid %d\n", (int)rv_rank(ctx), (int)getpid(),
           (int)getpgrp());
    fflush(stdout);
    if (rv_am_register(ctx, "faults.work", on_work, ctx, &h_work) != RV_OK)
        return 1;
    if (is("exit-thread") && rv_rank(ctx) == victim &&
        pthread_create(&t, NULL, exit_thread, NULL) != 0)
        return 1;
    if (is("return-early") && rv_rank(ctx) == victim) {
        /* The others start the job, which waits for it. */
        say_fault(victim);
        return 0;
    }
    int rc = rv_job_run(ctx, body, ctx) == RV_OK ? 0 : 1;
    rv_finalize(ctx);
    return rc;
}
