/* device.c — the device layer of kernels/device.h: names and availability,
 * and every kern_* call dispatched to kernels/cpu/ (vec, model, optim) or to
 * the CUDA module, which is loaded here with dlopen on first use (see
 * device.h for why it is not linked).
 *
 * Owns contexts, the CPU buffers of kern_alloc, kern_model / kern_optim
 * wrappers and a cuda optimizer's state buffers. The loaded module is never
 * unloaded: the CUDA runtime does not support being unloaded while the
 * process lives. */
#include "kernels/device.h"

#include <cblas.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/kern_error.h"
#include "kernels/vec.h"

/* As kernels/cpu/model.c: batch limit, and the smallest evaluation chunk
 * (larger on a GPU, where small launches waste it). */
#define DEVICE_MAX_BATCH 65536
#define DEVICE_CUDA_EVAL_MIN_BATCH 256
#define DEVICE_MAX_SIZES 65

/* ---- names ---- */

static const char *const device_names[] = {"cpu", "cuda"};

const char *kern_device_name(enum kern_device device)
{
    return (unsigned)device < 2 ? device_names[device] : "?";
}

int kern_device_parse(const char *name, enum kern_device *out, char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++) {
        if (name && strcmp(name, device_names[i]) == 0) {
            *out = (enum kern_device)i;
            return 0;
        }
    }
    return kern_fail(err, errlen, "device \"%s\" is unknown (cpu, cuda)", name ? name : "");
}

int kern_device_built(enum kern_device device)
{
#ifdef HIERNET_HAVE_CUDA
    return device == KERN_DEVICE_CPU || device == KERN_DEVICE_CUDA;
#else
    return device == KERN_DEVICE_CPU;
#endif
}

/* ---- the CUDA module ---- */

#ifdef HIERNET_HAVE_CUDA
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const struct kern_cuda_ops *cuda_ops;
static char cuda_load_error[768];

/* <directory of the running executable>/libhiernet_cuda.so */
static int module_beside_exe(char *out, size_t outlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    return snprintf(out, outlen, "%s/%s", exe, KERN_CUDA_MODULE_NAME) < (int)outlen ? 0 : -1;
}

/* Loads one module file and checks that it is this build's. */
static void module_open(const char *path)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        /* dlerror names a missing dependency (libcublas.so.13) without the module. */
        kern_fail(cuda_load_error, sizeof cuda_load_error, "cannot load the CUDA kernels (%s): %s",
                  path, dlerror());
        return;
    }
    kern_cuda_entry_fn entry = (kern_cuda_entry_fn)dlsym(handle, KERN_CUDA_ENTRY);
    const struct kern_cuda_ops *ops = entry ? entry() : NULL;
    if (!ops || ops->abi != KERN_CUDA_ABI || ops->size != sizeof *ops) {
        kern_fail(cuda_load_error, sizeof cuda_load_error,
                  "cannot load the CUDA kernels: %s is not this build's CUDA module "
                  "(interface %d, expected %d); rebuild or unset HIERNET_CUDA_MODULE",
                  path, ops ? ops->abi : -1, KERN_CUDA_ABI);
        dlclose(handle);
        return;
    }
    cuda_ops = ops;
}

static void module_load(void)
{
    const char *env = getenv("HIERNET_CUDA_MODULE");
    if (env && *env) {
        module_open(env);
        return;
    }
    char beside[PATH_MAX + 64];
    if (module_beside_exe(beside, sizeof beside) == 0 && access(beside, F_OK) == 0) {
        module_open(beside);
        return;
    }
    if (access(HIERNET_CUDA_MODULE_PATH, F_OK) == 0) {
        module_open(HIERNET_CUDA_MODULE_PATH);
        return;
    }
    kern_fail(cuda_load_error, sizeof cuda_load_error,
              "cannot load the CUDA kernels: %s is neither beside the executable nor at %s "
              "(set HIERNET_CUDA_MODULE to its path)",
              KERN_CUDA_MODULE_NAME, HIERNET_CUDA_MODULE_PATH);
}

static const struct kern_cuda_ops *cuda_module(char *why, size_t whylen)
{
    pthread_once(&cuda_once, module_load);
    if (!cuda_ops) kern_fail(why, whylen, "%s", cuda_load_error);
    return cuda_ops;
}
#endif

