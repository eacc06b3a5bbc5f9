/* rng.h — the deterministic random number generator of the kernels.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64, so that a 64-bit
 * seed gives the same stream on every machine and in every peer: model
 * initialisation, synthetic data, partitions and batch orders all derive from
 * user seeds and must agree between peers. Never rand(): its stream differs
 * between libcs and it has hidden global state.
 *
 * A struct rng is a plain value owned by whoever embeds it; nothing here
 * allocates. Not thread-safe per instance (each thread keeps its own). */
#pragma once

#include <stdint.h>

struct rng {
    uint64_t s[4];
};

/* Seeds from `seed` and a `stream` number, so one user seed can give
 * independent streams (e.g. one per shard) without correlated states. */
void rng_seed(struct rng *r, uint64_t seed, uint64_t stream);

uint64_t rng_next(struct rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double rng_uniform(struct rng *r);

/* Uniform float in [0, 1) with 24 random bits. */
float rng_uniform_float(struct rng *r);

/* Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject); n > 0. */
uint64_t rng_below(struct rng *r, uint64_t n);

/* Standard normal N(0, 1) (Marsaglia polar method). */
double rng_normal(struct rng *r);

/* log of a Gamma(shape, 1) sample, shape > 0 (Marsaglia & Tsang; for shape < 1
 * the boost G(shape) = G(shape + 1) * U^(1/shape)). Returned as a logarithm
 * because for small shapes (Dirichlet alpha = 0.01) the sample itself
 * underflows to 0 in double precision. */
double rng_log_gamma(struct rng *r, double shape);

/* Fisher–Yates shuffle of n uint32 values in place. */
void rng_shuffle_u32(struct rng *r, uint32_t *v, uint64_t n);
