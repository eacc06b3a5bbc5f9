/* vec.h — float32 vector operations over BLAS (kernels/cpu/vec.c).
 *
 * Plain C over caller-owned arrays: nothing here allocates or keeps a
 * pointer. Lengths are size_t; the implementation splits them into chunks
 * that fit BLAS's int-sized counts, so any length the caller can allocate
 * works. Reductions accumulate in double. */
#pragma once

#include <stddef.h>

/* y += alpha * x. x == y is allowed (y becomes (1 + alpha) * y). */
void vec_axpy(size_t n, float alpha, const float *x, float *y);
/* out = a + b element-wise in one pass; out may be a (or b). */
void vec_add(size_t n, const float *a, const float *b, float *out);
/* x *= alpha. */
void vec_scale(size_t n, float alpha, float *x);
/* out = inputs[0] + ... + inputs[k-1] element-wise; out must not be one of
 * the inputs unless it is inputs[0]. k == 0 gives zeros. */
void vec_sum(size_t n, float *out, const float *const *inputs, size_t k);
/* Euclidean norm, sqrt(sum x_i^2), accumulated in double. */
double vec_norm(size_t n, const float *x);
/* sum x_i * y_i accumulated in double. */
double vec_dot(size_t n, const float *x, const float *y);
void vec_fill(size_t n, float value, float *x);
/* dst = src; the arrays must not overlap. */
void vec_copy(size_t n, const float *src, float *dst);
/* Threads BLAS may use for one call (peers default to 1: node `threads` in docs/lua-api.md). */
void vec_set_threads(int threads);
