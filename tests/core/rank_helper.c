/*
 * A rank for the launcher tests: runs the actions given as arguments, in
 * order. An action prefixed "rK:" runs on rank K only.
 *
 *   exit=N              exit with code N
 *   segv                die of SIGSEGV
 *   sleep=S             sleep S seconds (fractions allowed)
 *   ignore-term         ignore SIGTERM from now on
 *   pidfile=DIR         write this process's pid to DIR/<rank>.pid
 *   child-sleep=S       fork a child that sleeps S seconds (its pid goes to
 *                       DIR/<rank>.child.pid if pidfile= came first)
 *   wait-pidfiles=N     wait (5 s at most) until DIR holds N pid files, the
 *                       children's included
 *   print=TEXT          print "TEXT <rank>" and a newline on stdout
 *   eprint=TEXT         print "TEXT <rank>" without a newline on stderr
 *   describe            print "placement <rank>: <where this thread runs>"
 *   bootstrap-check=P   join the job with the bootstrap, check that the
 *                       provider is P, run many allgathers of many sizes and
 *                       barriers checking every byte, leave; prints
 *                       "bootstrap-check ok <rank> <size>"
 *   join                join the job with the bootstrap (kept for the next
 *                       actions)
 *   barrier             a barrier (joins first if needed); exit 2 if it fails
 *   abort=N             abort the job with code N (joins first if needed)
 *   fini                leave the job cleanly
 *   envfile=DIR         write the socket's path and the job's token, one a
 *                       line, to DIR/<rank>.env (for a test that plays a
 *                       stray process)
 *   touch=PATH          create the file PATH
 *   wait-file=PATH      wait (10 s at most, else exit 3) until PATH exists
 *   forge=KIND          open a connection of its own, join as this rank
 *                       (exit 4 if refused), send a forged frame and expect
 *                       rivetrun to close the connection (exit 5 if it does
 *                       not); prints "forge KIND closed <rank>". KIND: type
 *                       (an unknown type), len (an abort whose length lies),
 *                       huge (an allgather of 1 TiB), rank (a fini claiming
 *                       another rank), hello (a second hello)
 *
 * The rank is RIVET_RANK, else PMIX_RANK, else 0.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rv_bootstrap.h"
#include "rv_launch_proto.h"
#include "rv_placement.h"

static int my_rank;
static const char *pid_dir;
static rv_bootstrap_t *bs;

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s,
                          .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void write_pidfile(const char *suffix, pid_t pid)
{
    char tmp[4096], path[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s/.%d%s.tmp", pid_dir, my_rank, suffix);
    snprintf(path, sizeof(path), "%s/%d%s", pid_dir, my_rank, suffix);
    f = fopen(tmp, "w");
    if (f == NULL) {
        perror(tmp);
        exit(90);
    }
    fprintf(f, "%d\n", (int)pid);
    fclose(f);
    /* Atomically: a reader sees the whole pid or no file. */
    if (rename(tmp, path) != 0) {
        perror(path);
        exit(90);
    }
}

static int count_pidfiles(void)
{
    DIR *d = opendir(pid_dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] != '.' && len > 4 &&
            strcmp(e->d_name + len - 4, ".pid") == 0)
            n++;
    }
    closedir(d);
    return n;
}

static void join(void)
{
    if (bs != NULL)
        return;
    if (rv__bootstrap_create(&bs) != RV_OK) {
        fprintf(stderr, "rank_helper %d: bootstrap failed\n", my_rank);
        exit(2);
    }
    my_rank = bs->rank;
}

