/* test_dataplane.c — the peer data plane between real hiernet-peer processes
 * on loopback addresses (127.0.7.x, free ports, so it runs beside other
 * tests): 1 MB and 64 MB tensors arrive intact (norms of the whole and of 16
 * ranges, and raw values, compared bit for bit), recv notifications, many
 * concurrent sends both ways, range sends, overwriting an existing tensor,
 * the peers table and its errors, snapshots that a following axpy/scale
 * must not tear, receiving while the receiver computes, and malformed or
 * oversized frames that close only their own connection, and an abort
 * closing what the aborted node sends on, only of the incarnations it
 * names (a restarted node's new connections stay), and one known by
 * address only closing on its first frame with the abort's own cause (of
 * two aborts, the one covering the most incarnations; the
 * data plane in this process). */
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>

#include "peer/dataplane.h"
#include "peer/frame.h"
#include "peer/store.h"
#include "tests/unit/pack_kv.h"
#include "tests/unit/peer_harness.h"

enum { RANGES = 16 };

/* A pseudo-random tensor of out * (in + 1) elements: the parameters of
 * logreg:IN-OUT (Xavier-uniform weights, zero biases). */
static void make_random(struct harness_peer *p, const char *name, int in, int out, int seed)
{
    struct harness_reply r;
    char arch[64];
    snprintf(arch, sizeof arch, "logreg:%d-%d", in, out);
    HCALL_OK(p, &r, "model", "name:s arch:s seed:i", name, arch, (long long)seed);
}

struct checksum {
    double whole, part[RANGES];
};

/* Norms of the whole tensor and of RANGES equal slices (size % RANGES == 0). */
static struct checksum checksum(struct harness_peer *p, const char *name, long long size)
{
    struct checksum c;
    struct harness_reply r;
    HCALL_OK(p, &r, "norm", "x:s", name);
    c.whole = harness_num(&r, "value");
    long long step = size / RANGES;
    for (int i = 0; i < RANGES; i++) {
        HCALL_OK(p, &r, "norm", "x:s range:r", name, i * step, step);
        c.part[i] = harness_num(&r, "value");
    }
    return c;
}

static bool same_checksum(const struct checksum *a, const struct checksum *b)
{
    bool same = a->whole == b->whole && a->whole > 0;
    for (int i = 0; i < RANGES; i++)
        same = same && a->part[i] == b->part[i];
    if (!same) fprintf(stderr, "checksums differ: whole %.17g vs %.17g\n", a->whole, b->whole);
    return same;
}

/* The first and last n values of two tensors are identical. */
static bool same_values(struct harness_peer *a, const char *ta, struct harness_peer *b,
                        const char *tb, long long size, int n)
{
    struct harness_reply ra, rb;
    bool same = true;
    for (int end = 0; end < 2; end++) {
        long long off = end ? size - n : 0;
        HCALL_OK(a, &ra, "read", "tensor:s range:r", ta, off, (long long)n);
        HCALL_OK(b, &rb, "read", "tensor:s range:r", tb, off, (long long)n);
        same = same && ra.n_values == (size_t)n && rb.n_values == (size_t)n &&
               memcmp(ra.values, rb.values, (size_t)n * sizeof(float)) == 0;
        harness_reply_free(&ra);
        harness_reply_free(&rb);
    }
    return same;
}

static void set_peers(struct harness_peer *p, int n, const char **names, const char **addrs)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "peers", "table:m", n, names, addrs);
    CHECK(harness_num(&r, "peers") >= n);
}

static int notes_for(const struct harness_peer *p, const char *tensor, uint64_t bytes)
{
    int n = 0;
    for (int i = 0; i < p->n_notes; i++)
        n += strcmp(p->notes[i].tensor, tensor) == 0 && p->notes[i].bytes == bytes;
    return n;
}

