/* underlay_rtt.h — the round trip to another machine's underlay address,
 * measured with ICMP echo (issue 20 item 3; docs/design-notes.md,
 * "Several machines: the underlay's delay").
 *
 * The kernel of the far machine answers the echo itself, so nothing has
 * to listen there: a machine keeps listening on nothing but its cut links'
 * UDP ports (VXLAN's 4789, or linkd's: proto/linkd_methods.h).
 * An unprivileged ICMP socket (SOCK_DGRAM, net.ipv4.ping_group_range) is
 * tried first, a raw one (CAP_NET_RAW) second. The echoes go one after
 * another on the caller's libev loop (an ev_io on the socket, an ev_timer
 * per echo): the loop is never held, the result comes through a callback.
 * Owns: a running probe owns its socket and watchers until it calls back
 * (it frees itself then) or is cancelled. */
#pragma once

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#define UNDERLAY_RTT_SAMPLES 5            /* echoes per address; the minimum is kept */
#define UNDERLAY_RTT_TIMEOUT_NS 300000000 /* one echo's answer, at most (0.3 s) */

struct underlay_rtt;

/* The smallest round trip in ns (> 0) with error NULL, or error one line
 * naming the address and why (no answer to any echo within the timeout,
 * or no echo could be sent: the send's errno, e.g. no route).
 * Called from the loop, never from underlay_rtt_start; the probe is freed
 * when it returns. */
typedef void (*underlay_rtt_fn)(void *ctx, int64_t rtt_ns, const char *error);

/* Starts `samples` echoes to address (IPv4, host order) on loop: done
 * follows from the loop within samples x UNDERLAY_RTT_TIMEOUT_NS. NULL
 * with err (naming the address) when no ICMP socket is allowed or memory
 * is short; done is not called then. */
struct underlay_rtt *underlay_rtt_start(struct ev_loop *loop, uint32_t address, int samples,
                                        underlay_rtt_fn done, void *ctx, char *err, size_t errlen);
/* Stops a running probe and frees it; done is not called. NULL: nothing. */
void underlay_rtt_cancel(struct underlay_rtt *p);
