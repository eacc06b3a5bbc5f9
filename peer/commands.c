/* commands.c — the peer's control commands (see commands.h): the command
 * table, dispatch and replies, the helpers of command_job.h, and the vector
 * commands (tensor, copy, drop, axpy, scale, sum, norm, dot, read, stats).
 * axpy, scale, sum, norm and dot compute on the peer's device through the
 * device copies of devmirror.h; tensor, copy and read are host work.
 * The learning commands are in ml.c, send and peers in commands_data.c. */
#include "peer/commands.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/device.h"
#include "kernels/vec.h"
#include "peer/command_job.h"
#include "peer/commands_data.h"
#include "peer/dataplane.h"
#include "peer/devmirror.h"
#include "peer/ml.h"

/* read{} answers at most this many values (DESIGN.md): bulk data never
 * crosses the control channel. */
#define COMMAND_READ_MAX 65536
/* Bytes of a client-supplied method or key name quoted in an error. */
#define COMMAND_QUOTE_MAX 64

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

double command_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- helpers for run() on the worker ---- */

bool cmd_fail(struct command_job *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    va_end(ap);
    return false;
}

void cmd_result_u64(struct command_job *j, const char *key, uint64_t value)
{
    proto_pack_kv_i64(&j->pk, key, (int64_t)value);
    j->n_entries++;
}

void cmd_result_f64(struct command_job *j, const char *key, double value)
{
    proto_pack_kv_f64(&j->pk, key, value);
    j->n_entries++;
}

void cmd_result_str(struct command_job *j, const char *key, const char *value)
{
    proto_pack_kv_str(&j->pk, key, value);
    j->n_entries++;
}

struct store_tensor *cmd_find(struct command_job *j, const char *name)
{
    struct store_tensor *t = store_find(j->store, name);
    if (!t) cmd_fail(j, "tensor '%s' not found", name);
    return t;
}

struct store_tensor *cmd_new_tensor(struct command_job *j, const char *name, uint64_t size,
                                    bool zeroed)
{
    struct store_tensor *t = store_tensor_new(name, size, zeroed);
    if (!t)
        cmd_fail(j, "out of memory for %" PRIu64 " elements of '%s' (%" PRIu64 " bytes)", size,
                 name, size * (uint64_t)sizeof(float));
    return t;
}

bool cmd_span(struct command_job *j, const struct store_tensor *t, float **start, uint64_t *n)
{
    if (!j->has_range) {
        *start = t->data;
        *n = t->size;
        return true;
    }
    if (j->range_offset > t->size || j->range_count > t->size - j->range_offset)
        return cmd_fail(
            j, "range {%" PRIu64 ", %" PRIu64 "} out of bounds for '%s' (%" PRIu64 " elements)",
            j->range_offset, j->range_count, t->name, t->size);
    *start = t->data + j->range_offset;
    *n = j->range_count;
    return true;
}

/* Spans of two operands: the same range of both, or both whole when their
 * sizes match. key_a/key_b name the params in the error. */
static bool job_span2(struct command_job *j, const char *key_a, const struct store_tensor *a,
                      const char *key_b, const struct store_tensor *b, float **pa, float **pb,
                      uint64_t *n)
{
    if (!j->has_range && a->size != b->size)
        return cmd_fail(j, "size mismatch: %s has %" PRIu64 " elements, %s has %" PRIu64, key_a,
                        a->size, key_b, b->size);
    uint64_t n_b;
    return cmd_span(j, a, pa, n) && cmd_span(j, b, pb, &n_b);
}

/* ---- run(): the commands, on the worker ---- */

static bool tensor_run(struct command_job *j)
{
    bool zeroed = j->number == 0.0; /* calloc: the kernel zeroes pages lazily */
    struct store_tensor *t = cmd_new_tensor(j, j->x, j->count, zeroed);
    if (!t) return false;
    if (!zeroed) vec_fill(t->size, (float)j->number, t->data);
    store_publish(j->store, t);
    cmd_result_u64(j, "size", t->size);
    store_tensor_release(t);
    return true;
}

