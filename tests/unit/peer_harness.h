/* peer_harness.h — drives real hiernet-peer processes from a C unit test
 * (test_peer.c, test_dataplane.c, test_ml_commands.c): start a peer on a
 * socketpair with its own loopback address and a free data port, send
 * requests, collect responses in any order (or, for a peer set in_order, in
 * request order), and record the `recv` notifications it sends.
 *
 * A response is copied out of the wire buffer into a struct harness_reply
 * (its numbers and strings by key, and the `values` array of read), so a test
 * may keep several while others arrive. Everything is static (inline: a test
 * may use a part): include it in one test file. The binary is
 * $HIERNET_BIN_DIR/hiernet-peer (set by ctest); each peer's stderr goes to a
 * temporary file, returned by harness_stop. */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "proto/protocol.h"
#include "tests/unit/check.h"

#define HARNESS_NUMS 32
#define HARNESS_STRS 8
#define HARNESS_NOTES 1024
#define HARNESS_LISTS 4
#define HARNESS_LIST_MAX 64

static char harness_peer_path[4096];

/* An array of strings or numbers in a result (wait's arrived, from and
 * versions), up to HARNESS_LIST_MAX entries. */
struct harness_list {
    char key[32];
    int n;
    bool strings;
    double nums[HARNESS_LIST_MAX];
    char strs[HARNESS_LIST_MAX][64];
};

struct harness_reply {
    uint32_t msgid;
    bool ok;
    char error[600];
    int n_nums;
    char keys[HARNESS_NUMS][32];
    double nums[HARNESS_NUMS];
    int n_strs;
    char str_keys[HARNESS_STRS][32], strs[HARNESS_STRS][128];
    float *values; /* read{}; malloc'd, freed by harness_reply_free */
    size_t n_values;
    struct harness_list *lists; /* malloc'd when the result has arrays */
    int n_lists;
    struct harness_reply *results; /* batch's results, each a reply; malloc'd */
    size_t n_results;
};

struct harness_note {
    char tensor[128], from[256];
    uint64_t bytes, transfer, version;
};

#define HARNESS_METHODS 256

struct harness_peer {
    pid_t pid;
    int fd;
    char node[64], addr[64];
    int data_port;
    char log_path[64];
    struct proto_reader reader;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    uint32_t next_msgid;
    /* The method of each recent request (by msgid % HARNESS_METHODS): an
     * error reply says the cause only, and the harness names the command
     * in r->error ("axpy: tensor 'g' not found"), as the controller does. */
    char methods[HARNESS_METHODS][32];
    bool in_order;               /* harness_wait: the next response must be the one waited for */
    struct harness_reply *early; /* responses that arrived while waiting for another */
    int n_early, cap_early;
    struct harness_note notes[HARNESS_NOTES];
    int n_notes;
};

/* Finds hiernet-peer or skips the test. */
static inline void harness_init(void)
{
    check_bin_path("hiernet-peer", harness_peer_path, sizeof harness_peer_path);
    signal(SIGPIPE, SIG_IGN);
    /* Read by sanitizer builds of the peers (not by this process, which has
     * started already): undefined behaviour ends the peer. */
    setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1", 1);
}

/* ---- replies ---- */

static inline void harness_reply_free(struct harness_reply *r)
{
    free(r->values);
    r->values = NULL;
    r->n_values = 0;
    free(r->lists);
    r->lists = NULL;
    r->n_lists = 0;
    for (size_t i = 0; i < r->n_results; i++)
        harness_reply_free(&r->results[i]);
    free(r->results);
    r->results = NULL;
    r->n_results = 0;
}

/* The array under key, or NULL (a failed check when must is set). */
static inline const struct harness_list *harness_list(const struct harness_reply *r,
                                                      const char *key)
{
    for (int i = 0; i < r->n_lists; i++)
        if (strcmp(r->lists[i].key, key) == 0) return &r->lists[i];
    CHECK_MSG(0, "result lacks array '%s'%s%s", key,
              r->ok ? "" : "; error: ", r->ok ? "" : r->error);
    return NULL;
}

