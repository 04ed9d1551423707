/*
 * rivet-store stage: a job's input files, put once by rank 0, written on
 * every host of the job, as Slurm's sbcast does: one fetch per host (its
 * first process's first worker fetches; the host's other processes do
 * nothing). Rank 0 puts the files one after another, each object the
 * file's bytes followed by their SHA-256, and every other host fetches
 * each one as soon as it is sealed, the next one while it writes the
 * one before: the put, the transfer and the writes overlap, as a stream
 * would. A host checks each file against the digest rank 0 appended
 * before renaming it into place from a temporary file, so it never shows
 * a partial or corrupt file under its name, and gives it rank 0's
 * permissions. A file that cannot be read, fetched or written is named
 * with its host and skipped; the others are still staged, and the job
 * fails at the end. The folder is made where it is missing, as mkdir -p.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rivet_store.h"

/* What rank 0 found of a file before putting it: readable (STAGE_OK), and
 * its permissions in the low bits. */
#define STAGE_OK ((uint64_t)1 << 63)

/* A staged object: the file's bytes, then their SHA-256. */
#define STAGE_TRAILER SHA256_DIGEST_SIZE

/* Rank 0: whether file @p k can be read as a regular file, with its
 * permissions; said on stderr when it cannot. */
static uint64_t probe(int k)
{
    struct stat sb;
    int fd = open(opt.files[k], O_RDONLY);
    bool ok = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    if (fd >= 0)
        close(fd);
    if (!ok) {
        fprintf(stderr,
                "rivet-store: %s: cannot read it as a regular file; the "
                "other files are staged\n",
                opt.files[k]);
        return 0;
    }
    return STAGE_OK | (uint64_t)(sb.st_mode & 07777);
}

/* Reads @p len bytes of @p fd into @p p; false if the file ended early or
 * failed. */
static bool read_all(int fd, uint8_t *p, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t r = read(fd, p + done, len - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        done += (size_t)r;
    }
    return true;
}

/* Rank 0: puts file @p k as its staged object. One that cannot be read
 * whole is put empty, which its fetchers report, rather than never. */
static rv_status_t put_staged(rv_worker_t *w, int k)
{
    const char *name = base_name(opt.files[k]);
    rv_object_id_t id;
    char idhex[41], dhex[65];
    struct stat sb;
    void *data;
    object_id(name, &id, idhex);
    int fd = open(opt.files[k], O_RDONLY);
    size_t len = 0;
    rv_status_t st = RV_ERR_IO;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        len = (size_t)sb.st_size;
        st = rv_store_create(w, &id, len + STAGE_TRAILER, name, strlen(name),
                             &data);
        if (st == RV_OK && !read_all(fd, data, len)) {
            rv_store_abort(w, &id);
            st = RV_ERR_IO;
        }
    }
    if (fd >= 0)
        close(fd);
    if (st == RV_OK) {
        sha256_hex(data, len, (uint8_t *)data + len, dhex);
        st = rv_store_seal(w, &id);
        return st;
    }
    fprintf(stderr,
            "rivet-store: %s: reading it failed or it shrank; not "
            "staged\n",
            opt.files[k]);
    if (rv_store_create(w, &id, 0, name, strlen(name), &data) == RV_OK)
        rv_store_seal(w, &id);
    return RV_ERR_IO;
}

/* Whether this worker stages for its host: the first worker of the
 * host's lowest rank. */
static bool host_stager(rv_worker_t *w)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_rank_t me = rv_rank(ctx);
    int host = rv_rank_host(ctx, me);
    if (rv_worker_local(w) != 0)
        return false;
    for (rv_rank_t r = 0; r < me; r++)
        if (rv_rank_host(ctx, r) == host)
            return false;
    return true;
}

/* This host's name, for the folder and the messages. */
static char host[256];

/* opt.to with "%h" replaced by this host's name. */
static bool stage_dir(char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = opt.to; *p != '\0' && n + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'h') {
            n += (size_t)snprintf(out + n, len - n, "%s", host);
            p++;
        } else {
            out[n++] = *p;
        }
    }
    if (n + 1 >= len)
        return false;
    out[n] = '\0';
    return true;
}

/* Makes folder @p dir and its parents, as mkdir -p; false (said) if it
 * cannot be made. */
