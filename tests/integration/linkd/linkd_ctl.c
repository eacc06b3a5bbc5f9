/* linkd_ctl.c — hn-linkd-ctl: a line-oriented controller for hiernet-linkd.
 *
 * Starts hiernet-linkd on one end of a socketpair, the way the hiernet
 * controller does, then turns each stdin line
 *     method key=value a.netns_path=/proc/1/ns/net ab.bw=1e6 ...
 * into a MessagePack-RPC request (dotted keys become nested maps; values that
 * look like integers, numbers or true/false are sent as such) and prints the
 * response as one line: "ok key=value ..." with nested keys flattened
 * ("ab.packets=12"), or "error <message>". The first line printed is
 * "linkd pid=N". EOF on stdin closes the socket, which makes linkd exit.
 * Used by the netns tests and tools/bench/linkd.
 *
 *   hn-linkd-ctl PATH-TO-hiernet-linkd [linkd args...] */
#include "proto/protocol.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CTL_MAX_ARGS 64

struct ctl_kv {
    char *key, *value;
};

static pid_t ctl_spawn(char **argv, int *sock)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* dup2 clears close-on-exec on the child's copy only. */
        if (dup2(sv[1], 3) < 0) _exit(127);
        char *args[CTL_MAX_ARGS + 4];
        int n = 0;
        args[n++] = argv[0];
        args[n++] = "--control-fd";
        args[n++] = "3";
        for (int i = 1; argv[i] && n < CTL_MAX_ARGS; i++)
            args[n++] = argv[i];
        args[n] = NULL;
        execv(argv[0], args);
        perror(argv[0]);
        _exit(127);
    }
    close(sv[1]);
    *sock = sv[0];
    return pid;
}

static void ctl_pack_value(msgpack_packer *pk, const char *v)
{
    char *end;
    if (strcmp(v, "true") == 0) {
        msgpack_pack_true(pk);
        return;
    }
    if (strcmp(v, "false") == 0) {
        msgpack_pack_false(pk);
        return;
    }
    long long i = strtoll(v, &end, 10);
    if (*v && !*end) {
        msgpack_pack_int64(pk, i);
        return;
    }
    double d = strtod(v, &end);
    if (*v && !*end) {
        msgpack_pack_double(pk, d);
        return;
    }
    proto_pack_str(pk, v);
}

/* Packs kv[0..n) (keys relative to `prefix`) as one map; a group of keys
 * sharing "x." becomes a nested map under "x". */
static void ctl_pack_map(msgpack_packer *pk, struct ctl_kv *kv, int n, size_t skip)
{
    int entries = 0;
    for (int i = 0; i < n; i++) {
        const char *dot = strchr(kv[i].key + skip, '.');
        size_t len = dot ? (size_t)(dot - kv[i].key) : 0;
        if (i > 0 && dot && strncmp(kv[i - 1].key, kv[i].key, len + 1) == 0) continue;
        entries++;
    }
    msgpack_pack_map(pk, (uint32_t)entries);
    for (int i = 0; i < n;) {
        const char *k = kv[i].key + skip;
        const char *dot = strchr(k, '.');
        if (!dot) {
            proto_pack_str(pk, k);
            ctl_pack_value(pk, kv[i].value);
            i++;
            continue;
        }
        size_t plen = (size_t)(dot - kv[i].key) + 1; /* prefix incl. dot */
        int j = i;
        while (j < n && strncmp(kv[j].key, kv[i].key, plen) == 0)
            j++;
        msgpack_pack_str(pk, (size_t)(dot - k));
        msgpack_pack_str_body(pk, k, (size_t)(dot - k));
        ctl_pack_map(pk, kv + i, j - i, plen);
        i = j;
    }
}

static int ctl_kv_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ctl_kv *)a)->key, ((const struct ctl_kv *)b)->key);
}

