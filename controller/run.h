/* run.h — one run of a scenario: its options, parameters, results directory
 * and run.json.
 *
 * Owns the --set list, the parameters the scenario read (with their types),
 * the topology description (a JSON fragment handed over by the network
 * layer) and the paths. run.json is replaced atomically (durable.h: temp
 * file, fsync, rename) at start (status "running"), whenever a network
 * starts or stops (from the event loop: the fsyncs follow on durable.h's
 * sync thread), and at the end (completed|failed|interrupted). A run
 * whose controller died keeps "running" until a sweep of the run registry
 * (hiernet clean, or the start of a later run) marks it "crashed". */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum run_param_kind { RUN_PARAM_STRING, RUN_PARAM_NUMBER, RUN_PARAM_BOOL };

struct run_param {
    char *name;
    char *value; /* as given on the command line, or the default's text */
    enum run_param_kind kind;
    bool from_cli; /* set with --set */
    bool read;     /* read by the scenario through hn.param */
    bool no_value; /* read with a nil default and not set: named in messages, not in run.json */
};

struct run {
    char *scenario;         /* path as given */
    char *dir;              /* results directory */
    char *backend_override; /* --backend, or NULL */
    char *hosts_override;   /* --hosts FILE|slurm, or NULL: each network's hosts= */
    char backend_used[16];  /* what the first started network runs on ("" before) */
    struct run_param *params;
    size_t n_params;
    char *topology_json;  /* JSON array of networks, "[]" until a network starts */
    char *error;          /* first line of the failure, for run.json */
    char *overload_json;  /* the overload report (controller/overload.h), or NULL */
    char *placement_json; /* JSON array: each placed network's machines (run_add_placement) */
    char *machines_json;  /* JSON array: each agent's machine and clock (run_add_machines) */
    char *underlay_json;  /* JSON array: each spread network's machine pairs (run_add_underlay) */
    const char *status;
    double start_wall, end_wall; /* seconds since the epoch */
    const char *lua_release;     /* set by the scripting layer (static string) */
    long long seed;
    bool has_seed;
    /* Time dilation of the run's clock and links, >= 1 (run.json). */
    double dilation;
    bool dilation_from_cli; /* --dilation: overrides the networks' */
    bool dilation_named;    /* a network named it (others must agree) */
    /* dilation = "auto" (or --dilation auto): a probe of the first compute
     * commands chose it; reason names the figures (run.json, log.txt). */
    bool dilation_auto;
    /* The most "auto" may choose (--dilation-max, or a network's
     * dilation_max): HN_DILATION_MAX unless one was named. */
    double dilation_auto_max;
    bool dilation_max_from_cli, dilation_max_named;
    char *dilation_reason;    /* NULL until the probe decided */
    char *dilation_dataplane; /* the data plane's window (JSON object), NULL until judged */
    double probe_s;           /* wall seconds of the probe runs that came before this one */
    /* The runs auto ended to start again, oldest first: the items of a JSON
     * array ({"dilation", "wall_s", "next", "reason"} each), NULL without. */
    char *dilation_history;
};

/* The largest dilation accepted: beyond it, timers of a few ms turn into minutes. */
#define HN_DILATION_MAX 1000

void run_init(struct run *r);
/* Appends one network's placement over machines (a JSON object) to run.json's
 * "placement" array. */
void run_add_placement(struct run *r, const char *json);
/* Appends agents' entries (JSON objects, comma-separated: control RTT,
 * clock offset and error, version per machine) to run.json's "machines". */
void run_add_machines(struct run *r, const char *json);
/* Appends a spread network's underlay round trips (JSON objects, one per
 * pair of machines a cut link joins, comma-separated) to run.json's
 * "underlay". */
void run_add_underlay(struct run *r, const char *json);
void run_destroy(struct run *r);
/* Adds "name=value" from --set; a repeated name keeps the last value. */
int run_set_param(struct run *r, const char *assignment, char *err, size_t errlen);
struct run_param *run_find_param(struct run *r, const char *name);
/* Records a parameter read by the scenario with its default (value = text of default). */
struct run_param *run_note_param(struct run *r, const char *name, const char *value,
                                 enum run_param_kind kind);