static inline int harness_find(const struct harness_reply *r, const char *key)
{
    for (int i = 0; i < r->n_nums; i++)
        if (strcmp(r->keys[i], key) == 0) return i;
    return -1;
}

/* Monotonic milliseconds: a duration a peer reports must fit in the time
 * the test saw pass between its request and the reply. */
static inline double harness_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The number under key; a failed check only when it is missing. */
static inline double harness_num(const struct harness_reply *r, const char *key)
{
    int i = harness_find(r, key);
    if (i >= 0) return r->nums[i];
    CHECK_MSG(0, "result lacks number '%s'%s%s", key,
              r->ok ? "" : "; error: ", r->ok ? "" : r->error);
    return -1e300;
}

/* The number under key, its presence a check of its own (passed or failed,
 * like proto_arg_f64 in a test). */
static inline double harness_f64(const struct harness_reply *r, const char *key)
{
    int i = harness_find(r, key);
    CHECK_MSG(i >= 0, "result lacks number '%s'", key);
    return i >= 0 ? r->nums[i] : -1e300;
}

/* The integer under key (an integral number, as proto_arg_i64 takes it),
 * checked like harness_f64. Exact up to 2^53. */
static inline int64_t harness_i64(const struct harness_reply *r, const char *key)
{
    int i = harness_find(r, key);
    double d = i >= 0 ? r->nums[i] : 0.5;
    bool integral = d >= -0x1p63 && d < 0x1p63 && d == (double)(int64_t)d;
    CHECK_MSG(integral, "result lacks integer '%s'", key);
    return integral ? (int64_t)d : INT64_MIN;
}

/* The string under key, or NULL. */
static inline const char *harness_str(const struct harness_reply *r, const char *key)
{
    for (int i = 0; i < r->n_strs; i++)
        if (strcmp(r->str_keys[i], key) == 0) return r->strs[i];
    return NULL;
}

static inline bool harness_number(const msgpack_object *o, double *v)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        *v = (double)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = (double)o->via.i64;
    else if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
        *v = o->via.f64;
    else
        return false;
    return true;
}

static inline void harness_copy_values(struct harness_reply *r, const msgpack_object *v)
{
    r->n_values = v->via.array.size;
    r->values = malloc((r->n_values ? r->n_values : 1) * sizeof *r->values);
    for (size_t i = 0; i < r->n_values; i++)
        r->values[i] = (float)v->via.array.ptr[i].via.f64;
}

static inline bool harness_key_is(const msgpack_object *k, const char *key)
{
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
           memcmp(k->via.str.ptr, key, k->via.str.size) == 0;
}

/* An array of strings or numbers into the next list of r. */
static inline void harness_copy_list(struct harness_reply *r, const msgpack_object *k,
                                     const msgpack_object *v)
{
    if (r->n_lists == HARNESS_LISTS) return;
    if (!r->lists) r->lists = calloc(HARNESS_LISTS, sizeof *r->lists);
    struct harness_list *l = &r->lists[r->n_lists++];
    memset(l, 0, sizeof *l);
    snprintf(l->key, sizeof l->key, "%.*s", (int)k->via.str.size, k->via.str.ptr);
    for (uint32_t i = 0; i < v->via.array.size && l->n < HARNESS_LIST_MAX; i++) {
        const msgpack_object *e = &v->via.array.ptr[i];
        if (e->type == MSGPACK_OBJECT_STR) {
            l->strings = true;
            snprintf(l->strs[l->n++], sizeof l->strs[0], "%.*s", (int)e->via.str.size,
                     e->via.str.ptr);
        } else if (harness_number(e, &l->nums[l->n])) {
            l->n++;
        }
    }
}

static inline void harness_copy_map(const msgpack_object *map, struct harness_reply *r);

/* batch's results: an array of result maps. */
static inline void harness_copy_results(struct harness_reply *r, const msgpack_object *v)
{
    r->n_results = v->via.array.size;
    r->results = calloc(r->n_results ? r->n_results : 1, sizeof *r->results);
    for (size_t i = 0; i < r->n_results; i++) {
        r->results[i].ok = true;
        harness_copy_map(&v->via.array.ptr[i], &r->results[i]);
    }
}