#define CHECK(_cond, ...)                                                      \
    do {                                                                       \
        if (!(_cond)) {                                                        \
            fprintf(stderr, "bootstrap-check rank %d: ", my_rank);             \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static unsigned char pattern(int rank, int iter, size_t i)
{
    return (unsigned char)(rank * 131 + iter * 7 + (int)(i % 251) + 1);
}

static void bootstrap_check(const char *provider)
{
    static const size_t sizes[] = {0, 1, 3, 8, 100, 4096, 65536, 300000, 17};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    const int iters = 45;
    int size, *ranks;
    unsigned char *in, *out;

    join();
    size = bs->size;
    CHECK(strcmp(bs->ops->name, provider) == 0,
          "provider is %s, expected %s", bs->ops->name, provider);
    CHECK(bs->rank >= 0 && bs->rank < size, "rank %d of %d", bs->rank, size);
    CHECK(bs->local_rank >= 0 && bs->local_rank < bs->local_size &&
              bs->local_size <= size,
          "local rank %d of %d", bs->local_rank, bs->local_size);

    ranks = calloc((size_t)size, sizeof(int));
    CHECK(ranks != NULL, "out of memory");
    CHECK(bs->ops->allgather(bs, &bs->rank, ranks, sizeof(int)) == RV_OK,
          "allgather of ranks failed");
    for (int r = 0; r < size; r++)
        CHECK(ranks[r] == r, "slot %d holds rank %d", r, ranks[r]);
    free(ranks);

    in = malloc(300000);
    out = malloc(300000 * (size_t)size);
    CHECK(in != NULL && out != NULL, "out of memory");
    for (int iter = 0; iter < iters; iter++) {
        size_t len = sizes[iter % nsizes];

        for (size_t i = 0; i < len; i++)
            in[i] = pattern(bs->rank, iter, i);
        memset(out, 0, len * (size_t)size);
        CHECK(bs->ops->allgather(bs, in, out, len) == RV_OK,
              "allgather %d of %zu bytes failed", iter, len);
        for (int r = 0; r < size; r++) {
            for (size_t i = 0; i < len; i++)
                CHECK(out[(size_t)r * len + i] == pattern(r, iter, i),
                      "allgather %d of %zu bytes: byte %zu of rank %d is "
                      "wrong", iter, len, i, r);
        }
        if (iter % 3 == 0)
            CHECK(bs->ops->barrier(bs) == RV_OK, "barrier %d failed", iter);
    }
    free(in);
    free(out);
    CHECK(bs->ops->barrier(bs) == RV_OK, "last barrier failed");
    printf("bootstrap-check ok %d %d\n", bs->rank, size);
    fflush(stdout);
    bs->ops->fini(bs);
    bs = NULL;
}

/* The socket's path, from RIVET_BOOTSTRAP. */
static const char *socket_path(void)
{
    const char *addr = getenv("RIVET_BOOTSTRAP");

    if (addr == NULL || strncmp(addr, RV_LAUNCH_ADDR_PREFIX,
                                strlen(RV_LAUNCH_ADDR_PREFIX)) != 0) {
        fprintf(stderr, "rank_helper %d: no RIVET_BOOTSTRAP\n", my_rank);
        exit(99);
    }
    return addr + strlen(RV_LAUNCH_ADDR_PREFIX);
}

static void write_envfile(const char *dir)
{
    char tmp[4096], path[4096];
    const char *token = getenv(RV_LAUNCH_TOKEN_ENV);
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s/.%d.env.tmp", dir, my_rank);
    snprintf(path, sizeof(path), "%s/%d.env", dir, my_rank);
    f = fopen(tmp, "w");
    if (f == NULL) {
        perror(tmp);
        exit(90);
    }
    fprintf(f, "%s\n%s\n", socket_path(), token != NULL ? token : "");
    fclose(f);
    /* Atomically, as the pid files. */
    if (rename(tmp, path) != 0) {
        perror(path);
        exit(90);
    }
}

static void wait_file(const char *path)
{
    struct stat st;

    for (int i = 0; i < 1000; i++) {
        if (stat(path, &st) == 0)
            return;
        sleep_s(0.01);
    }
    fprintf(stderr, "rank_helper %d: %s did not appear\n", my_rank, path);
    exit(3);
}

/* Connects to rivetrun and joins as this rank, as the bootstrap does, on a
 * connection of its own. Exits 4 if rivetrun refuses it. */
static int forge_join(void)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct timeval limit = {.tv_sec = 10};
    rv_launch_hello_t hello = {.pid = (uint64_t)getpid()};
    const char *size = getenv("RIVET_SIZE");
    const char *token = getenv(RV_LAUNCH_TOKEN_ENV);
    rv_launch_hdr_t hdr;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", socket_path());
    hello.size = size != NULL ? (uint32_t)atoi(size) : 1;
    if (token != NULL)
        rv__launch_token_parse(token, hello.token);
    /* A rivetrun that neither answers nor closes fails the action. */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
        rv__launch_send(fd, RV_LAUNCH_HELLO, (uint32_t)my_rank, &hello,
                        sizeof(hello)) != RV_OK ||
        rv__launch_recv_hdr(fd, &hdr) != RV_OK ||
        hdr.type != RV_LAUNCH_HELLO) {
        fprintf(stderr, "rank_helper %d: forge: not accepted\n", my_rank);
        exit(4);
    }
    return fd;
}

