/* cuda/conv_pass.cuh — a square convolution as im2col + GEMM written once
 * over an executor E (dense_pass.cuh's operations plus the three below),
 * shared by cnn:lenet's passes (lenet_pass.cuh) and cnn:resnet20's
 * (resnet20_pass.cuh), with the element functions their GPU kernels and
 * the host executor of tests/unit/test_cuda_host.cu call per element.
 *
 * Same semantics and layout as kernels/cpu/model.c: maps are channel-major
 * C x B x H x W; im2col builds col[K][B*OH*OW] with K = C*k*k rows in
 * (c, ky, kx) order and the GEMM W[COUT][K] x col writes the output map in
 * place.
 *
 * E provides, each returning 0 or -1:
 *   im2col(conv, in, batch, col)        col[t] = kern_im2col_value(conv, in, batch, t)
 *   col2im(conv, col, batch, dx)        dx[t] = kern_col2im_value(conv, col, batch, t)
 *   bias_relu_planes(y, channels, n, b, relu)   y[i] = kern_bias_relu(y[i], b[i / n], relu) */
#pragma once

#include <stddef.h>

#include "kernels/cuda/dense_pass.cuh"
#include "kernels/elementwise.h"

struct kern_conv_shape {
    int in_c, in_h, in_w;
    int out_c, out_h, out_w;
    int kernel, pad, stride;
    int has_bias;        /* lenet's convs: bias and ReLU; resnet's: neither (BN follows) */
    size_t weight, bias; /* offsets in the flat parameters */
};

KERN_HD size_t kern_conv_patch(const struct kern_conv_shape &c)
{
    return (size_t)c.in_c * c.kernel * c.kernel;
}

KERN_HD size_t kern_conv_plane(const struct kern_conv_shape &c)
{
    return (size_t)c.out_h * c.out_w;
}

/* A stride-1 convolution with bias (lenet's), its parameters at *params,
 * which moves past them. */
static inline void kern_conv_shape_build(struct kern_conv_shape *c, int in_c, int in_h, int in_w,
                                         int out_c, int kernel, int pad, size_t *params)
{
    c->in_c = in_c;
    c->in_h = in_h;
    c->in_w = in_w;
    c->out_c = out_c;
    c->kernel = kernel;
    c->pad = pad;
    c->stride = 1;
    c->has_bias = 1;
    c->out_h = in_h + 2 * pad - kernel + 1;
    c->out_w = in_w + 2 * pad - kernel + 1;
    c->weight = *params;
    c->bias = *params + kern_conv_patch(*c) * out_c;
    *params = c->bias + (size_t)out_c;
}

/* ---- element functions (one GPU thread each) ---- */

/* Element t of col[K][batch * OH * OW]: row (c, ky, kx), column (b, oy, ox)
 * holds input pixel (oy * stride + ky - pad, ox * stride + kx - pad) of
 * plane (c, b), zero outside the image (model.c's im2col). */
KERN_HD float kern_im2col_value(const struct kern_conv_shape &c, const float *in, int batch,
                                size_t t)
{
    size_t plane = kern_conv_plane(c), cols = (size_t)batch * plane;
    int row = (int)(t / cols), k = c.kernel;
    size_t j = t % cols, b = j / plane, p = j % plane;
    int ch = row / (k * k), ky = row / k % k, kx = row % k;
    int iy = (int)(p / c.out_w) * c.stride + ky - c.pad;
    int ix = (int)(p % c.out_w) * c.stride + kx - c.pad;
    if (iy < 0 || iy >= c.in_h || ix < 0 || ix >= c.in_w) return 0.0f;
    return in[((size_t)ch * batch + b) * c.in_h * c.in_w + (size_t)iy * c.in_w + ix];
}

/* The output row or column o whose window reads input i at offset k (-1:
 * none): o * stride = i - k + pad. */
KERN_HD int kern_conv_source(int i, int k, int pad, int stride, int out)
{
    int at = i - k + pad;
    if (at < 0 || at % stride) return -1;
    return at / stride < out ? at / stride : -1;
}

/* Element t of dx (C x batch x H x W): the sum of the col entries im2col
 * copied pixel t into, added in (ky, kx) order from 0 as model.c's col2im
 * does, so the result is the CPU's to the bit. */
KERN_HD float kern_col2im_value(const struct kern_conv_shape &c, const float *col, int batch,
                                size_t t)
{
    size_t image = (size_t)c.in_h * c.in_w, plane = kern_conv_plane(c);
    size_t cols = (size_t)batch * plane, ch = t / ((size_t)batch * image);
    size_t b = t / image % batch, p = t % image;
    int iy = (int)(p / c.in_w), ix = (int)(p % c.in_w), k = c.kernel;
    float sum = 0.0f;
    for (int ky = 0; ky < k; ky++) {
        int oy = kern_conv_source(iy, ky, c.pad, c.stride, c.out_h);
        if (oy < 0) continue;
        for (int kx = 0; kx < k; kx++) {
            int ox = kern_conv_source(ix, kx, c.pad, c.stride, c.out_w);
            if (ox < 0) continue;
            size_t row = ch * k * k + (size_t)ky * k + kx;
            sum += col[row * cols + b * plane + (size_t)oy * c.out_w + ox];
        }
    }
    return sum;
}

/* ---- passes ---- */

template <class E>
int kern_conv_forward(E &e, const struct kern_conv_shape &c, const float *params, const float *in,
                      float *col, float *y, int batch)
{
    int n = batch * (int)kern_conv_plane(c), patch = (int)kern_conv_patch(c);
    /* y[COUT][n] = W[COUT][patch] col[patch][n] */
    if (e.im2col(c, in, batch, col) < 0 ||
        kern_gemm_rowmajor(e, 0, 0, c.out_c, n, patch, 1.0f, params + c.weight, patch, col, n, 0.0f,
                           y, n) < 0)
        return -1;
    return c.has_bias ? e.bias_relu_planes(y, c.out_c, (size_t)n, params + c.bias, 1) : 0;
}

/* dy: d loss / d output, already ReLU-masked (lenet: by the pooling above;
 * resnet's convs have no ReLU). col is rebuilt from in, then receives
 * d col when dx is wanted. ones: n = batch x plane ones when has_bias. */
template <class E>
int kern_conv_backward(E &e, const struct kern_conv_shape &c, const float *params, const float *in,
                       const float *dy, const float *ones, float *col, float *grad, float *dx,
                       int batch)
{
    int n = batch * (int)kern_conv_plane(c), patch = (int)kern_conv_patch(c);
    /* db = row sums of dy[COUT][n]: column-major n x COUT, transposed, times ones */
    if ((c.has_bias &&
         e.gemv_colmajor(1, n, c.out_c, 1.0f, dy, n, ones, 0.0f, grad + c.bias) < 0) ||
        e.im2col(c, in, batch, col) < 0)
        return -1;
    /* dW[COUT][patch] = dy[COUT][n] col[patch][n]^T */
    if (kern_gemm_rowmajor(e, 0, 1, c.out_c, patch, n, 1.0f, dy, n, col, n, 0.0f, grad + c.weight,
                           patch) < 0)
        return -1;
    if (!dx) return 0;
    /* d col[patch][n] = W[COUT][patch]^T dy[COUT][n] */
    if (kern_gemm_rowmajor(e, 1, 0, patch, n, c.out_c, 1.0f, params + c.weight, patch, dy, n, 0.0f,
                           col, n) < 0)
        return -1;
    return e.col2im(c, col, batch, dx);
}
