/* netrun.c — one started network (see netrun.h). */
#include "controller/netrun.h"

#include "common/clock.h"
#include "common/container.h"
#include "controller/backend_pick.h"
#include "controller/link_sampler.h"
#include "controller/host_probe.h"
#include "controller/linkd_client.h"
#include "controller/log.h"
#include "controller/peer_template.h"
#include "controller/privilege.h"
#include "controller/reaper.h"
#include "controller/record.h"
#include "controller/registry.h"
#include "controller/tcp_counters.h"
#include "controller/trace_player.h"
#include "kernels/dataset.h"
#include "kernels/device.h"
#include "topo/address.h"
#include "topo/cgroup.h"
#include "topo/kernel.h"
#include "topo/netns.h"
#include "topo/nl.h"
#include "topo/route.h"
#include "topo/shape.h"
#include "proto/msgmap.h"
#include "proto/protocol.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <sys/random.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define NETRUN_PHASES_MAX 16

struct netrun_peer {
    struct netrun *nr;
    int node;
    struct peer_client *client;
    int template_id; /* request to the peer template, -1 once adopted */
    uint8_t *told;   /* bit per node: its address was sent (netrun_tell_address) */
    bool killed;     /* netrun_peer_kill'ed, until a restart (its exit comes later) */
    /* A restart whose old peer is still exiting: the new peer's channel is
     * open (client) and its end kept for the exec that follows the exit. */
    struct peer_client *old;
    int child_end; /* valid while old is set */
};

struct netrun {
    struct ev_loop *loop;
    struct topo_network *net;
    enum topo_backend backend;
    char reason[640];
    struct topo_routing routing;
    struct topo_kernel *kernel;
    struct linkd_client **linkd; /* backend user: link l is served by linkd[l % n_linkd] */
    size_t n_linkd;
    struct netrun_peer *peers; /* one per node; client NULL for switches */
    struct topo_cgroup cgroup;
    bool cgroups_made;
    char run_id[TOPO_CGROUP_NAME_MAX + 1]; /* names the run's group: "<run id>-<network>" */
    char peer_path[4096];
    bool peer_path_given;             /* netrun_config.peer_path: always through the template */
    struct peer_template *template;   /* forks the peers at start; ends with them */
    struct privilege_identity helper; /* who peers and linkd become once set up */
    /* Proves a data connection belongs to this network (peer/data_auth.h):
     * handed to the peers with their address book, never on a command line. */
    uint8_t data_secret[32];
    struct registry *registry;
    uint32_t *loopback_next;
    netrun_exit_fn on_exit;
    void *ctx;
    /* links.csv: linkd's counters (user backend) or the veths' (kernel
     * backend, through sampler) sampled once per emulated second */
    struct record *links_record;
    struct record *tcp_record; /* tcp.csv (netrun_sample_tcp), or NULL */
    bool tcp_warned;           /* a host's counters failed to read: logged once */
    struct link_sampler *sampler;
    /* link traces: slot 3 x link + dir (0: a to b, 1: b to a, 2: both),
     * allocated at the first trace */
    struct netrun_trace_slot *traces;
    ev_timer sample_timer;
    netrun_clock_fn clock; /* the run's emulated seconds, for the time_s column */
    void *clock_ctx;
    size_t samples_pending;
    bool sample_warned; /* the sampler's first error was logged */
    /* the start's phases in order, for the log (netrun_describe_start) */
    struct {
        const char *name;
        double s;
    } phases[NETRUN_PHASES_MAX];
    size_t n_phases;
    double phase_mark, start_s;
    /* the build in flight (netrun_build): a step on a worker thread, whose
     * end the loop hears through job_done; the template's replies through
     * its own watchers (on_template_settled), bounded by template_deadline */
    struct {
        pthread_t thread;
        bool running;
        void (*work)(struct netrun *nr);
        void (*then)(struct netrun *nr);
        int rc;
        struct net_error error; /* the first failure, once rc < 0 */
    } job;
    /* The loop's own failure while a step runs off it (asking for the
     * peers while the veths are made): job_fail'ed once the step is over. */
    struct {
        bool active; /* the kernel backend's veths began with the peers' requests */
        int rc;
        struct net_error error;
    } beside;
    ev_async job_done;
    ev_timer template_deadline;
    bool collecting; /* the links are made: the template's settling ends the build */
    bool plan_late;  /* the backend and the plan wait for the kernel's probe */
    bool building;
    bool freeing; /* released: replies still arriving are ignored */
    /* peers SIGKILLed by a restart or the release, not reaped yet */
    struct reaper_group dying;
    /* netrun_release: what is waited for on the loop, then who is told */
    struct {
        bool active;
        bool template_stopping; /* the peers are gone: the template goes */
        bool failed_build;      /* build_fail's release: `built` is told, not `released` */
        netrun_released_fn released;
        void *ctx;
        double cgroup_deadline;
        ev_timer timer; /* the cgroups' removal retried, the template's exit awaited */
    } release;
    /* backend user: linkd's replies outstanding during the build */
    struct link_add_ctx *link_adds;
    size_t linkd_pending;
    bool linkd_dropping;
    ev_timer linkd_deadline;
    netrun_built_fn built;
    netrun_phase_fn links_made;
    void *built_ctx;
    /* Once built: the kernel changes asked for, in order, the first one
     * running on the build's thread; and the loop's own view of the
     * partitions in place (the kernel layer's record is the thread's). */
    struct kernel_op *ops, *ops_tail;
    unsigned char **cuts;
    size_t n_cuts;
};

struct netrun_trace_slot {
    struct netrun *nr;
    int link, dir;
    struct trace_player *player;
};

/* One linkd process serves this many links before another is started, up to
 * four per core: a process is one event loop, so links spread over the
 * cores. */
#define LINKS_PER_LINKD 16

/* A Mahimahi schedule in one linkd message (at most 9 bytes an entry in
 * its 4 MiB limit): 400,000 opportunities are 10 minutes at 9.6 Mbit/s. */
#define NETRUN_SCHEDULE_MAX 400000u

/* How long start waits for the peer template to have forked a peer. */
#define PEER_START_TIMEOUT_S 30.0

/* The build's steps (below): a step off the loop, and the first error. */
static void job_begin(struct netrun *nr, void (*work)(struct netrun *),
                      void (*then)(struct netrun *));
static void job_fail(struct netrun *nr, bool env_error, const char *err);
static void job_fail_at(struct netrun *nr, bool env_error, int node, int link, const char *err);
static void phase_end(struct netrun *nr, const char *name);

/* ---- backend choice ---- */

static bool wants_gilbert(const struct topo_network *net)
{
    for (size_t i = 0; i < net->n_links; i++)
        if (net->links[i].params.gilbert) return true;
    return false;
}

static bool wants_ecn_marking(const struct topo_network *net)
{
    for (size_t i = 0; i < net->n_links; i++) {
        const struct topo_units_queue *t = &net->links[i].params.ecn_threshold;
        if (t->packets || t->bytes) return true;
    }
    return false;
}

/* Link options only hiernet-linkd emulates: the kernel backend's netem plans
 * carry no Gilbert-Elliott model, and its qdiscs (htb/tbf, bfifo, netem)
 * never mark ECN. Auto moves to the user backend; a network that asked for
 * the kernel is refused: for ECN as an environment error where the kernel
 * has no marking qdisc (sch_red) for hiernet to install. */
static int keep_linkd_options(struct netrun *nr, const struct topo_nl_features *f, bool *env_error,
                              char *err, size_t errlen)
{
    const struct topo_network *net = nr->net;
    bool gilbert = wants_gilbert(net), ecn = wants_ecn_marking(net);
    if (nr->backend != TOPO_BACKEND_KERNEL || (!gilbert && !ecn)) return 0;
    const char *what = gilbert ? "gilbert burst loss" : "ECN marking (ecn_threshold)";
    if (net->backend != TOPO_BACKEND_KERNEL) {
        nr->backend = TOPO_BACKEND_USER;
        snprintf(nr->reason, sizeof nr->reason, "auto: %s needs hiernet-linkd", what);
        return 0;
    }
    if (gilbert)
        snprintf(err, errlen, "network '%s': gilbert burst loss needs backend 'user' (or 'auto')",
                 net->name);
    else if (!f->available[TOPO_NL_FEATURE_RED]) {
        *env_error = true;
        snprintf(err, errlen,
                 "network '%s': backend 'kernel' cannot mark ECN here: this kernel has no marking "
                 "qdisc (%s); use backend 'user' or 'auto'",
                 net->name, f->reason[TOPO_NL_FEATURE_RED]);
    } else
        snprintf(err, errlen,
                 "network '%s': ecn_threshold needs backend 'user' (or 'auto'): the kernel "
                 "backend does not install sch_red yet",
                 net->name);
    return -1;
}

static unsigned link_needs(const struct topo_network *net)
{
    unsigned needs = 0;
    for (size_t i = 0; i < net->n_links; i++) {
        const struct topo_link_params *p = &net->links[i].params;
        if (p->rate_bps) needs |= BACKEND_NEED_RATE;
        if (p->delay_ns || p->jitter_ns || p->loss > 0) needs |= BACKEND_NEED_NETEM;
    }
    for (size_t i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == TOPO_NODE_SWITCH) needs |= BACKEND_NEED_BRIDGE;
    return needs;
}

