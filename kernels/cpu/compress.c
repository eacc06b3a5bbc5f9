/* cpu/compress.c — topk, int8 and sign compression with error feedback, and
 * the validating decoder of their wire format. See kernels/compress.h.
 *
 * Every encoder reads its input as x[i] + residual[i] and validates before it
 * writes anything, so a failed call leaves the residual as it was. */
#include "kernels/compress.h"
#include "kernels/kern_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rng.h"

/* Vectorise the elementwise loops, which GCC's -O2 cost model leaves scalar
 * (see cpu/model.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* Bulk arrays (indices, values) are copied with memcpy, which is the wire's
 * little-endian only on a little-endian host. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "compress.c assumes a little-endian host"
#endif

#define COMPRESS_MAGIC0 'H'
#define COMPRESS_MAGIC1 'C'
#define COMPRESS_VERSION 1

const char *compress_method_name(enum compress_method method)
{
    switch (method) {
    case COMPRESS_TOPK:
        return "topk";
    case COMPRESS_INT8:
        return "int8";
    case COMPRESS_SIGN:
        return "sign";
    }
    return "?";
}

int compress_method_parse(const char *name, enum compress_method *out, char *err, size_t errlen)
{
    for (int m = COMPRESS_TOPK; m <= COMPRESS_SIGN; m++) {
        if (name && strcmp(name, compress_method_name((enum compress_method)m)) == 0) {
            *out = (enum compress_method)m;
            return 0;
        }
    }
    return kern_fail(err, errlen, "compression \"%s\" is unknown (topk, int8, sign)",
                     name ? name : "");
}

size_t compress_topk_count(size_t n, double ratio)
{
    if (n == 0) return 0;
    /* Rounded, not ceil'ed: 0.01 * 100 is 1.0000000000000002 in double. */
    double k = floor(ratio * (double)n + 0.5);
    return k < 1 ? 1 : k > (double)n ? n : (size_t)k;
}

static int ratio_valid(double ratio)
{
    return ratio > 0.0 && ratio <= 1.0;
}

size_t compress_size(enum compress_method method, size_t n, double ratio)
{
    switch (method) {
    case COMPRESS_TOPK:
        return ratio_valid(ratio) ? COMPRESS_HEADER_BYTES + 8 * compress_topk_count(n, ratio) : 0;
    case COMPRESS_INT8:
        return COMPRESS_HEADER_BYTES + 4 + n;
    case COMPRESS_SIGN:
        return COMPRESS_HEADER_BYTES + 4 + (n + 7) / 8;
    }
    return 0;
}

/* ---- byte helpers ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_header(uint8_t *p, enum compress_method method, uint32_t k, uint64_t n)
{
    p[0] = COMPRESS_MAGIC0;
    p[1] = COMPRESS_MAGIC1;
    p[2] = COMPRESS_VERSION;
    p[3] = (uint8_t)method;
    put_u32(p + 4, k);
    put_u32(p + 8, (uint32_t)n);
    put_u32(p + 12, (uint32_t)(n >> 32));
}

static inline float input_at(const float *x, const float *residual, size_t i)
{
    return residual ? x[i] + residual[i] : x[i];
}

/* ---- topk ---- */

/* |v| ordered as unsigned integers: for non-negative IEEE floats the bit
 * patterns sort like the values, and NaN sorts above infinity, so the order
 * is total and selection terminates whatever the data. */
static inline uint32_t magnitude_key(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits & 0x7fffffffu;
}

static inline void swap_u32(uint32_t *a, uint32_t *b)
{
    uint32_t t = *a;
    *a = *b;
    *b = t;
}

/* The value of rank r (0-based, ascending) of a[0..n): quickselect with a
 * three-way partition, so the all-zero gradients of dead layers finish in one
 * pass, and seeded random pivots, so no input order is a worst case. */
static uint32_t select_rank(uint32_t *a, size_t n, size_t r)
{
    struct rng g;
    rng_seed(&g, 0x70b5e1ec7, 0);
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        uint32_t pivot = a[lo + rng_below(&g, hi - lo)];
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (a[i] < pivot)
                swap_u32(&a[lt++], &a[i++]);
            else if (a[i] > pivot)
                swap_u32(&a[i], &a[--gt]);
            else
                i++;
        }
        if (r < lt)
            hi = lt;
        else if (r >= gt)
            lo = gt;
        else
            return pivot;
    }
    return a[lo];
}

/* Writes the kept entries (ascending index) and zeroes their residual: the
 * decoded value equals the input exactly, so input - decoded is 0, and
 * writing 0 also keeps an infinite input from leaving inf - inf = NaN. */
