/* cuda/resnet20_pass.cuh — cnn:resnet20's forward and backward passes
 * written once over an executor E, as lenet_pass.cuh does for lenet:
 * resnet.cu runs them with cuBLAS and kernels, tests/unit/test_cuda_host.cu
 * with host loops, where they are checked against kernels/cpu/model.c
 * without a GPU.
 *
 * The passes walk the layer table of kernels/model_spec.c (struct
 * model_spec: conv, batch norm, residual add, global average pool, dense
 * rows) with kernels/cpu/model.c's semantics and layout: maps channel-major
 * C x B x H x W, convolutions as conv_pass.cuh's im2col + GEMM (the CPU
 * runs most of resnet's as Winograd: the same sums in another rounding),
 * batch norm with the batch's statistics when training (and its mean,
 * biased variance and 1/sqrt(var + eps) kept for the backward pass and
 * the gradient's tail), with the running statistics otherwise; residual
 * adds with He et al.'s option-A shortcut (every `stride`-th pixel, zero
 * channels padded evenly on both sides), ReLU after; global average pool
 * to batch x C rows; the dense layer and the loss as dense_pass.cuh's.
 *
 * A batch norm reduces over a whole channel. Its channel functions below
 * are written for `lanes` workers that each sum every lanes-th element
 * and a `sum` functor that returns the total of all lanes' values (on the
 * GPU one block per channel and a block-wide tree; on the host one lane
 * and the identity).
 *
 * E provides, besides dense_pass.cuh's and conv_pass.cuh's operations,
 * each returning 0 or -1:
 *   bn_forward(kern_bn_forward)      kern_bn_forward_channel per channel
 *   bn_backward(kern_bn_backward)    kern_bn_backward_channel per channel
 *   bn_statistics(channels, mean, var, unbias, out)  out[t] = kern_bn_statistic(...)
 *   residual_forward(r, x, skip, batch, y)   y[t] = kern_residual_value(...)
 *   residual_backward(r, y, dy, batch, dx, dskip)  dx[t] = kern_relu_mask(dy[t], y[t]),
 *                                            dskip[u] = kern_residual_skip_grad(...)
 *   add(y, x, n)                             y[i] += x[i]
 *   avgpool_forward(p, x, batch, y)          y[o] = kern_avgpool_value(...)
 *   avgpool_backward(p, dy, batch, dx)       dx[t] = kern_avgpool_grad(...) */
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "kernels/model.h"
#include "kernels/model_spec.h"
}
#include "kernels/cuda/conv_pass.cuh"
#include "kernels/cuda/dense_pass.cuh"
#include "kernels/elementwise.h"

/* Buffers of one pass for `capacity` samples (device or host memory as the
 * executor expects), laid out by kern_resnet_buffers_carve. */
struct kern_resnet_buffers {
    float *x;                     /* capacity x inputs: the model's input */
    int32_t *labels;              /* capacity */
    float *act[MODEL_MAX_LAYERS]; /* each row's output */
    /* batch norm rows: the last training pass's batch mean, 1 / sqrt(biased
     * variance + eps) and biased variance, per channel */
    float *bn_mean[MODEL_MAX_LAYERS], *bn_invstd[MODEL_MAX_LAYERS], *bn_var[MODEL_MAX_LAYERS];
    float *col;      /* capacity x the largest conv's im2col floats per sample */
    float *delta[2]; /* capacity x widest: ping-pong activation gradients */
    float *skip;     /* capacity x widest: a block's input gradient via its shortcut */
    float *dinput;   /* capacity x widest: d loss / d a layer range's input */
    float *ones;     /* capacity ones: the dense bias gradient as a GEMV */
    double *row_loss;
    int *row_hit;
};

/* Whether the passes below run every row of s (they know resnet's kinds). */
static inline int kern_resnet_runs(const struct model_spec &s)
{
    for (int i = 0; i < s.layer_count; i++) {
        enum model_layer_kind k = s.layers[i].kind;
        if (k == MODEL_LAYER_POOL || k == MODEL_LAYER_FLATTEN) return 0;
    }
    return s.layer_count > 0;
}

