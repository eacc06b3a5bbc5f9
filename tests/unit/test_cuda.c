/* test_cuda.c — the CUDA kernels (kernels/device.h on a cuda context)
 * against the CPU ones: every vector operation (with lengths past one grid
 * of blocks, ranges, x == y), sgemm in all four transpose combinations with
 * padded leading dimensions, logreg, mlp, cnn:lenet and cnn:resnet20
 * gradients (resnet20's with its batch statistics) and evaluation against
 * model_grad / model_eval, lenet trained by a few sgd
 * steps as on the cpu, layer ranges (a model in 2 and 3 parts, each a
 * kern_model of its own, through kern_model_forward_range / loss /
 * backward_range) against model_grad, and three steps of every optimizer
 * against optim_step, with reconfiguration and reset.
 *
 * Needs a GPU: in a build without CUDA, or where no device is present, it
 * prints "SKIP: <why>" and exits 77. HIERNET_TEST_DEVICE=cpu runs the same
 * comparisons against the cpu context, which checks the test itself on any
 * machine. */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"
#include "kernels/model_spec.h"
#include "kernels/rng.h"
#include "kernels/vec.h"
#include "tests/unit/check.h"

static struct kern_ctx *dev; /* the device under test */
static char err[512];
static struct rng rng;

static float *random_host(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * rng_uniform_float(&rng);
    return p;
}