static bool copy_run(struct command_job *j)
{
    struct store_tensor *src = cmd_find(j, j->x);
    struct store_tensor *dst = src ? cmd_new_tensor(j, j->y, src->size, false) : NULL;
    if (dst) {
        vec_copy(src->size, src->data, dst->data);
        store_publish(j->store, dst);
        cmd_result_u64(j, "size", dst->size);
    }
    store_tensor_release(dst);
    store_tensor_release(src);
    return dst != NULL;
}

static bool drop_run(struct command_job *j)
{
    uint64_t dropped = 0;
    for (uint32_t i = 0; i < j->n_names; i++) {
        dropped += store_drop(j->store, j->names[i]);
        devmirror_forget(j->dev, j->names[i]);
    }
    cmd_result_u64(j, "dropped", dropped);
    return true;
}

bool cmd_patch_begin(struct command_job *j, const char *name, struct store_patch *p)
{
    if (store_patch_begin(j->store, name, p) == 0) return true;
    if (errno == ENOENT) return cmd_fail(j, "tensor '%s' not found", name);
    return cmd_fail(j, "out of memory for a copy of '%s' (it is being sent or read)", name);
}

/* ---- vector kernels on the peer's device (host memory on the cpu) ---- */

static struct kern_ctx *job_ctx(struct command_job *j)
{
    return devmirror_ctx(j->dev);
}

/* y[oy, oy + n) += alpha * x[ox, ox + n); y is patched, x may be y. */
static bool axpy_device(struct command_job *j, const struct store_patch *y,
                        const struct store_tensor *x, uint64_t oy, uint64_t ox, uint64_t n)
{
    float *dy = devmirror_patch(j->dev, y, j->err, sizeof j->err);
    const float *dx = dy ? devmirror_read(j->dev, x, j->err, sizeof j->err) : NULL;
    return dx &&
           kern_axpy(job_ctx(j), n, (float)j->number, dx + ox, dy + oy, j->err, sizeof j->err) == 0;
}

