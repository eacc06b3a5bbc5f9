/* agent.c — `hiernet agent`: one machine's end of a run spread over
 * several (issue 20; docs/design-notes.md, "Several machines, the design").
 *
 * Started by the controller over SSH or srun, it speaks MessagePack-RPC
 * (proto/agent_wire.h) on its stdin and stdout and logs on stderr, which
 * the controller copies into the run's log. It listens on no socket. It
 * serves hello (versions must be equal), ping (its clock, for the
 * controller's offset estimate), build (its part of the network, once,
 * after hello) with the call relay and exit notifications of
 * app/agent_part.h, the run-time changes link, kill, restart, partition
 * and heal (app/agent_ops.c), the stats notifications when build asks
 * for them (app/agent_stats.c), teardown, and underlay (the ICMP echo round
 * trip to another machine's underlay address: emu/underlay_rtt.h). EOF on stdin (the controller or
 * its SSH session is gone), SIGHUP, SIGTERM, SIGINT or --idle-timeout seconds without a ping end it
 * after releasing its part.
 *
 * Owns: its libev loop, the reader, the output buffer and the agent_part.
 * The part is released by agent_finish on every exit path, and the
 * process exits only once it is released and the output drained (or the
 * drain timed out). */
#include "app/agent_part.h"
#include "app/cli.h"
#include "common/clock.h"
#include "common/container.h"
#include "common/number.h"
#include "controller/host_probe.h"
#include "emu/underlay_rtt.h"
#include "hiernet_version.h"
#include "proto/agent_wire.h"
#include "proto/protocol.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define AGENT_IDLE_S 10.0 /* design notes: a hung connection is noticed by the pings */
#define AGENT_VERSION HIERNET_AGENT_VERSION

static const char agent_usage[] =
    "usage: hiernet agent [--machine NAME] [--controller ADDRESS] [--idle-timeout S]\n"
    "\n"
    "One machine's end of a run spread over several machines. The controller\n"
    "starts it (ssh -o BatchMode=yes MACHINE hiernet agent, or srun) and speaks\n"
    "to it on its stdin and stdout; its log goes to stderr. It opens no\n"
    "listening socket. It answers hello (the controller's hiernet version must\n"
    "equal its own) and ping; after hello, build makes this machine's part of\n"
    "the network once (namespaces, links, peers, cgroups, registry entry, as a\n"
    "local run), then relays each local host's peer control stream in call\n"
    "messages and reports a peer's exit; link, kill, restart, partition and\n"
    "heal change the part as a local run would, and build's stats sends its\n"
    "links.csv rows each emulated second. teardown releases the part, answers\n"
    "and exits. It also releases its part and exits on EOF on stdin, SIGHUP,\n"
    "SIGTERM, SIGINT, or S seconds (default 10) without a ping; answers the\n"
    "controller has not read once the part is released get S more seconds to\n"
    "drain.\n"
    "\n"
    "  --machine NAME        the machine's name in the hosts file (log lines)\n"
    "  --controller ADDRESS  the controller's address, to find the underlay\n"
    "                        interface that routes to it (default: from\n"
    "                        SSH_CONNECTION, or SLURM_LAUNCH_NODE_IPADDR)\n"
    "\n"
    "exit codes: 0 torn down on request or EOF, 1 no ping for S seconds or a\n"
    "broken channel, 2 usage or a controller of another version, 128+N signal N.\n";

