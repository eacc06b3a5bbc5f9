/* doctor_hosts.c — `hiernet doctor --hosts FILE|slurm`: every machine of a
 * hosts file checked in one table.
 *
 * Each machine but this one gets an agent, started as a run starts it
 * (controller/agent_client.h), whose hello says what the machine offers:
 * its uid and CAP_NET_ADMIN, the kernel features of emu_nl_probe, its
 * hiernet version (an agent of another version refuses the hello, which
 * the table shows) and the control RTT of its pings. This machine's row
 * comes from the same probes run here. All agents are asked at once on a
 * libev loop and torn down before the table is printed. */
#include "app/cli.h"
#include "controller/agent_client.h"
#include "hiernet_version.h"

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
    struct doctor_row *rows;
    size_t n, waiting;
};

static struct doctor_row *row_of(struct doctor_hosts *d, struct agent_client *ac)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->rows[i].agent == ac) return &d->rows[i];
    return NULL;
}

static void row_answered(struct doctor_hosts *d, struct doctor_row *r)
{
    if (r->answered) return;
    r->answered = true;
    agent_client_teardown(r->agent);
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
    struct agent_client_hooks hooks = {on_ready, on_failed, on_down, d};
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
    if (d->waiting) ev_run(d->loop, 0);
    return 0;
}

int cli_doctor_hosts(const char *spec)
{
    struct topo_machines m;
    if (!cli_hosts_read("doctor", spec, &m)) return 2;
    struct doctor_hosts d = {ev_default_loop(0), calloc(m.n, sizeof *d.rows), m.n, 0};
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
    free(d.rows);
    topo_machines_free(&m);
    return unfit ? EXIT_ENVIRONMENT : 0;
}
