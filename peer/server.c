/* server.c — the peer server's event-loop side (see server.h). */
#include "peer/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/container.h"
#include "common/log_line.h"
#include "kernels/device.h"
#include "peer/commands.h"
#include "peer/dataplane.h"
#include "peer/devmirror.h"
#include "peer/commands_ml.h"
#include "proto/msgmap.h"
#include "peer/store.h"
#include "peer/worker.h"

/* Bytes to have room for on every read(): requests are small, but a burst of
 * them should take one system call. */
#define SERVER_READ_CHUNK (64 * 1024)
/* Pending output above which the server stops reading requests until the
 * controller has taken its responses (backpressure). */
#define SERVER_OUTPUT_HIGH_WATER (8u << 20)

/* ---- command modules ---- */

void *peer_server_state(const struct peer_server *s, const struct peer_module *m)
{
    for (size_t i = 0; i < s->n_modules; i++)
        if (s->modules[i].module == m) return s->modules[i].state;
    return NULL;
}

bool peer_server_keep(struct peer_server *s, const struct peer_module *m, void *state)
{
    if (s->n_modules == PEER_MODULES_MAX) {
        peer_server_log(s, "%s: no room for its state (PEER_MODULES_MAX)", m->name);
        return false;
    }
    s->modules[s->n_modules++] = (struct peer_module_slot){m, state};
    return true;
}

static void server_modules_arrival(struct peer_server *s)
{
    for (size_t i = 0; i < s->n_modules; i++) {
        const struct peer_module *m = s->modules[i].module;
        if (m->on_arrival) m->on_arrival(s, s->modules[i].state);
    }
}

static void server_modules_shutdown(struct peer_server *s)
{
    for (size_t i = 0; i < s->n_modules; i++) {
        const struct peer_module *m = s->modules[i].module;
        if (m->on_shutdown) m->on_shutdown(s, s->modules[i].state);
    }
}

static void server_modules_destroy(struct peer_server *s)
{
    for (size_t i = 0; i < s->n_modules; i++) {
        const struct peer_module *m = s->modules[i].module;
        if (m->destroy) m->destroy(s->modules[i].state);
    }
    s->n_modules = 0;
}

/* ---- logging and stopping ---- */

void peer_server_log(const struct peer_server *s, const char *fmt, ...)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "hiernet-peer[%s]", s->cfg.node);
    va_list ap;
    va_start(ap, fmt);
    log_line_vprintf(prefix, fmt, ap);
    va_end(ap);
}

static void server_stop(struct peer_server *s, int status)
{
    s->exit_status = status;
    ev_break(s->loop, EVBREAK_ALL);
}

/* ---- writing ---- */

/* Moves unsent bytes to the front once the sent part dominates, so a peer
 * that is always a little behind does not grow its buffer forever. */
static void server_compact_output(struct peer_server *s)
{
    struct growbuf *out = &s->out;
    if (s->out_sent < SERVER_READ_CHUNK || s->out_sent < out->len / 2) return;
    memmove(out->data, out->data + s->out_sent, out->len - s->out_sent);
    out->len -= s->out_sent;
    s->out_sent = 0;
}

/* Writes as much pending output as the socket takes; the write watcher
 * finishes the rest, and reading pauses while the backlog is large. */
