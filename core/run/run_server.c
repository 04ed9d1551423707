/*
 * rivetrun's bootstrap server: the listening Unix socket, one connection
 * per rank and the frames of rv_launch_proto.h on them.
 *
 * Every socket is non-blocking. A connection reads a frame's header, then
 * its payload, and handles the frame once it is whole; what it sends waits
 * in a queue of reference-counted frames, so that the reply of an
 * allgather is built once and shared by every rank. Collectives are
 * sequential, so the server keeps a single allgather round: the first
 * contribution of a round sizes the reply, and every contribution is
 * received directly into its place in it.
 *
 * Who may join: the socket's directory keeps other users out (run_dir.c).
 * Among this user's processes, a HELLO must carry the job's token, and the
 * kernel's word on the peer (SO_PEERCRED) must name the process forked as
 * that rank or one of its descendants; the rank must be running and not
 * connected already. A connection refused, or one that breaks the protocol,
 * is closed and named on stderr with its pid; it never ends the job by
 * itself (a rank whose connection is closed learns it in its next
 * collective, and its exit ends the job).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "run_internal.h"

/* Longest description of a protocol error. */
#define WHAT_MAX 160
/* Exit codes are 8 bits, and 0 would read as success: an abort code out
 * of (0, EXIT_CODE_LIMIT) ends the job with 1. */
#define EXIT_CODE_LIMIT 256

/* ---------------------------------------------------------------------- */
/* Frames and connections                                                  */
/* ---------------------------------------------------------------------- */

