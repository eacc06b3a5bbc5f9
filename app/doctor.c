/* doctor.c — `hiernet doctor`: what this host offers the topology engine.
 *
 * Prints one line per check ("ok   veth" / "MISSING netem: <reason>"):
 * privileges, network namespaces, the link types and qdiscs of
 * emu_nl_probe(), the cgroup cpu controller and the run registry, then
 * which backend "auto" picks and why (backend_pick.h). Exit 0 when that
 * backend can emulate links, 3 when something it needs is missing.
 *
 * Every probe works in scratch objects of its own (a namespace that vanishes
 * with its fd, a cgroup named after this process) and removes them. */
#include "controller/backend_pick.h"
#include "app/cli.h"
#include "controller/registry.h"
#include "emu/cgroup.h"
#include "emu/netns.h"
#include "emu/nl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_ENVIRONMENT 3

static const char doctor_usage[] =
    "usage: hiernet doctor [--hosts FILE|slurm]\n"
    "\n"
    "Checks what the topology engine needs on this host and prints one line per\n"
    "check (\"ok   NAME\" or \"MISSING NAME: reason\"): privileges, network\n"
    "namespaces, veth, bridge, tun, the htb/tbf/netem qdiscs, the cgroup cpu\n"
    "controller (for cpu= node limits) and the run registry; then which backend\n"
    "\"auto\" picks and why. Probes use scratch namespaces and cgroups of their\n"
    "own and remove them.\n"
    "\n"
    "With --hosts, checks every machine of the hosts file (or of the Slurm\n"
    "allocation) in one table: reachable (the control RTT of an agent started\n"
    "as a run starts it, over SSH or srun), root or CAP_NET_ADMIN, the kernel\n"
    "features found there, and whether its hiernet is this one's version.\n"
    "\n"
    "exit codes: 0 the auto backend can emulate links here (with --hosts: every\n"
    "machine is reachable, privileged, has features and this version), 3\n"
    "something is missing (named above), 2 usage.\n";

static void doctor_line(bool ok, const char *name, const char *reason)
{
    if (ok)
        printf("ok   %s\n", name);
    else
        printf("MISSING %s: %s\n", name, reason);
}

/* No libcap needed: the kernel's own status line. */
unsigned long long cli_cap_effective(void)
{
    char line[256];
    unsigned long long caps = 0;
    FILE *f = fopen("/proc/self/status", "re");

    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &caps) == 1) break;
    fclose(f);
    return caps;
}

static void doctor_privileges(void)
{
    uint64_t caps = cli_cap_effective();
    static const struct {
        int bit;
        const char *name, *use;
    } wanted[] = {
        {CLI_CAP_NET_ADMIN, "CAP_NET_ADMIN", "links, addresses, routes, qdiscs"},
        {CLI_CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "network namespaces, cgroups"},
    };
    char reason[256];

    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        snprintf(reason, sizeof reason, "uid %lu lacks it (needed for %s): run as root",
                 (unsigned long)geteuid(), wanted[i].use);
        doctor_line(caps & (1ULL << wanted[i].bit), wanted[i].name, reason);
    }
}

static bool doctor_netns(void)
{
    struct emu_netns ns;
    char err[256];
    bool ok = emu_netns_create(&ns, 0, err, sizeof err) == 0;

    if (ok) emu_netns_close(&ns);
    doctor_line(ok, "netns", err);
    return ok;
}

void cli_feature_names_of(const struct emu_nl_features *f, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < EMU_NL_FEATURE_COUNT; i++)
        if (f->available[i] && at < cap)
            at +=
                (size_t)snprintf(out + at, cap - at, "%s%s", at ? " " : "", emu_nl_feature_name(i));
}

int cli_feature_names(char *out, size_t cap, char *err, size_t errlen)
{
    struct emu_nl_features f;
    out[0] = '\0';
    if (emu_nl_probe(&f, err, errlen) < 0) return -1;
    cli_feature_names_of(&f, out, cap);
    return 0;
}