static bool scale_device(struct command_job *j, const struct store_patch *x, uint64_t offset,
                         uint64_t n)
{
    float *dx = devmirror_patch(j->dev, x, j->err, sizeof j->err);
    return dx &&
           kern_scale(job_ctx(j), n, (float)j->number, dx + offset, j->err, sizeof j->err) == 0;
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
static bool axpy_run(struct command_job *j)
{
    struct store_patch y;
    store_write_lock(j->store);
    bool ok = cmd_patch_begin(j, j->y, &y);
    struct store_tensor *x = ok ? cmd_find_or_same(j, j->x, y.t) : NULL;
    float *py = NULL, *px;
    uint64_t n = 0;
    ok = x && job_span2(j, "y", y.t, "x", x, &py, &px, &n) &&
         axpy_device(j, &y, x, (uint64_t)(py - y.t->data), (uint64_t)(px - x->data), n);
    store_tensor_release(x);
    if (y.t)
        ok = devmirror_patch_end(j->dev, j->store, &y, ok, py ? (uint64_t)(py - y.t->data) : 0, n,
                                 j->err, sizeof j->err);
    store_write_unlock(j->store);
    return ok;
}

static bool scale_run(struct command_job *j)
{
    struct store_patch x;
    store_write_lock(j->store);
    float *px = NULL;
    uint64_t n = 0;
    bool ok = cmd_patch_begin(j, j->x, &x) && cmd_span(j, x.t, &px, &n) &&
              scale_device(j, &x, (uint64_t)(px - x.t->data), n);
    if (x.t)
        ok = devmirror_patch_end(j->dev, j->store, &x, ok, px ? (uint64_t)(px - x.t->data) : 0, n,
                                 j->err, sizeof j->err);
    store_write_unlock(j->store);
    return ok;
}

static bool norm_run(struct command_job *j)
{
    struct store_tensor *x = cmd_find(j, j->x);
    float *px;
    uint64_t n;
    double value;
    bool ok =
        x && cmd_span(j, x, &px, &n) && dot_device(j, x, NULL, (uint64_t)(px - x->data), n, &value);
    if (ok) cmd_result_f64(j, "value", value);
    store_tensor_release(x);
    return ok;
}

static bool dot_run(struct command_job *j)
{
    struct store_tensor *x = cmd_find(j, j->x);
    struct store_tensor *y = x ? cmd_find_or_same(j, j->y, x) : NULL;
    float *px, *py;
    uint64_t n;
    double value;
    bool ok = y && job_span2(j, "x", x, "y", y, &px, &py, &n) &&
              dot_device(j, x, y, (uint64_t)(px - x->data), n, &value);
    if (ok) cmd_result_f64(j, "value", value);
    store_tensor_release(y);
    store_tensor_release(x);
    return ok;
}

/* Finds input i of sum (an input named twice is the same tensor) and checks
 * that its size matches input 0. */
static bool sum_find_input(struct command_job *j, struct store_tensor **in, uint32_t i)
{
    in[i] = NULL;
    for (uint32_t k = 0; k < i && !in[i]; k++)
        if (strcmp(j->names[k], j->names[i]) == 0) in[i] = cmd_find_or_same(j, j->names[i], in[k]);
    if (!in[i]) in[i] = cmd_find(j, j->names[i]);
    if (!in[i]) return false;
    if (i > 0 && in[i]->size != in[0]->size)
        return cmd_fail(j, "size mismatch: input '%s' has %" PRIu64 " elements, '%s' has %" PRIu64,
                        in[i]->name, in[i]->size, in[0]->name, in[0]->size);
    return true;
}

/* The output goes to a new tensor that replaces `out` only when complete, so
 * out may be one of the inputs and nobody holding the old one sees it change. */
static bool sum_run(struct command_job *j)
{
    struct store_tensor **in = calloc(j->n_names, sizeof *in);
    const float **data = calloc(j->n_names, sizeof *data);
    bool ok = in && data;
    if (!ok) cmd_fail(j, "out of memory");
    for (uint32_t i = 0; ok && i < j->n_names; i++) {
        ok = sum_find_input(j, in, i) &&
             (data[i] = devmirror_read(j->dev, in[i], j->err, sizeof j->err)) != NULL;
    }
    struct store_tensor *out = ok ? cmd_new_tensor(j, j->x, in[0]->size, false) : NULL;
    float *dout = out ? devmirror_result(j->dev, out, j->err, sizeof j->err) : NULL;
    ok = dout &&
         kern_sum(job_ctx(j), out->size, dout, data, j->n_names, j->err, sizeof j->err) == 0 &&
         devmirror_publish(j->dev, j->store, out, j->err, sizeof j->err);
    if (ok) cmd_result_u64(j, "size", out->size);
    store_tensor_release(out);
    for (uint32_t i = 0; in && i < j->n_names; i++)
        store_tensor_release(in[i]);
    free(in);
    free(data);
    return ok;
}

static bool read_run(struct command_job *j)
{
    struct store_tensor *t = cmd_find(j, j->x);
    float *p;
    uint64_t n;
    bool ok = t && cmd_span(j, t, &p, &n);
    if (ok && n > COMMAND_READ_MAX)
        ok = cmd_fail(j,
                      "tensor '%s' has %" PRIu64 " elements, more than the %d one read may return;"
                      " pass a range",
                      t->name, n, COMMAND_READ_MAX);
    if (ok) {
        proto_pack_str(&j->pk, "values");
        msgpack_pack_array(&j->pk, (size_t)n);
        for (uint64_t i = 0; i < n; i++)
            msgpack_pack_float(&j->pk, p[i]);
        j->n_entries++;
    }
    store_tensor_release(t);
    return ok;
}

/* Resident set size from /proc/self/statm (in pages); 0 if unreadable. */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f) return 0;
    unsigned long long size_pages, resident_pages;
    int got = fscanf(f, "%llu %llu", &size_pages, &resident_pages);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? resident_pages * (uint64_t)page : 0;
}

