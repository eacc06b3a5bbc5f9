/* agent_client.c — the controller's end of one machine's agent (see agent_client.h). */
#include "controller/agent_client.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/agent_relay.h"
#include "controller/linkd_client.h"
#include "controller/log.h"
#include "controller/peer_client.h"
#include "controller/spawn.h"
#include "proto/names.h"
#include "topo/part_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define AGENT_SSH_ARGV_MAX 32 /* words of the ssh or srun line */
#define AGENT_STDERR_LINE 512

struct agent_client {
    struct ev_loop *loop;
    struct topo_machine machine;
    struct agent_client_options opts;
    struct agent_client_hooks hooks;
    struct peer_client *pc;
    int err_fd; /* the child's stderr, -1 once closed */
    ev_io err_watcher;
    ev_timer start_timer;             /* hello deadline, then the ping interval */
    char err_line[AGENT_STDERR_LINE]; /* a partial stderr line */
    size_t err_len;
    char last_err[AGENT_STDERR_LINE]; /* the last whole line: names why ssh failed */
    struct agent_hello_reply hello;
    struct clock_estimate clock;
    int pings_answered;
    int64_t ping_sent_ns; /* of the outstanding ping, 0 when none */
    /* ssh started, hello answered, ready: where a spread start's first
     * seconds go (agent_client_start_times) */
    int64_t started_ns, hello_ns, ready_ns;
    bool ready, failed, tearing_down, down;
    struct agent_relay *relay; /* the remote nodes' control channels */
    agent_built_fn built;      /* the build in flight, NULL when none */
    void *built_ctx;
    agent_stats_fn on_stats;     /* the part's links.csv rows, or NULL: ignored */
    uint64_t stall_threshold_ns; /* sent in build with the stats wish */
    void *stats_ctx;
    agent_program_fn on_program; /* its programs' ends, or NULL: ignored */
    void *program_ctx;
    agent_lost_fn on_lost; /* told once when the agent fails, or NULL */
    void *lost_ctx;
};

void agent_client_options_default(struct agent_client_options *o)
{
    *o = (struct agent_client_options){.version = "",
                                       .run_id = "",
                                       .hello_timeout_s = 30,
                                       .hello_pings = CLOCK_ESTIMATE_SAMPLES,
                                       .ping_interval_s = 1,
                                       .ping_timeout_s = 10};
}

/* ---- the command ---- */

struct argv_store {
    char *at, *end;
};

static char *store_printf(struct argv_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *store_printf(struct argv_store *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->at, (size_t)(s->end - s->at), fmt, ap);
    va_end(ap);
    if (n < 0 || n >= s->end - s->at) return NULL;
    char *out = s->at;
    s->at += n + 1;
    return out;
}

/* word in single quotes for the remote shell, each ' as '\''. */
static bool shell_quote(struct argv_store *s, const char *word)
{
    if (s->end - s->at < 3) return false;
    *s->at++ = '\'';
    for (const char *c = word; *c; c++) {
        const char *piece = *c == '\'' ? "'\\''" : NULL;
        size_t n = piece ? 4 : 1;
        if ((size_t)(s->end - s->at) < n + 3) return false;
        memcpy(s->at, piece ? piece : c, n);
        s->at += n;
    }
    *s->at++ = '\'';
    *s->at++ = ' ';
    return true;
}

/* "exec ['env' 'HIERNET_LINKD_PRIORITY=N'] 'BIN' 'w1' 'w2'",
 * NUL-terminated in the store. The linkd priority of this run reaches
 * every machine's linkd: ssh starts the remote command with the login's
 * environment, not ours (srun passes ours on by itself). NULL when it
 * does not fit or the priority is bad (start_child says which first). */
static char *remote_command(struct argv_store *s, const char *bin, const char *const *words)
{
    char *start = s->at, prio[4], why[160], pair[40];
    if (linkd_client_priority(prio, why, sizeof why) < 0 || !store_printf(s, "exec")) return NULL;
    s->at[-1] = ' '; /* the NUL becomes the separator */
    snprintf(pair, sizeof pair, "HIERNET_LINKD_PRIORITY=%s", prio);
    if (prio[0] && (!shell_quote(s, "env") || !shell_quote(s, pair))) return NULL;
    if (!shell_quote(s, bin)) return NULL;
    for (const char *const *w = words; *w; w++)
        if (!shell_quote(s, *w)) return NULL;
    s->at[-1] = '\0';
    return start;
}

