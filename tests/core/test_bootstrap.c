/*
 * Bootstrap providers: selection, the singleton, the launcher protocol's
 * framing, and the rivetrun client against a fake launcher that misbehaves
 * on purpose (a client must fail, never hang, when rivetrun goes away).
 *
 * The rivetrun provider with the real launcher is exercised by test_rivetrun
 * (bootstrap-check), and the PMIx provider by the "bootstrap_pmix" test that
 * runs rank_helper under mpirun.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rv_bootstrap.h"
#include "rv_launch_proto.h"

static void clear_env(void)
{
    unsetenv("RIVET_BOOTSTRAP");
    unsetenv("RIVET_RANK");
    unsetenv("RIVET_SIZE");
    unsetenv("RIVET_LOCAL_RANK");
    unsetenv("RIVET_LOCAL_SIZE");
    unsetenv("PMIX_RANK");
    unsetenv("PMIX_NAMESPACE");
}

/* ---------------------------------------------------------------------- */
/* Singleton and selection                                                 */
/* ---------------------------------------------------------------------- */

static void test_singleton(void **state)
{
    rv_bootstrap_t *bs = NULL;
    char in[5] = "abcd", out[5] = "";

    (void)state;
    clear_env();
    assert_int_equal(rv__bootstrap_create(&bs), RV_OK);
    assert_string_equal(bs->ops->name, "singleton");
    assert_int_equal(bs->rank, 0);
    assert_int_equal(bs->size, 1);
    assert_int_equal(bs->local_rank, 0);
    assert_int_equal(bs->local_size, 1);
    assert_int_equal(bs->ops->allgather(bs, in, out, sizeof(in)), RV_OK);
    assert_string_equal(out, "abcd");
    assert_int_equal(bs->ops->allgather(bs, NULL, NULL, 0), RV_OK);
    assert_int_equal(bs->ops->barrier(bs), RV_OK);
    bs->ops->fini(bs);
}

/* RIVET_BOOTSTRAP selects the rivetrun provider, which then checks its
 * environment: errors, not crashes, and the output stays unset. */
static void test_rivetrun_env_errors(void **state)
{
    rv_bootstrap_t *bs = NULL;

    (void)state;
    clear_env();
    setenv("RIVET_BOOTSTRAP", "unix:/nonexistent/sock", 1);
    assert_int_equal(rv__bootstrap_create(&bs), RV_ERR_BOOTSTRAP); /* no rank */
    setenv("RIVET_RANK", "0", 1);
    setenv("RIVET_SIZE", "2", 1);
    assert_int_equal(rv__bootstrap_create(&bs), RV_ERR_BOOTSTRAP); /* connect */
    setenv("RIVET_RANK", "2", 1);
    assert_int_equal(rv__bootstrap_create(&bs), RV_ERR_BOOTSTRAP); /* range */
    setenv("RIVET_RANK", "x", 1);
    assert_int_equal(rv__bootstrap_create(&bs), RV_ERR_BOOTSTRAP);
    setenv("RIVET_RANK", "0", 1);
    setenv("RIVET_BOOTSTRAP", "tcp:127.0.0.1:1", 1);
    assert_int_equal(rv__bootstrap_create(&bs), RV_ERR_BOOTSTRAP); /* form */
    assert_null(bs);
    clear_env();
}

/* ---------------------------------------------------------------------- */
/* Framing                                                                 */
/* ---------------------------------------------------------------------- */

