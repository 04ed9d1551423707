/* Small helpers shared by the benchmark programs. */
#ifndef RIVET_BENCH_UTIL_H
#define RIVET_BENCH_UTIL_H

#include <getopt.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rv_layer.h"

/* Parses "8,64,4096" into sizes[]; returns the count, or -1 if malformed
 * or a size is below @p min. */
static inline int bench_parse_sizes(const char *text, size_t *sizes, int max,
                                    size_t min)
{
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        unsigned long long v = strtoull(p, &end, 0);
        if (end == p || n == max || v < min) {
            fprintf(stderr,
                    "bad size list '%s': sizes are integers >= %zu, "
                    "at most %d, separated by commas\n",
                    text, min, max);
            return -1;
        }
        sizes[n++] = (size_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') {
            fprintf(stderr, "bad size list '%s'\n", text);
            return -1;
        }
    }
    return n;
}

/* Parses a comma-separated list of the @p n names in @p names into
 * idx[] (indices, at most @p n); returns the count, or -1 with a message
 * naming @p prog and the names there are. */
static inline int bench_parse_names(const char *prog, const char *text,
                                    const char *const *names, int n, int *idx)
{
    int count = 0;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        int m = 0;
        while (m < n &&
               (strlen(names[m]) != len || strncmp(names[m], p, len) != 0))
            m++;
        if (m == n || count == n) {
            fprintf(stderr, "%s: bad mode list '%s' (modes:", prog, text);
            for (int i = 0; i < n; i++)
                fprintf(stderr, "%s %s", i ? "," : "", names[i]);
            fprintf(stderr, ")\n");
            return -1;
        }
        idx[count++] = m;
        p += len + (p[len] == ',');
    }
    return count > 0 ? count : -1;
}

/* The options every benchmark takes. */
typedef struct {
    size_t sizes[32];
    int nsizes;
    long iters;  /* -n ITERS; 0: the program's default */
    long window; /* -W WINDOW: operations in flight */
    long warmup; /* -w WARMUP: untimed iterations */
    int csv;     /* --csv: CSV rows only */
    int echo;    /* --echo (rv-pingpong) */
    int api;     /* --api (rv-rma-bw): rma/'s rv_put/rv_get */
    int both;    /* --both (rv-call-bw): both directions at once */
} bench_opts_t;

