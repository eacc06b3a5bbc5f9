/* netlife.c — the network life cycle engine (see netlife.h). */
#include "controller/netlife.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/log.h"
#include "controller/loopback_claim.h"
#include "controller/overload.h"
#include "controller/record.h"
#include "controller/registry.h"
#include "controller/run.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One handshake call: the node it went to, for the error. */
struct handshake_call {
    struct netlife *nl;
    int node;
};

struct netlife {
    struct netlife_run *run;
    struct topo_network *topo;
    struct netlife_hooks hooks;
    struct netlife_options opts;
    enum netlife_state state;
    struct netrun *nr;
    bool stop_requested; /* during the build: the stop follows its end */
    bool releasing;      /* netlife_release: the netrun goes on the loop */
    bool closing;        /* inside netrun_close_peers: replies failing now */
    int outstanding;     /* handshake calls not answered yet */
    struct net_error error;
    struct net_error start_error; /* the last start's failure, as reported */
    struct handshake_call *calls; /* one per node */
    struct netprog_list programs; /* node:run, node:spawn: running programs */
    int *overload_ids;            /* per node its id in the run's account, -1; NULL before */
    ev_timer start_deadline, stop_deadline;
    double phase_t0;      /* real time the build ended / the stop began */
    struct netlife *next; /* in the run's list */
};

/* ---- the run ---- */

void netlife_run_init(struct netlife_run *run, struct ev_loop *loop, const char *dir)
{
    *run = (struct netlife_run){.loop = loop, .dir = dir, .loopback_claim = -1};
}

/* Backend none puts every peer on its own loopback address. Runs at the
 * same time must not share addresses (a peer's data port is fixed), so each
 * run claims its own 127.N.0.0/16 at its first start (loopback_claim.h),
 * trying N from its pid first. */
static uint32_t *run_loopback(struct netlife_run *run)
{
    if (run->loopback_next) return &run->loopback_next;
    unsigned n = 1u + (unsigned)getpid() % 254u;
    run->loopback_claim = loopback_claim(n, &n);
    if (run->loopback_claim < 0)
        ctl_log("warning: no free 127.N.0.0/16 to claim (%s): backend none uses 127.%u, which "
                "another run may share",
                strerror(errno), n);
    run->loopback_next = (127u << 24) | (n << 16) | 2u;
    return &run->loopback_next;
}

struct registry *netlife_run_open_registry(struct netlife_run *run, char *err, size_t errlen)
{
    if (run->registry || !run->dir || run->registry_tried) return run->registry;
    run->registry_tried = true;
    const char *base = strrchr(run->dir, '/');
    run->registry = registry_open(base ? base + 1 : run->dir, run->dir, err, errlen);
    return run->registry;
}

void netlife_run_sweep_stale(void)
{
    char err[512];
    struct registry_sweep_counts counts;
    if (registry_sweep_stale(NULL, NULL, &counts, err, sizeof err) == 0 && counts.runs)
        ctl_log("removed what %u crashed run(s) left behind (%u run.json marked crashed)",
                counts.runs, counts.marked);
}

struct registry *netlife_run_registry(struct netlife_run *run)
{
    if (run->registry || !run->dir || run->registry_tried) return run->registry;
    char err[512];
    if (!netlife_run_open_registry(run, err, sizeof err))
        ctl_log("warning: no run registry: %s", err);
    netlife_run_sweep_stale();
    return run->registry;
}

void netlife_run_close(struct netlife_run *run)
{
    if (run->loopback_claim >= 0) close(run->loopback_claim);
    run->loopback_claim = -1;
    record_close(run->links_record);
    run->links_record = NULL;
    record_close(run->tcp_record);
    run->tcp_record = NULL;
}

/* links.csv, shared by every network of the run that has counters: linkd's
 * (user backend) or the veths' (kernel backend). */
static void sample_links(struct netlife_run *run, struct netrun *nr)
{
    const char *backend = netrun_backend(nr);
    if ((strcmp(backend, "user") != 0 && strcmp(backend, "kernel") != 0) || !run->dir) return;
    if (!run->links_record) {
        size_t n;
        const char *const *columns = netrun_link_columns(&n);
        char err[512];
        run->links_record = record_open(run->dir, "links", columns, n, err, sizeof err);
        if (!run->links_record) {
            ctl_log("warning: no links.csv: %s", err);
            return;
        }
    }
    if (!run->tcp_record) {
        size_t n;
        const char *const *columns = netrun_tcp_columns(&n);
        char err[512];
        run->tcp_record = record_open(run->dir, "tcp", columns, n, err, sizeof err);
        if (!run->tcp_record) ctl_log("warning: no tcp.csv: %s", err);
    }
    netrun_sample_tcp(nr, run->tcp_record); /* before the links: the timer starts there */
    netrun_watch_dataplane(nr, run->overload, 0);
    netrun_sample_links(nr, run->links_record, run->clock, run->clock_ctx);
}