/* Copies a response's error, numbers, strings, values, arrays and batch
 * results out of the reader. */
static inline void harness_copy_reply(const struct harness_peer *p, const struct proto_msg *msg,
                                      struct harness_reply *r)
{
    *r = (struct harness_reply){.msgid = msg->msgid, .ok = msg->error->type == MSGPACK_OBJECT_NIL};
    if (!r->ok) {
        snprintf(r->error, sizeof r->error, "%s: %.*s", p->methods[msg->msgid % HARNESS_METHODS],
                 (int)msg->error->via.str.size, msg->error->via.str.ptr);
        return;
    }
    harness_copy_map(msg->result, r);
}

static inline void harness_copy_map(const msgpack_object *map, struct harness_reply *r)
{
    for (uint32_t i = 0; map && map->type == MSGPACK_OBJECT_MAP && i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key, *v = &map->via.map.ptr[i].val;
        double d;
        if (v->type == MSGPACK_OBJECT_ARRAY && harness_key_is(k, "values"))
            harness_copy_values(r, v);
        else if (v->type == MSGPACK_OBJECT_ARRAY && harness_key_is(k, "results"))
            harness_copy_results(r, v);
        else if (v->type == MSGPACK_OBJECT_ARRAY)
            harness_copy_list(r, k, v);
        else if (harness_number(v, &d) && r->n_nums < HARNESS_NUMS) {
            snprintf(r->keys[r->n_nums], sizeof r->keys[0], "%.*s", (int)k->via.str.size,
                     k->via.str.ptr);
            r->nums[r->n_nums++] = d;
        } else if (v->type == MSGPACK_OBJECT_STR && r->n_strs < HARNESS_STRS) {
            snprintf(r->str_keys[r->n_strs], sizeof r->str_keys[0], "%.*s", (int)k->via.str.size,
                     k->via.str.ptr);
            snprintf(r->strs[r->n_strs++], sizeof r->strs[0], "%.*s", (int)v->via.str.size,
                     v->via.str.ptr);
        }
    }
}

static inline void harness_copy_str(const msgpack_object *map, const char *key, char *dst,
                                    size_t cap)
{
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key, *v = &map->via.map.ptr[i].val;
        if (k->via.str.size == strlen(key) && memcmp(k->via.str.ptr, key, k->via.str.size) == 0 &&
            v->type == MSGPACK_OBJECT_STR)
            snprintf(dst, cap, "%.*s", (int)v->via.str.size, v->via.str.ptr);
    }
}

static inline void harness_record_note(struct harness_peer *p, const struct proto_msg *msg)
{
    if (msg->method_len != 4 || memcmp(msg->method, "recv", 4) != 0 || p->n_notes >= HARNESS_NOTES)
        return;
    struct harness_note *n = &p->notes[p->n_notes++];
    memset(n, 0, sizeof *n);
    harness_copy_str(msg->params, "tensor", n->tensor, sizeof n->tensor);
    harness_copy_str(msg->params, "from", n->from, sizeof n->from);
    struct proto_args a;
    proto_args_init(&a, msg->params);
    int64_t v;
    if (proto_arg_i64(&a, "bytes", &v) == 1) n->bytes = (uint64_t)v;
    if (proto_arg_i64(&a, "transfer", &v) == 1) n->transfer = (uint64_t)v;
    if (proto_arg_i64(&a, "version", &v) == 1) n->version = (uint64_t)v;
}

/* Reads until one response arrives (notifications are recorded on the way);
 * false, with *r empty, on EOF or a broken stream. */
static inline bool harness_read_reply(struct harness_peer *p, struct harness_reply *r)
{
    *r = (struct harness_reply){0};
    for (;;) {
        struct proto_msg msg;
        bool has_msgid;
        char err[256];
        enum proto_next k = proto_reader_next(&p->reader, &msg, &has_msgid, err, sizeof err);
        if (k == PROTO_NEXT_MESSAGE && msg.kind == PROTO_RESPONSE) {
            harness_copy_reply(p, &msg, r);
            return true;
        }
        if (k == PROTO_NEXT_MESSAGE && msg.kind == PROTO_NOTIFY) {
            harness_record_note(p, &msg);
            continue;
        }
        if (k != PROTO_NEXT_MORE) return false;
        size_t avail;
        char *buf = proto_reader_buffer(&p->reader, 65536, &avail);
        ssize_t n = buf ? read(p->fd, buf, avail) : -1;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        proto_reader_consumed(&p->reader, (size_t)n);
    }
}