struct agent {
    struct ev_loop *loop;
    ev_io in_watcher, out_watcher;
    ev_timer idle_timer;
    ev_signal signals[4];
    struct proto_reader reader;
    msgpack_sbuffer out;
    size_t out_sent;
    msgpack_packer pk;
    struct agent_hello_reply self; /* what hello answers, found at start */
    char machine[AGENT_NAME_MAX];
    double idle_s;
    int exit_code;      /* once finishing: the code to exit with after the output drains */
    int stdio_flags[2]; /* stdin's and stdout's file status flags before O_NONBLOCK */
    bool finishing;     /* no more input is read */
    int64_t read_ns;    /* when the bytes being decoded were read: a ping's t1 */
    struct agent_part *part;
    bool greeted;          /* hello answered: build is allowed */
    bool part_busy;        /* the part's release is under way */
    bool teardown_pending; /* a teardown request to answer once released */
    uint32_t teardown_msgid;
    struct underlay_job *underlay_jobs; /* `underlay` requests whose echoes are under way */
};

/* An `underlay` request answered from its probe's callback. */
struct underlay_job {
    struct agent *a;
    uint32_t msgid;
    char address[INET_ADDRSTRLEN];
    struct underlay_rtt *probe;
    struct underlay_job *next;
};

static struct agent *agent_log_ctx;

static void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void agent_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "agent %s: ", agent_log_ctx ? agent_log_ctx->machine : "?");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- what hello answers ---- */

/* The address to route toward: --controller, else the SSH client's, else
 * the node srun was started from. */
static const char *controller_address(const char *given, char *buf, size_t cap)
{
    const char *ssh = getenv("SSH_CONNECTION");
    const char *slurm = getenv("SLURM_LAUNCH_NODE_IPADDR");
    if (given) return given;
    if (ssh && cap >= 64 && sscanf(ssh, "%63s", buf) == 1) return buf;
    return slurm && *slurm ? slurm : NULL;
}

/* The source address the kernel picks toward peer: a connected UDP socket
 * sends nothing. 0, or -1 when peer is no address or has no route. */
static int route_source(const char *peer, struct sockaddr_storage *src)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_DGRAM}, *ai;
    if (getaddrinfo(peer, "9", &hints, &ai) != 0) return -1;
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof *src;
    int rc = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
                     getsockname(fd, (struct sockaddr *)src, &len) == 0
                 ? 0
                 : -1;
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return rc;
}

static bool same_address(const struct sockaddr *a, const struct sockaddr_storage *b)
{
    if (a->sa_family != b->ss_family) return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return a->sa_family == AF_INET6 && !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                                               &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* The interface holding src, its name and MTU into r. */
static void underlay_device(const struct sockaddr_storage *src, struct agent_hello_reply *r)
{
    struct ifaddrs *list;
    if (getifaddrs(&list) < 0) return;
    for (struct ifaddrs *a = list; a; a = a->ifa_next)
        if (a->ifa_addr && same_address(a->ifa_addr, src)) {
            snprintf(r->underlay_device, sizeof r->underlay_device, "%s", a->ifa_name);
            break;
        }
    freeifaddrs(list);
    struct ifreq ifr = {0};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", r->underlay_device);
    if (fd >= 0 && r->underlay_device[0] && ioctl(fd, SIOCGIFMTU, &ifr) == 0)
        r->underlay_mtu = ifr.ifr_mtu;
    if (fd >= 0) close(fd);
}

static void find_underlay(const char *controller, struct agent_hello_reply *r)
{
    char buf[64];
    const char *peer = controller_address(controller, buf, sizeof buf);
    struct sockaddr_storage src;
    if (!peer || route_source(peer, &src) < 0) {
        agent_log("no underlay found: %s", peer ? "no route to the controller's address"
                                                : "no SSH_CONNECTION, no --controller");
        return;
    }
    const void *in = src.ss_family == AF_INET
                         ? (const void *)&((struct sockaddr_in *)&src)->sin_addr
                         : (const void *)&((struct sockaddr_in6 *)&src)->sin6_addr;
    inet_ntop(src.ss_family, in, r->underlay_address, sizeof r->underlay_address);
    underlay_device(&src, r);
}

/* "" when the probe cannot run (no privilege): the controller's doctor says so. */
/* Through host_probe: the part's build uses this probe too. */
static void probe_features(struct ev_loop *loop, struct agent_hello_reply *r)
{
    char err[256];
    const struct emu_nl_features *f = host_probe_kernel_now(loop, err, sizeof err);
    if (f)
        cli_feature_names_of(f, r->features, sizeof r->features);
    else
        agent_log("kernel features not probed: %s", err);
}

static void agent_describe(struct agent *a, const char *controller)
{
    struct agent_hello_reply *r = &a->self;
    snprintf(r->version, sizeof r->version, "%s", AGENT_VERSION);
    if (gethostname(r->hostname, sizeof r->hostname - 1) < 0) r->hostname[0] = '\0';
    r->uid = (int64_t)geteuid();
    r->cap_net_admin = (cli_cap_effective() >> CLI_CAP_NET_ADMIN) & 1;
    find_underlay(controller, r);
    probe_features(a->loop, r);
}

/* ---- output ---- */

static void agent_maybe_exit(struct agent *a);

static void agent_flush(struct agent *a)
{
    size_t before = a->out_sent;
    while (a->out_sent < a->out.size) {
        ssize_t n = write(STDOUT_FILENO, a->out.data + a->out_sent, a->out.size - a->out_sent);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            ev_io_start(a->loop, &a->out_watcher);
            if (a->out_sent > before && a->part) agent_part_output_drained(a->part);
            return;
        }
        if (n <= 0) { /* the controller is gone: nothing more can be said */
            a->out_sent = a->out.size;
            break;
        }
        a->out_sent += (size_t)n;
    }
    msgpack_sbuffer_clear(&a->out);
    a->out_sent = 0;
    ev_io_stop(a->loop, &a->out_watcher);
    if (a->part) agent_part_output_drained(a->part);
    agent_maybe_exit(a);
}

