/*
 * rivetrun's event loop. One poll() serves everything: the bootstrap
 * socket and its connections, the ranks' output pipes, signals (a
 * signalfd: SIGCHLD, SIGINT, SIGTERM, SIGHUP) and the timers. rivetrun
 * never blocks anywhere else, so a misbehaving child cannot make it hang.
 *
 * Ending the job: SIGTERM (or the signal rivetrun received) to every
 * rank's process group, SIGKILL after a grace period, every connection
 * closed so that a rank blocked in a collective sees end-of-file. The
 * loop runs until every child is reaped, or gives up on children that do
 * not die even of SIGKILL.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "run_internal.h"

#define GRACE_FAILURE_MS 2000 /* SIGTERM -> SIGKILL after a failure */
#define GRACE_SIGNAL_MS 3000  /* SIGTERM -> SIGKILL after our signal */
#define GIVEUP_MS 5000        /* after SIGKILL, stop waiting */
/* rivetrun's exit code when --timeout ended the job, as timeout(1)'s. */
#define EXIT_TIMEOUT 124
/* Longest failure message. */
#define FAIL_MSG_MAX 1536
/* Poll slots besides connections and streams: the listening socket and
 * the signalfd. */
#define FIXED_SLOTS 2
#define MS_PER_S 1000
#define NS_PER_MS 1000000

enum { SLOT_CONN, SLOT_STREAM, SLOT_LISTEN, SLOT_SIGNAL };

/* What a pollfd of the set stands for. */
typedef struct slot {
    int kind;
    int rank;
    void *obj;
} slot_t;

int64_t run_now_ms(void)
{
    return rv_time_ns() / NS_PER_MS;
}

/* ---------------------------------------------------------------------- */
/* Ending the job                                                          */
/* ---------------------------------------------------------------------- */

void run_end_job(launcher_t *l, int sig, int64_t grace_ms)
{
    if (l->phase == PHASE_ENDING)
        return;
    l->phase = PHASE_ENDING;
    run_signal_groups(l, sig);
    /* After the signal, so that most ranks die of it rather than report a
     * bootstrap error: closing the connections wakes ranks blocked in a
     * collective. */
    run_server_stop(l);
    l->kill_at = run_now_ms() + grace_ms;
}

void run_job_fail(launcher_t *l, int code, const char *fmt, ...)
{
    char msg[FAIL_MSG_MAX];
    va_list ap;

    if (l->phase != PHASE_RUNNING)
        return; /* only the first failure is reported */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    run_say("%s", msg);
    l->exit_code = code;
    run_end_job(l, SIGTERM, GRACE_FAILURE_MS);
}

