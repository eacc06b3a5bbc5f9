/* buckets.h — gradient buckets: the plan that lets a data-parallel step
 * send its gradient while the backward pass is still running.
 *
 * As PyTorch DDP's Reducer (Li et al., "PyTorch Distributed", VLDB 2020,
 * Sec. 3.2.3; bucket_cap_mb = 25 by default): the parameters are walked
 * from the last layer to the first, the order in which the backward pass
 * produces their gradients, and a bucket closes once it holds at least the
 * cap. A layer is never cut in two. Bucket 1 is the last layers' (with the
 * non-trainable tail of the flat tensor: batch-norm running statistics,
 * which the forward pass already made); the last bucket ends at element 0.
 *
 * Each bucket's ready share is the part of the step's FLOPs (forward, then
 * backward from the last layer down to the bucket's first) done when its
 * gradient is complete, each op kind weighted by a time per FLOP (a device
 * profile's 1 / rate; none: FLOPs alone). The last bucket's is 1. A peer
 * times bucket k at start + share_k x the step's time (peer/commands_ml.c).
 * Plain data, no allocation kept: in hn_kernels_base. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/zoo.h"

/* More buckets than this is a cap far too small for the model. */
#define GRAD_BUCKETS_MAX 64

struct grad_bucket {
    uint64_t offset, count; /* elements [offset, offset + count) of the flat tensor */
    double ready_share;     /* in (0, 1] */
};

/* The buckets of architecture `name` (a zoo name or a model spec) whose flat
 * tensor has `size` elements, at least cap_elements each (but the last),
 * into out[GRAD_BUCKETS_MAX] in the order they are ready. seconds_per_flop:
 * ZOO_OP_COUNT weights, or NULL. The number of buckets, or -1 with err
 * naming the model and the value at fault. */
int grad_buckets_plan(const char *name, uint64_t size, uint64_t cap_elements,
                      const double *seconds_per_flop, struct grad_bucket *out, char *err,
                      size_t errlen);

/* Elements of a cap of `mb` MiB of float32 (DDP's MB: 2^20 bytes), at least 1. */
uint64_t grad_bucket_elements(double mb);
