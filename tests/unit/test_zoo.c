/* test_zoo.c — kernels/zoo.c: the zoo's parameter counts derived from its
 * layer descriptions against the published ones (exactly), its FLOPs
 * against published figures (within a stated tolerance), and a real
 * architecture's answers against model_spec and model_forward_flops
 * (exactly). */
#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/zoo.h"
#include "tests/unit/check.h"

static char err[512];

static struct zoo_info lookup(const char *name)
{
    struct zoo_info z;
    memset(&z, 0, sizeof z);
    CHECK_MSG(zoo_lookup(name, &z, err, sizeof err) == 0, "%s: %s", name, err);
    return z;
}

/* torchvision's model documentation ("num_params"), GPT-2 small as in the
 * Hugging Face checkpoint (token embedding tied to the LM head), and
 * MobileNet v1 1.0-224 as Keras counts its trainable parameters. */
static void test_published_params(void)
{
    static const struct {
        const char *name;
        uint64_t params;
    } published[] = {
        {"resnet18", 11689512},    {"resnet34", 21797672},    {"resnet50", 25557032},
        {"resnet101", 44549160},   {"resnet152", 60192808},   {"vgg16", 138357544},
        {"vgg19", 143667240},      {"mobilenet_v2", 3504872}, {"mobilenet_v1", 4231976},
        {"gpt2-small", 124439808},
    };
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        struct zoo_info z = lookup(published[i].name);
        CHECK_MSG(z.params == published[i].params, "%s: %llu parameters, published %llu",
                  published[i].name, (unsigned long long)z.params,
                  (unsigned long long)published[i].params);
        CHECK(zoo_grad_bytes(&z) == 4 * published[i].params);
        CHECK(!z.real);
    }
}

/* Multiply-accumulates per sample against torchvision's GFLOPS column
 * (which counts conv and linear MACs at 224x224), Howard et al.'s 569 M
 * mult-adds for MobileNet v1 and Sandler et al.'s 300 M for MobileNet v2.
 * Tolerance: 1% (the published figures carry 3-4 digits), 3% for
 * MobileNet v2 whose figure carries one. */
static void test_published_macs(void)
{
    static const struct {
        const char *name;
        double gmacs, tolerance;
    } published[] = {
        {"resnet18", 1.81, 0.01},  {"resnet34", 3.66, 0.01},      {"resnet50", 4.09, 0.01},
        {"resnet101", 7.80, 0.01}, {"resnet152", 11.51, 0.01},    {"vgg16", 15.47, 0.01},
        {"vgg19", 19.63, 0.01},    {"mobilenet_v1", 0.569, 0.01}, {"mobilenet_v2", 0.300, 0.03},
    };
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        struct zoo_info z = lookup(published[i].name);
        double gmacs = zoo_mac_flops(&z) / 2e9;
        CHECK_MSG(fabs(gmacs / published[i].gmacs - 1) <= published[i].tolerance,
                  "%s: %.4f GMACs, published %.3f", published[i].name, gmacs, published[i].gmacs);
        /* Backward: every layer's weight gradient, and the input gradient of
         * all but the first, so a little under twice the forward. */
        double mac_backward = z.cost.backward[ZOO_OP_CONV] + z.cost.backward[ZOO_OP_DEPTHWISE] +
                              z.cost.backward[ZOO_OP_DENSE];
        CHECK(mac_backward < 2 * zoo_mac_flops(&z) && mac_backward > 1.9 * zoo_mac_flops(&z));
        CHECK(zoo_grad_flops(&z) > 2.9 * zoo_forward_flops(&z) - 1);
    }
}

/* GPT-2 small against Kaplan et al. 2020, Table 1: forward FLOPs per token
 * 2N + 2 n_layer n_ctx d_attn, with N the non-embedding parameters, plus
 * the de-embedding 2 d_model n_vocab. The zoo also counts the A V product
 * of attention (Kaplan counts one n_ctx d_attn term), so within 10%; the
 * dense part alone is 2 x the block weights exactly. */
