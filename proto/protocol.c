/* protocol.c — MessagePack-RPC codec of the control channel (see protocol.h). */
#include "proto/protocol.h"

#include "proto/msgmap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- reader ---- */

int proto_reader_init(struct proto_reader *r, size_t max_message)
{
    r->max_message = max_message ? max_message : PROTO_MAX_MESSAGE;
    r->scan_len = 0;
    r->scan_pending = 1;
    /* Small at first: a controller holds one reader per peer, thousands of
     * them; the buffer grows with the messages. */
    if (!msgpack_unpacker_init(&r->unpacker, 4096)) return -1;
    msgpack_unpacked_init(&r->unpacked);
    return 0;
}

void proto_reader_destroy(struct proto_reader *r)
{
    msgpack_unpacked_destroy(&r->unpacked);
    msgpack_unpacker_destroy(&r->unpacker);
}

char *proto_reader_buffer(struct proto_reader *r, size_t want, size_t *avail)
{
    if (msgpack_unpacker_buffer_capacity(&r->unpacker) < want &&
        !msgpack_unpacker_reserve_buffer(&r->unpacker, want))
        return NULL;
    *avail = msgpack_unpacker_buffer_capacity(&r->unpacker);
    return msgpack_unpacker_buffer(&r->unpacker);
}

void proto_reader_consumed(struct proto_reader *r, size_t n)
{
    msgpack_unpacker_buffer_consumed(&r->unpacker, n);
}

/* ---- framing ----
 * msgpack-c allocates a container's element array as soon as it reads the
 * header, so a 5-byte "array of 4 billion elements" makes it reserve ~100 GB
 * before any size check can run. The reader therefore first walks the raw
 * bytes without allocating and hands a message to msgpack-c only once it is
 * complete and within max_message. Every pending item needs at least one more
 * byte, which bounds what any header may claim. */

struct frame_item {
    uint32_t header;   /* bytes of type, length field and ext type */
    uint64_t payload;  /* raw bytes after the header (str, bin, ext) */
    uint64_t children; /* items that follow (array elements, map keys and values) */
};

/* Item shapes of the prefix bytes 0xc0..0xdf: header bytes, bytes of the
 * big-endian length field after the type byte, and what the length counts
 * (0: payload bytes, 1: array elements, 2: map entries, i.e. 2 items each).
 * header 0 marks 0xc1, the byte msgpack never uses. */
static const struct {
    uint8_t header, len_bytes, per;
} frame_shapes[32] = {
    {1, 0, 0},  {0, 0, 0}, {1, 0, 0}, {1, 0, 0},  /* nil, (unused), false, true */
    {2, 1, 0},  {3, 2, 0}, {5, 4, 0},             /* bin 8/16/32 */
    {3, 1, 0},  {4, 2, 0}, {6, 4, 0},             /* ext 8/16/32 */
    {5, 0, 0},  {9, 0, 0},                        /* float 32/64 */
    {2, 0, 0},  {3, 0, 0}, {5, 0, 0}, {9, 0, 0},  /* uint 8..64 */
    {2, 0, 0},  {3, 0, 0}, {5, 0, 0}, {9, 0, 0},  /* int 8..64 */
    {3, 0, 0},  {4, 0, 0}, {6, 0, 0}, {10, 0, 0}, /* fixext 1/2/4/8 */
    {18, 0, 0},                                   /* fixext 16 */
    {2, 1, 0},  {3, 2, 0}, {5, 4, 0},             /* str 8/16/32 */
    {3, 2, 1},  {5, 4, 1},                        /* array 16/32 */
    {3, 2, 2},  {5, 4, 2},                        /* map 16/32 */
};

/* Shape of the item at p (avail bytes buffered). Returns 1, 0 when its header
 * is not complete yet, -1 for a byte that starts no msgpack item. */
static int frame_item_read(const uint8_t *p, size_t avail, struct frame_item *it)
{
    if (avail == 0) return 0;
    uint8_t b = p[0];
    *it = (struct frame_item){.header = 1};
    if (b >= 0x80 && b <= 0x8f) it->children = 2u * (b & 0x0f); /* fixmap */
    if (b >= 0x90 && b <= 0x9f) it->children = b & 0x0f;        /* fixarray */
    if (b >= 0xa0 && b <= 0xbf) it->payload = b & 0x1f;         /* fixstr */
    if (b < 0xc0 || b >= 0xe0) return 1;                        /* and the fixints */
    uint8_t shape = b - 0xc0;
    it->header = frame_shapes[shape].header;
    if (it->header == 0) return -1;
    if (frame_shapes[shape].len_bytes == 0) return 1;
    if (avail < it->header) return 0;
    uint64_t len = 0;
    for (int i = 1; i <= frame_shapes[shape].len_bytes; i++)
        len = (len << 8) | p[i];
    if (frame_shapes[shape].per == 0)
        it->payload = len;
    else
        it->children = len * frame_shapes[shape].per;
    return 1;
}

