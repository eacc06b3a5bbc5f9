/* commands_ml.h — the peer's learning commands and the state they keep (docs/lua-api.md
 * "Peer commands"): datasets by split, models by name, an optimizer per
 * model. Parameters, gradients and compressed tensors are ordinary tensors
 * in the store, so they can be sent, averaged and overwritten like any
 * other; ml_state holds only what is not a tensor (parsed architectures,
 * optimizer state, open datasets, batch scratch). ml_state is used by the
 * worker thread alone (run() of the jobs), created and destroyed by the
 * server around it.
 *
 * Commands (every result also has ms, cpu_ms, queue_ms):
 *   dataset{name=, split="train", shard=0, shards=0, partition="shuffle",
 *           alpha=0.5, seed=1, path=, n=, dim=, classes=, noise=}
 *       -> {split=, samples=, total=, dim=, classes=}
 *       name: "fashion-mnist", "synthetic", an IDX directory or images file
 *       (or any label when path= gives the file). shard is 1-based, 0 = the
 *       whole split. One dataset per split; loading a split again replaces it.
 *       n, dim, classes, noise: the synthetic generator.
 *   model{name=, arch=, init="default", seed=1} -> {size=}
 *       creates the flat parameter tensor `name` and resets its optimizer.
 *   grad{model=, batch=64, out="grad", same_batch=false, bucket_mb=0}
 *       -> {loss=, batch=, epoch=, version=, buckets=, grad_ms=}
 *       on the next mini-batch of the train split; out is a new tensor.
 *       same_batch: the previous grad's mini-batch again (kept in a buffer
 *       of its own), the cursor stays. version: of the model read.
 *       bucket_mb > 0: gradient buckets for overlap (commands_ml_buckets.c).
 *   bucket{index=} -> {index=}: holds the worker until bucket index of the
 *       last grad is ready (commands_ml_buckets.c).
 *   optim{model= | tensor=, grad="grad", method=, lr=, momentum=, beta1=,
 *         beta2=, eps=, weight_decay=} -> {steps=, lr=, version=}
 *       method: sgd, momentum, nesterov, adam; absent: the current one (sgd
 *       at first). Hyperparameters not given take the method's defaults
 *       (optim.h), on every call. The state is kept per model (reset when
 *       the method changes or model{} recreates the model) or, with tensor=,
 *       per tensor name (also reset when the tensor's size changes).
 *   eval{model=, split="test", limit=0, background=false}
 *       -> {accuracy=, loss=, samples=, version=}   (commands_ml_eval.c)
 *   compress{tensor=, method="topk"|"int8"|"sign", ratio=0.01, out=,
 *            residual=, range=} -> {bytes=, size=, dense_bytes=}
 *       out holds the compress.h bytes in ceil(bytes / 4) float32 elements
 *       (the length is recovered from the bytes' own header, so out can be
 *       sent and decompressed elsewhere); residual (created zero when
 *       missing) is the error-feedback state, updated in place. With
 *       range = {offset, count} only that slice is compressed: it decodes
 *       to count elements and its residual has count (a worker's update
 *       for one server of a sharded parameter server).
 *   decompress{tensor=, out=, add=false} -> {size=, bytes=}
 *       add=true adds into the existing out (summing compressed gradients). */
#pragma once

#include <stddef.h>

struct command;
struct ml_state;

struct ml_state *ml_state_create(void);
void ml_state_destroy(struct ml_state *ml);

extern const struct command ml_cmd_dataset;
extern const struct command ml_cmd_model;
extern const struct command ml_cmd_grad;
extern const struct command ml_cmd_optim;
extern const struct command ml_cmd_eval;
extern const struct command ml_cmd_compress;
extern const struct command ml_cmd_decompress;
extern const struct command ml_cmd_bucket; /* commands_ml_buckets.c */
/* forward{} and backward{}: one part of a split model (commands_ml_split.c). */
extern const struct command ml_cmd_forward;
extern const struct command ml_cmd_backward;
