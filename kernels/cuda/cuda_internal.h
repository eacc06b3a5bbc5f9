/* cuda/cuda_internal.h — what the module's .cu files share: the context
 * (one GPU's stream, cuBLAS handle and reduction scratch), error helpers,
 * launch geometry, and the functions context.cu puts in the ops table. */
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/conv_pass.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/kern_error.h"

/* Blocks of the grid-stride kernels and of the first reduction pass. */
#define KERN_CUDA_THREADS 256
#define KERN_CUDA_MAX_BLOCKS 4096
#define KERN_CUDA_REDUCE_BLOCKS 512

struct kern_cuda_ctx {
    int ordinal;
    cudaStream_t stream;
    cublasHandle_t blas;
    double *reduce; /* device: KERN_CUDA_REDUCE_BLOCKS partial sums, then the total */
};

/* Write "cuda <what>: <message> (<name>)" / "cublas <what>: <message>" and
 * return -1. Other messages: kern_fail (kernels/kern_error.h). */
int kern_cuda_fail(char *err, size_t errlen, const char *what, cudaError_t e);
int kern_cuda_blas_fail(char *err, size_t errlen, const char *what, cublasStatus_t s);

/* Makes the context's GPU current for the calling thread (the peer may open
 * a context on one thread and compute on another). */
int kern_cuda_enter(struct kern_cuda_ctx *c, char *err, size_t errlen);
/* Checks the last launch and waits for the stream: the call is complete,
 * and an asynchronous fault is reported against `what`. */
int kern_cuda_finish(struct kern_cuda_ctx *c, const char *what, char *err, size_t errlen);
/* Reports a failed launch (bad configuration, no image for this GPU). */
int kern_cuda_launched(const char *what, char *err, size_t errlen);

static inline unsigned kern_cuda_blocks(size_t n)
{
    size_t blocks = (n + KERN_CUDA_THREADS - 1) / KERN_CUDA_THREADS;
    return blocks > KERN_CUDA_MAX_BLOCKS ? KERN_CUDA_MAX_BLOCKS : blocks ? (unsigned)blocks : 1u;
}

/* vec.cu */
int kern_cuda_fill(struct kern_cuda_ctx *c, size_t n, float value, float *x, char *err,
                   size_t errlen);
int kern_cuda_axpy(struct kern_cuda_ctx *c, size_t n, float alpha, const float *x, float *y,
                   char *err, size_t errlen);
int kern_cuda_scale(struct kern_cuda_ctx *c, size_t n, float alpha, float *x, char *err,
                    size_t errlen);
int kern_cuda_dot(struct kern_cuda_ctx *c, size_t n, const float *x, const float *y, double *out,
                  char *err, size_t errlen);

/* 256-byte aligned slices of one allocation, advancing *used; base NULL
 * only measures (a workspace is laid out twice: to size it, then to use it). */
static inline void *kern_cuda_slice(char *base, size_t *used, size_t bytes)
{
    void *p = base ? base + *used : NULL;
    *used += (bytes + 255) & ~(size_t)255;
    return p;
}

/* dense.cu: the executor of dense_pass.cuh on this GPU (cuBLAS and the
 * elementwise kernels), which lenet.cu extends with its own kernels. */
struct kern_cuda_exec {
    struct kern_cuda_ctx *c;
    char *err;
    size_t errlen;

    kern_cuda_exec(struct kern_cuda_ctx *ctx, char *e, size_t elen) : c(ctx), err(e), errlen(elen)
    {
    }
    int gemm_colmajor(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *cm, int ldc);
    int gemv_colmajor(int ta, int m, int n, float alpha, const float *a, int lda, const float *x,
                      float beta, float *y);
    int bias_relu(float *y, int rows, int cols, const float *b, int relu);
    int relu_mask(float *dy, const float *y, size_t n);
    int softmax(const float *z, const int32_t *labels, int batch, int classes, float *d,
                double *row_loss, int *row_hit);
};

/* lenet.cu: the executor of conv_pass.cuh's operations (im2col, col2im,
 * per-channel bias), which lenet.cu and resnet.cu extend with their own. */
struct kern_cuda_conv_exec : kern_cuda_exec {
    kern_cuda_conv_exec(struct kern_cuda_ctx *ctx, char *e, size_t elen)
        : kern_cuda_exec(ctx, e, elen)
    {
    }
    int im2col(const struct kern_conv_shape &s, const float *in, int batch, float *col);
    int col2im(const struct kern_conv_shape &s, const float *col, int batch, float *dx);
    int bias_relu_planes(float *y, int channels, size_t plane, const float *b, int relu);
};

/* A model's workspace: one device block, carved into the model's buffers by
 * its layout function, and host staging for the per-row losses and hits
 * read back after a pass. It grows to the largest batch seen, never
 * shrinks. */
