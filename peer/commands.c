/* commands.c — the framework of the peer's control commands (see
 * commands.h): the command table (generated from proto/command_names.h),
 * dispatch, the life cycle of jobs (command_job.h) and their replies. The
 * helpers commands use to build results are in command_result.c, those
 * that parse params in command_args.c; the commands themselves in
 * commands_stats.c, commands_vec.c, commands_data.c, commands_sync.c,
 * commands_traffic.c, commands_ml.c and commands_ml_eval.c. */
#include "peer/commands.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/container.h"
#include "peer/command_job.h"
#include "proto/command_names.h"
#include "peer/commands_data.h"
#include "peer/commands_stats.h"
#include "peer/commands_sync.h"
#include "peer/commands_traffic.h"
#include "peer/commands_vec.h"
#include "peer/commands_ml.h"

/* Bytes of a client-supplied method or key name quoted in an error. */
#define COMMAND_QUOTE_MAX 64

double command_now_ms(void)
{
    return mono_ms();
}

/* ---- the table ---- */

/* Every command (proto/command_names.h), ping first: it is the hot one. */
#define COMMAND_ROW(name, definition, face) {#name, &definition},
static const struct command_entry command_table[] = {PEER_COMMANDS(COMMAND_ROW)};
#undef COMMAND_ROW

const struct command_entry *command_find(const char *name, uint32_t len)
{
    for (size_t i = 0; i < sizeof command_table / sizeof command_table[0]; i++)
        if (proto_method_is(command_table[i].name, name, len)) return &command_table[i];
    return NULL;
}

/* ---- results and replies ---- */

/* Only worker jobs are compute that can overrun (the overload account,
 * controller/overload.h): gates (wait, batch) and loop-thread commands say
 * nothing of it. */
static bool command_reports_overrun(const struct command_job *j)
{
    return !j->cmd->bare && j->cmd->kind == COMMAND_WORKER;
}

/* The whole result: the timings, then the entries run() packed. Durations
 * in emulated time (divided by the dilation); cpu_ms is work, not a
 * duration: the host's CPU time, which the emulated device spends in
 * cpu_ms / speed emulated ms. */
static void command_result(const struct command_job *j, struct msgmap *m)
{
    msgmap_init(m);
    msgmap_f64(m, "ms", peer_emulated_ms(j->server, j->work.wall_ms));
    if (!j->cmd->bare) {
        msgmap_f64(m, "cpu_ms", j->work.cpu_ms);
        msgmap_f64(m, "queue_ms", peer_emulated_ms(j->server, j->work.queue_ms));
    }
    if (command_reports_overrun(j)) {
        msgmap_bool(m, "overrun", j->work.overrun);
        /* Host time, like cpu_ms: what the overload account judges by. */
        msgmap_f64(m, "run_delay_ms", j->work.run_delay_ms);
        msgmap_bool(m, "starved", j->work.starved);
    }
    msgmap_append(m, &j->result);
}

bool command_job_pack_result(const struct command_job *j, msgpack_packer *pk)
{
    struct msgmap m;
    command_result(j, &m);
    return msgmap_end(&m, pk);
}

/* An error reply says the cause only: the client knows which command it
 * sent and names it, with the node, once (the controller: "node 'x':
 * command: cause", lua/l_node.c). */
static void reply_error(struct peer_server *s, uint32_t msgid, const char *cause)
{
    proto_pack_error(&s->pk, msgid, cause);
}

/* The default continuation: the response to the request. */
static void command_reply(struct command_job *j)
{
    struct peer_server *s = j->server;
    struct msgmap m;
    if (!j->cancelled && !j->err[0]) {
        command_result(j, &m);
        if (!msgmap_response(&m, &s->pk, j->msgid)) cmd_fail(j, "out of memory packing the result");
    }
    if (!j->cancelled && j->err[0]) reply_error(s, j->msgid, j->err);
    /* else answered, or cancelled: nobody is listening any more */
    command_job_free(j);
}

/* ---- life cycle ---- */

