/* test_agent.c — `hiernet agent` (app/agent.c) spoken to over pipes, as
 * ssh would: hello (the underlay toward --controller 127.0.0.1 is lo),
 * pings on the same CLOCK_MONOTONIC as ours (so t0 <= t1 <= t2 <= t3
 * exactly), a reserved message refused, teardown; a wrong version refused
 * in one line naming both; EOF, SIGTERM and the idle timeout end it; it
 * holds no socket; answers a controller does not read hold it only for
 * the idle timeout; a bad --idle-timeout is refused naming it; an
 * unreadable stdin ends it with status 1; its stdin's O_NONBLOCK is put
 * back. build's refusals (an error map, proto/agent_wire.h): before
 * hello (and underlay before hello, refused in a line), params of the wrong type, part bytes that
 * do not decode (naming the field), a second build; a call for a node of no part is dropped (the
 * agent lives on). */
#include "check.h"
#include "common/clock.h"
#include "hiernet_version.h"
#include "proto/agent_wire.h"
#include "proto/protocol.h"
#include "tests/lib/agent_pipe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

static char hiernet_path[4096];

static void agent_start(struct agent_pipe *a, const char *idle)
{
    char *argv[] = {hiernet_path, "agent",          "--machine",  "t1", "--controller",
                    "127.0.0.1",  "--idle-timeout", (char *)idle, NULL};
    if (agent_pipe_start(a, argv, !getenv("TEST_AGENT_VERBOSE")) < 0) abort();
}

static void agent_send(struct agent_pipe *a, enum agent_method method, struct msgmap *m)
{
    CHECK(agent_pipe_request(a, method, m) != 0);
}

/* The next message; false on EOF (or 10 s of silence). */
static bool agent_next(struct agent_pipe *a, struct proto_msg *m)
{
    return agent_pipe_next(a, m, 10000);
}

/* Waits up to limit_s for the agent to exit; its wait status, or -1. */
static int agent_wait(struct agent_pipe *a, double limit_s)
{
    double end = mono_s() + limit_s;
    int status;
    while (mono_s() < end) {
        if (waitpid(a->pid, &status, WNOHANG) == a->pid) return status;
        usleep(10000);
    }
    kill(a->pid, SIGKILL);
    waitpid(a->pid, &status, 0);
    return -1;
}

static void send_hello(struct agent_pipe *a, const char *version)
{
    struct agent_hello h = {.clock_ns = mono_ns()};
    snprintf(h.version, sizeof h.version, "%s", version);
    snprintf(h.run_id, sizeof h.run_id, "test-run");
    snprintf(h.machine, sizeof h.machine, "t1");
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_hello(&m, &h);
    agent_send(a, AGENT_HELLO, &m);
}

/* How many of pid's descriptors are sockets (an agent opens none). */
static int socket_fds(pid_t pid)
{
    char dir[64], path[320], target[256];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0 && (target[len] = '\0', !strncmp(target, "socket:", 7))) n++;
    }
    if (d) closedir(d);
    return n;
}

static void hello_ping_teardown(void)
{
    struct agent_pipe a;
    struct proto_msg m;
    struct agent_hello_reply r;
    char err[256];
    agent_start(&a, "10");
    send_hello(&a, HIERNET_AGENT_VERSION);
    CHECK(agent_next(&a, &m) && m.kind == PROTO_RESPONSE && m.error->type == MSGPACK_OBJECT_NIL);
    CHECK(agent_wire_read_hello_reply(m.result, &r, err, sizeof err) == 0);
    CHECK_STREQ(r.version, HIERNET_AGENT_VERSION);
    CHECK_STREQ(r.underlay_address, "127.0.0.1");
    CHECK_STREQ(r.underlay_device, "lo");
    CHECK(r.underlay_mtu == 65536);
    CHECK(r.uid == (int64_t)geteuid());
    CHECK(socket_fds(a.pid) == 0);
    for (int i = 0; i < 3; i++) {
        struct agent_pong p;
        struct msgmap q;
        int64_t t0 = mono_ns();
        msgmap_init(&q);
        agent_wire_ping(&q, &(struct agent_ping){t0});
        agent_send(&a, AGENT_PING, &q);
        CHECK(agent_next(&a, &m) && m.error->type == MSGPACK_OBJECT_NIL);
        int64_t t3 = mono_ns();
        CHECK(agent_wire_read_pong(m.result, &p, err, sizeof err) == 0);
        CHECK_MSG(t0 <= p.t1_ns && p.t1_ns <= p.t2_ns && p.t2_ns <= t3, "%lld %lld %lld %lld",
                  (long long)t0, (long long)p.t1_ns, (long long)p.t2_ns, (long long)t3);
    }
    struct msgmap b;
    msgmap_init(&b);
    agent_send(&a, AGENT_LINK, &b); /* before build: refused in the error map */
    struct agent_build_error be;
    CHECK(agent_next(&a, &m) && m.error->type == MSGPACK_OBJECT_MAP);
    CHECK(agent_wire_read_build_error(m.error, &be, err, sizeof err) == 0);
    CHECK_STREQ(be.message, "link: no part is built on this machine");
    CHECK(be.code == 1 && !be.node[0] && !be.link[0]);
    msgmap_init(&b);
    agent_send(&a, AGENT_EXIT, &b); /* a notification's name as a request */
    CHECK(agent_next(&a, &m) && m.error->type == MSGPACK_OBJECT_STR);
    CHECK(m.error->via.str.size == 19 && !memcmp(m.error->via.str.ptr, "exit: not a request", 19));
    msgmap_init(&b);
    agent_send(&a, AGENT_TEARDOWN, &b);
    CHECK(agent_next(&a, &m) && m.error->type == MSGPACK_OBJECT_NIL);
    int st = agent_wait(&a, 5);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    agent_pipe_close(&a);
}

