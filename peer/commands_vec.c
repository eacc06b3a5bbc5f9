/* commands_vec.c — the vector commands (tensor, copy, drop, axpy, scale,
 * sum, norm, dot, read): their typed params, parsing and work. axpy, scale, sum, norm and dot
 * compute on the peer's device through the device copies of devmirror.h; tensor, copy and read are
 * host work. Every command that writes a tensor returns the version it gave it, every one that
 * reads the version it read (store.h). */
#include "peer/commands_vec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/device.h"
#include "kernels/rng.h"
#include "kernels/vec.h"
#include "peer/command_job.h"
#include "peer/dataplane.h"
#include "peer/devmirror.h"

/* read{} answers at most this many values (docs/lua-api.md, `read`): bulk data never
 * crosses the control channel. */
#define COMMAND_READ_MAX 65536
/* The random stream of tensor{fill=}: one of its own, so that the same seed
 * in model{} or dataset{} draws other numbers. */
#define TENSOR_RNG_STREAM 0x74656e736f72ull /* "tensor" */

/* Each command's params (job->extra), which its handlers take typed. */
struct copy_params {
    char src[COMMAND_NAME_SIZE], dst[COMMAND_NAME_SIZE];
};
struct drop_params {
    struct cmd_names names;
};
struct axpy_params { /* y += alpha * x */
    char y[COMMAND_NAME_SIZE], x[COMMAND_NAME_SIZE];
    double alpha;
    struct cmd_range range;
};
struct scale_params { /* x *= alpha */
    char x[COMMAND_NAME_SIZE];
    double alpha;
    struct cmd_range range;
};
struct sum_params {
    char out[COMMAND_NAME_SIZE];
    struct cmd_names inputs;
};
struct norm_params {
    char x[COMMAND_NAME_SIZE];
    struct cmd_range range;
};
struct dot_params {
    char x[COMMAND_NAME_SIZE], y[COMMAND_NAME_SIZE];
    struct cmd_range range;
};
struct read_params {
    char tensor[COMMAND_NAME_SIZE];
    struct cmd_range range;
};

/* Spans of two operands: the same range of both, or both whole when their
 * sizes match. key_a/key_b name the params in the error. */
static bool job_span2(struct command_job *j, const struct cmd_range *r, const char *key_a,
                      const struct store_tensor *a, const char *key_b, const struct store_tensor *b,
                      float **pa, float **pb, uint64_t *n)
{
    if (!r->set && a->size != b->size)
        return cmd_fail(j, "size mismatch: %s has %" PRIu64 " elements, %s has %" PRIu64, key_a,
                        a->size, key_b, b->size);
    uint64_t offset, count;
    if (!cmd_range_of(j, r, a, &offset, &count) || !cmd_range_of(j, r, b, &offset, &count))
        return false;
    /* Past either operand's resident prefix one of them is the pattern (zero):
     * nothing to compute there. */
    uint64_t n_a = store_resident_span(a, offset, count),
             n_b = store_resident_span(b, offset, count);
    *n = n_a < n_b ? n_a : n_b;
    *pa = a->data + (offset < a->resident ? offset : a->resident);
    *pb = b->data + (offset < b->resident ? offset : b->resident);
    store_count_skipped(j->store, count - *n);
    return true;
}

/* ---- tensor ---- */

enum tensor_fill { FILL_CONSTANT, FILL_UNIFORM, FILL_NORMAL };

struct tensor_params {
    char name[COMMAND_NAME_SIZE];
    uint64_t size, resident; /* resident < size: a virtual tensor (store.h) */
    enum tensor_fill fill;
    double value, low, high, mean, std;
    int64_t seed;
};

/* fill = number | "uniform" | "normal". */
static bool tensor_parse_fill(struct tensor_params *p, struct proto_args *a)
{
    const msgpack_object *o = proto_args_get(a, "fill");
    if (!o || o->type != MSGPACK_OBJECT_STR) return cmd_arg_float(a, "fill", false, 0.0, &p->value);
    uint32_t len = o->via.str.size;
    const char *s = o->via.str.ptr;
    if (len == 7 && memcmp(s, "uniform", 7) == 0)
        p->fill = FILL_UNIFORM;
    else if (len == 6 && memcmp(s, "normal", 6) == 0)
        p->fill = FILL_NORMAL;
    else
        return cmd_arg_fail(a,
                            "param 'fill': expected number, got string '%.*s' (or \"uniform\", "
                            "\"normal\")",
                            (int)(len < 32 ? len : 32), s);
    return true;
}

