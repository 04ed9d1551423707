/*
 * The processes of the job: rivetrun forks one child per rank. Each child
 * makes itself a process group leader, asks the kernel to kill it if
 * rivetrun dies (PR_SET_PDEATHSIG), binds itself per job.placement,
 * exports its rank, the bootstrap address and the job's token and execs the
 * program.
 *
 * Ending a job signals whole process groups, so that what a rank started
 * ends with it. A child that exits is reaped from the loop (SIGCHLD
 * arrives on its signalfd) and judged: a non-zero code or a signal fails
 * the job, and so does a clean exit while the others wait for it in a
 * collective.
 *
 * A rank in the job that stops its heartbeats (rv_launch_proto.h's BEAT)
 * while its process lives on, not stopped, ends the job (job.keepalive):
 * that is judged here too, from /proc.
 *
 * The bootstrap server lets a process join as rank r only if it is the
 * child forked for r or descends from it: a rank may be started through a
 * wrapper script that forks the real program rather than execs it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_internal.h"

/* The exit code of a child that could not exec the program, as a shell
 * reports a command it cannot run. */
#define EXIT_EXEC_FAILED 127
/* Room for an environment value: RIVET_BOOTSTRAP's, the longest. */
#define ENV_VALUE_MAX (sizeof(RV_LAUNCH_ADDR_PREFIX) + PATH_MAX)
/* Longer than any strerror() text. */
#define ERRNO_TEXT_MAX 256
/* After the job, what SIGKILL ends is reaped for a second at most. */
#define FINISH_REAP_TRIES 100
#define FINISH_REAP_PAUSE_NS 10000000L
/* What is read of /proc/PID/stat: room for a comm of 16 bytes and the 22
 * fields up to the start time, whatever their digits. */
#define PROC_STAT_MAX 1024
/* Fields of /proc/PID/stat between the parent's pid (4th) and the start
 * time (22nd). */
#define STAT_FIELDS_SKIPPED 17
/* Ancestors looked at, at most, to tie a process to a rank: more than any
 * chain of wrappers. */
#define ANCESTRY_MAX 64

/* Exports what a rank learns from its environment (docs/guide/running.md). */
static void child_export_env(const launcher_t *l, int r)
{
    char val[ENV_VALUE_MAX];

    snprintf(val, sizeof(val), "%d", r);
    setenv("RIVET_RANK", val, 1);
    setenv("RIVET_LOCAL_RANK", val, 1);
    snprintf(val, sizeof(val), "%d", l->size);
    setenv("RIVET_SIZE", val, 1);
    setenv("RIVET_LOCAL_SIZE", val, 1);
    snprintf(val, sizeof(val), RV_LAUNCH_ADDR_PREFIX "%s", l->sock_path);
    setenv("RIVET_BOOTSTRAP", val, 1);
    /* In the environment, which only this user can read (/proc/PID/environ
     * is private), never on a command line, which everyone can. */
    rv__launch_token_format(l->token, val);
    setenv(RV_LAUNCH_TOKEN_ENV, val, 1);
    if (l->config_abs != NULL)
        setenv("RIVET_CONFIG", l->config_abs, 1);
    if (l->shm_dir[0] != '\0')
        setenv(RV_LAUNCH_SHM_ENV, l->shm_dir, 1);
    snprintf(val, sizeof(val), "%d", (int)l->self);
    setenv(RV_LAUNCH_PID_ENV, val, 1);
    snprintf(val, sizeof(val), "%d", (int)getpgrp());
    setenv(RV_LAUNCH_PGID_ENV, val, 1);
}

/* Makes process group @p pgrp the terminal's foreground group. A
 * background group may do so only with SIGTTOU blocked. */
static void tty_hand_to(pid_t pgrp)
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, &old);
    if (tcsetpgrp(STDIN_FILENO, pgrp) != 0 && errno != ENOTTY)
        run_say("cannot hand the terminal to process group %d: %m", (int)pgrp);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void child_exec(const launcher_t *l, int r, int pipes[RUN_NSTREAMS][2])
    __attribute__((noreturn));
