/*
 * rivetrun's output: its own one-line messages, and the ranks' stdout and
 * stderr in prefix mode (job.output_prefix), where every line a rank
 * writes goes out as "[rank] line".
 *
 * In prefix mode each rank writes into two pipes that the loop reads. A
 * line is written out, after its prefix, only once its newline arrived,
 * so that the lines of different ranks do not mix. A line longer than
 * LINE_MAX_BYTES is cut there and continues without a prefix; the last,
 * unterminated line of a stream gets a newline.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_internal.h"

/* Longest line kept whole in prefix mode. */
#define LINE_MAX_BYTES 65536
/* Longest message of rivetrun's own, "rivetrun: " and newline included. */
#define SAY_MAX 2048
/* Room for "[rank] " with any int rank. */
#define PREFIX_MAX 24
/* Reads of one pipe per wake-up, so that a rank that writes without pause
 * cannot keep the loop from its other duties. */
#define READS_PER_WAKEUP 64
/* The buffer grows when less than this is free for the next read... */
#define READ_MIN_ROOM 4096
/* ... to twice its size, starting from this. */
#define BUF_FIRST_CAP 8192

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* a closed stdout is not a reason to fail the job */
        p += n;
        len -= (size_t)n;
    }
}

void run_say(const char *fmt, ...)
{
    char buf[SAY_MAX];
    va_list ap;
    int n = snprintf(buf, sizeof(buf), "rivetrun: ");

    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    write_all(STDERR_FILENO, buf, (size_t)n);
}

void run_output_init(launcher_t *l)
{
    for (int r = 0; r < l->size; r++) {
        outstream_t *out = l->ranks[r].out;

        out[0].fd = out[1].fd = -1;
        out[0].out_fd = STDOUT_FILENO;
        out[1].out_fd = STDERR_FILENO;
    }
}

void run_stream_attach(outstream_t *s, int fd)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags >= 0)
        fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    s->fd = fd;
}

static void stream_write(outstream_t *s, int rank, const char *data, size_t len,
                         bool add_newline)
{
    char prefix[PREFIX_MAX];
    int plen;

    if (!s->midline) {
        plen = snprintf(prefix, sizeof(prefix), "[%d] ", rank);
        write_all(s->out_fd, prefix, (size_t)plen);
    }
    write_all(s->out_fd, data, len);
    if (add_newline)
        write_all(s->out_fd, "\n", 1);
}

/* Writes the complete lines of @p s; with @p final, the partial one too. */
static void stream_emit(outstream_t *s, int rank, bool final)
{
    size_t start = 0;
    char *nl;

    while ((nl = memchr(s->buf + start, '\n', s->len - start)) != NULL) {
        size_t n = (size_t)(nl - (s->buf + start)) + 1;
        stream_write(s, rank, s->buf + start, n, false);
        s->midline = false;
        start += n;
    }
    if (start < s->len && (final || s->len - start >= LINE_MAX_BYTES)) {
        /* A partial last line gets its newline; an overlong line is cut and
         * continues without a prefix. */
        stream_write(s, rank, s->buf + start, s->len - start, final);
        s->midline = !final;
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void stream_close(outstream_t *s, int rank)
{
    if (s->fd < 0)
        return;
    close(s->fd);
    s->fd = -1;
    stream_emit(s, rank, true);
}

void run_stream_read(outstream_t *s, int rank)
{
    for (int i = 0; i < READS_PER_WAKEUP && s->fd >= 0; i++) {
        ssize_t n;

        if (s->cap - s->len < READ_MIN_ROOM) {
            size_t cap = s->cap ? s->cap * 2 : BUF_FIRST_CAP;
            char *buf = realloc(s->buf, cap);
            if (buf == NULL) {
                stream_emit(s, rank, true); /* write what we have */
                continue;
            }
            s->buf = buf;
            s->cap = cap;
        }
        n = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            stream_close(s, rank);
            return;
        }
        s->len += (size_t)n;
        stream_emit(s, rank, false);
    }
}

void run_output_read_rank(launcher_t *l, int r)
{
    for (int i = 0; i < RUN_NSTREAMS; i++)
        run_stream_read(&l->ranks[r].out[i], r);
}

void run_output_fini(launcher_t *l)
{
    for (int r = 0; r < l->size; r++) {
        for (int i = 0; i < RUN_NSTREAMS; i++) {
            stream_close(&l->ranks[r].out[i], r);
            free(l->ranks[r].out[i].buf);
        }
    }
}
