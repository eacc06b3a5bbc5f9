/* peer_client.c — the controller's end of one peer's control channel (see peer_client.h). */
#include "controller/peer_client.h"

#include "common/container.h"
#include "controller/log.h"
#include "controller/reaper.h"
#include "controller/spawn.h"
#include "proto/protocol.h"
#include "proto/template_wire.h"
#include "proto/names.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long to wait after EOF for the exit status, so the failure message can
 * say how the peer died; bounded well under the 100 ms promise. */
#define PEER_EXIT_GRACE_S 0.05

struct pending {
    uint32_t msgid;
    peer_reply_fn cb;
    void *ctx;
    struct pending *prev, *next;
};

struct peer_client {
    struct ev_loop *loop;
    char node[HN_NODE_NAME_SIZE]; /* a node's name, or "@linkd" */
    pid_t pid;
    int fd;             /* -1 once closed */
    bool output_broken; /* a write failed: reading on until EOF */
    bool exited;
    int wait_status;
    char gone_reason[400]; /* why pending calls fail, once the channel is down */

    ev_io read_watcher;
    ev_io write_watcher;
    ev_child child_watcher;
    ev_timer grace_timer;

    struct proto_reader reader;
    msgpack_sbuffer out;
    size_t out_sent;
    msgpack_packer packer;
    uint32_t next_msgid;

    struct pending *head, *tail;
    size_t n_pending;
    struct peer_client_hooks hooks;
    peer_drained_fn drained; /* the output backlog went to zero */
    void *drained_ctx;

    /* Relay mode (peer_client_relay): bytes go to relay_fn as read, and
     * relay_drained hears when the bytes queued toward the peer are out. */
    peer_bytes_fn relay_fn;
    peer_drained_fn relay_drained;
    void *relay_ctx;
};

/* ---- child side ---- */

/* argv: path, "--control-fd", "3", then the spec's own arguments. */
static int build_argv(const struct peer_spawn *spec, char **argv, size_t cap)
{
    size_t n = 0;
    argv[n++] = (char *)spec->path;
    argv[n++] = "--control-fd";
    argv[n++] = PEER_CONTROL_FD_TEXT;
    for (const char *const *a = spec->args; a && *a; a++) {
        if (n + 1 >= cap) return -1;
        argv[n++] = (char *)*a;
    }
    argv[n] = NULL;
    return 0;
}

/* Starts the child with its end of the socketpair as fd 3. */
static pid_t start_child(const struct peer_spawn *spec, int fd, char *err, size_t errlen)
{
    char *argv[64];
    if (build_argv(spec, argv, 64) < 0) return snprintf(err, errlen, "too many arguments"), -1;
    char **envp = spawn_env(spec->env);
    if (!envp) return snprintf(err, errlen, "out of memory"), -1;
    struct spawn_spec s = {spec->path, argv, envp, spec->netns_fd, {fd}, {PEER_CONTROL_FD}, 1, 0};
    char why[400];
    pid_t pid = spawn_child(&s, why, sizeof why);
    spawn_env_free(envp);
    if (pid < 0) snprintf(err, errlen, "%s", why);
    return pid;
}

/* ---- pending table ---- */

static void pending_push(struct peer_client *pc, struct pending *p)
{
    p->next = NULL;
    p->prev = pc->tail;
    if (pc->tail)
        pc->tail->next = p;
    else
        pc->head = p;
    pc->tail = p;
    pc->n_pending++;
}

static void pending_unlink(struct peer_client *pc, struct pending *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        pc->head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        pc->tail = p->prev;
    pc->n_pending--;
}

/* Responses mostly arrive in request order, so the scan usually stops at the head. */
static struct pending *pending_take(struct peer_client *pc, uint32_t msgid)
{
    for (struct pending *p = pc->head; p; p = p->next) {
        if (p->msgid == msgid) {
            pending_unlink(pc, p);
            return p;
        }
    }
    return NULL;
}

/* Fails every pending call with gone_reason. The list is detached first so
 * that callbacks issuing new requests cannot make this loop run forever. */
static void pending_fail_all(struct peer_client *pc)
{
    struct pending *p = pc->head;
    pc->head = pc->tail = NULL;
    pc->n_pending = 0;
    while (p) {
        struct pending *next = p->next;
        p->cb(p->ctx, pc->gone_reason, NULL);
        free(p);
        p = next;
    }
}

/* ---- channel teardown ---- */

