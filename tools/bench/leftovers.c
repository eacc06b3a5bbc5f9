/* leftovers.c — bench_leftovers: runs a command (a benchmark, one episode of
 * the crash campaign) and then proves it left nothing behind.
 *
 *   bench_leftovers [--grace S] [--report FILE] [--keep] -- CMD [ARG...]
 *
 * It makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every
 * process CMD starts, however it detaches (a killed controller's peers, a
 * daemon started in a node, a background job of a shell function), stays
 * its descendant. While CMD runs it walks that tree every 50 ms, noting
 * each process (pid + start time) and its network namespace, and the
 * hiernet runs whose controller is one of them (from the run registry:
 * their entries, cgroups and node namespaces). When CMD has ended it waits
 * up to S seconds (default 3) for the rest to end, reaping them, and then
 * counts what is left:
 *
 *   processes   descendants still alive (and registered processes of its
 *               runs: peers, linkd, node programs)
 *   namespaces  network namespaces seen in the tree that a leftover process
 *               or a bind mount made meanwhile still holds
 *   interfaces  interfaces of the host's namespace made meanwhile
 *   cgroups     cgroups its runs listed, or named after them, still present
 *   registry    registry entries of its runs still present (.sweep- and
 *               .stale- forms included)
 *
 * Each leftover is printed on stderr; leftover processes are then SIGKILLed
 * (unless --keep) so that one bad run does not spoil the next. --report
 * writes the counts as one JSON object. Exit status: CMD's, or 4 when CMD
 * succeeded but left something. SIGINT, SIGTERM and SIGHUP go to CMD. */
#include "controller/registry.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_NS 50000000L
#define MAX_SEEN 65536

struct seen_proc {
    struct registry_proc id;
    unsigned long netns;
};

struct watch {
    struct seen_proc *procs;
    size_t n_procs;
    struct registry_run_entry *runs; /* our runs, as last read */
    size_t n_runs;
    char **ifnames_before, **mounts_before;
    size_t n_ifnames_before, n_mounts_before;
    unsigned long host_netns;
};

struct counts {
    unsigned processes, namespaces, interfaces, cgroups, registry;
};

static volatile pid_t child_pid;

static void forward_signal(int sig)
{
    if (child_pid > 0) kill(child_pid, sig);
}

/* ---- /proc ---- */

static unsigned long netns_of(pid_t pid)
{
    char path[64], link[64];
    unsigned long inode = 0;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 0) {
        link[n] = '\0';
        sscanf(link, "net:[%lu]", &inode);
    }
    return inode;
}

static bool seen_has(const struct watch *w, const struct registry_proc *p)
{
    for (size_t i = 0; i < w->n_procs; i++)
        if (w->procs[i].id.pid == p->pid && w->procs[i].id.start == p->start) return true;
    return false;
}

static void seen_add(struct watch *w, pid_t pid)
{
    struct registry_proc p;
    if (registry_proc_read(pid, &p) < 0 || seen_has(w, &p) || w->n_procs == MAX_SEEN) return;
    w->procs[w->n_procs++] = (struct seen_proc){p, netns_of(pid)};
}

/* The pids below root (children of every thread, recursively), into out. */
static size_t descendants(pid_t root, pid_t *out, size_t cap)
{
    size_t n = 0, next = 0;
    pid_t current = root;
    for (;;) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", (int)current);
        DIR *tasks = opendir(path);
        struct dirent *t;
        while (tasks && (t = readdir(tasks))) {
            if (t->d_name[0] == '.') continue;
            char file[128];
            snprintf(file, sizeof file, "%s/%s/children", path, t->d_name);
            FILE *f = fopen(file, "re");
            int child;
            while (f && n < cap && fscanf(f, "%d", &child) == 1)
                out[n++] = child;
            if (f) fclose(f);
        }
        if (tasks) closedir(tasks);
        if (next == n) return n;
        current = out[next++];
    }
}

/* ---- what the tree owns ---- */

static bool run_is_ours(const struct watch *w, const struct registry_run_entry *run)
{
    return seen_has(w, &run->controller);
}

static void runs_refresh(struct watch *w)
{
    struct registry_list list;
    char err[256];
    if (registry_list(&list, err, sizeof err) < 0) return;
    for (size_t i = 0; i < list.count; i++) {
        struct registry_run_entry *run = &list.runs[i];
        if (!run_is_ours(w, run)) continue;
        size_t k = 0;
        while (k < w->n_runs && strcmp(w->runs[k].id, run->id) != 0)
            k++;
        if (k == w->n_runs) {
            struct registry_run_entry *grown = realloc(w->runs, (k + 1) * sizeof *grown);
            if (!grown) continue;
            w->runs = grown;
            w->n_runs++;
        } else {
            registry_run_free(&w->runs[k]);
        }
        w->runs[k] = *run; /* takes its tables; the list frees nothing of it */
        run->nodes = NULL;
        run->cgroups = NULL;
        run->n_nodes = run->n_cgroups = 0;
    }
    registry_list_free(&list);
}

