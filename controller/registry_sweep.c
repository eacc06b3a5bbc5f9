/* registry_sweep.c — removes what dead runs left (see registry.h,
 * registry_sweep_stale): used by `hiernet clean` and by the start-up sweep.
 *
 * A run is stale when its controller (pid + start time) is gone. The sweep
 * claims it by renaming its directory to ".sweep-<our pid>-<start>-<id>"
 * (only one of several sweepers wins the rename), kills the peers it lists
 * that still run, removes the cgroups it lists and then the directory; what
 * it cannot finish it renames to ".stale-<pid>-<start>-<id>", which any later
 * sweep may claim. It
 * acts only on what the run's own files list, each process checked by pid +
 * start time and each cgroup checked to be on a cgroup file system under a
 * "hiernet-" group: nothing is matched by name pattern.
 *
 * Owns nothing beyond the call. */
#include "controller/registry.h"

#include "common/clock.h"
#include "controller/run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_PEER_WAIT_MS 1000           /* a SIGKILLed process is gone within this */
#define SWEEP_CGROUP_WAIT_NS 1000000000LL /* killed tasks leave their cgroup asynchronously */
#define SWEEP_CGROUP_PREFIX "hiernet-"    /* EMU_CGROUP_PREFIX */
#define SWEEP_PIDS_SHOWN 8

struct sweep {
    registry_report_fn report;
    void *ctx;
    struct registry_sweep_counts *counts;
    struct registry_proc self;
    const char *run_id;
    const char *who;              /* named in a crashed run.json */
    long long cgroup_deadline_ns; /* one wait budget per run, not per group */
};

