/* device.c — the kern_* API of kernels/device.h, written once for every
 * device: it checks the arguments, keeps what the devices share (the host
 * model: spec, parameter count, initialisation; the optimizer's
 * configuration and its validation by optim.c) and hands the work to the
 * context's backend table (kernels/backend.h: kernels/cpu/backend.c,
 * kernels/cuda_backend.c). Names and availability are device_probe.c's.
 *
 * Owns contexts and the kern_model / kern_optim wrappers; each backend owns
 * its state behind their impl pointers. */
#include "kernels/device.h"

#include <stdint.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/kern_error.h"
#include "kernels/model_spec.h"

static const struct kern_backend *backend_of(enum kern_device device)
{
    switch (device) {
    case KERN_DEVICE_CPU:
        return &kern_cpu_backend;
    case KERN_DEVICE_CUDA:
        return &kern_cuda_backend;
    }
    return NULL;
}

/* Whether device's backend runs the architecture of parsed (spec's text,
 * for the message). */
static int backend_runs(enum kern_device device, const struct model_spec *parsed, const char *spec,
                        char *why, size_t whylen)
{
    const struct kern_backend *b = backend_of(device);
    if (b && !(b->model_archs & MODEL_ARCH_BIT(parsed->arch))) {
        kern_fail(why, whylen, "model \"%s\": %s is not supported on %s yet (use device \"cpu\")",
                  spec, model_arch_name(parsed->arch), kern_device_name(device));
        return 0;
    }
    return 1;
}

int kern_device_supports_model(enum kern_device device, const char *spec, char *why, size_t whylen)
{
    struct model_spec *parsed = malloc(sizeof *parsed);
    if (!parsed) return kern_fail(why, whylen, "model: out of memory"), 0;
    int ok = model_spec_parse(spec, parsed, why, whylen) == 0 &&
             backend_runs(device, parsed, spec, why, whylen);
    free(parsed);
    return ok;
}

/* ---- contexts and memory ---- */

int kern_ctx_create(enum kern_device device, struct kern_ctx **out, char *err, size_t errlen)
{
    *out = NULL;
    char why[768];
    if (!kern_device_available(device, why, sizeof why))
        return kern_fail(err, errlen, "device %s is not available: %s", kern_device_name(device),
                         why);
    struct kern_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return kern_fail(err, errlen, "device %s: out of memory", kern_device_name(device));
    ctx->device = device;
    ctx->backend = backend_of(device);
    if (ctx->backend->ctx_open(ctx, err, errlen) < 0) {
        free(ctx);
        return -1;
    }
    *out = ctx;
    return 0;
}

void kern_ctx_destroy(struct kern_ctx *ctx)
{
    if (!ctx) return;
    ctx->backend->ctx_close(ctx);
    free(ctx);
}

enum kern_device kern_ctx_device(const struct kern_ctx *ctx)
{
    return ctx->device;
}

const char *kern_ctx_describe(const struct kern_ctx *ctx)
{
    return ctx->describe;
}

int kern_alloc(struct kern_ctx *ctx, size_t n, float **out, char *err, size_t errlen)
{
    *out = NULL;
    if (n > SIZE_MAX / sizeof(float))
        return kern_fail(err, errlen, "%s: %zu floats do not fit in memory", ctx->describe, n);
    return ctx->backend->alloc(ctx, n, out, err, errlen);
}

void kern_free(struct kern_ctx *ctx, float *buffer)
{
    if (buffer) ctx->backend->free(ctx, buffer);
}

int kern_upload(struct kern_ctx *ctx, float *dst, const float *host_src, size_t n, char *err,
                size_t errlen)
{
    return ctx->backend->copy(ctx, dst, host_src, n, KERN_COPY_TO_DEVICE, err, errlen);
}

int kern_download(struct kern_ctx *ctx, float *host_dst, const float *src, size_t n, char *err,
                  size_t errlen)
{
    return ctx->backend->copy(ctx, host_dst, src, n, KERN_COPY_TO_HOST, err, errlen);
}

int kern_copy(struct kern_ctx *ctx, float *dst, const float *src, size_t n, char *err,
              size_t errlen)
{
    return ctx->backend->copy(ctx, dst, src, n, KERN_COPY_ON_DEVICE, err, errlen);
}

/* ---- vector operations ---- */

int kern_fill(struct kern_ctx *ctx, size_t n, float value, float *x, char *err, size_t errlen)
{
    return ctx->backend->fill(ctx, n, value, x, err, errlen);
}

int kern_axpy(struct kern_ctx *ctx, size_t n, float alpha, const float *x, float *y, char *err,
              size_t errlen)
{
    return ctx->backend->axpy(ctx, n, alpha, x, y, err, errlen);
}

