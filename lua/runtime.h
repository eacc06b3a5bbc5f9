/* runtime.h — the state one scenario run shares across the Lua bindings:
 * loop, scheduler, run record, log, live networks and records.
 * Owned by app/scenario.c, reachable from any binding through hn_runtime(L). */
#pragma once

#include "controller/netlife.h"
#include "controller/overload.h"
#include "controller/run.h"
#include "lua/sched.h"

#include <ev.h>
#include <lua.h>
#include <msgpack.h>
#include <stdio.h>

struct host_run;
struct l_network;
struct overload;
struct record;
struct registry;

struct hn_runtime {
    lua_State *L;
    struct ev_loop *loop;
    struct sched *sched;
    struct run *run;
    FILE *log;                  /* results/<run>/log.txt, or NULL */
    struct l_network *networks; /* every network defined, newest first */
    struct record **records;    /* every CSV of the run, closed at its end */
    size_t n_records;
    msgpack_sbuffer scratch;    /* encodes a peer command's params */
    bool quiet;                 /* no log lines on stderr */
    bool env_failure;           /* the failure came from the environment: exit 3 */
    bool bad_input;             /* a --set value of the wrong type, a bad file: exit 2 */
    struct netlife_run life;    /* the networks' shared state: registry, links.csv, addresses */
    FILE *draw;                 /* hiernet draw: networks go here as DOT, nothing starts */
    bool drawn;                 /* a network was drawn: the run is over */
    bool place;                 /* hiernet place: the placement goes to draw, as text */
    bool status_shown;          /* hn.status's live line is on the terminal */
    double status_logged_at;    /* run time of the last status line logged, or -1 */
    struct host_run *host_runs; /* programs run on this host (l_host.c), killed at the end */
    char **temp_dirs;           /* scratch directories of the tools (l_files.c) */
    size_t n_temp_dirs;
    int tool_exit;             /* hiernet plot / report: the exit code the tool returned */
    struct overload *overload; /* host CPU and compute overruns (controller/overload.h) */
    const char *scenario_path; /* the scenario file (the caller's), NULL for a tool */
    /* dilation = "auto": what the probe's verdict calls (app/scenario.c), armed
     * when a network or --dilation names auto; NULL where nothing probes. */
    overload_probe_fn dilation_probe;
    void *dilation_probe_ctx;
};

struct hn_runtime *hn_runtime(lua_State *L);
void hn_runtime_attach(lua_State *L, struct hn_runtime *rt);
/* A timestamped line on stderr (unless quiet) and in log.txt; it first clears
 * hn.status's live line, which the next status call draws again. */
void hn_logf(struct hn_runtime *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears hn.status's live line from the terminal (end of run, before output). */
void hn_status_clear(struct hn_runtime *rt);
