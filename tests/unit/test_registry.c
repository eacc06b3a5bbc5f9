/* test_registry.c — the run registry (controller/registry.h) in a temporary
 * root ($HIERNET_RUN_DIR, never /run/hiernet): open/unique ids, the node
 * table and its cost at 1000 nodes, listing and lookups, and the sweep: a
 * dead controller's run is removed and its surviving peer killed, a live run
 * is never swept, a reused pid (wrong start time) is never killed, listed
 * paths off a cgroup file system are left alone; with root, real cgroups are
 * removed and a process the run does not list is never killed. */
#include "common/clock.h"
#include "controller/registry.h"
#include "tests/unit/check.h"
#include "tests/unit/registry_root.h"
#include "emu/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[256];

/* ---- helpers ---- */

struct events {
    char text[16384];
    unsigned killed, cgroups, runs, failed;
};

static void on_event(void *ctx, enum registry_event event, const char *run_id, const char *detail)
{
    struct events *e = ctx;
    size_t used = strlen(e->text);
    snprintf(e->text + used, sizeof e->text - used, "%d %s: %s\n", (int)event,
             run_id ? run_id : "?", detail);
    e->killed += event == REGISTRY_EVENT_PEER_KILLED;
    e->cgroups += event == REGISTRY_EVENT_CGROUP_REMOVED;
    e->runs += event == REGISTRY_EVENT_RUN_REMOVED;
    e->failed += event == REGISTRY_EVENT_FAILED;
}

static int sweep(struct events *e, struct registry_sweep_counts *c)
{
    char err[512] = "";
    memset(e, 0, sizeof *e);
    return registry_sweep_stale(on_event, e, c, err, sizeof err);
}