static inline size_t kern_resnet_widest(const struct model_spec &s)
{
    size_t widest = 0;
    for (int i = 0; i < s.layer_count; i++) {
        widest = s.layers[i].in_size > widest ? s.layers[i].in_size : widest;
        widest = s.layers[i].out_size > widest ? s.layers[i].out_size : widest;
    }
    return widest;
}

/* Carves the buffers for `cap` samples: carve(bytes) returns the next
 * block (or NULL when only measuring). One function for the GPU's
 * workspace and the host test's, so their sizes cannot disagree. */
template <class Carve>
void kern_resnet_buffers_carve(const struct model_spec &s, size_t cap,
                               struct kern_resnet_buffers *b, Carve carve)
{
    size_t col = 0, widest = kern_resnet_widest(s), f = sizeof(float);
    b->x = (float *)carve(cap * s.layers[0].in_size * f);
    b->labels = (int32_t *)carve(cap * sizeof(int32_t));
    for (int i = 0; i < s.layer_count; i++) {
        const struct model_layer &l = s.layers[i];
        b->act[i] = (float *)carve(cap * l.out_size * f);
        col = l.kind == MODEL_LAYER_CONV && l.col_size > col ? l.col_size : col;
        if (l.kind != MODEL_LAYER_BATCHNORM) continue;
        b->bn_mean[i] = (float *)carve((size_t)l.out_c * f);
        b->bn_invstd[i] = (float *)carve((size_t)l.out_c * f);
        b->bn_var[i] = (float *)carve((size_t)l.out_c * f);
    }
    b->col = (float *)carve(cap * col * f);
    b->delta[0] = (float *)carve(cap * widest * f);
    b->delta[1] = (float *)carve(cap * widest * f);
    b->skip = (float *)carve(cap * widest * f);
    b->dinput = (float *)carve(cap * widest * f);
    b->ones = (float *)carve(cap * f);
    b->row_loss = (double *)carve(cap * sizeof(double));
    b->row_hit = (int *)carve(cap * sizeof(int));
}

/* The buffer that holds row i's input: the model's input, or the output
 * of the row below. A layer range's input is uploaded there, and a
 * residual row's shortcut reads its skip_from's output the same way (-1:
 * the model's input): ranges never cut a block, so a range that starts at
 * a block finds the block's input where it was uploaded. */
static inline float *kern_resnet_input(const struct kern_resnet_buffers &b, int i)
{
    return i > 0 ? b.act[i - 1] : b.x;
}

/* ---- batch norm ---- */

struct kern_bn_forward {
    int channels, relu, training;
    size_t n; /* values per channel: batch x H x W */
    const float *x, *gamma, *beta;
    const float *running_mean, *running_var; /* read when not training */
    float *y, *mean, *invstd, *var;          /* mean, invstd, var written when training */
};

struct kern_bn_backward {
    int channels, relu;
    size_t n;
    const float *x, *y, *dy, *gamma, *mean, *invstd;
    float *dx, *dgamma, *dbeta;
};

/* A functor's call operator for host and device code (KERN_HD is
 * `static` for a host compiler, which a member cannot be). */
#ifdef __CUDACC__
#define KERN_HD_METHOD __host__ __device__
#else
#define KERN_HD_METHOD
#endif

/* The host's lane functor: one lane holds the total already. */
struct kern_one_lane {
    KERN_HD_METHOD double operator()(double v) const
    {
        return v;
    }
};

#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
/* The batch's mean, biased variance and 1 / sqrt(var + eps) of x[0, n) as
 * model.c's bn_forward_train: the variance about the float mean, less the
 * drift its rounding leaves (the two-pass variance), sums in double. */
template <class Sum>
KERN_HD void kern_bn_batch_statistics(const float *x, size_t n, int lane, int lanes, Sum &sum,
                                      float *mean_out, float *invstd_out, float *var_out)
{
    double total = 0, drift = 0, squares = 0;
    for (size_t j = (size_t)lane; j < n; j += (size_t)lanes)
        total += x[j];
    float mean_f = (float)(sum(total) / (double)n);
    for (size_t j = (size_t)lane; j < n; j += (size_t)lanes) {
        float d = x[j] - mean_f;
        drift += d;
        squares += (double)d * d;
    }
    drift = sum(drift) / (double)n;
    squares = sum(squares) / (double)n;
    double biased = squares - drift * drift;
    biased = biased > 0 ? biased : 0;
    *mean_out = (float)(mean_f + drift);
    *invstd_out = (float)(1.0 / sqrt(biased + MODEL_BN_EPS));
    *var_out = (float)biased;
}

