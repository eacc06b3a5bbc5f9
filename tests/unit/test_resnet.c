/* test_resnet.c — cnn:resnet20 on the CPU without PyTorch: its layer table
 * and flat layout (counts derived by hand from He et al.'s architecture),
 * flops, init, the batch statistics in the gradient's tail, evaluation by
 * the running statistics, and finite differences of the training loss
 * along directions in every parameter block (test_resnet_torch compares
 * with PyTorch element by element). */
#include <cblas.h>
#include <stdint.h>

#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/rng.h"
#include "tests/unit/check.h"

enum { BATCH = 4 };

static char err[256];

/* 3x3 convs: 1->16 (28x28); 6 of 16->16; 16->32 (stride 2); 5 of 32->32;
 * 32->64 (stride 2); 5 of 64->64; 19 batch norms of 2C; dense 64->10. */
static void test_layout(void)
{
    struct model_spec s;
    CHECK(model_spec_parse("cnn:resnet20", &s, err, sizeof err) == 0);
    CHECK(s.arch == MODEL_ARCH_RESNET && s.layer_count == 49);
    size_t convs =
        9 * 16 + 6 * 16 * 16 * 9 + 16 * 32 * 9 + 5 * 32 * 32 * 9 + 32 * 64 * 9 + 5 * 64 * 64 * 9;
    size_t bn_channels = 16 + 6 * 16 + 6 * 32 + 6 * 64;
    CHECK_MSG(s.trainable_count == convs + 2 * bn_channels + 64 * 10 + 10, "%zu",
              s.trainable_count);
    CHECK(s.trainable_count == 269434);
    CHECK(s.param_count == s.trainable_count + 2 * bn_channels && s.param_count == 270810);
    /* conv1.weight, bn1.weight, bn1.bias, layer1.0.conv1.weight: state_dict order */
    CHECK(s.layers[0].kind == MODEL_LAYER_CONV && !s.layers[0].bias &&
          s.layers[0].weight_offset == 0);
    CHECK(s.layers[1].kind == MODEL_LAYER_BATCHNORM && s.layers[1].weight_offset == 144 &&
          s.layers[1].bias_offset == 160 && s.layers[2].weight_offset == 176);
    CHECK(s.layers[1].stat_offset == 269434 && s.layers[3].stat_offset == 269434 + 32);
    /* Block 4 (the first of stage 2): stride 2, its add takes block 3's output. */
    const struct model_layer *down = &s.layers[17], *add = &s.layers[21];
    CHECK(down->kind == MODEL_LAYER_CONV && down->stride == 2 && down->out_h == 14 &&
          down->out_c == 32);
    CHECK(add->kind == MODEL_LAYER_RESIDUAL && add->skip_from == 16 && add->out_c == 32);
    CHECK(s.layers[47].kind == MODEL_LAYER_AVGPOOL && s.layers[47].in_h == 7 &&
          s.layers[47].out_size == 64);
    CHECK(model_spec_classes(&s) == 10 && model_spec_input_size(&s) == 784);
    CHECK_STREQ(model_arch_name(s.arch), "cnn:resnet20");
    CHECK(model_spec_parse("cnn:resnet", &s, err, sizeof err) < 0);
    CHECK_STREQ(err, "model spec \"cnn:resnet\": unknown cnn (known: cnn:lenet, cnn:resnet20)");
}

/* 2 flops per multiply-accumulate of the convs and the dense layer. */
static void test_flops(void)
{
    struct model *m;
    CHECK(model_create("cnn:resnet20", 0, &m, err, sizeof err) == 0);
    double macs = 9.0 * 16 * 784 + 6.0 * 144 * 16 * 784 + 144.0 * 32 * 196 + 5.0 * 288 * 32 * 196 +
                  288.0 * 64 * 49 + 5.0 * 576 * 64 * 49 + 640;
    CHECK_NEAR(model_forward_flops(m), 2 * macs, 0.5);
    CHECK_NEAR(model_forward_flops(m), 61642496.0, 0.5);
    /* backward: weight gradients everywhere, input gradients but the first */
    CHECK_NEAR(model_grad_flops(m), 2 * (3 * macs - 9.0 * 16 * 784), 0.5);
    CHECK(model_trainable_count(m) == 269434 && model_param_count(m) == 270810);
    model_destroy(m);
}

