/* netrun_internal.h — what the parts of one started network share (the
 * controller/netrun*.c files; netrun.h is the public face): struct netrun
 * and the functions one part calls in another. Nothing outside netrun*.c
 * includes it. */
#pragma once

#include "controller/netrun.h"
#include "controller/privilege.h"
#include "proto/agent_wire.h"
#include "controller/reaper.h"
#include "emu/cgroup.h"
#include "topo/route.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct emu_nl_features;

#define NETRUN_PHASES_MAX 16

struct netrun_peer {
    struct netrun *nr;
    int node;
    struct peer_client *client;
    int template_id;      /* request to the peer template, -1 once adopted */
    uint8_t *told;        /* bit per node: its address was sent (netrun_tell_address) */
    bool killed;          /* netrun_peer_kill'ed, until a restart (its exit comes later) */
    uint64_t incarnation; /* restarts of the node's peer (netrun_peer_incarnation) */
    /* A restart whose old peer is still exiting: the new peer's channel is
     * open (client) and its end kept for the exec that follows the exit. */
    struct peer_client *old;
    int child_end; /* valid while old is set */
};

struct netrun {
    struct ev_loop *loop;
    struct topo_network *net;
    enum topo_backend backend;
    char reason[640];
    struct topo_routing routing;
    struct emu_tc *kernel;
    struct linkd_client **linkd; /* backend user: link l is served by linkd[l % n_linkd] */
    size_t n_linkd;
    struct netrun_peer *peers; /* one per node; client NULL for switches */
    struct emu_cgroup cgroup;
    bool cgroups_made;
    char run_id[EMU_CGROUP_NAME_MAX + 1]; /* names the run's group: "<run id>-<network>" */
    char peer_path[4096];
    bool peer_path_given;             /* netrun_config.peer_path: always through the template */
    struct peer_template *template;   /* forks the peers at start; ends with them */
    struct privilege_identity helper; /* who peers and linkd become once set up */
    /* Proves a data connection belongs to this network (peer/data_auth.h):
     * handed to the peers with their address book, never on a command line. */
    uint8_t data_secret[32];
    bool secret_given;                        /* netrun_config.data_secret: not drawn */
    const struct topo_routing *given_routing; /* netrun_config.routing, until planned */
    struct registry *registry;
    uint32_t *loopback_next;
    netrun_exit_fn on_exit;
    void *ctx;
    /* links.csv: linkd's counters (user backend) or the veths' (kernel
     * backend, through sampler) sampled once per emulated second */
    struct record *links_record;
    struct record *tcp_record; /* tcp.csv (netrun_sample_tcp), or NULL */
    bool tcp_warned;           /* a host's counters failed to read: logged once */
    struct link_sampler *sampler;
    /* link traces: slot 3 x link + dir (0: a to b, 1: b to a, 2: both),
     * allocated at the first trace */
    struct netrun_trace_slot *traces;
    ev_timer sample_timer;
    netrun_clock_fn clock; /* the run's emulated seconds, for the time_s column */
    void *clock_ctx;
    size_t samples_pending;
    bool sample_warned;                 /* the sampler's first error was logged */
    struct netrun_dataplane *dataplane; /* the overload account's samples, or NULL */
    /* the start's phases in order, for the log (netrun_describe_start) */
    struct {
        const char *name;
        double s;
    } phases[NETRUN_PHASES_MAX];
    size_t n_phases;
    double phase_mark, start_s;
    /* the build in flight (netrun_build): a step on a worker thread, whose
     * end the loop hears through job_done; the template's replies through
     * its own watchers (netrun_on_template_settled), bounded by template_deadline */
    struct {
        pthread_t thread;
        bool running;
        void (*work)(struct netrun *nr);
        void (*then)(struct netrun *nr);
        int rc;
        struct net_error error; /* the first failure, once rc < 0 */
    } job;
    /* The loop's own failure while a step runs off it (asking for the
     * peers while the veths are made): netrun_job_fail'ed once the step is over. */
    struct {
        bool active; /* the kernel backend's veths began with the peers' requests */
        int rc;
        struct net_error error;
    } beside;
    ev_async job_done;
    ev_timer template_deadline;
    bool collecting; /* the links are made: the template's settling ends the build */
    bool plan_late;  /* the backend and the plan wait for the kernel's probe */
    bool building;
    bool freeing; /* released: replies still arriving are ignored */
    /* peers SIGKILLed by a restart or the release, not reaped yet */
    struct reaper_group dying;
    /* netrun_release: what is waited for on the loop, then who is told */
    struct {
        bool active;
        bool template_stopping; /* the peers are gone: the template goes */
        bool failed_build;      /* build_fail's release: `built` is told, not `released` */
        netrun_released_fn released;
        void *ctx;
        double cgroup_deadline;
        ev_timer timer; /* the cgroups' removal retried, the template's exit awaited */
    } release;
    /* backend user: linkd's replies outstanding during the build */
    struct link_add_ctx *link_adds;
    size_t linkd_pending;
    bool linkd_dropping;
    ev_timer linkd_deadline;
    netrun_built_fn built;
    netrun_phase_fn links_made;
    void *built_ctx;
    /* Once built: the kernel changes asked for, in order, the first one
     * running on the build's thread; and the loop's own view of the
     * partitions in place (the kernel layer's record is the thread's). */
    struct kernel_op *ops, *ops_tail;
    unsigned char **cuts; /* each a side per node, then its uint64_t number */
    size_t n_cuts;
    uint64_t cuts_added; /* the next cut's number (a heal takes those before it) */
    /* A network spread over machines (netrun_parts.c), or NULL: then the
     * fields above are unused but net, peers (borrowed clients), the
     * secret, the phases and the callbacks. */
    struct netrun_parts *parts;
};

