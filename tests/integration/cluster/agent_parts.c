/* agent_parts.c — hn-agent-parts: one network on two machines of the
 * namespace cluster, each part built by a real `hiernet agent` started
 * over SSH, its peers driven only through the agents' call relay, as the
 * controller will (issue 20; test_cluster_agent_parts.sh):
 *
 *   hn-agent-parts M1_PART M2_PART AGENT_M1 AGENT_M2
 *
 * M1_PART, M2_PART: hn-part-make's parts (h1 - s1 on m1, h2 on m2, the
 * link s1 - h2 cut); AGENT_M1, AGENT_M2: executables that start the agent
 * of that machine (the test's ssh wrappers). Both parts are built at once;
 * then, through the relays only: the data secret to both peers, h2's
 * address to h1, a tensor made on h1 and sent to h2 (peer to peer, over
 * the VXLAN link: never through an agent), read back on h2 exactly; then
 * both torn down, each agent exiting 0. Prints "ok: ..." or "FAIL: ..."
 * per check, and "registry MACHINE ID" of each part; exit 0, or 1. */
#include "tests/lib/agent_pipe.h"
#include "tests/lib/check_lines.h"
#include "topo/part.h"
#include "topo/part_wire.h"

#include "hiernet_version.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 60000 /* a build over SSH on a loaded host */
#define H1 0          /* whole-network indices (hn-part-make's order) */
#define H2 2

static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)size)) && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    *len = size > 0 ? (size_t)size : 0;
    return buf;
}

/* One machine: its agent, its part's bytes, its host's peer stream. */
struct machine {
    const char *name;
    struct agent_pipe agent;
    void *part;
    size_t part_len;
    uint32_t build_id;
    struct agent_pipe_stream peer;
};

static bool machine_start(struct machine *m, const char *name, const char *part_path,
                          const char *agent_cmd, uint64_t host)
{
    char *argv[] = {(char *)agent_cmd, NULL};
    struct agent_hello h = {.clock_ns = 1};
    struct proto_msg msg;
    m->name = name;
    agent_pipe_stream_init(&m->peer, host);
    m->part = read_file(part_path, &m->part_len);
    if (!m->part || agent_pipe_start(&m->agent, argv, false) < 0) return false;
    snprintf(h.version, sizeof h.version, "%s", HIERNET_AGENT_VERSION);
    snprintf(h.run_id, sizeof h.run_id, "agentparts");
    snprintf(h.machine, sizeof h.machine, "%s", name);
    struct msgmap q;
    msgmap_init(&q);
    agent_wire_hello(&q, &h);
    return agent_pipe_request(&m->agent, AGENT_HELLO, &q) &&
           agent_pipe_next(&m->agent, &msg, WAIT_MS) && msg.kind == PROTO_RESPONSE &&
           msg.error->type == MSGPACK_OBJECT_NIL;
}

static void build_send(struct machine *m)
{
    struct msgmap q;
    msgmap_init(&q);
    agent_wire_build(&q, &(struct agent_build){.part = m->part, .part_len = (uint32_t)m->part_len});
    m->build_id = agent_pipe_request(&m->agent, AGENT_BUILD, &q);
}

static bool build_answer(struct machine *m)
{
    struct proto_msg msg;
    struct agent_build_reply r;
    char err[1024];
    while (agent_pipe_next(&m->agent, &msg, WAIT_MS) && msg.kind != PROTO_RESPONSE)
        continue;
    if (msg.kind != PROTO_RESPONSE || msg.msgid != m->build_id) return false;
    if (msg.error->type != MSGPACK_OBJECT_NIL) {
        proto_error_text(msg.error, err, sizeof err);
        return check(0, "%s's build: %s", m->name, err), false;
    }
    if (agent_wire_read_build_reply(msg.result, &r, err, sizeof err) < 0) return false;
    printf("registry %s %s\n", m->name, r.registry);
    return true;
}

/* One request to the machine's host through the relay; its response in
 * *out (valid until the next one). */
static bool peer_call(struct machine *m, uint32_t msgid, const char *method, struct msgmap *params,
                      struct proto_msg *out)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    bool ok = msgmap_request(params, &pk, msgid, method) &&
              agent_pipe_call(&m->agent, m->peer.node, sb.data, sb.size) &&
              agent_pipe_stream_response(&m->agent, &m->peer, out, WAIT_MS) && out->msgid == msgid;
    msgpack_sbuffer_destroy(&sb);
    return ok;
}

static bool answered(bool called, const struct proto_msg *r, const char *what)
{
    char err[512] = "";
    if (called && r->error->type != MSGPACK_OBJECT_NIL) proto_error_text(r->error, err, sizeof err);
    check(called && !err[0], "%s%s%s", what, err[0] ? ": " : "", err);
    return called && !err[0];
}

