/* test_split.c — layer-range passes (model_forward_range, model_loss,
 * model_backward_range): a model cut into 2 and 3 parts, each part on a
 * struct model of its own as on its own peer, gives the unsplit
 * model_grad's loss, gradient and batch statistics, for mlp, cnn:lenet
 * (cuts between conv and pool, pool and conv, flatten and dense) and
 * cnn:resnet20 (cuts at block boundaries); and the range check refuses
 * layers outside the table and cuts inside a residual block. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/rng.h"
#include "tests/unit/check.h"

enum { BATCH = 6, MAX_PARTS = 3 };

static char err[256];

/* 0-based first layers of each part after the first; the last part ends at
 * the model's last layer. */
struct cut {
    const char *spec;
    int parts;
    int starts[MAX_PARTS];
};

static float *random_floats(struct rng *r, size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(2.0 * rng_uniform(r) - 1.0);
    return v;
}

/* The split pass of one batch: forward part by part, loss on the last,
 * backward from the last part to the first, every part's gradient into
 * its slices of grad. */
static void split_grad(const struct cut *c, const float *params, const float *x,
                       const int32_t *labels, float *grad, float *loss)
{
    struct model *part[MAX_PARTS];
    float *act[MAX_PARTS + 1]; /* act[k]: the input of part k; act[parts]: the logits */
    int first[MAX_PARTS], last[MAX_PARTS];
    act[0] = (float *)x;
    for (int k = 0; k < c->parts; k++) {
        CHECK(model_create(c->spec, 0, &part[k], err, sizeof err) == 0);
        const struct model_spec *s = model_layout(part[k]);
        first[k] = c->starts[k];
        last[k] = k + 1 < c->parts ? c->starts[k + 1] - 1 : s->layer_count - 1;
        act[k + 1] = calloc(s->layers[last[k]].out_size * BATCH, sizeof(float));
        CHECK_MSG(model_forward_range(part[k], params, first[k], last[k], act[k], BATCH, act[k + 1],
                                      err, sizeof err) == 0,
                  "%s", err);
    }
    size_t classes = (size_t)model_classes(part[0]);
    float *dy = calloc(classes * BATCH, sizeof(float));
    CHECK(model_loss(part[c->parts - 1], act[c->parts], labels, BATCH, dy, loss, err, sizeof err) ==
          0);
    for (int k = c->parts - 1; k >= 0; k--) {
        const struct model_spec *s = model_layout(part[k]);
        float *dx = k ? calloc(s->layers[first[k]].in_size * BATCH, sizeof(float)) : NULL;
        CHECK_MSG(model_backward_range(part[k], params, first[k], last[k], act[k], dy, BATCH, dx,
                                       grad, err, sizeof err) == 0,
                  "%s", err);
        free(dy);
        dy = dx;
    }
    for (int k = 0; k < c->parts; k++) {
        free(act[k + 1]);
        model_destroy(part[k]);
    }
}

static void check_cut(const struct cut *c)
{
    struct model *whole;
    CHECK(model_create(c->spec, 0, &whole, err, sizeof err) == 0);
    size_t n = model_param_count(whole), in = (size_t)model_input_size(whole);
    struct rng r;
    rng_seed(&r, 7, (uint64_t)c->parts);
    float *params = malloc(n * sizeof *params);
    CHECK(model_init(whole, params, "default", 3, err, sizeof err) == 0);
    float *x = random_floats(&r, in * BATCH);
    int32_t labels[BATCH];
    for (int b = 0; b < BATCH; b++)
        labels[b] = (int32_t)(rng_uniform(&r) * model_classes(whole));
    float *want = calloc(n, sizeof *want), *got = calloc(n, sizeof *got);
    float loss_want, loss_got;
    CHECK(model_grad(whole, params, x, labels, BATCH, want, &loss_want, err, sizeof err) == 0);
    split_grad(c, params, x, labels, got, &loss_got);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)want[i] - got[i]);
        worst = d > worst ? d : worst;
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    }
    CHECK_MSG(scale > 0 && worst <= 1e-5 * scale, "%s in %d parts: gradient differs by %g (of %g)",
              c->spec, c->parts, worst, scale);
    CHECK_MSG(fabsf(loss_want - loss_got) <= 1e-6f * fabsf(loss_want), "%s: loss %g != %g", c->spec,
              loss_got, loss_want);
    free(params);
    free(x);
    free(want);
    free(got);
    model_destroy(whole);
}

static void test_exact(void)
{
    static const struct cut cuts[] = {
        {"mlp:20-16-12-8-5", 2, {0, 2}},
        {"mlp:20-16-12-8-5", 3, {0, 1, 3}},
        /* conv1 pool1 | conv2 pool2 flatten | fc1 fc2 fc3 */
        {"cnn:lenet", 3, {0, 2, 5}},
        /* conv1 | pool1 ...: the pool applies conv1's ReLU mask */
        {"cnn:lenet", 2, {0, 1}},
        {"cnn:lenet", 3, {0, 4, 7}},
        /* stem and block 1 | blocks 2-5 | blocks 6-9, pool, dense */
        {"cnn:resnet20", 3, {0, 7, 27}},
        {"cnn:resnet20", 2, {0, 2}},
        {"cnn:resnet20", 2, {0, 48}},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        check_cut(&cuts[i]);
}

static void test_range_check(void)
{
    struct model_spec s;
    CHECK(model_spec_parse("cnn:lenet", &s, err, sizeof err) == 0);
    CHECK(model_spec_range_check(&s, 0, 7, err, sizeof err) == 0);
    CHECK(model_spec_range_check(&s, 5, 8, err, sizeof err) < 0);
    CHECK_STREQ(err, "layers {6, 9}: cnn:lenet has layers 1 to 8");
    CHECK(model_spec_range_check(&s, 3, 2, err, sizeof err) < 0);
    CHECK(model_spec_parse("cnn:resnet20", &s, err, sizeof err) == 0);
    CHECK(model_spec_range_check(&s, 2, 6, err, sizeof err) == 0);
    CHECK(model_spec_range_check(&s, 4, 11, err, sizeof err) < 0);
    CHECK_STREQ(err, "layers {5, 12}: the cut before layer 5 falls inside the residual block of "
                     "layers 3-7 (cut before its first layer or after its last)");
    CHECK(model_spec_range_check(&s, 0, 4, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "the cut after layer 5 falls inside the residual block of layers 3-7");
    /* A backward pass needs its forward pass first. */
    struct model *m;
    CHECK(model_create("mlp:4-3-2", 0, &m, err, sizeof err) == 0);
    float p[32] = {0}, dy[4] = {0}, dx[6], g[32];
    CHECK(model_backward_range(m, p, 1, 1, dx, dy, 2, dx, g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "without its forward pass");
    model_destroy(m);
}

int main(void)
{
    openblas_set_num_threads(1);
    test_exact();
    test_range_check();
    return check_report();
}
