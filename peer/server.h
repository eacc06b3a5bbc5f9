/* server.h — the peer server's event-loop side (hiernet-peer).
 *
 * Owns the control channel: reads MessagePack-RPC requests from the control
 * fd into a proto_reader, hands them to commands_dispatch, and buffers the
 * responses, which it writes without blocking (a write watcher takes over
 * when the socket is full, and reading pauses while too much output is
 * pending). Also owns the tensor store, the worker, the learning state
 * (commands_ml.h) and the data plane, whose received tensors it announces to the
 * controller as `recv` notifications and to the command modules (struct
 * peer_module: what a family of commands keeps between its commands, which
 * the server holds without knowing any command). Everything here runs on
 * the loop thread. The server stops its loop on EOF of the control fd (exit status 0) or when
 * the stream is unusable (status 1). */
#pragma once

#include <ev.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/growbuf.h"
#include "proto/protocol.h"

struct store;
struct worker;
struct dataplane;
struct ml_state;
struct kern_ctx;
struct devmirror;
struct peer_server;

struct peer_config {
    int control_fd;
    const char *node; /* the node's name, for logs and stats */
    const char *addr; /* data-plane address; NULL when not given */
    int data_port;    /* 0: any free port (stats reports it as data_port) */
    int threads;      /* BLAS threads */
    bool data_auth;   /* data connections must prove the network's secret (data_auth.h) */
    double speed;
    double dilation;          /* >= 1: real time runs this many times slower than emulated time;
                                 every duration the peer reports is emulated (real / dilation) */
    struct kern_ctx *kern;    /* the compute device, opened by the caller, who closes it after
                                 the server is destroyed */
    const char *profile_name; /* --profile, or NULL */
    /* Its device profile (kernels/profile.h), loaded and freed by the caller
     * around the server; NULL without one. */
    struct device_profile *profile;
};

/* What a family of commands keeps in a server between its commands (a
 * pending wait, background flows, the background evaluator). The family
 * registers its state on first use; the server holds it opaquely and calls
 * the hooks without knowing any command. Hooks may be NULL. */
struct peer_module {
    const char *name;
    /* Loop thread: the data plane recorded a received tensor. */
    void (*on_arrival)(struct peer_server *s, void *state);
    /* Shutdown, once the compute worker has stopped and before the
     * background worker and the data plane go: cancel what still waits. */
    void (*on_shutdown)(struct peer_server *s, void *state);
    /* Frees the state, after the data plane is gone. */
    void (*destroy)(void *state);
};

/* More than the command families that keep state (sync, traffic, eval). */
#define PEER_MODULES_MAX 8

struct peer_module_slot {
    const struct peer_module *module;
    void *state; /* owned; freed with module->destroy */
};

struct peer_server {
    struct ev_loop *loop;
    struct peer_config cfg;
    ev_io read_watcher, write_watcher;
    ev_prepare flush_watcher; /* writes what this loop iteration produced */
    struct proto_reader reader;
    struct growbuf out; /* responses not yet written */
    size_t out_sent;    /* bytes of out already written to the fd */
    msgpack_packer pk;  /* packs responses into out */
    struct store *store;
    struct worker *worker;
    struct ml_state *ml;
    struct devmirror *dev; /* device copies of tensors, on cfg.kern */
    struct dataplane *dataplane;
    /* The idle-priority thread of background commands (commands_ml.h's background
     * eval), created with the first one. */
    struct worker *background;
    struct peer_module_slot modules[PEER_MODULES_MAX]; /* in registration order */
    size_t n_modules;
    uint64_t commands; /* requests received */
    int exit_status;
};

/* NULL (after logging why) on failure. Makes the control fd non-blocking.
 * Starts no thread: the caller may still give up root cheaply, before
 * peer_server_start (with a second thread, every credential change
 * signals it and waits for its answer: a thousand peers spent thousands
 * of context switches on it at start). */
struct peer_server *peer_server_create(struct ev_loop *loop, const struct peer_config *cfg);
/* Starts the compute worker's thread; false (after logging why) on failure. */
bool peer_server_start(struct peer_server *s);
/* Serves until EOF or a fatal stream error; returns the exit status. */
int peer_server_run(struct peer_server *s);
/* Stops everything and frees the server. Returns false, freeing nothing, when
 * a worker job is still running: the caller must then end the process with
 * _exit (see worker_destroy). The control fd is left open. */
bool peer_server_destroy(struct peer_server *s);
/* Loop thread: the state `m` keeps in `s`, or NULL when it keeps none yet. */
void *peer_server_state(const struct peer_server *s, const struct peer_module *m);
/* Loop thread: keeps `state` (not NULL) for `m`, which has none yet; the
 * server owns it from now on. False, with the state still the caller's,
 * when PEER_MODULES_MAX modules already keep state. */
bool peer_server_keep(struct peer_server *s, const struct peer_module *m, void *state);
/* A real duration in the emulated time every result reports (real / dilation). */
static inline double peer_emulated_ms(const struct peer_server *s, double real_ms)
{
    return real_ms / s->cfg.dilation;
}
/* A line on stderr: "hiernet-peer[NODE]: message". */
void peer_server_log(const struct peer_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
