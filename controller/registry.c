/* registry.c — the run registry (see registry.h): process identity, the
 * roots, the live run's own entry (open, add, commit, remove) and reading
 * entries back. The sweep of dead runs is in registry_sweep.c.
 *
 * Owns the struct registry of the running controller: its in-memory node and
 * cgroup tables (written only by registry_commit) and nothing else; the
 * directory belongs to the run until registry_close_and_remove. */
#include "controller/registry.h"

#include "controller/durable.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REGISTRY_FORMAT_LINE "hiernet-registry 1"
#define REGISTRY_SUFFIX_MAX 1000 /* hint-2 .. hint-999 before giving up */

/* ---- process identity ---- */

/* Parses the state (field 3) and start time (field 22) of a stat line. The
 * command name (field 2) may hold spaces and parentheses, so fields are
 * counted from the last ')'. */
static int registry_stat_parse(const char *line, unsigned long long *start, char *state)
{
    const char *p = strrchr(line, ')');
    char *end;

    if (!p || p[1] != ' ' || !p[2]) return -1;
    *state = p[2];
    p++; /* the space before field 3 */
    for (int field = 3; field < 22; field++)
        if (!(p = strchr(p + 1, ' '))) return -1;
    *start = strtoull(p + 1, &end, 10);
    return end == p + 1 ? -1 : 0;
}

/* Reads "stat" relative to dirfd (a /proc/<pid> fd, or AT_FDCWD with a full path). */
static int registry_stat_read(int dirfd, const char *path, unsigned long long *start, char *state)
{
    char line[1024];
    ssize_t len;
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) return -1;
    len = read(fd, line, sizeof line - 1);
    close(fd);
    if (len <= 0) {
        errno = len < 0 ? errno : ESRCH;
        return -1;
    }
    line[len] = '\0';
    if (registry_stat_parse(line, start, state) < 0) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

static int registry_proc_state(pid_t pid, unsigned long long *start, char *state)
{
    char path[64];

    if (pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (registry_stat_read(AT_FDCWD, path, start, state) < 0) {
        if (errno == ENOENT) errno = ESRCH;
        return -1;
    }
    return 0;
}

int registry_proc_read(pid_t pid, struct registry_proc *proc)
{
    char state;

    proc->pid = pid;
    proc->start = 0;
    return registry_proc_state(pid, &proc->start, &state);
}

bool registry_proc_alive(const struct registry_proc *proc)
{
    unsigned long long start;
    char state;

    if (proc->start == 0 || registry_proc_state(proc->pid, &start, &state) < 0) return false;
    /* A zombie has exited: only its parent's wait is missing. */
    return start == proc->start && state != 'Z' && state != 'X';
}

int registry_proc_open(const struct registry_proc *proc)
{
    char path[64], state;
    unsigned long long start;
    int dirfd;

    snprintf(path, sizeof path, "/proc/%ld", (long)proc->pid);
    dirfd = proc->pid > 0 ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dirfd < 0) {
        errno = ESRCH;
        return -1;
    }
    /* The fd stays bound to the process it was opened for (a reused pid
     * gets ESRCH through it), so checking the start time through it proves
     * every later openat() on it reaches the registered process. */
    if (registry_stat_read(dirfd, "stat", &start, &state) < 0 || start != proc->start ||
        proc->start == 0 || state == 'Z' || state == 'X') {
        close(dirfd);
        errno = ESRCH;
        return -1;
    }
    return dirfd;
}

/* ---- roots ---- */

size_t registry_roots(char roots[REGISTRY_ROOTS_MAX][REGISTRY_PATH_MAX])
{
    const char *env = getenv(REGISTRY_ENV_ROOT), *xdg = getenv("XDG_RUNTIME_DIR");
    size_t n = 0;

    if (env && *env) {
        snprintf(roots[n++], REGISTRY_PATH_MAX, "%s", env);
        return n;
    }
    snprintf(roots[n++], REGISTRY_PATH_MAX, "/run/hiernet");
    if (xdg && xdg[0] == '/') snprintf(roots[n++], REGISTRY_PATH_MAX, "%s/hiernet", xdg);
    snprintf(roots[n++], REGISTRY_PATH_MAX, "/tmp/hiernet-%lu", (unsigned long)geteuid());
    return n;
}