static void sweep_report(struct sweep *s, enum registry_event event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void sweep_report(struct sweep *s, enum registry_event event, const char *fmt, ...)
{
    char detail[REGISTRY_PATH_MAX + 256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (event == REGISTRY_EVENT_PEER_KILLED) s->counts->peers++;
    if (event == REGISTRY_EVENT_CGROUP_REMOVED) s->counts->cgroups++;
    if (event == REGISTRY_EVENT_RUN_REMOVED) s->counts->runs++;
    if (event == REGISTRY_EVENT_RESULTS_MARKED) s->counts->marked++;
    if (event == REGISTRY_EVENT_FAILED) s->counts->failures++;
    if (s->report) s->report(s->ctx, event, s->run_id, detail);
}

/* ---- peers ---- */

static int sweep_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* Sends SIGKILL to the registered process and waits for it to exit. With a
 * pidfd (opened before the identity check, so it names the checked process)
 * a pid reused in between is never hit; without one (kernel < 5.3) the
 * window between check and kill() is all that is left. */
static int sweep_kill(const struct registry_proc *proc)
{
    int pidfd = sweep_pidfd_open(proc->pid), rc;

    if (pidfd < 0 && errno == ESRCH) return 1; /* already gone */
    if (!registry_proc_alive(proc)) {
        if (pidfd >= 0) close(pidfd);
        return 1;
    }
    if (pidfd < 0) return kill(proc->pid, SIGKILL);
#ifdef SYS_pidfd_send_signal
    rc = (int)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
#else
    rc = kill(proc->pid, SIGKILL);
#endif
    if (rc == 0) {
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        poll(&pfd, 1, SWEEP_PEER_WAIT_MS); /* readable once it has exited */
    }
    close(pidfd);
    return rc;
}

/* The process group of pid and the inode of its network namespace. */
static int proc_group_and_netns(pid_t pid, pid_t *pgrp, unsigned long *ns_inode)
{
    char path[64], buf[512], link[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the command name may hold spaces */
    int ppid, group;
    char state;
    if (!rp || sscanf(rp + 1, " %c %d %d", &state, &ppid, &group) != 3) return -1;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    ssize_t len = readlink(path, link, sizeof link - 1);
    if (len < 0) return -1;
    link[len] = '\0';
    *pgrp = group;
    return sscanf(link, "net:[%lu]", ns_inode) == 1 ? 0 : -1;
}

/* A node program's leader died with the controller; what it started lives
 * on in its process group, in the node's namespace: both must match, so a
 * reused group id or namespace inode alone never selects a process. */
static unsigned sweep_program_group(pid_t group, unsigned long ns_inode)
{
    DIR *d = opendir("/proc");
    if (!d) return 0;
    unsigned killed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        pid_t pgrp;
        unsigned long inode;
        if (*end || pid <= 0 || proc_group_and_netns((pid_t)pid, &pgrp, &inode) < 0) continue;
        if (pgrp == group && inode == ns_inode && kill((pid_t)pid, SIGKILL) == 0) killed++;
    }
    closedir(d);
    return killed;
}

static void sweep_peers(struct sweep *s, const struct registry_run_entry *run)
{
    for (size_t i = 0; i < run->n_nodes; i++) {
        const struct registry_node_entry *n = &run->nodes[i];
        if (strncmp(n->node, REGISTRY_PROGRAM_PREFIX, strlen(REGISTRY_PROGRAM_PREFIX)) == 0 &&
            n->ns_inode) {
            unsigned k = sweep_program_group(n->peer.pid, n->ns_inode);
            if (k)
                sweep_report(s, REGISTRY_EVENT_PEER_KILLED,
                             "%u process(es) of node program group %ld (network %s)", k,
                             (long)n->peer.pid, n->network);
        }
        int rc = sweep_kill(&n->peer);
        if (rc == 0)
            sweep_report(s, REGISTRY_EVENT_PEER_KILLED, "peer pid %ld (node %s/%s)",
                         (long)n->peer.pid, n->network, n->node);
        else if (rc < 0)
            sweep_report(s, REGISTRY_EVENT_FAILED, "kill peer pid %ld (node %s/%s): %s",
                         (long)n->peer.pid, n->network, n->node, strerror(errno));
    }
}

/* ---- cgroups ---- */

/* A listed path is acted on only when it is absolute, has no "." or ".."
 * component, lies at or below a "hiernet-" group and is on a cgroup file
 * system: a damaged registry file can then never empty the host's groups. */
static int sweep_cgroup_allowed(const char *path, char *why, size_t whylen)
{
    struct statfs fs;
    int ours = 0;

    if (path[0] != '/' || strstr(path, "/./") || strstr(path, "/../")) {
        snprintf(why, whylen, "not a plain absolute path");
        return -1;
    }
    for (const char *p = strchr(path, '/'); p; p = strchr(p + 1, '/'))
        ours |= !strncmp(p + 1, SWEEP_CGROUP_PREFIX, strlen(SWEEP_CGROUP_PREFIX));
    if (!ours) {
        snprintf(why, whylen, "not inside a " SWEEP_CGROUP_PREFIX "* group");
        return -1;
    }
    if (statfs(path, &fs) < 0) {
        if (errno == ENOENT) return 1; /* already gone */
        snprintf(why, whylen, "%s", strerror(errno));
        return -1;
    }
    if (fs.f_type != CGROUP_SUPER_MAGIC && fs.f_type != CGROUP2_SUPER_MAGIC) {
        snprintf(why, whylen, "not on a cgroup file system");
        return -1;
    }
    return 0;
}

/* "pids 12 34" of the processes still in a busy group, for the message. */
static void sweep_cgroup_pids(const char *path, char *out, size_t outlen)
{
    char file[REGISTRY_PATH_MAX + 32];
    long pid;
    int shown = 0;
    size_t used = 0;
    FILE *f;

    snprintf(file, sizeof file, "%s/cgroup.procs", path);
    out[0] = '\0';
    if (!(f = fopen(file, "re"))) return;
    while (fscanf(f, "%ld", &pid) == 1 && used < outlen) {
        if (shown++ == SWEEP_PIDS_SHOWN) {
            snprintf(out + used, outlen - used, " ...");
            break;
        }
        used += (size_t)snprintf(out + used, outlen - used, "%s%ld", shown > 1 ? " " : "", pid);
    }
    fclose(f);
}

/* rmdir that waits out EBUSY until the run's deadline. */
static int sweep_rmdir(struct sweep *s, const char *path)
{
    const struct timespec pause = {.tv_nsec = 10000000L};

    for (;;) {
        if (rmdir(path) == 0) return 0;
        if (errno == ENOENT) return 1;
        if (errno != EBUSY || mono_ns() > s->cgroup_deadline_ns) return -1;
        nanosleep(&pause, NULL);
    }
}

/* Removes path and every group below it, deepest first. */
static int sweep_cgroup_tree(struct sweep *s, const char *path)
{
    char child[REGISTRY_PATH_MAX], pids[128];
    struct dirent *entry;
    DIR *dir = opendir(path);
    int rc = 0, removed;

    if (!dir) {
        if (errno == ENOENT) return 0;
        sweep_report(s, REGISTRY_EVENT_FAILED, "open cgroup %s: %s", path, strerror(errno));
        return -1;
    }
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_type != DT_DIR || entry->d_name[0] == '.') continue;
        if (snprintf(child, sizeof child, "%s/%s", path, entry->d_name) >= (int)sizeof child)
            continue;
        if (sweep_cgroup_tree(s, child) < 0) rc = -1;
    }
    closedir(dir);
    if (rc < 0) return -1; /* the failure below was reported */
    if ((removed = sweep_rmdir(s, path)) == 0)
        sweep_report(s, REGISTRY_EVENT_CGROUP_REMOVED, "cgroup %s", path);
    if (removed >= 0) return 0;
    int error = errno;
    sweep_cgroup_pids(path, pids, sizeof pids);
    sweep_report(s, REGISTRY_EVENT_FAILED, "remove cgroup %s: %s%s%s%s", path, strerror(error),
                 pids[0] ? " (processes not listed in the run still in it: pids " : "", pids,
                 pids[0] ? ")" : "");
    return -1;
}

