/* test_agent_relay.c — controller/agent_relay.c against a fake agent (the
 * other end of the agent channel's socketpair, read and written with
 * proto/protocol.h): a remote node's request leaves as `call` chunks whose
 * bytes are exactly the request's, the agent's `call` chunks reach the
 * node's client as its reply, the agent's `exit` ends the client with that
 * wait status (its calls failing), a chunk for a node that is not the
 * relay's is dropped, and a fake agent that stops reading holds the
 * channel's backlog near AGENT_RELAY_BACKLOG_MAX (the nodes' ends are not
 * read any more) while every byte still arrives, in order, once it reads.
 * A restart (agent_relay_restart) gives the node a new client whose calls
 * are not relayed until agent_relay_resume, the old client taking the
 * next `exit`; a resume with an error ends the new client with it. A
 * restart that cannot open its new channel (no descriptor left) is
 * refused and changes nothing: the old client still relays its peer (its
 * channel was closed first, which left the old peer without one). */
#include "controller/agent_relay.h"
#include "check.h"
#include "proto/agent_wire.h"
#include "proto/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct fake_agent {
    int fd;
    struct proto_reader reader;
    /* the `call` chunks of node 3, concatenated */
    uint8_t *bytes;
    size_t len, cap;
    int calls, bad;
};

struct node_probe {
    int exits, status;
    int replies;
    char error[256];
    int64_t value;
};

static struct ev_loop *loop;

static void spin(double s)
{
    double until = ev_time() + s;
    while (ev_time() < until)
        ev_run(loop, EVRUN_NOWAIT);
}

/* Reads what the relay sent the agent (nonblocking) into a's chunks. */
static void agent_read(struct fake_agent *a)
{
    for (;;) {
        size_t avail;
        char *buf = proto_reader_buffer(&a->reader, 1 << 16, &avail);
        ssize_t n = read(a->fd, buf, avail);
        if (n <= 0) break;
        proto_reader_consumed(&a->reader, (size_t)n);
        struct proto_msg m;
        bool has_msgid;
        char err[256];
        while (proto_reader_next(&a->reader, &m, &has_msgid, err, sizeof err) ==
               PROTO_NEXT_MESSAGE) {
            struct agent_call c;
            if (m.kind != PROTO_NOTIFY || agent_method_find(m.method, m.method_len) != AGENT_CALL ||
                agent_wire_read_call(m.params, &c, err, sizeof err) < 0 || c.node != 3) {
                a->bad++;
                continue;
            }
            if (a->len + c.len > a->cap) {
                a->cap = 2 * (a->len + c.len);
                a->bytes = realloc(a->bytes, a->cap);
            }
            memcpy(a->bytes + a->len, c.data, c.len);
            a->len += c.len;
            a->calls++;
        }
    }
}

static void agent_send(struct fake_agent *a, struct msgmap *m, enum agent_method method)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    CHECK(msgmap_notify(m, &pk, agent_method_name(method)));
    CHECK(write(a->fd, sb.data, sb.size) == (ssize_t)sb.size);
    msgpack_sbuffer_destroy(&sb);
}

static void agent_call(struct fake_agent *a, uint64_t node, const void *data, size_t len)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_call(&m, &(struct agent_call){node, data, (uint32_t)len});
    agent_send(a, &m, AGENT_CALL);
}

static void on_node_exit(void *ctx, int status)
{
    struct node_probe *p = ctx;
    p->exits++;
    p->status = status;
}

static void on_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct node_probe *p = ctx;
    p->replies++;
    snprintf(p->error, sizeof p->error, "%s", error ? error : "");
    struct proto_args a;
    if (result) {
        proto_args_init(&a, result);
        proto_arg_i64(&a, "value", &p->value);
    }
}

/* The peer's reply to request msgid, as its control channel carries it. */
static void reply_bytes(uint32_t msgid, int64_t value, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    struct msgmap m;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgmap_init(&m);
    msgmap_i64(&m, "value", value);
    CHECK(msgmap_response(&m, &pk, msgid));
}