static int remote_bin(char *out, size_t cap)
{
    const char *env = getenv(AGENT_ENV_REMOTE_BIN);
    if (env && *env) return snprintf(out, cap, "%s", env) < (int)cap ? 0 : -1;
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0) return -1;
    out[n] = '\0';
    return 0;
}

struct argv_list {
    char **v;
    size_t n, cap;
};

static bool push(struct argv_list *l, char *arg)
{
    if (!arg || l->n + 1 >= l->cap) return false;
    l->v[l->n++] = arg;
    l->v[l->n] = NULL;
    return true;
}

static bool ssh_options(struct argv_list *l, struct argv_store *s, const struct topo_machine *m,
                        const struct agent_client_options *o)
{
    const char *config = getenv(AGENT_ENV_SSH_CONFIG);
    /* ConnectTimeout: an unreachable machine fails in seconds, not after
     * TCP's minutes (doctor and clean --hosts go machine by machine). */
    bool ok = push(l, "ssh") && push(l, "-T") && push(l, "-o") && push(l, "BatchMode=yes") &&
              push(l, "-o") && push(l, "ConnectTimeout=" AGENT_SSH_CONNECT_TIMEOUT);
    if (config && *config) ok = ok && push(l, "-F") && push(l, (char *)config);
    /* ControlPersist=no: the agent's ssh is the master and ends with it; a
     * persisting master would be a detached process that no parent-death
     * signal reaches, left behind by a SIGKILLed controller. */
    if (o->control_dir)
        ok = ok && push(l, "-o") && push(l, "ControlMaster=auto") && push(l, "-o") &&
             push(l, store_printf(s, "ControlPath=%s/%u", o->control_dir, o->control_slot)) &&
             push(l, "-o") && push(l, "ControlPersist=no");
    if (m->user[0]) ok = ok && push(l, "-l") && push(l, (char *)m->user);
    return ok && push(l, "--") && push(l, (char *)m->address);
}

int agent_client_argv(const struct topo_machine *m, const struct agent_client_options *o,
                      const char *const *words, char **argv, size_t cap, char *store,
                      size_t storecap)
{
    struct argv_store s = {store, store + storecap};
    struct argv_list l = {argv, 0, cap};
    char bin[PATH_MAX];
    if (cap < 2 || remote_bin(bin, sizeof bin) < 0) return -1;
    argv[0] = NULL;
    if (o->slurm) {
        /* -u: without it slurmstepd forwards a task's stdout a line at a
         * time, and a MessagePack reply with no newline byte waits there
         * until the agent exits (netns.cluster.slurm); --overlap: a second
         * agent on a machine (another network of the run, clean --hosts)
         * would otherwise wait for the first step's CPUs. */
        bool ok = push(&l, "srun") && push(&l, "-u") && push(&l, "--overlap") && push(&l, "-N1") &&
                  push(&l, "-n1") && push(&l, "-w") && push(&l, (char *)m->name) &&
                  push(&l, store_printf(&s, "%s", bin));
        for (const char *const *w = words; ok && *w; w++)
            ok = push(&l, (char *)*w);
        return ok ? 0 : -1;
    }
    return ssh_options(&l, &s, m, o) && push(&l, remote_command(&s, bin, words)) ? 0 : -1;
}

/* ---- failing ---- */

/* The build in flight ends with error (its message already names the
 * machine). */
static void build_failed(struct agent_client *ac, enum net_error_code code, const char *message)
{
    agent_built_fn built = ac->built;
    if (!built) return;
    ac->built = NULL;
    struct agent_build_error e = {.code = code};
    snprintf(e.message, sizeof e.message, "%s", message);
    built(ac->built_ctx, ac, NULL, &e);
}

