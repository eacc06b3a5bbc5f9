/* privdrop.c — giving up root after setup (see privdrop.h). */
#include "common/privdrop.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int privdrop_parse(const char *text, struct privdrop_target *t, char *err, size_t errlen)
{
    unsigned long uid, gid;
    int used = 0;
    *t = (struct privdrop_target){0};
    if (sscanf(text, "%lu:%lu%n", &uid, &gid, &used) != 2 || text[used] != '\0' || text[0] == '-' ||
        uid >= (uid_t)-1 || gid >= (gid_t)-1) {
        snprintf(err, errlen, "'%s' is not UID:GID", text);
        return -1;
    }
    if (uid == 0) {
        snprintf(err, errlen, "'%s': uid 0 is root, which is what this drops", text);
        return -1;
    }
    *t = (struct privdrop_target){true, (uid_t)uid, (gid_t)gid};
    return 0;
}

/* capget by system call: glibc has no wrapper and libcap is not needed. */
static int caps_read(struct __user_cap_data_struct data[2])
{
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    return (int)syscall(SYS_capget, &header, data);
}

static bool privdrop_any_ambient(void)
{
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1) return true;
    return false;
}

bool privdrop_no_capabilities(void)
{
    struct __user_cap_data_struct data[2];
    if (caps_read(data) < 0) return false;
    for (int i = 0; i < 2; i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable) return false;
    return !privdrop_any_ambient();
}

/* Every step that changes credentials is taken only where it changes
 * something: each commits a fresh set of credentials, and a peer forked by
 * the template (which prepared itself) would otherwise pay some 40 of
 * them for nothing, a thousand peers about 70 ms of CPU at start. The
 * reads (PR_GET_NO_NEW_PRIVS, PR_CAPBSET_READ, PR_CAP_AMBIENT_IS_SET)
 * change nothing. */
int privdrop_prepare(char *err, size_t errlen)
{
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
        return -1;
    }
    if (privdrop_any_ambient()) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    /* Needs CAP_SETPCAP: an unprivileged process has nothing to bound. A
     * kernel older than our headers says EINVAL past its last capability
     * (PR_CAPBSET_READ too, so such a capability is not dropped either). */
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
            errno != EINVAL)
            break;
    return 0;
}

/* The death signal, cleared by the credential change: armed again, then
 * the parent checked (it may have died while the signal was off). */
static int privdrop_rearm_death_signal(pid_t parent, char *err, size_t errlen)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
        snprintf(err, errlen, "PR_SET_PDEATHSIG: %s", strerror(errno));
        return -1;
    }
    if (parent > 0 && getppid() != parent) {
        snprintf(err, errlen, "the parent (pid %ld) is gone", (long)parent);
        return -1;
    }
    return 0;
}

/* A process that is not root but holds capabilities (a controller run with
 * CAP_SYS_ADMIN, not uid 0): changing between non-zero uids would keep
 * them, so they are cleared outright, ambient ones too. */
static int privdrop_clear_capabilities(char *err, size_t errlen)
{
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0, 0, 0}, {0, 0, 0}};
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (syscall(SYS_capset, &header, none) < 0 || !privdrop_no_capabilities()) {
        snprintf(err, errlen, "clearing the capabilities of uid %lu: %s", (unsigned long)geteuid(),
                 strerror(errno));
        return -1;
    }
    return 0;
}

int privdrop_apply(const struct privdrop_target *t, pid_t parent, char *err, size_t errlen)
{
    if (!t->set) return 0;
    if (geteuid() != 0)
        return privdrop_no_capabilities() ? 0 : privdrop_clear_capabilities(err, errlen);
    const char *step = "setgroups";
    int rc = setgroups(0, NULL);
    if (rc == 0) step = "setresgid", rc = setresgid(t->gid, t->gid, t->gid);
    if (rc == 0) step = "setresuid", rc = setresuid(t->uid, t->uid, t->uid);
    if (rc < 0) {
        snprintf(err, errlen, "dropping root for uid %lu gid %lu: %s: %s", (unsigned long)t->uid,
                 (unsigned long)t->gid, step, strerror(errno));
        return -1;
    }
    if (!privdrop_no_capabilities() || setuid(0) == 0) {
        snprintf(err, errlen, "capabilities remain after the change to uid %lu",
                 (unsigned long)t->uid);
        return -1;
    }
    return privdrop_rearm_death_signal(parent, err, errlen);
}
