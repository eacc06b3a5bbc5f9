/* commands_ml_split.c — the peer's layer-range commands forward{} and backward{}
 * (docs/lua-api.md "forward and backward"): one part of a split model on
 * this peer, for split learning and pipelines (hiernet.algo.split).
 *
 * A forward keeps what its backward needs in a stash per (model, layers,
 * micro-batch): a model of its own on the peer's device (kern_model),
 * whose workspace holds the part's activations, plus the part's input and,
 * on the last part, the labels and the loss gradient. Stashes are reused by
 * the next step's micro-batch of the same number, so a pipeline in its
 * steady state does not allocate. The passes run on the peer's device
 * (kernels/device.h's layer ranges): the parameters are its device copy
 * (peer/devmirror.h), the gradient is computed there and written through
 * to the host tensor; activations and their gradients travel as host
 * tensors, as the data plane ships them. A model made with compute =
 * "profile" runs the same passes, each padded to the node profile's time
 * for its layers and batch. Worker thread only, like ml_state. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dataset.h"
#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/profile.h"
#include "kernels/zoo.h"
#include "peer/command_job.h"
#include "peer/commands_ml.h"
#include "peer/commands_ml_internal.h"
#include "peer/devmirror.h"
#include "peer/server.h"

#define SPLIT_BATCH_DEFAULT 64
#define SPLIT_BATCH_MAX 65536

struct ml_stash {
    char model[COMMAND_NAME_SIZE];
    int first, last; /* 0-based layers */
    int64_t microbatch;
    struct kern_model *m; /* its workspace: the activations of the micro-batch */
    float *x;             /* the part's input */
    int32_t *y;           /* labels (last part) */
    float *dy;            /* the last part: d loss / d logits */
    size_t x_cap, y_cap, dy_cap;
    int batch;
    bool live;       /* forward done, backward not yet */
    bool has_labels; /* y holds the batch's labels */
    struct ml_stash *next;
};

static void stash_model_drop(struct ml_stash *s)
{
    kern_model_destroy(s->m);
    s->m = NULL;
}

/* backward{add}'s shared gradient scratch (struct ml_state). */
static void grad_scratch_free(struct ml_state *ml)
{
    if (ml->grad_dscratch) kern_free(ml->grad_ctx, ml->grad_dscratch);
    free(ml->grad_scratch);
    ml->grad_ctx = NULL;
    ml->grad_dscratch = ml->grad_scratch = NULL;
    ml->grad_dscratch_cap = ml->grad_scratch_cap = 0;
}

void ml_stash_free_all(struct ml_state *ml)
{
    while (ml->stashes) {
        struct ml_stash *next = ml->stashes->next;
        stash_model_drop(ml->stashes);
        free(ml->stashes->x);
        free(ml->stashes->y);
        free(ml->stashes->dy);
        free(ml->stashes);
        ml->stashes = next;
    }
    grad_scratch_free(ml);
}

static struct ml_stash *stash_find(struct ml_state *ml, const char *model, int first, int last,
                                   int64_t microbatch)
{
    for (struct ml_stash *s = ml->stashes; s; s = s->next)
        if (!strcmp(s->model, model) && s->first == first && s->last == last &&
            s->microbatch == microbatch)
            return s;
    return NULL;
}

/* The stash of a new forward: the old one of the key (reused, and its
 * model recreated when the architecture behind the name changed), or a
 * new one. */
static struct ml_stash *stash_get(struct command_job *j, const char *model, const char *spec,
                                  int first, int last, int64_t microbatch)
{
    struct ml_stash *s = stash_find(j->ml, model, first, last, microbatch);
    /* s->m is NULL when the last forward of the key failed to make it (out
     * of device memory): made again below. */
    if (s && s->m && strcmp(kern_model_spec(s->m), spec) == 0) return s;
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return cmd_fail(j, "out of memory"), NULL;
        snprintf(s->model, sizeof s->model, "%s", model);
        s->first = first;
        s->last = last;
        s->microbatch = microbatch;
        s->next = j->ml->stashes;
        j->ml->stashes = s;
    }
    stash_model_drop(s);
    s->live = false;
    if (kern_model_create(devmirror_ctx(j->dev), spec, 0, &s->m, j->err, sizeof j->err) < 0)
        return NULL;
    return s;
}

static bool grow(struct command_job *j, void **buf, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap) return true;
    void *grown = realloc(*buf, n * size);
    if (!grown) return cmd_fail(j, "out of memory for %zu elements", n);
    *buf = grown;
    *cap = n;
    return true;
}

