/* command_job.h — internals shared by the peer's command modules: the command
 * table entry, the job a command becomes, and the helpers for parsing params
 * (loop thread) and building results (worker). Implemented in commands.c;
 * used by commands.c (vector commands), ml.c (learning commands) and
 * commands_data.c (send, peers). Not part of the peer's outside API.
 *
 * Life of a job: parse() copies the params into the job on the loop thread;
 * run() executes on the worker and packs result entries into job->body;
 * after() (optional) runs on the loop thread when run() succeeded and may
 * keep the job to answer later with command_job_reply (send waits for the
 * receiver's ack); cleanup() (optional) frees what parse/run left in
 * job->extra, on every path. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peer/protocol.h"
#include "peer/server.h"
#include "peer/store.h"
#include "peer/worker.h"

#define COMMAND_NAME_SIZE (STORE_NAME_MAX + 1)

struct command_job;
struct ml_state;
struct devmirror;

struct command {
    const char *name;
    const char *const *keys; /* the params it takes, NULL-terminated */
    /* Commands answered on the loop thread have reply_inline; the others
     * parse on the loop thread and run on the worker. */
    void (*reply_inline)(struct peer_server *s, uint32_t msgid, double start_ms,
                         struct proto_args *a);
    bool (*parse)(struct command_job *job, struct proto_args *a);
    bool (*run)(struct command_job *job); /* false: job->err says why */
    bool (*after)(struct command_job *job);
    void (*cleanup)(struct command_job *job);
    size_t extra_size; /* bytes of job->extra, zeroed */
};

struct command_job {
    struct worker_job work;
    const struct command *cmd;
    struct peer_server *server; /* loop thread only, except the immutable cfg */
    struct store *store;
    struct worker *worker;
    struct ml_state *ml;   /* worker thread only */
    struct devmirror *dev; /* worker thread only: the device and its tensor copies */
    uint32_t msgid;
    /* Params of the vector commands, copied out of the request, which is gone
     * when the job runs. Tensor names: x is tensor{name}, copy{src},
     * sum{out}, read{tensor} and the x of axpy/scale/norm/dot; y is
     * copy{dst} and the y of axpy/dot. */
    char x[COMMAND_NAME_SIZE], y[COMMAND_NAME_SIZE];
    char (*names)[COMMAND_NAME_SIZE]; /* sum{inputs}, drop{name, names}; owned */
    uint32_t n_names;
    double number;  /* alpha, or tensor{fill} */
    uint64_t count; /* tensor{size} */
    bool has_range;
    uint64_t range_offset, range_count;
    void *extra; /* cmd->extra_size bytes for the command's own params */
    /* Result: the map entries run() packed, besides ms, cpu_ms and queue_ms. */
    struct peer_buffer body;
    msgpack_packer pk;
    uint32_t n_entries;
    char err[512];
};

double command_now_ms(void);

/* ---- results and errors (worker, or the job's owner) ---- */
bool cmd_fail(struct command_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cmd_result_u64(struct command_job *j, const char *key, uint64_t value);
void cmd_result_f64(struct command_job *j, const char *key, double value);
void cmd_result_str(struct command_job *j, const char *key, const char *value);
/* The tensor called name, with a reference, or NULL with the error set. */
struct store_tensor *cmd_find(struct command_job *j, const char *name);
/* A new unpublished tensor, or NULL with the error set. */
struct store_tensor *cmd_new_tensor(struct command_job *j, const char *name, uint64_t size,
                                    bool zeroed);
/* The elements of t the job's range selects (all of t without a range). */
bool cmd_span(struct command_job *j, const struct store_tensor *t, float **start, uint64_t *n);
/* store_patch_begin with the error set ("tensor 'x' not found", ...). The
 * caller holds the store's write lock. */
bool cmd_patch_begin(struct command_job *j, const char *name, struct store_patch *p);

/* Packs the response of a job that after() kept and frees the job. */
void command_job_reply(struct command_job *j);
/* Frees a kept job without answering (the peer is shutting down). */
void command_job_discard(struct command_job *j);

/* ---- params (loop thread) ---- */
bool cmd_arg_fail(struct proto_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A tensor name: 1 present, 0 absent, -1 wrong (a->err set). */
int cmd_arg_name(struct proto_args *a, const char *key, char *dst);
bool cmd_arg_required_name(struct proto_args *a, const char *key, char *dst);
/* A number that fits a float32. */
bool cmd_arg_float(struct proto_args *a, const char *key, bool required, double fallback,
                   double *out);
/* range = {offset, count} into job->has_range/range_offset/range_count. */
bool cmd_arg_range(struct command_job *j, struct proto_args *a);
/* An integer in [min, max]; absent leaves *out as it is unless required. */
bool cmd_arg_int(struct proto_args *a, const char *key, bool required, int64_t min, int64_t max,
                 int64_t *out);
/* A string copied into dst (cap bytes); absent leaves dst as it is unless
 * required; empty is an error. */
bool cmd_arg_text(struct proto_args *a, const char *key, bool required, char *dst, size_t cap);
