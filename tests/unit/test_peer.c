/* test_peer.c — the real hiernet-peer over a socketpair: every command with
 * real requests and responses, the error responses, malformed input, order
 * and concurrency of jobs, large pipelined output, exit statuses.
 *
 * The binary is $HIERNET_BIN_DIR/hiernet-peer (set by ctest). Each peer's
 * stderr goes to a temporary file, so its log lines can be checked. */
#include "peer/protocol.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char peer_path[4096];

struct peer {
    pid_t pid;
    int fd;
    char log_path[64];
    struct proto_reader reader;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    uint32_t next_msgid;
};

/* The last response received; its objects live until the next receive. */
struct reply {
    uint32_t msgid;
    bool ok;
    char error[512];
    struct proto_args result;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- starting and stopping peers ---- */

static void exec_peer(int control_fd, int log_fd, const char *const *extra)
{
    char fd_text[16];
    snprintf(fd_text, sizeof fd_text, "%d", control_fd);
    const char *argv[32] = {peer_path, "--control-fd", fd_text, "--node", "t1"};
    int argc = 5;
    for (; extra && *extra && argc < 30; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;
    dup2(log_fd, STDERR_FILENO);
    fcntl(control_fd, F_SETFD, 0); /* the one fd the peer inherits */
    execv(peer_path, (char **)argv);
    _exit(127);
}

static bool peer_start(struct peer *p, const char *const *extra)
{
    memset(p, 0, sizeof *p);
    int sv[2];
    snprintf(p->log_path, sizeof p->log_path, "/tmp/hiernet-test-peer-XXXXXX");
    int log_fd = mkstemp(p->log_path);
    if (log_fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("test_peer: setup");
        return false;
    }
    p->pid = fork();
    if (p->pid == 0) exec_peer(sv[1], log_fd, extra);
    close(sv[1]);
    close(log_fd);
    p->fd = sv[0];
    p->next_msgid = 1;
    proto_reader_init(&p->reader, 0);
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
    return p->pid > 0;
}

/* Waits up to timeout_ms for the peer to exit; returns its wait status, or
 * -1 after killing it when it did not exit in time. */
static int peer_wait(struct peer *p, double timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    int status;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) return status;
        if (r < 0 || now_ms() > deadline) break;
        struct timespec tick = {0, 5 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &status, 0);
    return -1;
}

static bool exited_with(int status, int code)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

static char *read_file(const char *path)
{
    static char text[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = '\0';
    return text;
}

/* Frees the client side; the peer must have exited. Returns its log. */
static char *peer_cleanup(struct peer *p)
{
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    proto_reader_destroy(&p->reader);
    msgpack_sbuffer_destroy(&p->sb);
    char *log = read_file(p->log_path);
    unlink(p->log_path);
    /* Sanitizer builds: UBSan may only print, so its reports count here. */
    CHECK_MSG(!strstr(log, "runtime error") && !strstr(log, "Sanitizer"), "peer log:\n%s", log);
    return log;
}

/* Closes the control channel, expects exit status 0 and returns the log. */
static char *peer_stop(struct peer *p)
{
    close(p->fd);
    p->fd = -1;
    int status = peer_wait(p, 5000);
    CHECK_MSG(exited_with(status, 0), "peer exit status %d", status);
    return peer_cleanup(p);
}

/* ---- sending ---- */

static bool send_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void send_raw(struct peer *p, const void *data, size_t n)
{
    CHECK(send_all(p->fd, data, n));
}

/* Packs one param value of type t from ap: s string, i integer, f double,
 * r range (two ints), l list (int n, const char **names), n nil. */
static void pack_value(msgpack_packer *pk, char t, va_list *ap)
{
    switch (t) {
    case 's':
        proto_pack_str(pk, va_arg(*ap, const char *));
        break;
    case 'i':
        msgpack_pack_int64(pk, va_arg(*ap, long long));
        break;
    case 'f':
        msgpack_pack_double(pk, va_arg(*ap, double));
        break;
    case 'n':
        msgpack_pack_nil(pk);
        break;
    case 'r': {
        msgpack_pack_array(pk, 2);
        msgpack_pack_int64(pk, va_arg(*ap, long long));
        msgpack_pack_int64(pk, va_arg(*ap, long long));
        break;
    }
    case 'l': {
        int n = va_arg(*ap, int);
        const char **names = va_arg(*ap, const char **);
        msgpack_pack_array(pk, (size_t)n);
        for (int i = 0; i < n; i++)
            proto_pack_str(pk, names[i]);
        break;
    }
    }
}

/* Sends request `method` with params from fmt, e.g. "y:s x:s alpha:f range:r".
 * Returns its msgid. */
static uint32_t send_request_v(struct peer *p, const char *method, const char *fmt, va_list args)
{
    uint32_t msgid = p->next_msgid++, n = 0;
    for (const char *c = fmt; *c; c++)
        n += *c == ':';
    msgpack_sbuffer_clear(&p->sb);
    proto_pack_request_begin(&p->pk, msgid, method, n);
    va_list ap;
    va_copy(ap, args);
    for (const char *c = fmt; *c;) {
        const char *colon = strchr(c, ':');
        msgpack_pack_str(&p->pk, (size_t)(colon - c));
        msgpack_pack_str_body(&p->pk, c, (size_t)(colon - c));
        pack_value(&p->pk, colon[1], &ap);
        c = colon + 2;
        while (*c == ' ')
            c++;
    }
    va_end(ap);
    send_raw(p, p->sb.data, p->sb.size);
    return msgid;
}

static uint32_t send_request(struct peer *p, const char *method, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    uint32_t msgid = send_request_v(p, method, fmt, ap);
    va_end(ap);
    return msgid;
}

/* ---- receiving ---- */

/* Blocks until the next response; false on EOF, error or a bad message. */
static bool recv_reply(struct peer *p, struct reply *r)
{
    *r = (struct reply){0};
    for (;;) {
        struct proto_msg msg;
        bool has_msgid;
        char err[256];
        enum proto_next k = proto_reader_next(&p->reader, &msg, &has_msgid, err, sizeof err);
        if (k == PROTO_NEXT_MESSAGE && msg.kind == PROTO_RESPONSE) {
            r->msgid = msg.msgid;
            r->ok = msg.error->type == MSGPACK_OBJECT_NIL;
            r->error[0] = '\0';
            if (!r->ok)
                snprintf(r->error, sizeof r->error, "%.*s", (int)msg.error->via.str.size,
                         msg.error->via.str.ptr);
            proto_args_init(&r->result, r->ok ? msg.result : NULL);
            return true;
        }
        if (k != PROTO_NEXT_MORE) return false;
        size_t avail;
        char *buf = proto_reader_buffer(&p->reader, 65536, &avail);
        ssize_t n = buf ? read(p->fd, buf, avail) : -1;
        if (n <= 0) return false;
        proto_reader_consumed(&p->reader, (size_t)n);
    }
}

/* Sends a request and waits for its response, which must be the next one. */
static bool call(struct peer *p, struct reply *r, const char *method, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    uint32_t msgid = send_request_v(p, method, fmt, ap);
    va_end(ap);
    bool got = recv_reply(p, r);
    CHECK_MSG(got && r->msgid == msgid, "%s: no response (or msgid %u instead of %u)", method,
              r->msgid, msgid);
    return got && r->msgid == msgid;
}

static double result_f64(struct reply *r, const char *key)
{
    double v = -1e300;
    CHECK_MSG(proto_arg_f64(&r->result, key, &v) == 1, "result lacks number '%s'", key);
    return v;
}

static int64_t result_i64(struct reply *r, const char *key)
{
    int64_t v = INT64_MIN;
    CHECK_MSG(proto_arg_i64(&r->result, key, &v) == 1, "result lacks integer '%s'", key);
    return v;
}

/* Calls and expects success. */
#define CALL_OK(p, r, method, ...)                                                                 \
    do {                                                                                           \
        bool called_ = call(p, r, method, __VA_ARGS__);                                            \
        CHECK_MSG(called_ && (r)->ok, "%s failed: %s", method, (r)->error);                        \
        if (called_ && (r)->ok) CHECK(result_f64((r), "ms") >= 0);                                 \
    } while (0)

/* Calls and expects an error response containing `want`. */
#define CALL_ERR(p, r, want, method, ...)                                                          \
    do {                                                                                           \
        bool called_ = call(p, r, method, __VA_ARGS__);                                            \
        CHECK_MSG(called_ && !(r)->ok, "%s: expected an error", method);                           \
        if (called_) CHECK_CONTAINS((r)->error, want);                                             \
    } while (0)

/* Reads a tensor's values into out (at most max); returns their count or -1. */
static int read_values(struct peer *p, const char *name, float *out, int max)
{
    struct reply r;
    if (!call(p, &r, "read", "tensor:s", name) || !r.ok) return -1;
    const msgpack_object *v = proto_args_get(&r.result, "values");
    if (!v || v->type != MSGPACK_OBJECT_ARRAY) return -1;
    int n = (int)v->via.array.size;
    for (int i = 0; i < n && i < max; i++)
        out[i] = (float)v->via.array.ptr[i].via.f64;
    return n;
}

static bool values_are(struct peer *p, const char *name, int n, const float *want)
{
    float got[64];
    int k = read_values(p, name, got, 64);
    bool same = k == n;
    for (int i = 0; same && i < n; i++)
        same = got[i] == want[i];
    if (!same) {
        fprintf(stderr, "tensor %s (%d values):", name, k);
        for (int i = 0; i < k && i < 64; i++)
            fprintf(stderr, " %g", got[i]);
        fputc('\n', stderr);
    }
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
        const char *argv[16] = {peer_path};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        execv(peer_path, (char **)argv);
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
    CHECK_MSG(exited_with(status, 2), "%s: status %d", args[0] ? args[0] : "(none)", status);
    CHECK_CONTAINS(out, want);
    char *nl = strchr(out, '\n');
    CHECK_MSG(nl && nl[1] == '\0', "not one line: %s", out);
}

static void test_command_line(void)
{
    char out[1024];
    int status = run_args((const char *[]){"--help", NULL}, out, sizeof out);
    CHECK(exited_with(status, 0));
    CHECK_CONTAINS(out, "usage: hiernet-peer --control-fd N --node NAME");
    expect_usage_error((const char *[]){NULL}, "--control-fd is required");
    expect_usage_error((const char *[]){"--control-fd", "1", NULL}, "--node is required");
    expect_usage_error((const char *[]){"--control-fd", "x", "--node", "a", NULL},
                       "is not a file descriptor");
    expect_usage_error((const char *[]){"--control-fd", "987", "--node", "a", NULL},
                       "--control-fd 987: Bad file descriptor");
    expect_usage_error((const char *[]){"--bogus", NULL}, "unknown option '--bogus'");
    expect_usage_error((const char *[]){"--node", NULL}, "--node needs a value");
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

static void test_ping_stats(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "ping", "");
    CHECK(result_f64(&r, "ms") < 100);
    CALL_ERR(p, &r, "ping: unknown param 'x'", "ping", "x:i", 1LL);
    CALL_OK(p, &r, "stats", "");
    CHECK(result_i64(&r, "tensors") == 0 && result_i64(&r, "tensor_bytes") == 0);
    CHECK(result_i64(&r, "mem_rss_bytes") > 0);
    CHECK(result_i64(&r, "bytes_sent") == 0 && result_i64(&r, "bytes_received") == 0);
    CHECK(result_f64(&r, "compute_ms") >= 0 && result_f64(&r, "cpu_ms") >= 0);
    CHECK(result_i64(&r, "commands") == 3);
    char node[16];
    CHECK(proto_arg_strcpy(&r.result, "node", node, sizeof node) == 1);
    CHECK_STREQ(node, "t1");
}

static void test_tensor(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "w", 12LL, 1.5);
    CHECK(result_i64(&r, "size") == 12 && result_f64(&r, "cpu_ms") >= 0);
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
    CALL_ERR(p, &r, "tensor: param 'size': missing", "tensor", "name:s", "a");
    CALL_ERR(p, &r, "tensor: param 'name': missing", "tensor", "size:i", 1LL);
    CALL_ERR(p, &r, "tensor: param 'size': -1 is not between 0 and 2147483648", "tensor",
             "name:s size:i", "a", -1LL);
    CALL_ERR(p, &r, "is not between", "tensor", "name:s size:i", "a", (1LL << 31) + 1);
    CALL_ERR(p, &r, "tensor: param 'size': expected integer, got number", "tensor", "name:s size:f",
             "a", 2.5);
    CALL_ERR(p, &r, "tensor: param 'fill': expected number, got string", "tensor",
             "name:s size:i fill:s", "a", 1LL, "x");
    CALL_ERR(p, &r, "out of the float32 range", "tensor", "name:s size:i fill:f", "a", 1LL, 1e300);
    CALL_ERR(p, &r, "tensor: param 'name': empty tensor name", "tensor", "name:s size:i", "", 1LL);
    char longname[200];
    memset(longname, 'q', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CALL_ERR(p, &r, "tensor: param 'name': string too long", "tensor", "name:s size:i", longname,
             1LL);
    CALL_ERR(p, &r, "tensor: unknown param 'sise'", "tensor", "name:s sise:i", "a", 1LL);
}

static void test_copy_drop(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "c", 4LL, 7.0);
    CALL_OK(p, &r, "copy", "src:s dst:s", "c", "c2");
    CHECK(result_i64(&r, "size") == 4);
    CHECK(values_are(p, "c2", 4, (float[]){7, 7, 7, 7}));
    CALL_OK(p, &r, "scale", "x:s alpha:f", "c", 2.0); /* the copy is independent */
    CHECK(values_are(p, "c2", 4, (float[]){7, 7, 7, 7}));
    CALL_OK(p, &r, "copy", "src:s dst:s", "c", "c");
    CALL_ERR(p, &r, "copy: tensor 'nope' not found", "copy", "src:s dst:s", "nope", "x");
    CALL_ERR(p, &r, "copy: param 'dst': missing", "copy", "src:s", "c");
    CALL_OK(p, &r, "drop", "names:l", 3, (const char *[]){"c", "c2", "missing"});
    CHECK(result_i64(&r, "dropped") == 2);
    CALL_ERR(p, &r, "copy: tensor 'c' not found", "copy", "src:s dst:s", "c", "x");
    CALL_OK(p, &r, "tensor", "name:s size:i", "d", 1LL);
    CALL_OK(p, &r, "drop", "name:s", "d");
    CHECK(result_i64(&r, "dropped") == 1);
    CALL_OK(p, &r, "drop", "name:s", "d");
    CHECK(result_i64(&r, "dropped") == 0);
    CALL_OK(p, &r, "drop", "names:l", 0, NULL);
    CHECK(result_i64(&r, "dropped") == 0);
    CALL_ERR(p, &r, "drop: param 'name' or 'names': missing", "drop", "");
    CALL_ERR(p, &r, "drop: param 'names': expected an array of tensor names, got string", "drop",
             "names:s", "c");
    CALL_ERR(p, &r, "drop: param 'names': element 2 is not a tensor name (empty", "drop", "names:l",
             2, (const char *[]){"a", ""});
}

static void test_axpy_scale(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "y", 6LL, 1.0);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "x", 6LL, 2.0);
    CALL_OK(p, &r, "axpy", "y:s x:s alpha:f", "y", "x", 0.5);
    CHECK(result_f64(&r, "cpu_ms") >= 0);
    CHECK(values_are(p, "y", 6, (float[]){2, 2, 2, 2, 2, 2}));
    CALL_OK(p, &r, "axpy", "y:s x:s range:r", "y", "x", 2LL, 3LL); /* alpha defaults to 1 */
    CHECK(values_are(p, "y", 6, (float[]){2, 2, 4, 4, 4, 2}));
    CALL_OK(p, &r, "axpy", "y:s x:s alpha:f range:r", "y", "y", 1.0, 0LL, 1LL); /* aliased */
    CHECK(values_are(p, "y", 6, (float[]){4, 2, 4, 4, 4, 2}));
    CALL_OK(p, &r, "axpy", "y:s x:s range:r", "y", "x", 6LL, 0LL); /* empty range at the end */
    CALL_OK(p, &r, "tensor", "name:s size:i", "short", 5LL);
    CALL_ERR(p, &r, "axpy: size mismatch: y has 6 elements, x has 5", "axpy", "y:s x:s", "y",
             "short");
    CALL_ERR(p, &r, "axpy: tensor 'g' not found", "axpy", "y:s x:s", "y", "g");
    CALL_ERR(p, &r, "axpy: tensor 'g' not found", "axpy", "y:s x:s", "g", "y");
    CALL_ERR(p, &r, "axpy: range {4, 2} out of bounds for 'short' (5 elements)", "axpy",
             "y:s x:s range:r", "y", "short", 4LL, 2LL);
    CALL_ERR(p, &r, "axpy: param 'range': expected {offset, count}, got string", "axpy",
             "y:s x:s range:s", "y", "x", "0,1");
    CALL_ERR(p, &r, "axpy: param 'x': missing", "axpy", "y:s", "y");
    CALL_ERR(p, &r, "axpy: param 'alpha': expected number, got string", "axpy", "y:s x:s alpha:s",
             "y", "x", "2");
    CALL_OK(p, &r, "scale", "x:s alpha:f", "x", -1.5);
    CHECK(values_are(p, "x", 6, (float[]){-3, -3, -3, -3, -3, -3}));
    CALL_OK(p, &r, "scale", "x:s alpha:i range:r", "x", 0LL, 1LL, 2LL);
    CHECK(values_are(p, "x", 6, (float[]){-3, 0, 0, -3, -3, -3}));
    CALL_ERR(p, &r, "scale: param 'alpha': missing", "scale", "x:s", "x");
    CALL_ERR(p, &r, "scale: range {7, 0} out of bounds for 'x' (6 elements)", "scale",
             "x:s alpha:f range:r", "x", 2.0, 7LL, 0LL);
}