struct netrun_trace_slot {
    struct netrun *nr;
    int link, dir;
    struct trace_player *player;
};
enum kernel_op_kind { OP_PARTITION, OP_HEAL, OP_LINK_SET, OP_LINK_UPDOWN };
/* OP_LINK_SET's dir: 0 (a to b), 1 or EMU_TC_BOTH (l:set). */

struct kernel_op {
    enum kernel_op_kind kind;
    unsigned char *side; /* per node its group (owned); OP_HEAL: NULL for every cut */
    int link, dir;
    bool up;
    struct topo_link_params params;
    peer_reply_fn cb;
    void *ctx;
    int rc;
    char err[512];
    struct kernel_op *next;
};

/* netrun_steps.c: a step off the loop, and the build's first error. */
void netrun_job_begin(struct netrun *nr, void (*work)(struct netrun *),
                      void (*then)(struct netrun *));
void netrun_job_then(struct netrun *nr, void (*then)(struct netrun *));
void netrun_on_job_done(EV_P_ ev_async *w, int revents);
void netrun_job_fail(struct netrun *nr, bool env_error, const char *err);
void netrun_job_fail_at(struct netrun *nr, bool env_error, int node, int link, const char *err);
void netrun_job_fail_with(struct netrun *nr, const struct net_error *e);

/* netrun_plan.c */
const struct emu_nl_features *netrun_kernel_features(char *err, size_t errlen);
int netrun_check_devices(struct netrun *nr, int *node, bool *env_error, char *err, size_t errlen);
bool netrun_wants_cuda(const struct topo_network *net);
int netrun_choose_and_plan(struct netrun *nr, struct net_error *error);

/* netrun_linkd.c */
double netrun_linkd_setup_timeout(const struct netrun *nr);
struct linkd_client *netrun_linkd_of(const struct netrun *nr, int link);
void netrun_on_linkd_deadline(EV_P_ ev_timer *w, int revents);
void netrun_make_user_links(struct netrun *nr);

/* netrun_build.c */
void netrun_links_done(struct netrun *nr);
void netrun_on_template_settled(void *ctx);

/* netrun_cgroups.c */
int netrun_prepare_cgroups(struct netrun *nr, bool *env_error, char *err, size_t errlen);
int netrun_limit_cpu(struct netrun *nr, int node, pid_t pid, char *err, size_t errlen);
void netrun_cgroups_released(struct netrun *nr, int rc, const char *err);

/* netrun_peers.c */
int netrun_prepare_helpers(struct netrun *nr, bool *env_error, char *err, size_t errlen);
int netrun_request_peers(struct netrun *nr, int *node, char *err, size_t errlen);
int netrun_adopt_peers(struct netrun *nr, int *node, char *err, size_t errlen);

/* netrun_profile.c */
void netrun_phase_end(struct netrun *nr, const char *name);
void netrun_phase_split_kernel(struct netrun *nr);
void netrun_phase_split_beside(struct netrun *nr);

/* netrun_changes.c */
int netrun_kernel_op_queue(struct netrun *nr, const struct kernel_op *op, peer_reply_fn cb,
                           void *ctx, char *err, size_t errlen);
void netrun_kernel_ops_drop(struct netrun *nr);
int netrun_link_not_emulated(struct netrun *nr, char *err, size_t errlen);
void netrun_cuts_free(struct netrun *nr); /* the loop's view of the partitions */
/* Link l's end that is not `stays`'s goes to `to` in net (renamed there);
 * *end_a: whether it was end a; *from: the node it left. */
void netrun_move_link_end(struct topo_network *net, int l, int stays, int to, bool *end_a,
                          int *from);

/* netrun_traces.c */
uint64_t netrun_rate_now(const struct netrun *nr, int link, int dir);
void netrun_free_traces(struct netrun *nr);

/* netrun_csv.c */
void netrun_on_sample_timer(EV_P_ ev_timer *w, int revents);

