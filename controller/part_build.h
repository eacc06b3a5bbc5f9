/* part_build.h — one machine's part of a network spread over machines
 * (topo/part.h), built from its wire form (topo/part_wire.h) and released
 * by the engine a local run uses (netrun_build, netrun_release): what the
 * agent calls for `build` and `teardown` (docs/design-notes.md, "Several
 * machines, the design").
 *
 * Named by run and machine, as namespace machines share one filesystem,
 * process table and cgroup tree: the registry entry is opened with the
 * hint RUN@MACHINE (registry ids keep [A-Za-z0-9_.-], so it reads
 * RUN-MACHINE), and the cgroups are named after that id and the network;
 * the namespaces stay anonymous. The peers of the part's hosts start as in
 * a local run, with the run's data secret from the part. Owns the decoded
 * part, the netrun and the registry entry. */
#pragma once

#include "controller/netrun.h"
#include "topo/part.h"

#include <ev.h>
#include <stddef.h>

struct part_run;
struct registry;

/* The build's end: run is the built part and error NULL, or run is NULL
 * (nothing is left) and error says why; then the part's model of the run
 * part_build gave (part_model) is still readable during the call, to name
 * error's node and link, and freed after it. Called once, from the loop. */
typedef void (*part_built_fn)(void *ctx, struct part_run *run, const struct net_error *error);
typedef void (*part_released_fn)(void *ctx);

struct part_build_opts {
    const char *machine;   /* this machine's name: the part must be its */
    const char *peer_path; /* hiernet-peer; NULL: next to this executable */
    part_built_fn built;
    netrun_exit_fn exited; /* a peer of the part exited (may be NULL) */
    void *ctx;
};

/* Decodes len bytes and begins the build; returns at once (0, *out set)
 * and opts->built follows from the loop. -1 with *error when it cannot
 * begin (undecodable bytes, a part for another machine, out of memory:
 * NET_ERR_SCENARIO; no registry: NET_ERR_ENVIRONMENT): nothing is left and
 * built is not called. */
int part_build(struct ev_loop *loop, const void *bytes, size_t len,
               const struct part_build_opts *opts, struct part_run **out, struct net_error *error);
struct netrun *part_netrun(const struct part_run *run);
const struct topo_part *part_model(const struct part_run *run);
/* The registry id of the part ("RUN-MACHINE", or with a -2 ... suffix). */
const char *part_registry_id(const struct part_run *run);
/* The part's registry entry (its programs are listed there). */
struct registry *part_registry(const struct part_run *run);
/* Closes the peers' channels and releases everything (netrun_release),
 * then the registry entry; released(ctx) follows from the loop (may be
 * NULL). Only once built. */
void part_release(struct part_run *run, part_released_fn released, void *ctx);
