/* peer_template.h — the controller's end of a peer template
 * (hiernet-peer --template, peer/template.h): a network's start hands it one
 * request per peer and goes on building links while the template forks the
 * peers on another core; then it collects their pids.
 *
 * Everything happens on the caller's libev loop (the default loop: the
 * template's exit is taken by an ev_child watcher), and nothing waits there.
 * A request that finds the socket full (rare: it holds 4 MB) is queued and
 * sent by a write watcher as room comes; if none comes for 30 s the
 * template counts as broken. Replies are read by a read watcher as they
 * arrive. The caller hears once, through the on_settled hook, that every
 * request has its reply or the template died, broke or was given up
 * (peer_template_expire), and then takes each pid with
 * peer_template_pid(t, id, 0, ...).
 *
 * Owns the template process, its socket and the queued requests (with
 * copies of their descriptors). The caller keeps the template until its
 * peers are gone: a peer forked by raw clone keeps the template's thread id
 * in glibc's thread block (see peer/template.c), and while the template
 * lives no new thread can get that id. */
#pragma once

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct peer_template;

typedef void (*peer_template_fn)(void *ctx);

/* Starts `peer_path --template` in the controller's own namespace,
 * watched on loop. */
struct peer_template *peer_template_start(struct ev_loop *loop, const char *peer_path, char *err,
                                          size_t errlen);

/* Asks for a peer running `peer_path args...` (args NULL-terminated, as they
 * would follow the path in an exec) with control_fd as its control socket,
 * inside netns_fd (or -1). The descriptors are copied: the caller still owns
 * its own. Never waits: a request the socket has no room for is queued.
 * Returns the request's id (0, 1, ... in order), or -1 with err (the
 * template is broken, or the request cannot be sent at all). */
int peer_template_request(struct peer_template *t, const char *const *args, int control_fd,
                          int netns_fd, char *err, size_t errlen);

/* fn(ctx) is called once, from the loop, when the template becomes settled
 * (peer_template_settled). Not called if it already is: check first. */
void peer_template_on_settled(struct peer_template *t, peer_template_fn fn, void *ctx);
/* Every request has its reply, or the template died, broke or expired. */
bool peer_template_settled(const struct peer_template *t);

/* The pid of request id; -1 with err (why the template could not start it,
 * or that it died, broke or fell silent). With timeout_s > 0 it first runs
 * the loop until the reply comes or timeout_s pass, and a template silent
 * that long counts as broken (later calls say so without waiting): for a
 * caller off the loop (tests), never from a loop callback. With 0 it says
 * what has arrived. */
pid_t peer_template_pid(struct peer_template *t, int id, double timeout_s, char *err,
                        size_t errlen);

/* The replies did not come within timeout_s: the template counts as broken
 * (later peer_template_pid calls say so). on_settled is not called for it. */
void peer_template_expire(struct peer_template *t, double timeout_s);

/* Ends the template (EOF on its socket) without waiting: it exits at once,
 * or is SIGKILLed after a second; once the loop has reaped it, t is freed
 * and gone(ctx) called (gone may be NULL; never from inside this call).
 * NULL is a no-op. The peers it started live on: they are the caller's
 * children. */
void peer_template_stop(struct peer_template *t, peer_template_fn gone, void *ctx);
/* The same, done before it returns (at most a second's wait, then SIGKILL),
 * also for a template stop() is ending; gone is not called. For when the
 * loop runs no more. NULL is a no-op. */
void peer_template_stop_now(struct peer_template *t);
