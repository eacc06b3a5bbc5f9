/* netprog.c — programs run in a network's nodes (see netprog.h). */
#include "controller/netprog.h"

#include "controller/log.h"
#include "controller/proc.h"
#include "controller/registry.h"
#include "emu/netns.h"
#include "proto/protocol.h"
#include "topo/network.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

struct netprog {
    struct netprog_list *list;
    struct proc *proc;
    struct registry *registry;
    int node;
    char network[TOPO_NAME_MAX];
    char registry_name[32]; /* "@prog<pid>" while listed in the run registry */
    netprog_done_fn done;
    void *ctx;
    struct netprog *prev, *next;
    bool remote; /* another machine's agent runs it: proc NULL */
    struct netprog_remote hooks;
    pid_t remote_pid;
};

static void list_link(struct netprog_list *list, struct netprog *p)
{
    p->list = list;
    p->prev = NULL;
    p->next = list->head;
    if (list->head) list->head->prev = p;
    list->head = p;
}

static void list_unlink(struct netprog *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        p->list->head = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

/* The namespace the registry's sweep looks for the program's group in. */
static unsigned long namespace_inode(int netns_fd)
{
    if (netns_fd >= 0) return emu_netns_inode(netns_fd);
    struct stat st; /* backend none: the host's own namespace */
    return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

static void registry_list_program(struct netprog *p, int netns_fd)
{
    char err[256];
    if (!p->registry) return;
    pid_t pid = proc_pid(p->proc);
    snprintf(p->registry_name, sizeof p->registry_name, REGISTRY_PROGRAM_PREFIX "%d", (int)pid);
    if (registry_add_node(p->registry, p->network, p->registry_name, pid, namespace_inode(netns_fd),
                          err, sizeof err) < 0 ||
        registry_commit(p->registry, err, sizeof err) < 0)
        ctl_log("warning: %s", err);
}

static void registry_unlist_program(struct netprog *p)
{
    char err[256];
    if (!p->registry || !p->registry_name[0]) return;
    registry_remove_node(p->registry, p->network, p->registry_name);
    p->registry_name[0] = '\0';
    if (registry_commit(p->registry, err, sizeof err) < 0) ctl_log("warning: %s", err);
}

/* Off the list and the registry, then done (the result lives in the
 * proc's buffers), then the process is released. */
static void finish(struct netprog *p, const struct netprog_result *result)
{
    list_unlink(p);
    registry_unlist_program(p);
    if (p->done) p->done(p->ctx, result);
    proc_free(p->proc); /* SIGKILLs its group if it still runs; never waits */
    if (p->remote) p->hooks.forget(p->hooks.ctx, p->hooks.id);
    free(p);
}

/* The program ended: we are its proc's last callback, so the proc may go. */
static void on_proc_done(void *ctx, struct proc *proc, int status, const char *out, size_t out_len,
                         const char *err, size_t err_len)
{
    (void)proc;
    struct netprog_result r = {status, out, err, out_len, err_len};
    finish(ctx, &r);
}

struct netprog *netprog_spawn(struct netprog_list *list, struct ev_loop *loop,
                              const struct netprog_place *place, char *const argv[],
                              netprog_done_fn done, void *ctx, char *err, size_t errlen)
{
    struct netprog *p = calloc(1, sizeof *p);
    if (!p) return snprintf(err, errlen, "out of memory"), NULL;
    struct proc_spec spec = {place->netns_fd, NULL, false};
    p->proc = proc_spawn(loop, &spec, argv, on_proc_done, p, err, errlen);
    if (!p->proc) {
        free(p);
        return NULL;
    }
    p->registry = place->registry;
    p->node = place->node;
    snprintf(p->network, sizeof p->network, "%s", place->network);
    p->done = done;
    p->ctx = ctx;
    list_link(list, p);
    registry_list_program(p, place->netns_fd);
    return p;
}

struct netprog *netprog_remote_add(struct netprog_list *list, int node,
                                   const struct netprog_remote *remote, netprog_done_fn done,
                                   void *ctx, char *err, size_t errlen)
{
    struct netprog *p = calloc(1, sizeof *p);
    if (!p) return snprintf(err, errlen, "out of memory"), NULL;
    p->node = node;
    p->done = done;
    p->ctx = ctx;
    p->remote = true;
    p->hooks = *remote;
    list_link(list, p);
    return p;
}

void netprog_remote_started(struct netprog *p, pid_t pid)
{
    p->remote_pid = pid;
}

void netprog_remote_drop(struct netprog *p)
{
    p->done = NULL;
    finish(p, NULL);
}

void netprog_remote_ended(struct netprog *p, const struct netprog_result *result)
{
    finish(p, result);
}

pid_t netprog_pid(const struct netprog *p)
{
    return p->remote ? p->remote_pid : proc_pid(p->proc);
}

void netprog_kill(struct netprog *p, int sig)
{
    if (p->remote)
        p->hooks.signal(p->hooks.ctx, p->hooks.id, sig);
    else if (!proc_finished(p->proc))
        proc_kill(p->proc, sig);
}

bool netprog_running(const struct netprog *p)
{
    return !p->remote && !proc_finished(p->proc);
}

struct probe_wait {
    netprog_probe_fn cb;
    void *ctx;
};

/* The agent's answer to signal 0: {alive = bool}. */
static void on_probe_answer(void *ctx, const char *error, const msgpack_object *result)
{
    struct probe_wait *w = ctx;
    bool alive = false;
    if (!error && !result) error = "signal 0: the agent answered nothing";
    if (!error) {
        struct proto_args a;
        proto_args_init(&a, result);
        if (proto_arg_bool(&a, "alive", &alive) != 1)
            error = "signal 0: the agent's answer has no boolean 'alive'";
    }
    w->cb(w->ctx, alive, error);
    free(w);
}

int netprog_probe(struct netprog *p, netprog_probe_fn cb, void *ctx, char *err, size_t errlen)
{
    if (!p->remote) return netprog_running(p) ? NETPROG_RUNNING : NETPROG_ENDED;
    struct probe_wait *w = malloc(sizeof *w);
    if (!w) return snprintf(err, errlen, "out of memory"), -1;
    *w = (struct probe_wait){cb, ctx};
    if (p->hooks.probe(p->hooks.ctx, p->hooks.id, on_probe_answer, w, err, errlen) < 0) {
        free(w);
        return -1;
    }
    return NETPROG_ASKED;
}

void netprog_list_signal(struct netprog_list *list, int node, int sig)
{
    for (struct netprog *p = list->head; p; p = p->next)
        if (node < 0 || p->node == node) netprog_kill(p, sig);
}

void netprog_list_release(struct netprog_list *list)
{
    while (list->head) {
        if (list->head->proc) proc_set_done(list->head->proc, NULL, NULL); /* no longer heard */
        finish(list->head, NULL);
    }
}
