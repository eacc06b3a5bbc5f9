/* agent_group.h — the agents of one network's other machines (issue 20):
 * one agent_client per machine, started together, a countdown until every
 * one is ready (hello and its first pings answered), torn down together.
 *
 * Owns the clients and the private directory of their ssh ControlPaths
 * (mode 0700, in the registry's root, named after this process so that
 * `hiernet clean` removes what a SIGKILL left), removed when the group is
 * freed.
 * On the libev loop; nothing here blocks. */
#pragma once

#include "controller/agent_client.h"
#include "topo/machines.h"

#include <ev.h>
#include <stdio.h>

struct agent_group;

/* Every agent ready (error NULL), or the first failure (one line naming
 * the machine). Called once. */
typedef void (*agent_group_ready_fn)(void *ctx, struct agent_group *g, const char *error);
/* Every agent torn down (answered, gone or timed out). */
typedef void (*agent_group_down_fn)(void *ctx, struct agent_group *g);
/* One agent answered hello (its pings follow); from the loop. */
typedef void (*agent_group_one_fn)(void *ctx, struct agent_group *g, struct agent_client *ac);

struct agent_group_hooks {
    agent_group_one_fn on_hello; /* NULL: not told */
    agent_group_ready_fn on_ready;
    void *ctx;
};

/* Starts an agent on every machine of m that is not local. o's
 * control_dir is the group's own. NULL with err when one cannot be
 * started (those already started are ended). */
struct agent_group *agent_group_start(struct ev_loop *loop, const struct topo_machines *m,
                                      const struct agent_client_options *o,
                                      agent_group_ready_fn on_ready, void *ctx, char *err,
                                      size_t errlen);
/* The same, each agent also told as it answers hello (a spread build
 * sends each machine its part then, not once every agent is ready). */
struct agent_group *agent_group_start_each(struct ev_loop *loop, const struct topo_machines *m,
                                           const struct agent_client_options *o,
                                           const struct agent_group_hooks *hooks, char *err,
                                           size_t errlen);
/* Tears every agent down; on_down when the last is down, always from the
 * loop (never from inside this call), so on_down may free the group. */
void agent_group_teardown(struct agent_group *g, agent_group_down_fn on_down, void *ctx);
/* Ends what is left, removes the directory, frees. NULL ok. */
void agent_group_free(struct agent_group *g);

size_t agent_group_count(const struct agent_group *g);
struct agent_client *agent_group_agent(const struct agent_group *g, size_t i);

/* One line per agent into buf: "m2: control RTT 0.21 ms, clock offset
 * -0.003 ms +- 0.10 ms, hiernet VERSION, underlay eth0 10.250.0.2 mtu 1550". */
void agent_group_describe(const struct agent_group *g, size_t i, char *buf, size_t cap);
/* The run.json entries, one object per agent ("{...}, {...}"), of network
 * `network`: network, machine, version, control_rtt_ms, clock_offset_ms,
 * clock_error_ms, underlay, underlay_device, mtu, features (docs/guide.md). */
void agent_group_write_json(const struct agent_group *g, const char *network, FILE *f);