static float *to_device(const float *host, size_t n)
{
    float *d = NULL;
    CHECK_MSG(kern_alloc(dev, n, &d, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(kern_upload(dev, d, host, n, err, sizeof err) == 0, "%s", err);
    return d;
}

/* A host copy of a device buffer (caller frees). */
static float *from_device(const float *d, size_t n)
{
    float *host = malloc((n ? n : 1) * sizeof(float));
    CHECK_MSG(kern_download(dev, host, d, n, err, sizeof err) == 0, "%s", err);
    return host;
}

/* max |got - want| relative to the largest |want| (at least 1e-30). */
static double scaled_error(const float *got, const float *want, size_t n)
{
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        worst = d > worst ? d : worst;
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    }
    return worst / scale;
}

#define CHECK_CLOSE(what, got_dev, want_host, n, tol)                                              \
    do {                                                                                           \
        float *got_ = from_device((got_dev), (n));                                                 \
        double e_ = scaled_error(got_, (want_host), (n));                                          \
        CHECK_MSG(e_ <= (tol), "%s: scaled error %.3g > %.3g", (what), e_, (double)(tol));         \
        free(got_);                                                                                \
    } while (0)

/* ---- vectors ---- */

static void test_vectors(void)
{
    /* More than KERN_CUDA_MAX_BLOCKS x 256 elements: the grid-stride loops
     * must wrap; odd, so no vector width divides it. */
    const size_t n = 3000017;
    float *x = random_host(n, -1, 1), *y = random_host(n, -1, 1);
    float *dx = to_device(x, n), *dy = to_device(y, n);

    CHECK(kern_axpy(dev, n, 0.37f, dx, dy, err, sizeof err) == 0);
    vec_axpy(n, 0.37f, x, y);
    CHECK_CLOSE("axpy", dy, y, n, 1e-6);

    CHECK(kern_axpy(dev, n, -0.5f, dy, dy, err, sizeof err) == 0); /* x == y */
    vec_axpy(n, -0.5f, y, y);
    CHECK_CLOSE("axpy in place", dy, y, n, 1e-6);

    CHECK(kern_scale(dev, n, 1.7f, dx, err, sizeof err) == 0);
    vec_scale(n, 1.7f, x);
    CHECK_CLOSE("scale", dx, x, n, 1e-7);

    /* A range: an operation on an offset slice leaves the rest alone. */
    CHECK(kern_axpy(dev, 100, 2.0f, dx + 5, dy + 11, err, sizeof err) == 0);
    vec_axpy(100, 2.0f, x + 5, y + 11);
    CHECK_CLOSE("axpy range", dy, y, n, 1e-6);

    double got = 0, want = vec_dot(n, x, y), magnitude = 0;
    for (size_t i = 0; i < n; i++)
        magnitude += fabs((double)x[i] * y[i]);
    CHECK(kern_dot(dev, n, dx, dy, &got, err, sizeof err) == 0);
    CHECK_MSG(fabs(got - want) <= 1e-10 * magnitude, "dot %.17g vs %.17g", got, want);
    CHECK(kern_norm(dev, n, dx, &got, err, sizeof err) == 0);
    CHECK_NEAR(got, vec_norm(n, x), 1e-10 * vec_norm(n, x));
    CHECK(kern_dot(dev, 1, dx + 7, dy + 7, &got, err, sizeof err) == 0);
    CHECK_NEAR(got, (double)x[7] * y[7], 1e-15);

    CHECK(kern_fill(dev, n, 0.25f, dy, err, sizeof err) == 0);
    vec_fill(n, 0.25f, y);
    CHECK_CLOSE("fill", dy, y, n, 0);
    CHECK(kern_copy(dev, dy, dx, n, err, sizeof err) == 0);
    CHECK_CLOSE("copy", dy, x, n, 0);

    /* Length 0 is a no-op everywhere; dot of nothing is 0. */
    CHECK(kern_axpy(dev, 0, 1.0f, dx, dy, err, sizeof err) == 0);
    CHECK(kern_scale(dev, 0, 1.0f, dx, err, sizeof err) == 0);
    CHECK(kern_fill(dev, 0, 1.0f, dx, err, sizeof err) == 0);
    CHECK(kern_dot(dev, 0, dx, dy, &got, err, sizeof err) == 0 && got == 0);

    kern_free(dev, dx);
    kern_free(dev, dy);
    free(x);
    free(y);
}

static void test_sum(void)
{
    const size_t n = 100001;
    float *a = random_host(n, -1, 1), *b = random_host(n, -1, 1), *c = random_host(n, -1, 1);
    float *da = to_device(a, n), *db = to_device(b, n), *dc = to_device(c, n), *dout;
    CHECK(kern_alloc(dev, n, &dout, err, sizeof err) == 0);
    float *want = malloc(n * sizeof(float));
    const float *host_in[3] = {a, b, c};
    const float *dev_in[3] = {da, db, dc};

    CHECK(kern_sum(dev, n, dout, dev_in, 3, err, sizeof err) == 0);
    vec_sum(n, want, host_in, 3);
    CHECK_CLOSE("sum of 3", dout, want, n, 1e-6);

    CHECK(kern_sum(dev, n, dout, dev_in, 0, err, sizeof err) == 0);
    vec_sum(n, want, host_in, 0);
    CHECK_CLOSE("sum of none", dout, want, n, 0);

    /* out == inputs[0]: accumulate in place. */
    CHECK(kern_sum(dev, n, da, dev_in, 2, err, sizeof err) == 0);
    vec_sum(n, a, host_in, 2);
    CHECK_CLOSE("sum in place", da, a, n, 1e-6);

    kern_free(dev, da);
    kern_free(dev, db);
    kern_free(dev, dc);
    kern_free(dev, dout);
    free(a);
    free(b);
    free(c);
    free(want);
}

/* ---- sgemm ---- */

static void test_sgemm(void)
{
    const int m = 37, n = 53, k = 29, pad = 3;
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            int a_rows = ta ? k : m, a_cols = ta ? m : k;
            int b_rows = tb ? n : k, b_cols = tb ? k : n;
            int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
            size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
            float *a = random_host(na, -1, 1), *b = random_host(nb, -1, 1);
            float *c = random_host(nc, -1, 1);
            float *da = to_device(a, na), *db = to_device(b, nb), *dc = to_device(c, nc);
            CHECK_MSG(kern_sgemm(dev, ta, tb, m, n, k, 0.7f, da, lda, db, ldb, 0.3f, dc, ldc, err,
                                 sizeof err) == 0,
                      "%s", err);
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c,
                        ldc);
            char what[64];
            snprintf(what, sizeof what, "sgemm ta=%d tb=%d", ta, tb);
            CHECK_CLOSE(what, dc, c, nc, 1e-5); /* padding included: must be untouched */
            kern_free(dev, da);
            kern_free(dev, db);
            kern_free(dev, dc);
            free(a);
            free(b);
            free(c);
        }
    }
    float *d;
    CHECK(kern_alloc(dev, 16, &d, err, sizeof err) == 0);
    CHECK(kern_sgemm(dev, 0, 0, 4, 4, 4, 1, d, 3, d, 4, 0, d, 4, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "leading dimensions");
    kern_free(dev, d);
}

