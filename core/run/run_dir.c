/*
 * The private directory of rivetrun's socket: $TMPDIR/rivetrun.XXXXXX
 * (else /tmp), mode 0700, holding the socket and a pid file.
 *
 * The mode keeps other users out: they can neither connect to the socket
 * nor replace it. The directory goes at the end of every job; a rivetrun
 * that was killed cannot remove it, so every rivetrun first sweeps the
 * directories of this user whose owner is gone. The pid file names the
 * owner (its pid and start time, so that a reused pid is not mistaken for
 * it); a socket someone still listens on keeps its directory whatever the
 * pid file says. A directory without a pid file is left alone: its
 * rivetrun may be creating it right now.
 *
 * Beside it, the job's shared-memory directory of the same name in
 * /dev/shm (rv_launch_shm.c), made and removed with it, where UCX's
 * posix transport makes its segments: a rank killed while UCX makes one
 * leaves nothing in /dev/shm itself. A user's own UCX_POSIX_DIR is kept.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "run_internal.h"

#define DIR_PREFIX RV_LAUNCH_DIR_PREFIX
/* mkdtemp's template: DIR_PREFIX and six characters. */
#define DIR_TEMPLATE "/" DIR_PREFIX "XXXXXX"
#define DIR_SUFFIX_LEN 6
#define SOCK_NAME "sock"
#define PID_NAME "pid"
/* What the directory's mode must be. */
#define DIR_MODE 0700
#define PERM_BITS 07777
/* Longest pid file: two numbers and a newline. */
#define PID_FILE_MAX 64

/* ---------------------------------------------------------------------- */
/* The owner                                                               */
/* ---------------------------------------------------------------------- */

/* Writes "pid start_ticks" into the pid file of directory @p dfd. */
static int pid_file_write(int dfd, const launcher_t *l)
{
    run_proc_info_t self;
    char buf[PID_FILE_MAX];
    int fd, n, rc = 0;

    if (run_proc_stat(l->self, &self) != 0)
        self.start_ticks = 0;
    n = snprintf(buf, sizeof(buf), "%d %llu\n", (int)l->self, self.start_ticks);
    fd = openat(dfd, PID_NAME,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (rv__launch_write_full(fd, buf, (size_t)n) != RV_OK)
        rc = -1;
    close(fd);
    return rc;
}

/* True if the rivetrun that the pid file of directory @p dfd names is
 * gone: no such process, a zombie, or another process under its pid. */
static bool owner_gone(int dfd)
{
    char buf[PID_FILE_MAX];
    unsigned long long start;
    run_proc_info_t info;
    int fd, n, pid;

    fd = openat(dfd, PID_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = (int)read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    if (sscanf(buf, "%d %llu", &pid, &start) != 2 || pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    if (run_proc_stat(pid, &info) != 0)
        return true; /* gone between the two looks */
    return info.state == 'Z' || info.state == 'X' ||
           (start != 0 && info.start_ticks != start);
}

/* ---------------------------------------------------------------------- */
/* Sweeping                                                                */
/* ---------------------------------------------------------------------- */

static bool is_launcher_dir_name(const char *name)
{
    return strncmp(name, DIR_PREFIX, strlen(DIR_PREFIX)) == 0 &&
           strlen(name) == strlen(DIR_PREFIX) + DIR_SUFFIX_LEN;
}

/* True if something listens on the socket at @p path: its rivetrun is
 * alive whatever its pid says (it may run in another pid namespace that
 * shares this directory). */
static bool socket_listens(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    bool listens;
    int fd;

    if (strlen(path) >= sizeof(sun.sun_path))
        return false;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true; /* cannot tell: keep the directory */
    /* A full backlog answers EAGAIN: someone listens. */
    listens = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 ||
              errno == EAGAIN;
    close(fd);
    return listens;
}

/* True if directory @p dfd holds nothing but what rivetrun puts there. */
static bool holds_only_ours(int dfd)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    bool ours = d != NULL;

    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    while (ours && (e = readdir(d)) != NULL) {
        ours = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
               strcmp(e->d_name, SOCK_NAME) == 0 ||
               strcmp(e->d_name, PID_NAME) == 0;
    }
    closedir(d);
    return ours;
}

/* Removes directory @p name of @p tmp (open as @p tmp_fd) if it is one of
 * this user's launcher directories and its rivetrun is gone. A directory
 * that holds anything rivetrun did not put there stays whole. */
static void sweep_one(int tmp_fd, const char *tmp, const char *name)
{
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path) + NAME_MAX];
    struct stat st;
    int dfd;

    /* No symbolic link is followed, and only this user's directories are
     * looked into. */
    dfd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    snprintf(sock, sizeof(sock), "%s/%s/" SOCK_NAME, tmp, name);
    if (fstat(dfd, &st) == 0 && st.st_uid == geteuid() &&
        holds_only_ours(dfd) && owner_gone(dfd) && !socket_listens(sock)) {
        unlinkat(dfd, SOCK_NAME, 0);
        unlinkat(dfd, PID_NAME, 0);
        unlinkat(tmp_fd, name, AT_REMOVEDIR);
        rv__launch_shm_dir_remove(name);
    }
    close(dfd);
}

