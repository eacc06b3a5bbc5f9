/* l_results.c — results files that are not CSVs: hn.write_json(name, value)
 * writes DIR/name.json from a Lua value, replacing any earlier file of that
 * name atomically (write, fsync, rename), so a reader never sees half a
 * summary; hn.results_dir() names the run's results directory; hn.null is
 * the JSON null a table can hold. The text itself is written by
 * common/json.c; this unit walks the Lua value. */
#include "lua/l_results.h"

#include "common/json.h"
#include "controller/record.h"
#include "lua/runtime.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Deeper nesting than any summary needs; it also stops a cycle. */
#define JSON_MAX_DEPTH 32

struct json_out {
    lua_State *L;
    FILE *f;
    char path[256]; /* where the value being written sits, for errors: "summary.x.y" */
};

static void json_value(struct json_out *o, int idx, int depth);

/* The length of the array part when the table is a proper sequence (keys
 * exactly 1..n), else -1. An empty table is an object. */
static lua_Integer json_array_length(lua_State *L, int idx)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx), count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
            lua_pop(L, 1);
            return -1;
        }
        count++;
    }
    return n > 0 && count == n ? n : -1;
}

/* Appends ".key" (or "[i]") to o->path; returns the old length to restore. */
static size_t json_path_push(struct json_out *o, const char *fmt, const void *key, lua_Integer i)
{
    size_t len = strlen(o->path);
    if (key)
        snprintf(o->path + len, sizeof o->path - len, fmt, (const char *)key);
    else
        snprintf(o->path + len, sizeof o->path - len, fmt, (long long)i);
    return len;
}

static void json_array(struct json_out *o, int idx, lua_Integer n, int depth)
{
    fputc('[', o->f);
    for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1) fputc(',', o->f);
        size_t len = json_path_push(o, "[%lld]", NULL, i);
        lua_rawgeti(o->L, idx, i);
        json_value(o, lua_gettop(o->L), depth + 1);
        lua_pop(o->L, 1);
        o->path[len] = '\0';
    }
    fputc(']', o->f);
}

/* Objects are written with sorted keys, so two summaries diff cleanly. */
static void json_object(struct json_out *o, int idx, int depth)
{
    lua_State *L = o->L;
    lua_newtable(L);
    int keys = lua_gettop(L), n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "hn.write_json: %s: keys must be strings, got a %s", o->path,
                       luaL_typename(L, -1));
        lua_pushvalue(L, -1);
        lua_rawseti(L, keys, ++n);
    }
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, keys);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    fputc('{', o->f);
    for (int i = 1; i <= n; i++) {
        if (i > 1) fputc(',', o->f);
        lua_rawgeti(L, keys, i);
        const char *key = lua_tostring(L, -1);
        json_write_string(o->f, key);
        fputc(':', o->f);
        size_t len = json_path_push(o, ".%s", key, 0);
        lua_rawget(L, idx);
        json_value(o, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
        o->path[len] = '\0';
    }
    fputc('}', o->f);
    lua_pop(L, 1);
}

static void json_value(struct json_out *o, int idx, int depth)
{
    lua_State *L = o->L;
    if (depth > JSON_MAX_DEPTH)
        luaL_error(L, "hn.write_json: %s: nested deeper than %d levels (a cycle?)", o->path,
                   JSON_MAX_DEPTH);
    luaL_checkstack(L, 8, "hn.write_json");
    int type = lua_type(L, idx);
    if (type == LUA_TNIL || (type == LUA_TLIGHTUSERDATA && !lua_touserdata(L, idx))) {
        fputs("null", o->f);
    } else if (type == LUA_TBOOLEAN) {
        fputs(lua_toboolean(L, idx) ? "true" : "false", o->f);
    } else if (type == LUA_TNUMBER && lua_isinteger(L, idx)) {
        fprintf(o->f, "%lld", (long long)lua_tointeger(L, idx));
    } else if (type == LUA_TNUMBER) {
        json_write_number(o->f, lua_tonumber(L, idx));
    } else if (type == LUA_TSTRING) {
        json_write_string(o->f, lua_tostring(L, idx));
    } else if (type == LUA_TTABLE) {
        lua_Integer n = json_array_length(L, idx);
        if (n > 0)
            json_array(o, idx, n, depth);
        else
            json_object(o, idx, depth);
    } else {
        luaL_error(L, "hn.write_json: %s: a %s has no JSON form", o->path, luaL_typename(L, idx));
    }
}

/* Runs json_value under lua_pcall: arg 1 the json_out, arg 2 the value. */
static int json_encode_protected(lua_State *L)
{
    struct json_out *o = lua_touserdata(L, 1);
    json_value(o, 2, 0);
    return 0;
}

/* Writes the value at stack index 2 to path.tmp, then renames it over path.
 * An error while encoding (a function in the table, a cycle) removes the
 * temporary file before it is raised, so nothing is left behind. */
static int write_atomically(lua_State *L, const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct json_out o = {L, fopen(tmp, "w"), "value"};
    if (!o.f) return luaL_error(L, "hn.write_json: cannot create '%s': %s", tmp, strerror(errno));
    lua_pushcfunction(L, json_encode_protected);
    lua_pushlightuserdata(L, &o);
    lua_pushvalue(L, 2);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        fclose(o.f);
        unlink(tmp);
        return lua_error(L);
    }
    fputc('\n', o.f);
    bool ok = fflush(o.f) == 0 && fsync(fileno(o.f)) == 0;
    ok = fclose(o.f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return luaL_error(L, "hn.write_json: cannot write '%s': %s", path, strerror(e));
    }
    return 0;
}

/* hn.write_json(name, value) -> path of results/<run>/name.json. */
static int l_write_json(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *name = luaL_checkstring(L, 1);
    luaL_checkany(L, 2);
    lua_settop(L, 2);
    if (!record_name_valid(name))
        return luaL_error(L, "hn.write_json: bad name '%s' (use [A-Za-z0-9_.-]+)", name);
    if (!rt->run->dir) return 0; /* a run that keeps no results (hiernet draw) */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", rt->run->dir, name);
    write_atomically(L, path);
    lua_pushstring(L, path);
    return 1;
}

/* hn.results_dir() -> the run's results directory (nil when it keeps none). */
static int l_results_dir(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    if (rt->run->dir)
        lua_pushstring(L, rt->run->dir);
    else
        lua_pushnil(L);
    return 1;
}

static const luaL_Reg results_functions[] = {
    {"write_json", l_write_json},
    {"results_dir", l_results_dir},
    {NULL, NULL},
};

void l_results_register(lua_State *L)
{
    luaL_setfuncs(L, results_functions, 0);
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
}
