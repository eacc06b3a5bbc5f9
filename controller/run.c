/* run.c — a run's options, parameters, results directory and run.json (see run.h). */
#include "controller/run.h"

#include "controller/durable.h"
#include "common/json.h"
#include "common/json_read.h"
#include "hiernet_version.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ev.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void run_init(struct run *r)
{
    memset(r, 0, sizeof *r);
    r->status = "running";
    r->dilation = 1.0;
    r->dilation_auto_max = HN_DILATION_MAX;
    r->start_wall = run_wall_clock();
    r->topology_json = strdup("[]");
}

void run_destroy(struct run *r)
{
    for (size_t i = 0; i < r->n_params; i++) {
        free(r->params[i].name);
        free(r->params[i].value);
    }
    free(r->params);
    free(r->scenario);
    free(r->dir);
    free(r->backend_override);
    free(r->topology_json);
    free(r->error);
    free(r->overload_json);
    free(r->placement_json);
    free(r->machines_json);
    free(r->underlay_json);
    free(r->hosts_override);
    free(r->dilation_reason);
    free(r->dilation_dataplane);
    free(r->dilation_history);
    memset(r, 0, sizeof *r);
}

enum run_dilation_outcome run_name_dilation(struct run *r, double d, bool started,
                                            const char *network, char *msg, size_t msglen)
{
    if (r->dilation_max_named && !r->dilation_from_cli && !r->dilation_auto) {
        snprintf(msg, msglen,
                 "network '%s': dilation %g is fixed, but an earlier network's dilation_max %g "
                 "bounds dilation \"auto\"",
                 network, d, r->dilation_auto_max);
        return RUN_DILATION_CONFLICT;
    }
    if (d == r->dilation) {
        if (!r->dilation_from_cli) r->dilation_named = true;
        return RUN_DILATION_SET;
    }
    if (r->dilation_from_cli) {
        if (r->dilation_auto)
            snprintf(msg, msglen,
                     "network '%s': dilation \"auto\" (%g) from --dilation replaces the "
                     "scenario's %g",
                     network, r->dilation, d);
        else
            snprintf(msg, msglen,
                     "network '%s': dilation %g from --dilation replaces the scenario's %g",
                     network, r->dilation, d);
        return RUN_DILATION_CLI_WINS;
    }
    if (r->dilation_named || started) {
        snprintf(msg, msglen,
                 "network '%s': dilation %g differs from the run's %g (every network of a run "
                 "shares one clock, fixed once a network names it or starts)",
                 network, d, r->dilation);
        return RUN_DILATION_CONFLICT;
    }
    r->dilation = d;
    r->dilation_named = true;
    return RUN_DILATION_SET;
}

enum run_dilation_outcome run_name_dilation_auto(struct run *r, bool started, const char *network,
                                                 char *msg, size_t msglen)
{
    if (r->dilation_auto) return RUN_DILATION_SET;
    if (r->dilation_from_cli) {
        snprintf(msg, msglen,
                 "network '%s': dilation %g from --dilation replaces the scenario's \"auto\"",
                 network, r->dilation);
        return RUN_DILATION_CLI_WINS;
    }
    if (r->dilation_named || started) {
        snprintf(msg, msglen,
                 "network '%s': dilation \"auto\" differs from the run's %g (every network of a "
                 "run shares one clock, fixed once a network names it or starts)",
                 network, r->dilation);
        return RUN_DILATION_CONFLICT;
    }
    r->dilation_auto = true;
    r->dilation_named = true;
    return RUN_DILATION_SET;
}

enum run_dilation_outcome run_name_dilation_max(struct run *r, double m, bool started,
                                                const char *network, char *msg, size_t msglen)
{
    if (!r->dilation_auto && r->dilation_from_cli) {
        snprintf(msg, msglen,
                 "network '%s': dilation_max %g has no effect: --dilation %g fixes the dilation",
                 network, m, r->dilation);
        return RUN_DILATION_CLI_WINS;
    }
    if (!r->dilation_auto && r->dilation_named) {
        snprintf(msg, msglen,
                 "network '%s': dilation_max bounds dilation \"auto\", but the run's dilation "
                 "is fixed at %g",
                 network, r->dilation);
        return RUN_DILATION_CONFLICT;
    }
    if (m == r->dilation_auto_max && (r->dilation_max_named || r->dilation_max_from_cli))
        return RUN_DILATION_SET;
    if (r->dilation_max_from_cli) {
        snprintf(msg, msglen,
                 "network '%s': dilation_max %g from --dilation-max replaces the scenario's %g",
                 network, r->dilation_auto_max, m);
        return RUN_DILATION_CLI_WINS;
    }
    if (r->dilation_max_named || started) {
        snprintf(msg, msglen,
                 "network '%s': dilation_max %g differs from the run's %g (a run has one bound on "
                 "\"auto\", fixed once a network names it or starts)",
                 network, m, r->dilation_auto_max);
        return RUN_DILATION_CONFLICT;
    }
    r->dilation_auto_max = m;
    r->dilation_max_named = true;
    return RUN_DILATION_SET;
}

