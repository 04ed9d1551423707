/*
 * Running rivetrun from a test (see rivetrun_job.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rivetrun_job.h"

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void job_start(job_t *j, const char *const argv[])
{
    int pipes[2][2];

    memset(j, 0, sizeof(*j));
    for (int i = 0; i < 2; i++)
        assert_int_equal(pipe2(pipes[i], O_CLOEXEC), 0);
    j->start_ms = now_ms();
    j->pid = fork();
    assert_true(j->pid >= 0);
    if (j->pid == 0) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
        execv(argv[0], (char *const *)argv);
        _exit(126);
    }
    for (int i = 0; i < 2; i++) {
        close(pipes[i][1]);
        j->fds[i] = pipes[i][0];
        j->text[i] = calloc(1, 1);
    }
}

void job_pump(job_t *j, int ms)
{
    struct pollfd p[2];
    int n = 0, map[2];

    for (int i = 0; i < 2; i++) {
        if (j->fds[i] >= 0) {
            p[n] = (struct pollfd){.fd = j->fds[i], .events = POLLIN};
            map[n++] = i;
        }
    }
    if (n == 0) {
        sleep_ms(ms);
        return;
    }
    if (poll(p, (nfds_t)n, ms) <= 0)
        return;
    for (int k = 0; k < n; k++) {
        char buf[4096];
        int i = map[k];
        ssize_t got;

        if (p[k].revents == 0)
            continue;
        got = read(j->fds[i], buf, sizeof(buf));
        if (got <= 0) {
            close(j->fds[i]);
            j->fds[i] = -1;
            continue;
        }
        j->text[i] = realloc(j->text[i], j->len[i] + (size_t)got + 1);
        memcpy(j->text[i] + j->len[i], buf, (size_t)got);
        j->len[i] += (size_t)got;
        j->text[i][j->len[i]] = '\0';
    }
}

void job_wait(job_t *j)
{
    int status;
    pid_t got = 0;

    while (got == 0 || j->fds[0] >= 0 || j->fds[1] >= 0) {
        if (now_ms() - j->start_ms > HARD_LIMIT_MS) {
            kill(j->pid, SIGKILL);
            waitpid(j->pid, &status, 0);
            fail_msg("rivetrun still runs after %d ms", HARD_LIMIT_MS);
        }
        job_pump(j, 20);
        if (got == 0) {
            got = waitpid(j->pid, &status, WNOHANG);
            assert_true(got >= 0);
            if (got > 0)
                j->elapsed_ms = now_ms() - j->start_ms;
        }
    }
    j->code = WIFEXITED(status) ? WEXITSTATUS(status)
                                : 128 + WTERMSIG(status);
    if (getenv("TEST_RIVETRUN_VERBOSE") != NULL)
        fprintf(stderr, "--- code %d after %lld ms\n--- stdout:\n%s--- "
                "stderr:\n%s---\n", j->code, (long long)j->elapsed_ms,
                j->text[0], j->text[1]);
}

void job_run(job_t *j, const char *const argv[])
{
    job_start(j, argv);
    job_wait(j);
}

void job_free(job_t *j)
{
    free(j->text[0]);
    free(j->text[1]);
}

int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}
