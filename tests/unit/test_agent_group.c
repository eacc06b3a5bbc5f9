/* test_agent_group.c — controller/agent_group.c's countdowns with agents
 * whose ssh fails at once (a fake `ssh` on PATH that exits 255): the
 * failure names the machine and what ssh said, and the teardown's on_down
 * comes from the loop, never from inside agent_group_teardown, so that it
 * may free the group as lua/l_hosts.c does (it was called from inside,
 * with every agent already gone, and the teardown's loop then read the
 * freed group). And agents whose ssh never answers (the fake ssh reads
 * and says nothing, and outlives its stdin's EOF: FAKE_SSH=silent), torn
 * down before any hello: each ssh is ended at once (no request waits
 * behind a login that may never come; a closed stdin alone would leave
 * it running), so on_down comes from the loop well before the 10 s a
 * teardown request may wait, no fake ssh is left (by the pids they
 * wrote), and neither hello nor ready is told. */
#include "controller/agent_group.h"
#include "check.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SILENT_AGENTS 2

struct probe {
    struct ev_loop *loop;
    struct agent_group *group;
    bool in_teardown;
    int down_calls;
    bool down_inside; /* on_down ran inside agent_group_teardown */
    char error[1024];
};

static void on_down(void *ctx, struct agent_group *g)
{
    struct probe *p = ctx;
    p->down_calls++;
    p->down_inside = p->in_teardown;
    agent_group_free(g); /* what lua/l_hosts.c's on_agents_down does */
    p->group = NULL;
    ev_break(p->loop, EVBREAK_ALL);
}

static void on_ready(void *ctx, struct agent_group *g, const char *error)
{
    struct probe *p = ctx;
    snprintf(p->error, sizeof p->error, "%s", error ? error : "(ready)");
    p->in_teardown = true;
    agent_group_teardown(g, on_down, p);
    p->in_teardown = false;
}

static void on_deadline(EV_P_ ev_timer *w, int revents)
{
    ev_break(EV_A_ EVBREAK_ALL);
}

/* A directory with an executable `ssh` that says why it fails and exits
 * 255, or, FAKE_SSH=silent, writes its pid to FAKE_SSH_PIDS and reads its
 * stdin without a word (`read` is the shell's own: no child of it to leave
 * behind), then, at EOF, sleeps on: only a signal ends it. */
static void fake_ssh(char *dir, size_t cap)
{
    char path[512];
    snprintf(dir, cap, "/tmp/hn-agent-group-XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/ssh", dir);
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs("#!/bin/sh\nif [ \"$FAKE_SSH\" = silent ]; then\n"
          "  echo $$ >>\"$FAKE_SSH_PIDS\"\n"
          "  while read -r _; do :; done\n"
          "  exec sleep 600\n"
          "fi\n"
          "echo 'ssh: connect to host 10.9.9.9 port 22: Connection refused' >&2\n"
          "exit 255\n",
          f);
    fclose(f);
    chmod(path, 0755);
}

static void failed_start_then_teardown(size_t machines)
{
    struct topo_machines m = {.n = machines};
    struct topo_machine v[2] = {{.name = "m2", .address = "10.9.9.9"},
                                {.name = "m3", .address = "10.9.9.10"}};
    struct agent_client_options o;
    struct probe p = {.loop = ev_default_loop(0)};
    char err[512];
    ev_timer deadline;
    m.v = v;
    agent_client_options_default(&o);
    o.version = "test";
    p.group = agent_group_start(p.loop, &m, &o, on_ready, &p, err, sizeof err);
    CHECK_MSG(p.group != NULL, "%s", err);
    if (!p.group) return;
    ev_timer_init(&deadline, on_deadline, 20, 0);
    ev_timer_start(p.loop, &deadline);
    ev_run(p.loop, 0);
    ev_timer_stop(p.loop, &deadline);
    CHECK_MSG(p.down_calls == 1, "on_down called %d times", p.down_calls);
    CHECK(!p.down_inside);
    CHECK_CONTAINS(p.error, "machine 'm");
    CHECK_CONTAINS(p.error, "the agent's ssh exited with status 255: ssh: connect to host");
    agent_group_free(p.group); /* NULL unless on_down never came */
}

static void on_hello(void *ctx, struct agent_group *g, struct agent_client *ac)
{
    struct probe *p = ctx;
    snprintf(p->error, sizeof p->error, "hello from %s", agent_client_machine(ac));
}

static void on_ready_told(void *ctx, struct agent_group *g, const char *error)
{
    struct probe *p = ctx;
    snprintf(p->error, sizeof p->error, "ready told: %s", error ? error : "(ready)");
}

/* Reads the pids the silent fakes wrote so far into pids; their count. */
static int silent_pids(const char *file, pid_t *pids, int cap)
{
    FILE *f = fopen(file, "r");
    int n = 0;
    long v;
    if (!f) return 0;
    while (n < cap && fscanf(f, "%ld", &v) == 1)
        pids[n++] = (pid_t)v;
    fclose(f);
    return n;
}