/* What stats reads on the loop thread, where the data plane lives. */
struct stats_params {
    uint64_t commands;
    struct dataplane_totals data;
    int data_port;
    uint64_t peers;
};

static bool stats_run(struct command_job *j)
{
    const struct stats_params *p = j->extra;
    uint64_t tensors, tensor_bytes;
    store_totals(j->store, &tensors, &tensor_bytes);
    struct worker_totals totals;
    worker_get_totals(j->worker, &totals);
    cmd_result_str(j, "node", j->server->cfg.node);
    cmd_result_u64(j, "tensors", tensors);
    cmd_result_u64(j, "tensor_bytes", tensor_bytes);
    cmd_result_u64(j, "mem_rss_bytes", rss_bytes());
    cmd_result_u64(j, "bytes_sent", p->data.bytes_sent);
    cmd_result_u64(j, "bytes_received", p->data.bytes_received);
    cmd_result_u64(j, "transfers_sent", p->data.transfers_sent);
    cmd_result_u64(j, "transfers_received", p->data.transfers_received);
    cmd_result_u64(j, "data_connections", p->data.connections);
    cmd_result_u64(j, "data_port", (uint64_t)p->data_port);
    cmd_result_u64(j, "peers", p->peers);
    cmd_result_f64(j, "compute_ms", peer_emulated_ms(j->server, totals.compute_ms));
    cmd_result_u64(j, "jobs", totals.jobs);
    cmd_result_u64(j, "overruns", totals.overruns);
    cmd_result_u64(j, "commands", p->commands);
    cmd_result_u64(j, "pid", (uint64_t)getpid()); /* for tests and `hiernet exec` users */
    struct devmirror_totals dev;
    devmirror_get_totals(j->dev, &dev);
    cmd_result_str(j, "device", kern_ctx_describe(job_ctx(j)));
    cmd_result_u64(j, "device_uploads", dev.uploads);
    cmd_result_u64(j, "device_upload_bytes", dev.upload_bytes);
    cmd_result_u64(j, "device_downloads", dev.downloads);
    cmd_result_u64(j, "device_download_bytes", dev.download_bytes);
    cmd_result_u64(j, "device_mirrors", dev.mirrors);
    cmd_result_u64(j, "device_bytes", dev.mirror_bytes);
    return true;
}

/* ---- parse(): params into the job, on the loop thread ---- */

bool cmd_arg_fail(struct proto_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->err, sizeof a->err, fmt, ap);
    va_end(ap);
    return false;
}

int cmd_arg_name(struct proto_args *a, const char *key, char *dst)
{
    int got = proto_arg_strcpy(a, key, dst, COMMAND_NAME_SIZE);
    if (got == 1 && dst[0] == '\0') {
        cmd_arg_fail(a, "param '%s': empty tensor name", key);
        return -1;
    }
    return got;
}

bool cmd_arg_required_name(struct proto_args *a, const char *key, char *dst)
{
    int got = cmd_arg_name(a, key, dst);
    return got == 1 || (got == 0 && proto_args_missing(a, key));
}

bool cmd_arg_float(struct proto_args *a, const char *key, bool required, double fallback,
                   double *out)
{
    *out = fallback;
    int got = proto_arg_f64(a, key, out);
    if (got == 0) return !required || proto_args_missing(a, key);
    if (got < 0) return false;
    if (isfinite(*out) && fabs(*out) > FLT_MAX)
        return cmd_arg_fail(a, "param '%s': %g is out of the float32 range", key, *out);
    return true;
}

bool cmd_arg_range(struct command_job *j, struct proto_args *a)
{
    int got = proto_arg_range(a, "range", &j->range_offset, &j->range_count);
    j->has_range = got == 1;
    return got >= 0;
}

