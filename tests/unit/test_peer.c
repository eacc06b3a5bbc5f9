/* test_peer.c — the real hiernet-peer over a socketpair: every command with
 * real requests and responses, the error responses, malformed input, order
 * and concurrency of jobs, large pipelined output, exit statuses.
 *
 * Peers are driven through peer_harness.h, started fresh (harness_spawn) and
 * in_order: every response must be the next one. Each peer's stderr goes to
 * a temporary file, so its log lines can be checked. */
#include "tests/unit/peer_harness.h"

/* Starts a fresh peer "t1" whose responses must come in request order. */
static bool peer_start(struct harness_peer *p, const char *const *extra)
{
    bool started = harness_spawn(p, "t1", "127.0.0.1", extra);
    p->in_order = true;
    return started;
}

/* A call that must succeed and report its time. */
#define CALL_OK(p, r, method, ...)                                                                 \
    do {                                                                                           \
        HCALL_OK(p, r, method, __VA_ARGS__);                                                       \
        if ((r)->ok) CHECK(harness_f64((r), "ms") >= 0);                                           \
    } while (0)

static bool values_are(struct harness_peer *p, const char *name, int n, const float *want)
{
    struct harness_reply r;
    bool same = harness_call(p, &r, "read", "tensor:s", name) && r.n_values == (size_t)n;
    for (int i = 0; same && i < n; i++)
        same = r.values[i] == want[i];
    if (!same) {
        fprintf(stderr, "tensor %s (%zu values):", name, r.n_values);
        for (size_t i = 0; i < r.n_values && i < 64; i++)
            fprintf(stderr, " %g", r.values[i]);
        fputc('\n', stderr);
    }
    harness_reply_free(&r);
    return same;
}

/* ---- command line ---- */

/* Runs hiernet-peer with argv (no control fd set up); returns the wait status
 * and the first line of its output in line. */
static int run_args(const char *const *args, char *line, size_t cap)
{
    int out[2];
    if (pipe(out) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[16] = {harness_peer_path};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        execv(harness_peer_path, (char **)argv);
        _exit(127);
    }
    close(out[1]);
    ssize_t n = read(out[0], line, cap - 1);
    line[n > 0 ? n : 0] = '\0';
    char rest[4096];
    while (read(out[0], rest, sizeof rest) > 0) {
    }
    close(out[0]);
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void expect_usage_error(const char *const *args, const char *want)
{
    char out[1024];
    int status = run_args(args, out, sizeof out);
    CHECK_MSG(harness_exited(status, 2), "%s: status %d", args[0] ? args[0] : "(none)", status);
    CHECK_CONTAINS(out, want);
    char *nl = strchr(out, '\n');
    CHECK_MSG(nl && nl[1] == '\0', "not one line: %s", out);
}

static void test_command_line(void)
{
    char out[1024];
    int status = run_args((const char *[]){"--help", NULL}, out, sizeof out);
    CHECK(harness_exited(status, 0));
    CHECK_CONTAINS(out, "usage: hiernet-peer --control-fd N --node NAME");
    expect_usage_error((const char *[]){NULL}, "--control-fd is required");
    expect_usage_error((const char *[]){"--control-fd", "1", NULL}, "--node is required");
    expect_usage_error((const char *[]){"--control-fd", "x", "--node", "a", NULL},
                       "is not a file descriptor");
    expect_usage_error((const char *[]){"--control-fd", "987", "--node", "a", NULL},
                       "--control-fd 987: Bad file descriptor");
    expect_usage_error((const char *[]){"--bogus", NULL}, "unknown option '--bogus'");
    expect_usage_error((const char *[]){"--node", NULL}, "--node needs a value");
    expect_usage_error(
        (const char *[]){"--control-fd", "1", "--node", "a", "--dilation", "0.5", NULL},
        "--dilation: '0.5' is not a number >= 1");
    expect_usage_error((const char *[]){"--control-fd", "1", "--node", "a", "--speed", "0", NULL},
                       "--speed: '0' is not a positive number");
    expect_usage_error((const char *[]){"--control-fd", "1", "--node", "a", "--threads", "0", NULL},
                       "--threads");
    expect_usage_error(
        (const char *[]){"--control-fd", "1", "--node", "a", "--data-port", "70000", NULL},
        "--data-port");
    expect_usage_error(
        (const char *[]){"--control-fd", "1", "--node", "a", "--addr", "1.2.3", NULL},
        "--addr: '1.2.3' is not an IPv4 or IPv6 address");
    expect_usage_error((const char *[]){"--control-fd", "1", "--node", "a", "extra", NULL},
                       "unexpected argument 'extra'");
}

/* ---- commands ---- */

static void test_ping_stats(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "ping", "");
    CHECK(harness_f64(&r, "ms") < 100);
    HCALL_ERR(p, &r, "ping: unknown param 'x'", "ping", "x:i", 1LL);
    CALL_OK(p, &r, "stats", "");
    CHECK(harness_i64(&r, "tensors") == 0 && harness_i64(&r, "tensor_bytes") == 0);
    CHECK(harness_i64(&r, "mem_rss_bytes") > 0);
    CHECK(harness_i64(&r, "bytes_sent") == 0 && harness_i64(&r, "bytes_received") == 0);
    CHECK(harness_f64(&r, "compute_ms") >= 0 && harness_f64(&r, "cpu_ms") >= 0);
    CHECK(harness_i64(&r, "commands") == 3);
    const char *node = harness_str(&r, "node");
    CHECK(node != NULL);
    CHECK_STREQ(node ? node : "", "t1");
}