/* A root is usable when it is a real directory (not a symlink: /tmp is shared
 * with other users) owned by us or by root, and writable by us. */
static int registry_root_usable(const char *root, char *why, size_t whylen)
{
    struct stat st;

    if (lstat(root, &st) < 0) {
        snprintf(why, whylen, "%s: %s", root, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0)) {
        snprintf(why, whylen, "%s: not a directory owned by uid %lu or root", root,
                 (unsigned long)geteuid());
        return -1;
    }
    if (access(root, W_OK | X_OK) < 0) {
        snprintf(why, whylen, "%s: %s", root, strerror(errno));
        return -1;
    }
    return 0;
}

int registry_root_for_write(char *root, size_t rootlen, char *err, size_t errlen)
{
    char roots[REGISTRY_ROOTS_MAX][REGISTRY_PATH_MAX], why[REGISTRY_PATH_MAX + 128] = "";
    size_t n = registry_roots(roots);

    for (size_t i = 0; i < n; i++) {
        /* Shared roots (/run/hiernet) are readable by all, private ones not. */
        mode_t mode = strcmp(roots[i], "/run/hiernet") == 0 ? 0755 : 0700;
        if (mkdir(roots[i], mode) < 0 && errno != EEXIST) {
            snprintf(why, sizeof why, "create %s: %s", roots[i], strerror(errno));
            continue;
        }
        if (registry_root_usable(roots[i], why, sizeof why) == 0) {
            snprintf(root, rootlen, "%s", roots[i]);
            return 0;
        }
    }
    snprintf(err, errlen, "no usable run registry directory (last tried %s)", why);
    return -1;
}

/* ---- small file helpers ---- */

struct registry_text {
    const char *data;
    size_t len;
};

static int registry_fill_text(FILE *f, void *ctx)
{
    const struct registry_text *t = ctx;
    return fwrite(t->data, 1, t->len, f) == t->len ? 0 : -1;
}

/* Replaces dir/name with data atomically. No fsync: the registry describes
 * processes and cgroups, which a power loss ends anyway. */
static int registry_file_write(const char *dir, const char *name, const char *data, size_t len,
                               char *err, size_t errlen)
{
    struct registry_text text = {data, len};
    return durable_replace_unsynced(dir, name, registry_fill_text, &text, err, errlen);
}

int registry_dir_remove(const char *path, char *err, size_t errlen)
{
    DIR *dir = opendir(path);
    struct dirent *entry;
    int rc = 0;

    if (!dir) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "open %s: %s", path, strerror(errno));
        return -1;
    }
    /* Only plain files are ever made inside a run directory. */
    while ((entry = readdir(dir)) != NULL) {
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) continue;
        if (unlinkat(dirfd(dir), entry->d_name, 0) < 0 && errno != ENOENT && rc == 0) {
            snprintf(err, errlen, "remove %s/%s: %s", path, entry->d_name, strerror(errno));
            rc = -1;
        }
    }
    closedir(dir);
    if (rc == 0 && rmdir(path) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "remove %s: %s", path, strerror(errno));
        rc = -1;
    }
    return rc;
}

/* ---- the live run's entry ---- */

struct registry {
    char id[REGISTRY_ID_MAX];
    char path[REGISTRY_PATH_MAX];
    struct registry_node_entry *nodes;
    size_t n_nodes, cap_nodes;
    size_t *slots; /* open-addressing index of nodes: node index + 1, 0 = empty */
    size_t n_slots;
    char **cgroups;
    size_t n_cgroups, cap_cgroups;
    bool nodes_dirty, cgroups_dirty;
};