/* Sends a's tensor to b (by node name) and checks it arrived intact. */
static void send_and_check(struct harness_peer *a, struct harness_peer *b, const char *name, int in,
                           int out)
{
    long long size = (long long)out * (in + 1);
    struct harness_reply r;
    make_random(a, name, in, out, 7);
    struct checksum want = checksum(a, name, size);
    HCALL_OK(a, &r, "send", "tensor:s to:s", name, b->node);
    CHECK(harness_num(&r, "bytes") == (double)size * 4);
    CHECK(harness_num(&r, "ms") > 0 && harness_num(&r, "transfer") >= 1);
    printf("%s: %lld bytes %s -> %s in %.2f ms (%.2f Gbit/s)\n", name, size * 4, a->node, b->node,
           harness_num(&r, "ms"), size * 32 / harness_num(&r, "ms") / 1e6);
    struct checksum got = checksum(b, name, size);
    CHECK(same_checksum(&want, &got));
    CHECK(same_values(a, name, b, name, size, 1000));
    /* The recv notification reached the controller before the ack did. */
    CHECK_MSG(notes_for(b, name, (uint64_t)size * 4) == 1, "notes for %s: %d", name,
              notes_for(b, name, (uint64_t)size * 4));
    CHECK_STREQ(b->notes[b->n_notes - 1].from, a->node);
    CHECK(b->notes[b->n_notes - 1].transfer == (uint64_t)harness_num(&r, "transfer"));
}

/* Eight 1 MB sends each way at once, then every tensor checked. */
static void test_concurrent(struct harness_peer *a, struct harness_peer *b)
{
    enum { N = 8 };
    const long long size = 256 * 1024;
    struct harness_reply r;
    uint32_t ids_a[N], ids_b[N];
    char name[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(name[i], sizeof name[i], "c%d", i);
        make_random(a, name[i], 1023, 256, 100 + i);
        make_random(b, name[i], 1023, 256, 200 + i);
    }
    for (int i = 0; i < N; i++) {
        char as[16];
        snprintf(as, sizeof as, "from_a%d", i);
        ids_a[i] = harness_request(a, "send", "tensor:s to:s as:s", name[i], b->node, as);
        snprintf(as, sizeof as, "from_b%d", i);
        ids_b[i] = harness_request(b, "send", "tensor:s to:s as:s", name[i], a->node, as);
    }
    for (int i = 0; i < N; i++) {
        CHECK(harness_wait(a, ids_a[i], &r) && r.ok && harness_num(&r, "bytes") == size * 4);
        CHECK(harness_wait(b, ids_b[i], &r) && r.ok && harness_num(&r, "bytes") == size * 4);
    }
    for (int i = 0; i < N; i++) {
        char as[16];
        snprintf(as, sizeof as, "from_a%d", i);
        struct checksum want = checksum(a, name[i], size), got = checksum(b, as, size);
        CHECK(same_checksum(&want, &got));
        snprintf(as, sizeof as, "from_b%d", i);
        want = checksum(b, name[i], size);
        got = checksum(a, as, size);
        CHECK(same_checksum(&want, &got));
    }
    /* One kept connection per direction: each peer has its outgoing one and
     * the other's incoming one. */
    HCALL_OK(a, &r, "stats", "");
    CHECK_MSG(harness_num(&r, "data_connections") == 2, "connections %g",
              harness_num(&r, "data_connections"));
    CHECK(harness_num(&r, "bytes_sent") > N * size * 4);
    CHECK(harness_num(&r, "bytes_received") > N * size * 4);
}

