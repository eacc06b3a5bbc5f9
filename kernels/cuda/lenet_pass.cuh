/* cuda/lenet_pass.cuh — cnn:lenet's forward and backward passes written once
 * over an executor E, as dense_pass.cuh does for the dense stack (whose
 * passes run lenet's three dense layers here): lenet.cu runs them with
 * cuBLAS and kernels, tests/unit/test_cuda_host.cu with host loops, where
 * they are checked against kernels/cpu/model.c without a GPU.
 *
 * Same semantics and layout as kernels/cpu/model.c: activations between
 * convolution layers are channel-major C x B x H x W; the convolutions are
 * conv_pass.cuh's (im2col + GEMM); 2x2 max pooling sends each
 * gradient to the first input of its window (in the order x00, x01, x10,
 * x11) equal to the max, and applies the ReLU mask of the convolution below
 * (no gradient where the max is 0); the 16x5x5 map enters the first dense
 * layer flattened as c * 25 + y * 5 + x.
 *
 * E provides, besides dense_pass.cuh's and conv_pass.cuh's operations, each
 * returning 0 or -1:
 *   pool_forward(pool, x, batch, y, argmax)     kern_pool_max per output
 *   pool_backward(pool, dy, y, argmax, batch, relu_below, dx)  kern_pool_grad per input
 *   flatten(x, batch, channels, plane, y)       y[t] = x[kern_flatten_source(...)]
 *   unflatten(dy, batch, channels, plane, dx)   dx[kern_flatten_source(...)] = dy[t] */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/conv_pass.cuh"
#include "kernels/cuda/dense_pass.cuh"
#include "kernels/elementwise.h"

/* 2x2 windows, stride 2, odd trailing rows and columns dropped. */
struct kern_pool_shape {
    int channels, in_h, in_w, out_h, out_w;
};

struct kern_lenet_layout {
    struct kern_conv_shape conv[2];
    struct kern_pool_shape pool[2];
    struct kern_dense_layout dense; /* offsets already past the convolutions */
    int inputs, classes, features;  /* features: the flattened map, dense.inputs */
    size_t params;
    size_t col_per_sample;    /* im2col floats per sample, the larger layer's */
    size_t delta_per_sample;  /* widest activation per sample */
    size_t pixels_per_sample; /* largest output plane: the bias-gradient ones */
};

/* Buffers of one pass for `capacity` samples (device or host memory as the
 * executor expects). dense.x is the flattened feature map, dense.delta and
 * dense.ones are delta and ones, dense.labels / row_loss / row_hit are this
 * struct's. */
struct kern_lenet_buffers {
    float *x; /* capacity x 784, which is 1 x capacity x 28 x 28 */
    float *conv[2], *pool[2];
    uint8_t *argmax[2]; /* per pooled output: 0..3, the window's max */
    float *col;         /* capacity x col_per_sample */
    float *dinput;      /* capacity x delta_per_sample: d loss / d a layer range's input */
    struct kern_dense_buffers dense;
};

static inline void kern_pool_shape_build(struct kern_pool_shape *p, const struct kern_conv_shape &c)
{
    p->channels = c.out_c;
    p->in_h = c.out_h;
    p->in_w = c.out_w;
    p->out_h = c.out_h / 2;
    p->out_w = c.out_w / 2;
}