static void agent_fail(struct agent_client *ac, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void agent_fail(struct agent_client *ac, const char *fmt, ...)
{
    if (ac->failed || ac->tearing_down) return;
    ac->failed = true;
    ev_timer_stop(ac->loop, &ac->start_timer);
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(why, sizeof why, "machine '%s' (%s): ", ac->machine.name, ac->machine.address);
    vsnprintf(why + n, sizeof why - (size_t)n, fmt, ap);
    va_end(ap);
    /* Its peers are out of reach: each ends as a killed one (the run's
     * exit path), and a build in flight fails naming the machine. */
    agent_relay_lost(ac->relay, why);
    build_failed(ac, NET_ERR_ENVIRONMENT, why);
    if (ac->on_lost) ac->on_lost(ac->lost_ctx, ac, why);
    if (ac->hooks.on_failed) ac->hooks.on_failed(ac->hooks.ctx, ac, why);
}

static void agent_down(struct agent_client *ac)
{
    if (!ac->tearing_down || ac->down) return;
    ac->down = true;
    ev_timer_stop(ac->loop, &ac->start_timer);
    /* Its peers not reported exited by now never will be (a teardown that
     * timed out): they end here, so that a stop waiting for them ends. */
    char gone[400];
    snprintf(gone, sizeof gone, "machine '%s': its agent is gone or did not answer its teardown",
             ac->machine.name);
    agent_relay_lost(ac->relay, gone);
    if (ac->hooks.on_down) ac->hooks.on_down(ac->hooks.ctx, ac);
}

/* ---- stderr: the agent's log (and ssh's complaints) ---- */

static void err_line_done(struct agent_client *ac)
{
    ac->err_line[ac->err_len] = '\0';
    if (ac->err_len) {
        ctl_log("machine '%s': %s", ac->machine.name, ac->err_line);
        snprintf(ac->last_err, sizeof ac->last_err, "%s", ac->err_line);
    }
    ac->err_len = 0;
}

static void err_close(struct agent_client *ac)
{
    if (ac->err_fd < 0) return;
    err_line_done(ac);
    ev_io_stop(ac->loop, &ac->err_watcher);
    close(ac->err_fd);
    ac->err_fd = -1;
}

/* One read: false when nothing more is there now (EAGAIN, or closed). */
static bool err_read(struct agent_client *ac)
{
    char buf[1024];
    ssize_t n = read(ac->err_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return true;
    if (n < 0 && errno == EAGAIN) return false;
    if (n <= 0) return err_close(ac), false;
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || ac->err_len + 1 >= sizeof ac->err_line) err_line_done(ac);
        if (buf[i] != '\n' && buf[i] != '\r') ac->err_line[ac->err_len++] = buf[i];
    }
    return true;
}

static void on_stderr(EV_P_ ev_io *w, int revents)
{
    err_read(container_of(w, struct agent_client, err_watcher));
}

/* ---- the conversation ---- */

static void send_ping(struct agent_client *ac);

