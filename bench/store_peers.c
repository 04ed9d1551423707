/*
 * store-peers: the object store's baselines, measured as rv-store-bench
 * measures rivet ("Plasma over RDMA" compares with Redis and with plain
 * sockets).
 *
 *   store-peers redis PORT [SIZES]    Redis on 127.0.0.1:PORT through
 *       hiredis's blocking client: per size, R keys are SET (untimed),
 *       then each is fetched with GET (the client does not hold the value:
 *       every GET moves it), then SET, GET and DEL are timed one by one.
 *       System redis-hiredis. (bench/store.sh runs redis-benchmark beside
 *       it: Redis driven as its users drive it.)
 *   store-peers socket-server PORT    a TCP server on 127.0.0.1:PORT that
 *       answers each 8-byte request N with N bytes, blocking in the kernel
 *       until a request or room to send arrives.
 *   store-peers socket PORT [SIZES]   its client: per size, R requests of
 *       N bytes, each read whole, blocking. System socket-blocking.
 *   store-peers socket-busy-server PORT, socket-busy PORT [SIZES]   the
 *       same exchange with both sides busy-polling, as rivet's two
 *       processes do: every send and receive is non-blocking
 *       (MSG_DONTWAIT) and retried at once while it would block, so that
 *       neither side sleeps in the kernel. System socket-busypoll.
 *   store-peers local [SIZES]         the in-process baseline of the
 *       store's local operations: a uthash table of objects plus memcpy,
 *       put (allocate + copy + insert), get (find, reference, find,
 *       release) and delete (find, remove, free), timed one by one on
 *       R objects per size, in a heap faulted in at start as the store's
 *       memory is (store.preallocate). System uthash.
 *
 * Rows as rv-store-bench's: "system,transport,op,size,latency_us,mb_per_s"
 * (median latency; MB = 10^6 B).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

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


static void row(const char *sys, const char *tp, const char *op, size_t size,
                double lat_s)
{
    printf("%s,%s,%s,%zu,%.3f,%.1f\n", sys, tp, op, size, lat_s * 1e6,
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
        row("redis-hiredis", "tcp", "fetch", size, bench_median(lat, reps));
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
            row("redis-hiredis", "tcp", ops[op], size, bench_median(lat, reps));
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

/*
 * Moves @p n bytes on @p fd. Blocking (@p busy 0), each call sleeps in the
 * kernel until it can make progress; busy-polling, each call is
 * non-blocking and one that would block is retried at once, as a
 * busy-polling transport's progress loop does.
 */
