/*
 * The job's shared-memory directory: /dev/shm/rivetrun.XXXXXX, named as
 * rivetrun's socket directory is, mode 0700.
 *
 * UCX's posix transport makes each segment as a file (shm_open in
 * /dev/shm by default), fills it to prove the memory is there, and only
 * then unlinks it (UCX_POSIX_USE_PROC_LINK: peers open it through
 * /proc/PID/fd). A process killed inside that window, which lasts as long
 * as the segment takes to fill (milliseconds for the FIFO and the
 * registered regions), leaves the file in /dev/shm for good, where no one
 * can tell whose it was. rivetrun therefore points UCX_POSIX_DIR at a
 * directory of the job's own and empties and removes it when the job
 * ends however it ends: rivetrun at its end, a rank whose rivetrun was
 * killed (rv_bootstrap_watch.c), or the next rivetrun's sweep of stale
 * launcher directories (run_dir.c). What UCX leaves there is UCX's
 * segments, unlinked at the latest with the directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rv_launch_proto.h"

/* The directory's mode: no other user may create or open a segment. */
#define SHM_DIR_MODE 0700

/* True if @p name is a launcher directory's name (rivetrun.XXXXXX) with
 * nothing that could leave RV_LAUNCH_SHM_ROOT. */
static int is_job_name(const char *name)
{
    return strncmp(name, RV_LAUNCH_DIR_PREFIX, strlen(RV_LAUNCH_DIR_PREFIX)) ==
               0 &&
           strchr(name, '/') == NULL && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0;
}

int rv__launch_shm_dir_create(const char *name, char *path, size_t len)
{
    struct stat st;
    int n;

    if (!is_job_name(name))
        return -1;
    n = snprintf(path, len, RV_LAUNCH_SHM_ROOT "/%s", name);
    if (n < 0 || (size_t)n >= len)
        return -1;
    if (mkdir(path, SHM_DIR_MODE) != 0)
        return -1;
    /* As the socket's directory: checked, whatever the umask did. */
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid() || (st.st_mode & 07777) != SHM_DIR_MODE) {
        rmdir(path);
        return -1;
    }
    return 0;
}

void rv__launch_shm_dir_remove(const char *name)
{
    struct dirent *e;
    struct stat st;
    int root, dfd;
    DIR *d;

    if (!is_job_name(name))
        return;
    root = open(RV_LAUNCH_SHM_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return;
    /* Only this user's directory, and no symbolic link followed. */
    dfd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || fstat(dfd, &st) != 0 || st.st_uid != geteuid()) {
        if (dfd >= 0)
            close(dfd);
        close(root);
        return;
    }
    d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        close(root);
        return;
    }
    /* Files only: UCX makes nothing else here. */
    while ((e = readdir(d)) != NULL) {
        if (e->d_type != DT_DIR)
            (void)unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    (void)unlinkat(root, name, AT_REMOVEDIR);
    close(root);
}

/*
 * SysV segments. UCX's sysv transport (and its sysv allocation method)
 * makes a private segment with shmget, attaches it, and marks it removed
 * (IPC_RMID) right after, so that it goes with its last user. A process
 * killed between the shmget and the IPC_RMID leaves a segment that no one
 * holds and no one will remove: the directory above does not help, a
 * SysV segment has no name. When a job ends, its launcher removes every
 * private segment of this user that a process of the job made and no
 * process holds (/proc/sysvipc/shm: key 0, nattch 0, cpid one of the
 * job's). A segment a program made with a key, or one still attached, is
 * left alone.
 */
static bool pid_in(pid_t pid, const pid_t *pids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] > 0 && pids[i] == pid)
            return true;
    return false;
}

int rv__launch_sysv_sweep(const pid_t *pids, size_t n)
{
    FILE *f = fopen("/proc/sysvipc/shm", "re");
    char line[512];
    int removed = 0;

    if (f == NULL)
        return 0;
    /* key shmid perms size cpid lpid nattch uid ... (the first line names
     * them) */
    if (fgets(line, sizeof(line), f) == NULL) {
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        long long key, size;
        int shmid, cpid, lpid;
        unsigned perms, uid;
        unsigned long nattch;
        if (sscanf(line, "%lld %d %o %lld %d %d %lu %u", &key, &shmid, &perms,
                   &size, &cpid, &lpid, &nattch, &uid) != 8)
            continue;
        if (key != 0 || nattch != 0 || uid != (unsigned)geteuid() ||
            !pid_in((pid_t)cpid, pids, n))
            continue;
        if (shmctl(shmid, IPC_RMID, NULL) == 0)
            removed++;
    }
    fclose(f);
    return removed;
}
