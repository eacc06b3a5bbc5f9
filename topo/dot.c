/* dot.c — the topology as a Graphviz graph (see dot.h). Machine and node
 * names need no escaping (machines.c and network.c check them). */
#include "topo/dot.h"

#include "topo/units.h"

#include <string.h>

/* Fill colours by tier; other tiers get the default. */
static const char *tier_colour(const char *tier)
{
    static const struct {
        const char *tier, *colour;
    } colours[] = {
        {"cloud", "#9ecae1"},
        {"edge", "#a1d99b"},
        {"terminal", "#fdd49e"},
    };
    for (size_t i = 0; i < sizeof colours / sizeof *colours; i++)
        if (strcmp(colours[i].tier, tier) == 0) return colours[i].colour;
    return "#e0e0e0";
}

/* Tiers are free-form: inside a DOT string only '"' and '\\' need escaping
 * (a lone trailing backslash would swallow the closing quote), and control
 * characters become spaces. Names are [A-Za-z0-9_.-] and need none. */
static void write_dot_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
    }
}

/* Fill colours by machine (ColorBrewer's Set3), reused past twelve. */
static const char *machine_colour(int machine)
{
    static const char *const colours[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072",
                                          "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
                                          "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
    return colours[machine % (int)(sizeof colours / sizeof *colours)];
}

/* machine: the name of the machine it is placed on, or NULL (coloured by tier). */
static void write_node(const struct topo_node *n, const char *machine, const char *colour, FILE *f)
{
    if (n->kind == TOPO_NODE_SWITCH && !machine) {
        fprintf(f, "  \"%s\" [shape=box, style=filled, fillcolor=\"#bdbdbd\"];\n", n->name);
        return;
    }
    fprintf(f, "  \"%s\" [shape=%s, style=filled, fillcolor=\"%s\"", n->name,
            n->kind == TOPO_NODE_SWITCH ? "box" : "ellipse",
            colour ? colour : tier_colour(n->tier));
    if (n->tier[0] || n->speed != 1.0 || n->cpu > 0 || machine) {
        fprintf(f, ", label=\"%s", n->name);
        if (machine) fprintf(f, "\\n@%s", machine);
        if (n->tier[0]) {
            fputs("\\n", f);
            write_dot_text(f, n->tier);
        }
        if (n->speed != 1.0) fprintf(f, "\\nspeed %g", n->speed);
        if (n->cpu > 0) fprintf(f, "\\ncpu %g", n->cpu);
        fputc('"', f);
    }
    fputs("];\n", f);
}

/* "1Gbit 10ms ±1ms 0.5% q100": only what the link sets. */
static void link_label(const struct topo_link_params *p, char *buf, size_t len)
{
    char part[48];
    buf[0] = '\0';
    if (p->rate_bps) {
        topo_units_format_rate(p->rate_bps, part, sizeof part);
        strncat(buf, part, len - strlen(buf) - 1);
    }
    if (p->delay_ns) {
        topo_units_format_time(p->delay_ns, part, sizeof part);
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? " " : "", part);
    }
    if (p->jitter_ns) {
        topo_units_format_time(p->jitter_ns, part, sizeof part);
        snprintf(buf + strlen(buf), len - strlen(buf), " ±%s", part);
    }
    if (p->loss > 0) snprintf(buf + strlen(buf), len - strlen(buf), " %g%%", p->loss * 100);
    if (p->queue.packets)
        snprintf(buf + strlen(buf), len - strlen(buf), " q%llu",
                 (unsigned long long)p->queue.packets);
}

static void write_graph(const struct topo_network *net, const struct topo_machines *m,
                        const struct topo_placement *p, FILE *f)
{
    fprintf(f, "graph \"%s\" {\n  graph [overlap=false, splines=true];\n", net->name);
    for (size_t i = 0; i < net->n_nodes; i++)
        write_node(&net->nodes[i], p ? m->v[p->machine[i]].name : NULL,
                   p ? machine_colour(p->machine[i]) : NULL, f);
    for (size_t k = 0; k < net->n_links; k++) {
        const struct topo_link *l = &net->links[k];
        char label[160];
        link_label(&l->params, label, sizeof label);
        bool cut = p && p->machine[l->a] != p->machine[l->b];
        fprintf(f, "  \"%s\" -- \"%s\"", net->nodes[l->a].name, net->nodes[l->b].name);
        if (label[0] || cut)
            fprintf(f, " [label=\"%s\", fontsize=10%s]", label,
                    cut ? ", style=dashed, color=\"#e31a1c\"" : "");
        fputs(";\n", f);
    }
    fputs("}\n", f);
}

void topo_network_write_dot(const struct topo_network *net, FILE *f)
{
    write_graph(net, NULL, NULL, f);
}

void topo_network_write_dot_placed(const struct topo_network *net,
                                   const struct topo_machines *machines,
                                   const struct topo_placement *placement, FILE *f)
{
    write_graph(net, machines, placement, f);
}
