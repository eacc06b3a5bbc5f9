/* commands_ml_buckets.c — compute/communication overlap on the peer: the buckets of
 * grad{bucket_mb} and the bucket{} command that waits for one
 * (docs/lua-api.md "Overlap: gradient buckets").
 *
 * The gradient itself is computed whole and published by the grad, so it
 * is the same to the bit as without buckets. What buckets change is time:
 * bucket k is ready at the grad's start + its ready share (kernels/
 * buckets.h: the forward pass, then the backward from the last layer down
 * to the bucket's first) x the step's emulated time (the worker's budget,
 * worker.h: a profiled grad's device time, else its CPU time, x dilation /
 * speed). The grad ends when its first bucket is ready, or when its real
 * computation does if that is later, and bucket{index = k} holds the
 * device (the worker) until bucket k is: the commands of a batch between
 * two bucket{}s (sends, a ring's waits and adds) run while the device is
 * still computing the next layers, as in PyTorch DDP. No bucket is ready
 * before the real gradient exists: by profile the real work is small
 * against the device's time; a gradient computed by kernel takes its CPU
 * time in real time, so its buckets overlap only under a dilation that
 * leaves room (dilation x the first bucket's share >= 1 hides everything;
 * at dilation 1 every bucket is ready when the grad ends). */
#include <stdio.h>
#include <time.h>

#include "kernels/device.h"
#include "kernels/profile.h"
#include "peer/command_job.h"
#include "peer/commands_ml.h"
#include "peer/commands_ml_internal.h"
#include "peer/server.h"
#include "peer/worker.h"

/* The profile's time per FLOP of every op kind (what the step's time is
 * made of), or NULL: FLOPs alone. */
static const double *bucket_weights(const struct command_job *j, const struct ml_model *m,
                                    double *out)
{
    const struct device_profile *prof = j->server->cfg.profile;
    if (!m->profiled || !prof) return NULL;
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        out[op] = 1.0 / profile_rate(prof, (enum zoo_op)op);
    return out;
}

double ml_thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The step's emulated time in real ms: the worker's budget for it. */
static double step_budget_ms(const struct command_job *j, double cpu_ms, double real_ms)
{
    const struct peer_config *cfg = &j->server->cfg;
    if (j->work.device_ms > 0) return cfg->dilation * j->work.device_ms / cfg->speed;
    struct worker_timing timing = {cfg->speed, cfg->dilation,
                                   kern_ctx_device(cfg->kern) == KERN_DEVICE_CPU};
    return worker_budget_ms(&timing, cpu_ms, real_ms);
}

bool ml_grad_buckets(struct command_job *j, const struct ml_model *m, uint64_t size,
                     double bucket_mb, double t0_ms, double cpu0_ms)
{
    struct ml_state *ml = j->ml;
    struct grad_bucket b[GRAD_BUCKETS_MAX];
    double weights[ZOO_OP_COUNT];
    int n = grad_buckets_plan(m->spec, size, grad_bucket_elements(bucket_mb),
                              bucket_weights(j, m, weights), b, j->err, sizeof j->err);
    if (n < 0) return false;
    const struct peer_config *cfg = &j->server->cfg;
    double now = command_now_ms();
    double step_ms = step_budget_ms(j, ml_thread_cpu_ms() - cpu0_ms, now - t0_ms);
    for (int k = 0; k < n; k++)
        ml->bucket_ready_ms[k] = t0_ms + step_ms * b[k].ready_share;
    ml->bucket_n = n;
    /* Ends at its first bucket, or at its real end; a grad that overran its
     * whole step keeps the worker's own verdict (an overrun). */
    if (now <= t0_ms + step_ms) {
        double end = now > ml->bucket_ready_ms[0] ? now : ml->bucket_ready_ms[0];
        j->work.device_ms = (end - t0_ms) * cfg->speed / cfg->dilation;
    }
    cmd_result_f64(j, "grad_ms", step_ms / cfg->dilation);
    cmd_result_u64(j, "buckets", (uint64_t)n);
    return true;
}

/* ---- bucket{index=} ---- */

struct bucket_params {
    int64_t index;
};

static bool bucket_parse(struct command_job *j, struct bucket_params *p, struct proto_args *a)
{
    (void)j;
    return cmd_arg_int(a, "index", true, 1, GRAD_BUCKETS_MAX, &p->index);
}

/* Holds the worker until the bucket is ready: the worker pads the job to
 * its budget (worker.h), asleep, as it does a profiled grad. The budget
 * runs from the job's start on the device (the grad's end), so a thread
 * that gets its core late still ends the job when the bucket is ready,
 * not that much later. */
static bool bucket_run(struct command_job *j, const struct bucket_params *p)
{
    const struct ml_state *ml = j->ml;
    if (p->index > ml->bucket_n)
        return cmd_fail(j,
                        "bucket %lld: the last grad had %d buckets (grad{bucket_mb=} makes them)",
                        (long long)p->index, ml->bucket_n);
    const struct peer_config *cfg = &j->server->cfg;
    double left_ms = ml->bucket_ready_ms[p->index - 1] - j->work.start_ms;
    if (left_ms > 0) j->work.device_ms = left_ms * cfg->speed / cfg->dilation;
    cmd_result_u64(j, "index", (uint64_t)p->index);
    return true;
}

static const char *const keys_bucket[] = {"index", NULL};

COMMAND_DEFINE(ml_cmd_bucket, bucket, COMMAND_WORKER, (parse, run));