static void on_writable(EV_P_ ev_io *w, int revents)
{
    agent_flush(container_of(w, struct agent, out_watcher));
}

/* The agent_part's view of the output (agent_part_io). */
static size_t agent_queued(void *ctx)
{
    struct agent *a = ctx;
    return a->out.size - a->out_sent;
}

static void agent_flush_ctx(void *ctx)
{
    agent_flush(ctx);
}

static void agent_log_line(void *ctx, const char *line)
{
    agent_log("%s", line);
}

/* A peer holds a backlog of the controller's bytes: stop reading them.
 * Once finishing, input stays stopped. */
static void agent_input(void *ctx, bool on)
{
    struct agent *a = ctx;
    if (on && !a->finishing)
        ev_io_start(a->loop, &a->in_watcher);
    else
        ev_io_stop(a->loop, &a->in_watcher);
}

/* ---- ending ---- */

static void underlay_jobs_cancel(struct agent *a);

/* Once finishing: the loop ends when the part is released and the
 * output is out (or its drain timed out, on_idle). */
static void agent_maybe_exit(struct agent *a)
{
    if (a->finishing && !a->part_busy && a->out_sent == a->out.size) ev_break(a->loop, EVBREAK_ALL);
}

static void answer_teardown(struct agent *a)
{
    if (!a->teardown_pending) return;
    a->teardown_pending = false;
    struct msgmap r;
    msgmap_init(&r);
    msgmap_response(&r, &a->pk, a->teardown_msgid);
}

static double timeval_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The CPU this machine's part took: the agent's threads, and the
 * processes it and its peer template reaped (the peers; and whatever the
 * login shell ran before it became the agent). A spread run's cost per
 * machine is read from these lines (tools/bench/multihost). */
static void log_cpu(void)
{
    struct rusage self, children;
    if (getrusage(RUSAGE_SELF, &self) < 0 || getrusage(RUSAGE_CHILDREN, &children) < 0) return;
    agent_log("cpu: agent %.3f s user, %.3f s sys; reaped children %.3f s user, %.3f s sys",
              timeval_s(self.ru_utime), timeval_s(self.ru_stime), timeval_s(children.ru_utime),
              timeval_s(children.ru_stime));
}

