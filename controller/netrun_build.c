/* netrun_build.c — the build of one network (netrun_build), step by step:
 * namespaces, backend and plan, cgroups, the peers asked of the template,
 * the links, the peers collected; a failure at any step releases what was
 * made. */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/host_probe.h"
#include "controller/peer_template.h"
#include "emu/tc_backend.h"
#include "emu/nl.h"
#include "topo/shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long start waits for the peer template to have forked a peer. */
#define PEER_START_TIMEOUT_S 30.0
/* Emulated backends: the namespaces (and bridges), before the peers. They
 * need neither the backend's choice nor the address plan, so they are made
 * off the loop while the loop probes the kernel and plans. */
static void work_namespaces(struct netrun *nr)
{
    struct emu_tc_options opts = {false, TOPO_SHAPE_ROOT_HTB}; /* netem: set after */
    char err[512];
    if (emu_tc_create(nr->net, &opts, &nr->kernel, err, sizeof err) < 0)
        netrun_job_fail(nr, true, err); /* the model is valid: what fails is the host */
}

/* The kernel now knows which qdiscs it has. */
static void namespaces_done(struct netrun *nr)
{
    if (nr->backend == TOPO_BACKEND_NONE || !nr->kernel) return;
    char why[256];
    const struct emu_nl_features *f = netrun_kernel_features(why, sizeof why);
    struct emu_tc_options opts = {f && f->available[EMU_NL_FEATURE_NETEM], TOPO_SHAPE_ROOT_HTB};
    emu_tc_set_options(nr->kernel, &opts);
}

/* Links, addresses, routes and qdiscs, while the peers start up on the
 * other core (they bind their node address before it exists: IP_FREEBIND).
 * Off the loop. */
static void work_kernel_links(struct netrun *nr)
{
    char err[1024];
    if (emu_tc_add_veths(nr->kernel, err, sizeof err) < 0 ||
        emu_tc_configure(nr->kernel, &nr->routing, true, err, sizeof err) < 0)
        netrun_job_fail(nr, true, err);
}

/* ---- lifecycle ---- */

/* The build failed: `built` hears of it once the release has left nothing. */
static void build_fail(struct netrun *nr)
{
    nr->building = false;
    nr->release.failed_build = true;
    netrun_release(nr, NULL, NULL);
}

/* Last step: every peer the template started is adopted (also after a
 * failure, so that each is known and killed when the network is freed). */
static void peers_collected(struct netrun *nr)
{
    nr->collecting = false;
    ev_timer_stop(nr->loop, &nr->template_deadline);
    char err[1024];
    int node = -1;
    if (netrun_adopt_peers(nr, &node, err, sizeof err) < 0)
        netrun_job_fail_at(nr, false, node, -1, err);
    netrun_phase_end(nr, "peers forked");
    if (nr->job.rc < 0) return build_fail(nr);
    nr->net->backend_used = nr->backend;
    nr->building = false;
    nr->built(nr->built_ctx, nr, NULL);
}

/* Every peer asked for is forked (or the template broke): once the links
 * are made too, the build ends. */
void netrun_on_template_settled(void *ctx)
{
    struct netrun *nr = ctx;
    if (nr->collecting) peers_collected(nr);
}

static void on_template_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, template_deadline);
    peer_template_expire(nr->template, PEER_START_TIMEOUT_S);
    peers_collected(nr);
}

/* The links are made: wait (on the loop) for the template's forks. */
void netrun_links_done(struct netrun *nr)
{
    if (nr->beside.rc < 0) {
        netrun_job_fail_with(nr, &nr->beside.error);
    }
    if (nr->beside.active) {
        netrun_phase_split_beside(nr);
    } else {
        netrun_phase_end(nr, "links");
        netrun_phase_split_kernel(nr);
    }
    if (nr->links_made && nr->job.rc == 0) nr->links_made(nr->built_ctx);
    if (!nr->template || peer_template_settled(nr->template)) return peers_collected(nr);
    nr->collecting = true;
    ev_timer_init(&nr->template_deadline, on_template_deadline, PEER_START_TIMEOUT_S, 0);
    ev_timer_start(nr->loop, &nr->template_deadline);
}

