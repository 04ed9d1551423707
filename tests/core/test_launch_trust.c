/*
 * A job only its own processes can join: rivetrun's checks, end to end.
 *
 * This test process plays the stray. It starts rivetrun, so it is neither
 * a rank nor a descendant of one; the ranks (rank_helper) write the
 * socket's path and the job's token to a file for it (envfile=) and wait
 * until it is done (wait-file=). Every job runs with its own TMPDIR, so
 * that the test sees exactly the launcher directories of its jobs.
 *
 * Checked: a stray without the token, or with a wrong one, is refused and
 * named; one with the token but another pid is refused, for a rank that has
 * not joined yet and for one that has left; a rank started through a
 * wrapper that forks it joins; forged frames on an accepted connection end
 * that connection and not the job; the socket's directory is private and
 * goes at the end of every job; the directories of killed rivetruns are
 * swept by the next one, and those of live ones are not.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rivetrun_job.h"
#include "rv_launch_proto.h"

#ifndef RIVETRUN_BIN
#error "RIVETRUN_BIN must be defined"
#endif
#ifndef RANK_HELPER_BIN
#error "RANK_HELPER_BIN must be defined"
#endif

#define SAFETY_TIMEOUT "20"  /* --timeout of every rivetrun */
#define ENV_WAIT_MS    5000  /* for the ranks' env files */
#define STRAY_WAIT_S   10    /* for rivetrun to answer a stray */
#define PATH_LEN       600

static char tmp_dir[] = "/tmp/test_launch_trust.XXXXXX";
static int case_no;

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

/* A fresh directory for one case, with the TMPDIR of its jobs below it. */
static char *case_dir(void)
{
    char *dir = malloc(PATH_LEN), sub[PATH_LEN + 8];

    assert_non_null(dir);
    snprintf(dir, PATH_LEN, "%s/case%d", tmp_dir, ++case_no);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(sub, sizeof(sub), "%s/tmp", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    return dir;
}

static char *write_config(int processes)
{
    char *path = malloc(PATH_LEN);
    FILE *f;

    assert_non_null(path);
    snprintf(path, PATH_LEN, "%s/job%d.yaml", tmp_dir, ++case_no);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "job:\n  processes: %d\n  threads: 1\n  placement: none\n",
            processes);
    fclose(f);
    return path;
}

/* Starts rivetrun with TMPDIR=<dir>/tmp. */
static void job_start_in(job_t *j, const char *dir, const char *const argv[])
{
    char tmp[PATH_LEN + 8];

    snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
    setenv("TMPDIR", tmp, 1);
    job_start(j, argv);
    unsetenv("TMPDIR");
}

/* What a rank wrote to its env file: the socket's path and the token. */
typedef struct job_env {
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
    uint8_t token[RV_LAUNCH_TOKEN_BYTES];
} job_env_t;

static void read_env(job_t *j, const char *dir, int rank, job_env_t *env)
{
    char path[PATH_LEN + 16], token[2 * RV_LAUNCH_TOKEN_HEX];
    int64_t until = now_ms() + ENV_WAIT_MS;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%d.env", dir, rank);
    while ((f = fopen(path, "r")) == NULL) {
        if (now_ms() > until)
            fail_msg("rank %d wrote no %s", rank, path);
        job_pump(j, 10);
    }
    assert_non_null(fgets(env->sock, sizeof(env->sock), f));
    assert_non_null(fgets(token, sizeof(token), f));
    fclose(f);
    env->sock[strcspn(env->sock, "\n")] = '\0';
    token[strcspn(token, "\n")] = '\0';
    assert_int_equal(rv__launch_token_parse(token, env->token), RV_OK);
}

static void wait_file(job_t *j, const char *path)
{
    int64_t until = now_ms() + ENV_WAIT_MS;
    struct stat st;

    while (stat(path, &st) != 0) {
        if (now_ms() > until)
            fail_msg("%s did not appear", path);
        job_pump(j, 10);
    }
}

static void touch(const char *dir, const char *name)
{
    char path[PATH_LEN + 16];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* Connects to the job's socket, as a stray. */
static int stray_connect(const char *sock)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct timeval limit = {.tv_sec = STRAY_WAIT_S};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit,
                                sizeof(limit)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    return fd;
}

/* True if rivetrun closed @p fd: end-of-file (or a reset), neither a byte
 * nor the receive timeout. */
