/* doctor_hosts.c — `hiernet doctor --hosts FILE|slurm`: every machine of a
 * hosts file checked in one table.
 *
 * Each machine but this one gets an agent, started as a run starts it
 * (controller/agent_client.h), whose hello says what the machine offers:
 * its uid and CAP_NET_ADMIN, the kernel features of emu_nl_probe, its
 * hiernet version (an agent of another version refuses the hello, which
 * the table shows) and the control RTT of its pings. This machine's row
 * comes from the same probes run here. Once every agent has answered, the
 * ICMP echo between each pair of machines that answered is tried as a run's
 * underlay probe tries it (controller/parts_underlay.h: from here when this
 * machine is one of the two, else by the first one's agent): a run spread
 * over them needs it to measure the underlay's delay. All agents are asked
 * at once on a libev loop and torn down before the table is printed. */
#include "app/cli.h"
#include "controller/agent_client.h"
#include "controller/parts_underlay.h"
#include "hiernet_version.h"

#include <arpa/inet.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_ENVIRONMENT 3

struct doctor_row {
    const struct topo_machine *machine;
    struct agent_client *agent;
    bool answered; /* hello and pings, or the failure, are in */
    bool down;
    char failure[768];
    char note[300]; /* why this machine's kernel features were not probed */
    struct agent_hello_reply hello;
    double rtt_ms;
};

struct doctor_hosts {
    struct ev_loop *loop;
    const struct topo_machines *machines;
    struct doctor_row *rows;
    size_t n, waiting;
    bool started; /* every agent asked: the echoes may begin */
    /* the echo between machines: one node per machine, a link per pair tried */
    struct topo_network *pairs;
    int *machine_of; /* per node of pairs: its machine */
    struct parts_underlay *echo;
    char echo_error[512];
    bool echo_tried;
};

static struct doctor_row *row_of(struct doctor_hosts *d, struct agent_client *ac)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->rows[i].agent == ac) return &d->rows[i];
    return NULL;
}

static void teardown_all(struct doctor_hosts *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->rows[i].agent) agent_client_teardown(d->rows[i].agent);
}

static void echo_begin(struct doctor_hosts *d);

/* Every agent answered: the echoes between the machines, then the
 * teardown (the agents answer the underlay requests). */
static bool all_answered(const struct doctor_hosts *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->rows[i].agent && !d->rows[i].answered) return false;
    return true;
}

static void row_answered(struct doctor_hosts *d, struct doctor_row *r)
{
    if (r->answered) return;
    r->answered = true;
    if (d->started && all_answered(d)) echo_begin(d);
}

/* ---- the ICMP echo between machines ---- */

/* Machine i's underlay address (its hello's, or this machine's in the
 * file), or false when it has none to try (failed, not IPv4). */
static bool row_underlay(const struct doctor_row *r, uint32_t *out)
{
    const char *text = r->machine->local ? r->machine->address : r->hello.underlay_address;
    struct in_addr a;
    if (r->failure[0] || inet_pton(AF_INET, text, &a) != 1) return false;
    *out = ntohl(a.s_addr);
    return true;
}

static void on_echoes(void *ctx, struct parts_underlay *u, const char *error)
{
    struct doctor_hosts *d = ctx;
    (void)u;
    if (error) snprintf(d->echo_error, sizeof d->echo_error, "%s", error);
    teardown_all(d);
}

/* A network of one node per machine and a link between each two that
 * answered, for parts_underlay: 0, or -1 when out of memory. */
