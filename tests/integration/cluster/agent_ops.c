/* agent_ops.c — hn-agent-ops, the test netns.agent_ops (issue 20): the
 * real `hiernet agent --machine m1` over pipes on this host, its part
 * h1 - s1 - h2 (kernel backend) built with stats, driven by the run-time
 * requests a controller sends:
 *
 *   hn-agent-ops HIERNET
 *
 *   - link set on h1-s1 (whole index 0): rate 5 Mbit/s, then 7 Mbit/s, is
 *     h1's HTB class's (tc class show in h1's namespace);
 *   - link down: h1's end loses its carrier; up: it has it again;
 *   - a link and a node not in the part are refused in one line naming
 *     the index and the machine;
 *   - partition sides {h1 = 1, s1 = 2, h2 = 2}: h1 no longer pings h2;
 *     heal answers healed = 1 and the ping goes through again;
 *   - stats: rows of link 0 (ab, h1's sending direction) arrive every
 *     second, and its bytes grow by at least the bytes 20 pings of 1000
 *     bytes put on the wire (20 x 1042), and by less than 4 KiB more, each
 *     stats t_ns on this host's CLOCK_MONOTONIC (the agent's) since the start;
 *   - kill h2: an exit notification names node 2, signal 9; restart h2:
 *     answered once relayed (the new peer's secret answered: no poll), a
 *     call chunk for h2 sent before that answer is dropped and the log
 *     says h2 is being restarted, and a norm{} sent to the new peer
 *     through call chunks is answered exactly;
 *   - teardown answered, exit 0, no registry entry, no peer left;
 *   - a second agent builds m1's part of h1 (m1) - h2 (m2) on the user
 *     backend whose cut link's UDP port (16384 + VNI mod 8192 on
 *     127.0.0.1) this test holds: the build's error map names the link
 *     (field `link` "h1-h2"), code 2 (the machine's), the message the bind.
 * Prints "ok: ..." or "FAIL: ..." per check; exit 0, 1 on a failure, 77
 * without root or where the part cannot be built (one line). */
#include "controller/registry.h"
#include "proto/agent_wire.h"
#include "proto/protocol.h"
#include "tests/lib/agent_part_fixture.h"
#include "tests/lib/check_lines.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN "agentops"
#define WAIT_MS 60000
#define PINGS 20
#define PING_SIZE 1000
#define PING_WIRE (PING_SIZE + 8 + 20 + 14) /* ICMP, IPv4 and Ethernet headers */

static char err[1024];
static char h2_addr[INET_ADDRSTRLEN];

/* The newest stats row of link 0, direction ab (bytes; -1 before any). */
static int64_t stats_bytes = -1;
static int stats_seen, stats_bad;
static int64_t started_ns; /* this test's CLOCK_MONOTONIC at start: the agent's clock too */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The fixture's network, h2's address noted; its part in wire form. */
static int part_bytes(msgpack_sbuffer *out)
{
    struct topo_network *net = agent_fixture_network(err, sizeof err);
    if (net) {
        struct in_addr in = {htonl(net->nodes[2].node_addr)};
        inet_ntop(AF_INET, &in, h2_addr, sizeof h2_addr);
    }
    return agent_fixture_part(net, RUN, 4243, out, err, sizeof err);
}

/* ---- the agent's messages ---- */

static void note_stats(const struct proto_msg *m)
{
    struct agent_stats st;
    if (m->kind != PROTO_NOTIFY || agent_method_find(m->method, m->method_len) != AGENT_STATS)
        return;
    if (agent_wire_read_stats(m->params, &st, err, sizeof err) < 0) {
        stats_bad++;
        return;
    }
    if (st.t_ns < started_ns || st.t_ns > now_ns()) stats_bad++; /* not on the host's clock */
    for (size_t i = 0; i < st.n_rows; i++)
        if (st.rows[i].link == 0 && !strcmp(st.rows[i].dir, "ab")) {
            stats_bytes = st.rows[i].bytes;
            stats_seen++;
        }
    agent_stats_free(&st);
}

/* The agent's next message within WAIT_MS (stats noted on the way). */
static bool agent_next(struct agent_pipe *a, struct proto_msg *m)
{
    bool ok = agent_pipe_next(a, m, WAIT_MS);
    if (ok) note_stats(m);
    return ok;
}

/* The answer to request id: its error (NULL: done) into e, result kept in
 * *res until the next message. false: no answer. */