static void child_exec(const launcher_t *l, int r, int pipes[RUN_NSTREAMS][2])
{
    char err[ERRNO_TEXT_MAX];

    /* Own process group, so that ending the job reaches what the rank
     * started; and die with rivetrun. If rivetrun died before prctl, the
     * parent changed: leave now. */
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != l->self)
        _exit(EXIT_EXEC_FAILED);

    signal(SIGPIPE, SIG_DFL);
    /* rivetrun ends the job by forwarding SIGINT: a rank must die of it,
     * even when rivetrun was started in the background by a script, which
     * leaves SIGINT ignored (a child inherits that across exec). */
    signal(SIGINT, SIG_DFL);
    sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
    if (l->prefix) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
    }
    /* Only rank 0 reads rivetrun's stdin. From a terminal, its process
     * group becomes the terminal's foreground one (here and in the
     * parent, whichever runs first), so that it can read it instead of
     * being stopped, and a person can talk to the program. */
    if (r == 0 && isatty(STDIN_FILENO))
        tty_hand_to(getpid());
    if (r != 0) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0 && fd != STDIN_FILENO) {
            dup2(fd, STDIN_FILENO);
            close(fd);
        }
    }

    rv_log_set_identity(r, -1);
    rv__placement_bind_process(l->placement, r, l->threads);
    child_export_env(l, r);

    execvp(l->argv[0], l->argv);
    snprintf(err, sizeof(err), "%s", strerror(errno));
    dprintf(STDERR_FILENO, "rivetrun: rank %d: cannot execute %s: %s\n", r,
            l->argv[0], err);
    _exit(EXIT_EXEC_FAILED);
}

/* Forks rank @p r; in prefix mode its stdout and stderr are pipes. */
static int spawn(launcher_t *l, int r)
{
    rank_proc_t *rp = &l->ranks[r];
    int pipes[RUN_NSTREAMS][2] = {{-1, -1}, {-1, -1}};
    pid_t pid;

    if (l->prefix) {
        for (int i = 0; i < RUN_NSTREAMS; i++) {
            if (pipe2(pipes[i], O_CLOEXEC) != 0) {
                run_say("cannot create a pipe for rank %d: %m", r);
                goto err_pipes;
            }
        }
    }

    pid = fork();
    if (pid < 0) {
        run_say("cannot fork rank %d: %m", r);
        goto err_pipes;
    }
    if (pid == 0)
        child_exec(l, r, pipes);

    /* Also from here: whichever runs first, the group exists before we
     * might signal it. */
    setpgid(pid, pid);
    if (r == 0 && isatty(STDIN_FILENO)) {
        tty_hand_to(pid);
        l->tty_handed = true;
    }
    rp->pid = pid;
    l->nrunning++;
    for (int i = 0; i < RUN_NSTREAMS; i++) {
        if (pipes[i][0] < 0)
            continue;
        close(pipes[i][1]);
        run_stream_attach(&rp->out[i], pipes[i][0]);
    }
    return 0;

err_pipes:
    for (int i = 0; i < RUN_NSTREAMS; i++) {
        if (pipes[i][0] >= 0) {
            close(pipes[i][0]);
            close(pipes[i][1]);
        }
    }
    return -1;
}

void run_children_start(launcher_t *l)
{
    /* What rivetrun buffered must not be written again by every child. */
    fflush(NULL);
    for (int r = 0; r < l->size; r++) {
        if (spawn(l, r) != 0) {
            l->exit_code = 1;
            run_end_job(l, SIGKILL, 0);
            break;
        }
    }
}

static void on_child_exit(launcher_t *l, int r, int wstatus)
{
    rank_proc_t *rp = &l->ranks[r];

    /* What the rank wrote before it died is in its socket and pipes: read
     * it first, so that an ABORT or a FINI is known and its last output
     * comes before our verdict. */
    if (rp->conn != NULL)
        run_conn_read(l, rp->conn);
    run_output_read_rank(l, r);

    rp->exited = true;
    l->nrunning--;
    if (l->phase != PHASE_RUNNING)
        return;

    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
        run_job_fail(l, WEXITSTATUS(wstatus),
                     "rank %d (pid %d) exited with code %d", r, (int)rp->pid,
                     WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        run_job_fail(l, RUN_EXIT_SIGNAL_BASE + sig,
                     "rank %d (pid %d) killed by signal %d (%s)", r,
                     (int)rp->pid, sig, strsignal(sig));
    } else if (rp->in_job) {
        /* As mpirun does of a process that exits without MPI_Finalize:
         * the other ranks may be sending to it or waiting for it. */
        run_job_fail(l, 1,
                     "rank %d (pid %d) exited with code 0 without "
                     "rv_finalize: it joined the job and never left it",
                     r, (int)rp->pid);
    } else {
        run_round_check_blocked(l);
    }
}

void run_children_reap(launcher_t *l)
{
    int wstatus;
    pid_t pid;

    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        for (int r = 0; r < l->size; r++) {
            if (l->ranks[r].pid == pid && !l->ranks[r].exited) {
                on_child_exit(l, r, wstatus);
                break;
            }
        }
    }
}