/* The kernel's features, probed once per process off the loop
 * (controller/host_probe.h); the build asks once the probe is done. */
static const struct topo_nl_features *features(char *err, size_t errlen)
{
    return host_probe_kernel(err, errlen);
}

/* Backend none: the peers share the host's TCP stack, which a run must not
 * retune; a node's TCP settings are refused rather than dropped. */
static int refuse_tcp_settings(const struct topo_network *net, char *err, size_t errlen)
{
    for (size_t i = 0; i < net->n_nodes; i++) {
        if (!topo_tcp_any(&net->nodes[i].tcp)) continue;
        snprintf(err, errlen,
                 "network '%s': node '%s' has tcp settings, which backend 'none' cannot apply "
                 "(its peers share the host's TCP stack); use backend 'kernel' or 'user'",
                 net->name, net->nodes[i].name);
        return -1;
    }
    return 0;
}

/* The congestion control a namespace starts with: the host's default
 * (a new namespace inherits it); "" when unreadable. */
static void default_cc(char *cc, size_t len)
{
    cc[0] = '\0';
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
    if (!f) return;
    if (!fgets(cc, (int)len, f)) cc[0] = '\0';
    cc[strcspn(cc, "\n")] = '\0';
    fclose(f);
}

/* A link that marks CE changes nothing for senders that are not
 * ECN-capable (their packets meet drop-tail as before) or whose congestion
 * control ignores the echo (BBR v1). Said once at the start rather than
 * changed behind the scenario's back: a run may compare exactly that. */
static void warn_ecn_senders(const struct topo_network *net)
{
    if (!wants_ecn_marking(net)) return;
    char host_cc[TOPO_TCP_CC_MAX];
    default_cc(host_cc, sizeof host_cc);
    const char *no_ecn = NULL, *bbr = NULL;
    size_t n_no_ecn = 0, n_bbr = 0;
    for (size_t i = 0; i < net->n_nodes; i++) {
        const struct topo_node *n = &net->nodes[i];
        if (n->kind != TOPO_NODE_HOST) continue;
        const char *cc = n->tcp.cc[0] ? n->tcp.cc : host_cc;
        if (n->tcp.ecn != TOPO_TCP_ECN_ON && !n_no_ecn++) no_ecn = n->name;
        if (n->tcp.ecn == TOPO_TCP_ECN_ON && strcmp(cc, "bbr") == 0 && !n_bbr++) bbr = n->name;
    }
    if (n_no_ecn)
        ctl_log("warning: network '%s': a link marks ECN (ecn_threshold), but %zu node(s) "
                "('%s' first) leave tcp ecn off: their packets are not ECN-capable and meet the "
                "queue's drop-tail as before; set tcp = { ecn = true }",
                net->name, n_no_ecn, no_ecn);
    if (n_bbr)
        ctl_log("warning: network '%s': %zu node(s) ('%s' first) send ECN-capable packets with "
                "congestion control bbr, which ignores ECN marks; set tcp = { cc = \"cubic\" } "
                "(or reno)",
                net->name, n_bbr, bbr);
}

static int choose_backend(struct netrun *nr, bool *env_error, char *err, size_t errlen)
{
    const struct topo_network *net = nr->net;
    if (net->backend == TOPO_BACKEND_NONE) {
        snprintf(nr->reason, sizeof nr->reason, "asked for: no emulation");
        nr->backend = TOPO_BACKEND_NONE;
        return refuse_tcp_settings(net, err, errlen);
    }
    char why[512];
    const struct topo_nl_features *f = features(why, sizeof why);
    *env_error = true;
    if (!f) {
        snprintf(err, errlen,
                 "network '%s': backend '%s' needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) to create "
                 "namespaces: %s; run as root or use backend = \"none\"",
                 net->name, topo_backend_name(net->backend), why);
        return -1;
    }
    unsigned needs = link_needs(net);
    int pick = backend_pick(f, needs, why, sizeof why);
    if (net->backend == TOPO_BACKEND_AUTO) {
        if (pick == TOPO_BACKEND_NONE) {
            snprintf(err, errlen, "network '%s': no backend can emulate its links here: %s",
                     net->name, why);
            return -1;
        }
        nr->backend = (enum topo_backend)pick;
        snprintf(nr->reason, sizeof nr->reason, "auto: %s", why);
    } else {
        nr->backend = net->backend;
        snprintf(nr->reason, sizeof nr->reason, "asked for");
    }
    *env_error = false; /* from here on, the scenario asks for what cannot be */
    if (keep_linkd_options(nr, f, env_error, err, errlen) < 0) return -1;
    warn_ecn_senders(net);
    if (nr->backend == TOPO_BACKEND_KERNEL && (needs & BACKEND_NEED_NETEM) &&
        !f->available[TOPO_NL_FEATURE_NETEM]) {
        *env_error = true; /* this host's kernel lacks it */
        snprintf(err, errlen,
                 "network '%s': backend 'kernel' cannot emulate delay, jitter or loss here: this "
                 "kernel has no sch_netem (%s); use backend 'user' or 'auto'",
                 net->name, f->reason[TOPO_NL_FEATURE_NETEM]);
        return -1;
    }
    *env_error = false;
    return 0;
}

/* ---- devices ---- */

/* A node asking for a device this host lacks fails the start, naming why;
 * *node is the one at fault. */
static int check_devices(struct netrun *nr, int *node, bool *env_error, char *err, size_t errlen)
{
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        const struct topo_node *n = &nr->net->nodes[i];
        enum kern_device device;
        char why[256];
        if (n->kind != TOPO_NODE_HOST) continue;
        *node = (int)i;
        if (kern_device_parse(n->device, &device, why, sizeof why) < 0) {
            snprintf(err, errlen, "node '%s': %s", n->name, why);
            return -1;
        }
        /* Checked here too, not only by the peer as it opens the device:
         * before any namespace or process exists, and as an environment
         * error (exit code 3). CUDA's check loads its module: probed off
         * the loop before the build begins (wants_cuda). */
        if (device == KERN_DEVICE_CUDA && !host_probe_cuda(why, sizeof why)) {
            *env_error = true;
            snprintf(err, errlen, "node '%s': device '%s' is not available: %s", n->name, n->device,
                     why);
            return -1;
        }
    }
    *node = -1;
    return 0;
}

/* A node asks for cuda: the build begins once its probe is done. */
static bool wants_cuda(const struct topo_network *net)
{
    for (size_t i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == TOPO_NODE_HOST && strcmp(net->nodes[i].device, "cuda") == 0)
            return true;
    return false;
}

/* ---- topology ---- */

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
static double linkd_setup_timeout(const struct netrun *nr)
{
    return 5.0 + 0.02 * (double)nr->net->n_links;
}

static struct linkd_client *linkd_of(const struct netrun *nr, int link)
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
    if (error) job_fail_at(nr, true, -1, link, error);
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
    if (!error) topo_kernel_set_link_ifindex(nr->kernel, c->link, ifindex_a, ifindex_b);
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

static void on_linkd_deadline(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, linkd_deadline);
    char why[160];
    snprintf(why, sizeof why, "hiernet-linkd: %zu request(s) unanswered after %.1f s",
             nr->linkd_pending, linkd_setup_timeout(nr));
    job_fail(nr, true, why);
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

static void links_done(struct netrun *nr);
static void work_user_configure(struct netrun *nr);

static void linkd_settled(struct netrun *nr)
{
    ev_timer_stop(nr->loop, &nr->linkd_deadline);
    char err[512];
    if (nr->job.rc == 0 && nr->helper.drop && !nr->linkd_dropping) {
        if (linkd_drop_root(nr, err, sizeof err) < 0) job_fail(nr, true, err);
        if (nr->linkd_pending) { /* a fresh allowance for the drops */
            ev_timer_set(&nr->linkd_deadline, linkd_setup_timeout(nr), 0);
            return ev_timer_start(nr->loop, &nr->linkd_deadline);
        }
    }
    if (nr->job.rc < 0) return links_done(nr);
    job_begin(nr, work_user_configure, links_done);
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
        /* linkd opens our namespace fds through /proc: they have no other name. */
        snprintf(path_a, sizeof path_a, "/proc/%d/fd/%d", (int)getpid(),
                 topo_kernel_node_ns(nr->kernel, link->a));
        snprintf(path_b, sizeof path_b, "/proc/%d/fd/%d", (int)getpid(),
                 topo_kernel_node_ns(nr->kernel, link->b));
        /* The network's seed makes a run's losses and jitter reproducible. */
        uint64_t seed = net->seed * 1000003u + l;
        struct topo_link_params installed;
        topo_link_params_dilate(&link->params, net->dilation, &installed);
        nr->link_adds[l] = (struct link_add_ctx){nr, (int)l};
        char why[512];
        if (linkd_client_link_add(linkd_of(nr, (int)l), (int)l, path_a, link->ifname_a, path_b,
                                  link->ifname_b, &installed, seed, on_link_added,
                                  &nr->link_adds[l], why, sizeof why) < 0) {
            *link_at = (int)l;
            link_error(nr, (int)l, why, err, errlen);
            return -1;
        }
        nr->linkd_pending++;
    }
    return 0;
}

