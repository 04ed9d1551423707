/*
 * Fuzz target: the rank's side of the launch protocol
 * (core/bootstrap/rv_bootstrap_rivetrun.c over core/bootstrap/rv_launch_proto.c): what a
 * process reads from rivetrun's socket, the answer to its HELLO and to
 * every allgather and barrier, with headers whose types and lengths lie,
 * frames cut anywhere, and an end of file at any byte.
 *
 * The process joins as rank 0 of a job of JOB_SIZE, as rivetrun starts it
 * (RIVET_BOOTSTRAP, RIVET_RANK, RIVET_SIZE, RIVET_JOB_TOKEN in the
 * environment; no RIVET_LAUNCHER_PID, so no watch thread), and connects to
 * a Unix socket this program listens on. A thread of this program plays
 * rivetrun: it accepts the connection, writes the input's bytes, closes
 * its sending side and reads until the rank closes. The rank meanwhile
 * makes the collectives the input names, until one fails, then says FINI.
 *
 * The input is a count of collectives (its low 3 bits), one byte per
 * collective (a contribution of that many bytes; 0 is a barrier), then
 * rivetrun's bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "rv_bootstrap.h"
#include "rv_launch_proto.h"
#include "rv_status.h"

#define JOB_SIZE 2
#define MAX_COLLS 7
#define DRAIN_BUF 4096

static int listen_fd = -1;

typedef struct server {
    const uint8_t *bytes;
    size_t len;
} server_t;

/* rivetrun's side of one run. */
static void *serve(void *arg)
{
    server_t *s = arg;
    uint8_t drain[DRAIN_BUF];
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return NULL;
    for (size_t off = 0; off < s->len;) {
        ssize_t n = send(fd, s->bytes + off, s->len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    while (recv(fd, drain, sizeof(drain), 0) > 0)
        ;
    close(fd);
    return NULL;
}

static char sock_dir[] = "/tmp/rivet-fuzz-rank-XXXXXX";
static struct sockaddr_un sock_addr = {.sun_family = AF_UNIX};

/* Nothing of this program is left on disk. */
static void remove_socket(void)
{
    unlink(sock_addr.sun_path);
    rmdir(sock_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char addr[sizeof(sock_addr.sun_path) + 8];
    char hex[RV_LAUNCH_TOKEN_HEX];
    uint8_t token[RV_LAUNCH_TOKEN_BYTES];
    (void)argc;
    (void)argv;

    rv_log_level = RV_LOG_FATAL; /* every refusal is logged, not read */
    if (mkdtemp(sock_dir) == NULL)
        abort();
    snprintf(sock_addr.sun_path, sizeof(sock_addr.sun_path), "%s/s",
             sock_dir);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0 ||
        bind(listen_fd, (struct sockaddr *)&sock_addr, sizeof(sock_addr)) !=
            0 ||
        listen(listen_fd, 4) != 0)
        abort();
    atexit(remove_socket);
    snprintf(addr, sizeof(addr), RV_LAUNCH_ADDR_PREFIX "%s",
             sock_addr.sun_path);
    for (int i = 0; i < RV_LAUNCH_TOKEN_BYTES; i++)
        token[i] = (uint8_t)(0x42 + i);
    rv__launch_token_format(token, hex);
    setenv("RIVET_BOOTSTRAP", addr, 1);
    setenv("RIVET_RANK", "0", 1);
    setenv("RIVET_SIZE", "2", 1);
    setenv(RV_LAUNCH_TOKEN_ENV, hex, 1);
    unsetenv(RV_LAUNCH_PID_ENV);
    unsetenv("RIVET_LOCAL_RANK");
    unsetenv("RIVET_LOCAL_SIZE");
    return 0;
}

/* The rank's side: join, the collectives, FINI. */
static void rank(unsigned ncolls, const uint8_t *lens)
{
    uint8_t contrib[256], out[256 * JOB_SIZE];
    rv_bootstrap_t *bs;

    if (rv__bootstrap_rivetrun_create(getenv("RIVET_BOOTSTRAP"), &bs) != RV_OK)
        return;
    for (unsigned i = 0; i < ncolls; i++) {
        memset(contrib, (int)i, lens[i]);
        if (bs->ops->allgather(bs, contrib, out, lens[i]) != RV_OK)
            break;
    }
    bs->ops->fini(bs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t lens[MAX_COLLS];
    unsigned ncolls = fuzz_u8(&in) & MAX_COLLS;
    pthread_t t;

    for (unsigned i = 0; i < ncolls; i++)
        lens[i] = fuzz_u8(&in);
    /* Exactly the bytes rivetrun sends, so that a read past them shows. */
    server_t s = {.bytes = fuzz_copy(in.p, in.left), .len = in.left};
    if (pthread_create(&t, NULL, serve, &s) != 0)
        abort();
    rank(ncolls, lens);
    pthread_join(t, NULL);
    fuzz_free((uint8_t *)s.bytes, s.len);
    return 0;
}