/* ---- run.json's account of the networks ---- */

void netlife_run_publish_overload(struct netlife_run *run)
{
    if (!run->overload || !run->record) return;
    struct overload_report r;
    overload_report(run->overload, run->record->dilation, &r);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    overload_write_json(f, &r);
    if (fclose(f) == 0) run_set_overload(run->record, buf);
    free(buf);
}

/* run.json now: every network started so far (oldest last, as listed) and
 * the overload report. */
static void publish_topology(struct netlife_run *run)
{
    if (!run->record) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    fputc('[', f);
    int k = 0;
    for (const struct netlife *nl = run->networks; nl; nl = nl->next) {
        if (nl->state == NETLIFE_DEFINED) continue;
        if (k++) fputs(", ", f);
        topo_network_write_json(nl->topo, f);
    }
    fputc(']', f);
    if (fclose(f) == 0) run_set_topology(run->record, buf);
    free(buf);
    netlife_run_publish_overload(run);
    char err[256];
    if (run_write_json_nowait(run->record, err, sizeof err) < 0) ctl_log("warning: %s", err);
}

/* The peers are up: the hosts join the overload account, and the first
 * network to get here names the run's backend. */
static void account_network(struct netlife *nl)
{
    struct netlife_run *run = nl->run;
    if (run->record && !run->record->backend_used[0])
        snprintf(run->record->backend_used, sizeof run->record->backend_used, "%s",
                 netrun_backend(nl->nr));
    if (!run->overload) return;
    if (nl->overload_ids) { /* started again */
        for (size_t i = 0; i < nl->topo->n_nodes; i++)
            overload_node_live(run->overload, nl->overload_ids[i], true);
        return;
    }
    nl->overload_ids = malloc(nl->topo->n_nodes * sizeof *nl->overload_ids);
    for (size_t i = 0; nl->overload_ids && i < nl->topo->n_nodes; i++) {
        const struct topo_node *n = &nl->topo->nodes[i];
        nl->overload_ids[i] = n->kind != TOPO_NODE_HOST
                                  ? -1
                                  : overload_add_node(run->overload, nl->topo->name, n->name,
                                                      n->speed, strcmp(n->device, "cpu") == 0);
    }
}

int netlife_overload_id(const struct netlife *nl, int node)
{
    return nl->overload_ids && node >= 0 && (size_t)node < nl->topo->n_nodes
               ? nl->overload_ids[node]
               : -1;
}

/* ---- transitions and errors ---- */