static void request_reply_exit(struct fake_agent *a, struct peer_client *node, struct node_probe *p)
{
    char err[256];
    CHECK(peer_client_call(node, "ping", NULL, 0, on_reply, p, err, sizeof err) == 0);
    spin(0.05);
    agent_read(a);
    /* exactly the bytes of [0, 1, "ping", {}] */
    const uint8_t want[] = {0x94, 0x00, 0x01, 0xa4, 'p', 'i', 'n', 'g', 0x80};
    CHECK_MSG(a->len == sizeof want && !memcmp(a->bytes, want, sizeof want), "%zu bytes relayed",
              a->len);
    CHECK(a->bad == 0);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    reply_bytes(1, 42, &sb);
    agent_call(a, 3, sb.data, 3); /* in two chunks: the stream is bytes, not messages */
    agent_call(a, 3, sb.data + 3, sb.size - 3);
    agent_call(a, 7, sb.data, sb.size); /* not the relay's node: dropped */
    msgpack_sbuffer_destroy(&sb);
    spin(0.05);
    CHECK(p->replies == 1 && p->value == 42 && p->error[0] == '\0');

    /* a call left pending, then the peer's exit (status 3) */
    CHECK(peer_client_call(node, "ping", NULL, 0, on_reply, p, err, sizeof err) == 0);
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_exit(&m, &(struct agent_exit){3, 3 << 8});
    agent_send(a, &m, AGENT_EXIT);
    spin(0.05);
    CHECK(p->exits == 1 && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 3);
    CHECK(p->replies == 2);
    CHECK_CONTAINS(p->error, "peer exited with status 3");
    CHECK(peer_client_exited(node) && peer_client_closed(node));
}

static void agent_exit(struct fake_agent *a, int status)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_exit(&m, &(struct agent_exit){3, (uint64_t)status});
    agent_send(a, &m, AGENT_EXIT);
}

/* Node 3 (exited) restarted twice: its calls held until the agent
 * answers; the second restart's old client takes the old peer's exit. */
static void restart_hold(struct fake_agent *a, struct agent_relay *r)
{
    struct node_probe n1 = {0}, n2 = {0};
    struct peer_client_hooks hooks = {.on_exit = on_node_exit, .ctx = &n1};
    char err[256];
    struct peer_client *fresh = agent_relay_restart(r, 3, "h2", &hooks, err, sizeof err);
    CHECK_MSG(fresh && agent_relay_peer(r, 3) == fresh, "%s", fresh ? "" : err);
    if (!fresh) return;
    CHECK(agent_relay_restart(r, 3, "h2", &hooks, err, sizeof err) == NULL);
    CHECK_STREQ(err, "a restart is under way");
    agent_read(a); /* the old client's last call */
    a->len = 0;
    CHECK(peer_client_call(fresh, "ping", NULL, 0, on_reply, &n1, err, sizeof err) == 0);
    spin(0.05);
    agent_read(a);
    CHECK_MSG(a->len == 0, "%zu bytes relayed before the agent answered", a->len);
    agent_relay_resume(r, 3, NULL);
    spin(0.05);
    agent_read(a);
    const uint8_t want[] = {0x94, 0x00, 0x01, 0xa4, 'p', 'i', 'n', 'g', 0x80}; /* its msgid 1 */
    CHECK_MSG(a->len == sizeof want && !memcmp(a->bytes, want, sizeof want), "%zu bytes", a->len);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    reply_bytes(1, 7, &sb);
    agent_call(a, 3, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    spin(0.05);
    CHECK(n1.replies == 1 && n1.value == 7 && n1.error[0] == '\0');

    /* restarted while running: the old peer's exit is the old client's */
    hooks.ctx = &n2;
    struct peer_client *third = agent_relay_restart(r, 3, "h2", &hooks, err, sizeof err);
    CHECK_MSG(third != NULL, "%s", err);
    if (!third) return;
    agent_exit(a, SIGKILL);
    spin(0.05);
    CHECK(n1.exits == 1 && WIFSIGNALED(n1.status) && n2.exits == 0);
    CHECK(!peer_client_exited(third));
    CHECK(peer_client_call(third, "ping", NULL, 0, on_reply, &n2, err, sizeof err) == 0);
    agent_relay_resume(r, 3, "machine 'm2': restart: node h2: its new peer did not answer in time");
    spin(0.05);
    CHECK(n2.exits == 1 && n2.replies == 1);
    CHECK_STREQ(n2.error, "machine 'm2': restart: node h2: its new peer did not answer in time");
}

/* No descriptor left for the new channel: the restart is refused and the
 * old client, still node 3's, relays its calls as before. */
static void restart_refused(struct fake_agent *a, struct agent_relay *r, struct peer_client *node,
                            struct node_probe *p)
{
    struct rlimit saved, none;
    char err[256];
    int lowest = dup(0); /* the lowest free descriptor: a limit there leaves none */
    CHECK(lowest >= 0 && getrlimit(RLIMIT_NOFILE, &saved) == 0);
    close(lowest);
    none = (struct rlimit){(rlim_t)lowest, saved.rlim_max};
    CHECK(setrlimit(RLIMIT_NOFILE, &none) == 0);
    struct peer_client_hooks hooks = {.on_exit = on_node_exit, .ctx = p};
    struct peer_client *fresh = agent_relay_restart(r, 3, "h2", &hooks, err, sizeof err);
    CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0);
    CHECK(fresh == NULL);
    CHECK_CONTAINS(err, "socketpair: Too many open files");
    CHECK(agent_relay_peer(r, 3) == node && !peer_client_closed(node));
    agent_read(a);
    size_t before = a->len;
    CHECK(peer_client_call(node, "ping", NULL, 0, on_reply, p, err, sizeof err) == 0);
    spin(0.05);
    agent_read(a);
    CHECK_MSG(a->len > before, "the old client's call was not relayed after the refusal");
}

