/* command_args.c — the param helpers of command_job.h: typed values out of a
 * request's params map, with errors that name the param and the value. Loop
 * thread (parse() of the commands). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/command_job.h"

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

bool cmd_arg_range(struct proto_args *a, struct cmd_range *r)
{
    int got = proto_arg_range(a, "range", &r->offset, &r->count);
    r->set = got == 1;
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

/* Room for `more` names after the first n of *names. */
static bool names_reserve(char (**names)[COMMAND_NAME_SIZE], uint32_t n, uint32_t more)
{
    size_t total = (size_t)n + more;
    void *grown = realloc(*names, (total ? total : 1) * sizeof **names);
    if (!grown) return false;
    *names = grown;
    return true;
}

int cmd_arg_names(struct proto_args *a, const char *key, char (**names)[COMMAND_NAME_SIZE],
                  uint32_t *n)
{
    const msgpack_object *o = proto_args_get(a, key);
    if (!o || o->type == MSGPACK_OBJECT_NIL) return 0;
    if (o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 0) return 1;
    if (o->type != MSGPACK_OBJECT_ARRAY) {
        cmd_arg_fail(a, "param '%s': expected an array of tensor names, got %s", key,
                     proto_type_name(o->type));
        return -1;
    }
    if (!names_reserve(names, *n, o->via.array.size)) {
        cmd_arg_fail(a, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        if (!arg_list_name(a, key, i, &o->via.array.ptr[i], (*names)[*n])) return -1;
        (*n)++;
    }
    return 1;
}

int cmd_arg_name_list(struct proto_args *a, const char *key, struct cmd_names *names)
{
    return cmd_arg_names(a, key, &names->v, &names->n);
}

bool cmd_arg_bool(struct proto_args *a, const char *key, bool *out)
{
    return proto_arg_bool(a, key, out) >= 0;
}
