/* placement_write.c — a placement as run.json's entry and as the tables of
 * hiernet place (see placement.h). Machine names and addresses are checked
 * to need no JSON escaping (machines.c), node names likewise (network.c). */
#include "topo/placement.h"

#include "topo/units.h"

static void write_machines_json(const struct topo_placement *p, const struct topo_machines *m,
                                FILE *f)
{
    for (size_t k = 0; k < m->n; k++) {
        const struct topo_machine *x = &m->v[k];
        fprintf(f,
                "%s{\"name\": \"%s\", \"address\": \"%s\", \"cores\": %d, \"local\": %s, "
                "\"nodes\": %zu, \"load\": %.2f}",
                k ? ", " : "", x->name, x->address, x->cores, x->local ? "true" : "false",
                p->count[k], p->load[k]);
    }
}

void topo_placement_write_json(const struct topo_placement *p, const struct topo_network *net,
                               const struct topo_machines *m, FILE *f)
{
    fprintf(f, "{\"network\": \"%s\", \"hosts\": ", net->name);
    topo_json_write_string(f, m->source); /* the one free-form string */
    fputs(", \"machines\": [", f);
    write_machines_json(p, m, f);
    fputs("], \"nodes\": {", f);
    for (size_t i = 0; i < net->n_nodes; i++)
        fprintf(f, "%s\"%s\": \"%s\"", i ? ", " : "", net->nodes[i].name, m->v[p->machine[i]].name);
    fputs("}, \"pinned\": [", f);
    for (size_t i = 0, k = 0; i < net->n_nodes; i++)
        if (net->nodes[i].host[0]) fprintf(f, "%s\"%s\"", k++ ? ", " : "", net->nodes[i].name);
    fputs("], \"cut_links\": [", f);
    for (size_t c = 0; c < p->n_cut; c++) {
        const struct topo_link *l = &net->links[p->cut[c]];
        fprintf(f,
                "%s{\"a\": \"%s\", \"b\": \"%s\", \"parallel\": %d, \"machine_a\": \"%s\", "
                "\"machine_b\": \"%s\", \"delay_us\": %.3f, \"bw_bps\": %llu}",
                c ? ", " : "", net->nodes[l->a].name, net->nodes[l->b].name, l->parallel,
                m->v[p->machine[l->a]].name, m->v[p->machine[l->b]].name, l->params.delay_ns / 1e3,
                (unsigned long long)l->params.rate_bps);
    }
    fputs("]}", f);
}

static void write_machines_text(const struct topo_placement *p, const struct topo_machines *m,
                                FILE *f)
{
    fprintf(f, "%-20s %-24s %6s %6s %6s %8s\n", "machine", "address", "cores", "local", "nodes",
            "load");
    for (size_t k = 0; k < m->n; k++) {
        const struct topo_machine *x = &m->v[k];
        char cores[16];
        snprintf(cores, sizeof cores, x->cores ? "%d" : "-", x->cores);
        fprintf(f, "%-20s %-24s %6s %6s %6zu %8.2f\n", x->name, x->address, cores,
                x->local ? "yes" : "no", p->count[k], p->load[k]);
    }
}

static void write_cut_text(const struct topo_placement *p, const struct topo_network *net,
                           const struct topo_machines *m, FILE *f)
{
    fprintf(f, "cut links: %zu\n", p->n_cut);
    for (size_t c = 0; c < p->n_cut; c++) {
        const struct topo_link *l = &net->links[p->cut[c]];
        char name[96], delay[32] = "0", bw[32] = "unlimited", machines[160];
        topo_link_describe(net, l, name, sizeof name);
        if (l->params.delay_ns) topo_units_format_time(l->params.delay_ns, delay, sizeof delay);
        if (l->params.rate_bps) topo_units_format_rate(l->params.rate_bps, bw, sizeof bw);
        snprintf(machines, sizeof machines, "%s-%s", m->v[p->machine[l->a]].name,
                 m->v[p->machine[l->b]].name);
        fprintf(f, "  %-24s %-30s delay %-8s bw %s\n", name, machines, delay, bw);
    }
}

void topo_placement_write_text(const struct topo_placement *p, const struct topo_network *net,
                               const struct topo_machines *m, FILE *f)
{
    fprintf(f, "network '%s': %zu nodes on %zu machines of %s\n", net->name, net->n_nodes, m->n,
            m->source);
    write_machines_text(p, m, f);
    fprintf(f, "%-20s %s\n", "node", "machine");
    for (size_t i = 0; i < net->n_nodes; i++)
        fprintf(f, "%-20s %s%s\n", net->nodes[i].name, m->v[p->machine[i]].name,
                net->nodes[i].host[0] ? " (pinned)" : "");
    write_cut_text(p, net, m, f);
}
