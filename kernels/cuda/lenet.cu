/* cuda/lenet.cu — cnn:lenet on the GPU: the passes of lenet_pass.cuh run by
 * dense.cu's executor (cuBLAS SGEMM/SGEMV, bias, ReLU, softmax) extended
 * with grid-stride kernels for im2col, col2im and per-channel bias (the
 * convolution executor of conv_pass.cuh, which resnet.cu shares), 2x2 max
 * pooling and flattening, each over an element function of the .cuh.
 * Owns each model's device workspace (one cudaMalloc block: activations,
 * pooling argmax, im2col columns, activation gradients) and host staging
 * for the per-row losses; both are freed by kern_cuda_lenet_destroy. */
#include <limits.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/lenet_pass.cuh"

/* ---- kernels ---- */

__global__ void kern_im2col_kernel(struct kern_conv_shape s, const float *in, int batch, float *col,
                                   size_t n)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        col[t] = kern_im2col_value(s, in, batch, t);
}

__global__ void kern_col2im_kernel(struct kern_conv_shape s, const float *col, int batch, float *dx,
                                   size_t n)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        dx[t] = kern_col2im_value(s, col, batch, t);
}

__global__ void kern_bias_relu_planes_kernel(float *y, int channels, size_t plane, const float *b,
                                             int relu)
{
    size_t n = (size_t)channels * plane;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = kern_bias_relu(y[i], b[i / plane], relu);
}

__global__ void kern_pool_max_kernel(struct kern_pool_shape s, const float *x, float *y,
                                     uint8_t *argmax, size_t n)
{
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < n;
         o += (size_t)gridDim.x * blockDim.x)
        kern_pool_max(s, x, o, y, argmax);
}

__global__ void kern_pool_grad_kernel(struct kern_pool_shape s, const float *dy, const float *y,
                                      const uint8_t *argmax, int relu_below, float *dx, size_t n)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        dx[t] = kern_pool_grad(s, dy, y, argmax, relu_below, t);
}

/* x (channels x batch x plane) -> y (batch x channels*plane) */
__global__ void kern_flatten_kernel(const float *x, int batch, int channels, size_t plane, float *y)
{
    size_t n = (size_t)batch * channels * plane;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        y[t] = x[kern_flatten_source(batch, channels, plane, t)];
}

/* The inverse: dy (batch x channels*plane) -> dx (channels x batch x plane) */
__global__ void kern_unflatten_kernel(const float *dy, int batch, int channels, size_t plane,
                                      float *dx)
{
    size_t n = (size_t)batch * channels * plane;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        dx[kern_flatten_source(batch, channels, plane, t)] = dy[t];
}

/* ---- the executors of conv_pass.cuh (cuda_internal.h) and lenet_pass.cuh ---- */

int kern_cuda_conv_exec::im2col(const struct kern_conv_shape &s, const float *in, int batch,
                                float *col)
{
    size_t n = kern_conv_patch(s) * batch * kern_conv_plane(s);
    kern_im2col_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(s, in, batch, col,
                                                                                 n);
    return kern_cuda_launched("im2col", err, errlen);
}

int kern_cuda_conv_exec::col2im(const struct kern_conv_shape &s, const float *col, int batch,
                                float *dx)
{
    size_t n = (size_t)s.in_c * batch * s.in_h * s.in_w;
    kern_col2im_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(s, col, batch, dx,
                                                                                 n);
    return kern_cuda_launched("col2im", err, errlen);
}

int kern_cuda_conv_exec::bias_relu_planes(float *y, int channels, size_t plane, const float *b,
                                          int relu)
{
    size_t n = (size_t)channels * plane;
    kern_bias_relu_planes_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(
        y, channels, plane, b, relu);
    return kern_cuda_launched("conv bias", err, errlen);
}

struct lenet_exec : kern_cuda_conv_exec {
    lenet_exec(struct kern_cuda_ctx *ctx, char *e, size_t elen) : kern_cuda_conv_exec(ctx, e, elen)
    {
    }

    int pool_forward(const struct kern_pool_shape &s, const float *x, int batch, float *y,
                     uint8_t *argmax)
    {
        size_t n = (size_t)s.channels * batch * s.out_h * s.out_w;
        kern_pool_max_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(s, x, y,
                                                                                       argmax, n);
        return kern_cuda_launched("max pool", err, errlen);
    }

    int pool_backward(const struct kern_pool_shape &s, const float *dy, const float *y,
                      const uint8_t *argmax, int batch, int relu_below, float *dx)
    {
        size_t n = (size_t)s.channels * batch * s.in_h * s.in_w;
        kern_pool_grad_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(
            s, dy, y, argmax, relu_below, dx, n);
        return kern_cuda_launched("max pool gradient", err, errlen);
    }