static void channel_close(struct peer_client *pc)
{
    if (pc->fd < 0) return;
    ev_io_stop(pc->loop, &pc->read_watcher);
    ev_io_stop(pc->loop, &pc->write_watcher);
    close(pc->fd);
    pc->fd = -1;
}

static void describe_exit(struct peer_client *pc)
{
    int st = pc->wait_status;
    if (WIFEXITED(st))
        snprintf(pc->gone_reason, sizeof pc->gone_reason, "peer exited with status %d",
                 WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(pc->gone_reason, sizeof pc->gone_reason, "peer killed by signal %d (%s)",
                 WTERMSIG(st), strsignal(WTERMSIG(st)));
}

/* The peer vanished (EOF or error on the channel) or exited: fail its calls. */
static void channel_lost(struct peer_client *pc)
{
    ev_timer_stop(pc->loop, &pc->grace_timer);
    channel_close(pc);
    if (pc->gone_reason[0] == '\0')
        snprintf(pc->gone_reason, sizeof pc->gone_reason, "peer exited unexpectedly");
    pending_fail_all(pc);
}

static void on_grace_timeout(EV_P_ ev_timer *w, int revents)
{
    channel_lost(container_of(w, struct peer_client, grace_timer));
}

static int drain_messages(struct peer_client *pc);
static ssize_t relay_read(struct peer_client *pc);

/* The peer has exited, so all it wrote is in the socket: read it (a "fatal"
 * notification naming the cause, late replies) before failing the calls.
 * A relay hands it on, paused or not: the peer is gone, so it is bounded. */
static void read_leftovers(struct peer_client *pc)
{
    while (pc->fd >= 0 && pc->relay_fn)
        if (relay_read(pc) <= 0) return;
    while (pc->fd >= 0) {
        size_t avail;
        char *buf = proto_reader_buffer(&pc->reader, 4096, &avail);
        ssize_t n = buf ? read(pc->fd, buf, avail) : -1;
        if (n <= 0) return;
        proto_reader_consumed(&pc->reader, (size_t)n);
        if (drain_messages(pc) < 0) return;
    }
}

static void child_exited(struct peer_client *pc, int wait_status)
{
    read_leftovers(pc);
    pc->exited = true;
    pc->wait_status = wait_status;
    if (pc->gone_reason[0] == '\0') describe_exit(pc);
    channel_lost(pc);
    if (pc->hooks.on_exit) pc->hooks.on_exit(pc->hooks.ctx, pc->wait_status);
}

static void on_child(EV_P_ ev_child *w, int revents)
{
    struct peer_client *pc = container_of(w, struct peer_client, child_watcher);
    ev_child_stop(pc->loop, w);
    child_exited(pc, w->rstatus);
}

const char *peer_client_gone_reason(const struct peer_client *pc)
{
    return pc->gone_reason;
}

void peer_client_mark_exited(struct peer_client *pc, int wait_status, const char *why)
{
    if (pc->exited || pc->pid > 0) return; /* a child of ours is reaped, not told */
    if (why && !pc->gone_reason[0]) snprintf(pc->gone_reason, sizeof pc->gone_reason, "%s", why);
    child_exited(pc, wait_status);
}

/* EOF: wait briefly for SIGCHLD so the error can say how the peer died. */
static void on_eof(struct peer_client *pc)
{
    channel_close(pc);
    if (pc->exited) {
        channel_lost(pc);
        return;
    }
    ev_timer_set(&pc->grace_timer, PEER_EXIT_GRACE_S, 0);
    ev_timer_start(pc->loop, &pc->grace_timer);
}

/* ---- input ---- */

static void handle_response(struct peer_client *pc, const struct proto_msg *m)
{
    struct pending *p = pending_take(pc, m->msgid);
    if (!p) {
        ctl_log("node '%s': response to unknown request %u ignored", pc->node, m->msgid);
        return;
    }
    if (m->error->type != MSGPACK_OBJECT_NIL) {
        /* a structured error (a map: an agent's build) also hands the map */
        char msg[1024];
        proto_error_text(m->error, msg, sizeof msg);
        p->cb(p->ctx, msg, m->error->type == MSGPACK_OBJECT_MAP ? m->error : NULL);
    } else {
        p->cb(p->ctx, NULL, m->result);
    }
    free(p);
}

/* [2, "fatal", {error = "..."}]: the peer says why it is about to exit
 * (e.g. its device cannot be opened); calls that fail because it is gone
 * give this reason rather than only its exit status. */
static bool handle_fatal(struct peer_client *pc, const struct proto_msg *m)
{
    if (m->method_len != 5 || memcmp(m->method, "fatal", 5) != 0) return false;
    struct proto_args a;
    const char *why = "no reason given";
    uint32_t len = (uint32_t)strlen(why);
    proto_args_init(&a, m->params);
    if (proto_arg_str(&a, "error", &why, &len) != 1) {
        why = "no reason given";
        len = (uint32_t)strlen(why);
    }
    snprintf(pc->gone_reason, sizeof pc->gone_reason, "%.*s", (int)len, why);
    return true;
}

static void handle_message(struct peer_client *pc, const struct proto_msg *m)
{
    if (m->kind == PROTO_RESPONSE)
        handle_response(pc, m);
    else if (m->kind == PROTO_NOTIFY && handle_fatal(pc, m))
        return;
    else if (m->kind == PROTO_NOTIFY && pc->hooks.on_notify)
        pc->hooks.on_notify(pc->hooks.ctx, m->method, m->method_len, m->params);
    else if (m->kind == PROTO_REQUEST)
        ctl_log("node '%s': unexpected request from peer ignored", pc->node);
}

/* Decodes every complete message in the buffer. Returns -1 when the stream
 * is broken (the channel has then been closed). */
static int drain_messages(struct peer_client *pc)
{
    struct proto_msg m;
    bool has_msgid;
    char err[160];
    for (;;) {
        enum proto_next r = proto_reader_next(&pc->reader, &m, &has_msgid, err, sizeof err);
        if (r == PROTO_NEXT_MORE) return 0;
        if (r == PROTO_NEXT_FATAL) {
            snprintf(pc->gone_reason, sizeof pc->gone_reason, "control channel: %s", err);
            channel_lost(pc);
            return -1;
        }
        if (r == PROTO_NEXT_INVALID)
            ctl_log("node '%s': %s", pc->node, err);
        else
            handle_message(pc, &m);
        if (pc->fd < 0) return -1; /* a callback closed the client */
    }
}

/* One read of a relayed channel, handed on as it is: n, 0 at EOF, -1. */
static ssize_t relay_read(struct peer_client *pc)
{
    char buf[PEER_RELAY_CHUNK];
    ssize_t n = read(pc->fd, buf, sizeof buf);
    if (n > 0) pc->relay_fn(pc->relay_ctx, buf, (size_t)n);
    return n;
}

static void on_readable(EV_P_ ev_io *w, int revents)
{
    struct peer_client *pc = container_of(w, struct peer_client, read_watcher);
    if (pc->relay_fn) {
        ssize_t n = relay_read(pc);
        if (pc->fd >= 0 && (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))) on_eof(pc);
        return;
    }
    size_t avail;
    char *buf = proto_reader_buffer(&pc->reader, 4096, &avail);
    if (!buf) {
        snprintf(pc->gone_reason, sizeof pc->gone_reason, "out of memory");
        channel_lost(pc);
        return;
    }
    ssize_t n = read(pc->fd, buf, avail);
    if (n > 0) {
        proto_reader_consumed(&pc->reader, (size_t)n);
        drain_messages(pc);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        on_eof(pc);
    }
}

