/* agent_build.c — hn-agent-build, the test netns.agent_build (issue 20):
 * the real `hiernet agent --machine m1` as a child over pipes on this
 * host (the machine is this host: no SSH), driven as the controller will:
 *
 *   hn-agent-build HIERNET
 *
 *   - hello, then build with the part of h1 - s1 - h2 placed wholly on m1
 *     (topo_part_make, kernel backend, h1 with cpu=0.5: a cgroup);
 *     the answer names registry entry RUN-m1 and 3 nodes;
 *   - a peer command relayed to h1 through call chunks cut at odd places
 *     (tensor{x, size 4, fill 2.5} then norm{x}): the answers come back in
 *     call chunks of node 0 only, and norm's value is exactly 5;
 *   - 40 read{} answers of h1 (13 MB) not read: the agent's memory grows
 *     by less than 9 MiB (its 4 MiB output bound), then all arrive whole;
 *   - h2's peer SIGSTOPped and 6 MiB of calls sent for it: the agent stops
 *     reading its stdin (4 MiB bound toward one peer); after SIGCONT the
 *     rest goes in and a ping is answered;
 *   - a call for s1 (a switch) is dropped and the agent serves on;
 *   - h2's peer SIGKILLed: an exit notification names node 2, signal 9;
 *   - teardown answered, the agent exits 0, and nothing is left: no
 *     registry entry, no peer, no cgroup, no process (started before the
 *     teardown) holding a node's namespace;
 *   - more agents build the same part and end by EOF on stdin (exit 0),
 *     SIGTERM (exit 143), and SIGTERM 20 ms after build was sent (exit
 *     143, once built and released): nothing is left either.
 * Prints "ok: ..." or "FAIL: ..." per check; exit 0, 1 on a failure, 77
 * without root (one line). Its registry is a private HIERNET_RUN_DIR. */
#include "controller/registry.h"
#include "proto/agent_wire.h"
#include "proto/protocol.h"
#include "tests/lib/agent_part_fixture.h"
#include "tests/lib/check_lines.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN "agentbuild"
#define WAIT_MS 60000 /* a build on a loaded host: namespaces, veths, peers */

static char err[1024];

/* ---- the part ---- */

/* m1's part (all of the network, h1 with cpu=0.5: a cgroup, which the
 * release must remove) encoded into out. */
static int part_bytes(msgpack_sbuffer *out)
{
    struct topo_network *net = agent_fixture_network(err, sizeof err);
    if (net) net->nodes[0].cpu = 0.5;
    return agent_fixture_part(net, RUN, 4242, out, err, sizeof err);
}

/* ---- the agent over pipes ---- */

static int agent_start(struct agent_pipe *a, const char *hiernet)
{
    char *argv[] = {(char *)hiernet, "agent",          "--machine", "m1", "--controller",
                    "127.0.0.1",     "--idle-timeout", "120",       NULL};
    return agent_pipe_start(a, argv, false);
}

static uint32_t agent_request(struct agent_pipe *a, enum agent_method method, struct msgmap *m)
{
    uint32_t id = agent_pipe_request(a, method, m);
    if (!id) check(0, "write %s to the agent", agent_method_name(method));
    return id;
}

static void agent_call(struct agent_pipe *a, uint64_t node, const void *data, size_t len)
{
    if (!agent_pipe_call(a, node, data, len)) check(0, "write a call to the agent");
}

/* The agent's next message within WAIT_MS; false on EOF or timeout. */
static bool agent_next(struct agent_pipe *a, struct proto_msg *m)
{
    return agent_pipe_next(a, m, WAIT_MS);
}

static bool is_method(const struct proto_msg *m, enum agent_method method)
{
    return m->kind == PROTO_NOTIFY && agent_method_find(m->method, m->method_len) == method;
}

/* Peer requests packed back to back: the bytes a controller's
 * peer_client would write, relayed as call data. tensor{name, size, fill}
 * opens them. */
struct peer_bytes {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void peer_bytes_tensor(struct peer_bytes *b, uint32_t msgid, const char *name, int64_t size,
                              double fill)
{
    msgpack_sbuffer_init(&b->sb);
    msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "name", name);
    msgmap_i64(&m, "size", size);
    msgmap_f64(&m, "fill", fill);
    msgmap_request(&m, &b->pk, msgid, "tensor");
}

