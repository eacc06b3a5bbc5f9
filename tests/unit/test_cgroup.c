/* test_cgroup.c — emu/cgroup.c without root: detection from made-up
 * mountinfo files (v2 with cpu wins, v1 cpu otherwise, none), quotas, names,
 * and the control-file contents written for v1 and v2 (on plain directories
 * whose control files the test creates beforehand). */
#include "check.h"
#include "emu/cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512], dir[128];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void read_file(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (!fgets(buf, (int)len, f)) buf[0] = '\0';
        fclose(f);
    }
}

/* A mountinfo with a v1 cpu hierarchy and a v2 one whose controllers are
 * `v2_controllers`; mount points live under dir. */
static void make_mountinfo(const char *path, const char *v2_controllers)
{
    char text[2048], file[512];
    snprintf(file, sizeof file, "%s/v2/cgroup.controllers", dir);
    write_file(file, v2_controllers);
    snprintf(text, sizeof text,
             "22 1 0:20 / /proc rw - proc proc rw\n"
             "30 25 0:26 / %s/cpu\\040v1 rw,relatime - cgroup cgroup rw,cpuacct,cpu\n"
             "31 25 0:27 / %s/mem rw - cgroup cgroup rw,memory\n"
             "32 25 0:28 / %s/v2 rw - cgroup2 cgroup2 rw,nsdelegate\n",
             dir, dir, dir);
    write_file(path, text);
}

static void test_detect(void)
{
    struct emu_cgroup cg;
    char mountinfo[512], expect[512], described[600];

    snprintf(mountinfo, sizeof mountinfo, "%s/mountinfo", dir);
    make_mountinfo(mountinfo, "cpuset cpu io memory pids\n");
    CHECK(emu_cgroup_detect_from(mountinfo, &cg, err, sizeof err) == 0);
    snprintf(expect, sizeof expect, "%s/v2", dir);
    CHECK(cg.version == EMU_CGROUP_V2);
    CHECK_STREQ(cg.root, expect);
    emu_cgroup_describe(&cg, described, sizeof described);
    snprintf(expect, sizeof expect, "v2 at %s/v2", dir);
    CHECK_STREQ(described, expect);

    /* "cpuset" alone is not "cpu": v1's cpu wins; its \040 is a space. */
    make_mountinfo(mountinfo, "cpuset hugetlb\n");
    CHECK(emu_cgroup_detect_from(mountinfo, &cg, err, sizeof err) == 0);
    snprintf(expect, sizeof expect, "%s/cpu v1", dir);
    CHECK(cg.version == EMU_CGROUP_V1);
    CHECK_STREQ(cg.root, expect);

    write_file(mountinfo, "22 1 0:20 / /proc rw - proc proc rw\n"
                          "31 25 0:27 / /x rw - cgroup cgroup rw,cpuset\n");
    CHECK(emu_cgroup_detect_from(mountinfo, &cg, err, sizeof err) == 0);
    CHECK(cg.version == EMU_CGROUP_NONE);
    CHECK_CONTAINS(err, "no cpu controller");
    emu_cgroup_describe(&cg, described, sizeof described);
    CHECK_STREQ(described, "none");
    CHECK(emu_cgroup_run_create(&cg, "r1", err, sizeof err) < 0);
    CHECK_STREQ(err, "no cgroup cpu controller on this host: cpu limits unavailable");

    CHECK(emu_cgroup_detect_from("/nonexistent/mountinfo", &cg, err, sizeof err) < 0);
    CHECK_STREQ(err, "open /nonexistent/mountinfo: No such file or directory");
}

static void test_quota_and_names(void)
{
    uint64_t quota;
    CHECK(emu_cgroup_quota_us(0.25, &quota, err, sizeof err) == 0 && quota == 25000);
    CHECK(emu_cgroup_quota_us(2, &quota, err, sizeof err) == 0 && quota == 200000);
    CHECK(emu_cgroup_quota_us(0.001, &quota, err, sizeof err) == 0 && quota == 1000);
    CHECK(emu_cgroup_quota_us(0, &quota, err, sizeof err) < 0);
    CHECK_STREQ(err, "bad cpu 0: must be more than 0 and at most 4096 (cores)");
    CHECK(emu_cgroup_quota_us(-1, &quota, err, sizeof err) < 0);

    CHECK(emu_cgroup_name_check("node", "edge-1.a_b", err, sizeof err) == 0);
    CHECK(emu_cgroup_name_check("node", "../x", err, sizeof err) < 0);
    CHECK_STREQ(err, "bad node name \"../x\" for a cgroup: use 1 to 95 of A-Z a-z 0-9 _ . -");
    CHECK(emu_cgroup_name_check("node", ".hidden", err, sizeof err) < 0);
    CHECK(emu_cgroup_name_check("node", "", err, sizeof err) < 0);
    CHECK(emu_cgroup_name_check("node", "a b", err, sizeof err) < 0);
}

