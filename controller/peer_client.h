/* peer_client.h — the controller's end of one child's control channel.
 *
 * Forks a child (hiernet-peer, or hiernet-linkd) with one end of a
 * socketpair (no listening socket anywhere) as --control-fd, optionally
 * inside a network namespace, and speaks MessagePack-RPC to it from the
 * libev loop. Requests are queued without
 * blocking; each completes through its callback exactly once: with the
 * result, with the peer's error, or with a failure when the peer dies
 * (noticed within 100 ms) or the client is closed.
 *
 * Errors say the cause only ("peer exited with status 1", the peer's own
 * reply): the caller knows the node and what it asked, and names both
 * once (docs/design-notes.md, "One error convention"). The client's own log
 * lines (ctl_log) name the node.
 *
 * Owns: the socket, the child pid (reaped through ev_child, or handed to
 * controller/reaper.h when freed before it exited), the pending
 * request table and the output buffer. Needs the default libev loop
 * (ev_child only works there). */
#pragma once

#include <ev.h>
#include <msgpack.h>
#include <stdbool.h>
#include <sys/types.h>

struct peer_client;

struct peer_spawn {
    const char *node;        /* node name (or "@linkd"), used in the client's log lines */
    const char *path;        /* the executable */
    const char *const *args; /* arguments after "--control-fd N", NULL-terminated */
    int netns_fd;            /* namespace to enter before exec, or -1 */
    const char *const *env;  /* "NAME=value" settings for the child, NULL-terminated, or NULL */
};

/* Completion of one request: exactly one of error / result is non-NULL,
 * except that an error given as a map (proto/protocol.h: an agent's build
 * failure) comes as its "message" line in error and the map in result.
 * result (a msgpack map) is valid only during the call. */
typedef void (*peer_reply_fn)(void *ctx, const char *error, const msgpack_object *result);
/* A notification from the peer (e.g. "recv"); params valid only during the call. */
typedef void (*peer_notify_fn)(void *ctx, const char *method, uint32_t method_len,
                               const msgpack_object *params);
/* The peer process has exited (status as from waitpid). */
typedef void (*peer_exit_fn)(void *ctx, int wait_status);

struct peer_client_hooks {
    peer_notify_fn on_notify;
    peer_exit_fn on_exit;
    void *ctx;
};

struct peer_client *peer_client_spawn(struct ev_loop *loop, const struct peer_spawn *spec,
                                      const struct peer_client_hooks *hooks, char *err,
                                      size_t errlen);

/* The same in two steps, for a child started elsewhere (a peer template,
 * controller/peer_template.h): open makes the channel and hands back the
 * child's end of it in *child_end (the caller's to pass on and close; spec's
 * path, args and netns are not used); adopt names the child once it exists,
 * so its exit is reaped and reported. Calls may be queued in between. */
struct peer_client *peer_client_open(struct ev_loop *loop, const struct peer_spawn *spec,
                                     const struct peer_client_hooks *hooks, int *child_end,
                                     char *err, size_t errlen);
void peer_client_adopt(struct peer_client *pc, pid_t pid);
/* The child of an opened client, started later (peer_client_spawn's second
 * half): forks and execs spec (path, args, netns) with child_end, which it
 * closes in any case, and adopts the child. 0, or -1 with err. */
int peer_client_exec(struct peer_client *pc, const struct peer_spawn *spec, int child_end,
                     char *err, size_t errlen);

/* Sends request `method` whose params map is already encoded (params,
 * params_len bytes of msgpack; NULL for an empty map). cb runs later, never
 * from inside this call. Fails (-1, err set) only when the peer is gone. */
int peer_client_call(struct peer_client *pc, const char *method, const char *params,
                     size_t params_len, peer_reply_fn cb, void *ctx, char *err, size_t errlen);

/* A notification (no answer): params as for peer_client_call. -1 (err)
 * when the channel is down. */
int peer_client_notify(struct peer_client *pc, const char *method, const char *params,
                       size_t params_len, char *err, size_t errlen);
/* A relay that stopped feeding a client whose peer_client_queued passed
 * its bound resumes when drained says the queue is empty. */
typedef void (*peer_drained_fn)(void *ctx);
void peer_client_on_drained(struct peer_client *pc, peer_drained_fn fn, void *ctx);
/* The end of a child that is not ours to reap (a remote node's peer, whose
 * exit its machine's agent reports): as if it had exited with wait_status
 * (pending calls fail, with why when not NULL, else as the status says;
 * on_exit runs). No-op for a child adopted here, or once exited. */
void peer_client_mark_exited(struct peer_client *pc, int wait_status, const char *why);
/* Why its calls fail once the channel is down (mark_exited's why, or what
 * the exit status says); "" while it is up. */
const char *peer_client_gone_reason(const struct peer_client *pc);
/* Relay mode, for `hiernet agent` (issue 20): the channel then carries a
 * byte stream the client neither frames nor answers, the controller's on
 * another machine. What the peer writes goes to on_bytes as it is read
 * (at most PEER_RELAY_CHUNK bytes a time, in order; bytes already read
 * but not decoded first); relay_write queues bytes to the peer, and
 * on_drained (may be NULL) is called when a backlog that had to wait for
 * the socket is written out (or dropped as the channel broke). EOF and
 * the exit hook work as before; calls of the client's own are refused.
 * -1 with err while calls are pending (their answers would be lost). */
#define PEER_RELAY_CHUNK 65536
typedef void (*peer_bytes_fn)(void *ctx, const void *bytes, size_t len);
int peer_client_relay(struct peer_client *pc, peer_bytes_fn on_bytes, peer_drained_fn on_drained,
                      void *ctx, char *err, size_t errlen);
/* 0, or -1 when the channel is down (the bytes are dropped). */
int peer_client_relay_write(struct peer_client *pc, const void *bytes, size_t len);
/* Stops (or resumes) reading from the peer: the reader downstream is full. */
void peer_client_relay_pause(struct peer_client *pc, bool paused);
/* Bytes queued toward the peer, not yet written. */
size_t peer_client_queued(const struct peer_client *pc);

/* Closes the control channel: the peer exits on EOF. Pending requests fail
 * with "peer stopped". Idempotent. */
void peer_client_close(struct peer_client *pc);
void peer_client_kill(struct peer_client *pc, int sig);
bool peer_client_exited(const struct peer_client *pc);
/* Whether the channel is down (closed, EOF, broken): calls fail from now on. */
bool peer_client_closed(const struct peer_client *pc);
pid_t peer_client_pid(const struct peer_client *pc);
const char *peer_client_node(const struct peer_client *pc);
size_t peer_client_pending(const struct peer_client *pc);
/* Frees the client; a peer that has not exited is SIGKILLed and reaped
 * from the loop (controller/reaper.h), counted in dying until then (dying
 * may be NULL). Never waits. */
struct reaper_group;
void peer_client_release(struct peer_client *pc, struct reaper_group *dying);
/* peer_client_release(pc, NULL). */
void peer_client_free(struct peer_client *pc);

/* Path of an executable installed beside the running one (/proc/self/exe's
 * directory), unless the environment variable env_override names one. */
int peer_client_sibling_path(const char *name, const char *env_override, char *out, size_t cap);
