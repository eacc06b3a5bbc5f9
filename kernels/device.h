/* device.h — where a peer's kernels run: the CPU (OpenBLAS) or a CUDA GPU
 * (cuBLAS plus the .cu kernels of kernels/cuda/), behind one API.
 *
 * A struct kern_ctx is one device opened by one peer. Buffers allocated with
 * kern_alloc live on that device (host memory for cpu, GPU memory for cuda);
 * every kern_* call taking buffer pointers expects buffers of the same
 * context, except where a parameter says "host". Every call is synchronous:
 * when it returns, the work is done and its errors are reported, so a peer
 * can time a command and reuse host inputs at once.
 *
 * The CUDA side is a module (libhiernet_cuda.so) that kernels/device_probe.c loads with
 * dlopen on the first CUDA call, not a link-time dependency: loading cuBLAS
 * costs ~100 ms per process (measured), which a thousand CPU-only peers
 * should not pay, and a binary built with CUDA still runs where the CUDA
 * libraries are absent. The module is looked up at $HIERNET_CUDA_MODULE,
 * beside the running executable, then at its path in the build tree.
 *
 * Models on cuda: every architecture of kernels/model.h (logreg, mlp,
 * cnn:lenet) with the same flat parameter layout and the same arithmetic
 * (convolutions as im2col + SGEMM, pooling ties as on the CPU), so
 * results agree to float rounding. Optimizers: all of kernels/optim.h,
 * same rules.
 *
 * Not thread-safe per context (the peer's compute worker owns it); functions
 * return 0 or -1 with a message in err, unless documented otherwise. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/model.h"
#include "kernels/optim.h"

enum kern_device { KERN_DEVICE_CPU, KERN_DEVICE_CUDA };

/* "cpu" or "cuda"; the error quotes anything else. */
int kern_device_parse(const char *name, enum kern_device *out, char *err, size_t errlen);
const char *kern_device_name(enum kern_device device);

/* 1 when this build contains the device's kernels (cpu always). */
int kern_device_built(enum kern_device device);

/* 1 when the device can run here, else 0 with the reason in why:
 * "this build has no CUDA support", "cannot load the CUDA kernels: ...", or
 * "no CUDA device: <CUDA runtime error>". Cheap enough for a start-up check. */
int kern_device_available(enum kern_device device, char *why, size_t whylen);

/* 1 when `spec` (a kernels/model.h architecture) can run on the device, else
 * 0 with the reason (today only a spec model_create refuses). Needs no
 * device present, so a scenario can be rejected before anything starts. */
int kern_device_supports_model(enum kern_device device, const char *spec, char *why, size_t whylen);

/* ---- contexts and memory ---- */

struct kern_ctx;

/* Opens the device (cuda: GPU 0 as CUDA_VISIBLE_DEVICES orders them, with a
 * stream and a cuBLAS handle). Fails with kern_device_available's reason. */
int kern_ctx_create(enum kern_device device, struct kern_ctx **out, char *err, size_t errlen);
void kern_ctx_destroy(struct kern_ctx *ctx);
enum kern_device kern_ctx_device(const struct kern_ctx *ctx);
/* "cpu", or e.g. "cuda:0 NVIDIA H100 80GB HBM3 (sm_90)". */
const char *kern_ctx_describe(const struct kern_ctx *ctx);

/* n floats on the device, uninitialised (n may be 0). kern_free(NULL) is a no-op. */
int kern_alloc(struct kern_ctx *ctx, size_t n, float **out, char *err, size_t errlen);
void kern_free(struct kern_ctx *ctx, float *buffer);
/* host -> device, device -> host, device -> device; n floats, no overlap. */
int kern_upload(struct kern_ctx *ctx, float *dst, const float *host_src, size_t n, char *err,
                size_t errlen);
int kern_download(struct kern_ctx *ctx, float *host_dst, const float *src, size_t n, char *err,
                  size_t errlen);
int kern_copy(struct kern_ctx *ctx, float *dst, const float *src, size_t n, char *err,
              size_t errlen);

/* ---- vector operations (kernels/vec.h semantics, on device buffers) ---- */

int kern_fill(struct kern_ctx *ctx, size_t n, float value, float *x, char *err, size_t errlen);
/* y += alpha * x; x == y is allowed. */
int kern_axpy(struct kern_ctx *ctx, size_t n, float alpha, const float *x, float *y, char *err,
              size_t errlen);
int kern_scale(struct kern_ctx *ctx, size_t n, float alpha, float *x, char *err, size_t errlen);
/* out = inputs[0] + ... + inputs[k-1]; out may be inputs[0] but no other. */
int kern_sum(struct kern_ctx *ctx, size_t n, float *out, const float *const *inputs, size_t k,
             char *err, size_t errlen);