static void on_exit_hook(void *ctx, int status)
{
    struct agent_client *ac = ctx;
    /* what the agent or ssh said last is in the pipe: read it first */
    while (ac->err_fd >= 0 && err_read(ac)) {
    }
    char how[64];
    if (WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(how, sizeof how, "killed by signal %d",
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    /* Before hello its stderr's last line is ssh's or srun's reason; once
     * the agent ran it is the agent's last log line, which a SIGKILLed
     * agent did not write as a cause: it is labelled so. */
    const char *tool = ac->opts.slurm ? "srun" : "ssh";
    if (ac->ready && ac->last_err[0])
        agent_fail(ac, "the agent's %s %s (its last line on stderr: %s)", tool, how, ac->last_err);
    else
        agent_fail(ac, "the agent's %s %s%s%s", tool, how, ac->last_err[0] ? ": " : "",
                   ac->last_err);
    agent_down(ac); /* a teardown's peers not reported exited are gone with the agent */
}

static void on_pong(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_client *ac = ctx;
    int64_t t3 = mono_ns(), t0 = ac->ping_sent_ns;
    struct agent_pong p;
    char err[256];
    ac->ping_sent_ns = 0;
    if (ac->failed || ac->tearing_down) return;
    if (error && peer_client_closed(ac->pc)) return; /* the exit hook says why, with stderr */
    if (error) return agent_fail(ac, "ping: %s", error);
    if (agent_wire_read_pong(result, &p, err, sizeof err) < 0) return agent_fail(ac, "%s", err);
    if (!clock_estimate_add(&ac->clock, t0, p.t1_ns, p.t2_ns, t3))
        return agent_fail(ac, "ping: impossible times (agent %lld..%lld ns)", (long long)p.t1_ns,
                          (long long)p.t2_ns);
    if (ac->ready) return;
    if (++ac->pings_answered < ac->opts.hello_pings) return send_ping(ac);
    ac->ready = true;
    ac->ready_ns = mono_ns();
    ev_timer_stop(ac->loop, &ac->start_timer);
    ev_timer_set(&ac->start_timer, ac->opts.ping_interval_s, ac->opts.ping_interval_s);
    ev_timer_start(ac->loop, &ac->start_timer);
    if (ac->hooks.on_ready) ac->hooks.on_ready(ac->hooks.ctx, ac);
}

/* m (ended and freed here) sent as method's params; -1 with err when it
 * could not be. */
static int call_agent(struct agent_client *ac, enum agent_method method, struct msgmap *m,
                      peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    int rc = -1;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (!msgmap_end(m, &pk))
        snprintf(err, errlen, "out of memory");
    else
        rc = peer_client_call(ac->pc, agent_method_name(method), sb.data, sb.size, cb, ctx, err,
                              errlen);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static void send_request(struct agent_client *ac, enum agent_method method, struct msgmap *m,
                         peer_reply_fn cb)
{
    char err[256];
    if (call_agent(ac, method, m, cb, ac, err, sizeof err) < 0)
        agent_fail(ac, "%s: %s", agent_method_name(method), err);
}

static void send_ping(struct agent_client *ac)
{
    struct msgmap m;
    msgmap_init(&m);
    ac->ping_sent_ns = mono_ns();
    agent_wire_ping(&m, &(struct agent_ping){ac->ping_sent_ns});
    send_request(ac, AGENT_PING, &m, on_pong);
}

static void on_hello(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_client *ac = ctx;
    char err[256];
    if (ac->failed || ac->tearing_down) return;
    if (error && peer_client_closed(ac->pc)) return; /* the exit hook says why, with stderr */
    if (error) return agent_fail(ac, "hello refused: %s", error);
    if (agent_wire_read_hello_reply(result, &ac->hello, err, sizeof err) < 0)
        return agent_fail(ac, "%s", err);
    ac->hello_ns = mono_ns();
    send_ping(ac);
    if (!ac->failed && ac->hooks.on_hello) ac->hooks.on_hello(ac->hooks.ctx, ac);
}

static void send_hello(struct agent_client *ac)
{
    struct agent_hello h = {.clock_ns = mono_ns()};
    struct msgmap m;
    snprintf(h.version, sizeof h.version, "%s", ac->opts.version);
    snprintf(h.run_id, sizeof h.run_id, "%s", ac->opts.run_id);
    snprintf(h.machine, sizeof h.machine, "%s", ac->machine.name);
    msgmap_init(&m);
    agent_wire_hello(&m, &h);
    send_request(ac, AGENT_HELLO, &m, on_hello);
}

/* Before ready: the start's deadline. After: the ping interval, which
 * also checks that the outstanding ping is not too old. */
static void on_timer(EV_P_ ev_timer *w, int revents)
{
    struct agent_client *ac = container_of(w, struct agent_client, start_timer);
    if (ac->tearing_down) return agent_down(ac); /* the teardown's answer never came */
    if (!ac->ready)
        return agent_fail(ac, "the agent did not answer hello and %d pings within %.0f s",
                          ac->opts.hello_pings, ac->opts.hello_timeout_s);
    if (!ac->ping_sent_ns) return send_ping(ac);
    double age = (double)(mono_ns() - ac->ping_sent_ns) / 1e9;
    if (age >= ac->opts.ping_timeout_s)
        agent_fail(ac, "the agent has not answered a ping for %.0f s", age);
}

/* A sample of the part's links: decoded and handed on (the agent sends
 * them only when the build asked, i.e. when on_stats was set). */
static void on_stats(struct agent_client *ac, const msgpack_object *params)
{
    struct agent_stats s;
    char err[256];
    if (!ac->on_stats) return;
    if (agent_wire_read_stats(params, &s, err, sizeof err) < 0)
        return ctl_log("machine '%s': stats ignored: %s", ac->machine.name, err);
    ac->on_stats(ac->stats_ctx, ac, &s);
    agent_stats_free(&s);
}

static void on_program(struct agent_client *ac, const msgpack_object *params)
{
    struct agent_program p;
    char err[256];
    if (!ac->on_program) return;
    if (agent_wire_read_program(params, &p, err, sizeof err) < 0)
        return ctl_log("machine '%s': program ignored: %s", ac->machine.name, err);
    ac->on_program(ac->program_ctx, ac, &p);
}

static void on_agent_notify(void *ctx, const char *method, uint32_t method_len,
                            const msgpack_object *params)
{
    struct agent_client *ac = ctx;
    if (agent_method_find(method, method_len) == AGENT_STATS) return on_stats(ac, params);
    if (agent_method_find(method, method_len) == AGENT_PROGRAM) return on_program(ac, params);
    if (!agent_relay_notify(ac->relay, method, method_len, params))
        ctl_log("machine '%s': notification '%.*s' ignored", ac->machine.name, (int)method_len,
                method);
}

/* ---- the part build ---- */

/* The agent refused the part (or answered what cannot be read): the
 * agent lives on, the build fails naming the machine. */
static void agent_fail_build(struct agent_client *ac, struct agent_build_error *e)
{
    char line[AGENT_ERROR_MAX];
    /* the agent's line was bounded by the same size: its end may go */
    snprintf(line, sizeof line, "machine '%s': %.*s", ac->machine.name,
             (int)(sizeof line - sizeof ac->machine.name - 16), e->message);
    snprintf(e->message, sizeof e->message, "%s", line);
    agent_built_fn built = ac->built;
    ac->built = NULL;
    built(ac->built_ctx, ac, NULL, e);
}

/* error with result: the agent's structured refusal (result is its map);
 * error alone: a plain refusal, or the channel's loss. */
static void on_build_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_client *ac = ctx;
    char err[AGENT_ERROR_MAX];
    struct agent_build_reply r;
    struct agent_build_error e = {.code = NET_ERR_ENVIRONMENT};
    if (!ac->built) return;
    if (error && peer_client_closed(ac->pc)) /* the exit hook says why, naming the machine */
        return build_failed(ac, NET_ERR_ENVIRONMENT, error);
    if (error && result && agent_wire_read_build_error(result, &e, err, sizeof err) == 0)
        return agent_fail_build(ac, &e);
    if (error) {
        snprintf(e.message, sizeof e.message, "%s", error);
        return agent_fail_build(ac, &e);
    }
    if (agent_wire_read_build_reply(result, &r, err, sizeof err) < 0) {
        snprintf(e.message, sizeof e.message, "%s", err);
        return agent_fail_build(ac, &e);
    }
    agent_built_fn built = ac->built;
    ac->built = NULL;
    built(ac->built_ctx, ac, &r, NULL);
}

bool agent_client_build_pending(const struct agent_client *ac)
{
    return ac->built != NULL;
}

void agent_client_build_abandon(struct agent_client *ac)
{
    ac->built = NULL; /* on_build_reply drops the answer */
}

int agent_client_build(struct agent_client *ac, const void *part, size_t len, agent_built_fn built,
                       void *ctx, char *err, size_t errlen)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct msgmap m;
    int rc = -1;
    if (ac->built || ac->failed || ac->tearing_down || len == 0 || len > AGENT_PART_MAX)
        return snprintf(err, errlen, "machine '%s': cannot build a part of %zu bytes now",
                        ac->machine.name, len),
               -1;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgmap_init(&m);
    agent_wire_build(&m, &(struct agent_build){.part = part,
                                               .part_len = (uint32_t)len,
                                               .stats = ac->on_stats,
                                               .stall_threshold_ns = ac->stall_threshold_ns});
    if (!msgmap_end(&m, &pk))
        snprintf(err, errlen, "machine '%s': out of memory", ac->machine.name);
    else if ((rc = peer_client_call(ac->pc, agent_method_name(AGENT_BUILD), sb.data, sb.size,
                                    on_build_reply, ac, err, errlen)) == 0) {
        ac->built = built;
        ac->built_ctx = ctx;
    }
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

int agent_client_underlay(struct agent_client *ac, const char *address, peer_reply_fn cb, void *ctx,
                          char *err, size_t errlen)
{
    struct agent_underlay u;
    struct msgmap m;
    if (agent_client_gone(ac))
        return snprintf(err, errlen, "machine '%s': the agent is gone", ac->machine.name), -1;
    snprintf(u.address, sizeof u.address, "%s", address);
    msgmap_init(&m);
    agent_wire_underlay(&m, &u);
    return call_agent(ac, AGENT_UNDERLAY, &m, cb, ctx, err, errlen);
}

/* ---- run-time changes: link, kill ---- */

/* One change in flight: the caller's completion, told once. */
struct agent_change {
    struct agent_client *ac;
    enum agent_method method;
    peer_reply_fn cb;
    void *ctx;
};

/* cause without the method's name in front: the agent's lines and its
 * wire decoder's start with it (as the agent's own log shows them), and
 * the line made here names the method once. */
static const char *without_method(const char *cause, const char *method)
{
    size_t n = strlen(method);
    while (!strncmp(cause, method, n) && cause[n] == ':' && cause[n + 1] == ' ')
        cause += n + 2;
    return cause;
}

/* The agent's answer: its agent_build_error map (or a plain error, or the
 * channel's loss) becomes one line naming the machine and the method once;
 * {} is done. */
static void on_change_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_change *c = ctx;
    struct agent_client *ac = c->ac;
    char line[AGENT_ERROR_MAX + AGENT_NAME_MAX + 64], err[256];
    struct agent_build_error e = {0};
    const char *cause = error;
    if (error && result && agent_wire_read_build_error(result, &e, err, sizeof err) == 0)
        cause = e.message;
    const char *method = agent_method_name(c->method);
    if (cause)
        snprintf(line, sizeof line, "machine '%s': %s: %s", ac->machine.name, method,
                 without_method(cause, method));
    c->cb(c->ctx, cause ? line : NULL, cause ? NULL : result);
    free(c);
}

/* m (ended and freed here) sent as method's params, cb told once. */
static int send_change(struct agent_client *ac, enum agent_method method, struct msgmap *m,
                       peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    struct agent_change *c = malloc(sizeof *c);
    if (!c || agent_client_gone(ac)) {
        msgmap_free(m);
        free(c);
        return snprintf(err, errlen, "machine '%s': its agent %s", ac->machine.name,
                        c ? "is gone" : "cannot be asked (out of memory)"),
               -1;
    }
    *c = (struct agent_change){ac, method, cb, ctx};
    char why[256];
    int rc = call_agent(ac, method, m, on_change_reply, c, why, sizeof why);
    if (rc < 0) {
        snprintf(err, errlen, "machine '%s': %s: %s", ac->machine.name, agent_method_name(method),
                 why);
        free(c);
    }
    return rc;
}

int agent_client_link(struct agent_client *ac, int link, enum agent_link_op op,
                      const struct topo_link_params *params, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct msgmap m;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (params && !topo_part_params_pack(&pk, params)) {
        msgpack_sbuffer_destroy(&sb);
        return snprintf(err, errlen, "machine '%s': out of memory", ac->machine.name), -1;
    }
    msgmap_init(&m);
    agent_wire_link(&m, (uint64_t)link, op, params ? sb.data : NULL, params ? sb.size : 0);
    int rc = send_change(ac, AGENT_LINK, &m, cb, ctx, err, errlen);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

int agent_client_kill(struct agent_client *ac, int node, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_node(&m, &(struct agent_node){(uint64_t)node});
    return send_change(ac, AGENT_KILL, &m, cb, ctx, err, errlen);
}

int agent_client_trace(struct agent_client *ac, const struct agent_trace *t, const void *trace,
                       size_t trace_len, peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_trace(&m, t, trace, trace_len);
    return send_change(ac, AGENT_TRACE, &m, cb, ctx, err, errlen);
}

int agent_client_run(struct agent_client *ac, const struct agent_run *r, peer_reply_fn cb,
                     void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_run(&m, r);
    return send_change(ac, AGENT_RUN, &m, cb, ctx, err, errlen);
}

int agent_client_signal(struct agent_client *ac, uint64_t id, int sig, peer_reply_fn cb, void *ctx,
                        char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_signal(&m, &(struct agent_signal){id, sig});
    return send_change(ac, AGENT_SIGNAL, &m, cb, ctx, err, errlen);
}

void agent_client_on_program(struct agent_client *ac, agent_program_fn fn, void *ctx)
{
    ac->on_program = fn;
    ac->program_ctx = ctx;
}

void agent_client_on_lost(struct agent_client *ac, agent_lost_fn fn, void *ctx)
{
    ac->on_lost = fn;
    ac->lost_ctx = ctx;
}

int agent_client_counters(struct agent_client *ac, int link, peer_reply_fn cb, void *ctx, char *err,
                          size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_counters(&m, (uint64_t)link);
    return send_change(ac, AGENT_COUNTERS, &m, cb, ctx, err, errlen);
}

/* The agent's answer to a restart: the node's held calls go, or fail. */
struct agent_restart {
    struct agent_client *ac;
    int node;
    peer_reply_fn cb;
    void *ctx;
};

static void on_restart_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_restart *x = ctx;
    agent_relay_resume(x->ac->relay, x->node, error);
    x->cb(x->ctx, error, result);
    free(x);
}

int agent_client_restart(struct agent_client *ac, int node, const char *name,
                         const struct peer_client_hooks *hooks, struct peer_client **pc,
                         peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    /* Refused before the relay swaps clients: a restart that cannot be
     * sent would cut the old channel and end a fresh client never run. */
    if (agent_client_gone(ac))
        return snprintf(err, errlen, "machine '%s': its agent is gone", ac->machine.name), -1;
    struct agent_restart *x = malloc(sizeof *x);
    if (!x) return snprintf(err, errlen, "out of memory"), -1;
    *x = (struct agent_restart){ac, node, cb, ctx};
    struct peer_client *fresh = agent_relay_restart(ac->relay, node, name, hooks, err, errlen);
    if (!fresh) return free(x), -1;
    *pc = fresh;
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_node(&m, &(struct agent_node){(uint64_t)node});
    if (send_change(ac, AGENT_RESTART, &m, on_restart_reply, x, err, errlen) < 0) {
        agent_relay_resume(ac->relay, node, err);
        return free(x), -1;
    }
    return 0;
}

void agent_client_on_stats(struct agent_client *ac, agent_stats_fn fn, void *ctx,
                           double stall_threshold_s)
{
    ac->on_stats = fn;
    ac->stats_ctx = ctx;
    ac->stall_threshold_ns = stall_threshold_s > 0 ? (uint64_t)(stall_threshold_s * 1e9) : 0;
}

int agent_client_sides(struct agent_client *ac, enum agent_method method, const unsigned char *side,
                       size_t n, peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_sides(&m, &(struct agent_sides){(unsigned char *)side, n});
    return send_change(ac, method, &m, cb, ctx, err, errlen);
}

int agent_client_reroute(struct agent_client *ac, const struct agent_reroute *r, peer_reply_fn cb,
                         void *ctx, char *err, size_t errlen)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_reroute(&m, r);
    return send_change(ac, AGENT_REROUTE, &m, cb, ctx, err, errlen);
}

