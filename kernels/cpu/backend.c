/* cpu/backend.c — the cpu device's table (kernels/backend.h): buffers in
 * host memory, kernels/cpu/ vec, model and optim over OpenBLAS. Every
 * architecture of model_spec.h runs here: the model passes are
 * kernels/cpu/model.c's own.
 *
 * Owns nothing beyond what the calls allocate: kern_alloc's buffers (freed
 * by free), and each kern_optim's struct optim. */
#include "kernels/backend.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_error.h"
#include "kernels/vec.h"

static int cpu_ctx_open(struct kern_ctx *ctx, char *err, size_t errlen)
{
    strcpy(ctx->describe, "cpu");
    return 0;
}

static void cpu_ctx_close(struct kern_ctx *ctx) {}

static int cpu_alloc(struct kern_ctx *ctx, size_t n, float **out, char *err, size_t errlen)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
        return kern_fail(err, errlen, "cpu: cannot allocate %zu floats", n);
    *out = p;
    return 0;
}

static void cpu_free(struct kern_ctx *ctx, float *buffer)
{
    free(buffer);
}

static int cpu_copy(struct kern_ctx *ctx, float *dst, const float *src, size_t n,
                    enum kern_copy_kind kind, char *err, size_t errlen)
{
    if (n) memcpy(dst, src, n * sizeof(float));
    return 0;
}

/* ---- vector operations ---- */

static int cpu_fill(struct kern_ctx *ctx, size_t n, float value, float *x, char *err, size_t errlen)
{
    vec_fill(n, value, x);
    return 0;
}

static int cpu_axpy(struct kern_ctx *ctx, size_t n, float alpha, const float *x, float *y,
                    char *err, size_t errlen)
{
    vec_axpy(n, alpha, x, y);
    return 0;
}

static int cpu_scale(struct kern_ctx *ctx, size_t n, float alpha, float *x, char *err,
                     size_t errlen)
{
    vec_scale(n, alpha, x);
    return 0;
}

static int cpu_sum(struct kern_ctx *ctx, size_t n, float *out, const float *const *inputs, size_t k,
                   char *err, size_t errlen)
{
    vec_sum(n, out, inputs, k);
    return 0;
}

static int cpu_dot(struct kern_ctx *ctx, size_t n, const float *x, const float *y, double *out,
                   char *err, size_t errlen)
{
    *out = vec_dot(n, x, y);
    return 0;
}

static int cpu_norm(struct kern_ctx *ctx, size_t n, const float *x, double *out, char *err,
                    size_t errlen)
{
    *out = vec_norm(n, x);
    return 0;
}

static int cpu_sgemm(struct kern_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                     float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                     float *c, int ldc, char *err, size_t errlen)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return 0;
}

/* ---- models: the host model does the work ---- */

static int cpu_model_open(struct kern_model *m, int max_batch, char *err, size_t errlen)
{
    return max_batch > 0 ? model_reserve(m->host, max_batch, err, errlen) : 0;
}

static void cpu_model_close(struct kern_model *m) {}

static int cpu_model_grad(struct kern_model *m, const float *params, const float *host_x,
                          const int32_t *host_labels, int batch, float *grad, float *loss,
                          char *err, size_t errlen)
{
    return model_grad(m->host, params, host_x, host_labels, batch, grad, loss, err, errlen);
}

static int cpu_model_eval(struct kern_model *m, const float *params, const float *host_x,
                          const int32_t *host_labels, size_t n, struct model_score *score,
                          char *err, size_t errlen)
{
    return model_eval(m->host, params, host_x, host_labels, n, score, err, errlen);
}

static int cpu_model_forward_range(struct kern_model *m, const float *params, int first, int last,
                                   const float *host_x, int batch, float *host_y, char *err,
                                   size_t errlen)
{
    return model_forward_range(m->host, params, first, last, host_x, batch, host_y, err, errlen);
}

static int cpu_model_backward_range(struct kern_model *m, const float *params, int first, int last,
                                    const float *host_x, const float *host_dy, int batch,
                                    float *host_dx, float *grad, char *err, size_t errlen)
{
    return model_backward_range(m->host, params, first, last, host_x, host_dy, batch, host_dx, grad,
                                err, errlen);
}

/* ---- optimizers: kernels/cpu/optim.c ---- */

static int cpu_optim_open(struct kern_optim *o, char *err, size_t errlen)
{
    struct optim *impl;
    if (optim_create(&o->cfg, o->n, &impl, err, errlen) < 0) return -1;
    o->impl = impl;
    return 0;
}

static void cpu_optim_close(struct kern_optim *o)
{
    optim_destroy(o->impl);
}

static int cpu_optim_configure(struct kern_optim *o, const struct optim_config *cfg, char *err,
                               size_t errlen)
{
    return optim_configure(o->impl, cfg, err, errlen);
}

static int cpu_optim_step(struct kern_optim *o, float *params, const float *grad, size_t n,
                          char *err, size_t errlen)
{
    return optim_step(o->impl, params, grad, n, err, errlen);
}

static int cpu_optim_reset(struct kern_optim *o, char *err, size_t errlen)
{
    optim_reset(o->impl);
    return 0;
}

static long cpu_optim_steps(const struct kern_optim *o)
{
    return optim_steps(o->impl);
}

const struct kern_backend kern_cpu_backend = {
    .device = KERN_DEVICE_CPU,
    .host_memory = 1,
    .model_archs = MODEL_ARCH_ALL,
    .ctx_open = cpu_ctx_open,
    .ctx_close = cpu_ctx_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .sum = cpu_sum,
    .dot = cpu_dot,
    .norm = cpu_norm,
    .sgemm = cpu_sgemm,
    .model_open = cpu_model_open,
    .model_close = cpu_model_close,
    .model_grad = cpu_model_grad,
    .model_eval = cpu_model_eval,
    .model_forward_range = cpu_model_forward_range,
    .model_backward_range = cpu_model_backward_range,
    .optim_open = cpu_optim_open,
    .optim_close = cpu_optim_close,
    .optim_configure = cpu_optim_configure,
    .optim_step = cpu_optim_step,
    .optim_reset = cpu_optim_reset,
    .optim_steps = cpu_optim_steps,
};
