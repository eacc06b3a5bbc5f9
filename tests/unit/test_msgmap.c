/* test_msgmap.c — the counting map builder (proto/msgmap.h): its bytes are
 * those of a hand-counted map for every header size (fixmap, map16,
 * map32), past the inline buffer, nested, appended, inside the RPC
 * envelopes; a builder that failed writes nothing. */
#include "proto/msgmap.h"
#include "proto/protocol.h"
#include "tests/unit/check.h"
#include "tests/unit/pack_kv.h"

#include <stdint.h>

struct packed {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void packed_init(struct packed *p)
{
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static bool same_bytes(const struct packed *a, const struct packed *b)
{
    return a->sb.size == b->sb.size && memcmp(a->sb.data, b->sb.data, a->sb.size) == 0;
}

/* n entries "k<i>" = i, by hand and by the builder: identical bytes. */
static void check_entries(uint32_t n)
{
    struct packed hand, built;
    packed_init(&hand);
    packed_init(&built);
    msgpack_pack_map(&hand.pk, n);
    struct msgmap m;
    msgmap_init(&m);
    for (uint32_t i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%u", i);
        pack_kv_i64(&hand.pk, key, i);
        msgmap_i64(&m, key, i);
    }
    CHECK(m.n == n);
    CHECK(msgmap_end(&m, &built.pk));
    CHECK_MSG(same_bytes(&hand, &built), "%u entries: %zu vs %zu bytes", n, hand.sb.size,
              built.sb.size);
    msgpack_sbuffer_destroy(&hand.sb);
    msgpack_sbuffer_destroy(&built.sb);
}

static void test_header_sizes(void)
{
    check_entries(0);
    check_entries(1);
    check_entries(15);    /* the last fixmap */
    check_entries(16);    /* map16 */
    check_entries(65535); /* the last map16, far past the inline buffer */
    check_entries(65536); /* map32 */
}

/* Every value kind, decoded back. */
static void test_values_decode(void)
{
    struct packed p;
    packed_init(&p);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "s", "text");
    msgmap_strn(&m, "sn", "abcdef", 3);
    msgmap_i64(&m, "i", -5);
    msgmap_u64(&m, "u", UINT64_MAX);
    msgmap_f64(&m, "f", 0.25);
    msgmap_bool(&m, "b", true);
    msgmap_nil(&m, "nil");
    msgmap_bin(&m, "bin", "\x01\x02", 2);
    msgmap_key(&m, "inner");
    struct msgmap inner;
    msgmap_init(&inner);
    msgmap_i64(&inner, "x", 1);
    msgmap_i64(&inner, "y", 2);
    CHECK(msgmap_end(&inner, &m.pk));
    CHECK(msgmap_end(&m, &p.pk));

    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, p.sb.data, p.sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    const msgpack_object *o = &u.data;
    CHECK(o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 9);
    if (o->type == MSGPACK_OBJECT_MAP && o->via.map.size == 9) {
        const msgpack_object_kv *kv = o->via.map.ptr;
        CHECK(kv[0].val.type == MSGPACK_OBJECT_STR && kv[0].val.via.str.size == 4);
        CHECK(kv[1].val.type == MSGPACK_OBJECT_STR && kv[1].val.via.str.size == 3 &&
              memcmp(kv[1].val.via.str.ptr, "abc", 3) == 0);
        CHECK(kv[2].val.type == MSGPACK_OBJECT_NEGATIVE_INTEGER && kv[2].val.via.i64 == -5);
        CHECK(kv[3].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER && kv[3].val.via.u64 == UINT64_MAX);
        CHECK(kv[4].val.type == MSGPACK_OBJECT_FLOAT64 && kv[4].val.via.f64 == 0.25);
        CHECK(kv[5].val.type == MSGPACK_OBJECT_BOOLEAN && kv[5].val.via.boolean);
        CHECK(kv[6].val.type == MSGPACK_OBJECT_NIL);
        CHECK(kv[7].val.type == MSGPACK_OBJECT_BIN && kv[7].val.via.bin.size == 2);
        CHECK(kv[8].val.type == MSGPACK_OBJECT_MAP && kv[8].val.via.map.size == 2);
    }
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&p.sb);
}