static void server_flush(struct peer_server *s)
{
    struct growbuf *out = &s->out;
    while (s->out_sent < out->len) {
        ssize_t n = write(s->cfg.control_fd, out->data + s->out_sent, out->len - s->out_sent);
        if (n >= 0) {
            s->out_sent += (size_t)n;
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        /* EPIPE / ECONNRESET: the controller is gone, which ends a peer like EOF. */
        bool gone = errno == EPIPE || errno == ECONNRESET;
        peer_server_log(s, "control channel write: %s", strerror(errno));
        server_stop(s, gone ? 0 : 1);
        return;
    }
    if (s->out_sent == out->len) {
        out->len = s->out_sent = 0;
        ev_io_stop(s->loop, &s->write_watcher);
        if (!ev_is_active(&s->read_watcher)) ev_io_start(s->loop, &s->read_watcher);
        return;
    }
    server_compact_output(s);
    ev_io_start(s->loop, &s->write_watcher);
    if (out->len - s->out_sent > SERVER_OUTPUT_HIGH_WATER) ev_io_stop(s->loop, &s->read_watcher);
}

static void on_writable(EV_P_ ev_io *w, int revents)
{
    server_flush(container_of(w, struct peer_server, write_watcher));
}

/* Runs before the loop blocks: one write() carries every response produced
 * in this iteration, whether by requests or by finished jobs. */
static void on_prepare(EV_P_ ev_prepare *w, int revents)
{
    struct peer_server *s = container_of(w, struct peer_server, flush_watcher);
    if (s->out.failed) {
        peer_server_log(s, "out of memory buffering responses");
        server_stop(s, 1);
        return;
    }
    if (s->out_sent < s->out.len && !ev_is_active(&s->write_watcher)) server_flush(s);
}

/* ---- reading ---- */

static void server_reject(struct peer_server *s, bool has_msgid, uint32_t msgid, const char *err)
{
    if (has_msgid)
        proto_pack_error(&s->pk, msgid, err);
    else
        peer_server_log(s, "dropped a message without msgid: %s", err);
}

static void server_handle(struct peer_server *s, const struct proto_msg *msg)
{
    if (msg->kind == PROTO_REQUEST) {
        commands_dispatch(s, msg);
        return;
    }
    /* Nothing sends the peer responses or notifications; answering them could
     * loop, so they are only logged. */
    const char *what = msg->kind == PROTO_RESPONSE ? "response" : "notification";
    peer_server_log(s, "dropped an unexpected %s", what);
}

/* Decodes and handles every complete message buffered so far. */
static void server_drain(struct peer_server *s)
{
    for (;;) {
        struct proto_msg msg;
        bool has_msgid;
        char err[256];
        switch (proto_reader_next(&s->reader, &msg, &has_msgid, err, sizeof err)) {
        case PROTO_NEXT_MORE:
            return;
        case PROTO_NEXT_MESSAGE:
            server_handle(s, &msg);
            break;
        case PROTO_NEXT_INVALID:
            server_reject(s, has_msgid, msg.msgid, err);
            break;
        case PROTO_NEXT_FATAL:
            peer_server_log(s, "control channel unusable: %s", err);
            server_stop(s, 1);
            return;
        }
    }
}

static void on_readable(EV_P_ ev_io *w, int revents)
{
    struct peer_server *s = container_of(w, struct peer_server, read_watcher);
    size_t avail;
    char *buf = proto_reader_buffer(&s->reader, SERVER_READ_CHUNK, &avail);
    if (!buf) {
        peer_server_log(s, "out of memory reading the control channel");
        server_stop(s, 1);
        return;
    }
    ssize_t n = read(s->cfg.control_fd, buf, avail);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n < 0 && errno != ECONNRESET) {
        peer_server_log(s, "control channel read: %s", strerror(errno));
        server_stop(s, 1);
        return;
    }
    if (n <= 0) { /* EOF or reset: the controller is done with this peer */
        server_stop(s, 0);
        return;
    }
    proto_reader_consumed(&s->reader, (size_t)n);
    server_drain(s);
}

/* ---- life cycle ---- */

static bool server_open_fd(struct peer_server *s)
{
    int fd = s->cfg.control_fd;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        peer_server_log(s, "control fd %d: %s", fd, strerror(errno));
        return false;
    }
    return true;
}

/* A tensor arrived: [2, "recv", {tensor, from, bytes, transfer, ms, version,
 * add[, range]}]; a pending wait looks at its arrival. */
