/* l_hosts.c — a network's machines (hn.network{hosts = FILE}, --hosts), its
 * nodes' pins (net:node's host=) and its placement when it starts or is
 * drawn (issue 20). The file or Slurm is read by controller/hosts.c, the
 * placement made by topo/placement.c; this converts, records and refuses.
 *
 * Until the agent exists (issue 20, item 2), a network whose placement puts
 * a node on another machine is refused at its start, after its placement is
 * logged and recorded in run.json. */
#include "controller/hosts.h"
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
    rt->env_failure = true;
    snprintf(err, errlen,
             "network '%s': %zu of its %zu nodes are placed on other machines than this one: "
             "multi-machine runs need the hiernet agent, not yet built",
             net->topo->name, remote, net->topo->n_nodes);
    return -1;
}
