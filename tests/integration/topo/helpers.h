/* helpers.h — shared by the netns tests of topo/: skip unless root, run a
 * program inside a namespace (fork, setns, exec: no `ip netns exec`, which
 * would need a named namespace), iperf3 goodput, and the check that no
 * process (ourselves included) still holds a namespace we made, with the
 * pins that keep its inode from being reused while it looks. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/clock.h"

static inline void helper_require_root(const char *why)
{
    if (geteuid() != 0) CHECK_SKIP(why);
    if (access("/proc/thread-self/ns/net", R_OK) != 0)
        CHECK_SKIP("no /proc/thread-self/ns/net: kernel without network namespaces");
}

static inline int helper_have(const char *program)
{
    char path[256];
    const char *dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/sbin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dirs[i], program);
        if (access(path, X_OK) == 0) return 1;
    }
    return 0;
}

/* Starts argv inside ns_fd with stdout and stderr on out_fd (-1: /dev/null). */
static inline pid_t helper_spawn(int ns_fd, char *const argv[], int out_fd)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    int null_fd = open("/dev/null", O_RDWR);
    int fd = out_fd >= 0 ? out_fd : null_fd;
    dup2(null_fd, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    if (setns(ns_fd, CLONE_NEWNET) < 0) _exit(126);
    execvp(argv[0], argv);
    _exit(127);
}

