/*
 * Fuzz target: rivetrun's bootstrap server (core/run/run_server.c), the
 * frames of rv_launch_proto.h as it reads them from the ranks'
 * connections: HELLO, ALLGATHER (and the barrier, an empty one), ABORT,
 * FINI, and whatever else a process writes on the socket.
 *
 * The server runs as rivetrun's loop runs it: it listens on a Unix socket
 * (in the abstract namespace, so that nothing is left on disk), accepts
 * with run_server_accept, reads a connection with run_conn_on_events when
 * the loop would see it readable, and sweeps closed connections after
 * each round. Every process of the script is this one, whose pid is each
 * rank's; the job's token, when HELLO carries one, is TOKEN below.
 *
 * The input is a job size, then a script of what the processes do: write
 * bytes on a connection (any bytes: headers whose lengths lie, frames cut
 * anywhere, frames of several ranks interleaved), close one, or exit (as
 * the reaper tells the server). What the server sends back is read and
 * dropped, as a rank would.
 *
 * What run_server.c calls in the rest of rivetrun is replaced here:
 * failing the job closes every connection, as the loop's run_end_job does,
 * without signalling anyone; a pid belongs to a rank when it is the rank's
 * own; the socket's directory is none.
 */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "run_internal.h"

#define MAX_SIZE 4      /* ranks of the job */
#define MAX_PEERS 6     /* connections of the script, spares included */
#define MAX_STEPS 64    /* steps of one script */
#define DRAIN_BUF 65536

/* The job's token in the seeds (16 bytes). */
#define TOKEN "rivet-fuzz-token"

enum { STEP_WRITE, STEP_CLOSE, STEP_EXIT, STEP_KINDS };

/* ---------------------------------------------------------------------- */
/* What run_server.c needs from the rest of rivetrun                       */

/* The server's checks of who joins and its socket's directory, which
 * run_server.c calls as it grows them: declared here as well and defined
 * weak, so that this links whether run_server.c uses them yet or not. */
bool run_rank_owns_pid(const launcher_t *l, int r, pid_t pid);
int run_dir_create(launcher_t *l);
void run_dir_remove(launcher_t *l);

void run_say(const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
}

int64_t run_now_ms(void)
{
    return 0;
}

void run_job_fail(launcher_t *l, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (l->phase != PHASE_RUNNING)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    l->exit_code = code;
    l->phase = PHASE_ENDING;
    run_server_stop(l);
}

__attribute__((weak)) bool run_rank_owns_pid(const launcher_t *l, int r,
                                             pid_t pid)
{
    return l->ranks[r].pid == pid;
}

__attribute__((weak)) int run_dir_create(launcher_t *l)
{
    (void)l;
    return -1;
}

__attribute__((weak)) void run_dir_remove(launcher_t *l)
{
    (void)l;
}

/* ---------------------------------------------------------------------- */

/* One process's end of a connection, and the server's conn_t. */
typedef struct peer {
    int fd;     /* -1: none yet, or closed */
    conn_t *c;  /* NULL until accepted, and once the server swept it */
} peer_t;

static struct sockaddr_un listen_addr;
static socklen_t listen_addr_len;

/* The server's socket, in the abstract namespace, as run_server_open
 * makes it but for the name. */
static int listen_open(void)
{
    static unsigned serial;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int n;

    if (fd < 0)
        abort();
    listen_addr = (struct sockaddr_un){.sun_family = AF_UNIX};
    n = snprintf(listen_addr.sun_path + 1, sizeof(listen_addr.sun_path) - 1,
                 "rivet-fuzz-%d-%u", (int)getpid(), serial++);
    listen_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                  1 + (size_t)n);
    if (bind(fd, (struct sockaddr *)&listen_addr, listen_addr_len) != 0 ||
        listen(fd, MAX_PEERS) != 0)
        abort();
    return fd;
}

/* Connects @p p, and has the server accept it as its loop would. */
static void peer_open(launcher_t *l, peer_t *p)
{
    int before = l->nconns, fd;

    if (l->listen_fd < 0)
        return; /* the job is ending */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        connect(fd, (struct sockaddr *)&listen_addr, listen_addr_len) != 0)
        abort();
    run_server_accept(l);
    p->fd = fd;
    p->c = l->nconns > before ? l->conns[l->nconns - 1] : NULL;
}

/* Reads and drops what the server sent to @p p. */
static void peer_drain(peer_t *p)
{
    static char buf[DRAIN_BUF];

    while (p->fd >= 0 && recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
        ;
}

/* One round of the loop: the server handles what @p p did, then sweeps
 * the connections it closed. */
static void serve(launcher_t *l, peer_t *peers, peer_t *p)
{
    if (p->c != NULL)
        run_conn_on_events(l, p->c, POLLIN | POLLOUT);
    for (int i = 0; i < MAX_PEERS; i++) {
        peer_drain(&peers[i]);
        if (peers[i].c != NULL && peers[i].c->fd < 0)
            peers[i].c = NULL; /* the sweep frees it */
    }
    run_conns_sweep(l);
}

static void step(launcher_t *l, peer_t *peers, fuzz_in_t *in)
{
    static uint8_t buf[UINT16_MAX];
    uint8_t op = fuzz_u8(in);
    int who = op >> 2;
    peer_t *p = &peers[who % MAX_PEERS];
    size_t len;

    switch ((op & 3) % STEP_KINDS) {
    case STEP_WRITE:
        if (p->fd < 0)
            peer_open(l, p);
        len = fuzz_u16(in);
        len = len < in->left ? len : in->left;
        fuzz_take(in, buf, len);
        if (p->fd >= 0)
            (void)send(p->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        break;
    case STEP_CLOSE:
        if (p->fd >= 0)
            close(p->fd);
        p->fd = -1;
        break;
    case STEP_EXIT:
        /* The reaper saw a rank exit. */
        if (who % MAX_SIZE < l->size) {
            l->ranks[who % MAX_SIZE].exited = true;
            run_round_check_blocked(l);
        }
        return;
    }
    serve(l, peers, p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    launcher_t l = {.sig_fd = -1, .phase = PHASE_RUNNING};
    peer_t peers[MAX_PEERS];

    l.self = getpid();
    l.size = 1 + fuzz_u8(&in) % MAX_SIZE;
    l.ranks = calloc((size_t)l.size, sizeof(*l.ranks));
    l.max_conns = MAX_PEERS;
    l.conns = calloc((size_t)l.max_conns, sizeof(*l.conns));
    if (l.ranks == NULL || l.conns == NULL)
        abort();
    for (int r = 0; r < l.size; r++)
        l.ranks[r].pid = getpid();
#ifdef RV_LAUNCH_TOKEN_BYTES /* a HELLO carries the job's token */
    memcpy(l.token, TOKEN, sizeof(l.token));
#endif
    l.listen_fd = listen_open();
    for (int i = 0; i < MAX_PEERS; i++)
        peers[i] = (peer_t){.fd = -1};

    for (int n = 0; n < MAX_STEPS && in.left > 0; n++)
        step(&l, peers, &in);

    run_server_stop(&l);
    run_conns_sweep(&l);
    free(l.conns);
    for (int i = 0; i < MAX_PEERS; i++)
        if (peers[i].fd >= 0)
            close(peers[i].fd);
    free(l.ranks);
    return 0;
}
