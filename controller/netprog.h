/* netprog.h — programs run in a network's nodes (node:run, node:spawn), as
 * the engine owns them: each is started in its node's namespace
 * (controller/proc.h), listed in the run registry while it runs (so that
 * `hiernet clean` ends what it started should the controller be
 * SIGKILLed: registry.h, REGISTRY_PROGRAM_PREFIX), and kept on its
 * network's list, which a stop signals and a release kills.
 * A program in a node of another machine (issue 20) is its agent's to
 * run: here it is a remote netprog on the same list, signalled and told
 * its end through hooks (controller/netrun_parts.c).
 * Owns: each program's proc and registry entry, until the program ends or
 * its network is released. */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "controller/peer_client.h"

struct registry;
struct netprog;

/* A finished program: status is the exit code, or 128 + signal number;
 * out/err are NUL-terminated and valid only during the callback. */
struct netprog_result {
    int status;
    const char *out, *err;
    size_t out_len, err_len;
};

/* Called once: with the result when the program ends, or with NULL when
 * its network is released first (the program was killed, no result).
 * The program is freed right after; its pointer goes with it. */
typedef void (*netprog_done_fn)(void *ctx, const struct netprog_result *result);

/* The running programs of one network; zero-initialised is empty. */
struct netprog_list {
    struct netprog *head;
};

/* Where a program runs: its network (for the registry's entry), the
 * registry (may be NULL), the node (its index) and the node's namespace
 * (-1: the controller's, on backend none). */
struct netprog_place {
    struct registry *registry;
    const char *network;
    int node;
    int netns_fd;
};

/* Starts argv and puts it on list; NULL with err when it cannot start (a
 * registry that cannot list it only costs a warning). */
struct netprog *netprog_spawn(struct netprog_list *list, struct ev_loop *loop,
                              const struct netprog_place *place, char *const argv[],
                              netprog_done_fn done, void *ctx, char *err, size_t errlen);
/* A program another machine's agent runs, named id there: signal sends it
 * a signal; probe asks whether it runs (signal 0: cb gets the agent's
 * {alive} map or an error, once; 0, or -1 with err when it cannot be
 * asked); forget says it is freed (its end will not be heard). ctx is the
 * hooks'. */
struct netprog_remote {
    uint64_t id;
    void (*signal)(void *ctx, uint64_t id, int sig);
    int (*probe)(void *ctx, uint64_t id, peer_reply_fn cb, void *cb_ctx, char *err, size_t errlen);
    void (*forget)(void *ctx, uint64_t id);
    void *ctx;
};
/* Puts a remote program on list (its pid 0 until netprog_remote_started). */
struct netprog *netprog_remote_add(struct netprog_list *list, int node,
                                   const struct netprog_remote *remote, netprog_done_fn done,
                                   void *ctx, char *err, size_t errlen);
void netprog_remote_started(struct netprog *p, pid_t pid);
/* Off its list and freed without its done (it could not be asked for). */
void netprog_remote_drop(struct netprog *p);
/* Its end: done is called, the program freed (forget follows). */
void netprog_remote_ended(struct netprog *p, const struct netprog_result *result);
/* Its pid (on its machine, for a remote one: 0 until started). */
pid_t netprog_pid(const struct netprog *p);
void netprog_kill(struct netprog *p, int sig);
/* Whether a program of this machine runs: false once its process ended
 * (its done may still wait for the rest of its output); false for a
 * remote one, whose agent netprog_probe asks. */
bool netprog_running(const struct netprog *p);

/* What netprog_probe answers at once. */
enum netprog_probe { NETPROG_ENDED, NETPROG_RUNNING, NETPROG_ASKED };
/* Told once: whether another machine's program ran when its agent
 * answered, or why no answer came (error; running false). */
typedef void (*netprog_probe_fn)(void *ctx, bool running, const char *error);
/* kill(2)'s signal 0, a liveness probe: a program of this machine is
 * answered at once (NETPROG_RUNNING or NETPROG_ENDED, cb not called); one
 * of another machine is its agent's to answer (NETPROG_ASKED: cb tells,
 * from the loop, without blocking it); -1 with err when it cannot be
 * asked. */
int netprog_probe(struct netprog *p, netprog_probe_fn cb, void *ctx, char *err, size_t errlen);
/* Signals every program still running in node (-1: in every node): a
 * stop's SIGTERM, node:kill()'s SIGKILL. */
void netprog_list_signal(struct netprog_list *list, int node, int sig);
/* SIGKILLs what is left (reaped from the loop, controller/reaper.h), drops
 * its registry entries, calls each one's done with NULL and frees it. */
void netprog_list_release(struct netprog_list *list);