static void test_sum(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "a", 3LL, 1.0);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "b", 3LL, 10.0);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "c", 3LL, 100.0);
    CALL_OK(p, &r, "sum", "out:s inputs:l", "s", 3, (const char *[]){"a", "b", "c"});
    CHECK(result_i64(&r, "size") == 3 && result_f64(&r, "cpu_ms") >= 0);
    CHECK(values_are(p, "s", 3, (float[]){111, 111, 111}));
    CALL_OK(p, &r, "sum", "out:s inputs:l", "b", 2,
            (const char *[]){"a", "b"}); /* out is an input */
    CHECK(values_are(p, "b", 3, (float[]){11, 11, 11}));
    CALL_OK(p, &r, "sum", "out:s inputs:l", "one", 1, (const char *[]){"c"});
    CHECK(values_are(p, "one", 3, (float[]){100, 100, 100}));
    CALL_OK(p, &r, "tensor", "name:s size:i", "four", 4LL);
    CALL_ERR(p, &r, "sum: size mismatch: input 'four' has 4 elements, 'a' has 3", "sum",
             "out:s inputs:l", "s", 2, (const char *[]){"a", "four"});
    CALL_ERR(p, &r, "sum: tensor 'nope' not found", "sum", "out:s inputs:l", "s", 2,
             (const char *[]){"a", "nope"});
    CALL_ERR(p, &r, "sum: param 'inputs': empty", "sum", "out:s inputs:l", "s", 0, NULL);
    CALL_ERR(p, &r, "sum: param 'inputs': missing", "sum", "out:s", "s");
    CALL_ERR(p, &r, "sum: param 'out': missing", "sum", "inputs:l", 1, (const char *[]){"a"});
    CHECK(values_are(p, "s", 3, (float[]){111, 111, 111})); /* failed sums left it alone */
}

