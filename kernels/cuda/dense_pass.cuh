/* cuda/dense_pass.cuh — forward and backward passes of a dense stack
 * (logreg, mlp) written once over an executor E, so the same sequence of
 * GEMMs, leading dimensions and transposes runs on the GPU (dense.cu: cuBLAS
 * and kernels) and on the CPU (tests/unit/test_cuda_host.cu: reference
 * loops with cuBLAS's column-major semantics), where it is checked against
 * kernels/cpu/model.c without a GPU.
 *
 * E provides, each returning 0 or -1 (having recorded its error):
 *   gemm_colmajor(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)  cublasSgemm
 *   gemv_colmajor(ta, m, n, alpha, a, lda, x, beta, y)                   cublasSgemv, incs 1
 *   bias_relu(y, rows, cols, b, relu)    y[r][c] = kern_bias_relu(y[r][c], b[c], relu)
 *   relu_mask(dy, y, n)                  dy[i] = kern_relu_mask(dy[i], y[i])
 *   softmax(z, labels, batch, classes, d, row_loss, row_hit)  kern_softmax_xent_row per row
 *
 * Layout (kernels/model.h): layer i has W[out][in] row-major then b[out];
 * activations are batch x width row-major, as on the CPU. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define KERN_DENSE_MAX_LAYERS 64

struct kern_dense_layout {
    int count; /* layers */
    int in[KERN_DENSE_MAX_LAYERS], out[KERN_DENSE_MAX_LAYERS], relu[KERN_DENSE_MAX_LAYERS];
    size_t weight[KERN_DENSE_MAX_LAYERS], bias[KERN_DENSE_MAX_LAYERS];
    int inputs, classes, widest;
    size_t params;
};

/* The buffers of one pass, `capacity` samples each (device or host memory
 * as the executor expects). */
struct kern_dense_buffers {
    float *x;        /* capacity x inputs */
    int32_t *labels; /* capacity */
    float *act[KERN_DENSE_MAX_LAYERS];
    float *delta[2]; /* capacity x widest, ping-pong activation gradients */
    float *ones;     /* capacity ones: bias gradients as a GEMV */
    double *row_loss;
    int *row_hit;
};

/* sizes: count >= 2 widths; ReLU after every layer but the last. Returns 0,
 * or -1 when there are too many layers. */
static inline int kern_dense_layout_build(const int *sizes, int count, struct kern_dense_layout *l)
{
    if (count < 2 || count - 1 > KERN_DENSE_MAX_LAYERS) return -1;
    l->count = count - 1;
    l->params = 0;
    l->widest = 0;
    for (int i = 0; i + 1 < count; i++) {
        l->in[i] = sizes[i];
        l->out[i] = sizes[i + 1];
        l->relu[i] = i + 2 < count;
        l->weight[i] = l->params;
        l->bias[i] = l->params + (size_t)sizes[i] * sizes[i + 1];
        l->params = l->bias[i] + (size_t)sizes[i + 1];
        l->widest = sizes[i] > l->widest ? sizes[i] : l->widest;
        l->widest = sizes[i + 1] > l->widest ? sizes[i + 1] : l->widest;
    }
    l->inputs = sizes[0];
    l->classes = sizes[count - 1];
    return 0;
}

/* Row-major C = op(A) op(B) (m x n) is column-major C^T = op(B)^T op(A)^T
 * (n x m): swap the operands and the dimensions, keep each transpose flag. */