static bool make_dir(const char *dir)
{
    char p[PATH_MAX];
    if (dir[0] == '\0') {
        fprintf(stderr, "rivet-store: host %s: --to %s names no folder\n", host,
                opt.to);
        return false;
    }
    snprintf(p, sizeof(p), "%s", dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char end = *c;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr,
                    "rivet-store: host %s: --to %s: cannot make %s: %s\n", host,
                    dir, p, strerror(errno));
            return false;
        }
        if (end == '\0')
            return true;
        *c = end;
    }
}

/* One file's fetch: started ahead of the one being written. */
typedef struct {
    int k; /* the file, or -1 */
    rv_object_id_t id;
    char idhex[41];
    rv_store_buf_t buf;
    rv_status_t status;
    rv_sync_t sync;
    double t0;
} fetch_t;

/* Starts fetching file @p k (a file rank 0 put), or nothing for -1. */
static void fetch_start(rv_worker_t *w, fetch_t *f, int k)
{
    f->k = k;
    if (k < 0)
        return;
    object_id(base_name(opt.files[k]), &f->id, f->idhex);
    rv_sync_init(&f->sync, 0);
    f->t0 = now_s();
    if (rv_store_get_async(w, &f->id, 1, opt.timeout_ms, &f->buf, &f->status,
                           &f->sync) != RV_OK)
        f->status = RV_ERR_INVALID;
}

/* Writes @p n bytes at @p p to @p fd, hashing them, a slice at a time
 * with the worker progressed between slices: the next file's fetch goes
 * on while this one is written. False on an error (errno set). */
#define SLICE ((size_t)1 << 20)
static bool write_hashed(rv_worker_t *w, int fd, const uint8_t *p, size_t n,
                         struct sha256_ctx *h /* NULL: no hash */)
{
    while (n > 0) {
        size_t len = n < SLICE ? n : SLICE;
        if (h != NULL)
            sha256_update(h, len, p);
        for (size_t done = 0; done < len;) {
            ssize_t r = write(fd, p + done, len - done);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return false;
            done += (size_t)r;
        }
        p += len;
        n -= len;
        rv_progress(w);
    }
    return true;
}

/* Writes the fetched file @p k into @p dir under its name: a temporary
 * file beside it, hashed as it is written, renamed into place only when
 * its SHA-256 is rank 0's, so the name shows only the whole file. */
static rv_status_t write_file(rv_worker_t *w, const char *dir, int k,
                              const rv_store_buf_t *b, uint32_t mode,
                              char dhex[65])
{
    const char *name = base_name(opt.files[k]);
    char tmp[PATH_MAX], path[PATH_MAX];
    uint8_t digest[SHA256_DIGEST_SIZE];
    struct sha256_ctx h;
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) ||
        snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >=
            (int)sizeof(tmp)) {
        fprintf(stderr, "rivet-store: host %s: %s/%s: the path is too long\n",
                host, dir, name);
        return RV_ERR_INVALID;
    }
    sha256_init(&h);
    int fd = mkstemp(tmp);
    /* Rank 0 writes its own copy from the bytes it hashed itself: no
     * transfer to check. The permissions are those of rank 0's file, as
     * sbcast keeps them. */
    bool check = rv_worker_tid(w) != 0;
    size_t len = b->data_size - STAGE_TRAILER;
    const uint8_t *put_digest = (const uint8_t *)b->data + len;
    if (fd < 0 || !write_hashed(w, fd, b->data, len, check ? &h : NULL) ||
        fsync(fd) != 0 || fchmod(fd, (mode_t)mode) != 0) {
        fprintf(stderr, "rivet-store: host %s: %s: cannot write it: %s\n", host,
                path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return RV_ERR_IO;
    }
    close(fd);
    if (check)
        sha256_digest(&h, SHA256_DIGEST_SIZE, digest);
    else
        memcpy(digest, put_digest, SHA256_DIGEST_SIZE);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(dhex + 2 * i, 3, "%02x", digest[i]);
    if (memcmp(digest, put_digest, SHA256_DIGEST_SIZE) != 0) {
        fprintf(stderr,
                "rivet-store: host %s: %s: the bytes fetched differ from the "
                "bytes put; not written\n",
                host, name);
        unlink(tmp);
        return RV_ERR_INVALID;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "rivet-store: host %s: %s: cannot write it: %s\n", host,
                path, strerror(errno));
        unlink(tmp);
        return RV_ERR_IO;
    }
    return RV_OK;
}

/* Waits for fetch @p f, writes its file (permissions @p mode) into @p dir
 * and says so; *bytes_p grows by its size. */
