/* frame.c — the data-plane wire format (see frame.h): a msgpack encoder into
 * a caller's fixed buffer and a minimal, bounds-checked msgpack decoder for
 * the few types a header uses. */
#include "peer/frame.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/msgmap.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the data plane sends float32 payloads as they are in memory: little-endian hosts only"
#endif

/* ---- encoding ---- */

struct frame_sink {
    uint8_t *buf;
    size_t len, cap;
    bool full;
};

static int frame_sink_write(void *data, const char *bytes, size_t len)
{
    struct frame_sink *sink = data;
    if (sink->full || len > sink->cap - sink->len) {
        sink->full = true;
        return -1;
    }
    memcpy(sink->buf + sink->len, bytes, len);
    sink->len += len;
    return 0;
}

static bool frame_pack_tensor(msgpack_packer *pk, const struct frame_header *h)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "type", "tensor");
    msgmap_u64(&m, "id", h->id);
    msgmap_str(&m, "from", h->from);
    if (h->to[0]) msgmap_str(&m, "to", h->to);
    msgmap_str(&m, "as", h->as);
    msgmap_str(&m, "dtype", "f32");
    msgmap_u64(&m, "count", h->count);
    msgmap_u64(&m, "bytes", h->bytes);
    msgmap_u64(&m, "version", h->version);
    if (h->flags) msgmap_u64(&m, "flags", h->flags);
    if (h->pattern) msgmap_u64(&m, "pattern", h->pattern);
    if (h->incarnation) msgmap_u64(&m, "incarnation", h->incarnation);
    if (h->has_range) {
        msgmap_key(&m, "range");
        msgpack_pack_array(&m.pk, 2);
        msgpack_pack_uint64(&m.pk, h->offset);
        msgpack_pack_uint64(&m.pk, h->count);
    }
    return msgmap_end(&m, pk);
}

static bool frame_pack_ack(msgpack_packer *pk, const struct frame_header *h)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "type", "ack");
    msgmap_u64(&m, "id", h->id);
    msgmap_u64(&m, "bytes", 0);
    if (h->error[0]) msgmap_str(&m, "error", h->error);
    return msgmap_end(&m, pk);
}

size_t frame_encode(const struct frame_header *h, uint8_t *buf, size_t cap)
{
    if (cap < FRAME_PREFIX_BYTES) return 0;
    struct frame_sink sink = {buf + FRAME_PREFIX_BYTES, 0, cap - FRAME_PREFIX_BYTES, false};
    if (sink.cap > FRAME_HEADER_MAX) sink.cap = FRAME_HEADER_MAX;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sink, frame_sink_write);
    bool packed = h->type == FRAME_TENSOR ? frame_pack_tensor(&pk, h) : frame_pack_ack(&pk, h);
    if (!packed || sink.full || sink.len == 0) return 0;
    memcpy(buf, FRAME_MAGIC, 4);
    uint32_t n = (uint32_t)sink.len;
    buf[4] = (uint8_t)(n >> 24);
    buf[5] = (uint8_t)(n >> 16);
    buf[6] = (uint8_t)(n >> 8);
    buf[7] = (uint8_t)n;
    return FRAME_PREFIX_BYTES + sink.len;
}

/* ---- decoding ---- */

static bool frame_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool frame_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

uint32_t frame_prefix_decode(const uint8_t *prefix, char *err, size_t errlen)
{
    if (memcmp(prefix, FRAME_MAGIC, 4) != 0) {
        frame_fail(err, errlen, "bad frame magic %02x%02x%02x%02x", prefix[0], prefix[1], prefix[2],
                   prefix[3]);
        return 0;
    }
    uint32_t n = (uint32_t)prefix[4] << 24 | (uint32_t)prefix[5] << 16 | (uint32_t)prefix[6] << 8 |
                 prefix[7];
    if (n == 0 || n > FRAME_HEADER_MAX) {
        frame_fail(err, errlen, "frame header of %u bytes (1 to %d allowed)", n, FRAME_HEADER_MAX);
        return 0;
    }
    return n;
}

/* A cursor over the header bytes. */
struct mp_cursor {
    const uint8_t *p, *end;
};

static bool mp_take(struct mp_cursor *c, size_t n, const uint8_t **out)
{
    if ((size_t)(c->end - c->p) < n) return false;
    *out = c->p;
    c->p += n;
    return true;
}