static void sweep_cgroups(struct sweep *s, const struct registry_run_entry *run)
{
    char why[256];

    s->cgroup_deadline_ns = mono_ns() + SWEEP_CGROUP_WAIT_NS;
    for (size_t i = 0; i < run->n_cgroups; i++) {
        int allowed = sweep_cgroup_allowed(run->cgroups[i], why, sizeof why);
        if (allowed < 0)
            sweep_report(s, REGISTRY_EVENT_FAILED, "cgroup %s listed by the run: %s: left alone",
                         run->cgroups[i], why);
        else if (allowed == 0)
            sweep_cgroup_tree(s, run->cgroups[i]);
    }
}

/* ---- results ---- */

/* The run's results stay as they were at its death, complete up to its last
 * write; only run.json learns that the run will never finish. A failure
 * here is a note: it leaves nothing running, so the entry still goes. */
static void sweep_results(struct sweep *s, const struct registry_run_entry *run)
{
    char err[REGISTRY_PATH_MAX + 256];
    if (!run->results[0]) return;
    int rc =
        run_json_mark_crashed(run->results, (long)run->controller.pid, s->who, err, sizeof err);
    if (rc > 0)
        sweep_report(s, REGISTRY_EVENT_RESULTS_MARKED, "%s/run.json", run->results);
    else if (rc < 0)
        sweep_report(s, REGISTRY_EVENT_NOTE, "%s", err);
}

/* ---- runs ---- */

/* Sweeps a claimed run directory; the directory goes only when everything it
 * lists is gone. Returns -1 when something is left. */
