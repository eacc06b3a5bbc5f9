/* cuda/cuda_backend.h — the C interface between kernels/cuda_backend.c and the
 * CUDA module libhiernet_cuda.so (the .cu files of kernels/cuda/).
 *
 * The module exports one symbol, hiernet_cuda_ops(), returning a table of
 * functions; kernels/device_probe.c finds it with dlsym and checks abi and size before
 * using anything, so a stale module from another build is refused rather
 * than called with the wrong layout. All pointers named x, y, params, grad,
 * first, second are device memory; names starting with host_ are host
 * memory. Every function is synchronous and returns 0, or -1 with a message
 * in err. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_CUDA_ABI 4
#define KERN_CUDA_ENTRY "hiernet_cuda_ops"
#define KERN_CUDA_MODULE_NAME "libhiernet_cuda.so"

struct kern_cuda_ctx;    /* one GPU: stream, cuBLAS handle, reduction scratch */
struct kern_cuda_dense;  /* a dense-stack model's device workspace */
struct kern_cuda_lenet;  /* a cnn:lenet model's device workspace */
struct kern_cuda_resnet; /* a cnn:resnet20 model's device workspace */
struct model_spec;       /* kernels/model_spec.h: a parsed layer table */

enum kern_cuda_copy { KERN_CUDA_TO_DEVICE, KERN_CUDA_TO_HOST, KERN_CUDA_ON_DEVICE };

/* Dense stack: sizes[0] inputs, sizes[count - 1] classes, ReLU after every
 * layer but the last; parameters laid out as kernels/model.h says. */
struct kern_cuda_dense_spec {
    int count;
    const int *sizes;
};

/* One optimizer step with its scalars resolved on the host (adam's bias
 * corrections c1 = 1 / (1 - beta1^t), c2 = 1 / (1 - beta2^t) in double). */
struct kern_cuda_optim_step {
    int method; /* enum optim_method */
    float lr, momentum, beta1, beta2, eps, weight_decay;
    float c1, c2;
};

struct kern_cuda_ops {
    int abi;                   /* KERN_CUDA_ABI */
    size_t size;               /* sizeof(struct kern_cuda_ops) */
    const char *architectures; /* CMAKE_CUDA_ARCHITECTURES the module holds */

    /* The runtime's device count; on failure the CUDA error in why. */
    int (*device_count)(int *count, char *why, size_t whylen);
    int (*ctx_create)(int ordinal, struct kern_cuda_ctx **out, char *describe, size_t describelen,
                      char *err, size_t errlen);
    void (*ctx_destroy)(struct kern_cuda_ctx *c);

    int (*alloc)(struct kern_cuda_ctx *c, size_t n, float **out, char *err, size_t errlen);
    void (*free)(struct kern_cuda_ctx *c, float *p);
    int (*copy)(struct kern_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                enum kern_cuda_copy kind, char *err, size_t errlen);

    int (*fill)(struct kern_cuda_ctx *c, size_t n, float value, float *x, char *err, size_t errlen);
    int (*axpy)(struct kern_cuda_ctx *c, size_t n, float alpha, const float *x, float *y, char *err,
                size_t errlen);
    int (*scale)(struct kern_cuda_ctx *c, size_t n, float alpha, float *x, char *err,
                 size_t errlen);
    int (*dot)(struct kern_cuda_ctx *c, size_t n, const float *x, const float *y, double *out,
               char *err, size_t errlen);
    int (*sgemm)(struct kern_cuda_ctx *c, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                 float *cm, int ldc, char *err, size_t errlen);

    int (*dense_create)(struct kern_cuda_ctx *c, const struct kern_cuda_dense_spec *spec,
                        struct kern_cuda_dense **out, char *err, size_t errlen);
    void (*dense_destroy)(struct kern_cuda_dense *d);
    /* Grows the workspace to hold `batch` samples (runs grow it too). */
    int (*dense_reserve)(struct kern_cuda_dense *d, int batch, char *err, size_t errlen);
    /* Mean gradient into grad; *loss_sum gets the batch's summed loss and
     * *correct its hits. grad may be NULL (evaluation: forward pass only). */
    int (*dense_run)(struct kern_cuda_dense *d, const float *params, const float *host_x,
                     const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                     size_t *correct, char *err, size_t errlen);