/* ---- output ---- */

/* A write failed: the peer is gone or going. Its end may still hold what it
 * said before it went (a "fatal" notification naming the cause), so the
 * channel stays open for reading until EOF; output is dropped, and calls
 * made meanwhile stay pending until the EOF fails them with that cause. */
static void output_broken(struct peer_client *pc)
{
    /* Whatever the error was, the peer must see EOF, so that the EOF we
     * wait for comes even if its end is still open (ENOBUFS, ENOMEM). */
    if (!pc->output_broken) shutdown(pc->fd, SHUT_WR);
    pc->output_broken = true;
    ev_io_stop(pc->loop, &pc->write_watcher);
    msgpack_sbuffer_clear(&pc->out);
    pc->out_sent = 0;
}

static void flush_output(struct peer_client *pc)
{
    if (pc->output_broken) return output_broken(pc);
    while (pc->out_sent < pc->out.size) {
        ssize_t n =
            send(pc->fd, pc->out.data + pc->out_sent, pc->out.size - pc->out_sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                ev_io_start(pc->loop, &pc->write_watcher);
                return;
            }
            return output_broken(pc);
        }
        pc->out_sent += (size_t)n;
    }
    msgpack_sbuffer_clear(&pc->out);
    pc->out_sent = 0;
    ev_io_stop(pc->loop, &pc->write_watcher);
    if (pc->drained) pc->drained(pc->drained_ctx);
}