/* Ranges of a's x fill b's existing g piece by piece, concurrently. */
static void test_ranges(struct harness_peer *a, struct harness_peer *b)
{
    const long long size = 256 * 1024, step = size / RANGES;
    struct harness_reply r;
    make_random(a, "rx", 1023, 256, 11);
    HCALL_OK(b, &r, "tensor", "name:s size:i", "rg", size);
    uint32_t ids[RANGES];
    for (int i = 0; i < RANGES; i++)
        ids[i] = harness_request(a, "send", "tensor:s to:s as:s range:r", "rx", b->node, "rg",
                                 i * step, step);
    for (int i = 0; i < RANGES; i++)
        CHECK(harness_wait(a, ids[i], &r) && r.ok && harness_num(&r, "bytes") == step * 4);
    struct checksum want = checksum(a, "rx", size), got = checksum(b, "rg", size);
    CHECK(same_checksum(&want, &got));
    /* A range only touches its elements. */
    HCALL_OK(b, &r, "tensor", "name:s size:i fill:f", "rh", size, 2.0);
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s range:r", "rx", b->node, "rh", step, step);
    HCALL_OK(b, &r, "norm", "x:s range:r", "rh", 0LL, step);
    CHECK(harness_num(&r, "value") == sqrt(4.0 * (double)step));
    HCALL_OK(b, &r, "norm", "x:s range:r", "rh", step, step);
    CHECK(harness_num(&r, "value") == want.part[1]);
    HCALL_ERR(a, &r, "range target 'nope' does not exist", "send", "tensor:s to:s as:s range:r",
              "rx", b->node, "nope", 0LL, 16LL);
    HCALL_ERR(a, &r, "is outside 'small'", "send", "tensor:s to:s as:s range:r", "rx", b->node,
              "small", 0LL, 64LL);
    HCALL_ERR(a, &r, "out of bounds", "send", "tensor:s to:s range:r", "rx", b->node, size, 1LL);
}

/* A received tensor of the same size overwrites a model's parameters, and
 * the model still computes with them. */
static void test_overwrite(struct harness_peer *a, struct harness_peer *b)
{
    struct harness_reply r;
    HCALL_OK(b, &r, "dataset", "name:s n:i dim:i classes:i", "synthetic", 512LL, 31LL, 4LL);
    make_random(b, "w", 31, 4, 1);
    make_random(a, "w", 31, 4, 2);
    HCALL_OK(b, &r, "stats", "");
    double tensors = harness_num(&r, "tensors");
    HCALL_OK(a, &r, "send", "tensor:s to:s", "w", b->node);
    struct checksum want = checksum(a, "w", 128), got = checksum(b, "w", 128);
    CHECK(same_checksum(&want, &got));
    HCALL_OK(b, &r, "stats", "");
    CHECK(harness_num(&r, "tensors") == tensors);
    HCALL_OK(b, &r, "grad", "model:s batch:i", "w", 32LL);
    CHECK(harness_num(&r, "loss") > 0);
    /* A tensor of another size replaces it; then the model refuses it. */
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s", "rx", b->node, "w");
    HCALL_ERR(b, &r, "tensor 'w' has 262144 elements, model logreg:31-4 has 128 parameters", "grad",
              "model:s", "w");
}

static void test_peer_errors(struct harness_peer *a, struct harness_peer *b)
{
    struct harness_reply r;
    HCALL_ERR(a, &r, "no address for node 'ghost'", "send", "tensor:s to:s", "w", "ghost");
    HCALL_ERR(a, &r, "give one of 'to'", "send", "tensor:s to:s to_addr:s", "w", b->node,
              harness_data_addr(b));
    HCALL_ERR(a, &r, "give one of 'to'", "send", "tensor:s", "w");
    HCALL_ERR(a, &r, "is not an address", "send", "tensor:s to_addr:s", "w", "10.0.0.300");
    HCALL_ERR(a, &r, "tensor 'nothing' not found", "send", "tensor:s to:s", "nothing", b->node);
    HCALL_ERR(a, &r, "Connection refused", "send", "tensor:s to_addr:s", "w", "127.0.7.9:9");
    /* A stale table entry that points at another node's address. */
    const char *names[] = {"imposter"}, *addrs[] = {harness_data_addr(b)};
    set_peers(a, 1, names, addrs);
    HCALL_ERR(a, &r, "this address is node 'b', not 'imposter'", "send", "tensor:s to:s", "w",
              "imposter");
    const char *bad[] = {"nonsense"};
    HCALL_ERR(a, &r, "node 'imposter': 'nonsense' is not an address", "peers", "table:m", 1, names,
              bad);
    /* By address, the frame names no node: accepted. */
    HCALL_OK(a, &r, "send", "tensor:s to_addr:s as:s", "w", harness_data_addr(b), "by_addr");
}

/* A send takes its snapshot in command order: an axpy and a scale right
 * after it change the sender's tensor, not what arrives. */
