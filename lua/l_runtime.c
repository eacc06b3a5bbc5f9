/* l_runtime.c — hn.param, hn.log, hn.progress, hn.status, hn.record and
 * hn.overload, plus the runtime accessor every binding uses and the run
 * facts the library's tools read (run.json, a tool's exit code). The CSV
 * writing itself is controller/record.c; the parameter store is
 * controller/run.c; the overload account controller/overload.c. */
#include "lua/l_runtime.h"

#include "controller/overload.h"
#include "controller/durable.h"
#include "controller/log.h"
#include "controller/record.h"
#include "lua/runtime.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNTIME_KEY "hiernet.runtime"
#define RECORD_MT "hiernet.record"

struct hn_runtime *hn_runtime(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY);
    struct hn_runtime *rt = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!rt) luaL_error(L, "hiernet runtime is not initialised");
    return rt;
}

/* The controller library's messages join the run's log (log.h). */
static void runtime_log_sink(void *ctx, const char *line)
{
    hn_logf(ctx, "%s", line);
}

void hn_runtime_attach(lua_State *L, struct hn_runtime *rt)
{
    lua_pushlightuserdata(L, rt);
    lua_setfield(L, LUA_REGISTRYINDEX, RUNTIME_KEY);
    ctl_log_set(runtime_log_sink, rt);
}

void hn_logf(struct hn_runtime *rt, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    double t = rt->sched ? sched_now(rt->sched) : 0;
    hn_status_clear(rt);
    if (!rt->quiet) fprintf(stderr, "[%9.3f] %s\n", t, line);
    if (rt->log) {
        fprintf(rt->log, "[%9.3f] %s\n", t, line);
        fflush(rt->log);
        durable_sync_later(fileno(rt->log)); /* on the disk soon, without waiting here */
    }
}

/* ---- hn.param ---- */

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "1", "yes", "on", NULL};
    static const char *const no[] = {"false", "0", "no", "off", NULL};
    for (int i = 0; yes[i]; i++)
        if (strcmp(s, yes[i]) == 0) return (*out = true), true;
    for (int i = 0; no[i]; i++)
        if (strcmp(s, no[i]) == 0) return (*out = false), true;
    return false;
}

/* A --set value that does not read as the default's type is bad input
 * (exit 2, docs/guide.md), named with the default it should look like. */
static int bad_param_value(lua_State *L, const char *name, const char *text, const char *want)
{
    hn_runtime(L)->bad_input = true;
    const char *dflt = luaL_tolstring(L, 2, NULL);
    return luaL_error(L, "--set %s=%s: '%s' takes %s (its default is %s)", name, text, name, want,
                      dflt);
}

/* Converts the --set text to the default's type and pushes it. */
static void push_param_value(lua_State *L, const char *name, const char *text, int dflt_type)
{
    if (dflt_type == LUA_TNUMBER) {
        if (!lua_stringtonumber(L, text)) bad_param_value(L, name, text, "a number");
        /* "1e400" reads as inf: no parameter means that. */
        if (!isfinite(lua_tonumber(L, -1))) bad_param_value(L, name, text, "a finite number");
    } else if (dflt_type == LUA_TBOOLEAN) {
        bool b = false;
        if (!parse_bool(text, &b)) bad_param_value(L, name, text, "true or false");
        lua_pushboolean(L, b);
    } else {
        lua_pushstring(L, text);
    }
}

/* hn.param(name, default) -> the --set value typed like the default, or the default. */
static int l_param(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *name = luaL_checkstring(L, 1);
    int type = lua_type(L, 2);
    if (type != LUA_TNUMBER && type != LUA_TBOOLEAN && type != LUA_TSTRING && type != LUA_TNIL &&
        type != LUA_TNONE)
        return luaL_error(L,
                          "hn.param('%s'): the default must be a number, boolean, string or "
                          "nil, got %s",
                          name, luaL_typename(L, 2));
    enum run_param_kind kind = type == LUA_TNUMBER    ? RUN_PARAM_NUMBER
                               : type == LUA_TBOOLEAN ? RUN_PARAM_BOOL
                                                      : RUN_PARAM_STRING;
    struct run_param *set = run_find_param(rt->run, name);
    if (set && set->from_cli) {
        push_param_value(L, name, set->value, type);
        run_note_param(rt->run, name, set->value, kind);
        return 1;
    }
    if (type == LUA_TNIL || type == LUA_TNONE) {
        run_note_param_unset(rt->run, name); /* read, so no unread --set names it */
        lua_pushnil(L);
        return 1;
    }
    const char *text = luaL_tolstring(L, 2, NULL);
    run_note_param(rt->run, name, text, kind);
    lua_pop(L, 1);
    lua_pushvalue(L, 2);
    return 1;
}

