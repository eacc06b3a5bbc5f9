/* linkd_client.h — the controller's side of hiernet-linkd, the user-space
 * link emulator of backend "user".
 *
 * Starts linkd (a peer_client child in the host namespace: it exits on EOF,
 * and its TAP devices vanish with it) and encodes its requests: link_add
 * during start (its reply brings the TAP ifindexes, needed to configure
 * addresses), then link_set / link_down / link_up / link_stats at run time
 * (asynchronous, the reply goes to a callback). Units on the wire: bit/s,
 * microseconds, loss fraction, packets or bytes (emu/linkd/control.h).
 * Owns the linkd peer_client. */
#pragma once

#include "controller/peer_client.h"
#include "topo/network.h"

#include <ev.h>

struct linkd_client;

/* Starts a hiernet-linkd (HIERNET_LINKD overrides its path; with
 * HIERNET_LINKD_PRIORITY=1..99 it runs at SCHED_FIFO, see linkd_client.c).
 * NULL with err on failure or a bad HIERNET_LINKD_PRIORITY. */
struct linkd_client *linkd_client_start(struct ev_loop *loop, char *err, size_t errlen);
/* HIERNET_LINKD_PRIORITY checked: prio "" when unset, else the priority
 * 1..99 in decimal; -1 with err naming the value otherwise. */
int linkd_client_priority(char prio[4], char *err, size_t errlen);
/* One end of link_add: a TAP named ifname in the namespace at ns_path
 * (e.g. /proc/<pid>/fd/<n>), or, when vni is set, the end of a cut link
 * at another machine: linkd's UDP socket from this machine's underlay
 * address `local` to the other's, `remote` (host order), on the VNI's port
 * (proto/linkd_methods.h, LINKD_UNDERLAY_PORT). */
struct linkd_client_end {
    const char *ns_path, *ifname;
    uint32_t vni, local, remote;
};
/* The reply to link_add: the ends' ifindexes (0 for an underlay end), or
 * error (non-NULL). Called once, from the loop (also when linkd's channel
 * is lost). */
typedef void (*linkd_added_fn)(void *ctx, int ifindex_a, int ifindex_b, const char *error);
/* Creates link `id` between ends a and b (at most one of them the
 * underlay); seed drives the link's loss and jitter draws. */
int linkd_client_link_add(struct linkd_client *lc, int id, const struct linkd_client_end *a,
                          const struct linkd_client_end *b, const struct topo_link_params *params,
                          uint64_t seed, linkd_added_fn cb, void *ctx, char *err, size_t errlen);
int linkd_client_link_set(struct linkd_client *lc, int id, const struct topo_link_params *params,
                          peer_reply_fn cb, void *ctx, char *err, size_t errlen);
/* The same for one direction (0: a to b, 1: b to a) or both. */
#define LINKD_CLIENT_BOTH 2
int linkd_client_link_set_dir(struct linkd_client *lc, int id, int dir,
                              const struct topo_link_params *params, peer_reply_fn cb, void *ctx,
                              char *err, size_t errlen);
/* A delivery-opportunity schedule (a Mahimahi trace) for one direction:
 * from now on its frames leave only at now + at_us[i] (+ k x period_us,
 * looped), each opportunity carrying up to 1500 bytes of IP packet; n = 0
 * removes the schedule (the rate applies again). Times are real (dilated). */
int linkd_client_link_schedule(struct linkd_client *lc, int id, int dir, const uint64_t *at_us,
                               size_t n, uint64_t period_us, peer_reply_fn cb, void *ctx, char *err,
                               size_t errlen);
int linkd_client_link_updown(struct linkd_client *lc, int id, bool up, peer_reply_fn cb, void *ctx,
                             char *err, size_t errlen);
int linkd_client_link_stats(struct linkd_client *lc, int id, peer_reply_fn cb, void *ctx, char *err,
                            size_t errlen);
/* Every link's counters; peak queue lengths restart after each sample. */
int linkd_client_stats_all(struct linkd_client *lc, peer_reply_fn cb, void *ctx, char *err,
                           size_t errlen);
/* The same between samples: the peaks keep running (links.csv's stay
 * per sample). */
int linkd_client_stats_peek(struct linkd_client *lc, peer_reply_fn cb, void *ctx, char *err,
                            size_t errlen);
/* Every link is made: linkd gives up root for uid/gid (common/privdrop.h)
 * and can make no more links. The reply goes to cb. */
int linkd_client_drop_root(struct linkd_client *lc, uid_t uid, gid_t gid, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen);
pid_t linkd_client_pid(const struct linkd_client *lc);
void linkd_client_close(struct linkd_client *lc);
bool linkd_client_exited(const struct linkd_client *lc);
void linkd_client_kill(struct linkd_client *lc, int sig);
void linkd_client_free(struct linkd_client *lc);