#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
/* Channel c of a batch norm's forward pass (model.c's bn_forward_train or
 * bn_forward_eval): y = x * scale + shift, ReLU when asked. */
template <class Sum>
KERN_HD void kern_bn_forward_channel(const struct kern_bn_forward &a, int c, int lane, int lanes,
                                     Sum &sum)
{
    const float *x = a.x + (size_t)c * a.n;
    float *y = a.y + (size_t)c * a.n;
    float mean, invstd, var;
    if (a.training) {
        kern_bn_batch_statistics(x, a.n, lane, lanes, sum, &mean, &invstd, &var);
        if (lane == 0) {
            a.mean[c] = mean;
            a.invstd[c] = invstd;
            a.var[c] = var;
        }
    } else {
        mean = a.running_mean[c];
        invstd = (float)(1.0 / sqrt((double)a.running_var[c] + MODEL_BN_EPS));
    }
    float scale = a.gamma[c] * invstd, shift = a.beta[c] - mean * scale;
    for (size_t j = (size_t)lane; j < a.n; j += (size_t)lanes)
        y[j] = kern_bias_relu(x[j] * scale, shift, a.relu);
}

#ifdef __CUDACC__
#pragma nv_exec_check_disable
#endif
/* Channel c of the backward pass through a normalisation by batch
 * statistics (model.c's bn_backward), dy masked by the ReLU first when the
 * layer has one:
 *   dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)),
 * xhat = (x - mean) * invstd; dgamma = sum(dy * xhat), dbeta = sum(dy). */
template <class Sum>
KERN_HD void kern_bn_backward_channel(const struct kern_bn_backward &a, int c, int lane, int lanes,
                                      Sum &sum)
{
    size_t off = (size_t)c * a.n;
    const float *x = a.x + off, *y = a.y + off, *dy = a.dy + off;
    float *dx = a.dx + off, mean = a.mean[c], invstd = a.invstd[c];
    double sum_dy = 0, sum_dy_centered = 0;
    for (size_t j = (size_t)lane; j < a.n; j += (size_t)lanes) {
        float g = a.relu ? kern_relu_mask(dy[j], y[j]) : dy[j];
        sum_dy += g;
        sum_dy_centered += g * (x[j] - mean);
    }
    sum_dy = sum(sum_dy);
    sum_dy_centered = sum(sum_dy_centered);
    if (lane == 0) {
        a.dgamma[c] = (float)(sum_dy_centered * invstd);
        a.dbeta[c] = (float)sum_dy;
    }
    float scale = a.gamma[c] * invstd, mean_dy = (float)(sum_dy / (double)a.n);
    float k = (float)(sum_dy_centered / (double)a.n) * invstd * invstd;
    for (size_t j = (size_t)lane; j < a.n; j += (size_t)lanes) {
        float g = a.relu ? kern_relu_mask(dy[j], y[j]) : dy[j];
        dx[j] = scale * (g - mean_dy - (x[j] - mean) * k);
    }
}

/* Element t of a batch norm's tail of grad (model.c's
 * write_batch_statistics): the batch mean of each channel, then its
 * unbiased variance (unbias = n / (n - 1)). */
KERN_HD float kern_bn_statistic(const float *mean, const float *var, int channels, double unbias,
                                int t)
{
    return t < channels ? mean[t] : (float)(var[t - channels] * unbias);
}

/* ---- residual add (option A) and global average pooling ---- */

struct kern_residual_shape {
    int c, h, w;             /* the output's (and the main path's) map */
    int src_c, src_h, src_w; /* the shortcut's source map */
};

/* Index into the source map of the pixel output element t adds, or
 * (size_t)-1 for a zero padding channel (model.c's shortcut_channel and
 * shortcut_stride). */
KERN_HD size_t kern_residual_source(const struct kern_residual_shape &r, int batch, size_t t)
{
    size_t plane = (size_t)r.h * r.w, p = t % plane, b = t / plane % batch;
    int c = (int)(t / (plane * batch)), stride = r.src_h / r.h;
    int sc = c - (r.c - r.src_c) / 2;
    if (sc < 0 || sc >= r.src_c) return (size_t)-1;
    size_t row = (p / r.w) * stride, col = (p % r.w) * stride;
    return ((size_t)sc * batch + b) * r.src_h * r.src_w + row * r.src_w + col;
}