/* Turns the hint into a run id: [A-Za-z0-9_.-], not starting with '.', short
 * enough for a "-NNN" suffix; also what a cgroup name may hold. */
static void registry_id_from_hint(const char *hint, char *id, size_t idlen)
{
    size_t max = idlen - 5, n = 0;

    for (const char *p = hint ? hint : ""; *p && n < max; p++)
        id[n++] = (isalnum((unsigned char)*p) || strchr("_.-", *p)) ? *p : '-';
    id[n] = '\0';
    if (n == 0) snprintf(id, idlen, "run");
    if (id[0] == '.') id[0] = '_';
}

static int registry_run_file(const char *dir, const char *results_dir, char *err, size_t errlen)
{
    struct registry_proc self;
    char resolved[PATH_MAX], *text = NULL;
    size_t len = 0;
    FILE *f;
    int rc;

    if (registry_proc_read(getpid(), &self) < 0) {
        snprintf(err, errlen, "read /proc/%ld/stat: %s", (long)getpid(), strerror(errno));
        return -1;
    }
    if (results_dir && realpath(results_dir, resolved)) results_dir = resolved;
    if (results_dir && strchr(results_dir, '\n')) {
        snprintf(err, errlen, "results directory name holds a newline: '%s'", results_dir);
        return -1;
    }
    f = open_memstream(&text, &len);
    if (!f) {
        snprintf(err, errlen, "run registry: out of memory");
        return -1;
    }
    fprintf(f, REGISTRY_FORMAT_LINE "\ncontroller %ld %llu\ncreated %lld\nresults %s\n",
            (long)self.pid, self.start, (long long)time(NULL), results_dir ? results_dir : "");
    fclose(f);
    rc = registry_file_write(dir, "run", text, len, err, errlen);
    free(text);
    return rc;
}

/* Renames the finished temp directory to the first free id of base, base-2,
 * ... A run directory is never empty, so rename() onto a taken id fails
 * (ENOTEMPTY/EEXIST) atomically even when two controllers race. */
static int registry_claim_id(const char *root, const char *tmp, const char *base,
                             struct registry *reg, char *err, size_t errlen)
{
    for (int n = 1; n < REGISTRY_SUFFIX_MAX; n++) {
        if (n == 1)
            snprintf(reg->id, sizeof reg->id, "%s", base);
        else
            snprintf(reg->id, sizeof reg->id, "%.59s-%d", base, n);
        if (snprintf(reg->path, sizeof reg->path, "%s/%s", root, reg->id) >=
            (int)sizeof reg->path) {
            snprintf(err, errlen, "register run %s: registry path %s too long", reg->id, root);
            return -1;
        }
        if (rename(tmp, reg->path) == 0) return 0;
        if (errno != EEXIST && errno != ENOTEMPTY && errno != EISDIR) {
            snprintf(err, errlen, "register run %s in %s: %s", reg->id, root, strerror(errno));
            return -1;
        }
    }
    snprintf(err, errlen, "register run %s in %s: ids %s to %s-%d are all taken", base, root, base,
             base, REGISTRY_SUFFIX_MAX - 1);
    return -1;
}

struct registry *registry_open(const char *run_id_hint, const char *results_dir, char *err,
                               size_t errlen)
{
    static unsigned counter; /* tells apart several opens by one process (tests) */
    char root[REGISTRY_PATH_MAX], tmp[REGISTRY_PATH_MAX + 96], base[REGISTRY_ID_MAX];
    struct registry_proc self;
    struct registry *reg;

    if (registry_root_for_write(root, sizeof root, err, errlen) < 0) return NULL;
    if (registry_proc_read(getpid(), &self) < 0) {
        snprintf(err, errlen, "read /proc/%ld/stat: %s", (long)getpid(), strerror(errno));
        return NULL;
    }
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%llu-%u", root, (long)self.pid, self.start, counter++);
    if (mkdir(tmp, 0755) < 0) {
        snprintf(err, errlen, "create %s: %s", tmp, strerror(errno));
        return NULL;
    }
    reg = calloc(1, sizeof *reg);
    registry_id_from_hint(run_id_hint, base, sizeof base);
    if (!reg) snprintf(err, errlen, "run registry: out of memory");
    if (!reg || registry_run_file(tmp, results_dir, err, errlen) < 0 ||
        registry_claim_id(root, tmp, base, reg, err, errlen) < 0) {
        char ignored[64];
        registry_dir_remove(tmp, ignored, sizeof ignored);
        free(reg);
        return NULL;
    }
    return reg;
}