/* Big-endian unsigned integer of n bytes. */
static bool mp_be(struct mp_cursor *c, size_t n, uint64_t *v)
{
    const uint8_t *b;
    if (!mp_take(c, n, &b)) return false;
    *v = 0;
    for (size_t i = 0; i < n; i++)
        *v = *v << 8 | b[i];
    return true;
}

static bool mp_byte(struct mp_cursor *c, uint8_t *b)
{
    const uint8_t *p;
    if (!mp_take(c, 1, &p)) return false;
    *b = *p;
    return true;
}

static bool mp_uint(struct mp_cursor *c, uint64_t *v)
{
    uint8_t b;
    if (!mp_byte(c, &b)) return false;
    if (b <= 0x7f) {
        *v = b;
        return true;
    }
    if (b < 0xcc || b > 0xcf) return false;
    return mp_be(c, (size_t)1 << (b - 0xcc), v);
}

static bool mp_str(struct mp_cursor *c, const char **s, size_t *len)
{
    uint8_t b;
    uint64_t n;
    if (!mp_byte(c, &b)) return false;
    if (b >= 0xa0 && b <= 0xbf)
        n = b & 0x1f;
    else if (b == 0xd9 || b == 0xda || b == 0xdb) {
        if (!mp_be(c, (size_t)1 << (b - 0xd9), &n)) return false;
    } else
        return false;
    const uint8_t *p;
    if (n > (uint64_t)(c->end - c->p) || !mp_take(c, (size_t)n, &p)) return false;
    *s = (const char *)p;
    *len = (size_t)n;
    return true;
}

static bool mp_container(struct mp_cursor *c, uint8_t fix_lo, uint8_t fix_hi, uint8_t b16,
                         uint32_t *n)
{
    uint8_t b;
    uint64_t v;
    if (!mp_byte(c, &b)) return false;
    if (b >= fix_lo && b <= fix_hi)
        v = b & 0x0f;
    else if (b == b16 || b == b16 + 1) {
        if (!mp_be(c, b == b16 ? 2 : 4, &v)) return false;
    } else
        return false;
    *n = (uint32_t)v;
    return true;
}

/* Copies a string value into dst (cap bytes with the NUL); no NUL inside. */
static bool mp_strcpy(struct mp_cursor *c, char *dst, size_t cap)
{
    const char *s;
    size_t len;
    if (!mp_str(c, &s, &len) || len >= cap || memchr(s, '\0', len)) return false;
    memcpy(dst, s, len);
    dst[len] = '\0';
    return true;
}

static bool mp_str_is(struct mp_cursor *c, const char *want)
{
    const char *s;
    size_t len;
    return mp_str(c, &s, &len) && len == strlen(want) && memcmp(s, want, len) == 0;
}

static bool mp_type(struct mp_cursor *c, struct frame_header *h)
{
    const char *s;
    size_t len;
    if (!mp_str(c, &s, &len)) return false;
    if (len == 6 && memcmp(s, "tensor", 6) == 0)
        h->type = FRAME_TENSOR;
    else if (len == 3 && memcmp(s, "ack", 3) == 0)
        h->type = FRAME_ACK;
    else
        return false;
    return true;
}

static bool mp_range(struct mp_cursor *c, struct frame_header *h, uint64_t *range_count)
{
    uint32_t n;
    h->has_range = true;
    return mp_container(c, 0x90, 0x9f, 0xdc, &n) && n == 2 && mp_uint(c, &h->offset) &&
           mp_uint(c, range_count);
}

/* Seen-key bits, to reject duplicates and check required keys. */
enum {
    KEY_TYPE = 1 << 0,
    KEY_ID = 1 << 1,
    KEY_FROM = 1 << 2,
    KEY_TO = 1 << 3,
    KEY_AS = 1 << 4,
    KEY_DTYPE = 1 << 5,
    KEY_COUNT = 1 << 6,
    KEY_BYTES = 1 << 7,
    KEY_RANGE = 1 << 8,
    KEY_ERROR = 1 << 9,
    KEY_VERSION = 1 << 10,
    KEY_FLAGS = 1 << 11,
    KEY_PATTERN = 1 << 12,
    KEY_INCARNATION = 1 << 13,
};

static const char *const frame_keys[] = {"type",    "id",    "from",    "to",         "as",
                                         "dtype",   "count", "bytes",   "range",      "error",
                                         "version", "flags", "pattern", "incarnation"};