/* y[t] = ReLU(x[t] + the shortcut's pixel), x alone on a padding channel. */
KERN_HD float kern_residual_value(const struct kern_residual_shape &r, const float *x,
                                  const float *skip, int batch, size_t t)
{
    size_t s = kern_residual_source(r, batch, t);
    return kern_bias_relu(x[t], s == (size_t)-1 ? 0.0f : skip[s], 1);
}

/* Element u of the source map's gradient via the shortcut: the ReLU-masked
 * dy of the output that added it, 0 for a skipped pixel. */
KERN_HD float kern_residual_skip_grad(const struct kern_residual_shape &r, const float *y,
                                      const float *dy, int batch, size_t u)
{
    size_t src_plane = (size_t)r.src_h * r.src_w, p = u % src_plane, b = u / src_plane % batch;
    int sc = (int)(u / (src_plane * batch)), stride = r.src_h / r.h;
    int iy = (int)(p / r.src_w), ix = (int)(p % r.src_w);
    if (iy % stride || ix % stride || iy / stride >= r.h || ix / stride >= r.w) return 0.0f;
    int c = sc + (r.c - r.src_c) / 2;
    size_t t = ((size_t)c * batch + b) * r.h * r.w + (size_t)(iy / stride) * r.w + ix / stride;
    return kern_relu_mask(dy[t], y[t]);
}

struct kern_avgpool_shape {
    int channels;
    size_t plane;
};

/* Output o = b * channels + c: the mean of plane (c, b), summed in double. */
KERN_HD float kern_avgpool_value(const struct kern_avgpool_shape &p, const float *x, int batch,
                                 size_t o)
{
    size_t c = o % p.channels, b = o / p.channels;
    const float *in = x + (c * batch + b) * p.plane;
    double sum = 0;
    for (size_t j = 0; j < p.plane; j++)
        sum += in[j];
    return (float)(sum / (double)p.plane);
}

KERN_HD float kern_avgpool_grad(const struct kern_avgpool_shape &p, const float *dy, int batch,
                                size_t t)
{
    size_t c = t / (p.plane * batch), b = t / p.plane % batch;
    return dy[b * p.channels + c] / (float)p.plane;
}

/* ---- rows ---- */

static inline struct kern_conv_shape kern_resnet_conv(const struct model_layer &l)
{
    struct kern_conv_shape c;
    c.in_c = l.in_c;
    c.in_h = l.in_h;
    c.in_w = l.in_w;
    c.out_c = l.out_c;
    c.out_h = l.out_h;
    c.out_w = l.out_w;
    c.kernel = l.kernel;
    c.pad = l.pad;
    c.stride = l.stride;
    c.has_bias = l.bias;
    c.weight = l.weight_offset;
    c.bias = l.bias_offset;
    return c;
}

static inline struct kern_residual_shape kern_resnet_residual(const struct model_spec &s,
                                                              const struct model_layer &l)
{
    struct kern_residual_shape r = {l.out_c, l.out_h, l.out_w, s.in_c, s.in_h, s.in_w};
    if (l.skip_from >= 0) {
        const struct model_layer &from = s.layers[l.skip_from];
        r.src_c = from.out_c;
        r.src_h = from.out_h;
        r.src_w = from.out_w;
    }
    return r;
}

/* A dense row as a one-layer dense_pass.cuh stack reading `in` and writing
 * `out`, so its passes run it. */
struct kern_resnet_dense_view {
    struct kern_dense_layout l;
    struct kern_dense_buffers b;
};

static inline struct kern_resnet_dense_view kern_resnet_dense(const struct model_layer &l,
                                                              const struct kern_resnet_buffers &b,
                                                              const float *in, float *out)
{
    struct kern_resnet_dense_view v = {};
    v.l.count = 1;
    v.l.in[0] = v.l.inputs = (int)l.in_size;
    v.l.out[0] = v.l.classes = (int)l.out_size;
    v.l.relu[0] = l.relu;
    v.l.weight[0] = l.weight_offset;
    v.l.bias[0] = l.bias_offset;
    v.l.widest = v.l.in[0] > v.l.out[0] ? v.l.in[0] : v.l.out[0];
    v.l.params = l.bias_offset + l.out_size;
    v.b.x = (float *)in;
    v.b.act[0] = out;
    v.b.ones = b.ones;
    return v;
}