/* ---- params shared by both commands ---- */

struct part_params {
    char model[COMMAND_NAME_SIZE];
    uint64_t layers[2]; /* 1-based, as given */
    int64_t microbatch;
};

static bool part_parse(struct command_job *j, struct part_params *p, struct proto_args *a)
{
    (void)j;
    p->microbatch = 1;
    if (!cmd_arg_required_name(a, "model", p->model)) return false;
    int got = proto_arg_range(a, "layers", &p->layers[0], &p->layers[1]);
    if (got == 0) return proto_args_missing(a, "layers");
    if (got < 0) /* its words are a range's ({offset, count}) */
        return cmd_arg_fail(a, "param 'layers': expected {first, last}, layer numbers from 1");
    return got > 0 && cmd_arg_int(a, "microbatch", false, 0, INT64_MAX, &p->microbatch);
}

/* Whether the layers have kernels to run: the architecture itself, by
 * kernel or by profile (a profiled one needs the node's profile); not a
 * profiled model's surrogate (learn=), whose layers are not the model's,
 * nor a timing-only zoo model, which has no layer table. */
static bool part_computes(struct command_job *j, const struct part_params *p,
                          const struct ml_model *m)
{
    if (!m->model || strcmp(kern_model_spec(m->model), m->spec) != 0)
        return cmd_fail(j,
                        "model '%s' (%s): forward and backward need the architecture's own "
                        "kernels (a real model, by kernel or by profile), not a surrogate or a "
                        "timing-only zoo model",
                        p->model, m->spec);
    if (m->profiled && !j->server->cfg.profile)
        return cmd_fail(j,
                        "compute = \"profile\": node '%s' has no profile (net:node(name, { "
                        "profile = ... }))",
                        j->server->cfg.node);
    return true;
}

/* compute = "profile": the pass takes the profile's time for its layers
 * and batch (kernels/profile.h profile_pass_seconds), and the worker pads
 * the job to it, asleep, as it does a profiled grad; the real pass inside
 * that time makes the activations and gradients that cross the links. So
 * a pass's time is the emulated device's, whatever the host's cores and
 * memory are doing, unless the real pass overruns it. */
static bool part_profile_time(struct command_job *j, const struct ml_model *m, int first, int last,
                              bool backward, int batch)
{
    if (!m->profiled) return true;
    struct zoo_cost cost;
    if (zoo_range_cost(m->spec, first, last, &cost, j->err, sizeof j->err) < 0) return false;
    const char *basis = "flops";
    double ms = 1e3 * profile_pass_seconds(j->server->cfg.profile, &m->arch, &cost, backward, batch,
                                           &basis);
    j->work.device_ms = ms;
    cmd_result_f64(j, "device_ms", ms);
    cmd_result_str(j, "basis", basis);
    return true;
}

/* The model, its host parameters (held) and the range, checked. */
static struct store_tensor *part_open(struct command_job *j, const struct part_params *p,
                                      const struct ml_model **model, int *first, int *last)
{
    const struct ml_model *m = ml_model_find(j, p->model);
    if (!m) return NULL;
    if (!part_computes(j, p, m)) return NULL;
    const struct model_spec *s = kern_model_layout(m->model);
    *first = p->layers[0] > (uint64_t)s->layer_count + 1 ? -1 : (int)p->layers[0] - 1;
    *last = p->layers[1] > (uint64_t)s->layer_count + 1 ? s->layer_count : (int)p->layers[1] - 1;
    if (model_spec_range_check(s, *first, *last, j->err, sizeof j->err) < 0) return NULL;
    *model = m;
    return ml_params_find(j, m);
}

/* Publishes t (a cmd_new_tensor whose elements the caller has written)
 * and drops the caller's reference: the store keeps its own. */
static bool publish(struct command_job *j, struct store_tensor *t)
{
    store_publish(j->store, t);
    store_tensor_release(t);
    return true;
}

/* ---- forward ---- */

struct forward_params {
    struct part_params part;
    char input[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE];
    char labels[COMMAND_NAME_SIZE], labels_out[COMMAND_NAME_SIZE];
    int64_t batch;
};

