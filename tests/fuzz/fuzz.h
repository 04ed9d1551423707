/*
 * What every fuzz target of tests/fuzz shares: libFuzzer's entry points,
 * a reader that takes typed values from the front of an input, and
 * buffers that end where readable memory ends.
 *
 * A target is built two ways: with clang and libFuzzer (the fuzzer
 * itself), and with the project's compiler as a replay program
 * (fuzz_replay.c) that feeds it the committed inputs of its corpus and of
 * its past crashes, so that the normal suite runs them without clang.
 */
#ifndef RIVET_TESTS_FUZZ_H
#define RIVET_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif

/*
 * The harness's own loops over bytes (reading what a decoder handed on,
 * writing and checking the patterns of its objects) are not under test:
 * they are left without libFuzzer's coverage instrumentation, where every
 * byte compared was a traced comparison that cost most of an input's time
 * and steered the fuzzer nowhere. ASan still checks every byte they read.
 * Not inlined: the coverage pass runs after inlining, and would
 * instrument the loop again inside its caller.
 */
#if defined(__clang__)
#define FUZZ_NOCOV __attribute__((no_sanitize("coverage"), noinline))
#else
#define FUZZ_NOCOV
#endif

/* libFuzzer's entry points; a target defines the first, and the second
 * when it sets something up once per process. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The unread rest of an input. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t left;
} fuzz_in_t;

/* The next @p n bytes into @p out, zeros past the end of the input (a
 * short input reads as one that goes on with zeros). */
static inline void fuzz_take(fuzz_in_t *in, void *out, size_t n)
{
    size_t k = n < in->left ? n : in->left;

    if (k > 0)
        memcpy(out, in->p, k);
    memset((uint8_t *)out + k, 0, n - k);
    in->p += k;
    in->left -= k;
}

static inline uint8_t fuzz_u8(fuzz_in_t *in)
{
    uint8_t v;
    fuzz_take(in, &v, sizeof(v));
    return v;
}

static inline uint16_t fuzz_u16(fuzz_in_t *in)
{
    uint16_t v;
    fuzz_take(in, &v, sizeof(v));
    return v;
}

/*
 * A buffer of @p len bytes that ends where readable memory ends: under
 * AddressSanitizer a malloc'ed one, elsewhere one that a PROT_NONE page
 * follows, so that a read past the bytes that arrived faults in the
 * replay programs of a plain build too. Free it with fuzz_free(p, len).
 */
static inline uint8_t *fuzz_alloc(size_t len)
{
#ifdef FUZZ_ASAN
    uint8_t *p = malloc(len ? len : 1);
    if (p == NULL)
        abort();
    return p;
#else
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (len + page - 1) / page * page + page;
    uint8_t *base = mmap(NULL, span, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED ||
        mprotect(base + span - page, page, PROT_NONE) != 0)
        abort();
    return base + span - page - len;
#endif
}

static inline void fuzz_free(uint8_t *p, size_t len)
{
#ifdef FUZZ_ASAN
    (void)len;
    free(p);
#else
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (len + page - 1) / page * page + page;
    munmap(p + len + page - span, span);
#endif
}

/* A copy of @p len bytes of @p data in a fuzz_alloc buffer. */
static inline uint8_t *fuzz_copy(const void *data, size_t len)
{
    uint8_t *p = fuzz_alloc(len);
    if (len > 0)
        memcpy(p, data, len);
    return p;
}

/* Reads every byte of @p p[0..len) into @p sink, as a handler or the
 * transport would read what it was handed: a read past the memory that
 * holds it is seen. */
FUZZ_NOCOV static inline void fuzz_touch(volatile uint64_t *sink,
                                         const void *p, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < len; i++)
        sum += ((const uint8_t *)p)[i];
    *sink += sum;
}

/* @p len bytes of @p data and a NUL, in a fuzz_alloc buffer of len + 1
 * bytes: text as libyaml, the environment or fgets give it. */
static inline char *fuzz_string(const void *data, size_t len)
{
    char *p = (char *)fuzz_alloc(len + 1);
    if (len > 0)
        memcpy(p, data, len);
    p[len] = '\0';
    return p;
}

#endif
