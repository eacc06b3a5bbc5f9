/* cuda/dense.cu — row-major SGEMM on cuBLAS, the executor of dense_pass.cuh
 * (cuBLAS + kernels; lenet.cu extends it), and logreg / mlp models on the
 * GPU.
 * Owns each model's device workspace (one cudaMalloc block) and host
 * staging for the per-row losses. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/dense_pass.cuh"
#include "kernels/elementwise.h"

/* ---- kernels ---- */

__global__ void kern_bias_relu_kernel(float *y, size_t rows, int cols, const float *b, int relu)
{
    size_t n = rows * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = kern_bias_relu(y[i], b[i % (size_t)cols], relu);
}

__global__ void kern_relu_mask_kernel(float *dy, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dy[i] = kern_relu_mask(dy[i], y[i]);
}

/* One thread per row: classes are few (10 for Fashion-MNIST), rows many. */
__global__ void kern_softmax_kernel(const float *z, const int32_t *labels, int batch, int classes,
                                    float *d, double *row_loss, int *row_hit)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < batch; r += gridDim.x * blockDim.x)
        kern_softmax_xent_row(z + (size_t)r * classes, labels[r], classes, batch,
                              d ? d + (size_t)r * classes : NULL, &row_loss[r], &row_hit[r]);
}

/* ---- the executor of dense_pass.cuh (struct in cuda_internal.h) ---- */

int kern_cuda_exec::gemm_colmajor(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                                  int lda, const float *b, int ldb, float beta, float *cm, int ldc)
{
    cublasStatus_t s =
        cublasSgemm(c->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n,
                    k, &alpha, a, lda, b, ldb, &beta, cm, ldc);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : kern_cuda_blas_fail(err, errlen, "sgemm", s);
}

int kern_cuda_exec::gemv_colmajor(int ta, int m, int n, float alpha, const float *a, int lda,
                                  const float *x, float beta, float *y)
{
    cublasStatus_t s = cublasSgemv(c->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, &alpha, a, lda, x,
                                   1, &beta, y, 1);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : kern_cuda_blas_fail(err, errlen, "sgemv", s);
}

int kern_cuda_exec::bias_relu(float *y, int rows, int cols, const float *b, int relu)
{
    size_t n = (size_t)rows * cols;
    kern_bias_relu_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(y, (size_t)rows,
                                                                                    cols, b, relu);
    return kern_cuda_launched("bias", err, errlen);
}

int kern_cuda_exec::relu_mask(float *dy, const float *y, size_t n)
{
    kern_relu_mask_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(dy, y, n);
    return kern_cuda_launched("relu", err, errlen);
}

int kern_cuda_exec::softmax(const float *z, const int32_t *labels, int batch, int classes, float *d,
                            double *row_loss, int *row_hit)
{
    kern_softmax_kernel<<<kern_cuda_blocks((size_t)batch), KERN_CUDA_THREADS, 0, c->stream>>>(
        z, labels, batch, classes, d, row_loss, row_hit);
    return kern_cuda_launched("softmax", err, errlen);
}

int kern_cuda_sgemm(struct kern_cuda_ctx *c, int trans_a, int trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                    float *cm, int ldc, char *err, size_t errlen)
{
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    kern_cuda_exec e(c, err, errlen);
    if (kern_gemm_rowmajor(e, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc) < 0)
        return -1;
    return kern_cuda_finish(c, "sgemm", err, errlen);
}

/* ---- models ---- */

struct kern_cuda_dense {
    struct kern_cuda_ctx *c;
    struct kern_dense_layout layout;
    struct kern_dense_buffers buf; /* device pointers into ws.block */
    float *dinput;                 /* capacity x widest: a layer range's d loss / d input */
    struct kern_cuda_workspace ws;
};

/* Lays out the device workspace for `cap` samples; returns its bytes. */
static size_t dense_layout_buffers(struct kern_cuda_dense *d, size_t cap, char *base)
{
    const struct kern_dense_layout *l = &d->layout;
    struct kern_dense_buffers *b = &d->buf;
    size_t used = 0;
    b->x = (float *)kern_cuda_slice(base, &used, cap * l->inputs * sizeof(float));
    b->labels = (int32_t *)kern_cuda_slice(base, &used, cap * sizeof(int32_t));
    for (int i = 0; i < l->count; i++)
        b->act[i] = (float *)kern_cuda_slice(base, &used, cap * l->out[i] * sizeof(float));
    for (int i = 0; i < 2; i++)
        b->delta[i] = (float *)kern_cuda_slice(base, &used, cap * l->widest * sizeof(float));
    d->dinput = (float *)kern_cuda_slice(base, &used, cap * l->widest * sizeof(float));
    b->ones = (float *)kern_cuda_slice(base, &used, cap * sizeof(float));
    b->row_loss = (double *)kern_cuda_slice(base, &used, cap * sizeof(double));
    b->row_hit = (int *)kern_cuda_slice(base, &used, cap * sizeof(int));
    return used;
}