int kern_device_available(enum kern_device device, char *why, size_t whylen)
{
    if (why && whylen) why[0] = '\0';
    if (device == KERN_DEVICE_CPU) return 1;
    if (device != KERN_DEVICE_CUDA) {
        kern_fail(why, whylen, "device %d is unknown", (int)device);
        return 0;
    }
#ifndef HIERNET_HAVE_CUDA
    kern_fail(why, whylen, "this build has no CUDA support");
    return 0;
#else
    const struct kern_cuda_ops *ops = cuda_module(why, whylen);
    if (!ops) return 0;
    char reason[512];
    int count = 0;
    if (ops->device_count(&count, reason, sizeof reason) < 0) {
        kern_fail(why, whylen, "no CUDA device: %s", reason);
        return 0;
    }
    if (count < 1) {
        kern_fail(why, whylen, "no CUDA device: the CUDA runtime found none");
        return 0;
    }
    return 1;
#endif
}

/* ---- model specs on devices ---- */

/* Layer widths of a logreg / mlp spec that model_create has accepted. */
static int dense_sizes(const char *spec, int *sizes, int cap)
{
    const char *p = strchr(spec, ':');
    int count = 0;
    while (p && count < cap) {
        char *end;
        sizes[count++] = (int)strtol(p + 1, &end, 10);
        p = *end == '-' ? end : NULL;
    }
    return count;
}

static int is_dense_spec(const char *spec)
{
    return strncmp(spec, "logreg:", 7) == 0 || strncmp(spec, "mlp:", 4) == 0;
}

static int is_lenet_spec(const char *spec)
{
    return strcmp(spec, "cnn:lenet") == 0;
}

int kern_device_supports_model(enum kern_device device, const char *spec, char *why, size_t whylen)
{
    struct model *m;
    if (model_create(spec, 0, &m, why, whylen) < 0) return 0;
    model_destroy(m);
    /* Every architecture model.c parses runs on cuda; a new one must be
     * added here with its kernels. */
    if (device == KERN_DEVICE_CUDA && !is_dense_spec(spec) && !is_lenet_spec(spec)) {
        kern_fail(why, whylen,
                  "model \"%s\": not supported on cuda yet (cuda runs logreg:IN-OUT, "
                  "mlp:IN-H1-...-OUT and cnn:lenet; use device \"cpu\")",
                  spec);
        return 0;
    }
    return 1;
}

/* ---- contexts and memory ---- */

struct kern_ctx {
    enum kern_device device;
    const struct kern_cuda_ops *cuda; /* NULL on the CPU */
    struct kern_cuda_ctx *gpu;
    char describe[192];
};

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
    snprintf(ctx->describe, sizeof ctx->describe, "cpu");
#ifdef HIERNET_HAVE_CUDA
    if (device == KERN_DEVICE_CUDA) {
        ctx->cuda = cuda_module(NULL, 0);
        if (ctx->cuda->ctx_create(0, &ctx->gpu, ctx->describe, sizeof ctx->describe, err, errlen) <
            0) {
            free(ctx);
            return -1;
        }
    }
#endif
    *out = ctx;
    return 0;
}

void kern_ctx_destroy(struct kern_ctx *ctx)
{
    if (!ctx) return;
    if (ctx->cuda) ctx->cuda->ctx_destroy(ctx->gpu);
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
    if (ctx->cuda) return ctx->cuda->alloc(ctx->gpu, n, out, err, errlen);
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
        return kern_fail(err, errlen, "cpu: cannot allocate %zu floats", n);
    *out = p;
    return 0;
}

void kern_free(struct kern_ctx *ctx, float *buffer)
{
    if (!buffer) return;
    if (ctx->cuda)
        ctx->cuda->free(ctx->gpu, buffer);
    else
        free(buffer);
}

static int transfer(struct kern_ctx *ctx, float *dst, const float *src, size_t n,
                    enum kern_cuda_copy kind, char *err, size_t errlen)
{
    if (ctx->cuda) return ctx->cuda->copy(ctx->gpu, dst, src, n * sizeof(float), kind, err, errlen);
    if (n) memcpy(dst, src, n * sizeof(float));
    return 0;
}

int kern_upload(struct kern_ctx *ctx, float *dst, const float *host_src, size_t n, char *err,
                size_t errlen)
{
    return transfer(ctx, dst, host_src, n, KERN_CUDA_TO_DEVICE, err, errlen);
}

int kern_download(struct kern_ctx *ctx, float *host_dst, const float *src, size_t n, char *err,
                  size_t errlen)
{
    return transfer(ctx, host_dst, src, n, KERN_CUDA_TO_HOST, err, errlen);
}

int kern_copy(struct kern_ctx *ctx, float *dst, const float *src, size_t n, char *err,
              size_t errlen)
{
    return transfer(ctx, dst, src, n, KERN_CUDA_ON_DEVICE, err, errlen);
}

