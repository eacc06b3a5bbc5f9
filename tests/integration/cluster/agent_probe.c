/* agent_probe.c — hn-agent-probe: starts `hiernet agent` on every other
 * machine of a hosts file with controller/agent_group.h, as a run does,
 * for the cluster tests (issue 20).
 *
 *   hn-agent-probe HOSTS [--version V] [--hold] [--hello-timeout S]
 *
 * Prints one line per agent once all are ready ("ready m2: control RTT
 * ..."), then a line "json [...]" (run.json's "machines" entries). With
 * --hold it keeps them (a ping a second) until its stdin closes or it gets
 * SIGTERM; then tears them down. --version sends V in hello instead of
 * this build's; --hello-timeout bounds the start (default 30 s). Exit 0,
 * or 3 with the failure on stderr. */
#include "controller/agent_group.h"
#include "controller/hosts.h"
#include "hiernet_version.h"

#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ev_loop *loop;
static struct agent_group *group;
static bool hold;
static int exit_code;
static ev_io stdin_watcher;
static ev_signal term_watcher;

static void on_down(void *ctx, struct agent_group *g)
{
    ev_break(loop, EVBREAK_ALL);
}

static void finish(void)
{
    ev_io_stop(loop, &stdin_watcher);
    ev_signal_stop(loop, &term_watcher);
    agent_group_teardown(group, on_down, NULL);
}

static void on_ready(void *ctx, struct agent_group *g, const char *error)
{
    char line[1024];
    if (error) {
        fprintf(stderr, "hn-agent-probe: %s\n", error);
        exit_code = 3;
        return finish();
    }
    for (size_t i = 0; i < agent_group_count(g); i++) {
        agent_group_describe(g, i, line, sizeof line);
        printf("ready %s\n", line);
    }
    printf("json [");
    agent_group_write_json(g, "probe", stdout);
    printf("]\n");
    fflush(stdout);
    if (!hold) finish();
}

static void on_stdin(EV_P_ ev_io *w, int revents)
{
    char buf[256];
    if (read(0, buf, sizeof buf) <= 0) finish();
}

static void on_term(EV_P_ ev_signal *w, int revents)
{
    finish();
}

int main(int argc, char **argv)
{
    struct agent_client_options o;
    struct topo_machines m;
    char err[512];
    agent_client_options_default(&o);
    o.version = HIERNET_AGENT_VERSION;
    o.run_id = "probe";
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--hold")) hold = true;
        if (!strcmp(argv[i], "--version") && i + 1 < argc) o.version = argv[++i];
        if (!strcmp(argv[i], "--hello-timeout") && i + 1 < argc)
            o.hello_timeout_s = atof(argv[++i]);
    }
    if (argc < 2 || hosts_load(argv[1], &m, err, sizeof err) < 0) {
        fprintf(stderr, "hn-agent-probe: %s\n", argc < 2 ? "usage: hn-agent-probe HOSTS" : err);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    loop = ev_default_loop(0);
    group = agent_group_start(loop, &m, &o, on_ready, NULL, err, sizeof err);
    topo_machines_free(&m);
    if (!group) {
        fprintf(stderr, "hn-agent-probe: %s\n", err);
        return 3;
    }
    ev_io_init(&stdin_watcher, on_stdin, 0, EV_READ);
    ev_signal_init(&term_watcher, on_term, SIGTERM);
    if (hold) ev_io_start(loop, &stdin_watcher);
    ev_signal_start(loop, &term_watcher);
    ev_run(loop, 0);
    agent_group_free(group);
    return exit_code;
}