static void test_tensor(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "w", 12LL, 1.5);
    CHECK(harness_i64(&r, "size") == 12 && harness_f64(&r, "cpu_ms") >= 0);
    float w[12];
    for (int i = 0; i < 12; i++)
        w[i] = 1.5f;
    CHECK(values_are(p, "w", 12, w));
    CALL_OK(p, &r, "tensor", "name:s size:i", "z", 3LL);
    CHECK(values_are(p, "z", 3, (float[]){0, 0, 0}));
    CALL_OK(p, &r, "tensor", "name:s size:f", "z", 2.0); /* replaces; Lua sends 2.0 */
    CHECK(values_are(p, "z", 2, (float[]){0, 0}));
    CALL_OK(p, &r, "tensor", "name:s size:i fill:n", "empty", 0LL);
    CHECK(values_are(p, "empty", 0, NULL));
    HCALL_ERR(p, &r, "tensor: param 'size': missing", "tensor", "name:s", "a");
    HCALL_ERR(p, &r, "tensor: param 'name': missing", "tensor", "size:i", 1LL);
    HCALL_ERR(p, &r, "tensor: param 'size': -1 is not between 0 and 2147483647", "tensor",
              "name:s size:i", "a", -1LL);
    HCALL_ERR(p, &r, "is not between", "tensor", "name:s size:i", "a", (1LL << 31) + 1);
    HCALL_ERR(p, &r, "tensor: param 'size': expected integer, got number", "tensor",
              "name:s size:f", "a", 2.5);
    HCALL_ERR(p, &r, "tensor: param 'fill': expected number, got string", "tensor",
              "name:s size:i fill:s", "a", 1LL, "x");
    HCALL_ERR(p, &r, "out of the float32 range", "tensor", "name:s size:i fill:f", "a", 1LL, 1e300);
    HCALL_ERR(p, &r, "tensor: param 'name': empty tensor name", "tensor", "name:s size:i", "", 1LL);
    char longname[200];
    memset(longname, 'q', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    HCALL_ERR(p, &r, "tensor: param 'name': string too long", "tensor", "name:s size:i", longname,
              1LL);
    HCALL_ERR(p, &r, "tensor: unknown param 'sise'", "tensor", "name:s sise:i", "a", 1LL);
}