/* The part is released (or there was none): answer a teardown, then give
 * the output idle_s to drain: a controller that reads nothing (hung, or
 * its end of the pipe stopped) must not keep the agent alive. */
static void agent_released(void *ctx)
{
    struct agent *a = ctx;
    a->part_busy = false;
    log_cpu();
    answer_teardown(a);
    ev_timer_stop(a->loop, &a->idle_timer);
    ev_timer_set(&a->idle_timer, a->idle_s, 0);
    ev_timer_start(a->loop, &a->idle_timer);
    agent_flush(a);
}

/* Stops reading, releases the part, and exits with code once it is
 * released and the output is out. */
static void agent_finish(struct agent *a, int code, const char *why)
{
    if (a->finishing) return;
    a->finishing = true;
    a->exit_code = code;
    ev_io_stop(a->loop, &a->in_watcher);
    ev_timer_stop(a->loop, &a->idle_timer);
    underlay_jobs_cancel(a);
    agent_log("tearing down: %s", why);
    a->part_busy = a->part && agent_part_release(a->part);
    if (!a->part_busy) agent_released(a);
}

static void on_idle(EV_P_ ev_timer *w, int revents)
{
    struct agent *a = container_of(w, struct agent, idle_timer);
    if (a->finishing) { /* only started once the part is released */
        agent_log("%zu bytes of answers not read by the controller in %g s: dropped",
                  a->out.size - a->out_sent, a->idle_s);
        return ev_break(a->loop, EVBREAK_ALL);
    }
    char why[96];
    snprintf(why, sizeof why, "no ping for %g s", a->idle_s);
    agent_finish(a, 1, why);
}

static void on_signal(EV_P_ ev_signal *w, int revents)
{
    struct agent *a = w->data;
    char why[64];
    snprintf(why, sizeof why, "signal %d (%s)", w->signum, strsignal(w->signum));
    agent_finish(a, 128 + w->signum, why);
}

/* ---- requests ---- */

static void reply_error(struct agent *a, uint32_t msgid, const char *message)
{
    proto_pack_error(&a->pk, msgid, message);
}

static void serve_hello(struct agent *a, const struct proto_msg *m)
{
    struct agent_hello h;
    char err[512];
    if (agent_wire_read_hello(m->params, &h, err, sizeof err) < 0)
        return reply_error(a, m->msgid, err);
    if (h.machine[0]) snprintf(a->machine, sizeof a->machine, "%s", h.machine);
    if (strcmp(h.version, AGENT_VERSION) != 0) {
        snprintf(err, sizeof err,
                 "version mismatch: the controller is hiernet %s, this agent is hiernet %s",
                 h.version, AGENT_VERSION);
        agent_log("%s", err);
        reply_error(a, m->msgid, err);
        return agent_finish(a, EXIT_USAGE, "refused the controller's version");
    }
    a->greeted = true;
    agent_log("hello from run %s (pid %ld, underlay %s %s mtu %lld)", h.run_id, (long)getpid(),
              a->self.underlay_device[0] ? a->self.underlay_device : "?",
              a->self.underlay_address[0] ? a->self.underlay_address : "?",
              (long long)a->self.underlay_mtu);
    struct msgmap r;
    msgmap_init(&r);
    a->self.clock_ns = mono_ns();
    agent_wire_hello_reply(&r, &a->self);
    msgmap_response(&r, &a->pk, m->msgid);
}

static void serve_ping(struct agent *a, const struct proto_msg *m)
{
    struct agent_ping p;
    char err[256];
    if (agent_wire_read_ping(m->params, &p, err, sizeof err) < 0)
        return reply_error(a, m->msgid, err);
    ev_timer_again(a->loop, &a->idle_timer);
    struct agent_pong pong = {a->read_ns, mono_ns()};
    struct msgmap r;
    msgmap_init(&r);
    agent_wire_pong(&r, &pong);
    msgmap_response(&r, &a->pk, m->msgid);
}

