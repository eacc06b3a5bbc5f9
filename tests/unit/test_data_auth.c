/* test_data_auth.c — a data connection proves it belongs to the network
 * (peer/data_auth.h) before any frame of it is read.
 *
 * SHA-256 and HMAC-SHA-256 against FIPS 180-4 and RFC 4231 vectors; the
 * hello of data_auth.c (round trip, a wrong secret, another destination, a
 * changed byte, no secret yet); then real hiernet-peer processes started
 * with --data-auth on loopback: sends fail until the secret arrives; a
 * connection that sends a valid frame without a hello, or with a forged
 * one, is closed and stores nothing, even one that connected before the
 * secret was known; a member of the network that connects that early
 * waits (far more bytes than the receiver buffers stay in the socket) and
 * is served once the secret is there; peers of another network (another
 * secret) cannot store a tensor; peers of the same network send as before. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include "peer/data_auth.h"
#include "peer/frame.h"
#include "peer/hmac_sha256.h"
#include "tests/unit/peer_harness.h"

static void hex(const uint8_t *bytes, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", bytes[i]);
}

static void check_sha256(const char *msg, size_t repeat, const char *want)
{
    struct sha256 s;
    uint8_t digest[SHA256_BYTES];
    char text[2 * SHA256_BYTES + 1];
    sha256_init(&s);
    for (size_t i = 0; i < repeat; i++)
        sha256_update(&s, msg, strlen(msg));
    sha256_final(&s, digest);
    hex(digest, sizeof digest, text);
    CHECK_STREQ(text, want);
}

static void check_hmac(const uint8_t *key, size_t key_len, const char *data, const char *want)
{
    uint8_t mac[SHA256_BYTES];
    char text[2 * SHA256_BYTES + 1];
    const void *parts[] = {data, data + 3};
    size_t lens[] = {3, strlen(data) - 3}; /* split: parts are concatenated */
    hmac_sha256(key, key_len, parts, lens, 2, mac);
    hex(mac, sizeof mac, text);
    CHECK_STREQ(text, want);
}

