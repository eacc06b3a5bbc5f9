/* test_topo_cgroup.c — per-run cgroups for real (label netns, root): detect
 * the cpu controller, make a run group and a node group with cpu = 0.2,
 * attach a busy child, see its CPU time capped, change the cap, remove the
 * groups (child killed first, as at stop). */
#include <sys/stat.h>

#include "helpers.h"
#include "emu/cgroup.h"

static char err[512];

#define CHECK_OK(call) CHECK_MSG((call) == 0, "%s", err)

/* utime + stime of pid in seconds. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long utime = 0, stime = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f) return -1;
    if (!fgets(buf, sizeof buf, f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* A child that spins for at most `seconds` of wall time. */
static pid_t spin(double seconds)
{
    pid_t pid = fork();
    if (pid == 0) {
        double end = mono_s() + seconds;
        volatile unsigned long x = 0;
        while (mono_s() < end)
            x++;
        _exit(0);
    }
    return pid;
}

static double cpu_over(pid_t pid, double wall)
{
    double before = cpu_seconds(pid);
    usleep((useconds_t)(wall * 1e6));
    return cpu_seconds(pid) - before;
}

int main(void)
{
    struct emu_cgroup cgroup;
    char description[300], run_id[32], path[512], run_path[600];
    struct stat st;
    pid_t child;
    double used;

    helper_require_root("needs root (cgroup directories)");
    CHECK_OK(emu_cgroup_detect(&cgroup, err, sizeof err));
    emu_cgroup_describe(&cgroup, description, sizeof description);
    printf("cpu controller: %s\n", description);
    if (cgroup.version == EMU_CGROUP_NONE) CHECK_SKIP("no cgroup cpu controller mounted");

    snprintf(run_id, sizeof run_id, "h4test-%d", (int)getpid());
    snprintf(run_path, sizeof run_path, "%s/" EMU_CGROUP_PREFIX "%s", cgroup.root, run_id);
    CHECK_OK(emu_cgroup_run_create(&cgroup, run_id, err, sizeof err));
    CHECK_OK(
        emu_cgroup_node_create(&cgroup, run_id, "n1", 0.2, path, sizeof path, err, sizeof err));
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));

    child = spin(10);
    CHECK_OK(emu_cgroup_attach(path, child, err, sizeof err));
    used = cpu_over(child, 1.0);
    printf("cpu = 0.2: %.3f s of CPU in 1 s\n", used);
    CHECK_MSG(used >= 0 && used <= 0.3, "cpu = 0.2 let the child use %.3f s in 1 s", used);

    CHECK_OK(emu_cgroup_set_cpu(&cgroup, path, 0.5, err, sizeof err));
    used = cpu_over(child, 1.0);
    printf("cpu = 0.5: %.3f s of CPU in 1 s\n", used);
    CHECK_MSG(used >= 0 && used <= 0.6, "cpu = 0.5 let the child use %.3f s in 1 s", used);

    /* Removing a group with a live process fails and says which; one pass
     * without waiting says it is busy. */
    CHECK(emu_cgroup_run_remove_try(&cgroup, run_id, err, sizeof err) == 1);
    CHECK_CONTAINS(err, "remove cgroup");
    CHECK(emu_cgroup_run_remove(&cgroup, run_id, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "remove cgroup");
    kill(child, SIGKILL);
    helper_wait(child, mono_s() + 5);
    CHECK_OK(emu_cgroup_run_remove(&cgroup, run_id, err, sizeof err));
    CHECK_MSG(stat(run_path, &st) < 0 && errno == ENOENT, "%s is still there", run_path);
    CHECK_OK(emu_cgroup_run_remove(&cgroup, run_id, err, sizeof err)); /* nothing left: ok */

    CHECK(emu_cgroup_run_create(&cgroup, "../escape", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "bad run name \"../escape\"");
    return check_report();
}
