/* trace_wire.c — a link trace's wire form (see trace_wire.h). */
#include "topo/trace_wire.h"

#include "proto/protocol.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_FIELDS 4 /* t_s, rate_bps, delay_ns, loss */

static void pack_key(msgpack_packer *pk, const char *key)
{
    msgpack_pack_str_with_body(pk, key, strlen(key));
}

static bool pack_opportunities(msgpack_packer *pk, const struct topo_trace *t)
{
    unsigned char *le = malloc(t->n_opportunities * 4 + 1);
    if (!le) return false;
    for (size_t i = 0; i < t->n_opportunities; i++)
        for (int b = 0; b < 4; b++)
            le[4 * i + b] = (unsigned char)(t->opportunities_ms[i] >> (8 * b));
    pack_key(pk, "opportunities");
    msgpack_pack_bin_with_body(pk, le, t->n_opportunities * 4);
    free(le);
    return true;
}

bool topo_trace_pack(msgpack_packer *pk, const struct topo_trace *t)
{
    msgpack_pack_map(pk, t->opportunities_ms ? 5 : 4);
    pack_key(pk, "samples");
    msgpack_pack_array(pk, (uint32_t)t->n_samples);
    for (size_t i = 0; i < t->n_samples; i++) {
        const struct topo_trace_sample *s = &t->samples[i];
        msgpack_pack_array(pk, SAMPLE_FIELDS);
        msgpack_pack_double(pk, s->t_s);
        msgpack_pack_uint64(pk, s->rate_bps);
        msgpack_pack_uint64(pk, s->delay_ns);
        msgpack_pack_double(pk, s->loss);
    }
    pack_key(pk, "has_delay");
    t->has_delay ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    pack_key(pk, "has_loss");
    t->has_loss ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    pack_key(pk, "period_s");
    msgpack_pack_double(pk, t->period_s);
    return !t->opportunities_ms || pack_opportunities(pk, t);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "trace: ");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static bool number_of(const msgpack_object *o, double *out)
{
    if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
        *out = o->via.f64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        *out = (double)o->via.u64;
    else
        return false;
    return isfinite(*out);
}

/* Sample i from [t, rate, delay, loss]; prev_t: the one before's time. */
static int read_sample(const msgpack_object *o, size_t i, double prev_t,
                       struct topo_trace_sample *s, char *err, size_t errlen)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != SAMPLE_FIELDS)
        return fail(err, errlen, "sample %zu: expected [t, rate, delay, loss]", i);
    const msgpack_object *f = o->via.array.ptr;
    if (!number_of(&f[0], &s->t_s) || s->t_s < prev_t)
        return fail(err, errlen, "sample %zu: time is not a number >= %g", i, prev_t);
    if (f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        f[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return fail(err, errlen, "sample %zu: rate and delay must be non-negative integers", i);
    s->rate_bps = f[1].via.u64;
    s->delay_ns = f[2].via.u64;
    if (!number_of(&f[3], &s->loss) || s->loss < 0 || s->loss > 1)
        return fail(err, errlen, "sample %zu: loss is not a fraction in [0, 1]", i);
    return 0;
}

static int read_samples(const msgpack_object *a, struct topo_trace *t, char *err, size_t errlen)
{
    if (!a || a->type != MSGPACK_OBJECT_ARRAY)
        return fail(err, errlen, "field 'samples': expected array");
    size_t n = a->via.array.size;
    if (n == 0 || n > TOPO_TRACE_MAX_SAMPLES)
        return fail(err, errlen, "field 'samples': %zu samples, 1 to %u", n,
                    TOPO_TRACE_MAX_SAMPLES);
    if (!(t->samples = calloc(n, sizeof *t->samples))) return fail(err, errlen, "out of memory");
    t->n_samples = n;
    for (size_t i = 0; i < n; i++)
        if (read_sample(&a->via.array.ptr[i], i, i ? t->samples[i - 1].t_s : 0, &t->samples[i], err,
                        errlen) < 0)
            return -1;
    return 0;
}

static int read_opportunities(const msgpack_object *b, struct topo_trace *t, char *err,
                              size_t errlen)
{
    if (!b) return 0; /* not a Mahimahi trace */
    if (b->type != MSGPACK_OBJECT_BIN || b->via.bin.size % 4 || !b->via.bin.size ||
        b->via.bin.size / 4 > TOPO_TRACE_MAX_OPPORTUNITIES)
        return fail(err, errlen, "field 'opportunities': expected 1 to %u times of 4 bytes",
                    TOPO_TRACE_MAX_OPPORTUNITIES);
    size_t n = b->via.bin.size / 4;
    const unsigned char *le = (const unsigned char *)b->via.bin.ptr;
    if (!(t->opportunities_ms = malloc(n * sizeof *t->opportunities_ms)))
        return fail(err, errlen, "out of memory");
    t->n_opportunities = n;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)le[4 * i] | (uint32_t)le[4 * i + 1] << 8 |
                     (uint32_t)le[4 * i + 2] << 16 | (uint32_t)le[4 * i + 3] << 24;
        if (i && v < t->opportunities_ms[i - 1])
            return fail(err, errlen, "field 'opportunities': time %zu goes backwards", i);
        t->opportunities_ms[i] = v;
    }
    return 0;
}

static int read_flags(struct proto_args *a, struct topo_trace *t, char *err, size_t errlen)
{
    if (proto_arg_bool(a, "has_delay", &t->has_delay) != 1 ||
        proto_arg_bool(a, "has_loss", &t->has_loss) != 1)
        return fail(err, errlen, "fields 'has_delay' and 'has_loss' must be booleans");
    if (proto_arg_f64(a, "period_s", &t->period_s) != 1 || !isfinite(t->period_s) ||
        t->period_s < 0)
        return fail(err, errlen, "field 'period_s' must be a number >= 0");
    return 0;
}

int topo_trace_read(const msgpack_object *map, struct topo_trace *out, char *err, size_t errlen)
{
    *out = (struct topo_trace){0};
    if (!map || map->type != MSGPACK_OBJECT_MAP) return fail(err, errlen, "not a map");
    struct proto_args a;
    proto_args_init(&a, map);
    if (read_samples(proto_args_get(&a, "samples"), out, err, errlen) < 0 ||
        read_flags(&a, out, err, errlen) < 0 ||
        read_opportunities(proto_args_get(&a, "opportunities"), out, err, errlen) < 0) {
        topo_trace_free(out);
        return -1;
    }
    return 0;
}