/* A fake agent that does not read: the nodes' ends stop being read. */
static void backpressure(struct fake_agent *a, struct peer_client *channel,
                         struct peer_client *node, struct node_probe *p)
{
    size_t total = 12u << 20, sent = 0, piece = 1u << 20;
    char err[256];
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    char *blob = malloc(piece);
    size_t max_backlog = 0;
    for (int k = 0; sent < total; k++) {
        memset(blob, 'a' + k % 26, piece);
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, "x", 1);
        msgpack_pack_bin_with_body(&pk, blob, piece - 16);
        CHECK(peer_client_call(node, "put", sb.data, sb.size, on_reply, p, err, sizeof err) == 0);
        sent += sb.size;
        spin(0.02);
        if (peer_client_queued(channel) > max_backlog) max_backlog = peer_client_queued(channel);
    }
    /* the bound, one chunk over it and one message envelope */
    CHECK_MSG(max_backlog <= AGENT_RELAY_BACKLOG_MAX + AGENT_CALL_DATA_MAX + 64,
              "backlog reached %zu bytes", max_backlog);
    CHECK_MSG(max_backlog > AGENT_RELAY_BACKLOG_MAX / 2, "backlog only %zu bytes", max_backlog);
    /* now the agent reads: every byte arrives */
    size_t before = a->len;
    for (int i = 0; i < 400 && a->len - before < sent; i++) {
        agent_read(a);
        spin(0.005);
    }
    agent_read(a);
    CHECK_MSG(a->len - before >= sent, "%zu of %zu bytes relayed", a->len - before, sent);
    free(blob);
    msgpack_sbuffer_destroy(&sb);
}

static struct agent_relay *relay; /* the channel's notifications go to it */

/* What controller/agent_client.c does with the agent's notifications. */
static void on_channel_notify(void *ctx, const char *method, uint32_t len,
                              const msgpack_object *params)
{
    CHECK(agent_relay_notify(relay, method, len, params));
}

static struct fake_agent *agent_new(struct peer_client **channel)
{
    static struct fake_agent a;
    char err[256];
    struct peer_spawn spec = {.node = "@m2", .netns_fd = -1};
    struct peer_client_hooks hooks = {.on_notify = on_channel_notify};
    *channel = peer_client_open(loop, &spec, &hooks, &a.fd, err, sizeof err);
    CHECK_MSG(*channel, "%s", err);
    fcntl(a.fd, F_SETFL, fcntl(a.fd, F_GETFL) | O_NONBLOCK);
    CHECK(proto_reader_init(&a.reader, 1u << 20) == 0);
    return &a;
}

int main(void)
{
    loop = ev_default_loop(0);
    struct peer_client *channel;
    struct fake_agent *a = agent_new(&channel);
    if (!channel) return check_report();
    struct agent_relay *r = relay = agent_relay_new(loop, channel, "m2");
    struct node_probe p = {0}, q = {0};
    char err[256];
    struct peer_client_hooks hooks = {.on_exit = on_node_exit, .ctx = &p};
    struct peer_client *h2 = agent_relay_open(r, 3, "h2", &hooks, err, sizeof err);
    CHECK_MSG(h2 != NULL, "%s", err);
    CHECK(agent_relay_open(r, 2, "h1", &hooks, err, sizeof err) == NULL); /* out of order */
    CHECK(agent_relay_peer(r, 3) == h2 && agent_relay_peer(r, 2) == NULL);
    if (h2) request_reply_exit(a, h2, &p);
    if (h2) restart_hold(a, r);
    agent_relay_free(r);

    /* a fresh relay: the same node, flooded */
    r = relay = agent_relay_new(loop, channel, "m2");
    hooks.ctx = &q;
    a->len = 0;
    struct peer_client *again = agent_relay_open(r, 3, "h2", &hooks, err, sizeof err);
    if (again) restart_refused(a, r, again, &q);
    if (again) backpressure(a, channel, again, &q);
    /* the agent lost: the node ends as killed */
    char left[256];
    CHECK(peer_client_call(again, "ping", NULL, 0, on_reply, &q, left, sizeof left) == 0);
    agent_relay_lost(r, "machine 'm2' (10.250.0.2): the agent's ssh exited with status 255");
    CHECK(q.exits == 1 && WIFSIGNALED(q.status) && WTERMSIG(q.status) == SIGKILL);
    CHECK_STREQ(q.error, "machine 'm2' (10.250.0.2): the agent's ssh exited with status 255");
    agent_relay_free(r);
    peer_client_free(channel);
    close(a->fd);
    proto_reader_destroy(&a->reader);
    free(a->bytes);
    return check_report();
}
