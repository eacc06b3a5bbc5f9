/* cuda_backend.c — the cuda device's table (kernels/backend.h) over the
 * CUDA module's ops (kernels/cuda/cuda_backend.h, loaded by
 * device_probe.c): buffers in GPU memory, cuBLAS and the .cu kernels.
 * Architectures: the dense stacks (logreg, mlp), cnn:lenet and
 * cnn:resnet20, sized from the model's struct model_spec; parameters are
 * initialised on the host (model_init) and uploaded, so both devices start
 * from the same values.
 *
 * Owns each context's kern_cuda_ctx, each model's device workspace and each
 * optimizer's state buffers on the device. */
#include "kernels/backend.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/kern_error.h"

/* The smallest evaluation chunk: larger than the cpu's, since small
 * launches waste a GPU. */
#define CUDA_EVAL_MIN_BATCH 256

/* A context's state: the module's ops and the GPU they drive. */
struct cuda_ctx {
    const struct kern_cuda_ops *ops;
    struct kern_cuda_ctx *gpu;
};

static const struct kern_cuda_ops *ops_of(const struct kern_ctx *ctx)
{
    return ((const struct cuda_ctx *)ctx->impl)->ops;
}

static struct kern_cuda_ctx *gpu_of(const struct kern_ctx *ctx)
{
    return ((const struct cuda_ctx *)ctx->impl)->gpu;
}

static int cuda_ctx_open(struct kern_ctx *ctx, char *err, size_t errlen)
{
    struct cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return kern_fail(err, errlen, "device cuda: out of memory");
    /* Loaded already: kern_ctx_create checked kern_device_available. */
    c->ops = kern_cuda_module(err, errlen);
    if (!c->ops ||
        c->ops->ctx_create(0, &c->gpu, ctx->describe, sizeof ctx->describe, err, errlen) < 0) {
        free(c);
        return -1;
    }
    ctx->impl = c;
    return 0;
}

static void cuda_ctx_close(struct kern_ctx *ctx)
{
    struct cuda_ctx *c = ctx->impl;
    c->ops->ctx_destroy(c->gpu);
    free(c);
}

static int cuda_alloc(struct kern_ctx *ctx, size_t n, float **out, char *err, size_t errlen)
{
    return ops_of(ctx)->alloc(gpu_of(ctx), n, out, err, errlen);
}

static void cuda_free(struct kern_ctx *ctx, float *buffer)
{
    ops_of(ctx)->free(gpu_of(ctx), buffer);
}

static int cuda_copy(struct kern_ctx *ctx, float *dst, const float *src, size_t n,
                     enum kern_copy_kind kind, char *err, size_t errlen)
{
    static const enum kern_cuda_copy kinds[] = {
        [KERN_COPY_TO_DEVICE] = KERN_CUDA_TO_DEVICE,
        [KERN_COPY_TO_HOST] = KERN_CUDA_TO_HOST,
        [KERN_COPY_ON_DEVICE] = KERN_CUDA_ON_DEVICE,
    };
    return ops_of(ctx)->copy(gpu_of(ctx), dst, src, n * sizeof(float), kinds[kind], err, errlen);
}

/* ---- vector operations ---- */

static int cuda_fill(struct kern_ctx *ctx, size_t n, float value, float *x, char *err,
                     size_t errlen)
{
    return ops_of(ctx)->fill(gpu_of(ctx), n, value, x, err, errlen);
}

static int cuda_axpy(struct kern_ctx *ctx, size_t n, float alpha, const float *x, float *y,
                     char *err, size_t errlen)
{
    return ops_of(ctx)->axpy(gpu_of(ctx), n, alpha, x, y, err, errlen);
}

static int cuda_scale(struct kern_ctx *ctx, size_t n, float alpha, float *x, char *err,
                      size_t errlen)
{
    return ops_of(ctx)->scale(gpu_of(ctx), n, alpha, x, err, errlen);
}

/* A copy and k - 1 axpys: the module has no k-way sum. */
static int cuda_sum(struct kern_ctx *ctx, size_t n, float *out, const float *const *inputs,
                    size_t k, char *err, size_t errlen)
{
    if (k == 0) return cuda_fill(ctx, n, 0.0f, out, err, errlen);
    if (out != inputs[0] && cuda_copy(ctx, out, inputs[0], n, KERN_COPY_ON_DEVICE, err, errlen) < 0)
        return -1;
    for (size_t i = 1; i < k; i++)
        if (cuda_axpy(ctx, n, 1.0f, inputs[i], out, err, errlen) < 0) return -1;
    return 0;
}