void kern_cuda_workspace_release(const struct kern_cuda_ctx *c, struct kern_cuda_workspace *w)
{
    cudaSetDevice(c->ordinal);
    if (w->block) cudaFree(w->block);
    cudaGetLastError();
    free(w->host_loss);
    free(w->host_hit);
    w->block = NULL;
    w->host_loss = NULL;
    w->host_hit = NULL;
    w->capacity = 0;
}

int kern_cuda_workspace_alloc(const struct kern_cuda_ctx *c, struct kern_cuda_workspace *w,
                              size_t bytes, int rows, const char *what, char *err, size_t errlen)
{
    kern_cuda_workspace_release(c, w);
    cudaError_t e = cudaMalloc(&w->block, bytes);
    if (e != cudaSuccess) {
        w->block = NULL;
        cudaGetLastError();
        return kern_fail(err, errlen, "cuda: cannot allocate %zu MiB of %s workspace: %s",
                         bytes >> 20, what, cudaGetErrorString(e));
    }
    w->host_loss = (double *)malloc((size_t)rows * sizeof(double));
    w->host_hit = (int *)malloc((size_t)rows * sizeof(int));
    if (!w->host_loss || !w->host_hit) {
        kern_cuda_workspace_release(c, w);
        return kern_fail(err, errlen, "cuda: out of host memory for model staging");
    }
    return 0;
}

/* Grows the workspace to `batch` samples (never shrinks). */
static int dense_reserve(struct kern_cuda_dense *d, int batch, char *err, size_t errlen)
{
    if (batch <= d->ws.capacity) return 0;
    size_t bytes = dense_layout_buffers(d, (size_t)batch, NULL);
    if (kern_cuda_workspace_alloc(d->c, &d->ws, bytes, batch, "model", err, errlen) < 0) return -1;
    dense_layout_buffers(d, (size_t)batch, (char *)d->ws.block);
    if (kern_cuda_fill(d->c, (size_t)batch, 1.0f, d->buf.ones, err, errlen) < 0) {
        /* No half-made workspace: the next call starts over. */
        kern_cuda_workspace_release(d->c, &d->ws);
        return -1;
    }
    d->ws.capacity = batch;
    return 0;
}

int kern_cuda_dense_create(struct kern_cuda_ctx *c, const struct kern_cuda_dense_spec *spec,
                           struct kern_cuda_dense **out, char *err, size_t errlen)
{
    *out = NULL;
    struct kern_cuda_dense *d = (struct kern_cuda_dense *)calloc(1, sizeof *d);
    if (!d) return kern_fail(err, errlen, "cuda: out of memory");
    d->c = c;
    if (kern_dense_layout_build(spec->sizes, spec->count, &d->layout) < 0) {
        free(d);
        return kern_fail(err, errlen, "cuda: a dense model needs 2..%d layer sizes, got %d",
                         KERN_DENSE_MAX_LAYERS + 1, spec->count);
    }
    *out = d;
    return 0;
}

void kern_cuda_dense_destroy(struct kern_cuda_dense *d)
{
    if (!d) return;
    kern_cuda_workspace_release(d->c, &d->ws);
    free(d);
}

int kern_cuda_dense_reserve(struct kern_cuda_dense *d, int batch, char *err, size_t errlen)
{
    if (kern_cuda_enter(d->c, err, errlen) < 0) return -1;
    return dense_reserve(d, batch, err, errlen);
}

static int dense_upload(struct kern_cuda_dense *d, const float *host_x, const int32_t *host_labels,
                        int batch, char *err, size_t errlen)
{
    cudaError_t e =
        cudaMemcpyAsync(d->buf.x, host_x, (size_t)batch * d->layout.inputs * sizeof(float),
                        cudaMemcpyHostToDevice, d->c->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d->buf.labels, host_labels, (size_t)batch * sizeof(int32_t),
                            cudaMemcpyHostToDevice, d->c->stream);
    return e == cudaSuccess ? 0 : kern_cuda_fail(err, errlen, "copy batch to device", e);
}