static void make_user_links(struct netrun *nr)
{
    char err[1024];
    int link = -1;
    if (start_linkds(nr, err, sizeof err) < 0 || request_user_links(nr, &link, err, sizeof err) < 0)
        job_fail_at(nr, true, -1, link, err);
    if (nr->linkd_pending == 0) return linkd_settled(nr);
    ev_now_update(nr->loop); /* the linkds' starts took time the cached clock missed */
    ev_timer_start(nr->loop, &nr->linkd_deadline);
}

/* A Linux bridge numbers its ports with 10 bits, port 0 unused. */
#define BRIDGE_MAX_PORTS 1023

/* Emulated switches are bridges: refused before anything is made (*node:
 * the switch). */
static int check_switch_ports(const struct topo_network *net, int *node, char *err, size_t errlen)
{
    for (size_t i = 0; i < net->n_nodes; i++) {
        if (net->nodes[i].kind != TOPO_NODE_SWITCH) continue;
        size_t ports = 0;
        for (size_t l = 0; l < net->n_links; l++)
            ports += (net->links[l].a == (int)i) + (net->links[l].b == (int)i);
        if (ports > BRIDGE_MAX_PORTS)
            return *node = (int)i,
                   snprintf(err, errlen,
                            "switch '%s': %zu links, but a Linux bridge takes at most %d ports; "
                            "split the segment over several switches",
                            net->nodes[i].name, ports, BRIDGE_MAX_PORTS),
                   -1;
    }
    return 0;
}

/* Addresses and routes: pure computation on the model. */
static int plan_topology(struct netrun *nr, int *node, char *err, size_t errlen)
{
    struct topo_network *net = nr->net;
    if (nr->backend == TOPO_BACKEND_NONE) {
        if (topo_assign_loopback_addresses(net, nr->loopback_next, err, errlen) < 0) return -1;
        return net->n_links ? topo_routing_compute(net, &nr->routing, err, errlen) : 0;
    }
    if (check_switch_ports(net, node, err, errlen) < 0 ||
        topo_assign_addresses(net, err, errlen) < 0)
        return -1;
    return topo_routing_compute(net, &nr->routing, err, errlen);
}

/* The backend and the address plan: while the namespaces are made when
 * the kernel's probe is done at the build's beginning, else right after
 * them (namespaces_made). */
static int choose_and_plan(struct netrun *nr, struct net_error *error)
{
    char *err = error->message;
    size_t errlen = sizeof error->message;
    bool env_error = false;
    int rc = choose_backend(nr, &env_error, err, errlen);
    phase_end(nr, "backend");
    if (rc == 0) rc = plan_topology(nr, &error->node, err, errlen);
    phase_end(nr, "plan");
    if (rc < 0) error->code = net_error_build_code(env_error);
    return rc;
}

/* ---- the build's steps off the loop ----
 *
 * The kernel work of a build (namespaces, veths, addresses, routes, qdiscs,
 * waiting for the links to run) takes from milliseconds to seconds and
 * touches nothing but the netrun's own topology: it runs on a thread of its
 * own, one step at a time, and the loop hears of its end through job_done
 * (an ev_async) and goes on with the next step. Every signal stays blocked
 * on that thread: they are the loop's. */
static void *job_main(void *arg)
{
    struct netrun *nr = arg;
    nr->job.work(nr);
    ev_async_send(nr->loop, &nr->job_done);
    return NULL;
}

static void job_begin(struct netrun *nr, void (*work)(struct netrun *),
                      void (*then)(struct netrun *))
{
    nr->job.work = work;
    nr->job.then = then;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    nr->job.running = pthread_create(&nr->job.thread, NULL, job_main, nr) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!nr->job.running) job_main(nr); /* no thread: here, in turn; `then` still on the loop */
}

/* Goes on with `then` at the loop's next turn (no work off the loop). */
static void job_then(struct netrun *nr, void (*then)(struct netrun *))
{
    nr->job.then = then;
    ev_async_send(nr->loop, &nr->job_done);
}

static void on_job_done(EV_P_ ev_async *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, job_done);
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    void (*then)(struct netrun *) = nr->job.then;
    nr->job.then = NULL;
    if (then) then(nr);
}

/* The build fails; node and link are the ones at fault (-1: none known). */
static void job_fail_at(struct netrun *nr, bool env_error, int node, int link, const char *err)
{
    if (nr->job.rc < 0) return; /* the first error wins */
    nr->job.rc = -1;
    net_error_set(&nr->job.error, net_error_build_code(env_error), node, link, err);
}

/* The build fails with a step's error (the first error wins). */
static void job_fail_with(struct netrun *nr, const struct net_error *e)
{
    if (nr->job.rc < 0) return;
    nr->job.rc = -1;
    nr->job.error = *e;
}

static void job_fail(struct netrun *nr, bool env_error, const char *err)
{
    job_fail_at(nr, env_error, -1, -1, err);
}

/* Emulated backends: the namespaces (and bridges), before the peers. They
 * need neither the backend's choice nor the address plan, so they are made
 * off the loop while the loop probes the kernel and plans. */
static void work_namespaces(struct netrun *nr)
{
    struct topo_kernel_options opts = {false, TOPO_SHAPE_ROOT_HTB}; /* netem: set after */
    char err[512];
    if (topo_kernel_create(nr->net, &opts, &nr->kernel, err, sizeof err) < 0)
        job_fail(nr, true, err); /* the model is valid: what fails is the host */
}

/* The kernel now knows which qdiscs it has. */
static void namespaces_done(struct netrun *nr)
{
    if (nr->backend == TOPO_BACKEND_NONE || !nr->kernel) return;
    char why[256];
    const struct topo_nl_features *f = features(why, sizeof why);
    struct topo_kernel_options opts = {f && f->available[TOPO_NL_FEATURE_NETEM],
                                       TOPO_SHAPE_ROOT_HTB};
    topo_kernel_set_options(nr->kernel, &opts);
}

/* Links, addresses, routes and qdiscs, while the peers start up on the
 * other core (they bind their node address before it exists: IP_FREEBIND).
 * Off the loop. */
static void work_kernel_links(struct netrun *nr)
{
    char err[1024];
    if (topo_kernel_add_veths(nr->kernel, err, sizeof err) < 0 ||
        topo_kernel_configure(nr->kernel, &nr->routing, true, err, sizeof err) < 0)
        job_fail(nr, true, err);
}

/* Backend user: addresses and routes on linkd's TAPs. Off the loop. */
static void work_user_configure(struct netrun *nr)
{
    char err[1024];
    if (topo_kernel_configure(nr->kernel, &nr->routing, false, err, sizeof err) < 0)
        job_fail(nr, true, err);
}

/* ---- cgroups ---- */

static bool wants_cpu_limit(const struct topo_network *net)
{
    for (size_t i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].kind == TOPO_NODE_HOST && net->nodes[i].cpu > 0) return true;
    return false;
}

/* The run's group is listed in the registry before it exists, so a crash
 * in between cannot leak it (registry.h). */
