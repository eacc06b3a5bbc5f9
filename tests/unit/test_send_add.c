/* test_send_add.c — send{} beyond plain copies, between real hiernet-peer
 * processes on loopback (127.0.10.x): add-receives (whole, summed as it
 * arrives; range; at; several senders into one accumulator; into a tensor
 * a send of the receiver still holds, whose snapshot must stay intact;
 * a compute command on the target while an add streams), at (a shard of a
 * server into a worker's full model and back), broadcast to three
 * receivers (one snapshot, sums of bytes, a failing destination named, a
 * destination listed twice), the versions receives give, and the errors.
 * Sums are compared exactly: float addition of the same two numbers is
 * exact-rounded everywhere, and small integers add exactly in any order. */
#include "tests/unit/peer_harness.h"

enum { N_PEERS = 4 };
static struct harness_peer peers[N_PEERS];
static const char *const names[N_PEERS] = {"a", "b", "c", "d"};
static const char *const hosts[N_PEERS] = {"127.0.10.1", "127.0.10.2", "127.0.10.3", "127.0.10.4"};

/* Peers a, b, c, d, each knowing the others, plus "dead": an address where
 * nothing listens. */
static void start_peers(void)
{
    const char *addrs[N_PEERS + 1], *keys[N_PEERS + 1];
    for (int i = 0; i < N_PEERS; i++)
        CHECK(harness_start(&peers[i], names[i], hosts[i], NULL));
    for (int i = 0; i < N_PEERS; i++) {
        keys[i] = names[i];
        addrs[i] = harness_data_addr(&peers[i]);
    }
    keys[N_PEERS] = "dead";
    addrs[N_PEERS] = "127.0.10.9:9";
    struct harness_reply r;
    for (int i = 0; i < N_PEERS; i++)
        HCALL_OK(&peers[i], &r, "peers", "table:m", N_PEERS + 1, keys, addrs);
}

/* The values of a tensor (at most 65536). */
static float *values_of(struct harness_peer *p, const char *name, size_t *n)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "read", "tensor:s", name);
    *n = r.n_values;
    return r.values; /* the caller frees */
}

/* A random tensor of 65536 elements (logreg:4095-16) named name on p. */
static void make_random(struct harness_peer *p, const char *name, int seed)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "tensor", "name:s size:i fill:s seed:i", name, 65536LL, "normal",
             (long long)seed);
}

/* dst[i] == a[i] + b[i] in float for every element. */
static bool is_sum(const float *dst, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (dst[i] != a[i] + b[i]) {
            fprintf(stderr, "element %zu: %.9g != %.9g + %.9g\n", i, dst[i], a[i], b[i]);
            return false;
        }
    return true;
}

/* ||x - y|| on p, computed as a copy minus y: 0 when they are equal. */
static double distance(struct harness_peer *p, const char *x, const char *y)
{
    struct harness_reply r;
    HCALL_OK(p, &r, "copy", "src:s dst:s", x, "dist_tmp");
    HCALL_OK(p, &r, "axpy", "y:s x:s alpha:f", "dist_tmp", y, -1.0);
    HCALL_OK(p, &r, "norm", "x:s", "dist_tmp");
    return harness_num(&r, "value");
}

static void test_add_whole(void)
{
    struct harness_peer *a = &peers[0], *b = &peers[1];
    struct harness_reply r;
    make_random(a, "x", 1);
    make_random(b, "acc", 2);
    size_t n, nx;
    float *before = values_of(b, "acc", &n), *x = values_of(a, "x", &nx);
    HCALL_OK(b, &r, "norm", "x:s", "acc");
    double v0 = harness_num(&r, "version");
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s add:b", "x", "b", "acc", 1);
    CHECK(harness_num(&r, "bytes") == 65536 * 4 && harness_num(&r, "transfers") == 1);
    size_t n2;
    float *after = values_of(b, "acc", &n2);
    CHECK(n == 65536 && nx == 65536 && n2 == 65536 && is_sum(after, before, x, n));
    HCALL_OK(b, &r, "norm", "x:s", "acc");
    CHECK_MSG(harness_num(&r, "version") == v0 + 1, "add receive: version %g after %g",
              harness_num(&r, "version"), v0);
    /* The recv notification says it was an add, and the version after it. */
    struct harness_note *note = &b->notes[b->n_notes - 1];
    CHECK_STREQ(note->tensor, "acc");
    CHECK(note->version == (uint64_t)v0 + 1);
    free(before);
    free(x);
    free(after);
}

/* 16 MB, summed while it arrives, compared with the same sum computed by
 * axpy on the receiver: equal to the bit. */