static void watch_tree(struct watch *w)
{
    static pid_t pids[MAX_SEEN];
    size_t n = descendants(getpid(), pids, MAX_SEEN);
    for (size_t i = 0; i < n; i++)
        seen_add(w, pids[i]);
    runs_refresh(w);
}

/* ---- snapshots ---- */

static size_t list_names(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    *out = NULL;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char **grown = realloc(*out, (n + 1) * sizeof *grown);
        if (!grown) break;
        *out = grown;
        (*out)[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    return n;
}

/* Mount points of network namespaces (nsfs bind mounts, `ip netns add`). */
static size_t list_netns_mounts(char ***out)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    size_t n = 0;
    *out = NULL;
    while (f && fgets(line, sizeof line, f)) {
        char root[1024], point[1024];
        if (sscanf(line, "%*d %*d %*s %1023s %1023s", root, point) != 2 || !strstr(root, "net:["))
            continue;
        char **grown = realloc(*out, (n + 1) * sizeof *grown);
        if (!grown) break;
        *out = grown;
        (*out)[n++] = strdup(point);
    }
    if (f) fclose(f);
    return n;
}

static bool in_list(char **list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(list[i], name)) return true;
    return false;
}

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* ---- the checks ---- */

static void leftover(unsigned *count, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void leftover(unsigned *count, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench_leftovers: left behind: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    (*count)++;
}

static void cmdline(pid_t pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i < n; i++)
        if (!out[i]) out[i] = ' ';
    out[n] = '\0';
}

/* Alive processes of the tree; with kill_them, SIGKILLed. Their namespaces
 * are marked (netns_held) for the namespace check. */
static void check_processes(struct watch *w, struct counts *c, bool kill_them, unsigned long *held,
                            size_t *n_held)
{
    static pid_t pids[MAX_SEEN];
    size_t n = descendants(getpid(), pids, MAX_SEEN);
    char line[256];
    for (size_t i = 0; i < n; i++) {
        seen_add(w, pids[i]);
        cmdline(pids[i], line, sizeof line);
        leftover(&c->processes, "process %d: %s", (int)pids[i], line);
        if (*n_held < MAX_SEEN) held[(*n_held)++] = netns_of(pids[i]);
        if (kill_them) kill(pids[i], SIGKILL);
    }
    for (size_t r = 0; r < w->n_runs; r++)
        for (size_t k = 0; k < w->runs[r].n_nodes; k++) {
            const struct registry_node_entry *e = &w->runs[r].nodes[k];
            if (!registry_proc_alive(&e->peer)) continue;
            bool counted = false;
            for (size_t i = 0; i < n && !counted; i++)
                counted = pids[i] == e->peer.pid;
            if (counted) continue;
            leftover(&c->processes, "process %d of run %s (%s/%s), outside the tree",
                     (int)e->peer.pid, w->runs[r].id, e->network, e->node);
            if (kill_them) kill(e->peer.pid, SIGKILL);
        }
}

static bool netns_ours(const struct watch *w, unsigned long inode)
{
    if (!inode || inode == w->host_netns) return false;
    for (size_t i = 0; i < w->n_procs; i++)
        if (w->procs[i].netns == inode) return true;
    for (size_t r = 0; r < w->n_runs; r++)
        for (size_t k = 0; k < w->runs[r].n_nodes; k++)
            if (w->runs[r].nodes[k].ns_inode == inode) return true;
    return false;
}

static void check_namespaces(struct watch *w, struct counts *c, const unsigned long *held,
                             size_t n_held)
{
    char **mounts;
    size_t n = list_netns_mounts(&mounts);
    for (size_t i = 0; i < n; i++)
        if (!in_list(w->mounts_before, w->n_mounts_before, mounts[i]))
            leftover(&c->namespaces, "network namespace mounted at %s", mounts[i]);
    free_list(mounts, n);
    for (size_t i = 0; i < n_held; i++) {
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = held[j] == held[i];
        if (!dup && netns_ours(w, held[i]))
            leftover(&c->namespaces, "network namespace net:[%lu], held by a leftover process",
                     held[i]);
    }
}

static void check_interfaces(struct watch *w, struct counts *c)
{
    char **now;
    size_t n = list_names("/sys/class/net", &now);
    for (size_t i = 0; i < n; i++)
        if (!in_list(w->ifnames_before, w->n_ifnames_before, now[i]))
            leftover(&c->interfaces, "interface %s in the host namespace", now[i]);
    free_list(now, n);
}