struct peer_client *agent_client_open_peer(struct agent_client *ac, int node, const char *name,
                                           const struct peer_client_hooks *hooks, char *err,
                                           size_t errlen)
{
    return agent_relay_open(ac->relay, node, name, hooks, err, errlen);
}

struct peer_client *agent_client_peer(const struct agent_client *ac, int node)
{
    return agent_relay_peer(ac->relay, node);
}

/* ---- lifecycle ---- */

static int start_child(struct agent_client *ac, int child_end, char *err, size_t errlen)
{
    char *argv[AGENT_SSH_ARGV_MAX], store[8192], prio[4];
    const char *words[] = {"agent", "--machine", ac->machine.name, NULL};
    int pipefd[2];
    if (linkd_client_priority(prio, err, errlen) < 0) return -1;
    if (agent_client_argv(&ac->machine, &ac->opts, words, argv, AGENT_SSH_ARGV_MAX, store,
                          sizeof store) < 0)
        return snprintf(err, errlen, "the command line does not fit"), -1;
    if (pipe2(pipefd, O_CLOEXEC) < 0) return snprintf(err, errlen, "pipe: %s", strerror(errno)), -1;
    char **envp = spawn_env(NULL);
    struct spawn_spec s = {.path = argv[0],
                           .argv = argv,
                           .envp = envp,
                           .netns_fd = -1,
                           .from = {child_end, child_end, pipefd[1]},
                           .to = {0, 1, 2},
                           .n_fds = 3};
    pid_t pid = envp ? spawn_child(&s, err, errlen) : -1;
    if (!envp) snprintf(err, errlen, "out of memory");
    spawn_env_free(envp);
    close(pipefd[1]);
    if (pid < 0) return close(pipefd[0]), -1;
    ac->err_fd = pipefd[0];
    fcntl(ac->err_fd, F_SETFL, fcntl(ac->err_fd, F_GETFL) | O_NONBLOCK);
    ev_io_init(&ac->err_watcher, on_stderr, ac->err_fd, EV_READ);
    ev_io_start(ac->loop, &ac->err_watcher);
    peer_client_adopt(ac->pc, pid);
    return 0;
}

