/* cuda/resnet.cu — cnn:resnet20 on the GPU: the passes of resnet20_pass.cuh
 * run by lenet.cu's convolution executor (cuBLAS SGEMM/SGEMV, im2col,
 * col2im) extended with kernels for batch norm (one block per channel,
 * a block-wide tree for its sums), the option-A residual add, global
 * average pooling and an elementwise add, each over an element or channel
 * function of resnet20_pass.cuh.
 * Owns each model's copy of its layer table, its device workspace (one
 * cudaMalloc block: activations, batch statistics, im2col columns,
 * activation gradients) and host staging for the per-row losses; all are
 * freed by kern_cuda_resnet_destroy. */
#include <limits.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/resnet20_pass.cuh"

/* ---- kernels ---- */

/* The sum of every thread's v over the block, for all of them. The tree
 * adds in a fixed order, so a pass is deterministic run after run (a
 * split pass equals the unsplit one). blockDim.x: a power of two up to
 * KERN_CUDA_THREADS. */
struct kern_block_sum {
    double *lanes; /* shared, blockDim.x */

    __device__ double operator()(double v)
    {
        unsigned t = threadIdx.x;
        lanes[t] = v;
        __syncthreads();
        for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
            if (t < half) lanes[t] += lanes[t + half];
            __syncthreads();
        }
        double total = lanes[0];
        __syncthreads(); /* lanes is reused by the next sum */
        return total;
    }
};

__global__ void kern_bn_forward_kernel(struct kern_bn_forward a)
{
    __shared__ double lanes[KERN_CUDA_THREADS];
    kern_block_sum sum = {lanes};
    for (int c = blockIdx.x; c < a.channels; c += gridDim.x)
        kern_bn_forward_channel(a, c, (int)threadIdx.x, (int)blockDim.x, sum);
}

__global__ void kern_bn_backward_kernel(struct kern_bn_backward a)
{
    __shared__ double lanes[KERN_CUDA_THREADS];
    kern_block_sum sum = {lanes};
    for (int c = blockIdx.x; c < a.channels; c += gridDim.x)
        kern_bn_backward_channel(a, c, (int)threadIdx.x, (int)blockDim.x, sum);
}

__global__ void kern_bn_statistics_kernel(int channels, const float *mean, const float *var,
                                          double unbias, float *out)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < 2 * channels;
         t += gridDim.x * blockDim.x)
        out[t] = kern_bn_statistic(mean, var, channels, unbias, t);
}

__global__ void kern_residual_kernel(struct kern_residual_shape r, const float *x,
                                     const float *skip, int batch, float *y, size_t n)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        y[t] = kern_residual_value(r, x, skip, batch, t);
}

__global__ void kern_residual_skip_kernel(struct kern_residual_shape r, const float *y,
                                          const float *dy, int batch, float *dskip, size_t n)
{
    for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < n;
         u += (size_t)gridDim.x * blockDim.x)
        dskip[u] = kern_residual_skip_grad(r, y, dy, batch, u);
}

/* dx = dy masked by the ReLU of y (dx may be dy). */
__global__ void kern_mask_into_kernel(const float *dy, const float *y, float *dx, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = kern_relu_mask(dy[i], y[i]);
}

__global__ void kern_add_kernel(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

__global__ void kern_avgpool_kernel(struct kern_avgpool_shape p, const float *x, int batch,
                                    float *y, size_t n)
{
    for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < n;
         o += (size_t)gridDim.x * blockDim.x)
        y[o] = kern_avgpool_value(p, x, batch, o);
}

__global__ void kern_avgpool_grad_kernel(struct kern_avgpool_shape p, const float *dy, int batch,
                                         float *dx, size_t n)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n;
         t += (size_t)gridDim.x * blockDim.x)
        dx[t] = kern_avgpool_grad(p, dy, batch, t);
}

/* ---- the executor of resnet20_pass.cuh ---- */

/* Channels per batch-norm launch: one block each, up to the grid's cap. */
static unsigned channel_blocks(int channels)
{
    return channels < KERN_CUDA_MAX_BLOCKS ? (unsigned)channels : KERN_CUDA_MAX_BLOCKS;
}

struct resnet_exec : kern_cuda_conv_exec {
    resnet_exec(struct kern_cuda_ctx *ctx, char *e, size_t elen) : kern_cuda_conv_exec(ctx, e, elen)
    {
    }

    int bn_forward(const struct kern_bn_forward &a)
    {
        kern_bn_forward_kernel<<<channel_blocks(a.channels), KERN_CUDA_THREADS, 0, c->stream>>>(a);
        return kern_cuda_launched("batch norm", err, errlen);
    }