int kern_scale(struct kern_ctx *ctx, size_t n, float alpha, float *x, char *err, size_t errlen)
{
    return ctx->backend->scale(ctx, n, alpha, x, err, errlen);
}

int kern_sum(struct kern_ctx *ctx, size_t n, float *out, const float *const *inputs, size_t k,
             char *err, size_t errlen)
{
    return ctx->backend->sum(ctx, n, out, inputs, k, err, errlen);
}

int kern_dot(struct kern_ctx *ctx, size_t n, const float *x, const float *y, double *out, char *err,
             size_t errlen)
{
    return ctx->backend->dot(ctx, n, x, y, out, err, errlen);
}

int kern_norm(struct kern_ctx *ctx, size_t n, const float *x, double *out, char *err, size_t errlen)
{
    return ctx->backend->norm(ctx, n, x, out, err, errlen);
}

/* Rejects what BLAS would reject (OpenBLAS prints to stderr instead). */
static int gemm_check(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc, char *err,
                      size_t errlen)
{
    int a_cols = ta ? m : k, b_cols = tb ? k : n;
    if (m < 0 || n < 0 || k < 0)
        return kern_fail(err, errlen, "sgemm: negative size m=%d n=%d k=%d", m, n, k);
    if (lda < (a_cols > 1 ? a_cols : 1) || ldb < (b_cols > 1 ? b_cols : 1) || ldc < (n > 1 ? n : 1))
        return kern_fail(err, errlen,
                         "sgemm: leading dimensions lda=%d ldb=%d ldc=%d below %d, %d, %d", lda,
                         ldb, ldc, a_cols, b_cols, n);
    return 0;
}

int kern_sgemm(struct kern_ctx *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
               const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
               char *err, size_t errlen)
{
    if (gemm_check(trans_a, trans_b, m, n, k, lda, ldb, ldc, err, errlen) < 0) return -1;
    if (m == 0 || n == 0) return 0;
    return ctx->backend->sgemm(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                               err, errlen);
}

/* ---- models ---- */