int proto_object_scan(const void *bytes, size_t len, size_t *object_len)
{
    const uint8_t *buf = bytes;
    uint64_t pending = 1;
    size_t at = 0;
    while (pending > 0) {
        struct frame_item it;
        int got = frame_item_read(buf + at, len - at, &it);
        if (got <= 0) return got;
        if (it.header + it.payload > len - at) return 0;
        at += it.header + it.payload;
        pending = pending - 1 + it.children;
        if (pending > len - at) return 0; /* each pending item needs a byte */
    }
    *object_len = at;
    return 1;
}

static int frame_too_large(const struct proto_reader *r, char *err, size_t errlen)
{
    snprintf(err, errlen, "message larger than %zu bytes", r->max_message);
    return -1;
}

/* Advances the scan of the message at the start of the unparsed bytes.
 * Returns 1 when all r->scan_len bytes of it are buffered, 0 when more are
 * needed, -1 (err set) when it is oversized or not msgpack. Positions are
 * relative to the unpacker's `off`, so buffer reallocation does not matter. */
static int frame_scan(struct proto_reader *r, char *err, size_t errlen)
{
    const uint8_t *buf = (const uint8_t *)r->unpacker.buffer + r->unpacker.off;
    size_t avail = r->unpacker.used - r->unpacker.off;
    while (r->scan_pending > 0) {
        struct frame_item it;
        int got = frame_item_read(buf + r->scan_len, avail - r->scan_len, &it);
        if (got < 0) {
            snprintf(err, errlen, "unparsable msgpack data");
            return -1;
        }
        if (got == 0) return 0;
        uint64_t len = it.header + it.payload;
        if (len > r->max_message - r->scan_len) return frame_too_large(r, err, errlen);
        if (len > avail - r->scan_len) return 0;
        r->scan_len += len;
        r->scan_pending = r->scan_pending - 1 + it.children;
        if (r->scan_pending > r->max_message - r->scan_len) return frame_too_large(r, err, errlen);
    }
    return 1;
}

static bool is_uint32(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= UINT32_MAX;
}

static enum proto_next invalid(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "malformed message: %s", what);
    return PROTO_NEXT_INVALID;
}

/* Checks the envelope of a complete message and fills *msg. */
static enum proto_next proto_decode(const msgpack_object *o, struct proto_msg *msg, bool *has_msgid,
                                    char *err, size_t errlen)
{
    memset(msg, 0, sizeof *msg);
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 3)
        return invalid(err, errlen, "not an array of 3 or 4 elements");
    const msgpack_object *e = o->via.array.ptr;
    uint32_t n = o->via.array.size;
    if (e[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || e[0].via.u64 > PROTO_NOTIFY)
        return invalid(err, errlen, "unknown message type");
    msg->kind = (enum proto_kind)e[0].via.u64;

    if (msg->kind == PROTO_NOTIFY) {
        if (n != 3) return invalid(err, errlen, "notification must have 3 elements");
        if (e[1].type != MSGPACK_OBJECT_STR) return invalid(err, errlen, "method is not a string");
        if (e[2].type != MSGPACK_OBJECT_MAP) return invalid(err, errlen, "params is not a map");
        msg->method = e[1].via.str.ptr;
        msg->method_len = e[1].via.str.size;
        msg->params = &e[2];
        return PROTO_NEXT_MESSAGE;
    }
    if (n != 4) return invalid(err, errlen, "request/response must have 4 elements");
    if (!is_uint32(&e[1])) return invalid(err, errlen, "msgid is not a 32-bit unsigned integer");
    msg->msgid = (uint32_t)e[1].via.u64;
    *has_msgid = true;
    if (msg->kind == PROTO_REQUEST) {
        if (e[2].type != MSGPACK_OBJECT_STR) return invalid(err, errlen, "method is not a string");
        if (e[3].type != MSGPACK_OBJECT_MAP) return invalid(err, errlen, "params is not a map");
        msg->method = e[2].via.str.ptr;
        msg->method_len = e[2].via.str.size;
        msg->params = &e[3];
        return PROTO_NEXT_MESSAGE;
    }
    if (e[2].type != MSGPACK_OBJECT_NIL && e[2].type != MSGPACK_OBJECT_STR &&
        e[2].type != MSGPACK_OBJECT_MAP)
        return invalid(err, errlen, "error is neither nil, a string nor a map");
    if (e[2].type == MSGPACK_OBJECT_NIL && e[3].type != MSGPACK_OBJECT_MAP)
        return invalid(err, errlen, "result is not a map");
    msg->error = &e[2];
    msg->result = &e[3];
    return PROTO_NEXT_MESSAGE;
}

