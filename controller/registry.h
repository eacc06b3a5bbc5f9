/* registry.h — the run registry: which runs are alive and what each one owns.
 *
 * Every run that starts a network registers itself in a directory
 * <root>/<run-id>/ (docs/guide.md "Crashes and cleanup"), where <root> is $HIERNET_RUN_DIR if
 * set (tests), else the first usable of /run/hiernet, $XDG_RUNTIME_DIR/hiernet
 * and /tmp/hiernet-<uid>. The directory holds three small text files:
 *
 *   run      "controller <pid> <start>", "created <unix time>", "results <dir>"
 *   nodes    one line per node: "<network> <node> <peer pid> <start> <netns inode>"
 *   cgroups  one cgroup directory per line (removed with everything below it)
 *
 * A process is identified by its pid AND its start time (field 22 of
 * /proc/<pid>/stat, clock ticks since boot), so a reused pid is never taken
 * for the process that was registered: neither `hiernet exec` nor a sweep ever
 * acts on it.
 *
 * Writers: registry.c (registry_open .. registry_close_and_remove, used by the
 * run that owns the entry). Readers: registry_list (`hiernet exec`) and
 * registry_sweep_stale (registry_sweep.c: `hiernet clean` and the start-up
 * sweep), which removes only what a dead run's files list: its peers (by pid
 * + start time), its cgroups (only on a cgroup file system) and its directory.
 * Nothing is ever matched by name pattern.
 *
 * Every file is written whole to a temp file and renamed into place, so a
 * reader sees the old or the new table, never half of one. A directory is
 * built as ".tmp-<pid>-<start>-<n>" and renamed to its run id once its run
 * file exists; a sweep first renames a stale run to ".sweep-<pid>-<start>-<id>"
 * so two sweepers never work on the same run, and hands what it could not
 * remove on as ".stale-<pid>-<start>-<id>" for any later sweep (as it does,
 * in effect, when it dies midway: its ".sweep-" name then has a dead owner).
 *
 * Functions return 0 (or a pointer) on success and -1 (NULL) with a one-line
 * message in err naming the run, node or file and the value. */
#pragma once

#include "proto/names.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define REGISTRY_ENV_ROOT "HIERNET_RUN_DIR"
/* run id: 1..HN_RUN_ID_MAX of [A-Za-z0-9_.-], a usable cgroup name */
#define REGISTRY_ID_MAX (HN_RUN_ID_MAX + 1)
/* network and node names (topo's, and "@linkdN"), NUL included */
#define REGISTRY_NAME_MAX HN_NODE_NAME_SIZE
#define REGISTRY_PATH_MAX 4096

/* ---- process identity ---- */

struct registry_proc {
    pid_t pid;
    unsigned long long start; /* field 22 of /proc/<pid>/stat; 0 = unknown */
};

/* Reads pid's start time; -1 (errno ESRCH) when there is no such process. */
int registry_proc_read(pid_t pid, struct registry_proc *proc);

/* True when the process is running (not a zombie) and still the one
 * registered: same pid, same start time. An unknown start time is never
 * alive, so nothing acts on it. */
bool registry_proc_alive(const struct registry_proc *proc);

/* An O_DIRECTORY fd of /proc/<pid>, checked (through the fd) to be the
 * registered process: openat() on it then never reaches a process that
 * reused the pid. -1 (errno ESRCH) when it is not running. */
int registry_proc_open(const struct registry_proc *proc);

/* ---- the live run's own entry (the controller) ---- */

struct registry;

/* Creates the run's directory and its run file (this process as controller).
 * The run id is the hint made safe (characters outside [A-Za-z0-9_.-] become
 * '-'), or hint-2, hint-3, ... when taken. results_dir may be NULL. */
struct registry *registry_open(const char *run_id_hint, const char *results_dir, char *err,
                               size_t errlen);

const char *registry_run_id(const struct registry *reg);
const char *registry_path(const struct registry *reg); /* the run's directory */

/* Records node → peer pid (its start time is read now) and the node's
 * network namespace inode (emu_netns_inode(); 0 = host namespace). Adding
 * the same network/node again replaces the entry (node:restart). Buffered in
 * memory: registry_commit() writes the table. A helper process of a network
 * (hiernet-linkd) may be listed under a name like "@linkd": topology names
 * never start with '@', and a sweep kills it like a peer. */
int registry_add_node(struct registry *reg, const char *network, const char *node, pid_t pid,
                      unsigned long ns_inode, char *err, size_t errlen);

/* Drops one entry (a node program that ended). Buffered like adds. */
void registry_remove_node(struct registry *reg, const char *network, const char *node);

/* Node programs (node:run, node:spawn) are listed as "@prog<pid>" with the
 * namespace of their node: each leads its own process group, and a sweep
 * kills every process still in that group and that namespace, which is what
 * a program's own children are when the controller was SIGKILLed. */
#define REGISTRY_PROGRAM_PREFIX "@prog"

/* Drops every node of network (the network stopped, the run goes on). */
void registry_remove_network(struct registry *reg, const char *network);

/* Records a cgroup directory the run is about to create. List the run's group
 * and commit BEFORE creating it: a sweep removes a listed group with all the
 * groups below it, so node groups need no entries of their own, and a crash
 * between mkdir and commit cannot leak it. Buffered like nodes. */
int registry_add_cgroup(struct registry *reg, const char *path, char *err, size_t errlen);
void registry_remove_cgroup(struct registry *reg, const char *path);

/* Writes the node and cgroup tables that changed since the last commit, each
 * as one temp file + rename: call once after all peers have started (not per
 * node), and after registry_add_cgroup. */
int registry_commit(struct registry *reg, char *err, size_t errlen);