static inline struct kern_avgpool_shape kern_resnet_avgpool(const struct model_layer &l)
{
    return kern_avgpool_shape{l.in_c, (size_t)l.in_h * l.in_w};
}

static inline struct kern_bn_forward kern_resnet_bn_forward(const struct model_layer &l,
                                                            const struct kern_resnet_buffers &b,
                                                            const float *params, int i, int batch,
                                                            int training)
{
    struct kern_bn_forward a;
    a.channels = l.out_c;
    a.relu = l.relu;
    a.training = training;
    a.n = (size_t)batch * l.out_h * l.out_w;
    a.x = kern_resnet_input(b, i);
    a.gamma = params + l.weight_offset;
    a.beta = params + l.bias_offset;
    a.running_mean = params + l.stat_offset;
    a.running_var = params + l.stat_offset + l.out_c;
    a.y = b.act[i];
    a.mean = b.bn_mean[i];
    a.invstd = b.bn_invstd[i];
    a.var = b.bn_var[i];
    return a;
}

static inline struct kern_bn_backward
kern_resnet_bn_backward(const struct model_layer &l, const struct kern_resnet_buffers &b,
                        const float *params, float *grad, int i, int batch, float *dy, float *dx)
{
    struct kern_bn_backward a;
    a.channels = l.out_c;
    a.relu = l.relu;
    a.n = (size_t)batch * l.out_h * l.out_w;
    a.x = kern_resnet_input(b, i);
    a.y = b.act[i];
    a.dy = dy;
    a.gamma = params + l.weight_offset;
    a.mean = b.bn_mean[i];
    a.invstd = b.bn_invstd[i];
    a.dx = dx;
    a.dgamma = grad + l.weight_offset;
    a.dbeta = grad + l.bias_offset;
    return a;
}

/* Row i forward, on its input where kern_resnet_input says. Batch norms
 * use the batch's statistics when `training`, the running ones otherwise. */
template <class E>
int kern_resnet_layer_forward(E &e, const struct model_spec &s, const struct kern_resnet_buffers &b,
                              const float *params, int i, int batch, int training)
{
    const struct model_layer &l = s.layers[i];
    const float *in = kern_resnet_input(b, i);
    switch (l.kind) {
    case MODEL_LAYER_CONV:
        return kern_conv_forward(e, kern_resnet_conv(l), params, in, b.col, b.act[i], batch);
    case MODEL_LAYER_BATCHNORM:
        return e.bn_forward(kern_resnet_bn_forward(l, b, params, i, batch, training));
    case MODEL_LAYER_RESIDUAL:
        return e.residual_forward(kern_resnet_residual(s, l), in,
                                  kern_resnet_input(b, l.skip_from + 1), batch, b.act[i]);
    case MODEL_LAYER_AVGPOOL:
        return e.avgpool_forward(kern_resnet_avgpool(l), in, batch, b.act[i]);
    case MODEL_LAYER_DENSE: {
        struct kern_resnet_dense_view v = kern_resnet_dense(l, b, in, b.act[i]);
        return kern_dense_forward_range(e, v.l, v.b, params, 0, 0, batch);
    }
    default:
        return -1; /* kern_resnet_runs refuses such tables */
    }
}

/* Row i's backward pass: dy (d loss / d its output; may be overwritten) to
 * its parameters' gradient and, when dx is not NULL, d loss / d its input.
 * A residual row also leaves its shortcut's gradient in b.skip. */
