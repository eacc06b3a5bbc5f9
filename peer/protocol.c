/* protocol.c — MessagePack-RPC codec of the control channel (see protocol.h). */
#include "peer/protocol.h"

#include <stdio.h>
#include <string.h>

/* ---- reader ---- */

int proto_reader_init(struct proto_reader *r, size_t max_message)
{
    r->max_message = max_message ? max_message : PROTO_MAX_MESSAGE;
    if (!msgpack_unpacker_init(&r->unpacker, 64 * 1024)) return -1;
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
    if (e[2].type != MSGPACK_OBJECT_NIL && e[2].type != MSGPACK_OBJECT_STR)
        return invalid(err, errlen, "error is neither nil nor a string");
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
    msgpack_unpack_return ret = msgpack_unpacker_next(&r->unpacker, &r->unpacked);
    switch (ret) {
    case MSGPACK_UNPACK_SUCCESS:
        return proto_decode(&r->unpacked.data, msg, has_msgid, err, errlen);
    case MSGPACK_UNPACK_CONTINUE:
        /* message_size counts the bytes of the message being parsed so far. */
        if (msgpack_unpacker_message_size(&r->unpacker) > r->max_message) {
            snprintf(err, errlen, "message larger than %zu bytes", r->max_message);
            return PROTO_NEXT_FATAL;
        }
        return PROTO_NEXT_MORE;
    case MSGPACK_UNPACK_NOMEM_ERROR:
        snprintf(err, errlen, "out of memory decoding a message");
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

void proto_pack_error(msgpack_packer *pk, uint32_t msgid, const char *message)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint8(pk, PROTO_RESPONSE);
    msgpack_pack_uint32(pk, msgid);
    proto_pack_str(pk, message);
    msgpack_pack_nil(pk);
}

void proto_pack_kv_str(msgpack_packer *pk, const char *key, const char *value)
{
    proto_pack_str(pk, key);
    proto_pack_str(pk, value);
}

void proto_pack_kv_i64(msgpack_packer *pk, const char *key, int64_t value)
{
    proto_pack_str(pk, key);
    msgpack_pack_int64(pk, value);
}

void proto_pack_kv_f64(msgpack_packer *pk, const char *key, double value)
{
    proto_pack_str(pk, key);
    msgpack_pack_double(pk, value);
}

/* ---- dispatch ---- */

const struct proto_method *proto_method_find(const struct proto_method *table, const char *name,
                                             uint32_t len)
{
    for (const struct proto_method *m = table; m->name; m++)
        if (strlen(m->name) == len && memcmp(m->name, name, len) == 0) return m;
    return NULL;
}

/* ---- typed arguments ---- */

const char *proto_type_name(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "boolean";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "number";
    case MSGPACK_OBJECT_STR: return "string";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "binary";
    case MSGPACK_OBJECT_EXT: return "ext";
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
            memcmp(k->via.str.ptr, key, klen) == 0)
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
    if (len >= cap || memchr(s, '\0', len)) {
        snprintf(a->err, sizeof a->err, "param '%s': string too long or holds NUL (max %zu)", key,
                 cap - 1);
        return -1;
    }
    memcpy(dst, s, len);
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
    /* Lua numbers like 3.0 arrive as floats; accept them when integral. */
    if ((o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32) &&
        o->via.f64 == (double)(int64_t)o->via.f64) {
        *out = (int64_t)o->via.f64;
        return 1;
    }
    return wrong_type(a, key, "integer", o);
}

int proto_arg_f64(struct proto_args *a, const char *key, double *out)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; return 1;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; return 1;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; return 1;
    default: return wrong_type(a, key, "number", o);
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

int proto_arg_range(struct proto_args *a, const char *key, uint64_t *offset, uint64_t *count)
{
    const msgpack_object *o = arg_lookup(a, key);
    if (!o) return 0;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2)
        return wrong_type(a, key, "{offset, count}", o);
    const msgpack_object *e = o->via.array.ptr;
    for (int i = 0; i < 2; i++) {
        bool integral_float = (e[i].type == MSGPACK_OBJECT_FLOAT64) && e[i].via.f64 >= 0 &&
                              e[i].via.f64 == (double)(uint64_t)e[i].via.f64;
        if (e[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER && !integral_float) {
            snprintf(a->err, sizeof a->err,
                     "param '%s': expected {offset, count} of non-negative integers", key);
            return -1;
        }
    }
    *offset = e[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER ? e[0].via.u64 : (uint64_t)e[0].via.f64;
    *count = e[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER ? e[1].via.u64 : (uint64_t)e[1].via.f64;
    return 1;
}

bool proto_args_missing(struct proto_args *a, const char *key)
{
    snprintf(a->err, sizeof a->err, "param '%s': missing", key);
    return false;
}
