/* scenario.h — runs one scenario file: the entry point the CLI calls.
 * Plain C (no lua.h), like wrk's script.h: the controller only sees this. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct scenario_options {
    const char *path;         /* the scenario file */
    const char *out_dir;      /* --out, or NULL for results/<stem>-<timestamp> */
    const char *backend;      /* --backend, or NULL: each network's own */
    const char *dilation;     /* --dilation D, or NULL: the networks' (default 1) */
    const char *dilation_max; /* --dilation-max M, or NULL: the networks' (none) */
    const char *const *sets;  /* --set name=value, n_sets of them */
    size_t n_sets;
    const char *const *args; /* extra arguments, passed to the chunk as ... */
    size_t n_args;
    bool quiet;
    bool draw;            /* hiernet draw: DOT of the topology, nothing created */
    const char *draw_out; /* draw: file for the DOT (and .svg beside it), or NULL: stdout */
    bool place;           /* hiernet place (with draw): the placement as text instead of DOT */
    const char *hosts;    /* --hosts FILE|slurm, or NULL: each network's hosts= */
    /* A tool (hiernet plot, hiernet report): the embedded module whose
     * _cli(args...) runs as the main task instead of a scenario file and
     * returns the exit code. No results directory, no run.json. */
    const char *tool;
};

/* Runs the scenario (or the tool) and returns the process exit code: 0 completed,
 * 1 scenario error, 2 bad input (options, unreadable or unparsable scenario),
 * 3 environment (a privilege or kernel feature a network needs is missing),
 * 130/143 interrupted by SIGINT/SIGTERM. */
int scenario_run(const struct scenario_options *opts);