static bool forward_parse(struct command_job *j, struct forward_params *p, struct proto_args *a)
{
    strcpy(p->out, "act");
    p->batch = 0; /* not given */
    if (!part_parse(j, &p->part, a) || cmd_arg_name(a, "input", p->input) < 0 ||
        cmd_arg_name(a, "out", p->out) < 0 || cmd_arg_name(a, "labels", p->labels) < 0 ||
        cmd_arg_name(a, "labels_out", p->labels_out) < 0 ||
        !cmd_arg_int(a, "batch", false, 1, SPLIT_BATCH_MAX, &p->batch))
        return false;
    /* input='s batch is its size: a batch= beside it would be ignored */
    if (p->input[0] && p->batch)
        return cmd_arg_fail(a,
                            "param 'batch': only without input= (the input's size is its batch)");
    if (!p->batch) p->batch = SPLIT_BATCH_DEFAULT;
    return true;
}

/* The first part without input=: the next mini-batch of the train shard,
 * with its labels. */
static bool forward_read_data(struct command_job *j, const struct forward_params *p,
                              const struct ml_model *m, struct ml_stash *s)
{
    struct ml_data *data = ml_split_find(j, "train");
    if (!data || !ml_check_shapes(j, m, data->ds, "train")) return false;
    size_t in = (size_t)kern_model_input_size(m->model);
    if (!grow(j, (void **)&s->x, &s->x_cap, (size_t)p->batch * in, sizeof(float)) ||
        !grow(j, (void **)&s->y, &s->y_cap, (size_t)p->batch, sizeof(int32_t)) ||
        dataset_next_batch(data->ds, (int)p->batch, s->x, s->y, j->err, sizeof j->err) != 0)
        return false;
    s->batch = (int)p->batch;
    s->has_labels = true;
    cmd_result_u64(j, "epoch", dataset_epoch(data->ds));
    return true;
}

/* input=: the previous part's output, batch x the input size of layer first. */
static bool forward_read_input(struct command_job *j, const struct forward_params *p,
                               const struct model_layer *l, struct ml_stash *s)
{
    if (!p->input[0])
        return cmd_fail(j, "layers {%d, %d}: input= is missing (only layer 1 reads the data)",
                        s->first + 1, s->last + 1);
    struct store_tensor *t = cmd_find(j, p->input);
    if (!t) return false;
    bool ok = t->resident == t->size && t->size && t->size % l->in_size == 0;
    if (!ok)
        cmd_fail(j,
                 "input '%s' has %" PRIu64 " elements, not a whole batch of %zu (the input of "
                 "layer %d)",
                 p->input, t->size, l->in_size, s->first + 1);
    else if ((ok = grow(j, (void **)&s->x, &s->x_cap, t->size, sizeof(float)))) {
        memcpy(s->x, t->data, t->size * sizeof(float));
        s->batch = (int)(t->size / l->in_size);
    }
    store_tensor_release(t);
    return ok;
}

/* labels=: the labels shipped with the activations (whole numbers as
 * float32, as labels_out= writes them). */
static bool forward_read_labels(struct command_job *j, const struct forward_params *p,
                                struct ml_stash *s)
{
    struct store_tensor *t = cmd_find(j, p->labels);
    if (!t) return false;
    bool ok = t->size == (uint64_t)s->batch && t->resident == t->size &&
              grow(j, (void **)&s->y, &s->y_cap, (size_t)s->batch, sizeof(int32_t));
    if (!ok && !j->err[0])
        cmd_fail(j, "labels '%s' has %" PRIu64 " elements, the batch %d", p->labels, t->size,
                 s->batch);
    for (int b = 0; ok && b < s->batch; b++)
        s->y[b] = (int32_t)t->data[b];
    s->has_labels = ok;
    store_tensor_release(t);
    return ok;
}

static bool forward_write_labels(struct command_job *j, const struct forward_params *p,
                                 const struct ml_stash *s)
{
    if (!s->has_labels)
        return cmd_fail(j, "labels_out '%s': this part has no labels", p->labels_out);
    struct store_tensor *t = cmd_new_tensor(j, p->labels_out, (uint64_t)s->batch, false);
    if (!t) return false;
    for (int b = 0; b < s->batch; b++)
        t->data[b] = (float)s->y[b];
    return publish(j, t);
}

/* The last part without labels= on the node that read the micro-batch
 * (layer 1's forward of the same model and micro-batch, batch alike): the
 * labels it kept ("keep": they never leave the label holder). */