static void test_copy_drop(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "c", 4LL, 7.0);
    CALL_OK(p, &r, "copy", "src:s dst:s", "c", "c2");
    CHECK(harness_i64(&r, "size") == 4);
    CHECK(values_are(p, "c2", 4, (float[]){7, 7, 7, 7}));
    CALL_OK(p, &r, "scale", "x:s alpha:f", "c", 2.0); /* the copy is independent */
    CHECK(values_are(p, "c2", 4, (float[]){7, 7, 7, 7}));
    CALL_OK(p, &r, "copy", "src:s dst:s", "c", "c");
    HCALL_ERR(p, &r, "copy: tensor 'nope' not found", "copy", "src:s dst:s", "nope", "x");
    HCALL_ERR(p, &r, "copy: param 'dst': missing", "copy", "src:s", "c");
    CALL_OK(p, &r, "drop", "names:l", 3, (const char *[]){"c", "c2", "missing"});
    CHECK(harness_i64(&r, "dropped") == 2);
    HCALL_ERR(p, &r, "copy: tensor 'c' not found", "copy", "src:s dst:s", "c", "x");
    CALL_OK(p, &r, "tensor", "name:s size:i", "d", 1LL);
    CALL_OK(p, &r, "drop", "name:s", "d");
    CHECK(harness_i64(&r, "dropped") == 1);
    CALL_OK(p, &r, "drop", "name:s", "d");
    CHECK(harness_i64(&r, "dropped") == 0);
    CALL_OK(p, &r, "drop", "names:l", 0, NULL);
    CHECK(harness_i64(&r, "dropped") == 0);
    HCALL_ERR(p, &r, "drop: param 'name' or 'names': missing", "drop", "");
    HCALL_ERR(p, &r, "drop: param 'names': expected an array of tensor names, got string", "drop",
              "names:s", "c");
    HCALL_ERR(p, &r, "drop: param 'names': element 2 is not a tensor name (empty", "drop",
              "names:l", 2, (const char *[]){"a", ""});
}

static void test_axpy_scale(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "y", 6LL, 1.0);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "x", 6LL, 2.0);
    CALL_OK(p, &r, "axpy", "y:s x:s alpha:f", "y", "x", 0.5);
    CHECK(harness_f64(&r, "cpu_ms") >= 0);
    CHECK(values_are(p, "y", 6, (float[]){2, 2, 2, 2, 2, 2}));
    CALL_OK(p, &r, "axpy", "y:s x:s range:r", "y", "x", 2LL, 3LL); /* alpha defaults to 1 */
    CHECK(values_are(p, "y", 6, (float[]){2, 2, 4, 4, 4, 2}));
    CALL_OK(p, &r, "axpy", "y:s x:s alpha:f range:r", "y", "y", 1.0, 0LL, 1LL); /* aliased */
    CHECK(values_are(p, "y", 6, (float[]){4, 2, 4, 4, 4, 2}));
    CALL_OK(p, &r, "axpy", "y:s x:s range:r", "y", "x", 6LL, 0LL); /* empty range at the end */
    CALL_OK(p, &r, "tensor", "name:s size:i", "short", 5LL);
    HCALL_ERR(p, &r, "axpy: size mismatch: y has 6 elements, x has 5", "axpy", "y:s x:s", "y",
              "short");
    HCALL_ERR(p, &r, "axpy: tensor 'g' not found", "axpy", "y:s x:s", "y", "g");
    HCALL_ERR(p, &r, "axpy: tensor 'g' not found", "axpy", "y:s x:s", "g", "y");
    HCALL_ERR(p, &r, "axpy: range {4, 2} out of bounds for 'short' (5 elements)", "axpy",
              "y:s x:s range:r", "y", "short", 4LL, 2LL);
    HCALL_ERR(p, &r, "axpy: param 'range': expected {offset, count}, got string", "axpy",
              "y:s x:s range:s", "y", "x", "0,1");
    HCALL_ERR(p, &r, "axpy: param 'x': missing", "axpy", "y:s", "y");
    HCALL_ERR(p, &r, "axpy: param 'alpha': expected number, got string", "axpy", "y:s x:s alpha:s",
              "y", "x", "2");
    CALL_OK(p, &r, "scale", "x:s alpha:f", "x", -1.5);
    CHECK(values_are(p, "x", 6, (float[]){-3, -3, -3, -3, -3, -3}));
    CALL_OK(p, &r, "scale", "x:s alpha:i range:r", "x", 0LL, 1LL, 2LL);
    CHECK(values_are(p, "x", 6, (float[]){-3, 0, 0, -3, -3, -3}));
    HCALL_ERR(p, &r, "scale: param 'alpha': missing", "scale", "x:s", "x");
    HCALL_ERR(p, &r, "scale: range {7, 0} out of bounds for 'x' (6 elements)", "scale",
              "x:s alpha:f range:r", "x", 2.0, 7LL, 0LL);
}