/* The job and its command's extra params in one allocation. */
struct command_job *command_job_new(struct peer_server *s, const struct command_entry *e,
                                    uint32_t msgid)
{
    const struct command *cmd = e->cmd;
    size_t head =
        (sizeof(struct command_job) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
    struct command_job *j = calloc(1, head + cmd->extra_size);
    if (!j) return NULL;
    j->cmd = cmd;
    j->name = e->name;
    j->server = s;
    j->store = s->store;
    j->worker = s->worker;
    j->ml = s->ml;
    j->dev = s->dev;
    j->msgid = msgid;
    j->received = s->commands;
    j->start_ms = command_now_ms();
    j->complete = command_reply;
    j->extra = cmd->extra_size ? (char *)j + head : NULL;
    msgmap_init(&j->result);
    return j;
}

void command_job_free(struct command_job *j)
{
    if (!j) return;
    if (j->cmd->cleanup) j->cmd->cleanup(j);
    msgmap_free(&j->result);
    free(j);
}

/* Rejects keys the command does not take: a typo ("alhpa") silently using a
 * default would quietly change an experiment. */
static bool params_known(const struct command *cmd, const msgpack_object *params,
                         struct proto_args *a)
{
    for (uint32_t i = 0; i < params->via.map.size; i++) {
        const msgpack_object *key = &params->via.map.ptr[i].key;
        if (key->type != MSGPACK_OBJECT_STR)
            return cmd_arg_fail(a, "param names must be strings, got %s",
                                proto_type_name(key->type));
        const char *const *k = cmd->keys;
        while (*k && (strlen(*k) != key->via.str.size ||
                      memcmp(*k, key->via.str.ptr, key->via.str.size) != 0))
            k++;
        if (!*k) {
            int len =
                key->via.str.size < COMMAND_QUOTE_MAX ? (int)key->via.str.size : COMMAND_QUOTE_MAX;
            return cmd_arg_fail(a, "unknown param '%.*s'", len, len ? key->via.str.ptr : "");
        }
    }
    return true;
}

bool command_job_parse(struct command_job *j, const msgpack_object *params, struct proto_args *a)
{
    proto_args_init(a, params);
    return params_known(j->cmd, params, a) && (!j->cmd->parse || j->cmd->parse(j, a));
}

bool command_job_in_batch(const struct command_job *j)
{
    return j->parent != NULL;
}

void command_job_finish(struct command_job *j)
{
    if (j->holds_worker) {
        j->holds_worker = false;
        worker_release(j->worker);
    }
    j->complete(j);
}

void command_job_cancel(struct command_job *j)
{
    /* The worker may be gone already: a cancelled gate releases nothing. */
    j->holds_worker = false;
    j->cancelled = true;
    j->complete(j);
}

/* On the worker. A batch's commands queued behind one that failed there
 * are skipped (commands_sync.h). */
static void command_job_run(struct worker_job *work)
{
    struct command_job *j = container_of(work, struct command_job, work);
    if (j->parent && sync_batch_stopped(j->parent)) {
        j->skipped = true;
        return;
    }
    if (!j->cmd->run(j) && j->parent) sync_batch_stop(j->parent);
}

/* A worker job has run, or a gate reached the head of the queue. */
static void command_job_done(struct worker_job *work, bool cancelled)
{
    struct command_job *j = container_of(work, struct command_job, work);
    if (cancelled) {
        command_job_cancel(j);
    } else if (!work->run) {
        j->holds_worker = true;
        j->cmd->start(j);
    } else if (j->err[0] || j->skipped || !j->cmd->after || !j->cmd->after(j)) {
        command_job_finish(j);
    } /* else kept by after() */
}

/* Runs a brief worker command on the loop thread when the worker is idle
 * and its budget has no slack to hide a wake-up in (worker.h worker_claim):
 * a server's aggregation or a send's snapshot then starts when it arrives,
 * not when the worker's thread gets a core. Not on a peer with a device
 * profile, whose budget may be the profile's (longer: a wait the loop must
 * not do), nor while the peer is stopping. */
static bool command_job_run_here(struct command_job *j)
{
    if (!j->cmd->brief || j->server->cfg.profile) return false;
    if (!worker_claim(j->worker, j->parent != NULL)) return false;
    if (!j->cmd->brief(j)) {
        worker_unclaim(j->worker);
        return false;
    }
    worker_run_here(j->worker, &j->work);
    command_job_done(&j->work, false);
    return true;
}

void command_job_start(struct command_job *j)
{
    j->work.done = command_job_done;
    switch (j->cmd->kind) {
    case COMMAND_NOW:
        j->start_ms = command_now_ms();
        j->cmd->run(j);
        j->work.wall_ms = command_now_ms() - j->start_ms;
        command_job_finish(j);
        return;
    case COMMAND_WORKER:
        j->work.run = command_job_run;
        if (command_job_run_here(j)) return;
        if (j->parent)
            worker_submit_held(j->worker, &j->work);
        else
            worker_submit(j->worker, &j->work);
        return;
    case COMMAND_GATE:
        j->work.run = NULL;
        if (!j->parent) {
            worker_submit(j->worker, &j->work);
            return;
        }
        j->start_ms = command_now_ms();
        j->cmd->start(j);
        return;
    }
}

/* ---- dispatch ---- */

void commands_dispatch(struct peer_server *s, const struct proto_msg *msg)
{
    s->commands++;
    const struct command_entry *cmd = command_find(msg->method, msg->method_len);
    if (!cmd) {
        char message[128];
        int len = msg->method_len < COMMAND_QUOTE_MAX ? (int)msg->method_len : COMMAND_QUOTE_MAX;
        snprintf(message, sizeof message, "unknown method '%.*s'", len, len ? msg->method : "");
        proto_pack_error(&s->pk, msg->msgid, message);
        return;
    }
    struct command_job *j = command_job_new(s, cmd, msg->msgid);
    if (!j) {
        reply_error(s, msg->msgid, "out of memory");
        return;
    }
    struct proto_args a;
    if (!command_job_parse(j, msg->params, &a)) {
        reply_error(s, msg->msgid, a.err);
        command_job_free(j);
        return;
    }
    command_job_start(j);
}