static inline size_t kern_size_max(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* kernels/model.h's cnn:lenet: input 1x28x28; conv 5x5x6 pad 2, ReLU,
 * maxpool 2; conv 5x5x16, ReLU, maxpool 2; dense 400-120-84-10. */
static inline void kern_lenet_layout_build(struct kern_lenet_layout *l)
{
    static const int dense[] = {400, 120, 84, 10};
    size_t params = 0;
    kern_conv_shape_build(&l->conv[0], 1, 28, 28, 6, 5, 2, &params);
    kern_pool_shape_build(&l->pool[0], l->conv[0]);
    kern_conv_shape_build(&l->conv[1], 6, l->pool[0].out_h, l->pool[0].out_w, 16, 5, 0, &params);
    kern_pool_shape_build(&l->pool[1], l->conv[1]);
    kern_dense_layout_build(dense, 4, &l->dense);
    for (int i = 0; i < l->dense.count; i++) {
        l->dense.weight[i] += params;
        l->dense.bias[i] += params;
    }
    l->dense.params += params;
    l->params = l->dense.params;
    l->inputs = 28 * 28;
    l->classes = l->dense.classes;
    l->features = l->dense.inputs; /* 16 x 5 x 5 */
    l->col_per_sample = 0;
    l->delta_per_sample = (size_t)l->dense.widest;
    l->pixels_per_sample = 0;
    for (int i = 0; i < 2; i++) {
        const struct kern_conv_shape &c = l->conv[i];
        l->col_per_sample =
            kern_size_max(l->col_per_sample, kern_conv_patch(c) * kern_conv_plane(c));
        l->delta_per_sample =
            kern_size_max(l->delta_per_sample, (size_t)c.out_c * kern_conv_plane(c));
        l->delta_per_sample = kern_size_max(l->delta_per_sample, (size_t)c.in_c * c.in_h * c.in_w);
        l->pixels_per_sample = kern_size_max(l->pixels_per_sample, kern_conv_plane(c));
    }
}

/* ---- element functions (one GPU thread each) ---- */

/* Output o of the pooling over C x batch planes: y[o] and which of the
 * window's inputs (0: x00, 1: x01, 2: x10, 3: x11) is the first equal to
 * it, model.c's pool_forward and the choice its pool_backward makes. */
KERN_HD void kern_pool_max(const struct kern_pool_shape &s, const float *x, size_t o, float *y,
                           uint8_t *argmax)
{
    size_t out_plane = (size_t)s.out_h * s.out_w, p = o / out_plane, q = o % out_plane;
    int w = s.in_w;
    const float *r0 = x + p * s.in_h * w + (q / s.out_w) * 2 * w + (q % s.out_w) * 2, *r1 = r0 + w;
    float a = r0[0] > r0[1] ? r0[0] : r0[1];
    float b = r1[0] > r1[1] ? r1[0] : r1[1];
    float m = a > b ? a : b;
    y[o] = m;
    argmax[o] = r0[0] == m ? 0 : r0[1] == m ? 1 : r1[0] == m ? 2 : 3;
}

/* Input t's gradient: its window's, when t is the window's argmax, masked
 * by the ReLU below when relu_below (model.c's pool_backward arithmetic). */
KERN_HD float kern_pool_grad(const struct kern_pool_shape &s, const float *dy, const float *y,
                             const uint8_t *argmax, int relu_below, size_t t)
{
    size_t image = (size_t)s.in_h * s.in_w, p = t / image, q = t % image;
    int iy = (int)(q / s.in_w), ix = (int)(q % s.in_w);
    int oy = iy / 2, ox = ix / 2;
    if (oy >= s.out_h || ox >= s.out_w) return 0.0f; /* odd edge: in no window */
    size_t o = p * s.out_h * s.out_w + (size_t)oy * s.out_w + ox;
    float m = y[o], g = dy[o] * (float)(!relu_below | (m > 0.0f));
    return g * (float)(argmax[o] == (iy & 1) * 2 + (ix & 1));
}

/* Element t of the batch x (channels * plane) rows comes from this element
 * of the channels x batch x plane map. */
KERN_HD size_t kern_flatten_source(int batch, int channels, size_t plane, size_t t)
{
    size_t row = (size_t)channels * plane, b = t / row, f = t % row;
    return (f / plane * batch + b) * plane + f % plane;
}

/* ---- layers: the rows of kernels/model_spec.c's cnn:lenet table ----
 * 0 conv, 1 pool, 2 conv, 3 pool, 4 flatten, 5..7 the dense stack's
 * layers 0..2. A layer range (kernels/model.h "layer ranges") runs rows
 * first..last; its input is uploaded into kern_lenet_input(b, first), where
 * the layer below would have left it, and its output is read from
 * kern_lenet_output(b, last). */

#define KERN_LENET_LAYERS 8
#define KERN_LENET_FLATTEN 4 /* the row before the dense stack */

static inline float *kern_lenet_output(const struct kern_lenet_buffers &b, int i)
{
    switch (i) {
    case 0:
        return b.conv[0];
    case 1:
        return b.pool[0];
    case 2:
        return b.conv[1];
    case 3:
        return b.pool[1];
    case KERN_LENET_FLATTEN:
        return b.dense.x;
    default:
        return b.dense.act[i - KERN_LENET_FLATTEN - 1];
    }
}

static inline float *kern_lenet_input(const struct kern_lenet_buffers &b, int i)
{
    return i ? kern_lenet_output(b, i - 1) : b.x;
}

/* Floats per sample of row i's output (i = -1: the model's input). */
static inline size_t kern_lenet_width(const struct kern_lenet_layout &l, int i)
{
    if (i < 0) return (size_t)l.inputs;
    if (i == 0 || i == 2) return (size_t)l.conv[i / 2].out_c * kern_conv_plane(l.conv[i / 2]);
    if (i == 1 || i == 3)
        return (size_t)l.pool[i / 2].channels * l.pool[i / 2].out_h * l.pool[i / 2].out_w;
    if (i == KERN_LENET_FLATTEN) return (size_t)l.features;
    return (size_t)l.dense.out[i - KERN_LENET_FLATTEN - 1];
}

template <class E>
int kern_lenet_layer_forward(E &e, const struct kern_lenet_layout &l,
                             const struct kern_lenet_buffers &b, const float *params, int i,
                             int batch)
{
    const float *in = kern_lenet_input(b, i);
    const struct kern_pool_shape &top = l.pool[1];
    if (i == 0 || i == 2)
        return kern_conv_forward(e, l.conv[i / 2], params, in, b.col, b.conv[i / 2], batch);
    if (i == 1 || i == 3)
        return e.pool_forward(l.pool[i / 2], in, batch, b.pool[i / 2], b.argmax[i / 2]);
    if (i == KERN_LENET_FLATTEN)
        return e.flatten(in, batch, top.channels, (size_t)top.out_h * top.out_w, b.dense.x);
    int k = i - KERN_LENET_FLATTEN - 1;
    return kern_dense_forward_range(e, l.dense, b.dense, params, k, k, batch);
}

/* Row i's backward pass: dy (d loss / d its output; may be overwritten) to
 * its parameters' gradient and, when dx is not NULL, d loss / d its input.
 * Both convolutions have a ReLU, which the pooling above masks (model.c's
 * pool_backward with relu_below), so a convolution's dy arrives masked. */
template <class E>
int kern_lenet_layer_backward(E &e, const struct kern_lenet_layout &l,
                              const struct kern_lenet_buffers &b, const float *params, float *grad,
                              int batch, int i, float *dy, float *dx)
{
    const float *in = kern_lenet_input(b, i);
    const struct kern_pool_shape &top = l.pool[1];
    if (i == 0 || i == 2)
        return kern_conv_backward(e, l.conv[i / 2], params, in, dy, b.dense.ones, b.col, grad, dx,
                                  batch);
    if (i == 1 || i == 3)
        return e.pool_backward(l.pool[i / 2], dy, b.pool[i / 2], b.argmax[i / 2], batch, 1, dx);
    if (i == KERN_LENET_FLATTEN)
        return e.unflatten(dy, batch, top.channels, (size_t)top.out_h * top.out_w, dx);
    return kern_dense_layer_backward(e, l.dense, b.dense, params, grad, batch,
                                     i - KERN_LENET_FLATTEN - 1, dy, dx);
}

/* Rows first..last on the input in kern_lenet_input(b, first). */
template <class E>
int kern_lenet_forward_range(E &e, const struct kern_lenet_layout &l,
                             const struct kern_lenet_buffers &b, const float *params, int first,
                             int last, int batch)
{
    for (int i = first; i <= last; i++)
        if (kern_lenet_layer_forward(e, l, b, params, i, batch) < 0) return -1;
    return 0;
}

/* Rows last..first after kern_lenet_forward_range over the same range:
 * expects d loss / d (row last's output) in b.dense.delta[0]; writes the
 * rows' slices of grad, and d loss / d (row first's input) into dinput
 * when it is not NULL (it must not be for a range that starts above row 0:
 * a pooling or flattening row always writes its dx). */
template <class E>
int kern_lenet_backward_range(E &e, const struct kern_lenet_layout &l,
                              const struct kern_lenet_buffers &b, const float *params, float *grad,
                              int batch, int first, int last, float *dinput)
{
    return kern_backward_rows(
        first, last, b.dense.delta[0], b.dense.delta[1], dinput, [&](int i, float *dy, float *dx) {
            return kern_lenet_layer_backward(e, l, b, params, grad, batch, i, dy, dx);
        });
}

/* Fills the activations from b.x; the logits end up in the last dense act. */
template <class E>
int kern_lenet_forward(E &e, const struct kern_lenet_layout &l, const struct kern_lenet_buffers &b,
                       const float *params, int batch)
{
    return kern_lenet_forward_range(e, l, b, params, 0, KERN_LENET_LAYERS - 1, batch);
}

/* Expects d loss / d logits in b.dense.delta[0]; writes the whole gradient. */
template <class E>
int kern_lenet_backward(E &e, const struct kern_lenet_layout &l, const struct kern_lenet_buffers &b,
                        const float *params, float *grad, int batch)
{
    return kern_lenet_backward_range(e, l, b, params, grad, batch, 0, KERN_LENET_LAYERS - 1, NULL);
}

/* Forward, loss per row, and (grad non-NULL) backward. */
template <class E>
int kern_lenet_pass(E &e, const struct kern_lenet_layout &l, const struct kern_lenet_buffers &b,
                    const float *params, int batch, float *grad)
{
    const struct kern_dense_buffers &d = b.dense;
    if (kern_lenet_forward(e, l, b, params, batch) < 0 ||
        e.softmax(d.act[l.dense.count - 1], d.labels, batch, l.classes, grad ? d.delta[0] : NULL,
                  d.row_loss, d.row_hit) < 0)
        return -1;
    return grad ? kern_lenet_backward(e, l, b, params, grad, batch) : 0;
}