static void test_add_large(void)
{
    struct harness_peer *a = &peers[0], *b = &peers[1];
    struct harness_reply r;
    const long long n = 4LL << 20;
    HCALL_OK(a, &r, "tensor", "name:s size:i fill:s seed:i", "big", n, "normal", 5LL);
    HCALL_OK(b, &r, "tensor", "name:s size:i fill:s low:f high:f seed:i", "bigacc", n, "uniform",
             -1.0, 1.0, 6LL);
    HCALL_OK(b, &r, "copy", "src:s dst:s", "bigacc", "expect");
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s", "big", "b", "bigcopy");
    HCALL_OK(b, &r, "axpy", "y:s x:s", "expect", "bigcopy");
    for (int round = 0; round < 3; round++) {
        HCALL_OK(a, &r, "send", "tensor:s to:s as:s add:b", "big", "b", "bigacc", 1);
        CHECK(harness_num(&r, "bytes") == n * 4);
        if (round < 2) HCALL_OK(b, &r, "axpy", "y:s x:s", "expect", "bigcopy");
    }
    CHECK(harness_num(&r, "ms") > 0);
    CHECK_MSG(distance(b, "bigacc", "expect") == 0, "16 MB add differs from axpy");
    HCALL_OK(b, &r, "drop", "names:l", 3, (const char *[]){"bigacc", "expect", "bigcopy"});
}

/* Ranges and at: a worker's gradient range into a server's shard, the
 * server's shard into the worker's full model. */
static void test_add_range_at(void)
{
    struct harness_peer *a = &peers[0], *b = &peers[1];
    struct harness_reply r;
    HCALL_OK(a, &r, "tensor", "name:s size:i fill:f", "g", 10LL, 1.0);
    HCALL_OK(a, &r, "scale", "x:s alpha:f range:r", "g", 3.0, 4LL, 3LL); /* 1 1 1 1 3 3 3 1 1 1 */
    HCALL_OK(b, &r, "tensor", "name:s size:i fill:f", "shard", 3LL, 10.0);
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s range:r at:i add:b", "g", "b", "shard", 4LL, 3LL,
             0LL, 1);
    CHECK(harness_num(&r, "bytes") == 12);
    CHECK(harness_values_are(b, "shard", 3, (float[]){13, 13, 13}));
    /* A range without at lands at its own offset; add within it. */
    HCALL_OK(b, &r, "tensor", "name:s size:i fill:f", "full", 10LL, 100.0);
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s range:r add:b", "g", "b", "full", 3LL, 2LL, 1);
    CHECK(harness_values_are(b, "full", 10,
                             (float[]){100, 100, 100, 101, 103, 100, 100, 100, 100, 100}));
    /* The server's shard back into the worker's model at [4, 7), replacing. */
    HCALL_OK(b, &r, "send", "tensor:s to:s as:s at:i", "shard", "a", "g", 4LL);
    CHECK(harness_values_are(a, "g", 10, (float[]){1, 1, 1, 1, 13, 13, 13, 1, 1, 1}));
    /* at with add, whole sender tensor. */
    HCALL_OK(b, &r, "send", "tensor:s to:s as:s at:i add:b", "shard", "a", "g", 7LL, 1);
    CHECK(harness_values_are(a, "g", 10, (float[]){1, 1, 1, 1, 13, 13, 13, 14, 14, 14}));
    /* An empty range is an add of nothing, but a receive all the same. */
    HCALL_OK(b, &r, "send", "tensor:s to:s as:s range:r add:b", "shard", "a", "g", 1LL, 0LL, 1);
    CHECK(harness_num(&r, "bytes") == 0);
    /* Errors name the receiver and what does not fit. */
    HCALL_ERR(b, &r, "send: to a (127.0.10.1:", "send", "tensor:s to:s as:s at:i", "shard", "a",
              "g", 8LL);
    CHECK_CONTAINS(r.error, "refused: range {8, 3} is outside 'g' (10 elements)");
    HCALL_ERR(b, &r, "refused: range target 'nothing' does not exist", "send",
              "tensor:s to:s as:s at:i", "shard", "a", "nothing", 0LL);
    HCALL_ERR(b, &r, "refused: add target 'nothing' does not exist", "send",
              "tensor:s to:s as:s add:b", "shard", "a", "nothing", 1);
    HCALL_ERR(b, &r, "refused: add of 3 elements into 'g', which has 10", "send",
              "tensor:s to:s as:s add:b", "shard", "a", "g", 1);
    HCALL_ERR(b, &r, "send: param 'at': -1 is not between 0 and", "send", "tensor:s to:s at:i",
              "shard", "a", -1LL);
    HCALL_ERR(b, &r, "send: param 'add': expected boolean", "send", "tensor:s to:s add:i", "shard",
              "a", 1LL);
    CHECK(harness_values_are(a, "g", 10, (float[]){1, 1, 1, 1, 13, 13, 13, 14, 14, 14}));
}