    int bn_backward(const struct kern_bn_backward &a)
    {
        kern_bn_backward_kernel<<<channel_blocks(a.channels), KERN_CUDA_THREADS, 0, c->stream>>>(a);
        return kern_cuda_launched("batch norm gradient", err, errlen);
    }

    int bn_statistics(int channels, const float *mean, const float *var, double unbias, float *out)
    {
        kern_bn_statistics_kernel<<<kern_cuda_blocks(2 * (size_t)channels), KERN_CUDA_THREADS, 0,
                                    c->stream>>>(channels, mean, var, unbias, out);
        return kern_cuda_launched("batch statistics", err, errlen);
    }

    int residual_forward(const struct kern_residual_shape &r, const float *x, const float *skip,
                         int batch, float *y)
    {
        size_t n = (size_t)r.c * batch * r.h * r.w;
        kern_residual_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(r, x, skip,
                                                                                       batch, y, n);
        return kern_cuda_launched("residual add", err, errlen);
    }

    int residual_backward(const struct kern_residual_shape &r, const float *y, const float *dy,
                          int batch, float *dx, float *dskip)
    {
        size_t n = (size_t)r.c * batch * r.h * r.w,
               ns = (size_t)r.src_c * batch * r.src_h * r.src_w;
        /* dskip first: it reads dy, which dx may be */
        kern_residual_skip_kernel<<<kern_cuda_blocks(ns), KERN_CUDA_THREADS, 0, c->stream>>>(
            r, y, dy, batch, dskip, ns);
        if (kern_cuda_launched("residual gradient", err, errlen) < 0) return -1;
        if (!dx) return 0;
        kern_mask_into_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(dy, y, dx,
                                                                                        n);
        return kern_cuda_launched("residual gradient", err, errlen);
    }

    int add(float *y, const float *x, size_t n)
    {
        kern_add_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(y, x, n);
        return kern_cuda_launched("add", err, errlen);
    }

    int avgpool_forward(const struct kern_avgpool_shape &p, const float *x, int batch, float *y)
    {
        size_t n = (size_t)p.channels * batch;
        kern_avgpool_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(p, x, batch,
                                                                                      y, n);
        return kern_cuda_launched("average pool", err, errlen);
    }

    int avgpool_backward(const struct kern_avgpool_shape &p, const float *dy, int batch, float *dx)
    {
        size_t n = (size_t)p.channels * batch * p.plane;
        kern_avgpool_grad_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(
            p, dy, batch, dx, n);
        return kern_cuda_launched("average pool gradient", err, errlen);
    }
};

/* ---- the model ---- */

struct kern_cuda_resnet {
    struct kern_cuda_ctx *c;
    struct model_spec spec;
    struct kern_resnet_buffers buf; /* device pointers into ws.block */
    struct kern_cuda_workspace ws;
};

/* Lays out the device workspace for `cap` samples; returns its bytes. */
static size_t resnet_layout_buffers(struct kern_cuda_resnet *n, size_t cap, char *base)
{
    size_t used = 0;
    kern_resnet_buffers_carve(n->spec, cap, &n->buf,
                              [&](size_t bytes) { return kern_cuda_slice(base, &used, bytes); });
    return used;
}

/* Grows the workspace to `batch` samples (never shrinks). */
static int resnet_reserve(struct kern_cuda_resnet *n, int batch, char *err, size_t errlen)
{
    if (batch <= n->ws.capacity) return 0;
    size_t bytes = resnet_layout_buffers(n, (size_t)batch, NULL);
    if (kern_cuda_workspace_alloc(n->c, &n->ws, bytes, batch, "cnn:resnet20", err, errlen) < 0)
        return -1;
    resnet_layout_buffers(n, (size_t)batch, (char *)n->ws.block);
    if (kern_cuda_fill(n->c, (size_t)batch, 1.0f, n->buf.ones, err, errlen) < 0) {
        /* No half-made workspace: the next call starts over. */
        kern_cuda_workspace_release(n->c, &n->ws);
        return -1;
    }
    n->ws.capacity = batch;
    return 0;
}

int kern_cuda_resnet_create(struct kern_cuda_ctx *c, const struct model_spec *spec,
                            struct kern_cuda_resnet **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!kern_resnet_runs(*spec))
        return kern_fail(err, errlen,
                         "cuda: the resnet passes run conv, batch norm, residual, average pool "
                         "and dense layers only");
    struct kern_cuda_resnet *n = (struct kern_cuda_resnet *)calloc(1, sizeof *n);
    if (!n) return kern_fail(err, errlen, "cuda: out of memory");
    n->c = c;
    n->spec = *spec;
    *out = n;
    return 0;
}

void kern_cuda_resnet_destroy(struct kern_cuda_resnet *n)
{
    if (!n) return;
    kern_cuda_workspace_release(n->c, &n->ws);
    free(n);
}

