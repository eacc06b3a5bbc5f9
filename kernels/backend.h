/* backend.h — inside kernels/: one table of functions per device, as
 * libev has one per event backend. kernels/device.c implements the public
 * kern_* API (kernels/device.h) once: it checks arguments, keeps what every
 * device shares (the host model for parameter counts and initialisation,
 * the optimizer's configuration) and calls ctx->backend for the work.
 *
 *   kern_cpu_backend    kernels/cpu/backend.c: vec, model, optim over OpenBLAS
 *   kern_cuda_backend   kernels/cuda_backend.c: the CUDA module's ops table
 *
 * A backend learns a model's architecture from its struct model_spec
 * (kernels/model_spec.h, the one place that knows specs, limits and
 * layouts) and says which architectures it runs in model_archs. A new
 * device is a new table here and in kern_backend_of; a new architecture on
 * an existing device touches that device's model_open only.
 *
 * The structs below are the backends' view of the opaque handles of
 * device.h; nothing outside kernels/ includes this file. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/device.h"
#include "kernels/model_spec.h"

struct kern_cuda_ops;

struct kern_ctx {
    const struct kern_backend *backend;
    enum kern_device device;
    void *impl; /* the backend's device state (cuda: struct kern_cuda_ctx) */
    char describe[192];
};

struct kern_model {
    struct kern_ctx *ctx;
    /* Parsed spec, parameter count, initialisation on the host; on the cpu
     * it also runs the passes (workspace reserved by the cpu's model_open). */
    struct model *host;
    const struct model_spec *spec; /* host's layer table */
    void *impl;                    /* the backend's model state, if any */
};

struct kern_optim {
    struct kern_ctx *ctx;
    struct optim_config cfg; /* as configured; the cpu's optim keeps its own copy */
    size_t n;
    void *impl; /* cpu: struct optim; cuda: its state buffers on the device */
};

enum kern_copy_kind { KERN_COPY_TO_DEVICE, KERN_COPY_TO_HOST, KERN_COPY_ON_DEVICE };

/* Every function returns 0 or -1 with a message in err, as device.h's.
 * device.c has already checked what every device shares (sizes, the gemm
 * leading dimensions, the optimizer config), so a backend checks only what
 * is its own (a GPU kernel's bounds). */
struct kern_backend {
    enum kern_device device;
    int host_memory;      /* buffers are host memory: parameters initialised in place */
    unsigned model_archs; /* MODEL_ARCH_BIT of each architecture it runs */

    int (*ctx_open)(struct kern_ctx *ctx, char *err, size_t errlen); /* sets impl, describe */
    void (*ctx_close)(struct kern_ctx *ctx);

    int (*alloc)(struct kern_ctx *ctx, size_t n, float **out, char *err, size_t errlen);
    void (*free)(struct kern_ctx *ctx, float *buffer);
    int (*copy)(struct kern_ctx *ctx, float *dst, const float *src, size_t n,
                enum kern_copy_kind kind, char *err, size_t errlen);

    int (*fill)(struct kern_ctx *ctx, size_t n, float value, float *x, char *err, size_t errlen);
    int (*axpy)(struct kern_ctx *ctx, size_t n, float alpha, const float *x, float *y, char *err,
                size_t errlen);
    int (*scale)(struct kern_ctx *ctx, size_t n, float alpha, float *x, char *err, size_t errlen);
    int (*sum)(struct kern_ctx *ctx, size_t n, float *out, const float *const *inputs, size_t k,
               char *err, size_t errlen);
    int (*dot)(struct kern_ctx *ctx, size_t n, const float *x, const float *y, double *out,
               char *err, size_t errlen);
    int (*norm)(struct kern_ctx *ctx, size_t n, const float *x, double *out, char *err,
                size_t errlen);
    int (*sgemm)(struct kern_ctx *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                 char *err, size_t errlen);

    /* m->host and m->spec are set; max_batch 0 reserves nothing yet. */
    int (*model_open)(struct kern_model *m, int max_batch, char *err, size_t errlen);
    void (*model_close)(struct kern_model *m);
    int (*model_grad)(struct kern_model *m, const float *params, const float *host_x,
                      const int32_t *host_labels, int batch, float *grad, float *loss, char *err,
                      size_t errlen);
    int (*model_eval)(struct kern_model *m, const float *params, const float *host_x,
                      const int32_t *host_labels, size_t n, struct model_score *score, char *err,
                      size_t errlen);
    /* Layer ranges (device.h): the range, batch and host_dx already checked. */
    int (*model_forward_range)(struct kern_model *m, const float *params, int first, int last,
                               const float *host_x, int batch, float *host_y, char *err,
                               size_t errlen);
    int (*model_backward_range)(struct kern_model *m, const float *params, int first, int last,
                                const float *host_x, const float *host_dy, int batch,
                                float *host_dx, float *grad, char *err, size_t errlen);

    /* o->cfg (already validated) and o->n are set. */
    int (*optim_open)(struct kern_optim *o, char *err, size_t errlen);
    void (*optim_close)(struct kern_optim *o);
    /* cfg validated; o->cfg still holds the previous configuration. */
    int (*optim_configure)(struct kern_optim *o, const struct optim_config *cfg, char *err,
                           size_t errlen);
    int (*optim_step)(struct kern_optim *o, float *params, const float *grad, size_t n, char *err,
                      size_t errlen);
    int (*optim_reset)(struct kern_optim *o, char *err, size_t errlen);
    long (*optim_steps)(const struct kern_optim *o);
};

extern const struct kern_backend kern_cpu_backend;
extern const struct kern_backend kern_cuda_backend;

/* The CUDA module's ops (loaded on the first call), or NULL with the reason
 * in why ("this build has no CUDA support", "cannot load the CUDA kernels:
 * ..."). In device_probe.c, which needs no BLAS. */
const struct kern_cuda_ops *kern_cuda_module(char *why, size_t whylen);