static void make_batch(struct rng *r, float *x, int32_t *y, int n)
{
    for (size_t i = 0; i < (size_t)n * 784; i++)
        x[i] = rng_uniform_float(r);
    for (int i = 0; i < n; i++)
        y[i] = (int32_t)rng_below(r, 10);
}

/* init: gamma 1, beta 0, running mean 0 and var 1, for every method. */
static void test_init(void)
{
    struct model *m;
    CHECK(model_create("cnn:resnet20", 0, &m, err, sizeof err) == 0);
    const struct model_spec *s = model_layout(m);
    float *p = malloc(model_param_count(m) * sizeof(float));
    CHECK(model_init(m, p, "zeros", 1, err, sizeof err) == 0);
    const struct model_layer *bn = &s->layers[1];
    CHECK(p[bn->weight_offset] == 1.0f && p[bn->bias_offset] == 0.0f);
    CHECK(p[bn->stat_offset] == 0.0f && p[bn->stat_offset + 16] == 1.0f);
    CHECK(p[0] == 0.0f);
    CHECK(model_init(m, p, NULL, 1, err, sizeof err) == 0);
    CHECK(p[0] != 0.0f && p[bn->stat_offset + 16] == 1.0f);
    free(p);
    model_destroy(m);
}

static double training_loss(struct model *m, const float *p, const float *x, const int32_t *y,
                            float *scratch)
{
    float loss = NAN;
    CHECK(model_grad(m, p, x, y, BATCH, scratch, &loss, err, sizeof err) == 0);
    return loss;
}

/* The derivative of the training-mode loss along d = (g/|g| + r)/2 on one
 * parameter block (r a random unit vector), by central differences, against
 * g . d. A block's whole direction moves the loss by ~1e-4, far above the
 * float32 loss's ~2e-7 noise, where one coordinate's would drown in it. */
static double directional_error(struct model *m, float *p, const float *g, size_t from, size_t to,
                                const float *x, const int32_t *y, struct rng *r, float *scratch)
{
    size_t n = to - from;
    double gnorm = 0, rnorm = 0, slope = 0, h = 3e-3;
    float *d = malloc(n * sizeof(float)), *saved = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        d[i] = rng_uniform_float(r) - 0.5f;
        rnorm += (double)d[i] * d[i];
        gnorm += (double)g[from + i] * g[from + i];
    }
    for (size_t i = 0; i < n; i++) {
        d[i] = (float)(0.5 * (g[from + i] / sqrt(gnorm) + d[i] / sqrt(rnorm)));
        slope += (double)g[from + i] * d[i];
        saved[i] = p[from + i];
    }
    for (size_t i = 0; i < n; i++)
        p[from + i] = saved[i] + (float)h * d[i];
    double up = training_loss(m, p, x, y, scratch);
    for (size_t i = 0; i < n; i++)
        p[from + i] = saved[i] - (float)h * d[i];
    double down = training_loss(m, p, x, y, scratch);
    memcpy(p + from, saved, n * sizeof(float));
    free(d);
    free(saved);
    return fabs((up - down) / (2 * h) - slope) / fmax(fabs(slope), 1e-6);
}

