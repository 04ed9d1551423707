/*
 * A rank that crashes says where: on SIGSEGV, SIGBUS, SIGFPE, SIGILL and
 * SIGABRT it prints the signal, the faulting address and a backtrace to
 * stderr, then dies of the same signal, so that the launcher names the
 * rank and the signal (GASNet-EX's GASNET_BACKTRACE and UCX's
 * UCX_HANDLE_ERRORS=bt do the same).
 *
 * Only signals whose action is still the default get the handler: a
 * program's own handler, a sanitizer's and UCX's (which prints its own
 * backtrace) are left alone. The handler uses only async-signal-safe
 * calls besides backtrace(), whose first call may allocate: it is made
 * once at install time, as glibc's manual advises.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rv_core.h"

/* Frames printed at most. */
#define CRASH_FRAMES 64
/* Room for the first line. */
#define CRASH_LINE_MAX 192

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static int crash_rank = -1;

static void crash_handler(int sig, siginfo_t *si, void *uctx)
{
    void *frames[CRASH_FRAMES];
    char line[CRASH_LINE_MAX];
    int n, len;

    (void)uctx;
    /* snprintf of integers and pointers is async-signal-safe in glibc in
     * practice (no locale, no allocation), as UCX's handler relies on. */
    len = snprintf(line, sizeof(line),
                   "[rivet r%d] error: caught signal %d (%s) at address %p, "
                   "pid %d; backtrace:\n",
                   crash_rank, sig, sigdescr_np(sig) ? sigdescr_np(sig) : "?",
                   si != NULL ? si->si_addr : NULL, (int)getpid());
    if (len > 0)
        (void)!write(STDERR_FILENO, line,
                     (size_t)len < sizeof(line) ? (size_t)len
                                                : sizeof(line) - 1);
    n = backtrace(frames, CRASH_FRAMES);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    /* Die of the signal itself: the default action, raised again. */
    signal(sig, SIG_DFL);
    raise(sig);
}

void rv__crash_handlers_install(int rank)
{
    void *warm[1];
    struct sigaction sa, old;

    crash_rank = rank;
    (void)backtrace(warm, 1); /* loads libgcc now, not in the handler */
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]);
         i++) {
        if (sigaction(crash_signals[i], NULL, &old) != 0 ||
            (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue;
        sigaction(crash_signals[i], &sa, NULL);
    }
}