static void forge(const char *kind)
{
    int fd = forge_join();
    uint32_t rank = (uint32_t)my_rank;
    rv_launch_hdr_t hdr = {.rank = rank};
    rv_launch_hello_t hello = {0};
    ssize_t n;
    char byte;

    if (strcmp(kind, "type") == 0) {
        hdr.type = 99;
    } else if (strcmp(kind, "len") == 0) {
        hdr.type = RV_LAUNCH_ABORT;
        hdr.len = 1ull << 40;
    } else if (strcmp(kind, "huge") == 0) {
        hdr.type = RV_LAUNCH_ALLGATHER;
        hdr.len = 1ull << 40;
    } else if (strcmp(kind, "rank") == 0) {
        hdr.type = RV_LAUNCH_FINI;
        hdr.rank = rank + 1;
    } else if (strcmp(kind, "hello") == 0) {
        hdr.type = RV_LAUNCH_HELLO;
        hdr.len = sizeof(hello);
    } else {
        fprintf(stderr, "rank_helper: unknown forge %s\n", kind);
        exit(99);
    }
    rv__launch_write_full(fd, &hdr, sizeof(hdr));
    if (hdr.type == RV_LAUNCH_HELLO)
        rv__launch_write_full(fd, &hello, sizeof(hello));
    /* rivetrun must close the connection: end-of-file (a reset if it
     * closed before reading all we sent), not a byte and not the receive
     * timeout. */
    n = read(fd, &byte, 1);
    if (n != 0 && !(n < 0 && errno == ECONNRESET)) {
        fprintf(stderr, "rank_helper %d: forge %s: the connection stays "
                "open\n", my_rank, kind);
        exit(5);
    }
    close(fd);
    printf("forge %s closed %d\n", kind, my_rank);
    fflush(stdout);
}

static void run_action(const char *a)
{
    const char *eq = strchr(a, '=');
    const char *arg = eq ? eq + 1 : "";
    size_t name_len = eq ? (size_t)(eq - a) : strlen(a);

#define IS(_name) (name_len == strlen(_name) && strncmp(a, _name, name_len) == 0)
    if (IS("exit")) {
        fflush(NULL);
        exit(atoi(arg));
    } else if (IS("segv")) {
        /* Sanitizers catch SIGSEGV: restore the default to really die. */
        signal(SIGSEGV, SIG_DFL);
        fflush(NULL);
        raise(SIGSEGV);
        abort(); /* not reached */
    } else if (IS("sleep")) {
        sleep_s(atof(arg));
    } else if (IS("ignore-term")) {
        signal(SIGTERM, SIG_IGN);
    } else if (IS("pidfile")) {
        pid_dir = arg;
        write_pidfile(".pid", getpid());
    } else if (IS("child-sleep")) {
        pid_t pid = fork();
        if (pid == 0) {
            sleep_s(atof(arg));
            _exit(0);
        }
        if (pid_dir != NULL)
            write_pidfile(".child.pid", pid);
    } else if (IS("wait-pidfiles")) {
        int want = atoi(arg);
        for (int i = 0; i < 500 && count_pidfiles() < want; i++)
            sleep_s(0.01);
    } else if (IS("print")) {
        printf("%s %d\n", arg, my_rank);
        fflush(stdout);
    } else if (IS("eprint")) {
        fprintf(stderr, "%s %d", arg, my_rank);
        fflush(stderr);
    } else if (IS("describe")) {
        char where[256];
        rv__placement_describe(where, sizeof(where));
        printf("placement %d: %s\n", my_rank, where);
        fflush(stdout);
    } else if (IS("bootstrap-check")) {
        bootstrap_check(arg);
    } else if (IS("join")) {
        join();
    } else if (IS("barrier")) {
        join();
        if (bs->ops->barrier(bs) != RV_OK)
            exit(2);
    } else if (IS("abort")) {
        join();
        bs->ops->abort(bs, atoi(arg), "helper abort");
    } else if (IS("fini")) {
        if (bs != NULL)
            bs->ops->fini(bs);
        bs = NULL;
    } else if (IS("envfile")) {
        write_envfile(arg);
    } else if (IS("touch")) {
        FILE *f = fopen(arg, "w");
        if (f == NULL) {
            perror(arg);
            exit(90);
        }
        fclose(f);
    } else if (IS("wait-file")) {
        wait_file(arg);
    } else if (IS("forge")) {
        forge(arg);
    } else {
        fprintf(stderr, "rank_helper: unknown action %s\n", a);
        exit(99);
    }
#undef IS
}

int main(int argc, char **argv)
{
    const char *env = getenv("RIVET_RANK");

    if (env == NULL)
        env = getenv("PMIX_RANK");
    my_rank = env != NULL ? atoi(env) : 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == 'r' && a[1] >= '0' && a[1] <= '9') {
            char *end;
            long only = strtol(a + 1, &end, 10);
            if (*end == ':') {
                if (only != my_rank)
                    continue;
                a = end + 1;
            }
        }
        run_action(a);
    }
    fflush(NULL);
    return 0;
}
