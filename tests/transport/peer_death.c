/*
 * A peer that vanishes without a goodbye ends the job, naming its rank;
 * the ranks sending to it do not hang.
 *
 *   rivetrun -n 2 -c JOB.yaml peer_death [SECONDS]
 *
 * After a barrier, rank 1 replaces its process image with `sleep`: the
 * kernel tears down its queue pairs and memory, as when a node dies, but
 * its pid lives on, with its connection to the launcher, so only the
 * transport can notice. Every worker of rank 0 keeps sending to rank 1's
 * last worker, a message a millisecond, until the transport finds the peer
 * gone and the core ends the job ("rank 0 aborted: worker 1 (rank 1)
 * failed: ..."). If that does not happen within SECONDS (default 120),
 * rank 0 says so and exits 3.
 *
 * Run through peer_death.sh, which checks the messages, the exit status
 * and that no process of the job survives: over the verbs configurations
 * (where there is an RDMA device: make check-verbs runs it in a Soft-RoCE
 * guest), where the transport names the peer, and over UCX on shm and
 * tcp, where rivetrun does once rank 1's heartbeats stop.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rivet.h"

/* The program rank 1 becomes; its argument marks it for the survivor
 * check. */
#define AFTERLIFE_ARG "299.25"

static rv_handler_id_t h_ping;
static double limit_s = 120;

static rv_status_t on_ping(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)msg;
    (void)arg;
    return RV_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Keeps sockets and pipes (the launcher's connection, stdout, stderr)
 * across exec and closes everything else, the RDMA device's files among
 * them (their last reference goes with the process image's mappings). */
static void keep_launcher_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[64], target[256];
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (fd <= 2 || strncmp(target, "socket:", 7) == 0 ||
            strncmp(target, "pipe:", 5) == 0)
            fcntl(fd, F_SETFD, 0);
        else
            close(fd);
    }
    closedir(d);
}

static int body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = arg;
    uint64_t seq = 0;

    if (rv_barrier(w) != RV_OK)
        return 1;
    if (rv_rank(ctx) == 1) {
        if (rv_worker_local(w) != 0)
            for (;;) /* until the exec of worker 0 ends this thread */
                pause();
        printf("peer_death: rank 1 (pid %d) leaves without a goodbye\n",
               (int)getpid());
        fflush(stdout);
        keep_launcher_fds();
        execlp("sleep", "sleep", AFTERLIFE_ARG, (char *)NULL);
        perror("peer_death: exec sleep");
        return 2;
    }
    /* with threads, the last worker of rank 1: over shared QPs
     * (qp_sharing: process), another thread's than worker 0's */
    rv_tid_t dest = rv_tid_make(ctx, 1, rv_threads(ctx) - 1);
    printf("peer_death: worker %u sends to worker %u until it is found "
           "dead\n", (unsigned)rv_worker_tid(w), (unsigned)dest);
    fflush(stdout);
    double t0 = now_s();
    while (now_s() - t0 < limit_s) {
        rv_status_t st = rv_send(w, dest, h_ping, &seq, sizeof(seq), NULL);
        seq++;
        if (st != RV_OK && st != RV_ERR_AGAIN) {
            /* the transport said so without ending the job */
            fprintf(stderr, "peer_death: send %llu: %s, but the job did "
                    "not end\n", (unsigned long long)seq, rv_status_str(st));
            fflush(stderr);
            _exit(3);
        }
        for (int i = 0; i < 10; i++)
            rv_progress(w);
        usleep(1000);
    }
    fprintf(stderr, "peer_death: worker %u was not found dead in %.0f s "
            "(%llu messages sent)\n", (unsigned)dest, limit_s,
            (unsigned long long)seq);
    fflush(stderr);
    _exit(3); /* not back into the job's end: rank 1 would never meet us */
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        limit_s = atof(argv[1]);
    if (rv_size(ctx) != 2) {
        fprintf(stderr, "peer_death: run with 2 processes\n");
        rv_finalize(ctx);
        return 2;
    }
    if (rv_handler_register(ctx, "peer_death.ping", on_ping, NULL, 0,
                            &h_ping) != RV_OK)
        return 1;
    int rc = rv_job_run(ctx, body, ctx) == RV_OK ? 0 : 1;
    rv_finalize(ctx);
    return rc;
}
