/* netrun_plan.c — a build's decisions before anything is made: the
 * backend (what the links ask for and the host's kernel offers), the
 * devices the nodes ask for, the switches' ports, the addresses and
 * routes. */
#include "controller/netrun_internal.h"

#include "controller/backend_pick.h"
#include "controller/host_probe.h"
#include "controller/log.h"
#include "kernels/device.h"
#include "topo/address.h"
#include "emu/nl.h"

#include <stdio.h>
#include <string.h>

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
static int keep_linkd_options(struct netrun *nr, const struct emu_nl_features *f, bool *env_error,
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
    else if (!f->available[EMU_NL_FEATURE_RED]) {
        *env_error = true;
        snprintf(err, errlen,
                 "network '%s': backend 'kernel' cannot mark ECN here: this kernel has no marking "
                 "qdisc (%s); use backend 'user' or 'auto'",
                 net->name, f->reason[EMU_NL_FEATURE_RED]);
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
const struct emu_nl_features *netrun_kernel_features(char *err, size_t errlen)
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
        if (!topo_node_local_host(n)) continue;
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
    const struct emu_nl_features *f = netrun_kernel_features(why, sizeof why);
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
        !f->available[EMU_NL_FEATURE_NETEM]) {
        *env_error = true; /* this host's kernel lacks it */
        snprintf(err, errlen,
                 "network '%s': backend 'kernel' cannot emulate delay, jitter or loss here: this "
                 "kernel has no sch_netem (%s); use backend 'user' or 'auto'",
                 net->name, f->reason[EMU_NL_FEATURE_NETEM]);
        return -1;
    }
    *env_error = false;
    return 0;
}

/* ---- devices ---- */

/* A node asking for a device this host lacks fails the start, naming why;
 * *node is the one at fault. */
int netrun_check_devices(struct netrun *nr, int *node, bool *env_error, char *err, size_t errlen)
{
    for (size_t i = 0; i < nr->net->n_nodes; i++) {
        const struct topo_node *n = &nr->net->nodes[i];
        enum kern_device device;
        char why[256];
        if (!topo_node_local_host(n)) continue;
        *node = (int)i;
        if (kern_device_parse(n->device, &device, why, sizeof why) < 0) {
            snprintf(err, errlen, "node '%s': %s", n->name, why);
            return -1;
        }
        /* Checked here too, not only by the peer as it opens the device:
         * before any namespace or process exists, and as an environment
         * error (exit code 3). CUDA's check loads its module: probed off
         * the loop before the build begins (netrun_wants_cuda). */
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
bool netrun_wants_cuda(const struct topo_network *net)
{
    for (size_t i = 0; i < net->n_nodes; i++)
        if (topo_node_local_host(&net->nodes[i]) && strcmp(net->nodes[i].device, "cuda") == 0)
            return true;
    return false;
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

/* A part's plan came with it (topo/part.h): its routes are copied. */
static int take_part_plan(struct netrun *nr, char *err, size_t errlen)
{
    if (!nr->given_routing || nr->given_routing->n_nodes != nr->net->n_nodes)
        return snprintf(err, errlen, "network '%s': a part needs its routes", nr->net->name), -1;
    if (topo_routing_copy(nr->given_routing, &nr->routing) < 0)
        return snprintf(err, errlen, "network '%s': out of memory", nr->net->name), -1;
    return 0;
}

/* Addresses and routes: pure computation on the model. */
static int plan_topology(struct netrun *nr, int *node, char *err, size_t errlen)
{
    struct topo_network *net = nr->net;
    if (net->planned) return take_part_plan(nr, err, errlen);
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
int netrun_choose_and_plan(struct netrun *nr, struct net_error *error)
{
    char *err = error->message;
    size_t errlen = sizeof error->message;
    bool env_error = false;
    int rc = choose_backend(nr, &env_error, err, errlen);
    netrun_phase_end(nr, "backend");
    if (rc == 0) rc = plan_topology(nr, &error->node, err, errlen);
    netrun_phase_end(nr, "plan");
    if (rc < 0) error->code = net_error_build_code(env_error);
    return rc;
}
