/* peer_template.h — the controller's end of a peer template
 * (hiernet-peer --template, peer/template.h): a network's start hands it one
 * request per peer and goes on building links while the template forks the
 * peers on another core; then it collects their pids.
 *
 * Owns the template process and its socket. A request waits only while the
 * socket is full (draining replies meanwhile, so the two sides never wait on
 * each other; at most 30 s in all: rare, the socket holds 4 MB). The
 * replies are collected without blocking: the caller watches
 * peer_template_fd() on its event loop, calls peer_template_poll() when it
 * is readable until peer_template_settled(), then takes each pid with
 * peer_template_pid(t, id, 0, ...); peer_template_expire() gives up on a
 * silent template.
 *
 * The caller keeps the template until its peers are gone: a peer forked by
 * raw clone keeps the template's thread id in glibc's thread block (see
 * peer/template.c), and while the template lives no new thread can get that
 * id. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct peer_template;

/* Starts `peer_path --template` in the controller's own namespace. */
struct peer_template *peer_template_start(const char *peer_path, char *err, size_t errlen);

/* Asks for a peer running `peer_path args...` (args NULL-terminated, as they
 * would follow the path in an exec) with control_fd as its control socket,
 * inside netns_fd (or -1). The descriptors are copied: the caller still owns
 * its own. Returns the request's id (0, 1, ... in order), or -1 with err. */
int peer_template_request(struct peer_template *t, const char *const *args, int control_fd,
                          int netns_fd, char *err, size_t errlen);

/* The pid of request id, waiting for the template's replies at most until
 * timeout_s from now; -1 with err (why the template could not start it, or
 * that it died or fell silent). A template silent that long counts as dead:
 * later calls return what had arrived, without waiting again. */
pid_t peer_template_pid(struct peer_template *t, int id, double timeout_s, char *err,
                        size_t errlen);

/* The socket the replies arrive on (readable: call peer_template_poll). */
int peer_template_fd(const struct peer_template *t);
/* Reads every reply that has arrived, without waiting. */
void peer_template_poll(struct peer_template *t);
/* Every request has its reply, or the template died or broke. */
bool peer_template_settled(const struct peer_template *t);
/* The replies did not come within timeout_s: the template counts as dead
 * (later peer_template_pid calls say so). */
void peer_template_expire(struct peer_template *t, double timeout_s);

/* Ends the template (EOF on its socket) and reaps it. NULL is a no-op. The
 * peers it started live on: they are the caller's children. */
void peer_template_stop(struct peer_template *t);