int kern_model_create(struct kern_ctx *ctx, const char *spec, int max_batch,
                      struct kern_model **out, char *err, size_t errlen)
{
    *out = NULL;
    struct kern_model *m = calloc(1, sizeof *m);
    if (!m) return kern_fail(err, errlen, "model: out of memory");
    m->ctx = ctx;
    /* The host model parses (once); the backend reserves its workspace. */
    if (model_create(spec, 0, &m->host, err, errlen) < 0 ||
        !backend_runs(ctx->device, model_layout(m->host), spec, err, errlen)) {
        kern_model_destroy(m);
        return -1;
    }
    m->spec = model_layout(m->host);
    if (max_batch > MODEL_MAX_BATCH) {
        kern_fail(err, errlen, "model \"%s\": batch %d is outside 1..%d", spec, max_batch,
                  MODEL_MAX_BATCH);
        kern_model_destroy(m);
        return -1;
    }
    if (ctx->backend->model_open(m, max_batch, err, errlen) < 0) {
        kern_model_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

void kern_model_destroy(struct kern_model *m)
{
    if (!m) return;
    if (m->spec) m->ctx->backend->model_close(m);
    model_destroy(m->host);
    free(m);
}

size_t kern_model_param_count(const struct kern_model *m)
{
    return model_param_count(m->host);
}

size_t kern_model_trainable_count(const struct kern_model *m)
{
    return model_trainable_count(m->host);
}

struct kern_ctx *kern_model_ctx(const struct kern_model *m)
{
    return m->ctx;
}

const struct model_spec *kern_model_layout(const struct kern_model *m)
{
    return m->spec;
}

const char *kern_model_spec(const struct kern_model *m)
{
    return model_spec(m->host);
}

int kern_model_input_size(const struct kern_model *m)
{
    return model_input_size(m->host);
}

int kern_model_classes(const struct kern_model *m)
{
    return model_classes(m->host);
}

/* On the host model, then uploaded where buffers are not host memory: every
 * device starts from the same parameters. */
int kern_model_init(struct kern_model *m, float *params, const char *method, uint64_t seed,
                    char *err, size_t errlen)
{
    if (m->ctx->backend->host_memory) return model_init(m->host, params, method, seed, err, errlen);
    size_t n = model_param_count(m->host);
    float *host = malloc((n ? n : 1) * sizeof(float));
    if (!host) return kern_fail(err, errlen, "model \"%s\": out of memory", model_spec(m->host));
    int rc = model_init(m->host, host, method, seed, err, errlen);
    if (rc == 0) rc = kern_upload(m->ctx, params, host, n, err, errlen);
    free(host);
    return rc;
}

int kern_model_grad(struct kern_model *m, const float *params, const float *host_x,
                    const int32_t *host_labels, int batch, float *grad, float *loss, char *err,
                    size_t errlen)
{
    return m->ctx->backend->model_grad(m, params, host_x, host_labels, batch, grad, loss, err,
                                       errlen);
}

int kern_model_eval(struct kern_model *m, const float *params, const float *host_x,
                    const int32_t *host_labels, size_t n, struct model_score *score, char *err,
                    size_t errlen)
{
    return m->ctx->backend->model_eval(m, params, host_x, host_labels, n, score, err, errlen);
}

/* ---- layer ranges ---- */

static int range_check(const struct kern_model *m, int first, int last, int batch, char *err,
                       size_t errlen)
{
    if (model_spec_range_check(m->spec, first, last, err, errlen) < 0) return -1;
    if (batch < 1 || batch > MODEL_MAX_BATCH)
        return kern_fail(err, errlen, "model \"%s\": batch %d is outside 1..%d",
                         model_spec(m->host), batch, MODEL_MAX_BATCH);
    return 0;
}

int kern_model_forward_range(struct kern_model *m, const float *params, int first, int last,
                             const float *host_x, int batch, float *host_y, char *err,
                             size_t errlen)
{
    if (range_check(m, first, last, batch, err, errlen) < 0) return -1;
    return m->ctx->backend->model_forward_range(m, params, first, last, host_x, batch, host_y, err,
                                                errlen);
}

int kern_model_backward_range(struct kern_model *m, const float *params, int first, int last,
                              const float *host_x, const float *host_dy, int batch, float *host_dx,
                              float *grad, char *err, size_t errlen)
{
    if (range_check(m, first, last, batch, err, errlen) < 0) return -1;
    if (first > 0 && !host_dx)
        return kern_fail(err, errlen, "model \"%s\": layers {%d, %d} need somewhere for dx",
                         model_spec(m->host), first + 1, last + 1);
    return m->ctx->backend->model_backward_range(m, params, first, last, host_x, host_dy, batch,
                                                 host_dx, grad, err, errlen);
}

int kern_model_loss(const struct kern_model *m, const float *host_logits,
                    const int32_t *host_labels, int batch, float *host_dlogits, float *loss,
                    char *err, size_t errlen)
{
    return model_loss(m->host, host_logits, host_labels, batch, host_dlogits, loss, err, errlen);
}

/* ---- optimizers ---- */

/* optim.c owns the validation rules and their messages: a throw-away CPU
 * optimizer for no parameters applies them, whatever the device. */
static int config_validate(const struct optim_config *cfg, char *err, size_t errlen)
{
    struct optim *probe;
    if (optim_create(cfg, 0, &probe, err, errlen) < 0) return -1;
    optim_destroy(probe);
    return 0;
}

int kern_optim_create(struct kern_ctx *ctx, const struct optim_config *cfg, size_t n,
                      struct kern_optim **out, char *err, size_t errlen)
{
    *out = NULL;
    if (config_validate(cfg, err, errlen) < 0) return -1;
    struct kern_optim *o = calloc(1, sizeof *o);
    if (!o) return kern_fail(err, errlen, "optimizer: out of memory");
    o->ctx = ctx;
    o->cfg = *cfg;
    o->n = n;
    if (ctx->backend->optim_open(o, err, errlen) < 0) {
        kern_optim_destroy(o);
        return -1;
    }
    *out = o;
    return 0;
}

void kern_optim_destroy(struct kern_optim *o)
{
    if (!o) return;
    o->ctx->backend->optim_close(o);
    free(o);
}

int kern_optim_configure(struct kern_optim *o, const struct optim_config *cfg, char *err,
                         size_t errlen)
{
    if (config_validate(cfg, err, errlen) < 0) return -1;
    int rc = o->ctx->backend->optim_configure(o, cfg, err, errlen);
    o->cfg = *cfg; /* as optim.c: the configuration stands even if new state failed */
    return rc;
}

const struct optim_config *kern_optim_config(const struct kern_optim *o)
{
    return &o->cfg;
}

int kern_optim_step(struct kern_optim *o, float *params, const float *grad, size_t n, char *err,
                    size_t errlen)
{
    return o->ctx->backend->optim_step(o, params, grad, n, err, errlen);
}

int kern_optim_reset(struct kern_optim *o, char *err, size_t errlen)
{
    return o->ctx->backend->optim_reset(o, err, errlen);
}

long kern_optim_steps(const struct kern_optim *o)
{
    return o->ctx->backend->optim_steps(o);
}