const char *registry_run_id(const struct registry *reg)
{
    return reg->id;
}

const char *registry_path(const struct registry *reg)
{
    return reg->path;
}

/* Names go into space-separated lines: no blanks, controls or '/'. */
static int registry_name_check(const char *what, const char *name, char *err, size_t errlen)
{
    size_t len = name ? strlen(name) : 0;
    int ok = len > 0 && len < REGISTRY_NAME_MAX;

    for (size_t i = 0; ok && i < len; i++)
        ok = isgraph((unsigned char)name[i]) && name[i] != '/';
    if (!ok)
        snprintf(err, errlen,
                 "run registry: bad %s name '%.*s': use 1 to %d printable characters "
                 "without blanks or '/'",
                 what, 80, name ? name : "", REGISTRY_NAME_MAX - 1);
    return ok ? 0 : -1;
}

/* FNV-1a over "network\0node". */
static size_t registry_hash(const char *network, const char *node)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = network; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (const char *p = node; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return (size_t)h;
}

/* The slot holding network/node, or the empty slot where it would go. */
static size_t *registry_slot(struct registry *reg, const char *network, const char *node)
{
    size_t mask = reg->n_slots - 1, i = registry_hash(network, node) & mask;

    for (;; i = (i + 1) & mask) {
        size_t *slot = &reg->slots[i];
        const struct registry_node_entry *e = *slot ? &reg->nodes[*slot - 1] : NULL;
        if (!e || (!strcmp(e->network, network) && !strcmp(e->node, node))) return slot;
    }
}

/* Rebuilds the index with room for twice the nodes (load factor <= 1/2). */
static int registry_reindex(struct registry *reg, size_t want)
{
    size_t n_slots = 16;
    while (n_slots < 2 * want)
        n_slots *= 2;
    size_t *slots = calloc(n_slots, sizeof *slots);

    if (!slots) return -1;
    free(reg->slots);
    reg->slots = slots;
    reg->n_slots = n_slots;
    for (size_t i = 0; i < reg->n_nodes; i++)
        *registry_slot(reg, reg->nodes[i].network, reg->nodes[i].node) = i + 1;
    return 0;
}

static int registry_nodes_reserve(struct registry *reg)
{
    if (reg->n_nodes < reg->cap_nodes) return 0;
    size_t cap = reg->cap_nodes ? 2 * reg->cap_nodes : 64;
    struct registry_node_entry *grown = realloc(reg->nodes, cap * sizeof *grown);

    if (!grown) return -1;
    reg->nodes = grown;
    reg->cap_nodes = cap;
    return registry_reindex(reg, cap);
}

int registry_add_node(struct registry *reg, const char *network, const char *node, pid_t pid,
                      unsigned long ns_inode, char *err, size_t errlen)
{
    struct registry_node_entry entry = {.ns_inode = ns_inode};
    size_t *slot;

    if (registry_name_check("network", network, err, errlen) < 0 ||
        registry_name_check("node", node, err, errlen) < 0)
        return -1;
    if (registry_proc_read(pid, &entry.peer) < 0) {
        snprintf(err, errlen, "run %s: node %s/%s: peer pid %ld: %s", reg->id, network, node,
                 (long)pid, strerror(errno));
        return -1;
    }
    if (registry_nodes_reserve(reg) < 0) {
        snprintf(err, errlen, "run %s: node %s/%s: out of memory", reg->id, network, node);
        return -1;
    }
    snprintf(entry.network, sizeof entry.network, "%s", network);
    snprintf(entry.node, sizeof entry.node, "%s", node);
    slot = registry_slot(reg, network, node);
    if (*slot == 0) *slot = ++reg->n_nodes;
    reg->nodes[*slot - 1] = entry;
    reg->nodes_dirty = true;
    return 0;
}

