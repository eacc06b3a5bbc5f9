/* agent_relay.c — remote nodes' control channels over the agent's (see agent_relay.h). */
#include "controller/agent_relay.h"

#include "common/container.h"
#include "common/growbuf.h"
#include "controller/log.h"
#include "proto/agent_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct relay_node {
    struct agent_relay *r;
    int node;
    struct peer_client *pc;
    int fd;             /* the relay's end of pc's socketpair, -1 once closed */
    ev_io rd, wr;       /* rd: pc's bytes to the agent; wr: the agent's to pc */
    struct growbuf out; /* the agent's bytes not yet written into fd */
    size_t out_sent;
    /* A restart asked of the agent and not answered: pc (the new peer's)
     * is not read, its calls wait in the socketpair; old, the previous
     * client until its exit arrives, takes that exit. */
    bool held;
    struct peer_client *old;
};

struct agent_relay {
    struct ev_loop *loop;
    struct peer_client *channel;
    char machine[64];
    struct relay_node **v; /* by increasing node */
    size_t n, cap;
    bool paused; /* the channel's backlog is past its bound: fds not read */
};

static void node_close(struct relay_node *rn)
{
    if (rn->fd < 0) return;
    ev_io_stop(rn->r->loop, &rn->rd);
    ev_io_stop(rn->r->loop, &rn->wr);
    close(rn->fd);
    rn->fd = -1;
}

/* ---- controller to agent ---- */

static void relay_pause(struct agent_relay *r)
{
    r->paused = true;
    for (size_t i = 0; i < r->n; i++)
        ev_io_stop(r->loop, &r->v[i]->rd);
}

static void on_channel_drained(void *ctx)
{
    struct agent_relay *r = ctx;
    if (!r->paused) return;
    r->paused = false;
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i]->fd >= 0 && !r->v[i]->held) ev_io_start(r->loop, &r->v[i]->rd);
}

