/*
 * Framing helpers of the rivetrun protocol (see rv_launch_proto.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rv_launch_proto.h"

const char *rv__launch_type_name(uint32_t type)
{
    switch (type) {
    case RV_LAUNCH_HELLO:
        return "hello";
    case RV_LAUNCH_ALLGATHER:
        return "allgather";
    case RV_LAUNCH_ABORT:
        return "abort";
    case RV_LAUNCH_FINI:
        return "fini";
    case RV_LAUNCH_BEAT:
        return "beat";
    }
    return "unknown";
}

rv_status_t rv__launch_write_full(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    int is_socket = 1;

    while (len > 0) {
        ssize_t n;
        if (is_socket) {
            n = send(fd, p, len, MSG_NOSIGNAL);
            if (n < 0 && errno == ENOTSOCK) {
                /* A pipe or a file: plain write(2) from now on. */
                is_socket = 0;
                continue;
            }
        } else {
            n = write(fd, p, len);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EPIPE || errno == ECONNRESET)
                return RV_ERR_PEER;
            return RV_ERR_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return RV_OK;
}

rv_status_t rv__launch_read_full(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ECONNRESET)
                return RV_ERR_PEER;
            return RV_ERR_IO;
        }
        if (n == 0) {
            errno = 0;
            return RV_ERR_PEER;
        }
        p += n;
        len -= (size_t)n;
    }
    return RV_OK;
}

rv_status_t rv__launch_send(int fd, uint32_t type, uint32_t rank,
                            const void *payload, size_t len)
{
    rv_launch_hdr_t hdr = {.type = type, .rank = rank, .len = len};
    rv_status_t status;

    status = rv__launch_write_full(fd, &hdr, sizeof(hdr));
    if (status != RV_OK || len == 0)
        return status;
    return rv__launch_write_full(fd, payload, len);
}

rv_status_t rv__launch_recv_hdr(int fd, rv_launch_hdr_t *hdr)
{
    return rv__launch_read_full(fd, hdr, sizeof(*hdr));
}

void rv__launch_token_format(const uint8_t token[RV_LAUNCH_TOKEN_BYTES],
                             char hex[RV_LAUNCH_TOKEN_HEX])
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < RV_LAUNCH_TOKEN_BYTES; i++) {
        hex[2 * i] = digits[token[i] >> 4];
        hex[2 * i + 1] = digits[token[i] & 0xf];
    }
    hex[2 * RV_LAUNCH_TOKEN_BYTES] = '\0';
}

/* The value of hex digit @p c, or -1. */
static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

rv_status_t rv__launch_token_parse(const char *hex,
                                   uint8_t token[RV_LAUNCH_TOKEN_BYTES])
{
    uint8_t out[RV_LAUNCH_TOKEN_BYTES];

    for (size_t i = 0; i < RV_LAUNCH_TOKEN_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]);
        int lo = hi < 0 ? -1 : hex_digit(hex[2 * i + 1]);
        if (lo < 0)
            return RV_ERR_INVALID;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    if (hex[2 * RV_LAUNCH_TOKEN_BYTES] != '\0')
        return RV_ERR_INVALID;
    memcpy(token, out, sizeof(out));
    return RV_OK;
}

int rv__launch_token_equal(const uint8_t a[RV_LAUNCH_TOKEN_BYTES],
                           const uint8_t b[RV_LAUNCH_TOKEN_BYTES])
{
    uint8_t diff = 0;

    /* Every byte is looked at, whatever the first difference. */
    for (size_t i = 0; i < RV_LAUNCH_TOKEN_BYTES; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

int rv__launch_token_none(const uint8_t token[RV_LAUNCH_TOKEN_BYTES])
{
    static const uint8_t zeros[RV_LAUNCH_TOKEN_BYTES];

    return rv__launch_token_equal(token, zeros);
}