/* low/high belong to uniform, mean/std to normal, seed to both. */
static bool tensor_parse_distribution(struct tensor_params *p, struct proto_args *a)
{
    static const char *const uniform_keys[] = {"low", "high"}, *const normal_keys[] = {"mean",
                                                                                       "std"};
    for (int i = 0; i < 2; i++) {
        if (p->fill != FILL_UNIFORM && proto_args_get(a, uniform_keys[i]))
            return cmd_arg_fail(a, "param '%s' goes with fill = \"uniform\" only", uniform_keys[i]);
        if (p->fill != FILL_NORMAL && proto_args_get(a, normal_keys[i]))
            return cmd_arg_fail(a, "param '%s' goes with fill = \"normal\" only", normal_keys[i]);
    }
    if (p->fill == FILL_CONSTANT && proto_args_get(a, "seed"))
        return cmd_arg_fail(a, "param 'seed' goes with fill = \"uniform\" or \"normal\" only");
    p->high = p->std = 1.0;
    p->seed = 1;
    if (!cmd_arg_float(a, "low", false, 0.0, &p->low) ||
        !cmd_arg_float(a, "high", false, 1.0, &p->high) ||
        !cmd_arg_float(a, "mean", false, 0.0, &p->mean) ||
        !cmd_arg_float(a, "std", false, 1.0, &p->std) ||
        !cmd_arg_int(a, "seed", false, 0, INT64_MAX, &p->seed))
        return false;
    if (!(p->low <= p->high) || !isfinite(p->high - p->low))
        return cmd_arg_fail(a, "params 'low' %g and 'high' %g: need low <= high, both finite",
                            p->low, p->high);
    if (!(p->std >= 0) || !isfinite(p->std) || !isfinite(p->mean))
        return cmd_arg_fail(a, "param 'std': %g is not a finite number >= 0", p->std);
    return true;
}

static bool tensor_parse(struct command_job *j, struct tensor_params *p, struct proto_args *a)
{
    int64_t size;
    if (!cmd_arg_required_name(a, "name", p->name)) return false;
    int got = proto_arg_i64(a, "size", &size);
    if (got == 0) return proto_args_missing(a, "size");
    if (got < 0) return false;
    if (size < 0 || (uint64_t)size > STORE_MAX_ELEMENTS)
        return cmd_arg_fail(a, "param 'size': %" PRId64 " is not between 0 and %" PRIu64, size,
                            STORE_MAX_ELEMENTS);
    p->size = (uint64_t)size;
    int64_t resident = size;
    if (!cmd_arg_int(a, "resident", false, 0, size, &resident)) return false;
    p->resident = (uint64_t)resident;
    return tensor_parse_fill(p, a) && tensor_parse_distribution(p, a);
}

/* Seeded draws in element order: the same seed gives the same tensor on
 * every peer and machine (kernels/rng.h). */
static void tensor_fill_random(const struct tensor_params *p, float *x, uint64_t n)
{
    struct rng r;
    rng_seed(&r, (uint64_t)p->seed, TENSOR_RNG_STREAM);
    if (p->fill == FILL_UNIFORM) {
        double width = p->high - p->low;
        for (uint64_t i = 0; i < n; i++)
            x[i] = (float)(p->low + width * rng_uniform(&r));
    } else {
        for (uint64_t i = 0; i < n; i++)
            x[i] = (float)(p->mean + p->std * rng_normal(&r));
    }
}

static bool tensor_run(struct command_job *j, const struct tensor_params *p)
{
    bool zeroed = p->fill == FILL_CONSTANT && p->value == 0.0; /* calloc: pages zeroed lazily */
    struct store_tensor *t = cmd_new_virtual_tensor(j, p->name, p->size, p->resident, zeroed);
    if (!t) return false;
    if (p->fill != FILL_CONSTANT)
        tensor_fill_random(p, t->data, t->resident);
    else if (!zeroed)
        vec_fill(t->resident, (float)p->value, t->data);
    cmd_result_u64(j, "version", store_publish(j->store, t));
    cmd_result_u64(j, "size", t->size);
    store_tensor_release(t);
    return true;
}