/* tensor{x} and norm{x} to h1, cut into chunks of 1, 3 and the rest. */
static void relay_to_h1(struct agent_pipe *a)
{
    struct peer_bytes b;
    peer_bytes_tensor(&b, 41, "x", 4, 2.5);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_str(&m, "x", "x");
    msgmap_request(&m, &b.pk, 42, "norm");
    agent_call(a, 0, b.sb.data, 1);
    agent_call(a, 0, b.sb.data + 1, 3);
    agent_call(a, 0, b.sb.data + 4, b.sb.size - 4);
    msgpack_sbuffer_destroy(&b.sb);

    struct agent_pipe_stream s;
    struct proto_msg r;
    agent_pipe_stream_init(&s, 0);
    bool ok = agent_pipe_stream_response(a, &s, &r, WAIT_MS);
    check(ok && r.msgid == 41 && r.error->type == MSGPACK_OBJECT_NIL,
          "h1 answered tensor{} through call chunks");
    ok = agent_pipe_stream_response(a, &s, &r, WAIT_MS);
    double value = -1;
    struct proto_args args;
    proto_args_init(&args, r.result);
    if (ok && r.msgid == 42 && r.error->type == MSGPACK_OBJECT_NIL)
        proto_arg_f64(&args, "value", &value);
    check(value == 5.0, "norm{x} through the relay is exactly 5 (got %g)", value);
    check(s.other_nodes == 0, "no chunk came for another node (%d)", s.other_nodes);
    agent_pipe_stream_destroy(&s);
}

/* The agent's resident memory in KiB (VmRSS), -1 when unknown. */
static long agent_rss_kib(pid_t pid)
{
    char path[64], line[128];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

#define BIG 65536 /* floats: read{} answers about 320 KiB */
#define READS 40  /* answers: about 13 MB, three times the agent's bound */

/* A read{big} answer: its values are BIG ones. */
static bool read_answer_ok(const struct proto_msg *r, uint32_t msgid)
{
    struct proto_args args;
    proto_args_init(&args, r->result);
    const msgpack_object *v = proto_args_get(&args, "values");
    return r->msgid == msgid && r->error->type == MSGPACK_OBJECT_NIL && v &&
           v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == BIG &&
           v->via.array.ptr[0].via.f64 == 1.0 && v->via.array.ptr[BIG - 1].via.f64 == 1.0;
}

/* h1 answers READS reads while nobody reads the agent's stdout: the agent
 * stops reading h1 near its 4 MiB bound instead of queueing all 13 MB
 * (its memory grows by less than 9 MiB), and once read, every answer
 * arrives whole and in order. */
static void backpressure(struct agent_pipe *a)
{
    struct peer_bytes b;
    peer_bytes_tensor(&b, 99, "big", BIG, 1.0);
    for (uint32_t i = 0; i < READS; i++) {
        struct msgmap m;
        msgmap_init(&m);
        msgmap_str(&m, "tensor", "big");
        msgmap_request(&m, &b.pk, 100 + i, "read");
    }
    long before = agent_rss_kib(a->pid);
    agent_call(a, 0, b.sb.data, b.sb.size);
    msgpack_sbuffer_destroy(&b.sb);
    sleep(3); /* h1 answers all it can meanwhile */
    long grown = agent_rss_kib(a->pid) - before;
    check(before > 0 && grown < 9 * 1024, "unread, the agent grew by %ld KiB for ~13 MB of answers",
          grown);
    struct agent_pipe_stream s;
    struct proto_msg r;
    agent_pipe_stream_init(&s, 0);
    bool ok = agent_pipe_stream_response(a, &s, &r, WAIT_MS) && r.msgid == 99;
    int whole = 0;
    for (uint32_t i = 0; ok && i < READS; i++)
        whole += agent_pipe_stream_response(a, &s, &r, WAIT_MS) && read_answer_ok(&r, 100 + i);
    check(ok && whole == READS, "then all %d read answers arrive whole and in order (%d)", READS,
          whole);
    agent_pipe_stream_destroy(&s);
}

/* ---- what the part holds, from its registry entry ---- */

struct held {
    struct registry_proc peers[2];
    unsigned long netns[2];
    int pin[2]; /* a descriptor on each node's namespace: its inode kept */
    char cgroups[4][600];
    int n_peers, n_cgroups, n_pins;
};

/* Holds pid's namespace (if it is still `inode`) until unpin: a freed
 * namespace's inode goes to the next one any process makes, and another
 * test's controller holding that one read as a holder of ours (seen at
 * -j6). Our own descriptor is not counted (ns_holders skips this process). */
static void pin(struct held *h, pid_t pid, unsigned long inode)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && (unsigned long)st.st_ino == inode)
        h->pin[h->n_pins++] = fd;
    else if (fd >= 0)
        close(fd);
}