static bool closed_by_peer(int fd)
{
    char byte;
    ssize_t n = read(fd, &byte, 1);

    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Says HELLO as rank @p rank of @p size with @p token (NULL: none). True
 * if rivetrun accepted it; false if it closed the connection. */
static bool stray_hello(const char *sock, uint32_t rank, uint32_t size,
                        const uint8_t *token)
{
    rv_launch_hello_t hello = {.size = size, .pid = (uint64_t)getpid()};
    rv_launch_hdr_t hdr;
    int fd = stray_connect(sock);
    bool accepted;

    if (token != NULL)
        memcpy(hello.token, token, sizeof(hello.token));
    assert_int_equal(rv__launch_send(fd, RV_LAUNCH_HELLO, rank, &hello,
                                     sizeof(hello)), RV_OK);
    accepted = rv__launch_recv_hdr(fd, &hdr) == RV_OK &&
               hdr.type == RV_LAUNCH_HELLO;
    if (!accepted)
        assert_true(closed_by_peer(fd));
    close(fd);
    return accepted;
}

/* Sends one header and no payload, without a HELLO first. True if
 * rivetrun closed the connection. */
static bool stray_frame(const char *sock, uint32_t type, uint64_t len)
{
    rv_launch_hdr_t hdr = {.type = type, .rank = 0, .len = len};
    int fd = stray_connect(sock);
    bool closed;

    assert_int_equal(rv__launch_write_full(fd, &hdr, sizeof(hdr)), RV_OK);
    closed = closed_by_peer(fd);
    close(fd);
    return closed;
}

/* How many launcher directories (rivetrun.*) @p dir holds. */
static int launcher_dirs(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "rivetrun.", strlen("rivetrun.")) == 0;
    closedir(d);
    return n;
}

static void assert_no_launcher_dir(const char *case_path)
{
    char tmp[PATH_LEN + 8];

    snprintf(tmp, sizeof(tmp), "%s/tmp", case_path);
    if (launcher_dirs(tmp) != 0)
        fail_msg("rivetrun left its directory in %s", tmp);
}

static void assert_bootstrap_ok(const job_t *j, int size)
{
    char line[64];

    for (int r = 0; r < size; r++) {
        snprintf(line, sizeof(line), "bootstrap-check ok %d %d\n", r, size);
        assert_contains(j->text[0], line);
    }
}

/* ---------------------------------------------------------------------- */
/* Who may join                                                            */
/* ---------------------------------------------------------------------- */

/* A process that knows the socket but not the token is refused, named,
 * and the job goes on; so is one that sends frames before its hello. */
static void test_stray_without_token(void **state)
{
    char *dir = case_dir(), *cfg = write_config(2);
    char envfile[PATH_LEN + 16], go[PATH_LEN + 16], want[256];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, envfile, go,
                          "bootstrap-check=rivetrun", NULL};
    job_env_t env;
    uint8_t wrong[RV_LAUNCH_TOKEN_BYTES];
    int me = (int)getpid();
    job_t j;

    (void)state;
    snprintf(envfile, sizeof(envfile), "envfile=%s", dir);
    snprintf(go, sizeof(go), "wait-file=%s/go", dir);
    job_start_in(&j, dir, argv);
    read_env(&j, dir, 0, &env);
    memcpy(wrong, env.token, sizeof(wrong));
    wrong[RV_LAUNCH_TOKEN_BYTES - 1] ^= 1;

    /* Neither rank has joined yet. */
    assert_false(stray_hello(env.sock, 1, 2, NULL));
    assert_false(stray_hello(env.sock, 0, 2, wrong));
    assert_true(stray_frame(env.sock, 99, 0));
    assert_true(stray_frame(env.sock, RV_LAUNCH_HELLO, 1ull << 62));
    touch(dir, "go");
    job_wait(&j);

    assert_int_equal(j.code, 0);
    assert_bootstrap_ok(&j, 2);
    snprintf(want, sizeof(want), "rivetrun: refused a bootstrap connection "
             "from pid %d claiming rank 1: no job token (RIVET_JOB_TOKEN is "
             "not in its environment); the job goes on\n", me);
    assert_contains(j.text[1], want);
    snprintf(want, sizeof(want), "rivetrun: refused a bootstrap connection "
             "from pid %d claiming rank 0: wrong job token (RIVET_JOB_TOKEN)"
             "; the job goes on\n", me);
    assert_contains(j.text[1], want);
    snprintf(want, sizeof(want), "rivetrun: closed a bootstrap connection "
             "from pid %d: a frame of type 99 (unknown) before hello\n", me);
    assert_contains(j.text[1], want);
    snprintf(want, sizeof(want), "rivetrun: closed a bootstrap connection "
             "from pid %d: a hello of %llu bytes, not %zu\n", me,
             1ull << 62, sizeof(rv_launch_hello_t));
    assert_contains(j.text[1], want);
    assert_no_launcher_dir(dir);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* A process with the token but not a rank's pid cannot claim a rank: not
 * one that has not joined yet (1), nor one that has left (0), nor one out
 * of range. The ranks then join as usual. */
