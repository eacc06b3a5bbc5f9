/* msgmap.c — the counting MessagePack map builder (msgmap.h). */
#include "proto/msgmap.h"

#include <stdlib.h>
#include <string.h>

#include "proto/protocol.h"

void msgmap_init(struct msgmap *m)
{
    m->n = 0;
    growbuf_init(&m->buf, m->inline_buf, sizeof m->inline_buf);
    msgpack_packer_init(&m->pk, &m->buf, growbuf_write);
}

void msgmap_free(struct msgmap *m)
{
    growbuf_free(&m->buf);
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
    if (src->buf.failed)
        m->buf.failed = true;
    else
        growbuf_append(&m->buf, src->buf.data, src->buf.len);
    m->n += src->n;
}

void msgmap_raw(struct msgmap *m, const void *bytes, size_t len)
{
    growbuf_append(&m->buf, bytes, len);
}

bool msgmap_end(struct msgmap *m, msgpack_packer *out)
{
    bool ok = !m->buf.failed;
    if (ok) {
        msgpack_pack_map(out, m->n);
        if (m->buf.len) out->callback(out->data, m->buf.data, m->buf.len);
    }
    msgmap_free(m);
    return ok;
}

/* The envelopes open the map with the count; the entries follow. */
static bool msgmap_body(struct msgmap *m, msgpack_packer *out)
{
    if (m->buf.len) out->callback(out->data, m->buf.data, m->buf.len);
    msgmap_free(m);
    return true;
}

bool msgmap_request(struct msgmap *m, msgpack_packer *out, uint32_t msgid, const char *method)
{
    if (m->buf.failed) return msgmap_free(m), false;
    proto_pack_request_begin(out, msgid, method, m->n);
    return msgmap_body(m, out);
}

bool msgmap_notify(struct msgmap *m, msgpack_packer *out, const char *method)
{
    if (m->buf.failed) return msgmap_free(m), false;
    proto_pack_notify_begin(out, method, m->n);
    return msgmap_body(m, out);
}

bool msgmap_error_response(struct msgmap *m, msgpack_packer *out, uint32_t msgid)
{
    if (m->buf.failed) return msgmap_free(m), false;
    proto_pack_error_map_begin(out, msgid);
    bool ok = msgmap_end(m, out); /* cannot fail now: its buffer is whole */
    msgpack_pack_nil(out);        /* the result */
    return ok;
}

bool msgmap_response(struct msgmap *m, msgpack_packer *out, uint32_t msgid)
{
    if (m->buf.failed) return msgmap_free(m), false;
    proto_pack_response_begin(out, msgid, m->n);
    return msgmap_body(m, out);
}