struct agent_client *agent_client_start(struct ev_loop *loop, const struct topo_machine *m,
                                        const struct agent_client_options *o,
                                        const struct agent_client_hooks *hooks, char *err,
                                        size_t errlen)
{
    struct agent_client *ac = calloc(1, sizeof *ac);
    if (!ac) return snprintf(err, errlen, "machine '%s': out of memory", m->name), NULL;
    *ac = (struct agent_client){.loop = loop, .machine = *m, .opts = *o, .err_fd = -1};
    if (hooks) ac->hooks = *hooks;
    clock_estimate_init(&ac->clock);
    char label[HN_NODE_NAME_SIZE], why[400];
    snprintf(label, sizeof label, "@%.*s", HN_NODE_NAME_MAX - 1, m->name);
    struct peer_spawn spec = {.node = label, .netns_fd = -1};
    struct peer_client_hooks ph = {on_agent_notify, on_exit_hook, ac};
    int child_end;
    ac->pc = peer_client_open(loop, &spec, &ph, &child_end, why, sizeof why);
    if (ac->pc && !(ac->relay = agent_relay_new(loop, ac->pc, m->name)))
        snprintf(why, sizeof why, "out of memory");
    if (!ac->pc || !ac->relay || start_child(ac, child_end, why, sizeof why) < 0) {
        snprintf(err, errlen, "machine '%s': cannot start its agent: %s", m->name, why);
        if (ac->pc) close(child_end);
        agent_client_free(ac);
        return NULL;
    }
    close(child_end);
    ac->started_ns = mono_ns();
    ev_timer_init(&ac->start_timer, on_timer, o->hello_timeout_s, 0);
    ev_timer_start(loop, &ac->start_timer);
    send_hello(ac);
    return ac;
}