/* ---- models ---- */

static void compare_grad(const char *spec, struct model *ref, float *params, float *dparams,
                         struct kern_model *km, int batch)
{
    int in = model_input_size(ref), classes = model_classes(ref);
    size_t np = model_param_count(ref);
    float *x = random_host((size_t)batch * in, 0, 1);
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    for (int i = 0; i < batch; i++)
        labels[i] = (int32_t)rng_below(&rng, (uint64_t)classes);
    float *want = malloc(np * sizeof(float)), *dgrad, want_loss = 0, got_loss = -1;
    CHECK(kern_alloc(dev, np, &dgrad, err, sizeof err) == 0);
    CHECK(model_grad(ref, params, x, labels, batch, want, &want_loss, err, sizeof err) == 0);
    CHECK_MSG(kern_model_grad(km, dparams, x, labels, batch, dgrad, &got_loss, err, sizeof err) ==
                  0,
              "%s: %s", spec, err);
    CHECK_MSG(fabs(got_loss - want_loss) <= 1e-5 * fabs(want_loss), "%s batch %d: loss %g vs %g",
              spec, batch, got_loss, want_loss);
    char what[96];
    snprintf(what, sizeof what, "%s gradient, batch %d", spec, batch);
    CHECK_CLOSE(what, dgrad, want, np, 1e-4);
    kern_free(dev, dgrad);
    free(x);
    free(labels);
    free(want);
}

