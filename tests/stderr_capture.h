/*
 * CMocka helpers that capture what a test writes to stderr (a log line the
 * code under test must print). Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_STDERR_CAPTURE_H
#define RIVET_TESTS_STDERR_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int capture_fd = -1, saved_stderr = -1;

/* Captures what is written to stderr until capture_end. */
static inline void capture_begin(void)
{
    char path[] = "/tmp/rivet_test_stderr_XXXXXX";
    fflush(stderr);
    capture_fd = mkstemp(path);
    assert_true(capture_fd >= 0);
    unlink(path);
    saved_stderr = dup(STDERR_FILENO);
    dup2(capture_fd, STDERR_FILENO);
}

/* Restores stderr; @p buf receives what was captured (and it is written to
 * stderr as well, to stay visible in the test log). */
static inline void capture_end(char *buf, size_t len)
{
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    ssize_t n = pread(capture_fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(capture_fd);
    capture_fd = -1;
    fprintf(stderr, "%s", buf);
}

/* Teardown of the tests that capture: a failed assertion between
 * capture_begin and capture_end must not swallow the rest of the log. */
static inline int capture_teardown(void **state)
{
    char buf[4096];
    (void)state;
    if (saved_stderr >= 0)
        capture_end(buf, sizeof(buf));
    return 0;
}

#endif