static void unpin(struct held *h)
{
    while (h->n_pins > 0)
        close(h->pin[--h->n_pins]);
}

static void read_held(const char *dir, struct held *h)
{
    char path[600], net[64], node[64], line[512];
    snprintf(path, sizeof path, "%s/nodes", dir);
    FILE *f = fopen(path, "r");
    long pid;
    unsigned long long start;
    unsigned long inode;
    while (f && h->n_peers < 2 &&
           fscanf(f, "%63s %63s %ld %llu %lu", net, node, &pid, &start, &inode) == 5) {
        h->peers[h->n_peers] = (struct registry_proc){(pid_t)pid, start};
        h->netns[h->n_peers++] = inode;
        pin(h, (pid_t)pid, inode);
    }
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/cgroups", dir);
    f = fopen(path, "r");
    while (f && h->n_cgroups < 4 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) snprintf(h->cgroups[h->n_cgroups++], sizeof h->cgroups[0], "%s", line);
    }
    if (f) fclose(f);
}

/* Processes started no later than `before` (clock ticks since boot) that
 * hold namespace inode, in their ns/net or an fd: inodes are reused once
 * freed, and other tests make namespaces meanwhile. */
static int ns_holders(unsigned long inode, unsigned long long before)
{
    char want[64], path[600], link[64];
    snprintf(want, sizeof want, "net:[%lu]", inode);
    DIR *proc = opendir("/proc");
    int n = 0;
    for (struct dirent *e; proc && (e = readdir(proc));) {
        struct registry_proc p;
        pid_t pid = (pid_t)atol(e->d_name);
        if (pid <= 0 || pid == getpid() || registry_proc_read(pid, &p) < 0 || p.start > before)
            continue;
        snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
        DIR *fds = opendir(path);
        for (struct dirent *d; fds && (d = readdir(fds));) {
            snprintf(path, sizeof path, "/proc/%d/fd/%s", (int)pid, d->d_name);
            ssize_t len = readlink(path, link, sizeof link - 1);
            if (len > 0 && (link[len] = '\0', !strcmp(link, want))) n++;
        }
        if (fds) closedir(fds);
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len > 0 && (link[len] = '\0', !strcmp(link, want))) n++;
    }
    if (proc) closedir(proc);
    return n;
}

static void check_nothing_left(struct held *h, const char *dir, unsigned long long before)
{
    struct stat st;
    check(stat(dir, &st) < 0 && errno == ENOENT, "the registry entry %s is gone", dir);
    for (int i = 0; i < h->n_peers; i++)
        check(!registry_proc_alive(&h->peers[i]), "peer %d is gone", (int)h->peers[i].pid);
    for (int i = 0; i < h->n_cgroups; i++)
        check(stat(h->cgroups[i], &st) < 0 && errno == ENOENT, "cgroup %s is gone", h->cgroups[i]);
    int holders = 0;
    for (int i = 0; i < h->n_peers; i++) {
        for (int t = 0; t < 50 && ns_holders(h->netns[i], before) > 0; t++)
            usleep(100000);
        holders += ns_holders(h->netns[i], before);
    }
    check(holders == 0, "no process holds a node's namespace (%d)", holders);
    unpin(h);
}

/* ---- the test ---- */

/* Sends build; its msgid, 0 when the part cannot be made. */
static uint32_t send_build(struct agent_pipe *a)
{
    msgpack_sbuffer part;
    msgpack_sbuffer_init(&part);
    if (part_bytes(&part) < 0) return check(0, "the part: %s", err), 0;
    struct msgmap q;
    msgmap_init(&q);
    agent_wire_build(&q, &(struct agent_build){.part = (const uint8_t *)part.data,
                                               .part_len = (uint32_t)part.size});
    uint32_t want = agent_request(a, AGENT_BUILD, &q);
    msgpack_sbuffer_destroy(&part);
    return want;
}

/* build; 1 built (registry id into id), 0 failed, 77 the machine cannot. */
static int build(struct agent_pipe *a, char *id, size_t cap)
{
    uint32_t want = send_build(a);
    if (!want) return 0;
    struct proto_msg m;
    struct agent_build_reply r;
    struct agent_build_error e;
    while (agent_next(a, &m) && m.kind != PROTO_RESPONSE)
        continue;
    if (m.kind != PROTO_RESPONSE || m.msgid != want) return check(0, "build answered"), 0;
    if (m.error->type == MSGPACK_OBJECT_MAP &&
        agent_wire_read_build_error(m.error, &e, err, sizeof err) == 0) {
        if (e.code == 2) return printf("SKIP: this machine cannot build: %s\n", e.message), 77;
        return check(0, "build: %s", e.message), 0;
    }
    int ok = m.error->type == MSGPACK_OBJECT_NIL &&
             agent_wire_read_build_reply(m.result, &r, err, sizeof err) == 0;
    check(ok && !strcmp(r.registry, RUN "-m1") && r.nodes == 3,
          "build answered registry %s, %llu nodes", ok ? r.registry : "?",
          ok ? (unsigned long long)r.nodes : 0ULL);
    snprintf(id, cap, "%s", ok ? r.registry : "");
    return ok;
}