/* Returns the probe result, or NULL when the probe could not run. */
static const struct emu_nl_features *doctor_features(struct emu_nl_features *features)
{
    char err[256], reason[300];
    int rc = emu_nl_probe(features, err, sizeof err);

    snprintf(reason, sizeof reason, "not probed: %s", err);
    for (int i = 0; i < EMU_NL_FEATURE_COUNT; i++)
        doctor_line(rc == 0 && features->available[i], emu_nl_feature_name(i),
                    rc == 0 ? features->reason[i] : reason);
    return rc == 0 ? features : NULL;
}

/* Makes, limits and removes a scratch group the way a run does: the only
 * honest test that cpu= limits will work. Not needed by any backend, so a
 * failure here does not change the exit code. */
static int doctor_cgroup_try(const struct emu_cgroup *cgroup, char *err, size_t errlen)
{
    char run_id[64], path[512], cleanup_err[512];
    int rc;

    snprintf(run_id, sizeof run_id, "doctor-%ld", (long)getpid());
    rc = emu_cgroup_run_create(cgroup, run_id, err, errlen);
    if (rc == 0)
        rc = emu_cgroup_node_create(cgroup, run_id, "probe", 0.5, path, sizeof path, err, errlen);
    if (emu_cgroup_run_remove(cgroup, run_id, cleanup_err, sizeof cleanup_err) < 0 && rc == 0) {
        snprintf(err, errlen, "%s", cleanup_err);
        rc = -1;
    }
    return rc;
}

static void doctor_cgroup(void)
{
    struct emu_cgroup cgroup;
    char err[512] = "", desc[300], name[400], reason[600];
    int rc = emu_cgroup_detect(&cgroup, err, sizeof err);

    if (rc == 0 && cgroup.version == EMU_CGROUP_NONE) rc = -1;
    if (rc == 0) {
        emu_cgroup_describe(&cgroup, desc, sizeof desc);
        rc = doctor_cgroup_try(&cgroup, err, sizeof err);
    }
    if (rc == 0) snprintf(name, sizeof name, "cgroup %s: cpu controller usable", desc);
    snprintf(reason, sizeof reason, "%s (only cpu= node limits need it)", err);
    doctor_line(rc == 0, rc == 0 ? name : "cgroup cpu", reason);
}

static void doctor_registry(void)
{
    char root[REGISTRY_PATH_MAX], err[REGISTRY_PATH_MAX + 128], name[REGISTRY_PATH_MAX + 32];

    if (registry_root_for_write(root, sizeof root, err, sizeof err) < 0) {
        doctor_line(false, "run registry", err);
        return;
    }
    snprintf(name, sizeof name, "run registry %s", root);
    doctor_line(true, name, "");
}

int cli_doctor(int argc, char **argv)
{
    struct emu_nl_features features;
    const struct emu_nl_features *probed = NULL;
    const char *hosts;
    char why[1024];
    int backend, rc;

    rc = cli_hosts_option("doctor", doctor_usage, argc, argv, &hosts);
    if (rc >= 0) return rc;
    if (hosts) return cli_doctor_hosts(hosts);
    doctor_privileges();
    if (doctor_netns())
        probed = doctor_features(&features);
    else
        for (int i = 0; i < EMU_NL_FEATURE_COUNT; i++)
            doctor_line(false, emu_nl_feature_name(i), "not probed: no network namespace");
    doctor_cgroup();
    doctor_registry();
    backend = doctor_pick_backend(probed, why, sizeof why);
    printf("backend auto picks: %s, because %s\n", topo_backend_name(backend), why);
    fflush(stdout);
    if (backend != TOPO_BACKEND_NONE) return 0;
    fprintf(stderr, "hiernet doctor: no backend can emulate links here: %s\n", why);
    return EXIT_ENVIRONMENT;
}
