/*
 * rivetrun: starts the processes of a job on this node and serves their
 * bootstrap (see rv_launch_proto.h).
 *
 *     rivetrun [options] -c job.yaml PROGRAM [ARGS...]
 *
 * rivetrun forks job.processes children. Each child makes itself a process
 * group leader, asks the kernel to kill it if rivetrun dies
 * (PR_SET_PDEATHSIG), binds itself per job.placement, exports its rank and
 * the bootstrap address and execs PROGRAM.
 *
 * One poll() loop serves everything: the bootstrap socket, the children's
 * output (prefixed "[rank] " line by line when job.output_prefix is on),
 * signals (a signalfd: SIGCHLD, SIGINT, SIGTERM, SIGHUP) and the timeout.
 * rivetrun never blocks anywhere else, so a misbehaving child cannot make
 * it hang.
 *
 * The job fails, and rivetrun ends it, when a rank exits non-zero, is
 * killed by a signal, aborts, or exits (even with 0) while the other ranks
 * wait for it in a collective it will never join. Ending a job means:
 * SIGTERM to every rank's process group, SIGKILL after a grace period, every
 * child reaped, every connection closed (so a rank blocked in a collective
 * sees end-of-file). rivetrun prints one line naming the failed rank and
 * exits with its code (128 + signal if it was killed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rv_config.h"
#include "rv_launch_proto.h"
#include "rv_placement.h"

#define GRACE_FAILURE_MS   2000 /* SIGTERM -> SIGKILL after a failure */
#define GRACE_SIGNAL_MS    3000 /* SIGTERM -> SIGKILL after our signal */
#define GIVEUP_MS          5000 /* after SIGKILL, stop waiting */
#define LINE_MAX_BYTES     65536 /* longest line kept whole in prefix mode */
#define MAX_PROCESSES      65536
#define EXIT_USAGE         1
#define EXIT_TIMEOUT       124

/* ---------------------------------------------------------------------- */
/* Types                                                                   */
/* ---------------------------------------------------------------------- */

/* An outgoing frame, shared by every connection it is queued on. */
typedef struct frame {
    unsigned refs;
    size_t len;             /* header + payload */
    unsigned char data[];   /* rv_launch_hdr_t, then the payload */
} frame_t;

typedef struct qent {
    frame_t *frame;
    struct qent *next;
} qent_t;

/* A bootstrap connection. Closed connections keep their struct (fd -1)
 * until the end of the loop iteration, so handlers may close any of them. */
typedef struct conn {
    int fd;
    int rank;               /* -1 until its HELLO is accepted */
    rv_launch_hdr_t hdr;    /* frame being received */
    size_t hdr_got;
    unsigned char *payload; /* where its payload goes */
    unsigned char *owned;   /* malloc'ed payload buffer, or NULL */
    size_t payload_got;
    qent_t *qhead, *qtail;  /* frames to send */
    size_t qoff;            /* bytes of qhead already sent */
} conn_t;

/* One output stream (stdout or stderr) of a rank, in prefix mode. */
typedef struct outstream {
    int fd;                 /* read end of the pipe, -1 when closed */
    int out_fd;             /* where the prefixed lines go */
    char *buf;
    size_t len, cap;
    bool midline;           /* a line was cut: no prefix before the rest */
} outstream_t;

typedef struct rank_proc {
    pid_t pid;              /* also its process group id */
    bool exited;
    bool hello;             /* connected (HELLO accepted) */
    bool fini;              /* left cleanly */
    bool contributed;       /* to the allgather round in progress */
    conn_t *conn;
    outstream_t out[2];
} rank_proc_t;

typedef enum { PHASE_RUNNING, PHASE_ENDING } phase_t;

typedef struct launcher {
    /* job */
    int size;
    int threads;
    rv_placement_t placement;
    bool prefix;
    char *const *argv;      /* the program and its arguments */
    const char *config_abs; /* exported as RIVET_CONFIG, or NULL */
    double timeout_s;       /* 0: none */
    const char *timeout_str;
    pid_t self;

    /* resources */
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int listen_fd;
    int sig_fd;
    sigset_t old_mask;
    rank_proc_t *ranks;
    int nrunning;
    conn_t **conns;
    int nconns, max_conns;

    /* the allgather round in progress: its reply frame, filled in place */
    frame_t *round;
    uint64_t round_len;
    int round_count;

    /* ending */
    phase_t phase;
    int exit_code;
    int64_t timeout_at;     /* ms, 0: none */
    int64_t kill_at;        /* SIGKILL everyone then; 0: not scheduled */
    int64_t giveup_at;      /* stop waiting for children then */
} launcher_t;

