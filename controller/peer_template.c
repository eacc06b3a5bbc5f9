/* peer_template.c — starting peers through a peer template (see peer_template.h). */
#include "controller/peer_template.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/spawn.h"
#include "proto/template_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Room for many requests in flight, so requests are rarely queued. */
#define TEMPLATE_SOCKET_BUFFER (4 << 20)
#define TEMPLATE_TITLE_ROOM 512
/* How long a queued request may wait for room on a template that takes none. */
#define TEMPLATE_REQUEST_TIMEOUT_S 30.0
/* After EOF on its socket, how long the template's exit status may take to
 * come (it closes the socket as it exits), so the error can say how it ended. */
#define TEMPLATE_EXIT_GRACE_S 0.1
/* A template that ignores EOF this long is SIGKILLed. */
#define TEMPLATE_STOP_TIMEOUT_S 1.0

struct template_result {
    int32_t pid;
    int32_t error;
    char step[28];
    bool done;
};

/* A request that found no room, with copies of its descriptors. */
struct queued_request {
    struct queued_request *next;
    uint32_t id;
    int control_fd, netns_fd;
    size_t args_len;
    char args[]; /* the arguments, each NUL-terminated */
};

struct peer_template {
    struct ev_loop *loop;
    pid_t pid;
    int sock; /* -1 once stopped */
    char path[4096];
    struct template_result *results; /* one per request, by id */
    size_t n_requests, cap;
    size_t n_replies;
    struct queued_request *queue, **queue_tail;
    bool fds_refused; /* ETOOMANYREFS: the queue goes on as replies come, not on room */
    bool broken;      /* the template died, sent garbage or expired: no more replies */
    bool eof;         /* its socket is gone */
    bool reaped;      /* its exit status is known */
    bool stopping;    /* peer_template_stop: freed once reaped */
    bool notified;
    int status; /* as from waitpid, once reaped */
    char broken_why[160];
    ev_io io;
    ev_child child;
    ev_timer room_deadline, exit_grace, kill_timer;
    peer_template_fn on_settled, on_gone;
    void *settled_ctx, *gone_ctx;
};

static void on_io(EV_P_ ev_io *w, int revents);
static void on_child(EV_P_ ev_child *w, int revents);
static void on_room_deadline(EV_P_ ev_timer *w, int revents);
static void on_exit_grace(EV_P_ ev_timer *w, int revents);
static void on_kill_timer(EV_P_ ev_timer *w, int revents);

/* ---- start ---- */

static pid_t spawn_template(struct peer_template *t, int child_end, char *why, size_t whylen)
{
    /* Padding: room for each peer's command line, shown in ps (peer/template.h). */
    char padding[TEMPLATE_TITLE_ROOM];
    memset(padding, ' ', sizeof padding - 1);
    padding[sizeof padding - 1] = '\0';
    char *argv[] = {t->path, "--template", "--control-fd", PEER_CONTROL_FD_TEXT, padding, NULL};
    /* One BLAS thread in the template: a fork copies no thread pool. */
    const char *extra[] = {"OPENBLAS_NUM_THREADS=1", NULL};
    char **envp = spawn_env(extra);
    struct spawn_spec spec = {t->path, argv, envp, -1, {child_end}, {PEER_CONTROL_FD}, 1, 0};
    pid_t pid = envp ? spawn_child(&spec, why, whylen) : -1;
    if (!envp) snprintf(why, whylen, "out of memory");
    spawn_env_free(envp);
    return pid;
}

struct peer_template *peer_template_start(struct ev_loop *loop, const char *peer_path, char *err,
                                          size_t errlen)
{
    struct peer_template *t = calloc(1, sizeof *t);
    int sv[2] = {-1, -1};
    if (!t) return snprintf(err, errlen, "peer template: out of memory"), NULL;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(err, errlen, "peer template: socketpair: %s", strerror(errno));
        free(t);
        return NULL;
    }
    int size = TEMPLATE_SOCKET_BUFFER;
    for (int i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size);
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    }
    snprintf(t->path, sizeof t->path, "%s", peer_path);
    char why[400];
    t->pid = spawn_template(t, sv[1], why, sizeof why);
    close(sv[1]);
    if (t->pid < 0) {
        snprintf(err, errlen, "peer template: %s", why);
        close(sv[0]);
        free(t);
        return NULL;
    }
    t->loop = loop;
    t->sock = sv[0];
    t->queue_tail = &t->queue;
    fcntl(t->sock, F_SETFL, fcntl(t->sock, F_GETFL) | O_NONBLOCK);
    ev_io_init(&t->io, on_io, t->sock, EV_READ);
    ev_io_start(loop, &t->io);
    ev_child_init(&t->child, on_child, t->pid, 0);
    ev_child_start(loop, &t->child);
    ev_init(&t->room_deadline, on_room_deadline);
    t->room_deadline.repeat = TEMPLATE_REQUEST_TIMEOUT_S;
    ev_timer_init(&t->exit_grace, on_exit_grace, TEMPLATE_EXIT_GRACE_S, 0);
    ev_init(&t->kill_timer, on_kill_timer);
    return t;
}

