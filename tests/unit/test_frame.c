/* test_frame.c — the data-plane frame codec (peer/frame.c): round trips of
 * tensor and ack headers (format 2: version and flags), the prefix checks,
 * every rejection rule, and
 * 200000 random mutations and truncations of valid headers, which must
 * decode or fail cleanly (run under ASan, this is a small fuzzer). */
#include "peer/frame.h"
#include "tests/unit/check.h"

#include <msgpack.h>
#include <stdint.h>

static size_t encode(const struct frame_header *h, uint8_t *buf)
{
    size_t n = frame_encode(h, buf, FRAME_PREFIX_BYTES + FRAME_HEADER_MAX);
    CHECK(n > FRAME_PREFIX_BYTES);
    return n;
}

/* Decodes an encoded frame (prefix included); 0 or -1. */
static int decode(const uint8_t *buf, size_t n, struct frame_header *h, char *err)
{
    uint32_t len = frame_prefix_decode(buf, err, 256);
    if (!len) return -1;
    if (len != n - FRAME_PREFIX_BYTES) return -2;
    return frame_header_decode(buf + FRAME_PREFIX_BYTES, len, h, err, 256);
}

static void test_round_trips(void)
{
    uint8_t buf[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX];
    char err[256];
    struct frame_header h = {.type = FRAME_TENSOR,
                             .id = UINT64_MAX,
                             .count = 1u << 30,
                             .bytes = 4ull << 30,
                             .has_range = true,
                             .offset = 12345,
                             .version = UINT64_MAX - 1,
                             .flags = FRAME_FLAG_ADD,
                             .incarnation = UINT64_MAX};
    memset(h.from, 'f', FRAME_NODE_NAME_SIZE - 1); /* the longest node name */
    memset(h.to, 't', FRAME_NODE_NAME_SIZE - 1);
    memset(h.as, 'a', STORE_NAME_MAX);
    struct frame_header got;
    size_t n = encode(&h, buf);
    CHECK(decode(buf, n, &got, err) == 0);
    CHECK(got.type == FRAME_TENSOR && got.id == UINT64_MAX && got.count == 1u << 30);
    CHECK(got.bytes == 4ull << 30 && got.has_range && got.offset == 12345);
    CHECK(got.version == UINT64_MAX - 1 && got.flags == FRAME_FLAG_ADD);
    CHECK(got.incarnation == UINT64_MAX);
    CHECK(strcmp(got.from, h.from) == 0 && strcmp(got.to, h.to) == 0);
    CHECK(strcmp(got.as, h.as) == 0 && got.error[0] == '\0');

    struct frame_header plain = {.type = FRAME_TENSOR, .id = 1, .count = 3, .bytes = 12};
    strcpy(plain.from, "a");
    strcpy(plain.as, "x");
    n = encode(&plain, buf);
    CHECK(decode(buf, n, &got, err) == 0 && !got.has_range && got.to[0] == '\0');
    CHECK(got.version == 0 && got.flags == 0); /* flags 0 is not even encoded */
    CHECK(memmem(buf, n, "flags", 5) == NULL && memmem(buf, n, "version", 7) != NULL);
    CHECK(memcmp(buf, "HNd2", 4) == 0);

    /* A virtual tensor's trailing pattern (store.h): kept, and never more
     * than the payload. */
    plain.pattern = 2;
    n = encode(&plain, buf);
    CHECK(decode(buf, n, &got, err) == 0 && got.pattern == 2 && got.count == 3);
    CHECK(memmem(buf, n, "pattern", 7) != NULL);
    plain.pattern = 4;
    n = encode(&plain, buf);
    CHECK(decode(buf, n, &got, err) == -1 && strstr(err, "pattern") != NULL);
    plain.pattern = 0;
    n = encode(&plain, buf);
    CHECK(decode(buf, n, &got, err) == 0 && got.pattern == 0 && !memmem(buf, n, "pattern", 7));

    /* The sender's incarnation (a restarted peer's): kept; 0 not encoded. */
    CHECK(got.incarnation == 0 && !memmem(buf, n, "incarnation", 11));
    plain.incarnation = 3;
    n = encode(&plain, buf);
    CHECK(decode(buf, n, &got, err) == 0 && got.incarnation == 3);
    plain.incarnation = 0;

    struct frame_header ack = {.type = FRAME_ACK, .id = 77};
    strcpy(ack.error, "range target 'g' does not exist");
    n = encode(&ack, buf);
    CHECK(decode(buf, n, &got, err) == 0 && got.type == FRAME_ACK && got.id == 77);
    CHECK_STREQ(got.error, ack.error);
    ack.error[0] = '\0';
    n = encode(&ack, buf);
    CHECK(decode(buf, n, &got, err) == 0 && got.error[0] == '\0');
}

