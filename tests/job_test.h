/*
 * Helpers for CMocka tests that run as multi-process rivet jobs.
 *
 * Worker threads never call CMocka (it is not thread-safe): they record
 * failures with EXPECT, and the main thread asserts after rv_job_run. A
 * check that cannot run skips from the main thread (JOB_SKIP), and the
 * program ends with job_test_status(), so that ctest sees a job whose
 * checks were all skipped as skipped, never as passed.
 *
 * What the helpers count is defined once, in job_test.c (linked into every
 * rivet_test program), so that a test of several files counts in one
 * place.
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

/* 1 in a ThreadSanitizer build (make check-tsan), where a test leaves out
 * the probes that read memory racing with rivet on purpose. */
#if defined(__SANITIZE_THREAD__)
#define RV_TEST_TSAN 1
#else
#define RV_TEST_TSAN 0
#endif

/* The exit status ctest counts as a skip: every job test is registered
 * with it as SKIP_RETURN_CODE (tests/job_test.cmake). */
#define JOB_TEST_SKIPPED 77

/* Failures recorded (EXPECT, FAIL), and the lock of their report. */
extern atomic_int failures;
extern pthread_mutex_t fail_lock;

static inline void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void fail_at(const char *file, int line, const char *fmt, ...)
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

/* Checks skipped (JOB_SKIP). */
extern int job_checks_skipped;

static inline void job_skip_note(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline void job_skip_note(const char *fmt, ...)
{
    va_list ap;
    job_checks_skipped++;
    va_start(ap, fmt);
    printf("skipped: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* Skips the running CMocka check, saying why. From the main thread, before
 * the check starts a job: every process decides alike, from what they all
 * see (the transport's capabilities), since they run the same jobs. */
#define JOB_SKIP(...)                                                          \
    do {                                                                       \
        job_skip_note(__VA_ARGS__);                                            \
        skip();                                                                \
    } while (0)

/* The program's exit status after its CMocka group of @p nchecks checks,
 * @p failed of which failed: a failure, else a skip when every check was
 * skipped, else success. */
static inline int job_test_status(int failed, size_t nchecks)
{
    if (failed != 0)
        return 1;
    if (nchecks > 0 && (size_t)job_checks_skipped == nchecks)
        return JOB_TEST_SKIPPED;
    return 0;
}

#endif
