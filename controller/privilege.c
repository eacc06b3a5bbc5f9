/* privilege.c — the identity helper processes drop to (see privilege.h). */
#include "controller/privilege.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A name, or a uid given as digits (then its passwd entry gives the group;
 * a uid without one takes the group of the same number). */
static int privilege_lookup(const char *who, struct privilege_identity *id, char *err,
                            size_t errlen)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(who, &end, 10);
    bool numeric = *who && !*end && who[0] != '-' && errno == 0 && n < (uid_t)-1;
    struct passwd *pw = numeric ? getpwuid((uid_t)n) : getpwnam(who);
    if (!pw && !numeric) {
        snprintf(err, errlen, "%s '%s': no such user (name one that may run the peers)",
                 PRIVILEGE_ENV_USER, who);
        return -1;
    }
    id->uid = pw ? pw->pw_uid : (uid_t)n;
    id->gid = pw ? pw->pw_gid : (gid_t)n;
    snprintf(id->name, sizeof id->name, "%s", pw ? pw->pw_name : who);
    return 0;
}

int privilege_helper_identity(struct privilege_identity *id, char *err, size_t errlen)
{
    memset(id, 0, sizeof *id);
    if (geteuid() != 0) return 0;
    const char *who = getenv(PRIVILEGE_ENV_USER);
    if (!who || !*who) who = PRIVILEGE_DEFAULT_USER;
    if (privilege_lookup(who, id, err, errlen) < 0) return -1;
    if (id->uid == 0) {
        snprintf(err, errlen, "%s '%s' is root: peers and hiernet-linkd never keep root",
                 PRIVILEGE_ENV_USER, who);
        return -1;
    }
    id->drop = true;
    snprintf(id->arg, sizeof id->arg, "%lu:%lu", (unsigned long)id->uid, (unsigned long)id->gid);
    return 0;
}
