/* test_privdrop.c — giving up root (common/privdrop.h): UID:GID parsing (uid 0
 * refused), and in forked children: step 1 sets no-new-privileges and, as
 * root, empties the bounding set; step 2 (as root) ends with the target
 * ids, no capability in any set, no way back to uid 0, and the
 * parent-death signal armed again (the kernel clears it on the change). */
#include "common/privdrop.h"
#include "tests/unit/check.h"

#include <sys/syscall.h>

#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_parse(void)
{
    struct privdrop_target t;
    char err[128];
    CHECK(privdrop_parse("65534:65534", &t, err, sizeof err) == 0 && t.set && t.uid == 65534 &&
          t.gid == 65534);
    CHECK(privdrop_parse("0:0", &t, err, sizeof err) < 0 && !t.set);
    CHECK_CONTAINS(err, "uid 0 is root");
    const char *bad[] = {"", "65534", "a:b", "1:2:3", "-1:5", "65534:", "1 :2", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK_MSG(privdrop_parse(bad[i], &t, err, sizeof err) < 0, "'%s' accepted", bad[i]);
}

/* Runs fn in a child; its exit status is the number of failed checks. */
static int in_child(int (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) _exit(fn());
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static int child_prepare(void)
{
    char err[128];
    int failed = privdrop_prepare(err, sizeof err) != 0;
    failed += prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1;
    if (geteuid() == 0) failed += prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0;
    return failed;
}

static int child_apply(void)
{
    char err[128];
    struct privdrop_target t = {true, 65534, 65534};
    int failed = privdrop_prepare(err, sizeof err) != 0;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    failed += privdrop_apply(&t, getppid(), err, sizeof err) != 0;
    failed += getuid() != 65534 || geteuid() != 65534 || getgid() != 65534;
    failed += !privdrop_no_capabilities();
    failed += setuid(0) == 0;
    int sig = 0;
    failed += prctl(PR_GET_PDEATHSIG, &sig) != 0 || sig != SIGKILL;
    return failed;
}

/* A process that is not root but holds capabilities (kept across a uid
 * change with PR_SET_KEEPCAPS, then made effective): step 2 clears them. */
static int child_apply_capable(void)
{
    char err[128];
    struct privdrop_target t = {true, 65534, 65534};
    int failed = prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0;
    failed += setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    failed += syscall(SYS_capget, &h, d) != 0;
    d[0].effective = d[0].permitted, d[1].effective = d[1].permitted;
    failed += syscall(SYS_capset, &h, d) != 0;
    failed += privdrop_no_capabilities(); /* the setting: capabilities, not root */
    failed += privdrop_apply(&t, 0, err, sizeof err) != 0;
    failed += !privdrop_no_capabilities();
    return failed;
}

int main(void)
{
    test_parse();
    CHECK_MSG(in_child(child_prepare) == 0, "step 1 in a child");
    if (geteuid() != 0) {
        struct privdrop_target t = {true, 65534, 65534};
        char err[64];
        CHECK(privdrop_apply(&t, getppid(), err, sizeof err) == 0 && geteuid() != 0);
        printf("not root: step 2 has nothing to drop (checked as a no-op)\n");
    } else {
        CHECK_MSG(in_child(child_apply) == 0, "step 2 in a child");
        CHECK_MSG(in_child(child_apply_capable) == 0, "step 2 clears a non-root's capabilities");
    }
    return check_report();
}