enum proto_next proto_reader_next(struct proto_reader *r, struct proto_msg *msg, bool *has_msgid,
                                  char *err, size_t errlen)
{
    *has_msgid = false;
    int framed = frame_scan(r, err, errlen);
    if (framed < 0) return PROTO_NEXT_FATAL;
    if (framed == 0) return PROTO_NEXT_MORE;
    r->scan_len = 0;
    r->scan_pending = 1;
    /* The message is complete, so anything but SUCCESS is a decoder failure;
     * msgpack-c reports nesting deeper than 32 levels as NOMEM too. */
    switch (msgpack_unpacker_next(&r->unpacker, &r->unpacked)) {
    case MSGPACK_UNPACK_SUCCESS:
        return proto_decode(&r->unpacked.data, msg, has_msgid, err, errlen);
    case MSGPACK_UNPACK_NOMEM_ERROR:
        snprintf(err, errlen, "cannot decode message: out of memory or nested too deeply");
        return PROTO_NEXT_FATAL;
    default:
        snprintf(err, errlen, "unparsable msgpack data");
        return PROTO_NEXT_FATAL;
    }
}

/* ---- encoding ---- */

void proto_pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void proto_pack_request_begin(msgpack_packer *pk, uint32_t msgid, const char *method,
                              uint32_t n_entries)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, PROTO_REQUEST);
    msgpack_pack_uint32(pk, msgid);
    proto_pack_str(pk, method);
    msgpack_pack_map(pk, n_entries);
}

void proto_pack_notify_begin(msgpack_packer *pk, const char *method, uint32_t n_entries)
{
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint8(pk, PROTO_NOTIFY);
    proto_pack_str(pk, method);
    msgpack_pack_map(pk, n_entries);
}

void proto_pack_response_begin(msgpack_packer *pk, uint32_t msgid, uint32_t n_entries)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, PROTO_RESPONSE);
    msgpack_pack_uint32(pk, msgid);
    msgpack_pack_nil(pk);
    msgpack_pack_map(pk, n_entries);
}

void proto_pack_error_map_begin(msgpack_packer *pk, uint32_t msgid)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, PROTO_RESPONSE);
    msgpack_pack_uint32(pk, msgid);
}

void proto_pack_error(msgpack_packer *pk, uint32_t msgid, const char *message)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, PROTO_RESPONSE);
    msgpack_pack_uint32(pk, msgid);
    proto_pack_str(pk, message);
    msgpack_pack_nil(pk);
}

/* ---- dispatch ----
 * msgpack-c gives an empty string a NULL pointer, and the mem* functions
 * must not see NULL even with length 0, hence the length tests below. */

bool proto_method_is(const char *name, const char *method, uint32_t len)
{
    /* memcmp, not strncmp: a method may hold a NUL byte ("ping\0x"), on
     * which strncmp would stop and name[len] be read past its end. */
    return len > 0 && method && strlen(name) == len && memcmp(name, method, len) == 0;
}

/* ---- typed arguments ---- */

const char *proto_type_name(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL:
        return "nil";
    case MSGPACK_OBJECT_BOOLEAN:
        return "boolean";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return "integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return "number";
    case MSGPACK_OBJECT_STR:
        return "string";
    case MSGPACK_OBJECT_ARRAY:
        return "array";
    case MSGPACK_OBJECT_MAP:
        return "map";
    case MSGPACK_OBJECT_BIN:
        return "binary";
    case MSGPACK_OBJECT_EXT:
        return "ext";
    }
    return "unknown";
}

void proto_args_init(struct proto_args *a, const msgpack_object *map)
{
    a->map = map;
    a->err[0] = '\0';
}

const msgpack_object *proto_args_get(const struct proto_args *a, const char *key)
{
    if (!a->map || a->map->type != MSGPACK_OBJECT_MAP) return NULL;
    size_t klen = strlen(key);
    const msgpack_object_map *m = &a->map->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
            (klen == 0 || memcmp(k->via.str.ptr, key, klen) == 0))
            return &m->ptr[i].val;
    }
    return NULL;
}

static int wrong_type(struct proto_args *a, const char *key, const char *want,
                      const msgpack_object *o)
{
    snprintf(a->err, sizeof a->err, "param '%s': expected %s, got %s", key, want,
             proto_type_name(o->type));
    return -1;
}

static bool is_float(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32;
}

/* An absent key and an explicit nil both mean "not given". */
static const msgpack_object *arg_lookup(const struct proto_args *a, const char *key)
{
    const msgpack_object *o = proto_args_get(a, key);
    return (o && o->type != MSGPACK_OBJECT_NIL) ? o : NULL;
}

int proto_arg_str(struct proto_args *a, const char *key, const char **s, uint32_t *len)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type != MSGPACK_OBJECT_STR) return wrong_type(a, key, "string", o);
    *s = o->via.str.ptr;
    *len = o->via.str.size;
    return 1;
}