/* Monotonic time in seconds. */
static inline double bench_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * A send buffer as ucx_perftest's, the baseline's: page-aligned, with its
 * pages present. ucx_perftest allocates its buffers with ucp_mem_map: over
 * shm System V shared memory, whose pages are real memory once touched
 * (over tcp anonymous memory it never writes, where the socket copy, not
 * the source, sets the pace). A buffer never written (calloc's) is mapped
 * to the kernel's one zero page instead, and a rendezvous that copies out
 * of it (CMA over shm) reads a single cached 4 KiB page, twice as fast as
 * real data. It is written once, here, and not per send, as ucx_perftest's
 * is not either.
 */
static inline char *bench_buffer(size_t size)
{
    size_t page = 4096, len = ((size ? size : 1) + page - 1) / page * page;
    char *buf = aligned_alloc(page, len);
    if (buf != NULL)
        memset(buf, 0xa5, len);
    return buf;
}

/* -n ITERS if given, else about @p budget bytes' worth of @p size-byte
 * operations, within [min, max]. */
static inline long bench_iters(const bench_opts_t *o, size_t size,
                               size_t budget, long min, long max)
{
    if (o->iters > 0)
        return o->iters;
    long n = (long)(budget / (size ? size : 1));
    return n < min ? min : n > max ? max : n;
}

/*
 * Parses -s SIZES, -n, -W, -w, --csv, --echo, --api and --both (those
 * named in @p accept by their letters, A for --api, B for --both,
 * e.g. "snW"), checks the job has two processes, and on a problem prints
 * @p usage and finalizes @p ctx.
 * @return -1 to go on, else the exit code to return from main.
 */
static inline int bench_options(rv_context_t *ctx, int argc, char **argv,
                                const char *accept, const char *usage,
                                const char *default_sizes, size_t min_size,
                                bench_opts_t *o)
{
    static const struct option opts[] = {
        {"csv", no_argument, NULL, 'C'},  {"echo", no_argument, NULL, 'E'},
        {"api", no_argument, NULL, 'A'},  {"both", no_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *sizes = default_sizes;
    int c, rc = -1;
    while (rc < 0 &&
           (c = getopt_long(argc, argv, "s:n:W:w:h", opts, NULL)) != -1) {
        if (c != 'C' && c != 'h' && (c == '?' || !strchr(accept, c)))
            c = '?';
        switch (c) {
        case 's':
            sizes = optarg;
            break;
        case 'n':
            o->iters = atol(optarg);
            break;
        case 'W':
            o->window = atol(optarg);
            break;
        case 'w':
            o->warmup = atol(optarg);
            break;
        case 'C':
            o->csv = 1;
            break;
        case 'E':
            o->echo = 1;
            break;
        case 'A':
            o->api = 1;
            break;
        case 'B':
            o->both = 1;
            break;
        default:
            rc = c == 'h' ? 0 : 2;
            break;
        }
    }
    if (rc < 0) {
        o->nsizes = bench_parse_sizes(sizes, o->sizes, 32, min_size);
        if (o->nsizes <= 0 || o->iters < 0 || o->window < 1 || o->warmup < 0)
            rc = 2;
    }
    if (rc < 0 && rv_size(ctx) < 2) {
        fprintf(stderr,
                "%s needs 2 processes (this job has %d); run it with "
                "rivetrun or mpirun\n",
                argv[0], rv_size(ctx));
        rc = 2;
    }
    if (rc >= 0) {
        if (rc != 0 || c == 'h')
            fprintf(stderr, "usage: rivetrun -c JOB.yaml %s %s\n", argv[0],
                    usage);
        rv_finalize(ctx);
    }
    return rc;
}

/*
 * A transport-level region of one worker, published to another with a
 * message (rank 1 serves, rank 0 writes or reads): its address and packed
 * remote key. Register the handler before rv_job_run.
 */
typedef struct {
    rv_handler_id_t h;
    uint64_t addr;
    uint8_t key[1024];
    size_t keylen;
    atomic_int have;
} bench_region_t;

static inline rv_status_t bench_on_region(rv_worker_t *w, rv_msg_t *msg,
                                          void *arg)
{
    bench_region_t *r = arg;
    (void)w;
    if (msg->len < sizeof(r->addr) ||
        msg->len - sizeof(r->addr) > sizeof(r->key))
        return RV_OK; /* not one of ours: ignored */
    memcpy(&r->addr, msg->data, sizeof(r->addr));
    r->keylen = msg->len - sizeof(r->addr);
    memcpy(r->key, (uint8_t *)msg->data + sizeof(r->addr), r->keylen);
    atomic_store(&r->have, 1);
    return RV_OK;
}

static inline rv_status_t
bench_region_register(rv_context_t *ctx, const char *name, bench_region_t *r)
{
    return rv_handler_register(ctx, name, bench_on_region, r, 0, &r->h);
}

/* Sends region @p mem at @p addr to worker @p to; 0 or -1. */
static inline int bench_region_publish(rv_worker_t *w, bench_region_t *r,
                                       rv_tid_t to, rv_tmem_t *mem, void *addr)
{
    rv_transport_t *tp;
    const rv_transport_ops_t *ops =
        rv_context_transport(rv_worker_context(w), &tp);
    uint8_t msg[sizeof(uint64_t) + sizeof(r->key)];
    uint64_t a = (uintptr_t)addr;
    void *key;
    size_t len;
    if (ops->rkey_pack(tp, mem, &key, &len) != RV_OK)
        return -1;
    if (len > sizeof(r->key)) {
        ops->rkey_buffer_release(tp, key);
        return -1;
    }
    memcpy(msg, &a, sizeof(a));
    memcpy(msg + sizeof(a), key, len);
    ops->rkey_buffer_release(tp, key);
    return rv_send(w, to, r->h, msg, sizeof(a) + len, NULL) == RV_OK ? 0 : -1;
}

/* Progresses until the region arrives, then unpacks its key for worker
 * @p from into *rkey_p; 0 or -1. */
static inline int bench_region_fetch(rv_worker_t *w, bench_region_t *r,
                                     rv_tid_t from, rv_trkey_t **rkey_p)
{
    const rv_transport_ops_t *ops =
        rv_context_transport(rv_worker_context(w), NULL);
    while (!atomic_load(&r->have))
        rv_progress(w);
    return ops->rkey_unpack(rv_worker_tworker(w), from, r->key, r->keylen,
                            rkey_p) == RV_OK
               ? 0
               : -1;
}

#endif