static int cuda_dot(struct kern_ctx *ctx, size_t n, const float *x, const float *y, double *out,
                    char *err, size_t errlen)
{
    return ops_of(ctx)->dot(gpu_of(ctx), n, x, y, out, err, errlen);
}

static int cuda_norm(struct kern_ctx *ctx, size_t n, const float *x, double *out, char *err,
                     size_t errlen)
{
    if (cuda_dot(ctx, n, x, x, out, err, errlen) < 0) return -1;
    *out = sqrt(*out);
    return 0;
}

static int cuda_sgemm(struct kern_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc, char *err, size_t errlen)
{
    return ops_of(ctx)->sgemm(gpu_of(ctx), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                              c, ldc, err, errlen);
}

/* ---- models ---- */

struct cuda_model {
    struct kern_cuda_dense *dense;   /* logreg and mlp */
    struct kern_cuda_lenet *lenet;   /* cnn:lenet */
    struct kern_cuda_resnet *resnet; /* cnn:resnet20 */
    int largest_batch;               /* the evaluation chunk follows it */
};

static int cuda_model_reserve(struct kern_model *m, int batch, char *err, size_t errlen)
{
    const struct kern_cuda_ops *ops = ops_of(m->ctx);
    struct cuda_model *cm = m->impl;
    if (cm->resnet) return ops->resnet_reserve(cm->resnet, batch, err, errlen);
    return cm->lenet ? ops->lenet_reserve(cm->lenet, batch, err, errlen)
                     : ops->dense_reserve(cm->dense, batch, err, errlen);
}

/* One pass of any kind of model; grad NULL evaluates. */
static int cuda_model_run(struct kern_model *m, const float *params, const float *host_x,
                          const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                          size_t *correct, char *err, size_t errlen)
{
    const struct kern_cuda_ops *ops = ops_of(m->ctx);
    struct cuda_model *cm = m->impl;
    if (cm->resnet)
        return ops->resnet_run(cm->resnet, params, host_x, host_labels, batch, grad, loss_sum,
                               correct, err, errlen);
    if (cm->lenet)
        return ops->lenet_run(cm->lenet, params, host_x, host_labels, batch, grad, loss_sum,
                              correct, err, errlen);
    return ops->dense_run(cm->dense, params, host_x, host_labels, batch, grad, loss_sum, correct,
                          err, errlen);
}

/* Layer ranges: the module's passes on the model's own workspace, which
 * keeps the forward's input and activations for the backward (host_x is
 * not read again). */
static int cuda_model_forward_range(struct kern_model *m, const float *params, int first, int last,
                                    const float *host_x, int batch, float *host_y, char *err,
                                    size_t errlen)
{
    const struct kern_cuda_ops *ops = ops_of(m->ctx);
    struct cuda_model *cm = m->impl;
    if (cm->resnet)
        return ops->resnet_forward_range(cm->resnet, params, first, last, host_x, batch, host_y,
                                         err, errlen);
    if (cm->lenet)
        return ops->lenet_forward_range(cm->lenet, params, first, last, host_x, batch, host_y, err,
                                        errlen);
    return ops->dense_forward_range(cm->dense, params, first, last, host_x, batch, host_y, err,
                                    errlen);
}

static int cuda_model_backward_range(struct kern_model *m, const float *params, int first, int last,
                                     const float *host_x, const float *host_dy, int batch,
                                     float *host_dx, float *grad, char *err, size_t errlen)
{
    (void)host_x;
    const struct kern_cuda_ops *ops = ops_of(m->ctx);
    struct cuda_model *cm = m->impl;
    if (cm->resnet)
        return ops->resnet_backward_range(cm->resnet, params, first, last, host_dy, batch, host_dx,
                                          grad, err, errlen);
    if (cm->lenet)
        return ops->lenet_backward_range(cm->lenet, params, first, last, host_dy, batch, host_dx,
                                         grad, err, errlen);
    return ops->dense_backward_range(cm->dense, params, first, last, host_dy, batch, host_dx, grad,
                                     err, errlen);
}

