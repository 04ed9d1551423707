/*
 * store-peers: the object store's baselines, measured as rv-store-bench
 * measures rivet ("Plasma over RDMA" compares with Redis and with plain
 * sockets).
 *
 *   store-peers redis PORT [SIZES]    Redis on 127.0.0.1:PORT (hiredis):
 *       per size, R keys are SET (untimed), then each is fetched with GET
 *       (the client does not hold the value: every GET moves it), then
 *       SET, GET and DEL are timed one by one as the local operations.
 *   store-peers socket-server PORT    a TCP server on 127.0.0.1:PORT that
 *       answers each 8-byte request N with N bytes.
 *   store-peers socket PORT [SIZES]   its client: per size, R requests of
 *       N bytes, each read whole.
 *
 * Rows as rv-store-bench's: "system,transport,op,size,latency_us,mb_per_s"
 * (median latency; MB = 10^6 B).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"

#ifdef HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define MAX_SIZES 16

static size_t sizes[MAX_SIZES] = {1 << 10,  4 << 10,   16 << 10, 32 << 10,
                                  64 << 10, 256 << 10, 1 << 20,  4 << 20,
                                  16 << 20};
static int nsizes = 9;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}


static void row(const char *sys, const char *op, size_t size, double lat_s)
{
    printf("%s,tcp,%s,%zu,%.3f,%.1f\n", sys, op, size, lat_s * 1e6,
           lat_s > 0 ? (double)size / lat_s / 1e6 : 0.0);
    fflush(stdout);
}

static int parse_sizes(const char *text)
{
    nsizes = 0;
    for (const char *p = text; *p && nsizes < MAX_SIZES;) {
        char *end;
        sizes[nsizes++] = strtoull(p, &end, 0);
        if (end == p)
            return -1;
        p = *end == ',' ? end + 1 : end;
    }
    return nsizes > 0 ? 0 : -1;
}

/* ---------------------------------------------------------------------- */

#ifdef HAVE_HIREDIS
static int redis_check(redisReply *r, int type, const char *what)
{
    if (r == NULL || r->type != type) {
        fprintf(stderr, "store-peers: redis %s failed%s%s\n", what,
                r && r->type == REDIS_REPLY_ERROR ? ": " : "",
                r && r->type == REDIS_REPLY_ERROR ? r->str : "");
        return -1;
    }
    return 0;
}

static int run_redis(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (c == NULL || c->err) {
        fprintf(stderr, "store-peers: cannot connect to redis on port %d\n",
                port);
        return 1;
    }
    double lat[200];
    for (int k = 0; k < nsizes; k++) {
        size_t size = sizes[k];
        int reps = bench_reps_of(size);
        char *val = malloc(size + 1);
        memset(val, 'v', size);
        char key[64];
        for (int i = 0; i < reps; i++) {
            snprintf(key, sizeof(key), "bench/%zu/%d", size, i);
            redisReply *r = redisCommand(c, "SET %s %b", key, val, size);
            if (redis_check(r, REDIS_REPLY_STATUS, "SET") < 0)
                return 1;
            freeReplyObject(r);
        }
        for (int i = 0; i < reps; i++) {
            snprintf(key, sizeof(key), "bench/%zu/%d", size, i);
            double t0 = now_s();
            redisReply *r = redisCommand(c, "GET %s", key);
            lat[i] = now_s() - t0;
            if (redis_check(r, REDIS_REPLY_STRING, "GET") < 0 ||
                r->len != size) {
                fprintf(stderr, "store-peers: GET returned %zu bytes\n",
                        r ? r->len : 0);
                return 1;
            }
            freeReplyObject(r);
        }
        row("redis", "fetch", size, bench_median(lat, reps));
        /* The local operations, on fresh keys. */
        const char *ops[3] = {"put", "get", "delete"};
        for (int op = 0; op < 3; op++) {
            for (int i = 0; i < reps; i++) {
                snprintf(key, sizeof(key), "ops/%zu/%d", size, i);
                double t0 = now_s();
                redisReply *r =
                    op == 0   ? redisCommand(c, "SET %s %b", key, val, size)
                    : op == 1 ? redisCommand(c, "GET %s", key)
                              : redisCommand(c, "DEL %s", key);
                lat[i] = now_s() - t0;
                int want = op == 0   ? REDIS_REPLY_STATUS
                           : op == 1 ? REDIS_REPLY_STRING
                                     : REDIS_REPLY_INTEGER;
                if (redis_check(r, want, ops[op]) < 0)
                    return 1;
                freeReplyObject(r);
            }
            row("redis", ops[op], size, bench_median(lat, reps));
        }
        redisReply *r = redisCommand(c, "FLUSHALL");
        freeReplyObject(r);
        free(val);
    }
    redisFree(c);
    return 0;
}
#endif

/* ---------------------------------------------------------------------- */

static int full_io(int fd, void *buf, size_t n, int rd)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = rd ? read(fd, (char *)buf + done, n - done)
                       : write(fd, (const char *)buf + done, n - done);
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int run_server(int port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0) {
        perror("store-peers: socket-server");
        return 1;
    }
    int fd = accept(ls, NULL, NULL);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char *buf = NULL;
    size_t cap = 0;
    uint64_t n;
    while (full_io(fd, &n, sizeof(n), 1) == 0) {
        if (n > cap) {
            free(buf);
            buf = calloc(1, n);
            cap = n;
        }
        if (full_io(fd, buf, n, 0) != 0)
            break;
    }
    free(buf);
    close(fd);
    close(ls);
    return 0;
}

static int run_client(int port)
{
    int fd = -1, one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; tries < 100; tries++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
            break;
        close(fd);
        fd = -1;
        usleep(20000);
    }
    if (fd < 0) {
        fprintf(stderr, "store-peers: cannot connect to port %d\n", port);
        return 1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    double lat[200];
    for (int k = 0; k < nsizes; k++) {
        uint64_t n = sizes[k];
        int reps = bench_reps_of(n);
        char *buf = malloc(n + 1);
        for (int i = -1; i < reps; i++) {
            double t0 = now_s();
            if (full_io(fd, &n, sizeof(n), 0) != 0 ||
                full_io(fd, buf, n, 1) != 0) {
                fprintf(stderr, "store-peers: the socket transfer failed\n");
                return 1;
            }
            if (i >= 0)
                lat[i] = now_s() - t0;
        }
        row("socket", "fetch", n, bench_median(lat, reps));
        free(buf);
    }
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (argc > 3 && parse_sizes(argv[3]) != 0)) {
        fprintf(stderr, "usage: store-peers redis|socket|socket-server PORT "
                        "[SIZES]\n");
        return 2;
    }
    int port = atoi(argv[2]);
    if (strcmp(argv[1], "socket-server") == 0)
        return run_server(port);
    if (strcmp(argv[1], "socket") == 0)
        return run_client(port);
    if (strcmp(argv[1], "redis") == 0) {
#ifdef HAVE_HIREDIS
        return run_redis(port);
#else
        fprintf(stderr, "store-peers: built without hiredis (install "
                        "libhiredis-dev and reconfigure)\n");
        return 2;
#endif
    }
    fprintf(stderr, "store-peers: unknown mode %s\n", argv[1]);
    return 2;
}