/* Decodes the value of key number k. */
static bool frame_value(struct mp_cursor *c, int k, struct frame_header *h, uint64_t *range_count)
{
    switch (k) {
    case 0:
        return mp_type(c, h);
    case 1:
        return mp_uint(c, &h->id);
    case 2:
        return mp_strcpy(c, h->from, sizeof h->from);
    case 3:
        return mp_strcpy(c, h->to, sizeof h->to);
    case 4:
        return mp_strcpy(c, h->as, sizeof h->as);
    case 5:
        return mp_str_is(c, "f32");
    case 6:
        return mp_uint(c, &h->count);
    case 7:
        return mp_uint(c, &h->bytes);
    case 8:
        return mp_range(c, h, range_count);
    case 9:
        return mp_strcpy(c, h->error, sizeof h->error);
    case 10:
        return mp_uint(c, &h->version);
    case 12:
        return mp_uint(c, &h->pattern);
    case 13:
        return mp_uint(c, &h->incarnation);
    default:
        return mp_uint(c, &h->flags);
    }
}

static int frame_key(struct mp_cursor *c)
{
    const char *s;
    size_t len;
    if (!mp_str(c, &s, &len)) return -1;
    for (int k = 0; k < (int)(sizeof frame_keys / sizeof *frame_keys); k++)
        if (strlen(frame_keys[k]) == len && memcmp(frame_keys[k], s, len) == 0) return k;
    return -1;
}

/* The cross-field rules of frame.h. */
static bool frame_check(const struct frame_header *h, unsigned seen, uint64_t range_count,
                        char *err, size_t errlen)
{
    unsigned tensor_keys =
        KEY_TYPE | KEY_ID | KEY_FROM | KEY_AS | KEY_DTYPE | KEY_COUNT | KEY_BYTES | KEY_VERSION;
    if (h->type == FRAME_ACK) {
        if ((seen & (KEY_TYPE | KEY_ID)) != (KEY_TYPE | KEY_ID) ||
            (seen & ~(KEY_TYPE | KEY_ID | KEY_BYTES | KEY_ERROR)))
            return frame_fail(err, errlen, "ack frame with missing or unexpected keys");
        if (h->bytes != 0) return frame_fail(err, errlen, "ack frame with a payload");
        return true;
    }
    if ((seen & tensor_keys) != tensor_keys || (seen & KEY_ERROR))
        return frame_fail(err, errlen, "tensor frame with missing or unexpected keys");
    if (h->as[0] == '\0' || h->from[0] == '\0')
        return frame_fail(err, errlen, "tensor frame with an empty name");
    if (h->count > STORE_MAX_ELEMENTS || h->bytes != h->count * sizeof(float))
        return frame_fail(err, errlen,
                          "tensor frame of %" PRIu64 " elements announces %" PRIu64 " bytes",
                          h->count, h->bytes);
    if (h->has_range && (range_count != h->count || h->offset > STORE_MAX_ELEMENTS))
        return frame_fail(err, errlen, "tensor frame with a range that does not match its count");
    if (h->pattern > h->count)
        return frame_fail(err, errlen,
                          "tensor frame with a pattern of %" PRIu64 " elements of %" PRIu64,
                          h->pattern, h->count);
    if (h->flags & ~(uint64_t)FRAME_FLAGS_KNOWN)
        return frame_fail(err, errlen, "tensor frame with unknown flags %#" PRIx64, h->flags);
    return true;
}

int frame_header_decode(const uint8_t *buf, size_t len, struct frame_header *h, char *err,
                        size_t errlen)
{
    *h = (struct frame_header){0};
    struct mp_cursor c = {buf, buf + len};
    uint32_t n;
    unsigned seen = 0;
    uint64_t range_count = 0;
    if (!mp_container(&c, 0x80, 0x8f, 0xde, &n))
        return frame_fail(err, errlen, "frame header is not a map"), -1;
    for (uint32_t i = 0; i < n; i++) {
        int k = frame_key(&c);
        if (k < 0) return frame_fail(err, errlen, "frame header with an unknown key"), -1;
        if (seen & (1u << k))
            return frame_fail(err, errlen, "frame header repeats key '%s'", frame_keys[k]), -1;
        seen |= 1u << k;
        if (!frame_value(&c, k, h, &range_count))
            return frame_fail(err, errlen, "frame header: bad value for '%s'", frame_keys[k]), -1;
    }
    if (c.p != c.end) return frame_fail(err, errlen, "frame header has trailing bytes"), -1;
    return frame_check(h, seen, range_count, err, errlen) ? 0 : -1;
}