static void test_sum(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "a", 3LL, 1.0);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "b", 3LL, 10.0);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "c", 3LL, 100.0);
    CALL_OK(p, &r, "sum", "out:s inputs:l", "s", 3, (const char *[]){"a", "b", "c"});
    CHECK(harness_i64(&r, "size") == 3 && harness_f64(&r, "cpu_ms") >= 0);
    CHECK(values_are(p, "s", 3, (float[]){111, 111, 111}));
    CALL_OK(p, &r, "sum", "out:s inputs:l", "b", 2,
            (const char *[]){"a", "b"}); /* out is an input */
    CHECK(values_are(p, "b", 3, (float[]){11, 11, 11}));
    CALL_OK(p, &r, "sum", "out:s inputs:l", "one", 1, (const char *[]){"c"});
    CHECK(values_are(p, "one", 3, (float[]){100, 100, 100}));
    CALL_OK(p, &r, "sum", "out:s inputs:l", "twice", 3, (const char *[]){"c", "a", "c"});
    CHECK(values_are(p, "twice", 3, (float[]){201, 201, 201})); /* an input named twice */
    CALL_OK(p, &r, "tensor", "name:s size:i", "four", 4LL);
    HCALL_ERR(p, &r, "sum: size mismatch: input 'four' has 4 elements, 'a' has 3", "sum",
              "out:s inputs:l", "s", 2, (const char *[]){"a", "four"});
    HCALL_ERR(p, &r, "sum: tensor 'nope' not found", "sum", "out:s inputs:l", "s", 2,
              (const char *[]){"a", "nope"});
    HCALL_ERR(p, &r, "sum: param 'inputs': empty", "sum", "out:s inputs:l", "s", 0, NULL);
    HCALL_ERR(p, &r, "sum: param 'inputs': missing", "sum", "out:s", "s");
    HCALL_ERR(p, &r, "sum: param 'out': missing", "sum", "inputs:l", 1, (const char *[]){"a"});
    CHECK(values_are(p, "s", 3, (float[]){111, 111, 111})); /* failed sums left it alone */
}