/* Drops the entries of network (of one node of it when node is non-NULL). */
static void registry_remove_entries(struct registry *reg, const char *network, const char *node)
{
    size_t kept = 0;

    for (size_t i = 0; i < reg->n_nodes; i++)
        if (strcmp(reg->nodes[i].network, network) != 0 ||
            (node && strcmp(reg->nodes[i].node, node) != 0))
            reg->nodes[kept++] = reg->nodes[i];
    if (kept == reg->n_nodes) return;
    reg->n_nodes = kept;
    reg->nodes_dirty = true;
    if (registry_reindex(reg, reg->cap_nodes) < 0) {
        /* Out of memory: drop the index; the next add rebuilds it. */
        free(reg->slots);
        reg->slots = NULL;
        reg->n_slots = 0;
        reg->cap_nodes = reg->n_nodes;
    }
}

void registry_remove_network(struct registry *reg, const char *network)
{
    registry_remove_entries(reg, network, NULL);
}

void registry_remove_node(struct registry *reg, const char *network, const char *node)
{
    registry_remove_entries(reg, network, node);
}

int registry_add_cgroup(struct registry *reg, const char *path, char *err, size_t errlen)
{
    char *copy;

    if (!path || path[0] != '/' || strchr(path, '\n')) {
        snprintf(err, errlen, "run %s: cgroup path '%s' must be absolute, on one line", reg->id,
                 path ? path : "");
        return -1;
    }
    for (size_t i = 0; i < reg->n_cgroups; i++)
        if (!strcmp(reg->cgroups[i], path)) return 0;
    if (reg->n_cgroups == reg->cap_cgroups) {
        size_t cap = reg->cap_cgroups ? 2 * reg->cap_cgroups : 8;
        char **grown = realloc(reg->cgroups, cap * sizeof *grown);
        if (!grown) goto oom;
        reg->cgroups = grown;
        reg->cap_cgroups = cap;
    }
    if (!(copy = strdup(path))) goto oom;
    reg->cgroups[reg->n_cgroups++] = copy;
    reg->cgroups_dirty = true;
    return 0;
oom:
    snprintf(err, errlen, "run %s: cgroup %s: out of memory", reg->id, path);
    return -1;
}

void registry_remove_cgroup(struct registry *reg, const char *path)
{
    for (size_t i = 0; i < reg->n_cgroups; i++) {
        if (strcmp(reg->cgroups[i], path) != 0) continue;
        free(reg->cgroups[i]);
        reg->cgroups[i] = reg->cgroups[--reg->n_cgroups];
        reg->cgroups_dirty = true;
        return;
    }
}

static int registry_commit_nodes(struct registry *reg, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc;

    if (!f) {
        snprintf(err, errlen, "run %s: node table: out of memory", reg->id);
        return -1;
    }
    for (size_t i = 0; i < reg->n_nodes; i++) {
        const struct registry_node_entry *e = &reg->nodes[i];
        fprintf(f, "%s %s %ld %llu %lu\n", e->network, e->node, (long)e->peer.pid, e->peer.start,
                e->ns_inode);
    }
    rc = fclose(f) == 0 ? 0 : -1;
    if (rc < 0) snprintf(err, errlen, "run %s: node table: out of memory", reg->id);
    if (rc == 0) rc = registry_file_write(reg->path, "nodes", text ? text : "", len, err, errlen);
    free(text);
    return rc;
}

