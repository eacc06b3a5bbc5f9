/* kernels.c — benchmark of the model kernels (tools/bench/kernels runs it).
 *
 * For mlp:784-256-128-10, cnn:lenet and cnn:resnet20: model_grad
 * throughput in GFLOP/s
 * (model_grad_flops() per sample) next to raw cblas_sgemm running the very
 * GEMM shapes model_grad performs (model_gemm_shapes()), timed in the same
 * run on the same thread count; the ratio is the share of time model_grad
 * spends in GEMM, i.e. what im2col, pooling, bias, ReLU and softmax cost
 * (and resnet20's Winograd transforms: its GFLOP/s count the direct
 * convolution's flops, model_grad_flops(), so its sgemm figure exceeds
 * what the GEMMs compute by up to 2.25x).
 * Readable lines first, the JSON summary as the very last line.
 *
 * Usage: bench_kernels [--batch N] [--seconds S] [--threads T] [--model SPEC]
 * --model times that model alone, its JSON {"model", "ms_per_step", ...}:
 * tools/bench/kernels alternates it with PyTorch's step on the same shapes.
 * Owns everything it allocates; exits 2 on bad usage, 1 on kernel errors. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/model.h"
#include "kernels/rng.h"
#include "tools/bench/step_timer.h"

struct options {
    int batch;
    double seconds; /* per measurement */
    int threads;
    const char *model; /* NULL: every model */
};

/* The GEMMs of one model step. Operands are allocated once per distinct
 * shape, as the model reuses one column buffer for all its chunks. */
struct gemm_buffers {
    struct model_gemm_shape *shapes;
    int count;
    float **a, **b, **c;
    int *owner; /* the shape whose buffers shape i uses: itself or its first twin */
};

struct result {
    double model_gflops, sgemm_gflops, ms_per_step;
};

/* With one OpenBLAS thread all work runs on this thread, so its CPU time is
 * the cost of the work, unaffected by other processes taking the core away
 * (this host runs other tests alongside); with more threads, wall time. */
static clockid_t bench_clock = CLOCK_THREAD_CPUTIME_ID;

static int same_shape(const struct model_gemm_shape *x, const struct model_gemm_shape *y)
{
    return x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->m == y->m && x->n == y->n &&
           x->k == y->k;
}

static int gemm_setup(struct gemm_buffers *g, const struct model *m, int batch, struct rng *r)
{
    g->count = model_gemm_shapes(m, batch, NULL, 0);
    g->shapes = calloc((size_t)g->count, sizeof *g->shapes);
    g->a = calloc((size_t)g->count, sizeof *g->a);
    g->b = calloc((size_t)g->count, sizeof *g->b);
    g->c = calloc((size_t)g->count, sizeof *g->c);
    g->owner = calloc((size_t)g->count, sizeof *g->owner);
    if (!g->shapes || !g->a || !g->b || !g->c || !g->owner) return -1;
    model_gemm_shapes(m, batch, g->shapes, g->count);
    for (int i = 0; i < g->count; i++) {
        const struct model_gemm_shape *s = &g->shapes[i];
        int twin = 0;
        while (twin < i && !same_shape(&g->shapes[twin], s))
            twin++;
        g->owner[i] = twin;
        if (twin < i) continue; /* shares the buffers of shape `twin` (a is NULL here) */
        g->a[i] = step_timer_random_floats(r, (size_t)s->m * s->k);
        g->b[i] = step_timer_random_floats(r, (size_t)s->k * s->n);
        g->c[i] = step_timer_random_floats(r, (size_t)s->m * s->n);
        if (!g->a[i] || !g->b[i] || !g->c[i]) return -1;
    }
    return 0;
}

static void gemm_free(struct gemm_buffers *g)
{
    for (int i = 0; i < g->count && g->a; i++) {
        free(g->a[i]);
        free(g->b[i]);
        free(g->c[i]);
    }
    free(g->shapes);
    free(g->a);
    free(g->b);
    free(g->c);
    free(g->owner);
}

/* One model step's worth of GEMMs, with the leading dimensions the model
 * uses for each transpose combination (row-major). */
static void gemm_step(const struct gemm_buffers *g)
{
    for (int i = 0; i < g->count; i++) {
        const struct model_gemm_shape *s = &g->shapes[i];
        int o = g->owner[i]; /* looked up once: resnet20's Winograd layers run thousands */
        cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                    s->trans_b ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, g->a[o],
                    s->trans_a ? s->m : s->k, g->b[o], s->trans_b ? s->k : s->n, 0.0f, g->c[o],
                    s->n);
    }
}

struct model_run {
    struct model *m;
    float *params, *grad, *x;
    int32_t *labels;
    int batch;
};

#define ROUNDS 5

/* Best-of-ROUNDS for both, in alternating rounds, so that load from other
 * processes on the host hits both sides alike instead of skewing the ratio. */
static int time_pair(int (*a)(void *), void *a_arg, int (*b)(void *), void *b_arg, double budget,
                     double *t_a, double *t_b)
{
    *t_a = *t_b = 1e30;
    for (int round = 0; round < ROUNDS; round++) {
        double ta = step_timer_round(a, a_arg, budget / ROUNDS, bench_clock);
        double tb = step_timer_round(b, b_arg, budget / ROUNDS, bench_clock);
        if (ta < 0 || tb < 0) return -1;
        *t_a = ta < *t_a ? ta : *t_a;
        *t_b = tb < *t_b ? tb : *t_b;
    }
    return 0;
}

static int model_step(void *arg)
{
    struct model_run *r = arg;
    char err[256];
    float loss;
    if (model_grad(r->m, r->params, r->x, r->labels, r->batch, r->grad, &loss, err, sizeof err)) {
        fprintf(stderr, "bench_kernels: %s\n", err);
        return -1;
    }
    return 0;
}