/* Answered once the part is released (agent_released). */
static void serve_teardown(struct agent *a, const struct proto_msg *m)
{
    a->teardown_pending = true;
    a->teardown_msgid = m->msgid;
    agent_finish(a, 0, "teardown requested");
}

static void serve_build(struct agent *a, const struct proto_msg *m)
{
    if (!a->greeted) return agent_part_refuse(a->part, m->msgid, "build: before hello");
    agent_part_build(a->part, m->msgid, m->params);
}

static void underlay_job_unlink(struct underlay_job *job)
{
    struct underlay_job **at = &job->a->underlay_jobs;
    while (*at != job)
        at = &(*at)->next;
    *at = job->next;
}

/* The probe's end: the deferred answer (the probe has freed itself). */
static void on_underlay_measured(void *ctx, int64_t rtt_ns, const char *error)
{
    struct underlay_job *job = ctx;
    struct agent *a = job->a;
    underlay_job_unlink(job);
    if (error) {
        reply_error(a, job->msgid, error);
    } else {
        struct agent_underlay_reply reply = {.rtt_ns = rtt_ns};
        agent_log("underlay round trip to %s: %.3f ms (least of %d)", job->address, rtt_ns / 1e6,
                  UNDERLAY_RTT_SAMPLES);
        struct msgmap r;
        msgmap_init(&r);
        agent_wire_underlay_reply(&r, &reply);
        msgmap_response(&r, &a->pk, job->msgid);
    }
    free(job);
    agent_flush(a);
}

/* Probes still running are stopped: their requests stay unanswered (the
 * agent is ending). */
static void underlay_jobs_cancel(struct agent *a)
{
    while (a->underlay_jobs) {
        struct underlay_job *job = a->underlay_jobs;
        a->underlay_jobs = job->next;
        underlay_rtt_cancel(job->probe);
        free(job);
    }
}

/* The round trip to another machine's underlay address (the controller
 * subtracts half of it from each cut link's delay). The echoes run on the
 * loop (pings and other requests are served meanwhile); the answer comes
 * from on_underlay_measured. */
static void serve_underlay(struct agent *a, const struct proto_msg *m)
{
    struct agent_underlay u;
    struct in_addr addr;
    char err[256];
    if (!a->greeted) return reply_error(a, m->msgid, "underlay: before hello");
    if (agent_wire_read_underlay(m->params, &u, err, sizeof err) < 0)
        return reply_error(a, m->msgid, err);
    if (inet_pton(AF_INET, u.address, &addr) != 1) {
        snprintf(err, sizeof err, "underlay: field 'address': '%s' is not IPv4", u.address);
        return reply_error(a, m->msgid, err);
    }
    struct underlay_job *job = calloc(1, sizeof *job);
    if (!job) return reply_error(a, m->msgid, "underlay: out of memory");
    *job = (struct underlay_job){.a = a, .msgid = m->msgid, .next = a->underlay_jobs};
    snprintf(job->address, sizeof job->address, "%s", u.address);
    job->probe = underlay_rtt_start(a->loop, ntohl(addr.s_addr), UNDERLAY_RTT_SAMPLES,
                                    on_underlay_measured, job, err, sizeof err);
    if (!job->probe) return free(job), reply_error(a, m->msgid, err);
    a->underlay_jobs = job;
}

/* The controller's one notification: a chunk of a peer's control stream. */
static void serve_notification(struct agent *a, const struct proto_msg *m)
{
    enum agent_method method = agent_method_find(m->method, m->method_len);
    if (method == AGENT_CALL) return agent_part_call(a->part, m->params);
    agent_log("notification '%.*s' ignored", (int)(m->method_len > 40 ? 40 : m->method_len),
              m->method ? m->method : "");
}