template <class E>
int kern_gemm_rowmajor(E &e, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                       int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    return e.gemm_colmajor(tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}

/* The buffer that holds layer i's input: the model's input, or the output
 * of the layer below. A layer range's input is uploaded there, so the
 * range's passes read it where the whole model's would be. */
static inline float *kern_dense_input(const struct kern_dense_buffers &b, int i)
{
    return i ? b.act[i - 1] : b.x;
}

/* Layers first..last (0-based) on the input in kern_dense_input(b, first):
 * fills their b.act[]. */
template <class E>
int kern_dense_forward_range(E &e, const struct kern_dense_layout &l,
                             const struct kern_dense_buffers &b, const float *params, int first,
                             int last, int batch)
{
    const float *in = kern_dense_input(b, first);
    for (int i = first; i <= last; i++) {
        /* y[batch][out] = x[batch][in] W[out][in]^T */
        if (kern_gemm_rowmajor(e, 0, 1, batch, l.out[i], l.in[i], 1.0f, in, l.in[i],
                               params + l.weight[i], l.in[i], 0.0f, b.act[i], l.out[i]) < 0 ||
            e.bias_relu(b.act[i], batch, l.out[i], params + l.bias[i], l.relu[i]) < 0)
            return -1;
        in = b.act[i];
    }
    return 0;
}

/* Fills b.act[] from b.x; the logits end up in b.act[count - 1]. */
template <class E>
int kern_dense_forward(E &e, const struct kern_dense_layout &l, const struct kern_dense_buffers &b,
                       const float *params, int batch)
{
    return kern_dense_forward_range(e, l, b, params, 0, l.count - 1, batch);
}

/* Layer i's backward pass: dy (d loss / d its output, ReLU-masked in place)
 * to its slices of grad and, when dx is not NULL, d loss / d its input. */
template <class E>
int kern_dense_layer_backward(E &e, const struct kern_dense_layout &l,
                              const struct kern_dense_buffers &b, const float *params, float *grad,
                              int batch, int i, float *dy, float *dx)
{
    const float *in = kern_dense_input(b, i);
    int nin = l.in[i], nout = l.out[i];
    if (l.relu[i] && e.relu_mask(dy, b.act[i], (size_t)batch * nout) < 0) return -1;
    /* dW[out][in] = dy[batch][out]^T x[batch][in] */
    if (kern_gemm_rowmajor(e, 1, 0, nout, nin, batch, 1.0f, dy, nout, in, nin, 0.0f,
                           grad + l.weight[i], nin) < 0)
        return -1;
    /* db = column sums of dy: row-major batch x out is column-major
     * out x batch, times the ones vector. */
    if (e.gemv_colmajor(0, nout, batch, 1.0f, dy, nout, b.ones, 0.0f, grad + l.bias[i]) < 0)
        return -1;
    /* dx[batch][in] = dy[batch][out] W[out][in] */
    if (dx && kern_gemm_rowmajor(e, 0, 0, batch, nin, nout, 1.0f, dy, nout, params + l.weight[i],
                                 nin, 0.0f, dx, nin) < 0)
        return -1;
    return 0;
}

/* Rows last..first backwards: step(i, dy, dx) takes d loss / d row i's
 * output in dy to d loss / d its input in dx (row first's into dinput);
 * dy and dx swap between the two delta buffers. Dense stacks and lenet
 * alike. */
template <class Step>
int kern_backward_rows(int first, int last, float *dy, float *dx, float *dinput, Step step)
{
    for (int i = last; i >= first; i--) {
        if (step(i, dy, i == first ? dinput : dx) < 0) return -1;
        float *t = dy;
        dy = dx;
        dx = t;
    }
    return 0;
}

/* Layers last..first after kern_dense_forward_range over the same range:
 * expects d loss / d (layer last's output) in b.delta[0]; writes the
 * layers' slices of grad, and d loss / d (layer first's input) into dinput
 * (batch x in[first]) when it is not NULL. */
template <class E>
int kern_dense_backward_range(E &e, const struct kern_dense_layout &l,
                              const struct kern_dense_buffers &b, const float *params, float *grad,
                              int batch, int first, int last, float *dinput)
{
    return kern_backward_rows(
        first, last, b.delta[0], b.delta[1], dinput, [&](int i, float *dy, float *dx) {
            return kern_dense_layer_backward(e, l, b, params, grad, batch, i, dy, dx);
        });
}

/* Expects d loss / d logits in b.delta[0]; writes the whole gradient, and
 * d loss / d b.x into dinput (batch x inputs) when it is not NULL. */
template <class E>
int kern_dense_backward(E &e, const struct kern_dense_layout &l, const struct kern_dense_buffers &b,
                        const float *params, float *grad, int batch, float *dinput = NULL)
{
    return kern_dense_backward_range(e, l, b, params, grad, batch, 0, l.count - 1, dinput);
}

/* Forward, loss per row, and (grad non-NULL) backward. */
template <class E>
int kern_dense_pass(E &e, const struct kern_dense_layout &l, const struct kern_dense_buffers &b,
                    const float *params, int batch, float *grad)
{
    if (kern_dense_forward(e, l, b, params, batch) < 0 ||
        e.softmax(b.act[l.count - 1], b.labels, batch, l.classes, grad ? b.delta[0] : NULL,
                  b.row_loss, b.row_hit) < 0)
        return -1;
    return grad ? kern_dense_backward(e, l, b, params, grad, batch) : 0;
}
