/* test_protocol.c — the control-protocol codec (proto/protocol.{h,c}):
 * round trips, streaming (truncation, byte-by-byte), limits, malformed
 * envelopes, method lookup and the typed argument getters. */
#include "proto/protocol.h"
#include "tests/unit/check.h"
#include "tests/unit/pack_kv.h"

#include <stdint.h>

/* ---- helpers ---- */

struct packed {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void packed_init(struct packed *p)
{
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void feed(struct proto_reader *r, const void *data, size_t n)
{
    size_t avail = 0;
    char *buf = proto_reader_buffer(r, n ? n : 1, &avail);
    CHECK(buf != NULL && avail >= n);
    if (!buf) return;
    memcpy(buf, data, n);
    proto_reader_consumed(r, n);
}

struct decoded {
    enum proto_next next;
    struct proto_msg msg;
    bool has_msgid;
    char err[256];
};

static void next(struct proto_reader *r, struct decoded *d)
{
    d->err[0] = '\0';
    d->next = proto_reader_next(r, &d->msg, &d->has_msgid, d->err, sizeof d->err);
}

/* Decodes one complete message held in p with a fresh reader. */
static void decode_one(struct packed *p, struct proto_reader *r, struct decoded *d)
{
    CHECK(proto_reader_init(r, 0) == 0);
    feed(r, p->sb.data, p->sb.size);
    next(r, d);
}

static bool method_is(const struct proto_msg *m, const char *name)
{
    return m->method && m->method_len == strlen(name) &&
           memcmp(m->method, name, m->method_len) == 0;
}

/* A request [0, msgid, "axpy", {y: "w", alpha: 0.5, range: [2, 3]}]. */
static void pack_axpy(struct packed *p, uint32_t msgid)
{
    proto_pack_request_begin(&p->pk, msgid, "axpy", 3);
    pack_kv_str(&p->pk, "y", "w");
    pack_kv_f64(&p->pk, "alpha", 0.5);
    proto_pack_str(&p->pk, "range");
    msgpack_pack_array(&p->pk, 2);
    msgpack_pack_uint32(&p->pk, 2);
    msgpack_pack_uint32(&p->pk, 3);
}

/* ---- round trips ---- */

static void test_request_round_trip(void)
{
    struct packed p;
    packed_init(&p);
    pack_axpy(&p, 4000000000u);
    struct proto_reader r;
    struct decoded d;
    decode_one(&p, &r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE);
    CHECK(d.msg.kind == PROTO_REQUEST);
    CHECK(d.msg.msgid == 4000000000u);
    CHECK(method_is(&d.msg, "axpy"));
    CHECK(d.msg.params && d.msg.params->type == MSGPACK_OBJECT_MAP);
    CHECK(d.msg.params && d.msg.params->via.map.size == 3);
    struct proto_args a;
    proto_args_init(&a, d.msg.params);
    char y[8];
    double alpha = 0;
    uint64_t off = 0, cnt = 0;
    CHECK(proto_arg_strcpy(&a, "y", y, sizeof y) == 1);
    CHECK_STREQ(y, "w");
    CHECK(proto_arg_f64(&a, "alpha", &alpha) == 1 && alpha == 0.5);
    CHECK(proto_arg_range(&a, "range", &off, &cnt) == 1 && off == 2 && cnt == 3);
    next(&r, &d);
    CHECK(d.next == PROTO_NEXT_MORE);
    proto_reader_destroy(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_response_round_trip(void)
{
    struct packed p;
    packed_init(&p);
    proto_pack_response_begin(&p.pk, 7, 2);
    pack_kv_i64(&p.pk, "size", -12);
    pack_kv_str(&p.pk, "node", "edge1");
    struct proto_reader r;
    struct decoded d;
    decode_one(&p, &r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.kind == PROTO_RESPONSE && d.msg.msgid == 7);
    CHECK(d.msg.error && d.msg.error->type == MSGPACK_OBJECT_NIL);
    CHECK(d.msg.result && d.msg.result->type == MSGPACK_OBJECT_MAP);
    struct proto_args a;
    proto_args_init(&a, d.msg.result);
    int64_t size = 0;
    CHECK(proto_arg_i64(&a, "size", &size) == 1 && size == -12);
    proto_reader_destroy(&r);

    msgpack_sbuffer_clear(&p.sb);
    proto_pack_error(&p.pk, 8, "axpy: tensor 'g' not found");
    decode_one(&p, &r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.kind == PROTO_RESPONSE && d.msg.msgid == 8);
    CHECK(d.msg.error && d.msg.error->type == MSGPACK_OBJECT_STR);
    CHECK(d.msg.error && d.msg.error->via.str.size == strlen("axpy: tensor 'g' not found"));
    CHECK(d.msg.result && d.msg.result->type == MSGPACK_OBJECT_NIL);
    proto_reader_destroy(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_notification_round_trip(void)
{
    struct packed p;
    packed_init(&p);
    proto_pack_notify_begin(&p.pk, "recv", 1);
    pack_kv_str(&p.pk, "tensor", "g");
    struct proto_reader r;
    struct decoded d;
    decode_one(&p, &r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.kind == PROTO_NOTIFY);
    CHECK(method_is(&d.msg, "recv"));
    CHECK(d.msg.params && d.msg.params->via.map.size == 1);
    proto_reader_destroy(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

/* ---- streaming ---- */

static void test_several_in_one_buffer(void)
{
    struct packed p;
    packed_init(&p);
    for (uint32_t id = 1; id <= 3; id++)
        pack_axpy(&p, id);
    struct proto_reader r;
    struct decoded d;
    decode_one(&p, &r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.msgid == 1);
    next(&r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.msgid == 2);
    next(&r, &d);
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.msgid == 3);
    next(&r, &d);
    CHECK(d.next == PROTO_NEXT_MORE);
    proto_reader_destroy(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

/* Every proper prefix of a message is MORE; the rest completes it. */
static void test_every_prefix(void)
{
    struct packed p;
    packed_init(&p);
    pack_axpy(&p, 99);
    int more = 0, complete = 0;
    for (size_t k = 0; k < p.sb.size; k++) {
        struct proto_reader r;
        struct decoded d;
        CHECK(proto_reader_init(&r, 0) == 0);
        feed(&r, p.sb.data, k);
        next(&r, &d);
        more += d.next == PROTO_NEXT_MORE;
        feed(&r, p.sb.data + k, p.sb.size - k);
        next(&r, &d);
        complete += d.next == PROTO_NEXT_MESSAGE && d.msg.msgid == 99 && method_is(&d.msg, "axpy");
        proto_reader_destroy(&r);
    }
    CHECK_MSG(more == (int)p.sb.size, "%d of %zu prefixes gave MORE", more, p.sb.size);
    CHECK_MSG(complete == (int)p.sb.size, "%d of %zu completions", complete, p.sb.size);
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_byte_by_byte(void)
{
    struct packed p;
    packed_init(&p);
    for (uint32_t id = 1; id <= 5; id++)
        pack_axpy(&p, id);
    proto_pack_error(&p.pk, 6, "x");
    struct proto_reader r;
    CHECK(proto_reader_init(&r, 0) == 0);
    uint32_t seen = 0;
    bool in_order = true, bad = false;
    for (size_t i = 0; i < p.sb.size; i++) {
        feed(&r, p.sb.data + i, 1);
        struct decoded d;
        for (next(&r, &d); d.next == PROTO_NEXT_MESSAGE; next(&r, &d))
            in_order &= d.msg.msgid == ++seen;
        bad |= d.next != PROTO_NEXT_MORE;
    }
    CHECK(seen == 6 && in_order && !bad);
    proto_reader_destroy(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

/* ---- limits and broken streams ---- */

static enum proto_next feed_raw(size_t max, const void *bytes, size_t n, char *err)
{
    struct proto_reader r;
    struct decoded d;
    CHECK(proto_reader_init(&r, max) == 0);
    feed(&r, bytes, n);
    next(&r, &d);
    strcpy(err, d.err);
    proto_reader_destroy(&r);
    return d.next;
}

static void test_oversized(void)
{
    char err[256];
    /* A request whose params carry a 100-byte string, read with a 64-byte limit. */
    struct packed p;
    packed_init(&p);
    char big[101];
    memset(big, 'a', 100);
    big[100] = '\0';
    proto_pack_request_begin(&p.pk, 1, "tensor", 1);
    pack_kv_str(&p.pk, "name", big);
    CHECK(feed_raw(64, p.sb.data, p.sb.size, err) == PROTO_NEXT_FATAL);
    CHECK_CONTAINS(err, "larger than 64 bytes");
    /* Exactly at the limit passes, one byte under it does not. */
    CHECK(feed_raw(p.sb.size, p.sb.data, p.sb.size, err) == PROTO_NEXT_MESSAGE);
    CHECK(feed_raw(p.sb.size - 1, p.sb.data, p.sb.size, err) == PROTO_NEXT_FATAL);
    /* Only the header of a huge message arrived: fatal at once, not MORE. */
    CHECK(feed_raw(64, p.sb.data, 20, err) == PROTO_NEXT_FATAL);
    msgpack_sbuffer_destroy(&p.sb);
    /* Containers claiming more elements than the limit allows bytes: fatal
     * before msgpack-c would allocate room for them. */
    static const unsigned char huge_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    CHECK(feed_raw(64, huge_array, sizeof huge_array, err) == PROTO_NEXT_FATAL);
    CHECK(feed_raw(0, huge_array, sizeof huge_array, err) == PROTO_NEXT_FATAL);
    static const unsigned char huge_map[] = {0x94, 0x00, 0x01, 0xa1, 'x', 0xdf, 0x10, 0, 0, 0};
    CHECK(feed_raw(0, huge_map, sizeof huge_map, err) == PROTO_NEXT_FATAL);
    static const unsigned char huge_str[] = {0xdb, 0x7f, 0xff, 0xff, 0xff};
    CHECK(feed_raw(0, huge_str, sizeof huge_str, err) == PROTO_NEXT_FATAL);
    CHECK_CONTAINS(err, "larger than");
}

static void test_unparsable(void)
{
    char err[256];
    static const unsigned char never_used[] = {0x94, 0x00, 0x01, 0xc1, 0x80};
    CHECK(feed_raw(0, never_used, sizeof never_used, err) == PROTO_NEXT_FATAL);
    CHECK_CONTAINS(err, "unparsable");
    /* Nested deeper than msgpack-c decodes (32 levels). */
    unsigned char deep[40];
    memset(deep, 0x91, sizeof deep - 1);
    deep[sizeof deep - 1] = 0xc0;
    CHECK(feed_raw(0, deep, sizeof deep, err) == PROTO_NEXT_FATAL);
}

/* ---- malformed envelopes ---- */

/* Decodes p, which must hold a malformed message followed by a good one. */
static void expect_invalid(struct packed *p, bool has_msgid, uint32_t msgid, const char *why)
{
    pack_axpy(p, 555);
    struct proto_reader r;
    struct decoded d;
    decode_one(p, &r, &d);
    CHECK_MSG(d.next == PROTO_NEXT_INVALID, "%s: got %d", why, d.next);
    CHECK_MSG(d.has_msgid == has_msgid, "%s: has_msgid %d", why, d.has_msgid);
    if (has_msgid) CHECK_MSG(d.msg.msgid == msgid, "%s: msgid %u", why, d.msg.msgid);
    CHECK_CONTAINS(d.err, why);
    next(&r, &d); /* the stream goes on */
    CHECK(d.next == PROTO_NEXT_MESSAGE && d.msg.msgid == 555);
    proto_reader_destroy(&r);
    msgpack_sbuffer_clear(&p->sb);
}

static void pack_envelope(struct packed *p, int n, int kind)
{
    msgpack_pack_array(&p->pk, n);
    msgpack_pack_int(&p->pk, kind);
}

static void test_invalid_requests(void)
{
    struct packed p;
    packed_init(&p);
    pack_envelope(&p, 4, 0);
    proto_pack_str(&p.pk, "7"); /* msgid not an integer */
    proto_pack_str(&p.pk, "ping");
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, false, 0, "msgid is not");
    pack_envelope(&p, 4, 0);
    msgpack_pack_int(&p.pk, -1);
    proto_pack_str(&p.pk, "ping");
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, false, 0, "msgid is not");
    pack_envelope(&p, 4, 0);
    msgpack_pack_uint64(&p.pk, 1ull << 32);
    proto_pack_str(&p.pk, "ping");
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, false, 0, "msgid is not");
    pack_envelope(&p, 4, 0);
    msgpack_pack_int(&p.pk, 5);
    msgpack_pack_int(&p.pk, 42); /* method not a string */
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, true, 5, "method is not a string");
    pack_envelope(&p, 4, 0);
    msgpack_pack_int(&p.pk, 6);
    proto_pack_str(&p.pk, "ping");
    msgpack_pack_array(&p.pk, 0); /* params not a map */
    expect_invalid(&p, true, 6, "params is not a map");
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_invalid_shapes(void)
{
    struct packed p;
    packed_init(&p);
    pack_envelope(&p, 3, 0); /* a request of 3 elements */
    msgpack_pack_int(&p.pk, 7);
    proto_pack_str(&p.pk, "ping");
    expect_invalid(&p, false, 0, "must have 4 elements");
    pack_envelope(&p, 5, 0);
    msgpack_pack_int(&p.pk, 8);
    proto_pack_str(&p.pk, "ping");
    msgpack_pack_map(&p.pk, 0);
    msgpack_pack_nil(&p.pk);
    expect_invalid(&p, false, 0, "must have 4 elements");
    msgpack_pack_int(&p.pk, 42); /* not an array at all */
    expect_invalid(&p, false, 0, "not an array");
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, false, 0, "not an array");
    pack_envelope(&p, 2, 0);
    msgpack_pack_int(&p.pk, 9);
    expect_invalid(&p, false, 0, "not an array");
    pack_envelope(&p, 4, 3); /* unknown message type */
    msgpack_pack_int(&p.pk, 10);
    proto_pack_str(&p.pk, "ping");
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, false, 0, "unknown message type");
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_invalid_responses_and_notifications(void)
{
    struct packed p;
    packed_init(&p);
    pack_envelope(&p, 4, 1);
    msgpack_pack_int(&p.pk, 11);
    msgpack_pack_int(&p.pk, 3); /* error neither nil nor string */
    msgpack_pack_nil(&p.pk);
    expect_invalid(&p, true, 11, "error is neither");
    pack_envelope(&p, 4, 1);
    msgpack_pack_int(&p.pk, 12);
    msgpack_pack_nil(&p.pk);
    msgpack_pack_int(&p.pk, 3); /* result not a map */
    expect_invalid(&p, true, 12, "result is not a map");
    pack_envelope(&p, 4, 2);
    proto_pack_str(&p.pk, "recv");
    msgpack_pack_map(&p.pk, 0);
    msgpack_pack_nil(&p.pk);
    expect_invalid(&p, false, 0, "notification must have 3");
    pack_envelope(&p, 3, 2);
    msgpack_pack_int(&p.pk, 1);
    msgpack_pack_map(&p.pk, 0);
    expect_invalid(&p, false, 0, "method is not a string");
    pack_envelope(&p, 3, 2);
    proto_pack_str(&p.pk, "recv");
    msgpack_pack_nil(&p.pk);
    expect_invalid(&p, false, 0, "params is not a map");
    msgpack_sbuffer_destroy(&p.sb);
}

/* ---- method tables ---- */

static void test_method_find(void)
{
    CHECK(proto_method_is("ping", "ping", 4));
    CHECK(proto_method_is("sum", "sum_of_it", 3)); /* a prefix of a longer buffer */
    CHECK(!proto_method_is("ping", "pin", 3));
    CHECK(!proto_method_is("ping", "pingx", 5));
    CHECK(!proto_method_is("ping", "frobnicate", 10));
    CHECK(!proto_method_is("ping", "", 0));
    CHECK(!proto_method_is("ping", NULL, 0));        /* msgpack-c's empty string */
    CHECK(!proto_method_is("ping", "ping\0xyz", 8)); /* a NUL inside (fuzz_protocol found it) */
}

/* ---- typed arguments ---- */

/* Params {s, i, neg, f, fi, big, b, n, r, rf, r1, r_neg, r_str, r_huge, long, nul, e, "",
 * 7: 1}. */
static void pack_params(struct packed *p)
{
    msgpack_packer *pk = &p->pk;
    msgpack_pack_map(pk, 19);
    pack_kv_str(pk, "s", "abc");
    pack_kv_i64(pk, "i", 5);
    pack_kv_i64(pk, "neg", -3);
    pack_kv_f64(pk, "f", 2.5);
    pack_kv_f64(pk, "fi", 3.0);
    pack_kv_f64(pk, "big", 1e30);
    proto_pack_str(pk, "b");
    msgpack_pack_true(pk);
    proto_pack_str(pk, "n");
    msgpack_pack_nil(pk);
    proto_pack_str(pk, "r");
    msgpack_pack_array(pk, 2);
    msgpack_pack_int(pk, 5);
    msgpack_pack_int(pk, 10);
    proto_pack_str(pk, "rf");
    msgpack_pack_array(pk, 2);
    msgpack_pack_double(pk, 1.0);
    msgpack_pack_double(pk, 2.0);
    proto_pack_str(pk, "r1");
    msgpack_pack_array(pk, 1);
    msgpack_pack_int(pk, 5);
    proto_pack_str(pk, "r_neg");
    msgpack_pack_array(pk, 2);
    msgpack_pack_int(pk, -1);
    msgpack_pack_int(pk, 2);
    pack_kv_str(pk, "r_str", "1,2");
    proto_pack_str(pk, "r_huge");
    msgpack_pack_array(pk, 2);
    msgpack_pack_double(pk, 1e30);
    msgpack_pack_double(pk, 1.5);
    char longs[201];
    memset(longs, 'x', 200);
    longs[200] = '\0';
    pack_kv_str(pk, "long", longs);
    proto_pack_str(pk, "nul");
    msgpack_pack_str(pk, 3);
    msgpack_pack_str_body(pk, "a\0b", 3);
    pack_kv_str(pk, "e", ""); /* msgpack-c decodes "" with a NULL pointer */
    pack_kv_i64(pk, "", 9);
    msgpack_pack_int(pk, 7); /* a non-string key, skipped by lookups */
    msgpack_pack_int(pk, 1);
}

static void test_arg_str(struct proto_args *a)
{
    const char *s = NULL;
    uint32_t len = 0;
    char buf[16];
    CHECK(proto_arg_str(a, "s", &s, &len) == 1 && len == 3 && memcmp(s, "abc", 3) == 0);
    CHECK(proto_arg_str(a, "absent", &s, &len) == 0);
    CHECK(proto_arg_str(a, "n", &s, &len) == 0); /* nil is absent */
    CHECK(proto_arg_str(a, "i", &s, &len) == -1);
    CHECK_STREQ(a->err, "param 'i': expected string, got integer");
    CHECK(proto_arg_strcpy(a, "s", buf, sizeof buf) == 1);
    CHECK_STREQ(buf, "abc");
    CHECK(proto_arg_strcpy(a, "s", buf, 3) == -1); /* needs 4 bytes with the NUL */
    CHECK_CONTAINS(a->err, "param 's': string too long");
    CHECK(proto_arg_strcpy(a, "long", buf, sizeof buf) == -1);
    CHECK(proto_arg_strcpy(a, "nul", buf, sizeof buf) == -1);
    CHECK_CONTAINS(a->err, "holds NUL");
    CHECK(proto_arg_strcpy(a, "absent", buf, sizeof buf) == 0);
    CHECK(proto_arg_str(a, "e", &s, &len) == 1 && len == 0);
    CHECK(proto_arg_strcpy(a, "e", buf, sizeof buf) == 1 && buf[0] == '\0');
    int64_t i = 0;
    CHECK(proto_arg_i64(a, "", &i) == 1 && i == 9);
}

static void test_arg_numbers(struct proto_args *a)
{
    int64_t i = 0;
    double f = 0;
    bool b = false;
    CHECK(proto_arg_i64(a, "i", &i) == 1 && i == 5);
    CHECK(proto_arg_i64(a, "neg", &i) == 1 && i == -3);
    CHECK(proto_arg_i64(a, "fi", &i) == 1 && i == 3);
    CHECK(proto_arg_i64(a, "f", &i) == -1);
    CHECK_STREQ(a->err, "param 'f': expected integer, got number");
    CHECK(proto_arg_i64(a, "big", &i) == -1);
    CHECK(proto_arg_i64(a, "s", &i) == -1);
    CHECK_STREQ(a->err, "param 's': expected integer, got string");
    CHECK(proto_arg_i64(a, "absent", &i) == 0);
    CHECK(proto_arg_f64(a, "i", &f) == 1 && f == 5.0);
    CHECK(proto_arg_f64(a, "neg", &f) == 1 && f == -3.0);
    CHECK(proto_arg_f64(a, "f", &f) == 1 && f == 2.5);
    CHECK(proto_arg_f64(a, "b", &f) == -1);
    CHECK_STREQ(a->err, "param 'b': expected number, got boolean");
    CHECK(proto_arg_f64(a, "n", &f) == 0);
    CHECK(proto_arg_bool(a, "b", &b) == 1 && b);
    CHECK(proto_arg_bool(a, "i", &b) == -1);
    CHECK_STREQ(a->err, "param 'i': expected boolean, got integer");
    CHECK(proto_arg_bool(a, "absent", &b) == 0);
}

static void test_arg_range(struct proto_args *a)
{
    uint64_t off = 0, cnt = 0;
    CHECK(proto_arg_range(a, "r", &off, &cnt) == 1 && off == 5 && cnt == 10);
    CHECK(proto_arg_range(a, "rf", &off, &cnt) == 1 && off == 1 && cnt == 2);
    CHECK(proto_arg_range(a, "absent", &off, &cnt) == 0);
    CHECK(proto_arg_range(a, "r1", &off, &cnt) == -1);
    CHECK_STREQ(a->err, "param 'r1': expected {offset, count}, got array");
    CHECK(proto_arg_range(a, "r_str", &off, &cnt) == -1);
    CHECK_STREQ(a->err, "param 'r_str': expected {offset, count}, got string");
    CHECK(proto_arg_range(a, "r_neg", &off, &cnt) == -1);
    CHECK_STREQ(a->err, "param 'r_neg': expected {offset, count} of non-negative integers");
    CHECK(proto_arg_range(a, "r_huge", &off, &cnt) == -1);
    CHECK(!proto_args_missing(a, "x"));
    CHECK_STREQ(a->err, "param 'x': missing");
}

static void test_args(void)
{
    struct packed p;
    packed_init(&p);
    pack_params(&p);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, p.sb.data, p.sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    struct proto_args a;
    proto_args_init(&a, &u.data);
    CHECK(a.err[0] == '\0');
    CHECK(proto_args_get(&a, "s") != NULL && proto_args_get(&a, "7") == NULL);
    test_arg_str(&a);
    test_arg_numbers(&a);
    test_arg_range(&a);
    struct proto_args none; /* a params object that is not a map has no keys */
    proto_args_init(&none, NULL);
    CHECK(proto_args_get(&none, "s") == NULL);
    CHECK_STREQ(proto_type_name(MSGPACK_OBJECT_MAP), "map");
    CHECK_STREQ(proto_type_name(MSGPACK_OBJECT_NEGATIVE_INTEGER), "integer");
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&p.sb);
}

int main(void)
{
    test_request_round_trip();
    test_response_round_trip();
    test_notification_round_trip();
    test_several_in_one_buffer();
    test_every_prefix();
    test_byte_by_byte();
    test_oversized();
    test_unparsable();
    test_invalid_requests();
    test_invalid_shapes();
    test_invalid_responses_and_notifications();
    test_method_find();
    test_args();
    return check_report();
}
