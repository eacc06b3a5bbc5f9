/* command_job.h — internals shared by the peer's command modules: the command
 * table entry, the job a command becomes, and the helpers for parsing params
 * (loop thread) and building results. The framework (dispatch, life cycle,
 * replies) is commands.c, with its table generated from proto/command_names.h;
 * the param helpers are command_args.c, the result helpers
 * command_result.c; the commands are in commands_stats.c (ping, stats),
 * commands_vec.c (vectors), commands_data.c (send, peers), commands_sync.c
 * (wait, batch, abort) and commands_ml.c / commands_ml_eval.c (learning). A command with
 * params parses into and runs from its own params struct through typed
 * handlers, behind job-level adapters that COMMAND_DEFINE generates (at the
 * end of this file). Not part of the peer's outside API.
 *
 * Kinds of commands (when they run):
 *   COMMAND_NOW     on the loop thread at once, not ordered with compute
 *                   (ping, peers, stats); inside a batch, at their turn
 *   COMMAND_WORKER  run() on the worker in FIFO order with all compute
 *   COMMAND_GATE    start() on the loop thread when the FIFO reaches the job,
 *                   which then holds the worker until it finishes (wait,
 *                   batch): commands queued after it start only after it
 *
 * Life of a job: parse() copies the params into the job's params (job->extra,
 * struct <command>_params) on the loop thread; the job starts (above); run()
 * packs result entries into job->result; after() (optional, loop thread) may
 * keep a job whose work goes on elsewhere (send waits for acks, a background
 * eval for its thread), which calls command_job_finish later.
 * command_job_finish hands the job to its continuation, job->complete: by
 * default the RPC reply to the request, in a batch the batch's next step.
 * cleanup() (optional) frees what parse/run left in the params, on every
 * path. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/msgmap.h"
#include "proto/protocol.h"
#include "peer/server.h"
#include "peer/store.h"
#include "peer/worker.h"

#define COMMAND_NAME_SIZE (STORE_NAME_MAX + 1)

struct command_job;
struct ml_state;

/* range = {offset, count} of a command's params. */
struct cmd_range {
    bool set;
    uint64_t offset, count;
};

/* A list of tensor names of a command's params; owned by the params. */
struct cmd_names {
    char (*v)[COMMAND_NAME_SIZE];
    uint32_t n;
};
struct devmirror;

enum command_kind { COMMAND_WORKER, COMMAND_NOW, COMMAND_GATE };

/* A command's behaviour; its name is its row in the dispatch table, which
 * proto/command_names.h generates. The hooks of a command with params are
 * adapters to its typed handlers (COMMAND_DEFINE, below). */
struct command {
    const char *const *keys; /* the params it takes, NULL-terminated */
    enum command_kind kind;
    bool (*parse)(struct command_job *job, struct proto_args *a); /* NULL: no params */
    /* WORKER: on the worker; NOW: on the loop thread. false: job->err says why. */
    bool (*run)(struct command_job *job);
    /* WORKER: loop thread, after run() succeeded; true keeps the job, which
     * then ends with command_job_finish. */
    bool (*after)(struct command_job *job);
    /* GATE: loop thread, at its turn; ends with command_job_finish. */
    void (*start)(struct command_job *job);
    void (*cleanup)(struct command_job *job);
    /* WORKER, optional: loop thread, with the worker claimed (worker.h
     * worker_claim: its state is the caller's): whether run() is brief
     * enough to run on the loop thread: a snapshot by reference, or one
     * pass over at most COMMAND_BRIEF_ELEMENTS elements (cmd_brief_pass below). */
    bool (*brief)(struct command_job *job);
    size_t extra_size; /* bytes of job->extra, zeroed */
    bool bare;         /* the result has ms, not cpu_ms and queue_ms (ping, peers) */
};

/* A row of the dispatch table. */
struct command_entry {
    const char *name;
    const struct command *cmd;
};