/* ---- state ---- */

/* Reads while replies can come; writes while requests wait for room. */
static void io_update(struct peer_template *t)
{
    int want = 0;
    if (t->sock >= 0 && !t->broken && !t->eof) {
        want = EV_READ;
        if (t->queue && !t->fds_refused) want |= EV_WRITE;
    }
    if (ev_is_active(&t->io) && t->io.events == want) return;
    ev_io_stop(t->loop, &t->io);
    if (!want) return;
    ev_io_set(&t->io, t->sock, want);
    ev_io_start(t->loop, &t->io);
}

static void queue_clear(struct peer_template *t)
{
    while (t->queue) {
        struct queued_request *q = t->queue;
        t->queue = q->next;
        close(q->control_fd);
        if (q->netns_fd >= 0) close(q->netns_fd);
        free(q);
    }
    t->queue_tail = &t->queue;
    ev_timer_stop(t->loop, &t->room_deadline);
}

static void template_break(struct peer_template *t, const char *why)
{
    if (!t->broken) snprintf(t->broken_why, sizeof t->broken_why, "%s", why);
    t->broken = true;
    queue_clear(t);
    io_update(t);
}

/* The template has exited: say how. */
static void break_with_status(struct peer_template *t)
{
    char why[96];
    if (WIFSIGNALED(t->status))
        snprintf(why, sizeof why, "it was killed by signal %d", WTERMSIG(t->status));
    else
        snprintf(why, sizeof why, "it exited with status %d", WEXITSTATUS(t->status));
    template_break(t, why);
}

bool peer_template_settled(const struct peer_template *t)
{
    return t->broken || t->n_replies == t->n_requests;
}

/* Last thing a callback does: the owner may free everything in its hook. */
static void notify_if_settled(struct peer_template *t)
{
    if (t->notified || t->stopping || !t->on_settled || !peer_template_settled(t)) return;
    t->notified = true;
    t->on_settled(t->settled_ctx);
}

/* Its socket is gone: the exit status follows (on_child), or the grace ends. */
static void socket_eof(struct peer_template *t)
{
    t->eof = true;
    io_update(t);
    if (t->reaped) return break_with_status(t);
    if (!t->broken) ev_timer_start(t->loop, &t->exit_grace);
}

static bool socket_gone(int error)
{
    return error == EPIPE || error == ECONNRESET;
}

/* ---- replies ---- */

static void flush_queue(struct peer_template *t);