/* ---- copy, drop ---- */

static bool copy_run(struct command_job *j, const struct copy_params *p)
{
    struct store_tensor *src = cmd_find(j, p->src);
    struct store_tensor *dst =
        src ? cmd_new_virtual_tensor(j, p->dst, src->size, src->resident, false) : NULL;
    if (dst) {
        vec_copy(src->resident, src->data, dst->data);
        cmd_result_u64(j, "version", store_publish(j->store, dst));
        cmd_result_u64(j, "size", dst->size);
    }
    store_tensor_release(dst);
    store_tensor_release(src);
    return dst != NULL;
}

/* Dropping a name also discards its pending arrivals (store.h). */
static bool drop_run(struct command_job *j, const struct drop_params *p)
{
    uint64_t dropped = 0;
    for (uint32_t i = 0; i < p->names.n; i++) {
        int rc = store_drop(j->store, p->names.v[i]);
        if (rc < 0) return cmd_fail(j, "out of memory dropping '%s'", p->names.v[i]);
        dropped += (uint64_t)rc;
        devmirror_forget(j->dev, p->names.v[i]);
    }
    cmd_result_u64(j, "dropped", dropped);
    return true;
}
/* ---- vector kernels on the peer's device (host memory on the cpu) ---- */

static struct kern_ctx *job_ctx(struct command_job *j)
{
    return devmirror_ctx(j->dev);
}

/* y[oy, oy + n) += alpha * x[ox, ox + n); y is patched, x may be y. */
static bool axpy_device(struct command_job *j, double alpha, const struct store_patch *y,
                        const struct store_tensor *x, uint64_t oy, uint64_t ox, uint64_t n)
{
    float *dy = devmirror_patch(j->dev, y, j->err, sizeof j->err);
    const float *dx = dy ? devmirror_read(j->dev, x, j->err, sizeof j->err) : NULL;
    return dx &&
           kern_axpy(job_ctx(j), n, (float)alpha, dx + ox, dy + oy, j->err, sizeof j->err) == 0;
}

static bool scale_device(struct command_job *j, double alpha, const struct store_patch *x,
                         uint64_t offset, uint64_t n)
{
    float *dx = devmirror_patch(j->dev, x, j->err, sizeof j->err);
    return dx && kern_scale(job_ctx(j), n, (float)alpha, dx + offset, j->err, sizeof j->err) == 0;
}

/* x . y over n elements from offset; y NULL: the norm of x. */
static bool dot_device(struct command_job *j, const struct store_tensor *x,
                       const struct store_tensor *y, uint64_t offset, uint64_t n, double *out)
{
    const float *dx = devmirror_read(j->dev, x, j->err, sizeof j->err);
    const float *dy = dx && y && y != x ? devmirror_read(j->dev, y, j->err, sizeof j->err) : dx;
    if (!dy) return false;
    if (!y) return kern_norm(job_ctx(j), n, dx + offset, out, j->err, sizeof j->err) == 0;
    return kern_dot(job_ctx(j), n, dx + offset, dy + offset, out, j->err, sizeof j->err) == 0;
}

/* The tensor called name, or `same` (held again) when that is the tensor
 * of the same name already looked up by this command: two lookups could
 * return two tensors if a receive replaced it in between, and device copies
 * are kept per name. */
static struct store_tensor *cmd_find_or_same(struct command_job *j, const char *name,
                                             struct store_tensor *same)
{
    if (same && strcmp(same->name, name) == 0) {
        store_tensor_hold(same);
        return same;
    }
    return cmd_find(j, name);
}

/* axpy and scale write in place through a patch (store.h): a tensor a send
 * still holds is copied first, so the transfer keeps its snapshot. The patch
 * is taken before x, which may be the same tensor. */

/* ---- the other vector commands ---- */