static void links_begin(struct netrun *nr);

/* The kernel's probe was not done when the build began: the backend and
 * the plan now, then on to the links. */
static void plan_after_namespaces(void *ctx)
{
    struct netrun *nr = ctx;
    struct net_error error;
    net_error_clear(&error);
    nr->plan_late = false;
    if (netrun_choose_and_plan(nr, &error) < 0) {
        netrun_job_fail_with(nr, &error);
        return build_fail(nr);
    }
    links_begin(nr);
}

/* The namespaces exist; the backend and the plan too, unless they wait
 * for the kernel's probe (on the loop, through its callback). */
static void namespaces_made(struct netrun *nr)
{
    netrun_phase_end(nr, "namespaces");
    if (nr->job.rc < 0) return build_fail(nr);
    if (!nr->plan_late) return links_begin(nr);
    if (host_probe_done(HOST_PROBE_KERNEL)) return plan_after_namespaces(nr);
    if (host_probe_wait(nr->loop, HOST_PROBE_KERNEL, plan_after_namespaces, nr) == 0) return;
    netrun_job_fail(nr, false, "out of memory");
    build_fail(nr);
}

/* Then: cgroups, the peers asked of the template, links.
 * The kernel backend's veths are made off the loop meanwhile: asking a
 * thousand peers of the template took 0.02-0.1 s of the start before they
 * began. A failure here then waits for that step's end (netrun_links_done). */
static void links_begin(struct netrun *nr)
{
    char err[1024];
    bool env_error = false;
    int node = -1;
    namespaces_done(nr);
    bool beside = nr->backend == TOPO_BACKEND_KERNEL;
    nr->beside.active = beside;
    if (beside) netrun_job_begin(nr, work_kernel_links, netrun_links_done);
    int rc = netrun_prepare_cgroups(nr, &env_error, err, sizeof err);
    if (rc == 0) rc = netrun_request_peers(nr, &node, err, sizeof err);
    if (!beside) netrun_phase_end(nr, "peers asked"); /* else split at netrun_links_done */
    if (rc < 0 && beside) {
        nr->beside.rc = -1;
        net_error_set(&nr->beside.error, net_error_build_code(env_error), node, -1, err);
        return; /* netrun_links_done follows the step, adopts what was asked for, then fails */
    }
    if (rc < 0) {
        netrun_job_fail_at(nr, env_error, node, -1, err);
        return netrun_links_done(nr); /* adopts what was asked for, then fails */
    }
    if (beside) return;
    if (nr->backend == TOPO_BACKEND_USER) return netrun_make_user_links(nr);
    netrun_links_done(nr);
}

static struct netrun *netrun_alloc(struct ev_loop *loop, struct topo_network *net,
                                   const struct netrun_config *cfg)
{
    struct netrun *nr = calloc(1, sizeof *nr);
    if (nr) nr->peers = calloc(net->n_nodes ? net->n_nodes : 1, sizeof *nr->peers);
    if (!nr || !nr->peers) {
        free(nr);
        return NULL;
    }
    nr->loop = loop;
    nr->net = net;
    ev_timer_init(&nr->sample_timer, netrun_on_sample_timer, 1.0, 1.0);
    ev_async_init(&nr->job_done, netrun_on_job_done);
    ev_async_start(loop, &nr->job_done);
    ev_init(&nr->template_deadline, on_template_deadline);
    ev_init(&nr->release.timer, netrun_on_release_timer);
    ev_timer_init(&nr->linkd_deadline, netrun_on_linkd_deadline, netrun_linkd_setup_timeout(nr), 0);
    nr->registry = cfg->registry;
    nr->loopback_next = cfg->loopback_next;
    snprintf(nr->run_id, sizeof nr->run_id, "%s-%s", cfg->run_id ? cfg->run_id : "run", net->name);
    nr->start_s = nr->phase_mark = mono_s();
    return nr;
}