int kern_cuda_resnet_reserve(struct kern_cuda_resnet *n, int batch, char *err, size_t errlen)
{
    if (kern_cuda_enter(n->c, err, errlen) < 0) return -1;
    return resnet_reserve(n, batch, err, errlen);
}

static size_t resnet_width(const struct kern_cuda_resnet *n, int row)
{
    return row < 0 ? n->spec.layers[0].in_size : n->spec.layers[row].out_size;
}

int kern_cuda_resnet_run(struct kern_cuda_resnet *n, const float *params, const float *host_x,
                         const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                         size_t *correct, char *err, size_t errlen)
{
    if (kern_cuda_enter(n->c, err, errlen) < 0 || resnet_reserve(n, batch, err, errlen) < 0 ||
        kern_cuda_copy_async(n->c, n->buf.x, host_x,
                             (size_t)batch * resnet_width(n, -1) * sizeof(float),
                             cudaMemcpyHostToDevice, "copy batch to device", err, errlen) < 0 ||
        kern_cuda_copy_async(n->c, n->buf.labels, host_labels, (size_t)batch * sizeof(int32_t),
                             cudaMemcpyHostToDevice, "copy labels to device", err, errlen) < 0)
        return -1;
    resnet_exec e(n->c, err, errlen);
    if (kern_resnet_pass(e, n->spec, n->buf, params, batch, grad) < 0)
        return kern_cuda_abandon(n->c);
    return kern_cuda_collect_rows(n->c, n->buf.row_loss, n->buf.row_hit, n->ws.host_loss,
                                  n->ws.host_hit, batch, loss_sum, correct, err, errlen);
}

/* ---- layer ranges (split learning, pipelines): lenet.cu's, on rows of
 * the resnet table ---- */

int kern_cuda_resnet_forward_range(struct kern_cuda_resnet *n, const float *params, int first,
                                   int last, const float *host_x, int batch, float *host_y,
                                   char *err, size_t errlen)
{
    if (kern_cuda_range_check("cnn:resnet20", first, last, n->spec.layer_count, batch, INT_MAX, err,
                              errlen) < 0 ||
        kern_cuda_enter(n->c, err, errlen) < 0 || resnet_reserve(n, batch, err, errlen) < 0 ||
        kern_cuda_copy_async(n->c, kern_resnet_input(n->buf, first), host_x,
                             (size_t)batch * resnet_width(n, first - 1) * sizeof(float),
                             cudaMemcpyHostToDevice, "copy layer input to device", err, errlen) < 0)
        return -1;
    resnet_exec e(n->c, err, errlen);
    if (kern_resnet_forward_range(e, n->spec, n->buf, params, first, last, batch, 1) < 0)
        return kern_cuda_abandon(n->c);
    if (kern_cuda_copy_async(n->c, host_y, n->buf.act[last],
                             (size_t)batch * resnet_width(n, last) * sizeof(float),
                             cudaMemcpyDeviceToHost, "copy layer output to host", err, errlen) < 0)
        return kern_cuda_abandon(n->c);
    return kern_cuda_finish(n->c, "forward range", err, errlen);
}

int kern_cuda_resnet_backward_range(struct kern_cuda_resnet *n, const float *params, int first,
                                    int last, const float *host_dy, int batch, float *host_dx,
                                    float *grad, char *err, size_t errlen)
{
    if (kern_cuda_range_check("cnn:resnet20", first, last, n->spec.layer_count, batch,
                              n->ws.capacity, err, errlen) < 0 ||
        kern_cuda_enter(n->c, err, errlen) < 0)
        return -1;
    if (first > 0 && !host_dx)
        return kern_fail(err, errlen, "cuda cnn:resnet20: layers {%d, %d} need somewhere for dx",
                         first + 1, last + 1);
    if (kern_cuda_copy_async(
            n->c, n->buf.delta[0], host_dy, (size_t)batch * resnet_width(n, last) * sizeof(float),
            cudaMemcpyHostToDevice, "copy output gradient to device", err, errlen) < 0)
        return -1;
    resnet_exec e(n->c, err, errlen);
    if (kern_resnet_backward_range(e, n->spec, n->buf, params, grad, batch, first, last,
                                   first ? n->buf.dinput : NULL) < 0)
        return kern_cuda_abandon(n->c);
    if (first && kern_cuda_copy_async(n->c, host_dx, n->buf.dinput,
                                      (size_t)batch * resnet_width(n, first - 1) * sizeof(float),
                                      cudaMemcpyDeviceToHost, "copy input gradient to host", err,
                                      errlen) < 0)
        return kern_cuda_abandon(n->c);
    return kern_cuda_finish(n->c, "backward range", err, errlen);
}
