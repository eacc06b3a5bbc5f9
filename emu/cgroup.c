/* cgroup.c — per-run CPU limits for nodes through cgroups (see cgroup.h).
 *
 * Layout: <root>/hiernet-<run-id>/<node>/. In v2 a group with processes may
 * not enable controllers for children ("no internal processes"), so the run
 * group holds no process and only enables +cpu for its node groups; the
 * hierarchy root is exempt from that rule, which is why groups are made under
 * the mount root rather than under the controller's own cgroup. */
#include "emu/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CGROUP_REMOVE_TRIES 100
#define CGROUP_REMOVE_WAIT_NS 10000000L /* 10 ms x 100 = one second at most */

static int cgroup_fail(char *err, size_t errlen, const char *what, const char *path, int error)
{
    snprintf(err, errlen, "%s %s: %s", what, path, strerror(error));
    return -1;
}

/* Writes a control file (which exists already: no O_CREAT; O_TRUNC as a
 * shell's `echo >` has, which kernfs accepts). */
static int cgroup_write(const char *dir, const char *file, const char *value, char *err,
                        size_t errlen)
{
    char path[512];
    ssize_t len = (ssize_t)strlen(value), written;
    int fd;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return cgroup_fail(err, errlen, "open", path, errno);
    written = write(fd, value, (size_t)len);
    if (written != len) {
        int error = written < 0 ? errno : EIO;
        close(fd);
        snprintf(err, errlen, "write \"%s\" to %s: %s", value, path, strerror(error));
        return -1;
    }
    close(fd);
    return 0;
}

/* True when the whitespace- or comma-separated list has the token. */
static int cgroup_list_has(const char *list, const char *token, const char *separators)
{
    size_t len = strlen(token);
    for (const char *p = list; (p = strstr(p, token)) != NULL; p += len)
        if ((p == list || strchr(separators, p[-1])) &&
            (p[len] == '\0' || strchr(separators, p[len])))
            return 1;
    return 0;
}

static int cgroup_v2_has_cpu(const char *mount_point)
{
    char path[512], controllers[512];
    FILE *f;
    int found = 0;

    snprintf(path, sizeof path, "%s/cgroup.controllers", mount_point);
    f = fopen(path, "re");
    if (!f) return 0;
    if (fgets(controllers, sizeof controllers, f))
        found = cgroup_list_has(controllers, "cpu", " \n");
    fclose(f);
    return found;
}