bool cmd_arg_int(struct proto_args *a, const char *key, bool required, int64_t min, int64_t max,
                 int64_t *out)
{
    int64_t v;
    int got = proto_arg_i64(a, key, &v);
    if (got == 0) return !required || proto_args_missing(a, key);
    if (got < 0) return false;
    if (v < min || v > max)
        return cmd_arg_fail(a, "param '%s': %" PRId64 " is not between %" PRId64 " and %" PRId64,
                            key, v, min, max);
    *out = v;
    return true;
}

bool cmd_arg_text(struct proto_args *a, const char *key, bool required, char *dst, size_t cap)
{
    char buf[4096];
    int got = proto_arg_strcpy(a, key, buf, cap < sizeof buf ? cap : sizeof buf);
    if (got == 0) return !required || proto_args_missing(a, key);
    if (got < 0) return false;
    if (!buf[0]) return cmd_arg_fail(a, "param '%s': empty", key);
    memcpy(dst, buf, strlen(buf) + 1);
    return true;
}

/* Copies element i of a name list; false (with a->err) when it is no name. */
static bool arg_list_name(struct proto_args *a, const char *key, uint32_t i,
                          const msgpack_object *e, char *dst)
{
    if (e->type != MSGPACK_OBJECT_STR || e->via.str.size == 0 || e->via.str.size > STORE_NAME_MAX ||
        memchr(e->via.str.ptr, '\0', e->via.str.size))
        return cmd_arg_fail(a, "param '%s': element %" PRIu32 " is not a tensor name (%s)", key,
                            i + 1,
                            e->type == MSGPACK_OBJECT_STR ? "empty, too long or holds NUL"
                                                          : proto_type_name(e->type));
    memcpy(dst, e->via.str.ptr, e->via.str.size);
    dst[e->via.str.size] = '\0';
    return true;
}

/* Room for `more` names in j->names. */
static bool job_names_reserve(struct command_job *j, uint32_t more)
{
    size_t n = (size_t)j->n_names + more;
    void *names = realloc(j->names, (n ? n : 1) * sizeof *j->names);
    if (!names) return false;
    j->names = names;
    return true;
}

/* Appends the names of array param key to j->names: 1, 0 when absent, -1.
 * An empty Lua table may arrive as an empty map; it is an empty list. */
