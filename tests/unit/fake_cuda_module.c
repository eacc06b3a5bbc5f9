/* fake_cuda_module.c — a stand-in for libhiernet_cuda.so on machines without
 * a GPU, for the unit tests only (built as build/tests/libhiernet_fake_cuda.so
 * when the CUDA module itself is built).
 *
 * It exports the same hiernet_cuda_ops table (same ABI number and size, so
 * kernels/device_probe.c loads it through $HIERNET_CUDA_MODULE like the real one)
 * and computes on the CPU: vectors with kernels/cpu/vec.c, models (dense
 * stacks, cnn:lenet and cnn:resnet20) with kernels/cpu/model.c, optimizer steps with the element
 * functions the GPU kernels use (kernels/elementwise.h). So a "cuda" context or peer runs every
 * CUDA code path of kernels/cuda_backend.c and of the peer, with results that can be compared with
 * the cpu ones.
 *
 * What makes it a test rather than a second CPU backend: "device memory" is a
 * tracked pool. Every buffer this module hands out is registered and
 * poisoned with NaN; every pointer a call takes as device memory must lie
 * inside one registered buffer (with all the elements the call touches),
 * and every pointer it takes as host memory must lie outside all of them.
 * A host pointer passed where a device one belongs, a device pointer used
 * as host memory, an overrun, or a read of memory never uploaded (NaN) is
 * an error or a wrong result, as it would be on a GPU, instead of silently
 * working because both are host memory.
 *
 * Environment: HIERNET_FAKE_CUDA_DEVICES=0 makes the device count fail (a
 * machine without a GPU); HIERNET_FAKE_CUDA_CTX_ERROR=text makes opening a
 * context fail with that text (a GPU that cannot be used);
 * HIERNET_FAKE_CUDA_LOG=file appends a line per layer-range pass
 * ("forward_range cnn:lenet 0 3 5": spec, 0-based rows, batch), so a test
 * sees that the peer ran a part on the device rather than on its CPU;
 * HIERNET_FAKE_CUDA_CREATE_FAIL=file makes creating a model fail while that
 * file exists (a GPU out of memory), so a test can fail one command of a
 * running peer and then let the next succeed. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/elementwise.h"
#include "kernels/kern_error.h"
#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/optim.h"
#include "kernels/vec.h"

/* ---- the device-memory pool ---- */

