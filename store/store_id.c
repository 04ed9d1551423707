/*
 * Object ids: their hexadecimal text, the id of a name or of bytes, and
 * the worker that is an id's home in the directory.
 */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "store_internal.h"

void rv_object_id_to_hex(const rv_object_id_t *id, char hex[41])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < RV_OBJECT_ID_SIZE; i++) {
        hex[2 * i] = digits[id->bytes[i] >> 4];
        hex[2 * i + 1] = digits[id->bytes[i] & 15];
    }
    hex[40] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

rv_status_t rv_object_id_from_hex(const char *hex, rv_object_id_t *id)
{
    rv_object_id_t out;
    if (hex == NULL || id == NULL || strlen(hex) != 2 * RV_OBJECT_ID_SIZE)
        return RV_ERR_INVALID;
    for (int i = 0; i < RV_OBJECT_ID_SIZE; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return RV_ERR_INVALID;
        out.bytes[i] = (uint8_t)(hi << 4 | lo);
    }
    *id = out;
    return RV_OK;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

void rv_object_id_of(const void *data, size_t len, rv_object_id_t *id)
{
    /* Three FNV-1a streams with different seeds, each finished by a
     * 64-bit mixer: 160 bits that differ for different names. */
    const uint8_t *p = data;
    uint64_t h[3] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull,
                     0x9e3779b97f4a7c15ull};
    for (size_t i = 0; i < len; i++)
        for (int k = 0; k < 3; k++)
            h[k] = (h[k] ^ p[i]) * 0x100000001b3ull;
    uint8_t out[24];
    for (int k = 0; k < 3; k++) {
        uint64_t v = mix64(h[k] ^ len ^ (uint64_t)k << 56);
        memcpy(out + 8 * k, &v, 8);
    }
    memcpy(id->bytes, out, RV_OBJECT_ID_SIZE);
}

rv_tid_t st_home(const rv_object_id_t *id, uint32_t nworkers)
{
    uint64_t h;
    memcpy(&h, id->bytes, sizeof(h));
    return (rv_tid_t)(mix64(h) % nworkers);
}