static void ctl_print(const msgpack_object *o, const char *prefix)
{
    char key[256];
    switch (o->type) {
    case MSGPACK_OBJECT_MAP:
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            if (k->type != MSGPACK_OBJECT_STR) continue;
            snprintf(key, sizeof key, "%s%s%.*s", prefix, *prefix ? "." : "", (int)k->via.str.size,
                     k->via.str.ptr);
            ctl_print(&o->via.map.ptr[i].val, key);
        }
        return;
    case MSGPACK_OBJECT_ARRAY:
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            snprintf(key, sizeof key, "%s%s%u", prefix, *prefix ? "." : "", i);
            ctl_print(&o->via.array.ptr[i], key);
        }
        return;
    case MSGPACK_OBJECT_STR:
        printf(" %s=%.*s", prefix, (int)o->via.str.size, o->via.str.ptr);
        return;
    case MSGPACK_OBJECT_BOOLEAN:
        printf(" %s=%s", prefix, o->via.boolean ? "true" : "false");
        return;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        printf(" %s=%llu", prefix, (unsigned long long)o->via.u64);
        return;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        printf(" %s=%lld", prefix, (long long)o->via.i64);
        return;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        printf(" %s=%.17g", prefix, o->via.f64);
        return;
    default:
        printf(" %s=(%s)", prefix, proto_type_name(o->type));
        return;
    }
}

static int ctl_send_line(int sock, char *line, uint32_t msgid)
{
    struct ctl_kv kv[CTL_MAX_ARGS];
    int n = 0;
    char *save, *method = strtok_r(line, " \t\n", &save);
    if (!method) return 0;
    for (char *tok; (tok = strtok_r(NULL, " \t\n", &save)) && n < CTL_MAX_ARGS;) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            fprintf(stderr, "hn-linkd-ctl: '%s' is not key=value\n", tok);
            return -1;
        }
        *eq = '\0';
        kv[n++] = (struct ctl_kv){tok, eq + 1};
    }
    qsort(kv, (size_t)n, sizeof kv[0], ctl_kv_cmp); /* groups dotted prefixes */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, PROTO_REQUEST);
    msgpack_pack_uint32(&pk, msgid);
    proto_pack_str(&pk, method);
    ctl_pack_map(&pk, kv, n, 0);
    ssize_t w = write(sock, sb.data, sb.size);
    int rc = w == (ssize_t)sb.size ? 1 : -1;
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* Blocks until the response arrives and prints it. */
static int ctl_read_response(int sock, struct proto_reader *r)
{
    for (;;) {
        struct proto_msg msg;
        bool has_msgid;
        char err[256];
        enum proto_next nx = proto_reader_next(r, &msg, &has_msgid, err, sizeof err);
        if (nx == PROTO_NEXT_MESSAGE && msg.kind == PROTO_RESPONSE) {
            if (msg.error->type == MSGPACK_OBJECT_STR)
                printf("error %.*s\n", (int)msg.error->via.str.size, msg.error->via.str.ptr);
            else {
                printf("ok");
                ctl_print(msg.result, "");
                printf("\n");
            }
            fflush(stdout);
            return 0;
        }
        if (nx == PROTO_NEXT_FATAL || nx == PROTO_NEXT_INVALID) {
            fprintf(stderr, "hn-linkd-ctl: %s\n", err);
            return -1;
        }
        if (nx == PROTO_NEXT_MESSAGE) continue;
        size_t avail;
        char *buf = proto_reader_buffer(r, 65536, &avail);
        ssize_t n = buf ? read(sock, buf, avail) : -1;
        if (n <= 0) {
            fprintf(stderr, "hn-linkd-ctl: linkd closed the control channel\n");
            return -1;
        }
        proto_reader_consumed(r, (size_t)n);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: hn-linkd-ctl PATH-TO-hiernet-linkd [linkd args...]\n");
        return 2;
    }
    int sock;
    pid_t pid = ctl_spawn(argv + 1, &sock);
    if (pid < 0) {
        perror("hn-linkd-ctl: spawn");
        return 3;
    }
    printf("linkd pid=%d\n", (int)pid);
    fflush(stdout);
    struct proto_reader reader;
    if (proto_reader_init(&reader, 0) < 0) return 3;
    char line[8192];
    uint32_t msgid = 1;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, stdin)) {
        int sent = ctl_send_line(sock, line, msgid++);
        if (sent < 0)
            printf("error bad request line\n");
        else if (sent > 0 && ctl_read_response(sock, &reader) < 0)
            rc = 1;
        fflush(stdout);
    }
    close(sock); /* EOF: linkd exits and its TAPs vanish */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    proto_reader_destroy(&reader);
    if (rc) return rc;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
