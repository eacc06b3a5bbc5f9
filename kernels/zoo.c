/* zoo.c — the zoo architectures as layer sequences, and their sizes and
 * costs summed from them (see zoo.h). Owns nothing: every answer is written
 * into the caller's struct zoo_info. */
#include "kernels/zoo.h"

#include <stdio.h>
#include <string.h>

#include "kernels/kern_error.h"
#include "kernels/model_spec.h"

/* ---- the builder: a per-sample activation shape and the running sums ---- */

/* zoo_trace's listener. Shared by a builder and the copies it makes for a
 * shortcut, so that the parameters each step owns follow on. */
struct tracer {
    zoo_layer_fn fn;
    void *ctx;
    uint64_t params; /* parameters reported so far */
};

struct builder {
    struct zoo_info *z;
    int c, h, w;          /* activation shape of one sample (GPT-2: width x tokens x 1) */
    bool first_mac;       /* no multiply-accumulate layer yet: its input needs no gradient */
    struct tracer *trace; /* NULL: only the sums */
};

static double elements(const struct builder *b)
{
    return (double)b->c * b->h * b->w;
}

/* Every layer adds its parameters before its cost, so the parameters added
 * since the last step reported are this step's. */
static void cost_add(struct builder *b, enum zoo_op op, double forward, double backward)
{
    b->z->cost.forward[op] += forward;
    b->z->cost.backward[op] += backward;
    if (!b->trace) return;
    struct zoo_layer l = {.param_first = b->trace->params, .param_end = b->z->params};
    l.cost.forward[op] = forward;
    l.cost.backward[op] = backward;
    b->trace->params = b->z->params;
    b->trace->fn(b->trace->ctx, &l);
}

/* A layer of `macs` multiply-accumulates per sample: 2 FLOPs each forward,
 * the weight and input gradients backward (no input gradient for the first
 * one), as model_grad_flops. */
static void cost_macs(struct builder *b, enum zoo_op op, double macs)
{
    cost_add(b, op, 2 * macs, 2 * macs * (b->first_mac ? 1 : 2));
    b->first_mac = false;
}

static void elementwise(struct builder *b, double per_element)
{
    cost_add(b, ZOO_OP_ELEMENTWISE, per_element * elements(b), per_element * elements(b));
}

static void relu(struct builder *b)
{
    elementwise(b, 1);
}

/* Batch norm: scale and shift trained, running mean and variance kept. */
static void batch_norm(struct builder *b)
{
    b->z->params += 2 * (uint64_t)b->c;
    b->z->buffers += 2 * (uint64_t)b->c;
    cost_add(b, ZOO_OP_NORM, 4 * elements(b), 8 * elements(b));
}

/* Convolution of square kernel k; groups == channels is a depthwise one. */
static void conv(struct builder *b, int out_c, int k, int stride, int pad, int groups, bool bias)
{
    int out_h = (b->h + 2 * pad - k) / stride + 1;
    int out_w = (b->w + 2 * pad - k) / stride + 1;
    uint64_t weights = (uint64_t)out_c * (b->c / groups) * k * k;
    enum zoo_op op = groups > 1 && groups == b->c ? ZOO_OP_DEPTHWISE : ZOO_OP_CONV;
    b->z->params += weights + (bias ? (uint64_t)out_c : 0);
    b->c = out_c;
    b->h = out_h;
    b->w = out_w;
    cost_macs(b, op, (double)weights * out_h * out_w);
    if (bias) elementwise(b, 1);
}

/* Dense layer applied at every position (h x w: tokens for GPT-2, 1 after
 * pooling or flattening in a CNN). tied: the weights are another layer's. */
static void dense(struct builder *b, int out, bool bias, bool tied)
{
    uint64_t weights = (uint64_t)b->c * out;
    double positions = (double)b->h * b->w;
    if (!tied) b->z->params += weights + (bias ? (uint64_t)out : 0);
    b->c = out;
    cost_macs(b, ZOO_OP_DENSE, (double)weights * positions);
    if (bias) elementwise(b, 1);
}

static void max_pool(struct builder *b, int k, int stride, int pad)
{
    b->h = (b->h + 2 * pad - k) / stride + 1;
    b->w = (b->w + 2 * pad - k) / stride + 1;
    cost_add(b, ZOO_OP_ELEMENTWISE, (double)k * k * elements(b), elements(b));
}

static void global_avg_pool(struct builder *b)
{
    elementwise(b, 1);
    b->h = b->w = 1;
}