/* The response to msgid; responses to others are kept for later. On a peer
 * set in_order it must be the next response, which is a check. */
static inline bool harness_wait(struct harness_peer *p, uint32_t msgid, struct harness_reply *r)
{
    if (p->in_order) {
        bool ours = harness_read_reply(p, r) && r->msgid == msgid;
        CHECK_MSG(ours, "%s: no response to request %u (or the one to %u instead)", p->node, msgid,
                  r->msgid);
        if (!ours) harness_reply_free(r);
        return ours;
    }
    for (int i = 0; i < p->n_early; i++) {
        if (p->early[i].msgid == msgid) {
            *r = p->early[i];
            p->early[i] = p->early[--p->n_early];
            return true;
        }
    }
    for (;;) {
        if (!harness_read_reply(p, r)) {
            CHECK_MSG(0, "%s: no response to request %u (peer gone?)", p->node, msgid);
            return false;
        }
        if (r->msgid == msgid) return true;
        if (p->n_early == p->cap_early) {
            p->cap_early = p->cap_early ? 2 * p->cap_early : 16;
            p->early = realloc(p->early, (size_t)p->cap_early * sizeof *p->early);
        }
        p->early[p->n_early++] = *r;
    }
}

/* ---- requests ---- */

static inline bool harness_write_all(int fd, const void *data, size_t n)
{
    const char *b = data;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* Packs one param of type t: s string, i integer, f double, b bool, n nil,
 * r range (two ints), l list of strings (int n, const char **names),
 * m map of strings (int n, const char **keys, values), M map of strings to
 * integers (int n, const char **keys, const long long *values), B binary
 * (int n, const void *bytes). */
static inline void harness_pack_value(msgpack_packer *pk, char t, va_list *ap)
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
    case 'b':
        if (va_arg(*ap, int))
            msgpack_pack_true(pk);
        else
            msgpack_pack_false(pk);
        break;
    case 'n':
        msgpack_pack_nil(pk);
        break;
    case 'B': {
        int n = va_arg(*ap, int);
        const void *bytes = va_arg(*ap, const void *);
        msgpack_pack_bin(pk, (size_t)n);
        msgpack_pack_bin_body(pk, bytes, (size_t)n);
        break;
    }
    case 'r':
        msgpack_pack_array(pk, 2);
        msgpack_pack_int64(pk, va_arg(*ap, long long));
        msgpack_pack_int64(pk, va_arg(*ap, long long));
        break;
    case 'l': {
        int n = va_arg(*ap, int);
        const char **names = va_arg(*ap, const char **);
        msgpack_pack_array(pk, (size_t)n);
        for (int i = 0; i < n; i++)
            proto_pack_str(pk, names[i]);
        break;
    }
    case 'm': {
        int n = va_arg(*ap, int);
        const char **keys = va_arg(*ap, const char **), **vals = va_arg(*ap, const char **);
        msgpack_pack_map(pk, (size_t)n);
        for (int i = 0; i < n; i++) {
            proto_pack_str(pk, keys[i]);
            proto_pack_str(pk, vals[i]);
        }
        break;
    }
    case 'M': {
        int n = va_arg(*ap, int);
        const char **keys = va_arg(*ap, const char **);
        const long long *vals = va_arg(*ap, const long long *);
        msgpack_pack_map(pk, (size_t)n);
        for (int i = 0; i < n; i++) {
            proto_pack_str(pk, keys[i]);
            msgpack_pack_int64(pk, vals[i]);
        }
        break;
    }
    }
}

static inline uint32_t harness_count_params(const char *fmt)
{
    uint32_t n = 0;
    for (const char *c = fmt; *c; c++)
        n += *c == ':';
    return n;
}