/* ---------------------------------------------------------------------- */
/* Small helpers                                                           */
/* ---------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* a closed stdout is not a reason to fail the job */
        p += n;
        len -= (size_t)n;
    }
}

/* Prints "rivetrun: <message>" as one line on stderr, in one write. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    int n = snprintf(buf, sizeof(buf), "rivetrun: ");

    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    write_all(STDERR_FILENO, buf, (size_t)n);
}

static int set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* ---------------------------------------------------------------------- */
/* Connections and frames                                                  */
/* ---------------------------------------------------------------------- */

static frame_t *frame_new(uint32_t type, uint64_t payload_len)
{
    frame_t *f = malloc(sizeof(*f) + sizeof(rv_launch_hdr_t) + payload_len);
    rv_launch_hdr_t hdr = {.type = type, .rank = RV_LAUNCH_RANK_LAUNCHER,
                           .len = payload_len};

    if (f == NULL)
        return NULL;
    f->refs = 1; /* the creator's */
    f->len = sizeof(hdr) + payload_len;
    memcpy(f->data, &hdr, sizeof(hdr));
    return f;
}

static void frame_unref(frame_t *f)
{
    if (f != NULL && --f->refs == 0)
        free(f);
}

static void conn_close(launcher_t *l, conn_t *c)
{
    if (c->fd < 0)
        return;
    close(c->fd);
    c->fd = -1;
    while (c->qhead != NULL) {
        qent_t *q = c->qhead;
        c->qhead = q->next;
        frame_unref(q->frame);
        free(q);
    }
    c->qtail = NULL;
    free(c->owned);
    c->owned = NULL;
    c->payload = NULL;
    if (c->rank >= 0 && l->ranks[c->rank].conn == c)
        l->ranks[c->rank].conn = NULL;
}

/* Frees the closed connections; called where no handler holds one. */
static void conns_sweep(launcher_t *l)
{
    int j = 0;

    for (int i = 0; i < l->nconns; i++) {
        if (l->conns[i]->fd < 0)
            free(l->conns[i]);
        else
            l->conns[j++] = l->conns[i];
    }
    l->nconns = j;
}