static void on_signals(launcher_t *l)
{
    struct signalfd_siginfo si;

    for (;;) {
        ssize_t n = read(l->sig_fd, &si, sizeof(si));
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof(si))
            return;
        if (si.ssi_signo == SIGCHLD) {
            run_children_reap(l);
        } else if (l->phase == PHASE_RUNNING) {
            run_say("received signal %d (%s), ending the job",
                    (int)si.ssi_signo, strsignal((int)si.ssi_signo));
            l->exit_code = RUN_EXIT_SIGNAL_BASE + (int)si.ssi_signo;
            run_end_job(l, (int)si.ssi_signo, GRACE_SIGNAL_MS);
        } else if (l->kill_at != 0) {
            /* Asked again while ending: do not wait for the grace period. */
            l->kill_at = run_now_ms();
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Timers                                                                  */
/* ---------------------------------------------------------------------- */

static void check_timers(launcher_t *l)
{
    int64_t now = run_now_ms();

    if (l->phase == PHASE_RUNNING && l->timeout_at != 0 &&
        now >= l->timeout_at) {
        run_say("job timed out after %s s", l->timeout_str);
        l->exit_code = EXIT_TIMEOUT;
        run_end_job(l, SIGTERM, GRACE_FAILURE_MS);
    }
    /* Ranks' heartbeats only move their deadlines later, and a rank that
     * joins has the whole keepalive ahead of it: until the earliest
     * deadline found, no rank can expire, and the scan of every rank is
     * skipped (the loop wakes at every beat, size times a second). */
    if (l->keepalive_at == 0 || now >= l->keepalive_at) {
        int64_t due = run_keepalive_check(l);
        l->keepalive_at = due < 0 ? 0 : now + due;
    }
    if (l->kill_at != 0 && now >= l->kill_at) {
        run_signal_groups(l, SIGKILL);
        l->kill_at = 0;
        l->giveup_at = now + GIVEUP_MS;
    }
}

/* The poll() timeout until the next timer, in ms; -1: none. */
static int next_timeout(const launcher_t *l)
{
    int64_t next = INT64_MAX, now = run_now_ms();

    if (l->phase == PHASE_RUNNING && l->timeout_at != 0)
        next = l->timeout_at;
    if (l->kill_at != 0 && l->kill_at < next)
        next = l->kill_at;
    if (l->giveup_at != 0 && l->giveup_at < next)
        next = l->giveup_at;
    if (l->phase == PHASE_RUNNING && l->keepalive_at != 0 &&
        l->keepalive_at < next)
        next = l->keepalive_at;
    if (next == INT64_MAX)
        return -1;
    return next <= now ? 0 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
}

/* After SIGKILL and GIVEUP_MS, children still alive are named and left. */
static bool gave_up(const launcher_t *l)
{
    if (l->giveup_at == 0 || run_now_ms() < l->giveup_at)
        return false;
    for (int r = 0; r < l->size; r++) {
        if (!l->ranks[r].exited)
            run_say("rank %d (pid %d) does not die even of SIGKILL; "
                    "giving up on it",
                    r, (int)l->ranks[r].pid);
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* The loop                                                                */
/* ---------------------------------------------------------------------- */

/* Fills the poll set with everything open now; returns its size. */
static int poll_set_fill(const launcher_t *l, struct pollfd *pfds,
                         slot_t *slots)
{
    int n = 0;

    for (int i = 0; i < l->nconns; i++) {
        conn_t *c = l->conns[i];
        pfds[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        if (c->qhead != NULL)
            pfds[n].events |= POLLOUT;
        slots[n++] = (slot_t){SLOT_CONN, c->rank, c};
    }
    for (int r = 0; r < l->size; r++) {
        for (int i = 0; i < RUN_NSTREAMS; i++) {
            outstream_t *s = &l->ranks[r].out[i];
            if (s->fd < 0)
                continue;
            pfds[n] = (struct pollfd){.fd = s->fd, .events = POLLIN};
            slots[n++] = (slot_t){SLOT_STREAM, r, s};
        }
    }
    if (l->listen_fd >= 0) {
        pfds[n] = (struct pollfd){.fd = l->listen_fd, .events = POLLIN};
        slots[n++] = (slot_t){SLOT_LISTEN, -1, NULL};
    }
    pfds[n] = (struct pollfd){.fd = l->sig_fd, .events = POLLIN};
    slots[n++] = (slot_t){SLOT_SIGNAL, -1, NULL};
    return n;
}

/* Handles the @p ready slots of the @p n that have events. */
static void poll_set_handle(launcher_t *l, const struct pollfd *pfds,
                            const slot_t *slots, int n, int ready)
{
    for (int i = 0; ready > 0 && i < n; i++) {
        short ev = pfds[i].revents;
        if (ev == 0)
            continue;
        switch (slots[i].kind) {
        case SLOT_CONN:
            run_conn_on_events(l, slots[i].obj, ev);
            break;
        case SLOT_STREAM:
            run_stream_read(slots[i].obj, slots[i].rank);
            break;
        case SLOT_LISTEN:
            if (l->listen_fd >= 0)
                run_server_accept(l);
            break;
        case SLOT_SIGNAL:
            on_signals(l);
            break;
        }
    }
}

/* Runs the loop over a poll set of room enough for every descriptor. */
static int serve(launcher_t *l, struct pollfd *pfds, slot_t *slots)
{
    /* The timeout counts from the moment every rank was started. */
    if (l->timeout_s > 0)
        l->timeout_at = run_now_ms() + (int64_t)(l->timeout_s * MS_PER_S + 0.5);

    while (l->nrunning > 0) {
        int n = poll_set_fill(l, pfds, slots);
        int ready = poll(pfds, (nfds_t)n, next_timeout(l));

        if (ready < 0 && errno != EINTR) {
            run_say("poll failed: %m");
            return -1;
        }
        poll_set_handle(l, pfds, slots, n, ready);
        run_conns_sweep(l);
        check_timers(l);
        if (gave_up(l))
            break;
    }
    return 0;
}

int run_loop(launcher_t *l)
{
    int nslots = FIXED_SLOTS + l->max_conns + RUN_NSTREAMS * l->size;
    struct pollfd *pfds = calloc((size_t)nslots, sizeof(*pfds));
    slot_t *slots = calloc((size_t)nslots, sizeof(*slots));
    int rc = -1;

    if (pfds == NULL || slots == NULL)
        run_say("out of memory");
    else
        rc = serve(l, pfds, slots);
    free(pfds);
    free(slots);
    return rc;
}