struct command_job {
    struct worker_job work; /* the timings: wall_ms, cpu_ms, queue_ms */
    const struct command *cmd;
    const char *name;           /* the command's, for errors */
    struct peer_server *server; /* loop thread only, except the immutable cfg */
    struct store *store;
    struct worker *worker;
    struct ml_state *ml;   /* worker thread only */
    struct devmirror *dev; /* worker thread only: the device and its tensor copies */
    uint32_t msgid;
    uint64_t received; /* the server's request count when its request arrived (a batch's
                        * commands: the batch's): orders it against abort{} (commands_sync.h) */
    double start_ms;   /* when the request arrived */
    /* Continuation: called once by command_job_finish (also when cancelled);
     * owns the job from then on and frees it with command_job_free. */
    void (*complete)(struct command_job *job);
    struct command_job *parent; /* the batch of a batch's command */
    uint32_t index;             /* its 1-based position there */
    bool holds_worker;          /* a gate that reached the head on its own */
    bool cancelled;             /* the peer is shutting down: no answer is wanted */
    bool skipped;               /* a batch's command not run: an earlier one failed */
    bool detached; /* a batch's send with nowait: the batch goes on once it is queued */
    /* The command's own params (struct <command>_params, cmd->extra_size
     * bytes), copied out of the request, which is gone when the job runs. */
    void *extra;
    /* Result: the map entries run() packed, besides ms, cpu_ms and queue_ms
     * (counted by the builder: proto/msgmap.h). */
    struct msgmap result;
    char err[512];
};

double command_now_ms(void);

/* ---- life cycle (loop thread) ---- */

/* The command called name (len bytes), or NULL. */
const struct command_entry *command_find(const char *name, uint32_t len);

/* A job for the command (extra zeroed, complete = the RPC reply to msgid);
 * NULL when out of memory. */
struct command_job *command_job_new(struct peer_server *s, const struct command_entry *e,
                                    uint32_t msgid);
/* Parses params (a msgpack map) into j: unknown keys are errors. false with
 * a->err set. */
bool command_job_parse(struct command_job *j, const msgpack_object *params, struct proto_args *a);
/* Starts a parsed job by its kind. A job of a batch (parent set) runs while
 * the batch holds the worker: worker jobs go ahead of the queue, gates start
 * at once. */
void command_job_start(struct command_job *j);
/* The job's work is over (j->err set on failure): releases the worker it
 * held and calls its continuation. */
void command_job_finish(struct command_job *j);
/* The job will not finish (the peer is shutting down): its continuation
 * runs with j->cancelled and answers nobody. */
void command_job_cancel(struct command_job *j);
void command_job_free(struct command_job *j);
/* The result map (ms, cpu_ms, queue_ms and the entries) into pk; false,
 * writing nothing, when out of memory. */
bool command_job_pack_result(const struct command_job *j, msgpack_packer *pk);
/* A batch's wait or batch must not hold the FIFO on its own. */
bool command_job_in_batch(const struct command_job *j);

