/* linkd_methods.h — the one list of hiernet-linkd's control methods, as
 * the controller (controller/linkd_client.c) calls them and linkd
 * (emu/linkd/control.c) dispatches them, so a method is named once.
 * Macros only: any module may include it. */
#pragma once

#define LINKD_METHOD_PING "ping"
#define LINKD_METHOD_LINK_ADD "link_add"
#define LINKD_METHOD_LINK_SET "link_set"
#define LINKD_METHOD_LINK_SCHEDULE "link_schedule"
#define LINKD_METHOD_LINK_DOWN "link_down"
#define LINKD_METHOD_LINK_UP "link_up"
#define LINKD_METHOD_LINK_STATS "link_stats"
#define LINKD_METHOD_LINK_STATS_ALL "link_stats_all"
#define LINKD_METHOD_LINK_DEL "link_del"
#define LINKD_METHOD_DROP_ROOT "drop_root"

/* Argument keys both ends name: the link each link_* method acts on (also
 * the key of each entry in link_stats_all's answer), and link_schedule's
 * direction (0 a->b, 1 b->a), period and opportunities. */
#define LINKD_ARG_ID "id"
#define LINKD_ARG_DIR "dir"
#define LINKD_ARG_PERIOD_US "period_us"
#define LINKD_ARG_AT_US "at_us"

/* link_add's end of a cut link (issue 20), instead of {netns_path,
 * ifname}: {vni, local, remote, port}, the link's VNI, this machine's and
 * the other machine's underlay IPv4 addresses (dotted) and the UDP port,
 * the same at both ends (emu/linkd/underlay.h). The port is the VNI's
 * place in a range of LINKD_UNDERLAY_PORTS from LINKD_UNDERLAY_PORT_BASE,
 * below Linux's ephemeral ports (32768..60999), so both machines agree
 * without talking and a firewall has one range to open. */
#define LINKD_ARG_VNI "vni"
#define LINKD_ARG_LOCAL "local"
#define LINKD_ARG_REMOTE "remote"
#define LINKD_ARG_PORT "port"
#define LINKD_UNDERLAY_PORT_BASE 16384
#define LINKD_UNDERLAY_PORTS 8192
#define LINKD_UNDERLAY_PORT(vni) (LINKD_UNDERLAY_PORT_BASE + (vni) % LINKD_UNDERLAY_PORTS)

/* The two directions of a link, as link_set's per-direction maps and as
 * each link's entry in link_stats / link_stats_all name them. */
#define LINKD_DIR_AB "ab"
#define LINKD_DIR_BA "ba"

/* A stats entry is {id, up, ab = {counters}, ba = {counters}}. The
 * counters, X(field of struct linkd_counters): the same names are
 * links.csv's columns (controller/netrun_csv.c reads each column under its
 * name). Beside them each direction carries its queue's present state:
 * queue_len, queue_bytes, in_flight, tso. */
#define LINKD_STATS_UP "up"
#define LINKD_STATS_COUNTERS(X)                                                                    \
    X(packets)                                                                                     \
    X(bytes)                                                                                       \
    X(delivered)                                                                                   \
    X(delivered_bytes)                                                                             \
    X(drops_loss)                                                                                  \
    X(drops_queue)                                                                                 \
    X(drops_down)                                                                                  \
    X(drops_nobuf)                                                                                 \
    X(drops_write)                                                                                 \
    X(marked)                                                                                      \
    X(queue_peak)
#define LINKD_STATS_DELIVERED_BYTES "delivered_bytes"
#define LINKD_STATS_QUEUE_PEAK "queue_peak"
