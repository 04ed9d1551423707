/*
 * Leveled logging with a rank/thread prefix.
 *
 * One line per call, written with a single write(2) so lines from the
 * threads and processes of a job do not interleave.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "rv_status.h"

rv_log_level_t rv_log_level = RV_LOG_WARN;

static _Thread_local int log_rank = -1;
static _Thread_local int log_thread = -1;

static const char *const level_names[] = {
    "fatal", "error", "warn", "info", "debug", "trace",
};

static void rv_log_init_level(void) __attribute__((constructor));
static void rv_log_init_level(void)
{
    const char *env = getenv("RIVET_LOG_LEVEL");
    if (env == NULL || *env == '\0')
        return;
    if (isdigit((unsigned char)env[0])) {
        int v = atoi(env);
        rv_log_level = v > RV_LOG_TRACE ? RV_LOG_TRACE : (rv_log_level_t)v;
        return;
    }
    for (int i = 0; i <= RV_LOG_TRACE; i++) {
        if (strcasecmp(env, level_names[i]) == 0) {
            rv_log_level = (rv_log_level_t)i;
            return;
        }
    }
    if (strcasecmp(env, "warning") == 0)
        return;
    fprintf(stderr,
            "rivet: warning: RIVET_LOG_LEVEL=%s is not one of "
            "fatal, error, warn, info, debug, trace; using warn\n",
            env);
}

void rv_log_set_identity(int rank, int thread)
{
    log_rank = rank;
    log_thread = thread;
}

void rv_log(rv_log_level_t level, const char *file, int line, const char *fmt,
            ...)
{
    char buf[1024];
    int n;

    if (log_rank < 0)
        n = snprintf(buf, sizeof(buf), "[rivet] %s: ", level_names[level]);
    else if (log_thread < 0)
        n = snprintf(buf, sizeof(buf), "[rivet r%d] %s: ", log_rank,
                     level_names[level]);
    else
        n = snprintf(buf, sizeof(buf), "[rivet r%d.t%d] %s: ", log_rank,
                     log_thread, level_names[level]);

    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(buf) - 64)
        n = (int)sizeof(buf) - 64;
    if (rv_log_level >= RV_LOG_DEBUG) {
        const char *base = strrchr(file, '/');
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, " (%s:%d)",
                      base ? base + 1 : file, line);
    }
    buf[n++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, buf, (size_t)n);
    (void)ignored;
}