static int cuda_model_open(struct kern_model *m, int max_batch, char *err, size_t errlen)
{
    const struct kern_cuda_ops *ops = ops_of(m->ctx);
    struct cuda_model *cm = calloc(1, sizeof *cm);
    if (!cm) return kern_fail(err, errlen, "model: out of memory");
    m->impl = cm;
    int rc;
    if (m->spec->arch == MODEL_ARCH_LENET) {
        rc = ops->lenet_create(gpu_of(m->ctx), &cm->lenet, err, errlen);
    } else if (m->spec->arch == MODEL_ARCH_RESNET) {
        rc = ops->resnet_create(gpu_of(m->ctx), m->spec, &cm->resnet, err, errlen);
    } else {
        struct kern_cuda_dense_spec dense = {m->spec->n_sizes, m->spec->sizes};
        rc = ops->dense_create(gpu_of(m->ctx), &dense, &cm->dense, err, errlen);
    }
    if (rc < 0 || max_batch <= 0) return rc;
    cm->largest_batch = max_batch;
    return cuda_model_reserve(m, max_batch, err, errlen);
}

static void cuda_model_close(struct kern_model *m)
{
    struct cuda_model *cm = m->impl;
    if (!cm) return;
    if (cm->dense) ops_of(m->ctx)->dense_destroy(cm->dense);
    if (cm->lenet) ops_of(m->ctx)->lenet_destroy(cm->lenet);
    if (cm->resnet) ops_of(m->ctx)->resnet_destroy(cm->resnet);
    free(cm);
}

/* The checks model.c makes before its passes: the GPU would read outside
 * its buffers instead of failing. */
static int cuda_batch_check(const struct kern_model *m, const int32_t *labels, size_t n, int batch,
                            char *err, size_t errlen)
{
    if (batch < 1 || batch > MODEL_MAX_BATCH)
        return kern_fail(err, errlen, "model \"%s\": batch %d is outside 1..%d",
                         model_spec(m->host), batch, MODEL_MAX_BATCH);
    int classes = model_spec_classes(m->spec);
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return kern_fail(err, errlen, "model \"%s\": label %d of sample %zu is outside 0..%d",
                             model_spec(m->host), (int)labels[i], i, classes - 1);
    return 0;
}

static int cuda_model_grad(struct kern_model *m, const float *params, const float *host_x,
                           const int32_t *host_labels, int batch, float *grad, float *loss,
                           char *err, size_t errlen)
{
    struct cuda_model *cm = m->impl;
    if (cuda_batch_check(m, host_labels, (size_t)(batch > 0 ? batch : 0), batch, err, errlen) < 0)
        return -1;
    double loss_sum = 0;
    size_t correct = 0;
    if (cuda_model_run(m, params, host_x, host_labels, batch, grad, &loss_sum, &correct, err,
                       errlen) < 0)
        return -1;
    cm->largest_batch = batch > cm->largest_batch ? batch : cm->largest_batch;
    *loss = (float)(loss_sum / batch);
    return 0;
}

static int cuda_model_eval(struct kern_model *m, const float *params, const float *host_x,
                           const int32_t *host_labels, size_t n, struct model_score *score,
                           char *err, size_t errlen)
{
    struct cuda_model *cm = m->impl;
    int chunk = cm->largest_batch > CUDA_EVAL_MIN_BATCH ? cm->largest_batch : CUDA_EVAL_MIN_BATCH;
    if (cuda_batch_check(m, host_labels, n, chunk, err, errlen) < 0) return -1;
    size_t in = (size_t)model_spec_input_size(m->spec);
    for (size_t done = 0; done < n;) {
        int batch = n - done < (size_t)chunk ? (int)(n - done) : chunk;
        double loss_sum = 0;
        size_t correct = 0;
        if (cuda_model_run(m, params, host_x + done * in, host_labels + done, batch, NULL,
                           &loss_sum, &correct, err, errlen) < 0)
            return -1;
        score->loss_sum += loss_sum;
        score->correct += correct;
        score->samples += (size_t)batch;
        done += (size_t)batch;
    }
    return 0;
}

/* ---- optimizers: optim.c's rules with the state on the device ---- */

struct cuda_optim {
    long steps;
    float *first, *second;
};