#define HELD_BYTES (6u << 20) /* toward a stopped peer: past the agent's 4 MiB bound */

/* Call chunks of HELD_BYTES for h2 (two drop{} requests of 3 MiB names)
 * into out, ready to be written to the agent. */
static void held_calls(msgpack_sbuffer *out)
{
    static char name[3u << 20];
    struct peer_bytes b;
    msgpack_sbuffer_init(&b.sb);
    msgpack_packer_init(&b.pk, &b.sb, msgpack_sbuffer_write);
    memset(name, 'n', sizeof name - 1);
    for (uint32_t i = 0; i < 2; i++) {
        struct msgmap m;
        msgmap_init(&m);
        msgmap_str(&m, "name", name);
        msgmap_request(&m, &b.pk, 200 + i, "drop");
    }
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    for (size_t off = 0; off < b.sb.size; off += AGENT_CALL_DATA_MAX) {
        size_t len = b.sb.size - off < AGENT_CALL_DATA_MAX ? b.sb.size - off : AGENT_CALL_DATA_MAX;
        struct msgmap m;
        msgmap_init(&m);
        agent_wire_call(&m,
                        &(struct agent_call){2, (const uint8_t *)b.sb.data + off, (uint32_t)len});
        msgmap_notify(&m, &pk, agent_method_name(AGENT_CALL));
    }
    msgpack_sbuffer_destroy(&b.sb);
}

/* Writes bytes to the agent without blocking until it takes no more for
 * 1.5 s (or all are written): how many it took. */
static size_t write_until_held(struct agent_pipe *a, const char *bytes, size_t len)
{
    size_t done = 0;
    int flags = fcntl(a->to, F_GETFL);
    fcntl(a->to, F_SETFL, flags | O_NONBLOCK);
    for (int idle_ms = 0; done < len && idle_ms < 1500;) {
        ssize_t n = write(a->to, bytes + done, len - done);
        if (n > 0) {
            done += (size_t)n;
            idle_ms = 0;
        } else {
            usleep(10000);
            idle_ms += 10;
        }
    }
    fcntl(a->to, F_SETFL, flags);
    return done;
}

/* h2's peer stopped, 6 MiB of calls for it: the agent stops reading its
 * input near 4 MiB queued toward h2 (rather than queueing all); h2 goes
 * on, the rest goes in and a ping is answered. */
static void input_held(struct agent_pipe *a, const char *dir)
{
    pid_t pid = agent_fixture_peer(dir, "h2");
    msgpack_sbuffer calls;
    msgpack_sbuffer_init(&calls);
    held_calls(&calls);
    check(pid > 0 && kill(pid, SIGSTOP) == 0, "h2's peer %d stopped", (int)pid);
    size_t taken = write_until_held(a, calls.data, calls.size);
    check(taken < calls.size, "the agent stopped reading after %zu of %zu bytes for a stopped peer",
          taken, calls.size);
    kill(pid, SIGCONT);
    bool rest =
        write(a->to, calls.data + taken, calls.size - taken) == (ssize_t)(calls.size - taken);
    msgpack_sbuffer_destroy(&calls);
    struct msgmap q;
    msgmap_init(&q);
    agent_wire_ping(&q, &(struct agent_ping){1});
    uint32_t want = agent_request(a, AGENT_PING, &q);
    struct proto_msg m;
    bool answered = false;
    while (!answered && agent_next(a, &m))
        answered = m.kind == PROTO_RESPONSE && m.msgid == want;
    check(rest && answered, "once h2 went on, the rest went in and a ping was answered");
}

static void kill_h2(struct agent_pipe *a, const char *dir)
{
    pid_t pid = agent_fixture_peer(dir, "h2");
    check(pid > 0 && kill(pid, SIGKILL) == 0, "h2's peer %d killed", (int)pid);
    struct proto_msg m;
    struct agent_exit x = {.node = 99};
    while (agent_next(a, &m))
        if (is_method(&m, AGENT_EXIT) && agent_wire_read_exit(m.params, &x, err, sizeof err) == 0)
            break;
    check(x.node == 2 && WIFSIGNALED(x.status) && WTERMSIG(x.status) == SIGKILL,
          "exit names node 2 killed by signal 9 (node %llu, status %lld)",
          (unsigned long long)x.node, (long long)x.status);
}

