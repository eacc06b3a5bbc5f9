/* cpu/resnet_layers.h — the layers cnn:resnet20 adds to cpu/model.c: batch
 * normalisation, the residual add with its option-A shortcut and global
 * average pooling, over channel-major maps (C x B x H x W: every channel
 * one contiguous row of batch x H x W values). Plain loops over caller's
 * buffers; owns nothing. */
#pragma once

#include <stddef.h>

#include "kernels/model_spec.h"

/* One batch-norm layer's view of a pass: `n` values per channel (batch x
 * H x W), gamma and beta from the parameters. mean / invstd hold the
 * per-channel batch statistics a training forward pass computes and its
 * backward pass reuses. */
struct bn_pass {
    int channels;
    size_t n;
    const float *gamma, *beta;
    float *mean, *invstd;
    int relu;
};

/* Training mode: normalises with the batch's own mean and biased variance
 * (as PyTorch); writes them into bn->mean and *var (var may be NULL). */
void bn_forward_train(const struct bn_pass *bn, const float *x, float *y, float *var);
/* Evaluation mode: normalises with the running statistics. */
void bn_forward_eval(const struct bn_pass *bn, const float *x, float *y, const float *running_mean,
                     const float *running_var);
/* dy (masked in place by the ReLU when bn->relu, y the output) to dx, and
 * the parameter gradients dgamma, dbeta. x is the input of the forward pass. */
void bn_backward(const struct bn_pass *bn, const float *x, const float *y, float *dy, float *dx,
                 float *dgamma, float *dbeta);

/* The shape of the map a residual layer adds (its skip_from's output). */
struct residual_source {
    int c, h, w;
};

/* y = ReLU(x + shortcut(skip)), x and y of l's shape; y may be x. */
void residual_forward(const struct model_layer *l, struct residual_source src, const float *x,
                      const float *skip, float *y, int batch);
/* dy masked in place by the ReLU (y the output); dskip = the shortcut's
 * adjoint of dy (the skipped pixels and padding channels get no gradient). */
void residual_backward(const struct model_layer *l, struct residual_source src, const float *y,
                       float *dy, float *dskip, int batch);

/* C x B x HW maps to B x C rows of their means, and back (dx = dy / HW). */
void avgpool_forward(const struct model_layer *l, const float *x, float *y, int batch);
void avgpool_backward(const struct model_layer *l, const float *dy, float *dx, int batch);