static bool axpy_run(struct command_job *j, const struct axpy_params *p)
{
    struct store_patch y;
    store_write_lock(j->store);
    bool ok = cmd_patch_begin(j, p->y, &y);
    struct store_tensor *x = ok ? cmd_find_or_same(j, p->x, y.t) : NULL;
    float *py = NULL, *px;
    uint64_t n = 0;
    ok = x && job_span2(j, &p->range, "y", y.t, "x", x, &py, &px, &n) &&
         axpy_device(j, p->alpha, &y, x, (uint64_t)(py - y.t->data), (uint64_t)(px - x->data), n);
    if (ok) cmd_charge_virtual(j, y.t, p->range.set ? p->range.count : y.t->size);
    store_tensor_release(x);
    if (y.t)
        ok = devmirror_patch_end(j->dev, j->store, &y, ok, py ? (uint64_t)(py - y.t->data) : 0, n,
                                 j->err, sizeof j->err);
    store_write_unlock(j->store);
    if (ok) cmd_result_u64(j, "version", y.version);
    return ok;
}

static bool scale_run(struct command_job *j, const struct scale_params *p)
{
    struct store_patch x;
    store_write_lock(j->store);
    float *px = NULL;
    uint64_t n = 0;
    bool ok = cmd_patch_begin(j, p->x, &x) && cmd_span(j, &p->range, x.t, &px, &n) &&
              scale_device(j, p->alpha, &x, (uint64_t)(px - x.t->data), n);
    if (ok) cmd_charge_virtual(j, x.t, p->range.set ? p->range.count : x.t->size);
    if (x.t)
        ok = devmirror_patch_end(j->dev, j->store, &x, ok, px ? (uint64_t)(px - x.t->data) : 0, n,
                                 j->err, sizeof j->err);
    store_write_unlock(j->store);
    if (ok) cmd_result_u64(j, "version", x.version);
    return ok;
}

static bool norm_run(struct command_job *j, const struct norm_params *p)
{
    struct store_tensor *x = cmd_find(j, p->x);
    float *px;
    uint64_t n;
    double value;
    bool ok = x && cmd_span(j, &p->range, x, &px, &n) &&
              dot_device(j, x, NULL, (uint64_t)(px - x->data), n, &value);
    if (ok) cmd_result_f64(j, "value", value);
    if (ok) cmd_result_u64(j, "version", store_tensor_version(x));
    if (ok) cmd_result_u64(j, "size", x->size); /* how algorithms learn a tensor's size */
    store_tensor_release(x);
    return ok;
}

static bool dot_run(struct command_job *j, const struct dot_params *p)
{
    struct store_tensor *x = cmd_find(j, p->x);
    struct store_tensor *y = x ? cmd_find_or_same(j, p->y, x) : NULL;
    float *px, *py;
    uint64_t n;
    double value;
    bool ok = y && job_span2(j, &p->range, "x", x, "y", y, &px, &py, &n) &&
              dot_device(j, x, y, (uint64_t)(px - x->data), n, &value);
    if (ok) cmd_result_f64(j, "value", value);
    if (ok) cmd_result_u64(j, "version", store_tensor_version(x));
    store_tensor_release(y);
    store_tensor_release(x);
    return ok;
}

/* Finds input i of sum (an input named twice is the same tensor) and checks
 * that its size matches input 0. */
static bool sum_find_input(struct command_job *j, const struct cmd_names *names,
                           struct store_tensor **in, uint32_t i)
{
    in[i] = NULL;
    for (uint32_t k = 0; k < i && !in[i]; k++)
        if (strcmp(names->v[k], names->v[i]) == 0) in[i] = cmd_find_or_same(j, names->v[i], in[k]);
    if (!in[i]) in[i] = cmd_find(j, names->v[i]);
    if (!in[i]) return false;
    if (i > 0 && in[i]->size != in[0]->size)
        return cmd_fail(j, "size mismatch: input '%s' has %" PRIu64 " elements, '%s' has %" PRIu64,
                        in[i]->name, in[i]->size, in[0]->name, in[0]->size);
    return true;
}

/* The resident prefix of a sum: the shortest of its inputs' (past it one of
 * them is the pattern and the sum is not computed); the rest is counted as
 * skipped, once per input. */
static uint64_t sum_resident(struct command_job *j, struct store_tensor *const *in, uint32_t n_in)
{
    uint64_t resident = in[0]->resident;
    for (uint32_t i = 1; i < n_in; i++)
        if (in[i]->resident < resident) resident = in[i]->resident;
    store_count_skipped(j->store, (uint64_t)n_in * (in[0]->size - resident));
    return resident;
}