static void flatten(struct builder *b)
{
    b->c = b->c * b->h * b->w;
    b->h = b->w = 1;
}

/* ---- ResNet (He et al. 2016; torchvision's layout: stride in the 3x3 of a
 * bottleneck, 1x1 projection with batch norm on the shortcut) ---- */

static void conv_bn(struct builder *b, int out_c, int k, int stride, bool then_relu)
{
    conv(b, out_c, k, stride, k / 2, 1, false);
    batch_norm(b);
    if (then_relu) relu(b);
}

/* The shortcut: a projection where the shape changes, then the sum. The
 * projection runs on the block's input, so it is built from a copy. */
static void residual_join(struct builder *b, struct builder in, int stride)
{
    if (stride != 1 || in.c != b->c) {
        in.first_mac = false;
        conv_bn(&in, b->c, 1, stride, false);
    }
    elementwise(b, 1); /* the add */
    relu(b);
}

static void basic_block(struct builder *b, int width, int stride)
{
    struct builder in = *b;
    conv_bn(b, width, 3, stride, true);
    conv_bn(b, width, 3, 1, false);
    residual_join(b, in, stride);
}

static void bottleneck_block(struct builder *b, int width, int stride)
{
    struct builder in = *b;
    conv_bn(b, width, 1, 1, true);
    conv_bn(b, width, 3, stride, true);
    conv_bn(b, width * 4, 1, 1, false);
    residual_join(b, in, stride);
}

struct zoo_arch;
typedef void (*zoo_build_fn)(struct builder *b, const struct zoo_arch *a);

/* One zoo entry: its name, family, input and how to build it. */
struct zoo_arch {
    const char *name, *family, *input;
    int in_c, in_h, in_w;
    zoo_build_fn build;
    int depths[4];     /* ResNet stage depths */
    const int *config; /* VGG: channels, 0 for a max pool, -1 to end */
};

static void build_resnet(struct builder *b, const struct zoo_arch *a, bool bottleneck)
{
    conv_bn(b, 64, 7, 2, true);
    max_pool(b, 3, 2, 1);
    for (int stage = 0; stage < 4; stage++)
        for (int i = 0; i < a->depths[stage]; i++) {
            int width = 64 << stage, stride = stage > 0 && i == 0 ? 2 : 1;
            if (bottleneck)
                bottleneck_block(b, width, stride);
            else
                basic_block(b, width, stride);
        }
    global_avg_pool(b);
    dense(b, 1000, true, false);
}

static void build_resnet_basic(struct builder *b, const struct zoo_arch *a)
{
    build_resnet(b, a, false);
}

static void build_resnet_bottleneck(struct builder *b, const struct zoo_arch *a)
{
    build_resnet(b, a, true);
}

/* ---- VGG (Simonyan & Zisserman 2015, torchvision without batch norm) ---- */

static const int vgg16_config[] = {64,  64,  0,   128, 128, 0,   256, 256, 256, 0,
                                   512, 512, 512, 0,   512, 512, 512, 0,   -1};
static const int vgg19_config[] = {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                   512, 512, 512, 512, 0,   512, 512, 512, 512, 0,   -1};

static void build_vgg(struct builder *b, const struct zoo_arch *a)
{
    for (const int *c = a->config; *c >= 0; c++) {
        if (*c == 0) {
            max_pool(b, 2, 2, 0);
            continue;
        }
        conv(b, *c, 3, 1, 1, 1, true);
        relu(b);
    }
    flatten(b); /* 512x7x7 at 224x224: torchvision's adaptive pool is the identity */
    for (int i = 0; i < 2; i++) {
        dense(b, 4096, true, false);
        relu(b);
        elementwise(b, 1); /* dropout */
    }
    dense(b, 1000, true, false);
}

/* ---- MobileNet v1 (Howard et al. 2017, Table 1: the adaptive-k paper's
 * MobileNet) and v2 (Sandler et al. 2018, torchvision's layout) ---- */

static void build_mobilenet_v1(struct builder *b, const struct zoo_arch *a)
{
    /* (output channels, stride) of the 13 depthwise-separable layers */
    static const int layers[13][2] = {{64, 1},  {128, 2},  {128, 1}, {256, 2}, {256, 1},
                                      {512, 2}, {512, 1},  {512, 1}, {512, 1}, {512, 1},
                                      {512, 1}, {1024, 2}, {1024, 1}};
    conv_bn(b, 32, 3, 2, true);
    for (int i = 0; i < 13; i++) {
        conv(b, b->c, 3, layers[i][1], 1, b->c, false);
        batch_norm(b);
        relu(b);
        conv_bn(b, layers[i][0], 1, 1, true);
    }
    global_avg_pool(b);
    dense(b, 1000, true, false);
}

