/* bench_topo_startup.c — micro-benchmark of emu/'s kernel layer (label
 * netns, root; prints figures, asserts only that the steps succeed):
 * N namespaces (default 1000; argv[1] overrides) in a ring of N veth pairs,
 * every namespace with lo up, a node address, both link addresses and a
 * default route, then teardown. Last line: one JSON object of the figures.
 *
 * The ring gives every namespace two interfaces whose ifindexes are chosen
 * up front (emu_netns_ifindex_alloc), so no lookups are needed: the pattern
 * the topology engine can use. */
#include <arpa/inet.h>
#include <netlink/msg.h>

#include "helpers.h"
#include "emu/netns.h"
#include "emu/nl.h"

static char err[512];
static int *r_if, *l_if; /* per node: its end of the next link, of the previous */

/* 10.(i / 250).(i % 250 * 1).x style plans would do; a flat /30 per link
 * from 10.128.0.0 and node addresses from 10.64.0.0 keep it simple. */
static uint32_t link_addr(size_t link, int end)
{
    return 0x0a800000u + (uint32_t)link * 4 + 1 + (uint32_t)end;
}

static uint32_t node_addr(size_t node)
{
    return 0x0a400000u + (uint32_t)node + 1;
}

static int make_links(struct nl_sock *host, struct emu_netns *ns, size_t n)
{
    struct emu_nl_batch batch;
    char a_name[16], b_name[16];
    int rc;

    emu_nl_batch_init(&batch, host);
    for (size_t i = 0; i < n; i++) {
        snprintf(a_name, sizeof a_name, "r%u", (unsigned)i);
        snprintf(b_name, sizeof b_name, "l%u", (unsigned)((i + 1) % n));
        r_if[i] = emu_netns_ifindex_alloc(&ns[i]);
        l_if[(i + 1) % n] = emu_netns_ifindex_alloc(&ns[(i + 1) % n]);
        struct emu_nl_veth_end a = {.ns_fd = ns[i].fd, .name = a_name, .ifindex = r_if[i]};
        struct emu_nl_veth_end b = {
            .ns_fd = ns[(i + 1) % n].fd, .name = b_name, .ifindex = l_if[(i + 1) % n]};
        emu_nl_batch_add(&batch, emu_nl_veth_build(&a, &b, 1500, 1), "veth %s/%s", a_name, b_name);
    }
    rc = emu_nl_batch_run(&batch, err, sizeof err);
    emu_nl_batch_free(&batch);
    return rc;
}

/* Node i's two routes: default via the next node, host route back to the
 * previous one. */
static void ring_routes(size_t i, size_t n, struct emu_nl_route *route, struct emu_nl_route *back)
{
    size_t previous = (i + n - 1) % n;
    *route = (struct emu_nl_route){
        .gateway = link_addr(i, 1), .ifindex = r_if[i], .pref_src = node_addr(i)};
    *back = (struct emu_nl_route){.dst = node_addr(previous),
                                  .dst_len = 32,
                                  .gateway = link_addr(previous, 0),
                                  .ifindex = l_if[i],
                                  .pref_src = node_addr(i)};
}

/* lo up + node address, r end address, l end up + address, default route
 * via the next node, host route back to the previous node: one batch, one
 * sendmsg, per namespace. */
static int configure_node(struct emu_netns *ns, size_t i, size_t n)
{
    size_t previous = (i + n - 1) % n;
    struct emu_nl_route route, back;
    ring_routes(i, n, &route, &back);
    struct emu_nl_batch batch;
    int rc;

    emu_nl_batch_init(&batch, ns->sock);
    emu_nl_batch_add(&batch, emu_nl_link_updown_build(1, 1), "lo up");
    emu_nl_batch_add(&batch, emu_nl_addr_build(1, node_addr(i), 32), "node address");
    emu_nl_batch_add(&batch, emu_nl_addr_build(r_if[i], link_addr(i, 0), 30), "r address");
    emu_nl_batch_add(&batch, emu_nl_link_updown_build(l_if[i], 1), "l up");
    emu_nl_batch_add(&batch, emu_nl_addr_build(l_if[i], link_addr(previous, 1), 30), "l address");
    emu_nl_batch_add(&batch, emu_nl_route_build(&route, 0), "default route");
    emu_nl_batch_add(&batch, emu_nl_route_build(&back, 0), "route back");
    rc = emu_nl_batch_run(&batch, err, sizeof err);
    emu_nl_batch_free(&batch);
    return rc;
}