/* Three senders add into one accumulator at once, each twice: every add is
 * applied (small integers: exact in any order). */
static void test_add_many_senders(void)
{
    struct harness_reply r;
    const long long n = 1LL << 20;
    HCALL_OK(&peers[3], &r, "tensor", "name:s size:i fill:f", "sum", n, 0.0);
    uint32_t ids[3][2];
    for (int i = 0; i < 3; i++) {
        HCALL_OK(&peers[i], &r, "tensor", "name:s size:i fill:f", "part", n, (double)(1 << i));
        for (int k = 0; k < 2; k++)
            ids[i][k] = harness_request(&peers[i], "send", "tensor:s to:s as:s add:b", "part", "d",
                                        "sum", 1);
    }
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            CHECK(harness_wait(&peers[i], ids[i][k], &r) && r.ok);
    HCALL_OK(&peers[3], &r, "norm", "x:s", "sum"); /* every element 2 * (1 + 2 + 4) */
    CHECK_MSG(harness_num(&r, "value") == 14.0 * sqrt((double)n), "norm %.17g",
              harness_num(&r, "value"));
    CHECK(harness_num(&r, "version") == 1 + 6);
    HCALL_OK(&peers[3], &r, "read", "tensor:s range:r", "sum", n - 3, 3LL);
    CHECK(r.n_values == 3 && r.values[0] == 14 && r.values[2] == 14);
    harness_reply_free(&r);
}

/* An add into a tensor that the receiver is itself still sending: the
 * transfer keeps its snapshot (copy on write), the add lands. */
static void test_add_into_held(void)
{
    struct harness_peer *a = &peers[0], *b = &peers[1], *c = &peers[2];
    struct harness_reply r;
    const long long n = 24LL << 20; /* 96 MB: more than the socket buffers hold */
    HCALL_OK(b, &r, "tensor", "name:s size:i fill:f", "held", n, 1.0);
    HCALL_OK(a, &r, "tensor", "name:s size:i fill:f", "one", n, 2.0);
    HCALL_OK(a, &r, "tensor", "name:s size:i fill:f", "part", 5LL, 4.0);
    kill(c->pid, SIGSTOP); /* c stops reading: b's send stalls with its snapshot held */
    double sent = harness_stat(b, "bytes_sent");
    uint32_t id = harness_request(b, "send", "tensor:s to:s", "held", "c");
    CHECK(harness_wait_stat_above(b, "bytes_sent", sent, 5000)); /* the send has begun */
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s add:b", "one", "b", "held", 1);
    HCALL_OK(a, &r, "send", "tensor:s to:s as:s at:i add:b", "part", "b", "held", 10LL, 1);
    kill(c->pid, SIGCONT);
    CHECK(harness_wait(b, id, &r) && r.ok && harness_num(&r, "bytes") == n * 4);
    HCALL_OK(c, &r, "norm", "x:s", "held");
    CHECK_MSG(harness_num(&r, "value") == sqrt((double)n), "the snapshot changed: %.17g",
              harness_num(&r, "value"));
    HCALL_OK(b, &r, "read", "tensor:s range:r", "held", 8LL, 8LL);
    CHECK(r.n_values == 8 && r.values[0] == 3 && r.values[2] == 7 && r.values[6] == 7 &&
          r.values[7] == 3);
    harness_reply_free(&r);
    for (int i = 0; i < 3; i++)
        HCALL_OK(&peers[i], &r, "drop", "names:l", 2, (const char *[]){"held", "one"});
}

/* A compute command writes the target while a whole add streams into it:
 * either order is right (the add before or after the scale), a lost or torn
 * update is not. */
static void test_add_during_compute(void)
{
    struct harness_peer *a = &peers[0], *b = &peers[1];
    struct harness_reply r;
    const long long n = 16LL << 20;
    HCALL_OK(a, &r, "tensor", "name:s size:i fill:f", "inc", n, 1.0);
    HCALL_OK(b, &r, "tensor", "name:s size:i fill:f", "target", n, 3.0);
    uint32_t id = harness_request(a, "send", "tensor:s to:s as:s add:b", "inc", "b", "target", 1);
    HCALL_OK(b, &r, "scale", "x:s alpha:f", "target", 2.0);
    CHECK(harness_wait(a, id, &r) && r.ok);
    HCALL_OK(b, &r, "read", "tensor:s range:r", "target", 0LL, 4LL);
    float v = r.n_values == 4 ? r.values[0] : -1;
    CHECK_MSG(v == 7 || v == 8, "element %g: the add or the scale was lost", v);
    CHECK(r.n_values == 4 && r.values[3] == v);
    harness_reply_free(&r);
    HCALL_OK(b, &r, "read", "tensor:s range:r", "target", n - 4, 4LL);
    CHECK(r.n_values == 4 && r.values[0] == v && r.values[3] == v); /* not torn */
    harness_reply_free(&r);
    HCALL_OK(a, &r, "drop", "name:s", "inc");
    HCALL_OK(b, &r, "drop", "name:s", "target");
}