static void test_norm_dot(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "v", 2LL, 3.0);
    CALL_OK(p, &r, "scale", "x:s alpha:f range:r", "v", 4.0 / 3.0, 1LL, 1LL); /* v = {3, 4} */
    CALL_OK(p, &r, "norm", "x:s", "v");
    CHECK_NEAR(result_f64(&r, "value"), 5.0, 1e-6);
    CHECK(result_f64(&r, "cpu_ms") >= 0);
    CALL_OK(p, &r, "norm", "x:s range:r", "v", 1LL, 1LL);
    CHECK_NEAR(result_f64(&r, "value"), 4.0, 1e-6);
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "u", 2LL, 2.0);
    CALL_OK(p, &r, "dot", "x:s y:s", "v", "u");
    CHECK_NEAR(result_f64(&r, "value"), 14.0, 1e-5);
    CALL_OK(p, &r, "dot", "x:s y:s range:r", "v", "u", 0LL, 1LL);
    CHECK_NEAR(result_f64(&r, "value"), 6.0, 1e-6);
    CALL_OK(p, &r, "tensor", "name:s size:i", "u3", 3LL);
    CALL_ERR(p, &r, "dot: size mismatch: x has 2 elements, y has 3", "dot", "x:s y:s", "v", "u3");
    CALL_ERR(p, &r, "norm: tensor 'q' not found", "norm", "x:s", "q");
    CALL_ERR(p, &r, "norm: range {1, 2} out of bounds for 'v' (2 elements)", "norm", "x:s range:r",
             "v", 1LL, 2LL);
}