static void test_snapshot(struct harness_peer *a, struct harness_peer *b)
{
    const long long size = 4096LL * 4096;
    struct harness_reply r;
    make_random(a, "snap", 4095, 4096, 5);
    struct checksum want = checksum(a, "snap", size);
    uint32_t send_id = harness_request(a, "send", "tensor:s to:s", "snap", b->node);
    uint32_t axpy_id = harness_request(a, "axpy", "y:s x:s alpha:f", "snap", "snap", 1.0);
    uint32_t scale_id = harness_request(a, "scale", "x:s alpha:f", "snap", 0.5);
    CHECK(harness_wait(a, axpy_id, &r) && r.ok);
    CHECK(harness_wait(a, scale_id, &r) && r.ok);
    CHECK(harness_wait(a, send_id, &r) && r.ok);
    struct checksum got = checksum(b, "snap", size);
    CHECK(same_checksum(&want, &got));
    HCALL_OK(a, &r, "norm", "x:s", "snap"); /* (x + x) / 2 = x */
    CHECK_NEAR(harness_num(&r, "value"), want.whole, want.whole * 1e-6);
    /* A send right after axpy carries the new values. */
    send_id = harness_request(a, "scale", "x:s alpha:f", "snap", 2.0);
    uint32_t id2 = harness_request(a, "send", "tensor:s to:s as:s", "snap", b->node, "snap2");
    CHECK(harness_wait(a, send_id, &r) && r.ok);
    CHECK(harness_wait(a, id2, &r) && r.ok);
    HCALL_OK(b, &r, "norm", "x:s", "snap2");
    CHECK_NEAR(harness_num(&r, "value"), 2 * want.whole, want.whole * 1e-6);
}

/* A slow peer (speed emulation) keeps receiving while a job runs. */
static void test_receive_while_computing(struct harness_peer *a)
{
    struct harness_peer slow;
    struct harness_reply r;
    CHECK(harness_start(&slow, "slow", "127.0.7.3", (const char *[]){"--speed", "0.01", NULL}));
    const char *names[] = {"slow"}, *addrs[] = {harness_data_addr(&slow)};
    set_peers(a, 1, names, addrs);
    make_random(a, "busy", 1023, 256, 3);
    double t0 = mono_ms();
    uint32_t job = harness_request(&slow, "tensor", "name:s size:i fill:f", "big", 8LL << 20, 1.0);
    CHECK(harness_wait_busy(&slow, 10, 5000)); /* the job is computing */
    HCALL_OK(a, &r, "send", "tensor:s to:s", "busy", "slow");
    double sent = mono_ms() - t0;
    CHECK(harness_wait(&slow, job, &r) && r.ok);
    double computed = mono_ms() - t0;
    printf("slow peer: send done after %.0f ms, its compute job after %.0f ms\n", sent, computed);
    CHECK_MSG(sent < computed - 200, "send %.0f ms, compute %.0f ms", sent, computed);
    harness_stop(&slow);
}

/* A receiver that dies mid-transfer fails the send (no hang); a sender that
 * shuts down with a send in flight exits cleanly (cancelled transfer). */
static void test_peer_death(void)
{
    struct harness_peer c, d;
    struct harness_reply r;
    CHECK(harness_start(&c, "c", "127.0.7.4", NULL));
    CHECK(harness_start(&d, "d", "127.0.7.5", NULL));
    make_random(&c, "big", 4095, 4096, 1);
    kill(d.pid, SIGSTOP); /* d stops reading: the transfer stalls in its buffers */
    double sent = harness_stat(&c, "bytes_sent");
    uint32_t id = harness_request(&c, "send", "tensor:s to_addr:s", "big", harness_data_addr(&d));
    CHECK(harness_wait_stat_above(&c, "bytes_sent", sent, 5000)); /* in flight */
    kill(d.pid, SIGKILL);
    CHECK(harness_wait(&c, id, &r) && !r.ok);
    CHECK_CONTAINS(r.error, "send: to 127.0.7.5:");
    printf("receiver killed mid-transfer: %s\n", r.error);
    waitpid(d.pid, NULL, 0);
    close(d.fd);
    unlink(d.log_path);
    proto_reader_destroy(&d.reader);
    msgpack_sbuffer_destroy(&d.sb);

    CHECK(harness_start(&d, "d", "127.0.7.5", NULL));
    kill(d.pid, SIGSTOP);
    sent = harness_stat(&c, "bytes_sent");
    harness_request(&c, "send", "tensor:s to_addr:s", "big", harness_data_addr(&d));
    CHECK(harness_wait_stat_above(&c, "bytes_sent", sent, 5000));
    harness_stop(&c); /* exit 0 with the send pending, no leak reports */
    kill(d.pid, SIGCONT);
    /* d drains what c's orphaned socket still sends, then sees it close. */
    CHECK(harness_wait_log(&d, "connection closed by the other end inside a frame", 10000));
    HCALL_OK(&d, &r, "ping", "");
    const char *log = harness_stop(&d);
    CHECK_CONTAINS(log, "connection closed by the other end inside a frame");
}