    /* cnn:lenet (kernels/model.h: layers, flat parameter layout, pooling
     * ties): the same four calls as the dense stack. */
    int (*lenet_create)(struct kern_cuda_ctx *c, struct kern_cuda_lenet **out, char *err,
                        size_t errlen);
    void (*lenet_destroy)(struct kern_cuda_lenet *n);
    int (*lenet_reserve)(struct kern_cuda_lenet *n, int batch, char *err, size_t errlen);
    int (*lenet_run)(struct kern_cuda_lenet *n, const float *params, const float *host_x,
                     const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                     size_t *correct, char *err, size_t errlen);

    /* Layer ranges, kernels/model.h's model_forward_range and
     * model_backward_range: rows first..last (0-based) of the model's layer
     * table (kernels/model_spec.h), activations laid out as on the CPU.
     * forward_range runs them on host_x (batch x the input size of row
     * first, copied to the device) and copies row last's output to host_y,
     * keeping the activations in the model's workspace; backward_range,
     * after it, takes host_dy (d loss / d that output) to grad's slices of
     * those rows (device memory; other slices untouched) and, when first >
     * 0, d loss / d the input into host_dx (which must then not be NULL).
     * A pipeline holds one model per micro-batch in flight. */
    int (*dense_forward_range)(struct kern_cuda_dense *d, const float *params, int first, int last,
                               const float *host_x, int batch, float *host_y, char *err,
                               size_t errlen);
    int (*dense_backward_range)(struct kern_cuda_dense *d, const float *params, int first, int last,
                                const float *host_dy, int batch, float *host_dx, float *grad,
                                char *err, size_t errlen);
    int (*lenet_forward_range)(struct kern_cuda_lenet *n, const float *params, int first, int last,
                               const float *host_x, int batch, float *host_y, char *err,
                               size_t errlen);
    int (*lenet_backward_range)(struct kern_cuda_lenet *n, const float *params, int first, int last,
                                const float *host_dy, int batch, float *host_dx, float *grad,
                                char *err, size_t errlen);

    int (*optim_step)(struct kern_cuda_ctx *c, const struct kern_cuda_optim_step *step,
                      float *params, const float *grad, float *first, float *second, size_t n,
                      char *err, size_t errlen);

    /* cnn:resnet20 (kernels/model.h: layers, flat parameter layout with the
     * batch norms' running statistics in its tail): the model runs the
     * rows of spec's layer table (copied; the caller's may go). The same
     * calls as lenet's; run with grad writes the batch statistics in
     * grad's tail as model_grad does and without grad (evaluation)
     * normalises by the running statistics in params; a backward_range
     * writes its rows' batch statistics too. */
    int (*resnet_create)(struct kern_cuda_ctx *c, const struct model_spec *spec,
                         struct kern_cuda_resnet **out, char *err, size_t errlen);
    void (*resnet_destroy)(struct kern_cuda_resnet *n);
    int (*resnet_reserve)(struct kern_cuda_resnet *n, int batch, char *err, size_t errlen);
    int (*resnet_run)(struct kern_cuda_resnet *n, const float *params, const float *host_x,
                      const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                      size_t *correct, char *err, size_t errlen);
    int (*resnet_forward_range)(struct kern_cuda_resnet *n, const float *params, int first,
                                int last, const float *host_x, int batch, float *host_y, char *err,
                                size_t errlen);
    int (*resnet_backward_range)(struct kern_cuda_resnet *n, const float *params, int first,
                                 int last, const float *host_dy, int batch, float *host_dx,
                                 float *grad, char *err, size_t errlen);
};

typedef const struct kern_cuda_ops *(*kern_cuda_entry_fn)(void);

#ifdef __cplusplus
}
#endif
