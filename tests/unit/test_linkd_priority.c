/* test_linkd_priority.c — HIERNET_LINKD_PRIORITY (controller/linkd_client.c):
 * a bad value is refused in one line naming it, before anything starts
 * (no child left, running or unreaped, and a stand-in linkd that marks
 * that it ran never ran);
 * 1..99 starts hiernet-linkd at SCHED_FIFO with that priority; unset, it
 * runs at the normal policy. The started part needs the privilege to raise
 * a policy (root or CAP_SYS_NICE): without it the test says so and skips. */
#include "check.h"

#include "controller/linkd_client.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void refused(const char *value)
{
    char err[256] = "";
    setenv("HIERNET_LINKD_PRIORITY", value, 1);
    struct linkd_client *lc = linkd_client_start(ev_default_loop(0), err, sizeof err);
    CHECK(lc == NULL);
    char want[64];
    snprintf(want, sizeof want, "HIERNET_LINKD_PRIORITY=%s:", value);
    CHECK_MSG(strstr(err, want) == err, "error: %s", err);
    linkd_client_free(lc);
    /* The loop never ran, so nothing reaped a child a spawn would leave. */
    errno = 0;
    CHECK_MSG(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "%s: a child was started", value);
}

/* A stand-in linkd in a new directory (dir) that touches dir/ran if it
 * is ever run; its path in path. */
static void stand_in_linkd(char *dir, size_t dcap, char *path, size_t pcap)
{
    snprintf(dir, dcap, "/tmp/hn-linkd-prio-XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(path, pcap, "%s/linkd", dir);
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fprintf(f, "#!/bin/sh\ntouch '%s/ran'\n", dir);
    fclose(f);
    chmod(path, 0755);
}

/* The four refusals, with the stand-in as HIERNET_LINKD: it never runs. */
static void refusals(void)
{
    char dir[64], path[128], ran[128];
    stand_in_linkd(dir, sizeof dir, path, sizeof path);
    setenv("HIERNET_LINKD", path, 1);
    refused("0");
    refused("100");
    refused("7x");
    refused("-3");
    nanosleep(&(struct timespec){0, 200000000}, NULL); /* time for a stray exec */
    snprintf(ran, sizeof ran, "%s/ran", dir);
    CHECK_MSG(access(ran, F_OK) != 0, "the stand-in linkd ran for a refused priority");
    unlink(ran);
    unlink(path);
    CHECK(rmdir(dir) == 0);
}

/* linkd sets its policy after exec: poll up to 2 s for the expected one. */
static int policy_of(pid_t pid, int want)
{
    int policy = -1;
    for (int i = 0; i < 200; i++) {
        policy = sched_getscheduler(pid);
        if (policy == want) break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return policy;
}

static void started(const char *value, int want_policy, int want_priority)
{
    char err[256] = "";
    if (value)
        setenv("HIERNET_LINKD_PRIORITY", value, 1);
    else
        unsetenv("HIERNET_LINKD_PRIORITY");
    struct linkd_client *lc = linkd_client_start(ev_default_loop(0), err, sizeof err);
    CHECK(lc != NULL);
    if (!lc) {
        fprintf(stderr, "linkd_client_start: %s\n", err);
        return;
    }
    pid_t pid = linkd_client_pid(lc);
    int policy = policy_of(pid, want_policy);
    CHECK_MSG(policy == want_policy, "linkd's policy %d, want %d", policy, want_policy);
    struct sched_param sp = {0};
    CHECK(sched_getparam(pid, &sp) == 0);
    CHECK_MSG(sp.sched_priority == want_priority, "linkd's priority %d, want %d", sp.sched_priority,
              want_priority);
    linkd_client_free(lc);
}

int main(void)
{
    char path[4096];
    check_bin_path("hiernet-linkd", path, sizeof path);
    refusals();
    setenv("HIERNET_LINKD", path, 1);
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
        if (check_report()) return 1;
        CHECK_SKIP("no privilege to set SCHED_FIFO here (the refusals passed)");
    }
    sp.sched_priority = 0;
    sched_setscheduler(0, SCHED_OTHER, &sp); /* back: the children inherit ours */
    started("7", SCHED_FIFO, 7);
    started(NULL, SCHED_OTHER, 0);
    return check_report();
}
