/* control.h — the control channel of hiernet-linkd.
 *
 * Provides the MessagePack-RPC server (proto/protocol codec) on the socketpair
 * fd the controller passed with --control-fd. Methods (params and results are
 * maps; rates in bit/s, times in microseconds, loss as a fraction 0..1):
 *
 *   ping           {}                              -> {pong, pid, links}
 *   link_add       {id, a={netns_path, ifname, mac?, mtu?, up?, persist?}, b={...},
 *                   <emulation>, ab={<emulation>}?, ba={<emulation>}?,
 *                   offload="auto"|"on"|"off"?, seed?}
 *                                                  -> {id, a={ifname, ifindex}, b={...}}
 *   link_set       {id, <emulation>, ab=?, ba=?, offload=?}   -> {id}
 *   link_down      {id}                            -> {id, up=false}
 *   link_up        {id}                            -> {id, up=true}
 *   link_stats     {id, reset_peak?}               -> {id, up, ab={counters}, ba={counters}}
 *   link_stats_all {reset_peak?}                   -> {links=[{id, up, ab, ba}, ...]}
 *   link_del       {id}                            -> {id}
 *   drop_root      {uid, gid}                      -> {uid}: gives up root for good
 *                  (common/privdrop.h) once every link is made; link_add fails after it
 *
 * <emulation> keys: bw, delay, jitter, jitter_dist="uniform"|"normal",
 * reorder, loss, ge_p, ge_r, ge_h, ge_k, queue (packets), queue_bytes,
 * overhead (wire bytes per frame). Top-level keys apply to both directions,
 * ab / ba maps override one direction (a→b is what a's side sends).
 *
 * An end may instead be {vni, local, remote, port} (proto/linkd_methods.h):
 * the far end of a cut link, a UDP socket from this machine's underlay
 * address to the other machine's (underlay.h); its reply is {ifname="",
 * ifindex=0}. At most one end of a link is such.
 *
 * An end with persist=true leaves its TAP to its namespace when linkd exits
 * (tap.h); link_del and a failed link_add still remove it.
 *
 * The control struct owns the fd, its watchers, the reader and the output
 * buffer. EOF (or an unusable stream) breaks the loop: linkd then exits and
 * its TAPs vanish, persistent ones with their namespaces. */
#pragma once

#include "proto/protocol.h"
#include "emu/linkd/forward.h"

#include <ev.h>
#include <msgpack.h>

struct linkd_control {
    struct linkd *ld;
    int fd;
    ev_io read_io, write_io;
    struct proto_reader reader;
    msgpack_sbuffer out;
    msgpack_packer pk; /* writes into out */
    size_t out_sent;
    bool closed;
    pid_t parent; /* the controller, whose death must still kill us after drop_root */
};

int linkd_control_start(struct linkd_control *c, struct linkd *ld, int fd, char *err,
                        size_t errlen);
void linkd_control_stop(struct linkd_control *c);
