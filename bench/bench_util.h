/* Small helpers shared by the benchmark programs. */
#ifndef RIVET_BENCH_UTIL_H
#define RIVET_BENCH_UTIL_H

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rivet.h"

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
            fprintf(stderr, "bad size list '%s': sizes are integers >= %zu, "
                            "at most %d, separated by commas\n", text, min, max);
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
                                    const char *const *names, int n,
                                    int *idx)
{
    int count = 0;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        int m = 0;
        while (m < n && (strlen(names[m]) != len ||
                         strncmp(names[m], p, len) != 0))
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
    long iters;      /* -n ITERS; 0: the program's default */
    long window;     /* -W WINDOW: operations in flight */
    long warmup;     /* -w WARMUP: untimed iterations */
    int csv;         /* --csv: CSV rows only */
    int echo;        /* --echo (rv-pingpong) */
    int api;         /* --api (rv-rma-bw): rma/'s rv_put/rv_get */
} bench_opts_t;

/* Monotonic time in seconds. */
static inline double bench_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
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
 * Parses -s SIZES, -n, -W, -w, --csv and --echo (those named in @p accept,
 * e.g. "snW"), checks the job has two processes, and on a problem prints
 * @p usage and finalizes @p ctx.
 * @return -1 to go on, else the exit code to return from main.
 */
static inline int bench_options(rv_context_t *ctx, int argc, char **argv,
                                const char *accept, const char *usage,
                                const char *default_sizes, size_t min_size,
                                bench_opts_t *o)
{
    static const struct option opts[] = {{"csv", no_argument, NULL, 'C'},
                                         {"echo", no_argument, NULL, 'E'},
                                         {"api", no_argument, NULL, 'A'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sizes = default_sizes;
    int c, rc = -1;
    while (rc < 0 && (c = getopt_long(argc, argv, "s:n:W:w:h", opts, NULL)) !=
                         -1) {
        if (c != 'C' && c != 'h' && (c == '?' || !strchr(accept, c)))
            c = '?';
        switch (c) {
        case 's': sizes = optarg; break;
        case 'n': o->iters = atol(optarg); break;
        case 'W': o->window = atol(optarg); break;
        case 'w': o->warmup = atol(optarg); break;
        case 'C': o->csv = 1; break;
        case 'E': o->echo = 1; break;
        case 'A': o->api = 1; break;
        default: rc = c == 'h' ? 0 : 2; break;
        }
    }
    if (rc < 0) {
        o->nsizes = bench_parse_sizes(sizes, o->sizes, 32, min_size);
        if (o->nsizes <= 0 || o->iters < 0 || o->window < 1 || o->warmup < 0)
            rc = 2;
    }
    if (rc < 0 && rv_size(ctx) < 2) {
        fprintf(stderr, "%s needs 2 processes (this job has %d); run it with "
                        "rivetrun or mpirun\n", argv[0], rv_size(ctx));
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

#endif
