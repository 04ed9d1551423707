/*
 * A rank outlives no launcher: the watch on rivetrun's connection.
 *
 * rivetrun starts every rank in a process group of its own and asks the
 * kernel to kill the process it forked when rivetrun dies
 * (PR_SET_PDEATHSIG). That reaches only that process: a rank started
 * through a wrapper script (rivetrun -n 2 ./run.sh, where run.sh starts
 * the program without exec) is the wrapper's child, and a SIGKILL of
 * rivetrun left it running, busy-polling, for ever. So every rank watches
 * its connection to rivetrun from a thread of its own, which sleeps in
 * poll() and costs nothing while the job runs.
 *
 * When rivetrun closes the connection without this rank having said
 * goodbye (FINI), one of two things happened:
 *   - rivetrun is ending the job (a rank failed, a signal, --timeout): it
 *     signals every rank's group itself, so the watch only waits; should
 *     the rank still be alive after WATCH_GRACE_MS (more than rivetrun's
 *     grace before SIGKILL), it ends it anyway;
 *   - rivetrun is gone (killed): the watch says so, removes what rivetrun
 *     left in its directory (the socket and pid file; the next rivetrun
 *     of the user would sweep them otherwise) and the job's
 *     shared-memory directory (rv_launch_shm.c), and kills the rank's process
 *     group, the wrapper with it, as MPI launchers' daemons do when their
 *     parent vanishes. A rank that is not in the group rivetrun made (a
 *     wrapper that made its own) is killed alone.
 *
 * While the job runs, the watch also sends rivetrun a BEAT every
 * RV_LAUNCH_BEAT_MS (rv_launch_proto.h): the beats come from this thread,
 * not from the program's, so a rank that computes for minutes without a
 * call into rivet is not taken for dead, while one whose runtime is gone
 * with its pid still alive (its image replaced, as a node that loses its
 * process without losing its sockets) is.
 *
 * The watch polls a dup() of the connection, so that closing the
 * bootstrap's descriptor on an error does not pull it from under the
 * thread, and rv__launcher_watch_stop() ends it before the rank says
 * FINI, after which rivetrun closes the connection as a matter of course.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "rv_bootstrap.h"
#include "rv_launch_proto.h"

/* How long a rank waits for a live rivetrun that closed its connection to
 * end it, before it ends itself: more than rivetrun's longest grace before
 * SIGKILL (3 s after a signal). */
#define WATCH_GRACE_MS 10000
/* How often a live rivetrun is looked at again meanwhile. */
#define WATCH_RECHECK_MS 100
/* Room for "/proc/PID/stat" and its first fields. */
#define PROC_PATH_MAX 64
#define PROC_STAT_HEAD 512

struct rv_launcher_watch {
    pthread_t thread;
    int fd;      /* a dup() of the connection to rivetrun */
    int stop_fd; /* eventfd: rv__launcher_watch_stop() */
    int rank;
    pid_t launcher; /* rivetrun's pid (RIVET_LAUNCHER_PID), 0 if unknown */
    pid_t pgid;     /* the group rivetrun made (RIVET_JOB_PGID), 0 if none */
    pthread_mutex_t *send_lock; /* the bootstrap's frames are sent under it */
    char sock_path[PATH_MAX];
};

/* Reads a positive pid from environment variable @p name; 0 if absent. */
static pid_t env_pid(const char *name)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return 0;
    errno = 0;
    v = strtol(s, &end, 10);
    return errno == 0 && *end == '\0' && v > 0 && v <= INT_MAX ? (pid_t)v : 0;
}

/* Is process @p pid alive? A zombie is not: rivetrun killed by SIGKILL
 * stays one until its parent reaps it. */
static int pid_alive(pid_t pid)
{
    char path[PROC_PATH_MAX], buf[PROC_STAT_HEAD];
    FILE *f;
    int alive = 1;

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (f == NULL)
        return 0;
    if (fgets(buf, sizeof(buf), f) != NULL) {
        const char *p = strrchr(buf, ')'); /* after the command's name */
        alive = p == NULL || (p[1] == ' ' && p[2] != 'Z' && p[2] != 'X');
    }
    fclose(f);
    return alive;
}

/* Waits up to @p ms for rv__launcher_watch_stop(); returns 1 if asked. */
static int stop_asked(const rv_launcher_watch_t *w, int ms)
{
    struct pollfd p = {.fd = w->stop_fd, .events = POLLIN};
    int n;

    while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    return n > 0;
}

/* Removes the socket rivetrun listened on, its pid file and its
 * directory, when that is one rivetrun made for a job (rivetrun.XXXXXX);
 * each only if still there: another rank may have been first. */