static frame_t *frame_new(uint32_t type, uint64_t payload_len)
{
    frame_t *f = malloc(sizeof(*f) + sizeof(rv_launch_hdr_t) + payload_len);
    rv_launch_hdr_t hdr = {
        .type = type, .rank = RV_LAUNCH_RANK_LAUNCHER, .len = payload_len};

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

void run_conns_sweep(launcher_t *l)
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
        run_say("out of memory queueing a reply to rank %d", c->rank);
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

/* A connection broke the protocol: it is closed, and only it. A rank that
 * sent a forged frame finds its connection gone in its next collective. */
static void conn_protocol_error(launcher_t *l, conn_t *c, const char *what)
{
    if (c->rank >= 0)
        run_say("closed the bootstrap connection of rank %d (pid %d): %s",
                c->rank, (int)c->peer_pid, what);
    else
        run_say("closed a bootstrap connection from pid %d: %s",
                (int)c->peer_pid, what);
    conn_close(l, c);
}

/* ---------------------------------------------------------------------- */
/* The allgather round                                                     */
/* ---------------------------------------------------------------------- */

static void round_free(launcher_t *l)
{
    frame_unref(l->round);
    l->round = NULL;
    l->round_count = 0;
    for (int r = 0; r < l->size; r++)
        l->ranks[r].contributed = false;
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

/* A round in progress that waits for a rank that has exited never ends. */
void run_round_check_blocked(launcher_t *l)
{
    if (l->round == NULL)
        return;
    for (int r = 0; r < l->size; r++) {
        rank_proc_t *rp = &l->ranks[r];
        if (rp->exited && !rp->contributed) {
            run_job_fail(l, 1,
                         "rank %d (pid %d) exited before the job "
                         "finished (the other ranks wait for it in a "
                         "collective)",
                         r, (int)rp->pid);
            return;
        }
    }
}

/* An ALLGATHER header: the first contribution of a round sizes the reply,
 * and every contribution lands directly in it. Returns false if the
 * connection was closed. */
static bool allgather_header(launcher_t *l, conn_t *c)
{
    const rv_launch_hdr_t *h = &c->hdr;
    char what[WHAT_MAX];

    if (l->ranks[c->rank].contributed) {
        conn_protocol_error(l, c,
                            "second allgather contribution before "
                            "the round ended");
        return false;
    }
    if (l->round == NULL) {
        if (h->len > RV_LAUNCH_MAX_CONTRIB ||
            h->len * (uint64_t)l->size > RV_LAUNCH_MAX_REPLY) {
            snprintf(what, sizeof(what),
                     "allgather of %" PRIu64 " bytes per rank is too large",
                     h->len);
            conn_protocol_error(l, c, what);
            return false;
        }
        l->round = frame_new(RV_LAUNCH_ALLGATHER, h->len * (uint64_t)l->size);
        if (l->round == NULL) {
            run_job_fail(l, 1,
                         "out of memory for an allgather of %" PRIu64
                         " bytes per rank",
                         h->len);
            return false;
        }
        l->round_len = h->len;
        l->round_count = 0;
    } else if (h->len != l->round_len) {
        snprintf(what, sizeof(what),
                 "it contributed %" PRIu64 " bytes to "
                 "an allgather of %" PRIu64 " bytes per rank (do all ranks "
                 "call the same collectives?)",
                 h->len, l->round_len);
        conn_protocol_error(l, c, what);
        return false;
    }
    c->payload = l->round->data + sizeof(rv_launch_hdr_t) +
                 (size_t)c->rank * (size_t)h->len;
    return true;
}

/* ---------------------------------------------------------------------- */
/* Frames received                                                         */
/* ---------------------------------------------------------------------- */

/* Why a HELLO for rank @p r from @p c must be refused, written into
 * @p why; NULL if it may join. The token comes first: a process without it
 * learns nothing about the ranks. */
static const char *hello_refusal(const launcher_t *l, const conn_t *c,
                                 const rv_launch_hello_t *hello, char *why,
                                 size_t cap)
{
    uint32_t r = c->hdr.rank;

    if (rv__launch_token_none(hello->token))
        snprintf(why, cap,
                 "no job token (" RV_LAUNCH_TOKEN_ENV " is not "
                 "in its environment)");
    else if (!rv__launch_token_equal(hello->token, l->token))
        snprintf(why, cap, "wrong job token (" RV_LAUNCH_TOKEN_ENV ")");
    else if (c->peer_uid != geteuid())
        snprintf(why, cap, "it runs as uid %d, the job as uid %d",
                 (int)c->peer_uid, (int)geteuid());
    else if (hello->size != (uint32_t)l->size)
        snprintf(why, cap,
                 "it was told the job has %u ranks, the job has "
                 "%d",
                 hello->size, l->size);
    else if (r >= (uint32_t)l->size)
        snprintf(why, cap, "the job has no rank %u", r);
    else if (l->ranks[r].exited)
        snprintf(why, cap, "rank %u has exited", r);
    else if (!run_rank_owns_pid(l, (int)r, c->peer_pid))
        snprintf(why, cap,
                 "pid %d is neither rank %u's process (pid %d) nor "
                 "one of its descendants",
                 (int)c->peer_pid, r, (int)l->ranks[r].pid);
    else if (l->ranks[r].conn != NULL)
        snprintf(why, cap, "rank %u is connected already", r);
    else
        return NULL;
    return why;
}

static void on_hello(launcher_t *l, conn_t *c)
{
    rv_launch_hello_t hello;
    char why[WHAT_MAX];
    int r = (int)c->hdr.rank;
    frame_t *reply;

    memcpy(&hello, c->payload, sizeof(hello));
    if (hello_refusal(l, c, &hello, why, sizeof(why)) != NULL) {
        run_say("refused a bootstrap connection from pid %d claiming rank "
                "%u: %s; the job goes on",
                (int)c->peer_pid, c->hdr.rank, why);
        conn_close(l, c);
        return;
    }
    /* A rank may join again after its connection ended: after it left
     * cleanly (a program that initializes and finalizes twice, or runs two
     * programs in turn), or after rivetrun closed it. */
    c->rank = r;
    l->ranks[r].conn = c;
    l->ranks[r].joined_pid = c->peer_pid;
    l->ranks[r].in_job = true;
    l->ranks[r].heard_at = run_now_ms();

    reply = frame_new(RV_LAUNCH_HELLO, 0);
    if (reply == NULL) {
        run_job_fail(l, 1, "out of memory");
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
    code = abt.code > 0 && abt.code < EXIT_CODE_LIMIT ? abt.code : 1;
    run_job_fail(l, code, "rank %d aborted: %.*s", c->rank, (int)reason_len,
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
            run_round_check_blocked(l);
        break;
    case RV_LAUNCH_ABORT:
        on_abort(l, c);
        break;
    case RV_LAUNCH_FINI:
        l->ranks[c->rank].in_job = false;
        conn_close(l, c);
        break;
    case RV_LAUNCH_BEAT:
        break; /* on_frame's caller noted when the rank was last heard */
    }
}

/* Before its HELLO is accepted a connection may send only a HELLO; after,
 * only frames of its own rank. Returns false if the connection was
 * closed. */
static bool header_sender_ok(launcher_t *l, conn_t *c)
{
    const rv_launch_hdr_t *h = &c->hdr;
    char what[WHAT_MAX];

    if (c->rank < 0) {
        if (h->type == RV_LAUNCH_HELLO && h->len == sizeof(rv_launch_hello_t))
            return true;
        if (h->type == RV_LAUNCH_HELLO)
            snprintf(what, sizeof(what),
                     "a hello of %" PRIu64 " bytes, not "
                     "%zu",
                     h->len, sizeof(rv_launch_hello_t));
        else
            snprintf(what, sizeof(what),
                     "a frame of type %u (%s) before "
                     "hello",
                     h->type, rv__launch_type_name(h->type));
    } else {
        if (h->rank == (uint32_t)c->rank)
            return true;
        snprintf(what, sizeof(what), "a frame claims rank %u", h->rank);
    }
    conn_protocol_error(l, c, what);
    return false;
}

/* Checks the type of a header other than ALLGATHER, and its length.
 * Returns false if the connection was closed. */
static bool header_type_ok(launcher_t *l, conn_t *c)
{
    const rv_launch_hdr_t *h = &c->hdr;
    char what[WHAT_MAX];

    switch (h->type) {
    case RV_LAUNCH_HELLO:
        if (c->rank < 0)
            return true;
        conn_protocol_error(l, c, "a second hello");
        return false;
    case RV_LAUNCH_ABORT:
        if (h->len >= sizeof(rv_launch_abort_t) &&
            h->len <= sizeof(rv_launch_abort_t) + RV_LAUNCH_MAX_REASON)
            return true;
        snprintf(what, sizeof(what), "an abort frame of %" PRIu64 " bytes",
                 h->len);
        conn_protocol_error(l, c, what);
        return false;
    case RV_LAUNCH_FINI:
    case RV_LAUNCH_BEAT:
        if (h->len == 0)
            return true;
        snprintf(what, sizeof(what), "a %s frame of %" PRIu64 " bytes",
                 rv__launch_type_name(h->type), h->len);
        conn_protocol_error(l, c, what);
        return false;
    default:
        snprintf(what, sizeof(what), "an unknown frame type %u", h->type);
        conn_protocol_error(l, c, what);
        return false;
    }
}

/* A frame header arrived: checks it and says where its payload goes.
 * Returns false if the connection was closed. */
static bool on_header(launcher_t *l, conn_t *c)
{
    if (!header_sender_ok(l, c))
        return false;
    c->payload = NULL;
    c->payload_got = 0;
    if (c->hdr.type == RV_LAUNCH_ALLGATHER)
        return allgather_header(l, c);
    if (!header_type_ok(l, c))
        return false;
    if (c->hdr.len > 0) {
        c->owned = malloc(c->hdr.len);
        if (c->owned == NULL) {
            run_job_fail(l, 1, "out of memory");
            return false;
        }
        c->payload = c->owned;
    }
    return true;
}

void run_conn_read(launcher_t *l, conn_t *c)
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
        if (c->rank >= 0)
            l->ranks[c->rank].heard_at = run_now_ms();
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

void run_conn_on_events(launcher_t *l, conn_t *c, short ev)
{
    if (c->fd >= 0 && (ev & POLLOUT) && !conn_flush(c))
        conn_close(l, c);
    if (c->fd >= 0 && (ev & (POLLIN | POLLHUP | POLLERR)))
        run_conn_read(l, c);
}

/* ---------------------------------------------------------------------- */
/* The listening socket                                                    */
/* ---------------------------------------------------------------------- */

/* Who is on the other side, as the kernel saw it at connect(). */
static int conn_peer(conn_t *c)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return -1;
    c->peer_pid = cred.pid;
    c->peer_uid = cred.uid;
    return 0;
}

void run_server_accept(launcher_t *l)
{
    for (;;) {
        int fd =
            accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        conn_t *c;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN, or a resource shortage: retried next time */
        }
        if (l->nconns == l->max_conns || (c = calloc(1, sizeof(*c))) == NULL) {
            run_say("refused a bootstrap connection: too many");
            close(fd);
            continue;
        }
        c->fd = fd;
        c->rank = -1;
        if (conn_peer(c) != 0) {
            run_say("refused a bootstrap connection: SO_PEERCRED: %m");
            close(fd);
            free(c);
            continue;
        }
        l->conns[l->nconns++] = c;
    }
}

int run_server_open(launcher_t *l)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};

    if (run_dir_create(l) != 0)
        return -1;
    memcpy(sun.sun_path, l->sock_path, strlen(l->sock_path) + 1);

    l->listen_fd =
        socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (l->listen_fd < 0) {
        run_say("cannot create the bootstrap socket: %m");
        goto err_socket;
    }
    if (bind(l->listen_fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
        listen(l->listen_fd, SOMAXCONN) != 0) {
        run_say("cannot listen on %s: %m", l->sock_path);
        goto err_listen;
    }
    return 0;

err_listen:
    close(l->listen_fd);
    l->listen_fd = -1;
err_socket:
    run_dir_remove(l); /* and the socket, which bind may have created */
    return -1;
}

void run_server_stop(launcher_t *l)
{
    for (int i = 0; i < l->nconns; i++)
        conn_close(l, l->conns[i]);
    if (l->listen_fd >= 0) {
        close(l->listen_fd);
        l->listen_fd = -1;
    }
    round_free(l);
}

/* The SysV segments the job's ranks left (rv__launch_sysv_sweep). */
static void sysv_sweep(launcher_t *l)
{
    size_t n = 0;
    pid_t *pids;

    if (l->ranks == NULL ||
        (pids = calloc(2 * (size_t)l->size, sizeof(*pids))) == NULL)
        return;
    for (int r = 0; r < l->size; r++) {
        pids[n++] = l->ranks[r].pid;
        pids[n++] = l->ranks[r].joined_pid;
    }
    int k = rv__launch_sysv_sweep(pids, n);
    if (k > 0)
        run_say("removed %d SysV shared-memory segment%s a killed rank left", k,
                k == 1 ? "" : "s");
    free(pids);
}

void run_server_close(launcher_t *l)
{
    run_server_stop(l);
    run_conns_sweep(l);
    free(l->conns);
    l->conns = NULL;
    sysv_sweep(l);
    run_dir_remove(l);
}
