/* privdrop.h — how hiernet's helper processes (peers, hiernet-linkd) give up
 * root once their setup is done.
 *
 * The controller needs root to build namespaces, links and cgroups; the
 * processes it starts in them do not, once set up: a peer needs only its
 * listening socket and its compute device, linkd only its TAP descriptors
 * and timer. Both therefore drop, in two steps:
 *
 *   1. privdrop_prepare, first thing, while single-threaded: no new
 *      privileges (PR_SET_NO_NEW_PRIVS: no exec can ever gain any), an
 *      empty capability bounding set and no ambient capabilities. Threads
 *      created later inherit all of it.
 *   2. privdrop_apply, after setup: no supplementary groups, then the
 *      target gid and uid (real, effective and saved: no way back), which
 *      clears every capability; checked afterwards. The kernel clears the
 *      parent-death signal on a change of credentials, so it is armed again
 *      and the parent checked to be still the one we started with (it may
 *      have died in between).
 *
 * The target is "UID:GID" (privdrop_parse), chosen by the controller
 * (controller/privilege.h), never uid 0. A process that is not root takes
 * step 1, and in step 2 only has its capabilities cleared, if it holds
 * any (a controller given CAP_SYS_ADMIN instead of root). The
 * process also becomes non-dumpable by the uid change, so other processes
 * of that uid cannot ptrace it.
 *
 * Plain system calls; owns nothing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct privdrop_target {
    bool set;
    uid_t uid;
    gid_t gid;
};

/* "UID:GID", both decimal, UID not 0. 0, or -1 with err. */
int privdrop_parse(const char *text, struct privdrop_target *t, char *err, size_t errlen);

/* Step 1. 0, or -1 with err (NO_NEW_PRIVS failing is an error; the
 * bounding set is emptied only where we may). */
int privdrop_prepare(char *err, size_t errlen);

/* Step 2 (a no-op returning 0 when !t->set). parent: the pid that must
 * stay our parent (our death signal's source). 0, or -1 with err: the
 * caller must then exit, never run on with privileges. */
int privdrop_apply(const struct privdrop_target *t, pid_t parent, char *err, size_t errlen);

/* True when the process holds no capability in any set but the bounding
 * one (effective, permitted, inheritable, ambient all empty). */
bool privdrop_no_capabilities(void);