struct pid_wait {
    ev_timer poll;
    const char *file;
    double give_up;
};

static void on_pid_poll(EV_P_ ev_timer *w, int revents)
{
    struct pid_wait *pw = (struct pid_wait *)w;
    pid_t pids[SILENT_AGENTS];
    if (silent_pids(pw->file, pids, SILENT_AGENTS) == SILENT_AGENTS || ev_now(EV_A) > pw->give_up)
        ev_break(EV_A_ EVBREAK_ALL);
}

/* Runs the loop until every silent fake has started reading its stdin
 * (its pid written), so that the teardown meets ssh's that would outlive
 * an EOF; 10 s at most. */
static void wait_silent_started(struct ev_loop *loop, const char *file)
{
    struct pid_wait pw = {.file = file, .give_up = ev_time() + 10};
    ev_timer_init(&pw.poll, on_pid_poll, 0.02, 0.02);
    ev_timer_start(loop, &pw.poll);
    ev_run(loop, 0);
    ev_timer_stop(loop, &pw.poll);
}

/* Checks that no fake ssh of file's pids runs; ends (SIGKILL, by pid) any
 * that does, so that a failing test leaves nothing behind. */
static void expect_silent_gone(const char *file)
{
    pid_t pids[SILENT_AGENTS];
    int n = silent_pids(file, pids, SILENT_AGENTS);
    CHECK_MSG(n == SILENT_AGENTS, "%d of %d fake ssh's wrote their pid", n, SILENT_AGENTS);
    for (int i = 0; i < n; i++) {
        bool gone = kill(pids[i], 0) < 0 && errno == ESRCH;
        CHECK_MSG(gone, "fake ssh %ld still runs after on_down", (long)pids[i]);
        if (!gone) kill(pids[i], SIGKILL);
    }
}

static void teardown_before_hello(const char *dir)
{
    struct topo_machines m = {.n = 2};
    struct topo_machine v[2] = {{.name = "m2", .address = "10.9.9.9"},
                                {.name = "m3", .address = "10.9.9.10"}};
    struct agent_client_options o;
    struct probe p = {.loop = ev_default_loop(0)};
    struct agent_group_hooks hooks = {on_hello, on_ready_told, &p};
    char err[512], pid_file[128];
    ev_timer deadline;
    m.v = v;
    agent_client_options_default(&o);
    o.version = "test";
    snprintf(pid_file, sizeof pid_file, "%s/pids", dir);
    setenv("FAKE_SSH", "silent", 1);
    setenv("FAKE_SSH_PIDS", pid_file, 1);
    p.group = agent_group_start_each(p.loop, &m, &o, &hooks, err, sizeof err);
    unsetenv("FAKE_SSH");
    unsetenv("FAKE_SSH_PIDS");
    CHECK_MSG(p.group != NULL, "%s", err);
    if (!p.group) return;
    wait_silent_started(p.loop, pid_file);
    double t0 = ev_time();
    p.in_teardown = true;
    agent_group_teardown(p.group, on_down, &p);
    p.in_teardown = false;
    ev_timer_init(&deadline, on_deadline, 20, 0);
    ev_timer_start(p.loop, &deadline);
    ev_run(p.loop, 0);
    ev_timer_stop(p.loop, &deadline);
    double took = ev_time() - t0;
    CHECK_MSG(p.down_calls == 1, "on_down called %d times", p.down_calls);
    /* a teardown request would have waited for the ping timeout, 10 s */
    CHECK_MSG(took < 5, "torn down in %.2f s", took);
    CHECK(!p.down_inside);
    CHECK_MSG(p.error[0] == '\0', "told: %s", p.error);
    agent_group_free(p.group); /* NULL unless on_down never came */
    expect_silent_gone(pid_file);
    unlink(pid_file);
}

int main(void)
{
    char dir[64], run_dir[64], path[4096];
    fake_ssh(dir, sizeof dir);
    snprintf(run_dir, sizeof run_dir, "/tmp/hn-agent-group-run-XXXXXX");
    if (!mkdtemp(run_dir)) abort();
    snprintf(path, sizeof path, "%s:%s", dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    setenv("PATH", path, 1);
    setenv("HIERNET_RUN_DIR", run_dir, 1);
    setenv(AGENT_ENV_REMOTE_BIN, "/nonexistent/hiernet", 1);
    failed_start_then_teardown(1);
    failed_start_then_teardown(2);
    teardown_before_hello(dir);
    snprintf(path, sizeof path, "%s/ssh", dir);
    unlink(path);
    rmdir(dir);
    CHECK_MSG(rmdir(run_dir) == 0, "%s: not empty or not there (the ssh control directory left?)",
              run_dir);
    return check_report();
}
