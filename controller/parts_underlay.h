/* parts_underlay.h — the underlay's delay between the machines of a run
 * spread over several (issue 20 item 3; docs/design-notes.md, "Several
 * machines: the underlay's delay").
 *
 * Before a part is made, each pair of machines that its cut links join
 * gets its round trip measured (emu/underlay_rtt.h: the least of a few
 * ICMP echoes): from here when one of the two is the controller's
 * machine, else by the agent of the first of the two to answer hello (the
 * first machine's when both have; `underlay` request). Half of it
 * is the pair's one-way delay (topo_part_underlay_delay_us), which the
 * parts' cut links carry and the backends subtract. Either all at once
 * (parts_underlay_start: `hiernet doctor --hosts`), or pair by pair as
 * both ends' addresses and a measuring end are there (parts_underlay_new
 * and _begin: a spread build, whose agents get ready one by one).
 *
 * Owns: the per-pair round trips and delays, the requests' contexts, this
 * machine's probes while they run. An answer that comes after
 * parts_underlay_cancel is dropped (the probes here are stopped). */
#pragma once

#include "controller/agent_client.h"
#include "topo/machines.h"
#include "topo/network.h"
#include "topo/placement.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct parts_underlay;

/* All pairs answered: error NULL, or one line naming both machines. */
typedef void (*parts_underlay_fn)(void *ctx, struct parts_underlay *u, const char *error);
/* One pair (a < b) measured (error NULL) or not (one line naming both). */
typedef void (*parts_underlay_pair_fn)(void *ctx, struct parts_underlay *u, size_t a, size_t b,
                                       const char *error);

struct parts_underlay_setup {
    struct ev_loop *loop; /* this machine's probes run on it */
    const struct topo_network *net;
    const struct topo_placement *placement;
    const struct topo_machines *machines;
    size_t local;                      /* the controller's machine, or machines->n: none */
    struct agent_client *const *agent; /* per machine, NULL for the local one */
    const uint32_t *underlay;          /* per machine: its underlay IPv4 address, host order */
};

/* Starts the probes of this machine's pairs on setup->loop and asks the
 * agents the rest (setup is read during the call only): both answer
 * through the loop. Into *out (the caller's to free, also on failure): -1
 * with err when a probe could not start or a request could not be sent
 * (nothing pending then), 0 when no pair is to measure (done is not
 * called), 1 when done follows from the loop. */
int parts_underlay_start(const struct parts_underlay_setup *setup, parts_underlay_fn done,
                         void *ctx, struct parts_underlay **out, char *err, size_t errlen);

/* A spread build's way (controller/netrun_parts.c), pair by pair as the
 * machines' agents come: the pairs to measure, none begun; pair is told
 * of each. NULL when out of memory. */
struct parts_underlay *parts_underlay_new(const struct parts_underlay_setup *setup,
                                          parts_underlay_pair_fn pair, void *ctx);
/* Begins every pair not begun whose two ends' addresses are known
 * (known[m]: setup->underlay[m] holds it) and that can be measured now:
 * from here when one end is this machine, else by an end's agent that
 * answered hello (hello[m]; the first end's when both have). 0, or -1
 * with err naming the pair (its probe could not start or its request not
 * be sent). */
int parts_underlay_begin(struct parts_underlay *u, const struct parts_underlay_setup *setup,
                         const bool *known, const bool *hello, char *err, size_t errlen);
/* Every pair of machine m measured (true when it has none). */
bool parts_underlay_machine_done(const struct parts_underlay *u, size_t m);
/* Every pair of machine m begun is measured: a pair still waiting for
 * an end's address (a machine listed by name, before its agent's hello)
 * does not count. */
bool parts_underlay_machine_begun_done(const struct parts_underlay *u, size_t m);
/* The pairs not measured yet, "m2 - m3, m2 - m4", into names; how many.
 * Only machine's pairs when machine < the machines' count. */
size_t parts_underlay_unmeasured(const struct parts_underlay *u, size_t machine, char *names,
                                 size_t cap);
/* Per pair (a * n + b, both orders): the one-way delay in µs (0: the pair
 * shares no cut link or is not measured), for topo_part_plan.underlay_delay_us. */
const uint32_t *parts_underlay_delays(const struct parts_underlay *u);
/* The round trip of pair (a, b) in ns; 0: not measured. */
int64_t parts_underlay_rtt_ns(const struct parts_underlay *u, size_t a, size_t b);
/* Answers still to come are dropped; done is not called any more. */
void parts_underlay_cancel(struct parts_underlay *u);
void parts_underlay_free(struct parts_underlay *u);