/* ---- hn.log / hn.progress ---- */

/* n is taken before luaL_buffinit, which may push a slot of its own. */
static void join_args(lua_State *L, int first, int n, luaL_Buffer *b)
{
    for (int i = first; i <= n; i++) {
        if (i > first) luaL_addchar(b, ' ');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(b);
    }
}

static int l_log(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    join_args(L, 1, n, &b);
    luaL_pushresult(&b);
    hn_logf(hn_runtime(L), "%s", lua_tostring(L, -1));
    return 0;
}

/* hn.progress{step=10, loss=0.3}: one log line "progress step=10 loss=0.3",
 * keys sorted so lines line up across calls. */
static int l_progress(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getglobal(L, "table");
    lua_newtable(L);
    int keys = lua_gettop(L);
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, keys, ++n);
    }
    lua_getfield(L, keys - 1, "sort");
    lua_pushvalue(L, keys);
    lua_call(L, 1, 0);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "progress");
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, keys, i);
        luaL_addchar(&b, ' ');
        luaL_addstring(&b, luaL_tolstring(L, -1, NULL));
        lua_pop(L, 1);
        luaL_addchar(&b, '=');
        lua_gettable(L, 1);
        luaL_addstring(&b, luaL_tolstring(L, -1, NULL));
        lua_pop(L, 2);
    }
    luaL_pushresult(&b);
    hn_logf(hn_runtime(L), "%s", lua_tostring(L, -1));
    return 0;
}

/* ---- hn.status ---- */

/* Plain status lines go to the log at most this often: a long run's log
 * stays readable while a terminal shows every update. */
#define STATUS_LOG_INTERVAL_S 5.0

void hn_status_clear(struct hn_runtime *rt)
{
    if (!rt->status_shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    rt->status_shown = false;
}

/* hn.status(text): a live line on a terminal (rewritten in place by the next
 * call); a plain log line at most every few seconds otherwise, and in
 * log.txt in both cases. */
static int l_status(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *text = luaL_checkstring(L, 1);
    double t = rt->sched ? sched_now(rt->sched) : 0;
    bool live = !rt->quiet && isatty(STDERR_FILENO);
    bool log_due = rt->status_logged_at < 0 || t - rt->status_logged_at >= STATUS_LOG_INTERVAL_S;
    if (log_due) {
        rt->status_logged_at = t;
        bool quiet = rt->quiet;
        rt->quiet = quiet || live; /* the terminal gets the live line instead */
        hn_logf(rt, "%s", text);
        rt->quiet = quiet;
    }
    if (live) {
        fprintf(stderr, "\r\033[K[%9.3f] %s", t, text);
        fflush(stderr);
        rt->status_shown = true;
    }
    return 0;
}

/* ---- hn.record ---- */

struct l_record {
    struct record *rec;
};

static struct l_record *check_record(lua_State *L, int i)
{
    struct l_record *r = luaL_checkudata(L, i, RECORD_MT);
    if (!r->rec) luaL_error(L, "record is closed");
    return r;
}

static int collect_columns(lua_State *L, int i, const char **cols, int max)
{
    luaL_checktype(L, i, LUA_TTABLE);
    int n = (int)luaL_len(L, i);
    if (n < 1 || n > max) luaL_error(L, "hn.record: give 1 to %d column names, got %d", max, n);
    for (int k = 1; k <= n; k++) {
        lua_rawgeti(L, i, k);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "hn.record: column %d is a %s, not a string", k, luaL_typename(L, -1));
        cols[k - 1] = lua_tostring(L, -1); /* anchored by the columns table */
        lua_pop(L, 1);
    }
    return n;
}