/* Control files exist in a real cgroup; here the test makes them. */
static void make_group(const char *path, const char *const *files)
{
    char file[600];
    CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
    for (; *files; files++) {
        snprintf(file, sizeof file, "%s/%s", path, *files);
        write_file(file, "");
    }
}

static void test_writes(void)
{
    struct emu_cgroup v2 = {.version = EMU_CGROUP_V2}, v1 = {.version = EMU_CGROUP_V1};
    const char *const v2_files[] = {"cgroup.subtree_control", "cpu.max", "cgroup.procs", NULL};
    const char *const v1_files[] = {"cpu.cfs_period_us", "cpu.cfs_quota_us", NULL};
    char path[512], group[512], file[600], text[700];

    snprintf(v2.root, sizeof v2.root, "%s/v2", dir);
    make_group(v2.root, v2_files);
    snprintf(path, sizeof path, "%s/hiernet-r1", v2.root);
    make_group(path, v2_files);
    snprintf(path, sizeof path, "%s/hiernet-r1/n1", v2.root);
    make_group(path, v2_files);
    CHECK(emu_cgroup_run_create(&v2, "r1", err, sizeof err) == 0);
    snprintf(file, sizeof file, "%s/hiernet-r1/cgroup.subtree_control", v2.root);
    read_file(file, text, sizeof text);
    CHECK_STREQ(text, "+cpu");
    CHECK(emu_cgroup_node_create(&v2, "r1", "n1", 0.25, group, sizeof group, err, sizeof err) == 0);
    CHECK_STREQ(group, path);
    snprintf(file, sizeof file, "%s/cpu.max", group);
    read_file(file, text, sizeof text);
    CHECK_STREQ(text, "25000 100000");
    CHECK(emu_cgroup_set_cpu(&v2, group, 0, err, sizeof err) == 0);
    read_file(file, text, sizeof text);
    CHECK_STREQ(text, "max 100000");
    CHECK(emu_cgroup_attach(group, 1234, err, sizeof err) == 0);
    snprintf(file, sizeof file, "%s/cgroup.procs", group);
    read_file(file, text, sizeof text);
    CHECK_STREQ(text, "1234");

    snprintf(v1.root, sizeof v1.root, "%s/v1", dir);
    make_group(v1.root, v1_files);
    snprintf(path, sizeof path, "%s/hiernet-r1", v1.root);
    make_group(path, v1_files);
    snprintf(path, sizeof path, "%s/hiernet-r1/n1", v1.root);
    make_group(path, v1_files);
    CHECK(emu_cgroup_run_create(&v1, "r1", err, sizeof err) == 0);
    CHECK(emu_cgroup_node_create(&v1, "r1", "n1", 1.5, group, sizeof group, err, sizeof err) == 0);
    snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", group);
    read_file(file, text, sizeof text);
    CHECK_STREQ(text, "150000");
    snprintf(file, sizeof file, "%s/cpu.cfs_period_us", group);
    read_file(file, text, sizeof text);
    CHECK_STREQ(text, "100000");

    /* A missing control file is an error naming it. */
    snprintf(path, sizeof path, "%s/plain", dir);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(emu_cgroup_set_cpu(&v2, path, 1, err, sizeof err) < 0);
    snprintf(text, sizeof text, "open %s/cpu.max: No such file or directory", path);
    CHECK_STREQ(err, text);
    CHECK(emu_cgroup_run_remove(&v2, "never-made", err, sizeof err) == 0);
}

int main(void)
{
    char cmd[300];
    snprintf(dir, sizeof dir, "/tmp/hn-test-cgroup-XXXXXX");
    if (!mkdtemp(dir)) CHECK_SKIP("cannot make a temporary directory");
    snprintf(cmd, sizeof cmd, "%s/v2", dir);
    mkdir(cmd, 0755);
    snprintf(cmd, sizeof cmd, "%s/cpu v1", dir);
    mkdir(cmd, 0755);
    test_detect();
    test_quota_and_names();
    test_writes();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_report();
}