void run_set_dilation_reason(struct run *r, const char *reason)
{
    free(r->dilation_reason);
    r->dilation_reason = reason ? strdup(reason) : NULL;
}

void run_set_dilation_dataplane(struct run *r, const char *json)
{
    free(r->dilation_dataplane);
    r->dilation_dataplane = json ? strdup(json) : NULL;
}

void run_set_dilation_history(struct run *r, const char *items)
{
    free(r->dilation_history);
    r->dilation_history = items ? strdup(items) : NULL;
}

double run_wall_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct run_param *run_find_param(struct run *r, const char *name)
{
    for (size_t i = 0; i < r->n_params; i++)
        if (strcmp(r->params[i].name, name) == 0) return &r->params[i];
    return NULL;
}

static struct run_param *param_append(struct run *r, const char *name, const char *value)
{
    struct run_param *grown = realloc(r->params, (r->n_params + 1) * sizeof *grown);
    if (!grown) return NULL;
    r->params = grown;
    struct run_param *p = &r->params[r->n_params];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    p->value = strdup(value);
    if (!p->name || !p->value) {
        free(p->name);
        free(p->value);
        return NULL;
    }
    r->n_params++;
    return p;
}

int run_set_param(struct run *r, const char *assignment, char *err, size_t errlen)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment) {
        snprintf(err, errlen, "--set '%s': expected name=value", assignment);
        return -1;
    }
    char name[128];
    size_t len = (size_t)(eq - assignment);
    if (len >= sizeof name) {
        snprintf(err, errlen, "--set '%s': name too long", assignment);
        return -1;
    }
    memcpy(name, assignment, len);
    name[len] = '\0';
    struct run_param *p = run_find_param(r, name);
    if (p) {
        char *v = strdup(eq + 1);
        if (!v) return -1;
        free(p->value);
        p->value = v;
        return 0;
    }
    if (!(p = param_append(r, name, eq + 1))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->from_cli = true;
    return 0;
}

struct run_param *run_note_param(struct run *r, const char *name, const char *value,
                                 enum run_param_kind kind)
{
    struct run_param *p = run_find_param(r, name);
    if (!p && !(p = param_append(r, name, value))) return NULL;
    if (p->no_value) { /* read before with a nil default: this read has a value */
        char *v = strdup(value);
        if (!v) return NULL;
        free(p->value);
        p->value = v;
        p->no_value = false;
    }
    p->kind = kind;
    p->read = true;
    return p;
}

struct run_param *run_note_param_unset(struct run *r, const char *name)
{
    struct run_param *p = run_find_param(r, name);
    if (p) return p; /* read before with a default, or set: that stands */
    if (!(p = param_append(r, name, ""))) return NULL;
    p->read = true;
    p->no_value = true;
    return p;
}

/* Appends to msg at *used, truncating (the line is for a person). */
static void msg_append(char *msg, size_t msglen, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void msg_append(char *msg, size_t msglen, size_t *used, const char *fmt, ...)
{
    if (*used >= msglen) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + *used, msglen - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used += (size_t)n;
}

/* "name=value, name=value" of the unread --set assignments; returns how many. */
static size_t list_unread(const struct run *r, char *msg, size_t msglen, size_t *used,
                          bool quoted_names)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_params; i++) {
        const struct run_param *p = &r->params[i];
        if (!p->from_cli || p->read) continue;
        if (quoted_names)
            msg_append(msg, msglen, used, "%s'%s'", n ? ", " : "", p->name);
        else
            msg_append(msg, msglen, used, "%s%s=%s", n ? ", " : "", p->name, p->value);
        n++;
    }
    return n;
}

size_t run_unread_params(const struct run *r, char *msg, size_t msglen)
{
    size_t used = 0;
    msg[0] = '\0';
    msg_append(msg, msglen, &used, "--set ");
    size_t n = list_unread(r, msg, msglen, &used, false);
    if (n == 0) {
        msg[0] = '\0';
        return 0;
    }
    msg_append(msg, msglen, &used, ": the scenario never read ");
    list_unread(r, msg, msglen, &used, true);
    size_t read = 0;
    for (size_t i = 0; i < r->n_params; i++) {
        if (!r->params[i].read) continue;
        msg_append(msg, msglen, &used, "%s%s", read ? ", " : " (it read: ", r->params[i].name);
        read++;
    }
    msg_append(msg, msglen, &used, read ? ")" : " (it reads no parameter through hn.param)");
    return n;
}

