/* linkd_stalls.c — hiernet-linkd's stalls (see linkd_stalls.h). */
#include "controller/linkd_stalls.h"

#include "common/json.h"
#include "topo/network.h"

#include <math.h>

/* The kernel's minimum RTO (TCP_RTO_MIN): real time, whatever the dilation. */
#define KERNEL_RTO_MIN_S 0.2

double linkd_stall_threshold(const struct topo_network *net)
{
    double d = net->dilation >= 1 ? net->dilation : 1, shortest = 0;
    for (size_t i = 0; i < net->n_nodes; i++) {
        const struct topo_node *n = &net->nodes[i];
        if (n->kind != TOPO_NODE_HOST) continue;
        double rto_min = n->tcp.rto_min_ns ? (double)n->tcp.rto_min_ns / 1e9 * d : KERNEL_RTO_MIN_S;
        if (shortest == 0 || rto_min < shortest) shortest = rto_min;
    }
    return shortest > 0 ? shortest : KERNEL_RTO_MIN_S;
}

bool linkd_stall_is(double rise_s, double interval_s, double threshold_s)
{
    return threshold_s > 0 && rise_s >= threshold_s && rise_s >= LINKD_STALL_SHARE * interval_s;
}

void linkd_stalls_watch(struct linkd_stalls *s, double threshold_s)
{
    if (threshold_s > 0 && (s->threshold_wall_s == 0 || threshold_s < s->threshold_wall_s))
        s->threshold_wall_s = threshold_s;
}

void linkd_stalls_note(struct linkd_stalls *s, const struct linkd_stall *st)
{
    s->count++;
    s->total_wall_s += st->wall_s;
    if (st->wall_s > s->longest_wall_s) s->longest_wall_s = st->wall_s;
    if (s->n_kept < LINKD_STALLS_KEPT) s->kept[s->n_kept++] = *st;
}

void linkd_stalls_write_json(FILE *f, const struct linkd_stalls *s)
{
    fputs("{\"threshold_wall_s\": ", f);
    json_write_number(f, s->threshold_wall_s > 0 ? s->threshold_wall_s : NAN);
    fprintf(f, ", \"count\": %llu, \"longest_wall_s\": ", (unsigned long long)s->count);
    json_write_number(f, s->longest_wall_s);
    fputs(", \"total_wall_s\": ", f);
    json_write_number(f, s->total_wall_s);
    fputs(", \"stalls\": [", f);
    for (size_t i = 0; i < s->n_kept; i++) {
        fputs(i ? ", {\"at_s\": " : "{\"at_s\": ", f);
        json_write_number(f, s->kept[i].at_s);
        fputs(", \"wall_s\": ", f);
        json_write_number(f, s->kept[i].wall_s);
        fputs(", \"machine\": ", f);
        json_write_string_or_null(f, s->kept[i].machine);
        fputc('}', f);
    }
    fputs("]}", f);
}

bool linkd_stalls_note_line(const struct linkd_stalls *s, char *buf, size_t len)
{
    if (!s->count) return false;
    char first[48] = "";
    if (s->n_kept && isfinite(s->kept[0].at_s))
        snprintf(first, sizeof first, ", the first at %.2f s", s->kept[0].at_s);
    snprintf(buf, len,
             "note: hiernet-linkd waited for a core %llu time%s for at least the minimum RTO "
             "(%.0f ms; longest %.0f ms%s): no frame moved on its links meanwhile, so flows' "
             "timeouts then were the emulation's, not the network's; HIERNET_LINKD_PRIORITY=10 "
             "runs it at SCHED_FIFO (docs/guide.md)",
             (unsigned long long)s->count, s->count == 1 ? "" : "s", 1000 * s->threshold_wall_s,
             1000 * s->longest_wall_s, first);
    return true;
}
