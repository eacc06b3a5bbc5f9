/* test_peer_template.c — peers forked by a peer template
 * (controller/peer_template.h, peer/template.h): they are the caller's own
 * children, answer on their control socket, show their command line and exit
 * on EOF; many requests in a row never deadlock; a request never waits, even
 * on a template that takes none; a template that dies, falls silent or is
 * not a template at all gives a clear error in bounded time; stopping one
 * that ignores EOF kills it after a second without holding the loop. */
#include "check.h"

#include "common/clock.h"
#include "controller/peer_client.h"
#include "controller/peer_template.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
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
    struct peer_template *t = peer_template_start(ev_default_loop(0), peer_path, err, sizeof err);
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
    peer_template_stop_now(t);
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
    struct peer_template *t = peer_template_start(ev_default_loop(0), peer_path, err, sizeof err);
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
    peer_template_stop_now(t);
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

struct ticker {
    ev_timer timer;
    double last, worst;
};

static void on_tick(EV_P_ ev_timer *w, int revents)
{
    struct ticker *k = (struct ticker *)w;
    double now = mono_s();
    if (k->last > 0 && now - k->last - 0.01 > k->worst) k->worst = now - k->last - 0.01;
    k->last = now;
}

static void on_gone(void *ctx)
{
    *(bool *)ctx = true;
}

/* Stops t without waiting, then runs the loop until it is gone: returns
 * how long that took; *late is how late a 10 ms timer fired meanwhile. */
static double stop_on_loop(struct peer_template *t, double *late)
{
    struct ticker k = {.last = 0};
    ev_timer_init(&k.timer, on_tick, 0.01, 0.01);
    ev_timer_start(ev_default_loop(0), &k.timer);
    bool gone = false;
    double t0 = mono_s();
    peer_template_stop(t, on_gone, &gone);
    CHECK(!gone); /* never from inside the call */
    while (!gone && mono_s() - t0 < 5)
        ev_run(ev_default_loop(0), EVRUN_ONCE);
    ev_timer_stop(ev_default_loop(0), &k.timer);
    CHECK(gone);
    *late = k.worst;
    return mono_s() - t0;
}

/* Asks one peer of `path`; returns how long the failure took, err set; the
 * template is then stopped on the loop (*stop_s, *late: stop_on_loop). */
static double failing_template(const char *path, double timeout_s, char *err, size_t errlen,
                               double *stop_s, double *late)
{
    double t0 = mono_s();
    *stop_s = *late = 0;
    struct peer_template *t = peer_template_start(ev_default_loop(0), path, err, errlen);
    if (!t) return mono_s() - t0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
    const char *args[] = {"--node", "bad", NULL};
    int id = peer_template_request(t, args, sv[1], -1, err, errlen);
    close(sv[1]);
    if (id >= 0) CHECK(peer_template_pid(t, id, timeout_s, err, errlen) < 0);
    double took = mono_s() - t0;
    *stop_s = stop_on_loop(t, late);
    close(sv[0]);
    return took;
}

static void test_broken_templates(void)
{
    char err[512] = "";
    double stop_s, late;
    const char *dies = script("dies", "exit 3");
    double took = failing_template(dies, 5.0, err, sizeof err, &stop_s, &late);
    CHECK_MSG(took < 2.0, "a template that exits: %.2f s", took);
    CHECK_CONTAINS(err, "peer template");
    CHECK_CONTAINS(err, "it exited with status 3");
    CHECK_MSG(stop_s < 0.5, "stopping a template that has exited: %.2f s", stop_s);

    const char *mute = script("mute", "exec sleep 30");
    took = failing_template(mute, 0.3, err, sizeof err, &stop_s, &late);
    CHECK_CONTAINS(err, "peer template: no reply within 0.3 s");
    CHECK_MSG(took > 0.25 && took < 1.5, "a silent template: %.2f s", took);
    /* It ignores EOF: killed after 1 s, the loop running all along. */
    CHECK_MSG(stop_s > 0.9 && stop_s < 2.5, "stopping a template that ignores EOF: %.2f s", stop_s);
    /* The wait that was here held the loop for the whole second. */
    printf("silent template stopped in %.3f s, the loop at most %.3f s late\n", stop_s, late);
    CHECK_MSG(late < 0.5, "the loop stalled %.3f s while the template was stopped", late);

    const char *garbage = script("garbage", "printf 'xyz' >&3; exec sleep 30");
    took = failing_template(garbage, 5.0, err, sizeof err, &stop_s, &late);
    CHECK_CONTAINS(err, "peer template: it sent something that is not a reply");
    CHECK_MSG(took < 1.5, "a garbling template: %.2f s", took);

    err[0] = '\0';
    CHECK(peer_template_start(ev_default_loop(0), "/nonexistent/hiernet-peer", err, sizeof err) ==
          NULL);
    CHECK_CONTAINS(err, "/nonexistent/hiernet-peer");
    unlink(dies);
    unlink(garbage);

    /* A template that takes no request: requests never wait, however many
     * find its socket full (they queue); the template then counts as silent. */
    struct rlimit files;
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    int n = files.rlim_cur > 12200 ? 12000 : (int)files.rlim_cur - 200;
    struct peer_template *t = peer_template_start(ev_default_loop(0), mute, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    int sv[2];
    if (!t || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return;
    const char *args[] = {"--node", "full", NULL};
    double t0 = mono_s();
    int asked = 0;
    for (int i = 0; i < n; i++)
        asked += peer_template_request(t, args, sv[1], -1, err, sizeof err) == i;
    took = mono_s() - t0;
    CHECK_MSG(asked == n, "%d of %d requests taken: %s", asked, n, err);
    CHECK_MSG(took < 2.0, "%d requests to a template that reads none took %.2f s", n, took);
    CHECK(peer_template_pid(t, 0, 0.2, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "no reply within 0.2 s");
    CHECK(!peer_template_settled(t) || peer_template_pid(t, n - 1, 0, err, sizeof err) < 0);
    stop_s = stop_on_loop(t, &late);
    CHECK_MSG(stop_s < 2.5, "stopping it: %.2f s", stop_s);
    close(sv[0]);
    close(sv[1]);
    unlink(mute);
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
