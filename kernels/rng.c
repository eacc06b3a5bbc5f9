/* rng.c — xoshiro256** with splitmix64 seeding, and the distributions the
 * kernels need (uniform, normal, gamma). See rng.h. */
#include "kernels/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
    /* Mixing the stream through splitmix64 first keeps (seed, stream) and
     * (seed + 1, stream - 1) from sharing a state. */
    uint64_t x = stream;
    uint64_t mixed = seed ^ splitmix64(&x);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&mixed);
}

uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

float rng_uniform_float(struct rng *r)
{
    return (float)(rng_next(r) >> 40) * 0x1.0p-24f;
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double rng_normal(struct rng *r)
{
    double u, v, s;
    do {
        u = 2.0 * rng_uniform(r) - 1.0;
        v = 2.0 * rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    /* The polar method yields two normals; keeping one keeps the state a
     * plain value (no cached spare) at the cost of a few cycles. */
    return u * sqrt(-2.0 * log(s) / s);
}

/* Marsaglia & Tsang (2000) for shape >= 1, returning log of the sample. */
static double log_gamma_large(struct rng *r, double shape)
{
    double d = shape - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r);
        double v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = rng_uniform(r);
        if (u <= 0.0) continue;
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return log(d) + log(v);
    }
}

double rng_log_gamma(struct rng *r, double shape)
{
    if (shape >= 1.0) return log_gamma_large(r, shape);
    double u;
    do
        u = rng_uniform(r);
    while (u <= 0.0);
    return log_gamma_large(r, shape + 1.0) + log(u) / shape;
}

void rng_shuffle_u32(struct rng *r, uint32_t *v, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rng_below(r, i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}