static int echo_pairs(struct doctor_hosts *d, const bool *usable)
{
    char err[256];
    struct topo_link_params none = {0};
    d->pairs = topo_network_new("doctor", TOPO_BACKEND_NONE, 0, err, sizeof err);
    d->machine_of = calloc(d->n ? d->n : 1, sizeof *d->machine_of);
    if (!d->pairs || !d->machine_of) return -1;
    for (size_t i = 0; i < d->n; i++) {
        char name[24];
        snprintf(name, sizeof name, "m%zu", i);
        if (topo_node_add(d->pairs, name, TOPO_NODE_HOST, err, sizeof err) < 0) return -1;
        d->machine_of[i] = (int)i;
    }
    for (size_t a = 0; a < d->n; a++)
        for (size_t b = a + 1; b < d->n; b++)
            if (usable[a] && usable[b] &&
                topo_link_add(d->pairs, (int)a, (int)b, &none, err, sizeof err) < 0)
                return -1;
    return 0;
}

static void echo_begin(struct doctor_hosts *d)
{
    uint32_t *underlay = calloc(d->n ? d->n : 1, sizeof *underlay);
    bool *usable = calloc(d->n ? d->n : 1, sizeof *usable);
    struct agent_client **agent = calloc(d->n ? d->n : 1, sizeof *agent);
    size_t local = d->n;
    int rc = underlay && usable && agent ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < d->n; i++) {
        usable[i] = row_underlay(&d->rows[i], &underlay[i]);
        agent[i] = d->rows[i].agent;
        if (d->rows[i].machine->local) local = i;
    }
    if (rc == 0) rc = echo_pairs(d, usable);
    struct topo_placement placement = {.n_nodes = d->n, .machine = d->machine_of};
    struct parts_underlay_setup setup = {d->loop, d->pairs, &placement, d->machines,
                                         local,   agent,    underlay};
    if (rc == 0)
        rc = parts_underlay_start(&setup, on_echoes, d, &d->echo, d->echo_error,
                                  sizeof d->echo_error);
    else
        snprintf(d->echo_error, sizeof d->echo_error, "out of memory");
    d->echo_tried = rc != 0 || d->pairs->n_links > 0;
    free(underlay);
    free(usable);
    free(agent);
    if (rc != 1) teardown_all(d); /* nothing follows from the loop */
}

/* One line per pair tried: its round trip, or that it failed (and why, once). */
static bool print_echoes(const struct doctor_hosts *d)
{
    if (!d->echo_tried) return true;
    const struct topo_network *net = d->pairs;
    for (size_t l = 0; net && l < net->n_links; l++) {
        size_t a = (size_t)net->links[l].a, b = (size_t)net->links[l].b;
        int64_t rtt = d->echo ? parts_underlay_rtt_ns(d->echo, a, b) : 0;
        char what[32];
        snprintf(what, sizeof what, rtt > 0 ? "%.3f ms" : "FAILS", rtt / 1e6);
        printf("  ICMP echo %s - %s: %s\n", d->machines->v[a].name, d->machines->v[b].name, what);
    }
    if (d->echo_error[0]) printf("  ICMP echo: %s\n", d->echo_error);
    return d->echo_error[0] == '\0';
}

static void on_ready(void *ctx, struct agent_client *ac)
{
    struct doctor_row *r = row_of(ctx, ac);
    struct clock_offset c;
    r->hello = *agent_client_hello(ac);
    if (agent_client_clock(ac, &c)) r->rtt_ms = c.rtt_ms;
    row_answered(ctx, r);
}

static void on_failed(void *ctx, struct agent_client *ac, const char *why)
{
    struct doctor_row *r = row_of(ctx, ac);
    snprintf(r->failure, sizeof r->failure, "%s", why);
    row_answered(ctx, r);
}

static void on_down(void *ctx, struct agent_client *ac)
{
    struct doctor_hosts *d = ctx;
    struct doctor_row *r = row_of(d, ac);
    if (!r->down && --d->waiting == 0) ev_break(d->loop, EVBREAK_ALL);
    r->down = true;
}

