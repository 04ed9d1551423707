/*
 * rivet-store stage: a job's input files, put once by rank 0, written on
 * every host of the job, as Slurm's sbcast does: one fetch per host (its
 * first process's first worker fetches; the host's other processes do
 * nothing), each file checked against rank 0's SHA-256 before it is
 * renamed into place, so a host never shows a partial or corrupt file
 * under its name. A file that cannot be fetched or written is named with
 * its host and skipped; the others are still staged, and the job fails
 * at the end. The folder is made where it is missing, as mkdir -p.
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

/* opt.to with "%h" replaced by this host's name. */
static bool stage_dir(char *out, size_t len)
{
    char host[256] = "";
    size_t n = 0;
    gethostname(host, sizeof(host) - 1);
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
    snprintf(p, sizeof(p), "%s", dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char end = *c;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "rivet-store: --to %s: cannot make %s: %s\n", dir,
                    p, strerror(errno));
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
                         struct sha256_ctx *h)
{
    while (n > 0) {
        size_t len = n < SLICE ? n : SLICE;
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
                              const rv_store_buf_t *b, char dhex[65])
{
    const char *name = base_name(opt.files[k]);
    char tmp[PATH_MAX], path[PATH_MAX];
    uint8_t digest[SHA256_DIGEST_SIZE];
    struct sha256_ctx h;
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) ||
        snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >=
            (int)sizeof(tmp)) {
        fprintf(stderr, "rivet-store: %s/%s: the path is too long\n", dir,
                name);
        return RV_ERR_INVALID;
    }
    sha256_init(&h);
    int fd = mkstemp(tmp);
    if (fd < 0 || !write_hashed(w, fd, b->data, b->data_size, &h) ||
        fsync(fd) != 0 || fchmod(fd, 0644) != 0) {
        fprintf(stderr, "rivet-store: %s: cannot write it: %s\n", path,
                strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return RV_ERR_IO;
    }
    close(fd);
    sha256_digest(&h, SHA256_DIGEST_SIZE, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(dhex + 2 * i, 3, "%02x", digest[i]);
    if (memcmp(digest, opt.digests[k], SHA256_DIGEST_SIZE) != 0) {
        fprintf(stderr,
                "rivet-store: %s: the bytes fetched differ from the bytes "
                "put; not written\n",
                name);
        unlink(tmp);
        return RV_ERR_INVALID;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "rivet-store: %s: cannot write it: %s\n", path,
                strerror(errno));
        unlink(tmp);
        return RV_ERR_IO;
    }
    return RV_OK;
}

/* Waits for fetch @p f, writes its file into @p dir and says so;
 * *bytes_p grows by its size. */
static rv_status_t stage_one(rv_worker_t *w, const char *dir, fetch_t *f,
                             uint64_t *bytes_p)
{
    const char *name = base_name(opt.files[f->k]);
    char dhex[65];
    rv_sync_wait(w, &f->sync);
    if (f->status != RV_OK) {
        fprintf(stderr, "rivet-store: %s: cannot fetch it (%s): %s\n", name,
                f->idhex, rv_status_str(f->status));
        return f->status;
    }
    rv_status_t st = write_file(w, dir, f->k, &f->buf, dhex);
    double t = now_s() - f->t0;
    if (st == RV_OK) {
        printf("staged %s/%s %zu B sha256 %s in %.3f s, %.1f MB/s\n", dir, name,
               f->buf.data_size, dhex, t,
               t > 0 ? (double)f->buf.data_size / t / 1e6 : 0.0);
        fflush(stdout);
        *bytes_p += f->buf.data_size;
    }
    rv_store_release(w, &f->id);
    return st;
}

/* The first file after @p k that rank 0 put (-1: none); the ones it
 * could not put are said once each. */
static int next_put(int k, const bool *put_ok, rv_status_t *st)
{
    for (k++; k < opt.nfiles; k++) {
        if (put_ok[k])
            return k;
        fprintf(stderr, "rivet-store: %s: rank 0 could not put it\n",
                opt.files[k]);
        if (*st == RV_OK)
            *st = RV_ERR_NOT_FOUND;
    }
    return -1;
}

rv_status_t stage_files(rv_worker_t *w, const bool *put_ok)
{
    char dir[PATH_MAX];
    rv_status_t st = RV_OK;
    uint64_t bytes = 0;
    int staged = 0;
    if (!host_stager(w))
        return RV_OK;
    if (!stage_dir(dir, sizeof(dir))) {
        fprintf(stderr, "rivet-store: --to %s: the path is too long\n", opt.to);
        return RV_ERR_INVALID;
    }
    if (!make_dir(dir))
        return RV_ERR_IO;
    /* Two fetches: the next file's goes on while this one is written. */
    fetch_t f[2];
    double t0 = now_s();
    fetch_start(w, &f[0], next_put(-1, put_ok, &st));
    for (int i = 0; f[i & 1].k >= 0; i++) {
        fetch_t *cur = &f[i & 1], *next = &f[(i + 1) & 1];
        fetch_start(w, next, next_put(cur->k, put_ok, &st));
        rv_status_t fst = stage_one(w, dir, cur, &bytes);
        if (fst == RV_OK)
            staged++;
        else if (st == RV_OK)
            st = fst;
    }
    double t = now_s() - t0;
    printf("host %d: staged %d of %d files, %" PRIu64
           " B into %s in %.3f s, %.1f MB/s\n",
           rv_rank_host(rv_worker_context(w), rv_rank(rv_worker_context(w))),
           staged, opt.nfiles, bytes, dir, t,
           t > 0 ? (double)bytes / t / 1e6 : 0.0);
    fflush(stdout);
    return st;
}