static void inverted_residual(struct builder *b, int expand, int out_c, int stride)
{
    struct builder in = *b;
    if (expand != 1) conv_bn(b, b->c * expand, 1, 1, true); /* ReLU6 */
    conv(b, b->c, 3, stride, 1, b->c, false);
    batch_norm(b);
    relu(b);
    conv_bn(b, out_c, 1, 1, false); /* linear bottleneck */
    if (stride == 1 && in.c == out_c) elementwise(b, 1);
}

static void build_mobilenet_v2(struct builder *b, const struct zoo_arch *a)
{
    /* t (expansion), c (channels), n (repeats), s (stride): Sandler et al. Table 2 */
    static const int stages[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                     {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    conv_bn(b, 32, 3, 2, true);
    for (int s = 0; s < 7; s++)
        for (int i = 0; i < stages[s][2]; i++)
            inverted_residual(b, stages[s][0], stages[s][1], i == 0 ? stages[s][3] : 1);
    conv_bn(b, 1280, 1, 1, true);
    global_avg_pool(b);
    elementwise(b, 1); /* dropout */
    dense(b, 1000, true, false);
}

/* ---- GPT-2 small (Radford et al. 2019; the Hugging Face layout: learned
 * positions, pre-norm blocks, LM head tied to the token embedding). One
 * sample is one sequence of n_ctx tokens: c = width, h = tokens. ---- */

enum { GPT2_VOCAB = 50257, GPT2_CTX = 1024, GPT2_WIDTH = 768, GPT2_LAYERS = 12 };

static void layer_norm(struct builder *b)
{
    b->z->params += 2 * (uint64_t)b->c;
    cost_add(b, ZOO_OP_NORM, 4 * elements(b), 8 * elements(b));
}

/* Scores Q K^T and the weighted sum A V, for every head together: each
 * token meets every token (the causal mask halves the useful work, but the
 * usual kernels compute the full square). Softmax on the scores. */
static void attention_core(struct builder *b)
{
    double tokens = b->h, macs = tokens * tokens * b->c;
    cost_macs(b, ZOO_OP_ATTENTION, 2 * macs);
    double scores = tokens * tokens * (b->c / 64); /* 64-wide heads */
    cost_add(b, ZOO_OP_ELEMENTWISE, 3 * scores, 3 * scores);
}

static void transformer_block(struct builder *b)
{
    int width = b->c;
    layer_norm(b);
    dense(b, 3 * width, true, false); /* Q, K, V */
    b->c = width;
    attention_core(b);
    dense(b, width, true, false);
    elementwise(b, 1); /* residual add */
    layer_norm(b);
    dense(b, 4 * width, true, false);
    elementwise(b, 1); /* GELU */
    dense(b, width, true, false);
    elementwise(b, 1); /* residual add */
}

static void build_gpt2(struct builder *b, const struct zoo_arch *a)
{
    b->c = GPT2_WIDTH;
    b->h = GPT2_CTX;
    b->w = 1;
    b->z->params += ((uint64_t)GPT2_VOCAB + GPT2_CTX) * GPT2_WIDTH;
    cost_add(b, ZOO_OP_EMBEDDING, 2 * elements(b), 2 * elements(b)); /* token + position */
    for (int i = 0; i < GPT2_LAYERS; i++)
        transformer_block(b);
    layer_norm(b);
    dense(b, GPT2_VOCAB, false, true);
}

static const struct zoo_arch zoo_archs[] = {
    {"resnet18", "resnet", "3x224x224", 3, 224, 224, build_resnet_basic, {2, 2, 2, 2}, NULL},
    {"resnet34", "resnet", "3x224x224", 3, 224, 224, build_resnet_basic, {3, 4, 6, 3}, NULL},
    {"resnet50", "resnet", "3x224x224", 3, 224, 224, build_resnet_bottleneck, {3, 4, 6, 3}, NULL},
    {"resnet101", "resnet", "3x224x224", 3, 224, 224, build_resnet_bottleneck, {3, 4, 23, 3}, NULL},
    {"resnet152", "resnet", "3x224x224", 3, 224, 224, build_resnet_bottleneck, {3, 8, 36, 3}, NULL},
    {"vgg16", "vgg", "3x224x224", 3, 224, 224, build_vgg, {0}, vgg16_config},
    {"vgg19", "vgg", "3x224x224", 3, 224, 224, build_vgg, {0}, vgg19_config},
    {"mobilenet_v1", "mobilenet", "3x224x224", 3, 224, 224, build_mobilenet_v1, {0}, NULL},
    {"mobilenet_v2", "mobilenet", "3x224x224", 3, 224, 224, build_mobilenet_v2, {0}, NULL},
    {"gpt2-small", "gpt2", "1024 tokens", 1, GPT2_CTX, 1, build_gpt2, {0}, NULL},
};

enum { ZOO_COUNT = sizeof zoo_archs / sizeof zoo_archs[0] };

static void zoo_build_traced(const struct zoo_arch *a, struct zoo_info *out, struct tracer *trace)
{
    memset(out, 0, sizeof *out);
    out->name = a->name;
    out->family = a->family;
    out->input = a->input;
    out->input_elements = (uint64_t)a->in_c * a->in_h * a->in_w;
    struct builder b = {out, a->in_c, a->in_h, a->in_w, true, trace};
    a->build(&b, a);
}

static void zoo_build(const struct zoo_arch *a, struct zoo_info *out)
{
    zoo_build_traced(a, out, NULL);
}

/* ---- real architectures: the layer table of kernels/model_spec.h ---- */

static void real_layer_cost(struct builder *b, const struct model_layer *l)
{
    b->c = l->out_c;
    b->h = l->out_h;
    b->w = l->out_w;
    switch (l->kind) {
    case MODEL_LAYER_DENSE:
        cost_macs(b, ZOO_OP_DENSE, (double)l->in_size * l->out_size);
        break;
    case MODEL_LAYER_CONV:
        cost_macs(b, ZOO_OP_CONV, (double)l->col_size * l->out_c);
        break;
    case MODEL_LAYER_POOL: /* 2x2 max: every input element compared once */
        cost_add(b, ZOO_OP_ELEMENTWISE, (double)l->in_size, (double)l->in_size);
        return;
    case MODEL_LAYER_FLATTEN:
        return;
    case MODEL_LAYER_BATCHNORM: /* normalisation (its parameters are in the
                                 * spec's count already), then the ReLU */
        cost_add(b, ZOO_OP_NORM, 4 * elements(b), 8 * elements(b));
        if (l->relu) relu(b);
        return;
    case MODEL_LAYER_RESIDUAL: /* the add, then the fused ReLU if any */
        elementwise(b, l->relu ? 2 : 1);
        return;
    case MODEL_LAYER_AVGPOOL: /* every input element added once */
        cost_add(b, ZOO_OP_ELEMENTWISE, (double)l->in_size, (double)l->in_size);
        return;
    }
    elementwise(b, l->relu ? 2 : 1); /* bias, and the fused ReLU */
}

static const char *real_family(enum model_arch arch)
{
    switch (arch) {
    case MODEL_ARCH_DENSE:
        return "dense";
    case MODEL_ARCH_LENET:
        return "lenet";
    default:
        return model_arch_name(arch);
    }
}

/* The real layer table places each layer's parameters itself (weight
 * then bias, from weight_offset; none: the next layer's offset), so the
 * parameters a step owns are set before its cost is reported. */
static void real_trace_params(struct builder *b, const struct model_spec *spec, int i)
{
    if (!b->trace) return;
    b->trace->params = spec->layers[i].weight_offset;
    b->z->params =
        i + 1 < spec->layer_count ? spec->layers[i + 1].weight_offset : spec->trainable_count;
}

static void real_build_traced(const char *spec_text, const struct model_spec *spec,
                              struct zoo_info *out, struct tracer *trace)
{
    memset(out, 0, sizeof *out);
    out->name = spec_text;
    out->family = real_family(spec->arch);
    out->input = spec->arch == MODEL_ARCH_DENSE ? "flat" : "1x28x28";
    out->input_elements = (uint64_t)model_spec_input_size(spec);
    /* The tensor's size is params + buffers (batch-norm statistics ride
     * after the trainable parameters, kernels/model.h). */
    out->params = spec->trainable_count;
    out->buffers = spec->param_count - spec->trainable_count;
    out->real = true;
    struct builder b = {out, spec->in_c, spec->in_h, spec->in_w, true, trace};
    for (int i = 0; i < spec->layer_count; i++) {
        real_trace_params(&b, spec, i);
        real_layer_cost(&b, &spec->layers[i]);
    }
    out->params = spec->trainable_count; /* the tracing moved it along */
}

/* out += what the builder's sums grew by since `before`. */
static void cost_add_delta(struct zoo_cost *out, const struct zoo_cost *now,
                           const struct zoo_cost *before)
{
    for (int op = 0; op < ZOO_OP_COUNT; op++) {
        out->forward[op] += now->forward[op] - before->forward[op];
        out->backward[op] += now->backward[op] - before->backward[op];
    }
}

int zoo_range_cost(const char *spec_text, int first, int last, struct zoo_cost *out, char *err,
                   size_t errlen)
{
    struct model_spec spec;
    if (!spec_text) return kern_fail(err, errlen, "model spec is missing");
    if (model_spec_parse(spec_text, &spec, err, errlen) < 0 ||
        model_spec_range_check(&spec, first, last, err, errlen) < 0)
        return -1;
    /* The whole model is built so that every layer sees the shape and the
     * first-layer rule it has in the unsplit model; only the range's
     * layers are summed. */
    struct zoo_info z;
    memset(&z, 0, sizeof z);
    memset(out, 0, sizeof *out);
    struct builder b = {&z, spec.in_c, spec.in_h, spec.in_w, true, NULL};
    for (int i = 0; i <= last; i++) {
        struct zoo_cost before = z.cost;
        real_layer_cost(&b, &spec.layers[i]);
        if (i >= first) cost_add_delta(out, &z.cost, &before);
    }
    return 0;
}

/* ---- queries ---- */

int zoo_count(void)
{
    return ZOO_COUNT;
}

int zoo_at(int i, struct zoo_info *out)
{
    if (i < 0 || i >= ZOO_COUNT) return -1;
    zoo_build(&zoo_archs[i], out);
    return 0;
}

static void zoo_names(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < ZOO_COUNT && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", zoo_archs[i].name);
}

/* zoo_lookup and zoo_trace: the sums into out, each step to trace. */
static int zoo_lookup_traced(const char *name, struct zoo_info *out, struct tracer *trace,
                             char *err, size_t errlen)
{
    if (!name) return kern_fail(err, errlen, "model name is missing");
    for (int i = 0; i < ZOO_COUNT; i++)
        if (!strcmp(name, zoo_archs[i].name)) {
            zoo_build_traced(&zoo_archs[i], out, trace);
            return 0;
        }
    struct model_spec spec;
    char spec_err[256];
    if (model_spec_parse(name, &spec, spec_err, sizeof spec_err) == 0) {
        real_build_traced(name, &spec, out, trace);
        return 0;
    }
    char names[256];
    zoo_names(names, sizeof names);
    return kern_fail(err, errlen, "model \"%s\": not in the zoo (%s) and not a model spec (%s)",
                     name, names, spec_err);
}

int zoo_lookup(const char *name, struct zoo_info *out, char *err, size_t errlen)
{
    return zoo_lookup_traced(name, out, NULL, err, errlen);
}

int zoo_trace(const char *name, zoo_layer_fn fn, void *ctx, char *err, size_t errlen)
{
    struct zoo_info info;
    struct tracer trace = {fn, ctx, 0};
    return zoo_lookup_traced(name, &info, &trace, err, errlen);
}

static double sum_ops(const double *by_op, int first, int last)
{
    double total = 0;
    for (int op = first; op <= last; op++)
        total += by_op[op];
    return total;
}

double zoo_forward_flops(const struct zoo_info *z)
{
    return sum_ops(z->cost.forward, 0, ZOO_OP_COUNT - 1);
}

double zoo_grad_flops(const struct zoo_info *z)
{
    return zoo_forward_flops(z) + sum_ops(z->cost.backward, 0, ZOO_OP_COUNT - 1);
}

double zoo_mac_flops(const struct zoo_info *z)
{
    return sum_ops(z->cost.forward, ZOO_OP_CONV, ZOO_OP_ATTENTION);
}

uint64_t zoo_grad_bytes(const struct zoo_info *z)
{
    return 4 * z->params;
}

static const char *const zoo_op_names[ZOO_OP_COUNT] = {
    "conv", "depthwise", "dense", "attention", "norm", "elementwise", "embedding"};

const char *zoo_op_name(enum zoo_op op)
{
    return (unsigned)op < ZOO_OP_COUNT ? zoo_op_names[op] : NULL;
}

int zoo_op_parse(const char *name)
{
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        if (!strcmp(name, zoo_op_names[op])) return op;
    return -1;
}
