/* agent_pipe.h — a test's controller end of `hiernet agent` over pipes, as
 * ssh would give it: the child's stdin and stdout, requests and call
 * notifications packed with proto/agent_wire.h, messages read back
 * through proto/protocol.h's reader. Header only (static functions), for
 * unit.test_agent and netns.agent_build. Owns the pipes and the reader;
 * the child is the test's to wait for. */
#pragma once

#include "proto/agent_wire.h"
#include "proto/protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct agent_pipe {
    pid_t pid;
    int to, from; /* its stdin, its stdout */
    struct proto_reader reader;
    uint32_t msgid; /* the next request's */
};

/* Starts argv (argv[0] the executable) with stderr kept unless quiet
 * (/dev/null then). 0, or -1 when no pipe or no fork. */
static inline int agent_pipe_start(struct agent_pipe *a, char *const *argv, bool quiet)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) return -1;
    a->pid = fork();
    if (a->pid < 0) return -1;
    if (a->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (quiet) dup2(open("/dev/null", O_WRONLY), 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    a->to = in[1];
    a->from = out[0];
    a->msgid = 1;
    return proto_reader_init(&a->reader, AGENT_MESSAGE_MAX);
}

/* Writes m (freed) as request `method` (msgid, returned) or, when method
 * is a notification's (msgid 0), as that; 0 when the write failed. */
static inline uint32_t agent_pipe_send(struct agent_pipe *a, struct msgmap *m, const char *method,
                                       bool notify)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    uint32_t id = notify ? 0 : a->msgid++;
    bool packed = notify ? msgmap_notify(m, &pk, method) : msgmap_request(m, &pk, id, method);
    bool written = packed && write(a->to, sb.data, sb.size) == (ssize_t)sb.size;
    msgpack_sbuffer_destroy(&sb);
    return written ? (notify ? 1 : id) : 0;
}

static inline uint32_t agent_pipe_request(struct agent_pipe *a, enum agent_method method,
                                          struct msgmap *m)
{
    return agent_pipe_send(a, m, agent_method_name(method), false);
}

/* A call notification: len bytes of node's peer control stream. */
static inline bool agent_pipe_call(struct agent_pipe *a, uint64_t node, const void *data,
                                   size_t len)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_call(&m, &(struct agent_call){node, data, (uint32_t)len});
    return agent_pipe_send(a, &m, agent_method_name(AGENT_CALL), true) != 0;
}

/* The agent's next message within timeout_ms of silence; false on EOF,
 * a broken stream or the timeout. *m is valid until the next call. */
static inline bool agent_pipe_next(struct agent_pipe *a, struct proto_msg *m, int timeout_ms)
{
    for (;;) {
        bool has_msgid;
        char err[128];
        enum proto_next r = proto_reader_next(&a->reader, m, &has_msgid, err, sizeof err);
        if (r == PROTO_NEXT_MESSAGE) return true;
        if (r != PROTO_NEXT_MORE) return false;
        struct pollfd p = {a->from, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return false;
        size_t avail;
        char *buf = proto_reader_buffer(&a->reader, 65536, &avail);
        ssize_t n = buf ? read(a->from, buf, avail) : -1;
        if (n <= 0) return false;
        proto_reader_consumed(&a->reader, (size_t)n);
    }
}

/* One node's peer control stream, put back together from the agent's call
 * chunks. */
struct agent_pipe_stream {
    uint64_t node; /* whole-network index */
    struct proto_reader reader;
    int other_nodes; /* call chunks seen for other nodes (skipped) */
};

static inline void agent_pipe_stream_init(struct agent_pipe_stream *s, uint64_t node)
{
    s->node = node;
    s->other_nodes = 0;
    proto_reader_init(&s->reader, 0);
}

static inline void agent_pipe_stream_destroy(struct agent_pipe_stream *s)
{
    proto_reader_destroy(&s->reader);
}

/* Reads the agent's messages until s holds a response of the peer: true
 * and *out (valid until s is read again). The peer's notifications, the
 * agent's other messages and other nodes' chunks are skipped; false on
 * EOF, a broken stream or timeout_ms of silence. */
static inline bool agent_pipe_stream_response(struct agent_pipe *a, struct agent_pipe_stream *s,
                                              struct proto_msg *out, int timeout_ms)
{
    char err[256];
    for (;;) {
        bool has_msgid;
        enum proto_next r = proto_reader_next(&s->reader, out, &has_msgid, err, sizeof err);
        if (r == PROTO_NEXT_MESSAGE && out->kind == PROTO_RESPONSE) return true;
        if (r == PROTO_NEXT_FATAL) return false;
        if (r != PROTO_NEXT_MORE) continue;
        struct proto_msg m;
        struct agent_call c;
        if (!agent_pipe_next(a, &m, timeout_ms)) return false;
        if (m.kind != PROTO_NOTIFY || agent_method_find(m.method, m.method_len) != AGENT_CALL ||
            agent_wire_read_call(m.params, &c, err, sizeof err) < 0)
            continue;
        if (c.node != s->node) {
            s->other_nodes++;
            continue;
        }
        size_t avail;
        char *buf = proto_reader_buffer(&s->reader, c.len, &avail);
        if (!buf) return false;
        memcpy(buf, c.data, c.len);
        proto_reader_consumed(&s->reader, c.len);
    }
}

/* Closes both pipes (to: -1 when the test closed it already). */
static inline void agent_pipe_close(struct agent_pipe *a)
{
    if (a->to >= 0) close(a->to);
    close(a->from);
    proto_reader_destroy(&a->reader);
}
