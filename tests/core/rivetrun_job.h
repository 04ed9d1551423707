/*
 * Running rivetrun from a test: a job's output, exit code and timing, for
 * test_rivetrun.c and test_launch_trust.c (rivetrun_job.c).
 *
 * Every rivetrun a test starts is killed if it still runs HARD_LIMIT_MS
 * after its start (and the test fails), so that a broken rivetrun fails a
 * test rather than hanging it. Set TEST_RIVETRUN_VERBOSE to see what each
 * job printed.
 *
 * Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_RIVETRUN_JOB_H
#define RIVET_TESTS_RIVETRUN_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define HARD_LIMIT_MS 30000

typedef struct job {
    pid_t pid;
    int fds[2];         /* rivetrun's stdout and stderr */
    char *text[2];
    size_t len[2];
    int64_t start_ms;
    int64_t elapsed_ms;
    int code;           /* exit code, or 128 + signal */
} job_t;

/* Milliseconds on the monotonic clock. */
int64_t now_ms(void);
void sleep_ms(int ms);

/* Starts @p argv (argv[0] a path) with its stdout and stderr piped. */
void job_start(job_t *j, const char *const argv[]);
/* Reads rivetrun's output for up to @p ms. */
void job_pump(job_t *j, int ms);
/* Waits for rivetrun to exit and its output to end; kills it past the
 * hard limit (and fails the test). */
void job_wait(job_t *j);
/* job_start, then job_wait. */
void job_run(job_t *j, const char *const argv[]);
void job_free(job_t *j);

/* How many times @p needle occurs in @p text. */
int count_of(const char *text, const char *needle);

#define assert_contains(_text, _needle)                                        \
    do {                                                                       \
        if (strstr((_text), (_needle)) == NULL)                                \
            fail_msg("\"%s\" not found in:\n%s", (_needle), (_text));          \
    } while (0)

#endif