/* A tensor header built by hand: map of n entries from fields. */
static size_t header_of(uint8_t *buf, const char *const *kv, int n_pairs)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, (size_t)n_pairs);
    for (int i = 0; i < n_pairs; i++) {
        msgpack_pack_str(&pk, strlen(kv[2 * i]));
        msgpack_pack_str_body(&pk, kv[2 * i], strlen(kv[2 * i]));
        const char *v = kv[2 * i + 1];
        if (v[0] == '#') { /* a number */
            msgpack_pack_uint64(&pk, strtoull(v + 1, NULL, 10));
        } else {
            msgpack_pack_str(&pk, strlen(v));
            msgpack_pack_str_body(&pk, v, strlen(v));
        }
    }
    memcpy(buf, sb.data, sb.size);
    size_t len = sb.size;
    msgpack_sbuffer_destroy(&sb);
    return len;
}

static void expect_reject(const char *const *kv, int n_pairs, const char *want)
{
    uint8_t buf[2048];
    char err[256] = "";
    struct frame_header h;
    size_t len = header_of(buf, kv, n_pairs);
    CHECK(frame_header_decode(buf, len, &h, err, sizeof err) == -1);
    CHECK_CONTAINS(err, want);
}

static void test_rejections(void)
{
    char err[256];
    CHECK(frame_prefix_decode((const uint8_t *)"HNd3\0\0\0\x10", err, sizeof err) == 0);
    CHECK_CONTAINS(err, "bad frame magic");
    /* Format 1 (no version) is refused by its magic, before its header. */
    CHECK(frame_prefix_decode((const uint8_t *)"HNd1\0\0\0\x10", err, sizeof err) == 0);
    CHECK_CONTAINS(err, "bad frame magic 484e6431");
    CHECK(frame_prefix_decode((const uint8_t *)"HNd2\0\0\0\0", err, sizeof err) == 0);
    CHECK_CONTAINS(err, "frame header of 0 bytes");
    CHECK(frame_prefix_decode((const uint8_t *)"HNd2\0\0\x04\x01", err, sizeof err) == 0);
    CHECK(frame_prefix_decode((const uint8_t *)"HNd2\0\0\x04\x00", err, sizeof err) == 1024);

    const char *ok[] = {"type",  "tensor", "id",    "#1", "from",  "a",  "as",      "x",
                        "dtype", "f32",    "count", "#2", "bytes", "#8", "version", "#5"};
    uint8_t buf[2048];
    struct frame_header h;
    CHECK(frame_header_decode(buf, header_of(buf, ok, 8), &h, err, sizeof err) == 0);
    CHECK(h.version == 5 && h.flags == 0);
    expect_reject(ok, 7, "missing or unexpected keys"); /* without version */
    const char *add[] = {"type", "tensor", "id", "#1",    "from", "a",       "as", "x",     "dtype",
                         "f32",  "count",  "#2", "bytes", "#8",   "version", "#5", "flags", "#1"};
    CHECK(frame_header_decode(buf, header_of(buf, add, 9), &h, err, sizeof err) == 0);
    CHECK(h.flags == FRAME_FLAG_ADD);
    const char *bad_flags[] = {"type",  "tensor", "id",      "#1",  "from",  "a",
                               "as",    "x",      "dtype",   "f32", "count", "#2",
                               "bytes", "#8",     "version", "#5",  "flags", "#2"};
    expect_reject(bad_flags, 9, "unknown flags 0x2");
    const char *ack_version[] = {"type", "ack", "id", "#3", "version", "#4"};
    expect_reject(ack_version, 3, "ack frame with missing or unexpected keys");
    const char *text_version[] = {"type", "tensor", "version", "five"};
    expect_reject(text_version, 2, "bad value for 'version'");
    const char *wrong_bytes[] = {"type",  "tensor", "id",    "#1", "from",  "a",  "as",      "x",
                                 "dtype", "f32",    "count", "#2", "bytes", "#9", "version", "#1"};
    expect_reject(wrong_bytes, 8, "announces 9 bytes");
    const char *missing[] = {"type", "tensor", "id", "#1", "from", "a", "as", "x"};
    expect_reject(missing, 4, "missing or unexpected keys");
    const char *dup[] = {"type", "tensor", "type", "tensor"};
    expect_reject(dup, 2, "repeats key 'type'");
    const char *unknown[] = {"colour", "red"};
    expect_reject(unknown, 1, "unknown key");
    const char *dtype[] = {"type", "tensor", "dtype", "f64"};
    expect_reject(dtype, 2, "bad value for 'dtype'");
    const char *type[] = {"type", "tensors"};
    expect_reject(type, 1, "bad value for 'type'");
    const char *ack_payload[] = {"type", "ack", "id", "#3", "bytes", "#4"};
    expect_reject(ack_payload, 3, "ack frame with a payload");
    const char *huge[] = {
        "type", "tensor", "id",          "#1",    "from",         "a",       "as", "x", "dtype",
        "f32",  "count",  "#4294967296", "bytes", "#17179869184", "version", "#1"};
    expect_reject(huge, 8, "elements announces");
    const char *empty[] = {"type",  "tensor", "id",    "#1", "from",  "a",  "as",      "",
                           "dtype", "f32",    "count", "#0", "bytes", "#0", "version", "#1"};
    expect_reject(empty, 8, "empty name");
}

