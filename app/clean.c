/* clean.c — `hiernet clean`: removes what crashed runs left behind.
 *
 * A thin face over registry_sweep_stale_as(): one line per thing removed on
 * stdout (peers still running, cgroups, registry entries of runs whose
 * controller is dead, run.json files marked crashed), problems on stderr,
 * then a summary line. Live runs and
 * anything no registry lists are never touched. Namespaces and links need no
 * cleaning: they are anonymous and vanish with the last process of a run. */
#include "app/cli.h"
#include "controller/registry.h"

#include <stdio.h>
#include <string.h>

#define EXIT_ENVIRONMENT 3

static const char clean_usage[] =
    "usage: hiernet clean [--hosts FILE|slurm]\n"
    "\n"
    "Removes what runs whose controller has died left behind: peer processes\n"
    "that still run, the cgroups the run created and its entry in the run\n"
    "registry (/run/hiernet, or $XDG_RUNTIME_DIR/hiernet or /tmp/hiernet-UID\n"
    "when not root; $" REGISTRY_ENV_ROOT " overrides). Only what a dead run's registry\n"
    "entry lists is touched, each process checked by pid and start time; live\n"
    "runs are left alone. The run.json of such a run, still \"running\", becomes\n"
    "\"crashed\" (its results are complete up to the controller's death).\n"
    "Prints one line per thing removed and a summary.\n"
    "\n"
    "With --hosts, runs `hiernet clean` on every machine of the hosts file (or\n"
    "of the Slurm allocation): this machine's directly, the others' over SSH\n"
    "(ssh -o BatchMode=yes, user= from the file, $HIERNET_SSH_CONFIG as ssh -F,\n"
    "the binary at this one's path or $HIERNET_REMOTE_BIN) or srun, and prints\n"
    "one line per machine: its summary, or why it failed.\n"
    "\n"
    "exit codes: 0 nothing stale is left, 3 something could not be removed\n"
    "(said on stderr; the next clean retries it) or, with --hosts, a machine\n"
    "failed, 2 usage.\n";

static void clean_report(void *ctx, enum registry_event event, const char *run_id,
                         const char *detail)
{
    const char *run = run_id ? run_id : "?";

    switch (event) {
    case REGISTRY_EVENT_PEER_KILLED:
        printf("killed %s of run %s\n", detail, run);
        break;
    case REGISTRY_EVENT_CGROUP_REMOVED:
        printf("removed %s of run %s\n", detail, run);
        break;
    case REGISTRY_EVENT_RUN_REMOVED:
        printf("removed run %s (%s)\n", run, detail);
        break;
    case REGISTRY_EVENT_RESULTS_MARKED:
        printf("marked %s of run %s crashed\n", detail, run);
        break;
    case REGISTRY_EVENT_FAILED:
        fprintf(stderr, "hiernet clean: run %s: %s\n", run, detail);
        break;
    case REGISTRY_EVENT_NOTE:
        fprintf(stderr, "hiernet clean: note: %s\n", detail);
        break;
    }
    fflush(stdout);
}

static const char *clean_plural(unsigned n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

static void clean_summary(const struct registry_sweep_counts *c)
{
    if (c->runs + c->peers + c->cgroups == 0)
        printf("clean: nothing stale");
    else
        printf("clean: removed %u stale %s, %u %s, %u %s", c->runs,
               clean_plural(c->runs, "run", "runs"), c->peers,
               clean_plural(c->peers, "peer", "peers"), c->cgroups,
               clean_plural(c->cgroups, "cgroup", "cgroups"));
    if (c->marked) printf("; marked %u run.json %s", c->marked, "crashed");
    printf("; %u live %s left alone", c->live, clean_plural(c->live, "run", "runs"));
    if (c->failures)
        printf("; %u %s could not be removed", c->failures,
               clean_plural(c->failures, "thing", "things"));
    printf("\n");
}

int cli_clean(int argc, char **argv)
{
    struct registry_sweep_counts counts;
    const char *hosts;
    char err[512];
    int rc;

    rc = cli_hosts_option("clean", clean_usage, argc, argv, &hosts);
    if (rc >= 0) return rc;
    if (hosts) return cli_clean_hosts(hosts);
    rc = registry_sweep_stale_as("hiernet clean", clean_report, NULL, &counts, err, sizeof err);
    clean_summary(&counts);
    if (rc == 0) return 0;
    if (!counts.failures) fprintf(stderr, "hiernet clean: %s\n", err);
    return EXIT_ENVIRONMENT;
}