/* ---- results directory ---- */

static int mkdir_p(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* The scenario file's name without its extension, made a safe directory
 * name: [A-Za-z0-9_.-], not starting with '.' (whatever bytes the file's
 * name holds, the results directory is one plain entry of results/). */
static void scenario_stem(const char *scenario, char *out, size_t cap)
{
    const char *base = strrchr(scenario, '/');
    base = base ? base + 1 : scenario;
    snprintf(out, cap, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = '\0';
    for (char *p = out; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-", *p)) *p = '-';
    if (out[0] == '.' || out[0] == '\0') out[0] = out[0] ? '_' : '\0';
    if (!out[0]) snprintf(out, cap, "run");
}

/* results/<stem>-<timestamp>, with -2, -3... when two runs start in one second. */
static int make_default_dir(struct run *r, char *path, size_t cap)
{
    char stem[256], stamp[32];
    scenario_stem(r->scenario ? r->scenario : "run", stem, sizeof stem);
    time_t now = (time_t)r->start_wall;
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    if (mkdir("results", 0755) < 0 && errno != EEXIST) return -1;
    for (int n = 1; n < 1000; n++) {
        if (n == 1)
            snprintf(path, cap, "results/%s-%s", stem, stamp);
        else
            snprintf(path, cap, "results/%s-%s-%d", stem, stamp, n);
        if (mkdir(path, 0755) == 0) return 0;
        if (errno != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}

int run_make_dir(struct run *r, const char *out_dir, char *err, size_t errlen)
{
    char path[4096];
    int rc;
    if (out_dir) {
        snprintf(path, sizeof path, "%s", out_dir);
        char previous[4200];
        snprintf(previous, sizeof previous, "%s/run.json", path);
        if (access(previous, F_OK) == 0) {
            /* Never mix two runs' results or overwrite a finished one. */
            snprintf(err, errlen,
                     "results directory '%s' already holds a run (run.json); "
                     "choose another --out or remove it",
                     path);
            return -1;
        }
        rc = mkdir_p(path);
    } else {
        rc = make_default_dir(r, path, sizeof path);
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot create results directory '%s': %s", path, strerror(errno));
        return -1;
    }
    free(r->dir);
    r->dir = strdup(path);
    return r->dir ? 0 : -1;
}

/* ---- run.json ---- */

static void write_time(FILE *f, double t)
{
    if (t <= 0) {
        fputs("null", f);
        return;
    }
    time_t s = (time_t)t;
    struct tm tm;
    char buf[64];
    gmtime_r(&s, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f, "\"%s.%03dZ\"", buf, (int)((t - (double)s) * 1000));
}

static void write_param_value(FILE *f, const struct run_param *p)
{
    char *end;
    if (p->kind == RUN_PARAM_NUMBER) {
        double v = strtod(p->value, &end);
        if (*p->value && !*end) {
            json_write_number(f, v);
            return;
        }
    } else if (p->kind == RUN_PARAM_BOOL) {
        bool t = !strcmp(p->value, "true") || !strcmp(p->value, "1") || !strcmp(p->value, "yes");
        fputs(t ? "true" : "false", f);
        return;
    }
    json_write_string(f, p->value);
}

static void write_params(FILE *f, const struct run *r)
{
    fputs("  \"params\": {", f);
    bool first = true;
    for (size_t i = 0; i < r->n_params; i++) {
        if (r->params[i].no_value) continue;
        fputs(first ? "" : ", ", f);
        first = false;
        json_write_string(f, r->params[i].name);
        fputs(": ", f);
        write_param_value(f, &r->params[i]);
    }
    fputs("},\n", f);
    /* The command line's --set assignments as given (strings): what a
     * comparison of runs labels them by. */
    fputs("  \"set\": {", f);
    first = true;
    for (size_t i = 0; i < r->n_params; i++) {
        if (!r->params[i].from_cli) continue;
        fputs(first ? "" : ", ", f);
        first = false;
        json_write_string(f, r->params[i].name);
        fputs(": ", f);
        json_write_string(f, r->params[i].value);
    }
    fputs("},\n", f);
}

static void write_versions(FILE *f, const char *lua_release)
{
    fprintf(f,
            "  \"versions\": {\"hiernet\": \"%s\", \"git\": \"%s\", \"lua\": \"%s\", "
            "\"msgpack\": \"%s\", \"libev\": \"%d.%d\"},\n",
            HIERNET_VERSION, HIERNET_GIT, lua_release ? lua_release : "", msgpack_version(),
            ev_version_major(), ev_version_minor());
}

/* "dilation": {"mode": "fixed"|"auto", "value": D, "reason": ..., "probe_s": ...,
 * "max": M, "dataplane": {...}, "history": [...]}: max only where one was named
 * (dilation_max, --dilation-max) for an auto run; an auto run's reason is null until its
 * probe decided, its dataplane (the latest data-plane window) absent until that
 * window closed, its history (the runs it ended to start again) absent without one. */
static void write_dilation(FILE *f, const struct run *r)
{
    fprintf(f, ",\n  \"dilation\": {\"mode\": \"%s\", \"value\": %g, \"reason\": ",
            r->dilation_auto ? "auto" : "fixed", r->dilation);
    json_write_string_or_null(f, r->dilation_reason);
    fputs(", \"probe_s\": ", f);
    json_write_number(f, r->probe_s);
    if (r->dilation_auto && (r->dilation_max_named || r->dilation_max_from_cli))
        fprintf(f, ", \"max\": %g", r->dilation_auto_max);
    if (r->dilation_dataplane) fprintf(f, ", \"dataplane\": %s", r->dilation_dataplane);
    if (r->dilation_history) fprintf(f, ", \"history\": [%s]", r->dilation_history);
    fputs("}", f);
}

static void write_json_body(FILE *f, const struct run *r)
{
    fputs("{\n  \"scenario\": ", f);
    json_write_string(f, r->scenario ? r->scenario : "");
    fputs(",\n  \"status\": ", f);
    json_write_string(f, r->status);
    fputs(",\n  \"start_time\": ", f);
    write_time(f, r->start_wall);
    fputs(",\n  \"end_time\": ", f);
    write_time(f, r->end_wall);
    fputs(",\n", f);
    if (r->end_wall > 0) fprintf(f, "  \"wall_s\": %.3f,\n", r->end_wall - r->start_wall);
    write_params(f, r);
    fputs("  \"seed\": ", f);
    if (r->has_seed)
        fprintf(f, "%lld", r->seed);
    else
        fputs("null", f);
    fputs(",\n  \"backend\": ", f);
    if (r->backend_used[0])
        json_write_string(f, r->backend_used);
    else if (r->backend_override)
        json_write_string(f, r->backend_override);
    else
        fputs("null", f);
    write_dilation(f, r);
    if (r->end_wall > 0)
        fprintf(f, ",\n  \"emulated_s\": %.3f", (r->end_wall - r->start_wall) / r->dilation);
    fprintf(f, ",\n  \"topology\": %s,\n", r->topology_json ? r->topology_json : "[]");
    if (r->overload_json) fprintf(f, "  \"overload\": %s,\n", r->overload_json);
    if (r->placement_json) fprintf(f, "  \"placement\": [%s],\n", r->placement_json);
    if (r->machines_json) fprintf(f, "  \"machines\": [%s],\n", r->machines_json);
    if (r->underlay_json) fprintf(f, "  \"underlay\": [%s],\n", r->underlay_json);
    write_versions(f, r->lua_release);
    fputs("  \"error\": ", f);
    if (r->error)
        json_write_string(f, r->error);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"pid\": %d\n}\n", (int)getpid());
}

static int fill_run_json(FILE *f, void *ctx)
{
    write_json_body(f, ctx);
    return 0;
}

int run_write_json(const struct run *r, char *err, size_t errlen)
{
    if (!r->dir) return 0;
    return durable_replace(r->dir, "run.json", fill_run_json, (void *)r, err, errlen);
}

int run_write_json_nowait(const struct run *r, char *err, size_t errlen)
{
    if (!r->dir) return 0;
    return durable_replace_sync_later(r->dir, "run.json", fill_run_json, (void *)r, err, errlen);
}

void run_set_topology(struct run *r, const char *json)
{
    char *copy = strdup(json);
    if (!copy) return;
    free(r->topology_json);
    r->topology_json = copy;
}

void run_set_overload(struct run *r, const char *json)
{
    char *copy = strdup(json);
    if (!copy) return;
    free(r->overload_json);
    r->overload_json = copy;
}

/* *list, a comma-separated JSON list, with json appended. */
static void json_list_append(char **list, const char *json)
{
    char *joined = NULL;
    if (*list ? asprintf(&joined, "%s, %s", *list, json) < 0 : !(joined = strdup(json))) return;
    free(*list);
    *list = joined;
}

void run_add_placement(struct run *r, const char *json)
{
    json_list_append(&r->placement_json, json);
}

void run_add_machines(struct run *r, const char *json)
{
    json_list_append(&r->machines_json, json);
}

void run_add_underlay(struct run *r, const char *json)
{
    json_list_append(&r->underlay_json, json);
}

void run_set_error(struct run *r, const char *msg)
{
    if (r->error) return;
    size_t n = strcspn(msg, "\n");
    r->error = strndup(msg, n);
}

/* ---- a run whose controller died ---- */

#define RUN_JSON_MAX (64u << 20) /* a 1000-node topology is well under 1 MB */

/* Reads path whole (at most max bytes); NULL with errno. */
static char *read_whole(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0) return NULL;
    char *text = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max)
        text = malloc((size_t)st.st_size + 1);
    else
        errno = EFBIG;
    size_t got = 0;
    while (text && got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (text) text[got] = '\0';
    *len = got;
    return text;
}

/* The newest modification time of the directory's files: when the run
 * last wrote a result, the latest moment it is known to have been alive. */
static double newest_write(const char *dir)
{
    DIR *d = opendir(dir);
    double newest = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        double t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
        if (t > newest) newest = t;
    }
    if (d) closedir(d);
    return newest;
}

/* "2024-05-01T12:00:00.123Z" (write_time's format) -> seconds, or 0. */
static double parse_time(const struct json_value *v)
{
    struct tm tm = {0};
    int ms = 0;
    if (!v || v->type != JSON_STRING ||
        sscanf(v->string, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + ms / 1000.0;
}

struct crashed_json {
    const struct json_value *root;
    double start, end;
    const char *error;
};

/* run.json as it was, but for status, end time, wall time and error. */
static int fill_crashed(FILE *f, void *ctx)
{
    const struct crashed_json *c = ctx;
    static const char *const replaced[] = {"status", "end_time", "wall_s", "error"};
    bool seen[4] = {false};
    fputs("{\n", f);
    for (size_t i = 0; i < c->root->n; i++) {
        const struct json_member *m = &c->root->members[i];
        int k = -1;
        for (int j = 0; j < 4; j++)
            if (!strcmp(m->key, replaced[j])) k = j;
        fputs(i ? ",\n  " : "  ", f);
        json_write_string_len(f, m->key, m->key_len);
        fputs(": ", f);
        if (k >= 0) seen[k] = true;
        if (k == 0)
            json_write_string(f, "crashed");
        else if (k == 1)
            write_time(f, c->end);
        else if (k == 2 && c->start > 0 && c->end >= c->start)
            fprintf(f, "%.3f", c->end - c->start);
        else if (k == 2)
            fputs("null", f);
        else if (k == 3)
            json_write_string(f, c->error);
        else
            json_write_value(f, &m->value);
    }
    if (!seen[0]) fputs(",\n  \"status\": \"crashed\"", f);
    if (!seen[3]) {
        fputs(",\n  \"error\": ", f);
        json_write_string(f, c->error);
    }
    fputs("\n}\n", f);
    return 0;
}

int run_json_mark_crashed(const char *dir, long controller_pid, const char *who, char *err,
                          size_t errlen)
{
    char path[4200], why[256];
    size_t len;
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *text = read_whole(path, RUN_JSON_MAX, &len);
    if (!text) {
        if (errno == ENOENT) return 0; /* the run never got that far */
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    struct json_value *root = json_read(text, len, why, sizeof why);
    free(text);
    if (!root) {
        snprintf(err, errlen, "%s is no JSON (%s): left as it is", path, why);
        return -1;
    }
    const struct json_value *status = json_get(root, "status"), *pid = json_get(root, "pid");
    int rc = 0;
    /* Only the run of that controller, and only while it claims to run. */
    if (status && status->type == JSON_STRING && !strcmp(status->string, "running") && pid &&
        pid->is_int && pid->integer == controller_pid) {
        char error[512];
        struct crashed_json c = {root, parse_time(json_get(root, "start_time")), newest_write(dir),
                                 error};
        snprintf(error, sizeof error,
                 "the controller (pid %ld) ended without finishing the run (killed or crashed); "
                 "results are complete up to end_time, its last write; marked by %s",
                 controller_pid, who);
        durable_trim_partial_lines(dir); /* after end_time was taken: this touches the files */
        rc = durable_replace(dir, "run.json", fill_crashed, &c, err, errlen) < 0 ? -1 : 1;
    }
    json_free(root);
    return rc;
}