static void compare_eval(const char *spec, struct model *ref, float *params, float *dparams,
                         struct kern_model *km, size_t n)
{
    int in = model_input_size(ref), classes = model_classes(ref);
    float *x = random_host(n * in, 0, 1);
    int32_t *labels = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        labels[i] = (int32_t)rng_below(&rng, (uint64_t)classes);
    struct model_score want = {0}, got = {0};
    CHECK(model_eval(ref, params, x, labels, n, &want, err, sizeof err) == 0);
    CHECK_MSG(kern_model_eval(km, dparams, x, labels, n, &got, err, sizeof err) == 0, "%s: %s",
              spec, err);
    CHECK(got.samples == n);
    /* An argmax may flip on a near tie; a couple in a thousand at most. */
    CHECK_MSG(labs((long)got.correct - (long)want.correct) <= 2, "%s: %zu vs %zu correct", spec,
              got.correct, want.correct);
    CHECK_NEAR(got.loss_sum, want.loss_sum, 1e-5 * want.loss_sum);
    labels[n / 2] = (int32_t)classes; /* out of range: refused, not read out of bounds */
    CHECK(kern_model_eval(km, dparams, x, labels, n, &got, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "outside 0..");
    free(x);
    free(labels);
}

/* eval_n: samples of the evaluation (more than one chunk of the device's). */
static void test_model(const char *spec, int batch, size_t eval_n)
{
    struct model *ref;
    struct kern_model *km;
    CHECK(model_create(spec, 0, &ref, err, sizeof err) == 0);
    CHECK_MSG(kern_model_create(dev, spec, batch, &km, err, sizeof err) == 0, "%s: %s", spec, err);
    size_t np = model_param_count(ref);
    CHECK(kern_model_param_count(km) == np);
    CHECK(kern_model_input_size(km) == model_input_size(ref));
    CHECK(kern_model_classes(km) == model_classes(ref));

    /* Initialisation on the device is the CPU's, bit for bit. */
    float *params = malloc(np * sizeof(float)), *dparams;
    CHECK(model_init(ref, params, NULL, 7, err, sizeof err) == 0);
    CHECK(kern_alloc(dev, np, &dparams, err, sizeof err) == 0);
    CHECK(kern_model_init(km, dparams, NULL, 7, err, sizeof err) == 0);
    CHECK_CLOSE("init", dparams, params, np, 0);

    compare_grad(spec, ref, params, dparams, km, batch);
    compare_grad(spec, ref, params, dparams, km, batch * 3 + 1); /* the workspace grows */
    compare_grad(spec, ref, params, dparams, km, 1);
    compare_eval(spec, ref, params, dparams, km, eval_n);

    float loss;
    int32_t bad = -1;
    float *x = random_host((size_t)model_input_size(ref), 0, 1);
    CHECK(kern_model_grad(km, dparams, x, &bad, 1, dparams, &loss, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "label -1");
    CHECK(kern_model_grad(km, dparams, x, &bad, 0, dparams, &loss, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "batch 0");
    free(x);
    kern_free(dev, dparams);
    free(params);
    kern_model_destroy(km);
    model_destroy(ref);
}

/* ---- layer ranges ---- */

enum { RANGE_MAX_PARTS = 3 };

/* spec cut before each 0-based row of starts[1..parts-1], each part a
 * kern_model of its own (as on its own peer), activations and their
 * gradients through host memory: model_grad's loss and gradient. */
static void test_range_split(const char *spec, int batch, int parts, const int *starts)
{
    struct model *ref;
    struct kern_model *km[RANGE_MAX_PARTS];
    CHECK(model_create(spec, 0, &ref, err, sizeof err) == 0);
    const struct model_spec *rows = model_layout(ref);
    size_t np = model_param_count(ref), widest = 0;
    for (int i = 0; i < rows->layer_count; i++)
        widest = rows->layers[i].in_size > widest ? rows->layers[i].in_size : widest;
    float *params = random_host(np, -0.2f, 0.2f), *dparams = to_device(params, np), *dgrad;
    float *x = random_host((size_t)batch * rows->layers[0].in_size, 0, 1);
    float *act[RANGE_MAX_PARTS + 1], *dy = calloc((size_t)batch * widest + 16, sizeof(float));
    float *dx = calloc((size_t)batch * widest + 16, sizeof(float));
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    for (int i = 0; i < batch; i++)
        labels[i] = (int32_t)rng_below(&rng, (uint64_t)model_classes(ref));
    CHECK(kern_alloc(dev, np, &dgrad, err, sizeof err) == 0);
    CHECK(kern_fill(dev, np, 0.0f, dgrad, err, sizeof err) == 0);
    act[0] = x;
    int first[RANGE_MAX_PARTS], last[RANGE_MAX_PARTS];
    for (int k = 0; k < parts; k++) {
        first[k] = starts[k];
        last[k] = k + 1 < parts ? starts[k + 1] - 1 : rows->layer_count - 1;
        CHECK(kern_model_create(dev, spec, 0, &km[k], err, sizeof err) == 0);
        act[k + 1] = malloc((size_t)batch * rows->layers[last[k]].out_size * sizeof(float));
        CHECK_MSG(kern_model_forward_range(km[k], dparams, first[k], last[k], act[k], batch,
                                           act[k + 1], err, sizeof err) == 0,
                  "%s part %d: %s", spec, k + 1, err);
    }
    float loss, want_loss, *want = malloc(np * sizeof(float));
    CHECK(kern_model_loss(km[parts - 1], act[parts], labels, batch, dy, &loss, err, sizeof err) ==
          0);
    for (int k = parts - 1; k >= 0; k--) {
        CHECK_MSG(kern_model_backward_range(km[k], dparams, first[k], last[k], act[k], dy, batch,
                                            k ? dx : NULL, dgrad, err, sizeof err) == 0,
                  "%s part %d: %s", spec, k + 1, err);
        memcpy(dy, dx, (size_t)batch * rows->layers[first[k]].in_size * sizeof(float));
    }
    CHECK(model_grad(ref, params, x, labels, batch, want, &want_loss, err, sizeof err) == 0);
    CHECK_MSG(fabs(loss - want_loss) <= 1e-5 * fabs(want_loss), "%s in %d parts: loss %g vs %g",
              spec, parts, loss, want_loss);
    char what[96];
    snprintf(what, sizeof what, "%s in %d parts: gradient", spec, parts);
    CHECK_CLOSE(what, dgrad, want, np, 1e-4);
    /* A part above row 1 must have somewhere for its input's gradient. */
    if (parts > 1) {
        CHECK(kern_model_backward_range(km[1], dparams, first[1], last[1], act[1], dy, batch, NULL,
                                        dgrad, err, sizeof err) == -1);
        CHECK_CONTAINS(err, "need somewhere for dx");
    }
    CHECK(kern_model_forward_range(km[0], dparams, 0, rows->layer_count, x, batch, act[1], err,
                                   sizeof err) == -1);
    CHECK_CONTAINS(err, "has layers 1 to");
    for (int k = 0; k < parts; k++) {
        kern_model_destroy(km[k]);
        free(act[k + 1]);
    }
    kern_free(dev, dparams);
    kern_free(dev, dgrad);
    free(params);
    free(x);
    free(dy);
    free(dx);
    free(labels);
    free(want);
    model_destroy(ref);
}

static void test_spec_refused(void)
{
    struct kern_model *km;
    CHECK(kern_model_create(dev, "mlp:784-x", 8, &km, err, sizeof err) == -1 && km == NULL);
    CHECK_CONTAINS(err, "mlp:784-x");
    CHECK(kern_model_create(dev, "cnn:alexnet", 8, &km, err, sizeof err) == -1 && km == NULL);
    CHECK_CONTAINS(err, "unknown cnn");
}

/* A few SGD steps on one batch, on the device and on the cpu model from the
 * same parameters: the same losses step by step, falling, and the same
 * parameters at the end. */
static void test_lenet_training(void)
{
    const int batch = 16, steps = 5;
    struct model *ref;
    struct kern_model *km;
    struct optim *opt;
    struct kern_optim *kopt;
    struct optim_config cfg;
    optim_config_default(&cfg, OPTIM_SGD);
    cfg.lr = 0.05f;
    CHECK(model_create("cnn:lenet", batch, &ref, err, sizeof err) == 0);
    CHECK_MSG(kern_model_create(dev, "cnn:lenet", batch, &km, err, sizeof err) == 0, "%s", err);
    size_t np = model_param_count(ref);
    CHECK(optim_create(&cfg, np, &opt, err, sizeof err) == 0);
    CHECK_MSG(kern_optim_create(dev, &cfg, np, &kopt, err, sizeof err) == 0, "%s", err);
    float *params = malloc(np * sizeof(float)), *grad = malloc(np * sizeof(float));
    float *dparams, *dgrad;
    CHECK(model_init(ref, params, NULL, 3, err, sizeof err) == 0);
    dparams = to_device(params, np);
    CHECK(kern_alloc(dev, np, &dgrad, err, sizeof err) == 0);
    float *x = random_host((size_t)batch * model_input_size(ref), 0, 1);
    int32_t labels[16];
    for (int i = 0; i < batch; i++)
        labels[i] = (int32_t)rng_below(&rng, 10);
    float first = 0, last = 0;
    for (int t = 0; t < steps; t++) {
        float want = 0, got = -1;
        CHECK(model_grad(ref, params, x, labels, batch, grad, &want, err, sizeof err) == 0);
        CHECK_MSG(kern_model_grad(km, dparams, x, labels, batch, dgrad, &got, err, sizeof err) == 0,
                  "%s", err);
        CHECK_MSG(fabs(got - want) <= 1e-4 * fabs(want), "lenet step %d: loss %.7g vs %.7g", t, got,
                  want);
        CHECK(optim_step(opt, params, grad, np, err, sizeof err) == 0);
        CHECK_MSG(kern_optim_step(kopt, dparams, dgrad, np, err, sizeof err) == 0, "%s", err);
        first = t ? first : got;
        last = got;
    }
    CHECK_MSG(last < first, "lenet: loss %g after %d sgd steps, %g before", last, steps, first);
    CHECK_CLOSE("lenet parameters after sgd", dparams, params, np, 1e-4);
    free(x);
    free(params);
    free(grad);
    kern_free(dev, dparams);
    kern_free(dev, dgrad);
    kern_optim_destroy(kopt);
    optim_destroy(opt);
    kern_model_destroy(km);
    model_destroy(ref);
}

/* ---- optimizers ---- */

static void run_steps(const char *what, struct optim *ref, struct kern_optim *ko, float *p,
                      float *dp, size_t n)
{
    for (int t = 0; t < 3; t++) {
        float *g = random_host(n, -1, 1), *dg = to_device(g, n);
        CHECK(optim_step(ref, p, g, n, err, sizeof err) == 0);
        CHECK_MSG(kern_optim_step(ko, dp, dg, n, err, sizeof err) == 0, "%s: %s", what, err);
        kern_free(dev, dg);
        free(g);
    }
    CHECK(kern_optim_steps(ko) == optim_steps(ref));
    CHECK_CLOSE(what, dp, p, n, 2e-6);
}

static void test_optim(enum optim_method method, float weight_decay)
{
    const size_t n = 100003;
    struct optim_config cfg;
    optim_config_default(&cfg, method);
    cfg.lr = 0.05f;
    cfg.weight_decay = weight_decay;
    struct optim *ref;
    struct kern_optim *ko;
    CHECK(optim_create(&cfg, n, &ref, err, sizeof err) == 0);
    CHECK_MSG(kern_optim_create(dev, &cfg, n, &ko, err, sizeof err) == 0, "%s", err);
    float *p = random_host(n, -1, 1), *dp = to_device(p, n);
    char what[64];
    snprintf(what, sizeof what, "%s wd=%g", optim_method_name(method), weight_decay);
    run_steps(what, ref, ko, p, dp, n);

    /* A new method resets the state on both sides; reset zeroes it again. */
    struct optim_config next;
    optim_config_default(&next, method == OPTIM_ADAM ? OPTIM_MOMENTUM : OPTIM_ADAM);
    CHECK(optim_configure(ref, &next, err, sizeof err) == 0);
    CHECK(kern_optim_configure(ko, &next, err, sizeof err) == 0);
    CHECK(kern_optim_config(ko)->method == next.method);
    run_steps(what, ref, ko, p, dp, n);
    optim_reset(ref);
    CHECK(kern_optim_reset(ko, err, sizeof err) == 0 && kern_optim_steps(ko) == 0);
    run_steps(what, ref, ko, p, dp, n);

    CHECK(kern_optim_step(ko, dp, dp, n - 1, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "state is for");
    next.lr = -1;
    CHECK(kern_optim_configure(ko, &next, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "lr -1");
    kern_free(dev, dp);
    free(p);
    kern_optim_destroy(ko);
    optim_destroy(ref);
}

int main(void)
{
    enum kern_device device = KERN_DEVICE_CUDA;
    const char *override = getenv("HIERNET_TEST_DEVICE");
    if (override && kern_device_parse(override, &device, err, sizeof err) < 0) {
        fprintf(stderr, "HIERNET_TEST_DEVICE: %s\n", err);
        return 2;
    }
    char why[768];
    if (!kern_device_available(device, why, sizeof why)) CHECK_SKIP(why);
    if (kern_ctx_create(device, &dev, err, sizeof err) < 0) {
        fprintf(stderr, "cannot open %s: %s\n", kern_device_name(device), err);
        return 1;
    }
    printf("device under test: %s\n", kern_ctx_describe(dev));
    rng_seed(&rng, 2024, 8);
    vec_set_threads(1);

    test_vectors();
    test_sum();
    test_sgemm();
    test_model("logreg:784-10", 64, 1000);
    test_model("mlp:784-64-32-10", 64, 1000);
    test_model("mlp:5-3-4", 1, 1000);
    test_model("cnn:lenet", 8, 1000);
    /* 300: past the device's first evaluation chunk, and a short run on
     * the cpu context (unit.test_cuda_on_cpu) */
    test_model("cnn:resnet20", 4, 300);
    test_lenet_training();
    static const int mlp2[] = {0, 2}, mlp3[] = {0, 1, 2}, lenet2[] = {0, 5}, lenet3[] = {0, 1, 4};
    /* resnet20: before stage 2's downsampling block (its shortcut reads
     * the part's input); after the stem, inside stage 1, before the pool */
    static const int resnet2[] = {0, 17}, resnet3[] = {0, 7, 47};
    test_range_split("mlp:784-64-32-10", 16, 2, mlp2);
    test_range_split("mlp:784-64-32-10", 16, 3, mlp3);
    test_range_split("cnn:lenet", 8, 2, lenet2);
    test_range_split("cnn:lenet", 8, 3, lenet3);
    test_range_split("cnn:resnet20", 4, 2, resnet2);
    test_range_split("cnn:resnet20", 4, 3, resnet3);
    test_spec_refused();
    for (int method = OPTIM_SGD; method <= OPTIM_ADAM; method++) {
        test_optim((enum optim_method)method, 0.0f);
        test_optim((enum optim_method)method, 0.01f);
    }
    kern_ctx_destroy(dev);
    return check_report();
}