static void test_vectors(void)
{
    check_sha256("", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha256("abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
                 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_sha256("a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    uint8_t key1[20], key6[131];
    memset(key1, 0x0b, sizeof key1);
    memset(key6, 0xaa, sizeof key6);
    check_hmac(key1, sizeof key1, "Hi There",
               "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_hmac((const uint8_t *)"Jefe", 4, "what do ya want for nothing?",
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    check_hmac(key6, sizeof key6, "Test Using Larger Than Block-Size Key - Hash Key First",
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static void test_hello(void)
{
    struct data_auth off, a, b, pending;
    uint8_t secret[DATA_AUTH_SECRET_BYTES], other[DATA_AUTH_SECRET_BYTES],
        hello[DATA_AUTH_HELLO_BYTES];
    char err[200];
    memset(secret, 7, sizeof secret);
    memset(other, 8, sizeof other);
    data_auth_init(&off, false);
    data_auth_init(&pending, true);
    data_auth_init(&a, true);
    data_auth_init(&b, true);
    CHECK(!data_auth_required(&off) && data_auth_required(&pending));
    CHECK(data_auth_hello(&off, "127.0.0.1:7000", hello, err, sizeof err) == 0);
    CHECK(data_auth_hello(&pending, "127.0.0.1:7000", hello, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "no data secret yet");
    CHECK(data_auth_set_secret(&a, secret, 31, err, sizeof err) < 0);
    CHECK(data_auth_set_secret(&a, secret, sizeof secret, err, sizeof err) == 0);
    CHECK(data_auth_set_secret(&a, secret, sizeof secret, err, sizeof err) == 0); /* again: same */
    CHECK(data_auth_set_secret(&a, other, sizeof other, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "cannot change");
    CHECK(data_auth_set_secret(&b, other, sizeof other, err, sizeof err) == 0);
    CHECK(data_auth_hello(&a, "127.0.0.1:7000", hello, err, sizeof err) == DATA_AUTH_HELLO_BYTES);
    CHECK(data_auth_check(&a, "127.0.0.1:7000", hello, err, sizeof err) == 0);
    CHECK(data_auth_check(&pending, "127.0.0.1:7000", hello, err, sizeof err) < 0);
    CHECK(data_auth_check(&b, "127.0.0.1:7000", hello, err, sizeof err) < 0); /* other network */
    CHECK_CONTAINS(err, "does not prove");
    CHECK(data_auth_check(&a, "127.0.0.2:7000", hello, err, sizeof err) < 0); /* other address */
    for (size_t i = 0; i < DATA_AUTH_HELLO_BYTES; i += 5) {
        hello[i] ^= 1;
        CHECK_MSG(data_auth_check(&a, "127.0.0.1:7000", hello, err, sizeof err) < 0,
                  "byte %zu changed", i);
        hello[i] ^= 1;
    }
    uint8_t again[DATA_AUTH_HELLO_BYTES];
    data_auth_hello(&a, "127.0.0.1:7000", again, err, sizeof err);
    CHECK(memcmp(again, hello, sizeof hello) != 0); /* a fresh nonce each time */
}

/* ---- peers ---- */

/* A frame header for count floats to tensor `as` (prefix included). */
static size_t frame_header_for(uint8_t *buf, const char *from, const char *as, int64_t count)
{
    struct frame_header h = {.type = FRAME_TENSOR,
                             .id = 1,
                             .count = (uint64_t)count,
                             .bytes = (uint64_t)count * 4,
                             .version = 1};
    snprintf(h.from, sizeof h.from, "%s", from);
    snprintf(h.as, sizeof h.as, "%s", as);
    return frame_encode(&h, buf, 600);
}

/* A member of the network that connects before the receiver has the
 * secret and sends a valid hello and a 400 KB tensor (far more than the
 * receiver buffers): the receiver waits for the secret without reading
 * on, then takes the tensor and acks it. */
static int early_member(const struct harness_peer *p, const uint8_t *secret)
{
    enum { COUNT = 100000 };
    struct data_auth auth;
    uint8_t hello[DATA_AUTH_HELLO_BYTES], header[600];
    char err[200];
    data_auth_init(&auth, true);
    data_auth_set_secret(&auth, secret, DATA_AUTH_SECRET_BYTES, err, sizeof err);
    CHECK(data_auth_hello(&auth, harness_data_addr(p), hello, err, sizeof err) == sizeof hello);
    int fd = harness_raw_connect(p);
    size_t n = frame_header_for(header, "early", "early", COUNT);
    float *payload = calloc(COUNT, sizeof *payload);
    for (int i = 0; payload && i < COUNT; i++)
        payload[i] = 1.0f;
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : 0;
    if (fd >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK); /* the receiver is not reading yet */
    size_t sent = 0, total = sizeof hello + n + COUNT * sizeof(float);
    uint8_t *all = malloc(total);
    if (all && payload) {
        memcpy(all, hello, sizeof hello);
        memcpy(all + sizeof hello, header, n);
        memcpy(all + sizeof hello + n, payload, COUNT * sizeof(float));
        ssize_t w = fd >= 0 ? write(fd, all, total) : -1;
        sent = w > 0 ? (size_t)w : 0;
    }
    CHECK(sent >= sizeof hello + 16384); /* more than the receiver's buffer is on its way */
    if (fd >= 0) fcntl(fd, F_SETFL, flags);
    if (all && sent < total) CHECK(harness_write_all(fd, all + sent, total - sent));
    free(all);
    free(payload);
    return fd;
}

/* A complete, valid frame of 4 floats for tensor "injected". */
static size_t injected_frame(uint8_t *buf)
{
    size_t n = frame_header_for(buf, "intruder", "injected", 4);
    memset(buf + n, 0x42, 16);
    return n + 16;
}

/* True when the peer closes fd within 5 s without an ack. */
static bool closed_without_ack(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    char buf[256];
    return poll(&pfd, 1, 5000) == 1 && read(fd, buf, sizeof buf) <= 0;
}

static void no_injected_tensor(struct harness_peer *p)
{
    struct harness_reply r;
    HCALL_ERR(p, &r, "injected", "read", "tensor:s", "injected");
}

static void set_book(struct harness_peer *p, const uint8_t *secret, int n, const char **names,
                     const char **addrs)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "peers", "table:m secret:B", n, names, addrs, DATA_AUTH_SECRET_BYTES, secret);
}

static void test_peers(void)
{
    static const char *const auth[] = {"--data-auth", NULL};
    struct harness_peer a, b, c;
    struct harness_reply r;
    uint8_t secret[DATA_AUTH_SECRET_BYTES], other[DATA_AUTH_SECRET_BYTES];
    uint8_t frame[600];
    memset(secret, 0x5a, sizeof secret);
    memset(other, 0xa5, sizeof other);
    CHECK(harness_start(&a, "a", "127.0.8.1", auth));
    CHECK(harness_start(&b, "b", "127.0.8.2", auth));
    CHECK(harness_start(&c, "c", "127.0.8.3", auth));
    const char *names[] = {"a", "b", "c"};
    const char *addrs[] = {harness_data_addr(&a), harness_data_addr(&b), harness_data_addr(&c)};
    HCALL_OK(&a, &r, "tensor", "name:s size:i fill:f", "w", 1000LL, 0.5);
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "w", 1000LL, 0.5);
    /* No secret yet: no send, and an early connection waits unread. */
    HCALL_ERR(&a, &r, "no data secret yet", "send", "tensor:s to_addr:s", "w",
              harness_data_addr(&b));
    int early = harness_raw_connect(&b);
    size_t n = injected_frame(frame);
    CHECK(early >= 0 && harness_write_all(early, frame, n));
    set_book(&a, secret, 3, names, addrs);
    int member = early_member(&c, secret); /* c has no secret yet */
    set_book(&b, secret, 3, names, addrs);
    CHECK_MSG(closed_without_ack(early), "a connection without a hello was kept");
    close(early);
    set_book(&c, secret, 3, names, addrs); /* now c reads on: the early member's tensor */
    HCALL_OK(&c, &r, "wait", "tensor:s timeout:f", "early", 10.0); /* it is read on, async */
    harness_reply_free(&r);                                        /* wait's reply holds lists */
    HCALL_OK(&c, &r, "norm", "x:s", "early");
    CHECK_NEAR(harness_num(&r, "value"), sqrt(100000.0), 1e-2);
    if (member >= 0) close(member);
    harness_stop(&c); /* c was of this network; now another network's peer */
    CHECK(harness_start(&c, "c", "127.0.8.3", auth));
    addrs[2] = harness_data_addr(&c);
    HCALL_OK(&c, &r, "tensor", "name:s size:i fill:f", "w", 1000LL, 0.5);
    set_book(&c, other, 3, names, addrs);
    /* A forged hello: right magic, no knowledge of the secret. */
    int forged = harness_raw_connect(&b);
    uint8_t hello[DATA_AUTH_HELLO_BYTES] = DATA_AUTH_MAGIC;
    CHECK(forged >= 0 && harness_write_all(forged, hello, sizeof hello) &&
          harness_write_all(forged, frame, n));
    CHECK_MSG(closed_without_ack(forged), "a connection with a forged hello was kept");
    close(forged);
    no_injected_tensor(&b);
    /* Another network's secret: refused, nothing stored. */
    HCALL_ERR(&c, &r, "to b", "send", "tensor:s to:s as:s", "w", "b", "from_c");
    HCALL_ERR(&b, &r, "from_c", "read", "tensor:s", "from_c");
    /* The network itself works as ever. */
    HCALL_OK(&a, &r, "send", "tensor:s to:s as:s", "w", "b", "from_a");
    HCALL_OK(&b, &r, "norm", "x:s", "from_a");
    CHECK_NEAR(harness_num(&r, "value"), sqrt(1000 * 0.25), 1e-3);
    harness_stop(&a);
    harness_stop(&c);
    const char *log = harness_stop(&b);
    CHECK_CONTAINS(log, "refused: the connection did not open with a hiernet hello");
    CHECK_CONTAINS(log, "refused: its hello does not prove this network's secret");
}

int main(void)
{
    test_vectors();
    test_hello();
    harness_init();
    test_peers();
    return check_report();
}
