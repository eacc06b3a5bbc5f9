/* ml.c — the peer's learning commands over kernels/ (see ml.h): params
 * parsed on the loop thread, run on the worker against ml_state and the
 * tensor store. model, grad, optim and eval compute on the peer's device
 * (kernels/device.h) through the device copies of peer/devmirror.h; the
 * dataset and compression commands work on host memory. */
#include "peer/ml.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/compress.h"
#include "kernels/dataset.h"
#include "kernels/device.h"
#include "peer/command_job.h"
#include "peer/devmirror.h"

#define ML_SPLIT_SIZE 32
#define ML_PATH_SIZE 4096
#define ML_EVAL_CHUNK 1024 /* samples per dataset_read of eval */
#define ML_BATCH_MAX 65536

struct ml_split {
    char name[ML_SPLIT_SIZE];
    struct dataset *ds;
    struct ml_split *next;
};

struct ml_model {
    char name[COMMAND_NAME_SIZE]; /* its parameter tensor */
    struct kern_model *model;
    struct kern_optim *optim; /* NULL until the first optim{} */
    struct ml_model *next;
};

struct ml_state {
    struct ml_split *splits;
    struct ml_model *models;
    float *x; /* batch scratch */
    int32_t *y;
    size_t x_cap, y_cap;
};

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
        dataset_close(ml->splits->ds);
        free(ml->splits);
        ml->splits = next;
    }
    while (ml->models) {
        struct ml_model *next = ml->models->next;
        ml_model_free(ml->models);
        ml->models = next;
    }
    free(ml->x);
    free(ml->y);
    free(ml);
}

/* ---- lookups and scratch (worker) ---- */

