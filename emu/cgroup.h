/* cgroup.h — per-run CPU limits for nodes through cgroups.
 *
 * Provides detection of where the cpu controller is (cgroup v2 with "cpu" in
 * cgroup.controllers, else a v1 hierarchy mounted with the cpu controller),
 * the per-run group <root>/hiernet-<run-id>/ with one child group per limited
 * node, the limit itself (v2 cpu.max, v1 cpu.cfs_quota_us/cpu.cfs_period_us),
 * attaching a process, and removal of a run's groups (at stop, and by
 * `hiernet clean` for runs whose controller died).
 *
 * Owns nothing in memory; the directories it makes belong to the run that
 * asked and are named after it, so removing one run never touches another.
 * Every function returns 0 on success, -1 with a one-line message in err. */
#pragma once

#include "proto/names.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EMU_CGROUP_PERIOD_US 100000ULL  /* the kernel's default CFS period */
#define EMU_CGROUP_QUOTA_MIN_US 1000ULL /* the kernel rejects quotas below 1 ms */
#define EMU_CGROUP_PREFIX "hiernet-"
/* Bytes of a group's name: a run's is "<run id>-<network>" (netrun_build.c), a
 * node's is the node's name (proto/names.h). */
#define EMU_CGROUP_NAME_MAX (HN_RUN_ID_MAX + 1 + HN_NODE_NAME_MAX)

enum emu_cgroup_version {
    EMU_CGROUP_NONE = 0, /* no usable cpu controller: cpu= limits cannot work */
    EMU_CGROUP_V1 = 1,
    EMU_CGROUP_V2 = 2,
};

struct emu_cgroup {
    enum emu_cgroup_version version;
    char root[256]; /* the hierarchy the run groups go in */
};

/* Reads /proc/self/mountinfo. Finding no cpu controller is not an error:
 * version is EMU_CGROUP_NONE and err says what was looked for. */
int emu_cgroup_detect(struct emu_cgroup *cgroup, char *err, size_t errlen);

/* The same from another mountinfo file (tests). */
int emu_cgroup_detect_from(const char *mountinfo_path, struct emu_cgroup *cgroup, char *err,
                           size_t errlen);

/* "v2 at /sys/fs/cgroup", "v1 at /sys/fs/cgroup/cpu" or "none" (doctor). */
void emu_cgroup_describe(const struct emu_cgroup *cgroup, char *buf, size_t buflen);

/* cpus (0.25 = a quarter of one core, 2 = two cores) as a CFS quota per
 * EMU_CGROUP_PERIOD_US; at least EMU_CGROUP_QUOTA_MIN_US. */
int emu_cgroup_quota_us(double cpus, uint64_t *quota_us, char *err, size_t errlen);

/* A run's or node's group name usable as a directory name: 1 to
 * EMU_CGROUP_NAME_MAX of [A-Za-z0-9_.-], not starting with '.'. */
int emu_cgroup_name_check(const char *what, const char *name, char *err, size_t errlen);

/* Makes <root>/hiernet-<run_id>/ (v2: with the cpu controller enabled for
 * its children). An existing group of that name is reused. */
int emu_cgroup_run_create(const struct emu_cgroup *cgroup, const char *run_id, char *err,
                          size_t errlen);

/* Makes the node's group in the run's group and sets its limit; path gets
 * the group's directory for emu_cgroup_attach(). */
int emu_cgroup_node_create(const struct emu_cgroup *cgroup, const char *run_id, const char *node,
                           double cpus, char *path, size_t pathlen, char *err, size_t errlen);

/* Changes a group's limit; cpus <= 0 removes it. */
int emu_cgroup_set_cpu(const struct emu_cgroup *cgroup, const char *group_path, double cpus,
                       char *err, size_t errlen);

/* Moves pid (and its threads) into the group. */
int emu_cgroup_attach(const char *group_path, pid_t pid, char *err, size_t errlen);

/* Removes the node groups and the run group. Their processes must have
 * exited; a process that was just killed leaves its group asynchronously, so
 * busy groups are retried for up to a second (sleeping: not for an event
 * loop, which calls the next one on a timer). A run without groups is fine. */
int emu_cgroup_run_remove(const struct emu_cgroup *cgroup, const char *run_id, char *err,
                          size_t errlen);
/* One pass of that, without waiting: 0 when nothing is left, 1 when a group
 * is still busy (call again a little later; err names it), -1 with err on
 * any other error. */
int emu_cgroup_run_remove_try(const struct emu_cgroup *cgroup, const char *run_id, char *err,
                              size_t errlen);