static void test_finite_differences(void)
{
    struct model *m;
    CHECK(model_create("cnn:resnet20", BATCH, &m, err, sizeof err) == 0);
    const struct model_spec *s = model_layout(m);
    size_t n = model_param_count(m);
    float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    float *scratch = malloc(n * sizeof(float)), x[BATCH * 784];
    int32_t y[BATCH];
    struct rng r;
    rng_seed(&r, 3, 0);
    CHECK(model_init(m, p, NULL, 11, err, sizeof err) == 0);
    for (size_t i = 0; i < s->trainable_count; i++) /* gamma != 1, beta != 0 */
        p[i] += 0.1f * (rng_uniform_float(&r) - 0.5f);
    make_batch(&r, x, y, BATCH);
    float loss;
    CHECK(model_grad(m, p, x, y, BATCH, g, &loss, err, sizeof err) == 0);
    double worst = 0;
    int blocks = 0;
    for (int i = 0; i < s->layer_count; i++) {
        const struct model_layer *l = &s->layers[i];
        if (l->kind != MODEL_LAYER_CONV && l->kind != MODEL_LAYER_DENSE &&
            l->kind != MODEL_LAYER_BATCHNORM)
            continue;
        size_t end = l->bias_offset + (l->bias ? (size_t)l->out_c : 0);
        if (l->kind == MODEL_LAYER_BATCHNORM) end = l->bias_offset + (size_t)l->out_c;
        double e = directional_error(m, p, g, l->weight_offset, l->bias_offset, x, y, &r, scratch);
        if (end > l->bias_offset)
            e = fmax(e, directional_error(m, p, g, l->bias_offset, end, x, y, &r, scratch));
        CHECK_MSG(e < 5e-2, "layer %d: directional derivative off by %.3g", i, e);
        worst = fmax(worst, e);
        blocks++;
    }
    printf("resnet20: %d layers' blocks checked by finite differences, worst relative error %.2g\n",
           blocks, worst);
    free(p);
    free(g);
    free(scratch);
    model_destroy(m);
}

/* The gradient's tail holds each batch norm's batch mean and unbiased
 * variance; model_eval normalises by the running statistics instead. */
static void test_statistics(void)
{
    struct model *m;
    CHECK(model_create("cnn:resnet20", BATCH, &m, err, sizeof err) == 0);
    const struct model_spec *s = model_layout(m);
    size_t n = model_param_count(m);
    float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float)), x[BATCH * 784];
    int32_t y[BATCH];
    struct rng r;
    rng_seed(&r, 5, 0);
    CHECK(model_init(m, p, NULL, 2, err, sizeof err) == 0);
    make_batch(&r, x, y, BATCH);
    float loss;
    CHECK(model_grad(m, p, x, y, BATCH, g, &loss, err, sizeof err) == 0);
    /* The first conv's output is W x: its channel-0 mean over the batch by hand. */
    double sum = 0;
    for (int b = 0; b < BATCH; b++)
        for (int oy = 0; oy < 28; oy++)
            for (int ox = 0; ox < 28; ox++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) {
                        int iy = oy + ky - 1, ix = ox + kx - 1;
                        if (iy >= 0 && iy < 28 && ix >= 0 && ix < 28)
                            sum += (double)p[ky * 3 + kx] * x[b * 784 + iy * 28 + ix];
                    }
    const struct model_layer *bn = &s->layers[1];
    CHECK_NEAR(g[bn->stat_offset], sum / (BATCH * 784), 1e-5);
    CHECK(g[bn->stat_offset + 16] > 0);
    struct model_score a = {0}, b = {0};
    CHECK(model_eval(m, p, x, y, BATCH, &a, err, sizeof err) == 0);
    p[s->layers[3].stat_offset + 32] = 4.0f; /* a running variance */
    CHECK(model_eval(m, p, x, y, BATCH, &b, err, sizeof err) == 0);
    CHECK_MSG(fabs(model_score_loss(&a) - model_score_loss(&b)) > 1e-6, "eval ignored it");
    float loss2;
    CHECK(model_grad(m, p, x, y, BATCH, g, &loss2, err, sizeof err) == 0);
    CHECK(loss2 == loss); /* training normalises by the batch's own */
    free(p);
    free(g);
    model_destroy(m);
}

int main(void)
{
    openblas_set_num_threads(1);
    test_layout();
    test_flops();
    test_init();
    test_statistics();
    test_finite_differences();
    return check_report();
}