static int prepare_cgroups(struct netrun *nr, bool *env_error, char *err, size_t errlen)
{
    if (!wants_cpu_limit(nr->net)) return 0;
    char why[256];
    if (topo_cgroup_detect(&nr->cgroup, why, sizeof why) < 0 ||
        nr->cgroup.version == TOPO_CGROUP_NONE) {
        *env_error = true;
        snprintf(err, errlen, "network '%s': cpu= limits need a cgroup cpu controller: %s",
                 nr->net->name, why);
        return -1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s", nr->cgroup.root, TOPO_CGROUP_PREFIX, nr->run_id);
    if (nr->registry && (registry_add_cgroup(nr->registry, path, err, errlen) < 0 ||
                         registry_commit(nr->registry, err, errlen) < 0))
        return -1;
    if (topo_cgroup_run_create(&nr->cgroup, nr->run_id, err, errlen) < 0) {
        *env_error = true;
        return -1;
    }
    nr->cgroups_made = true;
    return 0;
}

static int limit_cpu(struct netrun *nr, int node, pid_t pid, char *err, size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    if (!(n->cpu > 0)) return 0;
    char path[512];
    if (topo_cgroup_node_create(&nr->cgroup, nr->run_id, n->name, n->cpu, path, sizeof path, err,
                                errlen) < 0)
        return -1;
    return topo_cgroup_attach(path, pid, err, errlen);
}

/* ---- peers ---- */

/* The identity peers and linkd drop to, and the network's data secret. */
static int prepare_helpers(struct netrun *nr, bool *env_error, char *err, size_t errlen)
{
    if (getrandom(nr->data_secret, sizeof nr->data_secret, 0) != (ssize_t)sizeof nr->data_secret) {
        *env_error = true;
        return snprintf(err, errlen, "network '%s': getrandom: %s", nr->net->name, strerror(errno)),
               -1;
    }
    if (privilege_helper_identity(&nr->helper, err, errlen) < 0) {
        *env_error = true;
        return -1;
    }
    char why[256];
    if (nr->helper.drop && dataset_cache_grant(nr->helper.uid, nr->helper.gid, why, sizeof why) < 0)
        ctl_log("warning: %s; peers decompress datasets into memory", why);
    return 0;
}

static void restart_exec(struct netrun_peer *p);

/* The last thing the exiting peer's client does (peer_client.h): a
 * restart's old client may be freed here. */
static void on_peer_exit(void *ctx, int status)
{
    struct netrun_peer *p = ctx;
    if (p->nr->on_exit) p->nr->on_exit(p->nr->ctx, p->node, status);
    if (p->old && peer_client_exited(p->old)) restart_exec(p);
}

/* A peer's command line (after the executable) and environment. */
struct peer_argv {
    char threads[16], speed[32], dilation[32], blas[48];
    const char *args[22];
    const char *env[2];
};

static void peer_argv_build(const struct netrun *nr, const struct topo_node *n, struct peer_argv *a)
{
    snprintf(a->threads, sizeof a->threads, "%d", n->threads > 0 ? n->threads : 1);
    snprintf(a->speed, sizeof a->speed, "%.17g", n->speed > 0 ? n->speed : 1.0);
    double dilation = nr->net->dilation;
    snprintf(a->dilation, sizeof a->dilation, "%.17g", dilation > 1 ? dilation : 1.0);
    snprintf(a->blas, sizeof a->blas, "OPENBLAS_NUM_THREADS=%s", a->threads);
    /* --data-auth: the secret follows on the control channel (peers). */
    const char *args[] = {"--node",   n->name,   "--addr",      n->addr,      "--threads",
                          a->threads, "--speed", a->speed,      "--dilation", a->dilation,
                          "--device", n->device, "--data-auth", NULL,         NULL,
                          NULL,       NULL,      NULL};
    int next = 13;
    if (nr->helper.drop) { /* a root controller's peers give up root once set up */
        args[next++] = "--user";
        args[next++] = nr->helper.arg;
    }
    if (n->profile[0]) { /* profiled compute (kernels/profile.h) */
        args[next++] = "--profile";
        args[next++] = n->profile;
    }
    memcpy(a->args, args, sizeof args);
    a->env[0] = a->blas;
    a->env[1] = NULL;
}

/* The peer of `node` runs as pid: limit it, register it. */
static int register_peer(struct netrun *nr, int node, pid_t pid, char *err, size_t errlen)
{
    if (limit_cpu(nr, node, pid, err, errlen) < 0) return -1;
    if (!nr->registry) return 0;
    unsigned long inode = nr->kernel ? topo_netns_inode(netrun_node_ns(nr, node)) : 0;
    return registry_add_node(nr->registry, nr->net->name, nr->net->nodes[node].name, pid, inode,
                             err, errlen);
}

/* One peer by exec: for a restart, when no template runs. */
static int spawn_peer(struct netrun *nr, const char *peer_path, int node, char *err, size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    struct netrun_peer *p = &nr->peers[node];
    struct peer_argv a;
    peer_argv_build(nr, n, &a);
    struct peer_spawn spec = {n->name, peer_path, a.args, netrun_node_ns(nr, node), a.env};
    struct peer_client_hooks hooks = {NULL, on_peer_exit, p};
    p->client = peer_client_spawn(nr->loop, &spec, &hooks, err, errlen);
    if (!p->client) return -1;
    return register_peer(nr, node, peer_client_pid(p->client), err, errlen);
}

/* One host's peer: exec'd, or asked of the template. */
static int request_peer(struct netrun *nr, int node, char *err, size_t errlen)
{
    const struct topo_node *n = &nr->net->nodes[node];
    struct netrun_peer *p = &nr->peers[node];
    if (!nr->template) return spawn_peer(nr, nr->peer_path, node, err, errlen);
    struct peer_spawn spec = {.node = n->name};
    struct peer_client_hooks hooks = {NULL, on_peer_exit, p};
    int child_end;
    p->client = peer_client_open(nr->loop, &spec, &hooks, &child_end, err, errlen);
    if (!p->client) return -1;
    struct peer_argv a;
    peer_argv_build(nr, n, &a);
    p->template_id = peer_template_request(nr->template, a.args, child_end,
                                           netrun_node_ns(nr, node), err, errlen);
    close(child_end);
    return p->template_id < 0 ? -1 : 0;
}

/* Every host's peer, asked of a template (controller/peer_template.h): the
 * forks run on another core while the links are made; adopt_peers then
 * collects them. With HIERNET_PEER set, each peer is exec'd instead, so a
 * wrapper there (valgrind, strace, a test's fake peer) sees every peer.
 * A failure for one node names it, and *node is its index. */
static void on_template_settled(void *ctx);

static int request_peers(struct netrun *nr, int *node, char *err, size_t errlen)
{
    if (!nr->peer_path[0] && peer_client_sibling_path("hiernet-peer", "HIERNET_PEER", nr->peer_path,
                                                      sizeof nr->peer_path) < 0)
        return snprintf(err, errlen, "cannot locate the hiernet-peer executable"), -1;
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        nr->peers[i] = (struct netrun_peer){nr, (int)i, NULL, -1, NULL};
    const char *wrapper = getenv("HIERNET_PEER");
    if (!(wrapper && *wrapper) || nr->peer_path_given) {
        nr->template = peer_template_start(nr->loop, nr->peer_path, err, errlen);
        if (!nr->template) return -1;
        peer_template_on_settled(nr->template, on_template_settled, nr);
    }
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        if (nr->net->nodes[i].kind != TOPO_NODE_HOST) continue;
        char why[512];
        if (request_peer(nr, (int)i, why, sizeof why) < 0) {
            *node = (int)i;
            return snprintf(err, errlen, "node '%s': %s", nr->net->nodes[i].name, why), -1;
        }
    }
    return 0;
}

/* Collects the peers the template started; runs after a failed start too,
 * so every started peer is known (and killed) when the network is freed.
 * The first failure names its node (*node). */
static int adopt_peers(struct netrun *nr, int *node, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; nr->template && i < nr->net->n_nodes; i++) {
        struct netrun_peer *p = &nr->peers[i];
        if (!p->client || p->template_id < 0) continue;
        char why[512];
        /* Settled (collect_peers): nothing is waited for here. */
        pid_t pid = peer_template_pid(nr->template, p->template_id, 0, why, sizeof why);
        p->template_id = -1;
        if (pid > 0) peer_client_adopt(p->client, pid);
        if ((pid < 0 || register_peer(nr, (int)i, pid, why, sizeof why) < 0) && rc == 0) {
            *node = (int)i;
            snprintf(err, errlen, "node '%s': %s", nr->net->nodes[i].name, why);
            rc = -1;
        }
    }
    /* The template stays until the peers are gone (peer_template.h). */
    if (rc == 0 && nr->registry) rc = registry_commit(nr->registry, err, errlen);
    return rc;
}

/* ---- the start's profile ---- */

static void phase_add(struct netrun *nr, const char *name, double seconds)
{
    if (nr->n_phases == NETRUN_PHASES_MAX) return;
    nr->phases[nr->n_phases].name = name;
    nr->phases[nr->n_phases].s = seconds;
    nr->n_phases++;
}

/* Ends the phase in progress under `name`. */
static void phase_end(struct netrun *nr, const char *name)
{
    double now = mono_s();
    phase_add(nr, name, now - nr->phase_mark);
    nr->phase_mark = now;
}

/* The kernel layer's own passes, which ran inside the last phase ("links"). */
static void phase_split_kernel(struct netrun *nr)
{
    if (!nr->kernel || nr->n_phases == 0) return;
    const struct topo_kernel_timing *t = topo_kernel_timing(nr->kernel);
    nr->phases[nr->n_phases - 1].s -= t->interfaces + t->routes + t->running;
    phase_add(nr, "interfaces", t->interfaces);
    phase_add(nr, "routes+qdiscs", t->routes);
    phase_add(nr, "running", t->running);
}

/* The same when the peers were asked for while the veths were made: from
 * the namespaces' end, the kernel's passes as they took, and under "peers
 * asked" only what asking for the peers added beyond them. */
static void phase_split_beside(struct netrun *nr)
{
    double now = mono_s(), since = now - nr->phase_mark;
    const struct topo_kernel_timing *t = topo_kernel_timing(nr->kernel);
    double job = t->links + t->interfaces + t->routes + t->running;
    phase_add(nr, "peers asked", since > job ? since - job : 0);
    phase_add(nr, "links", t->links);
    phase_add(nr, "interfaces", t->interfaces);
    phase_add(nr, "routes+qdiscs", t->routes);
    phase_add(nr, "running", t->running);
    nr->phase_mark = now;
}

/* ---- lifecycle ---- */

static void on_sample_timer(EV_P_ ev_timer *w, int revents);

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
    if (adopt_peers(nr, &node, err, sizeof err) < 0) job_fail_at(nr, false, node, -1, err);
    phase_end(nr, "peers forked");
    if (nr->job.rc < 0) return build_fail(nr);
    nr->net->backend_used = nr->backend;
    nr->building = false;
    nr->built(nr->built_ctx, nr, NULL);
}