static void topk_emit(const float *x, float *residual, size_t n, size_t k, uint32_t threshold,
                      size_t above, uint8_t *body)
{
    uint8_t *idx = body, *val = body + 4 * k;
    size_t ties = k - above, out = 0;
    for (size_t i = 0; i < n; i++) {
        float in = input_at(x, residual, i);
        uint32_t key = magnitude_key(in);
        int keep = key > threshold;
        if (key == threshold && ties > 0) {
            keep = 1;
            ties--;
        }
        if (!keep) {
            if (residual) residual[i] = in;
            continue;
        }
        uint32_t index = (uint32_t)i;
        memcpy(idx + 4 * out, &index, 4);
        memcpy(val + 4 * out, &in, 4);
        out++;
        if (residual) residual[i] = 0.0f;
    }
}

static int encode_topk(double ratio, const float *x, float *residual, size_t n, uint8_t *out,
                       char *err, size_t errlen)
{
    size_t k = compress_topk_count(n, ratio);
    uint32_t threshold = 0;
    size_t above = 0;
    if (k > 0) {
        uint32_t *keys = malloc(n * sizeof *keys);
        if (!keys)
            return kern_fail(err, errlen, "topk: cannot allocate %zu bytes of scratch", n * 4);
        for (size_t i = 0; i < n; i++)
            keys[i] = magnitude_key(input_at(x, residual, i));
        threshold = select_rank(keys, n, n - k);
        free(keys);
        for (size_t i = 0; i < n; i++)
            above += magnitude_key(input_at(x, residual, i)) > threshold;
    }
    put_header(out, COMPRESS_TOPK, (uint32_t)k, n);
    topk_emit(x, residual, n, k, threshold, above, out + COMPRESS_HEADER_BYTES);
    return 0;
}

/* ---- int8 and sign ---- */

static int encode_int8(const float *x, float *residual, size_t n, uint8_t *out, char *err,
                       size_t errlen)
{
    float max = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(input_at(x, residual, i));
        max = a > max || a != a ? a : max; /* a NaN wins and is caught below */
    }
    if (!isfinite(max)) return kern_fail(err, errlen, "int8: the input holds a non-finite value");
    float scale = max / 127.0f, inv = max > 0.0f ? 127.0f / max : 0.0f;
    put_header(out, COMPRESS_INT8, 0, n);
    memcpy(out + COMPRESS_HEADER_BYTES, &scale, 4);
    int8_t *q = (int8_t *)(out + COMPRESS_HEADER_BYTES + 4);
    for (size_t i = 0; i < n; i++) {
        float in = input_at(x, residual, i);
        float r = rintf(in * inv);
        q[i] = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
        if (residual) residual[i] = in - (float)q[i] * scale;
    }
    return 0;
}

static int encode_sign(const float *x, float *residual, size_t n, uint8_t *out, char *err,
                       size_t errlen)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += fabsf(input_at(x, residual, i));
    float scale = n ? (float)(sum / (double)n) : 0.0f;
    if (!isfinite(scale)) return kern_fail(err, errlen, "sign: the input holds a non-finite value");
    put_header(out, COMPRESS_SIGN, 0, n);
    memcpy(out + COMPRESS_HEADER_BYTES, &scale, 4);
    uint8_t *bits = out + COMPRESS_HEADER_BYTES + 4;
    memset(bits, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; i++) {
        float in = input_at(x, residual, i);
        int negative = in < 0.0f;
        bits[i / 8] |= (uint8_t)(negative << (i % 8));
        if (residual) residual[i] = in - (negative ? -scale : scale);
    }
    return 0;
}

int compress_encode(enum compress_method method, double ratio, const float *x, float *residual,
                    size_t n, void *out, size_t cap, size_t *len, char *err, size_t errlen)
{
    *len = 0;
    if (method == COMPRESS_TOPK && !ratio_valid(ratio))
        return kern_fail(err, errlen, "topk: ratio %g is outside (0, 1]", ratio);
    if (method == COMPRESS_TOPK && n > UINT32_MAX)
        return kern_fail(err, errlen, "topk: %zu elements exceed 32-bit indices", n);
    size_t need = compress_size(method, n, ratio);
    if (need == 0) return kern_fail(err, errlen, "compression method %d is unknown", (int)method);
    if (cap < need)
        return kern_fail(err, errlen, "%s: output holds %zu bytes, %zu needed",
                         compress_method_name(method), cap, need);
    int rc = method == COMPRESS_TOPK   ? encode_topk(ratio, x, residual, n, out, err, errlen)
             : method == COMPRESS_INT8 ? encode_int8(x, residual, n, out, err, errlen)
                                       : encode_sign(x, residual, n, out, err, errlen);
    if (rc == 0) *len = need;
    return rc;
}

