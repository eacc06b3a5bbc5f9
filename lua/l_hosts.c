/* l_hosts.c — a network's machines (hn.network{hosts = FILE}, --hosts), its
 * nodes' pins (net:node's host=) and its placement when it starts or is
 * drawn (issue 20). The file or Slurm is read by controller/hosts.c, the
 * placement made by topo/placement.c, the agents run by
 * controller/agent_group.c; this converts, records and refuses.
 *
 * A network whose placement puts a node on another machine is started
 * by the engine over its machines (netrun_spread) once its placement is
 * logged and recorded in run.json: the engine starts the agents and builds
 * every machine's part as they come, and once all answered their control
 * RTT and clock offset are logged and in run.json (lnet_agents_record).
 * Backend none is refused once its agents answered, naming why. */
#include "controller/hosts.h"
#include "hiernet_version.h"
#include "lua/l_net.h"
#include "topo/dot.h"
#include "topo/placement.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

void lnet_load_hosts(lua_State *L, struct hn_runtime *rt, const char *name, const char *spec,
                     struct topo_machines *out)
{
    char err[512];
    if (!spec) return;
    if (hosts_load(spec, out, err, sizeof err) == 0) return;
    topo_machines_free(out);
    rt->bad_input = true;
    luaL_error(L, "network '%s': hosts: %s", name, err);
}

void lnet_pin_node(lua_State *L, struct l_network *net, struct topo_node *n, const char *host)
{
    if (!host) return;
    /* Both are bad input (exit 2), as a bad machines file is. */
    if (strlen(host) >= sizeof n->host || !host[0]) {
        net->rt->bad_input = true;
        luaL_error(L, "node '%s': host '%s' is not a machine name (1 to %d bytes)", n->name, host,
                   (int)sizeof n->host - 1);
    }
    if (net->machines.n && topo_machines_find(&net->machines, host) < 0) {
        net->rt->bad_input = true;
        luaL_error(L, "node '%s': host '%s' is not a machine of %s", n->name, host,
                   net->machines.source);
    }
    snprintf(n->host, sizeof n->host, "%s", host);
}

/* One log line: machines, node counts, the cut links with their delays. */
static void log_placement(struct hn_runtime *rt, const struct topo_network *net,
                          const struct topo_machines *m, const struct topo_placement *p)
{
    char line[1024];
    size_t at =
        (size_t)snprintf(line, sizeof line, "network '%s': placed over %s:", net->name, m->source);
    for (size_t k = 0; k < m->n && at < sizeof line; k++)
        at += (size_t)snprintf(line + at, sizeof line - at, " %s %zu node%s%s", m->v[k].name,
                               p->count[k], p->count[k] == 1 ? "" : "s",
                               m->v[k].local ? " (local)" : "");
    if (at < sizeof line)
        snprintf(line + at, sizeof line - at, "; %zu cut link%s", p->n_cut,
                 p->n_cut == 1 ? "" : "s");
    hn_logf(rt, "%s", line);
}

static void record_placement(struct hn_runtime *rt, const struct topo_network *net,
                             const struct topo_machines *m, const struct topo_placement *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    topo_placement_write_json(p, net, m, f);
    if (fclose(f) == 0) run_add_placement(rt->run, buf);
    free(buf);
}

/* hiernet draw / place: the network (placed when it has machines) to rt->draw. */
static void draw_placed(struct hn_runtime *rt, const struct l_network *net,
                        const struct topo_placement *p)
{
    if (rt->place && p)
        topo_placement_write_text(p, net->topo, &net->machines, rt->draw);
    else if (rt->place)
        fprintf(rt->draw, "network '%s': no machines (hosts= or --hosts): all %zu nodes here\n",
                net->topo->name, net->topo->n_nodes);
    else if (p)
        topo_network_write_dot_placed(net->topo, &net->machines, p, rt->draw);
    else
        topo_network_write_dot(net->topo, rt->draw);
}

int lnet_place_or_draw(struct l_network *net, char *err, size_t errlen)
{
    struct hn_runtime *rt = net->rt;
    struct topo_placement p;
    if (!net->machines.n) {
        for (size_t i = 0; i < net->topo->n_nodes && !rt->draw; i++)
            if (net->topo->nodes[i].host[0]) {
                hn_logf(rt,
                        "network '%s': node '%s' is pinned to '%s', but the network has no "
                        "machines (hosts= or --hosts): every node runs here",
                        net->topo->name, net->topo->nodes[i].name, net->topo->nodes[i].host);
                break;
            }
        if (rt->draw) draw_placed(rt, net, NULL);
        return 0;
    }
    if (topo_placement_compute(net->topo, &net->machines, &p, err, errlen) < 0) {
        rt->bad_input = true;
        return -1;
    }
    log_placement(rt, net->topo, &net->machines, &p);
    record_placement(rt, net->topo, &net->machines, &p);
    size_t remote = topo_placement_remote_nodes(&p, &net->machines);
    if (rt->draw) draw_placed(rt, net, &p);
    topo_placement_free(&p);
    if (rt->draw || remote == 0) return 0;
    snprintf(err, errlen,
             "network '%s': %zu of its %zu nodes are placed on other machines than this one",
             net->topo->name, remote, net->topo->n_nodes);
    return 1;
}