static void forward_kept_labels(struct command_job *j, struct ml_stash *s)
{
    for (const struct ml_stash *d = j->ml->stashes; d; d = d->next)
        if (d != s && d->first == 0 && d->has_labels && d->live && d->batch == s->batch &&
            d->microbatch == s->microbatch && !strcmp(d->model, s->model) &&
            grow(j, (void **)&s->y, &s->y_cap, (size_t)s->batch, sizeof(int32_t))) {
            memcpy(s->y, d->y, (size_t)s->batch * sizeof(int32_t));
            s->has_labels = true;
            return;
        }
}

/* The last part with labels: the loss now, its gradient kept for backward. */
static bool forward_loss(struct command_job *j, struct ml_stash *s, const float *logits, size_t n)
{
    float loss;
    if (!grow(j, (void **)&s->dy, &s->dy_cap, n, sizeof(float)) ||
        kern_model_loss(s->m, logits, s->y, s->batch, s->dy, &loss, j->err, sizeof j->err) < 0)
        return false;
    cmd_result_f64(j, "loss", loss);
    return true;
}

static bool forward_pass(struct command_job *j, const struct forward_params *p,
                         const struct ml_model *m, const struct store_tensor *params, int first,
                         int last)
{
    const struct model_spec *spec = kern_model_layout(m->model);
    struct ml_stash *s =
        stash_get(j, p->part.model, kern_model_spec(m->model), first, last, p->part.microbatch);
    if (!s) return false;
    s->live = s->has_labels = false;
    bool ok = first == 0 && !p->input[0] ? forward_read_data(j, p, m, s)
                                         : forward_read_input(j, p, &spec->layers[first], s);
    if (ok && p->labels[0]) ok = forward_read_labels(j, p, s);
    if (ok && !p->labels[0] && !s->has_labels && last == spec->layer_count - 1)
        forward_kept_labels(j, s);
    if (ok && p->labels_out[0]) ok = forward_write_labels(j, p, s);
    size_t n = spec->layers[last].out_size * (size_t)(ok ? s->batch : 0);
    const float *dparams = ok ? devmirror_read(j->dev, params, j->err, sizeof j->err) : NULL;
    struct store_tensor *out = dparams ? cmd_new_tensor(j, p->out, n, false) : NULL;
    if (!out) return false;
    if (kern_model_forward_range(s->m, dparams, first, last, s->x, s->batch, out->data, j->err,
                                 sizeof j->err) < 0 ||
        (last == spec->layer_count - 1 && s->has_labels && !forward_loss(j, s, out->data, n))) {
        store_tensor_release(out);
        return false;
    }
    if (!part_profile_time(j, m, first, last, false, s->batch)) {
        store_tensor_release(out);
        return false;
    }
    s->live = true;
    cmd_result_u64(j, "batch", (uint64_t)s->batch);
    cmd_result_u64(j, "size", n);
    cmd_result_u64(j, "version", store_tensor_version(params));
    return publish(j, out);
}

static bool forward_run(struct command_job *j, const struct forward_params *p)
{
    const struct ml_model *m;
    int first, last;
    struct store_tensor *params = part_open(j, &p->part, &m, &first, &last);
    bool ok = params && forward_pass(j, p, m, params, first, last);
    store_tensor_release(params);
    return ok;
}

/* ---- backward ---- */

struct backward_params {
    struct part_params part;
    char grad_in[COMMAND_NAME_SIZE], grad_out[COMMAND_NAME_SIZE], out[COMMAND_NAME_SIZE];
    bool add;
};

static bool backward_parse(struct command_job *j, struct backward_params *p, struct proto_args *a)
{
    strcpy(p->out, "grad");
    return part_parse(j, &p->part, a) && cmd_arg_name(a, "grad_in", p->grad_in) >= 0 &&
           cmd_arg_name(a, "grad_out", p->grad_out) >= 0 && cmd_arg_name(a, "out", p->out) >= 0 &&
           cmd_arg_bool(a, "add", &p->add);
}

/* d loss / d the part's output: grad_in=, or the loss gradient the last
 * part's forward kept. Held in *held when it is a tensor. */
static const float *backward_dy(struct command_job *j, const struct backward_params *p,
                                const struct ml_stash *s, size_t n, struct store_tensor **held)
{
    *held = NULL;
    if (!p->grad_in[0]) {
        if (s->dy && s->has_labels && s->last == kern_model_layout(s->m)->layer_count - 1)
            return s->dy;
        return cmd_fail(j,
                        "layers {%d, %d}: grad_in= is missing (only the last part, with "
                        "labels, starts from the loss)",
                        s->first + 1, s->last + 1),
               NULL;
    }
    struct store_tensor *t = cmd_find(j, p->grad_in);
    if (t && (t->size != n || t->resident != n)) {
        cmd_fail(j, "grad_in '%s' has %" PRIu64 " elements, the output of layers {%d, %d} %zu",
                 p->grad_in, t->size, s->first + 1, s->last + 1, n);
        store_tensor_release(t);
        return NULL;
    }
    *held = t;
    return t ? t->data : NULL;
}