static bool answer(struct agent_pipe *a, uint32_t id, struct agent_build_error *e,
                   struct proto_msg *res)
{
    memset(e, 0, sizeof *e);
    while (id && agent_next(a, res))
        if (res->kind == PROTO_RESPONSE && res->msgid == id) {
            if (res->error->type == MSGPACK_OBJECT_MAP)
                agent_wire_read_build_error(res->error, e, err, sizeof err);
            else if (res->error->type != MSGPACK_OBJECT_NIL)
                snprintf(e->message, sizeof e->message, "(an error that is not a map)");
            return true;
        }
    return false;
}

/* Sends request method with params m; its answer as answer() says. */
static bool ask(struct agent_pipe *a, enum agent_method method, struct msgmap *m,
                struct agent_build_error *e, struct proto_msg *res)
{
    return answer(a, agent_pipe_request(a, method, m), e, res);
}

static bool done(struct agent_pipe *a, enum agent_method method, struct msgmap *m,
                 struct proto_msg *res, const char *what)
{
    struct agent_build_error e;
    bool ok = ask(a, method, m, &e, res) && !e.message[0];
    check(ok, "%s done%s%s", what, e.message[0] ? ": " : "", e.message);
    return ok;
}

/* ---- the namespace's view ---- */

/* Runs cmd in pid's network namespace: its exit status, its output in out. */
static int in_ns(pid_t pid, const char *cmd, char *out, size_t cap)
{
    char line[512];
    snprintf(line, sizeof line, "nsenter -t %d -n sh -c '%s' 2>&1", (int)pid, cmd);
    FILE *p = popen(line, "r");
    size_t n = p ? fread(out, 1, cap - 1, p) : 0;
    out[n] = '\0';
    int st = p ? pclose(p) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether any of count pings from h1 reaches h2 (ping's exit 0): on a
 * loaded host the first may wait for ARP after the link came back up. */
static bool ping_h2(pid_t h1, int count)
{
    char cmd[160], out[4096];
    snprintf(cmd, sizeof cmd, "ping -n -q -c %d -i 0.05 -W 2 -s %d %s", count, PING_SIZE, h2_addr);
    return in_ns(h1, cmd, out, sizeof out) == 0;
}

/* ---- the requests ---- */

static void link_set_rate(struct agent_pipe *a, pid_t h1, uint64_t rate, const char *shown)
{
    struct topo_link_params lp = {.rate_bps = rate};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    topo_part_params_pack(&pk, &lp);
    struct msgmap m;
    struct proto_msg r;
    char what[64], out[4096];
    msgmap_init(&m);
    agent_wire_link(&m, 0, AGENT_LINK_SET, sb.data, sb.size);
    snprintf(what, sizeof what, "link set rate %s", shown);
    bool ok = done(a, AGENT_LINK, &m, &r, what);
    msgpack_sbuffer_destroy(&sb);
    in_ns(h1, "tc class show dev s1", out, sizeof out); /* h1's end is named after s1 */
    check(ok && strstr(out, shown), "h1's HTB class shows rate %s", shown);
    if (!strstr(out, shown)) printf("%s", out);
}

/* Whether h1's one link (not lo) has its carrier (LOWER_UP), within 3 s. */
static bool h1_carrier(pid_t h1, bool want)
{
    char out[4096];
    for (int t = 0; t < 30; t++) {
        in_ns(h1, "ip -o link show | grep -v \": lo:\"", out, sizeof out);
        if ((strstr(out, "LOWER_UP") != NULL) == want) return true;
        usleep(100000);
    }
    return false;
}

static void link_down_up(struct agent_pipe *a, pid_t h1)
{
    struct msgmap m;
    struct proto_msg r;
    msgmap_init(&m);
    agent_wire_link(&m, 0, AGENT_LINK_DOWN, NULL, 0);
    bool ok = done(a, AGENT_LINK, &m, &r, "link down");
    check(ok && h1_carrier(h1, false), "h1's end has no carrier once the link is down");
    msgmap_init(&m);
    agent_wire_link(&m, 0, AGENT_LINK_UP, NULL, 0);
    ok = done(a, AGENT_LINK, &m, &r, "link up");
    check(ok && h1_carrier(h1, true), "h1's end has its carrier again once up");
}

static void refusals(struct agent_pipe *a)
{
    struct msgmap m;
    struct proto_msg r;
    struct agent_build_error e;
    msgmap_init(&m);
    agent_wire_link(&m, 5, AGENT_LINK_UP, NULL, 0);
    check(ask(a, AGENT_LINK, &m, &e, &r) &&
              !strcmp(e.message, "link: link 5 is not in this machine's part") && e.code == 1,
          "link 5 refused: '%s'", e.message);
    msgmap_init(&m);
    agent_wire_node(&m, &(struct agent_node){1});
    check(ask(a, AGENT_KILL, &m, &e, &r) &&
              !strcmp(e.message, "kill: node 1 is not a host of this machine's part"),
          "kill of s1 refused: '%s'", e.message);
}

static void partition_heal(struct agent_pipe *a, pid_t h1)
{
    unsigned char side[3] = {1, 2, 2};
    struct msgmap m;
    struct proto_msg r;
    check(ping_h2(h1, 5), "h1 pings h2 before the partition");
    msgmap_init(&m);
    agent_wire_sides(&m, &(struct agent_sides){side, 3});
    bool ok = done(a, AGENT_PARTITION, &m, &r, "partition {h1} | {s1, h2}");
    check(ok && !ping_h2(h1, 5), "h1 no longer pings h2 (none of 5 pings)");
    msgmap_init(&m);
    agent_wire_sides(&m, &(struct agent_sides){NULL, 0});
    uint64_t healed = 0;
    ok = done(a, AGENT_HEAL, &m, &r, "heal {}") &&
         agent_wire_read_heal_reply(r.result, &healed, err, sizeof err) == 0;
    check(ok && healed == 1, "heal answered healed = %llu", (unsigned long long)healed);
    check(ping_h2(h1, 5), "h1 pings h2 again after the heal");
}

/* Waits for n more stats rows of link 0 ab (a second each). */
static void stats_wait(struct agent_pipe *a, int n)
{
    struct proto_msg m;
    int until = stats_seen + n;
    while (stats_seen < until && agent_next(a, &m))
        continue;
}

static void stats_grow(struct agent_pipe *a, pid_t h1)
{
    stats_wait(a, 1);
    int64_t before = stats_bytes;
    check(ping_h2(h1, PINGS), "%d pings of %d bytes from h1 to h2", PINGS, PING_SIZE);
    /* rows sampled during the pings may wait in the pipe; two seconds of
     * rows after the pings' end are surely sampled after it */
    stats_wait(a, 3);
    int64_t grown = stats_bytes - before, least = PINGS * PING_WIRE;
    check(before >= 0 && grown >= least && grown < least + 4096 && stats_bad == 0,
          "link 0 ab's bytes grew by %lld, the pings put %lld on the wire (%d rows, %d bad or "
          "off the agent's clock)",
          (long long)grown, (long long)least, stats_seen, stats_bad);
}

/* tensor{y} and norm{y} to node 2 through call chunks: norm is 5. */
static bool norm_of_h2(struct agent_pipe *a, uint32_t msgid)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "name", "y");
    msgmap_i64(&m, "size", 4);
    msgmap_f64(&m, "fill", 2.5);
    msgmap_request(&m, &pk, msgid, "tensor");
    msgmap_init(&m);
    msgmap_str(&m, "x", "y");
    msgmap_request(&m, &pk, msgid + 1, "norm");
    bool sent =
        agent_pipe_call(a, 2, sb.data, 3) && agent_pipe_call(a, 2, sb.data + 3, sb.size - 3);
    msgpack_sbuffer_destroy(&sb);
    struct agent_pipe_stream s;
    struct proto_msg r;
    double value = -1;
    agent_pipe_stream_init(&s, 2);
    while (sent && agent_pipe_stream_response(a, &s, &r, WAIT_MS))
        if (r.msgid == msgid + 1) {
            struct proto_args args;
            proto_args_init(&args, r.result);
            proto_arg_f64(&args, "value", &value);
            break;
        }
    agent_pipe_stream_destroy(&s);
    return value == 5.0;
}