static void wrong_version(void)
{
    struct agent_pipe a;
    struct proto_msg m;
    char want[512];
    agent_start(&a, "10");
    send_hello(&a, "0.0-wrong");
    CHECK(agent_next(&a, &m) && m.error->type == MSGPACK_OBJECT_STR);
    snprintf(want, sizeof want,
             "version mismatch: the controller is hiernet 0.0-wrong, this agent is hiernet %s",
             HIERNET_AGENT_VERSION);
    CHECK(m.error->via.str.size == strlen(want) &&
          !memcmp(m.error->via.str.ptr, want, strlen(want)));
    int st = agent_wait(&a, 5);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d", st);
    agent_pipe_close(&a);
}

/* EOF, SIGTERM, no ping: each ends the agent with its own status. */
static void endings(void)
{
    struct agent_pipe a;
    struct proto_msg m;
    agent_start(&a, "10");
    send_hello(&a, HIERNET_AGENT_VERSION);
    CHECK(agent_next(&a, &m));
    close(a.to);
    int st = agent_wait(&a, 5);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "EOF: status %d", st);
    close(a.from);
    proto_reader_destroy(&a.reader);

    agent_start(&a, "10");
    send_hello(&a, HIERNET_AGENT_VERSION);
    CHECK(agent_next(&a, &m));
    kill(a.pid, SIGTERM);
    st = agent_wait(&a, 5);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM, "TERM: status %d", st);
    agent_pipe_close(&a);

    agent_start(&a, "0.3");
    double t = mono_s();
    st = agent_wait(&a, 10);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "idle: status %d", st);
    CHECK_MSG(mono_s() - t >= 0.3, "idle: ended after %.3f s", mono_s() - t);
    agent_pipe_close(&a);
}

/* A controller that reads nothing: the agent's stdout pipe is full and
 * answers wait in its buffer when SIGTERM comes. It gets --idle-timeout to
 * drain them, then exits (it waited for ever). */
static void unread_output(void)
{
    struct agent_pipe a;
    int queued = 0;
    agent_start(&a, "3"); /* 3 s: the pings are all read well within it */
    CHECK(fcntl(a.from, F_SETPIPE_SZ, 4096) >= 0);
    send_hello(&a, HIERNET_AGENT_VERSION);
    for (int i = 0; i < 1000; i++) {
        struct msgmap q;
        msgmap_init(&q);
        agent_wire_ping(&q, &(struct agent_ping){mono_ns()});
        agent_send(&a, AGENT_PING, &q);
    }
    /* 1000 answers are some 40 kB: with the pipe full, most wait in the agent */
    for (double end = mono_s() + 5; mono_s() < end && queued < 4000; usleep(10000))
        CHECK(ioctl(a.from, FIONREAD, &queued) == 0);
    CHECK_MSG(queued >= 4000, "%d bytes in the agent's stdout pipe, not a full pipe", queued);
    usleep(200000); /* the agent reads the rest of the pings */
    double t = mono_s();
    kill(a.pid, SIGTERM);
    int st = agent_wait(&a, 10);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM, "status %d", st);
    CHECK_MSG(mono_s() - t >= 2.9, "exited %.3f s after SIGTERM, before the drain's 3 s",
              mono_s() - t);
    agent_pipe_close(&a);
}

/* The agent makes its stdin non-blocking; that flag is the open file's,
 * shared with whoever else holds it (a terminal's shell), so it is put
 * back on exit (it was left set). */
static void stdin_flags_restored(void)
{
    int in[2], status = -1;
    if (pipe2(in, O_CLOEXEC) < 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(in[0], 0);
        dup2(null, 1);
        dup2(null, 2);
        execl(hiernet_path, "hiernet", "agent", "--controller", "127.0.0.1", (char *)NULL);
        _exit(127);
    }
    usleep(300000); /* the agent is in its loop, stdin non-blocking */
    close(in[1]);   /* EOF: it ends */
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    CHECK_MSG(!(fcntl(in[0], F_GETFL) & O_NONBLOCK), "stdin left O_NONBLOCK");
    close(in[0]);
}