/* hn.record(name, {columns...}) -> writer with :add{col = value, ...}. */
static int l_record(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *name = luaL_checkstring(L, 1);
    const char *cols[256];
    int n = collect_columns(L, 2, cols, 256);
    struct record **grown = realloc(rt->records, (rt->n_records + 1) * sizeof *grown);
    if (!grown) return luaL_error(L, "hn.record: out of memory");
    rt->records = grown;
    struct l_record *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->rec = NULL;
    luaL_setmetatable(L, RECORD_MT);
    char err[512];
    h->rec = record_open(rt->run->dir, name, cols, (size_t)n, err, sizeof err);
    if (!h->rec) return luaL_error(L, "%s", err);
    rt->records[rt->n_records++] = h->rec; /* the runtime closes it at the end of the run */
    return 1;
}

/* Numbers keep 12 significant digits: readable, and finer than any timing. */
static void push_cell_text(lua_State *L, int i)
{
    i = lua_absindex(L, i);
    if (lua_type(L, i) == LUA_TNUMBER && !lua_isinteger(L, i)) {
        char num[64];
        snprintf(num, sizeof num, "%.12g", lua_tonumber(L, i));
        lua_pushstring(L, num);
    } else {
        luaL_tolstring(L, i, NULL);
    }
}

/* rec:add{col = value, ...}: missing columns stay empty; unknown ones are errors. */
static int l_record_add(lua_State *L)
{
    struct l_record *r = check_record(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    size_t n = record_columns(r->rec);
    lua_createtable(L, (int)n, 0); /* 3: cell texts by column, keeps them alive */
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int col = key ? record_column(r->rec, key) : -1;
        if (col < 0) {
            luaL_tolstring(L, -2, NULL);
            return luaL_error(L, "record '%s': unknown column '%s'", record_name(r->rec),
                              lua_tostring(L, -1));
        }
        push_cell_text(L, -1);
        lua_rawseti(L, 3, col + 1);
        lua_pop(L, 1);
    }
    const char **cells = lua_newuserdatauv(L, (n ? n : 1) * sizeof *cells, 0);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, 3, (lua_Integer)i + 1);
        cells[i] = lua_tostring(L, -1); /* NULL for nil; the text lives in table 3 */
        lua_pop(L, 1);
    }
    char err[512];
    if (record_add(r->rec, cells, err, sizeof err) < 0) return luaL_error(L, "%s", err);
    return 0;
}

/* ---- what the library's tools (hn.plot, hn.report) need of the run ---- */

/* core._write_run_json(): rewrites run.json now, so that a report made
 * during the run shows the parameters and topology as they are. */
static int l_write_run_json(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    char err[512];
    if (run_write_json_nowait(rt->run, err, sizeof err) < 0) return luaL_error(L, "%s", err);
    return 0;
}

/* core._set_exit_code(code): the exit code of a tool (hiernet plot). */
static int l_set_exit_code(lua_State *L)
{
    hn_runtime(L)->tool_exit = (int)luaL_checkinteger(L, 1);
    return 0;
}

/* core._bad_input(): the error about to be raised is bad input (a file
 * the library reads, an option out of range): the run exits 2. */
static int l_bad_input(lua_State *L)
{
    hn_runtime(L)->bad_input = true;
    return 0;
}

/* ---- hn.overload ---- */

static void set_number(lua_State *L, const char *key, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
}

/* The data plane's part: {samples=, active_s=, link_utilization=,
 * link_utilization_rounds=, host_busy=, own_cores=, linkd_busy=,
 * linkd_wait=, queue_peak=, limited=, starved=, suggested_dilation=}. */
static void push_dataplane(lua_State *L, const struct overload_dataplane *dp)
{
    lua_createtable(L, 0, 12);
    lua_pushinteger(L, (lua_Integer)dp->samples);
    lua_setfield(L, -2, "samples");
    set_number(L, "active_s", dp->active_s);
    if (dp->link_utilization >= 0) set_number(L, "link_utilization", dp->link_utilization);
    if (dp->link_utilization_rounds >= 0)
        set_number(L, "link_utilization_rounds", dp->link_utilization_rounds);
    if (dp->host_busy >= 0) set_number(L, "host_busy", dp->host_busy);
    set_number(L, "own_cores", dp->own_cores);
    set_number(L, "linkd_busy", dp->linkd_busy);
    if (dp->linkd_wait >= 0) set_number(L, "linkd_wait", dp->linkd_wait);
    if (dp->queue_peak >= 0) set_number(L, "queue_peak", dp->queue_peak);
    lua_pushboolean(L, dp->limited);
    lua_setfield(L, -2, "limited");
    lua_pushboolean(L, dp->starved);
    lua_setfield(L, -2, "starved");
    set_number(L, "suggested_dilation", dp->suggested_dilation);
}