const char *netlife_state_name(enum netlife_state s)
{
    static const char *const names[] = {"defined", "building", "spawning", "handshake",
                                        "running", "stopping", "stopped"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

static void transition(struct netlife *nl, enum netlife_state to, const struct net_error *e)
{
    enum netlife_state from = nl->state;
    nl->state = to;
    if (e && from <= NETLIFE_HANDSHAKE) nl->start_error = *e;
    if (nl->hooks.on_transition) nl->hooks.on_transition(nl->hooks.ctx, from, to, e);
}

/* A peer's failure during the handshake: the peer client says the cause,
 * the engine names the node. */
static void error_at_node(struct netlife *nl, struct net_error *e, enum net_error_code code,
                          int node, const char *cause)
{
    char message[sizeof e->message];
    snprintf(message, sizeof message, "node '%s': %s", nl->topo->nodes[node].name, cause);
    net_error_set(e, code, node, -1, message);
}

/* ---- stop ---- */

static void finish_stop(struct netlife *nl)
{
    ev_timer_stop(nl->run->loop, &nl->stop_deadline);
    ctl_log("network '%s': stopped: every peer exited %.3f s after the stop", nl->topo->name,
            mono_s() - nl->phase_t0);
    for (size_t i = 0; nl->overload_ids && i < nl->topo->n_nodes; i++)
        overload_node_live(nl->run->overload, nl->overload_ids[i], false);
    transition(nl, NETLIFE_STOPPED, NULL);
}

static void on_stop_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netlife *nl = container_of(w, struct netlife, stop_deadline);
    ctl_log("network '%s': peers did not exit within %.0f s; killing them", nl->topo->name,
            nl->opts.stop_timeout_s);
    netrun_kill_peers(nl->nr, SIGKILL);
}

/* Closes every channel (the peers exit on EOF) under the stop deadline. */
static void begin_stop(struct netlife *nl, const struct net_error *e)
{
    ev_timer_stop(nl->run->loop, &nl->start_deadline);
    nl->phase_t0 = mono_s();
    transition(nl, NETLIFE_STOPPING, e);
    nl->closing = true;
    netrun_close_peers(nl->nr);
    nl->closing = false;
    ev_timer_set(&nl->stop_deadline, nl->opts.stop_timeout_s, 0);
    ev_timer_start(nl->run->loop, &nl->stop_deadline);
    if (nl->state == NETLIFE_STOPPING && netrun_peers_exited(nl->nr)) finish_stop(nl);
}

static void on_peer_exit(void *ctx, int node, int status)
{
    struct netlife *nl = ctx;
    const char *name = nl->topo->nodes[node].name;
    if (nl->state == NETLIFE_RUNNING && WIFSIGNALED(status))
        ctl_log("node '%s': peer killed by signal %d", name, WTERMSIG(status));
    else if (nl->state == NETLIFE_RUNNING)
        ctl_log("node '%s': peer exited with status %d", name, WEXITSTATUS(status));
    if (nl->hooks.on_peer_exit) nl->hooks.on_peer_exit(nl->hooks.ctx, node, status);
    if (nl->state == NETLIFE_STOPPING && netrun_peers_exited(nl->nr)) finish_stop(nl);
}

/* ---- handshake: peers{secret=} to every peer, start ends when all answered ---- */

static void handshake_end(struct netlife *nl)
{
    if (nl->state != NETLIFE_HANDSHAKE) return;
    ev_timer_stop(nl->run->loop, &nl->start_deadline);
    if (nl->error.code != NET_OK) return begin_stop(nl, &nl->error);
    ctl_log("network '%s': started: every peer answered %.3f s after the build", nl->topo->name,
            mono_s() - nl->phase_t0);
    publish_topology(nl->run);
    transition(nl, NETLIFE_RUNNING, NULL);
}

static void on_handshake_reply(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    struct handshake_call *c = ctx;
    struct netlife *nl = c->nl;
    if (error && nl->error.code == NET_OK)
        error_at_node(nl, &nl->error, NET_ERR_PEER, c->node, error);
    if (--nl->outstanding == 0 && !nl->closing) handshake_end(nl);
}

/* A peer that is alive but never answers must not hang the start: fail it
 * and close the channels, which fails the calls still out. */
static void on_start_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netlife *nl = container_of(w, struct netlife, start_deadline);
    if (nl->error.code == NET_OK) {
        char why[128];
        snprintf(why, sizeof why, "%d peer(s) did not answer within %g s", nl->outstanding,
                 nl->opts.start_timeout_s);
        net_error_set(&nl->error, NET_ERR_TIMEOUT, -1, -1, why);
    }
    nl->closing = true;
    netrun_close_peers(nl->nr);
    nl->closing = false;
    if (nl->outstanding == 0) handshake_end(nl);
}

static void begin_handshake(struct netlife *nl, msgpack_sbuffer *secret)
{
    account_network(nl);
    transition(nl, NETLIFE_HANDSHAKE, NULL);
    netrun_pack_peer_secret(nl->nr, 0, secret);
    nl->outstanding = 0;
    char err[512];
    for (size_t i = 0; i < nl->topo->n_nodes && nl->error.code == NET_OK; i++) {
        struct peer_client *pc = netrun_peer(nl->nr, (int)i);
        if (!pc) continue;
        nl->calls[i] = (struct handshake_call){nl, (int)i};
        if (peer_client_call(pc, "peers", secret->data, secret->size, on_handshake_reply,
                             &nl->calls[i], err, sizeof err) < 0)
            error_at_node(nl, &nl->error, NET_ERR_PEER, (int)i, err);
        else
            nl->outstanding++;
    }
    if (nl->outstanding == 0) return handshake_end(nl);
    ev_timer_set(&nl->start_deadline, nl->opts.start_timeout_s, 0);
    ev_timer_start(nl->run->loop, &nl->start_deadline);
}