/* A cgroup path of the run, or any hiernet-<id>* group under the mounts. */
static void check_cgroups(struct watch *w, struct counts *c)
{
    static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/cpu",
                                        "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/unified",
                                        NULL};
    struct stat st;
    for (size_t r = 0; r < w->n_runs; r++) {
        for (size_t k = 0; k < w->runs[r].n_cgroups; k++)
            if (stat(w->runs[r].cgroups[k], &st) == 0)
                leftover(&c->cgroups, "cgroup %s of run %s", w->runs[r].cgroups[k], w->runs[r].id);
        for (int i = 0; roots[i]; i++) {
            char **names;
            size_t n = list_names(roots[i], &names), len = strlen(w->runs[r].id);
            for (size_t j = 0; j < n; j++)
                if (!strncmp(names[j], "hiernet-", 8) && !strncmp(names[j] + 8, w->runs[r].id, len))
                    leftover(&c->cgroups, "cgroup %s/%s of run %s", roots[i], names[j],
                             w->runs[r].id);
            free_list(names, n);
        }
    }
}

static void check_registry(struct watch *w, struct counts *c)
{
    char roots[REGISTRY_ROOTS_MAX][REGISTRY_PATH_MAX];
    size_t n_roots = registry_roots(roots);
    for (size_t i = 0; i < n_roots; i++) {
        DIR *d = opendir(roots[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) { /* the dot forms: .sweep-, .stale-, .tmp- */
            struct registry_proc owner;
            const char *rest;
            for (size_t r = 0; r < w->n_runs; r++)
                if ((!strcmp(e->d_name, w->runs[r].id)) ||
                    (registry_dot_owner(e->d_name, &owner, &rest) == 0 &&
                     !strcmp(rest, w->runs[r].id)))
                    leftover(&c->registry, "registry entry %s/%s", roots[i], e->d_name);
        }
        if (d) closedir(d);
    }
}

/* ---- main ---- */

static bool child_done;
static int child_status;

/* Reaps every orphan that has ended; notes CMD's own status. */
static void reap(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == child_pid) child_done = true, child_status = status;
}

/* Runs argv, watching the tree; returns its wait status. */
static int run_watched(struct watch *w, char **argv)
{
    child_pid = fork();
    if (child_pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "bench_leftovers: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (child_pid < 0) return -1;
    const struct timespec tick = {0, POLL_NS};
    while (!child_done) {
        watch_tree(w);
        reap();
        if (!child_done) nanosleep(&tick, NULL);
    }
    return child_status;
}

static void wait_grace(double grace)
{
    static pid_t pids[MAX_SEEN];
    const struct timespec tick = {0, POLL_NS};
    for (double t = 0; t < grace; t += POLL_NS / 1e9) {
        reap();
        if (descendants(getpid(), pids, MAX_SEEN) == 0) return;
        nanosleep(&tick, NULL);
    }
    reap();
}

static void write_report(const char *path, const struct counts *c, int status)
{
    FILE *f = path ? fopen(path, "we") : NULL;
    if (!f) return;
    fprintf(f,
            "{\"processes\":%u,\"namespaces\":%u,\"interfaces\":%u,\"cgroups\":%u,"
            "\"registry\":%u,\"exit\":%d}\n",
            c->processes, c->namespaces, c->interfaces, c->cgroups, c->registry,
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    fclose(f);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"grace", required_argument, NULL, 'g'},
                                         {"report", required_argument, NULL, 'r'},
                                         {"keep", no_argument, NULL, 'k'},
                                         {NULL, 0, NULL, 0}};
    double grace = 3.0;
    const char *report = NULL;
    bool keep = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        if (ch == 'g')
            grace = atof(optarg);
        else if (ch == 'r')
            report = optarg;
        else if (ch == 'k')
            keep = true;
        else
            return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: bench_leftovers [--grace S] [--report FILE] [--keep] -- CMD...\n");
        return 2;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) return perror("PR_SET_CHILD_SUBREAPER"), 3;
    struct watch w = {.procs = calloc(MAX_SEEN, sizeof *w.procs), .host_netns = netns_of(getpid())};
    if (!w.procs) return 3;
    w.n_ifnames_before = list_names("/sys/class/net", &w.ifnames_before);
    w.n_mounts_before = list_netns_mounts(&w.mounts_before);
    struct sigaction sa = {.sa_handler = forward_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    int status = run_watched(&w, argv + optind);
    if (status < 0) return 3;
    wait_grace(grace);
    runs_refresh(&w);
    struct counts c = {0};
    static unsigned long held[MAX_SEEN];
    size_t n_held = 0;
    check_processes(&w, &c, !keep, held, &n_held);
    check_namespaces(&w, &c, held, n_held);
    check_interfaces(&w, &c);
    check_cgroups(&w, &c);
    check_registry(&w, &c);
    reap();
    unsigned total = c.processes + c.namespaces + c.interfaces + c.cgroups + c.registry;
    fprintf(stderr,
            "bench_leftovers: %u processes, %u namespaces, %u interfaces, %u cgroups, "
            "%u registry entries left (%zu processes and %zu runs watched)\n",
            c.processes, c.namespaces, c.interfaces, c.cgroups, c.registry, w.n_procs, w.n_runs);
    write_report(report, &c, status);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return code == 0 && total ? 4 : code;
}