static void serve(struct agent *a, const struct proto_msg *m)
{
    enum agent_method method = agent_method_find(m->method, m->method_len);
    char err[160];
    if (m->kind == PROTO_NOTIFY) return serve_notification(a, m);
    if (m->kind != PROTO_REQUEST) return; /* the agent asks nothing: no response is due */
    switch (method) {
    case AGENT_HELLO:
        return serve_hello(a, m);
    case AGENT_PING:
        return serve_ping(a, m);
    case AGENT_TEARDOWN:
        return serve_teardown(a, m);
    case AGENT_BUILD:
        return serve_build(a, m);
    case AGENT_LINK:
        return agent_part_link(a->part, m->msgid, m->params);
    case AGENT_KILL:
        return agent_part_kill(a->part, m->msgid, m->params);
    case AGENT_RESTART:
        return agent_part_restart(a->part, m->msgid, m->params);
    case AGENT_PARTITION:
        return agent_part_partition(a->part, m->msgid, m->params);
    case AGENT_HEAL:
        return agent_part_heal(a->part, m->msgid, m->params);
    case AGENT_UNDERLAY:
        return serve_underlay(a, m);
    case AGENT_COUNTERS:
        return agent_part_counters(a->part, m->msgid, m->params);
    case AGENT_TRACE:
        return agent_part_trace(a->part, m->msgid, m->params);
    case AGENT_RUN:
        return agent_part_run(a->part, m->msgid, m->params);
    case AGENT_SIGNAL:
        return agent_part_signal(a->part, m->msgid, m->params);
    case AGENT_REROUTE:
        return agent_part_reroute(a->part, m->msgid, m->params);
    case AGENT_UNKNOWN:
        snprintf(err, sizeof err, "unknown method '%.*s'",
                 (int)(m->method_len > 40 ? 40 : m->method_len), m->method ? m->method : "");
        return reply_error(a, m->msgid, err);
    default: /* a notification's name (call, exit, stats) as a request */
        snprintf(err, sizeof err, "%s: not a request", agent_method_name(method));
        return reply_error(a, m->msgid, err);
    }
}

static void drain(struct agent *a)
{
    struct proto_msg m;
    bool has_msgid;
    char err[160];
    while (!a->finishing) {
        enum proto_next r = proto_reader_next(&a->reader, &m, &has_msgid, err, sizeof err);
        if (r == PROTO_NEXT_MORE) break;
        if (r == PROTO_NEXT_FATAL) return agent_finish(a, 1, err);
        if (r == PROTO_NEXT_INVALID && has_msgid) reply_error(a, m.msgid, err);
        if (r == PROTO_NEXT_MESSAGE) serve(a, &m);
    }
    agent_flush(a);
}

static void on_readable(EV_P_ ev_io *w, int revents)
{
    struct agent *a = container_of(w, struct agent, in_watcher);
    size_t avail;
    char *buf = proto_reader_buffer(&a->reader, 65536, &avail); /* a part comes in MiBs */
    if (!buf) return agent_finish(a, 1, "out of memory");
    ssize_t n = read(STDIN_FILENO, buf, avail);
    int read_errno = errno;
    a->read_ns = mono_ns();
    char why[96];
    if (n > 0) {
        proto_reader_consumed(&a->reader, (size_t)n);
        drain(a);
    } else if (n == 0) {
        agent_finish(a, 0, "EOF on stdin: the controller is gone");
    } else if (read_errno != EAGAIN && read_errno != EINTR) {
        /* a broken channel, not an ending asked for: exit 1, as --help says */
        snprintf(why, sizeof why, "reading stdin: %s", strerror(read_errno));
        agent_finish(a, 1, why);
    }
}

/* ---- main ---- */