/* ---- build ---- */

static void log_built(struct netlife *nl)
{
    const struct topo_network *t = nl->topo;
    if (t->backend == TOPO_BACKEND_NONE && t->n_links)
        ctl_log("network '%s': backend none: %zu links recorded but not emulated", t->name,
                t->n_links);
    else if (t->backend != TOPO_BACKEND_NONE)
        ctl_log("network '%s': backend %s (%s)", t->name, netrun_backend(nl->nr),
                netrun_backend_reason(nl->nr));
    char phases[512];
    netrun_describe_start(nl->nr, phases, sizeof phases);
    ctl_log("network '%s': %zu nodes, %zu links built in %s", t->name, t->n_nodes, t->n_links,
            phases);
}

/* A spread network's underlay round trips into run.json. */
static void record_underlay(struct netlife *nl)
{
    char *json = nl->run->record ? netrun_underlay_json(nl->nr) : NULL;
    if (json) run_add_underlay(nl->run->record, json);
    free(json);
}

static void on_links_made(void *ctx)
{
    struct netlife *nl = ctx;
    transition(nl, NETLIFE_SPAWNING, NULL);
}

static void on_built(void *ctx, struct netrun *nr, const struct net_error *error)
{
    struct netlife *nl = ctx;
    nl->nr = nr;
    if (!nr) return transition(nl, nl->stop_requested ? NETLIFE_STOPPED : NETLIFE_DEFINED, error);
    log_built(nl);
    record_underlay(nl);
    nl->phase_t0 = mono_s();
    sample_links(nl->run, nr);
    if (nl->stop_requested) {
        net_error_set(&nl->error, NET_ERR_STOPPED, -1, -1, "stopped while starting");
        return begin_stop(nl, &nl->error);
    }
    msgpack_sbuffer secret;
    msgpack_sbuffer_init(&secret);
    begin_handshake(nl, &secret);
    msgpack_sbuffer_destroy(&secret);
}

/* ---- the network ---- */

struct netlife *netlife_new(struct netlife_run *run, struct topo_network *topo,
                            const struct netlife_hooks *hooks)
{
    struct netlife *nl = calloc(1, sizeof *nl);
    if (nl) nl->calls = calloc(topo->n_nodes ? topo->n_nodes : 1, sizeof *nl->calls);
    if (!nl || !nl->calls) {
        free(nl);
        return NULL;
    }
    nl->run = run;
    nl->topo = topo;
    nl->next = run->networks;
    run->networks = nl;
    if (hooks) nl->hooks = *hooks;
    ev_timer_init(&nl->start_deadline, on_start_deadline, 0, 0);
    ev_timer_init(&nl->stop_deadline, on_stop_deadline, 0, 0);
    return nl;
}

int netlife_start(struct netlife *nl, const struct netlife_options *opts, struct net_error *error)
{
    char err[1024];
    if (nl->state != NETLIFE_DEFINED) {
        snprintf(err, sizeof err, "network '%s': start: network is %s", nl->topo->name,
                 netlife_state_name(nl->state));
        return net_error_set(error, NET_ERR_SCENARIO, -1, -1, err), -1;
    }
    nl->opts = *opts;
    nl->opts.spread = NULL; /* read here only */
    nl->stop_requested = false;
    net_error_clear(&nl->error);
    net_error_clear(&nl->start_error);
    struct registry *reg = netlife_run_registry(nl->run);
    struct netrun_config cfg = {.run_id = reg ? registry_run_id(reg) : "run",
                                .registry = reg,
                                .loopback_next = run_loopback(nl->run),
                                .links_made = on_links_made,
                                .peer_path = nl->run->peer_path,
                                .spread = opts->spread};
    if (netrun_build(nl->run->loop, nl->topo, &cfg, on_peer_exit, nl, on_built, nl, &nl->nr,
                     error) < 0) {
        nl->nr = NULL;
        return -1;
    }
    transition(nl, NETLIFE_BUILDING, NULL);
    return 0;
}