int proto_arg_strcpy(struct proto_args *a, const char *key, char *dst, size_t cap)
{
    const char *s;
    uint32_t len;
    int r = proto_arg_str(a, key, &s, &len);
    if (r != 1) return r;
    if (len >= cap || (len > 0 && memchr(s, '\0', len))) {
        snprintf(a->err, sizeof a->err, "param '%s': string too long or holds NUL (max %zu)", key,
                 cap - 1);
        return -1;
    }
    if (len > 0) memcpy(dst, s, len);
    dst[len] = '\0';
    return 1;
}

int proto_arg_i64(struct proto_args *a, const char *key, int64_t *out)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > INT64_MAX) return wrong_type(a, key, "64-bit integer", o);
        *out = (int64_t)o->via.u64;
        return 1;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return 1;
    }
    /* Lua numbers like 3.0 arrive as floats; accept them when integral. The
     * range test comes first: casting an out-of-range double is undefined. */
    if (is_float(o) && o->via.f64 >= -0x1p63 && o->via.f64 < 0x1p63 &&
        o->via.f64 == (double)(int64_t)o->via.f64) {
        *out = (int64_t)o->via.f64;
        return 1;
    }
    return wrong_type(a, key, "integer", o);
}

int proto_arg_u64(struct proto_args *a, const char *key, uint64_t *out)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        *out = o->via.u64;
        return 1;
    }
    if (is_float(o) && o->via.f64 >= 0 && o->via.f64 < 0x1p64 &&
        o->via.f64 == (double)(uint64_t)o->via.f64) {
        *out = (uint64_t)o->via.f64;
        return 1;
    }
    return wrong_type(a, key, "non-negative integer", o);
}

int proto_arg_bin(struct proto_args *a, const char *key, const void **bytes, uint32_t *len)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type != MSGPACK_OBJECT_BIN) return wrong_type(a, key, "binary", o);
    *bytes = o->via.bin.ptr;
    *len = o->via.bin.size;
    return 1;
}

void proto_error_text(const msgpack_object *error, char *buf, size_t cap)
{
    const char *s = NULL;
    uint32_t len = 0;
    if (error && error->type == MSGPACK_OBJECT_STR) {
        s = error->via.str.ptr;
        len = error->via.str.size;
    } else if (error && error->type == MSGPACK_OBJECT_MAP) {
        struct proto_args a;
        proto_args_init(&a, error);
        if (proto_arg_str(&a, "message", &s, &len) != 1) s = NULL;
    }
    if (!s || len == 0)
        snprintf(buf, cap, "%s",
                 error && error->type == MSGPACK_OBJECT_MAP ? "error without a message" : "error");
    else
        snprintf(buf, cap, "%.*s", (int)len, s);
}

int proto_arg_f64(struct proto_args *a, const char *key, double *out)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *out = (double)o->via.u64;
        return 1;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *out = (double)o->via.i64;
        return 1;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *out = o->via.f64;
        return 1;
    default:
        return wrong_type(a, key, "number", o);
    }
}

int proto_arg_bool(struct proto_args *a, const char *key, bool *out)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type != MSGPACK_OBJECT_BOOLEAN) return wrong_type(a, key, "boolean", o);
    *out = o->via.boolean;
    return 1;
}

/* A non-negative integer, also written as an integral float (Lua 3.0). */
static bool count_value(const msgpack_object *o, uint64_t *out)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        *out = o->via.u64;
        return true;
    }
    if (is_float(o) && o->via.f64 >= 0 && o->via.f64 < 0x1p64 &&
        o->via.f64 == (double)(uint64_t)o->via.f64) {
        *out = (uint64_t)o->via.f64;
        return true;
    }
    return false;
}

int proto_arg_range(struct proto_args *a, const char *key, uint64_t *offset, uint64_t *count)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2)
        return wrong_type(a, key, "{offset, count}", o);
    uint64_t off, cnt;
    if (!count_value(&o->via.array.ptr[0], &off) || !count_value(&o->via.array.ptr[1], &cnt)) {
        snprintf(a->err, sizeof a->err,
                 "param '%s': expected {offset, count} of non-negative integers", key);
        return -1;
    }
    *offset = off;
    *count = cnt;
    return 1;
}

bool proto_args_missing(struct proto_args *a, const char *key)
{
    snprintf(a->err, sizeof a->err, "param '%s': missing", key);
    return false;
}

void proto_write_fatal(int fd, const char *message)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "error", message);
    msgmap_notify(&m, &pk, "fatal"); /* out of memory: nothing to write, as the comment says */
    for (size_t done = 0; done < sb.size;) {
        ssize_t n = write(fd, sb.data + done, sb.size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    msgpack_sbuffer_destroy(&sb);
}
