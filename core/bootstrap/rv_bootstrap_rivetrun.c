/*
 * The rivetrun bootstrap provider: the client side of rv_launch_proto.h.
 *
 * rivetrun exports RIVET_BOOTSTRAP=unix:<path>, RIVET_JOB_TOKEN, RIVET_RANK,
 * RIVET_SIZE, RIVET_LOCAL_RANK and RIVET_LOCAL_SIZE. The process presents
 * the token in its HELLO (rivetrun refuses a process without it, and one it
 * did not start) and keeps one blocking
 * connection to rivetrun; every collective is a request and one reply on
 * it. When rivetrun ends the job it closes the connection, so a process
 * waiting in a collective reads end-of-file and fails with
 * RV_ERR_BOOTSTRAP instead of waiting forever.
 *
 * Thread mode: serialized (one collective at a time, as rv_bootstrap.h
 * requires of every provider).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rv_bootstrap.h"
#include "rv_launch_proto.h"

typedef struct rv_bootstrap_rivetrun {
    rv_bootstrap_t super;       /* first: the provider is a bootstrap */
    int fd;                     /* connection to rivetrun, -1 once broken */
    rv_launcher_watch_t *watch; /* ends the rank if rivetrun is gone */
    /* Every frame is written under it: the watch's beats come from its
     * own thread (rv_bootstrap_watch.c). */
    pthread_mutex_t send_lock;
} rv_bootstrap_rivetrun_t;

static rv_bootstrap_rivetrun_t *to_rivetrun(rv_bootstrap_t *bs)
{
    return (rv_bootstrap_rivetrun_t *)bs;
}

/* Reads an integer environment variable in [min, max]. */
static rv_status_t env_int(const char *name, int min, int max, int def,
                           int *value_p)
{
    const char *str = getenv(name);
    char *end;
    long value;

    if (str == NULL || *str == '\0') {
        if (def < min) {
            rv_error("bootstrap: RIVET_BOOTSTRAP is set but %s is not; "
                     "start the program with rivetrun",
                     name);
            return RV_ERR_BOOTSTRAP;
        }
        *value_p = def;
        return RV_OK;
    }
    errno = 0;
    value = strtol(str, &end, 10);
    if (errno != 0 || *end != '\0' || end == str || value < min ||
        value > max) {
        rv_error("bootstrap: %s=%s is not an integer in [%d, %d]", name, str,
                 min, max);
        return RV_ERR_BOOTSTRAP;
    }
    *value_p = (int)value;
    return RV_OK;
}

/* Sends one frame on the connection, under the lock the watch's beats
 * take too. */
static rv_status_t rivetrun_send(rv_bootstrap_rivetrun_t *rbs, uint32_t type,
                                 const void *payload, size_t len)
{
    rv_status_t status;

    pthread_mutex_lock(&rbs->send_lock);
    status =
        rv__launch_send(rbs->fd, type, (uint32_t)rbs->super.rank, payload, len);
    pthread_mutex_unlock(&rbs->send_lock);
    return status;
}

/* Marks the connection broken after an error: later calls fail at once. */
static void rivetrun_break(rv_bootstrap_rivetrun_t *rbs)
{
    if (rbs->fd >= 0) {
        close(rbs->fd);
        rbs->fd = -1;
    }
}

/* Logs a failed exchange with rivetrun; always returns RV_ERR_BOOTSTRAP. */
static rv_status_t rivetrun_failed(rv_bootstrap_rivetrun_t *rbs,
                                   const char *what, rv_status_t status)
{
    if (status == RV_ERR_PEER)
        rv_error("bootstrap: rivetrun closed the connection during %s "
                 "(the job is ending or rivetrun is gone)",
                 what);
    else if (status == RV_ERR_IO)
        rv_error("bootstrap: %s with rivetrun failed: %m", what);
    else
        rv_error("bootstrap: %s with rivetrun failed: %s", what,
                 rv_status_str(status));
    rivetrun_break(rbs);
    return RV_ERR_BOOTSTRAP;
}