static void kill_restart(struct agent_pipe *a)
{
    struct msgmap m;
    struct proto_msg r;
    struct agent_exit x = {.node = 99};
    check(norm_of_h2(a, 10), "h2 answers norm{} through the relay");
    msgmap_init(&m);
    agent_wire_node(&m, &(struct agent_node){2});
    done(a, AGENT_KILL, &m, &r, "kill h2");
    while (agent_next(a, &r))
        if (r.kind == PROTO_NOTIFY && agent_method_find(r.method, r.method_len) == AGENT_EXIT &&
            agent_wire_read_exit(r.params, &x, err, sizeof err) == 0)
            break;
    check(x.node == 2 && WIFSIGNALED(x.status) && WTERMSIG(x.status) == SIGKILL,
          "exit names node 2 killed by signal 9 (node %llu)", (unsigned long long)x.node);
    msgmap_init(&m);
    agent_wire_node(&m, &(struct agent_node){2});
    uint32_t id = agent_pipe_request(a, AGENT_RESTART, &m);
    /* a chunk for h2 while its restart is under way: dropped, and the
     * log says why (it said "not a host") */
    check(agent_pipe_call(a, 2, "\x94", 1), "a call chunk for h2 sent during its restart");
    struct agent_build_error e;
    bool ok = answer(a, id, &e, &r) && !e.message[0];
    check(ok, "restart h2 done%s%s", e.message[0] ? ": " : "", e.message);
    check(ok && norm_of_h2(a, 20), "the restarted h2 answers norm{} through the relay");
}

