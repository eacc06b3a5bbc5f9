/* commands_ml_eval.c — eval{} (see commands_ml.h): in the foreground on the worker and the
 * peer's device; with background = true the worker only takes the snapshot
 * (a reference to the parameter tensor, which copy-on-write protects, and to
 * the split's data) in order with compute, and the evaluation runs on the
 * peer's background thread (worker.h, idle priority) with a CPU model and
 * scratch of its own (struct ml_background), so compute queued after it
 * never waits for it. On a cuda peer the background path computes on the
 * host CPU: the parameters are host tensors (write-through, devmirror.h). */
#include "common/container.h"
#include "peer/commands_ml.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dataset.h"
#include "kernels/device.h"
#include "peer/command_job.h"
#include "peer/devmirror.h"
#include "peer/commands_ml_internal.h"

#define ML_EVAL_CHUNK 1024 /* samples per dataset_read of eval */
#define ML_SPEC_SIZE 256

/* The background thread's own: a CPU context, the model of the last spec it
 * evaluated (its workspace is per model, so never the worker's) and scratch. */
struct ml_background {
    struct kern_ctx *ctx;
    struct kern_model *model;
    char spec[ML_SPEC_SIZE];
    float *x;
    int32_t *y;
    size_t x_cap, y_cap;
};

static struct ml_background *ml_background_create(char *err, size_t errlen)
{
    struct ml_background *bg = calloc(1, sizeof *bg);
    if (!bg) return snprintf(err, errlen, "out of memory"), NULL;
    if (kern_ctx_create(KERN_DEVICE_CPU, &bg->ctx, err, errlen) != 0) {
        free(bg);
        return NULL;
    }
    return bg;
}

static void ml_background_destroy(void *state)
{
    struct ml_background *bg = state;
    if (!bg) return;
    kern_model_destroy(bg->model);
    kern_ctx_destroy(bg->ctx);
    free(bg->x);
    free(bg->y);
    free(bg);
}

/* The server keeps the background evaluator as this module's state. */
static const struct peer_module background_eval_module = {
    .name = "background eval",
    .destroy = ml_background_destroy,
};

struct eval_params {
    char model[COMMAND_NAME_SIZE], split[ML_SPLIT_SIZE];
    int64_t limit;
    bool background;
    /* The background snapshot, taken on the worker. */
    struct worker_job bg;
    struct ml_background *evaluator; /* the server's, for the background thread */
    struct command_job *job;
    struct store_tensor *params;
    struct ml_data *data;
    char spec[ML_SPEC_SIZE];
    size_t samples;
};

static bool eval_parse(struct command_job *j, struct eval_params *p, struct proto_args *a)
{
    strcpy(p->split, "test");
    p->job = j;
    return cmd_arg_required_name(a, "model", p->model) &&
           cmd_arg_text(a, "split", false, p->split, sizeof p->split) &&
           cmd_arg_int(a, "limit", false, 0, INT64_MAX, &p->limit) &&
           cmd_arg_bool(a, "background", &p->background);
}

/* Evaluates `limit` samples of ds in chunks through x/y scratch. */
static bool eval_samples(struct command_job *j, struct kern_model *model, struct dataset *ds,
                         const float *params, size_t limit, float **x, size_t *x_cap, int32_t **y,
                         size_t *y_cap, struct model_score *score)
{
    if (!ml_reserve(j, ML_EVAL_CHUNK, dataset_dim(ds), x, x_cap, y, y_cap)) return false;
    for (size_t first = 0; first < limit; first += ML_EVAL_CHUNK) {
        size_t n = limit - first < ML_EVAL_CHUNK ? limit - first : ML_EVAL_CHUNK;
        if (dataset_read(ds, first, n, *x, *y, j->err, sizeof j->err) != 0 ||
            kern_model_eval(model, params, *x, *y, n, score, j->err, sizeof j->err) != 0)
            return false;
    }
    return true;
}

static void eval_result(struct command_job *j, const struct model_score *score, uint64_t version)
{
    cmd_result_f64(j, "accuracy", model_score_accuracy(score));
    cmd_result_f64(j, "loss", model_score_loss(score));
    cmd_result_u64(j, "samples", score->samples);
    cmd_result_u64(j, "version", version);
}

/* The foreground evaluation, on the worker's device. */
static bool eval_now(struct command_job *j, struct ml_model *m, struct dataset *ds,
                     struct store_tensor *params, size_t limit)
{
    struct ml_state *ml = j->ml;
    struct model_score score = {0};
    const float *dparams = devmirror_read(j->dev, params, j->err, sizeof j->err);
    if (!dparams || !eval_samples(j, m->model, ds, dparams, limit, &ml->x, &ml->x_cap, &ml->y,
                                  &ml->y_cap, &score))
        return false;
    eval_result(j, &score, store_tensor_version(params));
    return true;
}

