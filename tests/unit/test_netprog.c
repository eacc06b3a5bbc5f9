/* test_netprog.c — programs in a network's nodes as the engine owns them
 * (controller/netprog.h): a program's result reaches its done once, with
 * its status and both outputs; each running program is listed in the run
 * registry as "@prog<pid>" of its network and unlisted when it ends; a
 * node's signal reaches that node's programs only; a release kills what
 * is left, calls done with NULL and leaves the list and registry empty. */
#include "controller/netprog.h"
#include "tests/unit/check.h"
#include "tests/unit/registry_root.h"

#include "common/clock.h"
#include "controller/reaper.h"
#include "controller/registry.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct outcome {
    int calls;
    bool released; /* done came with NULL */
    int status;
    char out[64], err[2048]; /* room for a sanitizer warning before the line */
};

static void on_done(void *ctx, const struct netprog_result *r)
{
    struct outcome *o = ctx;
    o->calls++;
    o->released = r == NULL;
    if (!r) return;
    o->status = r->status;
    snprintf(o->out, sizeof o->out, "%s", r->out);
    snprintf(o->err, sizeof o->err, "%s", r->err);
}

/* Runs the loop until o has its call (at most 10 s). */
static void run_until_done(struct ev_loop *loop, const struct outcome *o)
{
    double t0 = mono_s();
    while (o->calls == 0 && mono_s() - t0 < 10)
        ev_run(loop, EVRUN_ONCE);
    CHECK(o->calls == 1);
}

/* Whether run "np" lists the program pid under network "net". */
static bool listed(pid_t pid)
{
    char err[512], name[32];
    struct registry_list list;
    const struct registry_run_entry *run;
    const struct registry_node_entry *node;
    if (registry_list(&list, err, sizeof err) < 0) return false;
    snprintf(name, sizeof name, "net/" REGISTRY_PROGRAM_PREFIX "%d", (int)pid);
    bool found = registry_find_run(&list, "np", &run) == REGISTRY_MATCH_ONE &&
                 registry_find_node(run, name, &node) == REGISTRY_MATCH_ONE &&
                 node->peer.pid == pid;
    registry_list_free(&list);
    return found;
}

static struct netprog *spawn(struct netprog_list *list, struct registry *reg, int node,
                             char *const argv[], struct outcome *o)
{
    char err[512];
    struct netprog_place place = {reg, "net", node, -1};
    struct netprog *p = netprog_spawn(list, EV_DEFAULT, &place, argv, on_done, o, err, sizeof err);
    CHECK_MSG(p != NULL, "spawn: %s", err);
    return p;
}

static void test_programs(struct registry *reg)
{
    struct netprog_list list = {NULL};
    struct outcome ran = {0}, killed = {0}, left = {0};
    char *const shell[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    char *const sleeper[] = {"sleep", "600", NULL};
    struct netprog *a = spawn(&list, reg, 0, shell, &ran);
    struct netprog *b = spawn(&list, reg, 1, sleeper, &killed);
    struct netprog *c = spawn(&list, reg, 2, sleeper, &left);
    if (!a || !b || !c) return;
    pid_t pid_a = netprog_pid(a), pid_b = netprog_pid(b), pid_c = netprog_pid(c);
    CHECK(listed(pid_b) && listed(pid_c));

    run_until_done(EV_DEFAULT, &ran);
    CHECK(!ran.released && ran.status == 3);
    CHECK_STREQ(ran.out, "out\n");
    /* the last line: a sanitizer build's child may warn on stderr before its exec */
    size_t n = strlen(ran.err);
    CHECK_MSG(n >= 4 && strcmp(ran.err + n - 4, "err\n") == 0, "stderr: \"%s\"", ran.err);
    CHECK(!listed(pid_a));

    netprog_list_signal(&list, 1, SIGKILL); /* node 1's program only */
    run_until_done(EV_DEFAULT, &killed);
    CHECK(!killed.released && killed.status == 128 + SIGKILL);
    CHECK(!listed(pid_b));
    CHECK(left.calls == 0 && kill(pid_c, 0) == 0);

    netprog_list_release(&list);
    CHECK(left.calls == 1 && left.released);
    CHECK(list.head == NULL);
    CHECK(!listed(pid_c));
    reaper_wait(NULL);
    CHECK(kill(pid_c, 0) < 0);
}

static char root[64];

int main(void)
{
    if (!registry_root_make(root, sizeof root, "/tmp/hiernet-test-netprog-XXXXXX"))
        CHECK_SKIP("cannot create a temporary directory");
    char err[512];
    struct registry *reg = registry_open("np", NULL, err, sizeof err);
    CHECK_MSG(reg != NULL, "registry_open: %s", err);
    if (reg) test_programs(reg);
    if (reg) CHECK(registry_close_and_remove(reg, err, sizeof err) == 0);
    registry_root_remove(root);
    return check_report();
}
