/*
 * The process limits a job runs into before its first message: open file
 * descriptors. UCX takes descriptors for every worker (event fds, pipes,
 * the shared-memory signal socket) and, over TCP, one socket per
 * connected peer; when it runs out half way through creating a context
 * it prints an internal assertion and aborts the process, naming no
 * limit. So, as Open MPI does at start, the soft limit is raised to the
 * hard one, and a job that would still not fit stops here with the limit
 * and the command that raises it named.
 */
#include <sys/resource.h>

#include "rv_core.h"

/* Descriptors a process of @p size processes x @p threads workers needs,
 * about: the process's own (standard streams, bootstrap, plugin, logs),
 * then per worker a few of UCX's own and one per peer worker (TCP's
 * sockets; shared memory's need fewer). Measured: 2 processes of one
 * worker over UCX shm start with 20 and abort in UCX with 12. */
static rlim_t nofile_needed(int size, int threads)
{
    rlim_t workers = (rlim_t)size * (rlim_t)threads;
    return 12 + (rlim_t)threads * (4 + workers);
}

rv_status_t rv__limits_check(int size, int threads)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return RV_OK; /* nothing to check against */
    rlim_t need = nofile_needed(size, threads);
    if (lim.rlim_cur < lim.rlim_max && lim.rlim_cur < need * 4) {
        struct rlimit raised = {.rlim_cur = lim.rlim_max,
                                .rlim_max = lim.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            lim = raised;
    }
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need) {
        rv_error("this process may open only %llu file descriptors (ulimit "
                 "-n; hard limit %llu), and a job of %d processes x %d "
                 "threads needs about %llu: raise the limit (ulimit -n %llu "
                 "before starting the job, or the hard limit in "
                 "/etc/security/limits.conf)",
                 (unsigned long long)lim.rlim_cur,
                 (unsigned long long)lim.rlim_max, size, threads,
                 (unsigned long long)need, (unsigned long long)need);
        return RV_ERR_IO;
    }
    return RV_OK;
}