static int agent_options(int argc, char **argv, struct agent *a, const char **controller)
{
    for (int i = 0; i < argc; i++) {
        const char *opt = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) return fputs(agent_usage, stdout), 0;
        if (!value || (strcmp(opt, "--machine") && strcmp(opt, "--controller") &&
                       strcmp(opt, "--idle-timeout"))) {
            fprintf(stderr, "hiernet agent: %s '%s' (see hiernet agent --help)\n",
                    value ? "unknown argument" : "missing value or unknown argument", opt);
            return EXIT_USAGE;
        }
        i++;
        if (!strcmp(opt, "--machine")) snprintf(a->machine, sizeof a->machine, "%s", value);
        if (!strcmp(opt, "--controller")) *controller = value;
        if (!strcmp(opt, "--idle-timeout") && number_parse_positive(value, &a->idle_s) < 0) {
            fprintf(stderr, "hiernet agent: --idle-timeout '%s': not a positive number\n", value);
            return EXIT_USAGE;
        }
    }
    return -1;
}

static void agent_watch(struct agent *a)
{
    static const int sigs[4] = {SIGHUP, SIGTERM, SIGINT, SIGPIPE};
    /* O_NONBLOCK is the open file's, shared with whoever else holds it (a
     * terminal's shell, srun): restored by agent_stdio_restore. */
    for (int fd = 0; fd < 2; fd++) {
        a->stdio_flags[fd] = fcntl(fd, F_GETFL);
        if (a->stdio_flags[fd] >= 0) fcntl(fd, F_SETFL, a->stdio_flags[fd] | O_NONBLOCK);
    }
    ev_io_init(&a->in_watcher, on_readable, STDIN_FILENO, EV_READ);
    ev_io_init(&a->out_watcher, on_writable, STDOUT_FILENO, EV_WRITE);
    ev_init(&a->idle_timer, on_idle);
    a->idle_timer.repeat = a->idle_s;
    ev_io_start(a->loop, &a->in_watcher);
    ev_timer_again(a->loop, &a->idle_timer);
    for (int i = 0; i < 4; i++) {
        ev_signal_init(&a->signals[i], on_signal, sigs[i]);
        a->signals[i].data = a;
        /* SIGPIPE: a write to a closed stdout fails with EPIPE instead */
        if (sigs[i] != SIGPIPE) ev_signal_start(a->loop, &a->signals[i]);
    }
    signal(SIGPIPE, SIG_IGN);
}

static void agent_stdio_restore(const struct agent *a)
{
    for (int fd = 0; fd < 2; fd++)
        if (a->stdio_flags[fd] >= 0) fcntl(fd, F_SETFL, a->stdio_flags[fd]);
}

int cli_agent(int argc, char **argv)
{
    static struct agent a;
    const char *controller = NULL;
    a.idle_s = AGENT_IDLE_S;
    snprintf(a.machine, sizeof a.machine, "?");
    int rc = agent_options(argc, argv, &a, &controller);
    if (rc >= 0) return rc;
    agent_log_ctx = &a;
    a.loop = ev_default_loop(0);
    msgpack_sbuffer_init(&a.out);
    msgpack_packer_init(&a.pk, &a.out, msgpack_sbuffer_write);
    struct agent_part_io io = {.pk = &a.pk,
                               .queued = agent_queued,
                               .flush = agent_flush_ctx,
                               .released = agent_released,
                               .log = agent_log_line,
                               .input = agent_input,
                               .ctx = &a};
    bool reader = a.loop && proto_reader_init(&a.reader, AGENT_MESSAGE_MAX) == 0;
    if (!reader || !(a.part = agent_part_new(a.loop, a.machine, NULL, &io))) {
        agent_log("cannot start: no event loop or out of memory");
        if (reader) proto_reader_destroy(&a.reader);
        msgpack_sbuffer_destroy(&a.out);
        return 1;
    }
    agent_describe(&a, controller);
    agent_watch(&a);
    ev_run(a.loop, 0);
    underlay_jobs_cancel(&a);
    agent_stdio_restore(&a);
    proto_reader_destroy(&a.reader);
    msgpack_sbuffer_destroy(&a.out);
    agent_part_free(a.part); /* released (or never built) by now */
    return a.exit_code;
}
