/* test_peer_template.c — peers forked by a peer template
 * (controller/peer_template.h, peer/template.h): they are the caller's own
 * children, answer on their control socket, show their command line and exit
 * on EOF; many requests in a row never deadlock; a template that dies, falls
 * silent or is not a template at all gives a clear error in bounded time. */
#include "check.h"

#include "common/clock.h"
#include "controller/peer_client.h"
#include "controller/peer_template.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char peer_path[4096];

/* Field 4 of /proc/PID/stat: the parent's pid. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close_paren = strrchr(buf, ')');
    int ppid = -1;
    if (close_paren) sscanf(close_paren + 2, "%*c %d", &ppid);
    return ppid;
}

static void read_command_line(pid_t pid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, out, cap - 1) : -1;
    if (fd >= 0) close(fd);
    if (n < 0) n = 0;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == '\0') out[i] = ' ';
    out[n] = '\0';
}

static void on_ping(void *ctx, const char *error, const msgpack_object *result)
{
    (void)result;
    *(int *)ctx = error ? -1 : 1;
}

/* A forked peer is our child, answers a ping, shows its own command line
 * and exits 0 on EOF. */
static void test_peer_is_a_working_child(void)
{
    char err[512] = "";
    struct peer_template *t = peer_template_start(peer_path, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    if (!t) return;
    struct peer_spawn spec = {.node = "tpl1"};
    int child_end = -1;
    struct peer_client *pc =
        peer_client_open(ev_default_loop(0), &spec, NULL, &child_end, err, sizeof err);
    CHECK(pc != NULL);
    const char *args[] = {"--node", "tpl1", "--data-port", "0", NULL};
    int id = peer_template_request(t, args, child_end, -1, err, sizeof err);
    close(child_end);
    CHECK_MSG(id == 0, "%s", err);
    pid_t pid = peer_template_pid(t, id, 5.0, err, sizeof err);
    CHECK_MSG(pid > 0, "%s", err);
    peer_template_stop(t);
    if (pid <= 0) return;
    peer_client_adopt(pc, pid);
    CHECK(parent_of(pid) == getpid());
    int answered = 0;
    CHECK(peer_client_call(pc, "ping", NULL, 0, on_ping, &answered, err, sizeof err) == 0);
    double t_ping = mono_s();
    while (!answered && mono_s() - t_ping < 5)
        ev_run(ev_default_loop(0), EVRUN_ONCE);
    CHECK(answered == 1);
    /* Written before the peer serves: certain once it has answered. */
    char line[1024];
    read_command_line(pid, line, sizeof line);
    CHECK_CONTAINS(line, "hiernet-peer --control-fd 3 --node tpl1 --data-port 0");
    peer_client_close(pc); /* EOF: the peer exits by itself */
    double t0 = mono_s();
    while (!peer_client_exited(pc) && mono_s() - t0 < 5)
        ev_run(ev_default_loop(0), EVRUN_ONCE);
    CHECK(peer_client_exited(pc));
    peer_client_free(pc);
}

/* 400 requests before reading any reply: the replies fill the template's
 * socket while requests still go out, and neither side waits forever. */
static void test_many_requests(void)
{
    enum { N = 400 };
    char err[512] = "";
    struct peer_template *t = peer_template_start(peer_path, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    if (!t) return;
    int ours[N], ids[N], started = 0;
    for (int i = 0; i < N; i++) {
        int sv[2];
        ids[i] = -1;
        ours[i] = -1;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) break;
        ours[i] = sv[0];
        const char *args[] = {"--node", "many", "--data-port", "0", NULL};
        ids[i] = peer_template_request(t, args, sv[1], -1, err, sizeof err);
        close(sv[1]);
    }
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = ids[i] >= 0 ? peer_template_pid(t, ids[i], 10.0, err, sizeof err) : -1;
        started += pids[i] > 0;
    }
    CHECK_MSG(started == N, "%d of %d started: %s", started, N, err);
    peer_template_stop(t);
    for (int i = 0; i < N; i++)
        close(ours[i]);
    int clean = 0;
    for (int i = 0; i < N; i++) {
        int status;
        if (pids[i] > 0 && waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            clean++;
    }
    CHECK_MSG(clean == N, "%d of %d exited 0 on EOF", clean, N);
}

/* Writes an executable shell script; returns its path. */
static const char *script(const char *name, const char *body)
{
    static char path[3][256];
    static int next;
    char *p = path[next++ % 3];
    snprintf(p, sizeof path[0], "/tmp/hn-test-template-%d-%s", (int)getpid(), name);
    FILE *f = fopen(p, "w");
    if (!f) return NULL;
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    chmod(p, 0700);
    return p;
}

/* Asks one peer of `path`; returns how long the failure took, err set. */
static double failing_template(const char *path, double timeout_s, char *err, size_t errlen)
{
    double t0 = mono_s();
    struct peer_template *t = peer_template_start(path, err, errlen);
    if (!t) return mono_s() - t0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
    const char *args[] = {"--node", "bad", NULL};
    int id = peer_template_request(t, args, sv[1], -1, err, errlen);
    close(sv[1]);
    if (id >= 0) CHECK(peer_template_pid(t, id, timeout_s, err, errlen) < 0);
    peer_template_stop(t);
    close(sv[0]);
    return mono_s() - t0;
}

static void test_broken_templates(void)
{
    char err[512] = "";
    const char *dies = script("dies", "exit 3");
    double took = failing_template(dies, 5.0, err, sizeof err);
    CHECK_MSG(took < 2.0, "a template that exits: %.2f s", took);
    CHECK_CONTAINS(err, "peer template");
    CHECK_CONTAINS(err, "it exited with status 3");

    const char *mute = script("mute", "exec sleep 30");
    took = failing_template(mute, 0.3, err, sizeof err);
    CHECK_CONTAINS(err, "peer template: no reply within 0.3 s");
    /* 0.3 s for the reply, then stop kills it after 1 s of ignoring EOF. */
    CHECK_MSG(took > 0.25 && took < 2.5, "a silent template: %.2f s", took);

    const char *garbage = script("garbage", "printf 'xyz' >&3; exec sleep 30");
    took = failing_template(garbage, 5.0, err, sizeof err);
    CHECK_CONTAINS(err, "peer template: it sent something that is not a reply");
    CHECK_MSG(took < 2.5, "a garbling template: %.2f s", took);

    err[0] = '\0';
    CHECK(peer_template_start("/nonexistent/hiernet-peer", err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "/nonexistent/hiernet-peer");
    unlink(dies);
    unlink(mute);
    unlink(garbage);
}

int main(void)
{
    check_bin_path("hiernet-peer", peer_path, sizeof peer_path);
    signal(SIGPIPE, SIG_IGN);
    test_peer_is_a_working_child();
    test_many_requests();
    test_broken_templates();
    return check_report();
}
