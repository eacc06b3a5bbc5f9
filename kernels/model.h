/* model.h — neural-network models over one flat float32 parameter tensor.
 *
 * A struct model is a parsed architecture ("logreg:784-10",
 * "mlp:784-256-128-10", "cnn:lenet", "cnn:resnet20") plus the scratch memory its forward and
 * backward passes use. It does not own parameters or gradients: those are flat
 * float arrays of model_param_count() elements owned by the caller (the peer's
 * tensor store), so a model tensor can be sent, averaged and overwritten like
 * any other tensor.
 *
 * Flat parameter layout: layers in order, each layer's weights then its bias,
 * the same as PyTorch's state_dict order for nn.Linear / nn.Conv2d:
 *   dense IN->OUT   W[OUT][IN] row-major (y = W x + b), then b[OUT]
 *   conv  CIN->COUT W[COUT][CIN][KH][KW], then b[COUT]
 * and lenet's 16x5x5 feature map enters its first dense layer flattened as
 * c * 25 + y * 5 + x (PyTorch's flatten of NCHW).
 *
 * Architectures:
 *   logreg:IN-OUT        one dense layer, softmax cross-entropy
 *   mlp:IN-H1-...-OUT    dense layers with ReLU between them
 *   cnn:lenet            input 1x28x28; conv 5x5x6 pad 2, ReLU, maxpool 2;
 *                        conv 5x5x16, ReLU, maxpool 2; dense 400-120, ReLU;
 *                        dense 120-84, ReLU; dense 84-10
 *   cnn:resnet20         He et al.'s CIFAR ResNet-20 on input 1x28x28: conv
 *                        3x3x16 pad 1, BN, ReLU; 3 stages of 3 basic blocks
 *                        (conv 3x3 pad 1, BN, ReLU, conv 3x3 pad 1, BN, add
 *                        the block's input, ReLU) of 16, 32 and 64 channels
 *                        on 28x28, 14x14 and 7x7 maps (the first conv of
 *                        stages 2 and 3 has stride 2); global average pool;
 *                        dense 64-10. Convs have no bias (BN's beta is one).
 *                        Shortcuts are option A (parameter free): a block
 *                        that halves the map adds x[:, :, ::2, ::2] with
 *                        its channels zero-padded 8 (16) on each side.
 *                        269 434 trainable parameters (PyTorch's CIFAR
 *                        ResNet-20 has 269 722: its first conv sees 3
 *                        channels) plus 1 376 running statistics.
 *
 * Batch normalisation (cnn:resnet20), per channel over batch x H x W, eps
 * MODEL_BN_EPS, as PyTorch's BatchNorm2d. Layout: gamma then beta per BN
 * layer among the parameters above (state_dict order: conv1.weight,
 * bn1.weight, bn1.bias, layer1.0.conv1.weight, ..., linear.weight,
 * linear.bias), and after all of them, from model_trainable_count() on,
 * every BN layer's running mean[C] then running var[C] in layer order
 * (PyTorch's buffers, num_batches_tracked left out). model_param_count()
 * is the whole flat tensor, statistics included. model_grad normalises by
 * the batch's statistics and writes, in that tail of grad, the batch mean
 * and unbiased variance; an optimizer step on a model steps the trainable
 * part only and folds the tail in as PyTorch does,
 *   running = (1 - MODEL_BN_MOMENTUM) * running + MODEL_BN_MOMENTUM * batch,
 * so averaging gradients over workers averages their batch statistics,
 * and averaging models averages running statistics. model_eval normalises
 * by the running statistics.
 * Input samples are float32 rows of model_input_size() values (for lenet the
 * 28x28 image row by row); labels are int32 class indices.
 *
 * The workspace (activations, im2col buffers, gradients of activations) is
 * owned by the model and grows only when a call needs a larger batch than any
 * before, so steady-state training never allocates. Its size: about 4 bytes x
 * batch x (sum of layer widths + 2 x the widest); cnn:lenet also keeps its
 * im2col columns (135 KiB per sample) up to a 16 MiB budget (batch 121), and
 * beyond it rebuilds them in 256 KiB chunks. Consequently a model is not
 * reentrant: one thread at a time per struct model (the peer's compute
 * worker). Errors: functions return 0 or -1 and write a message into err. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Batch norm (cnn:resnet20): PyTorch's BatchNorm2d defaults. */
#define MODEL_BN_EPS 1e-5
#define MODEL_BN_MOMENTUM 0.1f

struct model;
struct model_spec;

/* Parses spec and creates the model with workspace for `max_batch` samples
 * (0: allocate on first use). On error *out is NULL and err names the spec. */
int model_create(const char *spec, int max_batch, struct model **out, char *err, size_t errlen);
void model_destroy(struct model *m);

/* Makes the workspace hold at least `batch` samples (one allocation). */
int model_reserve(struct model *m, int batch, char *err, size_t errlen);