static void on_data_recv(void *ctx, const struct dataplane_recv_info *info)
{
    struct peer_server *s = ctx;
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "tensor", info->tensor);
    msgmap_str(&m, "from", info->from);
    msgmap_i64(&m, "bytes", (int64_t)info->bytes);
    msgmap_i64(&m, "transfer", (int64_t)info->id);
    msgmap_f64(&m, "ms", peer_emulated_ms(s, info->ms));
    msgmap_i64(&m, "version", (int64_t)info->version);
    msgmap_bool(&m, "add", info->add);
    if (info->has_range) {
        msgmap_key(&m, "range");
        msgpack_pack_array(&m.pk, 2);
        msgpack_pack_uint64(&m.pk, info->offset);
        msgpack_pack_uint64(&m.pk, info->count);
    }
    /* Out of memory: the output fails as a whole, as when its own buffer
     * cannot grow, rather than lose one notice silently. */
    if (!msgmap_notify(&m, &s->pk, "recv")) s->out.failed = true;
    /* Written now, before the data plane acks: the controller then normally
     * hears of the tensor before the sender's send{} completes. */
    if (!s->out.failed && !ev_is_active(&s->write_watcher)) server_flush(s);
    server_modules_arrival(s);
}

static void on_data_log(void *ctx, const char *line)
{
    peer_server_log(ctx, "%s", line);
}

static bool server_init(struct peer_server *s)
{
    if (!server_open_fd(s)) return false;
    s->store = store_create();
    s->dev = s->store ? devmirror_create(s->cfg.kern) : NULL;
    s->ml = s->dev ? ml_state_create() : NULL;
    if (!s->ml) return false;
    struct dataplane_config dc = {s->cfg.node, s->cfg.addr, s->cfg.data_port, s->store,
                                  s->cfg.data_auth};
    struct dataplane_hooks hooks = {on_data_recv, on_data_log, s};
    s->dataplane = dataplane_create(s->loop, &dc, &hooks);
    return s->dataplane != NULL;
}

struct peer_server *peer_server_create(struct ev_loop *loop, const struct peer_config *cfg)
{
    struct peer_server *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "hiernet-peer[%s]: out of memory\n", cfg->node);
        return NULL;
    }
    s->loop = loop;
    s->cfg = *cfg;
    msgpack_packer_init(&s->pk, &s->out, growbuf_write);
    ev_io_init(&s->read_watcher, on_readable, cfg->control_fd, EV_READ);
    ev_io_init(&s->write_watcher, on_writable, cfg->control_fd, EV_WRITE);
    ev_prepare_init(&s->flush_watcher, on_prepare);
    if (proto_reader_init(&s->reader, 0) != 0) {
        peer_server_log(s, "out of memory");
        free(s);
        return NULL;
    }
    if (!server_init(s)) {
        peer_server_destroy(s);
        return NULL;
    }
    ev_io_start(loop, &s->read_watcher);
    ev_prepare_start(loop, &s->flush_watcher);
    return s;
}

bool peer_server_start(struct peer_server *s)
{
    struct worker_timing timing = {s->cfg.speed, s->cfg.dilation,
                                   kern_ctx_device(s->cfg.kern) == KERN_DEVICE_CPU};
    s->worker = worker_create(s->loop, &timing);
    if (!s->worker) peer_server_log(s, "cannot start the worker: %s", strerror(errno));
    return s->worker != NULL;
}

int peer_server_run(struct peer_server *s)
{
    ev_run(s->loop, 0);
    return s->exit_status;
}

bool peer_server_destroy(struct peer_server *s)
{
    if (!s) return true;
    ev_io_stop(s->loop, &s->read_watcher);
    ev_io_stop(s->loop, &s->write_watcher);
    ev_prepare_stop(s->loop, &s->flush_watcher);
    /* Cancelled jobs release their tensors, so the workers go before the
     * store; what a command module holds (a pending wait) is cancelled by
     * its shutdown hook, jobs a transfer kept (send) by the data plane. */
    if (!worker_destroy(s->worker)) return false;
    server_modules_shutdown(s);
    if (!worker_destroy(s->background)) return false;
    dataplane_destroy(s->dataplane);
    server_modules_destroy(s);
    ml_state_destroy(s->ml); /* its models and optimizers free device memory */
    devmirror_destroy(s->dev);
    store_destroy(s->store);
    proto_reader_destroy(&s->reader);
    growbuf_free(&s->out);
    free(s);
    return true;
}
