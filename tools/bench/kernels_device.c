/* kernels_device.c — one model's training step on a device (tools/bench/
 * kernels --device cuda runs it): kern_model_grad, the call a cuda peer's
 * grad{} makes, timed by the wall clock (every kern_* call is synchronous,
 * kernels/device.h), best of 5 rounds after a warm-up. The batch is
 * uploaded from host memory in every step, as a peer's is.
 *
 * Usage: bench_kernels_device --device cpu|cuda --model SPEC [--batch N]
 *        [--seconds S]
 * Prints one readable line, then one JSON object. Exits 2 on bad usage,
 * 1 when the device or a kernel fails, 77 when the device is not available
 * here (the reason on stderr). Owns everything it allocates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/device.h"
#include "kernels/model.h"
#include "kernels/rng.h"
#include "tools/bench/step_timer.h"

#define ROUNDS 5

struct options {
    enum kern_device device;
    const char *model;
    int batch;
    double seconds;
};

struct device_run {
    struct kern_ctx *ctx;
    struct kern_model *m;
    float *params, *grad; /* device buffers */
    float *x;             /* host */
    int32_t *labels;      /* host */
    int batch;
    char err[256];
};

static int step(void *arg)
{
    struct device_run *r = arg;
    float loss;
    return kern_model_grad(r->m, r->params, r->x, r->labels, r->batch, r->grad, &loss, r->err,
                           sizeof r->err);
}

/* Seconds per step: the best of ROUNDS rounds of at least seconds/ROUNDS. */
static int time_steps(struct device_run *r, double seconds, double *best)
{
    *best = 1e30;
    for (int round = 0; round < ROUNDS; round++) {
        double t = step_timer_round(step, r, seconds / ROUNDS, CLOCK_MONOTONIC);
        if (t < 0) return -1;
        if (t < *best) *best = t;
    }
    return 0;
}

/* The model's grad FLOPs per sample, from the CPU description of the same
 * architecture (the count does not depend on the device). */
static double flops_per_sample(const char *spec, int batch, char *err, size_t errlen)
{
    struct model *m;
    if (model_create(spec, batch, &m, err, errlen) < 0) return -1;
    double flops = model_grad_flops(m);
    model_destroy(m);
    return flops;
}

static int setup(struct device_run *r, const struct options *o)
{
    if (kern_ctx_create(o->device, &r->ctx, r->err, sizeof r->err) < 0 ||
        kern_model_create(r->ctx, o->model, o->batch, &r->m, r->err, sizeof r->err) < 0)
        return -1;
    size_t n = kern_model_param_count(r->m), in = (size_t)kern_model_input_size(r->m);
    if (kern_alloc(r->ctx, n, &r->params, r->err, sizeof r->err) < 0 ||
        kern_alloc(r->ctx, n, &r->grad, r->err, sizeof r->err) < 0 ||
        kern_model_init(r->m, r->params, NULL, 1, r->err, sizeof r->err) < 0)
        return -1;
    struct rng g;
    rng_seed(&g, 1, 0);
    r->x = step_timer_random_floats(&g, in * (size_t)o->batch);
    r->labels = malloc((size_t)o->batch * sizeof(int32_t));
    if (!r->x || !r->labels) {
        snprintf(r->err, sizeof r->err, "out of memory");
        return -1;
    }
    for (int i = 0; i < o->batch; i++)
        r->labels[i] = (int32_t)rng_below(&g, (uint64_t)kern_model_classes(r->m));
    return 0;
}

static void teardown(struct device_run *r)
{
    if (r->ctx) {
        kern_free(r->ctx, r->params);
        kern_free(r->ctx, r->grad);
    }
    kern_model_destroy(r->m);
    kern_ctx_destroy(r->ctx);
    free(r->x);
    free(r->labels);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.device = KERN_DEVICE_CUDA, .batch = 64, .seconds = 1.5};
    char err[128];
    if (argc % 2 == 0) return -1; /* a name without its value */
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--device")) {
            if (kern_device_parse(v, &o->device, err, sizeof err) < 0) return -1;
        } else if (!strcmp(argv[i], "--model"))
            o->model = v;
        else if (!strcmp(argv[i], "--batch"))
            o->batch = (int)step_timer_positive(v, true);
        else if (!strcmp(argv[i], "--seconds"))
            o->seconds = step_timer_positive(v, false);
        else
            return -1;
    }
    return o->model && o->batch > 0 && o->seconds > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: bench_kernels_device --device cpu|cuda --model SPEC [--batch N] "
                        "[--seconds S]\n");
        return 2;
    }
    char why[256];
    if (!kern_device_available(o.device, why, sizeof why)) {
        fprintf(stderr, "bench_kernels_device: %s not available: %s\n", kern_device_name(o.device),
                why);
        return 77;
    }
    struct device_run r = {.batch = o.batch};
    double flops = flops_per_sample(o.model, o.batch, r.err, sizeof r.err), t = 0;
    int rc = flops < 0 || setup(&r, &o) < 0 || step(&r) < 0 /* warm-up */ ||
             time_steps(&r, o.seconds, &t) < 0;
    if (rc) {
        fprintf(stderr, "bench_kernels_device: %s on %s: %s\n", o.model, kern_device_name(o.device),
                r.err);
    } else {
        printf("%s on %s, batch %d: %.3f ms/step, %.1f GFLOP/s (wall clock, best of %d)\n", o.model,
               kern_ctx_describe(r.ctx), o.batch, t * 1e3, flops * o.batch / t * 1e-9, ROUNDS);
        printf("{\"bench\":\"kernels_device\",\"device\":\"%s\",\"model\":\"%s\",\"batch\":%d,"
               "\"ms_per_step\":%.4f,\"gflops\":%.2f}\n",
               kern_device_name(o.device), o.model, o.batch, t * 1e3, flops * o.batch / t * 1e-9);
    }
    teardown(&r);
    return rc;
}
