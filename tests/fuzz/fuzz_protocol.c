/* fuzz_protocol.c — libFuzzer target for the control-protocol reader
 * (proto/protocol.c), the decoder every peer runs on its control channel.
 *
 * Each input is decoded twice: all at once, and fed in small chunks whose
 * size the input's first byte picks. Both must give the same sequence of
 * outcomes (a streaming decoder must not depend on how bytes arrive). Every
 * decoded params/result map goes through all the typed getters with each of
 * its string keys, and every method name through proto_method_is. A small
 * max_message lets the fuzzer reach the size limits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/protocol.h"

#define FUZZ_MAX_MESSAGE 4096
/* Every outcome consumes at least one byte, so inputs below this never hit it. */
#define FUZZ_MAX_OUTCOMES 65536

struct outcome {
    uint8_t next;
    uint8_t kind;
    uint8_t has_msgid;
    uint32_t msgid;
};

static const char *const fuzz_methods[] = {"ping", "axpy", "sum", "read"};

/* Calls every getter with one key; the results only need to be sane. */
static void fuzz_getters(struct proto_args *a, const char *key)
{
    const char *s;
    uint32_t len;
    char buf[32];
    int64_t i;
    double f;
    bool b;
    uint64_t off, cnt;
    if (proto_arg_str(a, key, &s, &len) == 1 && len > 0) (void)(volatile char)s[len - 1];
    if (proto_arg_strcpy(a, key, buf, sizeof buf) == 1 && strlen(buf) >= sizeof buf) abort();
    proto_arg_i64(a, key, &i);
    proto_arg_f64(a, key, &f);
    proto_arg_bool(a, key, &b);
    proto_arg_range(a, key, &off, &cnt);
    if (strlen(a->err) >= sizeof a->err) abort();
}

static void fuzz_args(const msgpack_object *map)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP) return;
    struct proto_args a;
    proto_args_init(&a, map);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        char key[65];
        if (k->type != MSGPACK_OBJECT_STR || k->via.str.size >= sizeof key) continue;
        if (k->via.str.size > 0) memcpy(key, k->via.str.ptr, k->via.str.size);
        key[k->via.str.size] = '\0';
        if (strlen(key) != k->via.str.size) continue; /* holds NUL */
        if (!proto_args_get(&a, key)) abort();        /* a string key present must be found */
        fuzz_getters(&a, key);
    }
    fuzz_getters(&a, "absent");
}

static void fuzz_message(const struct proto_msg *m)
{
    for (size_t i = 0; i < sizeof fuzz_methods / sizeof *fuzz_methods; i++)
        proto_method_is(fuzz_methods[i], m->method, m->method_len);
    fuzz_args(m->params);
    fuzz_args(m->result);
}

/* Decodes data fed `chunk` bytes at a time; returns the number of outcomes. */
static size_t fuzz_decode(const uint8_t *data, size_t size, size_t chunk, struct outcome *out)
{
    struct proto_reader r;
    if (proto_reader_init(&r, FUZZ_MAX_MESSAGE) != 0) abort();
    size_t n = 0;
    bool fatal = false;
    for (size_t pos = 0; pos < size && !fatal && n < FUZZ_MAX_OUTCOMES;) {
        size_t len = size - pos < chunk ? size - pos : chunk, avail;
        char *buf = proto_reader_buffer(&r, len, &avail);
        if (!buf || avail < len) abort();
        memcpy(buf, data + pos, len);
        proto_reader_consumed(&r, len);
        pos += len;
        for (;;) {
            struct proto_msg m;
            bool has_msgid;
            char err[128];
            enum proto_next next = proto_reader_next(&r, &m, &has_msgid, err, sizeof err);
            if (next == PROTO_NEXT_MORE || n == FUZZ_MAX_OUTCOMES) break;
            out[n++] = (struct outcome){(uint8_t)next, (uint8_t)m.kind, has_msgid,
                                        has_msgid ? m.msgid : 0};
            if (next == PROTO_NEXT_MESSAGE) fuzz_message(&m);
            if (next == PROTO_NEXT_FATAL) {
                fatal = true;
                break;
            }
        }
    }
    proto_reader_destroy(&r);
    return n;
}

static bool outcomes_equal(const struct outcome *a, size_t n_a, const struct outcome *b, size_t n_b)
{
    if (n_a != n_b) return false;
    for (size_t i = 0; i < n_a; i++)
        if (a[i].next != b[i].next || a[i].kind != b[i].kind || a[i].has_msgid != b[i].has_msgid ||
            a[i].msgid != b[i].msgid)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct outcome whole[FUZZ_MAX_OUTCOMES], pieces[FUZZ_MAX_OUTCOMES];
    size_t n_whole = fuzz_decode(data, size, size ? size : 1, whole);
    size_t chunk = 1 + (size ? data[0] % 17 : 0);
    size_t n_pieces = fuzz_decode(data, size, chunk, pieces);
    /* Outcome lists are capped, so only compare when neither hit the cap. */
    if (n_whole < FUZZ_MAX_OUTCOMES && n_pieces < FUZZ_MAX_OUTCOMES &&
        !outcomes_equal(whole, n_whole, pieces, n_pieces)) {
        fprintf(stderr, "fuzz_protocol: %zu outcomes at once, %zu in chunks of %zu\n", n_whole,
                n_pieces, chunk);
        abort();
    }
    return 0;
}
