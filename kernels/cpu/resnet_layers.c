/* cpu/resnet_layers.c — batch norm, residual add and global average pooling
 * over channel-major maps (see resnet_layers.h). Long sums are blocked: a
 * channel of stage 1 at batch 128 sums 100 352 values, where one float
 * accumulator would lose the low digits PyTorch keeps, and one double
 * accumulator runs scalar (GCC may not reorder float additions to
 * vectorise them): SUM_LANES float lanes over blocks of SUM_BLOCK values,
 * each block's total added in double. With it (and a flat identity add)
 * a resnet20 step at batch 64 went from 437 to 228 ms of CPU (batch norm
 * had been 15% of it: perf; tools/bench/kernels on the loaded 2-core host). */
#include "kernels/cpu/resnet_layers.h"

#include <math.h>
#include <string.h>

#include "kernels/model.h"

/* As in cpu/model.c: GCC's -O2 cost model leaves these loops scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#define SUM_LANES 8
#define SUM_BLOCK 512

/* Sums of x[0, n) and of x[i] * (y[i] - shift). Each lane is a plain float
 * accumulator, so the inner loop vectorises without reassociation. With
 * relu_out, x is first masked in place by the ReLU whose output that is,
 * a block at a time, so the block is summed while it is in L1 (one pass
 * over the map fewer than masking it whole first). */
static void blocked_sums(float *restrict x, const float *restrict relu_out, const float *restrict y,
                         float shift, size_t n, double *sum_x, double *sum_xy)
{
    double total_x = 0, total_xy = 0;
    for (size_t start = 0; start < n; start += SUM_BLOCK) {
        size_t end = start + SUM_BLOCK < n ? start + SUM_BLOCK : n, j = start;
        float lane_x[SUM_LANES] = {0}, lane_xy[SUM_LANES] = {0};
        for (size_t i = start; relu_out && i < end; i++)
            x[i] = relu_out[i] > 0.0f ? x[i] : 0.0f;
        for (; j + SUM_LANES <= end; j += SUM_LANES)
            for (int k = 0; k < SUM_LANES; k++) {
                lane_x[k] += x[j + k];
                lane_xy[k] += x[j + k] * (y[j + k] - shift);
            }
        for (; j < end; j++) {
            lane_x[0] += x[j];
            lane_xy[0] += x[j] * (y[j] - shift);
        }
        for (int k = 0; k < SUM_LANES; k++) {
            total_x += lane_x[k];
            total_xy += lane_xy[k];
        }
    }
    *sum_x = total_x;
    *sum_xy = total_xy;
}

static float relu_if(float v, int relu)
{
    return relu && !(v > 0.0f) ? 0.0f : v;
}

/* y = x * scale + shift over one channel's row, then ReLU when asked. */
static void scale_shift_row(const float *restrict x, float *restrict y, size_t n, float scale,
                            float shift, int relu)
{
    for (size_t j = 0; j < n; j++)
        y[j] = relu_if(x[j] * scale + shift, relu);
}

/* Sums of x - shift and (x - shift)^2 over x[0, n). */
static void blocked_sums_centered(const float *restrict x, float shift, size_t n, double *sum,
                                  double *squares)
{
    double total = 0, total_sq = 0;
    for (size_t start = 0; start < n; start += SUM_BLOCK) {
        size_t end = start + SUM_BLOCK < n ? start + SUM_BLOCK : n, j = start;
        float lane[SUM_LANES] = {0}, lane_sq[SUM_LANES] = {0};
        for (; j + SUM_LANES <= end; j += SUM_LANES)
            for (int k = 0; k < SUM_LANES; k++) {
                float d = x[j + k] - shift;
                lane[k] += d;
                lane_sq[k] += d * d;
            }
        for (; j < end; j++) {
            float d = x[j] - shift;
            lane[0] += d;
            lane_sq[0] += d * d;
        }
        for (int k = 0; k < SUM_LANES; k++) {
            total += lane[k];
            total_sq += lane_sq[k];
        }
    }
    *sum = total;
    *squares = total_sq;
}

void bn_forward_train(const struct bn_pass *bn, const float *x, float *y, float *var)
{
    for (int c = 0; c < bn->channels; c++) {
        const float *row = x + (size_t)c * bn->n;
        double sum, squares, drift;
        blocked_sums_centered(row, 0.0f, bn->n, &sum, &squares);
        float mean_f = (float)(sum / (double)bn->n);
        /* sum (x - m)^2 about the float mean m, less the drift (sum of
         * x - m)^2 / n that m's rounding leaves: the two-pass variance. */
        blocked_sums_centered(row, mean_f, bn->n, &drift, &squares);
        double mean = mean_f + drift / (double)bn->n;
        double biased = squares / (double)bn->n - (drift / (double)bn->n) * (drift / (double)bn->n);
        biased = biased > 0 ? biased : 0;
        float invstd = (float)(1.0 / sqrt(biased + MODEL_BN_EPS));
        float scale = bn->gamma[c] * invstd;
        bn->mean[c] = (float)mean;
        bn->invstd[c] = invstd;
        if (var) var[c] = (float)biased;
        scale_shift_row(row, y + (size_t)c * bn->n, bn->n, scale, bn->beta[c] - (float)mean * scale,
                        bn->relu);
    }
}

void bn_forward_eval(const struct bn_pass *bn, const float *x, float *y, const float *running_mean,
                     const float *running_var)
{
    for (int c = 0; c < bn->channels; c++) {
        float invstd = (float)(1.0 / sqrt((double)running_var[c] + MODEL_BN_EPS));
        float scale = bn->gamma[c] * invstd;
        scale_shift_row(x + (size_t)c * bn->n, y + (size_t)c * bn->n, bn->n, scale,
                        bn->beta[c] - running_mean[c] * scale, bn->relu);
    }
}

