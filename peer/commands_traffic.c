/* commands_traffic.c — traffic_sink, traffic_source, traffic_stats and
 * traffic_stop (see commands_traffic.h): params checked on the loop thread,
 * the flows run by traffic.c, which the server gets on first use. */
#include "peer/commands_traffic.h"

#include <stdio.h>
#include <string.h>

#include "peer/command_job.h"
#include "peer/traffic.h"

struct traffic_params {
    char id[TRAFFIC_ID_MAX + 1];
    char to[96];
    enum traffic_proto proto;
    enum traffic_pattern pattern;
    double rate, on_s, off_s;
    int64_t seed, bytes, size;
};

static void traffic_module_destroy(void *state)
{
    traffic_destroy(state);
}

/* The server keeps its flows as this module's state. */
static const struct peer_module traffic_module = {
    .name = "traffic",
    .destroy = traffic_module_destroy,
};

/* The server's flows, made with the first traffic command. */
static struct traffic *traffic_of(struct command_job *j)
{
    struct peer_server *s = j->server;
    struct traffic *t = peer_server_state(s, &traffic_module);
    if (t) return t;
    t = traffic_create(s->loop, s->cfg.dilation);
    if (t && !peer_server_keep(s, &traffic_module, t)) {
        traffic_destroy(t);
        t = NULL;
    }
    if (!t) cmd_fail(j, "out of memory");
    return t;
}

static bool traffic_arg_word(struct proto_args *a, const char *key, const char *fallback, char *dst,
                             size_t cap)
{
    snprintf(dst, cap, "%s", fallback);
    return cmd_arg_text(a, key, false, dst, cap);
}

static bool traffic_parse_id_proto(struct traffic_params *p, struct proto_args *a)
{
    char proto[8];
    if (!cmd_arg_text(a, "id", true, p->id, sizeof p->id)) return false;
    if (!traffic_arg_word(a, "proto", "udp", proto, sizeof proto)) return false;
    if (!traffic_proto_parse(proto, &p->proto))
        return cmd_arg_fail(a, "param 'proto': '%s' is not udp or tcp", proto);
    return true;
}

static bool traffic_sink_parse(struct command_job *j, struct traffic_params *p,
                               struct proto_args *a)
{
    return traffic_parse_id_proto(p, a);
}

static bool traffic_sink_run(struct command_job *j, const struct traffic_params *p)
{
    struct traffic *t = traffic_of(j);
    if (!t) return false;
    const char *addr = j->server->cfg.addr;
    if (!addr) return cmd_fail(j, "this peer has no node address to receive on");
    char err[256];
    int port = 0;
    if (traffic_sink(t, p->id, p->proto, addr, &port, err, sizeof err) < 0)
        return cmd_fail(j, "%s", err);
    cmd_result_u64(j, "port", (uint64_t)port);
    return true;
}

static bool traffic_source_numbers(struct traffic_params *p, struct proto_args *a)
{
    p->seed = 1;
    p->size = TRAFFIC_PACKET_DEFAULT;
    if (!cmd_arg_float(a, "rate", false, 0, &p->rate) ||
        !cmd_arg_float(a, "on_s", false, 0, &p->on_s) ||
        !cmd_arg_float(a, "off_s", false, 0, &p->off_s) ||
        !cmd_arg_int(a, "seed", false, 0, INT64_MAX, &p->seed) ||
        !cmd_arg_int(a, "bytes", false, 0, INT64_MAX, &p->bytes) ||
        !cmd_arg_int(a, "size", false, TRAFFIC_PACKET_MIN, TRAFFIC_PACKET_MAX, &p->size))
        return false;
    if (!(p->rate >= 0)) return cmd_arg_fail(a, "param 'rate': %g is negative", p->rate);
    if (p->rate == 0 && (p->proto == TRAFFIC_UDP || p->pattern != TRAFFIC_CONSTANT))
        return cmd_arg_fail(a, "param 'rate': needed for %s",
                            p->proto == TRAFFIC_UDP ? "udp" : "a pattern other than constant");
    if (p->pattern == TRAFFIC_ONOFF && !(p->on_s > 0 && p->off_s > 0))
        return cmd_arg_fail(a, "params 'on_s' and 'off_s': onoff needs both above 0 (got %g, %g)",
                            p->on_s, p->off_s);
    /* as net:traffic{} does: times the pattern would ignore are refused */
    if (p->pattern != TRAFFIC_ONOFF && (p->on_s != 0 || p->off_s != 0))
        return cmd_arg_fail(a, "params 'on_s' and 'off_s': only with pattern onoff");
    return true;
}

