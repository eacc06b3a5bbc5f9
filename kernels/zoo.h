/* zoo.h — the model zoo: architectures hiernet can time and size without
 * computing them (ResNet, VGG, MobileNet, GPT-2), and the same questions
 * answered for the real architectures of kernels/model_spec.h.
 *
 * Each zoo architecture is described once, as a sequence of layers with
 * their shapes (zoo.c builds it with a small builder: a ResNet is its block
 * kind and its stage depths, [3,4,6,3] for ResNet-50); its parameter count
 * and its FLOPs per sample are summed from that description, never typed in.
 *
 * FLOP conventions (docs/models.md):
 *  - conv, depthwise, dense, attention: 2 FLOPs per multiply-accumulate,
 *    as model_forward_flops (kernels/model.h). Backward is twice the forward
 *    (input gradient and weight gradient), except the first layer, whose
 *    input gradient nobody needs: the rule of model_grad_flops.
 *  - norm (batch / layer norm): 4 FLOPs per element forward (normalise,
 *    scale, shift, with the statistics), 8 backward.
 *  - elementwise (bias, ReLU, residual add, pooling, softmax, GELU,
 *    dropout): 1 per element touched in each direction, pooling k*k per
 *    output forward.
 *  - embedding: 1 per element gathered forward, 1 scattered backward.
 * The loss is not counted. Published figures (torchvision's GFLOPS column,
 * the papers' mult-adds) count conv and dense MACs only, so compare those.
 *
 * Plain data, no allocation, no BLAS: linked by the controller and the peer
 * (hn_kernels_base). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum zoo_op {
    ZOO_OP_CONV,
    ZOO_OP_DEPTHWISE,
    ZOO_OP_DENSE,
    ZOO_OP_ATTENTION,
    ZOO_OP_NORM,
    ZOO_OP_ELEMENTWISE,
    ZOO_OP_EMBEDDING,
    ZOO_OP_COUNT
};

/* FLOPs per sample, by op kind. */
struct zoo_cost {
    double forward[ZOO_OP_COUNT];
    double backward[ZOO_OP_COUNT];
};

struct zoo_info {
    /* The zoo name ("resnet50"), or for a real architecture the spec string
     * given to zoo_lookup (the caller's string: it must outlive this). */
    const char *name;
    const char *family;      /* "resnet", "vgg", "mobilenet", "gpt2", "dense", "lenet" */
    const char *input;       /* "3x224x224", "1x28x28", "1024 tokens", "flat" (dense) */
    uint64_t input_elements; /* values per sample: 150528, 784, 1024 tokens */
    uint64_t params;         /* trainable parameters */
    uint64_t buffers; /* non-trainable state kept with the model (batch-norm running means and
                         variances), not sent as gradient */
    struct zoo_cost cost;
    bool real; /* hiernet has kernels for it (model_spec parses it) */
};

/* Fills *out for a zoo name or a model spec ("mlp:784-128-10"). 0, or -1
 * with err naming the model and listing the zoo. */
int zoo_lookup(const char *name, struct zoo_info *out, char *err, size_t errlen);

/* The zoo architectures (real ones are open-ended, not listed). */
int zoo_count(void);
/* 0, or -1 when i is out of range. */
int zoo_at(int i, struct zoo_info *out);

double zoo_forward_flops(const struct zoo_info *z); /* sum over ops */
double zoo_grad_flops(const struct zoo_info *z);    /* forward + backward */
/* Forward FLOPs of the multiply-accumulate kinds only (conv, depthwise,
 * dense, attention): what published counts and model_forward_flops count. */
double zoo_mac_flops(const struct zoo_info *z);
/* Bytes of one float32 gradient: 4 x params. */
uint64_t zoo_grad_bytes(const struct zoo_info *z);

/* One step of an architecture as zoo_trace reports it, in the order the
 * forward pass runs them: the trainable elements [param_first, param_end)
 * of the flat tensor it owns (empty for a step without parameters: an
 * activation, a pooling, a bias add after its layer) and its FLOPs per
 * sample, by op kind. The flat tensor holds the parameters in this order. */
struct zoo_layer {
    uint64_t param_first, param_end;
    struct zoo_cost cost;
};
typedef void (*zoo_layer_fn)(void *ctx, const struct zoo_layer *layer);

/* Calls fn for every step of the architecture (a zoo name or a model
 * spec), first to last. 0, or -1 with err as zoo_lookup's. */
int zoo_trace(const char *name, zoo_layer_fn fn, void *ctx, char *err, size_t errlen);

/* The FLOPs per sample of layers first..last (0-based, inclusive) of a real
 * architecture (a model spec), by op kind: the steps zoo_lookup sums for
 * those layers, so the parts of a split add up to the whole (the model's
 * first multiply-accumulate layer computes no input gradient, in whichever
 * part it is). What a layer-range pass by profile costs (profile.h
 * profile_pass_seconds). 0, or -1 with err naming the spec or the range. */
int zoo_range_cost(const char *spec, int first, int last, struct zoo_cost *out, char *err,
                   size_t errlen);

/* "conv", "depthwise", ... for messages and profile files; NULL if out of
 * range. zoo_op_parse returns the kind or -1. */
const char *zoo_op_name(enum zoo_op op);
int zoo_op_parse(const char *name);