/* Sends what the socket takes now. Returns false if the peer is gone. */
static bool conn_flush(conn_t *c)
{
    while (c->qhead != NULL) {
        frame_t *f = c->qhead->frame;
        ssize_t n = send(c->fd, f->data + c->qoff, f->len - c->qoff,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        c->qoff += (size_t)n;
        if (c->qoff == f->len) {
            qent_t *q = c->qhead;
            c->qhead = q->next;
            if (c->qhead == NULL)
                c->qtail = NULL;
            c->qoff = 0;
            frame_unref(f);
            free(q);
        }
    }
    return true;
}

static void conn_enqueue(launcher_t *l, conn_t *c, frame_t *f)
{
    qent_t *q = malloc(sizeof(*q));

    if (q == NULL) {
        say("out of memory queueing a reply to rank %d", c->rank);
        conn_close(l, c);
        return;
    }
    f->refs++;
    q->frame = f;
    q->next = NULL;
    if (c->qtail != NULL)
        c->qtail->next = q;
    else
        c->qhead = q;
    c->qtail = q;
    if (!conn_flush(c))
        conn_close(l, c);
}

/* ---------------------------------------------------------------------- */
/* Ending the job                                                          */
/* ---------------------------------------------------------------------- */

/* Sends @p sig to the process group of every rank (exited ones too: their
 * own children may still run). */
static void signal_groups(launcher_t *l, int sig)
{
    for (int r = 0; r < l->size; r++) {
        pid_t pid = l->ranks[r].pid;
        if (pid <= 0)
            continue;
        if (kill(-pid, sig) != 0 && errno == ESRCH && !l->ranks[r].exited)
            kill(pid, sig);
    }
}

static void round_free(launcher_t *l)
{
    frame_unref(l->round);
    l->round = NULL;
    l->round_count = 0;
    for (int r = 0; r < l->size; r++)
        l->ranks[r].contributed = false;
}

/* Starts ending the job: @p sig now, SIGKILL after @p grace_ms. */
static void end_job(launcher_t *l, int sig, int64_t grace_ms)
{
    if (l->phase == PHASE_ENDING)
        return;
    l->phase = PHASE_ENDING;
    signal_groups(l, sig);
    /* After the signal, so that most ranks die of it rather than report a
     * bootstrap error: closing the connections wakes ranks blocked in a
     * collective. */
    for (int i = 0; i < l->nconns; i++)
        conn_close(l, l->conns[i]);
    if (l->listen_fd >= 0) {
        close(l->listen_fd);
        l->listen_fd = -1;
    }
    round_free(l);
    l->kill_at = now_ms() + grace_ms;
}

static void job_fail(launcher_t *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void job_fail(launcher_t *l, int code, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;

    if (l->phase != PHASE_RUNNING)
        return; /* only the first failure is reported */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    say("%s", msg);
    l->exit_code = code;
    end_job(l, SIGTERM, GRACE_FAILURE_MS);
}

/* A round in progress that waits for a rank that has exited never ends. */
static void round_check_blocked(launcher_t *l)
{
    if (l->round == NULL)
        return;
    for (int r = 0; r < l->size; r++) {
        rank_proc_t *rp = &l->ranks[r];
        if (rp->exited && !rp->contributed) {
            job_fail(l, 1, "rank %d (pid %d) exited before the job finished "
                     "(the other ranks wait for it in a collective)", r,
                     (int)rp->pid);
            return;
        }
    }
}

/* ---------------------------------------------------------------------- */
/* The bootstrap protocol                                                  */
/* ---------------------------------------------------------------------- */

/* A connection broke the protocol: a known rank fails the job. */
static void conn_protocol_error(launcher_t *l, conn_t *c, const char *what)
{
    if (c->rank >= 0)
        job_fail(l, 1, "rank %d (pid %d) broke the bootstrap protocol: %s",
                 c->rank, (int)l->ranks[c->rank].pid, what);
    else
        say("warning: closing a bootstrap connection: %s", what);
    conn_close(l, c);
}

static void round_complete(launcher_t *l)
{
    frame_t *f = l->round;

    l->round = NULL; /* the reply now belongs to the connections */
    for (int r = 0; r < l->size; r++) {
        if (l->ranks[r].conn != NULL)
            conn_enqueue(l, l->ranks[r].conn, f);
    }
    frame_unref(f);
    round_free(l);
}

static void on_hello(launcher_t *l, conn_t *c)
{
    rv_launch_hello_t hello;
    int r = (int)c->hdr.rank;
    frame_t *reply;

    memcpy(&hello, c->payload, sizeof(hello));
    if (c->hdr.rank >= (uint32_t)l->size || hello.size != (uint32_t)l->size) {
        say("warning: refused a process claiming rank %u of %u (pid %" PRIu64
            "): the job has %d ranks", c->hdr.rank, hello.size, hello.pid,
            l->size);
        conn_close(l, c);
        return;
    }
    /* A rank may join again after it left cleanly (a program that
     * initializes and finalizes twice, or runs two programs in turn). */
    if (l->ranks[r].hello &&
        !(l->ranks[r].fini && l->ranks[r].conn == NULL)) {
        say("warning: refused a second connection for rank %d (pid %" PRIu64
            ")", r, hello.pid);
        conn_close(l, c);
        return;
    }
    c->rank = r;
    l->ranks[r].hello = true;
    l->ranks[r].fini = false;
    l->ranks[r].conn = c;

    reply = frame_new(RV_LAUNCH_HELLO, 0);
    if (reply == NULL) {
        job_fail(l, 1, "out of memory");
        return;
    }
    conn_enqueue(l, c, reply);
    frame_unref(reply);
}

static void on_abort(launcher_t *l, conn_t *c)
{
    rv_launch_abort_t abt;
    size_t reason_len = c->hdr.len - sizeof(abt);
    int code;

    memcpy(&abt, c->payload, sizeof(abt));
    code = abt.code > 0 && abt.code < 256 ? abt.code : 1;
    job_fail(l, code, "rank %d aborted: %.*s", c->rank, (int)reason_len,
             (const char *)c->payload + sizeof(abt));
}

/* A whole frame arrived on @p c. */
static void on_frame(launcher_t *l, conn_t *c)
{
    switch (c->hdr.type) {
    case RV_LAUNCH_HELLO:
        on_hello(l, c);
        break;
    case RV_LAUNCH_ALLGATHER:
        l->ranks[c->rank].contributed = true;
        if (++l->round_count == l->size)
            round_complete(l);
        else
            round_check_blocked(l);
        break;
    case RV_LAUNCH_ABORT:
        on_abort(l, c);
        break;
    case RV_LAUNCH_FINI:
        l->ranks[c->rank].fini = true;
        conn_close(l, c);
        break;
    }
}

/* A frame header arrived: checks it and says where its payload goes.
 * Returns false if the connection was closed. */
static bool on_header(launcher_t *l, conn_t *c)
{
    const rv_launch_hdr_t *h = &c->hdr;
    char what[160];

    if (c->rank < 0) {
        if (h->type != RV_LAUNCH_HELLO || h->len != sizeof(rv_launch_hello_t)) {
            snprintf(what, sizeof(what), "%s before hello",
                     rv__launch_type_name(h->type));
            conn_protocol_error(l, c, what);
            return false;
        }
    } else if (h->rank != (uint32_t)c->rank) {
        snprintf(what, sizeof(what), "frame claims rank %u", h->rank);
        conn_protocol_error(l, c, what);
        return false;
    }

    c->payload = NULL;
    c->payload_got = 0;
    switch (h->type) {
    case RV_LAUNCH_HELLO:
        if (c->rank >= 0) {
            conn_protocol_error(l, c, "second hello");
            return false;
        }
        break;
    case RV_LAUNCH_ALLGATHER: {
        rank_proc_t *rp = &l->ranks[c->rank];
        if (rp->contributed) {
            conn_protocol_error(l, c, "second allgather contribution before "
                                      "the round ended");
            return false;
        }
        if (l->round == NULL) {
            if (h->len > RV_LAUNCH_MAX_CONTRIB ||
                h->len * (uint64_t)l->size > RV_LAUNCH_MAX_REPLY) {
                snprintf(what, sizeof(what), "allgather of %" PRIu64
                         " bytes per rank is too large", h->len);
                conn_protocol_error(l, c, what);
                return false;
            }
            l->round = frame_new(RV_LAUNCH_ALLGATHER,
                                 h->len * (uint64_t)l->size);
            if (l->round == NULL) {
                job_fail(l, 1, "out of memory for an allgather of %" PRIu64
                         " bytes per rank", h->len);
                return false;
            }
            l->round_len = h->len;
            l->round_count = 0;
        } else if (h->len != l->round_len) {
            job_fail(l, 1, "rank %d contributed %" PRIu64 " bytes to an "
                     "allgather of %" PRIu64 " bytes per rank (do all ranks "
                     "call the same collectives?)", c->rank, h->len,
                     l->round_len);
            return false;
        }
        /* The contribution lands directly in the reply. */
        c->payload = l->round->data + sizeof(rv_launch_hdr_t) +
                     (size_t)c->rank * (size_t)h->len;
        return true;
    }
    case RV_LAUNCH_ABORT:
        if (h->len < sizeof(rv_launch_abort_t) ||
            h->len > sizeof(rv_launch_abort_t) + RV_LAUNCH_MAX_REASON) {
            conn_protocol_error(l, c, "bad abort frame");
            return false;
        }
        break;
    case RV_LAUNCH_FINI:
        if (h->len != 0) {
            conn_protocol_error(l, c, "bad fini frame");
            return false;
        }
        break;
    default:
        snprintf(what, sizeof(what), "unknown frame type %u", h->type);
        conn_protocol_error(l, c, what);
        return false;
    }
    if (h->len > 0) {
        c->owned = malloc(h->len);
        if (c->owned == NULL) {
            job_fail(l, 1, "out of memory");
            return false;
        }
        c->payload = c->owned;
    }
    return true;
}

/* Reads and handles everything @p c has to say now, until EAGAIN or EOF. */
static void conn_read(launcher_t *l, conn_t *c)
{
    while (c->fd >= 0) {
        void *dst;
        size_t want;
        ssize_t n;
        bool in_hdr = c->hdr_got < sizeof(c->hdr);

        if (in_hdr) {
            dst = (char *)&c->hdr + c->hdr_got;
            want = sizeof(c->hdr) - c->hdr_got;
        } else {
            dst = c->payload + c->payload_got;
            want = (size_t)c->hdr.len - c->payload_got;
        }
        n = recv(c->fd, dst, want, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_close(l, c); /* reset: as end-of-file */
            return;
        }
        if (n == 0) {
            /* End of file. A rank that did not say FINI is judged when its
             * process exits: if it died, its exit status names the cause. */
            conn_close(l, c);
            return;
        }
        if (in_hdr) {
            c->hdr_got += (size_t)n;
            if (c->hdr_got < sizeof(c->hdr) || !on_header(l, c))
                continue;
        } else {
            c->payload_got += (size_t)n;
        }
        if (c->hdr_got == sizeof(c->hdr) && c->payload_got == c->hdr.len) {
            on_frame(l, c);
            c->hdr_got = 0;
            c->payload_got = 0;
            c->payload = NULL;
            free(c->owned);
            c->owned = NULL;
        }
    }
}

static void on_accept(launcher_t *l)
{
    for (;;) {
        int fd = accept4(l->listen_fd, NULL, NULL,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        conn_t *c;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN, or a resource shortage: retried next time */
        }
        if (l->nconns == l->max_conns ||
            (c = calloc(1, sizeof(*c))) == NULL) {
            say("warning: refusing a bootstrap connection: too many");
            close(fd);
            continue;
        }
        c->fd = fd;
        c->rank = -1;
        l->conns[l->nconns++] = c;
    }
}

/* ---------------------------------------------------------------------- */
/* Output of the ranks, in prefix mode                                     */
/* ---------------------------------------------------------------------- */

static void stream_write(outstream_t *s, int rank, const char *data,
                         size_t len, bool add_newline)
{
    char prefix[24];
    int plen;

    if (!s->midline) {
        plen = snprintf(prefix, sizeof(prefix), "[%d] ", rank);
        write_all(s->out_fd, prefix, (size_t)plen);
    }
    write_all(s->out_fd, data, len);
    if (add_newline)
        write_all(s->out_fd, "\n", 1);
}

/* Writes the complete lines of @p s; with @p final, the partial one too. */
static void stream_emit(outstream_t *s, int rank, bool final)
{
    size_t start = 0;
    char *nl;

    while ((nl = memchr(s->buf + start, '\n', s->len - start)) != NULL) {
        size_t n = (size_t)(nl - (s->buf + start)) + 1;
        stream_write(s, rank, s->buf + start, n, false);
        s->midline = false;
        start += n;
    }
    if (start < s->len && (final || s->len - start >= LINE_MAX_BYTES)) {
        /* A partial last line gets its newline; an overlong line is cut and
         * continues without a prefix. */
        stream_write(s, rank, s->buf + start, s->len - start, final);
        s->midline = !final;
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void stream_close(outstream_t *s, int rank)
{
    if (s->fd < 0)
        return;
    close(s->fd);
    s->fd = -1;
    stream_emit(s, rank, true);
}

/* Reads what the pipe holds now. */
static void stream_read(outstream_t *s, int rank)
{
    for (int i = 0; i < 64 && s->fd >= 0; i++) {
        ssize_t n;

        if (s->cap - s->len < 4096) {
            size_t cap = s->cap ? s->cap * 2 : 8192;
            char *buf = realloc(s->buf, cap);
            if (buf == NULL) {
                stream_emit(s, rank, true); /* write what we have */
                continue;
            }
            s->buf = buf;
            s->cap = cap;
        }
        n = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            stream_close(s, rank);
            return;
        }
        s->len += (size_t)n;
        stream_emit(s, rank, false);
    }
}

/* ---------------------------------------------------------------------- */
/* Children                                                                */
/* ---------------------------------------------------------------------- */

static void on_child_exit(launcher_t *l, int r, int wstatus)
{
    rank_proc_t *rp = &l->ranks[r];

    /* What the rank wrote before it died is in its socket and pipes: read
     * it first, so that an ABORT or a FINI is known and its last output
     * comes before our verdict. */
    if (rp->conn != NULL)
        conn_read(l, rp->conn);
    for (int i = 0; i < 2; i++)
        stream_read(&rp->out[i], r);

    rp->exited = true;
    l->nrunning--;
    if (l->phase != PHASE_RUNNING)
        return;

    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
        job_fail(l, WEXITSTATUS(wstatus), "rank %d (pid %d) exited with code %d",
                 r, (int)rp->pid, WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        job_fail(l, 128 + sig, "rank %d (pid %d) killed by signal %d (%s)", r,
                 (int)rp->pid, sig, strsignal(sig));
    } else {
        round_check_blocked(l);
    }
}

static void reap(launcher_t *l)
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
            reap(l);
        } else if (l->phase == PHASE_RUNNING) {
            say("received signal %d (%s), ending the job", (int)si.ssi_signo,
                strsignal((int)si.ssi_signo));
            l->exit_code = 128 + (int)si.ssi_signo;
            end_job(l, (int)si.ssi_signo, GRACE_SIGNAL_MS);
        } else if (si.ssi_signo != SIGCHLD && l->kill_at != 0) {
            /* Asked again while ending: do not wait for the grace period. */
            l->kill_at = now_ms();
        }
    }
}

