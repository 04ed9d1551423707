/*
 * Medians of timings, and the repetitions per object size of the object
 * store's benchmarks (rv-store-bench and its baselines, store-peers, take
 * the same number of samples of each size).
 */
#ifndef RIVET_BENCH_STATS_H
#define RIVET_BENCH_STATS_H

#include <stddef.h>
#include <stdlib.h>

/* Repetitions of one size: about 64 MiB moved, 5 .. 200. */
static inline int bench_reps_of(size_t size)
{
    size_t r = ((size_t)64 << 20) / (size ? size : 1);
    return r < 5 ? 5 : r > 200 ? 200 : (int)r;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of @p v[0..n) (sorted in place). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