    int flatten(const float *x, int batch, int channels, size_t plane, float *y)
    {
        size_t n = (size_t)batch * channels * plane;
        kern_flatten_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(
            x, batch, channels, plane, y);
        return kern_cuda_launched("flatten", err, errlen);
    }

    int unflatten(const float *dy, int batch, int channels, size_t plane, float *dx)
    {
        size_t n = (size_t)batch * channels * plane;
        kern_unflatten_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(
            dy, batch, channels, plane, dx);
        return kern_cuda_launched("unflatten", err, errlen);
    }
};

/* ---- the model ---- */

struct kern_cuda_lenet {
    struct kern_cuda_ctx *c;
    struct kern_lenet_layout layout;
    struct kern_lenet_buffers buf; /* device pointers into ws.block */
    struct kern_cuda_workspace ws;
};

static float *floats(char *base, size_t *used, size_t n)
{
    return (float *)kern_cuda_slice(base, used, n * sizeof(float));
}

/* Lays out the device workspace for `cap` samples; returns its bytes. */
static size_t lenet_layout_buffers(struct kern_cuda_lenet *n, size_t cap, char *base)
{
    const struct kern_lenet_layout *l = &n->layout;
    struct kern_lenet_buffers *b = &n->buf;
    struct kern_dense_buffers *d = &b->dense;
    size_t used = 0;
    b->x = floats(base, &used, cap * l->inputs);
    d->labels = (int32_t *)kern_cuda_slice(base, &used, cap * sizeof(int32_t));
    for (int i = 0; i < 2; i++) {
        const struct kern_pool_shape &p = l->pool[i];
        size_t pooled = cap * p.channels * p.out_h * p.out_w;
        b->conv[i] = floats(base, &used, cap * l->conv[i].out_c * kern_conv_plane(l->conv[i]));
        b->pool[i] = floats(base, &used, pooled);
        b->argmax[i] = (uint8_t *)kern_cuda_slice(base, &used, pooled);
    }
    b->col = floats(base, &used, cap * l->col_per_sample);
    b->dinput = floats(base, &used, cap * l->delta_per_sample);
    d->x = floats(base, &used, cap * l->features);
    for (int i = 0; i < l->dense.count; i++)
        d->act[i] = floats(base, &used, cap * l->dense.out[i]);
    for (int i = 0; i < 2; i++)
        d->delta[i] = floats(base, &used, cap * l->delta_per_sample);
    d->ones = floats(base, &used, cap * l->pixels_per_sample);
    d->row_loss = (double *)kern_cuda_slice(base, &used, cap * sizeof(double));
    d->row_hit = (int *)kern_cuda_slice(base, &used, cap * sizeof(int));
    return used;
}

/* Grows the workspace to `batch` samples (never shrinks). */
static int lenet_reserve(struct kern_cuda_lenet *n, int batch, char *err, size_t errlen)
{
    if (batch <= n->ws.capacity) return 0;
    size_t bytes = lenet_layout_buffers(n, (size_t)batch, NULL);
    if (kern_cuda_workspace_alloc(n->c, &n->ws, bytes, batch, "cnn:lenet", err, errlen) < 0)
        return -1;
    lenet_layout_buffers(n, (size_t)batch, (char *)n->ws.block);
    if (kern_cuda_fill(n->c, (size_t)batch * n->layout.pixels_per_sample, 1.0f, n->buf.dense.ones,
                       err, errlen) < 0) {
        /* No half-made workspace: the next call starts over. */
        kern_cuda_workspace_release(n->c, &n->ws);
        return -1;
    }
    n->ws.capacity = batch;
    return 0;
}

int kern_cuda_lenet_create(struct kern_cuda_ctx *c, struct kern_cuda_lenet **out, char *err,
                           size_t errlen)
{
    *out = NULL;
    struct kern_cuda_lenet *n = (struct kern_cuda_lenet *)calloc(1, sizeof *n);
    if (!n) return kern_fail(err, errlen, "cuda: out of memory");
    n->c = c;
    kern_lenet_layout_build(&n->layout);
    *out = n;
    return 0;
}

void kern_cuda_lenet_destroy(struct kern_cuda_lenet *n)
{
    if (!n) return;
    kern_cuda_workspace_release(n->c, &n->ws);
    free(n);
}

int kern_cuda_lenet_reserve(struct kern_cuda_lenet *n, int batch, char *err, size_t errlen)
{
    if (kern_cuda_enter(n->c, err, errlen) < 0) return -1;
    return lenet_reserve(n, batch, err, errlen);
}

