/* template_wire.h — the messages between the controller and a peer template
 * (hiernet-peer --template, see peer/template.h).
 *
 * A SOCK_SEQPACKET socketpair carries one message per request and per reply:
 *   request: uint32 id, then the peer's argv as NUL-terminated strings (what
 *            would follow the executable's path in an exec), with SCM_RIGHTS
 *            carrying the peer's control socket and, when the peer runs in a
 *            network namespace, that namespace's fd;
 *   reply:   struct peer_template_reply, one per request, in request order.
 * The descriptors sent are the receiver's to close. Blocking or not is the
 * caller's socket's affair; these functions make one system call each. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PEER_TEMPLATE_MAX_ARGS 32
#define PEER_TEMPLATE_MAX_REQUEST 4096
/* The peer's control socket is moved to this fd, as the exec path does. */
#define PEER_CONTROL_FD 3
#define PEER_CONTROL_FD_TEXT "3"

struct peer_template_request {
    uint32_t id;
    int argc;
    char *argv[PEER_TEMPLATE_MAX_ARGS + 1]; /* into buf, NULL-terminated */
    int control_fd;                         /* received: the receiver's to close */
    int netns_fd;                           /* received, or -1 */
    char buf[PEER_TEMPLATE_MAX_REQUEST];
};

struct peer_template_reply {
    uint32_t id;
    int32_t pid;   /* the peer, or -1 */
    int32_t error; /* errno of the failed step when pid is -1 */
    char step[28]; /* which step failed: "fork", "request", ... */
};

/* Sends one request; returns 0, or -1 with errno (EAGAIN on a full
 * non-blocking socket: nothing was sent). args is NULL-terminated. */
int peer_template_send_request(int sock, uint32_t id, const char *const *args, int control_fd,
                               int netns_fd);

/* Receives one request: 1, 0 on EOF, -1 with errno (EBADMSG: malformed, its
 * descriptors already closed). */
int peer_template_recv_request(int sock, struct peer_template_request *req);

int peer_template_send_reply(int sock, const struct peer_template_reply *reply);
/* 1, 0 on EOF, -1 with errno (EBADMSG: not a reply). */
int peer_template_recv_reply(int sock, struct peer_template_reply *reply);