/* The elements of the flat tensor that layers first..last own: their
 * parameters, then their batch norms' running statistics (each a
 * contiguous run: layers are laid out in order, kernels/model.h). */
struct part_slices {
    size_t offset[2], count[2];
};

static int has_params(const struct model_layer *l)
{
    return l->kind == MODEL_LAYER_DENSE || l->kind == MODEL_LAYER_CONV ||
           l->kind == MODEL_LAYER_BATCHNORM;
}

static struct part_slices part_slices_of(const struct model_spec *s, int first, int last)
{
    size_t start[2] = {s->trainable_count, s->param_count}, end[2] = {0, 0};
    size_t next[2] = {s->trainable_count, s->param_count};
    for (int i = 0; i < s->layer_count; i++) {
        const struct model_layer *l = &s->layers[i];
        int bn = l->kind == MODEL_LAYER_BATCHNORM;
        if (!has_params(l)) continue;
        if (i > last) { /* where the part's run ends: the next owner's start */
            if (next[0] == s->trainable_count) next[0] = l->weight_offset;
            if (bn && next[1] == s->param_count) next[1] = l->stat_offset;
            continue;
        }
        if (i < first) continue;
        if (start[0] > l->weight_offset) start[0] = l->weight_offset;
        if (bn && start[1] > l->stat_offset) start[1] = l->stat_offset;
        end[0] = 1;
        end[1] |= (size_t)bn;
    }
    struct part_slices p = {{0, 0}, {0, 0}};
    for (int k = 0; k < 2; k++)
        if (end[k]) {
            p.offset[k] = start[k];
            p.count[k] = next[k] - start[k];
        }
    return p;
}

/* add=: the part's slices of scratch added into the existing tensor, in
 * place (the store's write lock only for the add, not the pass). */
static bool backward_add(struct command_job *j, const struct backward_params *p,
                         const struct part_slices *sl, const float *scratch, uint64_t n)
{
    struct store_patch patch;
    store_write_lock(j->store);
    bool ok = cmd_patch_begin(j, p->out, &patch);
    if (ok && (patch.t->size != n || patch.t->resident != n))
        ok = cmd_fail(j, "add: tensor '%s' has %" PRIu64 " elements, the model %" PRIu64, p->out,
                      patch.t->size, n);
    for (int k = 0; ok && k < 2; k++)
        for (size_t i = sl->offset[k]; i < sl->offset[k] + sl->count[k]; i++)
            patch.t->data[i] += scratch[i];
    if (patch.t) store_patch_end(j->store, &patch, ok);
    store_write_unlock(j->store);
    return ok;
}

/* backward{add}: the device scratch the pass writes the whole-model
 * gradient into (only the part's slices are then read), in the stash
 * model's context. */
static float *backward_scratch(struct command_job *j, struct ml_stash *s, size_t n)
{
    struct ml_state *ml = j->ml;
    struct kern_ctx *ctx = kern_model_ctx(s->m);
    if (ctx == ml->grad_ctx && n <= ml->grad_dscratch_cap) return ml->grad_dscratch;
    if (ml->grad_dscratch) kern_free(ml->grad_ctx, ml->grad_dscratch);
    ml->grad_dscratch = NULL;
    ml->grad_dscratch_cap = 0;
    ml->grad_ctx = ctx;
    if (kern_alloc(ctx, n, &ml->grad_dscratch, j->err, sizeof j->err) < 0) return NULL;
    ml->grad_dscratch_cap = n;
    return ml->grad_dscratch;
}

/* The part's slices of the device scratch added into the existing tensor:
 * read in place on the CPU (its device memory is host memory), through
 * the host scratch from a GPU. */