static int sweep_claimed(struct sweep *s, const char *path)
{
    struct registry_run_entry run;
    unsigned failures = s->counts->failures;
    char err[REGISTRY_PATH_MAX + 128], run_file[REGISTRY_PATH_MAX + 272];

    /* Only a registration that died before writing its run file lacks one
     * (other directories are never claimed): it lists nothing. */
    snprintf(run_file, sizeof run_file, "%s/run", path);
    if (access(run_file, F_OK) < 0 && errno == ENOENT) {
        if (registry_dir_remove(path, err, sizeof err) < 0) {
            sweep_report(s, REGISTRY_EVENT_FAILED, "%s", err);
            return -1;
        }
        sweep_report(s, REGISTRY_EVENT_RUN_REMOVED, "%s",
                     strncmp(s->run_id, REGISTRY_SSH_PREFIX, REGISTRY_SSH_PREFIX_LEN) == 0
                         ? "ssh control directory of a controller that is gone"
                         : "unfinished registration, nothing listed");
        return 0;
    }
    if (registry_run_load(path, s->run_id, &run, err, sizeof err) < 0) {
        sweep_report(s, REGISTRY_EVENT_FAILED, "%s", err);
        return -1;
    }
    sweep_results(s, &run);
    sweep_peers(s, &run);
    sweep_cgroups(s, &run);
    if (s->counts->failures == failures && registry_dir_remove(path, err, sizeof err) < 0)
        sweep_report(s, REGISTRY_EVENT_FAILED, "%s", err);
    else if (s->counts->failures == failures)
        sweep_report(s, REGISTRY_EVENT_RUN_REMOVED, "controller pid %ld gone; results in %s",
                     (long)run.controller.pid, run.results[0] ? run.results : "(none)");
    registry_run_free(&run);
    return s->counts->failures == failures ? 0 : -1;
}

/* Hands a run this sweep could not finish back to later sweeps: ".stale-"
 * directories are claimable by anyone (a long-lived controller that swept at
 * start must not block `hiernet clean` for its whole run). */
static void sweep_release(struct sweep *s, const char *root, const char *claimed)
{
    char released[REGISTRY_PATH_MAX + 256];

    snprintf(released, sizeof released, "%s/.stale-%ld-%llu-%s", root, (long)s->self.pid,
             s->self.start, s->run_id);
    if (rename(claimed, released) < 0)
        sweep_report(s, REGISTRY_EVENT_NOTE, "release %s: %s (retried after this process exits)",
                     claimed, strerror(errno));
}

/* Claims root/name for this sweep. Returns 1 when another process holds it
 * (a live run, a run being registered or swept by a live process), 0 when
 * claimed (claimed gets the new path), -1 on failure (reported). */
static int sweep_claim(struct sweep *s, const char *root, const char *name, char *run_id,
                       char *claimed, size_t claimed_len)
{
    char path[REGISTRY_PATH_MAX + 256], err[REGISTRY_PATH_MAX + 128];
    struct registry_proc owner;
    const char *rest;

    snprintf(path, sizeof path, "%s/%s", root, name);
    if (registry_dot_owner(name, &owner, &rest) == 0) {
        if (strncmp(name, ".stale-", 7) != 0 && registry_proc_alive(&owner)) return 1;
        /* ".tmp-" and ".ssh-" directories never got an id; the others keep theirs. */
        bool no_id = !strncmp(name, ".tmp-", 5) ||
                     !strncmp(name, REGISTRY_SSH_PREFIX, REGISTRY_SSH_PREFIX_LEN);
        snprintf(run_id, REGISTRY_ID_MAX, "%s", no_id ? name : rest);
    } else {
        struct registry_run_entry run;
        if (registry_run_load(path, name, &run, err, sizeof err) < 0) {
            sweep_report(s, REGISTRY_EVENT_NOTE, "%s: not swept", err);
            return 1;
        }
        registry_run_free(&run);
        if (run.alive) {
            s->counts->live++;
            return 1;
        }
        snprintf(run_id, REGISTRY_ID_MAX, "%s", name);
    }
    snprintf(claimed, claimed_len, "%s/.sweep-%ld-%llu-%s", root, (long)s->self.pid, s->self.start,
             run_id);
    if (rename(path, claimed) == 0) return 0;
    if (errno == ENOENT) return 1; /* another sweeper was faster */
    sweep_report(s, REGISTRY_EVENT_FAILED, "claim %s: %s", path, strerror(errno));
    return -1;
}