static void test_read(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "w", 12LL, 0.25);
    CALL_OK(p, &r, "read", "tensor:s range:r", "w", 10LL, 2LL);
    const msgpack_object *v = proto_args_get(&r.result, "values");
    CHECK(v && v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == 2);
    CALL_ERR(p, &r, "read: range {5, 10} out of bounds for 'w' (12 elements)", "read",
             "tensor:s range:r", "w", 5LL, 10LL);
    CALL_ERR(p, &r, "read: tensor 'nope' not found", "read", "tensor:s", "nope");
    CALL_ERR(p, &r, "read: param 'tensor': missing", "read", "");
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "big", 70000LL, 1.0);
    CALL_ERR(p, &r, "read: tensor 'big' has 70000 elements, more than the 65536", "read",
             "tensor:s", "big");
    CALL_ERR(p, &r, "read: param 'range': 65537 values, more than the 65536", "read",
             "tensor:s range:r", "big", 0LL, 65537LL);
    CALL_OK(p, &r, "read", "tensor:s range:r", "big", 70000LL - 65536LL, 65536LL);
    v = proto_args_get(&r.result, "values");
    CHECK(v && v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == 65536);
    CHECK(v && v->via.array.ptr[65535].via.f64 == 1.0);
}

static void test_stats_after(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "drop", "names:l", 2, (const char *[]){"big", "w"});
    CALL_OK(p, &r, "stats", "");
    int64_t tensors = result_i64(&r, "tensors"), bytes = result_i64(&r, "tensor_bytes");
    CALL_OK(p, &r, "tensor", "name:s size:i", "extra", 1000LL);
    CALL_OK(p, &r, "stats", "");
    CHECK(result_i64(&r, "tensors") == tensors + 1);
    CHECK(result_i64(&r, "tensor_bytes") == bytes + 4000);
    CHECK(result_f64(&r, "compute_ms") > 0);
}