/* ---- malformed frames ---- */

/* Writes bytes and expects the peer to close the connection within 5 s. */
static void expect_closed_after(const struct harness_peer *p, const void *bytes, size_t n)
{
    int fd = harness_raw_connect(p);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(harness_write_all(fd, bytes, n));
    struct pollfd pfd = {fd, POLLIN, 0};
    char buf[256];
    bool closed = false;
    while (!closed && poll(&pfd, 1, 5000) == 1) {
        ssize_t got = read(fd, buf, sizeof buf);
        closed = got <= 0; /* acks of valid frames before the bad one are skipped */
    }
    CHECK_MSG(closed, "the peer kept a connection after a malformed frame");
    close(fd);
}

/* A valid frame header from node `from` (of that incarnation: its key only
 * when nonzero) for `count` floats to tensor `as` (prefix included). */
static size_t raw_header(uint8_t *buf, uint64_t count, const char *from, const char *as,
                         uint64_t incarnation)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, incarnation ? 9 : 8);
    if (incarnation) pack_kv_i64(&pk, "incarnation", (int64_t)incarnation);
    pack_kv_str(&pk, "type", "tensor");
    pack_kv_i64(&pk, "id", 1);
    pack_kv_str(&pk, "from", from);
    pack_kv_str(&pk, "as", as);
    pack_kv_str(&pk, "dtype", "f32");
    pack_kv_i64(&pk, "count", (int64_t)count);
    pack_kv_i64(&pk, "bytes", (int64_t)(count * 4));
    pack_kv_i64(&pk, "version", 1);
    memcpy(buf, FRAME_MAGIC, 4);
    buf[4] = buf[5] = 0;
    buf[6] = (uint8_t)(sb.size >> 8);
    buf[7] = (uint8_t)sb.size;
    memcpy(buf + 8, sb.data, sb.size);
    size_t n = 8 + sb.size;
    msgpack_sbuffer_destroy(&sb);
    return n;
}

static void test_malformed(struct harness_peer *a, struct harness_peer *b)
{
    struct harness_reply r;
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s", "w", b->node, "before"); /* a -> b is open */
    expect_closed_after(b, "GET / HTTP/1.0\r\n\r\n", 18);
    static const uint8_t huge[] = {'H', 'N', 'd', '2', 0x7f, 0, 0, 0};
    expect_closed_after(b, huge, sizeof huge);
    uint8_t frame[512 + 64];
    size_t n = raw_header(frame, 4, "raw", "raw", 0);
    memset(frame + n, 0x3f, 32); /* 16 bytes more than the 4 floats announced */
    expect_closed_after(b, frame, n + 32);
    n = raw_header(frame, 4, "raw", "raw", 0);
    frame[8] = 0x81; /* a map of one entry instead of eight: trailing bytes */
    expect_closed_after(b, frame, n);
    /* b lives on, its other connections too, and took the good frame. */
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s", "w", b->node, "after");
    HCALL_OK(b, &r, "read", "tensor:s", "raw");
    CHECK(r.n_values == 4);
    harness_reply_free(&r);
}

/* ---- abort: the connections the node sends on here close ---- */

