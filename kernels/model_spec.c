/* model_spec.c — parsing model specs into layer tables (see model_spec.h).
 * Owns nothing: the caller's struct model_spec holds the result. */
#include "kernels/model_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_error.h"

/* ---- layer table ---- */

static struct model_layer *layer_append(struct model_spec *s, enum model_layer_kind kind)
{
    struct model_layer *prev = s->layer_count ? &s->layers[s->layer_count - 1] : NULL;
    struct model_layer *l = &s->layers[s->layer_count++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->in_c = prev ? prev->out_c : s->in_c;
    l->in_h = prev ? prev->out_h : s->in_h;
    l->in_w = prev ? prev->out_w : s->in_w;
    return l;
}

static void layer_finish(struct model_spec *s, struct model_layer *l, size_t weights, size_t biases)
{
    l->in_size = (size_t)l->in_c * l->in_h * l->in_w;
    l->out_size = (size_t)l->out_c * l->out_h * l->out_w;
    l->weight_offset = s->param_count;
    l->bias_offset = s->param_count + weights;
    s->param_count += weights + biases;
}

static void add_dense(struct model_spec *s, int in, int out, int relu)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_DENSE);
    /* Dense layers see the previous map flattened. */
    l->in_c = in;
    l->in_h = l->in_w = 1;
    l->out_c = out;
    l->out_h = l->out_w = 1;
    l->relu = relu;
    l->bias = 1;
    layer_finish(s, l, (size_t)in * out, (size_t)out);
}

/* A square convolution; ReLU fused on lenet's, none on resnet's (its batch
 * norm carries the ReLU). */
static void add_conv(struct model_spec *s, int out_c, int kernel, int pad, int stride, int bias)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_CONV);
    l->out_c = out_c;
    l->kernel = kernel;
    l->pad = pad;
    l->stride = stride;
    l->bias = bias;
    l->out_h = (l->in_h + 2 * pad - kernel) / stride + 1;
    l->out_w = (l->in_w + 2 * pad - kernel) / stride + 1;
    l->relu = bias;
    size_t patch = (size_t)kernel * kernel * l->in_c;
    l->col_size = (size_t)l->out_h * l->out_w * patch;
    layer_finish(s, l, patch * out_c, bias ? (size_t)out_c : 0);
}

/* 2x2 max pooling, stride 2 (odd trailing rows and columns dropped). */
static void add_pool(struct model_spec *s)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_POOL);
    l->out_c = l->in_c;
    l->out_h = l->in_h / 2;
    l->out_w = l->in_w / 2;
    layer_finish(s, l, 0, 0);
}

/* From the channel-major maps of the conv layers to per-sample rows. */
static void add_flatten(struct model_spec *s)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_FLATTEN);
    l->out_c = l->in_c * l->in_h * l->in_w;
    l->out_h = l->out_w = 1;
    layer_finish(s, l, 0, 0);
}

static void build_lenet(struct model_spec *s)
{
    s->arch = MODEL_ARCH_LENET;
    s->in_c = 1;
    s->in_h = s->in_w = 28;
    add_conv(s, 6, 5, 2, 1, 1);
    add_pool(s);
    add_conv(s, 16, 5, 0, 1, 1);
    add_pool(s);
    add_flatten(s);
    add_dense(s, 400, 120, 1);
    add_dense(s, 120, 84, 1);
    add_dense(s, 84, 10, 0);
}

/* ---- resnet ---- */

/* Batch norm over the channels of the previous map: gamma (the layer's
 * weight) then beta (its bias), as PyTorch's BatchNorm2d; the running
 * statistics get their offsets once all parameters are laid out. */
static void add_batchnorm(struct model_spec *s, int relu)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_BATCHNORM);
    l->out_c = l->in_c;
    l->out_h = l->in_h;
    l->out_w = l->in_w;
    l->relu = relu;
    layer_finish(s, l, (size_t)l->out_c, (size_t)l->out_c);
}

/* Adds layer skip_from's output to the previous map, then ReLU. A map of
 * other shape enters by He et al.'s option A: every second pixel of every
 * second row, its channels zero-padded evenly on both sides (parameter
 * free). */
