/* Small helpers shared by the benchmark programs. */
#ifndef RIVET_BENCH_UTIL_H
#define RIVET_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