static int registry_commit_cgroups(struct registry *reg, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc;

    if (!f) {
        snprintf(err, errlen, "run %s: cgroup table: out of memory", reg->id);
        return -1;
    }
    for (size_t i = 0; i < reg->n_cgroups; i++)
        fprintf(f, "%s\n", reg->cgroups[i]);
    rc = fclose(f) == 0 ? 0 : -1;
    if (rc < 0) snprintf(err, errlen, "run %s: cgroup table: out of memory", reg->id);
    if (rc == 0) rc = registry_file_write(reg->path, "cgroups", text ? text : "", len, err, errlen);
    free(text);
    return rc;
}

int registry_commit(struct registry *reg, char *err, size_t errlen)
{
    if (reg->nodes_dirty) {
        if (registry_commit_nodes(reg, err, errlen) < 0) return -1;
        reg->nodes_dirty = false;
    }
    if (reg->cgroups_dirty) {
        if (registry_commit_cgroups(reg, err, errlen) < 0) return -1;
        reg->cgroups_dirty = false;
    }
    return 0;
}

int registry_close_and_remove(struct registry *reg, char *err, size_t errlen)
{
    int rc;

    if (!reg) return 0;
    rc = registry_dir_remove(reg->path, err, errlen);
    for (size_t i = 0; i < reg->n_cgroups; i++)
        free(reg->cgroups[i]);
    free(reg->cgroups);
    free(reg->nodes);
    free(reg->slots);
    free(reg);
    return rc;
}

/* ---- reading entries back ---- */

/* Reads a whole small file into a NUL-terminated buffer the caller frees;
 * NULL with errno set on failure. */
static char *registry_file_read(const char *dir, const char *name)
{
    char path[REGISTRY_PATH_MAX + 64], *text = NULL;
    size_t len = 0;
    FILE *f, *out;
    char chunk[4096];
    size_t n;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "re"))) return NULL;
    if (!(out = open_memstream(&text, &len))) {
        fclose(f);
        return NULL;
    }
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, out);
    fclose(f);
    if (fclose(out) != 0) {
        free(text);
        errno = ENOMEM;
        return NULL;
    }
    return text;
}

static int registry_parse_run(char *text, struct registry_run_entry *run, char *err, size_t errlen)
{
    long pid = 0;
    char *save = NULL;

    if (strncmp(text, REGISTRY_FORMAT_LINE "\n", sizeof REGISTRY_FORMAT_LINE) != 0) {
        snprintf(err, errlen, "run %s: %s/run is not a hiernet registry file", run->id, run->path);
        return -1;
    }
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "controller ", 11) &&
            sscanf(line + 11, "%ld %llu", &pid, &run->controller.start) == 2)
            run->controller.pid = (pid_t)pid;
        else if (!strncmp(line, "created ", 8))
            run->created = strtoll(line + 8, NULL, 10);
        else if (!strncmp(line, "results ", 8))
            snprintf(run->results, sizeof run->results, "%s", line + 8);
    }
    if (run->controller.pid <= 0 || run->controller.start == 0) {
        snprintf(err, errlen, "run %s: %s/run names no controller", run->id, run->path);
        return -1;
    }
    return 0;
}

#define TEXT_OF(x) #x
#define TEXT_OF_VALUE(x) TEXT_OF(x)
#define NAME_WIDTH TEXT_OF_VALUE(HN_NODE_NAME_MAX) /* REGISTRY_NAME_MAX - 1, as text */

static int registry_parse_node(const char *line, struct registry_node_entry *e)
{
    long pid;
    int used = 0;

    /* The widths are REGISTRY_NAME_MAX - 1. */
    if (sscanf(line, "%" NAME_WIDTH "s %" NAME_WIDTH "s %ld %llu %lu%n", e->network, e->node, &pid,
               &e->peer.start, &e->ns_inode, &used) != 5 ||
        line[used] != '\0' || pid <= 0)
        return -1;
    e->peer.pid = (pid_t)pid;
    return 0;
}