/* ---- vector operations ---- */

int kern_fill(struct kern_ctx *ctx, size_t n, float value, float *x, char *err, size_t errlen)
{
    if (ctx->cuda) return ctx->cuda->fill(ctx->gpu, n, value, x, err, errlen);
    vec_fill(n, value, x);
    return 0;
}

int kern_axpy(struct kern_ctx *ctx, size_t n, float alpha, const float *x, float *y, char *err,
              size_t errlen)
{
    if (ctx->cuda) return ctx->cuda->axpy(ctx->gpu, n, alpha, x, y, err, errlen);
    vec_axpy(n, alpha, x, y);
    return 0;
}

int kern_scale(struct kern_ctx *ctx, size_t n, float alpha, float *x, char *err, size_t errlen)
{
    if (ctx->cuda) return ctx->cuda->scale(ctx->gpu, n, alpha, x, err, errlen);
    vec_scale(n, alpha, x);
    return 0;
}

int kern_sum(struct kern_ctx *ctx, size_t n, float *out, const float *const *inputs, size_t k,
             char *err, size_t errlen)
{
    if (!ctx->cuda) {
        vec_sum(n, out, inputs, k);
        return 0;
    }
    if (k == 0) return kern_fill(ctx, n, 0.0f, out, err, errlen);
    if (out != inputs[0] && kern_copy(ctx, out, inputs[0], n, err, errlen) < 0) return -1;
    for (size_t i = 1; i < k; i++)
        if (kern_axpy(ctx, n, 1.0f, inputs[i], out, err, errlen) < 0) return -1;
    return 0;
}

int kern_dot(struct kern_ctx *ctx, size_t n, const float *x, const float *y, double *out, char *err,
             size_t errlen)
{
    if (ctx->cuda) return ctx->cuda->dot(ctx->gpu, n, x, y, out, err, errlen);
    *out = vec_dot(n, x, y);
    return 0;
}

int kern_norm(struct kern_ctx *ctx, size_t n, const float *x, double *out, char *err, size_t errlen)
{
    if (!ctx->cuda) {
        *out = vec_norm(n, x);
        return 0;
    }
    if (ctx->cuda->dot(ctx->gpu, n, x, x, out, err, errlen) < 0) return -1;
    *out = sqrt(*out);
    return 0;
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
    if (ctx->cuda)
        return ctx->cuda->sgemm(ctx->gpu, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                ldc, err, errlen);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return 0;
}

/* ---- models ---- */

struct kern_model {
    struct kern_ctx *ctx;
    struct model *cpu;             /* cpu: does the work; cuda: spec, sizes, init */
    struct kern_cuda_dense *dense; /* cuda, logreg and mlp */
    struct kern_cuda_lenet *lenet; /* cuda, cnn:lenet */
    int largest_batch;             /* cuda: the evaluation chunk follows it */
};

static int cuda_model_reserve(struct kern_model *m, int batch, char *err, size_t errlen)
{
    const struct kern_cuda_ops *ops = m->ctx->cuda;
    return m->lenet ? ops->lenet_reserve(m->lenet, batch, err, errlen)
                    : ops->dense_reserve(m->dense, batch, err, errlen);
}

/* One pass of either kind of cuda model; grad NULL evaluates. */
static int cuda_model_run(struct kern_model *m, const float *params, const float *host_x,
                          const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                          size_t *correct, char *err, size_t errlen)
{
    const struct kern_cuda_ops *ops = m->ctx->cuda;
    if (m->lenet)
        return ops->lenet_run(m->lenet, params, host_x, host_labels, batch, grad, loss_sum, correct,
                              err, errlen);
    return ops->dense_run(m->dense, params, host_x, host_labels, batch, grad, loss_sum, correct,
                          err, errlen);
}

static int cuda_model_create(struct kern_model *m, const char *spec, int max_batch, char *err,
                             size_t errlen)
{
    const struct kern_cuda_ops *ops = m->ctx->cuda;
    int sizes[DEVICE_MAX_SIZES];
    if (!kern_device_supports_model(KERN_DEVICE_CUDA, spec, err, errlen)) return -1;
    if (is_lenet_spec(spec)) {
        if (ops->lenet_create(m->ctx->gpu, &m->lenet, err, errlen) < 0) return -1;
    } else {
        struct kern_cuda_dense_spec dense = {dense_sizes(spec, sizes, DEVICE_MAX_SIZES), sizes};
        if (ops->dense_create(m->ctx->gpu, &dense, &m->dense, err, errlen) < 0) return -1;
    }
    if (max_batch <= 0) return 0;
    if (max_batch > DEVICE_MAX_BATCH)
        return kern_fail(err, errlen, "model \"%s\": batch %d is outside 1..%d", spec, max_batch,
                         DEVICE_MAX_BATCH);
    m->largest_batch = max_batch;
    return cuda_model_reserve(m, max_batch, err, errlen);
}