/* How a session ends: each releases the part (agent.c's exit paths). */
enum ending { END_TEARDOWN, END_EOF, END_SIGTERM };
static const char *const ending_name[] = {"teardown", "EOF on stdin", "SIGTERM"};

static void end_session(struct agent_pipe *a, enum ending how)
{
    if (how == END_TEARDOWN) {
        struct msgmap q;
        msgmap_init(&q);
        uint32_t want = agent_request(a, AGENT_TEARDOWN, &q);
        struct proto_msg m;
        bool answered = false;
        while (!answered && agent_next(a, &m))
            answered = m.kind == PROTO_RESPONSE && m.msgid == want;
        check(answered && m.error->type == MSGPACK_OBJECT_NIL, "teardown answered");
    }
    if (how == END_EOF) close(a->to);
    if (how == END_SIGTERM) kill(a->pid, SIGTERM);
    int status = -1, want = how == END_SIGTERM ? 128 + SIGTERM : 0;
    for (int t = 0; t < 300 && waitpid(a->pid, &status, WNOHANG) == 0; t++)
        usleep(100000);
    check(WIFEXITED(status) && WEXITSTATUS(status) == want,
          "after %s the agent exited %d (status %d)", ending_name[how], want, status);
}

/* Now, in /proc/PID/stat's start unit: clock ticks since boot. */
static unsigned long long boot_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (unsigned long long)(ts.tv_sec * sysconf(_SC_CLK_TCK) +
                                ts.tv_nsec / (1000000000L / sysconf(_SC_CLK_TCK)));
}

/* One agent: hello, build, the relay's checks when `relay`, the end. */
static int session(const char *hiernet, const char *root, enum ending how, bool relay)
{
    struct agent_pipe a;
    char id[AGENT_REGISTRY_ID_MAX], dir[512];
    struct held held = {0};
    if (agent_start(&a, hiernet) < 0) return check(0, "start the agent"), 1;
    check(agent_fixture_hello(&a, RUN, WAIT_MS), "hello answered");
    int built = build(&a, id, sizeof id);
    if (built == 1) {
        snprintf(dir, sizeof dir, "%s/%s", root, id);
        read_held(dir, &held);
        check(held.n_peers == 2 && held.n_cgroups >= 1, "registry: %d peers, %d cgroups",
              held.n_peers, held.n_cgroups);
    }
    if (built == 1 && relay) {
        relay_to_h1(&a);
        backpressure(&a);
        input_held(&a, dir);
        agent_call(&a, 1, "\x90", 1); /* s1: a switch, dropped */
        kill_h2(&a, dir);
    }
    unsigned long long before = boot_ticks();
    end_session(&a, how);
    if (built == 1) check_nothing_left(&held, dir, before);
    if (how == END_EOF) a.to = -1;
    agent_pipe_close(&a);
    return built == 77 ? 77 : check_failed;
}

/* SIGTERM right after build is sent, most often while it builds: the
 * agent releases once built and exits 143 (the registry root is checked
 * empty at the end). */
static void during_build(const char *hiernet)
{
    struct agent_pipe a;
    if (agent_start(&a, hiernet) < 0) return check(0, "start the agent");
    check(agent_fixture_hello(&a, RUN, WAIT_MS), "hello answered");
    if (send_build(&a)) usleep(20000); /* read, not built: a build takes 100s of ms */
    end_session(&a, END_SIGTERM);
    agent_pipe_close(&a);
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: hn-agent-build HIERNET\n"), 2;
    if (geteuid() != 0) return printf("SKIP: needs root (namespaces, veths, cgroups)\n"), 77;
    signal(SIGPIPE, SIG_IGN);
    char root[] = "/tmp/hn-agent-build-XXXXXX";
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    setenv(REGISTRY_ENV_ROOT, root, 1);
    int rc = session(argv[1], root, END_TEARDOWN, true);
    if (rc != 77) during_build(argv[1]);
    if (rc != 77) session(argv[1], root, END_EOF, false);
    if (rc != 77) session(argv[1], root, END_SIGTERM, false);
    if (rmdir(root) < 0) check(0, "the private registry %s is empty: %s", root, strerror(errno));
    return rc == 77 ? 77 : check_failed;
}