static rv_status_t stage_one(rv_worker_t *w, const char *dir, fetch_t *f,
                             uint32_t mode, uint64_t *bytes_p)
{
    const char *name = base_name(opt.files[f->k]);
    char dhex[65];
    rv_sync_wait(w, &f->sync);
    if (f->status != RV_OK) {
        fprintf(stderr, "rivet-store: host %s: %s: cannot fetch it (%s): %s\n",
                host, name, f->idhex, rv_status_str(f->status));
        return f->status;
    }
    rv_status_t st = RV_ERR_IO;
    if (f->buf.data_size < STAGE_TRAILER)
        fprintf(stderr, "rivet-store: host %s: %s: rank 0 could not read it\n",
                host, name);
    else
        st = write_file(w, dir, f->k, &f->buf, mode, dhex);
    double t = now_s() - f->t0;
    size_t len = f->buf.data_size - STAGE_TRAILER;
    if (st == RV_OK) {
        printf("staged %s/%s %zu B sha256 %s in %.3f s, %.1f MB/s\n", dir, name,
               len, dhex, t, t > 0 ? (double)len / t / 1e6 : 0.0);
        fflush(stdout);
        *bytes_p += len;
    }
    rv_store_release(w, &f->id);
    return st;
}

/* The first file after @p k that rank 0 could read (-1: none). */
static int next_ok(int k, const uint64_t *info)
{
    for (k++; k < opt.nfiles; k++)
        if (info[k] & STAGE_OK)
            return k;
    return -1;
}

/* The host's stager: every file rank 0 could read, into opt.to. */
static rv_status_t stage_host(rv_worker_t *w, const uint64_t *info)
{
    char dir[PATH_MAX];
    rv_status_t st = RV_OK;
    uint64_t bytes = 0;
    int staged = 0;
    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "?");
    if (!stage_dir(dir, sizeof(dir))) {
        fprintf(stderr, "rivet-store: --to %s: the path is too long\n", opt.to);
        return RV_ERR_INVALID;
    }
    if (!make_dir(dir))
        return RV_ERR_IO;
    /* Two fetches: the next file's goes on (or waits for its seal) while
     * this one is written. */
    fetch_t f[2];
    fetch_start(w, &f[0], next_ok(-1, info));
    for (int i = 0; f[i & 1].k >= 0; i++) {
        fetch_t *cur = &f[i & 1], *next = &f[(i + 1) & 1];
        fetch_start(w, next, next_ok(cur->k, info));
        rv_status_t fst =
            stage_one(w, dir, cur, (uint32_t)(info[cur->k] & 07777), &bytes);
        if (fst == RV_OK)
            staged++;
        else if (st == RV_OK)
            st = fst;
    }
    /* From the barrier before the put: what staging took on this host. */
    double t = now_s() - opt.t_begin;
    printf("host %d: staged %d of %d files, %" PRIu64
           " B into %s in %.3f s, %.1f MB/s\n",
           rv_rank_host(rv_worker_context(w), rv_rank(rv_worker_context(w))),
           staged, opt.nfiles, bytes, dir, t,
           t > 0 ? (double)bytes / t / 1e6 : 0.0);
    fflush(stdout);
    return st;
}

rv_status_t stage_files(rv_worker_t *w)
{
    rv_context_t *ctx = rv_worker_context(w);
    bool putter = rv_worker_tid(w) == 0;
    size_t len = (size_t)opt.nfiles * sizeof(uint64_t);
    uint64_t *info = calloc((size_t)opt.nfiles, sizeof(*info));
    uint8_t *all = malloc(len * (size_t)rv_nworkers(ctx));
    rv_status_t st = RV_OK;
    if (info == NULL || all == NULL)
        rv_abort(ctx, 1, "rivet-store: out of memory");
    /* The time on each host counts from here, before the put: what a
     * person waits for. */
    rv_barrier(w);
    opt.t_begin = now_s();
    for (int k = 0; putter && k < opt.nfiles; k++) {
        info[k] = probe(k);
        if (!(info[k] & STAGE_OK))
            st = RV_ERR_IO;
    }
    /* Which files rank 0 will put, and their permissions, for every host
     * (the putter's rows come first). */
    if (rv_coll_allgather(w, all, info, len) != RV_OK)
        rv_abort(ctx, 1, "rivet-store: gathering the files' list failed");
    memcpy(info, all, len);
    free(all);
    for (int k = 0; putter && k < opt.nfiles; k++)
        if ((info[k] & STAGE_OK) && put_staged(w, k) != RV_OK)
            st = RV_ERR_IO;
    if (host_stager(w) && stage_host(w, info) != RV_OK)
        st = RV_ERR_IO;
    free(info);
    return st;
}
