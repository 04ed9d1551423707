/*
 * rivet-store: the object store from the command line.
 *
 *   rivetrun -c configs/store.yaml build/bin/rivet-store put FILE...
 *
 * Rank 0 puts each file as an object (its id derived from the file's
 * name, its metadata the name), read straight into the object's buffer;
 * every other rank then gets every object, remotely. Each side prints,
 * per object, its id, name, size and SHA-256 (as sha256sum prints it,
 * over the bytes that side holds) and, on the fetching side, the fetch's
 * time and throughput. The job fails when a fetched object's digest
 * differs from the one rank 0 computed.
 *
 *   rivet-store get [-t|--timeout TIMEOUT_MS] NAME...
 *
 * Every rank gets the objects named (put by an earlier `put` in the same
 * job is not possible across jobs: a job's store ends with it), waiting
 * up to TIMEOUT_MS for each (default: GET_TIMEOUT_MS, said on stderr;
 * "forever" waits as long as it takes) -- useful beside a program that
 * puts them. A file that cannot be put, or an object that cannot be got,
 * is named and skipped; the others still go, and the job fails at the
 * end.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rivet_store.h"

/* get's wait for each object without -t: an object no one puts would
 * otherwise keep every process busy-polling for ever. */
#define GET_TIMEOUT_MS 30000

opts_t opt = {.timeout_ms = GET_TIMEOUT_MS, .to = "."};

double now_s(void)
{
    return (double)rv_time_ns() * 1e-9;
}

const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void sha256_hex(const void *data, size_t n, uint8_t out[SHA256_DIGEST_SIZE],
                char hex[65])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, data);
    sha256_digest(&c, SHA256_DIGEST_SIZE, out);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", out[i]);
}

void object_id(const char *name, rv_object_id_t *id, char hex[41])
{
    rv_object_id_of(name, strlen(name), id);
    rv_object_id_to_hex(id, hex);
}

/* Reads file @p path into object @p id and seals it. */
static rv_status_t put_file(rv_worker_t *w, const char *path, int k)
{
    const char *name = base_name(path);
    rv_object_id_t id;
    char idhex[41], dhex[65];
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "rivet-store: %s: cannot read it as a regular file\n",
                path);
        if (fd >= 0)
            close(fd);
        return RV_ERR_IO;
    }
    object_id(name, &id, idhex);
    void *data;
    rv_status_t st =
        rv_store_create(w, &id, (size_t)sb.st_size, name, strlen(name), &data);
    for (off_t done = 0; st == RV_OK && done < sb.st_size;) {
        ssize_t r = read(fd, (char *)data + done, (size_t)(sb.st_size - done));
        if (r <= 0) {
            fprintf(stderr,
                    "rivet-store: %s: read failed or the file "
                    "shrank\n",
                    path);
            rv_store_abort(w, &id);
            st = RV_ERR_IO;
        }
        done += r > 0 ? r : 0;
    }
    close(fd);
    if (st != RV_OK)
        return st;
    sha256_hex(data, (size_t)sb.st_size, opt.digests[k], dhex);
    st = rv_store_seal(w, &id);
    if (st == RV_OK)
        printf("put %s %s %jd B sha256 %s\n", idhex, name, (intmax_t)sb.st_size,
               dhex);
    return st;
}

/* Gets object @p k and checks its digest against rank 0's. */
static rv_status_t get_file(rv_worker_t *w, const char *path, int k)
{
    const char *name = base_name(path);
    rv_object_id_t id;
    char idhex[41], dhex[65];
    uint8_t digest[SHA256_DIGEST_SIZE];
    rv_store_buf_t b;
    object_id(name, &id, idhex);
    double t0 = now_s();
    rv_status_t st = rv_store_get(w, &id, 1, opt.timeout_ms, &b, NULL);
    double t = now_s() - t0;
    if (st != RV_OK) {
        fprintf(stderr, "rivet-store: get %s (%s): %s\n", name, idhex,
                rv_status_str(st));
        return st;
    }
    sha256_hex(b.data, b.data_size, digest, dhex);
    printf("get %s %s %zu B sha256 %s in %.3f ms, %.1f MB/s\n", idhex, name,
           b.data_size, dhex, t * 1e3,
           t > 0 ? (double)b.data_size / t / 1e6 : 0.0);
    if (opt.cmd != CMD_GET &&
        memcmp(digest, opt.digests[k], SHA256_DIGEST_SIZE) != 0) {
        fprintf(stderr,
                "rivet-store: %s: the bytes fetched differ from "
                "the bytes put\n",
                name);
        st = RV_ERR_INVALID;
    }
    rv_store_release(w, &id);
    return st;
}