/* Normal end of the run: removes the directory and frees reg (even when the
 * removal fails; err says what was left). Call after the peers have exited
 * and the cgroups are gone. NULL is a no-op. */
int registry_close_and_remove(struct registry *reg, char *err, size_t errlen);

/* ---- reading (hiernet exec, tests) ---- */

struct registry_node_entry {
    char network[REGISTRY_NAME_MAX];
    char node[REGISTRY_NAME_MAX];
    struct registry_proc peer;
    unsigned long ns_inode; /* 0 = host namespace */
};

struct registry_run_entry {
    char id[REGISTRY_ID_MAX];
    char path[REGISTRY_PATH_MAX]; /* the run's directory */
    char results[REGISTRY_PATH_MAX];
    struct registry_proc controller;
    long long created; /* unix time */
    bool alive;        /* the controller is running */
    struct registry_node_entry *nodes;
    size_t n_nodes;
    char **cgroups;
    size_t n_cgroups;
};

struct registry_list {
    struct registry_run_entry *runs; /* sorted by id */
    size_t count;
    char roots[2 * REGISTRY_PATH_MAX]; /* the roots looked at, for messages */
};

/* Every registered run in every root this process can read (unfinished and
 * claimed directories are left out). Frees with registry_list_free(). */
int registry_list(struct registry_list *list, char *err, size_t errlen);
void registry_list_free(struct registry_list *list);

/* Loads one run directory; id names it in messages. */
int registry_run_load(const char *path, const char *id, struct registry_run_entry *run, char *err,
                      size_t errlen);
void registry_run_free(struct registry_run_entry *run);

enum registry_match { REGISTRY_MATCH_ONE, REGISTRY_MATCH_NONE, REGISTRY_MATCH_AMBIGUOUS };

/* An exact run id wins; otherwise a prefix of exactly one id. */
enum registry_match registry_find_run(const struct registry_list *list, const char *id_or_prefix,
                                      const struct registry_run_entry **run);

/* "node" (unique across the run's networks) or "network/node". */
enum registry_match registry_find_node(const struct registry_run_entry *run, const char *name,
                                       const struct registry_node_entry **node);

/* ---- sweeping dead runs (registry_sweep.c) ---- */

enum registry_event {
    REGISTRY_EVENT_PEER_KILLED,    /* a listed peer was still running */
    REGISTRY_EVENT_CGROUP_REMOVED, /* one cgroup directory */
    REGISTRY_EVENT_RUN_REMOVED,    /* the run's registry directory */
    REGISTRY_EVENT_RESULTS_MARKED, /* its run.json said "running": now "crashed" */
    REGISTRY_EVENT_FAILED,         /* something stale could not be removed: detail says why */
    REGISTRY_EVENT_NOTE,           /* e.g. a root this process may not write */
};

/* detail is one line without a newline, e.g. "peer 1234 (node demo/t1)". */
typedef void (*registry_report_fn)(void *ctx, enum registry_event event, const char *run_id,
                                   const char *detail);

struct registry_sweep_counts {
    unsigned runs, peers, cgroups; /* removed */
    unsigned marked;               /* run.json files marked "crashed" */
    unsigned failures;             /* REGISTRY_EVENT_FAILED reports */
    unsigned live;                 /* live runs left alone */
};

/* For every run whose controller is dead: marks its results' run.json
 * "crashed" when it still says "running" (run_json_mark_crashed; who names
 * the sweeper in it, e.g. "hiernet clean"), kills its listed peers that
 * still run (pid + start time checked), removes its listed cgroups (deepest
 * first, waiting up to a second for killed processes to leave them), then
 * its directory. A run with something left keeps its (claimed) directory
 * for the next sweep. Live runs are never touched. report may be NULL.
 * Returns -1 when anything failed (counts->failures) or no root could be
 * read. */
int registry_sweep_stale_as(const char *who, registry_report_fn report, void *ctx,
                            struct registry_sweep_counts *counts, char *err, size_t errlen);
/* The same, as the start-up sweep of a later run. */
int registry_sweep_stale(registry_report_fn report, void *ctx, struct registry_sweep_counts *counts,
                         char *err, size_t errlen);

/* ---- roots and helpers (shared by registry.c and registry_sweep.c) ---- */

#define REGISTRY_ROOTS_MAX 3

/* The candidate roots in order of preference: only $HIERNET_RUN_DIR when it
 * is set. Returns how many. */
size_t registry_roots(char roots[REGISTRY_ROOTS_MAX][REGISTRY_PATH_MAX]);

/* The root this process registers in: the first candidate that exists or
 * can be made, is a directory owned by us or root (not a symlink) and is
 * writable. doctor reports it. */
int registry_root_for_write(char *root, size_t rootlen, char *err, size_t errlen);

/* Removes a run directory and the plain files in it; a missing one is fine. */
int registry_dir_remove(const char *path, char *err, size_t errlen);

/* A controller's private directory for its ssh ControlPath sockets
 * (controller/agent_group.c) is ".ssh-<pid>-<start>-<random>" in a registry
 * root, so that a sweep removes it once that controller is gone (a SIGKILLed
 * one cannot). */
#define REGISTRY_SSH_PREFIX ".ssh-"
#define REGISTRY_SSH_PREFIX_LEN (sizeof REGISTRY_SSH_PREFIX - 1)

/* Parses ".tmp-<pid>-<start>-<n>", ".ssh-<pid>-<start>-<random>",
 * ".sweep-<pid>-<start>-<id>" and ".stale-<pid>-<start>-<id>": the process
 * that made the name (for .tmp, .ssh and .sweep, the one still working on
 * it); *rest gets what follows. -1 when name is none of them. */
int registry_dot_owner(const char *name, struct registry_proc *owner, const char **rest);