static void test_norm_dot(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "v", 2LL, 3.0);
    CALL_OK(p, &r, "scale", "x:s alpha:f range:r", "v", 4.0 / 3.0, 1LL, 1LL); /* v = {3, 4} */
    CALL_OK(p, &r, "norm", "x:s", "v");
    CHECK_NEAR(harness_f64(&r, "value"), 5.0, 1e-6);
    CHECK(harness_f64(&r, "cpu_ms") >= 0);
    CALL_OK(p, &r, "norm", "x:s range:r", "v", 1LL, 1LL);
    CHECK_NEAR(harness_f64(&r, "value"), 4.0, 1e-6);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "u", 2LL, 2.0);
    CALL_OK(p, &r, "dot", "x:s y:s", "v", "u");
    CHECK_NEAR(harness_f64(&r, "value"), 14.0, 1e-5);
    CALL_OK(p, &r, "dot", "x:s y:s range:r", "v", "u", 0LL, 1LL);
    CHECK_NEAR(harness_f64(&r, "value"), 6.0, 1e-6);
    /* A tensor with itself: x . x, not the norm. */
    CALL_OK(p, &r, "dot", "x:s y:s", "v", "v");
    CHECK_NEAR(harness_f64(&r, "value"), 25.0, 1e-5);
    CALL_OK(p, &r, "tensor", "name:s size:i", "u3", 3LL);
    HCALL_ERR(p, &r, "dot: size mismatch: x has 2 elements, y has 3", "dot", "x:s y:s", "v", "u3");
    HCALL_ERR(p, &r, "norm: tensor 'q' not found", "norm", "x:s", "q");
    HCALL_ERR(p, &r, "norm: range {1, 2} out of bounds for 'v' (2 elements)", "norm", "x:s range:r",
              "v", 1LL, 2LL);
}

static void test_read(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "w", 12LL, 0.25);
    CALL_OK(p, &r, "read", "tensor:s range:r", "w", 10LL, 2LL);
    CHECK(r.values && r.n_values == 2);
    harness_reply_free(&r);
    HCALL_ERR(p, &r, "read: range {5, 10} out of bounds for 'w' (12 elements)", "read",
              "tensor:s range:r", "w", 5LL, 10LL);
    HCALL_ERR(p, &r, "read: tensor 'nope' not found", "read", "tensor:s", "nope");
    HCALL_ERR(p, &r, "read: param 'tensor': missing", "read", "");
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "big", 70000LL, 1.0);
    HCALL_ERR(p, &r, "read: tensor 'big' has 70000 elements, more than the 65536", "read",
              "tensor:s", "big");
    HCALL_ERR(p, &r, "read: param 'range': 65537 values, more than the 65536", "read",
              "tensor:s range:r", "big", 0LL, 65537LL);
    CALL_OK(p, &r, "read", "tensor:s range:r", "big", 70000LL - 65536LL, 65536LL);
    CHECK(r.values && r.n_values == 65536);
    CHECK(r.n_values == 65536 && r.values[65535] == 1.0f);
    harness_reply_free(&r);
}

static void test_stats_after(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "drop", "names:l", 2, (const char *[]){"big", "w"});
    CALL_OK(p, &r, "stats", "");
    int64_t tensors = harness_i64(&r, "tensors"), bytes = harness_i64(&r, "tensor_bytes");
    CALL_OK(p, &r, "tensor", "name:s size:i", "extra", 1000LL);
    CALL_OK(p, &r, "stats", "");
    CHECK(harness_i64(&r, "tensors") == tensors + 1);
    CHECK(harness_i64(&r, "tensor_bytes") == bytes + 4000);
    CHECK(harness_f64(&r, "compute_ms") > 0);
}