static rv_status_t rivetrun_allgather(rv_bootstrap_t *bs, const void *in,
                                      void *out, size_t len)
{
    rv_bootstrap_rivetrun_t *rbs = to_rivetrun(bs);
    const char *what = len == 0 ? "barrier" : "allgather";
    uint64_t expect = (uint64_t)len * (uint64_t)bs->size;
    rv_launch_hdr_t hdr;
    rv_status_t status;

    if (rbs->fd < 0) {
        rv_error("bootstrap: %s after an earlier bootstrap failure", what);
        return RV_ERR_BOOTSTRAP;
    }
    if (len > RV_LAUNCH_MAX_CONTRIB || expect > RV_LAUNCH_MAX_REPLY) {
        rv_error("bootstrap: allgather of %zu bytes per rank is larger than "
                 "rivetrun accepts (%llu per rank, %llu in all)",
                 len, RV_LAUNCH_MAX_CONTRIB, RV_LAUNCH_MAX_REPLY);
        return RV_ERR_INVALID;
    }

    status = rivetrun_send(rbs, RV_LAUNCH_ALLGATHER, in, len);
    if (status != RV_OK)
        return rivetrun_failed(rbs, what, status);
    status = rv__launch_recv_hdr(rbs->fd, &hdr);
    if (status != RV_OK)
        return rivetrun_failed(rbs, what, status);
    if (hdr.type != RV_LAUNCH_ALLGATHER || hdr.len != expect) {
        rv_error("bootstrap: rivetrun answered %s with %s of %llu bytes, "
                 "expected %llu bytes",
                 what, rv__launch_type_name(hdr.type),
                 (unsigned long long)hdr.len, (unsigned long long)expect);
        rivetrun_break(rbs);
        return RV_ERR_BOOTSTRAP;
    }
    if (expect > 0) {
        status = rv__launch_read_full(rbs->fd, out, (size_t)expect);
        if (status != RV_OK)
            return rivetrun_failed(rbs, what, status);
    }
    return RV_OK;
}

static rv_status_t rivetrun_barrier(rv_bootstrap_t *bs)
{
    return rivetrun_allgather(bs, NULL, NULL, 0);
}

static void rivetrun_abort(rv_bootstrap_t *bs, int code, const char *why)
{
    rv_bootstrap_rivetrun_t *rbs = to_rivetrun(bs);
    size_t why_len = why != NULL ? strlen(why) : 0;
    struct {
        rv_launch_abort_t abt;
        char reason[RV_LAUNCH_MAX_REASON];
    } msg;

    if (why_len > RV_LAUNCH_MAX_REASON)
        why_len = RV_LAUNCH_MAX_REASON;
    if (code <= 0 || code > 255)
        code = 1;
    memset(&msg.abt, 0, sizeof(msg.abt));
    msg.abt.code = code;
    if (why_len > 0)
        memcpy(msg.reason, why, why_len);

    /* rivetrun reads the frame before it handles this process's exit (the
     * bytes are in the socket before _exit), so it reports the reason rather
     * than the exit code. */
    if (rbs->fd < 0 || rivetrun_send(rbs, RV_LAUNCH_ABORT, &msg,
                                     sizeof(msg.abt) + why_len) != RV_OK)
        rv_error("job aborted with code %d: %s (rivetrun could not be told)",
                 code, why ? why : "");
    _exit(code);
}

static void rivetrun_fini(rv_bootstrap_t *bs)
{
    rv_bootstrap_rivetrun_t *rbs = to_rivetrun(bs);

    /* Before FINI: rivetrun closes the connection after it. */
    rv__launcher_watch_stop(rbs->watch);
    if (rbs->fd >= 0) {
        /* A failure here means rivetrun is already ending the job; there is
         * nothing left to tell it. */
        (void)rivetrun_send(rbs, RV_LAUNCH_FINI, NULL, 0);
        close(rbs->fd);
    }
    pthread_mutex_destroy(&rbs->send_lock);
    free(rbs);
}

/* Reads the job's token from the environment. A missing one is sent as
 * zeros, so that rivetrun names the process it refuses and why. */
static rv_status_t env_token(uint8_t token[RV_LAUNCH_TOKEN_BYTES])
{
    const char *hex = getenv(RV_LAUNCH_TOKEN_ENV);

    memset(token, 0, RV_LAUNCH_TOKEN_BYTES);
    if (hex == NULL || *hex == '\0')
        return RV_OK;
    if (rv__launch_token_parse(hex, token) != RV_OK) {
        rv_error("bootstrap: " RV_LAUNCH_TOKEN_ENV " is not %d hexadecimal "
                 "digits; start the program with rivetrun",
                 2 * RV_LAUNCH_TOKEN_BYTES);
        return RV_ERR_BOOTSTRAP;
    }
    return RV_OK;
}

static const rv_bootstrap_ops_t rivetrun_ops = {
    .name = "rivetrun",
    .allgather = rivetrun_allgather,
    .barrier = rivetrun_barrier,
    .abort = rivetrun_abort,
    .fini = rivetrun_fini,
};

