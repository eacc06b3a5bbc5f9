/* test_reaper.c — children reaped from the loop (controller/reaper.h):
 * taking a child returns before its exit (one still running, one that
 * touched 128 MiB and takes a while to free it once killed) and the loop
 * reaps it, counted in its group until then; a child already gone is
 * reaped at once and not counted; reaper_wait reaps a group's children,
 * or all, where no loop runs. */
#include "controller/reaper.h"
#include "tests/unit/check.h"

#include "common/clock.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOUCHED_BYTES (128u << 20)

/* A child that sits until killed; with big, after touching that memory
 * (it says so on the pipe first). */
static pid_t child(bool big)
{
    int p[2];
    if (pipe(p) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (big) {
            char *m = malloc(TOUCHED_BYTES);
            if (m) memset(m, 1, TOUCHED_BYTES);
        }
        (void)!write(p[1], "x", 1);
        for (;;)
            pause();
    }
    char c;
    if (pid > 0) (void)!read(p[0], &c, 1);
    close(p[0]);
    close(p[1]);
    return pid;
}

static bool reaped(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) < 0 && errno == ECHILD;
}

static void test_on_the_loop(struct ev_loop *loop)
{
    struct reaper_group g = {0};
    pid_t big = child(true), small = child(false);
    CHECK(big > 0 && small > 0);
    /* Taken while they still run (their owner signals them first, but an
     * exit may take any time): a take that waited would never return. */
    double t0 = mono_s();
    reaper_take(loop, big, &g);
    reaper_take(loop, small, &g);
    CHECK(mono_s() - t0 < 1.0);
    CHECK(g.pending == 2);
    kill(big, SIGKILL);
    kill(small, SIGKILL);
    for (double end = mono_s() + 10; g.pending && mono_s() < end;)
        ev_run(loop, EVRUN_ONCE);
    CHECK(g.pending == 0);
    CHECK(reaped(big) && reaped(small));
}

static void test_gone_already(struct ev_loop *loop)
{
    struct reaper_group g = {0};
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    siginfo_t info;
    CHECK(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) == 0); /* a zombie now */
    reaper_take(loop, pid, &g);
    CHECK(g.pending == 0);
    CHECK(reaped(pid));
}

static void test_wait(struct ev_loop *loop)
{
    struct reaper_group a = {0}, b = {0};
    pid_t in_a = child(false), in_b = child(false), none = child(false);
    reaper_take(loop, in_a, &a);
    reaper_take(loop, in_b, &b);
    reaper_take(loop, none, NULL);
    CHECK(a.pending == 1 && b.pending == 1);
    kill(in_a, SIGKILL);
    kill(in_b, SIGKILL);
    kill(none, SIGKILL);
    reaper_wait(&a); /* no loop runs: here */
    CHECK(a.pending == 0 && reaped(in_a));
    CHECK(b.pending == 1); /* a's wait leaves b's child to b */
    reaper_wait(NULL);
    CHECK(b.pending == 0 && reaped(in_b) && reaped(none));
}

int main(void)
{
    struct ev_loop *loop = ev_default_loop(0);
    test_on_the_loop(loop);
    test_gone_already(loop);
    test_wait(loop);
    return check_report();
}
