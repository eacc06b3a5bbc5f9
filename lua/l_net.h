/* l_net.h — what the network, node, link and program bindings share:
 * their handle structs and the helpers one unit offers another. Internal to
 * lua/ (l_network.c, l_node.c, l_link.c, l_proc.c); the public face is
 * l_network.h. */
#pragma once

#include "controller/agent_group.h"
#include "controller/netlife.h"
#include "lua/runtime.h"
#include "lua/sched.h"
#include "topo/machines.h"
#include "topo/network.h"

#include <lua.h>
#include <msgpack.h>
#include <stdbool.h>
#include <sys/types.h>

#define NETWORK_MT "hiernet.network"
#define NODE_MT "hiernet.node"
#define LINK_MT "hiernet.link"
#define PROC_MT "hiernet.proc"

struct l_network {
    struct hn_runtime *rt;
    struct topo_network *topo;
    struct netlife *life; /* the engine's network (controller/netlife.h), from the first
                             start: its state and everything it runs are asked of it */
    int self_ref;         /* anchors the network while peers run */
    int nodes_ref;        /* table: name -> node handle, and 1..n -> node handle */
    struct l_network *next;
    /* start: the task waiting for it (the error is the engine's: netlife_start_error) */
    task_token start_tok;
    bool start_waiting;
    /* stop: tasks waiting for the peers to exit */
    task_token *stop_waiters;
    size_t n_stop_waiters;
    int listeners_ref;   /* table event -> {fn, ...} (l_faults.c), or LUA_NOREF */
    struct topo_tcp tcp; /* hn.network{tcp = ...}: every host's, unless it says otherwise */
    /* hosts = FILE (or --hosts): the machines its nodes are placed on
     * (topo/placement.h); n == 0: none, everything runs here. */
    struct topo_machines machines;
    /* Backend none over machines: its agents while they are asked
     * (l_hosts.c), the task waiting for them and the refusal for that
     * task. */
    struct agent_group *agents;
    task_token agents_tok;
    char agents_error[1024];
    /* How its agents are started by a spread start (the engine's). */
    struct agent_client_options agent_options;
    bool spread; /* started over machines once (its agents are gone since) */
};

struct l_node {
    struct l_network *net;
    int index;
};

/* A program started in a node; the handle outlives the process. */
struct l_proc {
    struct l_network *net;
    struct netprog *prog; /* the engine's (netlife_program_spawn); NULL once it ended */
    char node[TOPO_NAME_MAX];
    int self_ref; /* anchors the handle while the program runs */
    bool done;
    int status;
    int out_ref, err_ref;
    task_token *waiters;
    size_t n_waiters;
    pid_t pid;
};

struct l_link {
    struct l_network *net;
    int index;
};

struct call {
    struct sched *sched;
    task_token tok;
    const char *kind;             /* "node" or "link": how error messages name the object */
    char node[2 * TOPO_NAME_MAX]; /* a node's name, or a link's "a-b" */
    char method[32];
    struct overload *overload; /* node calls: the run's overload account, or NULL */
    int overload_id;           /* the node's entry there */
};

struct reply {
    const char *error;
    const msgpack_object *result;
    const struct call *call;
};

/* l_network.c */
/* The network's state as net:state() says it (netlife_state_word). */
const char *lnet_state_word(const struct l_network *net);
/* Raises an error for any key of the option table at index i not in allowed. */
void lnet_check_options(lua_State *L, int i, const char *const *allowed, const char *what);
const char *lnet_opt_string(lua_State *L, int i, const char *key, const char *dflt,
                            const char *what);
double lnet_opt_number(lua_State *L, int i, const char *key, double dflt, const char *what);

/* l_faults.c */
/* Adds on, partition, heal and reachable to the methods table on top. */
void lnet_faults_methods(lua_State *L);
/* l_traffic.c */
/* Adds traffic to the methods table on top. */
void lnet_traffic_methods(lua_State *L);
/* Runs every listener of event as a task: fn(net, <the nargs values on top,
 * which are popped>); the network handle is at net_index. */
void lnet_fire(lua_State *L, struct l_network *net, int net_index, const char *event, int nargs);
/* Node's peer ended with its machine (its agent lost): the "kill" listeners
 * run with (net, node, why), as for node:kill() but with the cause. Called
 * from the loop, outside any task. */
void lnet_fire_lost(struct l_network *net, int node, const char *why);
/* Calls hiernet.churn's function fn with the first two arguments (the
 * handle and its option table) and returns its one result; fn may wait. */
int lnet_call_library(lua_State *L, const char *fn);

/* l_node.c */
struct l_node *lnet_check_node(lua_State *L, int i);
/* Pushes (ok, value-or-message) for a woken task: a struct reply is ud. */
int lnet_push_reply(lua_State *co, void *ud);
void lnet_create_node_meta(lua_State *L);

/* l_link.c */
/* adding: net:link's table, which may also hold parallel (the caller reads it). */
void lnet_read_link_params(lua_State *L, int i, struct topo_link_params *p, const char *what,
                           bool adding);
/* Pushes a handle for link index of the network handle at index net_index. */
void lnet_push_link(lua_State *L, int net_index, struct l_network *net, int index);
void lnet_create_link_meta(lua_State *L);

/* l_proc.c */
int lnet_node_run(lua_State *L);
int lnet_node_spawn(lua_State *L);
void lnet_create_proc_meta(lua_State *L);

/* l_hosts.c: hosts = FILE|"slurm" (spec NULL: none) into out, or raises
 * naming the network and the file's line (a bad-input failure). */
void lnet_load_hosts(lua_State *L, struct hn_runtime *rt, const char *name, const char *spec,
                     struct topo_machines *out);
/* net:node's host = NAME (NULL: none): pins n, or raises naming the node
 * and the machine when the network's machines do not list it. */
void lnet_pin_node(lua_State *L, struct l_network *net, struct topo_node *n, const char *host);
/* At the first start, or drawn: places the network over its machines (log,
 * run.json) and draws it when drawing. -1 with err (one line) for a bad
 * placement; 1 with err the refusal when a start needs other machines
 * (then lnet_start_placed). */
int lnet_place_or_draw(struct l_network *net, char *err, size_t errlen);
/* A start whose placement needs other machines (why: the line saying
 * so): the engine starts their agents and builds over them
 * (lnet_start_spread); backend none is refused once its agents answered
 * (logged and in run.json's "machines"). Yields: call as a tail. */
int lnet_start_placed(lua_State *L, struct l_network *net, const char *why);
/* The start's rest (l_network.c) over the network's machines, their agents
 * started by the engine with o (kept by the caller for the network's
 * life); an agent's failure before its part was sent begins with why. */
int lnet_start_spread(lua_State *L, struct l_network *net, const struct agent_client_options *o,
                      const char *why);
/* Every agent of a spread start ready: one log line each and run.json's
 * "machines" (netrun_agents_fn; ctx the network). */
void lnet_agents_record(void *ctx, struct agent_group *g);
/* Ends agents still asked (the run is ending). */
void lnet_agents_free(struct l_network *net);