/* ---- the agents of the other machines ---- */

void lnet_agents_record(void *ctx, struct agent_group *g)
{
    struct l_network *net = ctx;
    char *buf = NULL, line[768];
    size_t len = 0;
    for (size_t i = 0; i < agent_group_count(g); i++) {
        agent_group_describe(g, i, line, sizeof line);
        hn_logf(net->rt, "network '%s': agent %s", net->topo->name, line);
    }
    FILE *f = open_memstream(&buf, &len);
    if (f) agent_group_write_json(g, net->topo->name, f);
    if (!f || fclose(f) != 0)
        hn_logf(net->rt, "network '%s': its agents are not in run.json: out of memory",
                net->topo->name);
    else if (len)
        run_add_machines(net->rt->run, buf);
    free(buf);
}

static void on_agents_down(void *ctx, struct agent_group *g)
{
    struct l_network *net = ctx;
    agent_group_free(g);
    net->agents = NULL;
    sched_wake(net->rt->sched, net->agents_tok, NULL, NULL);
}

/* Why the backend cannot spread over machines, or NULL: backend none keeps
 * every node on this machine's loopback; the kernel backend carries a link
 * between machines as a VXLAN device, the user backend as hiernet-linkd's
 * UDP socket. */
static const char *backend_refusal(const struct topo_network *t)
{
    if (t->backend == TOPO_BACKEND_NONE)
        return "backend 'none' runs every node on this machine's loopback (use backend 'kernel', "
               "'user' or 'auto')";
    return NULL;
}

/* Backend none: the agents answered (recorded, as a spread start records
 * them), or one failed; the start is refused either way, with the
 * reason, once they are torn down. */
static void on_agents_answered(void *ctx, struct agent_group *g, const char *error)
{
    struct l_network *net = ctx;
    size_t at = strlen(net->agents_error);
    if (error) {
        snprintf(net->agents_error + at, sizeof net->agents_error - at, ": %s", error);
    } else {
        lnet_agents_record(net, g);
        snprintf(net->agents_error + at, sizeof net->agents_error - at,
                 ": their %zu agent%s answered, but %s", agent_group_count(g),
                 agent_group_count(g) == 1 ? "" : "s", backend_refusal(net->topo));
    }
    agent_group_teardown(g, on_agents_down, net);
}

static int agents_k(lua_State *L, int status, lua_KContext ctx)
{
    struct l_network *net = (struct l_network *)ctx;
    net->rt->env_failure = true;
    return luaL_error(L, "%s", net->agents_error);
}

/* The run's id for the agents' logs: its results directory's name. */
static const char *run_name(const struct hn_runtime *rt)
{
    const char *dir = rt->run->dir ? rt->run->dir : "";
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

static void agent_options(struct l_network *net, struct agent_client_options *o)
{
    agent_client_options_default(o);
    o->version = HIERNET_AGENT_VERSION;
    o->run_id = run_name(net->rt); /* the run's: outlives the network */
    o->slurm = !strcmp(net->machines.source, "slurm");
}

/* Backend none cannot spread: its agents are still asked (doctor's view
 * of them in the log and run.json), then the start is refused. */
static int agents_then_refuse(lua_State *L, struct l_network *net, const char *why)
{
    struct agent_client_options o;
    char err[512];
    agent_options(net, &o);
    snprintf(net->agents_error, sizeof net->agents_error, "%s", why);
    net->agents = agent_group_start(net->rt->loop, &net->machines, &o, on_agents_answered, net, err,
                                    sizeof err);
    if (!net->agents) {
        net->rt->env_failure = true;
        return luaL_error(L, "%s: %s", why, err);
    }
    net->agents_tok = sched_suspend(L);
    return lua_yieldk(L, 0, (lua_KContext)net, agents_k);
}

int lnet_start_placed(lua_State *L, struct l_network *net, const char *why)
{
    if (backend_refusal(net->topo)) return agents_then_refuse(L, net, why);
    agent_options(net, &net->agent_options);
    return lnet_start_spread(L, net, &net->agent_options, why);
}

void lnet_agents_free(struct l_network *net)
{
    agent_group_free(net->agents);
    net->agents = NULL;
}