static void test_unknown_and_malformed(struct peer *p)
{
    struct reply r;
    CALL_ERR(p, &r, "unknown method 'frobnicate'", "frobnicate", "");
    CHECK_STREQ(r.error, "unknown method 'frobnicate'");
    /* [0, 77, 42, {}]: has a msgid, so it gets an error response. */
    static const unsigned char bad_method[] = {0x94, 0x00, 77, 42, 0x80};
    send_raw(p, bad_method, sizeof bad_method);
    CHECK(recv_reply(p, &r) && r.msgid == 77 && !r.ok);
    CHECK_CONTAINS(r.error, "malformed message: method is not a string");
    /* [0, "x", "ping", {}], a bare 5, a response and a notification: dropped. */
    static const unsigned char no_msgid[] = {0x94, 0x00, 0xa1, 'x',  0xa4, 'p',  'i',  'n',
                                             'g',  0x80, 0x05, 0x94, 0x01, 0x03, 0xc0, 0x80,
                                             0x93, 0x02, 0xa4, 'r',  'e',  'c',  'v',  0x80};
    send_raw(p, no_msgid, sizeof no_msgid);
    CALL_OK(p, &r, "ping", ""); /* the next response is this ping's: nothing else came */
    /* A method name that is not printable is quoted, and cut short. */
    char weird[300];
    memset(weird, 'm', sizeof weird - 1);
    weird[sizeof weird - 1] = '\0';
    CALL_ERR(p, &r, "unknown method 'mmmm", weird, "");
    CHECK(strlen(r.error) < 100);
    CALL_ERR(p, &r, "unknown method ''", "", "");
    CALL_ERR(p, &r, "ping: unknown param ''", "ping", ":i", 1LL);
}