/* append: the counts add up, the bytes follow each other. */
static void test_append(void)
{
    struct packed hand, built;
    packed_init(&hand);
    packed_init(&built);
    msgpack_pack_map(&hand.pk, 3);
    pack_kv_f64(&hand.pk, "ms", 1.5);
    pack_kv_str(&hand.pk, "a", "x");
    pack_kv_i64(&hand.pk, "b", 7);
    struct msgmap head, body;
    msgmap_init(&head);
    msgmap_init(&body);
    msgmap_f64(&head, "ms", 1.5);
    msgmap_str(&body, "a", "x");
    msgmap_i64(&body, "b", 7);
    msgmap_append(&head, &body);
    CHECK(body.n == 2); /* src stays */
    msgmap_free(&body);
    CHECK(head.n == 3);
    CHECK(msgmap_end(&head, &built.pk));
    CHECK(same_bytes(&hand, &built));
    msgpack_sbuffer_destroy(&hand.sb);
    msgpack_sbuffer_destroy(&built.sb);
}

/* raw bytes: the elements of an array packed elsewhere. */
static void test_raw(void)
{
    struct packed hand, built, elems;
    packed_init(&hand);
    packed_init(&built);
    packed_init(&elems);
    msgpack_pack_map(&hand.pk, 1);
    proto_pack_str(&hand.pk, "results");
    msgpack_pack_array(&hand.pk, 2);
    msgpack_pack_int(&hand.pk, 1);
    msgpack_pack_int(&hand.pk, 2);
    msgpack_pack_int(&elems.pk, 1);
    msgpack_pack_int(&elems.pk, 2);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_key(&m, "results");
    msgpack_pack_array(&m.pk, 2);
    msgmap_raw(&m, elems.sb.data, elems.sb.size);
    CHECK(msgmap_end(&m, &built.pk));
    CHECK(same_bytes(&hand, &built));
    msgpack_sbuffer_destroy(&hand.sb);
    msgpack_sbuffer_destroy(&built.sb);
    msgpack_sbuffer_destroy(&elems.sb);
}

/* The envelopes: the same bytes as proto_pack_*_begin with a hand count. */
static void test_envelopes(void)
{
    struct packed hand, built;
    packed_init(&hand);
    packed_init(&built);
    proto_pack_request_begin(&hand.pk, 9, "link_set", 2);
    pack_kv_str(&hand.pk, "link", "l1");
    pack_kv_f64(&hand.pk, "delay", 0.01);
    proto_pack_notify_begin(&hand.pk, "recv", 1);
    pack_kv_i64(&hand.pk, "bytes", 4096);
    proto_pack_response_begin(&hand.pk, 9, 0);

    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "link", "l1");
    msgmap_f64(&m, "delay", 0.01);
    CHECK(msgmap_request(&m, &built.pk, 9, "link_set"));
    msgmap_init(&m);
    msgmap_i64(&m, "bytes", 4096);
    CHECK(msgmap_notify(&m, &built.pk, "recv"));
    msgmap_init(&m);
    CHECK(msgmap_response(&m, &built.pk, 9));
    CHECK(same_bytes(&hand, &built));
    msgpack_sbuffer_destroy(&hand.sb);
    msgpack_sbuffer_destroy(&built.sb);
}

/* A builder that ran out of memory writes nothing and says so. */
static void test_failed_writes_nothing(void)
{
    struct packed p;
    packed_init(&p);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "a", "b");
    m.buf.failed = true;
    msgmap_i64(&m, "c", 1);
    CHECK(!msgmap_end(&m, &p.pk));
    msgmap_init(&m);
    m.buf.failed = true;
    CHECK(!msgmap_response(&m, &p.pk, 1));
    struct msgmap a, b;
    msgmap_init(&a);
    msgmap_init(&b);
    b.buf.failed = true;
    msgmap_append(&a, &b);
    msgmap_free(&b);
    CHECK(!msgmap_end(&a, &p.pk));
    CHECK(p.sb.size == 0);
    msgpack_sbuffer_destroy(&p.sb);
}

int main(void)
{
    test_header_sizes();
    test_values_decode();
    test_append();
    test_raw();
    test_envelopes();
    test_failed_writes_nothing();
    return check_report();
}