/* Records a parameter read with a nil default and no --set (no value to report). */
struct run_param *run_note_param_unset(struct run *r, const char *name);
/* The --set names the scenario never read through hn.param, as one line
 * ("--set stpes=100: the scenario never read 'stpes' (it read: steps,
 * seconds)") in msg; returns how many (0 leaves msg ""). */
size_t run_unread_params(const struct run *r, char *msg, size_t msglen);
/* Creates the results directory: out_dir if given (created if missing), else
 * results/<scenario-stem>-<YYYYmmdd-HHMMSS>[-N] under the working directory. */
int run_make_dir(struct run *r, const char *out_dir, char *err, size_t errlen);
int run_write_json(const struct run *r, char *err, size_t errlen);
/* The same from the event loop: replaced at once, its fsyncs on
 * durable.h's sync thread (durable_replace_sync_later). */
int run_write_json_nowait(const struct run *r, char *err, size_t errlen);
void run_set_topology(struct run *r, const char *json); /* copies */
void run_set_error(struct run *r, const char *msg);     /* keeps the first line */
void run_set_overload(struct run *r, const char *json); /* copies */

enum run_dilation_outcome {
    RUN_DILATION_SET,      /* d is the run's dilation now (or already was) */
    RUN_DILATION_CLI_WINS, /* --dilation gave another: note says so, for the log */
    RUN_DILATION_CONFLICT, /* refused: err says why */
};

/* A network names dilation d (already checked to lie in 1..HN_DILATION_MAX).
 * The run has one clock: --dilation wins over every network's; otherwise
 * the first network that names one sets it, and a later network must agree
 * once one has named it or any has started (started); a fixed d after a
 * network's dilation_max (which bounds "auto") is refused. network names
 * the network in note and err. */
enum run_dilation_outcome run_name_dilation(struct run *r, double d, bool started,
                                            const char *network, char *msg, size_t msglen);
/* A network names dilation "auto": the run's dilation is then chosen by a
 * probe (app/scenario.c). Returns RUN_DILATION_SET when the run is (now)
 * auto, RUN_DILATION_CLI_WINS under a numeric --dilation (note in msg),
 * RUN_DILATION_CONFLICT when a network named a number or one started. */
enum run_dilation_outcome run_name_dilation_auto(struct run *r, bool started, const char *network,
                                                 char *msg, size_t msglen);
/* A network names dilation_max m (checked to lie in 1..HN_DILATION_MAX):
 * the most an "auto" dilation may choose. --dilation-max wins; otherwise
 * the first network that names one sets it and later ones must agree.
 * Beside a fixed dilation: RUN_DILATION_CLI_WINS (a note, nothing set)
 * when --dilation fixed it, RUN_DILATION_CONFLICT when a network did. */
enum run_dilation_outcome run_name_dilation_max(struct run *r, double m, bool started,
                                                const char *network, char *msg, size_t msglen);
/* The probe's verdict: the run's dilation d and why (copied). */
void run_set_dilation_reason(struct run *r, const char *reason);
/* The probe's data-plane figures, a JSON object (copied; NULL clears). */
void run_set_dilation_dataplane(struct run *r, const char *json);
/* The earlier runs' decisions: a JSON array's items, comma-separated
 * (copied; NULL clears). */
void run_set_dilation_history(struct run *r, const char *items);
double run_wall_clock(void);
/* A run whose controller (pid) died: when dir/run.json still says "running"
 * for that pid, rewrites it with status "crashed", end_time the newest write
 * in dir (results are complete up to it) and an error naming who found it
 * ("hiernet clean"). Returns 1 marked, 0 nothing to mark (no run.json,
 * finished, another controller's), -1 with err. */
int run_json_mark_crashed(const char *dir, long controller_pid, const char *who, char *err,
                          size_t errlen);
