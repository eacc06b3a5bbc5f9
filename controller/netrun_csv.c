/* netrun_csv.c — links.csv and tcp.csv: each link's and each host's
 * counters sampled once per emulated second into their records. */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/link_sampler.h"
#include "controller/linkd_client.h"
#include "controller/log.h"
#include "controller/record.h"
#include "controller/tcp_counters.h"
#include "proto/linkd_methods.h"
#include "proto/protocol.h"

#include <stdio.h>

/* ---- links.csv ---- */

static const char *const link_columns[] = {
    "time_s",     "network",     "link",
    "dir",        "up",          "packets",
    "bytes",      "delivered",   "delivered_bytes",
    "drops_loss", "drops_queue", "drops_down",
    "queue_peak", "queue_len",   "marked",
    "bw_bps",
};
#define N_LINK_COLUMNS (sizeof link_columns / sizeof *link_columns)

const char *const *netrun_link_columns(size_t *n)
{
    *n = N_LINK_COLUMNS;
    return link_columns;
}

/* One CSV row for one direction of one link, counters as linkd names them. */
static void record_direction(struct netrun *nr, const char *t, int id, const char *link,
                             const char *dir, bool up, const msgpack_object *counters)
{
    char cells[N_LINK_COLUMNS][32];
    const char *row[N_LINK_COLUMNS] = {t, nr->net->name, link, dir, up ? "1" : "0"};
    struct proto_args args;
    proto_args_init(&args, counters);
    snprintf(cells[N_LINK_COLUMNS - 1], sizeof cells[0], "%llu",
             (unsigned long long)netrun_rate_now(nr, id, dir[0] == 'b'));
    row[N_LINK_COLUMNS - 1] = cells[N_LINK_COLUMNS - 1];
    for (size_t c = 5; c < N_LINK_COLUMNS - 1; c++) {
        int64_t v = 0;
        proto_arg_i64(&args, link_columns[c], &v);
        snprintf(cells[c], sizeof cells[c], "%lld", (long long)v);
        row[c] = cells[c];
    }
    char err[256];
    if (record_add(nr->links_record, row, err, sizeof err) < 0) ctl_log("%s", err);
}

/* The data plane's account reads what each direction delivered. */
static void note_direction(struct netrun *nr, int id, int dir, const msgpack_object *counters)
{
    struct proto_args args;
    proto_args_init(&args, counters);
    int64_t bytes = 0;
    if (proto_arg_i64(&args, LINKD_STATS_DELIVERED_BYTES, &bytes) == 1 && bytes >= 0)
        netrun_dataplane_direction(nr, id, dir, (uint64_t)bytes, mono_s());
    int64_t peak = 0;
    if (proto_arg_i64(&args, LINKD_STATS_QUEUE_PEAK, &peak) == 1) netrun_dataplane_queue(nr, peak);
}

static void record_link(struct netrun *nr, const char *t, const msgpack_object *entry)
{
    struct proto_args args;
    proto_args_init(&args, entry);
    int64_t id = -1;
    bool up = true;
    proto_arg_bool(&args, LINKD_STATS_UP, &up);
    if (proto_arg_i64(&args, LINKD_ARG_ID, &id) != 1 || id < 0 || (size_t)id >= nr->net->n_links)
        return;
    char name[80];
    topo_link_describe(nr->net, &nr->net->links[id], name, sizeof name);
    const msgpack_object *ab = proto_args_get(&args, LINKD_DIR_AB);
    const msgpack_object *ba = proto_args_get(&args, LINKD_DIR_BA);
    if (ab) record_direction(nr, t, (int)id, name, "ab", up, ab);
    if (ba) record_direction(nr, t, (int)id, name, "ba", up, ba);
    if (ab) note_direction(nr, (int)id, 0, ab);
    if (ba) note_direction(nr, (int)id, 1, ba);
}

static void record_links(struct netrun *nr, const msgpack_object *result)
{
    struct proto_args args;
    proto_args_init(&args, result);
    const msgpack_object *links = proto_args_get(&args, "links");
    if (!links || links->type != MSGPACK_OBJECT_ARRAY) return;
    char t[32];
    snprintf(t, sizeof t, "%.3f", nr->clock(nr->clock_ctx));
    for (uint32_t i = 0; i < links->via.array.size; i++)
        record_link(nr, t, &links->via.array.ptr[i]);
}