/* The n entries of a params map from fmt (its header packed already). */
static inline void harness_pack_entries(msgpack_packer *pk, const char *fmt, va_list *ap)
{
    for (const char *c = fmt; *c;) {
        const char *colon = strchr(c, ':');
        msgpack_pack_str(pk, (size_t)(colon - c));
        msgpack_pack_str_body(pk, c, (size_t)(colon - c));
        harness_pack_value(pk, colon[1], ap);
        c = colon + 2;
        while (*c == ' ')
            c++;
    }
}

/* Sends `method` with params from fmt ("tensor:s to_addr:s range:r");
 * returns the msgid. */
static inline uint32_t harness_request_v(struct harness_peer *p, const char *method,
                                         const char *fmt, va_list args)
{
    uint32_t msgid = p->next_msgid++;
    snprintf(p->methods[msgid % HARNESS_METHODS], sizeof p->methods[0], "%s", method);
    msgpack_sbuffer_clear(&p->sb);
    proto_pack_request_begin(&p->pk, msgid, method, harness_count_params(fmt));
    va_list ap;
    va_copy(ap, args);
    harness_pack_entries(&p->pk, fmt, &ap);
    va_end(ap);
    CHECK(harness_write_all(p->fd, p->sb.data, p->sb.size));
    return msgid;
}

/* ---- batches: batch{commands = {{name, params}, ...}} ---- */

struct harness_batch {
    msgpack_sbuffer sb; /* the commands array */
    msgpack_packer pk;
};

static inline void harness_batch_begin(struct harness_batch *b, int n)
{
    msgpack_sbuffer_init(&b->sb);
    msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
    msgpack_pack_array(&b->pk, (size_t)n);
}

/* Appends {name, params from fmt} (harness_request's formats). */
static inline void harness_batch_add(struct harness_batch *b, const char *name, const char *fmt,
                                     ...)
{
    msgpack_pack_array(&b->pk, 2);
    proto_pack_str(&b->pk, name);
    msgpack_pack_map(&b->pk, harness_count_params(fmt));
    va_list ap;
    va_start(ap, fmt);
    harness_pack_entries(&b->pk, fmt, &ap);
    va_end(ap);
}

/* Sends batch{commands = b} (and frees b); returns the msgid. */
static inline uint32_t harness_batch_request(struct harness_peer *p, struct harness_batch *b)
{
    uint32_t msgid = p->next_msgid++;
    snprintf(p->methods[msgid % HARNESS_METHODS], sizeof p->methods[0], "batch");
    msgpack_sbuffer_clear(&p->sb);
    proto_pack_request_begin(&p->pk, msgid, "batch", 1);
    proto_pack_str(&p->pk, "commands");
    msgpack_sbuffer_write(&p->sb, b->sb.data, b->sb.size);
    msgpack_sbuffer_destroy(&b->sb);
    CHECK(harness_write_all(p->fd, p->sb.data, p->sb.size));
    return msgid;
}

static inline uint32_t harness_request(struct harness_peer *p, const char *method, const char *fmt,
                                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    uint32_t msgid = harness_request_v(p, method, fmt, ap);
    va_end(ap);
    return msgid;
}

/* Sends a request and waits for its response; true when it succeeded. */
static inline bool harness_call(struct harness_peer *p, struct harness_reply *r, const char *method,
                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    uint32_t msgid = harness_request_v(p, method, fmt, ap);
    va_end(ap);
    return harness_wait(p, msgid, r) && r->ok;
}

/* Whether tensor name on p holds exactly the n values of want (a read). */
static inline bool harness_values_are(struct harness_peer *p, const char *name, int n,
                                      const float *want)
{
    struct harness_reply r;
    bool same = harness_call(p, &r, "read", "tensor:s", name) && r.n_values == (size_t)n;
    for (int i = 0; same && i < n; i++)
        same = r.values[i] == want[i];
    if (!same) {
        fprintf(stderr, "tensor %s (%zu values%s%s):", name, r.n_values, r.ok ? "" : ", ", r.error);
        for (size_t i = 0; i < r.n_values && i < 64; i++)
            fprintf(stderr, " %g", r.values[i]);
        fputc('\n', stderr);
    }
    harness_reply_free(&r);
    return same;
}

