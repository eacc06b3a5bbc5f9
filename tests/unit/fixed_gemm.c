/* fixed_gemm.c — cblas_sgemm and cblas_sgemv with one summation order on
 * every CPU, linked into test_cuda_host in place of OpenBLAS's.
 *
 * Why: test_cuda_host compares the CUDA passes, run on the host, with
 * kernels/cpu/model.c to 1e-5. OpenBLAS picks its GEMM kernel by CPU
 * (Haswell, Zen, SkylakeX, ...), each summing in its own order, and a
 * network of ReLUs and max pools turns those last-bit differences into a
 * different gradient wherever an activation lies within rounding of a kink
 * (measured: cnn:resnet20 at batch 3 matched to 1e-7 with the SkylakeX and
 * Cooperlake kernels and missed by 1e-3 with Haswell's and Zen's; a GPU
 * machine's CPU missed on cnn:lenet's split too). With this file the
 * reference is the same float arithmetic wherever the test runs, so a pass
 * here is a pass there, and what the test checks stays what it is for:
 * the passes' order of GEMMs, transposes and leading dimensions against
 * model.c's. OpenBLAS's kernels are checked by the other unit tests.
 *
 * Each output element sums its k terms in ascending k, in float, then
 * applies alpha and beta; beta = 0 never reads C (BLAS's rule: C may hold
 * NaN). Increments must be positive (model.c's are 1). */
#include <cblas.h>
#include <stddef.h>

enum { CHUNK = 256 }; /* output elements summed side by side */

static float op_at(const float *m, blasint ld, int trans, blasint r, blasint c)
{
    return trans ? m[(size_t)c * ld + r] : m[(size_t)r * ld + c];
}

/* Row-major C (m x n) = alpha op(A) op(B) + beta C. */
static void gemm_rows(int ta, int tb, blasint m, blasint n, blasint k, float alpha, const float *a,
                      blasint lda, const float *b, blasint ldb, float beta, float *c, blasint ldc)
{
    float acc[CHUNK];
    for (blasint i = 0; i < m; i++)
        for (blasint j0 = 0; j0 < n; j0 += CHUNK) {
            blasint w = n - j0 < CHUNK ? n - j0 : CHUNK;
            for (blasint j = 0; j < w; j++)
                acc[j] = 0.0f;
            for (blasint p = 0; p < k; p++) {
                float x = op_at(a, lda, ta, i, p);
                for (blasint j = 0; j < w; j++)
                    acc[j] += x * op_at(b, ldb, tb, p, j0 + j);
            }
            float *row = c + (size_t)i * ldc + j0;
            for (blasint j = 0; j < w; j++)
                row[j] = beta == 0.0f ? alpha * acc[j] : alpha * acc[j] + beta * row[j];
        }
}

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m,
                 OPENBLAS_CONST blasint n, OPENBLAS_CONST blasint k, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *b,
                 OPENBLAS_CONST blasint ldb, OPENBLAS_CONST float beta, float *c,
                 OPENBLAS_CONST blasint ldc)
{
    int at = ta != CblasNoTrans, bt = tb != CblasNoTrans;
    if (order == CblasRowMajor)
        gemm_rows(at, bt, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else /* column-major C is row-major C^T = op(B)^T op(A)^T */
        gemm_rows(bt, at, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}

void cblas_sgemv(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                 OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float *a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *x,
                 OPENBLAS_CONST blasint incx, OPENBLAS_CONST float beta, float *y,
                 OPENBLAS_CONST blasint incy)
{
    /* y = alpha op(A) x + beta y, A m x n in `order`: the row-major view
     * transposes when the order and trans disagree. */
    int t = (trans != CblasNoTrans) != (order == CblasColMajor);
    blasint rows = trans != CblasNoTrans ? n : m, cols = trans != CblasNoTrans ? m : n;
    for (blasint i = 0; i < rows; i++) {
        float acc = 0.0f;
        for (blasint p = 0; p < cols; p++)
            acc += op_at(a, lda, t, i, p) * x[(size_t)p * (size_t)incx];
        float *out = y + (size_t)i * (size_t)incy;
        *out = beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
    }
}