static void add_residual(struct model_spec *s, int skip_from)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_RESIDUAL);
    l->out_c = l->in_c;
    l->out_h = l->in_h;
    l->out_w = l->in_w;
    l->relu = 1;
    l->skip_from = skip_from;
    layer_finish(s, l, 0, 0);
}

static void add_avgpool(struct model_spec *s)
{
    struct model_layer *l = layer_append(s, MODEL_LAYER_AVGPOOL);
    l->out_c = l->in_c;
    l->out_h = l->out_w = 1;
    layer_finish(s, l, 0, 0);
}

/* conv 3x3 - BN - ReLU - conv 3x3 - BN, plus the block's input, ReLU. */
static void add_basic_block(struct model_spec *s, int channels, int stride)
{
    int block_input = s->layer_count - 1;
    add_conv(s, channels, 3, 1, stride, 0);
    add_batchnorm(s, 1);
    add_conv(s, channels, 3, 1, 1, 0);
    add_batchnorm(s, 0);
    add_residual(s, block_input);
}

/* Running mean and variance of every batch norm, after all trainable
 * parameters and in layer order, so one contiguous tail of the flat tensor
 * holds every statistic (PyTorch's buffers). */
static void place_running_stats(struct model_spec *s)
{
    s->trainable_count = s->param_count;
    for (int i = 0; i < s->layer_count; i++) {
        struct model_layer *l = &s->layers[i];
        if (l->kind != MODEL_LAYER_BATCHNORM) continue;
        l->stat_offset = s->param_count;
        s->param_count += 2 * (size_t)l->out_c;
    }
}

/* ResNet-20 of He et al. 2016 (sec. 4.2, CIFAR-10): a 3x3 conv of 16
 * channels, three stages of three basic blocks of 16, 32, 64 channels (the
 * first block of stages 2 and 3 halves the map with stride 2), global
 * average pooling, a dense layer to 10 classes. Here on 28x28x1 input, so
 * the maps are 28, 14 and 7 pixels wide. */
static void build_resnet20(struct model_spec *s)
{
    static const int widths[3] = {16, 32, 64};
    s->arch = MODEL_ARCH_RESNET;
    s->in_c = 1;
    s->in_h = s->in_w = 28;
    add_conv(s, 16, 3, 1, 1, 0);
    add_batchnorm(s, 1);
    for (int stage = 0; stage < 3; stage++)
        for (int block = 0; block < 3; block++)
            add_basic_block(s, widths[stage], stage > 0 && block == 0 ? 2 : 1);
    add_avgpool(s);
    add_dense(s, 64, 10, 0);
    place_running_stats(s);
}

/* ---- parsing ---- */

/* "first", "second", ... for the n-th (1-based) layer size in messages. */
static const char *ordinal(int n, char *buf, size_t cap)
{
    static const char *const words[] = {"first", "second",  "third",  "fourth", "fifth",
                                        "sixth", "seventh", "eighth", "ninth",  "tenth"};
    if (n >= 1 && n <= 10) return words[n - 1];
    snprintf(buf, cap, "%dth", n);
    return buf;
}

/* Parses "A-B-C" into sizes; returns the count or -1 with err set, quoting
 * the size at fault as the user wrote it. */
static int parse_sizes(const char *spec, const char *list, int *sizes, int cap, char *err,
                       size_t errlen)
{
    int count = 0;
    const char *p = list;
    for (;;) {
        char *end = (char *)p;
        long v = -1;
        errno = 0;
        if (*p >= '0' && *p <= '9') /* strtol alone would accept "+5" and " 5" */
            v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > MODEL_MAX_WIDTH || (*end != '-' && *end != '\0')) {
            size_t len = strcspn(p, "-");
            char nth[16];
            return kern_fail(err, errlen,
                             "model spec \"%s\": the %s layer size '%.*s' is not a whole number "
                             "from 1 to %d",
                             spec, ordinal(count + 1, nth, sizeof nth), (int)(len < 32 ? len : 32),
                             p, MODEL_MAX_WIDTH);
        }
        if (count == cap)
            return kern_fail(err, errlen, "model spec \"%s\": more than %d layer sizes", spec, cap);
        sizes[count++] = (int)v;
        if (*end == '\0') return count;
        p = end + 1;
    }
}

