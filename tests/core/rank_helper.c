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
 *   wait-pidfiles=N     wait (5 s at most) until DIR holds N <rank>.pid files
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
#include <time.h>
#include <unistd.h>

#include "rv_bootstrap.h"
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
            strcmp(e->d_name + len - 4, ".pid") == 0 &&
            strstr(e->d_name, ".child") == NULL)
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