static void test_proto_roundtrip(void **state)
{
    int sv[2];
    rv_launch_hdr_t hdr;
    char buf[16] = "";

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(rv__launch_send(sv[0], RV_LAUNCH_ALLGATHER, 7, "payload",
                                     8), RV_OK);
    assert_int_equal(rv__launch_send(sv[0], RV_LAUNCH_FINI, 7, NULL, 0),
                     RV_OK);
    assert_int_equal(rv__launch_recv_hdr(sv[1], &hdr), RV_OK);
    assert_int_equal(hdr.type, RV_LAUNCH_ALLGATHER);
    assert_int_equal(hdr.rank, 7);
    assert_int_equal(hdr.len, 8);
    assert_int_equal(rv__launch_read_full(sv[1], buf, 8), RV_OK);
    assert_string_equal(buf, "payload");
    assert_int_equal(rv__launch_recv_hdr(sv[1], &hdr), RV_OK);
    assert_int_equal(hdr.type, RV_LAUNCH_FINI);
    assert_int_equal(hdr.len, 0);
    assert_string_equal(rv__launch_type_name(RV_LAUNCH_ABORT), "abort");
    assert_string_equal(rv__launch_type_name(99), "unknown");

    /* A closed peer: end of file for a reader, no SIGPIPE for a writer. */
    close(sv[0]);
    assert_int_equal(rv__launch_recv_hdr(sv[1], &hdr), RV_ERR_PEER);
    assert_int_equal(rv__launch_send(sv[1], RV_LAUNCH_FINI, 0, NULL, 0),
                     RV_ERR_PEER);
    close(sv[1]);
}

static void test_proto_pipe(void **state)
{
    int p[2];
    char big[100000], got[100000];

    (void)state;
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 13);
    assert_int_equal(pipe(p), 0);
    /* Larger than a pipe's buffer: the writer needs a reader. */
    if (fork() == 0) {
        close(p[0]);
        _exit(rv__launch_write_full(p[1], big, sizeof(big)) == RV_OK ? 0 : 1);
    }
    close(p[1]);
    assert_int_equal(rv__launch_read_full(p[0], got, sizeof(got)), RV_OK);
    assert_memory_equal(big, got, sizeof(big));
    assert_int_equal(rv__launch_read_full(p[0], got, 1), RV_ERR_PEER);
    close(p[0]);
}

/* ---------------------------------------------------------------------- */
/* The rivetrun client against a fake launcher                             */
/* ---------------------------------------------------------------------- */

typedef enum {
    FAKE_REFUSE,            /* close after the hello */
    FAKE_CLOSE_IN_ROUND,    /* accept, then close during the first allgather */
    FAKE_SERVE,             /* serve a job of one until FINI */
} fake_mode_t;

typedef struct fake {
    fake_mode_t mode;
    char dir[64];
    char path[128];
    int listen_fd;
    pthread_t thread;
    int frames;             /* frames received */
    int fini;               /* FINI received */
    uint32_t last_type;     /* the last frame received */
    char last_payload[256];
    size_t last_len;
} fake_t;

static int read_frame(int fd, rv_launch_hdr_t *hdr, char **payload)
{
    if (rv__launch_recv_hdr(fd, hdr) != RV_OK)
        return -1;
    *payload = malloc(hdr->len + 1);
    if (*payload == NULL ||
        rv__launch_read_full(fd, *payload, (size_t)hdr->len) != RV_OK)
        return -1;
    return 0;
}

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    rv_launch_hdr_t hdr;
    char *payload = NULL;
    int fd = accept(f->listen_fd, NULL, NULL);

    if (fd < 0)
        return NULL;
    if (read_frame(fd, &hdr, &payload) != 0 || hdr.type != RV_LAUNCH_HELLO)
        goto out;
    f->frames++;
    if (f->mode == FAKE_REFUSE)
        goto out;
    rv__launch_send(fd, RV_LAUNCH_HELLO, RV_LAUNCH_RANK_LAUNCHER, NULL, 0);
    for (;;) {
        free(payload);
        payload = NULL;
        if (read_frame(fd, &hdr, &payload) != 0)
            break;
        f->frames++;
        f->last_type = hdr.type;
        f->last_len = (size_t)hdr.len;
        memcpy(f->last_payload, payload,
               hdr.len < sizeof(f->last_payload) ? (size_t)hdr.len
                                                 : sizeof(f->last_payload));
        if (hdr.type == RV_LAUNCH_FINI) {
            f->fini = 1;
            break;
        }
        if (f->mode == FAKE_CLOSE_IN_ROUND)
            break;
        rv__launch_send(fd, hdr.type, RV_LAUNCH_RANK_LAUNCHER, payload,
                        (size_t)hdr.len);
    }
out:
    free(payload);
    close(fd);
    return NULL;
}