/* ---- results and errors (worker, or the job's owner) ---- */
bool cmd_fail(struct command_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cmd_result_u64(struct command_job *j, const char *key, uint64_t value);
void cmd_result_f64(struct command_job *j, const char *key, double value);
void cmd_result_str(struct command_job *j, const char *key, const char *value);
/* A key whose value the caller packs next into j->result.pk (an array, a map). */
void cmd_result_key(struct command_job *j, const char *key);
/* The tensor called name, with a reference, or NULL with the error set. */
struct store_tensor *cmd_find(struct command_job *j, const char *name);
/* A new unpublished tensor, or NULL with the error set. */
struct store_tensor *cmd_new_tensor(struct command_job *j, const char *name, uint64_t size,
                                    bool zeroed);
/* The same for a virtual tensor (store.h): memory for `resident` elements. */
struct store_tensor *cmd_new_virtual_tensor(struct command_job *j, const char *name, uint64_t size,
                                            uint64_t resident, bool zeroed);
/* The elements [*offset, *offset + *n) of t the range selects (all of t
 * without one); false with the job's error set when out of bounds. */
bool cmd_range_of(struct command_job *j, const struct cmd_range *r, const struct store_tensor *t,
                  uint64_t *offset, uint64_t *n);
/* A command over `elements` elements of virtual tensor t on a node with a
 * device profile takes the time the profile gives for adding that many
 * (profile_add_seconds: memory bound), as the real tensor's pass would: a
 * parameter server's aggregation, which the adaptive-k paper names its
 * bottleneck. Nothing elsewhere (a real tensor's pass is timed by its CPU
 * time). */
void cmd_charge_virtual(struct command_job *j, const struct store_tensor *t, uint64_t elements);
/* command brief (struct command's brief hook): a command that streams
 * `passes` arrays of the elements of tensor name (those range selects; all
 * without one) is brief when passes x elements <= COMMAND_BRIEF_ELEMENTS.
 * Measured on the 2-core development host: the quickstart server's optim
 * (sgd with momentum over 101,770 parameters, 4 passes) took 0.08-0.46 ms
 * of CPU, scale over them (2 passes, as scale_brief counts) 0.03 ms, i.e.
 * 0.15-1.1 ns an element a pass, so the bound keeps a run on the loop
 * thread near half a millisecond: the order of the worker's wake-up it
 * saves (docs/fidelity.md "Overload").
 * A tensor not there is brief: run() fails at once. Loop thread. */
#define COMMAND_BRIEF_ELEMENTS (1u << 19)
bool cmd_brief_pass(struct command_job *j, const char *name, const struct cmd_range *r,
                    unsigned passes);
bool cmd_brief_elements(uint64_t elements, unsigned passes);
/* The resident part of those elements (store.h "Virtual tensors"), what a
 * computation works on: the elements left out are counted as skipped. */
bool cmd_span(struct command_job *j, const struct cmd_range *r, const struct store_tensor *t,
              float **start, uint64_t *n);
/* store_patch_begin with the error set ("tensor 'x' not found", ...). The
 * caller holds the store's write lock. */
bool cmd_patch_begin(struct command_job *j, const char *name, struct store_patch *p);

/* ---- params (loop thread; command_args.c) ---- */
bool cmd_arg_fail(struct proto_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A tensor name: 1 present, 0 absent, -1 wrong (a->err set). */
int cmd_arg_name(struct proto_args *a, const char *key, char *dst);
bool cmd_arg_required_name(struct proto_args *a, const char *key, char *dst);
/* A number that fits a float32. */
bool cmd_arg_float(struct proto_args *a, const char *key, bool required, double fallback,
                   double *out);
/* range = {offset, count}; absent leaves r->set false. */
bool cmd_arg_range(struct proto_args *a, struct cmd_range *r);
/* An integer in [min, max]; absent leaves *out as it is unless required. */
bool cmd_arg_int(struct proto_args *a, const char *key, bool required, int64_t min, int64_t max,
                 int64_t *out);
/* A boolean; absent leaves *out as it is. */
bool cmd_arg_bool(struct proto_args *a, const char *key, bool *out);
/* A string copied into dst (cap bytes); absent leaves dst as it is unless
 * required; empty is an error. */
bool cmd_arg_text(struct proto_args *a, const char *key, bool required, char *dst, size_t cap);
/* An array of tensor names appended to *names (grown with realloc, owned by
 * the caller): 1, 0 when absent, -1. An empty Lua table may arrive as an
 * empty map; it is an empty list. */
int cmd_arg_names(struct proto_args *a, const char *key, char (**names)[COMMAND_NAME_SIZE],
                  uint32_t *n);
/* The same into a cmd_names list. */
int cmd_arg_name_list(struct proto_args *a, const char *key, struct cmd_names *names);

/* ---- defining a command (its module) ----
 *
 * A command c with params has its keys in keys_c, its params in struct
 * c_params (job->extra) and the typed handlers of the hooks of struct
 * command it uses:
 *   bool c_parse(struct command_job *j, struct c_params *p, struct proto_args *a);
 *   bool c_run(struct command_job *j, struct c_params *p);
 *   bool c_after(struct command_job *j, struct c_params *p);
 *   void c_start(struct command_job *j, struct c_params *p);
 *   void c_cleanup(struct c_params *p);
 *   bool c_brief(struct command_job *j, struct c_params *p);
 * (p may be const where the handler only reads it). Then
 *   COMMAND_DEFINE(var, c, kind, (hooks...), more fields...);
 * defines `const struct command var`, each hook listed behind a generated
 * job-level adapter c_<hook>_job that hands its handler the job's params
 * (as a struct c_params *: a handler declared with another struct is an
 * incompatible-pointer warning);
 * more fields are designated initializers (.bare = true). E.g.
 *   COMMAND_DEFINE(data_cmd_send, send, COMMAND_WORKER, (parse, run, after, cleanup));
 * Code that reaches a job other than through its handlers (a batch from its
 * commands, the server's pending wait) gets its params with c_params_of,
 * which COMMAND_PARAMS_OF(c) defines. */

#define COMMAND_ADAPTER_parse(c)                                                                   \
    static bool c##_parse_job(struct command_job *j, struct proto_args *a)                         \
    {                                                                                              \
        struct c##_params *p = j->extra;                                                           \
        return c##_parse(j, p, a);                                                                 \
    }
#define COMMAND_ADAPTER_run(c)                                                                     \
    static bool c##_run_job(struct command_job *j)                                                 \
    {                                                                                              \
        struct c##_params *p = j->extra;                                                           \
        return c##_run(j, p);                                                                      \
    }
#define COMMAND_ADAPTER_after(c)                                                                   \
    static bool c##_after_job(struct command_job *j)                                               \
    {                                                                                              \
        struct c##_params *p = j->extra;                                                           \
        return c##_after(j, p);                                                                    \
    }
#define COMMAND_ADAPTER_start(c)                                                                   \
    static void c##_start_job(struct command_job *j)                                               \
    {                                                                                              \
        struct c##_params *p = j->extra;                                                           \
        c##_start(j, p);                                                                           \
    }
#define COMMAND_ADAPTER_brief(c)                                                                   \
    static bool c##_brief_job(struct command_job *j)                                               \
    {                                                                                              \
        struct c##_params *p = j->extra;                                                           \
        return c##_brief(j, p);                                                                    \
    }
#define COMMAND_ADAPTER_cleanup(c)                                                                 \
    static void c##_cleanup_job(struct command_job *j)                                             \
    {                                                                                              \
        struct c##_params *p = j->extra;                                                           \
        c##_cleanup(p);                                                                            \
    }

#define COMMAND_ADAPTER(c, hook) COMMAND_ADAPTER_##hook(c)
#define COMMAND_HOOK(c, hook) .hook = c##_##hook##_job,
/* m(c, hook) for each of 1 to 5 hooks. */
#define COMMAND_EACH(m, c, ...) COMMAND_EACH_PICK(__VA_ARGS__, 5, 4, 3, 2, 1, 0)(m, c, __VA_ARGS__)
#define COMMAND_EACH_PICK(h1, h2, h3, h4, h5, n, ...) COMMAND_EACH##n
#define COMMAND_EACH1(m, c, h) m(c, h)
#define COMMAND_EACH2(m, c, h, ...) m(c, h) COMMAND_EACH1(m, c, __VA_ARGS__)
#define COMMAND_EACH3(m, c, h, ...) m(c, h) COMMAND_EACH2(m, c, __VA_ARGS__)
#define COMMAND_EACH4(m, c, h, ...) m(c, h) COMMAND_EACH3(m, c, __VA_ARGS__)
#define COMMAND_EACH5(m, c, h, ...) m(c, h) COMMAND_EACH4(m, c, __VA_ARGS__)
#define COMMAND_UNPAREN(...) __VA_ARGS__

#define COMMAND_DEFINE(var, c, kind_, hooks, ...)                                                  \
    COMMAND_EACH(COMMAND_ADAPTER, c, COMMAND_UNPAREN hooks)                                        \
    const struct command var = {.keys = keys_##c,                                                  \
                                .kind = kind_,                                                     \
                                .extra_size = sizeof(struct c##_params),                           \
                                COMMAND_EACH(COMMAND_HOOK, c, COMMAND_UNPAREN hooks) __VA_ARGS__}

#define COMMAND_PARAMS_OF(c)                                                                       \
    static struct c##_params *c##_params_of(struct command_job *j)                                 \
    {                                                                                              \
        return j->extra;                                                                           \
    }