/* Every peer asked for is forked (or the template broke): once the links
 * are made too, the build ends. */
static void on_template_settled(void *ctx)
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
static void links_done(struct netrun *nr)
{
    if (nr->beside.rc < 0) {
        job_fail_with(nr, &nr->beside.error);
    }
    if (nr->beside.active) {
        phase_split_beside(nr);
    } else {
        phase_end(nr, "links");
        phase_split_kernel(nr);
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
    if (choose_and_plan(nr, &error) < 0) {
        job_fail_with(nr, &error);
        return build_fail(nr);
    }
    links_begin(nr);
}

/* The namespaces exist; the backend and the plan too, unless they wait
 * for the kernel's probe (on the loop, through its callback). */
static void namespaces_made(struct netrun *nr)
{
    phase_end(nr, "namespaces");
    if (nr->job.rc < 0) return build_fail(nr);
    if (!nr->plan_late) return links_begin(nr);
    if (host_probe_done(HOST_PROBE_KERNEL)) return plan_after_namespaces(nr);
    if (host_probe_wait(nr->loop, HOST_PROBE_KERNEL, plan_after_namespaces, nr) == 0) return;
    job_fail(nr, false, "out of memory");
    build_fail(nr);
}

/* Then: cgroups, the peers asked of the template, links.
 * The kernel backend's veths are made off the loop meanwhile: asking a
 * thousand peers of the template took 0.02-0.1 s of the start before they
 * began. A failure here then waits for that step's end (links_done). */
static void links_begin(struct netrun *nr)
{
    char err[1024];
    bool env_error = false;
    int node = -1;
    namespaces_done(nr);
    bool beside = nr->backend == TOPO_BACKEND_KERNEL;
    nr->beside.active = beside;
    if (beside) job_begin(nr, work_kernel_links, links_done);
    int rc = prepare_cgroups(nr, &env_error, err, sizeof err);
    if (rc == 0) rc = request_peers(nr, &node, err, sizeof err);
    if (!beside) phase_end(nr, "peers asked"); /* else split at links_done */
    if (rc < 0 && beside) {
        nr->beside.rc = -1;
        net_error_set(&nr->beside.error, net_error_build_code(env_error), node, -1, err);
        return; /* links_done follows the step, adopts what was asked for, then fails */
    }
    if (rc < 0) {
        job_fail_at(nr, env_error, node, -1, err);
        return links_done(nr); /* adopts what was asked for, then fails */
    }
    if (beside) return;
    if (nr->backend == TOPO_BACKEND_USER) return make_user_links(nr);
    links_done(nr);
}

static void on_release_timer(EV_P_ ev_timer *w, int revents);

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
    ev_timer_init(&nr->sample_timer, on_sample_timer, 1.0, 1.0);
    ev_async_init(&nr->job_done, on_job_done);
    ev_async_start(loop, &nr->job_done);
    ev_init(&nr->template_deadline, on_template_deadline);
    ev_init(&nr->release.timer, on_release_timer);
    ev_timer_init(&nr->linkd_deadline, on_linkd_deadline, linkd_setup_timeout(nr), 0);
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
    int rc = check_devices(nr, &error->node, &env_error, error->message, sizeof error->message);
    if (rc == 0) rc = prepare_helpers(nr, &env_error, error->message, sizeof error->message);
    if (rc < 0) error->code = net_error_build_code(env_error);
    bool emulated = nr->net->backend != TOPO_BACKEND_NONE;
    if (rc == 0 && emulated) job_begin(nr, work_namespaces, namespaces_made);
    nr->plan_late = emulated && !host_probe_done(HOST_PROBE_KERNEL);
    if (rc == 0 && !nr->plan_late) rc = choose_and_plan(nr, error);
    if (rc == 0 && !emulated) job_then(nr, namespaces_made);
    return rc;
}

/* The CUDA probe is done: the build begins; a failure goes the way of any
 * build's (namespaces_made, once a step begun has ended). */
static void on_devices_probed(void *ctx)
{
    struct netrun *nr = ctx;
    struct net_error error;
    if (build_begin(nr, &error) == 0) return;
    job_fail_with(nr, &error);
    if (!nr->job.running) job_then(nr, namespaces_made);
}

