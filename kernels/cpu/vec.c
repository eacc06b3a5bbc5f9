/* vec.c — CPU implementation of kernels/vec.h over OpenBLAS cblas. */
#include "kernels/vec.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Vectorise vec_add's loop, which GCC's -O2 cost model leaves scalar (its
 * operands may alias; see cpu/model.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* BLAS counts are int; longer vectors go through in chunks of this size. */
#define VEC_CHUNK ((size_t)1 << 30)

static int chunk_len(size_t n, size_t done)
{
    size_t left = n - done;
    return (int)(left < VEC_CHUNK ? left : VEC_CHUNK);
}

void vec_axpy(size_t n, float alpha, const float *x, float *y)
{
    /* BLAS does not promise anything for aliased x and y; scaling is exact. */
    if (x == y) {
        vec_scale(n, 1.0f + alpha, y);
        return;
    }
    for (size_t done = 0; done < n; done += VEC_CHUNK)
        cblas_saxpy(chunk_len(n, done), alpha, x + done, 1, y + done, 1);
}

void vec_add(size_t n, const float *a, const float *b, float *out)
{
    /* One loop the compiler vectorises: out = a + b without first copying a
     * (vec_copy + vec_axpy would read and write out twice). */
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void vec_scale(size_t n, float alpha, float *x)
{
    for (size_t done = 0; done < n; done += VEC_CHUNK)
        cblas_sscal(chunk_len(n, done), alpha, x + done, 1);
}

void vec_sum(size_t n, float *out, const float *const *inputs, size_t k)
{
    if (k == 0) {
        vec_fill(n, 0.0f, out);
        return;
    }
    if (out != inputs[0]) vec_copy(n, inputs[0], out);
    for (size_t i = 1; i < k; i++)
        vec_axpy(n, 1.0f, inputs[i], out);
}

double vec_dot(size_t n, const float *x, const float *y)
{
    double sum = 0.0;
    for (size_t done = 0; done < n; done += VEC_CHUNK)
        sum += cblas_dsdot(chunk_len(n, done), x + done, 1, y + done, 1);
    return sum;
}

double vec_norm(size_t n, const float *x)
{
    /* Squares of floats cannot overflow a double, so no scaling is needed. */
    return sqrt(vec_dot(n, x, x));
}

void vec_fill(size_t n, float value, float *x)
{
    if (value == 0.0f && !signbit(value)) {
        if (n) memset(x, 0, n * sizeof *x);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

void vec_copy(size_t n, const float *src, float *dst)
{
    /* memcpy is as fast as cblas_scopy for unit strides and needs no chunks. */
    if (n) memcpy(dst, src, n * sizeof *dst);
}

void vec_set_threads(int threads)
{
    openblas_set_num_threads(threads > 0 ? threads : 1);
}