static void child_exec(launcher_t *l, int r, int pipes[2][2])
    __attribute__((noreturn));
static void child_exec(launcher_t *l, int r, int pipes[2][2])
{
    char val[PATH_MAX + 16];

    /* Own process group, so that ending the job reaches what the rank
     * started; and die with rivetrun. If rivetrun died before prctl, the
     * parent changed: leave now. */
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != l->self)
        _exit(127);

    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &l->old_mask, NULL);
    if (l->prefix) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
    }
    /* Only rank 0 reads rivetrun's stdin, and not from a terminal: a
     * background process group reading the terminal would stop. */
    if (r != 0 || isatty(STDIN_FILENO)) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0 && fd != STDIN_FILENO) {
            dup2(fd, STDIN_FILENO);
            close(fd);
        }
    }

    rv_log_set_identity(r, -1);
    rv__placement_bind_process(l->placement, r, l->threads);

    snprintf(val, sizeof(val), "%d", r);
    setenv("RIVET_RANK", val, 1);
    setenv("RIVET_LOCAL_RANK", val, 1);
    snprintf(val, sizeof(val), "%d", l->size);
    setenv("RIVET_SIZE", val, 1);
    setenv("RIVET_LOCAL_SIZE", val, 1);
    snprintf(val, sizeof(val), RV_LAUNCH_ADDR_PREFIX "%s", l->sock_path);
    setenv("RIVET_BOOTSTRAP", val, 1);
    if (l->config_abs != NULL)
        setenv("RIVET_CONFIG", l->config_abs, 1);

    execvp(l->argv[0], l->argv);
    snprintf(val, sizeof(val), "%s", strerror(errno));
    dprintf(STDERR_FILENO, "rivetrun: rank %d: cannot execute %s: %s\n", r,
            l->argv[0], val);
    _exit(127);
}