static bool backward_add_scratch(struct command_job *j, const struct backward_params *p,
                                 struct ml_stash *s, uint64_t n)
{
    struct ml_state *ml = j->ml;
    struct part_slices sl = part_slices_of(kern_model_layout(s->m), s->first, s->last);
    if (kern_ctx_device(ml->grad_ctx) == KERN_DEVICE_CPU)
        return backward_add(j, p, &sl, ml->grad_dscratch, n);
    if (!grow(j, (void **)&ml->grad_scratch, &ml->grad_scratch_cap, n, sizeof(float))) return false;
    for (int k = 0; k < 2; k++)
        if (sl.count[k] &&
            kern_download(ml->grad_ctx, ml->grad_scratch + sl.offset[k],
                          ml->grad_dscratch + sl.offset[k], sl.count[k], j->err, sizeof j->err) < 0)
            return false;
    return backward_add(j, p, &sl, ml->grad_scratch, n);
}

/* Where the pass writes the gradient: a new tensor's device elements,
 * zeroed (the part writes its slices only), or with add= the shared
 * device scratch. */
static float *backward_grad_target(struct command_job *j, const struct backward_params *p,
                                   struct ml_stash *s, uint64_t n, struct store_tensor **g)
{
    *g = NULL;
    if (p->add) return backward_scratch(j, s, n);
    if (!(*g = cmd_new_tensor(j, p->out, n, false))) return NULL;
    float *dg = devmirror_result(j->dev, *g, j->err, sizeof j->err);
    if (dg && kern_fill(kern_model_ctx(s->m), n, 0.0f, dg, j->err, sizeof j->err) < 0) dg = NULL;
    return dg;
}

/* The pass writes the part's slices of the gradient: into a new tensor,
 * zero elsewhere, or with add= into the shared scratch, whose slices are
 * then added to the existing tensor. */
static bool backward_pass(struct command_job *j, const struct backward_params *p,
                          const struct store_tensor *params, struct ml_stash *s)
{
    const struct model_spec *spec = kern_model_layout(s->m);
    size_t out_n = spec->layers[s->last].out_size * (size_t)s->batch;
    size_t in_n = spec->layers[s->first].in_size * (size_t)s->batch;
    if (s->first > 0 && !p->grad_out[0])
        return cmd_fail(j, "layers {%d, %d}: grad_out= is missing (the previous part needs it)",
                        s->first + 1, s->last + 1);
    struct store_tensor *held, *g = NULL, *dx = NULL;
    const float *dy = backward_dy(j, p, s, out_n, &held);
    const float *dparams = dy ? devmirror_read(j->dev, params, j->err, sizeof j->err) : NULL;
    float *dgrad = dparams ? backward_grad_target(j, p, s, params->size, &g) : NULL;
    bool ok = dgrad != NULL;
    if (ok && s->first > 0) ok = (dx = cmd_new_tensor(j, p->grad_out, in_n, false)) != NULL;
    ok = ok && kern_model_backward_range(s->m, dparams, s->first, s->last, s->x, dy, s->batch,
                                         dx ? dx->data : NULL, dgrad, j->err, sizeof j->err) == 0;
    if (ok && p->add) ok = backward_add_scratch(j, p, s, params->size);
    store_tensor_release(held);
    if (ok && g) ok = devmirror_publish(j->dev, j->store, g, j->err, sizeof j->err);
    store_tensor_release(g);
    if (!ok) {
        store_tensor_release(dx);
        return false;
    }
    s->live = false;
    cmd_result_u64(j, "batch", (uint64_t)s->batch);
    cmd_result_u64(j, "version", store_tensor_version(params));
    if (dx) publish(j, dx);
    return true;
}

static bool backward_run(struct command_job *j, const struct backward_params *p)
{
    const struct ml_model *m;
    int first, last;
    struct store_tensor *params = part_open(j, &p->part, &m, &first, &last);
    if (!params) return false;
    struct ml_stash *s = stash_find(j->ml, p->part.model, first, last, p->part.microbatch);
    bool ok =
        s && s->live
            ? backward_pass(j, p, params, s) && part_profile_time(j, m, first, last, true, s->batch)
            : cmd_fail(j,
                       "layers {%d, %d}: no forward of micro-batch %" PRId64 " to go back "
                       "through",
                       first + 1, last + 1, p->part.microbatch);
    store_tensor_release(params);
    return ok;
}

static const char *const keys_forward[] = {"model",  "layers",     "microbatch", "input", "out",
                                           "labels", "labels_out", "batch",      NULL};
static const char *const keys_backward[] = {"model",    "layers", "microbatch", "grad_in",
                                            "grad_out", "out",    "add",        NULL};
COMMAND_DEFINE(ml_cmd_forward, forward, COMMAND_WORKER, (parse, run));
COMMAND_DEFINE(ml_cmd_backward, backward, COMMAND_WORKER, (parse, run));
