/* elementwise.h — the per-element and per-row arithmetic of the models and
 * optimizers, written once for both devices: kernels/cpu/ (model.c,
 * optim.c) calls these functions in its loops, and the CUDA kernels
 * (kernels/cuda/dense.cu, optim.cu, lenet_pass.cuh) call them per thread as
 * __host__ __device__ functions. So the two devices compute the same
 * expressions, and results agree to rounding (nvcc may contract a
 * multiply-add into an FMA). The fake CUDA module of the unit tests and
 * tests/unit/test_cuda_host.cu run them on the CPU too. */
#pragma once

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define KERN_HD __host__ __device__ inline
#else
#define KERN_HD static inline
#endif

/* y = x + b, then ReLU when asked. */
KERN_HD float kern_bias_relu(float x, float bias, int relu)
{
    float v = x + bias;
    return relu && !(v > 0.0f) ? 0.0f : v;
}

/* The ReLU gradient: zero where the (post-ReLU) output was not positive. */
KERN_HD float kern_relu_mask(float dy, float y)
{
    return y > 0.0f ? dy : 0.0f;
}

/* Softmax cross-entropy of one row of logits z: writes the row's loss and
 * whether its argmax is the label; when d is non-NULL, the row of the
 * gradient of the batch mean, (softmax - onehot) / batch. Double inside, as
 * the CPU path. */
KERN_HD void kern_softmax_xent_row(const float *z, int32_t label, int classes, int batch, float *d,
                                   double *loss, int *hit)
{
    int best = 0;
    for (int c = 1; c < classes; c++)
        best = z[c] > z[best] ? c : best;
    double max = z[best], sum = 0;
    for (int c = 0; c < classes; c++)
        sum += exp((double)z[c] - max);
    *loss = log(sum) - ((double)z[label] - max);
    *hit = best == label;
    if (!d) return;
    for (int c = 0; c < classes; c++)
        d[c] = (float)(exp((double)z[c] - max) / sum / batch);
    d[label] -= 1.0f / (float)batch;
}

/* sgd: p -= lr * (g + wd * p) */
KERN_HD void kern_sgd(float *p, float g, float lr, float wd)
{
    *p -= lr * (g + wd * *p);
}

/* momentum / nesterov: v = mu v + g'; p -= lr * (nesterov ? g' + mu v : v) */
KERN_HD void kern_momentum(float *p, float g, float *v, float lr, float mu, float wd, int nesterov)
{
    float gi = g + wd * *p;
    *v = mu * *v + gi;
    *p -= lr * (nesterov ? gi + mu * *v : *v);
}

/* adam with bias corrections c1 = 1 / (1 - b1^t), c2 = 1 / (1 - b2^t). */
KERN_HD void kern_adam(float *p, float g, float *m, float *s, float lr, float b1, float b2,
                       float eps, float wd, float c1, float c2)
{
    float gi = g + wd * *p;
    *m = b1 * *m + (1.0f - b1) * gi;
    *s = b2 * *s + (1.0f - b2) * gi * gi;
    *p -= lr * (*m * c1) / (sqrtf(*s * c2) + eps);
}
