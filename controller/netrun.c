/* netrun.c — one started network (see netrun.h): what it answers about
 * itself, its stop and its release. The build and the run-time changes are
 * in the other netrun_*.c files, sharing struct netrun through
 * netrun_internal.h. */
#include "controller/netrun_internal.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/link_sampler.h"
#include "controller/host_probe.h"
#include "controller/linkd_client.h"
#include "controller/log.h"
#include "controller/peer_template.h"
#include "controller/registry.h"
#include "emu/tc_backend.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

const char *netrun_backend(const struct netrun *nr)
{
    return topo_backend_name(nr->backend);
}

const char *netrun_backend_reason(const struct netrun *nr)
{
    return nr->reason;
}

struct peer_client *netrun_peer(const struct netrun *nr, int node)
{
    return nr->peers[node].client;
}

int netrun_node_ns(const struct netrun *nr, int node)
{
    if (nr->parts) {
        char err[8];
        int n = netrun_parts_node(nr, node, "", err, sizeof err);
        return n < 0 ? -1 : netrun_node_ns(netrun_parts_inner(nr), n);
    }
    return nr->kernel ? emu_tc_node_ns(nr->kernel, node) : -1;
}

int netrun_node_here(const struct netrun *nr, int node, const char *what, char *err, size_t errlen)
{
    return nr->parts && netrun_parts_node(nr, node, what, err, errlen) < 0 ? -1 : 0;
}

void netrun_close_peers(struct netrun *nr)
{
    if (nr->parts) return netrun_parts_close_peers(nr);
    ev_timer_stop(nr->loop, &nr->sample_timer);
    netrun_dataplane_stop(nr);
    link_sampler_stop(nr->sampler); /* before the namespaces go */
    nr->sampler = NULL;
    netrun_free_traces(nr); /* the links change no more */
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client) peer_client_close(nr->peers[i].client);
}

/* ---- release ----
 *
 * Everything that goes at once goes first (release_begin): peers
 * (SIGKILLed), linkd, the namespaces, the registry's entries. Three things
 * may take a moment: the killed peers' exits (a peer frees its memory
 * first: tens of ms for half a GiB), then the peer template's exit (on EOF;
 * SIGKILL after a second; it outlives its peers, peer_template.h) and the
 * cgroups' removal (a killed peer leaves its group a little after it is
 * reaped). netrun_release waits for them on the loop, a timer checking the
 * peers and retrying the cgroups; netrun_free, for when no loop runs (the
 * run's teardown), waits here: for the peers (controller/reaper.h), the
 * template and the cgroups, and for a build step still running on its
 * thread (seconds at most: a link that never runs times out), which a
 * release on the loop never meets (netlife releases a network once built). */

#define RELEASE_CGROUP_TIMEOUT_S 1.0 /* as emu_cgroup_run_remove's own bound */
#define RELEASE_RETRY_S 0.01

static void release_begin(struct netrun *nr)
{
    /* A build in flight: its step off the loop ends first (a few seconds
     * at most: a link that never runs times out). Only netrun_free meets
     * one, where no loop runs: a release on the loop comes after the build
     * (netlife_release), or from its failure once its step has ended. */
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    nr->freeing = true;
    host_probe_forget(nr); /* a build waiting for a probe */
    netrun_kernel_ops_drop(nr);
    ev_timer_stop(nr->loop, &nr->linkd_deadline);
    ev_async_stop(nr->loop, &nr->job_done);
    ev_timer_stop(nr->loop, &nr->template_deadline);
    ev_timer_stop(nr->loop, &nr->sample_timer);
    link_sampler_stop(nr->sampler); /* its sockets live in the namespaces freed below */
    nr->sampler = NULL;
    netrun_free_traces(nr);
    netrun_dataplane_free(nr->dataplane);
    nr->dataplane = NULL;
    nr->links_record = NULL;
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        struct netrun_peer *p = &nr->peers[i];
        if (p->old) close(p->child_end); /* a restart's new peer never starts */
        peer_client_release(p->old, &nr->dying);
        p->old = NULL;
        peer_client_release(nr->peers[i].client, &nr->dying); /* kills a survivor */
        nr->peers[i].client = NULL;
        free(nr->peers[i].told);
        nr->peers[i].told = NULL;
    }
    /* The TAPs are persistent (linkd_client.c): neither closing our
     * namespace fds nor linkd's exit deletes them one by one; each namespace
     * goes once the last of us lets go and takes its devices along in one
     * batch. End every linkd before reaping any, so they exit side by side. */
    emu_tc_destroy(nr->kernel);
    nr->kernel = NULL;
    for (size_t i = 0; i < nr->n_linkd; i++) {
        linkd_client_close(nr->linkd[i]); /* linkd exits on EOF */
        linkd_client_kill(nr->linkd[i], SIGKILL);
    }
    for (size_t i = 0; i < nr->n_linkd; i++)
        linkd_client_free(nr->linkd[i]);
    free(nr->linkd);
    nr->linkd = NULL;
    nr->n_linkd = 0;
    free(nr->link_adds);
    nr->link_adds = NULL;
    topo_routing_free(&nr->routing);
    char err[256];
    if (nr->registry) {
        registry_remove_network(nr->registry, nr->net->name);
        if (registry_commit(nr->registry, err, sizeof err) < 0) ctl_log("%s", err);
    }
}

