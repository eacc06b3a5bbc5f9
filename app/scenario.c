/* scenario.c — one run of a scenario file (see scenario.h).
 *
 * Order of a run: check options and load the chunk (bad input exits 2 before
 * anything is created), create the results directory and run.json, sweep
 * what crashed runs left and register this run (the registry lists its
 * results directory, so that a sweep after a crash of ours marks run.json
 * "crashed"), run the chunk as the main task on the libev loop, then tear
 * down in order: halt the scheduler, stop every network (peers exit on EOF;
 * SIGKILL after a deadline), close the records, write the final run.json
 * and only then remove the registry entry. */
#include "controller/log.h"
#include "app/scenario.h"

#include "common/json.h"
#include "controller/host_probe.h"
#include "controller/overload.h"
#include "controller/reaper.h"
#include "controller/durable.h"
#include "controller/record.h"
#include "controller/registry.h"
#include "controller/run.h"
#include "lua/l_core.h"
#include "lua/l_host.h"
#include "lua/l_network.h"
#include "lua/modules.h"
#include "lua/runtime.h"
#include "lua/sched.h"
#include "topo/network.h"

#include <lauxlib.h>
#include <lualib.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEARDOWN_DEADLINE_S 5.0

/* dilation = "auto" whose probe asked for more than the run's dilation:
 * the scenario runs again from its start at that dilation, into the same
 * results directory, with the ended run's records kept in its
 * dilation-probe/ folder (which holds the run before it the same way). A
 * rerun's data-plane window judges again, up to OVERLOAD_AUTO_RERUNS
 * reruns in all; a test's rerun (OVERLOAD_DP_RISE) judges its window
 * against the first one's and may start the scenario once more at the
 * first run's dilation. */
struct auto_rerun {
    double dilation; /* > 1 once a probe asked for it: the next run's */
    int reruns;      /* runs started again so far */
    bool pending;    /* the run just ended asked for another */
    bool test;       /* the next run tests its dilation against base_util at base_d */
    double base_d, base_util;
    char reason[sizeof((struct overload_auto *)0)->reason];
    char dataplane[512]; /* the latest data-plane figures (JSON), "" when not judged */
    double probe_s;      /* the ended runs' wall seconds together */
    char *history;       /* the ended runs' decisions: JSON array items */
    char *dir;           /* the results directory every run shares */
    char *aside;         /* the ended run's records while the rerun creates dir */
};

#define PROBE_DIR_NAME "dilation-probe"

struct scenario {
    struct hn_runtime rt;
    struct auto_rerun *rerun; /* in: a rerun's dilation; out: the probe's verdict */
    bool probe_stop;          /* the probe asked for more: the loop was broken */
    bool judged;              /* a probe window of this run answered */
    struct run run;
    ev_signal sigint, sigterm;
    ev_timer teardown_timer;
    int signal;            /* the signal that interrupted the run, or 0 */
    bool teardown_late;    /* teardown deadline passed or a second signal came */
    bool traceback_in_log; /* a failure's traceback went to log.txt only */
};

static struct scenario *scenario_of_loop(struct ev_loop *loop)
{
    return ev_userdata(loop);
}

static void on_signal(EV_P_ ev_signal *w, int revents)
{
    struct scenario *sc = scenario_of_loop(EV_A);
    if (sc->signal) {
        sc->teardown_late = true; /* second signal: stop waiting for peers */
        ev_break(EV_A_ EVBREAK_ALL);
        return;
    }
    sc->signal = w->signum;
    hn_logf(&sc->rt, "interrupted by %s; stopping", w->signum == SIGINT ? "SIGINT" : "SIGTERM");
    ev_break(EV_A_ EVBREAK_ALL);
}

static void on_teardown_deadline(EV_P_ ev_timer *w, int revents)
{
    scenario_of_loop(EV_A)->teardown_late = true;
}

/* ---- setup ---- */

/* --option's value as a dilation, 1..HN_DILATION_MAX, or -1 with one line
 * (`also` names what else it may be: " or auto", or ""). */
