/* agent_part_internal.h — the state an agent's part shares between its
 * modules: app/agent_part.c (build, relay, release), app/agent_ops.c (link,
 * kill, restart, partition, heal) and app/agent_stats.c (stats). Not for
 * anyone else: agent_part.h is the interface. */
#pragma once

#include "app/agent_part.h"
#include "controller/net_error.h"
#include "controller/netprog.h"
#include "controller/part_build.h"
#include "proto/agent_wire.h"

enum part_state { PART_NONE, PART_BUILDING, PART_BUILT, PART_RELEASING, PART_GONE };

/* One local host's relayed channel. */
struct relay {
    struct agent_part *p;
    struct peer_client *pc; /* NULL: no relay (not a local host) */
    uint64_t whole;         /* the node's whole-network index */
    /* A restart under way: its new peer's channel is relayed, and the
     * request answered, once the peer has taken its data secret (the
     * secret call's answer, app/agent_ops.c) or its deadline passed. */
    struct restart_wait *restart; /* NULL: none */
    ev_timer restart_deadline;
};

struct agent_part {
    struct ev_loop *loop;
    const char *machine; /* the agent's --machine, or hello's: read at build */
    const char *peer_path;
    struct agent_part_io io;
    enum part_state state;
    struct part_run *run; /* from part_build's return until released */
    uint32_t build_msgid;
    bool release_wanted;      /* teardown during the build: release once built */
    bool paused;              /* the peers are not read: the output is full */
    struct relay *input_held; /* the agent's input is not read until its backlog is out */
    bool call_dropped;        /* a dropped call was logged (once) */
    struct relay *relays;     /* per node of the part's model */
    size_t n_relays;
    bool stats_wanted;                    /* build asked for `stats` */
    double stall_threshold_s;             /* build's (0: the part's own hosts') */
    struct netprog_list program_list;     /* app/agent_programs.c */
    struct agent_program_entry *programs; /* their ids */
    struct agent_stats_feed *stats;       /* app/agent_stats.c, once built */
};

void part_log(struct agent_part *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends the error map (code, node, link "" when none) for request msgid. */
void part_answer_error(struct agent_part *p, uint32_t msgid, int code, const char *node,
                       const char *link, const char *message);
/* Sends an empty result ("done") for request msgid. */
void part_answer_done(struct agent_part *p, uint32_t msgid);
/* Puts a local host's channel into relay mode: 0, or -1 with err. */
int part_relay_attach(struct agent_part *p, struct relay *r, struct peer_client *pc, char *err,
                      size_t errlen);

/* app/agent_ops.c: ends the restarts under way (the part is released). */
void agent_ops_stop(struct agent_part *p);

/* app/agent_programs.c: kills the programs left (the part is released). */
struct agent_program_entry;
void agent_programs_stop(struct agent_part *p);

/* app/agent_stats.c: starts the links' rows (once built), and stops them
 * (before the netrun is released; frees). */
struct agent_stats_feed;
struct agent_stats_feed *agent_stats_start(struct agent_part *p);
void agent_stats_stop(struct agent_stats_feed *f);
/* A link of the part moved (reroute): links.csv names it by its new ends. */
void agent_stats_rename(struct agent_stats_feed *f);