static int arg_names(struct command_job *j, struct proto_args *a, const char *key)
{
    const msgpack_object *o = proto_args_get(a, key);
    if (!o || o->type == MSGPACK_OBJECT_NIL) return 0;
    if (o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 0) return 1;
    if (o->type != MSGPACK_OBJECT_ARRAY) {
        cmd_arg_fail(a, "param '%s': expected an array of tensor names, got %s", key,
                     proto_type_name(o->type));
        return -1;
    }
    if (!job_names_reserve(j, o->via.array.size)) {
        cmd_arg_fail(a, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        if (!arg_list_name(a, key, i, &o->via.array.ptr[i], j->names[j->n_names])) return -1;
        j->n_names++;
    }
    return 1;
}

static bool tensor_parse(struct command_job *j, struct proto_args *a)
{
    int64_t size;
    if (!cmd_arg_required_name(a, "name", j->x)) return false;
    int got = proto_arg_i64(a, "size", &size);
    if (got == 0) return proto_args_missing(a, "size");
    if (got < 0) return false;
    if (size < 0 || (uint64_t)size > STORE_MAX_ELEMENTS)
        return cmd_arg_fail(a, "param 'size': %" PRId64 " is not between 0 and %" PRIu64, size,
                            STORE_MAX_ELEMENTS);
    j->count = (uint64_t)size;
    return cmd_arg_float(a, "fill", false, 0.0, &j->number);
}

static bool copy_parse(struct command_job *j, struct proto_args *a)
{
    return cmd_arg_required_name(a, "src", j->x) && cmd_arg_required_name(a, "dst", j->y);
}

static bool drop_parse(struct command_job *j, struct proto_args *a)
{
    char name[COMMAND_NAME_SIZE];
    int got_name = cmd_arg_name(a, "name", name);
    if (got_name < 0) return false;
    int got_names = arg_names(j, a, "names");
    if (got_names < 0) return false;
    if (got_name == 0 && got_names == 0) return cmd_arg_fail(a, "param 'name' or 'names': missing");
    if (got_name == 1) {
        if (!job_names_reserve(j, 1)) return cmd_arg_fail(a, "out of memory");
        memcpy(j->names[j->n_names++], name, sizeof name);
    }
    return true;
}

static bool axpy_parse(struct command_job *j, struct proto_args *a)
{
    return cmd_arg_required_name(a, "y", j->y) && cmd_arg_required_name(a, "x", j->x) &&
           cmd_arg_float(a, "alpha", false, 1.0, &j->number) && cmd_arg_range(j, a);
}

static bool scale_parse(struct command_job *j, struct proto_args *a)
{
    return cmd_arg_required_name(a, "x", j->x) &&
           cmd_arg_float(a, "alpha", true, 0.0, &j->number) && cmd_arg_range(j, a);
}

static bool sum_parse(struct command_job *j, struct proto_args *a)
{
    if (!cmd_arg_required_name(a, "out", j->x)) return false;
    int got = arg_names(j, a, "inputs");
    if (got == 0) return proto_args_missing(a, "inputs");
    if (got == 1 && j->n_names == 0) return cmd_arg_fail(a, "param 'inputs': empty");
    return got == 1;
}

static bool norm_parse(struct command_job *j, struct proto_args *a)
{
    return cmd_arg_required_name(a, "x", j->x) && cmd_arg_range(j, a);
}

static bool dot_parse(struct command_job *j, struct proto_args *a)
{
    return cmd_arg_required_name(a, "x", j->x) && cmd_arg_required_name(a, "y", j->y) &&
           cmd_arg_range(j, a);
}

static bool read_parse(struct command_job *j, struct proto_args *a)
{
    if (!cmd_arg_required_name(a, "tensor", j->x) || !cmd_arg_range(j, a)) return false;
    if (j->has_range && j->range_count > COMMAND_READ_MAX)
        return cmd_arg_fail(
            a, "param 'range': %" PRIu64 " values, more than the %d one read may return",
            j->range_count, COMMAND_READ_MAX);
    return true;
}

static bool stats_parse(struct command_job *j, struct proto_args *a)
{
    struct stats_params *p = j->extra;
    struct peer_server *s = j->server;
    p->commands = s->commands;
    dataplane_get_totals(s->dataplane, &p->data);
    p->data_port = dataplane_port(s->dataplane);
    p->peers = dataplane_peer_count(s->dataplane);
    return true;
}

static void ping_reply(struct peer_server *s, uint32_t msgid, double start_ms, struct proto_args *a)
{
    proto_pack_response_begin(&s->pk, msgid, 1);
    proto_pack_kv_f64(&s->pk, "ms", peer_emulated_ms(s, command_now_ms() - start_ms));
}

/* ---- the table ---- */

static const char *const keys_none[] = {NULL};
static const char *const keys_tensor[] = {"name", "size", "fill", NULL};
static const char *const keys_copy[] = {"src", "dst", NULL};
static const char *const keys_drop[] = {"name", "names", NULL};
static const char *const keys_axpy[] = {"y", "x", "alpha", "range", NULL};
static const char *const keys_scale[] = {"x", "alpha", "range", NULL};
static const char *const keys_sum[] = {"out", "inputs", NULL};
static const char *const keys_norm[] = {"x", "range", NULL};
static const char *const keys_dot[] = {"x", "y", "range", NULL};
static const char *const keys_read[] = {"tensor", "range", NULL};

static const struct command cmd_ping = {"ping", keys_none, .reply_inline = ping_reply};
static const struct command cmd_stats = {"stats", keys_none, .parse = stats_parse, .run = stats_run,
                                         .extra_size = sizeof(struct stats_params)};
static const struct command cmd_tensor = {"tensor", keys_tensor, .parse = tensor_parse,
                                          .run = tensor_run};
static const struct command cmd_copy = {"copy", keys_copy, .parse = copy_parse, .run = copy_run};
static const struct command cmd_drop = {"drop", keys_drop, .parse = drop_parse, .run = drop_run};
static const struct command cmd_axpy = {"axpy", keys_axpy, .parse = axpy_parse, .run = axpy_run};
static const struct command cmd_scale = {"scale", keys_scale, .parse = scale_parse,
                                         .run = scale_run};
static const struct command cmd_sum = {"sum", keys_sum, .parse = sum_parse, .run = sum_run};
static const struct command cmd_norm = {"norm", keys_norm, .parse = norm_parse, .run = norm_run};
static const struct command cmd_dot = {"dot", keys_dot, .parse = dot_parse, .run = dot_run};
static const struct command cmd_read = {"read", keys_read, .parse = read_parse, .run = read_run};

/* Every command, ping first: it is the hot one. */
static const struct proto_method command_table[] = {
    {"ping", (void *)&cmd_ping},
    {"stats", (void *)&cmd_stats},
    {"tensor", (void *)&cmd_tensor},
    {"copy", (void *)&cmd_copy},
    {"drop", (void *)&cmd_drop},
    {"axpy", (void *)&cmd_axpy},
    {"scale", (void *)&cmd_scale},
    {"sum", (void *)&cmd_sum},
    {"norm", (void *)&cmd_norm},
    {"dot", (void *)&cmd_dot},
    {"read", (void *)&cmd_read},
    {"send", (void *)&data_cmd_send},
    {"peers", (void *)&data_cmd_peers},
    {"dataset", (void *)&ml_cmd_dataset},
    {"model", (void *)&ml_cmd_model},
    {"grad", (void *)&ml_cmd_grad},
    {"optim", (void *)&ml_cmd_optim},
    {"eval", (void *)&ml_cmd_eval},
    {"compress", (void *)&ml_cmd_compress},
    {"decompress", (void *)&ml_cmd_decompress},
    {NULL, NULL},
};

/* ---- dispatch and completion, on the loop thread ---- */

static void reply_error(struct peer_server *s, uint32_t msgid, const char *command,
                        const char *cause)
{
    char message[768];
    snprintf(message, sizeof message, "%s: %s", command, cause);
    proto_pack_error(&s->pk, msgid, message);
}

/* Rejects keys the command does not take: a typo ("alhpa") silently using a
 * default would quietly change an experiment. */
static bool params_known(const struct command *cmd, const msgpack_object *params,
                         struct proto_args *a)
{
    for (uint32_t i = 0; i < params->via.map.size; i++) {
        const msgpack_object *key = &params->via.map.ptr[i].key;
        if (key->type != MSGPACK_OBJECT_STR)
            return cmd_arg_fail(a, "param names must be strings, got %s",
                                proto_type_name(key->type));
        const char *const *k = cmd->keys;
        while (*k && (strlen(*k) != key->via.str.size ||
                      memcmp(*k, key->via.str.ptr, key->via.str.size) != 0))
            k++;
        if (!*k) {
            int len =
                key->via.str.size < COMMAND_QUOTE_MAX ? (int)key->via.str.size : COMMAND_QUOTE_MAX;
            return cmd_arg_fail(a, "unknown param '%.*s'", len, len ? key->via.str.ptr : "");
        }
    }
    return true;
}

static void command_job_free(struct command_job *j)
{
    if (j->cmd->cleanup) j->cmd->cleanup(j);
    free(j->names);
    peer_buffer_free(&j->body);
    free(j);
}

static void command_reply(struct command_job *j)
{
    struct peer_server *s = j->server;
    if (!j->err[0] && j->body.failed) cmd_fail(j, "out of memory packing the result");
    if (j->err[0]) {
        reply_error(s, j->msgid, j->cmd->name, j->err);
        return;
    }
    /* cpu_ms is work, not a duration: the host's CPU time, which the
     * emulated device spends in cpu_ms / speed emulated ms. */
    proto_pack_response_begin(&s->pk, j->msgid, j->n_entries + 4);
    proto_pack_kv_f64(&s->pk, "ms", peer_emulated_ms(s, j->work.wall_ms));
    proto_pack_kv_f64(&s->pk, "cpu_ms", j->work.cpu_ms);
    proto_pack_kv_f64(&s->pk, "queue_ms", peer_emulated_ms(s, j->work.queue_ms));
    proto_pack_str(&s->pk, "overrun");
    j->work.overrun ? msgpack_pack_true(&s->pk) : msgpack_pack_false(&s->pk);
    peer_buffer_write(&s->out, j->body.data, j->body.len);
}

void command_job_reply(struct command_job *j)
{
    command_reply(j);
    command_job_free(j);
}

void command_job_discard(struct command_job *j)
{
    command_job_free(j);
}

static void command_job_run(struct worker_job *work)
{
    struct command_job *j = container_of(work, struct command_job, work);
    j->cmd->run(j);
}

static void command_job_done(struct worker_job *work, bool cancelled)
{
    struct command_job *j = container_of(work, struct command_job, work);
    if (!cancelled && !j->err[0] && j->cmd->after && j->cmd->after(j)) return; /* kept */
    if (!cancelled) command_reply(j);
    command_job_free(j);
}

/* The job and its command's extra params in one allocation. */
static struct command_job *command_job_new(struct peer_server *s, const struct command *cmd,
                                           uint32_t msgid)
{
    size_t head =
        (sizeof(struct command_job) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    struct command_job *j = calloc(1, head + cmd->extra_size);
    if (!j) return NULL;
    j->work.run = command_job_run;
    j->work.done = command_job_done;
    j->cmd = cmd;
    j->server = s;
    j->store = s->store;
    j->worker = s->worker;
    j->ml = s->ml;
    j->dev = s->dev;
    j->msgid = msgid;
    j->extra = cmd->extra_size ? (char *)j + head : NULL;
    msgpack_packer_init(&j->pk, &j->body, peer_buffer_write);
    return j;
}

/* Parses a store command into a job and queues it. */
static void command_submit(struct peer_server *s, const struct command *cmd, uint32_t msgid,
                           struct proto_args *a)
{
    struct command_job *j = command_job_new(s, cmd, msgid);
    if (!j) {
        reply_error(s, msgid, cmd->name, "out of memory");
        return;
    }
    if (!cmd->parse(j, a)) {
        reply_error(s, msgid, cmd->name, a->err);
        command_job_free(j);
        return;
    }
    worker_submit(s->worker, &j->work);
}

void commands_dispatch(struct peer_server *s, const struct proto_msg *msg)
{
    double start_ms = command_now_ms();
    s->commands++;
    const struct proto_method *m = proto_method_find(command_table, msg->method, msg->method_len);
    if (!m) {
        char message[128];
        int len = msg->method_len < COMMAND_QUOTE_MAX ? (int)msg->method_len : COMMAND_QUOTE_MAX;
        snprintf(message, sizeof message, "unknown method '%.*s'", len, len ? msg->method : "");
        proto_pack_error(&s->pk, msg->msgid, message);
        return;
    }
    const struct command *cmd = m->handler;
    struct proto_args a;
    proto_args_init(&a, msg->params);
    if (!params_known(cmd, msg->params, &a))
        reply_error(s, msg->msgid, cmd->name, a.err);
    else if (cmd->reply_inline)
        cmd->reply_inline(s, msg->msgid, start_ms, &a);
    else
        command_submit(s, cmd, msg->msgid, &a);
}