static void on_writable(EV_P_ ev_io *w, int revents)
{
    struct peer_client *pc = container_of(w, struct peer_client, write_watcher);
    flush_output(pc);
    /* a relay's backlog is out (or lost with the channel): its writer may go on */
    if (pc->relay_drained && !ev_is_active(&pc->write_watcher)) pc->relay_drained(pc->relay_ctx);
}

static int channel_check(struct peer_client *pc, char *err, size_t errlen)
{
    if (pc->fd >= 0) return 0;
    snprintf(err, errlen, "%s",
             pc->gone_reason[0] ? pc->gone_reason : "peer control channel is closed");
    return -1;
}

static void queue_params(struct peer_client *pc, const char *params, size_t params_len)
{
    if (params && params_len)
        msgpack_sbuffer_write(&pc->out, params, params_len);
    else
        msgpack_pack_map(&pc->packer, 0);
    /* With a backlog the write watcher is already running and keeps order. */
    if (!ev_is_active(&pc->write_watcher)) flush_output(pc);
}

int peer_client_call(struct peer_client *pc, const char *method, const char *params,
                     size_t params_len, peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    if (pc->relay_fn)
        return snprintf(err, errlen, "the control channel is relayed: no call of its own"), -1;
    if (channel_check(pc, err, errlen) < 0) return -1;
    struct pending *p = malloc(sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->cb = cb;
    p->ctx = ctx;
    p->msgid = pc->next_msgid++;
    pending_push(pc, p);
    msgpack_pack_array(&pc->packer, 4);
    msgpack_pack_uint8(&pc->packer, PROTO_REQUEST);
    msgpack_pack_uint32(&pc->packer, p->msgid);
    proto_pack_str(&pc->packer, method);
    queue_params(pc, params, params_len);
    return 0;
}

int peer_client_notify(struct peer_client *pc, const char *method, const char *params,
                       size_t params_len, char *err, size_t errlen)
{
    if (channel_check(pc, err, errlen) < 0) return -1;
    msgpack_pack_array(&pc->packer, 3);
    msgpack_pack_uint8(&pc->packer, PROTO_NOTIFY);
    proto_pack_str(&pc->packer, method);
    queue_params(pc, params, params_len);
    return 0;
}

/* ---- relay ---- */

int peer_client_relay(struct peer_client *pc, peer_bytes_fn on_bytes, peer_drained_fn on_drained,
                      void *ctx, char *err, size_t errlen)
{
    if (pc->n_pending)
        return snprintf(err, errlen, "%zu calls of its own are pending", pc->n_pending), -1;
    pc->relay_fn = on_bytes;
    pc->relay_drained = on_drained;
    pc->relay_ctx = ctx;
    /* Bytes read but not yet a whole message belong to the stream. */
    msgpack_unpacker *u = &pc->reader.unpacker;
    if (u->used > u->off) on_bytes(ctx, u->buffer + u->off, u->used - u->off);
    u->off = u->used;
    return 0;
}

int peer_client_relay_write(struct peer_client *pc, const void *bytes, size_t len)
{
    if (pc->fd < 0 || pc->output_broken) return -1;
    msgpack_sbuffer_write(&pc->out, bytes, len);
    if (!ev_is_active(&pc->write_watcher)) flush_output(pc);
    return 0;
}

void peer_client_relay_pause(struct peer_client *pc, bool paused)
{
    if (pc->fd < 0) return;
    if (paused)
        ev_io_stop(pc->loop, &pc->read_watcher);
    else
        ev_io_start(pc->loop, &pc->read_watcher);
}

size_t peer_client_queued(const struct peer_client *pc)
{
    return pc->out.size - pc->out_sent;
}

void peer_client_on_drained(struct peer_client *pc, peer_drained_fn fn, void *ctx)
{
    pc->drained = fn;
    pc->drained_ctx = ctx;
}

/* ---- lifecycle ---- */

static struct peer_client *client_alloc(struct ev_loop *loop, const struct peer_spawn *spec,
                                        const struct peer_client_hooks *hooks)
{
    struct peer_client *pc = calloc(1, sizeof *pc);
    if (!pc) return NULL;
    if (proto_reader_init(&pc->reader, PROTO_MAX_MESSAGE) < 0) {
        free(pc);
        return NULL;
    }
    pc->loop = loop;
    pc->fd = -1;
    pc->pid = -1;
    pc->next_msgid = 1;
    snprintf(pc->node, sizeof pc->node, "%s", spec->node);
    if (hooks) pc->hooks = *hooks;
    msgpack_sbuffer_init(&pc->out);
    msgpack_packer_init(&pc->packer, &pc->out, msgpack_sbuffer_write);
    ev_timer_init(&pc->grace_timer, on_grace_timeout, 0, 0);
    return pc;
}

struct peer_client *peer_client_open(struct ev_loop *loop, const struct peer_spawn *spec,
                                     const struct peer_client_hooks *hooks, int *child_end,
                                     char *err, size_t errlen)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return NULL;
    }
    struct peer_client *pc = client_alloc(loop, spec, hooks);
    if (!pc) {
        snprintf(err, errlen, "out of memory");
        close(sv[0]);
        close(sv[1]);
        return NULL;
    }
    pc->fd = sv[0];
    fcntl(pc->fd, F_SETFL, fcntl(pc->fd, F_GETFL) | O_NONBLOCK);
    ev_io_init(&pc->read_watcher, on_readable, pc->fd, EV_READ);
    ev_io_init(&pc->write_watcher, on_writable, pc->fd, EV_WRITE);
    ev_io_start(loop, &pc->read_watcher);
    *child_end = sv[1];
    return pc;
}