int kern_cuda_collect_rows(struct kern_cuda_ctx *c, const double *row_loss, const int *row_hit,
                           double *host_loss, int *host_hit, int batch, double *loss_sum,
                           size_t *correct, char *err, size_t errlen)
{
    cudaError_t e = cudaMemcpyAsync(host_loss, row_loss, (size_t)batch * sizeof(double),
                                    cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(host_hit, row_hit, (size_t)batch * sizeof(int), cudaMemcpyDeviceToHost,
                            c->stream);
    if (e != cudaSuccess) return kern_cuda_fail(err, errlen, "copy losses to host", e);
    if (kern_cuda_finish(c, "model pass", err, errlen) < 0) return -1;
    double sum = 0;
    size_t hits = 0;
    for (int r = 0; r < batch; r++) {
        sum += host_loss[r];
        hits += (size_t)host_hit[r];
    }
    *loss_sum = sum;
    *correct = hits;
    return 0;
}

int kern_cuda_dense_run(struct kern_cuda_dense *d, const float *params, const float *host_x,
                        const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                        size_t *correct, char *err, size_t errlen)
{
    if (kern_cuda_enter(d->c, err, errlen) < 0 || dense_reserve(d, batch, err, errlen) < 0 ||
        dense_upload(d, host_x, host_labels, batch, err, errlen) < 0)
        return -1;
    kern_cuda_exec e(d->c, err, errlen);
    if (kern_dense_pass(e, d->layout, d->buf, params, batch, grad) < 0) return -1;
    return kern_cuda_collect_rows(d->c, d->buf.row_loss, d->buf.row_hit, d->ws.host_loss,
                                  d->ws.host_hit, batch, loss_sum, correct, err, errlen);
}

/* ---- layer ranges (split learning, pipelines) ---- */

int kern_cuda_range_check(const char *model, int first, int last, int layers, int batch,
                          int capacity, char *err, size_t errlen)
{
    if (first < 0 || last < first || last >= layers)
        return kern_fail(err, errlen, "cuda %s: layers {%d, %d} outside its %d layers", model,
                         first + 1, last + 1, layers);
    if (batch < 1 || batch > capacity)
        return kern_fail(err, errlen,
                         "cuda %s: batch %d is outside 1..%d (a backward over more than its "
                         "forward's workspace holds)",
                         model, batch, capacity);
    return 0;
}

int kern_cuda_copy_async(struct kern_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                         cudaMemcpyKind kind, const char *what, char *err, size_t errlen)
{
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, c->stream);
    return e == cudaSuccess ? 0 : kern_cuda_fail(err, errlen, what, e);
}

int kern_cuda_abandon(struct kern_cuda_ctx *c)
{
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    return -1;
}

int kern_cuda_dense_forward_range(struct kern_cuda_dense *d, const float *params, int first,
                                  int last, const float *host_x, int batch, float *host_y,
                                  char *err, size_t errlen)
{
    const struct kern_dense_layout &l = d->layout;
    if (kern_cuda_range_check("dense", first, last, l.count, batch, INT_MAX, err, errlen) < 0 ||
        kern_cuda_enter(d->c, err, errlen) < 0 || dense_reserve(d, batch, err, errlen) < 0 ||
        kern_cuda_copy_async(d->c, kern_dense_input(d->buf, first), host_x,
                             (size_t)batch * l.in[first] * sizeof(float), cudaMemcpyHostToDevice,
                             "copy layer input to device", err, errlen) < 0)
        return -1;
    kern_cuda_exec e(d->c, err, errlen);
    if (kern_dense_forward_range(e, l, d->buf, params, first, last, batch) < 0)
        return kern_cuda_abandon(d->c);
    if (kern_cuda_copy_async(d->c, host_y, d->buf.act[last],
                             (size_t)batch * l.out[last] * sizeof(float), cudaMemcpyDeviceToHost,
                             "copy layer output to host", err, errlen) < 0)
        return kern_cuda_abandon(d->c);
    return kern_cuda_finish(d->c, "forward range", err, errlen);
}

int kern_cuda_dense_backward_range(struct kern_cuda_dense *d, const float *params, int first,
                                   int last, const float *host_dy, int batch, float *host_dx,
                                   float *grad, char *err, size_t errlen)
{
    const struct kern_dense_layout &l = d->layout;
    if (kern_cuda_range_check("dense", first, last, l.count, batch, d->ws.capacity, err, errlen) <
            0 ||
        kern_cuda_enter(d->c, err, errlen) < 0)
        return -1;
    if (first > 0 && !host_dx)
        return kern_fail(err, errlen, "cuda dense: layers {%d, %d} need somewhere for dx",
                         first + 1, last + 1);
    if (kern_cuda_copy_async(d->c, d->buf.delta[0], host_dy,
                             (size_t)batch * l.out[last] * sizeof(float), cudaMemcpyHostToDevice,
                             "copy output gradient to device", err, errlen) < 0)
        return -1;
    kern_cuda_exec e(d->c, err, errlen);
    if (kern_dense_backward_range(e, l, d->buf, params, grad, batch, first, last,
                                  first ? d->dinput : NULL) < 0)
        return kern_cuda_abandon(d->c);
    if (first && kern_cuda_copy_async(
                     d->c, host_dx, d->dinput, (size_t)batch * l.in[first] * sizeof(float),
                     cudaMemcpyDeviceToHost, "copy input gradient to host", err, errlen) < 0)
        return kern_cuda_abandon(d->c);
    return kern_cuda_finish(d->c, "backward range", err, errlen);
}
