/* agent_programs.c — programs in an agent's part's hosts (node:run and
 * node:spawn of a remote node, issue 20): `run` starts one with the
 * engine's netprog (the node's namespace, the part's registry entry so
 * that `hiernet clean` ends it after a SIGKILL), answered with its pid;
 * its end goes to the controller as a `program` notification with its
 * status and output; `signal` signals it (0: answers whether it runs,
 * kill(2)'s probe). The part's release kills what
 * is left (no notification: the controller's network is going too).
 * Owns: the programs' list and their entries. */
#include "app/agent_part_internal.h"

#include "controller/netprog.h"
#include "proto/msgmap.h"

#include <stdio.h>
#include <stdlib.h>

struct agent_program_entry {
    struct agent_part *p;
    uint64_t id; /* the controller's name for it */
    struct netprog *prog;
    struct agent_program_entry *next;
};

static void entry_unlink(struct agent_part *p, struct agent_program_entry *e)
{
    for (struct agent_program_entry **at = &p->programs; *at; at = &(*at)->next)
        if (*at == e) {
            *at = e->next;
            return;
        }
}

/* The program ended (r), or the part is released (NULL): no one to tell. */
static void on_program_done(void *ctx, const struct netprog_result *r)
{
    struct agent_program_entry *e = ctx;
    struct agent_part *p = e->p;
    entry_unlink(p, e);
    if (r) {
        size_t out_len =
            r->out_len < AGENT_PROGRAM_OUTPUT_MAX ? r->out_len : AGENT_PROGRAM_OUTPUT_MAX;
        size_t err_len =
            r->err_len < AGENT_PROGRAM_OUTPUT_MAX ? r->err_len : AGENT_PROGRAM_OUTPUT_MAX;
        struct agent_program x = {e->id,  r->status,         r->out,
                                  r->err, (uint32_t)out_len, (uint32_t)err_len};
        struct msgmap m;
        msgmap_init(&m);
        agent_wire_program(&m, &x);
        if (!msgmap_notify(&m, p->io.pk, agent_method_name(AGENT_PROGRAM)))
            part_log(p, "program %llu: its end was not sent: out of memory",
                     (unsigned long long)e->id);
        p->io.flush(p->io.ctx);
    }
    free(e);
}

static void answer_pid(struct agent_part *p, uint32_t msgid, pid_t pid)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_i64(&m, "pid", pid);
    msgmap_response(&m, p->io.pk, msgid);
    p->io.flush(p->io.ctx);
}

/* The part's host of whole index node, or -1 with the refusal in line. */
static long host_of(struct agent_part *p, uint64_t node, char *line, size_t len)
{
    const struct topo_part *part = part_model(p->run);
    long i = topo_part_own_node(part, node);
    if (i >= 0 && topo_node_local_host(&part->net->nodes[i])) return i;
    snprintf(line, len, "run: node %llu is not a host of this machine's part",
             (unsigned long long)node);
    return -1;
}

void agent_part_run(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    char line[AGENT_ERROR_MAX], err[600];
    struct agent_run r;
    if (p->state != PART_BUILT) {
        snprintf(line, sizeof line, "run: no part is built on this machine");
        return part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
    }
    if (agent_wire_read_run(params, &r, line, sizeof line) < 0)
        return part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
    long i = host_of(p, r.node, line, sizeof line);
    struct agent_program_entry *e = i >= 0 ? calloc(1, sizeof *e) : NULL;
    if (i >= 0 && !e) snprintf(line, sizeof line, "run: out of memory");
    if (e) {
        const char *name = part_model(p->run)->net->nodes[i].name;
        struct netrun *nr = part_netrun(p->run);
        struct netprog_place place = {part_registry(p->run), part_model(p->run)->net->name, (int)i,
                                      netrun_node_ns(nr, (int)i)};
        *e = (struct agent_program_entry){p, r.id, NULL, p->programs};
        e->prog = netprog_spawn(&p->program_list, p->loop, &place, r.argv, on_program_done, e, err,
                                sizeof err);
        if (e->prog) {
            p->programs = e;
            answer_pid(p, msgid, netprog_pid(e->prog));
        } else {
            snprintf(line, sizeof line, "run: node %s: %s", name, err);
            free(e);
            e = NULL;
        }
    }
    agent_run_free(&r);
    if (!e) part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
}

/* Signal 0, the liveness probe: {alive}. One not listed any more ended:
 * its `program` notification went before this answer. */
static void answer_alive(struct agent_part *p, uint32_t msgid, const struct agent_program_entry *e)
{
    struct msgmap m;
    msgmap_init(&m);
    msgmap_bool(&m, "alive", e && netprog_running(e->prog));
    msgmap_response(&m, p->io.pk, msgid);
    p->io.flush(p->io.ctx);
}

void agent_part_signal(struct agent_part *p, uint32_t msgid, const msgpack_object *params)
{
    char line[300];
    struct agent_signal s;
    if (agent_wire_read_signal(params, &s, line, sizeof line) < 0)
        return part_answer_error(p, msgid, NET_ERR_SCENARIO, NULL, NULL, line);
    struct agent_program_entry *e = p->programs;
    while (e && e->id != s.id)
        e = e->next;
    if (s.sig == 0) return answer_alive(p, msgid, e);
    if (e) netprog_kill(e->prog, (int)s.sig);
    /* one that ended already: its `program` notification is on its way */
    part_answer_done(p, msgid);
}

void agent_programs_stop(struct agent_part *p)
{
    netprog_list_release(&p->program_list); /* each one's done frees its entry */
}