/* Waits for pid until the deadline, then kills it (it is our child). */
static inline int helper_wait(pid_t pid, double deadline)
{
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (mono_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(10000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs argv in ns_fd; its output (stdout and stderr) goes to out. Returns
 * the exit status, or -1 when it was killed at the timeout. */
static inline int helper_run(int ns_fd, char *const argv[], char *out, size_t outlen,
                             double timeout_s)
{
    int pipe_fds[2];
    size_t used = 0;
    double deadline = mono_s() + timeout_s;

    if (pipe2(pipe_fds, O_CLOEXEC) < 0) return -1;
    pid_t pid = helper_spawn(ns_fd, argv, pipe_fds[1]);
    close(pipe_fds[1]);
    for (;;) {
        struct pollfd p = {.fd = pipe_fds[0], .events = POLLIN};
        int left_ms = (int)((deadline - mono_s()) * 1000);
        if (left_ms <= 0 || poll(&p, 1, left_ms) <= 0) break;
        char scratch[4096];
        char *dst = used + 1 < outlen ? out + used : scratch;
        size_t room = used + 1 < outlen ? outlen - used - 1 : sizeof scratch;
        ssize_t n = read(pipe_fds[0], dst, room);
        if (n <= 0) break;
        if (dst != scratch) used += (size_t)n;
    }
    if (outlen) out[used] = '\0';
    close(pipe_fds[0]);
    return helper_wait(pid, deadline);
}

static inline int helper_ping(int ns_fd, const char *addr)
{
    char out[2048];
    char *argv[] = {"ping", "-c", "1", "-W", "2", "-q", (char *)addr, NULL};
    return helper_run(ns_fd, argv, out, sizeof out, 5);
}

/* Receiver-side goodput of an iperf3 TCP test from client_ns to the server
 * started in server_ns on addr; 0 when it failed (out explains). */
static inline double helper_iperf3(int server_ns, int client_ns, const char *addr, int seconds,
                                   char *out, size_t outlen)
{
    char duration[16], *p;
    char *server[] = {"iperf3", "-s", "-1", "-B", (char *)addr, "-p", "5201", NULL};
    char *client[] = {"iperf3", "-c", (char *)addr, "-p", "5201", "-t",
                      duration, "-O", "1",          "-J", NULL};
    pid_t pid = helper_spawn(server_ns, server, -1);
    double bps = 0;

    snprintf(duration, sizeof duration, "%d", seconds);
    /* The server needs a moment to listen: retry a refused connection. */
    for (int attempt = 0; attempt < 40; attempt++) {
        usleep(50000);
        if (helper_run(client_ns, client, out, outlen, seconds + 10) == 0) break;
        out[0] = '\0';
    }
    p = strstr(out, "\"sum_received\"");
    if (p && (p = strstr(p, "\"bits_per_second\":")))
        bps = strtod(p + strlen("\"bits_per_second\":"), NULL);
    kill(pid, SIGTERM);
    helper_wait(pid, mono_s() + 5);
    return bps;
}

/* Pins: descriptors of ours that keep namespaces we closed alive until
 * helper_netns_unpin, so that the kernel cannot give their inodes to a
 * namespace another process makes while helper_namespaces_held looks for
 * them (it skips the pins). One set per test program. */
struct helper_pin_set {
    int fd[128];
    size_t count;
};

static inline struct helper_pin_set *helper_pins(void)
{
    static struct helper_pin_set pins;
    return &pins;
}

/* Pins the namespace of ns_fd (call before closing ns_fd). */
static inline void helper_netns_pin(int ns_fd)
{
    struct helper_pin_set *pins = helper_pins();
    int fd = fcntl(ns_fd, F_DUPFD_CLOEXEC, 0);
    CHECK_MSG(fd >= 0 && pins->count < sizeof pins->fd / sizeof pins->fd[0],
              "cannot pin namespace fd %d (%zu pinned)", ns_fd, pins->count);
    if (fd < 0) return;
    if (pins->count == sizeof pins->fd / sizeof pins->fd[0]) {
        close(fd); /* full: reported above */
        return;
    }
    pins->fd[pins->count++] = fd;
}

/* Closes the pins, after the last helper_namespaces_held. */
static inline void helper_netns_unpin(void)
{
    struct helper_pin_set *pins = helper_pins();
    while (pins->count > 0)
        close(pins->fd[--pins->count]);
}

/* Whether "/proc/PID/fd/FD" (pid and fd as names) is one of our pins. */
static inline int helper_is_pin(const char *pid, const char *fd)
{
    const struct helper_pin_set *pins = helper_pins();
    if (atol(pid) != (long)getpid()) return 0;
    for (size_t i = 0; i < pins->count; i++)
        if (atoi(fd) == pins->fd[i]) return 1;
    return 0;
}

/* How many of the namespace inodes some process still holds, by fd or as
 * its namespace (any thread), after our fds are closed, but our pins.
 * Bind mounts would show in mountinfo; we never make any. */
static inline int helper_namespaces_held(const unsigned long *inodes, size_t count)
{
    char path[1100], link[64], want[64];
    int held = 0;
    DIR *proc = opendir("/proc");
    struct dirent *p;

    while (proc && (p = readdir(proc)) != NULL) {
        if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
        const char *subdirs[] = {"fd", "task"};
        for (int s = 0; s < 2; s++) {
            snprintf(path, sizeof path, "/proc/%s/%s", p->d_name, subdirs[s]);
            DIR *d = opendir(path);
            struct dirent *e;
            while (d && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.') continue;
                if (s == 0 && helper_is_pin(p->d_name, e->d_name)) continue;
                snprintf(path, sizeof path, "/proc/%s/%s/%s%s", p->d_name, subdirs[s], e->d_name,
                         s ? "/ns/net" : "");
                ssize_t n = readlink(path, link, sizeof link - 1);
                if (n <= 0) continue;
                link[n] = '\0';
                for (size_t i = 0; i < count; i++) {
                    snprintf(want, sizeof want, "net:[%lu]", inodes[i]);
                    held += strcmp(link, want) == 0;
                }
            }
            if (d) closedir(d);
        }
    }
    if (proc) closedir(proc);
    return held;
}

/* Enough descriptors for a namespace fd and a socket per node. */
static inline void helper_raise_fd_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

/* Whether the host namespace has an interface of that name (it must never
 * get one of ours). */
static inline int helper_host_has_link(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/class/net/%s", name);
    return access(path, F_OK) == 0;
}

/* Open descriptors of this process (to catch leaks). */
static inline int helper_count_fds(void)
{
    int count = 0;
    DIR *d = opendir("/proc/self/fd");
    while (d && readdir(d))
        count++;
    if (d) closedir(d);
    return count;
}