/* harness_call that must succeed. */
#define HCALL_OK(p, r, method, ...)                                                                \
    do {                                                                                           \
        bool ok_ = harness_call(p, r, method, __VA_ARGS__);                                        \
        CHECK_MSG(ok_, "%s on %s failed: %s", method, (p)->node, (r)->error);                      \
    } while (0)

/* harness_call that must fail with an error containing want. */
#define HCALL_ERR(p, r, want, method, ...)                                                         \
    do {                                                                                           \
        bool ok_ = harness_call(p, r, method, __VA_ARGS__);                                        \
        CHECK_MSG(!ok_, "%s on %s: expected an error", method, (p)->node);                         \
        CHECK_CONTAINS((r)->error, want);                                                          \
    } while (0)

/* ---- peers ---- */

static inline void harness_exec(int control_fd, int log_fd, const char *const *argv)
{
    dup2(log_fd, STDERR_FILENO);
    fcntl(control_fd, F_SETFD, 0); /* the one fd the peer inherits */
    execv(harness_peer_path, (char **)argv);
    _exit(127);
}

/* Starts a peer called node listening on addr:any port, with extra
 * arguments, and sends it nothing: a test of a fresh peer's counters
 * (test_peer.c) starts it so. p->data_port stays 0. */
static inline bool harness_spawn(struct harness_peer *p, const char *node, const char *addr,
                                 const char *const *extra)
{
    memset(p, 0, sizeof *p);
    snprintf(p->node, sizeof p->node, "%s", node);
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    snprintf(p->log_path, sizeof p->log_path, "/tmp/hiernet-test-peer-XXXXXX");
    int log_fd = mkstemp(p->log_path), sv[2];
    if (log_fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    char fd_text[16];
    snprintf(fd_text, sizeof fd_text, "%d", sv[1]);
    const char *argv[32] = {harness_peer_path, "--control-fd", fd_text,       "--node", node,
                            "--addr",          addr,           "--data-port", "0"};
    int argc = 9;
    for (; extra && *extra && argc < 30; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;
    p->pid = fork();
    if (p->pid == 0) harness_exec(sv[1], log_fd, argv);
    close(sv[1]);
    close(log_fd);
    p->fd = sv[0];
    p->next_msgid = 1;
    proto_reader_init(&p->reader, 0);
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
    return p->pid > 0;
}

/* harness_spawn, then fills p->data_port from the peer's stats. */
static inline bool harness_start(struct harness_peer *p, const char *node, const char *addr,
                                 const char *const *extra)
{
    struct harness_reply r;
    if (!harness_spawn(p, node, addr, extra) || !harness_call(p, &r, "stats", "")) return false;
    p->data_port = (int)harness_num(&r, "data_port");
    return p->data_port > 0;
}

/* "addr:port" of p's data plane. */
static inline const char *harness_data_addr(const struct harness_peer *p)
{
    static char text[4][96];
    static int next;
    char *t = text[next++ % 4];
    snprintf(t, sizeof text[0], "%s:%d", p->addr, p->data_port);
    return t;
}

/* A plain TCP connection to p's data port (no hello, no frames): for
 * tests that speak the wire themselves. The fd, or -1. */
static inline int harness_raw_connect(const struct harness_peer *p)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->data_port)};
    inet_pton(AF_INET, p->addr, &sin.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline bool harness_exited(int status, int code)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

/* Waits up to timeout_ms for p to exit; its wait status, or -1 after killing
 * it when it did not exit in time. */
static inline int harness_wait_exit(struct harness_peer *p, double timeout_ms)
{
    double deadline = mono_ms() + timeout_ms;
    int status;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) return status;
        if (r < 0 || mono_ms() > deadline) break;
        struct timespec tick = {0, 5 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &status, 0);
    return -1;
}

/* Expects p to exit with status code within timeout_ms (its control channel
 * left as it is until then), frees the client side and returns the peer's
 * log (static storage, valid until the next call), which must hold no
 * sanitizer report: UBSan may only print. */