/* xorshift64*: deterministic mutations. */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void test_mutations(void)
{
    uint8_t good[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX], buf[sizeof good];
    struct frame_header h = {.type = FRAME_TENSOR,
                             .id = 9,
                             .count = 5,
                             .bytes = 20,
                             .has_range = true,
                             .offset = 2,
                             .version = 300,
                             .flags = FRAME_FLAG_ADD};
    strcpy(h.from, "node");
    strcpy(h.to, "other");
    strcpy(h.as, "tensor");
    size_t n = encode(&h, good) - FRAME_PREFIX_BYTES;
    int accepted = 0;
    for (int i = 0; i < 200000; i++) {
        memcpy(buf, good + FRAME_PREFIX_BYTES, n);
        int flips = 1 + (int)(next_random() % 4);
        for (int f = 0; f < flips; f++)
            buf[next_random() % n] = (uint8_t)next_random();
        size_t len = i % 8 == 0 ? next_random() % (n + 1) : n; /* some truncated */
        /* Decode from a copy of exactly len bytes, so ASan sees any overread. */
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        struct frame_header got;
        char err[256];
        int rc = frame_header_decode(exact, len, &got, err, sizeof err);
        CHECK(rc == 0 || rc == -1);
        if (rc == 0) {
            accepted++;
            CHECK(got.bytes == got.count * 4 && got.count <= STORE_MAX_ELEMENTS);
            CHECK((got.flags & ~(uint64_t)FRAME_FLAGS_KNOWN) == 0);
        }
        free(exact);
    }
    printf("mutations: %d of 200000 still decoded (and were consistent)\n", accepted);
}

int main(void)
{
    test_round_trips();
    test_rejections();
    test_mutations();
    return check_report();
}