static void test_stray_with_token(void **state)
{
    char *dir = case_dir(), *cfg = write_config(2);
    char envfile[PATH_LEN + 16], go[PATH_LEN + 16], left[PATH_LEN + 16];
    char path[PATH_LEN + 16], want[256];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, envfile, "r0:join", "r0:fini",
                          left, go, "bootstrap-check=rivetrun", NULL};
    job_env_t env;
    int me = (int)getpid();
    job_t j;

    (void)state;
    snprintf(envfile, sizeof(envfile), "envfile=%s", dir);
    snprintf(left, sizeof(left), "r0:touch=%s/left", dir);
    snprintf(go, sizeof(go), "wait-file=%s/go", dir);
    job_start_in(&j, dir, argv);
    read_env(&j, dir, 0, &env);
    snprintf(path, sizeof(path), "%s/left", dir);
    wait_file(&j, path);

    assert_false(stray_hello(env.sock, 0, 2, env.token));
    assert_false(stray_hello(env.sock, 1, 2, env.token));
    assert_false(stray_hello(env.sock, 2, 2, env.token));
    touch(dir, "go");
    job_wait(&j);

    assert_int_equal(j.code, 0);
    assert_bootstrap_ok(&j, 2);
    for (int r = 0; r < 2; r++) {
        snprintf(want, sizeof(want), "rivetrun: refused a bootstrap "
                 "connection from pid %d claiming rank %d: pid %d is neither "
                 "rank %d's process (pid ", me, r, me, r);
        assert_contains(j.text[1], want);
    }
    snprintf(want, sizeof(want), "rivetrun: refused a bootstrap connection "
             "from pid %d claiming rank 2: the job has no rank 2", me);
    assert_contains(j.text[1], want);
    assert_int_equal(count_of(j.text[1], "; the job goes on\n"), 3);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* A rank started through wrappers that fork the program (rather than exec
 * it) joins: the program is the grandchild of the rank's process. */
static void test_wrapper_child_joins(void **state)
{
    char *dir = case_dir(), *cfg = write_config(2);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          "/bin/sh", "-c",
                          "sh -c '\"$0\" bootstrap-check=rivetrun & wait $!' "
                          "\"$0\" & wait $!",
                          RANK_HELPER_BIN, NULL};
    job_t j;

    (void)state;
    job_start_in(&j, dir, argv);
    job_wait(&j);
    assert_int_equal(j.code, 0);
    assert_bootstrap_ok(&j, 2);
    assert_string_equal(j.text[1], "");
    job_free(&j);
    free(cfg);
    free(dir);
}

/* Forged frames on an accepted connection (rank 1's own, beside its
 * bootstrap) end that connection, not the job: rank 1 then joins and the
 * job succeeds. */
static void test_forged_frames(void **state)
{
    static const char *const kinds[] = {"type", "len", "huge", "rank",
                                        "hello"};
    static const char *const why[] = {
        "an unknown frame type 99\n",
        "an abort frame of 1099511627776 bytes\n",
        "bytes per rank", /* too large, or not the round's size */
        "a frame claims rank 2\n",
        "a second hello\n",
    };
    char *dir = case_dir(), *cfg = write_config(2);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "r1:forge=type", "r1:forge=len",
                          "r1:forge=huge", "r1:forge=rank", "r1:forge=hello",
                          "bootstrap-check=rivetrun", NULL};
    char line[64];
    job_t j;

    (void)state;
    job_start_in(&j, dir, argv);
    job_wait(&j);
    assert_int_equal(j.code, 0);
    assert_bootstrap_ok(&j, 2);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        snprintf(line, sizeof(line), "forge %s closed 1\n", kinds[k]);
        assert_contains(j.text[0], line);
        assert_contains(j.text[1], why[k]);
    }
    assert_int_equal(count_of(j.text[1], "rivetrun: closed the bootstrap "
                                         "connection of rank 1 (pid "), 5);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* ---------------------------------------------------------------------- */