static bool traffic_source_parse(struct command_job *j, struct traffic_params *p,
                                 struct proto_args *a)
{
    char pattern[16];
    if (!traffic_parse_id_proto(p, a) || !cmd_arg_text(a, "to", true, p->to, sizeof p->to) ||
        !traffic_arg_word(a, "pattern", "constant", pattern, sizeof pattern))
        return false;
    if (!traffic_pattern_parse(pattern, &p->pattern))
        return cmd_arg_fail(a, "param 'pattern': '%s' is not constant, poisson or onoff", pattern);
    return traffic_source_numbers(p, a);
}

static bool traffic_source_run(struct command_job *j, const struct traffic_params *p)
{
    struct traffic *t = traffic_of(j);
    if (!t) return false;
    struct traffic_source_config cfg = {
        .id = p->id,
        .proto = p->proto,
        .pattern = p->pattern,
        .rate_bps = p->rate,
        .on_s = p->on_s,
        .off_s = p->off_s,
        .seed = (uint64_t)p->seed,
        .bytes = (uint64_t)p->bytes,
        .packet_bytes = (uint32_t)p->size,
        .local_addr = j->server->cfg.addr,
        .to = p->to,
    };
    char err[256];
    if (traffic_source(t, &cfg, err, sizeof err) < 0) return cmd_fail(j, "%s", err);
    return true;
}

static bool traffic_id_parse(struct command_job *j, struct traffic_params *p, struct proto_args *a)
{
    return cmd_arg_text(a, "id", true, p->id, sizeof p->id);
}

static void traffic_result(struct command_job *j, const struct traffic_counters *c)
{
    cmd_result_str(j, "role", c->source ? "source" : "sink");
    cmd_result_str(j, "proto", c->proto == TRAFFIC_UDP ? "udp" : "tcp");
    cmd_result_u64(j, "bytes", c->bytes);
    cmd_result_u64(j, "packets", c->packets);
    if (!c->source && c->proto == TRAFFIC_UDP) cmd_result_u64(j, "expected", c->expected);
    if (c->source) cmd_result_u64(j, "skipped", c->skipped);
    msgmap_bool(&j->result, "done", c->done);
    if (c->error[0]) cmd_result_str(j, "error", c->error);
    cmd_result_f64(j, "elapsed_s", c->elapsed_s);
}

/* The flow's counters; with close, the flow is closed after reading them. */
static bool traffic_report(struct command_job *j, const struct traffic_params *p, bool close)
{
    struct traffic_counters c;
    struct traffic *t = peer_server_state(j->server, &traffic_module);
    if (!(close ? traffic_stop(t, p->id, &c) : traffic_counters(t, p->id, &c)))
        return cmd_fail(j, "no traffic flow '%s'", p->id);
    traffic_result(j, &c);
    return true;
}

static bool traffic_stats_run(struct command_job *j, const struct traffic_params *p)
{
    return traffic_report(j, p, false);
}

static bool traffic_stop_run(struct command_job *j, const struct traffic_params *p)
{
    return traffic_report(j, p, true);
}

/* One params struct for the four: the adapters need a name per command. */
#define traffic_sink_params traffic_params
#define traffic_source_params traffic_params
#define traffic_stats_params traffic_params
#define traffic_stop_params traffic_params
#define traffic_stats_parse traffic_id_parse
#define traffic_stop_parse traffic_id_parse

static const char *const keys_traffic_sink[] = {"id", "proto", NULL};
static const char *const keys_traffic_source[] = {
    "id", "to", "proto", "pattern", "rate", "on_s", "off_s", "seed", "bytes", "size", NULL};
static const char *const keys_traffic_stats[] = {"id", NULL};
#define keys_traffic_stop keys_traffic_stats

COMMAND_DEFINE(traffic_cmd_sink, traffic_sink, COMMAND_NOW, (parse, run));
COMMAND_DEFINE(traffic_cmd_source, traffic_source, COMMAND_NOW, (parse, run));
COMMAND_DEFINE(traffic_cmd_stats, traffic_stats, COMMAND_NOW, (parse, run));
COMMAND_DEFINE(traffic_cmd_stop, traffic_stop, COMMAND_NOW, (parse, run));