/* Exited ranks too: their own children may still run. */
void run_signal_groups(launcher_t *l, int sig)
{
    for (int r = 0; r < l->size; r++) {
        pid_t pid = l->ranks[r].pid;
        if (pid <= 0)
            continue;
        if (kill(-pid, sig) != 0 && errno == ESRCH && !l->ranks[r].exited)
            kill(pid, sig);
    }
}

void run_children_finish(launcher_t *l)
{
    const struct timespec pause = {.tv_nsec = FINISH_REAP_PAUSE_NS};

    /* The terminal comes back to rivetrun's group (the shell's job). */
    if (l->tty_handed) {
        tty_hand_to(getpgrp());
        l->tty_handed = false;
    }

    /* Whatever the ranks left behind in their process groups goes too. */
    run_signal_groups(l, SIGKILL);
    for (int i = 0; i < FINISH_REAP_TRIES && l->nrunning > 0; i++) {
        /* Only after a failure of rivetrun itself: reap what SIGKILL ends,
         * for a second at most. */
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid > 0)
            l->nrunning--;
        else if (pid < 0)
            break;
        else
            nanosleep(&pause, NULL);
    }
}

/* ---------------------------------------------------------------------- */
/* Which processes belong to a rank                                        */
/* ---------------------------------------------------------------------- */

int run_proc_stat(pid_t pid, run_proc_info_t *info)
{
    char path[64], buf[PROC_STAT_MAX];
    const char *p;
    int fd, n, ppid;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = (int)read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: the fields that
     * follow start after its last ')'. */
    p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1, " %c %d", &info->state, &ppid) != 2)
        return -1;
    info->ppid = (pid_t)ppid;
    p += 2; /* ") " */
    for (int i = 0; i < 2 + STAT_FIELDS_SKIPPED; i++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return -1;
        p++;
    }
    info->start_ticks = strtoull(p, NULL, 10);
    return 0;
}

bool run_rank_owns_pid(const launcher_t *l, int r, pid_t pid)
{
    pid_t rank_pid = l->ranks[r].pid;
    run_proc_info_t info;

    for (int i = 0; i < ANCESTRY_MAX && pid > 1; i++) {
        if (pid == rank_pid)
            return true;
        /* The ranks are rivetrun's children: past rivetrun, no rank. */
        if (pid == l->self || run_proc_stat(pid, &info) != 0)
            return false;
        pid = info.ppid;
    }
    return false;
}

/* ---------------------------------------------------------------------- */
/* Keepalive                                                               */
/* ---------------------------------------------------------------------- */

/* Rank @p r's connection has been silent for job.keepalive. A process
 * stopped by a debugger or a signal ('t', 'T') is waited for; else the
 * job ends naming the rank. Returns true if the job was failed. */
static bool keepalive_expired(launcher_t *l, int r, int64_t silent_ms)
{
    rank_proc_t *rp = &l->ranks[r];
    run_proc_info_t info;
    pid_t pid = rp->conn->peer_pid;

    if (run_proc_stat(pid, &info) != 0 || info.state == 'Z' ||
        info.state == 'X')
        return false; /* gone: its exit is judged when it is reaped */
    if (info.state == 't' || info.state == 'T') {
        rp->heard_at = run_now_ms();
        return false;
    }
    run_job_fail(l, 1,
                 "rank %d (pid %d) stopped answering: no heartbeat for "
                 "%.1f s while its process lives on (state %c): rivet's "
                 "runtime in it is gone (its image replaced?) or frozen; "
                 "ending the job (job.keepalive: %lld s)",
                 r, (int)pid, (double)silent_ms / 1000, info.state,
                 (long long)(l->keepalive_ms / 1000));
    return true;
}

int64_t run_keepalive_check(launcher_t *l)
{
    int64_t now = run_now_ms(), next = -1;

    if (l->keepalive_ms <= 0 || l->phase != PHASE_RUNNING)
        return -1;
    for (int r = 0; r < l->size; r++) {
        rank_proc_t *rp = &l->ranks[r];
        int64_t due;
        if (!rp->in_job || rp->exited || rp->conn == NULL)
            continue;
        if (now - rp->heard_at >= l->keepalive_ms &&
            keepalive_expired(l, r, now - rp->heard_at))
            return -1;
        due = rp->heard_at + l->keepalive_ms - now;
        if (due < RV_LAUNCH_BEAT_MS)
            due = RV_LAUNCH_BEAT_MS; /* a stopped rank: look again later */
        if (next < 0 || due < next)
            next = due;
    }
    return next;
}
