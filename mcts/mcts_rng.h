/*
 * The search layer's random numbers: xorshift64* (Vigna), the generator
 * the games' playouts advance (rv_mcts_game_t.playout), and a splitmix64 step
 * to seed it and to make tables of keys. They are inline because a
 * playout draws one number per cell and a call would cost as much as the
 * draw.
 */
#ifndef RIVET_MCTS_RNG_H
#define RIVET_MCTS_RNG_H

#include <stdint.h>

/* The next number of the xorshift64* generator in @p s (non-zero, and
 * non-zero again afterwards). */
static inline uint64_t mc_rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A number in [0, n) for n >= 1, by Lemire's multiply-shift on the high
 * 32 bits (the better ones of xorshift64*). It skips the rejection step:
 * the bias is below n / 2^32, far under what a playout can notice. */
static inline uint32_t mc_rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(((mc_rng_next(s) >> 32) * (uint64_t)n) >> 32);
}

/* One splitmix64 step on @p x: well-mixed outputs from consecutive or
 * poorly chosen seeds, so that seeds 1, 2, 3 give unrelated streams. */
static inline uint64_t mc_rng_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A non-zero xorshift64* state from any @p seed (0 included). */
static inline uint64_t mc_rng_seed(uint64_t seed)
{
    uint64_t s = mc_rng_splitmix(&seed);
    return s ? s : 0x9e3779b97f4a7c15ull;
}

#endif