/* One chunk as a `call` notification. -1 when the channel is down. */
static int send_chunk(struct relay_node *rn, const uint8_t *data, size_t len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct msgmap m;
    char err[256];
    int rc = -1;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgmap_init(&m);
    agent_wire_call(&m, &(struct agent_call){(uint64_t)rn->node, data, (uint32_t)len});
    if (msgmap_end(&m, &pk))
        rc = peer_client_notify(rn->r->channel, agent_method_name(AGENT_CALL), sb.data, sb.size,
                                err, sizeof err);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static void on_node_readable(EV_P_ ev_io *w, int revents)
{
    struct relay_node *rn = container_of(w, struct relay_node, rd);
    static uint8_t buf[AGENT_CALL_DATA_MAX];
    ssize_t n = read(rn->fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    /* EOF: the controller closed the client (the part's teardown ends
     * the remote peer, there is no per-node EOF in the contract). */
    if (n <= 0) return node_close(rn);
    if (send_chunk(rn, buf, (size_t)n) < 0) return node_close(rn); /* agent gone: lost follows */
    if (peer_client_queued(rn->r->channel) > AGENT_RELAY_BACKLOG_MAX) relay_pause(rn->r);
}

/* ---- agent to controller ---- */

static void node_flush(struct relay_node *rn)
{
    while (rn->fd >= 0 && rn->out_sent < rn->out.len) {
        ssize_t n =
            send(rn->fd, rn->out.data + rn->out_sent, rn->out.len - rn->out_sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return ev_io_start(rn->r->loop, &rn->wr);
        if (n < 0) return node_close(rn); /* the client closed: its peer's bytes go nowhere */
        rn->out_sent += (size_t)n;
    }
    ev_io_stop(rn->r->loop, &rn->wr);
    growbuf_free(&rn->out);
    rn->out_sent = 0;
}

static void on_node_writable(EV_P_ ev_io *w, int revents)
{
    node_flush(container_of(w, struct relay_node, wr));
}

/* A fresh client for node name and the relay's end of its socketpair;
 * nothing of the relay is touched (a restart refused here changes nothing). */
static struct peer_client *node_open(struct agent_relay *r, const char *name,
                                     const struct peer_client_hooks *hooks, int *fd, char *err,
                                     size_t errlen)
{
    struct peer_spawn spec = {.node = name, .netns_fd = -1};
    struct peer_client *pc = peer_client_open(r->loop, &spec, hooks, fd, err, errlen);
    if (pc) fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
    return pc;
}

/* rn relays pc over fd (watchers not started). */
static void node_attach(struct relay_node *rn, struct peer_client *pc, int fd)
{
    rn->pc = pc;
    rn->fd = fd;
    ev_io_init(&rn->rd, on_node_readable, fd, EV_READ);
    ev_io_init(&rn->wr, on_node_writable, fd, EV_WRITE);
}

static struct relay_node *node_find(const struct agent_relay *r, int node)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->v[mid]->node == node) return r->v[mid];
        if (r->v[mid]->node < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The node a message names, or NULL (logged: the message is dropped):
 * decoded is the decoder's result, err its line. */
static struct relay_node *node_named(struct agent_relay *r, int decoded, const char *err,
                                     uint64_t node, const char *what)
{
    if (decoded < 0) return ctl_log("machine '%s': %s (dropped)", r->machine, err), NULL;
    struct relay_node *rn = node <= INT32_MAX ? node_find(r, (int)node) : NULL;
    if (!rn)
        ctl_log("machine '%s': %s node %llu, not one of its nodes (dropped)", r->machine, what,
                (unsigned long long)node);
    return rn;
}

static void relay_call(struct agent_relay *r, const msgpack_object *params)
{
    struct agent_call c = {0};
    char err[256];
    int rc = agent_wire_read_call(params, &c, err, sizeof err);
    struct relay_node *rn = node_named(r, rc, err, c.node, "call for");
    /* held: the old peer's last bytes, nobody's to read now */
    if (!rn || rn->fd < 0 || rn->held) return;
    if (!growbuf_append(&rn->out, c.data, c.len)) {
        ctl_log("machine '%s': node '%s': out of memory relaying its peer", r->machine,
                peer_client_node(rn->pc));
        return node_close(rn);
    }
    if (!ev_is_active(&rn->wr)) node_flush(rn);
}

static void relay_exit(struct agent_relay *r, const msgpack_object *params)
{
    struct agent_exit e = {0};
    char err[256];
    int rc = agent_wire_read_exit(params, &e, err, sizeof err);
    struct relay_node *rn = node_named(r, rc, err, e.node, "exit of");
    if (!rn) return;
    if (rn->held || rn->old) { /* the exit of the peer a restart replaces */
        if (rn->old) peer_client_mark_exited(rn->old, (int)e.status, NULL);
        peer_client_free(rn->old);
        rn->old = NULL;
        return;
    }
    /* What the peer wrote before it exited is in the relay's buffer: hand
     * it over first, as a local client reads its leftovers. */
    node_flush(rn);
    peer_client_mark_exited(rn->pc, (int)e.status, NULL);
}

bool agent_relay_notify(struct agent_relay *r, const char *method, uint32_t method_len,
                        const msgpack_object *params)
{
    enum agent_method m = agent_method_find(method, method_len);
    if (m == AGENT_CALL) return relay_call(r, params), true;
    if (m == AGENT_EXIT) return relay_exit(r, params), true;
    return false;
}

/* ---- lifecycle ---- */

struct agent_relay *agent_relay_new(struct ev_loop *loop, struct peer_client *channel,
                                    const char *machine)
{
    struct agent_relay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->loop = loop;
    r->channel = channel;
    snprintf(r->machine, sizeof r->machine, "%s", machine);
    peer_client_on_drained(channel, on_channel_drained, r);
    return r;
}

static bool relay_grow(struct agent_relay *r)
{
    if (r->n < r->cap) return true;
    size_t cap = r->cap ? 2 * r->cap : 8;
    struct relay_node **v = realloc(r->v, cap * sizeof *v);
    if (!v) return false;
    r->v = v;
    r->cap = cap;
    return true;
}

struct peer_client *agent_relay_open(struct agent_relay *r, int node, const char *name,
                                     const struct peer_client_hooks *hooks, char *err,
                                     size_t errlen)
{
    if (r->n && r->v[r->n - 1]->node >= node)
        return snprintf(err, errlen, "node %d opened out of order", node), NULL;
    struct relay_node *rn = calloc(1, sizeof *rn);
    if (!rn || !relay_grow(r)) {
        free(rn);
        return snprintf(err, errlen, "out of memory"), NULL;
    }
    *rn = (struct relay_node){.r = r, .node = node, .fd = -1};
    int fd;
    struct peer_client *pc = node_open(r, name, hooks, &fd, err, errlen);
    if (!pc) return free(rn), NULL;
    node_attach(rn, pc, fd);
    if (!r->paused) ev_io_start(r->loop, &rn->rd);
    r->v[r->n++] = rn;
    return rn->pc;
}

struct peer_client *agent_relay_restart(struct agent_relay *r, int node, const char *name,
                                        const struct peer_client_hooks *hooks, char *err,
                                        size_t errlen)
{
    struct relay_node *rn = node_find(r, node);
    if (!rn) return snprintf(err, errlen, "node %d is not relayed", node), NULL;
    if (rn->held || rn->old) return snprintf(err, errlen, "a restart is under way"), NULL;
    /* The new channel first: a failure (no socketpair) leaves the old
     * client and its channel as they were, the restart refused. */
    int fd;
    struct peer_client *fresh = node_open(r, name, hooks, &fd, err, errlen);
    if (!fresh) return NULL;
    struct peer_client *old = rn->pc;
    /* The old channel ends here: what its peer still writes is dropped,
     * its calls fail as the channel closes; its exit is still told. */
    node_close(rn);
    growbuf_free(&rn->out);
    rn->out_sent = 0;
    node_attach(rn, fresh, fd);
    if (peer_client_exited(old))
        peer_client_free(old);
    else
        rn->old = old;
    rn->held = true;
    return rn->pc;
}

void agent_relay_resume(struct agent_relay *r, int node, const char *why)
{
    struct relay_node *rn = node_find(r, node);
    if (!rn || !rn->held) return;
    rn->held = false;
    if (why) return peer_client_mark_exited(rn->pc, SIGKILL, why), node_close(rn);
    if (rn->fd >= 0 && !r->paused) ev_io_start(r->loop, &rn->rd);
}

struct peer_client *agent_relay_peer(const struct agent_relay *r, int node)
{
    struct relay_node *rn = r ? node_find(r, node) : NULL;
    return rn ? rn->pc : NULL;
}

void agent_relay_lost(struct agent_relay *r, const char *why)
{
    for (size_t i = 0; r && i < r->n; i++) {
        node_close(r->v[i]);
        r->v[i]->held = false;
        peer_client_mark_exited(r->v[i]->pc, SIGKILL, why); /* a wait status: killed by SIGKILL */
        if (r->v[i]->old) peer_client_mark_exited(r->v[i]->old, SIGKILL, why);
    }
}

void agent_relay_free(struct agent_relay *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) {
        node_close(r->v[i]);
        growbuf_free(&r->v[i]->out);
        peer_client_free(r->v[i]->pc);
        peer_client_free(r->v[i]->old);
        free(r->v[i]);
    }
    peer_client_on_drained(r->channel, NULL, NULL);
    free(r->v);
    free(r);
}