int netrun_build(struct ev_loop *loop, struct topo_network *net, const struct netrun_config *cfg,
                 netrun_exit_fn on_exit, void *ctx, netrun_built_fn built, void *built_ctx,
                 struct netrun **out, struct net_error *error)
{
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
    nr->peer_path_given = cfg->peer_path != NULL;
    /* Asked for at once: the namespaces' step runs meanwhile, and the
     * backend's choice waits for it only if it is not done by then. */
    if (net->backend != TOPO_BACKEND_NONE) host_probe_begin(loop, HOST_PROBE_KERNEL);
    int rc = 0;
    if (wants_cuda(net) && !host_probe_done(HOST_PROBE_CUDA))
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

const char *netrun_backend(const struct netrun *nr)
{
    return topo_backend_name(nr->backend);
}

const char *netrun_backend_reason(const struct netrun *nr)
{
    return nr->reason;
}

void netrun_describe_start(const struct netrun *nr, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%.3f s:", nr->phase_mark - nr->start_s);
    for (size_t i = 0; i < nr->n_phases && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s %s %.3f", i ? "," : "",
                                 nr->phases[i].name, nr->phases[i].s);
}

struct peer_client *netrun_peer(const struct netrun *nr, int node)
{
    return nr->peers[node].client;
}

int netrun_node_ns(const struct netrun *nr, int node)
{
    return nr->kernel ? topo_kernel_node_ns(nr->kernel, node) : -1;
}

/* ---- run-time kernel changes, off the loop ----
 *
 * A partition is a netlink request per host of it, each with a route per
 * host of the other group (a heal deletes them and replays the routes): at
 * a few hundred hosts, tens of ms to seconds. So partitions, heals and the
 * kernel backend's link changes run as steps on the build's thread (the
 * build is over by then), one at a time in the order asked; the caller
 * hears of each through its callback, from the loop. That thread alone
 * uses the kernel layer's netlink sockets and its record of the partitions
 * after the build, so two changes never meet there; the loop keeps a view
 * of its own of the partitions asked for (cuts, for netrun_separated). */

enum kernel_op_kind { OP_PARTITION, OP_HEAL, OP_LINK_SET, OP_LINK_UPDOWN };
/* OP_LINK_SET's dir: 0 (a to b), 1 or TOPO_KERNEL_BOTH (l:set). */

static void cuts_free(struct netrun *nr);

struct kernel_op {
    enum kernel_op_kind kind;
    unsigned char *side; /* per node its group (owned); OP_HEAL: NULL for every cut */
    int link, dir;
    bool up;
    struct topo_link_params params;
    peer_reply_fn cb;
    void *ctx;
    int rc;
    char err[512];
    struct kernel_op *next;
};

static void work_kernel_op(struct netrun *nr)
{
    struct kernel_op *op = nr->ops;
    struct topo_kernel *k = nr->kernel;
    char *err = op->err;
    size_t len = sizeof op->err;
    if (op->kind == OP_PARTITION)
        op->rc = topo_kernel_partition(k, op->side, err, len);
    else if (op->kind == OP_HEAL)
        op->rc = topo_kernel_heal(k, op->side, NULL, err, len);
    else if (op->kind == OP_LINK_SET)
        op->rc = topo_kernel_link_set_dir(k, op->link, op->dir, &op->params, err, len);
    else
        op->rc = topo_kernel_link_updown(k, op->link, op->up, err, len);
}

/* Tells the caller (result: an empty map) and frees op. */
static void kernel_op_finish(struct kernel_op *op, const char *error)
{
    msgpack_object done = {.type = MSGPACK_OBJECT_MAP};
    op->cb(op->ctx, error, error ? NULL : &done);
    free(op->side);
    free(op);
}

static void kernel_op_done(struct netrun *nr)
{
    struct kernel_op *op = nr->ops;
    nr->ops = op->next;
    if (!nr->ops)
        nr->ops_tail = NULL;
    else
        job_begin(nr, work_kernel_op, kernel_op_done); /* the next one meanwhile */
    kernel_op_finish(op, op->rc < 0 ? op->err : NULL);
}

/* Queues a copy of *op (its side is taken over); 1: cb follows, or -1. */
static int kernel_op_queue(struct netrun *nr, const struct kernel_op *op, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen)
{
    struct kernel_op *q = malloc(sizeof *q);
    if (!q) {
        free(op->side);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    *q = *op;
    q->cb = cb;
    q->ctx = ctx;
    q->next = NULL;
    bool idle = !nr->ops;
    if (nr->ops_tail)
        nr->ops_tail->next = q;
    else
        nr->ops = q;
    nr->ops_tail = q;
    if (idle) job_begin(nr, work_kernel_op, kernel_op_done);
    return 1;
}

/* A move (netrun_link_move) changes the routing and the kernel on the
 * loop: the changes asked for before it end first, here. The one loop
 * wait left in a run's kernel changes, and only when a move meets changes
 * still under way (a churn's move while a partition or l:set runs). */
static void kernel_ops_settle(struct netrun *nr)
{
    if (!nr->ops) return;
    if (nr->job.running) pthread_join(nr->job.thread, NULL);
    nr->job.running = false;
    nr->job.then = NULL; /* its ev_async finds nothing to do */
    for (bool ran = true; nr->ops; ran = false) {
        struct kernel_op *op = nr->ops;
        if (!ran) work_kernel_op(nr); /* the first one ran on the thread */
        nr->ops = op->next;
        kernel_op_finish(op, op->rc < 0 ? op->err : NULL);
    }
    nr->ops_tail = NULL;
}

/* The release: the change running has ended (joined); the rest never run. */
static void kernel_ops_drop(struct netrun *nr)
{
    while (nr->ops) {
        struct kernel_op *op = nr->ops;
        nr->ops = op->next;
        kernel_op_finish(op, "the network was released");
    }
    nr->ops_tail = NULL;
    cuts_free(nr);
}

static int link_not_emulated(struct netrun *nr, char *err, size_t errlen)
{
    snprintf(err, errlen, "backend '%s' does not emulate links", netrun_backend(nr));
    return -1;
}

int netrun_link_set(struct netrun *nr, int link, const struct topo_link_params *params,
                    peer_reply_fn cb, void *ctx, char *err, size_t errlen)
{
    struct topo_link_params installed; /* the kernel backend dilates its own plans */
    topo_link_params_dilate(params, nr->net->dilation, &installed);
    if (nr->linkd)
        return linkd_client_link_set(linkd_of(nr, link), link, &installed, cb, ctx, err, errlen) < 0
                   ? -1
                   : 1;
    if (!nr->kernel) return link_not_emulated(nr, err, errlen);
    struct kernel_op op = {
        .kind = OP_LINK_SET, .link = link, .dir = TOPO_KERNEL_BOTH, .params = *params};
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* ---- link traces ---- */

static void on_trace_reply(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx;
    (void)result;
    /* linkd refuses nothing a trace sends but for a link it lost: say why */
    if (error) ctl_log("warning: a link trace's change failed: %s", error);
}

/* The link's parameters with a trace's values in: the model's, so that the
 * fields a trace does not carry keep what l:set gave them. */
static struct topo_link_params traced_params(const struct netrun *nr, int link,
                                             const struct topo_trace *t,
                                             const struct topo_trace_sample *now)
{
    struct topo_link_params p = nr->net->links[link].params;
    p.rate_bps = now->rate_bps;
    if (t->has_delay) p.delay_ns = now->delay_ns;
    if (t->has_loss) p.loss = now->loss;
    if (p.queue.bdp > 0) /* a queue of bandwidth-delay products follows the rate */
        p.queue.bytes =
            topo_shape_bdp_bytes(p.queue.bdp, p.rate_bps, 2 * (p.delay_ns + p.jitter_ns),
                                 TOPO_SHAPE_DEFAULT_MTU + TOPO_SHAPE_ETH_HLEN);
    return p;
}

/* A trace's change on the kernel backend, queued behind the kernel
 * changes running off the loop (the thread alone uses the kernel layer's
 * sockets meanwhile). */
struct trace_change {
    struct netrun *nr;
    int link, dir;
    struct topo_link_params params;
};

static void on_trace_change(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    struct trace_change *c = ctx;
    struct netrun *nr = c->nr;
    if (!error && c->dir == TOPO_KERNEL_BOTH) nr->net->links[c->link].params = c->params;
    if (error && !nr->freeing) {
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[c->link], name, sizeof name);
        ctl_log("warning: link %s: trace: %s", name, error);
    }
    free(c);
}

static void trace_change_queue(struct netrun *nr, const struct netrun_trace_slot *slot,
                               const struct topo_link_params *p)
{
    struct trace_change *c = malloc(sizeof *c);
    char err[128];
    struct kernel_op op = {.kind = OP_LINK_SET, .link = slot->link, .dir = slot->dir, .params = *p};
    if (c) *c = (struct trace_change){nr, slot->link, slot->dir, *p};
    if (!c || kernel_op_queue(nr, &op, on_trace_change, c, err, sizeof err) < 0) {
        free(c);
        ctl_log("warning: a link trace's change was dropped: out of memory");
    }
}

static void apply_trace(void *ctx, const struct topo_trace *t, const struct topo_trace_sample *now)
{
    struct netrun_trace_slot *slot = ctx;
    struct netrun *nr = slot->nr;
    /* Mahimahi on the user backend: linkd's schedule rules, the series is shown */
    if (t->opportunities_ms && nr->linkd) return;
    struct topo_link_params p = traced_params(nr, slot->link, t, now), installed;
    char err[512];
    int rc;
    if (nr->linkd) {
        topo_link_params_dilate(&p, nr->net->dilation, &installed);
        rc = linkd_client_link_set_dir(linkd_of(nr, slot->link), slot->link, slot->dir, &installed,
                                       on_trace_reply, NULL, err, sizeof err);
    } else if (nr->ops) { /* a change runs on the thread: this one goes after it */
        return trace_change_queue(nr, slot, &p);
    } else { /* the thread is idle: a qdisc change or two, here */
        rc = topo_kernel_link_set_dir(nr->kernel, slot->link, slot->dir, &p, err, sizeof err);
    }
    if (rc < 0) {
        char name[80];
        topo_link_describe(nr->net, &nr->net->links[slot->link], name, sizeof name);
        ctl_log("warning: link %s: trace at %.3f s: %s", name, now->t_s, err);
        return;
    }
    if (slot->dir == TOPO_KERNEL_BOTH) nr->net->links[slot->link].params = p;
}

/* A Mahimahi trace's opportunities to linkd, in real µs from now. */
static int send_schedule(struct netrun *nr, int link, int dir, const struct topo_trace *t,
                         char *err, size_t errlen)
{
    if (t->n_opportunities > NETRUN_SCHEDULE_MAX)
        return snprintf(err, errlen, "%zu delivery opportunities, more than linkd takes (%u)",
                        t->n_opportunities, NETRUN_SCHEDULE_MAX),
               -1;
    uint64_t *at = malloc(t->n_opportunities * sizeof *at);
    if (!at) return snprintf(err, errlen, "out of memory"), -1;
    double us = 1000 * nr->net->dilation;
    for (size_t i = 0; i < t->n_opportunities; i++)
        at[i] = (uint64_t)llround(t->opportunities_ms[i] * us);
    int rc = 0;
    for (int d = 0; d < 2 && rc == 0; d++)
        if (dir == d || dir == TOPO_KERNEL_BOTH)
            rc = linkd_client_link_schedule(linkd_of(nr, link), link, d, at, t->n_opportunities,
                                            (uint64_t)llround(t->period_s * 1e3 * us),
                                            on_trace_reply, NULL, err, errlen);
    free(at);
    return rc;
}

/* Stops the traces the new one replaces: its own direction and "both"
 * (a trace on both directions replaces them all). */
static void stop_traces(struct netrun *nr, int link, int dir)
{
    for (int d = 0; d < 3; d++) {
        struct netrun_trace_slot *slot = &nr->traces[3 * link + d];
        if (!slot->player || (dir != TOPO_KERNEL_BOTH && d != dir && d != TOPO_KERNEL_BOTH))
            continue;
        bool scheduled = trace_player_trace(slot->player)->opportunities_ms && nr->linkd;
        trace_player_free(slot->player);
        slot->player = NULL;
        char err[128];
        for (int e = 0; scheduled && e < 2; e++)
            if (d == e || d == TOPO_KERNEL_BOTH)
                linkd_client_link_schedule(linkd_of(nr, link), link, e, NULL, 0, 1, on_trace_reply,
                                           NULL, err, sizeof err);
    }
}

/* The kernel backend plans the trace's first values at once, so that a
 * trace it cannot play (a delay or loss column without sch_netem) is
 * refused in the call, not logged at every change. A plan only: the
 * kernel's sockets may be in use off the loop (kernel changes). */
static bool kernel_refuses_trace(struct netrun *nr, int link, const struct topo_trace *trace,
                                 const struct trace_player_opts *opts, char *err, size_t errlen)
{
    struct topo_trace_sample first;
    topo_trace_at(trace, opts->interp, opts->loop, 0, &first);
    struct topo_link_params p = traced_params(nr, link, trace, &first);
    return topo_kernel_link_check(nr->kernel, &p, err, errlen) < 0;
}

int netrun_link_trace(struct netrun *nr, int link, int dir, struct topo_trace *trace,
                      const struct trace_player_opts *opts, char *err, size_t errlen)
{
    if (!nr->linkd && !nr->kernel) {
        topo_trace_free(trace);
        return link_not_emulated(nr, err, errlen);
    }
    if (!nr->traces && !(nr->traces = calloc(3 * nr->net->n_links, sizeof *nr->traces))) {
        topo_trace_free(trace);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    if (nr->kernel && !nr->linkd && kernel_refuses_trace(nr, link, trace, opts, err, errlen)) {
        topo_trace_free(trace);
        return -1;
    }
    stop_traces(nr, link, dir);
    if (trace->opportunities_ms && nr->linkd &&
        send_schedule(nr, link, dir, trace, err, errlen) < 0) {
        topo_trace_free(trace);
        return -1;
    }
    struct netrun_trace_slot *slot = &nr->traces[3 * link + dir];
    *slot = (struct netrun_trace_slot){nr, link, dir, NULL};
    struct trace_player_opts o = *opts;
    o.dilation = nr->net->dilation;
    slot->player = trace_player_start(nr->loop, trace, &o, apply_trace, slot);
    if (!slot->player) {
        topo_trace_free(trace);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    return 0;
}

/* The player of link's direction dir (0, 1), its own or both's; NULL if none. */
static const struct trace_player *trace_of(const struct netrun *nr, int link, int dir)
{
    if (!nr->traces) return NULL;
    const struct netrun_trace_slot *own = &nr->traces[3 * link + dir];
    return own->player ? own->player : nr->traces[3 * link + TOPO_KERNEL_BOTH].player;
}

size_t netrun_link_trace_changes(const struct netrun *nr, int link, int dir,
                                 const struct topo_trace_sample **out)
{
    const struct trace_player *p = trace_of(nr, link, dir);
    *out = NULL;
    return p ? trace_player_changes(p, out) : 0;
}

/* The rate in force on one direction: its trace's, else the link's. */
static uint64_t rate_now(const struct netrun *nr, int link, int dir)
{
    const struct trace_player *p = trace_of(nr, link, dir);
    return p ? trace_player_current(p)->rate_bps : nr->net->links[link].params.rate_bps;
}

static void free_traces(struct netrun *nr)
{
    for (size_t i = 0; nr->traces && i < 3 * nr->net->n_links; i++)
        trace_player_free(nr->traces[i].player);
    free(nr->traces);
    nr->traces = NULL;
}

int netrun_link_updown(struct netrun *nr, int link, bool up, peer_reply_fn cb, void *ctx, char *err,
                       size_t errlen)
{
    if (nr->linkd)
        return linkd_client_link_updown(linkd_of(nr, link), link, up, cb, ctx, err, errlen) < 0 ? -1
                                                                                                : 1;
    if (!nr->kernel) return link_not_emulated(nr, err, errlen);
    struct kernel_op op = {.kind = OP_LINK_UPDOWN, .link = link, .up = up};
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

int netrun_link_stats(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                      size_t errlen)
{
    if (nr->linkd)
        return linkd_client_link_stats(linkd_of(nr, link), link, cb, ctx, err, errlen) < 0 ? -1 : 1;
    snprintf(err, errlen,
             "counters come from the user backend (hiernet-linkd); backend '%s' keeps none",
             netrun_backend(nr));
    return -1;
}

bool netrun_peer_alive(const struct netrun *nr, int node)
{
    const struct peer_client *pc = nr->peers[node].client;
    return pc && !nr->peers[node].killed && !peer_client_exited(pc);
}

static void cuts_free(struct netrun *nr)
{
    for (size_t i = 0; i < nr->n_cuts; i++)
        free(nr->cuts[i]);
    free(nr->cuts);
    nr->cuts = NULL;
    nr->n_cuts = 0;
}

/* The loop's view of a partition asked for: side copied into op and cuts. */
static int cut_add(struct netrun *nr, const unsigned char *side, struct kernel_op *op)
{
    size_t n = nr->net->n_nodes;
    unsigned char *copy = malloc(n), **grown = realloc(nr->cuts, (nr->n_cuts + 1) * sizeof *grown);
    op->side = malloc(n);
    if (grown) nr->cuts = grown;
    if (!copy || !grown || !op->side) {
        free(copy);
        free(op->side);
        return -1;
    }
    memcpy(copy, side, n);
    memcpy(op->side, side, n);
    nr->cuts[nr->n_cuts++] = copy;
    return 0;
}

int netrun_partition(struct netrun *nr, const unsigned char *side, peer_reply_fn cb, void *ctx,
                     char *err, size_t errlen)
{
    if (!nr->kernel) {
        snprintf(err, errlen, "backend '%s' emulates no network to cut (use kernel, user or auto)",
                 netrun_backend(nr));
        return -1;
    }
    struct kernel_op op = {.kind = OP_PARTITION};
    if (cut_add(nr, side, &op) < 0) return snprintf(err, errlen, "out of memory"), -1;
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* The loop's view: the cuts that match side (NULL: all) go; how many. */
static size_t cuts_take(struct netrun *nr, const unsigned char *side)
{
    size_t kept = 0, n = nr->n_cuts;
    for (size_t p = 0; p < n; p++) {
        if (!side || topo_kernel_same_cut(nr->cuts[p], side, nr->net->n_nodes))
            free(nr->cuts[p]);
        else
            nr->cuts[kept++] = nr->cuts[p];
    }
    nr->n_cuts = kept;
    return n - kept;
}

int netrun_heal(struct netrun *nr, const unsigned char *side, size_t *healed, peer_reply_fn cb,
                void *ctx, char *err, size_t errlen)
{
    size_t n = nr->kernel ? cuts_take(nr, side) : 0; /* none: nothing was ever cut */
    if (healed) *healed = n;
    if (n == 0) return 0;
    struct kernel_op op = {.kind = OP_HEAL};
    if (side && !(op.side = malloc(nr->net->n_nodes)))
        return snprintf(err, errlen, "out of memory"), -1;
    if (side) memcpy(op.side, side, nr->net->n_nodes);
    return kernel_op_queue(nr, &op, cb, ctx, err, errlen);
}

/* Puts link l's far end (not `stays`'s) at node `to` in the model, with a
 * fresh interface name there; *end_a says which end moved. */
static void move_link_end(struct topo_network *net, int l, int stays, int to, bool *end_a)
{
    struct topo_link *link = &net->links[l];
    *end_a = link->b == stays;
    if (*end_a)
        link->a = to;
    else
        link->b = to;
    topo_name_link_end(net, (size_t)l, to, *end_a ? link->ifname_a : link->ifname_b);
}

int netrun_link_move(struct netrun *nr, int l, int stays, int to, char *err, size_t errlen)
{
    if (!nr->kernel) {
        snprintf(err, errlen, "backend '%s' emulates no links to move (use kernel, user or auto)",
                 netrun_backend(nr));
        return -1;
    }
    kernel_ops_settle(nr); /* the kernel layer and the routing are the loop's now */
    struct topo_network *net = nr->net;
    struct topo_link saved = net->links[l];
    int from = saved.a == stays ? saved.b : saved.a;
    bool end_a;
    move_link_end(net, l, stays, to, &end_a);
    struct topo_routing fresh;
    if (topo_routing_compute(net, &fresh, err, errlen) < 0) {
        net->links[l] = saved; /* nothing was touched yet */
        return -1;
    }
    topo_routing_free(&nr->routing);
    nr->routing = fresh; /* the kernel layer reads it through its pointer */
    int rc = topo_kernel_link_move(nr->kernel, l, end_a, from, err, errlen);
    return rc < 0 ? rc : topo_kernel_reroute(nr->kernel, l, stays, err, errlen);
}

size_t netrun_partitions(const struct netrun *nr)
{
    return nr->n_cuts;
}

bool netrun_separated(const struct netrun *nr, int a, int b)
{
    for (size_t p = 0; p < nr->n_cuts; p++) {
        const unsigned char *side = nr->cuts[p];
        if (side[a] && side[b] && side[a] != side[b]) return true;
    }
    return false;
}

void netrun_peer_kill(struct netrun *nr, int node)
{
    nr->peers[node].killed = true;
    if (nr->peers[node].client) peer_client_kill(nr->peers[node].client, SIGKILL);
}

static void on_restart_peers(void *ctx, const char *error, const msgpack_object *result)
{
    if (error) ctl_log("a restarted peer refused its data secret: %s", error);
}

/* The old peer of a restart has exited: the new one starts on the channel
 * opened for it, which its calls have been queued on. A failure is logged
 * and closes the channel: those calls fail ("peer stopped"). */
static void restart_exec(struct netrun_peer *p)
{
    struct netrun *nr = p->nr;
    const struct topo_node *n = &nr->net->nodes[p->node];
    peer_client_free(p->old);
    p->old = NULL;
    if (p->killed) { /* node:kill() again meanwhile: it stays down */
        close(p->child_end);
        peer_client_close(p->client);
        return;
    }
    struct peer_argv a;
    peer_argv_build(nr, n, &a);
    struct peer_spawn spec = {n->name, nr->peer_path, a.args, netrun_node_ns(nr, p->node), a.env};
    char err[512];
    int rc = peer_client_exec(p->client, &spec, p->child_end, err, sizeof err);
    if (rc == 0) rc = register_peer(nr, p->node, peer_client_pid(p->client), err, sizeof err);
    if (rc == 0 && nr->registry) rc = registry_commit(nr->registry, err, sizeof err);
    if (rc < 0) {
        ctl_log("node '%s': restart: %s", n->name, err);
        peer_client_close(p->client);
    }
}

/* The old peer still runs: SIGKILLed, and the new one waits for its exit
 * on the loop (it frees its memory first: tens of ms for half a GiB), so
 * that it finds the node's data port free. */
static int restart_after_exit(struct netrun *nr, struct netrun_peer *p, char *err, size_t errlen)
{
    struct peer_spawn spec = {.node = nr->net->nodes[p->node].name};
    struct peer_client_hooks hooks = {NULL, on_peer_exit, p};
    struct peer_client *client =
        peer_client_open(nr->loop, &spec, &hooks, &p->child_end, err, errlen);
    if (!client) return -1;
    peer_client_kill(p->client, SIGKILL);
    p->old = p->client;
    p->client = client;
    return 0;
}

int netrun_peer_restart(struct netrun *nr, int node, char *err, size_t errlen)
{
    struct netrun_peer *p = &nr->peers[node];
    if (p->old) return snprintf(err, errlen, "a restart is under way"), -1;
    p->killed = false;
    free(p->told); /* the fresh peer knows no address */
    p->told = NULL;
    if (p->client && !peer_client_exited(p->client)) {
        if (restart_after_exit(nr, p, err, errlen) < 0) return -1;
    } else {
        peer_client_free(p->client);
        p->client = NULL;
        if (spawn_peer(nr, nr->peer_path, node, err, errlen) < 0) return -1;
    }
    /* Its data secret, as at start: queued before any call of the
     * caller's, so the peer has it when it answers one. */
    msgpack_sbuffer secret;
    msgpack_sbuffer_init(&secret);
    netrun_pack_peer_secret(nr, &secret);
    int rc = peer_client_call(p->client, "peers", secret.data, secret.size, on_restart_peers, NULL,
                              err, errlen);
    msgpack_sbuffer_destroy(&secret);
    if (rc < 0) return -1;
    return nr->registry ? registry_commit(nr->registry, err, errlen) : 0;
}

void netrun_pack_peer_secret(const struct netrun *nr, msgpack_sbuffer *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    struct msgmap m;
    msgmap_init(&m);
    msgmap_bin(&m, "secret", nr->data_secret, sizeof nr->data_secret);
    msgmap_end(&m, &pk); /* the secret fits the builder's inline buffer: it cannot fail */
}

/* ---- the peers' address book ----
 *
 * A peer learns a node's address (peers{table = {name = addr}}) just before
 * its first send to that node, not at start: at start every peer would get
 * the whole book, which for a thousand nodes is 60 MB of requests and a
 * million entries parsed, a fifth of the start's CPU, while a parameter
 * server's workers each only ever need one entry. */

/* Nothing to do: when the peer cannot take the address, the send queued
 * behind it fails and says why. */
static void on_told(void *ctx, const char *error, const msgpack_object *result)
{
    (void)ctx, (void)error, (void)result;
}

int netrun_tell_address(struct netrun *nr, int from, int to, char *err, size_t errlen)
{
    struct netrun_peer *p = &nr->peers[from];
    if (to < 0 || (size_t)to >= nr->net->n_nodes || !p->client || !nr->peers[to].client) return 0;
    if (!p->told) p->told = calloc((nr->net->n_nodes + 7) / 8, 1);
    if (!p->told) return snprintf(err, errlen, "out of memory"), -1;
    if (p->told[to / 8] & (1u << (to % 8))) return 0;
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    struct msgmap params, table;
    msgmap_init(&params);
    msgmap_init(&table);
    msgmap_str(&table, nr->net->nodes[to].name, nr->net->nodes[to].addr);
    msgmap_key(&params, "table");
    if (!msgmap_end(&table, &params.pk) || !msgmap_end(&params, &pk)) {
        msgmap_free(&params);
        msgpack_sbuffer_destroy(&buf);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    int rc = peer_client_call(p->client, "peers", buf.data, buf.size, on_told, NULL, err, errlen);
    msgpack_sbuffer_destroy(&buf);
    if (rc == 0) p->told[to / 8] |= (uint8_t)(1u << (to % 8));
    return rc;
}

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
             (unsigned long long)rate_now(nr, id, dir[0] == 'b'));
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

static void record_link(struct netrun *nr, const char *t, const msgpack_object *entry)
{
    struct proto_args args;
    proto_args_init(&args, entry);
    int64_t id = -1;
    bool up = true;
    proto_arg_bool(&args, "up", &up);
    if (proto_arg_i64(&args, "id", &id) != 1 || id < 0 || (size_t)id >= nr->net->n_links) return;
    char name[80];
    topo_link_describe(nr->net, &nr->net->links[id], name, sizeof name);
    const msgpack_object *ab = proto_args_get(&args, "ab"), *ba = proto_args_get(&args, "ba");
    if (ab) record_direction(nr, t, (int)id, name, "ab", up, ab);
    if (ba) record_direction(nr, t, (int)id, name, "ba", up, ba);
}

static void on_links_sampled(void *ctx, const char *error, const msgpack_object *result)
{
    struct netrun *nr = ctx;
    if (nr->samples_pending) nr->samples_pending--;
    if (error || !nr->links_record) return;
    struct proto_args args;
    proto_args_init(&args, result);
    const msgpack_object *links = proto_args_get(&args, "links");
    if (!links || links->type != MSGPACK_OBJECT_ARRAY) return;
    char t[32];
    snprintf(t, sizeof t, "%.3f", nr->clock(nr->clock_ctx));
    for (uint32_t i = 0; i < links->via.array.size; i++)
        record_link(nr, t, &links->via.array.ptr[i]);
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
    snprintf(r, sizeof r, "%llu", (unsigned long long)rate_now(nr, id, dir[0] == 'b'));
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
    }
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
    nr->tcp_record = rec;
}

int netrun_tcp_counters(struct netrun *nr, int node, struct tcp_counters *out, char *err,
                        size_t errlen)
{
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
        if (nr->net->nodes[i].kind != TOPO_NODE_HOST) continue;
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

static void on_sample_timer(EV_P_ ev_timer *w, int revents)
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
    ev_timer_init(&nr->sample_timer, on_sample_timer, every, every);
    ev_timer_start(nr->loop, &nr->sample_timer);
}

void netrun_close_peers(struct netrun *nr)
{
    ev_timer_stop(nr->loop, &nr->sample_timer);
    link_sampler_stop(nr->sampler); /* before the namespaces go */
    nr->sampler = NULL;
    free_traces(nr); /* the links change no more */
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client) peer_client_close(nr->peers[i].client);
}

bool netrun_peers_exited(const struct netrun *nr)
{
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client && !peer_client_exited(nr->peers[i].client)) return false;
    return true;
}

void netrun_kill_peers(struct netrun *nr, int sig)
{
    for (size_t i = 0; i < nr->net->n_nodes; i++)
        if (nr->peers[i].client) peer_client_kill(nr->peers[i].client, sig);
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

#define RELEASE_CGROUP_TIMEOUT_S 1.0 /* as topo_cgroup_run_remove's own bound */
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
    kernel_ops_drop(nr);
    ev_timer_stop(nr->loop, &nr->linkd_deadline);
    ev_async_stop(nr->loop, &nr->job_done);
    ev_timer_stop(nr->loop, &nr->template_deadline);
    ev_timer_stop(nr->loop, &nr->sample_timer);
    link_sampler_stop(nr->sampler); /* its sockets live in the namespaces freed below */
    nr->sampler = NULL;
    free_traces(nr);
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
    topo_kernel_destroy(nr->kernel);
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

/* The run's group is gone (or given up on: said in the log): so is its entry. */
static void cgroups_released(struct netrun *nr, int rc, const char *err)
{
    if (rc != 0) ctl_log("%s", err);
    nr->cgroups_made = false;
    if (!nr->registry) return;
    char path[512], why[256];
    snprintf(path, sizeof path, "%s/%s%s", nr->cgroup.root, TOPO_CGROUP_PREFIX, nr->run_id);
    registry_remove_cgroup(nr->registry, path);
    if (registry_commit(nr->registry, why, sizeof why) < 0) ctl_log("%s", why);
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

static void on_release_timer(EV_P_ ev_timer *w, int revents)
{
    (void)revents;
    struct netrun *nr = container_of(w, struct netrun, release.timer);
    if (!peers_reaped(nr)) return;
    if (nr->cgroups_made) {
        char err[256];
        int rc = topo_cgroup_run_remove_try(&nr->cgroup, nr->run_id, err, sizeof err);
        if (rc != 1 || mono_s() > nr->release.cgroup_deadline) cgroups_released(nr, rc, err);
    }
    if (nr->template || nr->cgroups_made) return;
    release_finish(nr, true);
}

void netrun_release(struct netrun *nr, netrun_released_fn released, void *ctx)
{
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
    if (!nr) return;
    if (!nr->release.active) release_begin(nr);
    ev_timer_stop(nr->loop, &nr->release.timer);
    reaper_wait(&nr->dying);              /* SIGKILLed: their exits, before the template's */
    peer_template_stop_now(nr->template); /* also one that netrun_release is ending */
    nr->template = NULL;
    char err[256];
    if (nr->cgroups_made)
        cgroups_released(nr, topo_cgroup_run_remove(&nr->cgroup, nr->run_id, err, sizeof err), err);
    release_finish(nr, false);
}