static int registry_parse_nodes(char *text, struct registry_run_entry *run, char *err,
                                size_t errlen)
{
    size_t lines = 0, lineno = 0;
    char *save = NULL;

    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    run->nodes = calloc(lines + 1, sizeof *run->nodes);
    if (!run->nodes) {
        snprintf(err, errlen, "run %s: node table: out of memory", run->id);
        return -1;
    }
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (registry_parse_node(line, &run->nodes[run->n_nodes]) < 0) {
            snprintf(err, errlen, "run %s: %s/nodes line %zu is malformed: '%.80s'", run->id,
                     run->path, lineno, line);
            return -1;
        }
        run->n_nodes++;
    }
    return 0;
}

static int registry_parse_cgroups(char *text, struct registry_run_entry *run, char *err,
                                  size_t errlen)
{
    size_t lines = 0;
    char *save = NULL;

    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    run->cgroups = calloc(lines + 1, sizeof *run->cgroups);
    if (!run->cgroups) {
        snprintf(err, errlen, "run %s: cgroup table: out of memory", run->id);
        return -1;
    }
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!(run->cgroups[run->n_cgroups] = strdup(line))) {
            snprintf(err, errlen, "run %s: cgroup table: out of memory", run->id);
            return -1;
        }
        run->n_cgroups++;
    }
    return 0;
}

/* Reads one optional table file (nodes, cgroups) with its parser. */
static int registry_load_table(const char *name, struct registry_run_entry *run,
                               int (*parse)(char *, struct registry_run_entry *, char *, size_t),
                               char *err, size_t errlen)
{
    char *text = registry_file_read(run->path, name);
    int rc;

    if (!text) {
        if (errno == ENOENT) return 0; /* nothing committed yet */
        snprintf(err, errlen, "run %s: read %s/%s: %s", run->id, run->path, name, strerror(errno));
        return -1;
    }
    rc = parse(text, run, err, errlen);
    free(text);
    return rc;
}

int registry_run_load(const char *path, const char *id, struct registry_run_entry *run, char *err,
                      size_t errlen)
{
    char *text;
    int rc;

    memset(run, 0, sizeof *run);
    snprintf(run->id, sizeof run->id, "%s", id);
    snprintf(run->path, sizeof run->path, "%s", path);
    if (!(text = registry_file_read(path, "run"))) {
        snprintf(err, errlen, "run %s: read %s/run: %s", id, path, strerror(errno));
        return -1;
    }
    rc = registry_parse_run(text, run, err, errlen);
    free(text);
    if (rc == 0) rc = registry_load_table("nodes", run, registry_parse_nodes, err, errlen);
    if (rc == 0) rc = registry_load_table("cgroups", run, registry_parse_cgroups, err, errlen);
    if (rc < 0) {
        registry_run_free(run);
        return -1;
    }
    run->alive = registry_proc_alive(&run->controller);
    return 0;
}

void registry_run_free(struct registry_run_entry *run)
{
    for (size_t i = 0; i < run->n_cgroups; i++)
        free(run->cgroups[i]);
    free(run->cgroups);
    free(run->nodes);
    run->cgroups = NULL;
    run->nodes = NULL;
    run->n_cgroups = run->n_nodes = 0;
}

static int registry_list_append(struct registry_list *list, const struct registry_run_entry *run)
{
    struct registry_run_entry *grown = realloc(list->runs, (list->count + 1) * sizeof *grown);

    if (!grown) return -1;
    list->runs = grown;
    list->runs[list->count++] = *run;
    return 0;
}

/* Adds every loadable run of one root; unfinished (".tmp-") and claimed
 * (".sweep-") directories are not runs yet or any more. */