/* mountinfo escapes spaces and the like as \ooo octal. */
static void cgroup_unescape(char *s)
{
    char *out = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/* Splits a mountinfo line into mount point, fs type and super options. */
static int cgroup_parse_mountinfo_line(char *line, char **mount_point, char **fstype,
                                       char **super_options)
{
    char *dash = strstr(line, " - "), *save = NULL, *field = NULL;

    if (!dash) return -1;
    *dash = '\0';
    /* id parent major:minor root mount-point ... */
    field = strtok_r(line, " ", &save);
    for (int i = 0; field && i < 4; i++)
        field = strtok_r(NULL, " ", &save);
    *mount_point = field;
    *fstype = strtok_r(dash + 3, " ", &save);
    strtok_r(NULL, " ", &save); /* source */
    *super_options = strtok_r(NULL, " \n", &save);
    if (!*mount_point || !*fstype || !*super_options) return -1;
    cgroup_unescape(*mount_point);
    return 0;
}

int emu_cgroup_detect_from(const char *mountinfo_path, struct emu_cgroup *cgroup, char *err,
                           size_t errlen)
{
    char line[4096], v1[256] = "";
    FILE *f = fopen(mountinfo_path, "re");

    memset(cgroup, 0, sizeof *cgroup);
    if (!f) return cgroup_fail(err, errlen, "open", mountinfo_path, errno);
    while (fgets(line, sizeof line, f) && cgroup->version == EMU_CGROUP_NONE) {
        char *mount_point, *fstype, *options;
        if (cgroup_parse_mountinfo_line(line, &mount_point, &fstype, &options) < 0) continue;
        if (strcmp(fstype, "cgroup2") == 0 && cgroup_v2_has_cpu(mount_point)) {
            cgroup->version = EMU_CGROUP_V2;
            snprintf(cgroup->root, sizeof cgroup->root, "%s", mount_point);
        } else if (strcmp(fstype, "cgroup") == 0 && !v1[0] &&
                   cgroup_list_has(options, "cpu", ",")) {
            snprintf(v1, sizeof v1, "%s", mount_point);
        }
    }
    fclose(f);
    if (cgroup->version == EMU_CGROUP_NONE && v1[0]) {
        cgroup->version = EMU_CGROUP_V1; /* v2 wins where both have cpu */
        snprintf(cgroup->root, sizeof cgroup->root, "%s", v1);
    }
    if (cgroup->version == EMU_CGROUP_NONE)
        snprintf(err, errlen,
                 "no cpu controller: neither a cgroup2 mount listing cpu in "
                 "cgroup.controllers nor a cgroup v1 mount with cpu");
    return 0;
}

int emu_cgroup_detect(struct emu_cgroup *cgroup, char *err, size_t errlen)
{
    return emu_cgroup_detect_from("/proc/self/mountinfo", cgroup, err, errlen);
}

void emu_cgroup_describe(const struct emu_cgroup *cgroup, char *buf, size_t buflen)
{
    if (cgroup->version == EMU_CGROUP_NONE)
        snprintf(buf, buflen, "none");
    else
        snprintf(buf, buflen, "v%d at %s", (int)cgroup->version, cgroup->root);
}

int emu_cgroup_quota_us(double cpus, uint64_t *quota_us, char *err, size_t errlen)
{
    double quota;

    if (!(cpus > 0) || cpus > 4096) {
        snprintf(err, errlen, "bad cpu %g: must be more than 0 and at most 4096 (cores)", cpus);
        return -1;
    }
    quota = round(cpus * (double)EMU_CGROUP_PERIOD_US);
    *quota_us = quota < EMU_CGROUP_QUOTA_MIN_US ? EMU_CGROUP_QUOTA_MIN_US : (uint64_t)quota;
    return 0;
}

int emu_cgroup_name_check(const char *what, const char *name, char *err, size_t errlen)
{
    size_t len = name ? strlen(name) : 0;
    int ok = len > 0 && len <= EMU_CGROUP_NAME_MAX && name[0] != '.';

    for (size_t i = 0; ok && i < len; i++)
        ok = isalnum((unsigned char)name[i]) || strchr("_.-", name[i]) != NULL;
    if (!ok)
        snprintf(err, errlen, "bad %s name \"%.*s\" for a cgroup: use 1 to %d of A-Z a-z 0-9 _ . -",
                 what, 80, name ? name : "", EMU_CGROUP_NAME_MAX);
    return ok ? 0 : -1;
}

static int cgroup_run_path(const struct emu_cgroup *cgroup, const char *run_id, char *path,
                           size_t pathlen, char *err, size_t errlen)
{
    if (cgroup->version == EMU_CGROUP_NONE) {
        snprintf(err, errlen, "no cgroup cpu controller on this host: cpu limits unavailable");
        return -1;
    }
    if (emu_cgroup_name_check("run", run_id, err, errlen) < 0) return -1;
    snprintf(path, pathlen, "%s/" EMU_CGROUP_PREFIX "%s", cgroup->root, run_id);
    return 0;
}

static int cgroup_mkdir(const char *path, char *err, size_t errlen)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return cgroup_fail(err, errlen, "create cgroup", path, errno);
    return 0;
}

int emu_cgroup_run_create(const struct emu_cgroup *cgroup, const char *run_id, char *err,
                          size_t errlen)
{
    char path[512];

    if (cgroup_run_path(cgroup, run_id, path, sizeof path, err, errlen) < 0) return -1;
    if (cgroup->version == EMU_CGROUP_V2 &&
        cgroup_write(cgroup->root, "cgroup.subtree_control", "+cpu", err, errlen) < 0)
        return -1;
    if (cgroup_mkdir(path, err, errlen) < 0) return -1;
    if (cgroup->version == EMU_CGROUP_V2 &&
        cgroup_write(path, "cgroup.subtree_control", "+cpu", err, errlen) < 0)
        return -1;
    return 0;
}