static void on_links_sampled(void *ctx, const char *error, const msgpack_object *result)
{
    struct netrun *nr = ctx;
    if (nr->samples_pending) nr->samples_pending--;
    if (error || !nr->links_record) return;
    record_links(nr, result);
    if (!nr->samples_pending) netrun_dataplane_round(nr); /* every linkd answered */
}

/* Kernel backend: one direction of a link from the veth's counters. What
 * left the sending end's qdiscs is what the other end received (a veth
 * loses nothing in between), so packets and delivered are the same count;
 * the qdiscs' own drops (netem's loss, a full queue) and queue lengths are
 * not read: those cells stay empty. The veth's drops (its peer end down)
 * are drops_down. */
static void record_veth_direction(struct netrun *nr, const char *t, int id, const char *link,
                                  const char *dir, bool up, const uint64_t counts[3])
{
    char p[24], b[24], d[24], r[24];
    snprintf(p, sizeof p, "%llu", (unsigned long long)counts[0]);
    snprintf(b, sizeof b, "%llu", (unsigned long long)counts[1]);
    snprintf(d, sizeof d, "%llu", (unsigned long long)counts[2]);
    snprintf(r, sizeof r, "%llu", (unsigned long long)netrun_rate_now(nr, id, dir[0] == 'b'));
    const char *row[N_LINK_COLUMNS] = {t, nr->net->name, link, dir, up ? "1" : "0", p,    b,    p,
                                       b, NULL,          NULL, d,   NULL,           NULL, NULL, r};
    char err[256];
    if (record_add(nr->links_record, row, err, sizeof err) < 0) ctl_log("%s", err);
}

/* The sample of every link (the end read sent tx, received rx), each at
 * the run's clock of the moment its counters were read. */
static void on_veths_sampled(void *ctx, const struct link_sample *samples, size_t n_links,
                             const char *error)
{
    struct netrun *nr = ctx;
    if (error && !nr->sample_warned) {
        ctl_log("warning: network '%s': links.csv misses links: %s", nr->net->name, error);
        nr->sample_warned = true;
    }
    if (!nr->links_record) return;
    double dilation = nr->net->dilation > 1 ? nr->net->dilation : 1.0;
    double now = nr->clock(nr->clock_ctx), mono_now = mono_s();
    for (size_t i = 0; i < n_links; i++) {
        const struct link_sample *s = &samples[i];
        if (!s->seen) continue;
        char t[32];
        snprintf(t, sizeof t, "%.3f", now - (mono_now - s->mono) / dilation);
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[i], name, sizeof name);
        uint64_t ab[3] = {s->tx_packets, s->tx_bytes, s->tx_dropped};
        uint64_t ba[3] = {s->rx_packets, s->rx_bytes, s->rx_dropped};
        const uint64_t *sent_by_a = s->from_a ? ab : ba, *sent_by_b = s->from_a ? ba : ab;
        record_veth_direction(nr, t, (int)i, name, "ab", s->up, sent_by_a);
        record_veth_direction(nr, t, (int)i, name, "ba", s->up, sent_by_b);
        netrun_dataplane_direction(nr, (int)i, 0, sent_by_a[1], s->mono);
        netrun_dataplane_direction(nr, (int)i, 1, sent_by_b[1], s->mono);
    }
    netrun_dataplane_round(nr);
}

/* ---- tcp.csv ---- */

static const char *const tcp_columns[] = {"time_s", "network", "node", TCP_COUNTER_NAMES};
#define N_TCP_COLUMNS (sizeof tcp_columns / sizeof *tcp_columns)

const char *const *netrun_tcp_columns(size_t *n)
{
    *n = N_TCP_COLUMNS;
    return tcp_columns;
}

void netrun_sample_tcp(struct netrun *nr, struct record *rec)
{
    if (nr->parts) { /* this machine's part; the agents' rows come with their stats */
        if (netrun_parts_inner(nr)) netrun_sample_tcp(netrun_parts_inner(nr), rec);
        nr->tcp_record = rec;
        return;
    }
    nr->tcp_record = rec;
}