struct kern_cuda_workspace {
    void *block;
    double *host_loss;
    int *host_hit;
    int capacity; /* rows */
};
void kern_cuda_workspace_release(const struct kern_cuda_ctx *c, struct kern_cuda_workspace *w);
/* Replaces the workspace with one of `bytes` device bytes and staging for
 * `rows` rows (capacity is left for the caller to set once its buffers are
 * ready); what names the model in errors. On failure nothing is held. */
int kern_cuda_workspace_alloc(const struct kern_cuda_ctx *c, struct kern_cuda_workspace *w,
                              size_t bytes, int rows, const char *what, char *err, size_t errlen);

/* Copies a pass's per-row losses and hits (device) to the host staging
 * arrays, waits for the stream, and sums them. */
int kern_cuda_collect_rows(struct kern_cuda_ctx *c, const double *row_loss, const int *row_hit,
                           double *host_loss, int *host_hit, int batch, double *loss_sum,
                           size_t *correct, char *err, size_t errlen);

/* Layer ranges (kernels/model.h "layer ranges") on a model's workspace:
 * 0, or -1 when rows first..last are not 0-based rows of a table of
 * `layers`, or batch is outside 1..capacity (a backward needs its
 * forward's activations: capacity is the workspace's, 0 before any). */
int kern_cuda_range_check(const char *model, int first, int last, int layers, int batch,
                          int capacity, char *err, size_t errlen);
/* bytes between host and device memory on the context's stream (the
 * range passes' input, output and gradients); what names it in errors. */
int kern_cuda_copy_async(struct kern_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                         cudaMemcpyKind kind, const char *what, char *err, size_t errlen);
/* After a failed launch: lets queued work end before the caller reuses its
 * buffers, clears the error, returns -1. */
int kern_cuda_abandon(struct kern_cuda_ctx *c);

/* dense.cu */
int kern_cuda_sgemm(struct kern_cuda_ctx *c, int trans_a, int trans_b, int m, int n, int k,
                    float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                    float *cm, int ldc, char *err, size_t errlen);
int kern_cuda_dense_create(struct kern_cuda_ctx *c, const struct kern_cuda_dense_spec *spec,
                           struct kern_cuda_dense **out, char *err, size_t errlen);
void kern_cuda_dense_destroy(struct kern_cuda_dense *d);
int kern_cuda_dense_reserve(struct kern_cuda_dense *d, int batch, char *err, size_t errlen);
int kern_cuda_dense_run(struct kern_cuda_dense *d, const float *params, const float *host_x,
                        const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                        size_t *correct, char *err, size_t errlen);
int kern_cuda_dense_forward_range(struct kern_cuda_dense *d, const float *params, int first,
                                  int last, const float *host_x, int batch, float *host_y,
                                  char *err, size_t errlen);
int kern_cuda_dense_backward_range(struct kern_cuda_dense *d, const float *params, int first,
                                   int last, const float *host_dy, int batch, float *host_dx,
                                   float *grad, char *err, size_t errlen);

/* lenet.cu */
int kern_cuda_lenet_create(struct kern_cuda_ctx *c, struct kern_cuda_lenet **out, char *err,
                           size_t errlen);
void kern_cuda_lenet_destroy(struct kern_cuda_lenet *n);
int kern_cuda_lenet_reserve(struct kern_cuda_lenet *n, int batch, char *err, size_t errlen);
int kern_cuda_lenet_run(struct kern_cuda_lenet *n, const float *params, const float *host_x,
                        const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                        size_t *correct, char *err, size_t errlen);
int kern_cuda_lenet_forward_range(struct kern_cuda_lenet *n, const float *params, int first,
                                  int last, const float *host_x, int batch, float *host_y,
                                  char *err, size_t errlen);
int kern_cuda_lenet_backward_range(struct kern_cuda_lenet *n, const float *params, int first,
                                   int last, const float *host_dy, int batch, float *host_dx,
                                   float *grad, char *err, size_t errlen);

/* resnet.cu */
int kern_cuda_resnet_create(struct kern_cuda_ctx *c, const struct model_spec *spec,
                            struct kern_cuda_resnet **out, char *err, size_t errlen);
void kern_cuda_resnet_destroy(struct kern_cuda_resnet *n);
int kern_cuda_resnet_reserve(struct kern_cuda_resnet *n, int batch, char *err, size_t errlen);
int kern_cuda_resnet_run(struct kern_cuda_resnet *n, const float *params, const float *host_x,
                         const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                         size_t *correct, char *err, size_t errlen);
int kern_cuda_resnet_forward_range(struct kern_cuda_resnet *n, const float *params, int first,
                                   int last, const float *host_x, int batch, float *host_y,
                                   char *err, size_t errlen);
int kern_cuda_resnet_backward_range(struct kern_cuda_resnet *n, const float *params, int first,
                                    int last, const float *host_dy, int batch, float *host_dx,
                                    float *grad, char *err, size_t errlen);

/* optim.cu */
int kern_cuda_optim_step(struct kern_cuda_ctx *c, const struct kern_cuda_optim_step *step,
                         float *params, const float *grad, float *first, float *second, size_t n,
                         char *err, size_t errlen);