static int lenet_upload(struct kern_cuda_lenet *n, const float *host_x, const int32_t *host_labels,
                        int batch, char *err, size_t errlen)
{
    cudaError_t e =
        cudaMemcpyAsync(n->buf.x, host_x, (size_t)batch * n->layout.inputs * sizeof(float),
                        cudaMemcpyHostToDevice, n->c->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(n->buf.dense.labels, host_labels, (size_t)batch * sizeof(int32_t),
                            cudaMemcpyHostToDevice, n->c->stream);
    return e == cudaSuccess ? 0 : kern_cuda_fail(err, errlen, "copy batch to device", e);
}

int kern_cuda_lenet_run(struct kern_cuda_lenet *n, const float *params, const float *host_x,
                        const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                        size_t *correct, char *err, size_t errlen)
{
    if (kern_cuda_enter(n->c, err, errlen) < 0 || lenet_reserve(n, batch, err, errlen) < 0 ||
        lenet_upload(n, host_x, host_labels, batch, err, errlen) < 0)
        return -1;
    lenet_exec e(n->c, err, errlen);
    if (kern_lenet_pass(e, n->layout, n->buf, params, batch, grad) < 0) {
        /* Let queued work end before the caller reuses its buffers. */
        cudaStreamSynchronize(n->c->stream);
        cudaGetLastError();
        return -1;
    }
    const struct kern_dense_buffers &d = n->buf.dense;
    return kern_cuda_collect_rows(n->c, d.row_loss, d.row_hit, n->ws.host_loss, n->ws.host_hit,
                                  batch, loss_sum, correct, err, errlen);
}

/* ---- layer ranges (split learning, pipelines): dense.cu's, on rows of
 * lenet's table (lenet_pass.cuh) ---- */

int kern_cuda_lenet_forward_range(struct kern_cuda_lenet *n, const float *params, int first,
                                  int last, const float *host_x, int batch, float *host_y,
                                  char *err, size_t errlen)
{
    const struct kern_lenet_layout &l = n->layout;
    if (kern_cuda_range_check("cnn:lenet", first, last, KERN_LENET_LAYERS, batch, INT_MAX, err,
                              errlen) < 0 ||
        kern_cuda_enter(n->c, err, errlen) < 0 || lenet_reserve(n, batch, err, errlen) < 0 ||
        kern_cuda_copy_async(n->c, kern_lenet_input(n->buf, first), host_x,
                             (size_t)batch * kern_lenet_width(l, first - 1) * sizeof(float),
                             cudaMemcpyHostToDevice, "copy layer input to device", err, errlen) < 0)
        return -1;
    lenet_exec e(n->c, err, errlen);
    if (kern_lenet_forward_range(e, l, n->buf, params, first, last, batch) < 0)
        return kern_cuda_abandon(n->c);
    if (kern_cuda_copy_async(n->c, host_y, kern_lenet_output(n->buf, last),
                             (size_t)batch * kern_lenet_width(l, last) * sizeof(float),
                             cudaMemcpyDeviceToHost, "copy layer output to host", err, errlen) < 0)
        return kern_cuda_abandon(n->c);
    return kern_cuda_finish(n->c, "forward range", err, errlen);
}

int kern_cuda_lenet_backward_range(struct kern_cuda_lenet *n, const float *params, int first,
                                   int last, const float *host_dy, int batch, float *host_dx,
                                   float *grad, char *err, size_t errlen)
{
    const struct kern_lenet_layout &l = n->layout;
    if (kern_cuda_range_check("cnn:lenet", first, last, KERN_LENET_LAYERS, batch, n->ws.capacity,
                              err, errlen) < 0 ||
        kern_cuda_enter(n->c, err, errlen) < 0)
        return -1;
    if (first > 0 && !host_dx)
        return kern_fail(err, errlen, "cuda cnn:lenet: layers {%d, %d} need somewhere for dx",
                         first + 1, last + 1);
    if (kern_cuda_copy_async(n->c, n->buf.dense.delta[0], host_dy,
                             (size_t)batch * kern_lenet_width(l, last) * sizeof(float),
                             cudaMemcpyHostToDevice, "copy output gradient to device", err,
                             errlen) < 0)
        return -1;
    lenet_exec e(n->c, err, errlen);
    if (kern_lenet_backward_range(e, l, n->buf, params, grad, batch, first, last,
                                  first ? n->buf.dinput : NULL) < 0)
        return kern_cuda_abandon(n->c);
    if (first && kern_cuda_copy_async(
                     n->c, host_dx, n->buf.dinput,
                     (size_t)batch * kern_lenet_width(l, first - 1) * sizeof(float),
                     cudaMemcpyDeviceToHost, "copy input gradient to host", err, errlen) < 0)
        return kern_cuda_abandon(n->c);
    return kern_cuda_finish(n->c, "backward range", err, errlen);
}