int emu_cgroup_set_cpu(const struct emu_cgroup *cgroup, const char *group_path, double cpus,
                       char *err, size_t errlen)
{
    char value[64];
    uint64_t quota = 0;

    if (cpus > 0 && emu_cgroup_quota_us(cpus, &quota, err, errlen) < 0) return -1;
    if (cgroup->version == EMU_CGROUP_V2) {
        if (cpus > 0)
            snprintf(value, sizeof value, "%" PRIu64 " %llu", quota, EMU_CGROUP_PERIOD_US);
        else
            snprintf(value, sizeof value, "max %llu", EMU_CGROUP_PERIOD_US);
        return cgroup_write(group_path, "cpu.max", value, err, errlen);
    }
    snprintf(value, sizeof value, "%llu", EMU_CGROUP_PERIOD_US);
    if (cgroup_write(group_path, "cpu.cfs_period_us", value, err, errlen) < 0) return -1;
    if (cpus > 0)
        snprintf(value, sizeof value, "%" PRIu64, quota);
    else
        snprintf(value, sizeof value, "-1");
    return cgroup_write(group_path, "cpu.cfs_quota_us", value, err, errlen);
}

int emu_cgroup_node_create(const struct emu_cgroup *cgroup, const char *run_id, const char *node,
                           double cpus, char *path, size_t pathlen, char *err, size_t errlen)
{
    char run_path[512];

    if (cgroup_run_path(cgroup, run_id, run_path, sizeof run_path, err, errlen) < 0 ||
        emu_cgroup_name_check("node", node, err, errlen) < 0)
        return -1;
    if (snprintf(path, pathlen, "%s/%s", run_path, node) >= (int)pathlen) {
        snprintf(err, errlen, "cgroup path of node %s too long", node);
        return -1;
    }
    if (cgroup_mkdir(path, err, errlen) < 0) return -1;
    return emu_cgroup_set_cpu(cgroup, path, cpus, err, errlen);
}

int emu_cgroup_attach(const char *group_path, pid_t pid, char *err, size_t errlen)
{
    char value[32];
    snprintf(value, sizeof value, "%ld", (long)pid);
    return cgroup_write(group_path, "cgroup.procs", value, err, errlen);
}

/* One rmdir: 0 gone (or never there), 1 busy (a killed task leaves its
 * cgroup only once it is fully gone, a little after its parent has reaped
 * it), -1 another error; err names the group either way. */
static int cgroup_rmdir_try(const char *path, char *err, size_t errlen)
{
    if (rmdir(path) == 0 || errno == ENOENT) return 0;
    int busy = errno == EBUSY;
    cgroup_fail(err, errlen, "remove cgroup", path, errno);
    return busy ? 1 : -1;
}

int emu_cgroup_run_remove_try(const struct emu_cgroup *cgroup, const char *run_id, char *err,
                              size_t errlen)
{
    char run_path[512], path[1024];
    struct dirent *entry;
    DIR *dir;
    int rc = 0;

    if (cgroup_run_path(cgroup, run_id, run_path, sizeof run_path, err, errlen) < 0) return -1;
    dir = opendir(run_path);
    if (!dir) return errno == ENOENT ? 0 : cgroup_fail(err, errlen, "open cgroup", run_path, errno);
    /* Node groups are the only subdirectories; control files are not dirs. */
    while (rc >= 0 && (entry = readdir(dir)) != NULL) {
        if (entry->d_type != DT_DIR || entry->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", run_path, entry->d_name);
        int r = cgroup_rmdir_try(path, err, errlen);
        if (r != 0) rc = r < 0 ? -1 : 1; /* a busy group: the others go meanwhile */
    }
    closedir(dir);
    return rc == 0 ? cgroup_rmdir_try(run_path, err, errlen) : rc;
}

int emu_cgroup_run_remove(const struct emu_cgroup *cgroup, const char *run_id, char *err,
                          size_t errlen)
{
    const struct timespec wait = {.tv_nsec = CGROUP_REMOVE_WAIT_NS};
    int rc = emu_cgroup_run_remove_try(cgroup, run_id, err, errlen);
    for (int i = 0; rc == 1 && i < CGROUP_REMOVE_TRIES; i++) {
        nanosleep(&wait, NULL);
        rc = emu_cgroup_run_remove_try(cgroup, run_id, err, errlen);
    }
    return rc == 0 ? 0 : -1;
}
