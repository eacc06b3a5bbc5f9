/* test_model_spec.c — kernels/model_spec.c, the one place that knows model
 * architectures: parsing and its messages, limits, the layer table and the
 * flat parameter layout of kernels/model.h. Links hn_kernels_base only: the
 * spec knowledge must stay usable without the kernels (and OpenBLAS). */
#include "kernels/model_spec.h"
#include "tests/unit/check.h"

static char err[256];

static void test_dense_layout(void)
{
    struct model_spec s;
    CHECK(model_spec_parse("mlp:784-256-128-10", &s, err, sizeof err) == 0);
    CHECK(s.arch == MODEL_ARCH_DENSE && s.n_sizes == 4 && s.layer_count == 3);
    CHECK(s.sizes[0] == 784 && s.sizes[3] == 10);
    CHECK(model_spec_input_size(&s) == 784 && model_spec_classes(&s) == 10);
    /* W[256][784], b[256], W[128][256], b[128], W[10][128], b[10] */
    CHECK(s.layers[0].weight_offset == 0 && s.layers[0].bias_offset == 784 * 256);
    CHECK(s.layers[1].weight_offset == 784 * 256 + 256);
    CHECK(s.param_count == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    CHECK(s.layers[0].relu && s.layers[1].relu && !s.layers[2].relu);
    CHECK(model_spec_parse("logreg:784-10", &s, err, sizeof err) == 0);
    CHECK(s.arch == MODEL_ARCH_DENSE && s.layer_count == 1 && s.param_count == 7850);
}

static void test_lenet_layout(void)
{
    struct model_spec s;
    CHECK(model_spec_parse("cnn:lenet", &s, err, sizeof err) == 0);
    CHECK(s.arch == MODEL_ARCH_LENET && s.layer_count == 8);
    CHECK(model_spec_input_size(&s) == 784 && model_spec_classes(&s) == 10);
    CHECK(s.layers[0].kind == MODEL_LAYER_CONV && s.layers[0].out_h == 28);
    CHECK(s.layers[4].kind == MODEL_LAYER_FLATTEN && s.layers[4].out_size == 400);
    /* LeNet-5 as PyTorch counts it: 156 + 2416 + 48120 + 10164 + 850 */
    CHECK_MSG(s.param_count == 61706, "%zu", s.param_count);
    CHECK_STREQ(model_arch_name(s.arch), "cnn:lenet");
}

static void test_errors(void)
{
    struct model_spec s;
    CHECK(model_spec_parse("mlp:784-x-10", &s, err, sizeof err) < 0);
    CHECK_STREQ(err, "model spec \"mlp:784-x-10\": the second layer size 'x' is not a whole "
                     "number from 1 to 1000000");
    CHECK(model_spec_parse("logreg:1-2-3", &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "logreg takes exactly IN-OUT");
    CHECK(model_spec_parse("mlp:5", &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "mlp needs at least IN-OUT");
    CHECK(model_spec_parse("cnn:vgg", &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "unknown cnn (known: cnn:lenet, cnn:resnet20)");
    CHECK(model_spec_parse("rnn:3", &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "unknown architecture");
    CHECK(model_spec_parse(NULL, &s, err, sizeof err) < 0);
    CHECK_STREQ(err, "model spec is missing");
    /* 1000000 x 1000000 weights: past the parameter limit */
    CHECK(model_spec_parse("mlp:1000000-1000000", &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "parameters exceed the limit of 2147483648");
}

static void test_layer_limit(void)
{
    static struct model_spec s;
    char spec[512] = "mlp:2";
    for (int i = 0; i < MODEL_MAX_LAYERS; i++)
        strcat(spec, "-2");
    CHECK(model_spec_parse(spec, &s, err, sizeof err) == 0);
    CHECK(s.layer_count == MODEL_MAX_LAYERS);
    strcat(spec, "-2");
    CHECK(model_spec_parse(spec, &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "more than 65 layer sizes");
}

int main(void)
{
    test_dense_layout();
    test_lenet_layout();
    test_errors();
    test_layer_limit();
    return check_report();
}