static int spawn(launcher_t *l, int r)
{
    rank_proc_t *rp = &l->ranks[r];
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    pid_t pid;

    rp->out[0].fd = rp->out[1].fd = -1;
    rp->out[0].out_fd = STDOUT_FILENO;
    rp->out[1].out_fd = STDERR_FILENO;
    if (l->prefix) {
        for (int i = 0; i < 2; i++) {
            if (pipe2(pipes[i], O_CLOEXEC) != 0) {
                say("cannot create a pipe for rank %d: %m", r);
                goto err_pipes;
            }
        }
    }

    pid = fork();
    if (pid < 0) {
        say("cannot fork rank %d: %m", r);
        goto err_pipes;
    }
    if (pid == 0)
        child_exec(l, r, pipes);

    /* Also from here: whichever runs first, the group exists before we
     * might signal it. */
    setpgid(pid, pid);
    rp->pid = pid;
    l->nrunning++;
    for (int i = 0; i < 2; i++) {
        if (pipes[i][0] < 0)
            continue;
        close(pipes[i][1]);
        set_nonblock(pipes[i][0]);
        rp->out[i].fd = pipes[i][0];
    }
    return 0;

err_pipes:
    for (int i = 0; i < 2; i++) {
        if (pipes[i][0] >= 0) {
            close(pipes[i][0]);
            close(pipes[i][1]);
        }
    }
    return -1;
}