int kern_model_create(struct kern_ctx *ctx, const char *spec, int max_batch,
                      struct kern_model **out, char *err, size_t errlen)
{
    *out = NULL;
    struct kern_model *m = calloc(1, sizeof *m);
    if (!m) return kern_fail(err, errlen, "model: out of memory");
    m->ctx = ctx;
    /* On cuda the CPU model only parses: no workspace (max_batch 0). */
    if (model_create(spec, ctx->cuda ? 0 : max_batch, &m->cpu, err, errlen) < 0 ||
        (ctx->cuda && cuda_model_create(m, spec, max_batch, err, errlen) < 0)) {
        kern_model_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

void kern_model_destroy(struct kern_model *m)
{
    if (!m) return;
    if (m->dense) m->ctx->cuda->dense_destroy(m->dense);
    if (m->lenet) m->ctx->cuda->lenet_destroy(m->lenet);
    model_destroy(m->cpu);
    free(m);
}

size_t kern_model_param_count(const struct kern_model *m)
{
    return model_param_count(m->cpu);
}

const char *kern_model_spec(const struct kern_model *m)
{
    return model_spec(m->cpu);
}

int kern_model_input_size(const struct kern_model *m)
{
    return model_input_size(m->cpu);
}

int kern_model_classes(const struct kern_model *m)
{
    return model_classes(m->cpu);
}

int kern_model_init(struct kern_model *m, float *params, const char *method, uint64_t seed,
                    char *err, size_t errlen)
{
    if (!m->ctx->cuda) return model_init(m->cpu, params, method, seed, err, errlen);
    size_t n = model_param_count(m->cpu);
    float *host = malloc((n ? n : 1) * sizeof(float));
    if (!host) return kern_fail(err, errlen, "model \"%s\": out of memory", model_spec(m->cpu));
    int rc = model_init(m->cpu, host, method, seed, err, errlen);
    if (rc == 0) rc = kern_upload(m->ctx, params, host, n, err, errlen);
    free(host);
    return rc;
}

/* The checks model.c makes before its passes: the GPU would read outside
 * its buffers instead of failing. */
static int cuda_batch_check(const struct kern_model *m, const int32_t *labels, size_t n, int batch,
                            char *err, size_t errlen)
{
    if (batch < 1 || batch > DEVICE_MAX_BATCH)
        return kern_fail(err, errlen, "model \"%s\": batch %d is outside 1..%d", model_spec(m->cpu),
                         batch, DEVICE_MAX_BATCH);
    int classes = model_classes(m->cpu);
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return kern_fail(err, errlen, "model \"%s\": label %d of sample %zu is outside 0..%d",
                             model_spec(m->cpu), (int)labels[i], i, classes - 1);
    return 0;
}

int kern_model_grad(struct kern_model *m, const float *params, const float *host_x,
                    const int32_t *host_labels, int batch, float *grad, float *loss, char *err,
                    size_t errlen)
{
    if (!m->ctx->cuda)
        return model_grad(m->cpu, params, host_x, host_labels, batch, grad, loss, err, errlen);
    if (cuda_batch_check(m, host_labels, (size_t)(batch > 0 ? batch : 0), batch, err, errlen) < 0)
        return -1;
    double loss_sum = 0;
    size_t correct = 0;
    if (cuda_model_run(m, params, host_x, host_labels, batch, grad, &loss_sum, &correct, err,
                       errlen) < 0)
        return -1;
    m->largest_batch = batch > m->largest_batch ? batch : m->largest_batch;
    *loss = (float)(loss_sum / batch);
    return 0;
}

int kern_model_eval(struct kern_model *m, const float *params, const float *host_x,
                    const int32_t *host_labels, size_t n, struct model_score *score, char *err,
                    size_t errlen)
{
    if (!m->ctx->cuda)
        return model_eval(m->cpu, params, host_x, host_labels, n, score, err, errlen);
    int chunk = m->largest_batch > DEVICE_CUDA_EVAL_MIN_BATCH ? m->largest_batch
                                                              : DEVICE_CUDA_EVAL_MIN_BATCH;
    if (cuda_batch_check(m, host_labels, n, chunk, err, errlen) < 0) return -1;
    size_t in = (size_t)model_input_size(m->cpu);
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

/* ---- optimizers ---- */

struct kern_optim {
    struct kern_ctx *ctx;
    struct optim *cpu; /* cpu: does the work */
    /* cuda: the same rules with the state on the device */
    struct optim_config cfg;
    size_t n;
    long steps;
    float *first, *second;
};

/* optim.c owns the validation rules and their messages: a throw-away CPU
 * optimizer for no parameters applies them. */
static int config_validate(const struct optim_config *cfg, char *err, size_t errlen)
{
    struct optim *probe;
    if (optim_create(cfg, 0, &probe, err, errlen) < 0) return -1;
    optim_destroy(probe);
    return 0;
}

/* Device state for o->cfg.method, zeroed; frees what the method does not use. */
static int cuda_state_alloc(struct kern_optim *o, char *err, size_t errlen)
{
    int first = o->cfg.method != OPTIM_SGD, second = o->cfg.method == OPTIM_ADAM;
    kern_free(o->ctx, o->first);
    kern_free(o->ctx, o->second);
    o->first = o->second = NULL;
    o->steps = 0;
    if (first && (kern_alloc(o->ctx, o->n, &o->first, err, errlen) < 0 ||
                  kern_fill(o->ctx, o->n, 0.0f, o->first, err, errlen) < 0))
        return -1;
    if (second && (kern_alloc(o->ctx, o->n, &o->second, err, errlen) < 0 ||
                   kern_fill(o->ctx, o->n, 0.0f, o->second, err, errlen) < 0))
        return -1;
    return 0;
}

int kern_optim_create(struct kern_ctx *ctx, const struct optim_config *cfg, size_t n,
                      struct kern_optim **out, char *err, size_t errlen)
{
    *out = NULL;
    struct kern_optim *o = calloc(1, sizeof *o);
    if (!o) return kern_fail(err, errlen, "optimizer: out of memory");
    o->ctx = ctx;
    o->cfg = *cfg;
    o->n = n;
    int rc =
        ctx->cuda ? config_validate(cfg, err, errlen) : optim_create(cfg, n, &o->cpu, err, errlen);
    if (rc == 0 && ctx->cuda) rc = cuda_state_alloc(o, err, errlen);
    if (rc < 0) {
        kern_optim_destroy(o);
        return -1;
    }
    *out = o;
    return 0;
}

void kern_optim_destroy(struct kern_optim *o)
{
    if (!o) return;
    optim_destroy(o->cpu);
    kern_free(o->ctx, o->first);
    kern_free(o->ctx, o->second);
    free(o);
}

int kern_optim_configure(struct kern_optim *o, const struct optim_config *cfg, char *err,
                         size_t errlen)
{
    if (o->cpu) return optim_configure(o->cpu, cfg, err, errlen);
    if (config_validate(cfg, err, errlen) < 0) return -1;
    enum optim_method before = o->cfg.method;
    o->cfg = *cfg;
    return cfg->method == before ? 0 : cuda_state_alloc(o, err, errlen);
}

const struct optim_config *kern_optim_config(const struct kern_optim *o)
{
    return o->cpu ? optim_config(o->cpu) : &o->cfg;
}

int kern_optim_step(struct kern_optim *o, float *params, const float *grad, size_t n, char *err,
                    size_t errlen)
{
    if (o->cpu) return optim_step(o->cpu, params, grad, n, err, errlen);
    const struct optim_config *c = &o->cfg;
    if (n != o->n)
        return kern_fail(err, errlen, "%s: step on %zu parameters, state is for %zu",
                         optim_method_name(c->method), n, o->n);
    long t = o->steps + 1;
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
    if (o->ctx->cuda->optim_step(o->ctx->gpu, &step, params, grad, o->first, o->second, n, err,
                                 errlen) < 0)
        return -1;
    o->steps = t;
    return 0;
}

int kern_optim_reset(struct kern_optim *o, char *err, size_t errlen)
{
    if (o->cpu) {
        optim_reset(o->cpu);
        return 0;
    }
    if ((o->first && kern_fill(o->ctx, o->n, 0.0f, o->first, err, errlen) < 0) ||
        (o->second && kern_fill(o->ctx, o->n, 0.0f, o->second, err, errlen) < 0))
        return -1;
    o->steps = 0;
    return 0;
}

long kern_optim_steps(const struct kern_optim *o)
{
    return o->cpu ? optim_steps(o->cpu) : o->steps;
}