/* Collects the entry names first: claiming renames entries of this directory. */
static char **sweep_names(const char *root, size_t *count)
{
    DIR *dir = opendir(root);
    struct dirent *entry;
    char **names = NULL, **grown;

    *count = 0;
    if (!dir) return NULL;
    while ((entry = readdir(dir)) != NULL) {
        if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, "..")) continue;
        if (!(grown = realloc(names, (*count + 1) * sizeof *names))) break;
        names = grown;
        if (!(names[*count] = strdup(entry->d_name))) break;
        (*count)++;
    }
    closedir(dir);
    return names;
}

static void sweep_root(struct sweep *s, const char *root)
{
    char claimed[REGISTRY_PATH_MAX + 256], run_id[REGISTRY_ID_MAX];
    size_t count;
    char **names = sweep_names(root, &count);

    for (size_t i = 0; i < count; i++) {
        s->run_id = names[i];
        if (sweep_claim(s, root, names[i], run_id, claimed, sizeof claimed) == 0) {
            s->run_id = run_id;
            if (sweep_claimed(s, claimed) < 0) sweep_release(s, root, claimed);
        }
        free(names[i]);
    }
    free(names);
    s->run_id = NULL;
}

/* A root this user may not change: counts its stale runs so the caller can
 * say that someone else (root) must sweep them; live ones stay quiet. */
static void sweep_root_readonly(struct sweep *s, const char *root, int error)
{
    char path[REGISTRY_PATH_MAX + 256], ignored[256];
    struct registry_run_entry run;
    unsigned stale = 0;
    size_t count;
    char **names = sweep_names(root, &count);

    for (size_t i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", root, names[i]);
        if (names[i][0] != '.' &&
            registry_run_load(path, names[i], &run, ignored, sizeof ignored) == 0) {
            stale += !run.alive;
            s->counts->live += run.alive;
            registry_run_free(&run);
        }
        free(names[i]);
    }
    free(names);
    if (stale)
        sweep_report(s, REGISTRY_EVENT_NOTE, "%u stale run%s in %s not swept: %s (run as root)",
                     stale, stale == 1 ? "" : "s", root, strerror(error));
}

int registry_sweep_stale(registry_report_fn report, void *ctx, struct registry_sweep_counts *counts,
                         char *err, size_t errlen)
{
    return registry_sweep_stale_as("the start of a later run", report, ctx, counts, err, errlen);
}

int registry_sweep_stale_as(const char *who, registry_report_fn report, void *ctx,
                            struct registry_sweep_counts *counts, char *err, size_t errlen)
{
    char roots[REGISTRY_ROOTS_MAX][REGISTRY_PATH_MAX];
    size_t n = registry_roots(roots);
    struct sweep s = {.report = report, .ctx = ctx, .counts = counts, .who = who};
    struct stat st;

    memset(counts, 0, sizeof *counts);
    if (registry_proc_read(getpid(), &s.self) < 0) {
        snprintf(err, errlen, "read /proc/%ld/stat: %s", (long)getpid(), strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (stat(roots[i], &st) < 0 || !S_ISDIR(st.st_mode)) continue; /* never used */
        if (access(roots[i], W_OK | X_OK) < 0)
            sweep_root_readonly(&s, roots[i], errno);
        else
            sweep_root(&s, roots[i]);
    }
    if (counts->failures) {
        snprintf(err, errlen, "%u stale item%s could not be removed", counts->failures,
                 counts->failures == 1 ? "" : "s");
        return -1;
    }
    return 0;
}