/* The output goes to a new tensor that replaces `out` only when complete, so
 * out may be one of the inputs and nobody holding the old one sees it change. */
static bool sum_run(struct command_job *j, const struct sum_params *p)
{
    uint32_t n_in = p->inputs.n;
    struct store_tensor **in = calloc(n_in, sizeof *in);
    const float **data = calloc(n_in, sizeof *data);
    bool ok = in && data;
    if (!ok) cmd_fail(j, "out of memory");
    for (uint32_t i = 0; ok && i < n_in; i++) {
        ok = sum_find_input(j, &p->inputs, in, i) &&
             (data[i] = devmirror_read(j->dev, in[i], j->err, sizeof j->err)) != NULL;
    }
    uint64_t resident = ok ? sum_resident(j, in, n_in) : 0;
    struct store_tensor *out =
        ok ? cmd_new_virtual_tensor(j, p->out, in[0]->size, resident, false) : NULL;
    float *dout = out ? devmirror_result(j->dev, out, j->err, sizeof j->err) : NULL;
    ok = dout && kern_sum(job_ctx(j), resident, dout, data, n_in, j->err, sizeof j->err) == 0 &&
         devmirror_publish(j->dev, j->store, out, j->err, sizeof j->err);
    if (ok) cmd_charge_virtual(j, out, (uint64_t)n_in * out->size);
    if (ok) cmd_result_u64(j, "size", out->size);
    if (ok) cmd_result_u64(j, "version", store_tensor_version(out));
    store_tensor_release(out);
    for (uint32_t i = 0; in && i < n_in; i++)
        store_tensor_release(in[i]);
    free(in);
    free(data);
    return ok;
}

static bool read_run(struct command_job *j, const struct read_params *rp)
{
    struct store_tensor *t = cmd_find(j, rp->tensor);
    uint64_t offset, n;
    bool ok = t && cmd_range_of(j, &rp->range, t, &offset, &n);
    if (ok && n > COMMAND_READ_MAX)
        ok = cmd_fail(j,
                      "tensor '%s' has %" PRIu64 " elements, more than the %d one read may return;"
                      " pass a range",
                      t->name, n, COMMAND_READ_MAX);
    if (ok) {
        cmd_result_key(j, "values");
        msgpack_pack_array(&j->result.pk, (size_t)n);
        for (uint64_t i = offset; i < offset + n; i++)
            msgpack_pack_float(&j->result.pk, i < t->resident ? t->data[i] : STORE_VIRTUAL_PATTERN);
        cmd_result_u64(j, "version", store_tensor_version(t));
    }
    store_tensor_release(t);
    return ok;
}

/* ---- parse(): params into the job, on the loop thread ---- */

static bool copy_parse(struct command_job *j, struct copy_params *p, struct proto_args *a)
{
    return cmd_arg_required_name(a, "src", p->src) && cmd_arg_required_name(a, "dst", p->dst);
}

static bool drop_parse(struct command_job *j, struct drop_params *p, struct proto_args *a)
{
    char name[COMMAND_NAME_SIZE];
    int got_name = cmd_arg_name(a, "name", name);
    if (got_name < 0) return false;
    int got_names = cmd_arg_name_list(a, "names", &p->names);
    if (got_names < 0) return false;
    if (got_name == 0 && got_names == 0) return cmd_arg_fail(a, "param 'name' or 'names': missing");
    if (got_name == 1) {
        void *names = realloc(p->names.v, ((size_t)p->names.n + 1) * sizeof *p->names.v);
        if (!names) return cmd_arg_fail(a, "out of memory");
        p->names.v = names;
        memcpy(p->names.v[p->names.n++], name, sizeof name);
    }
    return true;
}

static bool axpy_parse(struct command_job *j, struct axpy_params *p, struct proto_args *a)
{
    return cmd_arg_required_name(a, "y", p->y) && cmd_arg_required_name(a, "x", p->x) &&
           cmd_arg_float(a, "alpha", false, 1.0, &p->alpha) && cmd_arg_range(a, &p->range);
}

static bool scale_parse(struct command_job *j, struct scale_params *p, struct proto_args *a)
{
    return cmd_arg_required_name(a, "x", p->x) && cmd_arg_float(a, "alpha", true, 0.0, &p->alpha) &&
           cmd_arg_range(a, &p->range);
}