static void test_unknown_and_malformed(struct harness_peer *p)
{
    struct harness_reply r;
    HCALL_ERR(p, &r, "unknown method 'frobnicate'", "frobnicate", "");
    CHECK_STREQ(r.error, "frobnicate: unknown method 'frobnicate'"); /* the harness names it */
    /* [0, 77, 42, {}]: has a msgid, so it gets an error response. */
    static const unsigned char bad_method[] = {0x94, 0x00, 77, 42, 0x80};
    CHECK(harness_write_all(p->fd, bad_method, sizeof bad_method));
    CHECK(harness_read_reply(p, &r) && r.msgid == 77 && !r.ok);
    CHECK_CONTAINS(r.error, "malformed message: method is not a string");
    /* [0, "x", "ping", {}], a bare 5, a response and a notification: dropped. */
    static const unsigned char no_msgid[] = {0x94, 0x00, 0xa1, 'x',  0xa4, 'p',  'i',  'n',
                                             'g',  0x80, 0x05, 0x94, 0x01, 0x03, 0xc0, 0x80,
                                             0x93, 0x02, 0xa4, 'r',  'e',  'c',  'v',  0x80};
    CHECK(harness_write_all(p->fd, no_msgid, sizeof no_msgid));
    CALL_OK(p, &r, "ping", ""); /* the next response is this ping's: nothing else came */
    /* A method name that is not printable is quoted, and cut short. */
    char weird[300];
    memset(weird, 'm', sizeof weird - 1);
    weird[sizeof weird - 1] = '\0';
    HCALL_ERR(p, &r, "unknown method 'mmmm", weird, "");
    CHECK(strstr(r.error, "unknown method") && strlen(strstr(r.error, "unknown method")) < 100);
    HCALL_ERR(p, &r, "unknown method ''", "", "");
    HCALL_ERR(p, &r, "ping: unknown param ''", "ping", ":i", 1LL);
}

/* Jobs answer in request order; ping (inline) is answered while one computes. */
static void test_order_and_concurrency(void)
{
    struct harness_peer p;
    CHECK(peer_start(&p, (const char *[]){"--speed", "0.01", NULL}));
    struct harness_reply r;
    /* ~2-5 ms of CPU filling 4M floats, stretched 100x by the emulated speed. */
    uint32_t slow = harness_request(&p, "tensor", "name:s size:i fill:f", "big", 4000000LL, 1.0);
    uint32_t after = harness_request(&p, "norm", "x:s", "big");
    uint32_t ping = harness_request(&p, "ping", "");
    CHECK(harness_read_reply(&p, &r) && r.msgid == ping && r.ok);
    CHECK(harness_read_reply(&p, &r) && r.msgid == slow && r.ok);
    double ms = harness_f64(&r, "ms"), cpu = harness_f64(&r, "cpu_ms");
    CHECK_MSG(ms >= cpu / 0.01 * 0.95, "ms %g, cpu_ms %g at speed 0.01", ms, cpu);
    CHECK(harness_read_reply(&p, &r) && r.msgid == after && r.ok);
    CHECK_NEAR(harness_f64(&r, "value"), 2000.0, 1e-3);
    /* "after" arrived just behind the slow job and waited for its end: its
     * queue is the slow job's time less that gap (at most a few ms of the
     * slow job's >= 200). */
    double queued = harness_f64(&r, "queue_ms");
    CHECK_MSG(queued <= ms + 0.01 && queued >= 0.5 * ms, "queue_ms %g behind a job of %g ms",
              queued, ms);
    harness_stop(&p);
}

/* 80 reads of 65536 values pipelined (21 MB of responses) while the test
 * reads nothing: partial writes, the write watcher and the backpressure stop
 * of reading all take part. */
static void test_pipelined_output(struct harness_peer *p)
{
    struct harness_reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "bulk", 65536LL, 3.0);
    enum { N = 80 };
    uint32_t first = 0;
    for (int i = 0; i < N; i++) {
        uint32_t id = harness_request(p, "read", "tensor:s", "bulk");
        if (i == 0) first = id;
        if (i == N / 2) /* the peer fills the socket buffers and holds the rest */
            CHECK(harness_wait_backlog(p, 1 << 16, 5000));
    }
    int good = 0;
    for (int i = 0; i < N; i++) {
        bool in_turn = harness_read_reply(p, &r) && r.msgid == first + (uint32_t)i && r.ok;
        good += in_turn && r.n_values == 65536 && r.values[65535] == 3.0f;
        harness_reply_free(&r);
        if (!in_turn) break;
    }
    CHECK_MSG(good == N, "%d of %d pipelined reads", good, N);
}

/* --dilation 4: a command takes 4x its CPU time in real time and reports
 * emulated ms (its CPU time again); queue_ms of the one behind it is
 * emulated too. */