template <class E>
int kern_resnet_layer_backward(E &e, const struct model_spec &s,
                               const struct kern_resnet_buffers &b, const float *params,
                               float *grad, int batch, int i, float *dy, float *dx)
{
    const struct model_layer &l = s.layers[i];
    const float *in = kern_resnet_input(b, i);
    switch (l.kind) {
    case MODEL_LAYER_CONV:
        return kern_conv_backward(e, kern_resnet_conv(l), params, in, dy, b.ones, b.col, grad, dx,
                                  batch);
    case MODEL_LAYER_BATCHNORM:
        return e.bn_backward(kern_resnet_bn_backward(l, b, params, grad, i, batch, dy, dx));
    case MODEL_LAYER_RESIDUAL:
        return e.residual_backward(kern_resnet_residual(s, l), b.act[i], dy, batch, dx, b.skip);
    case MODEL_LAYER_AVGPOOL:
        return dx ? e.avgpool_backward(kern_resnet_avgpool(l), dy, batch, dx) : 0;
    case MODEL_LAYER_DENSE: {
        struct kern_resnet_dense_view v = kern_resnet_dense(l, b, in, b.act[i]);
        return kern_dense_layer_backward(e, v.l, v.b, params, grad, batch, 0, dy, dx);
    }
    default:
        return -1;
    }
}

/* Rows first..last on the input in kern_resnet_input(b, first). */
template <class E>
int kern_resnet_forward_range(E &e, const struct model_spec &s, const struct kern_resnet_buffers &b,
                              const float *params, int first, int last, int batch, int training)
{
    for (int i = first; i <= last; i++)
        if (kern_resnet_layer_forward(e, s, b, params, i, batch, training) < 0) return -1;
    return 0;
}

/* The batch norms' batch statistics of rows first..last into grad's tail. */
template <class E>
int kern_resnet_write_statistics(E &e, const struct model_spec &s,
                                 const struct kern_resnet_buffers &b, float *grad, int first,
                                 int last, int batch)
{
    for (int i = first; i <= last; i++) {
        const struct model_layer &l = s.layers[i];
        if (l.kind != MODEL_LAYER_BATCHNORM) continue;
        double n = (double)batch * l.out_h * l.out_w, unbias = n > 1 ? n / (n - 1) : 1.0;
        if (e.bn_statistics(l.out_c, b.bn_mean[i], b.bn_var[i], unbias, grad + l.stat_offset) < 0)
            return -1;
    }
    return 0;
}

/* Rows last..first after kern_resnet_forward_range over the same range (in
 * training mode): expects d loss / d (row last's output) in b.delta[0];
 * writes the rows' slices of grad with their batch statistics in its tail
 * (model.c's backward_layers and write_batch_statistics), and d loss / d
 * (row first's input) into dinput when it is not NULL (it must not be for
 * a range that starts above row 0). A block's input receives the gradient
 * of both its paths: the shortcut's waits in b.skip (blocks do not nest)
 * until the main path's reaches it. */
template <class E>
int kern_resnet_backward_range(E &e, const struct model_spec &s,
                               const struct kern_resnet_buffers &b, const float *params,
                               float *grad, int batch, int first, int last, float *dinput)
{
    int skip_to = -2; /* the row whose output b.skip's gradient belongs to */
    int rc = kern_backward_rows(
        first, last, b.delta[0], b.delta[1], dinput, [&](int i, float *dy, float *dx) {
            const struct model_layer &l = s.layers[i];
            if (kern_resnet_layer_backward(e, s, b, params, grad, batch, i, dy, dx) < 0) return -1;
            if (l.kind == MODEL_LAYER_RESIDUAL) skip_to = l.skip_from;
            if (!dx || skip_to != i - 1) return 0;
            skip_to = -2;
            return e.add(dx, b.skip, l.in_size * (size_t)batch);
        });
    return rc < 0 ? -1 : kern_resnet_write_statistics(e, s, b, grad, first, last, batch);
}

/* Forward (training when grad is not NULL, else evaluation with the
 * running statistics), loss per row, and (grad non-NULL) backward: the
 * whole gradient with the batch statistics in its tail. */
template <class E>
int kern_resnet_pass(E &e, const struct model_spec &s, const struct kern_resnet_buffers &b,
                     const float *params, int batch, float *grad)
{
    int last = s.layer_count - 1;
    if (kern_resnet_forward_range(e, s, b, params, 0, last, batch, grad != NULL) < 0 ||
        e.softmax(b.act[last], b.labels, batch, (int)s.layers[last].out_size,
                  grad ? b.delta[0] : NULL, b.row_loss, b.row_hit) < 0)
        return -1;
    return grad ? kern_resnet_backward_range(e, s, b, params, grad, batch, 0, last, NULL) : 0;
}