bool netlife_stop(struct netlife *nl)
{
    if (nl->state >= NETLIFE_BUILDING && nl->state <= NETLIFE_RUNNING)
        netprog_list_signal(&nl->programs, -1, SIGTERM); /* once: a second stop finds it stopping */
    switch (nl->state) {
    case NETLIFE_DEFINED:
    case NETLIFE_STOPPED:
        return true;
    case NETLIFE_BUILDING:
    case NETLIFE_SPAWNING:
        nl->stop_requested = true;
        return false;
    case NETLIFE_HANDSHAKE:
        if (nl->error.code == NET_OK)
            net_error_set(&nl->error, NET_ERR_STOPPED, -1, -1, "stopped while starting");
        begin_stop(nl, &nl->error);
        break;
    case NETLIFE_RUNNING:
        begin_stop(nl, NULL);
        break;
    case NETLIFE_STOPPING:
        break;
    }
    return nl->state == NETLIFE_STOPPED;
}

enum netlife_state netlife_state(const struct netlife *nl)
{
    return nl->state;
}

struct netrun *netlife_netrun(const struct netlife *nl)
{
    if (nl->releasing) return NULL;
    return nl->state == NETLIFE_BUILDING || nl->state == NETLIFE_SPAWNING ? NULL : nl->nr;
}

struct topo_network *netlife_topology(const struct netlife *nl)
{
    return nl->topo;
}

const struct net_error *netlife_start_error(const struct netlife *nl)
{
    return nl->start_error.code != NET_OK ? &nl->start_error : NULL;
}

bool netlife_exited(const struct netlife *nl)
{
    return !nl->nr || netrun_peers_exited(nl->nr);
}

static void on_released(void *ctx)
{
    struct netlife *nl = ctx;
    nl->nr = NULL;
    nl->releasing = false;
}

struct netprog *netlife_program_spawn(struct netlife *nl, int node, char *const argv[],
                                      netprog_done_fn done, void *ctx, char *err, size_t errlen)
{
    if (!netlife_running(nl))
        return snprintf(err, errlen, "network '%s' is %s", nl->topo->name, netlife_state_word(nl)),
               NULL;
    if (node < 0 || (size_t)node >= nl->topo->n_nodes ||
        nl->topo->nodes[node].kind != TOPO_NODE_HOST)
        return snprintf(err, errlen, "programs run in host nodes, not switches"), NULL;
    if (netrun_node_here(nl->nr, node, "running a program in", err, errlen) < 0) /* its agent's */
        return netrun_program_remote(nl->nr, &nl->programs, node, argv, done, ctx, err, errlen);
    struct netprog_place place = {nl->run->registry, nl->topo->name, node,
                                  netrun_node_ns(nl->nr, node)};
    return netprog_spawn(&nl->programs, nl->run->loop, &place, argv, done, ctx, err, errlen);
}

int netlife_node_kill(struct netlife *nl, int node, peer_reply_fn done, void *ctx)
{
    struct netrun *nr = netlife_netrun(nl);
    int rc = nr ? netrun_peer_kill_then(nr, node, done, ctx) : 0;
    netprog_list_signal(&nl->programs, node, SIGKILL);
    return rc;
}

int netlife_node_restart(struct netlife *nl, int node, char *err, size_t errlen)
{
    struct netrun *nr = netlife_netrun(nl);
    if (!nr)
        return snprintf(err, errlen, "network '%s' is %s", nl->topo->name, netlife_state_word(nl)),
               -1;
    return netrun_peer_restart(nr, node, err, errlen);
}

void netlife_release(struct netlife *nl)
{
    netprog_list_release(&nl->programs);
    if (!nl->nr || nl->releasing || nl->state == NETLIFE_BUILDING || nl->state == NETLIFE_SPAWNING)
        return;
    ev_timer_stop(nl->run->loop, &nl->start_deadline);
    ev_timer_stop(nl->run->loop, &nl->stop_deadline);
    nl->releasing = true;
    netrun_release(nl->nr, on_released, nl);
}

bool netlife_released(const struct netlife *nl)
{
    return !nl->releasing;
}

void netlife_free(struct netlife *nl)
{
    if (!nl) return;
    netprog_list_release(&nl->programs);
    ev_timer_stop(nl->run->loop, &nl->start_deadline);
    ev_timer_stop(nl->run->loop, &nl->stop_deadline);
    netrun_free(nl->nr); /* abandons a build in flight; kills and reaps survivors */
    for (struct netlife **p = &nl->run->networks; *p; p = &(*p)->next)
        if (*p == nl) {
            *p = nl->next;
            break;
        }
    free(nl->calls);
    free(nl->overload_ids);
    free(nl);
}