static void test_dilation(void)
{
    struct harness_peer p;
    CHECK(peer_start(&p, (const char *[]){"--dilation", "4", NULL}));
    struct harness_reply r;
    double t0 = mono_ms();
    uint32_t first = harness_request(&p, "tensor", "name:s size:i fill:f", "big", 4000000LL, 1.0);
    uint32_t second = harness_request(&p, "norm", "x:s", "big");
    CHECK(harness_read_reply(&p, &r) && r.msgid == first && r.ok);
    double ms = harness_f64(&r, "ms"), cpu = harness_f64(&r, "cpu_ms");
    CHECK(harness_read_reply(&p, &r) && r.msgid == second && r.ok);
    double real = mono_ms() - t0, ms2 = harness_f64(&r, "ms"), cpu2 = harness_f64(&r, "cpu_ms");
    CHECK_MSG(ms >= cpu * 0.98 && ms <= cpu * 1.5 + 0.5, "ms %g (emulated), cpu_ms %g at D=4", ms,
              cpu);
    CHECK_MSG(real >= 4 * (cpu + cpu2) * 0.95, "real %g ms for %g + %g ms of CPU at D=4", real, cpu,
              cpu2);
    /* the norm waited behind the fill: about its emulated time, not 4x */
    CHECK_MSG(harness_f64(&r, "queue_ms") <= ms * 1.3 + 0.5, "queue_ms %g after a %g ms command",
              harness_f64(&r, "queue_ms"), ms);
    CHECK(ms2 > 0);
    harness_stop(&p);
}

/* ---- exits ---- */

static void test_exit_while_computing(void)
{
    struct harness_peer p;
    CHECK(peer_start(&p, (const char *[]){"--speed", "0.0001", NULL}));
    harness_request(&p, "tensor", "name:s size:i fill:f", "big", 4000000LL, 1.0);
    harness_request(&p, "norm", "x:s", "big"); /* still queued at exit */
    CHECK(harness_wait_busy(&p, 20, 5000));    /* the tensor job is computing */
    double t0 = mono_ms();
    close(p.fd);
    p.fd = -1;
    harness_finish(&p, 0, 3000);
    CHECK_MSG(mono_ms() - t0 < 2000, "exit took %.0f ms", mono_ms() - t0);
}

static void test_fatal_stream(const void *bytes, size_t n, const char *want_log)
{
    struct harness_peer p;
    CHECK(peer_start(&p, NULL));
    struct harness_reply r;
    CALL_OK(&p, &r, "ping", "");
    CHECK(harness_write_all(p.fd, bytes, n));
    const char *log = harness_finish(&p, 1, 5000);
    CHECK_CONTAINS(log, want_log);
}

int main(void)
{
    harness_init();

    test_command_line();
    struct harness_peer p;
    CHECK(peer_start(&p, (const char *[]){"--threads", "1", NULL}));
    test_ping_stats(&p);
    test_tensor(&p);
    test_copy_drop(&p);
    test_axpy_scale(&p);
    test_sum(&p);
    test_norm_dot(&p);
    test_read(&p);
    test_stats_after(&p);
    test_unknown_and_malformed(&p);
    test_pipelined_output(&p);
    const char *log = harness_stop(&p);
    CHECK_CONTAINS(log, "hiernet-peer[t1]: dropped a message without msgid");
    CHECK_CONTAINS(log, "dropped an unexpected response");
    CHECK_CONTAINS(log, "dropped an unexpected notification");

    test_order_and_concurrency();
    test_dilation();
    test_exit_while_computing();
    static const unsigned char never_used[] = {0xc1};
    test_fatal_stream(never_used, sizeof never_used, "control channel unusable: unparsable");
    static const unsigned char huge_str[] = {0x94, 0x00, 0x01, 0xdb, 0x01, 0x00, 0x00, 0x00};
    test_fatal_stream(huge_str, sizeof huge_str, "message larger than");
    return check_report();
}