static int cli_dilation(const char *option, const char *v, const char *also, double *out)
{
    char *end;
    *out = strtod(v, &end);
    if (end != v && !*end && *out >= 1 && *out <= HN_DILATION_MAX) return 0;
    fprintf(stderr, "hiernet: %s '%s': expected a number from 1 to %d%s\n", option, v,
            HN_DILATION_MAX, also);
    return -1;
}

static int apply_options(struct scenario *sc, const struct scenario_options *o)
{
    char err[512];
    sc->run.scenario = strdup(o->tool ? o->tool : o->path);
    for (size_t i = 0; i < o->n_sets; i++) {
        if (run_set_param(&sc->run, o->sets[i], err, sizeof err) < 0) {
            fprintf(stderr, "hiernet: %s\n", err);
            return -1;
        }
    }
    if (o->backend) {
        enum topo_backend b;
        if (topo_backend_parse(o->backend, &b, err, sizeof err) < 0) {
            fprintf(stderr, "hiernet: --backend: %s\n", err);
            return -1;
        }
        sc->run.backend_override = strdup(o->backend);
    }
    if (o->hosts) sc->run.hosts_override = strdup(o->hosts);
    if (o->dilation_max && o->dilation && strcmp(o->dilation, "auto") != 0) {
        fprintf(stderr,
                "hiernet: --dilation-max '%s' bounds --dilation auto, not a fixed --dilation "
                "'%s'\n",
                o->dilation_max, o->dilation);
        return -1;
    }
    if (o->dilation_max) {
        if (cli_dilation("--dilation-max", o->dilation_max, "", &sc->run.dilation_auto_max) < 0)
            return -1;
        sc->run.dilation_max_from_cli = true;
    }
    if (sc->rerun->reruns > 0) { /* a probe's rerun: it starts at the probe's choice */
        sc->run.dilation = sc->rerun->dilation;
        sc->run.dilation_from_cli = sc->run.dilation_auto = true;
        sc->run.probe_s = sc->rerun->probe_s;
        run_set_dilation_reason(&sc->run, sc->rerun->reason);
        if (sc->rerun->dataplane[0]) run_set_dilation_dataplane(&sc->run, sc->rerun->dataplane);
        run_set_dilation_history(&sc->run, sc->rerun->history);
    } else if (o->dilation && strcmp(o->dilation, "auto") == 0) {
        sc->run.dilation_from_cli = sc->run.dilation_auto = true;
    } else if (o->dilation) {
        if (cli_dilation("--dilation", o->dilation, " or auto", &sc->run.dilation) < 0) return -1;
        sc->run.dilation_from_cli = true;
    }
    return 0;
}