static rv_status_t rivetrun_connect(const char *addr, int *fd_p)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    const char *path;
    int fd;

    if (strncmp(addr, RV_LAUNCH_ADDR_PREFIX, strlen(RV_LAUNCH_ADDR_PREFIX))) {
        rv_error("bootstrap: RIVET_BOOTSTRAP=%s is not of the form "
                 "unix:<path>",
                 addr);
        return RV_ERR_BOOTSTRAP;
    }
    path = addr + strlen(RV_LAUNCH_ADDR_PREFIX);
    if (*path == '\0' || strlen(path) >= sizeof(sun.sun_path)) {
        rv_error("bootstrap: RIVET_BOOTSTRAP=%s: bad socket path", addr);
        return RV_ERR_BOOTSTRAP;
    }
    memcpy(sun.sun_path, path, strlen(path) + 1);

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rv_error("bootstrap: socket() failed: %m");
        return RV_ERR_BOOTSTRAP;
    }
    while (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        if (errno == EINTR)
            continue;
        rv_error("bootstrap: cannot connect to rivetrun at %s: %m (is "
                 "rivetrun still running?)",
                 path);
        close(fd);
        return RV_ERR_BOOTSTRAP;
    }
    *fd_p = fd;
    return RV_OK;
}

rv_status_t rv__bootstrap_rivetrun_create(const char *addr,
                                          rv_bootstrap_t **bs_p)
{
    rv_bootstrap_rivetrun_t *rbs;
    rv_launch_hello_t hello;
    rv_launch_hdr_t hdr;
    rv_status_t status;
    int rank, size, local_rank, local_size;

    memset(&hello, 0, sizeof(hello));

    status = env_int("RIVET_SIZE", 1, INT_MAX, -1, &size);
    if (status != RV_OK)
        return status;
    status = env_int("RIVET_RANK", 0, size - 1, -1, &rank);
    if (status != RV_OK)
        return status;
    status = env_int("RIVET_LOCAL_SIZE", 1, size, size, &local_size);
    if (status != RV_OK)
        return status;
    status = env_int("RIVET_LOCAL_RANK", 0, local_size - 1,
                     rank < local_size ? rank : 0, &local_rank);
    if (status != RV_OK)
        return status;
    status = env_token(hello.token);
    if (status != RV_OK)
        return status;

    rbs = calloc(1, sizeof(*rbs));
    if (rbs == NULL) {
        rv_error("bootstrap: out of memory");
        return RV_ERR_NO_MEMORY;
    }
    rbs->super.ops = &rivetrun_ops;
    rbs->super.rank = rank;
    rbs->super.size = size;
    rbs->super.local_rank = local_rank;
    rbs->super.local_size = local_size;
    pthread_mutex_init(&rbs->send_lock, NULL);

    status = rivetrun_connect(addr, &rbs->fd);
    if (status != RV_OK)
        goto err_free;

    hello.size = (uint32_t)size;
    hello.pid = (uint64_t)getpid();
    status = rv__launch_send(rbs->fd, RV_LAUNCH_HELLO, (uint32_t)rank, &hello,
                             sizeof(hello));
    if (status != RV_OK) {
        status = rivetrun_failed(rbs, "hello", status);
        goto err_free;
    }
    status = rv__launch_recv_hdr(rbs->fd, &hdr);
    if (status == RV_ERR_PEER) {
        rv_error("bootstrap: rivetrun refused this process as rank %d of %d; "
                 "rivetrun's message names it and says why (a wrong or "
                 "missing " RV_LAUNCH_TOKEN_ENV ", a process rivetrun did "
                 "not start, a rank already connected, or RIVET_RANK/"
                 "RIVET_SIZE that do not match the job)",
                 rank, size);
        rivetrun_break(rbs);
        status = RV_ERR_BOOTSTRAP;
        goto err_free;
    }
    if (status != RV_OK) {
        status = rivetrun_failed(rbs, "hello", status);
        goto err_free;
    }
    if (hdr.type != RV_LAUNCH_HELLO || hdr.len != 0) {
        rv_error("bootstrap: rivetrun answered hello with %s of %llu bytes",
                 rv__launch_type_name(hdr.type), (unsigned long long)hdr.len);
        rivetrun_break(rbs);
        status = RV_ERR_BOOTSTRAP;
        goto err_free;
    }

    status = rv__launcher_watch_start(rbs->fd, rank,
                                      addr + strlen(RV_LAUNCH_ADDR_PREFIX),
                                      &rbs->send_lock, &rbs->watch);
    if (status != RV_OK) {
        rivetrun_break(rbs);
        goto err_free;
    }
    *bs_p = &rbs->super;
    return RV_OK;

err_free:
    pthread_mutex_destroy(&rbs->send_lock);
    free(rbs);
    return status;
}