/* ---------------------------------------------------------------------- */
/* The loop                                                                */
/* ---------------------------------------------------------------------- */

enum { SLOT_CONN, SLOT_STREAM, SLOT_LISTEN, SLOT_SIGNAL };

typedef struct slot {
    int kind;
    int rank;
    void *obj;
} slot_t;

static void check_timers(launcher_t *l)
{
    int64_t now = now_ms();

    if (l->phase == PHASE_RUNNING && l->timeout_at != 0 &&
        now >= l->timeout_at) {
        say("job timed out after %s s", l->timeout_str);
        l->exit_code = EXIT_TIMEOUT;
        end_job(l, SIGTERM, GRACE_FAILURE_MS);
    }
    if (l->kill_at != 0 && now >= l->kill_at) {
        signal_groups(l, SIGKILL);
        l->kill_at = 0;
        l->giveup_at = now + GIVEUP_MS;
    }
}

static int next_timeout(const launcher_t *l)
{
    int64_t next = INT64_MAX, now = now_ms();

    if (l->phase == PHASE_RUNNING && l->timeout_at != 0)
        next = l->timeout_at;
    if (l->kill_at != 0 && l->kill_at < next)
        next = l->kill_at;
    if (l->giveup_at != 0 && l->giveup_at < next)
        next = l->giveup_at;
    if (next == INT64_MAX)
        return -1;
    return next <= now ? 0 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
}

