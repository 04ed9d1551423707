/*
 * rivetrun, end to end: it runs rank_helper (or sh) as the job and checks
 * exit codes, what rivetrun prints, timing and that no process of the job
 * survives it.
 *
 * Every rivetrun gets --timeout and the test kills it if it still runs
 * well after that (rivetrun_job.c), so a broken rivetrun fails a test
 * rather than hanging it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hwloc.h>

#include "rivetrun_job.h"

#ifndef RIVETRUN_BIN
#error "RIVETRUN_BIN must be defined"
#endif
#ifndef RANK_HELPER_BIN
#error "RANK_HELPER_BIN must be defined"
#endif

#define SAFETY_TIMEOUT "20"   /* --timeout of every rivetrun */

static char tmp_dir[] = "/tmp/test_rivetrun.XXXXXX";
static int case_no;

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

/* A fresh directory for one test case's pid files. */
static char *case_dir(void)
{
    char *dir = malloc(512);
    assert_non_null(dir);
    snprintf(dir, 512, "%s/case%d", tmp_dir, ++case_no);
    assert_int_equal(mkdir(dir, 0700), 0);
    return dir;
}

/* Writes a job configuration and returns its path (malloc'ed). */
static char *write_config(int processes, int threads, const char *placement,
                          const char *extra)
{
    char *path = malloc(512);
    FILE *f;

    assert_non_null(path);
    snprintf(path, 512, "%s/job%d.yaml", tmp_dir, ++case_no);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "job:\n  processes: %d\n  threads: %d\n  placement: %s\n%s",
            processes, threads, placement, extra ? extra : "");
    fclose(f);
    return path;
}

/* True if @p pid runs (a zombie does not count). */
static int pid_alive(pid_t pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;

    if (kill(pid, 0) != 0)
        return errno != ESRCH;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p == NULL || p[1] == '\0' || p[2] != 'Z';
}

/* Reads every pid file of @p dir; returns how many. */
static int read_pids(const char *dir, pid_t *pids, int max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL && n < max) {
        char path[1024];
        FILE *f;
        int pid;
        size_t len = strlen(e->d_name);

        if (e->d_name[0] == '.' || len < 4 ||
            strcmp(e->d_name + len - 4, ".pid") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = fopen(path, "r");
        if (f != NULL && fscanf(f, "%d", &pid) == 1)
            pids[n++] = pid;
        if (f != NULL)
            fclose(f);
    }
    closedir(d);
    return n;
}

/* Asserts that no process whose pid file is in @p dir survives (processes
 * killed by SIGKILL may take a moment to vanish: wait up to 1 s). */
static void assert_no_survivors(const char *dir, int expect_at_least)
{
    pid_t pids[64];
    int n = read_pids(dir, pids, 64);

    if (n < expect_at_least)
        fail_msg("only %d pid files in %s, expected %d", n, dir,
                 expect_at_least);
    for (int i = 0; i < n; i++) {
        int alive = 1;
        for (int t = 0; t < 100 && (alive = pid_alive(pids[i])); t++)
            sleep_ms(10);
        if (alive) {
            kill(pids[i], SIGKILL);
            fail_msg("pid %d of the job survived rivetrun", (int)pids[i]);
        }
    }
}