struct block {
    const char *base;
    size_t bytes;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *pool;
static size_t pool_count, pool_cap;

/* The index of the block holding p, or -1. Called with the lock held. */
static long pool_find(const void *p)
{
    const char *c = p;
    for (size_t i = 0; i < pool_count; i++)
        if (c >= pool[i].base && c < pool[i].base + pool[i].bytes) return (long)i;
    return -1;
}

/* [p, p + bytes) lies inside one device buffer (any p for 0 bytes: a
 * zero-length call dereferences nothing, on a GPU neither). */
static bool on_device(const void *p, size_t bytes)
{
    if (bytes == 0) return true;
    pthread_mutex_lock(&pool_lock);
    long i = p ? pool_find(p) : -1;
    bool ok = i >= 0 && (size_t)((const char *)p - pool[i].base) + bytes <= pool[i].bytes;
    pthread_mutex_unlock(&pool_lock);
    return ok;
}

/* [p, p + bytes) touches no device buffer. */
static bool on_host(const void *p, size_t bytes)
{
    if (bytes == 0) return true;
    pthread_mutex_lock(&pool_lock);
    bool ok = p != NULL && pool_find(p) < 0 && pool_find((const char *)p + bytes - 1) < 0;
    pthread_mutex_unlock(&pool_lock);
    return ok;
}

#define NEED_DEVICE(what, ptr, nbytes)                                                             \
    do {                                                                                           \
        if (!on_device((ptr), (nbytes)))                                                           \
            return kern_fail(err, errlen, "fake cuda %s: %s (%p, %zu bytes) is not device memory", \
                             (what), #ptr, (const void *)(ptr), (size_t)(nbytes));                 \
    } while (0)

#define NEED_HOST(what, ptr, nbytes)                                                               \
    do {                                                                                           \
        if (!on_host((ptr), (nbytes)))                                                             \
            return kern_fail(err, errlen, "fake cuda %s: %s (%p) is device memory, not host",      \
                             (what), #ptr, (const void *)(ptr));                                   \
    } while (0)

static int pool_add(char *base, size_t bytes)
{
    pthread_mutex_lock(&pool_lock);
    if (pool_count == pool_cap) {
        size_t cap = pool_cap ? 2 * pool_cap : 64;
        struct block *grown = realloc(pool, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&pool_lock);
            return -1;
        }
        pool = grown;
        pool_cap = cap;
    }
    pool[pool_count++] = (struct block){base, bytes};
    pthread_mutex_unlock(&pool_lock);
    return 0;
}

/* ---- discovery and contexts ---- */

struct kern_cuda_ctx {
    int ordinal;
};

static int device_count(int *count, char *why, size_t whylen)
{
    const char *env = getenv("HIERNET_FAKE_CUDA_DEVICES");
    *count = env ? atoi(env) : 1;
    if (*count > 0) return 0;
    *count = 0;
    return kern_fail(why, whylen,
                     "no CUDA-capable device is detected (fake module, "
                     "HIERNET_FAKE_CUDA_DEVICES=%s)",
                     env);
}

static int ctx_create(int ordinal, struct kern_cuda_ctx **out, char *describe, size_t describelen,
                      char *err, size_t errlen)
{
    *out = NULL;
    const char *fail = getenv("HIERNET_FAKE_CUDA_CTX_ERROR");
    if (fail && *fail) return kern_fail(err, errlen, "cuda set device: %s (fake)", fail);
    struct kern_cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return kern_fail(err, errlen, "fake cuda: out of memory");
    c->ordinal = ordinal;
    snprintf(describe, describelen, "cuda:%d fake (host memory, tests only)", ordinal);
    *out = c;
    return 0;
}

static void ctx_destroy(struct kern_cuda_ctx *c)
{
    free(c);
}

/* ---- memory ---- */

static int mem_alloc(struct kern_cuda_ctx *c, size_t n, float **out, char *err, size_t errlen)
{
    size_t count = n ? n : 1;
    float *p = malloc(count * sizeof(float));
    if (!p || pool_add((char *)p, count * sizeof(float)) < 0) {
        free(p);
        return kern_fail(err, errlen, "fake cuda: cannot allocate %zu floats", n);
    }
    /* Uninitialised device memory reads as NaN: a missing upload shows. */
    for (size_t i = 0; i < count; i++)
        p[i] = NAN;
    *out = p;
    return 0;
}

static void mem_free(struct kern_cuda_ctx *c, float *p)
{
    if (!p) return;
    pthread_mutex_lock(&pool_lock);
    long i = pool_find(p);
    bool ok = i >= 0 && pool[i].base == (const char *)p;
    if (ok) pool[i] = pool[--pool_count];
    pthread_mutex_unlock(&pool_lock);
    if (!ok) {
        /* cudaFree of a host pointer: a bug in the caller, stop here. */
        fprintf(stderr, "fake cuda: free of %p, which is not a device buffer\n", (void *)p);
        abort();
    }
    free(p);
}

static int mem_copy(struct kern_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                    enum kern_cuda_copy kind, char *err, size_t errlen)
{
    static const char *const names[] = {"copy to device", "copy to host", "copy on device"};
    if (kind == KERN_CUDA_TO_HOST)
        NEED_HOST(names[kind], dst, bytes);
    else
        NEED_DEVICE(names[kind], dst, bytes);
    if (kind == KERN_CUDA_TO_DEVICE)
        NEED_HOST(names[kind], src, bytes);
    else
        NEED_DEVICE(names[kind], src, bytes);
    if (bytes) memmove(dst, src, bytes);
    return 0;
}

/* ---- vectors ---- */

static int fill(struct kern_cuda_ctx *c, size_t n, float value, float *x, char *err, size_t errlen)
{
    NEED_DEVICE("fill", x, n * sizeof(float));
    vec_fill(n, value, x);
    return 0;
}

static int axpy(struct kern_cuda_ctx *c, size_t n, float alpha, const float *x, float *y, char *err,
                size_t errlen)
{
    NEED_DEVICE("axpy", x, n * sizeof(float));
    NEED_DEVICE("axpy", y, n * sizeof(float));
    vec_axpy(n, alpha, x, y);
    return 0;
}

static int scale(struct kern_cuda_ctx *c, size_t n, float alpha, float *x, char *err, size_t errlen)
{
    NEED_DEVICE("scale", x, n * sizeof(float));
    vec_scale(n, alpha, x);
    return 0;
}

static int dot(struct kern_cuda_ctx *c, size_t n, const float *x, const float *y, double *out,
               char *err, size_t errlen)
{
    NEED_DEVICE("dot", x, n * sizeof(float));
    NEED_DEVICE("dot", y, n * sizeof(float));
    *out = vec_dot(n, x, y);
    return 0;
}

/* Bytes a row-major rows x cols operand with leading dimension ld spans. */
static size_t extent(int rows, int cols, int ld)
{
    return rows && cols ? ((size_t)(rows - 1) * ld + cols) * sizeof(float) : 0;
}

static int sgemm(struct kern_cuda_ctx *c, int ta, int tb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *cm, int ldc,
                 char *err, size_t errlen)
{
    NEED_DEVICE("sgemm", a, extent(ta ? k : m, ta ? m : k, lda));
    NEED_DEVICE("sgemm", b, extent(tb ? n : k, tb ? k : n, ldb));
    NEED_DEVICE("sgemm", cm, extent(m, n, ldc));
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, cm, ldc);
    return 0;
}

/* ---- models: kernels/cpu/model.c on pool memory ----
 *
 * Dense stacks, cnn:lenet and cnn:resnet20 alike wrap the CPU model of the same spec, so
 * the cuda paths of kernels/cuda_backend.c and of the peer see the CPU's results. The GPU
 * passes themselves (dense_pass.cuh, lenet_pass.cuh, resnet20_pass.cuh) are checked against
 * that same CPU code by tests/unit/test_cuda_host.cu. */

struct fake_model {
    struct model *model;
    float *x; /* the last forward range's input: the CPU's backward reads it again */
    size_t x_cap;
};

struct kern_cuda_dense {
    struct fake_model m;
};

struct kern_cuda_lenet {
    struct fake_model m;
};

struct kern_cuda_resnet {
    struct fake_model m;
};

static int fake_model_create(const char *spec, struct fake_model *m, char *err, size_t errlen)
{
    const char *fail = getenv("HIERNET_FAKE_CUDA_CREATE_FAIL");
    if (fail && *fail && access(fail, F_OK) == 0)
        return kern_fail(err, errlen, "fake cuda: out of memory creating %s", spec);
    return model_create(spec, 0, &m->model, err, errlen);
}

static int fake_model_run(struct fake_model *m, const float *params, const float *host_x,
                          const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                          size_t *correct, char *err, size_t errlen)
{
    size_t np = model_param_count(m->model) * sizeof(float);
    NEED_DEVICE("model pass", params, np);
    if (grad) NEED_DEVICE("model pass", grad, np);
    NEED_HOST("model pass", host_x, (size_t)batch * model_input_size(m->model) * sizeof(float));
    NEED_HOST("model pass", host_labels, (size_t)batch * sizeof(int32_t));
    if (!grad) {
        struct model_score s = {0};
        if (model_eval(m->model, params, host_x, host_labels, (size_t)batch, &s, err, errlen) < 0)
            return -1;
        *loss_sum = s.loss_sum;
        *correct = s.correct;
        return 0;
    }
    float loss;
    if (model_grad(m->model, params, host_x, host_labels, batch, grad, &loss, err, errlen) < 0)
        return -1;
    /* Exact: a float times an int below 2^29 fits a double, and divides back. */
    *loss_sum = (double)loss * batch;
    *correct = 0;
    return 0;
}

static int dense_create(struct kern_cuda_ctx *c, const struct kern_cuda_dense_spec *spec,
                        struct kern_cuda_dense **out, char *err, size_t errlen)
{
    *out = NULL;
    char text[512];
    int len = snprintf(text, sizeof text, "%s", spec->count == 2 ? "logreg" : "mlp");
    for (int i = 0; i < spec->count && len < (int)sizeof text; i++)
        len +=
            snprintf(text + len, sizeof text - (size_t)len, "%c%d", i ? '-' : ':', spec->sizes[i]);
    struct kern_cuda_dense *d = calloc(1, sizeof *d);
    if (!d) return kern_fail(err, errlen, "fake cuda: out of memory");
    if (fake_model_create(text, &d->m, err, errlen) < 0) {
        free(d);
        return -1;
    }
    *out = d;
    return 0;
}

static void dense_destroy(struct kern_cuda_dense *d)
{
    if (!d) return;
    model_destroy(d->m.model);
    free(d->m.x);
    free(d);
}

static int dense_reserve(struct kern_cuda_dense *d, int batch, char *err, size_t errlen)
{
    return model_reserve(d->m.model, batch, err, errlen);
}

static int dense_run(struct kern_cuda_dense *d, const float *params, const float *host_x,
                     const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                     size_t *correct, char *err, size_t errlen)
{
    return fake_model_run(&d->m, params, host_x, host_labels, batch, grad, loss_sum, correct, err,
                          errlen);
}

static int lenet_create(struct kern_cuda_ctx *c, struct kern_cuda_lenet **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    struct kern_cuda_lenet *n = calloc(1, sizeof *n);
    if (!n) return kern_fail(err, errlen, "fake cuda: out of memory");
    if (fake_model_create("cnn:lenet", &n->m, err, errlen) < 0) {
        free(n);
        return -1;
    }
    *out = n;
    return 0;
}

static void lenet_destroy(struct kern_cuda_lenet *n)
{
    if (!n) return;
    model_destroy(n->m.model);
    free(n->m.x);
    free(n);
}

static int lenet_reserve(struct kern_cuda_lenet *n, int batch, char *err, size_t errlen)
{
    return model_reserve(n->m.model, batch, err, errlen);
}

static int lenet_run(struct kern_cuda_lenet *n, const float *params, const float *host_x,
                     const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                     size_t *correct, char *err, size_t errlen)
{
    return fake_model_run(&n->m, params, host_x, host_labels, batch, grad, loss_sum, correct, err,
                          errlen);
}

/* ---- layer ranges: model.c's, with the input kept as the GPU keeps it ---- */

static void range_log(const struct fake_model *m, const char *pass, int first, int last, int batch)
{
    const char *path = getenv("HIERNET_FAKE_CUDA_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "%s %s %d %d %d\n", pass, model_spec(m->model), first, last, batch);
    fclose(f);
}

/* Floats per sample of row i's input and output (rows checked by the caller). */
static size_t row_in(const struct fake_model *m, int i)
{
    return model_layout(m->model)->layers[i].in_size;
}

static size_t row_out(const struct fake_model *m, int i)
{
    return model_layout(m->model)->layers[i].out_size;
}

static int fake_forward_range(struct fake_model *m, const float *params, int first, int last,
                              const float *host_x, int batch, float *host_y, char *err,
                              size_t errlen)
{
    if (model_spec_range_check(model_layout(m->model), first, last, err, errlen) < 0) return -1;
    size_t nx = (size_t)batch * row_in(m, first), ny = (size_t)batch * row_out(m, last);
    NEED_DEVICE("forward range", params, model_param_count(m->model) * sizeof(float));
    NEED_HOST("forward range", host_x, nx * sizeof(float));
    NEED_HOST("forward range", host_y, ny * sizeof(float));
    if (nx > m->x_cap) {
        float *grown = realloc(m->x, nx * sizeof(float));
        if (!grown) return kern_fail(err, errlen, "fake cuda: out of memory");
        m->x = grown;
        m->x_cap = nx;
    }
    memcpy(m->x, host_x, nx * sizeof(float));
    range_log(m, "forward_range", first, last, batch);
    return model_forward_range(m->model, params, first, last, m->x, batch, host_y, err, errlen);
}

static int fake_backward_range(struct fake_model *m, const float *params, int first, int last,
                               const float *host_dy, int batch, float *host_dx, float *grad,
                               char *err, size_t errlen)
{
    if (model_spec_range_check(model_layout(m->model), first, last, err, errlen) < 0) return -1;
    size_t np = model_param_count(m->model) * sizeof(float);
    NEED_DEVICE("backward range", params, np);
    NEED_DEVICE("backward range", grad, np);
    NEED_HOST("backward range", host_dy, (size_t)batch * row_out(m, last) * sizeof(float));
    if (first > 0)
        NEED_HOST("backward range", host_dx, (size_t)batch * row_in(m, first) * sizeof(float));
    if (!m->x || (size_t)batch * row_in(m, first) > m->x_cap)
        return kern_fail(err, errlen, "fake cuda: backward over batch %d without its forward",
                         batch);
    range_log(m, "backward_range", first, last, batch);
    return model_backward_range(m->model, params, first, last, m->x, host_dy, batch,
                                first ? host_dx : NULL, grad, err, errlen);
}

static int dense_forward_range(struct kern_cuda_dense *d, const float *params, int first, int last,
                               const float *host_x, int batch, float *host_y, char *err,
                               size_t errlen)
{
    return fake_forward_range(&d->m, params, first, last, host_x, batch, host_y, err, errlen);
}

static int dense_backward_range(struct kern_cuda_dense *d, const float *params, int first, int last,
                                const float *host_dy, int batch, float *host_dx, float *grad,
                                char *err, size_t errlen)
{
    return fake_backward_range(&d->m, params, first, last, host_dy, batch, host_dx, grad, err,
                               errlen);
}

static int lenet_forward_range(struct kern_cuda_lenet *n, const float *params, int first, int last,
                               const float *host_x, int batch, float *host_y, char *err,
                               size_t errlen)
{
    return fake_forward_range(&n->m, params, first, last, host_x, batch, host_y, err, errlen);
}

static int lenet_backward_range(struct kern_cuda_lenet *n, const float *params, int first, int last,
                                const float *host_dy, int batch, float *host_dx, float *grad,
                                char *err, size_t errlen)
{
    return fake_backward_range(&n->m, params, first, last, host_dy, batch, host_dx, grad, err,
                               errlen);
}

static int resnet_create(struct kern_cuda_ctx *c, const struct model_spec *spec,
                         struct kern_cuda_resnet **out, char *err, size_t errlen)
{
    *out = NULL;
    struct kern_cuda_resnet *n = calloc(1, sizeof *n);
    if (!n) return kern_fail(err, errlen, "fake cuda: out of memory");
    if (fake_model_create(model_arch_name(spec->arch), &n->m, err, errlen) < 0) {
        free(n);
        return -1;
    }
    *out = n;
    return 0;
}

static void resnet_destroy(struct kern_cuda_resnet *n)
{
    if (!n) return;
    model_destroy(n->m.model);
    free(n->m.x);
    free(n);
}

static int resnet_reserve(struct kern_cuda_resnet *n, int batch, char *err, size_t errlen)
{
    return model_reserve(n->m.model, batch, err, errlen);
}

static int resnet_run(struct kern_cuda_resnet *n, const float *params, const float *host_x,
                      const int32_t *host_labels, int batch, float *grad, double *loss_sum,
                      size_t *correct, char *err, size_t errlen)
{
    return fake_model_run(&n->m, params, host_x, host_labels, batch, grad, loss_sum, correct, err,
                          errlen);
}

static int resnet_forward_range(struct kern_cuda_resnet *n, const float *params, int first,
                                int last, const float *host_x, int batch, float *host_y, char *err,
                                size_t errlen)
{
    return fake_forward_range(&n->m, params, first, last, host_x, batch, host_y, err, errlen);
}

static int resnet_backward_range(struct kern_cuda_resnet *n, const float *params, int first,
                                 int last, const float *host_dy, int batch, float *host_dx,
                                 float *grad, char *err, size_t errlen)
{
    return fake_backward_range(&n->m, params, first, last, host_dy, batch, host_dx, grad, err,
                               errlen);
}

/* ---- optimizers: the GPU kernels' element functions ---- */

static int fake_optim_step(struct kern_cuda_ctx *c, const struct kern_cuda_optim_step *h, float *p,
                           const float *g, float *first, float *second, size_t n, char *err,
                           size_t errlen)
{
    size_t bytes = n * sizeof(float);
    NEED_DEVICE("optimizer", p, bytes);
    NEED_DEVICE("optimizer", g, bytes);
    if (h->method != OPTIM_SGD) NEED_DEVICE("optimizer", first, bytes);
    if (h->method == OPTIM_ADAM) NEED_DEVICE("optimizer", second, bytes);
    for (size_t i = 0; i < n; i++) {
        switch (h->method) {
        case OPTIM_SGD:
            kern_sgd(&p[i], g[i], h->lr, h->weight_decay);
            break;
        case OPTIM_MOMENTUM:
        case OPTIM_NESTEROV:
            kern_momentum(&p[i], g[i], &first[i], h->lr, h->momentum, h->weight_decay,
                          h->method == OPTIM_NESTEROV);
            break;
        case OPTIM_ADAM:
            kern_adam(&p[i], g[i], &first[i], &second[i], h->lr, h->beta1, h->beta2, h->eps,
                      h->weight_decay, h->c1, h->c2);
            break;
        default:
            return kern_fail(err, errlen, "fake cuda optimizer: unknown method %d", h->method);
        }
    }
    return 0;
}

/* ---- the entry point ---- */

static const struct kern_cuda_ops ops = {
    .abi = KERN_CUDA_ABI,
    .size = sizeof(struct kern_cuda_ops),
    .architectures = "fake",
    .device_count = device_count,
    .ctx_create = ctx_create,
    .ctx_destroy = ctx_destroy,
    .alloc = mem_alloc,
    .free = mem_free,
    .copy = mem_copy,
    .fill = fill,
    .axpy = axpy,
    .scale = scale,
    .dot = dot,
    .sgemm = sgemm,
    .dense_create = dense_create,
    .dense_destroy = dense_destroy,
    .dense_reserve = dense_reserve,
    .dense_run = dense_run,
    .lenet_create = lenet_create,
    .lenet_destroy = lenet_destroy,
    .lenet_reserve = lenet_reserve,
    .lenet_run = lenet_run,
    .dense_forward_range = dense_forward_range,
    .dense_backward_range = dense_backward_range,
    .lenet_forward_range = lenet_forward_range,
    .lenet_backward_range = lenet_backward_range,
    .optim_step = fake_optim_step,
    .resnet_create = resnet_create,
    .resnet_destroy = resnet_destroy,
    .resnet_reserve = resnet_reserve,
    .resnet_run = resnet_run,
    .resnet_forward_range = resnet_forward_range,
    .resnet_backward_range = resnet_backward_range,
};

__attribute__((visibility("default"))) const struct kern_cuda_ops *hiernet_cuda_ops(void)
{
    return &ops;
}