/* netrun_dataplane.c: one direction's delivered bytes at mono (seconds),
 * then, once every direction of the round is in, the round itself. */
struct netrun_dataplane;
void netrun_dataplane_direction(struct netrun *nr, int link, int dir, uint64_t bytes, double mono);
/* A direction's queue peak (frames) since the previous round (linkd's). */
void netrun_dataplane_queue(struct netrun *nr, int64_t peak);
void netrun_dataplane_round(struct netrun *nr);
/* Stops reading the links between rounds (the peers are closing). */
void netrun_dataplane_stop(struct netrun *nr);
void netrun_dataplane_free(struct netrun_dataplane *dp);

/* netrun_parts.c: a network over machines */
/* netrun_link_move and its check over machines (see netrun.h). */
int netrun_parts_move_check(const struct netrun *nr, int l, int stays, int to, char *err,
                            size_t errlen);

int netrun_parts_move(struct netrun *nr, int l, int stays, int to, peer_reply_fn cb, void *ctx,
                      char *err, size_t errlen);
int netrun_parts_build(struct ev_loop *loop, struct topo_network *net,
                       const struct netrun_config *cfg, netrun_exit_fn on_exit, void *ctx,
                       netrun_built_fn built, void *built_ctx, struct netrun **out,
                       struct net_error *error);
/* The local part's index of node, or -1 with err, the cause only (the
 * caller names the node): "it is on machine m2: WHAT a remote node is not
 * available yet". */
int netrun_parts_node(const struct netrun *nr, int node, const char *what, char *err,
                      size_t errlen);
/* The local part's index of link once built, or -1 (no message). */
int netrun_parts_local_link(const struct netrun *nr, int link);
/* A change of a link not wholly on this machine: asked of the agent of
 * the machine that holds it, or of both ends' parts for a cut link (an
 * agent's and the local part's, or two agents); 1 and a later cb, once,
 * when every end asked has answered (error: the first failure, naming its
 * machine, an end that could not be asked included), 0 when done at once
 * (cb not called), or -1 with err when no end could be asked. */
int netrun_parts_link_remote(struct netrun *nr, int link, enum agent_link_op op,
                             const struct topo_link_params *params, peer_reply_fn cb, void *ctx,
                             char *err, size_t errlen);
/* A partition (heal false; side per whole-network node) or a heal (side
 * NULL: every partition) asked of every part: 1 and a later cb once all
 * answered (error: the first failure), 0 when no part had anything to
 * answer (done: cb not called), or -1 with err when none could be. */
int netrun_parts_sides(struct netrun *nr, bool heal, const unsigned char *side, peer_reply_fn cb,
                       void *ctx, char *err, size_t errlen);
/* SIGKILL of a node of another machine's part, asked of its agent (its
 * exit comes as the agent's `exit`; cb told its answer). 0, or -1 with
 * err (cb not told). */
int netrun_parts_kill_remote(struct netrun *nr, int node, peer_reply_fn cb, void *ctx, char *err,
                             size_t errlen);
/* node:restart() of any host: the local part's restart, or its agent's
 * (controller/agent_client.h); peers[node].client follows. 0, or -1 with
 * err. */
int netrun_parts_restart(struct netrun *nr, int node, char *err, size_t errlen);
/* The local part's netrun once built, or NULL. */
/* net:tcp over parts: a local host's read now, a remote one's from its
 * agent's last stats sample (at most one emulated second old); -2 when
 * its peer is not running or no sample came yet. */
int netrun_parts_tcp_counters(struct netrun *nr, int node, struct tcp_counters *out, char *err,
                              size_t errlen);
/* l:trace of a link that is not this machine's part's alone: sent to the
 * agents of its ends' machines (and the local part's end, asked first),
 * each playing it from when it reads it; trace is not taken. 0, or -1
 * with err when a part could not be asked (an agent's later refusal is
 * logged). */
int netrun_parts_trace(struct netrun *nr, int link, int dir, const struct topo_trace *trace,
                       const struct trace_player_opts *opts, char *err, size_t errlen);
/* l:stats over parts: a local link's from this machine's part, a remote
 * one's from its machine's agent, a cut link's merged from both ends
 * (each direction its sender's machine's); as netrun_link_stats. */
int netrun_parts_counters(struct netrun *nr, int link, peer_reply_fn cb, void *ctx, char *err,
                          size_t errlen);
struct netrun *netrun_parts_inner(const struct netrun *nr);
/* The run's overload account takes the agents' linkd stalls (their stats). */
void netrun_parts_watch(struct netrun *nr, struct overload *o);
void netrun_parts_close_peers(struct netrun *nr);
void netrun_parts_kill_peers(struct netrun *nr, int sig);
void netrun_parts_release(struct netrun *nr, netrun_released_fn released, void *ctx);
void netrun_parts_free(struct netrun *nr);

/* netrun.c */
void netrun_on_release_timer(EV_P_ ev_timer *w, int revents);