/* One snapshot to three receivers, in parallel; the result sums bytes. */
static void test_broadcast(void)
{
    struct harness_peer *a = &peers[0];
    struct harness_reply r;
    make_random(a, "w", 9);
    HCALL_OK(a, &r, "scale", "x:s alpha:f", "w", 0.5); /* version 2 */
    HCALL_OK(&peers[3], &r, "tensor", "name:s size:i", "w", 3LL);
    HCALL_OK(&peers[3], &r, "scale", "x:s alpha:f", "w", 1.0); /* d's w at version 2 too... */
    HCALL_OK(&peers[3], &r, "scale", "x:s alpha:f", "w", 1.0); /* ...and 3: above a's */
    const char *to[] = {"b", "c", "d"};
    HCALL_OK(a, &r, "send", "tensor:s to:l", "w", 3, to);
    CHECK(harness_num(&r, "bytes") == 3 * 65536 * 4);
    CHECK(harness_num(&r, "transfers") == 3 && harness_num(&r, "version") == 2);
    CHECK(harness_num(&r, "ms") > 0 && harness_num(&r, "snapshot_ms") >= 0);
    size_t n;
    float *want = values_of(a, "w", &n);
    for (int i = 1; i < N_PEERS; i++) {
        size_t m;
        float *got = values_of(&peers[i], "w", &m);
        CHECK_MSG(m == n && memcmp(got, want, n * sizeof *got) == 0, "receiver %s", names[i]);
        free(got);
        HCALL_OK(&peers[i], &r, "norm", "x:s", "w");
        /* A whole receive takes the sender's version, unless the name's
         * own is higher (d's was 3): versions never go back. */
        CHECK_MSG(harness_num(&r, "version") == (i == 3 ? 3 : 2), "%s: version %g", names[i],
                  harness_num(&r, "version"));
    }
    free(want);
    /* A destination that fails is named; the others still get the tensor. */
    HCALL_OK(a, &r, "tensor", "name:s size:i fill:f", "w2", 4LL, 6.0);
    const char *to_dead[] = {"b", "dead", "c"};
    HCALL_ERR(a, &r, "send: to dead (127.0.10.9:9): connect: Connection refused", "send",
              "tensor:s to:l", "w2", 3, to_dead);
    CHECK(harness_values_are(&peers[1], "w2", 4, (float[]){6, 6, 6, 6}));
    CHECK(harness_values_are(&peers[2], "w2", 4, (float[]){6, 6, 6, 6}));
    const char *twice[] = {"b", "c", "b"};
    HCALL_ERR(a, &r, "send: param 'to': node 'b' is listed twice", "send", "tensor:s to:l", "w2", 3,
              twice);
    const char *ghost[] = {"b", "ghost"};
    HCALL_ERR(a, &r, "send: param 'to': no address for node 'ghost'", "send", "tensor:s to:l", "w2",
              2, ghost);
    HCALL_ERR(a, &r, "send: param 'to': no destination", "send", "tensor:s to:l", "w2", 0, NULL);
    /* Broadcast of a range with add, into each receiver's w2. */
    const char *to2[] = {"b", "c"};
    HCALL_OK(a, &r, "send", "tensor:s to:l as:s range:r add:b", "w2", 2, to2, "w2", 1LL, 2LL, 1);
    CHECK(harness_num(&r, "bytes") == 2 * 2 * 4 && harness_num(&r, "transfers") == 2);
    CHECK(harness_values_are(&peers[1], "w2", 4, (float[]){6, 12, 12, 6}));
    CHECK(harness_values_are(&peers[2], "w2", 4, (float[]){6, 12, 12, 6}));
}

int main(void)
{
    harness_init();
    start_peers();
    test_add_whole();
    test_add_large();
    test_add_range_at();
    test_add_many_senders();
    test_add_into_held();
    test_add_during_compute();
    test_broadcast();
    for (int i = 0; i < N_PEERS; i++)
        harness_stop(&peers[i]);
    return check_report();
}
