/* commands_ml.c — the peer's learning commands over kernels/ (see commands_ml.h): params
 * parsed on the loop thread, run on the worker against ml_state and the
 * tensor store. model, grad, optim and eval compute on the peer's device
 * (kernels/device.h) through the device copies of peer/devmirror.h; the
 * dataset and compression commands work on host memory. */
#include "peer/commands_ml.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/compress.h"
#include "kernels/dataset.h"
#include "kernels/device.h"
#include "kernels/profile.h"
#include "peer/command_job.h"
#include "peer/devmirror.h"
#include "peer/commands_ml_internal.h"
#include "peer/server.h"

#define ML_PATH_SIZE 4096
#define ML_BATCH_MAX 65536

struct ml_state *ml_state_create(void)
{
    return calloc(1, sizeof(struct ml_state));
}

static void ml_model_free(struct ml_model *m)
{
    kern_model_destroy(m->model);
    kern_optim_destroy(m->optim);
    free(m);
}

void ml_state_destroy(struct ml_state *ml)
{
    if (!ml) return;
    while (ml->splits) {
        struct ml_split *next = ml->splits->next;
        ml_data_release(ml->splits->data);
        free(ml->splits);
        ml->splits = next;
    }
    while (ml->models) {
        struct ml_model *next = ml->models->next;
        ml_model_free(ml->models);
        ml->models = next;
    }
    while (ml->tensor_optims) {
        struct ml_tensor_optim *next = ml->tensor_optims->next;
        kern_optim_destroy(ml->tensor_optims->optim);
        free(ml->tensor_optims);
        ml->tensor_optims = next;
    }
    ml_stash_free_all(ml);
    free(ml->x);
    free(ml->y);
    free(ml->batch_x);
    free(ml->batch_y);
    free(ml);
}

/* ---- lookups and scratch (worker) ---- */

void ml_data_hold(struct ml_data *d)
{
    atomic_fetch_add(&d->refs, 1);
}

void ml_data_release(struct ml_data *d)
{
    if (d && atomic_fetch_sub(&d->refs, 1) == 1) {
        dataset_close(d->ds);
        free(d);
    }
}

