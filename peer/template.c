/* template.c — forking peers on request (see template.h). */
#include "peer/template.h"

#include "proto/protocol.h"
#include "proto/template_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static char *title_area; /* the template's argv strings: see show_command_line */
static size_t title_len;

/* A fork whose child's parent is our parent (the controller). By raw system
 * call, as glibc's fork() cannot pass CLONE_PARENT. Safe here because the
 * template is single-threaded and holds no locks, so glibc's atfork work
 * has nothing to do, and glibc (>= 2.34) asks the kernel for the tid where
 * signals are sent (raise, abort). What remains is that the child's main
 * thread keeps the template's tid in glibc's thread block, which glibc uses
 * as the owner of recursive and error-checking mutexes (the dynamic
 * loader's among them). That only matters if another thread of the child
 * could get the same tid, which cannot happen while the template lives: the
 * controller keeps it until the peers are gone. */
static pid_t fork_sibling(void)
{
    return (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, NULL);
}

/* ps and /proc/PID/cmdline show the peer's own command line rather than the
 * template's: it is written over the template's argv strings, which the
 * controller padded for the purpose (the kernel reads the command line from
 * that memory). Pointing the kernel elsewhere (PR_SET_MM) would need
 * CAP_SYS_RESOURCE, which containers often drop. */
static void show_command_line(char *const *argv)
{
    size_t len = 0;
    for (int i = 0; argv[i]; i++) {
        size_t n = strlen(argv[i]) + 1;
        if (len + n > title_len) break;
        memcpy(title_area + len, argv[i], n);
        len += n;
    }
    memset(title_area + len, 0, title_len - len);
}

/* In the child: become the node's peer. Never returns. */
static void run_peer(int sock, pid_t controller, struct peer_template_request *req,
                     peer_main_fn peer_main)
{
    /* Die with the controller, as an exec'd peer does; it may have died
     * before the prctl took effect. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != controller) _exit(1);
    if (req->netns_fd >= 0 && setns(req->netns_fd, CLONE_NEWNET) < 0) {
        char message[160];
        snprintf(message, sizeof message, "cannot enter the node's network namespace: %s",
                 strerror(errno));
        fprintf(stderr, "hiernet-peer: template: %s\n", message);
        proto_write_fatal(req->control_fd, message);
        _exit(1);
    }
    if (sock != PEER_CONTROL_FD) close(sock);
    if (req->control_fd != PEER_CONTROL_FD) {
        if (dup2(req->control_fd, PEER_CONTROL_FD) < 0) _exit(1);
        close(req->control_fd);
    } else if (fcntl(PEER_CONTROL_FD, F_SETFD, 0) < 0) { /* it came with MSG_CMSG_CLOEXEC */
        _exit(1);
    }
    if (req->netns_fd >= 0) close(req->netns_fd);
    /* The command line an exec'd peer would have had. */
    char *argv[PEER_TEMPLATE_MAX_ARGS + 4] = {"hiernet-peer", "--control-fd", PEER_CONTROL_FD_TEXT};
    memcpy(argv + 3, req->argv, (size_t)(req->argc + 1) * sizeof *argv);
    show_command_line(argv);
    optind = 0; /* a fresh getopt, as after exec */
    exit(peer_main(req->argc + 3, argv));
}

static void serve_one(int sock, pid_t controller, struct peer_template_request *req,
                      peer_main_fn peer_main)
{
    struct peer_template_reply reply = {.id = req->id, .pid = -1};
    pid_t pid = fork_sibling();
    if (pid == 0) run_peer(sock, controller, req, peer_main);
    if (pid < 0) {
        reply.error = errno;
        snprintf(reply.step, sizeof reply.step, "fork");
    } else {
        reply.pid = pid;
    }
    close(req->control_fd);
    if (req->netns_fd >= 0) close(req->netns_fd);
    if (peer_template_send_reply(sock, &reply) < 0)
        fprintf(stderr, "hiernet-peer: template: reply: %s\n", strerror(errno));
}

int peer_template_serve(int sock, peer_main_fn peer_main, char *title, size_t title_size)
{
    title_area = title;
    title_len = title_size;
    pid_t controller = getppid();
    static struct peer_template_request req; /* 4 KB: off the stack every child copies */
    for (;;) {
        int rc = peer_template_recv_request(sock, &req);
        if (rc == 0) return 0;
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0 && errno == EBADMSG) {
            struct peer_template_reply bad = {.id = req.id, .pid = -1, .error = EBADMSG};
            snprintf(bad.step, sizeof bad.step, "request");
            peer_template_send_reply(sock, &bad);
            continue;
        }
        if (rc < 0) {
            fprintf(stderr, "hiernet-peer: template: %s\n", strerror(errno));
            return 1;
        }
        serve_one(sock, controller, &req, peer_main);
    }
}