/* hiernet agent --idle-timeout VALUE: its exit status and first stderr line. */
static int agent_with_idle(const char *value, char *line, size_t cap)
{
    int err[2], status = -1;
    if (pipe2(err, O_CLOEXEC) < 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(err[1], 2);
        execl(hiernet_path, "hiernet", "agent", "--idle-timeout", value, (char *)NULL);
        _exit(127);
    }
    close(err[1]);
    ssize_t n = read(err[0], line, cap - 1);
    line[n > 0 ? n : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    close(err[0]);
    waitpid(pid, &status, 0);
    return status;
}

/* A stdin that cannot be read (a directory: EISDIR) is a broken channel:
 * exit 1, as --help says (it exited 0, as for a requested ending). */
static void unreadable_stdin(void)
{
    int err[2], status = -1;
    char line[512] = "";
    if (pipe2(err, O_CLOEXEC) < 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        int dir = open("/", O_RDONLY | O_DIRECTORY), null = open("/dev/null", O_WRONLY);
        dup2(dir, 0);
        dup2(null, 1);
        dup2(err[1], 2);
        execl(hiernet_path, "hiernet", "agent", "--machine", "t1", "--controller", "127.0.0.1",
              (char *)NULL);
        _exit(127);
    }
    close(err[1]);
    size_t len = 0;
    for (ssize_t n;
         len < sizeof line - 1 && (n = read(err[0], line + len, sizeof line - 1 - len)) > 0;)
        len += (size_t)n;
    line[len] = '\0';
    close(err[0]);
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
    CHECK_CONTAINS(line, "agent t1: tearing down: reading stdin: Is a directory");
}

/* atof took "5x" as 5 s and "nan" as a period. */
static void bad_idle_timeout(void)
{
    static const char *const bad[] = {"5x", "nan", "inf", "0", "-1", ""};
    char line[512], want[128];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int st = agent_with_idle(bad[i], line, sizeof line);
        snprintf(want, sizeof want, "hiernet agent: --idle-timeout '%s': not a positive number",
                 bad[i]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s': status %d", bad[i], st);
        CHECK_STREQ(line, want);
    }
}

/* The next message is an error response to build whose map says code
 * NET_ERR_SCENARIO (1) and message want. */
static void expect_build_error(struct agent_pipe *a, const char *want)
{
    struct proto_msg m;
    struct agent_build_error e;
    char err[256];
    CHECK(agent_next(a, &m) && m.kind == PROTO_RESPONSE);
    CHECK(m.error && m.error->type == MSGPACK_OBJECT_MAP);
    CHECK(agent_wire_read_build_error(m.error, &e, err, sizeof err) == 0);
    CHECK(e.code == 1);
    CHECK_STREQ(e.node, "");
    CHECK_STREQ(e.link, "");
    CHECK_STREQ(e.message, want);
}

static void send_build(struct agent_pipe *a, const void *part, size_t len)
{
    struct msgmap m;
    msgmap_init(&m);
    agent_wire_build(&m, &(struct agent_build){.part = part, .part_len = (uint32_t)len});
    agent_send(a, AGENT_BUILD, &m);
}

static void build_refusals(void)
{
    static const uint8_t not_a_part[] = {0x81, 0xa3, 'r', 'u', 'n', 0x05}; /* {run = 5} */
    struct agent_pipe a;
    struct proto_msg m;
    agent_start(&a, "10");
    send_build(&a, not_a_part, sizeof not_a_part);
    expect_build_error(&a, "build: before hello");
    struct msgmap u; /* served before hello, it probed for anyone */
    msgmap_init(&u);
    agent_wire_underlay(&u, &(struct agent_underlay){.address = "127.0.0.1"});
    agent_send(&a, AGENT_UNDERLAY, &u);
    CHECK(agent_next(&a, &m) && m.kind == PROTO_RESPONSE && m.error->type == MSGPACK_OBJECT_STR);
    CHECK(m.error->via.str.size == 22 &&
          !memcmp(m.error->via.str.ptr, "underlay: before hello", 22));
    send_hello(&a, HIERNET_AGENT_VERSION);
    CHECK(agent_next(&a, &m) && m.error->type == MSGPACK_OBJECT_NIL);
    CHECK(agent_pipe_call(&a, 3, "\x94", 1)); /* nothing built: dropped, logged once */
    struct msgmap b;
    msgmap_init(&b);
    msgmap_str(&b, "part", "abc");
    agent_send(&a, AGENT_BUILD, &b);
    expect_build_error(&a, "build: param 'part': expected binary, got string");
    send_build(&a, not_a_part, sizeof not_a_part);
    expect_build_error(&a, "part wire: part: field 'v' is missing");
    send_build(&a, not_a_part, sizeof not_a_part);
    expect_build_error(&a, "build: this agent has had its build already (one part per agent)");
    msgmap_init(&b);
    agent_send(&a, AGENT_TEARDOWN, &b);
    CHECK(agent_next(&a, &m) && m.kind == PROTO_RESPONSE && m.error->type == MSGPACK_OBJECT_NIL);
    int st = agent_wait(&a, 5);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    agent_pipe_close(&a);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    check_bin_path("hiernet", hiernet_path, sizeof hiernet_path);
    hello_ping_teardown();
    build_refusals();
    wrong_version();
    endings();
    unread_output();
    bad_idle_timeout();
    unreadable_stdin();
    stdin_flags_restored();
    return check_report();
}