/* Frees nr; then, after a release, tells whoever waits for it. */
static void release_finish(struct netrun *nr, bool notify)
{
    bool failed_build = nr->release.failed_build;
    netrun_built_fn built = nr->built;
    void *built_ctx = nr->built_ctx;
    struct net_error error = nr->job.error;
    netrun_released_fn released = nr->release.released;
    void *ctx = nr->release.ctx;
    ev_timer_stop(nr->loop, &nr->release.timer);
    free(nr->peers);
    free(nr);
    if (!notify) return;
    if (failed_build)
        built(built_ctx, NULL, &error);
    else if (released)
        released(ctx);
}

static void on_template_gone(void *ctx)
{
    struct netrun *nr = ctx;
    nr->template = NULL; /* the release timer finishes at its next turn */
}

/* The killed peers are reaped: the template may go, and the cgroups'
 * removal has its deadline from now. */
static bool peers_reaped(struct netrun *nr)
{
    if (nr->release.template_stopping) return true;
    if (nr->dying.pending) return false;
    nr->release.template_stopping = true;
    nr->release.cgroup_deadline = mono_s() + RELEASE_CGROUP_TIMEOUT_S;
    peer_template_stop(nr->template, on_template_gone, nr);
    return true;
}

void netrun_on_release_timer(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, release.timer);
    if (!peers_reaped(nr)) return;
    if (nr->cgroups_made) {
        char err[256];
        int rc = emu_cgroup_run_remove_try(&nr->cgroup, nr->run_id, err, sizeof err);
        if (rc != 1 || mono_s() > nr->release.cgroup_deadline) netrun_cgroups_released(nr, rc, err);
    }
    if (nr->template || nr->cgroups_made) return;
    release_finish(nr, true);
}

void netrun_release(struct netrun *nr, netrun_released_fn released, void *ctx)
{
    if (nr->parts) return netrun_parts_release(nr, released, ctx);
    release_begin(nr);
    nr->release.active = true;
    nr->release.released = released;
    nr->release.ctx = ctx;
    /* The template goes once its peers have (peer_template.h): at the
     * timer's first turn that finds them reaped. */
    ev_timer_set(&nr->release.timer, 0, RELEASE_RETRY_S); /* the first turn: at once */
    ev_timer_start(nr->loop, &nr->release.timer);
}

void netrun_free(struct netrun *nr)
{
    if (nr && nr->parts) return netrun_parts_free(nr);
    if (!nr) return;
    if (!nr->release.active) release_begin(nr);
    ev_timer_stop(nr->loop, &nr->release.timer);
    reaper_wait(&nr->dying);              /* SIGKILLed: their exits, before the template's */
    peer_template_stop_now(nr->template); /* also one that netrun_release is ending */
    nr->template = NULL;
    char err[256];
    if (nr->cgroups_made)
        netrun_cgroups_released(nr, emu_cgroup_run_remove(&nr->cgroup, nr->run_id, err, sizeof err),
                                err);
    release_finish(nr, false);
}