/* Accumulated in double on every device. */
int kern_dot(struct kern_ctx *ctx, size_t n, const float *x, const float *y, double *out, char *err,
             size_t errlen);
int kern_norm(struct kern_ctx *ctx, size_t n, const float *x, double *out, char *err,
              size_t errlen);

/* Row-major C = alpha * op(A) op(B) + beta * C, C m x n, inner size k, as
 * cblas_sgemm(CblasRowMajor, ...); trans_a / trans_b non-zero transpose. */
int kern_sgemm(struct kern_ctx *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
               const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
               char *err, size_t errlen);

/* ---- models (kernels/model.h on a device) ---- */

struct kern_model;

int kern_model_create(struct kern_ctx *ctx, const char *spec, int max_batch,
                      struct kern_model **out, char *err, size_t errlen);
void kern_model_destroy(struct kern_model *m);
size_t kern_model_param_count(const struct kern_model *m);
/* model_trainable_count: what an optimizer steps on (kernels/model.h). */
size_t kern_model_trainable_count(const struct kern_model *m);
/* The context it was created in (where its buffers belong). */
struct kern_ctx *kern_model_ctx(const struct kern_model *m);
/* The architecture it was created from, e.g. "mlp:784-128-10". */
const char *kern_model_spec(const struct kern_model *m);
/* The layer table and parameter layout (kernels/model_spec.h). */
const struct model_spec *kern_model_layout(const struct kern_model *m);
int kern_model_input_size(const struct kern_model *m);
int kern_model_classes(const struct kern_model *m);

/* model_init into a device buffer of kern_model_param_count() floats. */
int kern_model_init(struct kern_model *m, float *params, const char *method, uint64_t seed,
                    char *err, size_t errlen);
/* model_grad: params and grad are device buffers; x (batch x input size)
 * and labels are host memory, copied to the device by the call. */
int kern_model_grad(struct kern_model *m, const float *params, const float *host_x,
                    const int32_t *host_labels, int batch, float *grad, float *loss, char *err,
                    size_t errlen);
/* model_eval over n host samples, adding to *score. */
int kern_model_eval(struct kern_model *m, const float *params, const float *host_x,
                    const int32_t *host_labels, size_t n, struct model_score *score, char *err,
                    size_t errlen);

/* Layer ranges (kernels/model.h "layer ranges": model_forward_range,
 * model_backward_range, model_loss) on the device: params and grad are
 * device buffers; the activations and their gradients (host_x, host_y,
 * host_dy, host_dx) host memory, as the peer ships them. The model keeps
 * what the backward pass needs on the device, so a pipeline holds one
 * kern_model per micro-batch in flight. host_dx is required when first > 0;
 * grad gets the range's slices only. cuda runs mlp, logreg, cnn:lenet and
 * cnn:resnet20 ranges with the kernels of its model_grad. host_x of the
 * backward is the forward's input again: the cpu reads it
 * (model_backward_range), cuda uses the copy it kept. */
int kern_model_forward_range(struct kern_model *m, const float *params, int first, int last,
                             const float *host_x, int batch, float *host_y, char *err,
                             size_t errlen);
int kern_model_backward_range(struct kern_model *m, const float *params, int first, int last,
                              const float *host_x, const float *host_dy, int batch, float *host_dx,
                              float *grad, char *err, size_t errlen);
/* model_loss on host logits (the host computes it on every device: batch x
 * classes values, less than a copy of them would cost). */
int kern_model_loss(const struct kern_model *m, const float *host_logits,
                    const int32_t *host_labels, int batch, float *host_dlogits, float *loss,
                    char *err, size_t errlen);

/* ---- optimizers (kernels/optim.h on a device; state lives there) ---- */

struct kern_optim;

int kern_optim_create(struct kern_ctx *ctx, const struct optim_config *cfg, size_t n,
                      struct kern_optim **out, char *err, size_t errlen);
void kern_optim_destroy(struct kern_optim *o);
/* As optim_configure: a new method resets the state. */
int kern_optim_configure(struct kern_optim *o, const struct optim_config *cfg, char *err,
                         size_t errlen);
const struct optim_config *kern_optim_config(const struct kern_optim *o);
int kern_optim_step(struct kern_optim *o, float *params, const float *grad, size_t n, char *err,
                    size_t errlen);
int kern_optim_reset(struct kern_optim *o, char *err, size_t errlen);
long kern_optim_steps(const struct kern_optim *o);