static int build_dense_stack(struct model_spec *s, const char *spec, const char *list,
                             int is_logreg, char *err, size_t errlen)
{
    int n = parse_sizes(spec, list, s->sizes, MODEL_MAX_LAYERS + 1, err, errlen);
    if (n < 0) return -1;
    if (is_logreg && n != 2)
        return kern_fail(err, errlen, "model spec \"%s\": logreg takes exactly IN-OUT", spec);
    if (n < 2) return kern_fail(err, errlen, "model spec \"%s\": mlp needs at least IN-OUT", spec);
    s->arch = MODEL_ARCH_DENSE;
    s->n_sizes = n;
    for (int i = 0; i + 1 < n; i++)
        add_dense(s, s->sizes[i], s->sizes[i + 1], i + 2 < n);
    return 0;
}

static int parse_arch(struct model_spec *s, const char *spec, char *err, size_t errlen)
{
    if (strncmp(spec, "logreg:", 7) == 0)
        return build_dense_stack(s, spec, spec + 7, 1, err, errlen);
    if (strncmp(spec, "mlp:", 4) == 0) return build_dense_stack(s, spec, spec + 4, 0, err, errlen);
    if (strcmp(spec, "cnn:lenet") == 0) {
        build_lenet(s);
        return 0;
    }
    if (strcmp(spec, "cnn:resnet20") == 0) {
        build_resnet20(s);
        return 0;
    }
    if (strncmp(spec, "cnn:", 4) == 0)
        return kern_fail(err, errlen,
                         "model spec \"%s\": unknown cnn (known: cnn:lenet, cnn:resnet20)", spec);
    return kern_fail(err, errlen,
                     "model spec \"%s\": unknown architecture (expected logreg:IN-OUT, "
                     "mlp:IN-H1-...-OUT, cnn:lenet or cnn:resnet20)",
                     spec);
}

int model_spec_parse(const char *spec, struct model_spec *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!spec) return kern_fail(err, errlen, "model spec is missing");
    if (parse_arch(out, spec, err, errlen) < 0) return -1;
    if (out->arch != MODEL_ARCH_RESNET) out->trainable_count = out->param_count;
    if (out->param_count > MODEL_MAX_PARAMS)
        return kern_fail(err, errlen, "model spec \"%s\": %zu parameters exceed the limit of %llu",
                         spec, out->param_count, MODEL_MAX_PARAMS);
    return 0;
}

const char *model_arch_name(enum model_arch arch)
{
    static const char *const names[MODEL_ARCH_COUNT] = {"dense", "cnn:lenet", "cnn:resnet20"};
    return (unsigned)arch < MODEL_ARCH_COUNT ? names[arch] : "?";
}

/* ---- layer ranges ---- */

/* A residual block is layers skip_from + 1 .. the residual layer: its
 * shortcut carries the block's input to its end, so a cut inside it would
 * have to ship a second tensor. Ranges start and end at block boundaries. */
static int cut_inside_block(const struct model_spec *s, int cut, int *from, int *to)
{
    for (int r = 0; r < s->layer_count; r++) {
        const struct model_layer *l = &s->layers[r];
        if (l->kind == MODEL_LAYER_RESIDUAL && l->skip_from + 1 < cut && cut <= r) {
            *from = l->skip_from + 1;
            *to = r;
            return 1;
        }
    }
    return 0;
}

int model_spec_range_check(const struct model_spec *s, int first, int last, char *err,
                           size_t errlen)
{
    if (first < 0 || last < first || last >= s->layer_count)
        return kern_fail(err, errlen, "layers {%d, %d}: %s has layers 1 to %d", first + 1, last + 1,
                         model_arch_name(s->arch), s->layer_count);
    int from, to;
    /* A cut sits before layer `cut` (0-based): before first, after last. */
    int cuts[2] = {first, last + 1};
    for (int i = 0; i < 2; i++)
        if (cut_inside_block(s, cuts[i], &from, &to))
            return kern_fail(err, errlen,
                             "layers {%d, %d}: the cut %s layer %d falls inside the residual "
                             "block of layers %d-%d (cut before its first layer or after its "
                             "last)",
                             first + 1, last + 1, i ? "after" : "before", i ? last + 1 : first + 1,
                             from + 1, to + 1);
    return 0;
}
