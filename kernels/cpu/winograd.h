/* cpu/winograd.h — 3x3 convolutions of stride 1 and padding 1 by Winograd's
 * minimal filtering F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for
 * Convolutional Neural Networks", CVPR 2016, arXiv:1509.09308): forward,
 * input gradient and weight gradient, each as 16 GEMMs over transformed
 * 4x4 tiles, over channel-major maps (C x B x H x W, cpu/model.c's layout).
 * Plain functions over caller's buffers; owns nothing. */
#pragma once

#include <stddef.h>

/* One convolution: in_c -> out_c channels, h x w maps in and out. The
 * weights are out_c x in_c x 3 x 3 (cpu/model.c's (c, ky, kx) patch order). */
struct wino_conv {
    int in_c, out_c, h, w; /* each >= 1; the functions below also need batch >= 1 */
};

/* Floats of the scratch a pass over `batch` samples needs (filter, filter
 * gradient and one chunk of transformed tiles). */
size_t wino_work_floats(const struct wino_conv *cv, int batch);

/* y (out_c x batch x h x w) = conv(x, weights). */
void wino_forward(const struct wino_conv *cv, const float *weights, const float *x, float *y,
                  int batch, float *work);

/* From dy (d loss / d y): dweights (overwritten) and, unless dx is NULL,
 * dx (d loss / d x, overwritten). x is the forward pass's input. */
void wino_backward(const struct wino_conv *cv, const float *weights, const float *x,
                   const float *dy, float *dweights, float *dx, int batch, float *work);

/* The images per chunk of tiles and the GEMMs each chunk runs, for
 * model_gemm_shapes: 16 of out_c x tiles x in_c forward; backward 16 of
 * out_c x in_c x tiles (weights) and, with dx, 16 of in_c x tiles x out_c. */
int wino_chunk_images(const struct wino_conv *cv, int batch);
int wino_tiles(const struct wino_conv *cv, int images);
