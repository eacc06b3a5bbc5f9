/* commands_ml_internal.h — the learning state shared by commands_ml.c (dataset, model, grad,
 * optim, compress, decompress) and commands_ml_eval.c (eval, in the foreground and
 * in the background). Private to those two files.
 *
 * Threads: ml_state belongs to the worker thread. A loaded split's data
 * (struct ml_data) is reference counted, because a background evaluation
 * reads it on its own thread while the worker may load another dataset
 * under the same split name; the last holder closes it. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/buckets.h"
#include "kernels/dataset.h"
#include "kernels/device.h"
#include "kernels/zoo.h"
#include "peer/command_job.h"

#define ML_SPLIT_SIZE 32

/* A loaded split: the dataset and the threads that read it. */
struct ml_data {
    atomic_uint refs;
    struct dataset *ds;
};

struct ml_split {
    char name[ML_SPLIT_SIZE];
    struct ml_data *data;
    struct ml_split *next;
};

struct ml_model {
    char name[COMMAND_NAME_SIZE]; /* its parameter tensor */
    /* What computes: the architecture itself, a profiled model's surrogate
     * (model{learn=}), or NULL for a timing-only profiled model. */
    struct kern_model *model;
    struct kern_optim *optim; /* NULL until the first optim{} */
    uint64_t size;            /* parameters of the architecture: its tensor's size */
    uint64_t resident;        /* of them, the real model's: the tensor's resident prefix */
    bool profiled;            /* compute = "profile": a grad takes the profile's time */
    char spec[256];           /* the architecture as given; arch.name points here */
    struct zoo_info arch;     /* valid when profiled */
    struct ml_model *next;
};

/* The optimizer state of optim{tensor=}: per tensor name, for its size. */
struct ml_tensor_optim {
    char name[COMMAND_NAME_SIZE];
    struct kern_optim *optim;
    size_t size;
    struct ml_tensor_optim *next;
};

struct ml_state {
    struct ml_split *splits;
    struct ml_model *models;
    struct ml_tensor_optim *tensor_optims;
    float *x; /* eval scratch */
    int32_t *y;
    size_t x_cap, y_cap;
    /* The mini-batch of the last grad, kept for grad{same_batch}. */
    float *batch_x;
    int32_t *batch_y;
    size_t batch_x_cap, batch_y_cap;
    int batch_n, batch_dim; /* samples and floats per sample; batch_n 0: none */
    /* The buckets of the last grad{bucket_mb} (commands_ml_buckets.c): when each is
     * ready (CLOCK_MONOTONIC ms); bucket_n 0: the last grad had none. */
    double bucket_ready_ms[GRAD_BUCKETS_MAX];
    int bucket_n;
    /* forward{}'s kept micro-batches, for their backward{} (commands_ml_split.c). */
    struct ml_stash *stashes;
    /* backward{add}'s gradient before it is added: the device buffer the
     * pass writes (kern_alloc'd in grad_ctx) and, off the CPU, its host
     * copy. One for all stashes, since the worker runs one backward at a
     * time: one per stash held a buffer of the whole model's size per
     * micro-batch in flight (commands_ml_split.c). */
    struct kern_ctx *grad_ctx;
    float *grad_dscratch, *grad_scratch;
    size_t grad_dscratch_cap, grad_scratch_cap;
};

/* grad{bucket_mb}: plans the model's buckets (kernels/buckets.h) over a
 * gradient of `size` elements and times them from t0_ms, when the grad
 * began (cpu0_ms: ml_thread_cpu_ms then); the grad then ends at its first
 * bucket where it can (commands_ml_buckets.c). false with the job's error set. */
bool ml_grad_buckets(struct command_job *j, const struct ml_model *m, uint64_t size,
                     double bucket_mb, double t0_ms, double cpu0_ms);
/* The calling thread's CPU time in ms. */
double ml_thread_cpu_ms(void);

/* Frees every stash of forward{} (commands_ml_split.c). */
void ml_stash_free_all(struct ml_state *ml);

void ml_data_hold(struct ml_data *d);
/* Closes the dataset with the last reference; any thread. */
void ml_data_release(struct ml_data *d);

/* Lookups (worker); NULL with the job's error set. */
struct ml_data *ml_split_find(struct command_job *j, const char *split);
struct ml_model *ml_model_find(struct command_job *j, const char *name);
/* The model's parameter tensor (held), checked against its architecture. */
struct store_tensor *ml_params_find(struct command_job *j, const struct ml_model *m);
bool ml_check_shapes(struct command_job *j, const struct ml_model *m, struct dataset *ds,
                     const char *split);
/* Room for n samples of dim floats in *x and their labels in *y. */
bool ml_reserve(struct command_job *j, size_t n, int dim, float **x, size_t *x_cap, int32_t **y,
                size_t *y_cap);
