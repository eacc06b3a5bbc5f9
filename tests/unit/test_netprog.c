/* test_netprog.c — programs in a network's nodes as the engine owns them
 * (controller/netprog.h): a program's result reaches its done once, with
 * its status and both outputs; each running program is listed in the run
 * registry as "@prog<pid>" of its network and unlisted when it ends; a
 * node's signal reaches that node's programs only; a release kills what
 * is left, calls done with NULL and leaves the list and registry empty.
 * The liveness probe (signal 0): a program here is answered at once; one
 * of another machine waits for its agent's {alive} map, and an answer
 * without it, or no answer, is an error. */
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

/* ---- the liveness probe ---- */

struct probe_seen {
    int calls;
    bool running;
    char error[256];
};

static void on_probe(void *ctx, bool running, const char *error)
{
    struct probe_seen *s = ctx;
    s->calls++;
    s->running = running;
    snprintf(s->error, sizeof s->error, "%s", error ? error : "");
}

/* Another machine's agent as its hooks see it: the last question kept. */
struct fake_agent {
    uint64_t id;
    peer_reply_fn cb;
    void *cb_ctx;
    bool refuse;
};

static int fake_probe(void *ctx, uint64_t id, peer_reply_fn cb, void *cb_ctx, char *err,
                      size_t errlen)
{
    struct fake_agent *f = ctx;
    if (f->refuse) return snprintf(err, errlen, "machine 'm2': its agent is gone"), -1;
    *f = (struct fake_agent){id, cb, cb_ctx, false};
    return 0;
}

static void fake_signal(void *ctx, uint64_t id, int sig)
{
    (void)ctx, (void)id, (void)sig;
}

static void fake_forget(void *ctx, uint64_t id)
{
    (void)ctx, (void)id;
}

/* The agent answers the last question: {alive = alive}, or {} when
 * alive < 0. */
static void fake_answer(struct fake_agent *f, int alive)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, alive >= 0);
    if (alive >= 0) {
        msgpack_pack_str_with_body(&pk, "alive", 5);
        alive ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    }
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    CHECK(msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
    f->cb(f->cb_ctx, NULL, &u.data);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

/* Asks p; whether it was asked of the agent (seen then reset). */
static bool probe_asked(struct netprog *p, struct probe_seen *seen)
{
    char err[256];
    *seen = (struct probe_seen){0};
    return netprog_probe(p, on_probe, seen, err, sizeof err) == NETPROG_ASKED && seen->calls == 0;
}

static void test_probe(struct registry *reg)
{
    struct netprog_list list = {NULL};
    struct outcome here = {0}, there = {0};
    char *const sleeper[] = {"sleep", "600", NULL};
    struct netprog *local = spawn(&list, reg, 0, sleeper, &here);
    char err[256];
    struct probe_seen seen = {0};
    CHECK(local && netprog_probe(local, on_probe, &seen, err, sizeof err) == NETPROG_RUNNING);
    CHECK(seen.calls == 0 && (!local || netprog_running(local)));
    struct fake_agent f = {0};
    struct netprog_remote hooks = {7, fake_signal, fake_probe, fake_forget, &f};
    struct netprog *remote = netprog_remote_add(&list, 1, &hooks, on_done, &there, err, sizeof err);
    CHECK(remote && !netprog_running(remote));
    if (!remote) return;
    CHECK(probe_asked(remote, &seen) && f.id == 7);
    fake_answer(&f, 1);
    CHECK(seen.calls == 1 && seen.running && !seen.error[0]);
    CHECK(probe_asked(remote, &seen));
    fake_answer(&f, 0);
    CHECK(seen.calls == 1 && !seen.running && !seen.error[0]);
    CHECK(probe_asked(remote, &seen));
    fake_answer(&f, -1);
    CHECK(seen.calls == 1 && !seen.running);
    CHECK_STREQ(seen.error, "signal 0: the agent's answer has no boolean 'alive'");
    CHECK(probe_asked(remote, &seen));
    f.cb(f.cb_ctx, "machine 'm2': signal: the channel closed", NULL);
    CHECK(seen.calls == 1 && !seen.running);
    CHECK_STREQ(seen.error, "machine 'm2': signal: the channel closed");
    f.refuse = true;
    CHECK(netprog_probe(remote, on_probe, &seen, err, sizeof err) == -1);
    CHECK_STREQ(err, "machine 'm2': its agent is gone");
    netprog_remote_drop(remote);
    netprog_list_release(&list);
    CHECK(here.calls == 1 && here.released && there.calls == 0);
    reaper_wait(NULL);
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
    if (reg) test_probe(reg);
    if (reg) CHECK(registry_close_and_remove(reg, err, sizeof err) == 0);
    registry_root_remove(root);
    return check_report();
}