static int run_loop(launcher_t *l)
{
    int nslots = 2 + l->max_conns + 2 * l->size;
    struct pollfd *pfds = calloc((size_t)nslots, sizeof(*pfds));
    slot_t *slots = calloc((size_t)nslots, sizeof(*slots));

    if (pfds == NULL || slots == NULL) {
        say("out of memory");
        free(pfds);
        free(slots);
        return -1;
    }

    while (l->nrunning > 0) {
        int n = 0, rc;

        for (int i = 0; i < l->nconns; i++) {
            conn_t *c = l->conns[i];
            pfds[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            if (c->qhead != NULL)
                pfds[n].events |= POLLOUT;
            slots[n++] = (slot_t){SLOT_CONN, c->rank, c};
        }
        for (int r = 0; r < l->size; r++) {
            for (int i = 0; i < 2; i++) {
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

        rc = poll(pfds, (nfds_t)n, next_timeout(l));
        if (rc < 0 && errno != EINTR) {
            say("poll failed: %m");
            free(pfds);
            free(slots);
            return -1;
        }
        for (int i = 0; rc > 0 && i < n; i++) {
            short ev = pfds[i].revents;
            if (ev == 0)
                continue;
            switch (slots[i].kind) {
            case SLOT_CONN: {
                conn_t *c = slots[i].obj;
                if (c->fd >= 0 && (ev & POLLOUT) && !conn_flush(c))
                    conn_close(l, c);
                if (c->fd >= 0 && (ev & (POLLIN | POLLHUP | POLLERR)))
                    conn_read(l, c);
                break;
            }
            case SLOT_STREAM:
                stream_read(slots[i].obj, slots[i].rank);
                break;
            case SLOT_LISTEN:
                if (l->listen_fd >= 0)
                    on_accept(l);
                break;
            case SLOT_SIGNAL:
                on_signals(l);
                break;
            }
        }
        conns_sweep(l);
        check_timers(l);
        if (l->giveup_at != 0 && now_ms() >= l->giveup_at) {
            for (int r = 0; r < l->size; r++) {
                if (!l->ranks[r].exited)
                    say("rank %d (pid %d) does not die even of SIGKILL; "
                        "giving up on it", r, (int)l->ranks[r].pid);
            }
            break;
        }
    }
    free(pfds);
    free(slots);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Setup and teardown                                                      */
/* ---------------------------------------------------------------------- */

static int make_socket(launcher_t *l)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    const char *tmp = getenv("TMPDIR");

    if (tmp == NULL || *tmp == '\0' ||
        strlen(tmp) + sizeof("/rivetrun.XXXXXX/sock") > sizeof(sun.sun_path))
        tmp = "/tmp";
    snprintf(l->dir, sizeof(l->dir), "%s/rivetrun.XXXXXX", tmp);
    if (mkdtemp(l->dir) == NULL) {
        say("cannot create a directory in %s: %m", tmp);
        l->dir[0] = '\0';
        return -1;
    }
    /* tmp was chosen above so that the path fits. */
    strcpy(l->sock_path, l->dir);
    strcat(l->sock_path, "/sock");
    memcpy(sun.sun_path, l->sock_path, strlen(l->sock_path) + 1);

    l->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                          0);
    if (l->listen_fd < 0) {
        say("cannot create the bootstrap socket: %m");
        return -1;
    }
    if (bind(l->listen_fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
        listen(l->listen_fd, SOMAXCONN) != 0) {
        say("cannot listen on %s: %m", l->sock_path);
        return -1;
    }
    return 0;
}

static void cleanup(launcher_t *l)
{
    for (int i = 0; i < l->nconns; i++)
        conn_close(l, l->conns[i]);
    conns_sweep(l);
    free(l->conns);
    frame_unref(l->round);
    l->round = NULL;
    if (l->listen_fd >= 0)
        close(l->listen_fd);
    if (l->sig_fd >= 0)
        close(l->sig_fd);
    if (l->sock_path[0] != '\0')
        unlink(l->sock_path);
    if (l->dir[0] != '\0')
        rmdir(l->dir);
    if (l->ranks != NULL) {
        for (int r = 0; r < l->size; r++) {
            for (int i = 0; i < 2; i++) {
                stream_close(&l->ranks[r].out[i], r);
                free(l->ranks[r].out[i].buf);
            }
        }
    }
    free(l->ranks);
}

static void usage(FILE *out)
{
    fprintf(out,
"usage: rivetrun [options] -c job.yaml PROGRAM [ARGS...]\n"
"\n"
"Starts job.processes copies of PROGRAM on this node, bound per\n"
"job.placement, and serves their bootstrap. Every process gets RIVET_RANK,\n"
"RIVET_SIZE, RIVET_LOCAL_RANK, RIVET_LOCAL_SIZE, RIVET_BOOTSTRAP and\n"
"RIVET_CONFIG in its environment. If a process fails, rivetrun ends the\n"
"others and exits with its code (128 + signal if it was killed).\n"
"\n"
"options:\n"
"  -c, --config FILE    the job's YAML configuration (default: RIVET_CONFIG,\n"
"                       else defaults and RIVET_* environment overrides)\n"
"  -n, --np N           number of processes (overrides job.processes)\n"
"      --timeout S      end the job after S seconds (exit code 124)\n"
"      --prefix         prefix every output line with \"[rank] \"\n"
"      --no-prefix      do not (both override job.output_prefix)\n"
"  -h, --help           this help\n");
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"np", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 'T'},
        {"prefix", no_argument, NULL, 'P'},
        {"no-prefix", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static launcher_t launcher;
    launcher_t *l = &launcher;
    const char *config = NULL;
    char config_abs[PATH_MAX];
    char errbuf[1024] = "";
    long np = 0;
    int prefix = -1, opt, code;
    sigset_t mask;
    rv_config_t *loaded;
    rv_core_config_t cfg;
    char *end;

    l->listen_fd = l->sig_fd = -1;

    while ((opt = getopt_long(argc, argv, "+c:n:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config = optarg;
            break;
        case 'n':
            errno = 0;
            np = strtol(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || np < 1 || np > MAX_PROCESSES) {
                say("-n %s: expected a number of processes in [1, %d]",
                    optarg, MAX_PROCESSES);
                return EXIT_USAGE;
            }
            break;
        case 'T':
            errno = 0;
            l->timeout_s = strtod(optarg, &end);
            if (errno != 0 || *end != '\0' || !(l->timeout_s > 0) ||
                l->timeout_s > 1e9) {
                say("--timeout %s: expected a positive number of seconds",
                    optarg);
                return EXIT_USAGE;
            }
            l->timeout_str = optarg;
            break;
        case 'P':
            prefix = 1;
            break;
        case 'N':
            prefix = 0;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        say("no program to run");
        usage(stderr);
        return EXIT_USAGE;
    }
    l->argv = argv + optind;

    if (config == NULL && getenv("RIVET_CONFIG") != NULL &&
        *getenv("RIVET_CONFIG") != '\0')
        config = getenv("RIVET_CONFIG");
    if (rv_config_load(config, &loaded, errbuf, sizeof(errbuf)) != RV_OK) {
        say("%s", errbuf[0] ? errbuf : "cannot load the configuration");
        return 1;
    }
    cfg = *rv_core_config(loaded); /* the launcher reads core's keys only */
    rv_config_free(loaded);
    if (config != NULL) {
        if (realpath(config, config_abs) == NULL) {
            say("%s: %m", config);
            return 1;
        }
        l->config_abs = config_abs;
    }
    if (np == 0 && (cfg.job.processes < 1 || cfg.job.processes > MAX_PROCESSES)) {
        say("job.processes %" PRId64 " is out of [1, %d]", cfg.job.processes,
            MAX_PROCESSES);
        return 1;
    }
    l->size = np != 0 ? (int)np : (int)cfg.job.processes;
    l->threads = cfg.job.threads > 0 && cfg.job.threads < INT_MAX
                     ? (int)cfg.job.threads : 1;
    l->placement = cfg.job.placement;
    l->prefix = prefix >= 0 ? prefix : cfg.job.output_prefix;
    l->self = getpid();

    l->ranks = calloc((size_t)l->size, sizeof(*l->ranks));
    l->max_conns = 2 * l->size + 16;
    l->conns = calloc((size_t)l->max_conns, sizeof(*l->conns));
    if (l->ranks == NULL || l->conns == NULL) {
        say("out of memory");
        code = 1;
        goto out;
    }
    for (int r = 0; r < l->size; r++)
        l->ranks[r].out[0].fd = l->ranks[r].out[1].fd = -1;

    /* Signals are read from a signalfd: block them before the first fork,
     * so that no SIGCHLD is missed; children restore the old mask. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &l->old_mask);
    signal(SIGPIPE, SIG_IGN);
    l->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (l->sig_fd < 0) {
        say("signalfd failed: %m");
        code = 1;
        goto out;
    }
    if (make_socket(l) != 0) {
        code = 1;
        goto out;
    }

    fflush(NULL);
    for (int r = 0; r < l->size; r++) {
        if (spawn(l, r) != 0) {
            l->exit_code = 1;
            end_job(l, SIGKILL, 0);
            break;
        }
    }
    if (l->timeout_s > 0)
        l->timeout_at = now_ms() + (int64_t)(l->timeout_s * 1000.0 + 0.5);

    if (run_loop(l) != 0) {
        l->exit_code = 1;
        signal_groups(l, SIGKILL);
    }
    /* Whatever the ranks left behind in their process groups goes too. */
    signal_groups(l, SIGKILL);
    for (int i = 0; i < 100 && l->nrunning > 0; i++) {
        /* Only after a failure of rivetrun itself: reap what SIGKILL ends,
         * for a second at most. */
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid > 0)
            l->nrunning--;
        else if (pid < 0)
            break;
        else
            nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    for (int r = 0; r < l->size; r++) {
        for (int i = 0; i < 2; i++)
            stream_read(&l->ranks[r].out[i], r);
    }
    code = l->exit_code;

out:
    cleanup(l);
    return code;
}
