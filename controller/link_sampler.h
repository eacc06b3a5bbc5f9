/* link_sampler.h — the kernel backend's link counters for links.csv.
 *
 * On the user backend hiernet-linkd counts what each link carries; on the
 * kernel backend the veths do. A sampler reads them off the event loop: a
 * thread of its own opens one rtnetlink socket in each namespace it asks
 * (per link the end whose node has more links, so a switch or an edge
 * answers for all its links in one dump) and, on each request, dumps
 * every link's IFLA_STATS64 there (emu_nl_link_stats). The loop hears the
 * sample through an ev_async and gets it in a callback, each link with the
 * monotonic time its counters were read. A request while a sample is in flight is skipped, as
 * the user backend skips a beat while linkd is slow to answer.
 * Owns the thread, its sockets and the sample buffer. */
#pragma once

#include "emu/tc_backend.h"
#include "topo/network.h"

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

struct link_sampler;

/* One link as seen from the end that was asked: tx what that end sent,
 * rx what it received (emu_nl_link_stats). seen is false when the dump did
 * not report it (its namespace could not be asked, or it is gone). */
struct link_sample {
    bool seen;
    bool from_a; /* the end asked is the link's a end */
    bool up;     /* that end is up, and so is its peer (IFF_UP, IFF_LOWER_UP) */
    double mono; /* when its namespace's dump returned (common/clock.h mono_s) */
    uint64_t tx_packets, tx_bytes, tx_dropped;
    uint64_t rx_packets, rx_bytes, rx_dropped;
};

/* Called on the loop with one sample per link of the network (indexed like
 * net->links); error is NULL or why some links were not read. */
typedef void (*link_sampler_fn)(void *ctx, const struct link_sample *samples, size_t n_links,
                                const char *error);

/* Starts the thread (it opens its sockets there); NULL with err when it
 * cannot start. net and kernel must outlive the sampler. */
struct link_sampler *link_sampler_start(struct ev_loop *loop, const struct topo_network *net,
                                        const struct emu_tc *kernel, link_sampler_fn fn, void *ctx,
                                        char *err, size_t errlen);
/* Asks for a sample; false (nothing asked) while one is still in flight. */
bool link_sampler_request(struct link_sampler *s);
/* Ends the thread (waits for a dump in progress), closes its sockets and
 * frees. NULL is fine. */
void link_sampler_stop(struct link_sampler *s);