static bool eval_run(struct command_job *j, struct eval_params *p)
{
    struct ml_model *m = ml_model_find(j, p->model);
    if (m && !m->model)
        return cmd_fail(j,
                        "model '%s' (%s) is timing only: nothing learns (give learn = a real "
                        "model)",
                        p->model, m->spec);
    struct ml_data *data = m ? ml_split_find(j, p->split) : NULL;
    struct store_tensor *params =
        data && ml_check_shapes(j, m, data->ds, p->split) ? ml_params_find(j, m) : NULL;
    if (!params) return false;
    size_t limit = dataset_size(data->ds);
    if (p->limit > 0 && (uint64_t)p->limit < limit) limit = (size_t)p->limit;
    if (!p->background) {
        bool ok = eval_now(j, m, data->ds, params, limit);
        store_tensor_release(params);
        return ok;
    }
    p->params = params; /* the snapshot: held, so patches copy on write */
    p->data = data;
    ml_data_hold(data);
    snprintf(p->spec, sizeof p->spec, "%s", kern_model_spec(m->model));
    p->samples = limit;
    return true;
}

/* ---- the background part ---- */

/* The background thread's model for spec, created when it changes. */
static struct kern_model *eval_bg_model(struct command_job *j, struct ml_background *bg,
                                        const char *spec)
{
    if (bg->model && strcmp(bg->spec, spec) == 0) return bg->model;
    kern_model_destroy(bg->model);
    bg->model = NULL;
    if (kern_model_create(bg->ctx, spec, 0, &bg->model, j->err, sizeof j->err) != 0) return NULL;
    snprintf(bg->spec, sizeof bg->spec, "%s", spec);
    return bg->model;
}

/* On the background thread, which alone uses the evaluator. */
static void eval_bg_run(struct worker_job *work)
{
    struct eval_params *p = container_of(work, struct eval_params, bg);
    struct command_job *j = p->job;
    struct ml_background *bg = p->evaluator;
    struct kern_model *model = eval_bg_model(j, bg, p->spec);
    struct model_score score = {0};
    if (model && eval_samples(j, model, p->data->ds, p->params->data, p->samples, &bg->x,
                              &bg->x_cap, &bg->y, &bg->y_cap, &score))
        eval_result(j, &score, store_tensor_version(p->params));
}

static void eval_bg_done(struct worker_job *work, bool cancelled)
{
    struct eval_params *p = container_of(work, struct eval_params, bg);
    struct command_job *j = p->job;
    if (cancelled) {
        command_job_cancel(j);
        return;
    }
    /* Its own thread's times: the worker's totals never see them. */
    j->work.queue_ms += j->work.wall_ms + work->queue_ms;
    j->work.wall_ms = work->wall_ms;
    j->work.cpu_ms = work->cpu_ms;
    command_job_finish(j);
}

/* Loop thread: the server's evaluator, made with the first background eval;
 * NULL with j->err set on failure. */
static struct ml_background *eval_background_of(struct command_job *j)
{
    struct peer_server *s = j->server;
    struct ml_background *bg = peer_server_state(s, &background_eval_module);
    if (bg) return bg;
    bg = ml_background_create(j->err, sizeof j->err);
    if (bg && !peer_server_keep(s, &background_eval_module, bg)) {
        ml_background_destroy(bg);
        return cmd_fail(j, "no room for the background evaluator"), NULL;
    }
    return bg;
}

/* In the background the worker's part is the snapshot, by reference. */
static bool eval_brief(struct command_job *j, const struct eval_params *p)
{
    return p->background;
}

/* Loop thread: the snapshot goes to the background thread (started with the
 * first background eval). */
static bool eval_after(struct command_job *j, struct eval_params *p)
{
    struct peer_server *s = j->server;
    if (!p->background) return false;
    p->evaluator = eval_background_of(j);
    if (p->evaluator && !s->background) {
        s->background = worker_create_background(s->loop);
        if (!s->background) cmd_fail(j, "cannot start the background thread");
    }
    if (!p->evaluator || !s->background) return false;
    p->bg.run = eval_bg_run;
    p->bg.done = eval_bg_done;
    worker_submit(s->background, &p->bg);
    return true;
}

static void eval_cleanup(struct eval_params *p)
{
    store_tensor_release(p->params);
    ml_data_release(p->data);
}

static const char *const keys_eval[] = {"model", "split", "limit", "background", NULL};

COMMAND_DEFINE(ml_cmd_eval, eval, COMMAND_WORKER, (parse, run, after, cleanup, brief));