static int full_io(int fd, void *buf, size_t n, int rd, int busy)
{
    int flags = busy ? MSG_DONTWAIT : 0;
    for (size_t done = 0; done < n;) {
        ssize_t r = rd ? recv(fd, (char *)buf + done, n - done, flags)
                       : send(fd, (const char *)buf + done, n - done,
                              flags | MSG_NOSIGNAL);
        if (r < 0 && busy && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int run_server(int port, int busy)
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
    while (full_io(fd, &n, sizeof(n), 1, busy) == 0) {
        if (n > cap) {
            /* Written, as an object is: a buffer never written would be
             * sent from the kernel's one zero page. */
            free(buf);
            buf = malloc(n);
            if (buf == NULL)
                break;
            memset(buf, 'v', n);
            cap = n;
        }
        if (full_io(fd, buf, n, 0, busy) != 0)
            break;
    }
    free(buf);
    close(fd);
    close(ls);
    return 0;
}

static int connect_local(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; tries < 100; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
        close(fd);
        usleep(20000);
    }
    fprintf(stderr, "store-peers: cannot connect to port %d\n", port);
    return -1;
}

static int run_client(int port, int busy)
{
    int fd = connect_local(port);
    if (fd < 0)
        return 1;
    double lat[200];
    for (int k = 0; k < nsizes; k++) {
        uint64_t n = sizes[k];
        int reps = bench_reps_of(n);
        char *buf = malloc(n + 1);
        for (int i = -1; i < reps; i++) {
            double t0 = now_s();
            if (full_io(fd, &n, sizeof(n), 0, busy) != 0 ||
                full_io(fd, buf, n, 1, busy) != 0) {
                fprintf(stderr, "store-peers: the socket transfer failed\n");
                return 1;
            }
            if (i >= 0)
                lat[i] = now_s() - t0;
        }
        if (n > 0 && (buf[0] != 'v' || buf[n - 1] != 'v')) {
            fprintf(stderr, "store-peers: FAILED: the bytes received\n");
            return 1;
        }
        row(busy ? "socket-busypoll" : "socket-blocking", "tcp", "fetch", n,
            bench_median(lat, reps));
        free(buf);
    }
    close(fd);
    return 0;
}

/* ---------------------------------------------------------------------- */

/* The size of the store's object ids (RV_OBJECT_ID_SIZE), the baseline's
 * keys. */
#define KEY_SIZE 20

typedef struct entry {
    uint8_t key[KEY_SIZE];
    size_t size;
    int refs;
    UT_hash_handle hh;
    uint8_t data[];
} entry_t;

/*
 * Faults in @p bytes of heap and keeps them: every block comes from the
 * heap (no mmap of its own, which would fault in afresh on each large
 * allocation) and the heap is never trimmed, so that puts, like the
 * store's creates with store.preallocate, never wait for new memory.
 */
static int prefault_heap(size_t bytes)
{
    if (mallopt(M_MMAP_MAX, 0) != 1 || mallopt(M_TRIM_THRESHOLD, -1) != 1)
        return -1;
    void *p = malloc(bytes);
    if (p == NULL)
        return -1;
    /* Not zeros: malloc and memset of 0 may become calloc, which skips
     * the memory fresh from the kernel (zero already) and faults in none
     * of it. Without the barrier the compiler may drop the unread stores,
     * and the allocation with them. */
    memset(p, 0x5a, bytes);
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
    return 0;
}

/* The heap the local operations use at most: a size's objects, its
 * source, and room for the table's buckets. */
static size_t heap_needed(void)
{
    size_t most = 0;
    for (int k = 0; k < nsizes; k++) {
        size_t n = (size_t)bench_reps_of(sizes[k]) *
                       (sizes[k] + sizeof(entry_t) + 64) +
                   sizes[k];
        most = n > most ? n : most;
    }
    return most + ((size_t)16 << 20);
}

static void key_of(uint8_t *key, size_t size, int i)
{
    memset(key, 0, KEY_SIZE);
    snprintf((char *)key, KEY_SIZE, "local/%zu/%d", size, i);
}

static int table_put(entry_t **table, const uint8_t *key, const void *src,
                     size_t size)
{
    entry_t *e = malloc(sizeof(*e) + size);
    if (e == NULL)
        return -1;
    memcpy(e->key, key, KEY_SIZE);
    e->size = size;
    e->refs = 0;
    memcpy(e->data, src, size);
    HASH_ADD(hh, *table, key, KEY_SIZE, e);
    return 0;
}

/* Get and release, as the store's get of a local object and its release:
 * each looks the key up. */
static int table_get_release(entry_t **table, const uint8_t *key,
                             const void **data)
{
    entry_t *e;
    HASH_FIND(hh, *table, key, KEY_SIZE, e);
    if (e == NULL)
        return -1;
    e->refs++;
    *data = e->data;
    HASH_FIND(hh, *table, key, KEY_SIZE, e);
    e->refs--;
    return 0;
}

static int table_delete(entry_t **table, const uint8_t *key)
{
    entry_t *e;
    HASH_FIND(hh, *table, key, KEY_SIZE, e);
    if (e == NULL || e->refs != 0)
        return -1;
    HASH_DEL(*table, e);
    free(e);
    return 0;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Times op 0 (put), 1 (get) or 2 (delete) on R objects of @p size. */
static int time_op(entry_t **table, int op, size_t size, const uint8_t *src,
                   double *lat)
{
    int reps = bench_reps_of(size);
    uint8_t key[KEY_SIZE];
    const void *data = NULL;
    long faults = minor_faults();
    for (int i = 0; i < reps; i++) {
        key_of(key, size, i);
        double t0 = now_s();
        int rc = op == 0   ? table_put(table, key, src, size)
                 : op == 1 ? table_get_release(table, key, &data)
                           : table_delete(table, key);
        lat[i] = now_s() - t0;
        if (rc != 0 || (op == 1 && size > 0 &&
                        ((const uint8_t *)data)[size - 1] != src[size - 1])) {
            fprintf(stderr, "store-peers: FAILED: a local operation\n");
            return -1;
        }
    }
    /* The store's memory is faulted in at start; the baseline's must be
     * too, or its puts would pay a page fault per page (a few faults of
     * the stack's or the table's are allowed). */
    faults = minor_faults() - faults;
    if (faults > reps / 4) {
        fprintf(stderr,
                "store-peers: FAILED: %ld page faults in %d timed "
                "operations of %zu B: the heap was not faulted in\n",
                faults, reps, size);
        return -1;
    }
    return 0;
}

static int run_local(void)
{
    static const char *ops[3] = {"put", "get", "delete"};
    entry_t *table = NULL;
    double lat[200];
    if (prefault_heap(heap_needed()) != 0) {
        fprintf(stderr, "store-peers: cannot fault in the heap\n");
        return 1;
    }
    for (int k = 0; k < nsizes; k++) {
        size_t size = sizes[k];
        uint8_t *src = malloc(size + 1);
        if (src == NULL)
            return 1;
        memset(src, 7, size + 1);
        for (int op = 0; op < 3; op++) {
            if (time_op(&table, op, size, src, lat) != 0)
                return 1;
            row("uthash", "local", ops[op], size,
                bench_median(lat, bench_reps_of(size)));
        }
        free(src);
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: store-peers redis|socket|socket-server|"
                    "socket-busy|socket-busy-server PORT [SIZES]\n"
                    "       store-peers local [SIZES]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "local") == 0) {
        if (argc > 3 || (argc == 3 && parse_sizes(argv[2]) != 0))
            return usage();
        return run_local();
    }
    if (argc < 3 || argc > 4 || (argc == 4 && parse_sizes(argv[3]) != 0))
        return usage();
    int port = atoi(argv[2]);
    if (strcmp(argv[1], "socket-server") == 0)
        return run_server(port, 0);
    if (strcmp(argv[1], "socket-busy-server") == 0)
        return run_server(port, 1);
    if (strcmp(argv[1], "socket") == 0)
        return run_client(port, 0);
    if (strcmp(argv[1], "socket-busy") == 0)
        return run_client(port, 1);
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
    return usage();
}
