/* peer_template.c — starting peers through a peer template (see peer_template.h). */
#include "controller/peer_template.h"

#include "common/clock.h"
#include "controller/spawn.h"
#include "proto/template_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Room for many requests in flight, so the controller rarely waits. */
#define TEMPLATE_SOCKET_BUFFER (4 << 20)
#define TEMPLATE_TITLE_ROOM 512
/* How long a request may wait for room on a template that takes none. */
#define TEMPLATE_REQUEST_TIMEOUT_S 30.0

struct template_result {
    int32_t pid;
    int32_t error;
    char step[28];
    bool done;
};

struct peer_template {
    pid_t pid;
    int sock;
    char path[4096];
    struct template_result *results; /* one per request, by id */
    size_t n_requests, cap;
    size_t n_replies;
    bool broken; /* the template died or sent garbage: no more replies */
    bool reaped;
    char broken_why[160];
};

struct peer_template *peer_template_start(const char *peer_path, char *err, size_t errlen)
{
    struct peer_template *t = calloc(1, sizeof *t);
    int sv[2] = {-1, -1};
    if (!t) return snprintf(err, errlen, "peer template: out of memory"), NULL;
    t->sock = -1;
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
    /* Padding: room for each peer's command line, shown in ps (peer/template.h). */
    char padding[TEMPLATE_TITLE_ROOM];
    memset(padding, ' ', sizeof padding - 1);
    padding[sizeof padding - 1] = '\0';
    char *argv[] = {t->path, "--template", "--control-fd", PEER_CONTROL_FD_TEXT, padding, NULL};
    /* One BLAS thread in the template: a fork copies no thread pool. */
    const char *extra[] = {"OPENBLAS_NUM_THREADS=1", NULL};
    char **envp = spawn_env(extra);
    struct spawn_spec spec = {t->path, argv, envp, -1, {sv[1]}, {PEER_CONTROL_FD}, 1, 0};
    char why[400];
    t->pid = envp ? spawn_child(&spec, why, sizeof why) : -1;
    if (!envp) snprintf(why, sizeof why, "out of memory");
    spawn_env_free(envp);
    close(sv[1]);
    if (t->pid < 0) {
        snprintf(err, errlen, "peer template: %s", why);
        close(sv[0]);
        free(t);
        return NULL;
    }
    t->sock = sv[0];
    fcntl(t->sock, F_SETFL, fcntl(t->sock, F_GETFL) | O_NONBLOCK);
    return t;
}

static void template_break(struct peer_template *t, const char *why)
{
    if (!t->broken) snprintf(t->broken_why, sizeof t->broken_why, "%s", why);
    t->broken = true;
}

/* The socket says the template is gone: reap it (it may take a moment) to
 * say how it ended. */
static void template_gone(struct peer_template *t)
{
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 100 && (got = waitpid(t->pid, &status, WNOHANG)) == 0; i++)
        usleep(1000);
    char why[96] = "it exited";
    if (got == t->pid) {
        t->reaped = true;
        if (WIFEXITED(status))
            snprintf(why, sizeof why, "it exited with status %d", WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "it was killed by signal %d", WTERMSIG(status));
    }
    template_break(t, why);
}

static bool socket_gone(int error)
{
    return error == EPIPE || error == ECONNRESET;
}

/* Reads every reply that has arrived; with wait_s > 0 first waits up to
 * that long for one. */
static void read_replies(struct peer_template *t, double wait_s)
{
    if (wait_s > 0) {
        struct pollfd p = {t->sock, POLLIN, 0};
        poll(&p, 1, (int)(wait_s * 1000) + 1);
    }
    struct peer_template_reply r;
    int rc;
    while (!t->broken && (rc = peer_template_recv_reply(t->sock, &r)) != 0) {
        if (rc < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (rc < 0 && socket_gone(errno)) return template_gone(t);
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
    if (!t->broken && rc == 0) template_gone(t);
}

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

int peer_template_request(struct peer_template *t, const char *const *args, int control_fd,
                          int netns_fd, char *err, size_t errlen)
{
    if (grow_results(t) < 0) return snprintf(err, errlen, "peer template: out of memory"), -1;
    uint32_t id = (uint32_t)t->n_requests;
    double deadline = mono_s() + TEMPLATE_REQUEST_TIMEOUT_S;
    while (!t->broken) {
        if (peer_template_send_request(t->sock, id, args, control_fd, netns_fd) == 0) {
            t->results[id] = (struct template_result){0};
            t->n_requests++;
            return (int)id;
        }
        if (socket_gone(errno)) {
            template_gone(t);
            break;
        }
        /* ETOOMANYREFS: too many descriptors in flight for an unprivileged
         * sender; they drain as the template takes its requests. */
        if (errno != EAGAIN && errno != EINTR && errno != ETOOMANYREFS) {
            snprintf(err, errlen, "peer template: send: %s", strerror(errno));
            return -1;
        }
        if (mono_s() > deadline) {
            template_break(t, "it takes no requests");
            break;
        }
        /* Full: the template is busy or blocked on its replies; take them. */
        struct pollfd p = {t->sock, POLLIN | POLLOUT, 0};
        poll(&p, 1, 1000);
        read_replies(t, 0);
    }
    snprintf(err, errlen, "peer template: %s", t->broken_why);
    return -1;
}

pid_t peer_template_pid(struct peer_template *t, int id, double timeout_s, char *err, size_t errlen)
{
    double deadline = mono_s() + timeout_s;
    struct template_result *res = &t->results[id];
    while (!res->done && !t->broken && mono_s() < deadline)
        read_replies(t, deadline - mono_s());
    if (res->done && res->pid > 0) return res->pid;
    if (res->done)
        snprintf(err, errlen, "peer template: %s: %s", res->step, strerror(res->error));
    else if (t->broken)
        snprintf(err, errlen, "peer template: %s", t->broken_why);
    else {
        /* Later peers would wait as long again: one wait per start. */
        char why[80];
        snprintf(why, sizeof why, "no reply within %.1f s", timeout_s);
        template_break(t, why);
        snprintf(err, errlen, "peer template: %s", why);
    }
    return -1;
}

int peer_template_fd(const struct peer_template *t)
{
    return t->sock;
}

void peer_template_poll(struct peer_template *t)
{
    read_replies(t, 0);
}

bool peer_template_settled(const struct peer_template *t)
{
    return t->broken || t->n_replies == t->n_requests;
}

void peer_template_expire(struct peer_template *t, double timeout_s)
{
    char why[80];
    snprintf(why, sizeof why, "no reply within %.1f s", timeout_s);
    template_break(t, why);
}

void peer_template_stop(struct peer_template *t)
{
    if (!t) return;
    close(t->sock);
    /* On EOF it exits at once; a template stuck for a second is killed. */
    double deadline = mono_s() + 1.0;
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