static struct ml_split **ml_split_slot(struct ml_state *ml, const char *name)
{
    struct ml_split **p = &ml->splits;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

struct ml_data *ml_split_find(struct command_job *j, const char *split)
{
    struct ml_split *s = *ml_split_slot(j->ml, split);
    if (!s) cmd_fail(j, "no '%s' split loaded (load it with dataset{split='%s'})", split, split);
    return s ? s->data : NULL;
}

static struct ml_model **ml_model_slot(struct ml_state *ml, const char *name)
{
    struct ml_model **p = &ml->models;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

struct ml_model *ml_model_find(struct command_job *j, const char *name)
{
    struct ml_model *m = *ml_model_slot(j->ml, name);
    if (!m) cmd_fail(j, "model '%s' not found (create it with model{})", name);
    return m;
}

struct store_tensor *ml_params_find(struct command_job *j, const struct ml_model *m)
{
    struct store_tensor *t = cmd_find(j, m->name);
    if (t && t->size != m->size) {
        cmd_fail(j, "tensor '%s' has %" PRIu64 " elements, model %s has %" PRIu64 " parameters",
                 m->name, t->size, m->spec, m->size);
    } else if (t && t->resident < m->resident) { /* a profiled model's surrogate */
        cmd_fail(j,
                 "tensor '%s' holds %" PRIu64
                 " of its elements, its learning model %s needs %" PRIu64,
                 m->name, t->resident, kern_model_spec(m->model), m->resident);
    } else {
        return t;
    }
    store_tensor_release(t);
    return NULL;
}

bool ml_reserve(struct command_job *j, size_t n, int dim, float **x, size_t *x_cap, int32_t **y,
                size_t *y_cap)
{
    size_t floats = n * (size_t)dim;
    if (floats > *x_cap) {
        float *grown = realloc(*x, floats * sizeof *grown);
        if (!grown) return cmd_fail(j, "out of memory for %zu samples", n);
        *x = grown;
        *x_cap = floats;
    }
    if (n > *y_cap) {
        int32_t *grown = realloc(*y, n * sizeof *grown);
        if (!grown) return cmd_fail(j, "out of memory for %zu labels", n);
        *y = grown;
        *y_cap = n;
    }
    return true;
}

bool ml_check_shapes(struct command_job *j, const struct ml_model *m, struct dataset *ds,
                     const char *split)
{
    if (dataset_dim(ds) != kern_model_input_size(m->model))
        return cmd_fail(j, "model %s takes %d inputs, the '%s' split has %d per sample",
                        kern_model_spec(m->model), kern_model_input_size(m->model), split,
                        dataset_dim(ds));
    return true;
}

/* ---- dataset ---- */

struct dataset_params {
    char name[ML_PATH_SIZE], path[ML_PATH_SIZE];
    char split[ML_SPLIT_SIZE], partition[16];
    int64_t shard, shards, seed, n, dim, classes;
    double alpha, noise;
};

static bool dataset_parse(struct command_job *j, struct dataset_params *p, struct proto_args *a)
{
    strcpy(p->split, "train");
    strcpy(p->partition, "shuffle");
    p->seed = 1;
    return cmd_arg_text(a, "name", true, p->name, sizeof p->name) &&
           cmd_arg_text(a, "path", false, p->path, sizeof p->path) &&
           cmd_arg_text(a, "split", false, p->split, sizeof p->split) &&
           cmd_arg_text(a, "partition", false, p->partition, sizeof p->partition) &&
           cmd_arg_int(a, "shard", false, 0, 1 << 24, &p->shard) &&
           cmd_arg_int(a, "shards", false, 0, 1 << 24, &p->shards) &&
           cmd_arg_int(a, "seed", false, 0, INT64_MAX, &p->seed) &&
           cmd_arg_int(a, "n", false, 0, UINT32_MAX, &p->n) &&
           cmd_arg_int(a, "dim", false, 0, 1 << 20, &p->dim) &&
           cmd_arg_int(a, "classes", false, 0, 1 << 16, &p->classes) &&
           cmd_arg_float(a, "alpha", false, 0.0, &p->alpha) &&
           cmd_arg_float(a, "noise", false, 0.0, &p->noise);
}

/* A peer that gave up root (common/privdrop.h) may not read a file its user
 * could: say so, rather than leave a bare "Permission denied". */
static void dataset_hint_unprivileged(char *err, size_t errlen)
{
    size_t n = strlen(err);
    if (geteuid() == 0 || !strstr(err, "Permission denied") || n + 1 >= errlen) return;
    snprintf(err + n, errlen - n,
             " (peers run as uid %lu after giving up root: make it readable to that user, or "
             "set HIERNET_PEER_USER)",
             (unsigned long)geteuid());
}

static bool dataset_run(struct command_job *j, const struct dataset_params *p)
{
    /* shard is 1-based (the i-th of n), unlike ranges, which are 0-based
     * offsets: say which rule a value breaks. */
    if (p->shards > 0 && p->shard == 0)
        return cmd_fail(
            j, "shard 0 of %" PRId64 ": shards are numbered from 1 (give 1 to %" PRId64 ")",
            p->shards, p->shards);
    if (p->shard > 0 && p->shards == 0)
        return cmd_fail(j, "shard %" PRId64 " without shards: give shards (how many) with it",
                        p->shard);
    if (p->shard > p->shards)
        return cmd_fail(j, "shard %" PRId64 " of %" PRId64 ": there are only %" PRId64 " shards",
                        p->shard, p->shards, p->shards);
    struct dataset_spec spec = {
        .name = p->path[0] ? p->path : p->name,
        .split = p->split,
        .shard = (int)p->shard,
        .shards = (int)p->shards,
        .partition = p->partition,
        .alpha = p->alpha,
        .seed = (uint64_t)p->seed,
        .synthetic = {(size_t)p->n, (int)p->dim, (int)p->classes, p->noise, (uint64_t)p->seed}};
    struct dataset *ds;
    if (dataset_open(&spec, &ds, j->err, sizeof j->err) != 0) {
        dataset_hint_unprivileged(j->err, sizeof j->err);
        return false;
    }
    struct ml_data *data = calloc(1, sizeof *data);
    struct ml_split **slot = ml_split_slot(j->ml, p->split);
    if (data && !*slot) {
        *slot = calloc(1, sizeof **slot);
        if (*slot) strcpy((*slot)->name, p->split);
    }
    if (!data || !*slot) {
        free(data);
        dataset_close(ds);
        return cmd_fail(j, "out of memory");
    }
    atomic_init(&data->refs, 1);
    data->ds = ds;
    ml_data_release((*slot)->data); /* a background eval may still read the old one */
    (*slot)->data = data;
    cmd_result_str(j, "split", p->split);
    cmd_result_u64(j, "samples", dataset_size(ds));
    cmd_result_u64(j, "total", dataset_total(ds));
    cmd_result_u64(j, "dim", (uint64_t)dataset_dim(ds));
    cmd_result_u64(j, "classes", (uint64_t)dataset_classes(ds));
    return true;
}

/* ---- model ---- */

struct model_params {
    char name[COMMAND_NAME_SIZE], arch[256], init[32], compute[16], learn[256];
    int64_t seed;
};

static bool model_parse(struct command_job *j, struct model_params *p, struct proto_args *a)
{
    strcpy(p->init, "default");
    strcpy(p->compute, "kernel");
    p->seed = 1;
    if (!cmd_arg_required_name(a, "name", p->name) ||
        !cmd_arg_text(a, "arch", true, p->arch, sizeof p->arch) ||
        !cmd_arg_text(a, "init", false, p->init, sizeof p->init) ||
        !cmd_arg_int(a, "seed", false, 0, INT64_MAX, &p->seed) ||
        !cmd_arg_text(a, "compute", false, p->compute, sizeof p->compute) ||
        !cmd_arg_text(a, "learn", false, p->learn, sizeof p->learn))
        return false;
    if (strcmp(p->compute, "kernel") != 0 && strcmp(p->compute, "profile") != 0)
        return cmd_arg_fail(a, "param 'compute': '%s' is not \"kernel\" or \"profile\"",
                            p->compute);
    if (p->learn[0] && strcmp(p->compute, "profile") != 0)
        return cmd_arg_fail(a, "param 'learn' goes with compute = \"profile\" only");
    return true;
}

/* The real model that computes (kernels), if any: the architecture, or
 * with compute = "profile" the surrogate of learn= (none without it). */
static bool model_create_kernels(struct command_job *j, const struct model_params *p,
                                 struct ml_model *m)
{
    const char *spec = p->learn[0] ? p->learn : !m->profiled || m->arch.real ? p->arch : NULL;
    if (!spec) return true; /* timing only */
    if (kern_model_create(devmirror_ctx(j->dev), spec, 0, &m->model, j->err, sizeof j->err) != 0)
        return false;
    m->resident = kern_model_param_count(m->model);
    return true;
}

/* Sizes the model: its architecture's parameters, of which the real model's
 * are resident (docs/lua-api.md "Profiled compute"). A zoo architecture
 * without kernels needs compute = "profile" on a node with a profile. */
static bool model_shape(struct command_job *j, const struct model_params *p, struct ml_model *m)
{
    m->profiled = strcmp(p->compute, "profile") == 0;
    if (m->profiled && zoo_lookup(m->spec, &m->arch, j->err, sizeof j->err) != 0) return false;
    if (!m->profiled && kern_model_create(devmirror_ctx(j->dev), p->arch, 0, &m->model, j->err,
                                          sizeof j->err) != 0) {
        struct zoo_info z;
        char zoo_err[8];
        if (zoo_lookup(p->arch, &z, zoo_err, sizeof zoo_err) == 0 && !z.real)
            cmd_fail(j,
                     "model '%s' has no kernels: it computes by profile only (compute = "
                     "\"profile\" on a node with a profile)",
                     p->arch);
        return false;
    }
    if (m->profiled && !model_create_kernels(j, p, m)) return false;
    if (!m->profiled) m->resident = kern_model_param_count(m->model);
    m->size = m->profiled ? m->arch.params : m->resident;
    if (m->resident > m->size)
        return cmd_fail(j, "learn = '%s' has %" PRIu64 " parameters, more than %s's %" PRIu64,
                        p->learn, m->resident, p->arch, m->size);
    return true;
}

/* Creates the model and its initial parameters, published (initialised on
 * the device, which on cuda means on the host and uploaded: the same values
 * on every device). */
static struct ml_model *model_build(struct command_job *j, const struct model_params *p,
                                    struct store_tensor **params)
{
    struct ml_model *m = calloc(1, sizeof *m);
    if (!m) return cmd_fail(j, "out of memory"), NULL;
    strcpy(m->name, p->name);
    snprintf(m->spec, sizeof m->spec, "%s", p->arch);
    *params = NULL;
    if (model_shape(j, p, m)) {
        *params = cmd_new_virtual_tensor(j, p->name, m->size, m->resident, false);
        float *dst = *params ? devmirror_result(j->dev, *params, j->err, sizeof j->err) : NULL;
        if (dst &&
            (!m->model || kern_model_init(m->model, dst, p->init, (uint64_t)p->seed, j->err,
                                          sizeof j->err) == 0) &&
            devmirror_publish(j->dev, j->store, *params, j->err, sizeof j->err))
            return m;
    }
    store_tensor_release(*params);
    ml_model_free(m);
    return NULL;
}

static bool model_run(struct command_job *j, const struct model_params *p)
{
    struct store_tensor *params;
    struct ml_model *m = model_build(j, p, &params);
    if (!m) return false;
    struct ml_model **slot = ml_model_slot(j->ml, p->name);
    if (*slot) { /* a new model under an old name: the old one and its optimizer go */
        m->next = (*slot)->next;
        ml_model_free(*slot);
    }
    *slot = m;
    cmd_result_u64(j, "size", params->size);
    cmd_result_u64(j, "resident", params->resident); /* < size: a profiled model's */
    cmd_result_u64(j, "version", store_tensor_version(params));
    store_tensor_release(params);
    return true;
}

/* ---- grad ---- */

struct grad_params {
    char model[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE];
    int64_t batch; /* 0: not given */
    bool same_batch;
    double bucket_mb; /* 0: no buckets (commands_ml_buckets.c) */
};

static bool grad_parse(struct command_job *j, struct grad_params *p, struct proto_args *a)
{
    strcpy(p->out, "grad");
    return cmd_arg_required_name(a, "model", p->model) && cmd_arg_name(a, "out", p->out) >= 0 &&
           cmd_arg_int(a, "batch", false, 1, ML_BATCH_MAX, &p->batch) &&
           cmd_arg_bool(a, "same_batch", &p->same_batch) &&
           cmd_arg_float(a, "bucket_mb", false, 0, &p->bucket_mb) &&
           (p->bucket_mb >= 0 ||
            cmd_arg_fail(a, "param 'bucket_mb': %g is negative", p->bucket_mb));
}

/* The next mini-batch of the train split into the kept batch buffers
 * (eval has scratch of its own, so the batch survives for same_batch). */
static bool grad_next_batch(struct command_job *j, const struct grad_params *p, struct dataset *ds)
{
    struct ml_state *ml = j->ml;
    int batch = p->batch ? (int)p->batch : 64;
    ml->batch_n = 0; /* overwritten from here on */
    if (!ml_reserve(j, (size_t)batch, dataset_dim(ds), &ml->batch_x, &ml->batch_x_cap, &ml->batch_y,
                    &ml->batch_y_cap) ||
        dataset_next_batch(ds, batch, ml->batch_x, ml->batch_y, j->err, sizeof j->err) != 0)
        return false;
    ml->batch_n = batch;
    ml->batch_dim = dataset_dim(ds);
    return true;
}

/* same_batch: the samples of the previous grad again; the cursor stays. */
static bool grad_same_batch(struct command_job *j, const struct grad_params *p,
                            const struct ml_model *m)
{
    const struct ml_state *ml = j->ml;
    if (!ml->batch_n)
        return cmd_fail(j, "same_batch: this peer has no previous grad (no batch to repeat)");
    if (p->batch && p->batch != ml->batch_n)
        return cmd_fail(j, "same_batch: batch %" PRId64 " differs from the previous grad's %d",
                        p->batch, ml->batch_n);
    if (ml->batch_dim != kern_model_input_size(m->model))
        return cmd_fail(j, "same_batch: model %s takes %d inputs, the previous batch has %d",
                        kern_model_spec(m->model), kern_model_input_size(m->model), ml->batch_dim);
    return true;
}

/* A profiled grad takes the profile's time for the architecture and batch
 * (kernels/profile.h): the worker pads the job to it, asleep. */
static void grad_profile_time(struct command_job *j, const struct grad_params *p,
                              const struct ml_model *m)
{
    if (!m->profiled) return;
    const char *basis = "flops";
    int batch = p->batch ? (int)p->batch : j->ml->batch_n ? j->ml->batch_n : 64;
    j->work.device_ms = 1e3 * profile_grad_seconds(j->server->cfg.profile, &m->arch, batch, &basis);
    cmd_result_str(j, "basis", basis);
    if (!m->model) cmd_result_u64(j, "batch", (uint64_t)batch);
}

/* A timing-only profiled model: a gradient of the model's shape with
 * nothing resident, and the profile's time. */
static bool grad_timing_only(struct command_job *j, const struct grad_params *p,
                             const struct ml_model *m, const struct store_tensor *params)
{
    struct store_tensor *out = cmd_new_virtual_tensor(j, p->out, params->size, 0, false);
    if (!out) return false;
    grad_profile_time(j, p, m);
    store_count_skipped(j->store, params->size);
    store_publish(j->store, out);
    store_tensor_release(out);
    cmd_result_u64(j, "version", store_tensor_version(params));
    return true;
}

static bool grad_compute(struct command_job *j, const struct grad_params *p, struct ml_model *m,
                         struct dataset *ds, const struct store_tensor *params)
{
    struct ml_state *ml = j->ml;
    float loss;
    if (!m->model) return grad_timing_only(j, p, m, params);
    if (!(p->same_batch ? grad_same_batch(j, p, m)
                        : ml_check_shapes(j, m, ds, "train") && grad_next_batch(j, p, ds)))
        return false;
    const float *dparams = devmirror_read(j->dev, params, j->err, sizeof j->err);
    struct store_tensor *out =
        dparams ? cmd_new_virtual_tensor(j, p->out, params->size, m->resident, false) : NULL;
    if (!out) return false;
    grad_profile_time(j, p, m);
    store_count_skipped(j->store, params->size - m->resident);
    float *dgrad = devmirror_result(j->dev, out, j->err, sizeof j->err);
    bool ok = dgrad &&
              kern_model_grad(m->model, dparams, ml->batch_x, ml->batch_y, ml->batch_n, dgrad,
                              &loss, j->err, sizeof j->err) == 0 &&
              devmirror_publish(j->dev, j->store, out, j->err, sizeof j->err);
    if (ok) {
        cmd_result_f64(j, "loss", loss);
        cmd_result_u64(j, "batch", (uint64_t)ml->batch_n);
        cmd_result_u64(j, "epoch", dataset_epoch(ds));
        /* The model version the gradient was computed on: exact staleness. */
        cmd_result_u64(j, "version", store_tensor_version(params));
    }
    store_tensor_release(out);
    return ok;
}

static bool grad_run(struct command_job *j, const struct grad_params *p)
{
    /* Buckets are timed from the device's start, where the worker ends
     * the job's budget too (worker.h start_ms). */
    double t0_ms = j->work.start_ms, cpu0_ms = ml_thread_cpu_ms();
    j->ml->bucket_n = 0;
    struct ml_model *m = ml_model_find(j, p->model);
    /* The model may live on nodes without a profile (a server, the eval
     * node): only a grad needs one. */
    if (m && m->profiled && !j->server->cfg.profile)
        return cmd_fail(j,
                        "compute = \"profile\": node '%s' has no profile (net:node(name, { "
                        "profile = ... }))",
                        j->server->cfg.node);
    /* A timing-only model reads no data. */
    struct ml_data *data = m && m->model ? ml_split_find(j, "train") : NULL;
    struct store_tensor *params = m && (data || !m->model) ? ml_params_find(j, m) : NULL;
    bool ok = params && grad_compute(j, p, m, data ? data->ds : NULL, params);
    if (ok && p->bucket_mb > 0)
        ok = ml_grad_buckets(j, m, params->size, p->bucket_mb, t0_ms, cpu0_ms);
    store_tensor_release(params);
    return ok;
}

/* ---- optim ---- */

struct optim_params {
    char model[COMMAND_NAME_SIZE], tensor[COMMAND_NAME_SIZE], grad[COMMAND_NAME_SIZE];
    char method[16];
    double lr, momentum, beta1, beta2, eps, weight_decay; /* NAN: the default */
};

static bool optim_parse(struct command_job *j, struct optim_params *p, struct proto_args *a)
{
    strcpy(p->grad, "grad");
    int got_model = cmd_arg_name(a, "model", p->model);
    int got_tensor = cmd_arg_name(a, "tensor", p->tensor);
    if (got_model < 0 || got_tensor < 0) return false;
    if ((got_model == 1) == (got_tensor == 1))
        return cmd_arg_fail(a, "give one of 'model' (a model's parameters) and 'tensor' (any "
                               "tensor, e.g. a shard of them)");
    return cmd_arg_name(a, "grad", p->grad) >= 0 &&
           cmd_arg_text(a, "method", false, p->method, sizeof p->method) &&
           cmd_arg_float(a, "lr", false, NAN, &p->lr) &&
           cmd_arg_float(a, "momentum", false, NAN, &p->momentum) &&
           cmd_arg_float(a, "beta1", false, NAN, &p->beta1) &&
           cmd_arg_float(a, "beta2", false, NAN, &p->beta2) &&
           cmd_arg_float(a, "eps", false, NAN, &p->eps) &&
           cmd_arg_float(a, "weight_decay", false, NAN, &p->weight_decay);
}

static void optim_override(float *field, double value)
{
    if (!isnan(value)) *field = (float)value;
}

/* The optimizer in *slot, for n parameters, configured by p: created on
 * first use; kern_optim_configure resets it on a new method. */
static struct kern_optim *optim_prepare(struct command_job *j, const struct optim_params *p,
                                        struct kern_optim **slot, size_t n)
{
    struct optim_config cfg;
    if (!p->method[0]) /* absent: the current method, or sgd */
        cfg.method = *slot ? kern_optim_config(*slot)->method : OPTIM_SGD;
    else if (optim_method_parse(p->method, &cfg.method, j->err, sizeof j->err) != 0)
        return NULL;
    optim_config_default(&cfg, cfg.method);
    optim_override(&cfg.lr, p->lr);
    optim_override(&cfg.momentum, p->momentum);
    optim_override(&cfg.beta1, p->beta1);
    optim_override(&cfg.beta2, p->beta2);
    optim_override(&cfg.eps, p->eps);
    optim_override(&cfg.weight_decay, p->weight_decay);
    if (*slot && kern_optim_configure(*slot, &cfg, j->err, sizeof j->err) != 0) {
        /* Its state may be gone (a failed allocation): a later step must
         * start afresh, not step with it. */
        kern_optim_destroy(*slot);
        *slot = NULL;
        return NULL;
    }
    if (!*slot &&
        kern_optim_create(devmirror_ctx(j->dev), &cfg, n, slot, j->err, sizeof j->err) != 0)
        return NULL;
    return *slot;
}

/* Past the trainable parameters a model's tensor holds batch-norm running
 * statistics, and its gradient the batch's (kernels/model.h): folded in as
 * PyTorch's BatchNorm2d does, running = (1 - m) running + m batch. */
static void fold_running_stats(struct command_job *j, float *stats, const float *batch, size_t n)
{
    struct kern_ctx *ctx = devmirror_ctx(j->dev);
    if (n && kern_scale(ctx, n, 1.0f - MODEL_BN_MOMENTUM, stats, j->err, sizeof j->err) == 0)
        kern_axpy(ctx, n, MODEL_BN_MOMENTUM, batch, stats, j->err, sizeof j->err);
}

/* The step itself, on the device copies of the parameters and gradient:
 * the optimizer on the first `trainable` of the n, the rest folded. */
static void optim_step_device(struct command_job *j, struct kern_optim *o,
                              const struct store_patch *params, const struct store_tensor *grad,
                              size_t n, size_t trainable)
{
    float *dparams = devmirror_patch(j->dev, params, j->err, sizeof j->err);
    const float *dgrad = dparams ? devmirror_read(j->dev, grad, j->err, sizeof j->err) : NULL;
    if (dgrad && kern_optim_step(o, dparams, dgrad, trainable, j->err, sizeof j->err) == 0)
        fold_running_stats(j, dparams + trainable, dgrad + trainable, n - trainable);
}

/* The elements an optimizer steps: the resident prefix both tensors share
 * (virtual tensors, store.h); the rest is skipped and counted. */
static size_t optim_resident(struct command_job *j, const struct store_tensor *params,
                             const struct store_tensor *grad)
{
    uint64_t k = params->resident < grad->resident ? params->resident : grad->resident;
    store_count_skipped(j->store, params->size - k);
    return (size_t)k;
}

/* One step on the n parameters in tensor `name`, patched in place (copied
 * if a send holds them); what names them in a size error. Of the resident
 * ones the optimizer steps on the first `trainable` (its state's size) and
 * folds the rest in as running statistics (a model with batch norm). */
static bool optim_apply(struct command_job *j, const struct optim_params *p, const char *name,
                        size_t n, size_t trainable, const char *what, struct kern_optim *o)
{
    struct store_patch params;
    size_t k = 0;
    store_write_lock(j->store);
    bool ok = cmd_patch_begin(j, name, &params);
    struct store_tensor *grad = ok ? cmd_find(j, p->grad) : NULL;
    if (grad && (params.t->size != n || grad->size != n))
        cmd_fail(j, "%s has %zu parameters; '%s' has %" PRIu64 ", '%s' %" PRIu64, what, n, name,
                 params.t->size, p->grad, grad->size);
    else if (grad && (k = optim_resident(j, params.t, grad)) > 0)
        optim_step_device(j, o, &params, grad, k, trainable < k ? trainable : k);
    if (grad) cmd_charge_virtual(j, params.t, n);
    ok = grad && !j->err[0];
    store_tensor_release(grad);
    if (params.t)
        ok = devmirror_patch_end(j->dev, j->store, &params, ok, 0, k, j->err, sizeof j->err);
    store_write_unlock(j->store);
    if (ok) {
        cmd_result_u64(j, "steps", (uint64_t)kern_optim_steps(o));
        cmd_result_f64(j, "lr", kern_optim_config(o)->lr);
        cmd_result_u64(j, "version", params.version);
    }
    return ok;
}

/* The state of optim{tensor=}, per name; a tensor of another size than the
 * state was made for starts afresh. */
static struct kern_optim **optim_tensor_slot(struct command_job *j, const char *name, size_t n)
{
    struct ml_tensor_optim **p = &j->ml->tensor_optims;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    if (!*p) {
        *p = calloc(1, sizeof **p);
        if (!*p) return cmd_fail(j, "out of memory"), NULL;
        strcpy((*p)->name, name);
    }
    if ((*p)->optim && (*p)->size != n) {
        kern_optim_destroy((*p)->optim);
        (*p)->optim = NULL;
    }
    (*p)->size = n;
    return &(*p)->optim;
}

static bool optim_run_tensor(struct command_job *j, const struct optim_params *p)
{
    struct store_tensor *t = cmd_find(j, p->tensor);
    if (!t) return false;
    size_t n = (size_t)t->size, resident = (size_t)t->resident;
    store_tensor_release(t); /* the patch takes it again: held, it would be copied */
    char what[COMMAND_NAME_SIZE + 16];
    snprintf(what, sizeof what, "tensor '%s'", p->tensor);
    /* The state covers what is resident (store.h "Virtual tensors"). */
    struct kern_optim **slot = optim_tensor_slot(j, p->tensor, resident);
    struct kern_optim *o = slot ? optim_prepare(j, p, slot, resident) : NULL;
    return o && optim_apply(j, p, p->tensor, n, resident, what, o);
}

static bool optim_run(struct command_job *j, const struct optim_params *p)
{
    if (p->tensor[0]) return optim_run_tensor(j, p);
    struct ml_model *m = ml_model_find(j, p->model);
    if (!m) return false;
    /* The optimizer steps what the computing model trains: a surrogate's
     * or the architecture's trainable parameters (none: timing only). */
    size_t trainable = m->model ? kern_model_trainable_count(m->model) : 0;
    char what[300];
    snprintf(what, sizeof what, "model %s", m->spec);
    struct kern_optim *o = optim_prepare(j, p, &m->optim, trainable);
    return o && optim_apply(j, p, m->name, (size_t)m->size, trainable, what, o);
}

/* One pass over the parameters for each of w, the gradient and the
 * method's state (momentum; Adam's two moments), and the write of w. */
static bool optim_brief(struct command_job *j, const struct optim_params *p)
{
    return cmd_brief_pass(j, p->tensor[0] ? p->tensor : p->model, NULL, 4);
}

/* ---- compress ---- */

struct compress_params {
    char tensor[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE], residual[COMMAND_NAME_SIZE];
    char method[16];
    double ratio;
    struct cmd_range range; /* a slice alone: a sharded server's part of an update */
};

static bool compress_parse(struct command_job *j, struct compress_params *p, struct proto_args *a)
{
    strcpy(p->method, "topk");
    return cmd_arg_required_name(a, "tensor", p->tensor) &&
           cmd_arg_required_name(a, "out", p->out) &&
           cmd_arg_name(a, "residual", p->residual) >= 0 &&
           cmd_arg_text(a, "method", false, p->method, sizeof p->method) &&
           cmd_arg_float(a, "ratio", false, 0.01, &p->ratio) && cmd_arg_range(a, &p->range);
}

/* The error-feedback residual of n elements, ready to patch: created zero
 * when it does not exist yet. */
static bool compress_residual(struct command_job *j, const char *name, uint64_t n,
                              struct store_patch *r)
{
    if (store_patch_begin(j->store, name, r) != 0 && errno == ENOENT) {
        struct store_tensor *t = cmd_new_tensor(j, name, n, true);
        if (!t) return false;
        store_publish(j->store, t);
        store_tensor_release(t);
    }
    if (!r->t && !cmd_patch_begin(j, name, r)) return false;
    if (r->t->size != n)
        return cmd_fail(j, "residual '%s' has %" PRIu64 " elements, tensor has %" PRIu64, name,
                        r->t->size, n);
    return true;
}

/* Encodes the n elements at x into out (residual: NULL or patched, n
 * elements). *len: the bytes. */
static bool compress_into(struct command_job *j, const struct compress_params *p,
                          enum compress_method method, const float *x, uint64_t n, float *residual,
                          size_t cap, struct store_tensor *out, size_t *len)
{
    out->data[out->size ? out->size - 1 : 0] = 0.0f; /* the padding after the bytes */
    return compress_encode(method, p->ratio, x, residual, n, out->data, cap, len, j->err,
                           sizeof j->err) == 0;
}

/* Compresses x's range (all of x without one): the data decodes to the
 * range's count elements, and the residual holds that many. */
static bool compress_with(struct command_job *j, const struct compress_params *p,
                          enum compress_method method, const struct store_tensor *x)
{
    float *start;
    uint64_t n;
    if (!cmd_span(j, &p->range, x, &start, &n)) return false;
    size_t cap = compress_size(method, n, p->ratio), len = 0;
    if (!cap) return cmd_fail(j, "ratio %g is not in (0, 1]", p->ratio);
    struct store_tensor *out = cmd_new_tensor(j, p->out, (cap + 3) / 4, false);
    if (!out) return false;
    struct store_patch r = {0};
    store_write_lock(j->store);
    bool ok = !p->residual[0] || compress_residual(j, p->residual, n, &r);
    ok = ok && compress_into(j, p, method, start, n, r.t ? r.t->data : NULL, cap, out, &len);
    if (r.t) store_patch_end(j->store, &r, ok);
    store_write_unlock(j->store);
    if (ok) {
        cmd_result_u64(j, "version", store_publish(j->store, out));
        cmd_result_u64(j, "bytes", len);
        cmd_result_u64(j, "size", out->size);
        cmd_result_u64(j, "dense_bytes", n * sizeof(float));
    }
    store_tensor_release(out);
    return ok;
}

static bool compress_run(struct command_job *j, const struct compress_params *p)
{
    enum compress_method method;
    if (compress_method_parse(p->method, &method, j->err, sizeof j->err) != 0) return false;
    if (p->residual[0] && strcmp(p->residual, p->tensor) == 0)
        return cmd_fail(j, "residual must not be the tensor itself");
    struct store_tensor *x = cmd_find(j, p->tensor);
    /* Compressing the resident prefix alone would put the surrogate's bytes
     * on the wire, not the profiled model's: refused rather than wrong. */
    bool ok = x && (!store_tensor_virtual(x) ||
                    cmd_fail(j,
                             "tensor '%s' is virtual (a profiled model's): compression is not "
                             "supported on it",
                             p->tensor));
    ok = ok && compress_with(j, p, method, x);
    store_tensor_release(x);
    return ok;
}

/* ---- decompress ---- */

struct decompress_params {
    char tensor[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE];
    bool add;
};

static bool decompress_parse(struct command_job *j, struct decompress_params *p,
                             struct proto_args *a)
{
    return cmd_arg_required_name(a, "tensor", p->tensor) &&
           cmd_arg_required_name(a, "out", p->out) && proto_arg_bool(a, "add", &p->add) >= 0;
}

/* The byte length of compressed data from its own header (compress.h), so
 * a compressed tensor needs no side information; 0 when it cannot be one. */
static size_t compressed_length(const struct store_tensor *c)
{
    const uint8_t *b = (const uint8_t *)c->data;
    size_t cap = c->size * sizeof(float);
    if (cap < COMPRESS_HEADER_BYTES) return 0;
    uint32_t k;
    uint64_t n;
    memcpy(&k, b + 4, sizeof k); /* little-endian, as the host (frame.c) */
    memcpy(&n, b + 8, sizeof n);
    if (n > STORE_MAX_ELEMENTS) return 0;
    size_t len = b[3] == COMPRESS_TOPK   ? 16 + 8 * (size_t)k
                 : b[3] == COMPRESS_INT8 ? 20 + (size_t)n
                 : b[3] == COMPRESS_SIGN ? 20 + ((size_t)n + 7) / 8
                                         : 0;
    return len <= cap && cap - len < sizeof(float) ? len : 0;
}

static bool decompress_into(struct command_job *j, const struct decompress_params *p,
                            const struct store_tensor *c, size_t len, uint64_t n)
{
    if (!p->add) {
        struct store_tensor *out = cmd_new_tensor(j, p->out, n, false);
        bool ok =
            out && compress_decode(c->data, len, out->data, n, false, j->err, sizeof j->err) == 0;
        if (ok) cmd_result_u64(j, "version", store_publish(j->store, out));
        store_tensor_release(out);
        return ok;
    }
    struct store_patch o;
    store_write_lock(j->store);
    bool ok = cmd_patch_begin(j, p->out, &o);
    if (ok && o.t->size != n)
        ok = cmd_fail(j, "out '%s' has %" PRIu64 " elements, the data decodes to %" PRIu64, p->out,
                      o.t->size, n);
    ok = ok && compress_decode(c->data, len, o.t->data, n, true, j->err, sizeof j->err) == 0;
    if (o.t) store_patch_end(j->store, &o, ok);
    store_write_unlock(j->store);
    if (ok) cmd_result_u64(j, "version", o.version);
    return ok;
}

static bool decompress_run(struct command_job *j, const struct decompress_params *p)
{
    struct store_tensor *c = cmd_find(j, p->tensor);
    if (!c) return false;
    if (store_tensor_virtual(c)) {
        store_tensor_release(c);
        return cmd_fail(j, "tensor '%s' is virtual: it holds no compressed data", p->tensor);
    }
    size_t len = compressed_length(c);
    struct compress_info info;
    bool ok = len ? compress_inspect(c->data, len, &info, j->err, sizeof j->err) == 0
                  : cmd_fail(j, "tensor '%s' does not hold compressed data", p->tensor);
    ok = ok && decompress_into(j, p, c, len, info.n);
    if (ok) {
        cmd_result_u64(j, "size", info.n);
        cmd_result_u64(j, "bytes", len);
    }
    store_tensor_release(c);
    return ok;
}

/* ---- table entries ---- */

static const char *const keys_dataset[] = {"name",    "split", "shard", "shards", "partition",
                                           "alpha",   "seed",  "path",  "n",      "dim",
                                           "classes", "noise", NULL};
static const char *const keys_model[] = {"name", "arch", "init", "seed", "compute", "learn", NULL};
static const char *const keys_grad[] = {"model", "batch", "out", "same_batch", "bucket_mb", NULL};
static const char *const keys_optim[] = {"model", "tensor",       "grad",  "method",
                                         "lr",    "momentum",     "beta1", "beta2",
                                         "eps",   "weight_decay", NULL};
static const char *const keys_compress[] = {"tensor",   "method", "ratio", "out",
                                            "residual", "range",  NULL};
static const char *const keys_decompress[] = {"tensor", "out", "add", NULL};

COMMAND_DEFINE(ml_cmd_dataset, dataset, COMMAND_WORKER, (parse, run));
COMMAND_DEFINE(ml_cmd_model, model, COMMAND_WORKER, (parse, run));
COMMAND_DEFINE(ml_cmd_grad, grad, COMMAND_WORKER, (parse, run));
COMMAND_DEFINE(ml_cmd_optim, optim, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(ml_cmd_compress, compress, COMMAND_WORKER, (parse, run));
COMMAND_DEFINE(ml_cmd_decompress, decompress, COMMAND_WORKER, (parse, run));
