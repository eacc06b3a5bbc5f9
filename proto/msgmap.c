/* msgmap.c — the counting MessagePack map builder (msgmap.h). */
#include "proto/msgmap.h"

#include <stdlib.h>
#include <string.h>

#include "proto/protocol.h"

static int msgmap_write(void *data, const char *bytes, size_t len)
{
    struct msgmap *m = data;
    if (m->failed) return -1;
    if (len > m->cap - m->len) {
        size_t cap = m->cap * 2;
        while (cap - m->len < len)
            cap *= 2;
        char *grown = m->data == m->inline_buf ? malloc(cap) : realloc(m->data, cap);
        if (!grown) {
            m->failed = true;
            return -1;
        }
        if (m->data == m->inline_buf) memcpy(grown, m->inline_buf, m->len);
        m->data = grown;
        m->cap = cap;
    }
    memcpy(m->data + m->len, bytes, len);
    m->len += len;
    return 0;
}

void msgmap_init(struct msgmap *m)
{
    m->n = 0;
    m->failed = false;
    m->data = m->inline_buf;
    m->len = 0;
    m->cap = sizeof m->inline_buf;
    msgpack_packer_init(&m->pk, m, msgmap_write);
}

void msgmap_free(struct msgmap *m)
{
    if (m->data != m->inline_buf) free(m->data);
    m->data = m->inline_buf;
    m->len = 0;
    m->cap = sizeof m->inline_buf;
}

void msgmap_key(struct msgmap *m, const char *key)
{
    proto_pack_str(&m->pk, key);
    m->n++;
}

void msgmap_str(struct msgmap *m, const char *key, const char *value)
{
    msgmap_key(m, key);
    proto_pack_str(&m->pk, value);
}

void msgmap_strn(struct msgmap *m, const char *key, const char *value, size_t len)
{
    msgmap_key(m, key);
    msgpack_pack_str(&m->pk, len);
    msgpack_pack_str_body(&m->pk, value, len);
}

void msgmap_i64(struct msgmap *m, const char *key, int64_t value)
{
    msgmap_key(m, key);
    msgpack_pack_int64(&m->pk, value);
}

void msgmap_u64(struct msgmap *m, const char *key, uint64_t value)
{
    msgmap_key(m, key);
    msgpack_pack_uint64(&m->pk, value);
}

void msgmap_f64(struct msgmap *m, const char *key, double value)
{
    msgmap_key(m, key);
    msgpack_pack_double(&m->pk, value);
}

void msgmap_bool(struct msgmap *m, const char *key, bool value)
{
    msgmap_key(m, key);
    value ? msgpack_pack_true(&m->pk) : msgpack_pack_false(&m->pk);
}

void msgmap_nil(struct msgmap *m, const char *key)
{
    msgmap_key(m, key);
    msgpack_pack_nil(&m->pk);
}

void msgmap_bin(struct msgmap *m, const char *key, const void *value, size_t len)
{
    msgmap_key(m, key);
    msgpack_pack_bin(&m->pk, len);
    msgpack_pack_bin_body(&m->pk, value, len);
}

void msgmap_append(struct msgmap *m, const struct msgmap *src)
{
    if (src->failed)
        m->failed = true;
    else if (src->len)
        msgmap_write(m, src->data, src->len);
    m->n += src->n;
}

void msgmap_raw(struct msgmap *m, const void *bytes, size_t len)
{
    if (len) msgmap_write(m, bytes, len);
}

bool msgmap_end(struct msgmap *m, msgpack_packer *out)
{
    bool ok = !m->failed;
    if (ok) {
        msgpack_pack_map(out, m->n);
        if (m->len) out->callback(out->data, m->data, m->len);
    }
    msgmap_free(m);
    return ok;
}

/* The envelopes open the map with the count; the entries follow. */
static bool msgmap_body(struct msgmap *m, msgpack_packer *out)
{
    if (m->len) out->callback(out->data, m->data, m->len);
    msgmap_free(m);
    return true;
}

bool msgmap_request(struct msgmap *m, msgpack_packer *out, uint32_t msgid, const char *method)
{
    if (m->failed) return msgmap_free(m), false;
    proto_pack_request_begin(out, msgid, method, m->n);
    return msgmap_body(m, out);
}

bool msgmap_notify(struct msgmap *m, msgpack_packer *out, const char *method)
{
    if (m->failed) return msgmap_free(m), false;
    proto_pack_notify_begin(out, method, m->n);
    return msgmap_body(m, out);
}

bool msgmap_response(struct msgmap *m, msgpack_packer *out, uint32_t msgid)
{
    if (m->failed) return msgmap_free(m), false;
    proto_pack_response_begin(out, msgid, m->n);
    return msgmap_body(m, out);
}