/* linkd's stalls: {threshold_wall_s=, count=, longest_wall_s=,
 * total_wall_s=, stalls = {{at_s=, wall_s=, machine=}, ...}} (at_s absent
 * when the run's clock was not known, machine for another machine's). */
static void push_linkd_stalls(lua_State *L, const struct linkd_stalls *s)
{
    lua_createtable(L, 0, 5);
    if (s->threshold_wall_s > 0) set_number(L, "threshold_wall_s", s->threshold_wall_s);
    lua_pushinteger(L, (lua_Integer)s->count);
    lua_setfield(L, -2, "count");
    set_number(L, "longest_wall_s", s->longest_wall_s);
    set_number(L, "total_wall_s", s->total_wall_s);
    lua_createtable(L, (int)s->n_kept, 0);
    for (size_t i = 0; i < s->n_kept; i++) {
        lua_createtable(L, 0, 2);
        if (isfinite(s->kept[i].at_s)) set_number(L, "at_s", s->kept[i].at_s);
        set_number(L, "wall_s", s->kept[i].wall_s);
        if (s->kept[i].machine[0]) {
            lua_pushstring(L, s->kept[i].machine);
            lua_setfield(L, -2, "machine");
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "stalls");
}

/* hn.overload() -> {host_cpu_saturation=, overrun_share=, worst_node=, ...,
 * dataplane = {...}}: the run so far (controller/overload.h). */
static int l_overload(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    struct overload_report r;
    if (!rt->overload) return luaL_error(L, "hn.overload: no overload account in this run");
    overload_report(rt->overload, rt->run->dilation, &r);
    lua_createtable(L, 0, 16);
    if (r.host_cpu_saturation >= 0) set_number(L, "host_cpu_saturation", r.host_cpu_saturation);
    if (r.host_cpu_peak >= 0) set_number(L, "host_cpu_peak", r.host_cpu_peak);
    lua_pushinteger(L, r.host_cores);
    lua_setfield(L, -2, "host_cores");
    lua_pushinteger(L, (lua_Integer)r.commands);
    lua_setfield(L, -2, "commands");
    lua_pushinteger(L, (lua_Integer)r.overruns);
    lua_setfield(L, -2, "overruns");
    set_number(L, "overrun_share", r.overrun_share);
    lua_pushinteger(L, (lua_Integer)r.starved);
    lua_setfield(L, -2, "starved");
    set_number(L, "starved_share", r.starved_share);
    set_number(L, "cpu_demand", r.cpu_demand);
    if (r.compute_share >= 0) set_number(L, "compute_share", r.compute_share);
    if (r.worst_node[0]) {
        lua_pushstring(L, r.worst_node);
        lua_setfield(L, -2, "worst_node");
    }
    set_number(L, "worst_node_overrun_share", r.worst_node_overrun_share);
    set_number(L, "stretch_p95", r.stretch_p95);
    set_number(L, "dilation", r.dilation);
    set_number(L, "suggested_dilation", r.suggested_dilation);
    lua_pushboolean(L, r.limited);
    lua_setfield(L, -2, "limited");
    lua_pushboolean(L, r.latency);
    lua_setfield(L, -2, "latency");
    lua_pushboolean(L, r.waited);
    lua_setfield(L, -2, "waited");
    push_dataplane(L, &r.dataplane);
    lua_setfield(L, -2, "dataplane");
    push_linkd_stalls(L, &r.linkd_stalls);
    lua_setfield(L, -2, "linkd_stalls");
    return 1;
}

static const luaL_Reg record_methods[] = {
    {"add", l_record_add},
    {NULL, NULL},
};

static const luaL_Reg runtime_functions[] = {
    {"param", l_param},
    {"log", l_log},
    {"progress", l_progress},
    {"record", l_record},
    {"status", l_status},
    {"overload", l_overload},
    {"_write_run_json", l_write_run_json},
    {"_set_exit_code", l_set_exit_code},
    {"_bad_input", l_bad_input},
    {NULL, NULL},
};

void l_runtime_register(lua_State *L)
{
    luaL_newmetatable(L, RECORD_MT);
    luaL_newlib(L, record_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, runtime_functions, 0);
}
