/*
 * Helpers for CMocka tests that run as multi-process rivet jobs.
 *
 * Worker threads never call CMocka (it is not thread-safe): they record
 * failures with EXPECT, and the main thread asserts after rv_job_run.
 */
#ifndef RIVET_TESTS_JOB_TEST_H
#define RIVET_TESTS_JOB_TEST_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rivet.h"

#define WAIT_LIMIT_S 120

static atomic_int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(const char *file, int line, const char *fmt, ...)
{
    char buf[512];
    const char *base = strrchr(file, '/');
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&fail_lock);
    if (atomic_fetch_add(&failures, 1) < 20)
        fprintf(stderr, "FAILED (%s:%d): %s\n", base ? base + 1 : file, line,
                buf);
    pthread_mutex_unlock(&fail_lock);
}

/* Records a failure (with file and line) unless cond holds. */
#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond))                                                           \
            fail_at(__FILE__, __LINE__, __VA_ARGS__);                          \
    } while (0)

#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Progresses until cond holds; records a failure after WAIT_LIMIT_S. */
#define WAIT_UNTIL(w, cond, what)                                              \
    do {                                                                       \
        double t0_ = now_s();                                                  \
        while (!(cond)) {                                                      \
            rv_progress(w);                                                    \
            if (now_s() - t0_ > WAIT_LIMIT_S) {                                \
                FAIL("timed out waiting for %s", what);                        \
                break;                                                         \
            }                                                                  \
        }                                                                      \
    } while (0)

#endif