/* Sweeps what killed rivetruns of this user left in @p tmp. Nothing here
 * is an error: what cannot be removed stays. */
static void sweep_stale(const char *tmp)
{
    DIR *d = opendir(tmp);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if ((e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) &&
            is_launcher_dir_name(e->d_name))
            sweep_one(dirfd(d), tmp, e->d_name);
    }
    closedir(d);
}

/* ---------------------------------------------------------------------- */
/* This job's directory                                                    */
/* ---------------------------------------------------------------------- */

/* mkdtemp makes the directory 0700 whatever the umask; checked all the
 * same, since the socket's safety rests on it. */
static int dir_check_private(int dfd, const char *dir)
{
    struct stat st;

    if (fstat(dfd, &st) != 0) {
        run_say("cannot look at %s: %m", dir);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & PERM_BITS) != DIR_MODE) {
        run_say("%s is not private (mode %o, owner %d)", dir,
                (unsigned)(st.st_mode & PERM_BITS), (int)st.st_uid);
        return -1;
    }
    return 0;
}

/* The last component of the launcher directory's path: rivetrun.XXXXXX. */
static const char *dir_name(const launcher_t *l)
{
    const char *slash = strrchr(l->dir, '/');
    return slash != NULL ? slash + 1 : l->dir;
}

int run_dir_create(launcher_t *l)
{
    const char *tmp = getenv("TMPDIR");
    int dfd;

    /* The socket's path must fit a sockaddr_un. */
    if (tmp == NULL || *tmp == '\0' ||
        strlen(tmp) + sizeof(DIR_TEMPLATE "/" SOCK_NAME) > sizeof(l->sock_path))
        tmp = "/tmp";
    sweep_stale(tmp);
    snprintf(l->dir, sizeof(l->dir), "%s" DIR_TEMPLATE, tmp);
    if (mkdtemp(l->dir) == NULL) {
        run_say("cannot create a directory in %s: %m", tmp);
        l->dir[0] = '\0';
        return -1;
    }
    dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        run_say("cannot open %s: %m", l->dir);
        goto err_dir;
    }
    if (dir_check_private(dfd, l->dir) != 0)
        goto err_check;
    if (pid_file_write(dfd, l) != 0) {
        run_say("cannot write %s/" PID_NAME ": %m", l->dir);
        goto err_check;
    }
    close(dfd);
    /* tmp was chosen above so that the path fits. */
    strcpy(l->sock_path, l->dir);
    strcat(l->sock_path, "/" SOCK_NAME);
    /* Without it (no /dev/shm), UCX makes its segments where it would. */
    l->shm_dir[0] = '\0';
    if (getenv(RV_LAUNCH_SHM_ENV) == NULL &&
        rv__launch_shm_dir_create(dir_name(l), l->shm_dir,
                                  sizeof(l->shm_dir)) != 0)
        l->shm_dir[0] = '\0';
    return 0;

err_check:
    unlinkat(dfd, PID_NAME, 0);
    close(dfd);
err_dir:
    rmdir(l->dir);
    l->dir[0] = '\0';
    return -1;
}

void run_dir_remove(launcher_t *l)
{
    char pid_path[sizeof(l->dir) + sizeof(PID_NAME) + 1];

    if (l->dir[0] == '\0')
        return;
    if (l->shm_dir[0] != '\0')
        rv__launch_shm_dir_remove(dir_name(l));
    l->shm_dir[0] = '\0';
    if (l->sock_path[0] != '\0')
        unlink(l->sock_path);
    snprintf(pid_path, sizeof(pid_path), "%s/" PID_NAME, l->dir);
    unlink(pid_path);
    if (rmdir(l->dir) != 0)
        run_say("cannot remove %s: %m", l->dir);
    l->dir[0] = '\0';
    l->sock_path[0] = '\0';
}