/* ---- decoding ---- */

static size_t body_size(const struct compress_info *info)
{
    switch (info->method) {
    case COMPRESS_TOPK:
        return 8 * (size_t)info->k;
    case COMPRESS_INT8:
        return 4 + info->n;
    case COMPRESS_SIGN:
        return 4 + (info->n + 7) / 8;
    }
    return 0;
}

int compress_inspect(const void *buf, size_t len, struct compress_info *info, char *err,
                     size_t errlen)
{
    const uint8_t *p = buf;
    if (len < COMPRESS_HEADER_BYTES)
        return kern_fail(err, errlen, "compressed tensor: %zu bytes, shorter than its header", len);
    if (p[0] != COMPRESS_MAGIC0 || p[1] != COMPRESS_MAGIC1)
        return kern_fail(err, errlen, "compressed tensor: bad magic %02x %02x", p[0], p[1]);
    if (p[2] != COMPRESS_VERSION)
        return kern_fail(err, errlen, "compressed tensor: version %u unsupported", p[2]);
    if (p[3] < COMPRESS_TOPK || p[3] > COMPRESS_SIGN)
        return kern_fail(err, errlen, "compressed tensor: method %u unknown", p[3]);
    info->method = (enum compress_method)p[3];
    info->k = get_u32(p + 4);
    info->n = (uint64_t)get_u32(p + 8) | (uint64_t)get_u32(p + 12) << 32;
    if (info->method == COMPRESS_TOPK ? info->k > info->n : info->k != 0)
        return kern_fail(err, errlen, "compressed tensor: k %u invalid for %s of %llu elements",
                         info->k, compress_method_name(info->method), (unsigned long long)info->n);
    /* n bounded by len first, so body_size cannot overflow. */
    if (info->method != COMPRESS_TOPK && info->n / 8 > len)
        return kern_fail(err, errlen, "compressed tensor: %zu bytes cannot hold %llu elements", len,
                         (unsigned long long)info->n);
    if (len - COMPRESS_HEADER_BYTES != body_size(info))
        return kern_fail(err, errlen, "compressed tensor: %s body is %zu bytes, expected %zu",
                         compress_method_name(info->method), len - COMPRESS_HEADER_BYTES,
                         body_size(info));
    return 0;
}

static int decode_topk(const uint8_t *body, uint32_t k, float *out, size_t n, bool add, char *err,
                       size_t errlen)
{
    const uint8_t *idx = body, *val = body + 4 * (size_t)k;
    uint32_t prev = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t i = get_u32(idx + 4 * (size_t)j);
        if (i >= n || (j > 0 && i <= prev))
            return kern_fail(err, errlen,
                             "compressed tensor: topk index %u at %u out of order or "
                             "range",
                             i, j);
        prev = i;
    }
    if (!add) memset(out, 0, n * sizeof(float));
    for (uint32_t j = 0; j < k; j++) {
        float v;
        memcpy(&v, val + 4 * (size_t)j, 4);
        out[get_u32(idx + 4 * (size_t)j)] += v;
    }
    return 0;
}

static int decode_scaled(const struct compress_info *info, const uint8_t *body, float *out,
                         size_t n, bool add, char *err, size_t errlen)
{
    float scale;
    memcpy(&scale, body, 4);
    if (!isfinite(scale) || scale < 0.0f)
        return kern_fail(err, errlen, "compressed tensor: %s scale %g invalid",
                         compress_method_name(info->method), scale);
    const uint8_t *data = body + 4;
    if (info->method == COMPRESS_SIGN && n % 8 && (data[n / 8] >> (n % 8)))
        return kern_fail(err, errlen, "compressed tensor: sign padding bits are set");
    for (size_t i = 0; i < n; i++) {
        float v = info->method == COMPRESS_INT8  ? (float)(int8_t)data[i] * scale
                  : (data[i / 8] >> (i % 8)) & 1 ? -scale
                                                 : scale;
        out[i] = add ? out[i] + v : v;
    }
    return 0;
}

int compress_decode(const void *buf, size_t len, float *out, size_t n, bool add, char *err,
                    size_t errlen)
{
    struct compress_info info;
    if (compress_inspect(buf, len, &info, err, errlen) < 0) return -1;
    if (info.n != n)
        return kern_fail(err, errlen, "compressed tensor: holds %llu elements, target has %zu",
                         (unsigned long long)info.n, n);
    const uint8_t *body = (const uint8_t *)buf + COMPRESS_HEADER_BYTES;
    if (info.method == COMPRESS_TOPK) return decode_topk(body, info.k, out, n, add, err, errlen);
    return decode_scaled(&info, body, out, n, add, err, errlen);
}