/* Device state for method, zeroed; frees what the method does not use. */
static int cuda_state_alloc(struct kern_optim *o, enum optim_method method, char *err,
                            size_t errlen)
{
    struct cuda_optim *co = o->impl;
    int first = method != OPTIM_SGD, second = method == OPTIM_ADAM;
    if (co->first) cuda_free(o->ctx, co->first);
    if (co->second) cuda_free(o->ctx, co->second);
    co->first = co->second = NULL;
    co->steps = 0;
    if (first && (cuda_alloc(o->ctx, o->n, &co->first, err, errlen) < 0 ||
                  cuda_fill(o->ctx, o->n, 0.0f, co->first, err, errlen) < 0))
        return -1;
    if (second && (cuda_alloc(o->ctx, o->n, &co->second, err, errlen) < 0 ||
                   cuda_fill(o->ctx, o->n, 0.0f, co->second, err, errlen) < 0))
        return -1;
    return 0;
}

static int cuda_optim_open(struct kern_optim *o, char *err, size_t errlen)
{
    if (!(o->impl = calloc(1, sizeof(struct cuda_optim))))
        return kern_fail(err, errlen, "optimizer: out of memory");
    return cuda_state_alloc(o, o->cfg.method, err, errlen);
}

static void cuda_optim_close(struct kern_optim *o)
{
    struct cuda_optim *co = o->impl;
    if (!co) return;
    if (co->first) cuda_free(o->ctx, co->first);
    if (co->second) cuda_free(o->ctx, co->second);
    free(co);
}

static int cuda_optim_configure(struct kern_optim *o, const struct optim_config *cfg, char *err,
                                size_t errlen)
{
    return cfg->method == o->cfg.method ? 0 : cuda_state_alloc(o, cfg->method, err, errlen);
}

static int cuda_optim_step(struct kern_optim *o, float *params, const float *grad, size_t n,
                           char *err, size_t errlen)
{
    struct cuda_optim *co = o->impl;
    const struct optim_config *c = &o->cfg;
    if (n != o->n)
        return kern_fail(err, errlen, "%s: step on %zu parameters, state is for %zu",
                         optim_method_name(c->method), n, o->n);
    long t = co->steps + 1;
    struct kern_cuda_optim_step step = {
        .method = (int)c->method,
        .lr = c->lr,
        .momentum = c->momentum,
        .beta1 = c->beta1,
        .beta2 = c->beta2,
        .eps = c->eps,
        .weight_decay = c->weight_decay,
        /* In double, as optim.c: 1 - 0.999^t loses digits in float. */
        .c1 = (float)(1.0 / (1.0 - pow(c->beta1, (double)t))),
        .c2 = (float)(1.0 / (1.0 - pow(c->beta2, (double)t))),
    };
    if (ops_of(o->ctx)->optim_step(gpu_of(o->ctx), &step, params, grad, co->first, co->second, n,
                                   err, errlen) < 0)
        return -1;
    co->steps = t;
    return 0;
}

static int cuda_optim_reset(struct kern_optim *o, char *err, size_t errlen)
{
    struct cuda_optim *co = o->impl;
    if ((co->first && cuda_fill(o->ctx, o->n, 0.0f, co->first, err, errlen) < 0) ||
        (co->second && cuda_fill(o->ctx, o->n, 0.0f, co->second, err, errlen) < 0))
        return -1;
    co->steps = 0;
    return 0;
}

static long cuda_optim_steps(const struct kern_optim *o)
{
    return ((const struct cuda_optim *)o->impl)->steps;
}

const struct kern_backend kern_cuda_backend = {
    .device = KERN_DEVICE_CUDA,
    .host_memory = 0,
    .model_archs = MODEL_ARCH_BIT(MODEL_ARCH_DENSE) | MODEL_ARCH_BIT(MODEL_ARCH_LENET) |
                   MODEL_ARCH_BIT(MODEL_ARCH_RESNET),
    .ctx_open = cuda_ctx_open,
    .ctx_close = cuda_ctx_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .fill = cuda_fill,
    .axpy = cuda_axpy,
    .scale = cuda_scale,
    .sum = cuda_sum,
    .dot = cuda_dot,
    .norm = cuda_norm,
    .sgemm = cuda_sgemm,
    .model_open = cuda_model_open,
    .model_close = cuda_model_close,
    .model_grad = cuda_model_grad,
    .model_eval = cuda_model_eval,
    .model_forward_range = cuda_model_forward_range,
    .model_backward_range = cuda_model_backward_range,
    .optim_open = cuda_optim_open,
    .optim_close = cuda_optim_close,
    .optim_configure = cuda_optim_configure,
    .optim_step = cuda_optim_step,
    .optim_reset = cuda_optim_reset,
    .optim_steps = cuda_optim_steps,
};