/* A raw connection to addr:port from local address src. The fd, or -1. */
static int raw_connect_to(const char *addr, int port, const char *src)
{
    struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &from.sin_addr);
    inet_pton(AF_INET, addr, &to.sin_addr);
    to.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
                    connect(fd, (struct sockaddr *)&to, sizeof to) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A raw connection to p's data port from local address src. The fd, or -1. */
static int raw_connect_from(const struct harness_peer *p, const char *src)
{
    return raw_connect_to(p->addr, p->data_port, src);
}

/* True when the peer has closed fd (EOF or reset) within 5 s. */
static bool raw_closed(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    char buf[64];
    return poll(&pfd, 1, 5000) == 1 && read(fd, buf, sizeof buf) <= 0;
}

/* abort{nodes = {"a"}} on b closes the connections a sends on to b, so
 * that the rest of a frame a partition held up cannot land once it heals:
 * one found by the sender its frame named (from 127.0.0.1, naming "a"), one
 * that has sent no header yet by a's address. What is written after the
 * abort makes no arrival; a's next send reconnects. */
static void test_abort_incoming(struct harness_peer *a, struct harness_peer *b)
{
    struct harness_reply r;
    HCALL_OK(b, &r, "abort", "nodes:l", 1, (const char *[]){"a"}); /* earlier connections go */
    uint8_t frame[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX + 16] = {0};
    size_t n = raw_header(frame, 4, "a", "cut", 0), half = n + 8;
    int named = harness_raw_connect(b), unnamed = raw_connect_from(b, a->addr);
    CHECK(named >= 0 && unnamed >= 0);
    if (named < 0 || unnamed < 0) return;
    double got = harness_stat(b, "bytes_received");
    CHECK(harness_write_all(named, frame, half)); /* header and half the payload */
    CHECK(harness_write_all(unnamed, frame, 4));  /* half the prefix */
    CHECK(harness_wait_stat_above(b, "bytes_received", got + (double)half + 3, 5000));
    HCALL_OK(b, &r, "abort", "nodes:l", 1, (const char *[]){"a"});
    CHECK(harness_num(&r, "connections_closed") == 2);
    CHECK_MSG(raw_closed(named), "the connection that named a stayed open");
    CHECK_MSG(raw_closed(unnamed), "the connection from a's address stayed open");
    send(named, frame + half, n + 16 - half, MSG_NOSIGNAL); /* finds no connection */
    send(unnamed, frame + 4, n + 16 - 4, MSG_NOSIGNAL);
    close(named);
    close(unnamed);
    HCALL_ERR(b, &r, "timeout after 0.3 s: 0 of 1 arrivals", "wait", "tensor:s timeout:f", "cut",
              0.3);
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s", "w", b->node, "after_abort");
}

/* Two raw connections to b as node a of incarnation `incarnation`: one that
 * sent a header and half its payload (named), one from a's address that
 * sent half a prefix (known by address only). */
struct raw_pair {
    int named, unnamed;
    uint8_t frame[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX + 16];
    size_t n;
};

static bool raw_pair_open(struct raw_pair *r, struct harness_peer *a, struct harness_peer *b,
                          const char *as, uint64_t incarnation)
{
    memset(r->frame, 0, sizeof r->frame);
    r->n = raw_header(r->frame, 4, "a", as, incarnation);
    r->named = harness_raw_connect(b);
    r->unnamed = raw_connect_from(b, a->addr);
    return r->named >= 0 && r->unnamed >= 0 && harness_write_all(r->named, r->frame, r->n + 8) &&
           harness_write_all(r->unnamed, r->frame, 4);
}

/* The rest of both frames; 0 when every byte was taken. */
static int raw_pair_finish(struct raw_pair *r)
{
    ssize_t a = send(r->named, r->frame + r->n + 8, 8, MSG_NOSIGNAL);
    ssize_t b = send(r->unnamed, r->frame + 4, r->n + 16 - 4, MSG_NOSIGNAL);
    return a == 8 && b == (ssize_t)(r->n + 12) ? 0 : -1;
}