/* This machine's row, from the probes an agent would run. */
static void local_row(struct doctor_row *r)
{
    char err[256];
    snprintf(r->hello.version, sizeof r->hello.version, "%s", HIERNET_AGENT_VERSION);
    r->hello.uid = (int64_t)geteuid();
    r->hello.cap_net_admin = (cli_cap_effective() >> CLI_CAP_NET_ADMIN) & 1;
    if (cli_feature_names(r->hello.features, sizeof r->hello.features, err, sizeof err) < 0)
        snprintf(r->note, sizeof r->note, "kernel features not probed: %s", err);
}

/* One row; returns whether the machine is fit for a run. */
static bool print_row(const struct doctor_row *r)
{
    const struct topo_machine *m = r->machine;
    if (r->failure[0]) {
        bool refused = strstr(r->failure, "version mismatch") != NULL;
        printf("%-12s %-16s %-9s %-15s %-28s %s\n", m->name, m->address, refused ? "yes" : "NO",
               "?", "?", refused ? "DIFFERS" : "?");
        printf("  %s\n", r->failure);
        return false;
    }
    const struct agent_hello_reply *h = &r->hello;
    bool root = h->uid == 0, priv = root || h->cap_net_admin;
    bool same = !strcmp(h->version, HIERNET_AGENT_VERSION);
    char reach[32], who[32];
    snprintf(reach, sizeof reach, m->local ? "local" : "%.2f ms", r->rtt_ms);
    snprintf(who, sizeof who, "%s", root ? "root" : h->cap_net_admin ? "CAP_NET_ADMIN" : "NO");
    printf("%-12s %-16s %-9s %-15s %-28s %s\n", m->name, m->address, reach, who,
           h->features[0] ? h->features : "NONE", same ? "same" : "DIFFERS");
    if (r->note[0]) printf("  %s\n", r->note);
    return priv && same && h->features[0];
}

static int ask_agents(struct doctor_hosts *d, bool slurm)
{
    struct agent_client_options o;
    struct agent_client_hooks hooks = {on_ready, on_failed, on_down, d, NULL};
    char err[512];
    agent_client_options_default(&o);
    o.version = HIERNET_AGENT_VERSION;
    o.run_id = "doctor";
    o.slurm = slurm;
    o.hello_timeout_s = 15;
    for (size_t i = 0; i < d->n; i++) {
        struct doctor_row *r = &d->rows[i];
        if (r->machine->local) {
            local_row(r);
            continue;
        }
        r->agent = agent_client_start(d->loop, r->machine, &o, &hooks, err, sizeof err);
        if (!r->agent) snprintf(r->failure, sizeof r->failure, "%s", err);
        d->waiting += r->agent != NULL;
    }
    d->started = true;
    if (all_answered(d)) echo_begin(d); /* failed at once, or none started */
    if (d->waiting) ev_run(d->loop, 0);
    return 0;
}

int cli_doctor_hosts(const char *spec)
{
    struct topo_machines m;
    if (!cli_hosts_read("doctor", spec, &m)) return 2;
    struct doctor_hosts d = {
        .loop = ev_default_loop(0), .machines = &m, .rows = calloc(m.n, sizeof *d.rows), .n = m.n};
    if (!d.rows) {
        topo_machines_free(&m);
        return fprintf(stderr, "hiernet doctor: out of memory\n"), EXIT_ENVIRONMENT;
    }
    for (size_t i = 0; i < m.n; i++)
        d.rows[i].machine = &m.v[i];
    ask_agents(&d, !strcmp(m.source, "slurm"));
    printf("%-12s %-16s %-9s %-15s %-28s %s\n", "machine", "address", "reachable", "privilege",
           "kernel features", "hiernet version");
    int unfit = 0;
    for (size_t i = 0; i < m.n; i++) {
        unfit += !print_row(&d.rows[i]);
        agent_client_free(d.rows[i].agent);
    }
    unfit += !print_echoes(&d);
    parts_underlay_free(d.echo);
    topo_network_free(d.pairs);
    free(d.machine_of);
    free(d.rows);
    topo_machines_free(&m);
    return unfit ? EXIT_ENVIRONMENT : 0;
}