/* ---- a part whose cut link cannot be built ---- */

#define CUT_VNI 4300u

/* h1 on m1 (127.0.0.1) - h2 on m2 (127.0.0.2), user backend: m1's part. */
static int cut_part_bytes(msgpack_sbuffer *out)
{
    struct topo_network *net = topo_network_new("cut", TOPO_BACKEND_USER, 1, err, sizeof err);
    struct topo_link_params lan = {0};
    int h1 = net ? topo_node_add(net, "h1", TOPO_NODE_HOST, err, sizeof err) : -1;
    int h2 = net ? topo_node_add(net, "h2", TOPO_NODE_HOST, err, sizeof err) : -1;
    if (h1 != 0 || h2 != 1 || topo_link_add(net, h1, h2, &lan, err, sizeof err) < 0 ||
        topo_assign_addresses(net, err, sizeof err) < 0) {
        topo_network_free(net);
        return -1;
    }
    snprintf(net->nodes[1].host, sizeof net->nodes[1].host, "m2");
    return agent_fixture_part_over(net, RUN, CUT_VNI, 2, out, err, sizeof err);
}

/* UDP 127.0.0.1 on the cut link's port, held (no SO_REUSEADDR): -1 on failure. */
static int hold_cut_port(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(16384 + CUT_VNI % 8192),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

static void cut_link_refused(char **args)
{
    struct agent_pipe a;
    msgpack_sbuffer part;
    msgpack_sbuffer_init(&part);
    int held = hold_cut_port();
    check(held >= 0, "UDP 127.0.0.1:%u held", 16384 + CUT_VNI % 8192);
    if (held < 0 || cut_part_bytes(&part) < 0 || agent_pipe_start(&a, args, false) < 0) {
        check(0, "the cut part and its agent: %s", err);
        return;
    }
    check(agent_fixture_hello(&a, RUN, WAIT_MS), "the second agent: hello answered");
    struct msgmap q;
    struct proto_msg m;
    struct agent_build_error e;
    msgmap_init(&q);
    agent_wire_build(&q,
                     &(struct agent_build){(const uint8_t *)part.data, (uint32_t)part.size, false});
    bool answered = ask(&a, AGENT_BUILD, &q, &e, &m);
    check(answered && e.code == 2 && !strcmp(e.link, "h1-h2") && !e.node[0] &&
              strstr(e.message, "bind (the port is another link's on this machine)"),
          "the cut link's build refused naming it: code %d, link '%s', node '%s': %s", (int)e.code,
          e.link, e.node, e.message);
    msgmap_init(&q);
    check(done(&a, AGENT_TEARDOWN, &q, &m, "the second agent's teardown"), "teardown answered");
    int status = -1;
    for (int t = 0; t < 300 && waitpid(a.pid, &status, WNOHANG) == 0; t++)
        usleep(100000);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the second agent exited 0 (status %d)",
          status);
    agent_pipe_close(&a);
    msgpack_sbuffer_destroy(&part);
    close(held);
}

/* ---- the session ---- */