static struct ml_split **ml_split_slot(struct ml_state *ml, const char *name)
{
    struct ml_split **p = &ml->splits;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

static struct dataset *ml_split_find(struct command_job *j, const char *split)
{
    struct ml_split *s = *ml_split_slot(j->ml, split);
    if (!s) cmd_fail(j, "no '%s' split loaded (load it with dataset{split='%s'})", split, split);
    return s ? s->ds : NULL;
}

static struct ml_model **ml_model_slot(struct ml_state *ml, const char *name)
{
    struct ml_model **p = &ml->models;
    while (*p && strcmp((*p)->name, name) != 0)
        p = &(*p)->next;
    return p;
}

static struct ml_model *ml_model_find(struct command_job *j, const char *name)
{
    struct ml_model *m = *ml_model_slot(j->ml, name);
    if (!m) cmd_fail(j, "model '%s' not found (create it with model{})", name);
    return m;
}

/* The model's parameter tensor, checked against its architecture. */
static struct store_tensor *ml_params_find(struct command_job *j, const struct ml_model *m)
{
    struct store_tensor *t = cmd_find(j, m->name);
    if (t && t->size != kern_model_param_count(m->model)) {
        cmd_fail(j, "tensor '%s' has %" PRIu64 " elements, model %s has %zu parameters", m->name,
                 t->size, kern_model_spec(m->model), kern_model_param_count(m->model));
        store_tensor_release(t);
        return NULL;
    }
    return t;
}

/* Scratch for n samples of dim floats. */
static bool ml_scratch(struct command_job *j, size_t n, int dim)
{
    struct ml_state *ml = j->ml;
    size_t floats = n * (size_t)dim;
    if (floats > ml->x_cap) {
        float *x = realloc(ml->x, floats * sizeof *x);
        if (!x) return cmd_fail(j, "out of memory for %zu samples", n);
        ml->x = x;
        ml->x_cap = floats;
    }
    if (n > ml->y_cap) {
        int32_t *y = realloc(ml->y, n * sizeof *y);
        if (!y) return cmd_fail(j, "out of memory for %zu labels", n);
        ml->y = y;
        ml->y_cap = n;
    }
    return true;
}

static bool ml_check_shapes(struct command_job *j, const struct ml_model *m, struct dataset *ds,
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

static bool dataset_parse(struct command_job *j, struct proto_args *a)
{
    struct dataset_params *p = j->extra;
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

/* A peer that gave up root (peer/privdrop.h) may not read a file its user
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

static bool dataset_run(struct command_job *j)
{
    const struct dataset_params *p = j->extra;
    if ((p->shard > 0) != (p->shards > 0) || p->shard > p->shards)
        return cmd_fail(j, "shard %" PRId64 " of %" PRId64 ": give both, 1 <= shard <= shards",
                        p->shard, p->shards);
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
    struct ml_split **slot = ml_split_slot(j->ml, p->split);
    if (!*slot) {
        *slot = calloc(1, sizeof **slot);
        if (!*slot) {
            dataset_close(ds);
            return cmd_fail(j, "out of memory");
        }
        strcpy((*slot)->name, p->split);
    }
    dataset_close((*slot)->ds);
    (*slot)->ds = ds;
    cmd_result_str(j, "split", p->split);
    cmd_result_u64(j, "samples", dataset_size(ds));
    cmd_result_u64(j, "total", dataset_total(ds));
    cmd_result_u64(j, "dim", (uint64_t)dataset_dim(ds));
    cmd_result_u64(j, "classes", (uint64_t)dataset_classes(ds));
    return true;
}

/* ---- model ---- */

struct model_params {
    char name[COMMAND_NAME_SIZE], arch[256], init[32];
    int64_t seed;
};

static bool model_parse(struct command_job *j, struct proto_args *a)
{
    struct model_params *p = j->extra;
    strcpy(p->init, "default");
    p->seed = 1;
    return cmd_arg_required_name(a, "name", p->name) &&
           cmd_arg_text(a, "arch", true, p->arch, sizeof p->arch) &&
           cmd_arg_text(a, "init", false, p->init, sizeof p->init) &&
           cmd_arg_int(a, "seed", false, 0, INT64_MAX, &p->seed);
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
    *params = NULL;
    if (kern_model_create(devmirror_ctx(j->dev), p->arch, 0, &m->model, j->err, sizeof j->err) ==
        0) {
        *params = cmd_new_tensor(j, p->name, kern_model_param_count(m->model), false);
        float *dst = *params ? devmirror_result(j->dev, *params, j->err, sizeof j->err) : NULL;
        if (dst &&
            kern_model_init(m->model, dst, p->init, (uint64_t)p->seed, j->err, sizeof j->err) ==
                0 &&
            devmirror_publish(j->dev, j->store, *params, j->err, sizeof j->err))
            return m;
    }
    store_tensor_release(*params);
    ml_model_free(m);
    return NULL;
}

static bool model_run(struct command_job *j)
{
    const struct model_params *p = j->extra;
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
    store_tensor_release(params);
    return true;
}

/* ---- grad ---- */

struct grad_params {
    char model[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE];
    int64_t batch;
};

static bool grad_parse(struct command_job *j, struct proto_args *a)
{
    struct grad_params *p = j->extra;
    strcpy(p->out, "grad");
    p->batch = 64;
    return cmd_arg_required_name(a, "model", p->model) && cmd_arg_name(a, "out", p->out) >= 0 &&
           cmd_arg_int(a, "batch", false, 1, ML_BATCH_MAX, &p->batch);
}

static bool grad_compute(struct command_job *j, const struct grad_params *p, struct ml_model *m,
                         struct dataset *ds, const struct store_tensor *params)
{
    int batch = (int)p->batch;
    float loss;
    if (!ml_check_shapes(j, m, ds, "train") || !ml_scratch(j, (size_t)batch, dataset_dim(ds)) ||
        dataset_next_batch(ds, batch, j->ml->x, j->ml->y, j->err, sizeof j->err) != 0)
        return false;
    const float *dparams = devmirror_read(j->dev, params, j->err, sizeof j->err);
    struct store_tensor *out = dparams ? cmd_new_tensor(j, p->out, params->size, false) : NULL;
    if (!out) return false;
    float *dgrad = devmirror_result(j->dev, out, j->err, sizeof j->err);
    bool ok = dgrad &&
              kern_model_grad(m->model, dparams, j->ml->x, j->ml->y, batch, dgrad, &loss, j->err,
                              sizeof j->err) == 0 &&
              devmirror_publish(j->dev, j->store, out, j->err, sizeof j->err);
    if (ok) {
        cmd_result_f64(j, "loss", loss);
        cmd_result_u64(j, "batch", (uint64_t)batch);
        cmd_result_u64(j, "epoch", dataset_epoch(ds));
    }
    store_tensor_release(out);
    return ok;
}

static bool grad_run(struct command_job *j)
{
    const struct grad_params *p = j->extra;
    struct ml_model *m = ml_model_find(j, p->model);
    struct dataset *ds = m ? ml_split_find(j, "train") : NULL;
    struct store_tensor *params = ds ? ml_params_find(j, m) : NULL;
    bool ok = params && grad_compute(j, p, m, ds, params);
    store_tensor_release(params);
    return ok;
}

/* ---- optim ---- */

struct optim_params {
    char model[COMMAND_NAME_SIZE], grad[COMMAND_NAME_SIZE], method[16];
    double lr, momentum, beta1, beta2, eps, weight_decay; /* NAN: the default */
};

static bool optim_parse(struct command_job *j, struct proto_args *a)
{
    struct optim_params *p = j->extra;
    strcpy(p->grad, "grad");
    return cmd_arg_required_name(a, "model", p->model) && cmd_arg_name(a, "grad", p->grad) >= 0 &&
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

/* The model's optimizer configured by p: created on first use;
 * optim_configure resets it on a new method. */
static struct kern_optim *optim_prepare(struct command_job *j, const struct optim_params *p,
                                        struct ml_model *m)
{
    struct optim_config cfg;
    if (!p->method[0]) /* absent: the model's current method, or sgd */
        cfg.method = m->optim ? kern_optim_config(m->optim)->method : OPTIM_SGD;
    else if (optim_method_parse(p->method, &cfg.method, j->err, sizeof j->err) != 0)
        return NULL;
    optim_config_default(&cfg, cfg.method);
    optim_override(&cfg.lr, p->lr);
    optim_override(&cfg.momentum, p->momentum);
    optim_override(&cfg.beta1, p->beta1);
    optim_override(&cfg.beta2, p->beta2);
    optim_override(&cfg.eps, p->eps);
    optim_override(&cfg.weight_decay, p->weight_decay);
    if (m->optim && kern_optim_configure(m->optim, &cfg, j->err, sizeof j->err) != 0) return NULL;
    if (!m->optim &&
        kern_optim_create(devmirror_ctx(j->dev), &cfg, kern_model_param_count(m->model), &m->optim,
                          j->err, sizeof j->err) != 0)
        return NULL;
    return m->optim;
}

/* The step itself, on the device copies of the parameters and gradient. */
static void optim_step_device(struct command_job *j, struct kern_optim *o,
                              const struct store_patch *params, const struct store_tensor *grad,
                              size_t n)
{
    float *dparams = devmirror_patch(j->dev, params, j->err, sizeof j->err);
    const float *dgrad = dparams ? devmirror_read(j->dev, grad, j->err, sizeof j->err) : NULL;
    if (dgrad) kern_optim_step(o, dparams, dgrad, n, j->err, sizeof j->err);
}

/* One step on the parameters, patched in place (copied if a send holds them). */
static bool optim_apply(struct command_job *j, const struct optim_params *p, struct ml_model *m,
                        struct kern_optim *o)
{
    struct store_patch params;
    store_write_lock(j->store);
    bool ok = cmd_patch_begin(j, m->name, &params);
    struct store_tensor *grad = ok ? cmd_find(j, p->grad) : NULL;
    size_t n = kern_model_param_count(m->model);
    if (grad && (params.t->size != n || grad->size != n))
        cmd_fail(j, "model %s has %zu parameters; '%s' has %" PRIu64 ", '%s' %" PRIu64,
                 kern_model_spec(m->model), n, m->name, params.t->size, p->grad, grad->size);
    else if (grad)
        optim_step_device(j, o, &params, grad, n);
    ok = grad && !j->err[0];
    store_tensor_release(grad);
    if (params.t)
        ok = devmirror_patch_end(j->dev, j->store, &params, ok, 0, n, j->err, sizeof j->err);
    store_write_unlock(j->store);
    return ok;
}

static bool optim_run(struct command_job *j)
{
    const struct optim_params *p = j->extra;
    struct ml_model *m = ml_model_find(j, p->model);
    struct kern_optim *o = m ? optim_prepare(j, p, m) : NULL;
    if (!o || !optim_apply(j, p, m, o)) return false;
    cmd_result_u64(j, "steps", (uint64_t)kern_optim_steps(o));
    cmd_result_f64(j, "lr", kern_optim_config(o)->lr);
    return true;
}

/* ---- eval ---- */

struct eval_params {
    char model[COMMAND_NAME_SIZE], split[ML_SPLIT_SIZE];
    int64_t limit;
};

static bool eval_parse(struct command_job *j, struct proto_args *a)
{
    struct eval_params *p = j->extra;
    strcpy(p->split, "test");
    return cmd_arg_required_name(a, "model", p->model) &&
           cmd_arg_text(a, "split", false, p->split, sizeof p->split) &&
           cmd_arg_int(a, "limit", false, 0, INT64_MAX, &p->limit);
}

static bool eval_samples(struct command_job *j, struct ml_model *m, struct dataset *ds,
                         const float *params, size_t limit, struct model_score *score)
{
    if (!ml_scratch(j, ML_EVAL_CHUNK, dataset_dim(ds))) return false;
    for (size_t first = 0; first < limit; first += ML_EVAL_CHUNK) {
        size_t n = limit - first < ML_EVAL_CHUNK ? limit - first : ML_EVAL_CHUNK;
        if (dataset_read(ds, first, n, j->ml->x, j->ml->y, j->err, sizeof j->err) != 0 ||
            kern_model_eval(m->model, params, j->ml->x, j->ml->y, n, score, j->err,
                            sizeof j->err) != 0)
            return false;
    }
    return true;
}

static bool eval_run(struct command_job *j)
{
    const struct eval_params *p = j->extra;
    struct ml_model *m = ml_model_find(j, p->model);
    struct dataset *ds = m ? ml_split_find(j, p->split) : NULL;
    struct store_tensor *params =
        ds && ml_check_shapes(j, m, ds, p->split) ? ml_params_find(j, m) : NULL;
    if (!params) return false;
    size_t limit = dataset_size(ds);
    if (p->limit > 0 && (uint64_t)p->limit < limit) limit = (size_t)p->limit;
    struct model_score score = {0};
    const float *dparams = devmirror_read(j->dev, params, j->err, sizeof j->err);
    bool ok = dparams && eval_samples(j, m, ds, dparams, limit, &score);
    store_tensor_release(params);
    if (!ok) return false;
    cmd_result_f64(j, "accuracy", model_score_accuracy(&score));
    cmd_result_f64(j, "loss", model_score_loss(&score));
    cmd_result_u64(j, "samples", score.samples);
    return true;
}

/* ---- compress ---- */

struct compress_params {
    char tensor[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE], residual[COMMAND_NAME_SIZE];
    char method[16];
    double ratio;
};

static bool compress_parse(struct command_job *j, struct proto_args *a)
{
    struct compress_params *p = j->extra;
    strcpy(p->method, "topk");
    return cmd_arg_required_name(a, "tensor", p->tensor) &&
           cmd_arg_required_name(a, "out", p->out) &&
           cmd_arg_name(a, "residual", p->residual) >= 0 &&
           cmd_arg_text(a, "method", false, p->method, sizeof p->method) &&
           cmd_arg_float(a, "ratio", false, 0.01, &p->ratio);
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

/* Encodes x into out (residual: NULL or patched). *len: the bytes. */
static bool compress_into(struct command_job *j, const struct compress_params *p,
                          enum compress_method method, const struct store_tensor *x,
                          float *residual, size_t cap, struct store_tensor *out, size_t *len)
{
    out->data[out->size ? out->size - 1 : 0] = 0.0f; /* the padding after the bytes */
    return compress_encode(method, p->ratio, x->data, residual, x->size, out->data, cap, len,
                           j->err, sizeof j->err) == 0;
}

static bool compress_with(struct command_job *j, const struct compress_params *p,
                          enum compress_method method, const struct store_tensor *x)
{
    size_t cap = compress_size(method, x->size, p->ratio), len = 0;
    if (!cap) return cmd_fail(j, "ratio %g is not in (0, 1]", p->ratio);
    struct store_tensor *out = cmd_new_tensor(j, p->out, (cap + 3) / 4, false);
    if (!out) return false;
    struct store_patch r = {0};
    store_write_lock(j->store);
    bool ok = !p->residual[0] || compress_residual(j, p->residual, x->size, &r);
    ok = ok && compress_into(j, p, method, x, r.t ? r.t->data : NULL, cap, out, &len);
    if (r.t) store_patch_end(j->store, &r, ok);
    store_write_unlock(j->store);
    if (ok) {
        store_publish(j->store, out);
        cmd_result_u64(j, "bytes", len);
        cmd_result_u64(j, "size", out->size);
        cmd_result_u64(j, "dense_bytes", x->size * sizeof(float));
    }
    store_tensor_release(out);
    return ok;
}

static bool compress_run(struct command_job *j)
{
    const struct compress_params *p = j->extra;
    enum compress_method method;
    if (compress_method_parse(p->method, &method, j->err, sizeof j->err) != 0) return false;
    if (p->residual[0] && strcmp(p->residual, p->tensor) == 0)
        return cmd_fail(j, "residual must not be the tensor itself");
    struct store_tensor *x = cmd_find(j, p->tensor);
    bool ok = x && compress_with(j, p, method, x);
    store_tensor_release(x);
    return ok;
}

/* ---- decompress ---- */

struct decompress_params {
    char tensor[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE];
    bool add;
};

static bool decompress_parse(struct command_job *j, struct proto_args *a)
{
    struct decompress_params *p = j->extra;
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
        if (ok) store_publish(j->store, out);
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
    return ok;
}

static bool decompress_run(struct command_job *j)
{
    const struct decompress_params *p = j->extra;
    struct store_tensor *c = cmd_find(j, p->tensor);
    if (!c) return false;
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
static const char *const keys_model[] = {"name", "arch", "init", "seed", NULL};
static const char *const keys_grad[] = {"model", "batch", "out", NULL};
static const char *const keys_optim[] = {"model", "grad",  "method", "lr",           "momentum",
                                         "beta1", "beta2", "eps",    "weight_decay", NULL};
static const char *const keys_eval[] = {"model", "split", "limit", NULL};
static const char *const keys_compress[] = {"tensor", "method", "ratio", "out", "residual", NULL};
static const char *const keys_decompress[] = {"tensor", "out", "add", NULL};

#define ML_COMMAND(cname, keys, prefix)                                                            \
    {                                                                                              \
        cname, keys, .parse = prefix##_parse, .run = prefix##_run,                                 \
                     .extra_size = sizeof(struct prefix##_params)                                  \
    }

const struct command ml_cmd_dataset = ML_COMMAND("dataset", keys_dataset, dataset);
const struct command ml_cmd_model = ML_COMMAND("model", keys_model, model);
const struct command ml_cmd_grad = ML_COMMAND("grad", keys_grad, grad);
const struct command ml_cmd_optim = ML_COMMAND("optim", keys_optim, optim);
const struct command ml_cmd_eval = ML_COMMAND("eval", keys_eval, eval);
const struct command ml_cmd_compress = ML_COMMAND("compress", keys_compress, compress);
const struct command ml_cmd_decompress = ML_COMMAND("decompress", keys_decompress, decompress);