/* Jobs answer in request order; ping (inline) is answered while one computes. */
static void test_order_and_concurrency(void)
{
    struct peer p;
    CHECK(peer_start(&p, (const char *[]){"--speed", "0.01", NULL}));
    struct reply r;
    /* ~2-5 ms of CPU filling 4M floats, stretched 100x by the emulated speed. */
    uint32_t slow = send_request(&p, "tensor", "name:s size:i fill:f", "big", 4000000LL, 1.0);
    uint32_t after = send_request(&p, "norm", "x:s", "big");
    uint32_t ping = send_request(&p, "ping", "");
    CHECK(recv_reply(&p, &r) && r.msgid == ping && r.ok);
    CHECK(recv_reply(&p, &r) && r.msgid == slow && r.ok);
    double ms = result_f64(&r, "ms"), cpu = result_f64(&r, "cpu_ms");
    CHECK_MSG(ms >= cpu / 0.01 * 0.95, "ms %g, cpu_ms %g at speed 0.01", ms, cpu);
    CHECK(recv_reply(&p, &r) && r.msgid == after && r.ok);
    CHECK_NEAR(result_f64(&r, "value"), 2000.0, 1e-3);
    CHECK(result_f64(&r, "queue_ms") >= 0);
    peer_stop(&p);
}