/* A stand-in peer: a child that sleeps until killed. */
static pid_t sleeper(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    return pid;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static bool reaped_by_kill(pid_t pid)
{
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static void stop_sleeper(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Registers run `hint` from a child that then exits: a dead controller.
 * Its nodes are the given pids; cgroup (may be NULL) is listed. */
static void register_dead_run(const char *hint, const pid_t *peers, size_t n, const char *cgroup)
{
    pid_t child = fork();
    if (child == 0) {
        char err[512], node[32];
        struct registry *reg = registry_open(hint, "/tmp/results dir", err, sizeof err);
        if (!reg) _exit(1);
        for (size_t i = 0; i < n; i++) {
            snprintf(node, sizeof node, "n%zu", i);
            if (registry_add_node(reg, "net", node, peers[i], 4026531999UL, err, sizeof err) < 0)
                _exit(2);
        }
        if (cgroup && registry_add_cgroup(reg, cgroup, err, sizeof err) < 0) _exit(3);
        _exit(registry_commit(reg, err, sizeof err) < 0 ? 4 : 0);
    }
    int status = -1;
    waitpid(child, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "dead run %s: child status %d", hint,
              status);
}

/* Rewrites the start time in every line of a run's nodes file (+delta). */
static void shift_start_times(const char *run_id, long long delta)
{
    char path[512], line[256], out[8192] = "", network[64], node[64];
    long pid;
    unsigned long long start;
    unsigned long ino;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s/nodes", root, run_id);
    CHECK((f = fopen(path, "r")) != NULL);
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %63s %ld %llu %lu", network, node, &pid, &start, &ino) == 5)
            snprintf(out + strlen(out), sizeof out - strlen(out), "%s %s %ld %llu %lu\n", network,
                     node, pid, start + delta, ino);
    fclose(f);
    CHECK((f = fopen(path, "w")) != NULL);
    if (f) fputs(out, f), fclose(f);
}

/* ---- tests ---- */

static void test_proc_identity(void)
{
    struct registry_proc self, wrong;
    CHECK(registry_proc_read(getpid(), &self) == 0 && self.start > 0);
    CHECK(registry_proc_alive(&self));
    wrong = self;
    wrong.start++;
    CHECK(!registry_proc_alive(&wrong)); /* a reused pid */
    wrong.start = 0;
    CHECK(!registry_proc_alive(&wrong)); /* unknown start: never acted on */

    pid_t child = fork();
    if (child == 0) _exit(0);
    struct registry_proc zombie;
    siginfo_t exited; /* wait until the child has exited, leaving it unreaped */
    CHECK(waitid(P_PID, (id_t)child, &exited, WEXITED | WNOWAIT) == 0);
    CHECK(registry_proc_read(child, &zombie) == 0); /* exited, not reaped */
    CHECK(!registry_proc_alive(&zombie));
    CHECK(registry_proc_open(&zombie) < 0);
    waitpid(child, NULL, 0);
    CHECK(registry_proc_read(child, &zombie) < 0 && errno == ESRCH);

    int fd = registry_proc_open(&self);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);

    struct registry_proc owner;
    const char *rest;
    CHECK(registry_dot_owner(".sweep-12-345-demo-2", &owner, &rest) == 0 && owner.pid == 12 &&
          owner.start == 345 && !strcmp(rest, "demo-2"));
    CHECK(registry_dot_owner(".tmp-7-8-0", &owner, &rest) == 0 && owner.pid == 7);
    /* a controller's ssh ControlPath directory (agent_group.c) */
    CHECK(registry_dot_owner(REGISTRY_SSH_PREFIX "9-10-aB3xYz", &owner, &rest) == 0 &&
          owner.pid == 9 && owner.start == 10 && !strcmp(rest, "aB3xYz"));
    CHECK(registry_dot_owner("demo", &owner, &rest) < 0);
    CHECK(registry_dot_owner(".sweep-x-1-a", &owner, &rest) < 0);
}

static void add_nodes(struct registry *a, pid_t peer)
{
    char err[512];

    CHECK(registry_add_node(a, "net", "n1", peer, 0, err, sizeof err) == 0);
    CHECK(registry_add_node(a, "net", "n2", getpid(), 4026532000UL, err, sizeof err) == 0);
    CHECK(registry_add_node(a, "other", "n2", getpid(), 0, err, sizeof err) == 0);
    CHECK(registry_add_node(a, "net", "n1", peer, 7, err, sizeof err) == 0); /* restart: replaces */
    CHECK(registry_add_node(a, "net", "bad name", peer, 0, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "bad name");
    CHECK(registry_add_node(a, "net", "gone", 999999999, 0, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "999999999");
    CHECK(registry_add_cgroup(a, "relative/path", err, sizeof err) < 0);
    CHECK(registry_commit(a, err, sizeof err) == 0);
}

/* Returns the number of nodes run "demo" lists. */
static size_t check_lookups(pid_t peer)
{
    char err[512];
    struct registry_list list;
    const struct registry_run_entry *run;
    const struct registry_node_entry *node;
    size_t n_nodes = 0;

    CHECK(registry_list(&list, err, sizeof err) == 0);
    CHECK(registry_find_run(&list, "demo", &run) == REGISTRY_MATCH_ONE && run->alive);
    if (run && (n_nodes = run->n_nodes) == 3) {
        CHECK(run->controller.pid == getpid());
        CHECK_STREQ(run->results, "/tmp/results");
        CHECK(registry_find_node(run, "n1", &node) == REGISTRY_MATCH_ONE &&
              node->peer.pid == peer && node->ns_inode == 7);
        CHECK(registry_find_node(run, "n2", &node) == REGISTRY_MATCH_AMBIGUOUS);
        CHECK(registry_find_node(run, "other/n2", &node) == REGISTRY_MATCH_ONE &&
              !strcmp(node->network, "other"));
        CHECK(registry_find_node(run, "n9", &node) == REGISTRY_MATCH_NONE);
    }
    CHECK(list.count == 3);
    CHECK(registry_find_run(&list, "dem", &run) == REGISTRY_MATCH_AMBIGUOUS);
    CHECK(registry_find_run(&list, "demo-", &run) == REGISTRY_MATCH_ONE &&
          !strcmp(run->id, "demo-2"));
    CHECK(registry_find_run(&list, "my", &run) == REGISTRY_MATCH_ONE);
    CHECK(registry_find_run(&list, "zzz", &run) == REGISTRY_MATCH_NONE);
    registry_list_free(&list);
    return n_nodes;
}

/* Live runs are never swept, nor their peers killed. */
static void check_live_not_swept(pid_t peer)
{
    char path[512];
    struct events e;
    struct registry_sweep_counts counts;

    CHECK(sweep(&e, &counts) == 0);
    CHECK(counts.live == 3 && counts.runs == 0 && counts.peers == 0);
    CHECK(kill(peer, 0) == 0);
    snprintf(path, sizeof path, "%s/demo-2", root);
    CHECK(exists(path));
}

static void test_open_and_list(void)
{
    char err[512], path[512];
    struct registry *a = registry_open("demo", "/tmp/results", err, sizeof err);
    struct registry *b = registry_open("demo", NULL, err, sizeof err);
    struct registry *c = registry_open("my run/x", NULL, err, sizeof err);
    pid_t peer = sleeper();

    CHECK_MSG(a && b && c, "%s", err);
    if (!a || !b || !c) return;
    CHECK_STREQ(registry_run_id(a), "demo");
    CHECK_STREQ(registry_run_id(b), "demo-2");
    CHECK_STREQ(registry_run_id(c), "my-run-x");
    snprintf(path, sizeof path, "%s/demo/run", root);
    CHECK(exists(path));

    add_nodes(a, peer);
    CHECK(check_lookups(peer) == 3);
    check_live_not_swept(peer);
    registry_remove_network(a, "other");
    CHECK(registry_commit(a, err, sizeof err) == 0);
    CHECK(check_lookups(peer) == 2);

    snprintf(path, sizeof path, "%s/demo", root);
    CHECK(registry_close_and_remove(a, err, sizeof err) == 0);
    CHECK(!exists(path));
    CHECK(registry_close_and_remove(b, err, sizeof err) == 0);
    CHECK(registry_close_and_remove(c, err, sizeof err) == 0);
    stop_sleeper(peer);
}

static void test_sweep_dead(void)
{
    char path[512];
    struct events e;
    struct registry_sweep_counts counts;
    pid_t survivor = sleeper(), reused = sleeper();

    register_dead_run("dead", &survivor, 1, NULL);
    register_dead_run("reuse", &reused, 1, NULL);
    shift_start_times("reuse", 1); /* as if pid `reused` now belonged to another process */

    CHECK(sweep(&e, &counts) == 0);
    CHECK_MSG(counts.runs == 2 && counts.peers == 1, "runs %u peers %u: %s", counts.runs,
              counts.peers, e.text);
    CHECK(reaped_by_kill(survivor)); /* listed, right start time: killed */
    CHECK(kill(reused, 0) == 0);     /* wrong start time: never hit */
    CHECK(waitpid(reused, NULL, WNOHANG) == 0);
    CHECK_CONTAINS(e.text, "node net/n0");
    CHECK_CONTAINS(e.text, "results in /tmp/results dir");
    snprintf(path, sizeof path, "%s/dead", root);
    CHECK(!exists(path));
    stop_sleeper(reused);
}

/* A controller pid that was reused makes the run dead however alive the pid
 * is; a registration whose process died is swept, a live one's is not. */
static void test_sweep_reused_controller(void)
{
    char path[512];
    struct events e;
    struct registry_sweep_counts counts;
    struct registry_proc self;
    FILE *f;

    registry_proc_read(getpid(), &self);
    snprintf(path, sizeof path, "%s/ghost", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/ghost/run", root);
    if ((f = fopen(path, "w")) != NULL) {
        fprintf(f, "hiernet-registry 1\ncontroller %ld %llu\nresults \n", (long)self.pid,
                self.start + 1);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/.tmp-999999998-1-0", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/.tmp-%ld-%llu-77", root, (long)self.pid, self.start);
    mkdir(path, 0755);
    CHECK(sweep(&e, &counts) == 0);
    CHECK_MSG(counts.runs == 2, "ghost and the dead .tmp: %s", e.text);
    snprintf(path, sizeof path, "%s/ghost", root);
    CHECK(!exists(path));
    snprintf(path, sizeof path, "%s/.tmp-999999998-1-0", root);
    CHECK(!exists(path));
    snprintf(path, sizeof path, "%s/.tmp-%ld-%llu-77", root, (long)self.pid, self.start);
    CHECK(exists(path)); /* its owner (we) is alive */
    rmdir(path);
}

/* A listed path that is not a cgroup is never removed, and the run stays
 * (released as .stale-) for a later sweep. */
static void test_sweep_refuses_non_cgroup(void)
{
    char dir[512], claimed[600];
    struct events e;
    struct registry_sweep_counts counts;
    struct registry_proc self;

    snprintf(dir, sizeof dir, "%s-hiernet-notacgroup", root);
    mkdir(dir, 0755);
    register_dead_run("fake", NULL, 0, dir);
    CHECK(sweep(&e, &counts) < 0);
    CHECK(counts.failures == 1 && counts.runs == 0);
    CHECK_CONTAINS(e.text, "not on a cgroup file system");
    CHECK(exists(dir));
    registry_proc_read(getpid(), &self);
    snprintf(claimed, sizeof claimed, "%s/.stale-%ld-%llu-fake", root, (long)self.pid, self.start);
    CHECK(exists(claimed));
    CHECK(sweep(&e, &counts) < 0); /* retried, still refused */
    CHECK(exists(claimed) && exists(dir));
    char err[256];
    registry_dir_remove(claimed, err, sizeof err);
    rmdir(dir);
}

/* ms to register n nodes in a run and commit it, or -1 on an error; with
 * check_big, the listing must find all n of them. */
static double register_ms(int n, int check_big)
{
    char err[512], node[32];
    struct registry *reg = registry_open("big", NULL, err, sizeof err);
    CHECK(reg != NULL);
    if (!reg) return -1;
    double t0 = mono_ms();
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        snprintf(node, sizeof node, "t%d", i);
        if (registry_add_node(reg, "big", node, getpid(), 4026532000UL + i, err, sizeof err) < 0) {
            CHECK_MSG(0, "%s", err);
            ok = 0;
        }
    }
    ok = ok && registry_commit(reg, err, sizeof err) == 0;
    CHECK(ok);
    double ms = mono_ms() - t0;
    if (check_big) {
        struct registry_list list;
        const struct registry_run_entry *run = NULL;
        const struct registry_node_entry *nd;
        CHECK(registry_list(&list, err, sizeof err) == 0);
        CHECK(registry_find_run(&list, "big", &run) == REGISTRY_MATCH_ONE && run->n_nodes == n);
        if (run) CHECK(registry_find_node(run, "t999", &nd) == REGISTRY_MATCH_ONE);
        registry_list_free(&list);
    }
    CHECK(registry_close_and_remove(reg, err, sizeof err) == 0);
    return ok ? ms : -1;
}

/* The cost grows about linearly with the nodes: 1000 take at most 40 times
 * what 100 take, plus 10 ms (measured 10-18 times on a loaded host;
 * quadratic would be 100 times). Relative to a baseline measured here,
 * best of 3 each, so that a loaded host (the parallel pass) cannot fail it
 * the way an absolute limit would. */
static void test_cost(void)
{
    double small = -1, big = -1;
    for (int rep = 0; rep < 3; rep++) {
        double s = register_ms(100, 0), b = register_ms(1000, rep == 0);
        if (s < 0 || b < 0) return;
        if (small < 0 || s < small) small = s;
        if (big < 0 || b < big) big = b;
    }
    printf("nodes registered and committed: 100 in %.2f ms, 1000 in %.2f ms (best of 3)\n", small,
           big);
    CHECK_MSG(big <= 40 * small + 10, "1000 nodes %.2f ms, 100 nodes %.2f ms", big, small);
}

/* With root and a cgroup cpu controller: a dead run's groups go, its listed
 * peer inside is killed, and a process it does not list is left alone.
 * Returns 0 when it could not run (main reports the skip). */
static int test_sweep_cgroups(void)
{
    struct emu_cgroup cg;
    char err[512], run_id[64], run_path[600], node_path[600], other_path[600];
    struct events e;
    struct registry_sweep_counts counts;

    if (geteuid() != 0 || emu_cgroup_detect(&cg, err, sizeof err) < 0 ||
        cg.version == EMU_CGROUP_NONE) {
        return 0;
    }
    snprintf(run_id, sizeof run_id, "regtest-%ld", (long)getpid());
    snprintf(run_path, sizeof run_path, "%s/" EMU_CGROUP_PREFIX "%s", cg.root, run_id);
    pid_t peer = sleeper(), stranger = sleeper();
    CHECK_MSG(emu_cgroup_run_create(&cg, run_id, err, sizeof err) == 0, "%s", err);
    CHECK(emu_cgroup_node_create(&cg, run_id, "n0", 0.5, node_path, sizeof node_path, err,
                                 sizeof err) == 0);
    CHECK(emu_cgroup_node_create(&cg, run_id, "n1", 0.5, other_path, sizeof other_path, err,
                                 sizeof err) == 0);
    CHECK(emu_cgroup_attach(node_path, peer, err, sizeof err) == 0);
    CHECK(emu_cgroup_attach(other_path, stranger, err, sizeof err) == 0);
    register_dead_run("cg", &peer, 1, run_path);

    CHECK(sweep(&e, &counts) < 0); /* the stranger keeps n1 and the run group busy */
    CHECK(reaped_by_kill(peer));
    CHECK(kill(stranger, 0) == 0);
    CHECK(!exists(node_path) && exists(other_path));
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "pids %ld", (long)stranger);
    CHECK_CONTAINS(e.text, pid_text);

    /* Once the stranger is gone, a later sweep finishes the released run. */
    stop_sleeper(stranger);
    CHECK(sweep(&e, &counts) == 0);
    CHECK_MSG(counts.runs == 1 && counts.cgroups == 2, "second sweep: %s", e.text);
    CHECK(!exists(run_path));
    emu_cgroup_run_remove(&cg, run_id, err, sizeof err);
    return 1;
}

int main(void)
{
    if (!registry_root_make(root, sizeof root, "/tmp/hiernet-test-registry-XXXXXX"))
        CHECK_SKIP("cannot create a temporary directory");
    signal(SIGCHLD, SIG_DFL);

    test_proc_identity();
    test_open_and_list();
    test_sweep_dead();
    test_sweep_reused_controller();
    test_sweep_refuses_non_cgroup();
    test_cost();
    int cgroups_ran = test_sweep_cgroups();

    registry_root_remove(root);
    /* A part left out is a skip, not a pass: the parts that ran still fail
     * the test when one of their checks failed. */
    int status = check_report();
    if (status || cgroups_ran) return status;
    CHECK_SKIP("the cgroup part not run: needs root and a cgroup cpu controller");
}