/* The socket's directory                                                  */
/* ---------------------------------------------------------------------- */

/* The directory is private while the job runs, names its rivetrun, and
 * goes at the end: of a job that succeeds, fails, or is ended by a signal.
 * Every job draws its own token. */
static void test_dir_private_and_removed(void **state)
{
    char *dir = case_dir(), *cfg = write_config(2);
    char envfile[PATH_LEN + 16], go[PATH_LEN + 16], pid_path[PATH_LEN];
    char sock_dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    const char *ok_argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c",
                             cfg, RANK_HELPER_BIN, envfile, go,
                             "bootstrap-check=rivetrun", NULL};
    const char *fail_argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c",
                               cfg, RANK_HELPER_BIN, "join", "r1:exit=3",
                               "sleep=30", NULL};
    const char *term_argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c",
                               cfg, RANK_HELPER_BIN, envfile, "sleep=30",
                               NULL};
    job_env_t first, second;
    struct stat st;
    FILE *f;
    int pid = 0;
    job_t j;

    (void)state;
    snprintf(envfile, sizeof(envfile), "envfile=%s", dir);
    snprintf(go, sizeof(go), "wait-file=%s/go", dir);
    job_start_in(&j, dir, ok_argv);
    read_env(&j, dir, 0, &first);
    snprintf(sock_dir, sizeof(sock_dir), "%s", first.sock);
    assert_int_equal(lstat(dirname(sock_dir), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(st.st_uid, geteuid());
    snprintf(pid_path, sizeof(pid_path), "%s", first.sock);
    strcpy(strrchr(pid_path, '/') + 1, "pid");
    f = fopen(pid_path, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    assert_int_equal(pid, (int)j.pid);
    touch(dir, "go");
    job_wait(&j);
    assert_int_equal(j.code, 0);
    assert_no_launcher_dir(dir);
    job_free(&j);

    job_start_in(&j, dir, fail_argv);
    job_wait(&j);
    assert_int_equal(j.code, 3);
    assert_no_launcher_dir(dir);
    job_free(&j);

    snprintf(pid_path, sizeof(pid_path), "%s/0.env", dir);
    unlink(pid_path);
    job_start_in(&j, dir, term_argv);
    read_env(&j, dir, 0, &second);
    assert_int_equal(kill(j.pid, SIGTERM), 0);
    job_wait(&j);
    assert_int_equal(j.code, 128 + SIGTERM);
    assert_no_launcher_dir(dir);
    assert_true(memcmp(first.token, second.token, sizeof(first.token)) != 0);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* This process's start time, as rivetrun writes it in its pid file. */
static unsigned long long my_start_ticks(void)
{
    char buf[1024], *p;
    unsigned long long ticks = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    assert_non_null(p);
    /* The 22nd field; the 3rd follows ") ". */
    p += 2;
    for (int i = 3; i < 22 && p != NULL; i++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    assert_non_null(p);
    sscanf(p, "%llu", &ticks);
    return ticks;
}

/* Makes <tmp>/<name> as a rivetrun would, with pid file @p pid_line (NULL:
 * none) and, if @p extra, a file rivetrun never makes. */
static void fake_launcher_dir(const char *tmp, const char *name,
                              const char *pid_line, bool extra)
{
    char path[PATH_LEN * 2];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/%s/sock", tmp, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    if (pid_line != NULL) {
        snprintf(path, sizeof(path), "%s/%s/pid", tmp, name);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(pid_line, f);
        fclose(f);
    }
    if (extra) {
        snprintf(path, sizeof(path), "%s/%s/notes", tmp, name);
        f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    }
}

static bool exists_in(const char *tmp, const char *name)
{
    char path[PATH_LEN * 2];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    return lstat(path, &st) == 0;
}

/* Listens on <tmp>/<name>/sock, as a live rivetrun in another pid
 * namespace would; returns the socket. */
static int listen_in(const char *tmp, const char *name)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    char path[PATH_LEN * 2];
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    snprintf(path, sizeof(path), "%s/%s/sock", tmp, name);
    assert_true(strlen(path) < sizeof(sun.sun_path));
    memcpy(sun.sun_path, path, strlen(path) + 1);
    unlink(sun.sun_path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/* The next rivetrun sweeps the directories of dead rivetruns (a pid that
 * is gone, or taken by another process since), and leaves those of live
 * ones, those without a pid file, those holding files of others and those
 * whose socket someone listens on. */
static void test_stale_dirs_swept(void **state)
{
    char *dir = case_dir(), *cfg = write_config(2);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "print=x", NULL};
    char tmp[PATH_LEN + 8], line[64], live[64];
    int listen_fd;
    pid_t dead = fork();
    job_t j;

    (void)state;
    assert_true(dead >= 0);
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
    snprintf(line, sizeof(line), "%d 0\n", (int)dead);
    fake_launcher_dir(tmp, "rivetrun.dead00", line, false);
    fake_launcher_dir(tmp, "rivetrun.extra0", line, true);
    snprintf(line, sizeof(line), "%d 1\n", (int)getpid());
    fake_launcher_dir(tmp, "rivetrun.reuse0", line, false);
    snprintf(live, sizeof(live), "%d %llu\n", (int)getpid(),
             my_start_ticks());
    fake_launcher_dir(tmp, "rivetrun.live00", live, false);
    fake_launcher_dir(tmp, "rivetrun.nopid0", NULL, false);
    snprintf(line, sizeof(line), "%d 0\n", (int)dead);
    fake_launcher_dir(tmp, "rivetrun.listen", line, false);
    listen_fd = listen_in(tmp, "rivetrun.listen");

    job_start_in(&j, dir, argv);
    job_wait(&j);
    close(listen_fd);
    assert_int_equal(j.code, 0);
    assert_false(exists_in(tmp, "rivetrun.dead00"));
    assert_false(exists_in(tmp, "rivetrun.reuse0"));
    assert_true(exists_in(tmp, "rivetrun.live00/pid"));
    assert_true(exists_in(tmp, "rivetrun.nopid0/sock"));
    assert_true(exists_in(tmp, "rivetrun.extra0/pid"));
    assert_true(exists_in(tmp, "rivetrun.listen/pid"));
    assert_int_equal(launcher_dirs(tmp), 4);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* A rivetrun killed with SIGKILL leaves its directory; the next rivetrun
 * of this user removes it. */
static void test_killed_rivetrun_dir_swept(void **state)
{
    char *dir = case_dir(), *cfg = write_config(2);
    char envfile[PATH_LEN + 16], tmp[PATH_LEN + 8];
    const char *sleep_argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT,
                                "-c", cfg, RANK_HELPER_BIN, envfile,
                                "sleep=30", NULL};
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "print=x", NULL};
    job_env_t env;
    job_t j;

    (void)state;
    snprintf(envfile, sizeof(envfile), "envfile=%s", dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
    job_start_in(&j, dir, sleep_argv);
    read_env(&j, dir, 0, &env);
    assert_int_equal(kill(j.pid, SIGKILL), 0);
    job_wait(&j); /* the ranks die with it (PR_SET_PDEATHSIG) */
    assert_int_equal(j.code, 128 + SIGKILL);
    assert_int_equal(launcher_dirs(tmp), 1);
    job_free(&j);

    job_start_in(&j, dir, argv);
    job_wait(&j);
    assert_int_equal(j.code, 0);
    assert_no_launcher_dir(dir);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* ---------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    /* rivetrun's children must not see a bootstrap of ours. */
    unsetenv("RIVET_BOOTSTRAP");
    unsetenv(RV_LAUNCH_TOKEN_ENV);
    unsetenv("RIVET_CONFIG");
    unsetenv("PMIX_RANK");
    unsetenv("PMIX_NAMESPACE");
    return mkdtemp(tmp_dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[256];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stray_without_token),
        cmocka_unit_test(test_stray_with_token),
        cmocka_unit_test(test_wrapper_child_joins),
        cmocka_unit_test(test_forged_frames),
        cmocka_unit_test(test_dir_private_and_removed),
        cmocka_unit_test(test_stale_dirs_swept),
        cmocka_unit_test(test_killed_rivetrun_dir_swept),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