const char *model_spec(const struct model *m);
/* The layer table and parameter layout (kernels/model_spec.h). */
const struct model_spec *model_layout(const struct model *m);
size_t model_param_count(const struct model *m);
/* The parameters an optimizer steps on: model_param_count() less the batch
 * norms' running statistics (the same for architectures without). */
size_t model_trainable_count(const struct model *m);
int model_input_size(const struct model *m);
int model_classes(const struct model *m);

/* Multiply-add work per sample, counted as 2 flops per multiply-accumulate of
 * the dense and convolution layers as direct (im2col) GEMMs would do them,
 * also for the convolutions that run as Winograd F(2x2, 3x3) with 2.25x
 * fewer multiplications (cpu/winograd.h): a nominal figure, comparable
 * across implementations. Elementwise work (bias, ReLU, pooling, softmax)
 * is not counted. grad = forward + backward. */
double model_forward_flops(const struct model *m);
double model_grad_flops(const struct model *m);

/* Writes initial parameters. method: NULL or "default" (He uniform for layers
 * followed by ReLU, Xavier uniform for the output layer, zero biases),
 * "xavier" (Xavier uniform everywhere) or "zeros". Deterministic in seed. */
int model_init(const struct model *m, float *params, const char *method, uint64_t seed, char *err,
               size_t errlen);

/* Forward and backward pass of softmax cross-entropy over one mini-batch.
 * x: batch x model_input_size() floats; labels: batch class indices.
 * Writes grad (model_param_count() floats, the mean over the batch; past
 * model_trainable_count() the batch statistics, see "Batch
 * normalisation") and *loss (mean cross-entropy). params and grad must not
 * overlap. */
int model_grad(struct model *m, const float *params, const float *x, const int32_t *labels,
               int batch, float *grad, float *loss, char *err, size_t errlen);

/* ---- layer ranges: one part of a split model (split learning, pipelines) ----
 *
 * Layers are the rows of the layer table (kernels/model_spec.h), 0-based
 * here (users write them 1-based: docs/lua-api.md "forward and backward"
 * lists the tables of mlp, cnn:lenet and cnn:resnet20). A range may not
 * cut a residual block (model_spec_range_check). Activations between
 * layers are laid out as the kernels keep them: dense outputs batch x
 * width row-major, conv and pool maps channel-major C x batch x H x W (for
 * a 1-channel input the same as batch rows). A part's output is the next
 * part's input unchanged.
 *
 * model_forward_range runs layers first..last on x (batch x the input size
 * of layer first) in training mode and copies layer last's output to y; the
 * model keeps what the backward pass needs (activations, im2col columns,
 * batch statistics) in its workspace, so a pipeline holds one struct model
 * per micro-batch in flight. model_backward_range then takes dy (d loss /
 * d y) to dx (d loss / d x; ignored, may be NULL, when first is 0) and
 * writes the gradient of layers first..last into their slices of grad
 * (model_param_count() floats; other slices are left as they are), with
 * their batch norms' batch statistics in its tail as model_grad does.
 * model_grad is exactly forward_range(0, L-1), model_loss, backward_range
 * (0, L-1) on one batch. */
int model_forward_range(struct model *m, const float *params, int first, int last, const float *x,
                        int batch, float *y, char *err, size_t errlen);
int model_backward_range(struct model *m, const float *params, int first, int last, const float *x,
                         const float *dy, int batch, float *dx, float *grad, char *err,
                         size_t errlen);
/* Mean softmax cross-entropy of batch rows of logits into *loss and, when
 * dlogits is not NULL, its gradient (softmax - onehot) / batch. */
int model_loss(const struct model *m, const float *logits, const int32_t *labels, int batch,
               float *dlogits, float *loss, char *err, size_t errlen);

/* Running totals of an evaluation; start from {0} and add chunks with
 * model_eval, so callers can stream a large split through a small buffer. */
struct model_score {
    size_t samples;
    size_t correct;
    double loss_sum;
};

/* Forward passes over n samples in batches of the workspace size (at least
 * 64), adding to *score. */
int model_eval(struct model *m, const float *params, const float *x, const int32_t *labels,
               size_t n, struct model_score *score, char *err, size_t errlen);

static inline double model_score_accuracy(const struct model_score *s)
{
    return s->samples ? (double)s->correct / (double)s->samples : 0.0;
}

static inline double model_score_loss(const struct model_score *s)
{
    return s->samples ? s->loss_sum / (double)s->samples : 0.0;
}

/* GEMM shapes (row-major M x N x K) one model_grad call of `batch` samples
 * performs, in order, for benchmarks that time raw sgemm on the same shapes
 * (a Winograd convolution's 16 GEMMs per chunk of tiles included).
 * Returns how many there are, writing at most `cap` (shapes may be NULL when
 * cap is 0). trans_a/trans_b: operand transposed, as in cblas. */
struct model_gemm_shape {
    int trans_a, trans_b;
    int m, n, k;
};
int model_gemm_shapes(const struct model *m, int batch, struct model_gemm_shape *shapes, int cap);