static void fake_start(fake_t *f, fake_mode_t mode)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    char addr[160];

    memset(f, 0, sizeof(*f));
    f->mode = mode;
    strcpy(f->dir, "/tmp/test_bootstrap.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/sock", f->dir);
    strcpy(sun.sun_path, f->path);
    f->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(f->listen_fd >= 0);
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&sun, sizeof(sun)),
                     0);
    assert_int_equal(listen(f->listen_fd, 4), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);

    clear_env();
    snprintf(addr, sizeof(addr), "unix:%s", f->path);
    setenv("RIVET_BOOTSTRAP", addr, 1);
    setenv("RIVET_RANK", "0", 1);
    setenv("RIVET_SIZE", "1", 1);
}

static void fake_stop(fake_t *f)
{
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    unlink(f->path);
    rmdir(f->dir);
    clear_env();
}

static void test_client_serve(void **state)
{
    rv_bootstrap_t *bs = NULL;
    fake_t f;
    uint64_t in = 0x1122334455667788ull, out = 0;

    (void)state;
    fake_start(&f, FAKE_SERVE);
    assert_int_equal(rv__bootstrap_create(&bs), RV_OK);
    assert_string_equal(bs->ops->name, "rivetrun");
    assert_int_equal(bs->rank, 0);
    assert_int_equal(bs->size, 1);
    assert_int_equal(bs->local_size, 1);
    assert_int_equal(bs->ops->allgather(bs, &in, &out, sizeof(in)), RV_OK);
    assert_true(out == in);
    assert_int_equal(bs->ops->barrier(bs), RV_OK);
    bs->ops->fini(bs);
    fake_stop(&f);
    assert_int_equal(f.frames, 4); /* hello, allgather, barrier, fini */
    assert_true(f.fini);
}

static void test_client_refused(void **state)
{
    rv_bootstrap_t *bs = NULL;
    fake_t f;

    (void)state;
    fake_start(&f, FAKE_REFUSE);
    assert_int_equal(rv__bootstrap_create(&bs), RV_ERR_BOOTSTRAP);
    assert_null(bs);
    fake_stop(&f);
}

/* The launcher goes away while this rank waits in a collective: the
 * collective fails at once, and so does every later one. */
static void test_client_launcher_gone(void **state)
{
    rv_bootstrap_t *bs = NULL;
    fake_t f;
    char in[100] = {0}, out[100];

    (void)state;
    fake_start(&f, FAKE_CLOSE_IN_ROUND);
    assert_int_equal(rv__bootstrap_create(&bs), RV_OK);
    assert_int_equal(bs->ops->allgather(bs, in, out, sizeof(in)),
                     RV_ERR_BOOTSTRAP);
    assert_int_equal(bs->ops->barrier(bs), RV_ERR_BOOTSTRAP);
    bs->ops->fini(bs);
    fake_stop(&f);
}

/* Abort sends ABORT with the code and reason, then exits with the code. */
static void test_client_abort(void **state)
{
    rv_bootstrap_t *bs = NULL;
    rv_launch_abort_t abt;
    int wstatus;
    fake_t f;
    pid_t pid;

    (void)state;
    fake_start(&f, FAKE_CLOSE_IN_ROUND);
    /* The rank is a child; the fake launcher is a thread of this process. */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        if (rv__bootstrap_create(&bs) != RV_OK)
            _exit(77);
        bs->ops->abort(bs, 9, "test reason");
        _exit(78);
    }
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 9);
    fake_stop(&f);
    assert_int_equal(f.frames, 2); /* hello, abort */
    assert_int_equal(f.last_type, RV_LAUNCH_ABORT);
    assert_int_equal(f.last_len, sizeof(abt) + strlen("test reason"));
    memcpy(&abt, f.last_payload, sizeof(abt));
    assert_int_equal(abt.code, 9);
    assert_memory_equal(f.last_payload + sizeof(abt), "test reason",
                        strlen("test reason"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_singleton),
        cmocka_unit_test(test_rivetrun_env_errors),
        cmocka_unit_test(test_proto_roundtrip),
        cmocka_unit_test(test_proto_pipe),
        cmocka_unit_test(test_client_serve),
        cmocka_unit_test(test_client_refused),
        cmocka_unit_test(test_client_launcher_gone),
        cmocka_unit_test(test_client_abort),
    };

    /* Never hang: a stuck collective ends the test run. */
    alarm(60);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