static void wait_pidfiles(job_t *j, const char *dir, int n)
{
    pid_t pids[64];
    int64_t until = now_ms() + 5000;

    while (read_pids(dir, pids, 64) < n) {
        if (now_ms() > until)
            fail_msg("the job did not write %d pid files", n);
        job_pump(j, 10);
    }
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

static void test_all_ranks_succeed(void **state)
{
    char *cfg = write_config(4, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "print=hello", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    assert_string_equal(j.text[1], "");
    assert_int_equal(count_of(j.text[0], "hello"), 4);
    job_free(&j);
    free(cfg);
}

static void test_env_vars(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT,
        "--no-prefix", "-c", cfg, "sh", "-c",
        "echo \"rank=$RIVET_RANK size=$RIVET_SIZE "
        "local=$RIVET_LOCAL_RANK/$RIVET_LOCAL_SIZE "
        "boot=${RIVET_BOOTSTRAP%%:*} cfg=$RIVET_CONFIG "
        "token=${#RIVET_JOB_TOKEN}\"", NULL};
    char line[1024];
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    for (int r = 0; r < 3; r++) {
        snprintf(line, sizeof(line),
                 "rank=%d size=3 local=%d/3 boot=unix cfg=%s token=32\n", r,
                 r, cfg);
        assert_contains(j.text[0], line);
    }
    job_free(&j);
    free(cfg);
}

static void test_np_overrides_config(void **state)
{
    char *cfg = write_config(4, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-n", "2",
                          "-c", cfg, "sh", "-c", "echo size=$RIVET_SIZE",
                          NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    assert_int_equal(count_of(j.text[0], "size=2\n"), 2);
    job_free(&j);
    free(cfg);
}

/* A rank exits 3: the job ends at once with code 3, naming the rank. */
static void test_exit_code_propagates(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, pidfile, "wait-pidfiles=3",
                          "r1:exit=3", "sleep=30", NULL};
    job_t j;

    (void)state;
    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_run(&j, argv);
    assert_int_equal(j.code, 3);
    assert_true(j.elapsed_ms < 5000);
    assert_contains(j.text[1], "rivetrun: rank 1 (pid ");
    assert_contains(j.text[1], ") exited with code 3\n");
    assert_int_equal(count_of(j.text[1], "rivetrun: rank"), 1);
    assert_no_survivors(dir, 3);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* A rank dies of SIGSEGV: code 128 + 11, the rank and signal are named.
 * It crashes once every rank and its child wrote their pid files, so that
 * the test knows every process it must not see survive. */
static void test_crash_ends_job(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, pidfile, "child-sleep=30",
                          "wait-pidfiles=6", "r2:segv", "sleep=30", NULL};
    job_t j;

    (void)state;
    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_run(&j, argv);
    assert_int_equal(j.code, 128 + SIGSEGV);
    assert_true(j.elapsed_ms < 5000);
    assert_contains(j.text[1], "rivetrun: rank 2 (pid ");
    assert_contains(j.text[1], ") killed by signal 11 (Segmentation fault)\n");
    assert_int_equal(count_of(j.text[1], "rivetrun: rank"), 1);
    /* The ranks and the children they forked. */
    assert_no_survivors(dir, 6);
    job_free(&j);
    free(cfg);
    free(dir);
}

static void test_timeout(void **state)
{
    char *cfg = write_config(2, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", "1", "-c", cfg,
                          RANK_HELPER_BIN, pidfile, "sleep=30", NULL};
    job_t j;

    (void)state;
    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_run(&j, argv);
    assert_int_equal(j.code, 124);
    assert_true(j.elapsed_ms >= 900 && j.elapsed_ms < 3500);
    assert_contains(j.text[1], "rivetrun: job timed out after 1 s\n");
    assert_no_survivors(dir, 2);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* Ranks that ignore SIGTERM get SIGKILL after the grace period. */
static void test_timeout_term_ignored(void **state)
{
    char *cfg = write_config(2, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", "1", "-c", cfg,
                          RANK_HELPER_BIN, "ignore-term", pidfile, "sleep=30",
                          NULL};
    job_t j;

    (void)state;
    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_run(&j, argv);
    assert_int_equal(j.code, 124);
    assert_true(j.elapsed_ms < 5000);
    assert_no_survivors(dir, 2);
    job_free(&j);
    free(cfg);
    free(dir);
}

static void sigterm_case(bool ignore_term)
{
    char *cfg = write_config(3, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN,
                          ignore_term ? "ignore-term" : "sleep=0", pidfile,
                          "child-sleep=30", "sleep=30", NULL};
    int64_t t0;
    job_t j;

    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_start(&j, argv);
    wait_pidfiles(&j, dir, 6);
    t0 = now_ms();
    assert_int_equal(kill(j.pid, SIGTERM), 0);
    job_wait(&j);
    assert_int_equal(j.code, 128 + SIGTERM);
    /* Ranks that ignore SIGTERM get SIGKILL 3 s later. */
    assert_true(now_ms() - t0 < (ignore_term ? 5000 : 2900));
    assert_no_survivors(dir, 6);
    job_free(&j);
    free(cfg);
    free(dir);
}

static void test_sigterm_forwarded(void **state)
{
    (void)state;
    sigterm_case(false);
}

static void test_sigterm_ignored_then_killed(void **state)
{
    (void)state;
    sigterm_case(true);
}

static void test_output_prefix(void **state)
{
    char *cfg = write_config(2, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT,
                          "--prefix", "-c", cfg, "sh", "-c",
                          "echo hello; echo oops >&2; printf tail", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    for (int r = 0; r < 2; r++) {
        char line[64];
        snprintf(line, sizeof(line), "[%d] hello\n", r);
        assert_contains(j.text[0], line);
        snprintf(line, sizeof(line), "[%d] tail\n", r);
        assert_contains(j.text[0], line);
        snprintf(line, sizeof(line), "[%d] oops\n", r);
        assert_contains(j.text[1], line);
    }
    job_free(&j);
    free(cfg);
}

static void test_output_prefix_from_config(void **state)
{
    char *cfg = write_config(2, 1, "none", "  output_prefix: true\n");
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "print=line", "eprint=partial",
                          NULL};
    const char *argv_off[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT,
                              "--no-prefix", "-c", cfg, RANK_HELPER_BIN,
                              "print=line", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    assert_contains(j.text[0], "[0] line 0\n");
    assert_contains(j.text[0], "[1] line 1\n");
    assert_contains(j.text[1], "[1] partial 1\n");
    job_free(&j);

    job_run(&j, argv_off);
    assert_int_equal(j.code, 0);
    assert_null(strstr(j.text[0], "[0]"));
    assert_contains(j.text[0], "line 0\n");
    job_free(&j);
    free(cfg);
}

static void test_bootstrap_check(void **state)
{
    char *cfg = write_config(4, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "bootstrap-check=rivetrun", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    for (int r = 0; r < 4; r++) {
        char line[64];
        snprintf(line, sizeof(line), "bootstrap-check ok %d 4\n", r);
        assert_contains(j.text[0], line);
    }
    job_free(&j);
    free(cfg);
}

/* A rank exits 0 while the others wait for it in a collective: a failure,
 * not a hang. */
static void test_exit0_during_collective(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, pidfile, "join", "barrier",
                          "r1:exit=0", "barrier", "sleep=30", NULL};
    job_t j;

    (void)state;
    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_run(&j, argv);
    assert_int_not_equal(j.code, 0);
    assert_true(j.elapsed_ms < 5000);
    assert_contains(j.text[1], "rivetrun: rank 1 (pid ");
    assert_contains(j.text[1], ") exited with code 0 without rv_finalize");
    assert_int_equal(count_of(j.text[1], "rivetrun: rank"), 1);
    assert_no_survivors(dir, 3);
    job_free(&j);
    free(cfg);
    free(dir);
}

/* The same rank that never joins at all. */
static void test_exit0_never_joined(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "r2:exit=0",
                          "bootstrap-check=rivetrun", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_not_equal(j.code, 0);
    assert_true(j.elapsed_ms < 5000);
    assert_contains(j.text[1], "rivetrun: rank 2 (pid ");
    assert_contains(j.text[1], ") exited before the job finished");
    job_free(&j);
    free(cfg);
}

/* Leaving with FINI and exiting early is fine; so is joining again after
 * leaving. */
static void test_fini_then_exit(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "join", "barrier", "fini", "join",
                          "barrier", "fini", "r0:sleep=0.5", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    assert_string_equal(j.text[1], "");
    job_free(&j);
    free(cfg);
}

static void test_abort(void **state)
{
    char *cfg = write_config(3, 1, "none", NULL);
    char *dir = case_dir();
    char pidfile[600];
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, pidfile, "join", "barrier",
                          "r2:abort=5", "barrier", "sleep=30", NULL};
    job_t j;

    (void)state;
    snprintf(pidfile, sizeof(pidfile), "pidfile=%s", dir);
    job_run(&j, argv);
    assert_int_equal(j.code, 5);
    assert_true(j.elapsed_ms < 5000);
    assert_contains(j.text[1], "rivetrun: rank 2 aborted: helper abort\n");
    assert_int_equal(count_of(j.text[1], "rivetrun: rank"), 1);
    assert_no_survivors(dir, 3);
    job_free(&j);
    free(cfg);
    free(dir);
}

static void test_exec_failure(void **state)
{
    char *cfg = write_config(2, 1, "none", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          "/nonexistent/program", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 127);
    assert_contains(j.text[1], "cannot execute /nonexistent/program: "
                               "No such file or directory");
    job_free(&j);
    free(cfg);
}

static void test_bad_config(void **state)
{
    char *cfg = write_config(2, 1, "none", "  no_such_key: 1\n");
    const char *argv[] = {RIVETRUN_BIN, "-c", cfg, "true", NULL};
    const char *argv_missing[] = {RIVETRUN_BIN, "-c", "/nonexistent.yaml",
                                  "true", NULL};
    job_t j;

    (void)state;
    job_run(&j, argv);
    assert_int_equal(j.code, 1);
    assert_contains(j.text[1], "rivetrun: ");
    assert_contains(j.text[1], "no_such_key");
    job_free(&j);

    job_run(&j, argv_missing);
    assert_int_equal(j.code, 1);
    assert_contains(j.text[1], "nonexistent.yaml");
    job_free(&j);
    free(cfg);
}

static void test_usage_errors(void **state)
{
    const char *no_program[] = {RIVETRUN_BIN, "-n", "2", NULL};
    const char *bad_np[] = {RIVETRUN_BIN, "-n", "zero", "true", NULL};
    const char *bad_timeout[] = {RIVETRUN_BIN, "--timeout", "-1", "true",
                                 NULL};
    const char *help[] = {RIVETRUN_BIN, "-h", NULL};
    job_t j;

    (void)state;
    job_run(&j, no_program);
    assert_int_equal(j.code, 1);
    job_free(&j);
    job_run(&j, bad_np);
    assert_int_equal(j.code, 1);
    job_free(&j);
    job_run(&j, bad_timeout);
    assert_int_equal(j.code, 1);
    job_free(&j);
    job_run(&j, help);
    assert_int_equal(j.code, 0);
    assert_contains(j.text[0], "usage: rivetrun");
    job_free(&j);
}

/* The cores hwloc sees, or its PUs where it sees no cores (what core
 * placement binds to then); *unit says which. */
static int placement_units(const char **unit)
{
    hwloc_topology_t topo;
    int n = 0;

    *unit = "core";
    if (hwloc_topology_init(&topo) != 0)
        return 0;
    if (hwloc_topology_load(topo) == 0) {
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        if (n <= 0) {
            n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
            *unit = "pu";
        }
    }
    hwloc_topology_destroy(topo);
    return n;
}

/* With placement core, each rank (one thread each) runs on its own core:
 * rank 0 on the first, rank 1 on the second. */
static void test_placement_core(void **state)
{
    const char *unit;
    char want[64];

    (void)state;
    if (placement_units(&unit) < 2) {
        print_message("fewer than 2 cores: two ranks cannot get a core "
                      "each\n");
        skip();
    }
    char *cfg = write_config(2, 1, "core", NULL);
    const char *argv[] = {RIVETRUN_BIN, "--timeout", SAFETY_TIMEOUT, "-c", cfg,
                          RANK_HELPER_BIN, "describe", NULL};
    job_t j;

    job_run(&j, argv);
    assert_int_equal(j.code, 0);
    for (int r = 0; r < 2; r++) {
        snprintf(want, sizeof(want), "placement %d: %s %d (", r, unit, r);
        assert_contains(j.text[0], want);
    }
    job_free(&j);
    free(cfg);
}

/* ---------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    /* rivetrun's children must not see a bootstrap of ours. */
    unsetenv("RIVET_BOOTSTRAP");
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
        cmocka_unit_test(test_all_ranks_succeed),
        cmocka_unit_test(test_env_vars),
        cmocka_unit_test(test_np_overrides_config),
        cmocka_unit_test(test_exit_code_propagates),
        cmocka_unit_test(test_crash_ends_job),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_timeout_term_ignored),
        cmocka_unit_test(test_sigterm_forwarded),
        cmocka_unit_test(test_sigterm_ignored_then_killed),
        cmocka_unit_test(test_output_prefix),
        cmocka_unit_test(test_output_prefix_from_config),
        cmocka_unit_test(test_bootstrap_check),
        cmocka_unit_test(test_exit0_during_collective),
        cmocka_unit_test(test_exit0_never_joined),
        cmocka_unit_test(test_fini_then_exit),
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_exec_failure),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_placement_core),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