static void test_gpt2_flops(void)
{
    struct zoo_info z = lookup("gpt2-small");
    double tokens = 1024, d = 768, layers = 12, vocab = 50257;
    double block_weights = layers * (d * 3 * d + d * d + d * 4 * d + 4 * d * d);
    CHECK_NEAR(z.cost.forward[ZOO_OP_DENSE], 2 * tokens * (block_weights + d * vocab), 0.5);
    double n_nonembedding = 12 * layers * d * d; /* Kaplan's N = 2 d n_layer (2 d_attn + d_ff) */
    double kaplan = 2 * n_nonembedding + 2 * layers * tokens * d + 2 * d * vocab;
    double zoo_per_token = zoo_mac_flops(&z) / tokens;
    CHECK_MSG(fabs(zoo_per_token / kaplan - 1) < 0.10, "%.4g vs %.4g FLOPs per token",
              zoo_per_token, kaplan);
    CHECK(z.cost.forward[ZOO_OP_EMBEDDING] > 0 && z.cost.forward[ZOO_OP_NORM] > 0);
    CHECK_STREQ(z.input, "1024 tokens");
    CHECK(z.input_elements == 1024);
}

/* The adaptive-k paper's Table 2 counts float32 gradients in Gibit; VGG16 is
 * the row where its parameter count is torchvision's: 4.123 Gb. */
static void test_table2_vgg16(void)
{
    struct zoo_info z = lookup("vgg16");
    double gibit = (double)zoo_grad_bytes(&z) * 8 / (1u << 30);
    CHECK_NEAR(gibit, 4.123, 0.0005);
}

static void check_real(const char *spec)
{
    struct zoo_info z = lookup(spec);
    struct model *m = NULL;
    CHECK_MSG(model_create(spec, 0, &m, err, sizeof err) == 0, "%s: %s", spec, err);
    if (!m) return;
    CHECK(z.real);
    CHECK_STREQ(z.name, spec);
    CHECK(z.params == model_param_count(m));
    CHECK(z.input_elements == (uint64_t)model_input_size(m));
    CHECK(zoo_mac_flops(&z) == model_forward_flops(m));
    double gemm_grad =
        zoo_mac_flops(&z) + z.cost.backward[ZOO_OP_CONV] + z.cost.backward[ZOO_OP_DENSE];
    CHECK_MSG(gemm_grad == model_grad_flops(m), "%s: %.17g vs %.17g", spec, gemm_grad,
              model_grad_flops(m));
    CHECK(z.cost.forward[ZOO_OP_ELEMENTWISE] > 0);
    model_destroy(m);
}

static void test_real_archs(void)
{
    check_real("cnn:lenet");
    check_real("mlp:784-128-10");
    check_real("logreg:784-10");
    check_real("mlp:3072-512-256-100");
    struct zoo_info z = lookup("cnn:lenet");
    CHECK_STREQ(z.family, "lenet");
    CHECK_STREQ(z.input, "1x28x28");
    z = lookup("mlp:784-128-10");
    CHECK_STREQ(z.family, "dense");
}

static void test_listing(void)
{
    CHECK(zoo_count() >= 9);
    struct zoo_info z, again;
    for (int i = 0; i < zoo_count(); i++) {
        CHECK(zoo_at(i, &z) == 0);
        again = lookup(z.name);
        CHECK(again.params == z.params && zoo_grad_flops(&again) == zoo_grad_flops(&z));
        CHECK(z.family && z.input && z.input_elements > 0 && zoo_grad_flops(&z) > 0);
        for (int j = 0; j < i; j++) {
            struct zoo_info other;
            CHECK(zoo_at(j, &other) == 0 && strcmp(other.name, z.name) != 0);
        }
    }
    CHECK(zoo_at(-1, &z) == -1 && zoo_at(zoo_count(), &z) == -1);
    CHECK(zoo_op_parse("depthwise") == ZOO_OP_DEPTHWISE && zoo_op_parse("gemm") == -1);
    CHECK_STREQ(zoo_op_name(ZOO_OP_EMBEDDING), "embedding");
    CHECK(zoo_op_name(ZOO_OP_COUNT) == NULL);
}

static void test_unknown(void)
{
    struct zoo_info z;
    CHECK(zoo_lookup("resnet51", &z, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"resnet51\"");
    CHECK_CONTAINS(err, "resnet50");
    CHECK_CONTAINS(err, "gpt2-small");
    CHECK(strchr(err, '\n') == NULL);
    CHECK(zoo_lookup("mlp:784-x", &z, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "'x'");
    CHECK(zoo_lookup(NULL, &z, err, sizeof err) == -1);
}

int main(void)
{
    test_published_params();
    test_published_macs();
    test_gpt2_flops();
    test_table2_vgg16();
    test_real_archs();
    test_listing();
    test_unknown();
    return check_report();
}