static int worker(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_status_t st = RV_OK;
    (void)arg;
    /* One worker per process puts or gets; rank 0's first worker puts. */
    bool mine = rv_worker_local(w) == 0;
    bool putter = opt.cmd != CMD_GET && rv_worker_tid(w) == 0;
    bool *put_ok = calloc((size_t)opt.nfiles, sizeof(*put_ok));
    if (put_ok == NULL)
        rv_abort(ctx, 1, "rivet-store: out of memory");
    if (opt.cmd == CMD_STAGE) {
        st = stage_files(w);
        free(put_ok);
        rv_barrier(w);
        return st == RV_OK ? 0 : 1;
    }
    if (opt.cmd == CMD_GET && !opt.timeout_given && rv_worker_tid(w) == 0)
        fprintf(stderr,
                "rivet-store: get waits up to %d s for each object "
                "(-t MS or -t forever to change it)\n",
                GET_TIMEOUT_MS / 1000);
    /* A file that cannot be put is said and skipped: the others still go,
     * and the job fails at the end. */
    for (int k = 0; putter && k < opt.nfiles; k++) {
        put_ok[k] = put_file(w, opt.files[k], k) == RV_OK;
        if (!put_ok[k]) {
            fprintf(stderr, "rivet-store: %s: not put; the other files are\n",
                    opt.files[k]);
            st = RV_ERR_IO;
        }
    }
    fflush(stdout);
    /* Rank 0's digests, for the others to check against (every worker
     * takes part in the gather; the putter's come first). */
    if (opt.cmd != CMD_GET) {
        /* [put ok][digest], per file. */
        uint8_t rec[40] = {0};
        uint8_t *all = malloc(sizeof(rec) * (size_t)rv_nworkers(ctx));
        for (int k = 0; k < opt.nfiles; k++) {
            rec[0] = putter && put_ok[k];
            memcpy(rec + 8, opt.digests[k], 32);
            rv_status_t gst = all ? rv_coll_allgather(w, all, rec, sizeof(rec))
                                  : RV_ERR_NO_MEMORY;
            if (gst != RV_OK)
                rv_abort(ctx, 1, "rivet-store: gathering the digests failed");
            if (mine) {
                put_ok[k] = all[0];
                memcpy(opt.digests[k], all + 8, 32);
            }
        }
        free(all);
    }
    for (int k = 0; mine && !putter && k < opt.nfiles; k++) {
        if (opt.cmd == CMD_PUT && !put_ok[k]) {
            fprintf(stderr, "rivet-store: %s: rank 0 could not put it\n",
                    opt.files[k]);
            st = RV_ERR_NOT_FOUND;
            continue;
        }
        if (get_file(w, opt.files[k], k) != RV_OK)
            st = RV_ERR_IO;
    }
    free(put_ok);
    fflush(stdout);
    rv_barrier(w);
    return st == RV_OK ? 0 : 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rivet-store put FILE...\n"
               "       rivet-store get [-t|--timeout TIMEOUT_MS|forever] "
               "NAME...\n"
               "         (get waits 30 s for each object by default)\n"
               "       rivet-store stage [--to DIR] [-t|--timeout "
               "TIMEOUT_MS|forever] FILE...\n"
               "         (writes each FILE into DIR on every host of the "
               "job, one fetch\n"
               "          per host; %%h in DIR is the host's name; DIR "
               "defaults to .)\n"
               "       rivet-store --help | --version\n"
               "under rivetrun, e.g. rivetrun -c configs/store.yaml "
               "build/bin/rivet-store put FILE...\n");
}

/* The command line into opt: 0, or the exit status (0 after --help). */
static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"timeout", required_argument, NULL, 't'},
        {"to", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc > 1 &&
        (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return -1;
    }
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("rivet-store (rivet) %s\n", rv_version(NULL, NULL, NULL));
        return -1;
    }
    if (argc < 2 ||
        (strcmp(argv[1], "get") != 0 && strcmp(argv[1], "put") != 0 &&
         strcmp(argv[1], "stage") != 0)) {
        usage(stderr);
        return 2;
    }
    opt.cmd = strcmp(argv[1], "get") == 0   ? CMD_GET
              : strcmp(argv[1], "put") == 0 ? CMD_PUT
                                            : CMD_STAGE;
    /* The options after the command: getopt_long over argv[1..]. */
    int c;
    char *end;
    while ((c = getopt_long(argc - 1, argv + 1,
                            opt.cmd == CMD_PUT ? "h" : "t:h", longs, NULL)) !=
           -1) {
        switch (c) {
        case 't':
            errno = 0;
            opt.timeout_given = true;
            if (strcmp(optarg, "forever") == 0) {
                opt.timeout_ms = RV_STORE_WAIT_FOREVER;
                break;
            }
            opt.timeout_ms = strtoll(optarg, &end, 10);
            if (opt.cmd == CMD_PUT || errno != 0 || end == optarg ||
                *end != '\0' || opt.timeout_ms < 0) {
                fprintf(stderr,
                        "rivet-store: --timeout '%s': expected a number of "
                        "milliseconds, 0 or more, or forever (get and stage "
                        "only)\n",
                        optarg);
                return 2;
            }
            break;
        case 'o':
            if (opt.cmd != CMD_STAGE || optarg[0] == '\0') {
                fprintf(stderr,
                        "rivet-store: --to: a folder, for stage only\n");
                return 2;
            }
            opt.to = optarg;
            break;
        case 'h':
            usage(stdout);
            return -1;
        default: /* getopt_long said what was wrong */
            usage(stderr);
            return 2;
        }
    }
    /* stage waits for each file as long as rank 0 takes to put the ones
     * before it; a rank that dies ends the job. */
    if (opt.cmd == CMD_STAGE && !opt.timeout_given)
        opt.timeout_ms = RV_STORE_WAIT_FOREVER;
    opt.files = argv + 1 + optind;
    opt.nfiles = argc - 1 - optind;
    if (opt.nfiles <= 0) {
        fprintf(stderr, "rivet-store: %s: no %s named\n", argv[1],
                opt.cmd == CMD_GET ? "object" : "file");
        usage(stderr);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = parse_args(argc, argv);
    if (rc != 0) {
        rv_finalize(ctx);
        return rc < 0 ? 0 : rc;
    }
    opt.digests = calloc((size_t)opt.nfiles, sizeof(*opt.digests));
    if (opt.digests == NULL || rv_store_init(ctx) != RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    free(opt.digests);
    return st == RV_OK ? 0 : 1;
}