/* abort{nodes = {"a"}, incarnations = {a = 0}} on b when a restarted a
 * (incarnation 1) has reconnected before it was processed: a's first
 * incarnation's named connection closes at once, and its one known by
 * address closes as its frame shows incarnation 0 (nothing of it lands);
 * both connections of incarnation 1 stay and their frames land. */
static void test_abort_incarnation(struct harness_peer *a, struct harness_peer *b)
{
    struct harness_reply r;
    struct raw_pair old, fresh;
    HCALL_OK(b, &r, "abort", "nodes:l", 1, (const char *[]){"a"}); /* earlier connections go */
    harness_reply_free(&r);
    double got = harness_stat(b, "bytes_received");
    bool opened = raw_pair_open(&old, a, b, "inc0", 0) && raw_pair_open(&fresh, a, b, "inc1", 1);
    CHECK_MSG(opened, "raw connections to b");
    if (!opened) return;
    double sent = (double)(old.n + 8 + 4 + fresh.n + 8 + 4);
    CHECK(harness_wait_stat_above(b, "bytes_received", got + sent - 1, 5000));
    HCALL_OK(b, &r, "abort", "nodes:l incarnations:M", 1, (const char *[]){"a"}, 1,
             (const char *[]){"a"}, (const long long[]){0});
    CHECK(harness_num(&r, "connections_closed") == 1);
    harness_reply_free(&r); /* its lists: the next call reuses r */
    CHECK_MSG(raw_closed(old.named), "incarnation 0's named connection stayed open");
    CHECK(raw_pair_finish(&fresh) == 0);
    raw_pair_finish(&old); /* its unnamed one takes its frame's header, then closes */
    CHECK_MSG(raw_closed(old.unnamed), "incarnation 0's connection known by address stayed open");
    HCALL_OK(b, &r, "wait", "tensors:l k:i timeout:f", 1, (const char *[]){"inc1"}, 2LL, 5.0);
    harness_reply_free(&r);
    HCALL_ERR(b, &r, "timeout after 0.3 s: 0 of 1 arrivals", "wait", "tensor:s timeout:f", "inc0",
              0.3);
    harness_reply_free(&r);
    close(old.named);
    close(old.unnamed);
    close(fresh.named);
    close(fresh.unnamed);
    HCALL_ERR(b, &r, "param 'incarnations': node 'x' is not in nodes", "abort",
              "nodes:l incarnations:M", 1, (const char *[]){"a"}, 1, (const char *[]){"x"},
              (const long long[]){0});
    harness_reply_free(&r);
}

/* ---- an abort's cause, the data plane in this process ---- */

struct log_capture {
    char text[4096];
    size_t len;
};

static void capture_line(void *ctx, const char *line)
{
    struct log_capture *cap = ctx;
    int n = snprintf(cap->text + cap->len, sizeof cap->text - cap->len, "%s\n", line);
    if (n > 0) cap->len = strnlen(cap->text, sizeof cap->text);
}

/* Runs loop until dp holds `want` connections (up to 5 s): whether it did. */
static bool loop_until_connections(struct ev_loop *loop, struct dataplane *dp, uint64_t want)
{
    for (int i = 0; i < 2500; i++) {
        struct dataplane_totals t;
        dataplane_get_totals(dp, &t);
        if (t.connections == want) return true;
        ev_run(loop, EVRUN_NOWAIT);
        nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
    }
    return false;
}

/* A connection of node a known by address only, aborted by `aborts`
 * (incarnations up to upto[i], cause[i]) before its first frame, which
 * names incarnation 0: it closes then, and its line in the log gives
 * `want` and the data plane's own words after it. */