/* Loads the chunk onto the stack: a missing or unparsable file is bad input. */
static int load_chunk(lua_State *L, const char *path)
{
    int rc = luaL_loadfilex(L, path, "t");
    if (rc == LUA_OK) return 0;
    fprintf(stderr, "hiernet: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
}

/* A tool's chunk: its module's _cli(...) returns the exit code. The module
 * name comes from main.c, never from the user. */
static int load_tool(lua_State *L, const char *module)
{
    char chunk[256];
    snprintf(chunk, sizeof chunk, "require('hiernet.core')._set_exit_code(require('%s')._cli(...))",
             module);
    if (luaL_loadbufferx(L, chunk, strlen(chunk), "=hiernet", "t") == LUA_OK) return 0;
    fprintf(stderr, "hiernet: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
}

/* The folder of the scenario file, where `require` looks first ("." for a
 * bare file name); NULL for a tool, which has no scenario. Pushed on the
 * Lua stack, which keeps it for as long as l_modules_install needs it. */
static const char *push_scenario_dir(lua_State *L, const struct scenario_options *o)
{
    if (o->tool) return NULL;
    const char *slash = strrchr(o->path, '/');
    if (!slash) return lua_pushliteral(L, ".");
    if (slash == o->path) return lua_pushliteral(L, "/");
    return lua_pushlstring(L, o->path, (size_t)(slash - o->path));
}

static void open_libraries(lua_State *L, struct scenario *sc, const struct scenario_options *o)
{
    luaL_openlibs(L);
    int top = lua_gettop(L);
    l_modules_install(L, push_scenario_dir(L, o));
    lua_settop(L, top);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_hiernet_core);
    lua_setfield(L, -2, "hiernet.core");
    lua_pop(L, 1);
    sc->rt.scenario_path = o->tool ? NULL : o->path;
    hn_runtime_attach(L, &sc->rt);
}

/* The networks' life cycle engine runs on the run's clock (it logs through
 * ctl_log, which the runtime points at the run's log). */
static double life_clock(void *ctx)
{
    return sched_now(((struct hn_runtime *)ctx)->sched);
}

static void attach_life(struct hn_runtime *rt)
{
    netlife_run_init(&rt->life, rt->loop, NULL);
    rt->life.clock = life_clock;
    rt->life.clock_ctx = rt;
    rt->life.record = rt->run; /* run.json's topology, backend and overload */
}

/* The registry entry of the run, made with its results directory and
 * before its first run.json: a run.json that says "running" always has an
 * entry that leads a sweep to it after a SIGKILL. Without a usable registry
 * the run goes on, with a warning (logged once log.txt exists). */
static void register_run(struct scenario *sc, char *warning, size_t len)
{
    char err[512];
    if (!netlife_run_open_registry(&sc->rt.life, err, sizeof err))
        snprintf(warning, len, "warning: no run registry: %s", err);
}

/* A rerun's results directory holds the probe's records in a folder. */
static int keep_probe_records(struct scenario *sc)
{
    if (!sc->rerun->aside) return 0;
    char to[4200];
    snprintf(to, sizeof to, "%s/%s", sc->run.dir, PROBE_DIR_NAME);
    if (rename(sc->rerun->aside, to) < 0) {
        fprintf(stderr, "hiernet: cannot move the dilation probe's records %s to %s: %s\n",
                sc->rerun->aside, to, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_results(struct scenario *sc, const char *out_dir)
{
    char err[512];
    if (sc->rerun->dir) out_dir = sc->rerun->dir;
    if (run_make_dir(&sc->run, out_dir, err, sizeof err) < 0) {
        fprintf(stderr, "hiernet: %s\n", err);
        return -1;
    }
    if (keep_probe_records(sc) < 0) return -1;
    char warning[600] = "";
    sc->rt.life.dir = sc->run.dir;
    register_run(sc, warning, sizeof warning);
    int fd = durable_create(sc->run.dir, "log.txt", 1);
    if (fd < 0 || !(sc->rt.log = fdopen(fd, "a"))) {
        fprintf(stderr, "hiernet: cannot create %s/log.txt: %s\n", sc->run.dir,
                errno == EEXIST ? "it exists already (a file or a link)" : strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (warning[0]) hn_logf(&sc->rt, "%s", warning);
    if (run_write_json(&sc->run, err, sizeof err) < 0) {
        fprintf(stderr, "hiernet: %s\n", err);
        return -1;
    }
    netlife_run_sweep_stale(); /* what earlier runs left, now that this run is on its way */
    return 0;
}

static void watch_signals(struct scenario *sc)
{
    struct ev_loop *loop = sc->rt.loop;
    ev_signal_init(&sc->sigint, on_signal, SIGINT);
    ev_signal_init(&sc->sigterm, on_signal, SIGTERM);
    ev_signal_start(loop, &sc->sigint);
    ev_signal_start(loop, &sc->sigterm);
    /* Signal watchers must not keep the loop alive on their own. */
    ev_unref(loop);
    ev_unref(loop);
}

/* ---- dilation = "auto" ---- */

/* The data-plane window's figures into run.json's dilation (and the
 * rerun's, until its own window replaces them). */
static void keep_dataplane_figures(struct scenario *sc, const struct overload_auto *choice)
{
    if (!choice->dataplane) return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    overload_write_dataplane_json(f, &choice->dp);
    if (fclose(f) == 0) {
        run_set_dilation_dataplane(&sc->run, text);
        /* Cut JSON would make the rerun's run.json malformed: keep none. */
        bool fits = len < sizeof sc->rerun->dataplane;
        memcpy(sc->rerun->dataplane, fits ? text : "", fits ? len + 1 : 1);
        if (!fits)
            ctl_log("dilation: the data-plane figures (%zu bytes) do not fit the rerun's "
                    "record; the rerun's run.json leaves them out",
                    len);
    }
    free(text);
}

/* A verdict that keeps dilation 1 after the other window's: both reasons. */
static void add_dilation_reason(struct scenario *sc, const char *reason)
{
    if (!sc->run.dilation_reason) return run_set_dilation_reason(&sc->run, reason);
    size_t n = strlen(sc->run.dilation_reason) + strlen(reason) + 3;
    char *both = malloc(n);
    if (!both) return;
    snprintf(both, n, "%s; %s", sc->run.dilation_reason, reason);
    run_set_dilation_reason(&sc->run, both);
    free(both);
}

/* The choice cut to the run's dilation_max, its reason saying so at its
 * end (the asked-for reason shortened, where both do not fit). */
static void cap_choice(const struct scenario *sc, struct overload_auto *c)
{
    double most = sc->run.dilation_auto_max;
    if (!(c->dilation > most)) return;
    char cut[192], reason[sizeof c->reason];
    int n = snprintf(cut, sizeof cut,
                     "; cut to dilation_max %g from the %g it asked for: the host will not keep "
                     "up (the overload verdict says how far)",
                     most, c->dilation);
    int room = (int)sizeof reason - 1 - n;
    snprintf(reason, sizeof reason, "%.*s%s", room > 0 ? room : 0, c->reason, cut);
    memcpy(c->reason, reason, sizeof reason);
    c->dilation = most;
}

/* The probe's verdicts (controller/overload.h), on the loop: one from the
 * compute window, one from the data plane's, whichever closes first (a
 * rerun's: the data plane's alone). The run's dilation keeps the run going
 * as it is; more ends this run so that it can start again at that dilation
 * (links, peers and the clock are fixed once a network starts). */
static void on_dilation_probe(void *ctx, const struct overload_auto *asked)
{
    struct scenario *sc = ctx;
    if (sc->probe_stop) return; /* the other window asked for a rerun already */
    struct overload_auto capped = *asked;
    cap_choice(sc, &capped);
    const struct overload_auto *choice = &capped;
    sc->judged = true;
    keep_dataplane_figures(sc, choice);
    /* Only a failed test goes below the run's dilation (back to the first
     * run's); any other choice at or under it keeps the run going. */
    bool back = choice->base_dilation > 0 && !choice->test;
    if (choice->dilation == sc->run.dilation || (choice->dilation < sc->run.dilation && !back)) {
        char err[512];
        add_dilation_reason(sc, choice->reason);
        hn_logf(&sc->rt, "dilation auto: %g (%s)", sc->run.dilation, choice->reason);
        if (run_write_json_nowait(&sc->run, err, sizeof err) < 0)
            hn_logf(&sc->rt, "warning: %s", err);
        return;
    }
    sc->rerun->dilation = choice->dilation;
    sc->rerun->test = choice->test;
    sc->rerun->base_d = choice->base_dilation;
    sc->rerun->base_util = choice->base_utilization;
    snprintf(sc->rerun->reason, sizeof sc->rerun->reason, "%s", choice->reason);
    run_set_dilation_reason(&sc->run, choice->reason);
    hn_logf(&sc->rt, "dilation auto: %g (%s); the scenario starts again at dilation %g",
            choice->dilation, choice->reason, choice->dilation);
    sc->probe_stop = true;
    ev_break(sc->rt.loop, EVBREAK_ALL);
}

/* An auto run that ended inside its probe window kept dilation 1: the
 * figures so far say why. */
static void close_dilation_probe(struct scenario *sc)
{
    struct overload_auto choice;
    bool open = overload_probe_open(sc->rt.overload, &choice);
    overload_probe_disarm(sc->rt.overload);
    if (sc->rerun->test && sc->rerun->reruns > 0 && !sc->judged) {
        char why[96];
        snprintf(why, sizeof why,
                 "the run ended before the test's window closed, so dilation %g "
                 "stayed",
                 sc->run.dilation);
        add_dilation_reason(sc, why);
        hn_logf(&sc->rt, "dilation auto: %g (%s)", sc->run.dilation, why);
        return;
    }
    if (!open || !sc->run.dilation_auto || sc->run.dilation_reason) return;
    char reason[sizeof choice.reason + 64];
    snprintf(reason, sizeof reason, "the run ended inside the probe, so dilation 1 stayed: %s",
             choice.reason);
    run_set_dilation_reason(&sc->run, reason);
    hn_logf(&sc->rt, "dilation auto: 1 (%s)", reason);
}

/* The first run probes once its scenario names auto (or at once under
 * --dilation auto); a rerun judges its data plane again while reruns are
 * left, and the last one runs to its end whatever its window says. */
static void arm_dilation_probe(struct scenario *sc)
{
    sc->rt.dilation_probe = on_dilation_probe;
    sc->rt.dilation_probe_ctx = sc;
    if (!sc->run.dilation_auto) return;
    struct auto_rerun *rr = sc->rerun;
    if (rr->reruns > 0) {
        if (rr->reruns >= OVERLOAD_AUTO_RERUNS) return;
        if (rr->test)
            overload_probe_arm_tested(sc->rt.overload, on_dilation_probe, sc, sc->run.dilation,
                                      rr->base_d, rr->base_util);
        else
            overload_probe_arm_dataplane(sc->rt.overload, on_dilation_probe, sc, sc->run.dilation);
        return;
    }
    if (!sc->run.dilation_reason) overload_probe_arm(sc->rt.overload, on_dilation_probe, sc);
}

/* ---- running ---- */

static void run_main_task(struct scenario *sc, const struct scenario_options *o)
{
    lua_State *L = sc->rt.L;
    for (size_t i = 0; i < o->n_args; i++)
        lua_pushstring(L, o->args[i]);
    sched_spawn(L, (int)o->n_args, true);
    lua_pop(L, 1);
    sched_drain(sc->rt.sched);
    if (sched_main_outcome(sc->rt.sched) == SCHED_RUNNING && !sched_fatal_error(sc->rt.sched))
        ev_run(sc->rt.loop, 0);
}

/* HIERNET_TRACEBACK set to anything but "" or "0". */
static bool traceback_wanted(void)
{
    const char *v = getenv("HIERNET_TRACEBACK");
    return v && *v && strcmp(v, "0") != 0;
}

/* A failed run's error: its message alone on stderr, one line for the user
 * (the first line names file:line and the value at fault), and the whole
 * traceback in log.txt, where a developer looks. HIERNET_TRACEBACK=1 puts
 * the traceback on stderr too: the only place it goes for `hiernet draw`,
 * plot and report, which write no log (their errors are mostly the user's
 * input, so they too get one line by default). */
static void report_fatal(struct scenario *sc, const char *fatal)
{
    const char *tb = strstr(fatal, "\nstack traceback:");
    bool whole = !tb || traceback_wanted();
    fprintf(stderr, "%.*s\n", whole ? (int)strlen(fatal) : (int)(tb - fatal), fatal);
    if (sc->rt.log) fprintf(sc->rt.log, "%s\n", fatal);
    sc->traceback_in_log = !whole && sc->rt.log;
}

/* Decides status and exit code after the loop has returned. */
static int outcome(struct scenario *sc)
{
    const char *fatal = sched_fatal_error(sc->rt.sched);
    hn_status_clear(&sc->rt);
    if (sc->signal) {
        sc->run.status = "interrupted";
        run_set_error(&sc->run,
                      sc->signal == SIGINT ? "interrupted by SIGINT" : "interrupted by SIGTERM");
        return 128 + sc->signal;
    }
    if (fatal) {
        report_fatal(sc, fatal);
        sc->run.status = "failed";
        run_set_error(&sc->run, fatal);
        return sc->rt.env_failure ? 3 : sc->rt.bad_input ? 2 : 1;
    }
    if (sched_main_outcome(sc->rt.sched) == SCHED_DONE || sc->rt.drawn) {
        sc->run.status = "completed";
        return sc->rt.tool_exit;
    }
    const char *msg = "hiernet: the scenario is waiting for something that can never happen "
                      "(every task is blocked and nothing is pending)";
    fprintf(stderr, "%s\n", msg);
    sc->run.status = "failed";
    run_set_error(&sc->run, msg);
    return 1;
}

/* A --set name the completed scenario never read is a typo (it ran on the
 * default): bad input, exit 2, run.json "failed" with that line. Checked at
 * the end because hn.param may be read at any point of the run. */
static int check_unread_sets(struct scenario *sc, int code)
{
    char msg[1024];
    static const char prefix[] = "hiernet: ";
    memcpy(msg, prefix, sizeof prefix);
    if (code != 0 ||
        run_unread_params(&sc->run, msg + sizeof prefix - 1, sizeof msg - sizeof prefix + 1) == 0)
        return code;
    fprintf(stderr, "%s\n", msg);
    if (sc->rt.log) fprintf(sc->rt.log, "%s\n", msg);
    sc->run.status = "failed";
    run_set_error(&sc->run, msg); /* the line as printed, like a failure's */
    return 2;
}

/* ---- teardown ---- */

static void stop_networks(struct scenario *sc)
{
    struct ev_loop *loop = sc->rt.loop;
    sched_halt(sc->rt.sched);
    l_network_stop_all(&sc->rt);
    /* The loop's clock is as old as its last iteration, before the
     * scenario's last Lua and the stops: the deadline counts from now. */
    ev_now_update(loop);
    ev_timer_init(&sc->teardown_timer, on_teardown_deadline, TEARDOWN_DEADLINE_S, 0);
    ev_timer_start(loop, &sc->teardown_timer);
    while (!l_network_all_exited(&sc->rt) && !sc->teardown_late)
        ev_run(loop, EVRUN_ONCE);
    /* The peer templates' exits and the cgroups' removal, on the loop. */
    l_network_release_begin(&sc->rt);
    while (!l_network_all_released(&sc->rt) && !sc->teardown_late)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &sc->teardown_timer);
    l_network_release_all(&sc->rt); /* SIGKILLs and reaps whatever is left */
    reaper_wait(NULL);              /* programs and linkds killed on the loop, still exiting */
}

/* Last of all: a crash before this leaves an entry whose sweep marks a
 * run.json that still says "running", never a finished one. */
static void unregister_run(struct scenario *sc)
{
    char err[512];
    if (registry_close_and_remove(sc->rt.life.registry, err, sizeof err) < 0)
        fprintf(stderr, "hiernet: %s\n", err);
    sc->rt.life.registry = NULL;
}

static void close_records(struct hn_runtime *rt)
{
    netlife_run_close(&rt->life); /* links.csv */
    for (size_t i = 0; i < rt->n_records; i++)
        record_close(rt->records[i]);
    free(rt->records);
    rt->records = NULL;
    rt->n_records = 0;
}

/* The overload report goes into run.json; a CPU-limited run says so last. */
static void report_overload(struct scenario *sc)
{
    if (!sc->rt.overload) return;
    struct overload_report r;
    overload_report(sc->rt.overload, sc->run.dilation, &r);
    char line[512];
    bool probe = strcmp(sc->run.status, "probe") == 0; /* the rerun will say its own */
    if (!probe && overload_warning(&r, line, sizeof line)) hn_logf(&sc->rt, "%s", line);
    if (!probe && linkd_stalls_note_line(&r.linkd_stalls, line, sizeof line))
        hn_logf(&sc->rt, "%s", line);
    netlife_run_publish_overload(&sc->rt.life);
}

/* --dilation-max bounds "auto": a run that never was says so, rather than
 * leave the option silently ignored (a network's dilation_max beside a
 * fixed dilation is refused where it is named, lua/l_network.c). */
static void note_unused_max(struct scenario *sc)
{
    const struct run *r = &sc->run;
    if (r->dilation_max_from_cli && !r->dilation_auto && strcmp(r->status, "probe") != 0)
        hn_logf(&sc->rt,
                "note: --dilation-max %g had no effect: the run's dilation was fixed at %g, "
                "not \"auto\"",
                r->dilation_auto_max, r->dilation);
}

static void finish_run(struct scenario *sc)
{
    char err[512];
    report_overload(sc);
    note_unused_max(sc);
    close_records(&sc->rt);
    sc->run.end_wall = run_wall_clock();
    if (run_write_json(&sc->run, err, sizeof err) < 0) fprintf(stderr, "hiernet: %s\n", err);
    if (sc->rt.log) {
        fflush(sc->rt.log);
        durable_sync_forget(fileno(sc->rt.log));
        fclose(sc->rt.log);
    }
    sc->rt.log = NULL;
}

static void release(struct scenario *sc)
{
    struct ev_loop *loop = sc->rt.loop;
    unregister_run(sc);       /* a no-op unless a failed start left it */
    l_host_release(&sc->rt);  /* a plot's gnuplot still running (interrupt) */
    l_files_release(&sc->rt); /* and its scratch files */
    if (loop && ev_is_active(&sc->sigint)) {
        ev_ref(loop); /* undo watch_signals' unrefs before stopping */
        ev_ref(loop);
        ev_signal_stop(loop, &sc->sigint);
        ev_signal_stop(loop, &sc->sigterm);
    }
    ctl_log_set(NULL, NULL); /* the runtime's log goes; teardown messages to stderr */
    host_probe_forget(NULL); /* a task's wait for a probe: the tasks go */
    sched_free(sc->rt.sched);
    overload_free(sc->rt.overload);
    sc->rt.overload = NULL;
    if (sc->rt.L) lua_close(sc->rt.L);
    reaper_wait(NULL); /* what the handles' finalizers killed: nothing runs on */
    msgpack_sbuffer_destroy(&sc->rt.scratch);
    run_destroy(&sc->run);
}

/* ---- hiernet draw ---- */

static int open_drawing(struct scenario *sc, const char *out)
{
    sc->rt.quiet = true;
    sc->rt.draw = out ? fopen(out, "we") : stdout;
    if (!sc->rt.draw) {
        fprintf(stderr, "hiernet: cannot write '%s': %s\n", out, strerror(errno));
        return -1;
    }
    return 0;
}

/* A scenario that never starts a network is drawn whole at its end. */
static int finish_drawing(struct scenario *sc, int code)
{
    if (code == 0 && !sc->rt.drawn) l_network_draw_all(&sc->rt);
    if (sc->rt.drawn) code = 0; /* the parked main task is not a failure */
    if (sc->rt.draw != stdout) fclose(sc->rt.draw);
    sc->rt.draw = NULL;
    sched_halt(sc->rt.sched);
    l_network_release_all(&sc->rt);
    release(sc);
    return code;
}

/* The ended run's decision appended to the history run.json keeps. */
static int add_history(struct auto_rerun *rr, double dilation, double wall_s)
{
    char *items = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&items, &len);
    if (!f) return -1;
    if (rr->history) fprintf(f, "%s, ", rr->history);
    fprintf(f, "{\"dilation\": %g, \"wall_s\": ", dilation);
    json_write_number(f, wall_s);
    fprintf(f, ", \"next\": %g, \"test\": %s, \"reason\": ", rr->dilation,
            rr->test ? "true" : "false");
    json_write_string_or_null(f, rr->reason);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(items);
        return -1;
    }
    free(rr->history);
    rr->history = items;
    return 0;
}

/* The probe's run ends here: its records stay (run.json status "probe"),
 * its directory moves aside for the rerun. */
static int end_probe_run(struct scenario *sc)
{
    hn_status_clear(&sc->rt);
    sc->run.status = "probe";
    stop_networks(sc);
    finish_run(sc);
    unregister_run(sc);
    struct auto_rerun *rr = sc->rerun;
    double wall_s = sc->run.end_wall - sc->run.start_wall;
    rr->probe_s += wall_s;
    free(rr->dir);
    free(rr->aside);
    rr->dir = strdup(sc->run.dir);
    size_t n = strlen(sc->run.dir) + sizeof "." PROBE_DIR_NAME;
    rr->aside = rr->dir ? malloc(n) : NULL;
    if (!rr->aside || add_history(rr, sc->run.dilation, wall_s) < 0) {
        fprintf(stderr, "hiernet: out of memory\n");
        return 1;
    }
    snprintf(rr->aside, n, "%s.%s", sc->run.dir, PROBE_DIR_NAME);
    if (rename(sc->run.dir, rr->aside) < 0) {
        fprintf(stderr, "hiernet: cannot move the dilation probe's records %s aside: %s\n",
                sc->run.dir, strerror(errno));
        return 1;
    }
    rr->pending = true;
    return 0;
}

static int scenario_attempt(const struct scenario_options *o, struct auto_rerun *rerun)
{
    struct scenario sc;
    memset(&sc, 0, sizeof sc);
    sc.rerun = rerun;
    run_init(&sc.run);
    msgpack_sbuffer_init(&sc.rt.scratch);
    sc.rt.run = &sc.run;
    sc.rt.quiet = o->quiet;
    sc.rt.status_logged_at = -1;
    sc.run.lua_release = LUA_RELEASE;
    int code = 2;
    if (apply_options(&sc, o) < 0) goto out_early;
    sc.rt.L = luaL_newstate();
    if (!sc.rt.L) {
        fprintf(stderr, "hiernet: cannot create a Lua state (out of memory)\n");
        goto out_early;
    }
    open_libraries(sc.rt.L, &sc, o);
    if ((o->tool ? load_tool(sc.rt.L, o->tool) : load_chunk(sc.rt.L, o->path)) < 0) goto out_early;
    sc.rt.loop = ev_default_loop(EVFLAG_AUTO);
    ev_set_userdata(sc.rt.loop, &sc);
    attach_life(&sc.rt);
    sc.rt.sched = sched_new(sc.rt.L, sc.rt.loop);
    if (!sc.rt.sched) goto out_early;
    sched_set_dilation(sc.rt.sched, sc.run.dilation);
    if (!o->draw && !o->tool) sc.rt.overload = overload_new(sc.rt.loop);
    sc.rt.life.overload = sc.rt.overload;
    arm_dilation_probe(&sc);
    sc.rt.place = o->place;
    if (o->draw ? open_drawing(&sc, o->draw_out) < 0
                : !o->tool && open_results(&sc, o->out_dir) < 0)
        goto out_early;
    signal(SIGPIPE, SIG_IGN);
    watch_signals(&sc);
    run_main_task(&sc, o);
    if (sc.probe_stop && !sc.signal) {
        code = end_probe_run(&sc);
        release(&sc);
        return code;
    }
    close_dilation_probe(&sc); /* teardown's replies judge nothing */
    code = outcome(&sc);
    if (o->draw) return finish_drawing(&sc, code); /* drawn before most params are read */
    if (o->tool) {
        sched_halt(sc.rt.sched);
        release(&sc);
        return code;
    }
    code = check_unread_sets(&sc, code);
    stop_networks(&sc);
    finish_run(&sc);
    unregister_run(&sc);
    if (!o->quiet)
        fprintf(stderr, "hiernet: run %s in %.2f s; results in %s%s\n", sc.run.status,
                sc.run.end_wall - sc.run.start_wall + sc.run.probe_s, sc.run.dir,
                sc.traceback_in_log ? " (the traceback in its log.txt)" : "");
    release(&sc);
    return code;
out_early:
    release(&sc);
    return code;
}

int scenario_run(const struct scenario_options *o)
{
    struct auto_rerun rerun = {0};
    int code = scenario_attempt(o, &rerun);
    while (code == 0 && rerun.pending) {
        rerun.pending = false;
        rerun.reruns++;
        code = scenario_attempt(o, &rerun);
    }
    free(rerun.history);
    free(rerun.dir);
    free(rerun.aside);
    return code;
}
