/* model_spec.h — what hiernet knows about a model architecture, in one
 * place: parsing a spec ("logreg:784-10", "mlp:784-256-128-10",
 * "cnn:lenet", "cnn:resnet20") with its error messages, the limits (layers, widths,
 * parameters, batch), and the layer table with the flat parameter layout of
 * kernels/model.h (each layer's weights then its bias, in order).
 *
 * Every device computes from this table: kernels/cpu/model.c runs its
 * layers, a device backend (kernels/backend.h) says which architectures it
 * runs and sizes its kernels from it. A new architecture is a parse rule
 * and a layer list here, its passes in cpu/model.c (layer kinds already
 * there need nothing), and kernels on the devices that should run it.
 *
 * Plain data, no allocation, no BLAS: the controller's checks can parse a
 * spec without linking the kernels. */
#pragma once

#include <stddef.h>

#define MODEL_MAX_LAYERS 64
#define MODEL_MAX_WIDTH 1000000
#define MODEL_MAX_PARAMS (1ull << 31)
#define MODEL_MAX_BATCH 65536
/* Smallest evaluation chunk (model_eval on the CPU). */
#define MODEL_EVAL_MIN_BATCH 64

/* Architecture families: a device backend lists those it runs as a mask of
 * MODEL_ARCH_BIT(arch). logreg and mlp are both dense stacks. */
enum model_arch { MODEL_ARCH_DENSE, MODEL_ARCH_LENET, MODEL_ARCH_RESNET, MODEL_ARCH_COUNT };
#define MODEL_ARCH_BIT(arch) (1u << (arch))
#define MODEL_ARCH_ALL ((1u << MODEL_ARCH_COUNT) - 1)

enum model_layer_kind {
    MODEL_LAYER_DENSE,
    MODEL_LAYER_CONV,
    MODEL_LAYER_POOL,
    MODEL_LAYER_FLATTEN,
    MODEL_LAYER_BATCHNORM, /* per-channel batch normalisation, weight = gamma, bias = beta */
    MODEL_LAYER_RESIDUAL,  /* adds the output of layer skip_from (option-A shortcut) */
    MODEL_LAYER_AVGPOOL    /* global average pool: channel-major maps to per-sample rows */
};

struct model_layer {
    enum model_layer_kind kind;
    int relu;                /* ReLU fused onto the output */
    int in_c, in_h, in_w;    /* input shape; dense: in_c features */
    int out_c, out_h, out_w; /* output shape */
    int kernel, pad, stride; /* conv: square kernel, zero padding, stride */
    int bias;                /* dense, conv: has a bias (resnet's convs have none) */
    int skip_from;           /* residual: the layer whose output is added, -1 the input */
    size_t weight_offset, bias_offset;
    size_t stat_offset;       /* batchnorm: running mean[out_c] then running var[out_c] */
    size_t in_size, out_size; /* floats per sample */
    size_t col_size;          /* conv: im2col floats per sample */
};

struct model_spec {
    enum model_arch arch;
    int n_sizes; /* dense: the widths IN, H1, ..., OUT */
    int sizes[MODEL_MAX_LAYERS + 1];
    int in_c, in_h, in_w; /* input shape of the first layer */
    struct model_layer layers[MODEL_MAX_LAYERS];
    int layer_count;
    /* Elements of the flat tensor: the trainable parameters first
     * (trainable_count), then the batch-norm running statistics, which no
     * optimizer may step on (kernels/model.h, "Batch normalisation"). */
    size_t param_count;
    size_t trainable_count;
};

/* Parses spec into *out. Errors quote the spec and the part at fault:
 * "model spec \"mlp:784-x\": the second layer size 'x' is not a whole
 * number from 1 to 1000000". */
int model_spec_parse(const char *spec, struct model_spec *out, char *err, size_t errlen);

/* Whether layers first..last (0-based, inclusive: layer 1 of the docs is
 * 0 here) can run as one part of a split model (model_forward_range): in
 * the table, and not cutting a residual block (a cut inside one would need
 * the block's shortcut tensor too). 0, or -1 with err naming the layers in
 * the 1-based numbering users write ("layers {4, 9}: the cut before layer
 * 4 falls inside the residual block of layers 3-7 ..."). */
int model_spec_range_check(const struct model_spec *s, int first, int last, char *err,
                           size_t errlen);

/* "dense", "cnn:lenet" or "cnn:resnet20", for messages. */
const char *model_arch_name(enum model_arch arch);

static inline int model_spec_input_size(const struct model_spec *s)
{
    return (int)s->layers[0].in_size;
}

static inline int model_spec_classes(const struct model_spec *s)
{
    return (int)s->layers[s->layer_count - 1].out_size;
}