/* The build's first steps on the loop: -1 with *error when it cannot
 * begin (a namespaces' step begun is still running then). */
static int build_begin(struct netrun *nr, struct net_error *error)
{
    net_error_clear(error);
    bool env_error = false;
    int rc =
        netrun_check_devices(nr, &error->node, &env_error, error->message, sizeof error->message);
    if (rc == 0) rc = netrun_prepare_helpers(nr, &env_error, error->message, sizeof error->message);
    if (rc < 0) error->code = net_error_build_code(env_error);
    bool emulated = nr->net->backend != TOPO_BACKEND_NONE;
    if (rc == 0 && emulated) netrun_job_begin(nr, work_namespaces, namespaces_made);
    nr->plan_late = emulated && !host_probe_done(HOST_PROBE_KERNEL);
    if (rc == 0 && !nr->plan_late) rc = netrun_choose_and_plan(nr, error);
    if (rc == 0 && !emulated) netrun_job_then(nr, namespaces_made);
    return rc;
}

/* The CUDA probe is done: the build begins; a failure goes the way of any
 * build's (namespaces_made, once a step begun has ended). */
static void on_devices_probed(void *ctx)
{
    struct netrun *nr = ctx;
    struct net_error error;
    if (build_begin(nr, &error) == 0) return;
    netrun_job_fail_with(nr, &error);
    if (!nr->job.running) netrun_job_then(nr, namespaces_made);
}

int netrun_build(struct ev_loop *loop, struct topo_network *net, const struct netrun_config *cfg,
                 netrun_exit_fn on_exit, void *ctx, netrun_built_fn built, void *built_ctx,
                 struct netrun **out, struct net_error *error)
{
    if (cfg->spread)
        return netrun_parts_build(loop, net, cfg, on_exit, ctx, built, built_ctx, out, error);
    net_error_clear(error);
    struct netrun *nr = netrun_alloc(loop, net, cfg);
    if (!nr)
        return snprintf(error->message, sizeof error->message, "network '%s': out of memory",
                        net->name),
               -1;
    nr->on_exit = on_exit;
    nr->ctx = ctx;
    nr->built = built;
    nr->built_ctx = built_ctx;
    nr->links_made = cfg->links_made;
    if (cfg->peer_path) snprintf(nr->peer_path, sizeof nr->peer_path, "%s", cfg->peer_path);
    if (cfg->data_secret) memcpy(nr->data_secret, cfg->data_secret, sizeof nr->data_secret);
    nr->secret_given = cfg->data_secret != NULL;
    nr->given_routing = cfg->routing;
    nr->peer_path_given = cfg->peer_path != NULL;
    /* Asked for at once: the namespaces' step runs meanwhile, and the
     * backend's choice waits for it only if it is not done by then. */
    if (net->backend != TOPO_BACKEND_NONE) host_probe_begin(loop, HOST_PROBE_KERNEL);
    int rc = 0;
    if (netrun_wants_cuda(net) && !host_probe_done(HOST_PROBE_CUDA))
        rc = host_probe_wait(loop, HOST_PROBE_CUDA, on_devices_probed, nr) < 0
                 ? (snprintf(error->message, sizeof error->message, "network '%s': out of memory",
                             net->name),
                    -1)
                 : 0;
    else
        rc = build_begin(nr, error);
    if (rc < 0) {
        if (error->code == NET_OK) error->code = NET_ERR_SCENARIO; /* out of memory */
        netrun_free(nr); /* joins the namespaces' thread */
        return -1;
    }
    nr->building = true;
    *out = nr;
    return 0;
}