int netrun_tcp_counters(struct netrun *nr, int node, struct tcp_counters *out, char *err,
                        size_t errlen)
{
    if (nr->parts) return netrun_parts_tcp_counters(nr, node, out, err, errlen);
    const struct topo_node *n = &nr->net->nodes[node];
    if (nr->backend == TOPO_BACKEND_NONE)
        return snprintf(err, errlen, "backend none: the peers share the host's TCP counters"), -1;
    if (n->kind != TOPO_NODE_HOST) return snprintf(err, errlen, "a switch has no TCP"), -1;
    const struct peer_client *pc = nr->peers[node].client;
    pid_t pid = pc && !peer_client_exited(pc) ? peer_client_pid(pc) : 0;
    if (pid <= 0) return snprintf(err, errlen, "its peer is not running"), -2;
    return tcp_counters_read(pid, out, err, errlen);
}

/* One row per running host. A node between peers (killed, restarting)
 * has no row that second; one whose counters cannot be read has none
 * either, and the first such failure is logged. The reads block the loop:
 * about 65 us of CPU per host (both files read 1000 times in a loop,
 * CLOCK_PROCESS_CPUTIME_ID, Linux 6.18 on a 2-core VM), so 65 ms a sample
 * at 1000 hosts, and several times that in wall time on a loaded host;
 * a thread of their own would take them off the loop. */
static void sample_tcp(struct netrun *nr)
{
    char t[32], cells[TCP_COUNTERS][24], err[256];
    snprintf(t, sizeof t, "%.3f", nr->clock(nr->clock_ctx));
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        struct tcp_counters c;
        if (!topo_node_local_host(&nr->net->nodes[i])) continue;
        int rc = netrun_tcp_counters(nr, (int)i, &c, err, sizeof err);
        if (rc == -1 && !nr->tcp_warned) {
            nr->tcp_warned = true;
            ctl_log("warning: network '%s': tcp.csv: node '%s': %s (further failures not logged)",
                    nr->net->name, nr->net->nodes[i].name, err);
        }
        if (rc < 0) continue;
        uint64_t v[TCP_COUNTERS];
        tcp_counters_values(&c, v);
        const char *row[N_TCP_COLUMNS] = {t, nr->net->name, nr->net->nodes[i].name};
        for (size_t k = 0; k < TCP_COUNTERS; k++) {
            snprintf(cells[k], sizeof cells[k], "%llu", (unsigned long long)v[k]);
            row[3 + k] = cells[k];
        }
        if (record_add(nr->tcp_record, row, err, sizeof err) < 0) ctl_log("%s", err);
    }
}

void netrun_on_sample_timer(EV_P_ ev_timer *w, int revents)
{
    struct netrun *nr = container_of(w, struct netrun, sample_timer);
    char err[256];
    if (nr->tcp_record) sample_tcp(nr);
    if (nr->sampler) {
        link_sampler_request(nr->sampler); /* skips a beat while a dump is in flight */
        return;
    }
    if (nr->samples_pending || !nr->linkd) return; /* linkd is slow to answer: skip a beat */
    for (size_t i = 0; i < nr->n_linkd; i++)
        if (linkd_client_stats_all(nr->linkd[i], on_links_sampled, nr, err, sizeof err) == 0)
            nr->samples_pending++;
}

void netrun_sample_links(struct netrun *nr, struct record *rec, netrun_clock_fn clock, void *ctx)
{
    if (nr->parts) { /* this machine's part; the agents' rows come as their stats */
        if (netrun_parts_inner(nr)) netrun_sample_links(netrun_parts_inner(nr), rec, clock, ctx);
        nr->links_record = rec;
        nr->clock = clock;
        nr->clock_ctx = ctx;
        return;
    }
    bool veths = nr->backend == TOPO_BACKEND_KERNEL && nr->kernel;
    if ((!nr->linkd && !veths) || !rec) return;
    nr->links_record = rec;
    nr->clock = clock;
    nr->clock_ctx = ctx;
    if (veths && !nr->sampler) {
        char err[256];
        nr->sampler = link_sampler_start(nr->loop, nr->net, nr->kernel, on_veths_sampled, nr, err,
                                         sizeof err);
        if (!nr->sampler) {
            ctl_log("warning: network '%s': no links.csv: %s", nr->net->name, err);
            return;
        }
    }
    double every = nr->net->dilation > 1 ? nr->net->dilation : 1.0; /* one emulated second */
    ev_timer_init(&nr->sample_timer, netrun_on_sample_timer, every, every);
    ev_timer_start(nr->loop, &nr->sample_timer);
}