static int registry_list_root(struct registry_list *list, const char *root, char *err,
                              size_t errlen)
{
    char path[REGISTRY_PATH_MAX + 256], ignored[256];
    struct registry_run_entry run;
    struct dirent *entry;
    DIR *dir = opendir(root);
    int rc = 0;

    if (!dir) return 0; /* a root nobody has used */
    while (rc == 0 && (entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", root, entry->d_name);
        if (registry_run_load(path, entry->d_name, &run, ignored, sizeof ignored) < 0) continue;
        if (registry_list_append(list, &run) < 0) {
            registry_run_free(&run);
            snprintf(err, errlen, "run registry %s: out of memory", root);
            rc = -1;
        }
    }
    closedir(dir);
    return rc;
}

static int registry_run_compare(const void *a, const void *b)
{
    return strcmp(((const struct registry_run_entry *)a)->id,
                  ((const struct registry_run_entry *)b)->id);
}

int registry_list(struct registry_list *list, char *err, size_t errlen)
{
    char roots[REGISTRY_ROOTS_MAX][REGISTRY_PATH_MAX];
    size_t n = registry_roots(roots), used = 0;

    memset(list, 0, sizeof *list);
    for (size_t i = 0; i < n; i++) {
        used += (size_t)snprintf(list->roots + used, sizeof list->roots - used, "%s%s",
                                 i ? ", " : "", roots[i]);
        if (used >= sizeof list->roots) used = sizeof list->roots - 1;
        if (registry_list_root(list, roots[i], err, errlen) < 0) {
            registry_list_free(list);
            return -1;
        }
    }
    if (list->count) qsort(list->runs, list->count, sizeof *list->runs, registry_run_compare);
    return 0;
}

void registry_list_free(struct registry_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        registry_run_free(&list->runs[i]);
    free(list->runs);
    list->runs = NULL;
    list->count = 0;
}

enum registry_match registry_find_run(const struct registry_list *list, const char *id_or_prefix,
                                      const struct registry_run_entry **run)
{
    size_t len = strlen(id_or_prefix), matches = 0;

    *run = NULL;
    for (size_t i = 0; i < list->count; i++)
        if (!strcmp(list->runs[i].id, id_or_prefix)) {
            *run = &list->runs[i];
            return REGISTRY_MATCH_ONE;
        }
    for (size_t i = 0; len > 0 && i < list->count; i++)
        if (!strncmp(list->runs[i].id, id_or_prefix, len) && matches++ == 0) *run = &list->runs[i];
    if (matches > 1) return REGISTRY_MATCH_AMBIGUOUS;
    return matches == 1 ? REGISTRY_MATCH_ONE : REGISTRY_MATCH_NONE;
}

enum registry_match registry_find_node(const struct registry_run_entry *run, const char *name,
                                       const struct registry_node_entry **node)
{
    const char *slash = strchr(name, '/');
    size_t net_len = slash ? (size_t)(slash - name) : 0, matches = 0;
    const char *node_name = slash ? slash + 1 : name;

    *node = NULL;
    /* network/node pairs are unique: registry_add_node replaces. */
    for (size_t i = 0; i < run->n_nodes; i++) {
        const struct registry_node_entry *e = &run->nodes[i];
        if (strcmp(e->node, node_name) != 0) continue;
        if (slash && (strlen(e->network) != net_len || strncmp(e->network, name, net_len) != 0))
            continue;
        if (matches++ == 0) *node = e;
    }
    if (matches > 1) return REGISTRY_MATCH_AMBIGUOUS;
    return matches == 1 ? REGISTRY_MATCH_ONE : REGISTRY_MATCH_NONE;
}

int registry_dot_owner(const char *name, struct registry_proc *owner, const char **rest)
{
    long pid;
    int used = 0;

    /* one skip for both: the prefixes are as long */
    _Static_assert(REGISTRY_SSH_PREFIX_LEN == 5, "REGISTRY_SSH_PREFIX is as long as .tmp-");
    if (!strncmp(name, ".tmp-", 5) || !strncmp(name, REGISTRY_SSH_PREFIX, REGISTRY_SSH_PREFIX_LEN))
        name += 5;
    else if (!strncmp(name, ".sweep-", 7) || !strncmp(name, ".stale-", 7))
        name += 7;
    else
        return -1;
    if (sscanf(name, "%ld-%llu-%n", &pid, &owner->start, &used) != 2 || used == 0 || pid <= 0)
        return -1;
    owner->pid = (pid_t)pid;
    *rest = name + used;
    return 0;
}
