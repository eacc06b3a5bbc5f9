/* netrun_linkd.c — the user backend's links: the hiernet-linkd processes,
 * a link_add per link spread over them, root dropped once every TAP is
 * open, then the addresses and routes on the TAPs off the loop. A part's
 * cut link is a TAP at its local end and linkd's UDP socket to the other
 * machine's linkd at the remote one (emu/linkd/underlay.h). */
#include "controller/netrun_internal.h"

#include "common/container.h"
#include "controller/linkd_client.h"
#include "controller/registry.h"
#include "emu/tc_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One linkd process serves this many links before another is started, up to
 * four per core: a process is one event loop, so links spread over the
 * cores. */
#define LINKS_PER_LINKD 16
static int start_linkds(struct netrun *nr, char *err, size_t errlen)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = (nr->net->n_links + LINKS_PER_LINKD - 1) / LINKS_PER_LINKD;
    if (want < 1) want = 1;
    if (cores > 0 && want > 4 * (size_t)cores) want = 4 * (size_t)cores;
    nr->linkd = calloc(want, sizeof *nr->linkd);
    if (!nr->linkd) return snprintf(err, errlen, "out of memory"), -1;
    for (; nr->n_linkd < want; nr->n_linkd++) {
        char why[512];
        struct linkd_client *lc = linkd_client_start(nr->loop, why, sizeof why);
        if (!lc) return snprintf(err, errlen, "hiernet-linkd: %s", why), -1;
        nr->linkd[nr->n_linkd] = lc;
        char name[32];
        snprintf(name, sizeof name, "@linkd%zu", nr->n_linkd + 1);
        if (nr->registry && registry_add_node(nr->registry, nr->net->name, name,
                                              linkd_client_pid(lc), 0, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* How long linkd may take to answer every link_add (or drop_root). */
double netrun_linkd_setup_timeout(const struct netrun *nr)
{
    return 5.0 + 0.02 * (double)nr->net->n_links;
}

struct linkd_client *netrun_linkd_of(const struct netrun *nr, int link)
{
    return nr->linkd[(size_t)link % nr->n_linkd];
}

/* Backend user: linkd makes every link a TAP pair it forwards between.
 * The requests go out at once (spread over the linkd processes); each reply
 * brings a link's ifindexes (on_link_added); once all are in, every linkd
 * drops root, and then the addresses are configured off the loop. */
struct link_add_ctx {
    struct netrun *nr;
    int link;
};

static void linkd_settled(struct netrun *nr);

/* One of linkd's replies; error names what failed, link the link (or -1). */
static void linkd_answered(struct netrun *nr, int link, const char *error)
{
    if (error) netrun_job_fail_at(nr, true, -1, link, error);
    if (--nr->linkd_pending == 0) linkd_settled(nr);
}

/* "link a-b: hiernet-linkd: <cause>": the step names the link it made. */
static void link_error(const struct netrun *nr, int link, const char *cause, char *err,
                       size_t errlen)
{
    char what[80];
    topo_link_describe(nr->net, &nr->net->links[link], what, sizeof what);
    snprintf(err, errlen, "link %s: hiernet-linkd: %s", what, cause);
}

static void on_link_added(void *ctx, int ifindex_a, int ifindex_b, const char *error)
{
    struct link_add_ctx *c = ctx;
    struct netrun *nr = c->nr;
    if (nr->freeing || nr->linkd_pending == 0) return; /* abandoned */
    char why[1024];
    if (error) link_error(nr, c->link, error, why, sizeof why);
    if (!error) emu_tc_set_link_ifindex(nr->kernel, c->link, ifindex_a, ifindex_b);
    linkd_answered(nr, c->link, error ? why : NULL);
}

static void on_linkd_dropped(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    struct netrun *nr = ctx;
    if (nr->freeing || nr->linkd_pending == 0) return;
    char why[512];
    if (error) snprintf(why, sizeof why, "hiernet-linkd: drop_root: %s", error);
    linkd_answered(nr, -1, error ? why : NULL);
}

void netrun_on_linkd_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, linkd_deadline);
    char why[160];
    snprintf(why, sizeof why, "hiernet-linkd: %zu request(s) unanswered after %.1f s",
             nr->linkd_pending, netrun_linkd_setup_timeout(nr));
    netrun_job_fail(nr, true, why);
    nr->linkd_pending = 1; /* later replies are ignored from here on */
    linkd_answered(nr, -1, NULL);
}

/* Every TAP is open: linkd needs root no more. */
static int linkd_drop_root(struct netrun *nr, char *err, size_t errlen)
{
    nr->linkd_dropping = true;
    for (size_t i = 0; i < nr->n_linkd; i++) {
        if (linkd_client_drop_root(nr->linkd[i], nr->helper.uid, nr->helper.gid, on_linkd_dropped,
                                   nr, err, errlen) < 0)
            return -1;
        nr->linkd_pending++;
    }
    return 0;
}

static void work_user_configure(struct netrun *nr);

static void linkd_settled(struct netrun *nr)
{
    ev_timer_stop(nr->loop, &nr->linkd_deadline);
    char err[512];
    if (nr->job.rc == 0 && nr->helper.drop && !nr->linkd_dropping) {
        if (linkd_drop_root(nr, err, sizeof err) < 0) netrun_job_fail(nr, true, err);
        if (nr->linkd_pending) { /* a fresh allowance for the drops */
            ev_timer_set(&nr->linkd_deadline, netrun_linkd_setup_timeout(nr), 0);
            return ev_timer_start(nr->loop, &nr->linkd_deadline);
        }
    }
    if (nr->job.rc < 0) return netrun_links_done(nr);
    netrun_job_begin(nr, work_user_configure, netrun_links_done);
}

/* Link l's end at node: a TAP in the node's namespace, or, at a part's
 * remote node (topo/part.h), linkd's socket to that node's machine. */
static void user_link_end(const struct netrun *nr, size_t l, int node, const char *ifname,
                          char path[64], struct linkd_client_end *end)
{
    const struct topo_network *net = nr->net;
    if (net->nodes[node].remote) {
        *end = (struct linkd_client_end){.vni = net->links[l].vni,
                                         .local = net->underlay_local,
                                         .remote = net->links[l].underlay_remote};
        return;
    }
    /* linkd opens our namespace fds through /proc: they have no other name. */
    snprintf(path, 64, "/proc/%d/fd/%d", (int)getpid(), emu_tc_node_ns(nr->kernel, node));
    *end = (struct linkd_client_end){.ns_path = path, .ifname = ifname};
}

/* *link: the one whose request failed, or -1. */
static int request_user_links(struct netrun *nr, int *link_at, char *err, size_t errlen)
{
    const struct topo_network *net = nr->net;
    nr->link_adds = calloc(net->n_links ? net->n_links : 1, sizeof *nr->link_adds);
    if (!nr->link_adds) return snprintf(err, errlen, "out of memory"), -1;
    for (size_t l = 0; l < net->n_links; l++) {
        const struct topo_link *link = &net->links[l];
        char path_a[64], path_b[64];
        struct linkd_client_end a, b;
        user_link_end(nr, l, link->a, link->ifname_a, path_a, &a);
        user_link_end(nr, l, link->b, link->ifname_b, path_b, &b);
        /* The network's seed makes a run's losses and jitter reproducible. */
        uint64_t seed = net->seed * 1000003u + l;
        struct topo_link_params installed;
        topo_link_params_install(net, link, &link->params, &installed);
        nr->link_adds[l] = (struct link_add_ctx){nr, (int)l};
        char why[512];
        if (linkd_client_link_add(netrun_linkd_of(nr, (int)l), (int)l, &a, &b, &installed, seed,
                                  on_link_added, &nr->link_adds[l], why, sizeof why) < 0) {
            *link_at = (int)l;
            link_error(nr, (int)l, why, err, errlen);
            return -1;
        }
        nr->linkd_pending++;
    }
    return 0;
}

void netrun_make_user_links(struct netrun *nr)
{
    char err[1024];
    int link = -1;
    if (emu_tc_underlay_check(nr->kernel, err, sizeof err) < 0 ||
        start_linkds(nr, err, sizeof err) < 0 || request_user_links(nr, &link, err, sizeof err) < 0)
        netrun_job_fail_at(nr, true, -1, link, err);
    if (nr->linkd_pending == 0) return linkd_settled(nr);
    ev_now_update(nr->loop); /* the linkds' starts took time the cached clock missed */
    ev_timer_start(nr->loop, &nr->linkd_deadline);
}

/* Backend user: addresses and routes on linkd's TAPs. Off the loop. */
static void work_user_configure(struct netrun *nr)
{
    char err[1024];
    if (emu_tc_configure(nr->kernel, &nr->routing, false, err, sizeof err) < 0)
        netrun_job_fail(nr, true, err);
}