static inline const char *harness_finish(struct harness_peer *p, int code, double timeout_ms)
{
    static char log[1 << 16];
    int status = harness_wait_exit(p, timeout_ms);
    CHECK_MSG(harness_exited(status, code), "%s: exit status %d, not %d", p->node, status, code);
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    FILE *f = fopen(p->log_path, "r");
    size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
    if (f) fclose(f);
    log[n] = '\0';
    unlink(p->log_path);
    proto_reader_destroy(&p->reader);
    msgpack_sbuffer_destroy(&p->sb);
    for (int i = 0; i < p->n_early; i++)
        harness_reply_free(&p->early[i]);
    free(p->early);
    CHECK_MSG(!strstr(log, "runtime error") && !strstr(log, "Sanitizer"), "%s log:\n%s", p->node,
              log);
    return log;
}

/* ---- waiting for a condition ---- */

/* Tests order events by waiting for the state they need, polled every 2 ms
 * up to a deadline, never by a fixed sleep that is too short on a loaded
 * host and wasted on an idle one. Each returns whether the state came. */

/* One of p's "stats" counters (a COMMAND_NOW: answered even while p
 * computes); -1 when the call failed. Not for in_order peers. */
static inline double harness_stat(struct harness_peer *p, const char *key)
{
    struct harness_reply r;
    double v = harness_call(p, &r, "stats", "") ? harness_num(&r, key) : -1;
    harness_reply_free(&r);
    return v;
}

static inline void harness_tick(void)
{
    struct timespec tick = {0, 2 * 1000 * 1000};
    nanosleep(&tick, NULL);
}

/* Until p's stats counter key exceeds floor (e.g. bytes_sent: a send has
 * started, its snapshot taken). */
static inline bool harness_wait_stat_above(struct harness_peer *p, const char *key, double floor,
                                           double timeout_ms)
{
    double deadline = mono_ms() + timeout_ms;
    while (harness_stat(p, key) <= floor) {
        if (mono_ms() > deadline) return false;
        harness_tick();
    }
    return true;
}

/* p's user + system CPU time in ms (/proc/PID/stat), -1 when unreadable. */
static inline double harness_cpu_ms(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long long utime, stime;
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

/* Until p has used cpu_ms more CPU than now: a job it was given is running. */
static inline bool harness_wait_busy(const struct harness_peer *p, double cpu_ms, double timeout_ms)
{
    double deadline = mono_ms() + timeout_ms, start = harness_cpu_ms(p->pid);
    while (harness_cpu_ms(p->pid) < start + cpu_ms) {
        if (start < 0 || mono_ms() > deadline) return false;
        harness_tick();
    }
    return true;
}

/* Until p's log holds needle. */
static inline bool harness_wait_log(const struct harness_peer *p, const char *needle,
                                    double timeout_ms)
{
    double deadline = mono_ms() + timeout_ms;
    static char log[1 << 16];
    for (;;) {
        FILE *f = fopen(p->log_path, "r");
        size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
        if (f) fclose(f);
        log[n] = '\0';
        if (strstr(log, needle)) return true;
        if (mono_ms() > deadline) return false;
        harness_tick();
    }
}

/* Until the bytes waiting on p's control channel reach at least min_bytes
 * and stop growing (the peer has filled the socket buffers and holds the
 * rest: backpressure). */
static inline bool harness_wait_backlog(const struct harness_peer *p, int min_bytes,
                                        double timeout_ms)
{
    double deadline = mono_ms() + timeout_ms;
    int last = -1, now = 0, still = 0;
    while (still < 5) {
        if (ioctl(p->fd, FIONREAD, &now) < 0 || mono_ms() > deadline) return false;
        still = now >= min_bytes && now == last ? still + 1 : 0;
        last = now;
        harness_tick();
    }
    return true;
}

/* Closes the control channel, expects exit 0, returns the peer's log. */
static inline const char *harness_stop(struct harness_peer *p)
{
    close(p->fd);
    p->fd = -1;
    return harness_finish(p, 0, 10000);
}