void peer_client_adopt(struct peer_client *pc, pid_t pid)
{
    pc->pid = pid;
    ev_child_init(&pc->child_watcher, on_child, pid, 0);
    ev_child_start(pc->loop, &pc->child_watcher);
}

struct peer_client *peer_client_spawn(struct ev_loop *loop, const struct peer_spawn *spec,
                                      const struct peer_client_hooks *hooks, char *err,
                                      size_t errlen)
{
    int child_end;
    struct peer_client *pc = peer_client_open(loop, spec, hooks, &child_end, err, errlen);
    if (!pc) return NULL;
    if (peer_client_exec(pc, spec, child_end, err, errlen) < 0) {
        peer_client_free(pc);
        return NULL;
    }
    return pc;
}

int peer_client_exec(struct peer_client *pc, const struct peer_spawn *spec, int child_end,
                     char *err, size_t errlen)
{
    pid_t pid = start_child(spec, child_end, err, errlen);
    close(child_end);
    if (pid < 0) return -1;
    peer_client_adopt(pc, pid);
    return 0;
}

void peer_client_close(struct peer_client *pc)
{
    if (pc->fd < 0) return;
    if (pc->gone_reason[0] == '\0')
        snprintf(pc->gone_reason, sizeof pc->gone_reason, "peer stopped");
    channel_lost(pc);
}

void peer_client_kill(struct peer_client *pc, int sig)
{
    if (pc->pid > 0 && !pc->exited) kill(pc->pid, sig);
}

bool peer_client_exited(const struct peer_client *pc)
{
    return pc->exited;
}

bool peer_client_closed(const struct peer_client *pc)
{
    return pc->fd < 0;
}

pid_t peer_client_pid(const struct peer_client *pc)
{
    return pc->pid;
}

const char *peer_client_node(const struct peer_client *pc)
{
    return pc->node;
}

size_t peer_client_pending(const struct peer_client *pc)
{
    return pc->n_pending;
}

void peer_client_release(struct peer_client *pc, struct reaper_group *dying)
{
    if (!pc) return;
    peer_client_close(pc);
    ev_timer_stop(pc->loop, &pc->grace_timer);
    if (pc->pid > 0 && !pc->exited) {
        ev_child_stop(pc->loop, &pc->child_watcher);
        kill(pc->pid, SIGKILL);
        /* Its exit frees its memory first (tens of ms for a large peer):
         * reaped from the loop, not waited for here. */
        reaper_take(pc->loop, pc->pid, dying);
    }
    proto_reader_destroy(&pc->reader);
    msgpack_sbuffer_destroy(&pc->out);
    free(pc);
}

void peer_client_free(struct peer_client *pc)
{
    peer_client_release(pc, NULL);
}

int peer_client_sibling_path(const char *name, const char *env_override, char *out, size_t cap)
{
    const char *env = env_override ? getenv(env_override) : NULL;
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/%s", self, name) >= cap) return -1;
    return 0;
}