/* The gradient through a normalisation by batch statistics (mean and
 * variance depend on every input of the channel):
 *   dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)),
 * xhat = (x - mean) * invstd; dgamma = sum(dy * xhat), dbeta = sum(dy). */
void bn_backward(const struct bn_pass *bn, const float *x, const float *y, float *dy, float *dx,
                 float *dgamma, float *dbeta)
{
    for (int c = 0; c < bn->channels; c++) {
        size_t off = (size_t)c * bn->n;
        const float *xr = x + off, *yr = y + off;
        float *restrict g = dy + off, *restrict out = dx + off;
        float mean = bn->mean[c], invstd = bn->invstd[c];
        double sum_dy, sum_dy_centered;
        blocked_sums(g, bn->relu ? yr : NULL, xr, mean, bn->n, &sum_dy, &sum_dy_centered);
        dgamma[c] = (float)(sum_dy_centered * invstd);
        dbeta[c] = (float)sum_dy;
        float a = bn->gamma[c] * invstd, mean_dy = (float)(sum_dy / (double)bn->n);
        float k = (float)(sum_dy_centered / (double)bn->n) * invstd * invstd;
        for (size_t j = 0; j < bn->n; j++)
            out[j] = a * (g[j] - mean_dy - (xr[j] - mean) * k);
    }
}

/* Option A: the source's channel that output channel c receives (-1: a
 * zero padding channel), and the subsampling stride (2 when the map
 * halves: x[:, :, ::2, ::2]). */
static int shortcut_channel(const struct model_layer *l, struct residual_source src, int c)
{
    int sc = c - (l->out_c - src.c) / 2;
    return sc >= 0 && sc < src.c ? sc : -1;
}

static int shortcut_stride(const struct model_layer *l, struct residual_source src)
{
    return src.h / l->out_h;
}

void residual_forward(const struct model_layer *l, struct residual_source src, const float *x,
                      const float *skip, float *y, int batch)
{
    int stride = shortcut_stride(l, src), ow = l->out_w;
    size_t plane = (size_t)l->out_h * ow, src_plane = (size_t)src.h * src.w;
    if (stride == 1 && src.c == l->out_c) { /* identity: one flat pass */
        size_t n = (size_t)l->out_c * batch * plane;
        for (size_t i = 0; i < n; i++)
            y[i] = relu_if(x[i] + skip[i], 1);
        return;
    }
    for (int c = 0; c < l->out_c; c++) {
        int sc = shortcut_channel(l, src, c);
        for (int b = 0; b < batch; b++) {
            size_t off = ((size_t)c * batch + b) * plane;
            const float *xr = x + off;
            float *yr = y + off;
            if (sc < 0) {
                for (size_t j = 0; j < plane; j++)
                    yr[j] = relu_if(xr[j], 1);
                continue;
            }
            const float *s = skip + ((size_t)sc * batch + b) * src_plane;
            for (int oy = 0; oy < l->out_h; oy++)
                for (int ox = 0; ox < ow; ox++)
                    yr[oy * ow + ox] =
                        relu_if(xr[oy * ow + ox] + s[(size_t)oy * stride * src.w + ox * stride], 1);
        }
    }
}

void residual_backward(const struct model_layer *l, struct residual_source src, const float *y,
                       float *dy, float *dskip, int batch)
{
    int stride = shortcut_stride(l, src), ow = l->out_w;
    size_t plane = (size_t)l->out_h * ow, src_plane = (size_t)src.h * src.w;
    size_t n = (size_t)l->out_c * batch * plane;
    for (size_t i = 0; i < n; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    if (stride == 1 && src.c == l->out_c) {
        memcpy(dskip, dy, n * sizeof(float));
        return;
    }
    memset(dskip, 0, (size_t)src.c * batch * src_plane * sizeof(float));
    for (int c = 0; c < l->out_c; c++) {
        int sc = shortcut_channel(l, src, c);
        for (int b = 0; sc >= 0 && b < batch; b++) {
            const float *g = dy + ((size_t)c * batch + b) * plane;
            float *d = dskip + ((size_t)sc * batch + b) * src_plane;
            for (int oy = 0; oy < l->out_h; oy++)
                for (int ox = 0; ox < ow; ox++)
                    d[(size_t)oy * stride * src.w + ox * stride] = g[oy * ow + ox];
        }
    }
}

void avgpool_forward(const struct model_layer *l, const float *x, float *y, int batch)
{
    size_t plane = (size_t)l->in_h * l->in_w;
    for (int c = 0; c < l->in_c; c++)
        for (int b = 0; b < batch; b++) {
            const float *p = x + ((size_t)c * batch + b) * plane;
            double sum = 0;
            for (size_t j = 0; j < plane; j++)
                sum += p[j];
            y[(size_t)b * l->in_c + c] = (float)(sum / (double)plane);
        }
}

void avgpool_backward(const struct model_layer *l, const float *dy, float *dx, int batch)
{
    size_t plane = (size_t)l->in_h * l->in_w;
    for (int c = 0; c < l->in_c; c++)
        for (int b = 0; b < batch; b++) {
            float g = dy[(size_t)b * l->in_c + c] / (float)plane;
            float *p = dx + ((size_t)c * batch + b) * plane;
            for (size_t j = 0; j < plane; j++)
                p[j] = g;
        }
}