static void remove_launcher_dir(const rv_launcher_watch_t *w)
{
    char dir[PATH_MAX], pid_file[PATH_MAX + sizeof("/pid")];
    const char *base;
    char *slash;

    snprintf(dir, sizeof(dir), "%s", w->sock_path);
    slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return;
    *slash = '\0';
    base = strrchr(dir, '/');
    base = base != NULL ? base + 1 : dir;
    if (strncmp(base, RV_LAUNCH_DIR_PREFIX, strlen(RV_LAUNCH_DIR_PREFIX)))
        return;
    snprintf(pid_file, sizeof(pid_file), "%s/pid", dir);
    (void)unlink(w->sock_path);
    (void)unlink(pid_file);
    (void)rmdir(dir);
    rv__launch_shm_dir_remove(base);
}

/* Ends this rank, and its process group when it is the one rivetrun
 * made. */
static void end_rank(const rv_launcher_watch_t *w)
{
    if (w->pgid > 0 && getpgrp() == w->pgid)
        kill(-w->pgid, SIGKILL);
    kill(getpid(), SIGKILL);
}

static void *watch_main(void *arg)
{
    rv_launcher_watch_t *w = arg;
    struct pollfd p[2] = {
        {.fd = w->fd, .events = POLLRDHUP},
        {.fd = w->stop_fd, .events = POLLIN},
    };
    sigset_t all;

    /* rivetrun's pipes may be gone: a write to them must fail, not kill
     * the process before the group is ended. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        int n = poll(p, 2, RV_LAUNCH_BEAT_MS);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (n == 0) {
            /* A failed beat is seen as the connection's end by the next
             * poll(). */
            pthread_mutex_lock(w->send_lock);
            (void)rv__launch_send(w->fd, RV_LAUNCH_BEAT, (uint32_t)w->rank,
                                  NULL, 0);
            pthread_mutex_unlock(w->send_lock);
            continue;
        }
        if (p[1].revents != 0)
            return NULL;
        if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
            break;
    }

    /* rivetrun closed the connection and we did not say FINI. */
    for (int waited = 0; pid_alive(w->launcher); waited += WATCH_RECHECK_MS) {
        if (waited >= WATCH_GRACE_MS) {
            rv_error("rivetrun (pid %d) closed its connection to rank %d "
                     "%d s ago and has not ended it; ending it now",
                     (int)w->launcher, w->rank, WATCH_GRACE_MS / 1000);
            end_rank(w);
        }
        if (stop_asked(w, WATCH_RECHECK_MS))
            return NULL;
    }
    rv_error("rivetrun (pid %d) is gone; ending rank %d%s", (int)w->launcher,
             w->rank,
             w->pgid > 0 && getpgrp() == w->pgid
                 ? " and the processes of its group"
                 : "");
    remove_launcher_dir(w);
    end_rank(w);
    return NULL;
}

rv_status_t rv__launcher_watch_start(int fd, int rank, const char *sock_path,
                                     pthread_mutex_t *send_lock,
                                     rv_launcher_watch_t **w_p)
{
    rv_launcher_watch_t *w;
    int rc;

    pid_t launcher = env_pid(RV_LAUNCH_PID_ENV);

    *w_p = NULL;
    if (launcher == 0)
        return RV_OK; /* not started by rivetrun: nothing to watch */
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return RV_ERR_NO_MEMORY;
    w->rank = rank;
    w->launcher = launcher;
    w->pgid = env_pid(RV_LAUNCH_PGID_ENV);
    w->send_lock = send_lock;
    snprintf(w->sock_path, sizeof(w->sock_path), "%s", sock_path);
    w->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    w->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (w->fd < 0 || w->stop_fd < 0) {
        rv_error("bootstrap: cannot watch the connection to rivetrun: %m");
        goto err;
    }
    rc = pthread_create(&w->thread, NULL, watch_main, w);
    if (rc != 0) {
        rv_error("bootstrap: cannot start the thread that watches rivetrun: "
                 "%s",
                 strerror(rc));
        goto err;
    }
    *w_p = w;
    return RV_OK;

err:
    if (w->fd >= 0)
        close(w->fd);
    if (w->stop_fd >= 0)
        close(w->stop_fd);
    free(w);
    return RV_ERR_BOOTSTRAP;
}

void rv__launcher_watch_stop(rv_launcher_watch_t *w)
{
    uint64_t one = 1;

    if (w == NULL)
        return;
    if (write(w->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        rv_warn("bootstrap: cannot stop the watch on rivetrun: %m");
    pthread_join(w->thread, NULL);
    close(w->fd);
    close(w->stop_fd);
    free(w);
}