/* 80 reads of 65536 values pipelined (21 MB of responses) while the test
 * reads nothing: partial writes, the write watcher and the backpressure stop
 * of reading all take part. */
static void test_pipelined_output(struct peer *p)
{
    struct reply r;
    CALL_OK(p, &r, "tensor", "name:s size:i fill:f", "bulk", 65536LL, 3.0);
    enum { N = 80 };
    uint32_t first = 0;
    for (int i = 0; i < N; i++) {
        uint32_t id = send_request(p, "read", "tensor:s", "bulk");
        if (i == 0) first = id;
        if (i == N / 2) {
            struct timespec pause = {0, 100 * 1000 * 1000}; /* let the peer fill its buffer */
            nanosleep(&pause, NULL);
        }
    }
    int good = 0;
    for (int i = 0; i < N; i++) {
        if (!recv_reply(p, &r) || r.msgid != first + (uint32_t)i || !r.ok) break;
        const msgpack_object *v = proto_args_get(&r.result, "values");
        good += v && v->via.array.size == 65536 && v->via.array.ptr[65535].via.f64 == 3.0;
    }
    CHECK_MSG(good == N, "%d of %d pipelined reads", good, N);
}

/* ---- exits ---- */

static void test_exit_while_computing(void)
{
    struct peer p;
    CHECK(peer_start(&p, (const char *[]){"--speed", "0.0001", NULL}));
    send_request(&p, "tensor", "name:s size:i fill:f", "big", 4000000LL, 1.0);
    send_request(&p, "norm", "x:s", "big"); /* still queued at exit */
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    double t0 = now_ms();
    close(p.fd);
    p.fd = -1;
    int status = peer_wait(&p, 3000);
    CHECK_MSG(exited_with(status, 0), "status %d", status);
    CHECK_MSG(now_ms() - t0 < 2000, "exit took %.0f ms", now_ms() - t0);
    peer_cleanup(&p);
}

static void test_fatal_stream(const void *bytes, size_t n, const char *want_log)
{
    struct peer p;
    CHECK(peer_start(&p, NULL));
    struct reply r;
    CALL_OK(&p, &r, "ping", "");
    send_raw(&p, bytes, n);
    int status = peer_wait(&p, 5000);
    CHECK_MSG(exited_with(status, 1), "status %d", status);
    char *log = peer_cleanup(&p);
    CHECK_CONTAINS(log, want_log);
}

int main(void)
{
    const char *dir = getenv("HIERNET_BIN_DIR");
    if (!dir) CHECK_SKIP("HIERNET_BIN_DIR is not set (run through ctest)");
    snprintf(peer_path, sizeof peer_path, "%s/hiernet-peer", dir);
    if (access(peer_path, X_OK) != 0) CHECK_SKIP("hiernet-peer is not built");
    signal(SIGPIPE, SIG_IGN);
    /* Read by sanitizer builds of the peers started below (not by this process,
     * which has started already): undefined behaviour ends the peer. */
    setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1", 1);

    test_command_line();
    struct peer p;
    CHECK(peer_start(&p, (const char *[]){"--addr", "127.0.0.1", "--threads", "1", NULL}));
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
    char *log = peer_stop(&p);
    CHECK_CONTAINS(log, "hiernet-peer[t1]: dropped a message without msgid");
    CHECK_CONTAINS(log, "dropped an unexpected response");
    CHECK_CONTAINS(log, "dropped an unexpected notification");

    test_order_and_concurrency();
    test_exit_while_computing();
    static const unsigned char never_used[] = {0xc1};
    test_fatal_stream(never_used, sizeof never_used, "control channel unusable: unparsable");
    static const unsigned char huge_str[] = {0x94, 0x00, 0x01, 0xdb, 0x01, 0x00, 0x00, 0x00};
    test_fatal_stream(huge_str, sizeof huge_str, "message larger than");
    return check_report();
}
