/*
 * What the games' tests share: room for a position of either game, and
 * the tests' own random numbers (splitmix64, unrelated to the library's
 * generator, so that a test does not check the library against itself).
 */
#ifndef RIVET_TESTS_GAMES_TEST_H
#define RIVET_TESTS_GAMES_TEST_H

#include <stddef.h>
#include <stdint.h>

/* Room for a position of either game, aligned for any field. */
typedef union pos {
    max_align_t align;
    unsigned char b[512];
} pos_t;

/* The generator's state; each test program seeds it. */
static uint64_t rnd_state;

static inline uint64_t rnd(void)
{
    uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline int rnd_below(int n)
{
    return (int)(rnd() % (uint64_t)n);
}

#endif