static bool sum_parse(struct command_job *j, struct sum_params *p, struct proto_args *a)
{
    if (!cmd_arg_required_name(a, "out", p->out)) return false;
    int got = cmd_arg_name_list(a, "inputs", &p->inputs);
    if (got == 0) return proto_args_missing(a, "inputs");
    if (got == 1 && p->inputs.n == 0) return cmd_arg_fail(a, "param 'inputs': empty");
    return got == 1;
}

static bool norm_parse(struct command_job *j, struct norm_params *p, struct proto_args *a)
{
    return cmd_arg_required_name(a, "x", p->x) && cmd_arg_range(a, &p->range);
}

static bool dot_parse(struct command_job *j, struct dot_params *p, struct proto_args *a)
{
    return cmd_arg_required_name(a, "x", p->x) && cmd_arg_required_name(a, "y", p->y) &&
           cmd_arg_range(a, &p->range);
}

static bool read_parse(struct command_job *j, struct read_params *p, struct proto_args *a)
{
    if (!cmd_arg_required_name(a, "tensor", p->tensor) || !cmd_arg_range(a, &p->range))
        return false;
    if (p->range.set && p->range.count > COMMAND_READ_MAX)
        return cmd_arg_fail(
            a, "param 'range': %" PRIu64 " values, more than the %d one read may return",
            p->range.count, COMMAND_READ_MAX);
    return true;
}

static void drop_cleanup(struct drop_params *p)
{
    free(p->names.v);
}

static void sum_cleanup(struct sum_params *p)
{
    free(p->inputs.v);
}

/* ---- table entries ---- */

/* ---- brief: which run on the loop thread (command_job.h cmd_brief_pass) ---- */

/* A constant fill is one pass; random draws cost many times that. */
static bool tensor_brief(struct command_job *j, const struct tensor_params *p)
{
    return p->fill == FILL_CONSTANT && cmd_brief_elements(p->resident, 1);
}

static bool copy_brief(struct command_job *j, const struct copy_params *p)
{
    return cmd_brief_pass(j, p->src, NULL, 2);
}

static bool drop_brief(struct command_job *j, const struct drop_params *p)
{
    return true; /* names out of a map: no pass over elements */
}

static bool axpy_brief(struct command_job *j, const struct axpy_params *p)
{
    return cmd_brief_pass(j, p->x, &p->range, 3);
}

static bool scale_brief(struct command_job *j, const struct scale_params *p)
{
    return cmd_brief_pass(j, p->x, &p->range, 2);
}

static bool norm_brief(struct command_job *j, const struct norm_params *p)
{
    return cmd_brief_pass(j, p->x, &p->range, 1);
}

static bool dot_brief(struct command_job *j, const struct dot_params *p)
{
    return cmd_brief_pass(j, p->x, &p->range, 2);
}

static const char *const keys_tensor[] = {"name", "size", "resident", "fill", "low",
                                          "high", "mean", "std",      "seed", NULL};
static const char *const keys_copy[] = {"src", "dst", NULL};
static const char *const keys_drop[] = {"name", "names", NULL};
static const char *const keys_axpy[] = {"y", "x", "alpha", "range", NULL};
static const char *const keys_scale[] = {"x", "alpha", "range", NULL};
static const char *const keys_sum[] = {"out", "inputs", NULL};
static const char *const keys_norm[] = {"x", "range", NULL};
static const char *const keys_dot[] = {"x", "y", "range", NULL};
static const char *const keys_read[] = {"tensor", "range", NULL};

COMMAND_DEFINE(vec_cmd_tensor, tensor, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(vec_cmd_copy, copy, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(vec_cmd_drop, drop, COMMAND_WORKER, (parse, run, cleanup, brief));
COMMAND_DEFINE(vec_cmd_axpy, axpy, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(vec_cmd_scale, scale, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(vec_cmd_sum, sum, COMMAND_WORKER, (parse, run, cleanup));
COMMAND_DEFINE(vec_cmd_norm, norm, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(vec_cmd_dot, dot, COMMAND_WORKER, (parse, run, brief));
COMMAND_DEFINE(vec_cmd_read, read, COMMAND_WORKER, (parse, run));