/* build with stats: 1 built, 0 failed, 77 the machine cannot. */
static int build(struct agent_pipe *a, char *id, size_t cap)
{
    msgpack_sbuffer part;
    msgpack_sbuffer_init(&part);
    if (part_bytes(&part) < 0) return check(0, "the part: %s", err), 0;
    struct msgmap q;
    struct proto_msg m;
    struct agent_build_reply r;
    struct agent_build_error e;
    msgmap_init(&q);
    agent_wire_build(&q,
                     &(struct agent_build){(const uint8_t *)part.data, (uint32_t)part.size, true});
    bool answered = ask(a, AGENT_BUILD, &q, &e, &m);
    msgpack_sbuffer_destroy(&part);
    if (answered && e.code == 2)
        return printf("SKIP: this machine cannot build: %s\n", e.message), 77;
    bool ok = answered && !e.message[0] &&
              agent_wire_read_build_reply(m.result, &r, err, sizeof err) == 0;
    check(ok, "build with stats answered%s%s", e.message[0] ? ": " : "", e.message);
    snprintf(id, cap, "%s", ok ? r.registry : "");
    return ok;
}

/* The agent's stderr, in a file of its own (log_path) while it runs. */
static char log_path[] = "/tmp/hn-agent-ops-log-XXXXXX";

static int agent_start_logged(struct agent_pipe *a, char **args)
{
    int log = mkstemp(log_path), saved = dup(2);
    if (log < 0 || saved < 0) return -1;
    dup2(log, 2);
    int rc = agent_pipe_start(a, args, false);
    dup2(saved, 2);
    close(saved);
    close(log);
    return rc;
}

/* The drop of the call for h2 during its restart, logged as such. */
static void drop_logged(void)
{
    char text[1 << 16];
    FILE *f = fopen(log_path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    check(strstr(text, "call dropped: node 2 of machine m1's part is being restarted") != NULL,
          "the agent logged the call for h2 as dropped because h2 is being restarted");
    if (check_failed) fprintf(stderr, "the agent's log:\n%s", text);
    unlink(log_path);
}

static void teardown(struct agent_pipe *a, const char *dir, pid_t h1)
{
    struct msgmap q;
    struct proto_msg m;
    msgmap_init(&q);
    check(done(a, AGENT_TEARDOWN, &q, &m, "teardown"), "teardown answered");
    int status = -1;
    for (int t = 0; t < 300 && waitpid(a->pid, &status, WNOHANG) == 0; t++)
        usleep(100000);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the agent exited 0 (status %d)", status);
    struct stat st;
    check(stat(dir, &st) < 0 && errno == ENOENT, "the registry entry %s is gone", dir);
    check(h1 <= 0 || kill(h1, 0) < 0, "h1's peer %d is gone", (int)h1);
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: hn-agent-ops HIERNET\n"), 2;
    if (geteuid() != 0) return printf("SKIP: needs root (namespaces, veths, qdiscs)\n"), 77;
    started_ns = now_ns();
    signal(SIGPIPE, SIG_IGN);
    char root[] = "/tmp/hn-agent-ops-XXXXXX";
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    setenv(REGISTRY_ENV_ROOT, root, 1);
    char *args[] = {argv[1],     "agent",          "--machine", "m1", "--controller",
                    "127.0.0.1", "--idle-timeout", "120",       NULL};
    struct agent_pipe a;
    char id[AGENT_REGISTRY_ID_MAX], dir[600];
    if (agent_start_logged(&a, args) < 0) return printf("FAIL: start the agent\n"), 1;
    check(agent_fixture_hello(&a, RUN, WAIT_MS), "hello answered");
    int built = build(&a, id, sizeof id);
    snprintf(dir, sizeof dir, "%s/%s", root, id);
    pid_t h1 = built == 1 ? agent_fixture_peer(dir, "h1") : -1;
    if (built == 1) {
        link_set_rate(&a, h1, 5000000, "5Mbit");
        link_set_rate(&a, h1, 7000000, "7Mbit");
        link_down_up(&a, h1);
        refusals(&a);
        partition_heal(&a, h1);
        stats_grow(&a, h1);
        kill_restart(&a);
    }
    teardown(&a, dir, h1);
    agent_pipe_close(&a);
    if (built == 1)
        drop_logged();
    else
        unlink(log_path);
    if (built == 1) cut_link_refused(args);
    if (rmdir(root) < 0) check(0, "the private registry %s is empty: %s", root, strerror(errno));
    return built == 77 ? 77 : check_failed;
}