/* The data plane's secret to both peers, h2's address to h1. */
static bool introduce(struct machine *m1, struct machine *m2, const struct topo_part *p1)
{
    struct proto_msg r;
    struct msgmap q, table;
    int h2 = topo_node_find(p1->net, "h2");
    msgmap_init(&q);
    msgmap_bin(&q, "secret", p1->secret, sizeof p1->secret);
    bool ok = answered(peer_call(m2, 1, "peers", &q, &r), &r, "h2 took the secret via m2's agent");
    msgmap_init(&q);
    msgmap_init(&table);
    msgmap_str(&table, "h2", h2 >= 0 ? p1->net->nodes[h2].addr : "");
    msgmap_bin(&q, "secret", p1->secret, sizeof p1->secret);
    msgmap_key(&q, "table");
    msgmap_end(&table, &q.pk);
    return answered(peer_call(m1, 1, "peers", &q, &r), &r,
                    "h1 took the secret and h2's address via m1's agent") &&
           ok;
}

/* x = {2.5 x 4} made on h1, sent to h2 over the data plane, read on h2. */
static void transfer(struct machine *m1, struct machine *m2)
{
    struct proto_msg r;
    struct msgmap q;
    msgmap_init(&q);
    msgmap_str(&q, "name", "x");
    msgmap_i64(&q, "size", 4);
    msgmap_f64(&q, "fill", 2.5);
    answered(peer_call(m1, 2, "tensor", &q, &r), &r, "h1 made x");
    msgmap_init(&q);
    msgmap_str(&q, "tensor", "x");
    msgmap_str(&q, "to", "h2");
    answered(peer_call(m1, 3, "send", &q, &r), &r, "h1 sent x to h2 across the machines");
    msgmap_init(&q);
    msgmap_str(&q, "tensor", "x");
    bool called = peer_call(m2, 2, "read", &q, &r);
    struct proto_args a;
    proto_args_init(&a, r.result);
    const msgpack_object *v = called ? proto_args_get(&a, "values") : NULL;
    int exact = 0;
    for (uint32_t i = 0; v && v->type == MSGPACK_OBJECT_ARRAY && i < v->via.array.size; i++)
        exact += v->via.array.ptr[i].via.f64 == 2.5;
    check(v && v->via.array.size == 4 && exact == 4, "h2 read x back: %d of 4 values 2.5", exact);
}

static void teardown(struct machine *m)
{
    struct msgmap q;
    struct proto_msg msg;
    msgmap_init(&q);
    uint32_t want = agent_pipe_request(&m->agent, AGENT_TEARDOWN, &q);
    bool ok = false;
    while (!ok && agent_pipe_next(&m->agent, &msg, WAIT_MS))
        ok = msg.kind == PROTO_RESPONSE && msg.msgid == want &&
             msg.error->type == MSGPACK_OBJECT_NIL;
    int status = -1;
    for (int t = 0; t < 300 && waitpid(m->agent.pid, &status, WNOHANG) == 0; t++)
        usleep(100000);
    check(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s's agent answered teardown and exited 0 (status %d)", m->name, status);
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return fprintf(stderr, "usage: hn-agent-parts M1_PART M2_PART AGENT_M1 AGENT_M2\n"), 2;
    signal(SIGPIPE, SIG_IGN); /* an agent gone: its writes fail, they do not kill */
    static struct machine ms[2];
    struct topo_part p1 = {0};
    char err[512];
    bool up = machine_start(&ms[0], "m1", argv[1], argv[3], H1) &&
              machine_start(&ms[1], "m2", argv[2], argv[4], H2);
    check(up, "both agents answered hello");
    if (up && topo_part_decode(ms[0].part, ms[0].part_len, &p1, err, sizeof err) < 0)
        up = false, check(0, "m1's part: %s", err);
    if (up) {
        build_send(&ms[0]);
        build_send(&ms[1]);
        up = build_answer(&ms[0]) && build_answer(&ms[1]);
        check(up, "both parts built at once");
    }
    if (up && introduce(&ms[0], &ms[1], &p1)) transfer(&ms[0], &ms[1]);
    for (int i = 0; i < 2; i++)
        if (ms[i].agent.pid > 0) teardown(&ms[i]);
    check(ms[0].peer.other_nodes == 0 && ms[1].peer.other_nodes == 0,
          "each agent relayed its own host only");
    topo_part_free(&p1);
    for (int i = 0; i < 2; i++) {
        if (ms[i].agent.pid > 0) agent_pipe_close(&ms[i].agent);
        if (ms[i].name) agent_pipe_stream_destroy(&ms[i].peer);
        free(ms[i].part);
    }
    return check_failed;
}