static void on_teardown_reply(void *ctx, const char *error, const msgpack_object *result)
{
    struct agent_client *ac = ctx;
    if (ac->down) return;
    if (error && !peer_client_closed(ac->pc))
        ctl_log("machine '%s': teardown: %s", ac->machine.name, error);
    /* Down once the child exits (on_exit_hook): the agent exits after this
     * answer, then ssh, which removes its ControlPath socket, and its last
     * log lines are read first. The timer bounds the wait. */
}

void agent_client_teardown(struct agent_client *ac)
{
    if (ac->tearing_down) return;
    ac->tearing_down = true;
    ev_timer_stop(ac->loop, &ac->start_timer);
    if (peer_client_exited(ac->pc)) return agent_down(ac);
    /* A bounded wait for the answer: a hung agent must not hold the run. */
    ev_timer_set(&ac->start_timer, ac->opts.ping_timeout_s, 0);
    ev_timer_start(ac->loop, &ac->start_timer);
    /* A failed agent may not listen any more, and one that has not
     * answered hello was asked nothing (no request goes before hello):
     * ending its ssh, its EOF, is the whole teardown. A teardown request
     * would wait behind a login that may never come. */
    if (ac->failed || !ac->hello_ns) return peer_client_kill(ac->pc, SIGTERM);
    struct msgmap m;
    char err[256];
    msgmap_init(&m);
    /* A failed call means the channel is down: the exit hook follows. */
    if (call_agent(ac, AGENT_TEARDOWN, &m, on_teardown_reply, ac, err, sizeof err) < 0)
        ctl_log("machine '%s': teardown not sent: %s", ac->machine.name, err);
}

