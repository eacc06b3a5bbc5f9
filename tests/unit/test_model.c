/* test_model.c — kernels/model: spec parsing and its errors, parameter
 * counts and flops, deterministic init, hand-computed logreg loss, and
 * finite-difference gradient checks of logreg, an mlp and cnn:lenet. */
#include <cblas.h>
#include <stdint.h>

#include "kernels/model.h"
#include "kernels/rng.h"
#include "tests/unit/check.h"

struct block {
    size_t offset, count;
};

static void test_specs(void)
{
    char err[256];
    struct model *m;
    CHECK(model_create("logreg:784-10", 0, &m, err, sizeof err) == 0);
    CHECK(model_param_count(m) == 7850);
    CHECK(model_input_size(m) == 784 && model_classes(m) == 10);
    CHECK_STREQ(model_spec(m), "logreg:784-10");
    model_destroy(m);

    CHECK(model_create("mlp:784-128-10", 32, &m, err, sizeof err) == 0);
    CHECK(model_param_count(m) == 784 * 128 + 128 + 128 * 10 + 10);
    CHECK_NEAR(model_forward_flops(m), 2.0 * (784 * 128 + 128 * 10), 0);
    CHECK_NEAR(model_grad_flops(m), 2.0 * (784 * 128 * 2 + 128 * 10 * 3), 0);
    model_destroy(m);

    CHECK(model_create("cnn:lenet", 0, &m, err, sizeof err) == 0);
    CHECK(model_param_count(m) == 61706); /* the classic LeNet-5 count */
    CHECK(model_input_size(m) == 784 && model_classes(m) == 10);
    CHECK_NEAR(model_forward_flops(m), 2.0 * 416520, 0);
    CHECK_NEAR(model_grad_flops(m), 2.0 * (117600 * 2 + (240000 + 48000 + 10080 + 840) * 3), 0);
    /* The GEMM shapes are exactly the work model_grad_flops() counts. */
    struct model_gemm_shape shapes[256];
    int count = model_gemm_shapes(m, 8, NULL, 0);
    CHECK(count >= 14 && count <= 256 && model_gemm_shapes(m, 8, shapes, 256) == count);
    CHECK(shapes[0].m == 6 && shapes[0].k == 25);
    double shape_flops = 0;
    for (int i = 0; i < count && i < 256; i++)
        shape_flops += 2.0 * shapes[i].m * shapes[i].n * shapes[i].k;
    CHECK_NEAR(shape_flops, 8 * model_grad_flops(m), 0);
    model_destroy(m);

    static const char *bad[] = {
        "mlp:784--10",  "mlp:784",     "logreg:1-2-3", "foo:1-2",     "cnn:alexnet",
        "mlp:784-0-10", "mlp:784-10x", "mlp:",         "logreg:-5-3", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        m = (struct model *)1;
        CHECK(model_create(bad[i], 0, &m, err, sizeof err) == -1);
        CHECK(m == NULL);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        CHECK_CONTAINS(err, quoted);
    }
    /* The size at fault is named as written, with its place. */
    CHECK(model_create("mlp:784-10-x", 0, &m, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "the third layer size 'x' is not a whole number from 1 to");
    CHECK(model_create("mlp:784-0-10", 0, &m, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "the second layer size '0'");
}

static void test_init(void)
{
    char err[256];
    struct model *m;
    CHECK(model_create("mlp:20-16-5", 0, &m, err, sizeof err) == 0);
    size_t n = model_param_count(m);
    float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float));
    CHECK(model_init(m, a, NULL, 7, err, sizeof err) == 0);
    CHECK(model_init(m, b, "default", 7, err, sizeof err) == 0);
    CHECK(memcmp(a, b, n * sizeof(float)) == 0);
    CHECK(model_init(m, b, NULL, 8, err, sizeof err) == 0);
    CHECK(memcmp(a, b, n * sizeof(float)) != 0);
    /* He bound for the 20-16 layer, zero biases. */
    float bound = sqrtf(6.0f / 20.0f), max = 0;
    for (int i = 0; i < 20 * 16; i++)
        max = fabsf(a[i]) > max ? fabsf(a[i]) : max;
    CHECK(max <= bound && max > 0.8f * bound);
    CHECK(a[20 * 16] == 0.0f && a[n - 1] == 0.0f);
    CHECK(model_init(m, b, "zeros", 1, err, sizeof err) == 0);
    CHECK(b[0] == 0.0f && b[n / 2] == 0.0f);
    CHECK(model_init(m, b, "lecun", 1, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "lecun");
    free(a);
    free(b);
    model_destroy(m);
}

/* logreg:2-2 with W = I, b = 0 on x = (1, 0): logits (1, 0), so the loss of
 * label 0 is log(1 + e^-1) and d loss / d W[0][0] = softmax_0 - 1. */
static void test_logreg_by_hand(void)
{
    char err[256];
    struct model *m;
    CHECK(model_create("logreg:2-2", 4, &m, err, sizeof err) == 0);
    float params[6] = {1, 0, 0, 1, 0, 0}, grad[6], loss;
    float x[2] = {1, 0};
    int32_t label = 0;
    CHECK(model_grad(m, params, x, &label, 1, grad, &loss, err, sizeof err) == 0);
    double p0 = 1.0 / (1.0 + exp(-1.0));
    CHECK_NEAR(loss, log(1.0 + exp(-1.0)), 1e-6);
    CHECK_NEAR(grad[0], p0 - 1.0, 1e-6);
    CHECK_NEAR(grad[1], 0.0, 1e-7);
    CHECK_NEAR(grad[2], 1.0 - p0, 1e-6);
    CHECK_NEAR(grad[4], p0 - 1.0, 1e-6);
    CHECK_NEAR(grad[5], 1.0 - p0, 1e-6);

    struct model_score score = {0};
    CHECK(model_eval(m, params, x, &label, 1, &score, err, sizeof err) == 0);
    CHECK(score.samples == 1 && score.correct == 1);
    CHECK_NEAR(model_score_loss(&score), loss, 1e-6);

    label = 2;
    CHECK(model_grad(m, params, x, &label, 1, grad, &loss, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "label 2");
    CHECK(model_grad(m, params, x, &label, 0, grad, &loss, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "batch 0");
    model_destroy(m);
}

static double mean_loss(struct model *m, const float *p, const float *x, const int32_t *y, int n)
{
    struct model_score s = {0};
    char err[256];
    if (model_eval(m, p, x, y, (size_t)n, &s, err, sizeof err) < 0) return NAN;
    return model_score_loss(&s);
}

/* ---- a double-precision reference of cnn:lenet (layout of model.h) ----
 * The float32 quotient is too noisy for lenet: with thousands of ReLU and
 * max-pool units a 1e-3 step moves several across a kink (errors of 10%
 * measured), and a 1e-4 step drowns in float rounding (~1e-3 absolute). So
 * lenet's differences are taken on this naive double forward pass, with
 * eps = 1e-6; it also checks model.h's layout independently. */

/* One sample, maps stored [c][y][x]; weights W[o][c][ky][kx] (model.h). */
static const double *ref_conv(const float *p, size_t *off, const double *in, int c, int hw, int oc,
                              int pad, double *out)
{
    int ohw = hw + 2 * pad - 4;
    const float *w = p + *off, *b = w + (size_t)oc * 25 * c;
    for (int o = 0; o < oc; o++)
        for (int oy = 0; oy < ohw; oy++)
            for (int ox = 0; ox < ohw; ox++) {
                double s = b[o];
                for (int ch = 0; ch < c; ch++)
                    for (int ky = 0; ky < 5; ky++)
                        for (int kx = 0; kx < 5; kx++) {
                            int iy = oy + ky - pad, ix = ox + kx - pad;
                            if (iy >= 0 && ix >= 0 && iy < hw && ix < hw)
                                s += w[((o * c + ch) * 5 + ky) * 5 + kx] *
                                     in[(ch * hw + iy) * hw + ix];
                        }
                out[(o * ohw + oy) * ohw + ox] = s > 0 ? s : 0;
            }
    *off += (size_t)oc * 25 * c + oc;
    return out;
}

static const double *ref_pool(const double *in, int c, int hw, double *out)
{
    int oh = hw / 2;
    for (int ch = 0; ch < c; ch++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < oh; ox++) {
                double m = -INFINITY;
                for (int k = 0; k < 4; k++)
                    m = fmax(m, in[(ch * hw + 2 * oy + k / 2) * hw + 2 * ox + k % 2]);
                out[(ch * oh + oy) * oh + ox] = m;
            }
    return out;
}

static const double *ref_dense(const float *p, size_t *off, const double *in, int n_in, int n_out,
                               int relu, double *out)
{
    const float *w = p + *off, *b = w + (size_t)n_in * n_out;
    for (int o = 0; o < n_out; o++) {
        double s = b[o];
        for (int i = 0; i < n_in; i++)
            s += w[(size_t)o * n_in + i] * in[i];
        out[o] = relu && s < 0 ? 0 : s;
    }
    *off += (size_t)n_in * n_out + n_out;
    return out;
}

static double ref_lenet_loss(const float *p, const float *x, const int32_t *y, int batch)
{
    static double in[784], c1[4704], p1[1176], c2[1600], p2[400], f1[120], f2[84], z[10];
    double total = 0;
    for (int b = 0; b < batch; b++) {
        size_t off = 0;
        for (int i = 0; i < 784; i++)
            in[i] = x[(size_t)b * 784 + i];
        ref_pool(ref_conv(p, &off, in, 1, 28, 6, 2, c1), 6, 28, p1);
        ref_pool(ref_conv(p, &off, p1, 6, 14, 16, 0, c2), 16, 10, p2);
        ref_dense(p, &off, ref_dense(p, &off, p2, 400, 120, 1, f1), 120, 84, 1, f2);
        ref_dense(p, &off, f2, 84, 10, 0, z);
        double max = z[0], sum = 0;
        for (int c = 1; c < 10; c++)
            max = fmax(max, z[c]);
        for (int c = 0; c < 10; c++)
            sum += exp(z[c] - max);
        total += log(sum) - (z[y[b]] - max);
    }
    return total / batch;
}

/* Mean loss at params p: the model's own float forward pass, or the double
 * reference when one is given. */
static double loss_at(struct model *m, const float *p, const float *x, const int32_t *y, int n,
                      int use_ref)
{
    return use_ref ? ref_lenet_loss(p, x, y, n) : mean_loss(m, p, x, y, n);
}

/* Central differences on 12 random coordinates of every parameter block.
 * float32 forward passes give ~1e-7 relative noise in the loss, so eps = 1e-3
 * keeps the quotient of the small models accurate to ~1e-4. */
static void gradient_check(const char *spec, const struct block *blocks, int nblocks, int batch,
                           int use_ref)
{
    float eps = use_ref ? 1e-6f : 1e-3f;
    char err[256];
    struct model *m;
    CHECK(model_create(spec, batch, &m, err, sizeof err) == 0);
    size_t n = model_param_count(m), in = (size_t)model_input_size(m);
    float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    float *x = malloc(in * batch * sizeof(float));
    int32_t *y = malloc(batch * sizeof(int32_t));
    struct rng r;
    rng_seed(&r, 42, 0);
    CHECK(model_init(m, p, NULL, 3, err, sizeof err) == 0);
    for (size_t i = 0; i < n; i++) /* non-zero biases exercise their gradients */
        p[i] += 0.05f * (rng_uniform_float(&r) - 0.5f);
    for (size_t i = 0; i < in * batch; i++)
        x[i] = rng_uniform_float(&r);
    for (int i = 0; i < batch; i++)
        y[i] = (int32_t)rng_below(&r, (uint64_t)model_classes(m));
    float loss;
    CHECK(model_grad(m, p, x, y, batch, g, &loss, err, sizeof err) == 0);
    CHECK_NEAR(loss, mean_loss(m, p, x, y, batch), 1e-5);
    if (use_ref) CHECK_NEAR(loss, ref_lenet_loss(p, x, y, batch), 1e-5);

    int checked = 0, bad = 0;
    double worst = 0;
    for (int b = 0; b < nblocks; b++) {
        for (int t = 0; t < 12; t++) {
            size_t i = blocks[b].offset + rng_below(&r, blocks[b].count);
            float saved = p[i];
            p[i] = saved + eps;
            double up = loss_at(m, p, x, y, batch, use_ref);
            float step_up = p[i] - saved; /* the step float can represent */
            p[i] = saved - eps;
            double down = loss_at(m, p, x, y, batch, use_ref);
            float step_down = saved - p[i];
            p[i] = saved;
            double fd = (up - down) / ((double)step_up + (double)step_down);
            double diff = fabs(fd - g[i]);
            double rel = diff / fmax(fmax(fabs(fd), fabs(g[i])), 1e-2);
            worst = rel > worst ? rel : worst;
            checked++;
            if (rel > 1e-2) {
                bad++;
                fprintf(stderr, "%s: param %zu analytic %.6g numeric %.6g\n", spec, i, g[i], fd);
            }
        }
    }
    printf("%s: %d coordinates checked, worst relative error %.2g\n", spec, checked, worst);
    CHECK_MSG(bad == 0, "%s: %d of %d coordinates off", spec, bad, checked);

    /* The gradient is a mean: two copies of the batch give the same one. */
    float *g2 = malloc(n * sizeof(float)), *x2 = malloc(2 * in * batch * sizeof(float));
    int32_t *y2 = malloc(2 * batch * sizeof(int32_t));
    memcpy(x2, x, in * batch * sizeof(float));
    memcpy(x2 + in * batch, x, in * batch * sizeof(float));
    memcpy(y2, y, batch * sizeof(int32_t));
    memcpy(y2 + batch, y, batch * sizeof(int32_t));
    float loss2;
    CHECK(model_grad(m, p, x2, y2, 2 * batch, g2, &loss2, err, sizeof err) == 0);
    CHECK_NEAR(loss2, loss, 1e-5);
    double maxdiff = 0;
    for (size_t i = 0; i < n; i++)
        maxdiff = fmax(maxdiff, fabs(g2[i] - g[i]));
    CHECK_MSG(maxdiff < 1e-5, "%s: doubled batch grad differs by %g", spec, maxdiff);
    free(g2);
    free(x2);
    free(y2);
    free(p);
    free(g);
    free(x);
    free(y);
    model_destroy(m);
}

/* Past MODEL_KEEP_COLUMNS_BYTES (16 MiB: batch 122 for lenet) convolution
 * rebuilds its columns in chunks; a 130-sample gradient that way must equal
 * the mean of two 65-sample gradients computed with kept columns. */
static void test_conv_chunked_path(void)
{
    enum { N = 130, HALF = 65 };
    char err[256];
    struct model *big, *small;
    CHECK(model_create("cnn:lenet", N, &big, err, sizeof err) == 0);
    CHECK(model_create("cnn:lenet", HALF, &small, err, sizeof err) == 0);
    /* One GEMM per conv layer and direction means columns kept; more, chunks. */
    CHECK(model_gemm_shapes(small, HALF, NULL, 0) == 14);
    CHECK(model_gemm_shapes(big, N, NULL, 0) > 14);
    size_t n = model_param_count(big);
    float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    float *g1 = malloc(n * sizeof(float)), *g2 = malloc(n * sizeof(float));
    float *x = malloc((size_t)N * 784 * sizeof(float));
    int32_t y[N];
    struct rng r;
    rng_seed(&r, 8, 0);
    for (size_t i = 0; i < (size_t)N * 784; i++)
        x[i] = rng_uniform_float(&r);
    for (int i = 0; i < N; i++)
        y[i] = (int32_t)rng_below(&r, 10);
    CHECK(model_init(big, p, NULL, 5, err, sizeof err) == 0);
    float loss, l1, l2;
    CHECK(model_grad(big, p, x, y, N, g, &loss, err, sizeof err) == 0);
    CHECK(model_grad(small, p, x, y, HALF, g1, &l1, err, sizeof err) == 0);
    CHECK(model_grad(small, p, x + HALF * 784, y + HALF, HALF, g2, &l2, err, sizeof err) == 0);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(g[i] - 0.5 * (g1[i] + g2[i])));
        scale = fmax(scale, fabs(g[i]));
    }
    CHECK_NEAR(loss, 0.5 * (l1 + l2), 1e-5);
    CHECK_MSG(worst <= 1e-5 * scale, "chunked conv gradient off by %g (scale %g)", worst, scale);
    free(p);
    free(g);
    free(g1);
    free(g2);
    free(x);
    model_destroy(big);
    model_destroy(small);
}

int main(void)
{
    openblas_set_num_threads(1);
    test_specs();
    test_init();
    test_logreg_by_hand();

    struct block logreg[] = {{0, 30 * 5}, {150, 5}};
    gradient_check("logreg:30-5", logreg, 2, 4, 0);
    struct block mlp[] = {{0, 20 * 16}, {320, 16},     {336, 16 * 12},
                          {528, 12},    {540, 12 * 4}, {588, 4}};
    gradient_check("mlp:20-16-12-4", mlp, 6, 5, 0);
    /* conv1 W, b; conv2 W, b; fc1 W, b; fc2 W, b; fc3 W, b (see model.h). */
    struct block lenet[] = {{0, 150},     {150, 6},       {156, 2400}, {2556, 16},   {2572, 48000},
                            {50572, 120}, {50692, 10080}, {60772, 84}, {60856, 840}, {61696, 10}};
    gradient_check("cnn:lenet", lenet, 10, 3, 1);
    test_conv_chunked_path();
    return check_report();
}
