/* agent_filter.c — hn-agent-filter, a faulty agent for the test
 * netns.cluster.refusals (issue 20): the real `hiernet agent` runs as its
 * child, and every message passes through, decoded and encoded again
 * whole (so that an answer of the filter's own never splits one of the
 * agent's), except one kind:
 *
 *   hn-agent-filter refuse HIERNET agent ARGS...
 *       a `kill` or `heal` request is answered with the error map {code 1,
 *       message "kill: refused by hn-agent-filter"} (or "heal: ...") and
 *       not passed on: an agent that refuses them;
 *   hn-agent-filter hold-build HIERNET agent ARGS...
 *       a `build` request is neither passed on nor answered (hello, pings
 *       and teardown are): an agent that answers pings but never builds;
 *   hn-agent-filter hold-underlay HIERNET agent ARGS...
 *       the same for `underlay` (the round trip to another machine).
 *
 * It is started as the agent is (HIERNET_REMOTE_BIN, through a script
 * that picks the mode). It ends when either side ends: the controller's
 * EOF closes the child's stdin (the agent tears down and exits), the
 * child's exit status is its own. */
#include "proto/agent_wire.h"
#include "proto/msgmap.h"
#include "proto/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum mode { REFUSE, HOLD_BUILD, HOLD_UNDERLAY };

static bool write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void pack_object_or_nil(msgpack_packer *pk, const msgpack_object *o)
{
    if (o)
        msgpack_pack_object(pk, *o);
    else
        msgpack_pack_nil(pk);
}

/* m encoded again, whole, to fd. */
static bool forward(int fd, const struct proto_msg *m)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, m->kind == PROTO_NOTIFY ? 3 : 4);
    msgpack_pack_int(&pk, (int)m->kind);
    if (m->kind != PROTO_NOTIFY) msgpack_pack_uint32(&pk, m->msgid);
    if (m->kind == PROTO_RESPONSE) {
        pack_object_or_nil(&pk, m->error);
        pack_object_or_nil(&pk, m->result);
    } else {
        msgpack_pack_str_with_body(&pk, m->method ? m->method : "", m->method_len);
        pack_object_or_nil(&pk, m->params);
    }
    bool ok = write_all(fd, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return ok;
}

static bool refuse(uint32_t msgid, enum agent_method method)
{
    struct agent_build_error e = {.code = 1};
    snprintf(e.message, sizeof e.message, "%s: refused by hn-agent-filter",
             agent_method_name(method));
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_build_error(&m, &e);
    bool ok = msgmap_error_response(&m, &pk, msgid) && write_all(1, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return ok;
}

/* One message of the controller's: passed on to the child (fd), or not. */
static bool from_controller(int mode, int fd, const struct proto_msg *m)
{
    enum agent_method method = agent_method_find(m->method, m->method_len);
    if (m->kind == PROTO_REQUEST && mode == REFUSE &&
        (method == AGENT_KILL || method == AGENT_HEAL))
        return refuse(m->msgid, method);
    if (m->kind == PROTO_REQUEST && ((mode == HOLD_BUILD && method == AGENT_BUILD) ||
                                     (mode == HOLD_UNDERLAY && method == AGENT_UNDERLAY))) {
        fprintf(stderr, "hn-agent-filter: %s %u held\n", agent_method_name(method), m->msgid);
        return true;
    }
    return forward(fd, m);
}

/* Reads what fd has into r and hands each message on: to the child
 * (from the controller) or to stdout (from the child). false at EOF. */
static bool pump(int mode, int in, struct proto_reader *r, int out, bool controller)
{
    size_t avail;
    char *buf = proto_reader_buffer(r, 1 << 16, &avail);
    ssize_t n = buf ? read(in, buf, avail) : -1;
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    proto_reader_consumed(r, (size_t)n);
    struct proto_msg m;
    bool has_msgid;
    char err[256];
    for (enum proto_next k; (k = proto_reader_next(r, &m, &has_msgid, err, sizeof err));) {
        if (k == PROTO_NEXT_FATAL) return fprintf(stderr, "hn-agent-filter: %s\n", err), false;
        if (k != PROTO_NEXT_MESSAGE) continue;
        if (!(controller ? from_controller(mode, out, &m) : forward(out, &m))) return false;
    }
    return true;
}

static pid_t spawn(char **argv, int *to, int *from)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = in[1];
    *from = out[0];
    return pid;
}

int main(int argc, char **argv)
{
    static const char *const modes[] = {"refuse", "hold-build", "hold-underlay"};
    int mode = -1;
    for (int i = 0; argc >= 4 && i < 3; i++)
        if (!strcmp(argv[1], modes[i])) mode = i;
    if (mode < 0)
        return fprintf(
                   stderr,
                   "usage: hn-agent-filter refuse|hold-build|hold-underlay HIERNET agent ...\n"),
               2;
    signal(SIGPIPE, SIG_IGN);
    int to, from;
    pid_t child = spawn(argv + 2, &to, &from);
    struct proto_reader up, down;
    if (child < 0 || proto_reader_init(&up, AGENT_MESSAGE_MAX) < 0 ||
        proto_reader_init(&down, AGENT_MESSAGE_MAX) < 0)
        return perror("hn-agent-filter"), 1;
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = from, .events = POLLIN}};
    for (bool open_up = true;;) {
        if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
        if (open_up && fds[0].revents && !pump(mode, 0, &up, to, true)) {
            close(to); /* the controller is gone: the agent's EOF */
            open_up = false;
            fds[0].fd = -1;
        }
        if (fds[1].revents && !pump(mode, from, &down, 1, false)) break;
    }
    int status = 0;
    waitpid(child, &status, 0);
    proto_reader_destroy(&up);
    proto_reader_destroy(&down);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