void agent_client_free(struct agent_client *ac)
{
    if (!ac) return;
    ev_timer_stop(ac->loop, &ac->start_timer);
    err_close(ac);
    ac->tearing_down = ac->down = true; /* no hook runs from here on */
    ac->failed = true;
    ac->built = NULL;
    agent_relay_free(ac->relay);
    peer_client_free(ac->pc);
    free(ac);
}

void agent_client_start_times(const struct agent_client *ac, double *hello_s, double *ready_s)
{
    *hello_s = ac->hello_ns ? (double)(ac->hello_ns - ac->started_ns) / 1e9 : 0;
    *ready_s = ac->ready_ns ? (double)(ac->ready_ns - ac->started_ns) / 1e9 : 0;
}

const char *agent_client_machine(const struct agent_client *ac)
{
    return ac->machine.name;
}

bool agent_client_ready(const struct agent_client *ac)
{
    return ac->ready;
}

bool agent_client_gone(const struct agent_client *ac)
{
    return ac->failed || ac->tearing_down;
}

const struct agent_hello_reply *agent_client_hello(const struct agent_client *ac)
{
    return &ac->hello;
}

bool agent_client_clock(const struct agent_client *ac, struct clock_offset *out)
{
    return clock_estimate_get(&ac->clock, out);
}
