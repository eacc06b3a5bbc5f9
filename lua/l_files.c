/* l_files.c — the file system work of the Lua library's tools that plain
 * Lua cannot do: core._stat, core._list_dir, core._mkdir_p, and scratch
 * directories (core._mkdtemp / core._rmtemp) for the temporary files of a
 * plot, which the run's end removes should the tool not get to it (an
 * interrupt). Owns the list of scratch directories (runtime.h). */
#include "lua/l_host.h"

#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* core._stat(path) -> "file"|"dir"|"other", size; or nil, message */
static int l_stat(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;
    if (stat(path, &st) < 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : "other");
    lua_pushinteger(L, (lua_Integer)st.st_size);
    return 2;
}

/* core._list_dir(path) -> array of the names in path (no . and .., in no
 * particular order); or nil, message */
static int l_list_dir(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    DIR *dir = opendir(path);
    if (!dir) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, strerror(errno));
        return 2;
    }
    lua_newtable(L);
    lua_Integer n = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            lua_pushstring(L, e->d_name);
            lua_rawseti(L, -2, ++n);
        }
    closedir(dir);
    return 1;
}

static int make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, 0777);
        *p = '/';
        if (rc < 0 && errno != EEXIST) return -1;
    }
    if (mkdir(path, 0777) < 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(path, &st) < 0) return -1;
    if (!S_ISDIR(st.st_mode)) return errno = ENOTDIR, -1;
    return 0;
}

/* core._mkdir_p(path) -> true; or nil, message (like mkdir -p) */
static int l_mkdir_p(lua_State *L)
{
    size_t len;
    const char *path = luaL_checklstring(L, 1, &len);
    char *copy = lua_newuserdatauv(L, len + 1, 0);
    memcpy(copy, path, len + 1);
    if (len == 0 || make_dirs(copy) < 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "cannot create directory %s: %s", path, strerror(len ? errno : ENOENT));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* core._mkdtemp(parent) -> parent/.hiernet-tmp-XXXXXX, created and listed
 * for removal at the run's end. */
static int l_mkdtemp(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *parent = luaL_checkstring(L, 1);
    char **grown = realloc(rt->temp_dirs, (rt->n_temp_dirs + 1) * sizeof *grown);
    if (!grown) return luaL_error(L, "out of memory");
    rt->temp_dirs = grown;
    char *path = malloc(strlen(parent) + 32);
    if (!path) return luaL_error(L, "out of memory");
    sprintf(path, "%s/.hiernet-tmp-XXXXXX", parent);
    if (!mkdtemp(path)) {
        int e = errno;
        free(path);
        return luaL_error(L, "cannot create a scratch directory in %s: %s", parent, strerror(e));
    }
    rt->temp_dirs[rt->n_temp_dirs++] = path;
    lua_pushstring(L, path);
    return 1;
}

/* Removes the files directly inside dir, then dir. Scratch directories
 * hold only files the tools wrote there. */
static void remove_scratch(const char *path)
{
    DIR *dir = opendir(path);
    if (dir) {
        int fd = dirfd(dir);
        struct dirent *e;
        while ((e = readdir(dir)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlinkat(fd, e->d_name, 0);
        closedir(dir);
    }
    rmdir(path);
}

/* core._rmtemp(path): removes a directory _mkdtemp made, with its files. */
static int l_rmtemp(lua_State *L)
{
    struct hn_runtime *rt = hn_runtime(L);
    const char *path = luaL_checkstring(L, 1);
    for (size_t i = 0; i < rt->n_temp_dirs; i++) {
        if (strcmp(rt->temp_dirs[i], path) != 0) continue;
        remove_scratch(path);
        free(rt->temp_dirs[i]);
        rt->temp_dirs[i] = rt->temp_dirs[--rt->n_temp_dirs];
        return 0;
    }
    return luaL_error(L, "_rmtemp: '%s' is not a scratch directory of this run", path);
}

void l_files_release(struct hn_runtime *rt)
{
    for (size_t i = 0; i < rt->n_temp_dirs; i++) {
        remove_scratch(rt->temp_dirs[i]);
        free(rt->temp_dirs[i]);
    }
    free(rt->temp_dirs);
    rt->temp_dirs = NULL;
    rt->n_temp_dirs = 0;
}

const char *l_files_find(lua_State *L, const char *path)
{
    const char *scenario = hn_runtime(L)->scenario_path;
    const char *slash = scenario ? strrchr(scenario, '/') : NULL;
    if (path[0] != '/' && slash) {
        lua_pushlstring(L, scenario, (size_t)(slash - scenario + 1));
        lua_pushstring(L, path);
        lua_concat(L, 2);
        const char *near = lua_tostring(L, -1);
        if (access(near, R_OK) == 0) return near;
        lua_pop(L, 1);
    }
    return lua_pushstring(L, path);
}

/* core._find_file(path) -> the path l_files_find picks (churn.lua's files) */
static int l_find_file(lua_State *L)
{
    l_files_find(L, luaL_checkstring(L, 1));
    return 1;
}

void l_files_register(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"_stat", l_stat},
        {"_list_dir", l_list_dir},
        {"_mkdir_p", l_mkdir_p},
        {"_mkdtemp", l_mkdtemp},
        {"_rmtemp", l_rmtemp},
        {"_find_file", l_find_file},
        {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
}