static void abort_cause_case(size_t aborts, const uint64_t *upto, const char *const *cause,
                             const char *want)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct store *store = store_create();
    struct log_capture cap = {.len = 0};
    struct dataplane_config cfg = {.node = "b", .addr = "127.0.7.3", .port = 0, .store = store};
    struct dataplane_hooks hooks = {.log = capture_line, .ctx = &cap};
    struct dataplane *dp = loop && store ? dataplane_create(loop, &cfg, &hooks) : NULL;
    CHECK(dp && dataplane_port(dp) > 0);
    if (!dp || dataplane_port(dp) <= 0) goto out;
    struct sockaddr_in a_addr = {.sin_family = AF_INET, .sin_port = htons(7000)};
    inet_pton(AF_INET, "127.0.7.4", &a_addr.sin_addr);
    struct sockaddr_storage ss = {0};
    memcpy(&ss, &a_addr, sizeof a_addr);
    CHECK(dataplane_set_peer(dp, "a", &ss, sizeof a_addr) == 0);
    int fd = raw_connect_to("127.0.7.3", dataplane_port(dp), "127.0.7.4");
    CHECK(fd >= 0 && loop_until_connections(loop, dp, 1));
    for (size_t i = 0; i < aborts; i++) /* marked, still open */
        CHECK(dataplane_abort(dp, "a", upto[i], cause[i]) == 0);
    uint8_t frame[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX + 16] = {0};
    size_t n = raw_header(frame, 4, "a", "x", 0);
    CHECK(fd >= 0 && harness_write_all(fd, frame, n));
    CHECK_MSG(loop_until_connections(loop, dp, 0), "the aborted connection stayed open");
    CHECK_CONTAINS(cap.text, want);
    if (fd >= 0) close(fd);
out:
    if (dp) dataplane_destroy(dp);
    if (store) store_destroy(store);
    if (loop) ev_loop_destroy(loop);
}

/* The connection closes with the cause the abort's caller gave, not one
 * of the data plane's own; after two aborts, with the cause of the one
 * that covers its incarnation the widest (the later abort of fewer
 * incarnations, 0 after 0..1, does not replace it). */
static void test_abort_cause_deferred(void)
{
    abort_cause_case(1, (const uint64_t[]){0}, (const char *const[]){"test cause: a was cut off"},
                     "test cause: a was cut off; closed (node a, incarnation 0)");
    abort_cause_case(2, (const uint64_t[]){1, 0},
                     (const char *const[]){"test cause: a and its restart cut off",
                                           "test cause: a's first incarnation"},
                     "test cause: a and its restart cut off; closed (node a, incarnation 0)");
}

int main(void)
{
    harness_init();
    struct harness_peer a, b;
    CHECK(harness_start(&a, "a", "127.0.7.1", NULL));
    CHECK(harness_start(&b, "b", "127.0.7.2", NULL));
    const char *names[] = {"a", "b"}, *addrs[] = {harness_data_addr(&a), harness_data_addr(&b)};
    set_peers(&a, 2, names, addrs);
    set_peers(&b, 2, names, addrs);

    send_and_check(&a, &b, "t1m", 1023, 256); /* 1 MB */
    /* Not a whole number of the sender's 256 KB writes: 4 and a part. */
    send_and_check(&a, &b, "t_odd", 99, 3001);
    send_and_check(&a, &b, "t64m", 4095, 4096); /* 64 MB */
    send_and_check(&b, &a, "t64m", 4095, 4096); /* back, into the existing tensor */
    test_concurrent(&a, &b);
    HCALL_OK(&b, &(struct harness_reply){0}, "tensor", "name:s size:i", "small", 32LL);
    test_ranges(&a, &b);
    test_overwrite(&a, &b);
    test_peer_errors(&a, &b);
    test_snapshot(&a, &b);
    test_receive_while_computing(&a);
    test_malformed(&a, &b);
    test_abort_incoming(&a, &b);
    test_abort_incarnation(&a, &b);
    test_abort_cause_deferred();
    test_peer_death();

    harness_stop(&a);
    const char *log = harness_stop(&b);
    CHECK_CONTAINS(log, "hiernet-peer[b]: data plane: connection from 127.0.0.1");
    CHECK_CONTAINS(log, "malformed frame (bad frame magic 47455420)");
    CHECK_CONTAINS(log, "malformed frame (frame header of 2130706432 bytes");
    CHECK_CONTAINS(log, "malformed frame (bad frame magic 3f3f3f3f)");
    CHECK_CONTAINS(log, "malformed frame (frame header has trailing bytes)");
    return check_report();
}