/* Reads every reply that has arrived. */
static void read_replies(struct peer_template *t)
{
    struct peer_template_reply r;
    int rc = -1;
    size_t before = t->n_replies;
    while (!t->broken && !t->eof && (rc = peer_template_recv_reply(t->sock, &r)) != 0) {
        if (rc < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (rc < 0 && socket_gone(errno)) return socket_eof(t);
        if (rc < 0 || r.id >= t->n_requests || t->results[r.id].done) {
            template_break(t, rc < 0 && errno == EBADMSG ? "it sent something that is not a reply"
                              : rc < 0                   ? strerror(errno)
                                                         : "it sent a reply to no request");
            return;
        }
        struct template_result *res = &t->results[r.id];
        *res = (struct template_result){r.pid, r.error, "", true};
        memcpy(res->step, r.step, sizeof res->step);
        t->n_replies++;
    }
    if (!t->broken && !t->eof && rc == 0) return socket_eof(t);
    /* The template took requests, and with them their descriptors. */
    if (t->n_replies > before && t->fds_refused) {
        t->fds_refused = false;
        flush_queue(t);
    }
}

/* ---- requests ---- */

static int grow_results(struct peer_template *t)
{
    if (t->n_requests < t->cap) return 0;
    size_t cap = t->cap ? 2 * t->cap : 64;
    struct template_result *r = realloc(t->results, cap * sizeof *r);
    if (!r) return -1;
    t->results = r;
    t->cap = cap;
    return 0;
}

/* Sends q; 0, or -1 with errno. */
static int send_queued(struct peer_template *t, const struct queued_request *q)
{
    const char *args[PEER_TEMPLATE_MAX_ARGS + 1];
    size_t n = 0;
    for (size_t at = 0; at < q->args_len && n < PEER_TEMPLATE_MAX_ARGS;
         at += strlen(q->args + at) + 1)
        args[n++] = q->args + at;
    args[n] = NULL;
    return peer_template_send_request(t->sock, q->id, args, q->control_fd, q->netns_fd);
}

/* Sends what waits, in order, while there is room. */
static void flush_queue(struct peer_template *t)
{
    while (t->queue && !t->broken && !t->eof) {
        struct queued_request *q = t->queue;
        if (send_queued(t, q) < 0) {
            if (socket_gone(errno)) return socket_eof(t);
            /* ETOOMANYREFS: too many descriptors in flight for an
             * unprivileged sender; they drain as the template takes its
             * requests, which its replies tell. */
            if (errno == ETOOMANYREFS) t->fds_refused = true;
            if (errno != EAGAIN && errno != EINTR && errno != ETOOMANYREFS)
                template_break(t, strerror(errno));
            break;
        }
        t->queue = q->next;
        if (!t->queue) t->queue_tail = &t->queue;
        close(q->control_fd);
        if (q->netns_fd >= 0) close(q->netns_fd);
        free(q);
        ev_timer_again(t->loop, &t->room_deadline); /* progress: a fresh allowance */
    }
    if (!t->queue) ev_timer_stop(t->loop, &t->room_deadline);
    io_update(t);
}

static int queue_request(struct peer_template *t, uint32_t id, const char *const *args,
                         int control_fd, int netns_fd)
{
    size_t len = 0, n = 0;
    for (; args[n]; n++)
        len += strlen(args[n]) + 1;
    if (n > PEER_TEMPLATE_MAX_ARGS || len + sizeof id > PEER_TEMPLATE_MAX_REQUEST)
        return errno = E2BIG, -1;
    struct queued_request *q = malloc(sizeof *q + len);
    if (!q) return -1;
    *q = (struct queued_request){NULL, id, -1, -1, len};
    for (size_t i = 0, at = 0; i < n; at += strlen(args[i]) + 1, i++)
        memcpy(q->args + at, args[i], strlen(args[i]) + 1);
    q->control_fd = fcntl(control_fd, F_DUPFD_CLOEXEC, 0);
    q->netns_fd = netns_fd >= 0 ? fcntl(netns_fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (q->control_fd < 0 || (netns_fd >= 0 && q->netns_fd < 0)) {
        int error = errno;
        if (q->control_fd >= 0) close(q->control_fd);
        free(q);
        return errno = error, -1;
    }
    *t->queue_tail = q;
    t->queue_tail = &q->next;
    if (!ev_is_active(&t->room_deadline)) ev_timer_again(t->loop, &t->room_deadline);
    io_update(t);
    return 0;
}

int peer_template_request(struct peer_template *t, const char *const *args, int control_fd,
                          int netns_fd, char *err, size_t errlen)
{
    if (t->broken) return snprintf(err, errlen, "peer template: %s", t->broken_why), -1;
    if (grow_results(t) < 0) return snprintf(err, errlen, "peer template: out of memory"), -1;
    uint32_t id = (uint32_t)t->n_requests;
    int rc = 0;
    /* Behind a queue the request waits its turn; on a socket that is gone it
     * counts, unanswered, until the template's end is known. */
    if (t->queue) {
        rc = queue_request(t, id, args, control_fd, netns_fd);
    } else if (!t->eof && peer_template_send_request(t->sock, id, args, control_fd, netns_fd) < 0) {
        if (errno == ETOOMANYREFS) t->fds_refused = true; /* see flush_queue */
        if (socket_gone(errno))
            socket_eof(t);
        else if (errno == EAGAIN || errno == EINTR || errno == ETOOMANYREFS)
            rc = queue_request(t, id, args, control_fd, netns_fd);
        else
            rc = -1;
    }
    if (rc < 0) return snprintf(err, errlen, "peer template: send: %s", strerror(errno)), -1;
    t->results[id] = (struct template_result){0};
    t->n_requests++;
    return (int)id;
}

/* ---- the loop's callbacks ---- */

static void on_io(EV_P_ ev_io *w, int revents)
{
    struct peer_template *t = container_of(w, struct peer_template, io);
    if (revents & EV_READ) read_replies(t);
    if (revents & EV_WRITE) flush_queue(t);
    notify_if_settled(t);
}

static void stop_finish(struct peer_template *t)
{
    peer_template_fn gone = t->on_gone;
    void *ctx = t->gone_ctx;
    ev_child_stop(t->loop, &t->child);
    ev_timer_stop(t->loop, &t->kill_timer);
    ev_timer_stop(t->loop, &t->exit_grace);
    free(t->results);
    free(t);
    if (gone) gone(ctx);
}

static void on_child(EV_P_ ev_child *w, int revents)
{
    struct peer_template *t = container_of(w, struct peer_template, child);
    ev_child_stop(t->loop, w);
    t->reaped = true;
    t->status = w->rstatus;
    ev_timer_stop(t->loop, &t->exit_grace);
    if (t->stopping) return stop_finish(t);
    if (!t->broken && !t->eof) read_replies(t); /* what it wrote before it died */
    if (!t->broken) break_with_status(t);
    notify_if_settled(t);
}

static void on_exit_grace(EV_P_ ev_timer *w, int revents)
{
    struct peer_template *t = container_of(w, struct peer_template, exit_grace);
    template_break(t, "it closed its socket");
    notify_if_settled(t);
}

static void on_room_deadline(EV_P_ ev_timer *w, int revents)
{
    struct peer_template *t = container_of(w, struct peer_template, room_deadline);
    template_break(t, "it takes no requests");
    notify_if_settled(t);
}

void peer_template_on_settled(struct peer_template *t, peer_template_fn fn, void *ctx)
{
    t->on_settled = fn;
    t->settled_ctx = ctx;
}

/* ---- pids ---- */

static void on_wait_over(EV_P_ ev_timer *w, int revents)
{
    (void)w, (void)revents; /* the timer stops: the wait below ends */
}

pid_t peer_template_pid(struct peer_template *t, int id, double timeout_s, char *err, size_t errlen)
{
    if (timeout_s > 0 && !t->results[id].done && !t->broken) {
        /* The loop's clock is as old as its last iteration, which a caller
         * that blocked since (a slow build of the peers, say) makes stale:
         * a timer started from it would expire at once. */
        ev_now_update(t->loop);
        ev_timer over;
        ev_timer_init(&over, on_wait_over, timeout_s, 0);
        ev_timer_start(t->loop, &over);
        while (!t->results[id].done && !t->broken && ev_is_active(&over))
            ev_run(t->loop, EVRUN_ONCE);
        ev_timer_stop(t->loop, &over);
    }
    const struct template_result *res = &t->results[id];
    if (res->done && res->pid > 0) return res->pid;
    if (res->done)
        snprintf(err, errlen, "peer template: %s: %s", res->step, strerror(res->error));
    else if (t->broken)
        snprintf(err, errlen, "peer template: %s", t->broken_why);
    else if (timeout_s > 0) {
        /* Later peers would wait as long again: one wait per start. */
        peer_template_expire(t, timeout_s);
        snprintf(err, errlen, "peer template: %s", t->broken_why);
    } else
        snprintf(err, errlen, "peer template: no reply yet");
    return -1;
}

void peer_template_expire(struct peer_template *t, double timeout_s)
{
    char why[80];
    snprintf(why, sizeof why, "no reply within %.1f s", timeout_s);
    template_break(t, why);
}

/* ---- stop ---- */

static void close_socket(struct peer_template *t)
{
    ev_io_stop(t->loop, &t->io);
    queue_clear(t);
    ev_timer_stop(t->loop, &t->exit_grace);
    if (t->sock >= 0) close(t->sock);
    t->sock = -1;
}

static void on_kill_timer(EV_P_ ev_timer *w, int revents)
{
    struct peer_template *t = container_of(w, struct peer_template, kill_timer);
    if (t->reaped) return stop_finish(t);
    kill(t->pid, SIGKILL); /* on_child follows */
}

void peer_template_stop(struct peer_template *t, peer_template_fn gone, void *ctx)
{
    if (!t) return;
    t->stopping = true;
    t->on_settled = NULL;
    t->on_gone = gone;
    t->gone_ctx = ctx;
    close_socket(t); /* on EOF it exits at once */
    /* Already reaped: freed at the loop's next turn, not inside this call. */
    ev_timer_set(&t->kill_timer, t->reaped ? 0 : TEMPLATE_STOP_TIMEOUT_S, 0);
    ev_timer_start(t->loop, &t->kill_timer);
}

void peer_template_stop_now(struct peer_template *t)
{
    if (!t) return;
    close_socket(t);
    ev_child_stop(t->loop, &t->child);
    ev_timer_stop(t->loop, &t->kill_timer);
    ev_timer_stop(t->loop, &t->room_deadline);
    /* On EOF it exits at once; a template stuck for a second is killed. */
    double deadline = mono_s() + TEMPLATE_STOP_TIMEOUT_S;
    while (!t->reaped && waitpid(t->pid, NULL, WNOHANG) == 0) {
        if (mono_s() > deadline) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, NULL, 0);
            break;
        }
        usleep(500);
    }
    free(t->results);
    free(t);
}