static int sgemm_step(void *arg)
{
    gemm_step(arg);
    return 0;
}

static int bench_model(const char *spec, const struct options *o, struct result *res)
{
    char err[256];
    struct model_run run = {.batch = o->batch};
    if (model_create(spec, o->batch, &run.m, err, sizeof err) < 0) {
        fprintf(stderr, "bench_kernels: %s\n", err);
        return -1;
    }
    struct rng r;
    rng_seed(&r, 1, 0);
    size_t n = model_param_count(run.m), in = (size_t)model_input_size(run.m);
    run.params = malloc(n * sizeof(float));
    run.grad = malloc(n * sizeof(float));
    run.x = step_timer_random_floats(&r, in * o->batch);
    run.labels = malloc((size_t)o->batch * sizeof(int32_t));
    model_init(run.m, run.params, NULL, 1, err, sizeof err);
    for (int i = 0; i < o->batch; i++)
        run.labels[i] = (int32_t)rng_below(&r, (uint64_t)model_classes(run.m));
    struct gemm_buffers g = {0};
    if (gemm_setup(&g, run.m, o->batch, &r) < 0 || !run.params || !run.grad || !run.x ||
        !run.labels) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return -1;
    }

    double flops = model_grad_flops(run.m) * o->batch;
    model_step(&run); /* warm-up: workspace, OpenBLAS buffers, caches */
    gemm_step(&g);
    double t_model, t_sgemm;
    int rc = time_pair(model_step, &run, sgemm_step, &g, o->seconds, &t_model, &t_sgemm);
    res->model_gflops = flops / t_model * 1e-9;
    res->sgemm_gflops = flops / t_sgemm * 1e-9;
    res->ms_per_step = t_model * 1e3;
    printf("%-20s batch %d: %.2f MFLOP/sample, %d GEMMs/step, %.3f ms/step; grad %.2f GFLOP/s, "
           "sgemm same shapes %.2f GFLOP/s, ratio %.3f\n",
           spec, o->batch, model_grad_flops(run.m) * 1e-6, g.count, res->ms_per_step,
           res->model_gflops, res->sgemm_gflops, res->model_gflops / res->sgemm_gflops);
    gemm_free(&g);
    free(run.params);
    free(run.grad);
    free(run.x);
    free(run.labels);
    model_destroy(run.m);
    return rc;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.batch = 64, .seconds = 1.5, .threads = 1};
    for (int i = 1; i + 1 < argc; i += 2) { /* --name value pairs */
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--batch"))
            o->batch = (int)step_timer_positive(v, true);
        else if (!strcmp(argv[i], "--seconds"))
            o->seconds = step_timer_positive(v, false);
        else if (!strcmp(argv[i], "--threads"))
            o->threads = (int)step_timer_positive(v, true);
        else if (!strcmp(argv[i], "--model"))
            o->model = v;
        else
            return -1;
    }
    if (argc % 2 == 0) return -1; /* a name without its value */
    return o->batch > 0 && o->seconds > 0 && o->threads > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o) < 0) {
        fprintf(stderr,
                "usage: bench_kernels [--batch N] [--seconds S] [--threads T] [--model SPEC]\n");
        return 2;
    }
    openblas_set_num_threads(o.threads);
    bench_clock = o.threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    printf("OpenBLAS %s, %d thread(s); GFLOP/s count 2 per multiply-add of the GEMMs, "
           "timed by %s\n",
           openblas_get_config(), o.threads, o.threads == 1 ? "thread CPU time" : "wall clock");
    const char *clock_name = o.threads == 1 ? "thread_cpu" : "wall";
    if (o.model) {
        struct result one;
        if (bench_model(o.model, &o, &one) < 0) return 1;
        printf("{\"bench\":\"kernels\",\"model\":\"%s\",\"batch\":%d,\"threads\":%d,"
               "\"clock\":\"%s\",\"gflops\":%.2f,\"sgemm_gflops\":%.2f,\"ms_per_step\":%.3f}\n",
               o.model, o.batch, o.threads, clock_name, one.model_gflops, one.sgemm_gflops,
               one.ms_per_step);
        return 0;
    }
    struct result mlp, cnn, res;
    if (bench_model("mlp:784-256-128-10", &o, &mlp) < 0 || bench_model("cnn:lenet", &o, &cnn) < 0 ||
        bench_model("cnn:resnet20", &o, &res) < 0)
        return 1;
    printf("{\"bench\":\"kernels\",\"batch\":%d,\"threads\":%d,\"clock\":\"%s\","
           "\"mlp_gflops\":%.2f,\"mlp_sgemm_gflops\":%.2f,\"mlp_ratio\":%.3f,"
           "\"mlp_ms_per_step\":%.3f,"
           "\"cnn_gflops\":%.2f,\"cnn_sgemm_gflops\":%.2f,\"cnn_ratio\":%.3f,"
           "\"cnn_ms_per_step\":%.3f,"
           "\"resnet_gflops\":%.2f,\"resnet_sgemm_gflops\":%.2f,\"resnet_ratio\":%.3f,"
           "\"resnet_ms_per_step\":%.3f}\n",
           o.batch, o.threads, clock_name, mlp.model_gflops, mlp.sgemm_gflops,
           mlp.model_gflops / mlp.sgemm_gflops, mlp.ms_per_step, cnn.model_gflops, cnn.sgemm_gflops,
           cnn.model_gflops / cnn.sgemm_gflops, cnn.ms_per_step, res.model_gflops, res.sgemm_gflops,
           res.model_gflops / res.sgemm_gflops, res.ms_per_step);
    return 0;
}