/* The same work one request at a time, for comparison. */
static int configure_node_unbatched(struct emu_netns *ns, size_t i, size_t n)
{
    size_t previous = (i + n - 1) % n;
    struct emu_nl_route route, back;
    ring_routes(i, n, &route, &back);
    return emu_nl_loopback_setup(ns->sock, node_addr(i), err, sizeof err) ||
           emu_nl_addr_add(ns->sock, r_if[i], link_addr(i, 0), 30, "r", err, sizeof err) ||
           emu_nl_interface_up(ns->sock, l_if[i], "l", link_addr(previous, 1), 30, err,
                               sizeof err) ||
           emu_nl_route_add(ns->sock, &route, 0, err, sizeof err) ||
           emu_nl_route_add(ns->sock, &back, 0, err, sizeof err);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    struct emu_netns *ns = calloc(n, sizeof *ns);
    r_if = calloc(n > 100 ? n : 100, sizeof *r_if);
    l_if = calloc(n > 100 ? n : 100, sizeof *l_if);
    unsigned flags = EMU_NETNS_SOCKET | EMU_NETNS_FORWARDING | EMU_NETNS_NO_IPV6;
    struct nl_sock *host;
    double t0, t_ns, t_links, t_config, t_close, t_one;
    int failed = 0;

    helper_require_root("needs root (network namespaces, veth)");
    helper_raise_fd_limit();
    if (!ns || !r_if || !l_if || n < 3) CHECK_SKIP("need at least 3 nodes");
    host = emu_nl_open(err, sizeof err);
    CHECK_MSG(host != NULL, "%s", err);

    t0 = mono_s();
    CHECK_MSG(emu_netns_create_many(ns, n, flags, 0, err, sizeof err) == 0, "%s", err);
    t_ns = mono_s();
    CHECK_MSG(make_links(host, ns, n) == 0, "%s", err);
    t_links = mono_s();
    for (size_t i = 0; i < n && !failed; i++)
        failed = configure_node(&ns[i], i, n);
    CHECK_MSG(!failed, "%s", err);
    t_config = mono_s();
    /* Spot check: node 0 reaches node 1's address and back (farther nodes
     * answer along the ring's other side, more hops than a TTL allows). */
    uint32_t far = htonl(node_addr(1));
    char far_text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &far, far_text, sizeof far_text);
    int ping_ok = helper_ping(ns[0].fd, far_text) == 0;

    /* Unbatched configuration of a second, small ring for comparison. */
    struct emu_netns small[100];
    CHECK_MSG(emu_netns_create_many(small, 100, flags, 0, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(make_links(host, small, 100) == 0, "%s", err);
    double t_small1 = mono_s();
    for (size_t i = 0; i < 100 && !failed; i++)
        failed = configure_node_unbatched(&small[i], i, 100);
    CHECK_MSG(!failed, "%s", err);
    t_one = (mono_s() - t_small1) / 100;
    for (size_t i = 0; i < 100; i++)
        emu_netns_close(&small[i]);

    double t_close0 = mono_s();
    for (size_t i = 0; i < n; i++)
        emu_netns_close(&ns[i]);
    t_close = mono_s() - t_close0;
    emu_nl_close(host);

    printf("namespaces:   %zu in %.3f s (%.0f us each, lo, socket)\n", n, t_ns - t0,
           (t_ns - t0) / (double)n * 1e6);
    printf("veth pairs:   %zu in %.3f s (%.0f us each, batched, ends placed by ns fd)\n", n,
           t_links - t_ns, (t_links - t_ns) / (double)n * 1e6);
    printf("addressing:   %zu nodes in %.3f s (%.0f us each: lo up, 3 addresses, 1 up, 2 routes)\n",
           n, t_config - t_links, (t_config - t_links) / (double)n * 1e6);
    printf("  unbatched:  %.0f us per node (same 7 requests, one sendmsg each)\n", t_one * 1e6);
    printf("total up:     %.3f s\n", t_config - t0);
    printf("close:        %.3f s (the kernel frees namespaces and veths asynchronously)\n",
           t_close);
    printf("ping node 0 -> node 1 address: %s\n", ping_ok ? "ok" : "FAILED");
    CHECK(ping_ok);
    printf("{\"bench\":\"topo_netlink_startup\",\"nodes\":%zu,\"netns_s\":%.4f,\"veth_s\":%.4f,"
           "\"config_s\":%.4f,\"total_up_s\":%.4f,\"close_s\":%.4f,\"config_batched_us\":%.1f,"
           "\"config_unbatched_us\":%.1f,\"batch_speedup\":%.2f}\n",
           n, t_ns - t0, t_links - t_ns, t_config - t_links, t_config - t0, t_close,
           (t_config - t_links) / (double)n * 1e6, t_one * 1e6,
           t_one / ((t_config - t_links) / (double)n));
    free(ns);
    free(r_if);
    free(l_if);
    return check_report();
}
