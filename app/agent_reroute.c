/* agent_reroute.c — an agent's share of a move over machines (t:move;
 * proto/agent_wire.h `reroute`): the moved link, when this machine holds
 * it, and the routes the move changes for the part's hosts, computed by
 * the controller on the whole network (controller/netrun_parts.c) and
 * mapped here onto the part's own indices. */
#include "app/agent_part_internal.h"

#include "topo/route_change.h"

#include <stdio.h>
#include <stdlib.h>

/* The routes in the part's indices into out (allocated), or -1 with line. */
static int part_changes(const struct topo_part *part, const struct agent_reroute *r,
                        struct topo_route_change **out, char *line, size_t len)
{
    *out = calloc(r->n_routes ? r->n_routes : 1, sizeof **out);
    if (!*out) return snprintf(line, len, "reroute: out of memory"), -1;
    for (size_t i = 0; i < r->n_routes; i++) {
        const struct agent_route *w = &r->routes[i];
        struct topo_route whole = {w->dst,       w->dst_len, (int)w->dst_node,
                                   (int)w->link, w->gateway, (int)w->via};
        if (w->node > INT32_MAX || w->link > INT32_MAX || w->dst_node > INT32_MAX ||
            w->via > INT32_MAX ||
            topo_part_route_from_whole(part, (int)w->node, &whole, &(*out)[i].node,
                                       &(*out)[i].route) < 0) {
            free(*out);
            return snprintf(line, len,
                            "reroute: route %zu: node %llu or link %llu is not in this part", i,
                            (unsigned long long)w->node, (unsigned long long)w->link),
                   -1;
        }
    }
    return 0;
}

/* The moved link's part indices, or -1 with line. */
static int part_move(const struct topo_part *part, const struct agent_reroute *r, int *l,
                     int *stays, int *to, char *line, size_t len)
{
    *l = *stays = *to = -1;
    if (!r->move) return 0;
    long k = topo_part_link(part, r->link);
    if (k >= 0 && !part->net->links[k].vni) *l = (int)k; /* a cut link is not moved */
    *stays = (int)topo_part_own_node(part, r->stays);
    *to = (int)topo_part_own_node(part, r->to);
    if (*l >= 0 && *stays >= 0 && *to >= 0) return 0;
    return snprintf(line, len,
                    "reroute: move of link %llu from node %llu to node %llu: not wholly in this "
                    "part",
                    (unsigned long long)r->link, (unsigned long long)r->stays,
                    (unsigned long long)r->to),
           -1;
}

void agent_part_reroute(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    char line[AGENT_ERROR_MAX], err[600];
    struct agent_reroute r;
    struct topo_route_change *changes = NULL;
    int l, stays, to;
    if (p->state != PART_BUILT) {
        snprintf(line, sizeof line, "reroute: no part is built on this machine");
        return part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
    }
    const struct topo_part *part = part_model(p->run);
    if (agent_wire_read_reroute(params, &r, line, sizeof line) < 0)
        return part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
    int rc = part_move(part, &r, &l, &stays, &to, line, sizeof line);
    if (rc == 0) rc = part_changes(part, &r, &changes, line, sizeof line);
    if (rc == 0 && netrun_link_move_routes(part_netrun(p->run), l, stays, to, changes, r.n_routes,
                                           err, sizeof err) < 0) {
        snprintf(line, sizeof line, "reroute: %s", err);
        rc = -1;
    }
    free(changes);
    agent_reroute_free(&r);
    if (l >= 0) agent_stats_rename(p->stats); /* the moved link's rows, by its new ends */
    if (rc < 0) return part_answer_error(p, msgid, NET_ERR_ENVIRONMENT, NULL, NULL, line);
    part_answer_done(p, msgid);
}
