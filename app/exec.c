/* exec.c — `hiernet exec RUN NODE -- CMD...`: a command inside a live run's
 * node.
 *
 * Finds RUN in the run registry (exact id or unique prefix), the node's peer
 * there, enters the peer's network namespace (through /proc/<pid> opened and
 * checked by start time, so a reused pid is never entered) and execs CMD,
 * whose exit status becomes ours. Only the network namespace changes: CMD
 * keeps our mount namespace, cgroup and environment. */
#include "app/cli.h"
#include "controller/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_ENVIRONMENT 3
#define EXIT_CANNOT_EXECUTE 126 /* as shells, env and sudo say */
#define EXIT_NOT_FOUND 127
#define EXEC_NAMES_SHOWN 8

static const char exec_usage[] =
    "usage: hiernet exec RUN NODE [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD inside NODE of the live run RUN, in the network namespace of the\n"
    "node's peer, e.g. hiernet exec demo t1 -- ping -c 3 10.255.0.1\n"
    "RUN is a run id or an unambiguous prefix of one; NODE is a node name, or\n"
    "NETWORK/NODE when several networks of the run have that node. Only the\n"
    "network namespace is entered. The exit status is CMD's.\n"
    "\n"
    "exit codes: CMD's status; 2 unknown run or node, or usage; 3 the run or its\n"
    "peer is not alive, or the namespace cannot be entered (needs root);\n"
    "126/127 CMD cannot be executed / is not found.\n";

/* Appends ", name" (or "..." once enough are shown) to a one-line list. */
static size_t exec_names_add(char *out, size_t outlen, size_t used, size_t index,
                             const char *network, const char *name, const char *note)
{
    if (used >= outlen) return used;
    if (index == EXEC_NAMES_SHOWN) name = "...", network = NULL, note = "";
    used += (size_t)snprintf(out + used, outlen - used, "%s%s%s%s%s", index ? ", " : "",
                             network ? network : "", network ? "/" : "", name, note);
    return used;
}

static void exec_run_names(const struct registry_list *list, char *out, size_t outlen)
{
    size_t used = 0;

    snprintf(out, outlen, "none");
    for (size_t i = 0; i < list->count && i <= EXEC_NAMES_SHOWN; i++)
        used = exec_names_add(out, outlen, used, i, NULL, list->runs[i].id,
                              list->runs[i].alive ? "" : " (dead)");
}

static void exec_node_names(const struct registry_run_entry *run, char *out, size_t outlen)
{
    size_t used = 0;

    snprintf(out, outlen, "none");
    for (size_t i = 0; i < run->n_nodes && i <= EXEC_NAMES_SHOWN; i++)
        used = exec_names_add(out, outlen, used, i, run->nodes[i].network, run->nodes[i].node, "");
}

static int exec_find_run(const struct registry_list *list, const char *name,
                         const struct registry_run_entry **run)
{
    char names[512];

    switch (registry_find_run(list, name, run)) {
    case REGISTRY_MATCH_ONE:
        break;
    case REGISTRY_MATCH_AMBIGUOUS:
        exec_run_names(list, names, sizeof names);
        fprintf(stderr, "hiernet exec: run '%s' is ambiguous: give more of its id (runs: %s)\n",
                name, names);
        return EXIT_USAGE;
    case REGISTRY_MATCH_NONE:
        exec_run_names(list, names, sizeof names);
        fprintf(stderr, "hiernet exec: no run '%s' in %s (runs: %s)\n", name, list->roots, names);
        return EXIT_USAGE;
    }
    if (!(*run)->alive) {
        fprintf(stderr,
                "hiernet exec: run '%s' is not alive: its controller (pid %ld) has "
                "exited; hiernet clean removes what it left\n",
                (*run)->id, (long)(*run)->controller.pid);
        return EXIT_ENVIRONMENT;
    }
    return 0;
}

static int exec_find_node(const struct registry_run_entry *run, const char *name,
                          const struct registry_node_entry **node)
{
    char names[512];

    switch (registry_find_node(run, name, node)) {
    case REGISTRY_MATCH_ONE:
        return 0;
    case REGISTRY_MATCH_AMBIGUOUS:
        fprintf(stderr,
                "hiernet exec: node '%s' is in several networks of run %s: say "
                "NETWORK/%s\n",
                name, run->id, name);
        return EXIT_USAGE;
    case REGISTRY_MATCH_NONE:
        break;
    }
    exec_node_names(run, names, sizeof names);
    fprintf(stderr, "hiernet exec: run %s has no node '%s' (nodes: %s)\n", run->id, name, names);
    return EXIT_USAGE;
}

/* Moves this process into the peer's network namespace (a no-op when the
 * peer shares ours, e.g. backend none). */
static int exec_enter(const struct registry_run_entry *run, const struct registry_node_entry *n)
{
    int procfd = registry_proc_open(&n->peer), nsfd;
    struct stat ours, theirs;

    if (procfd < 0) {
        fprintf(stderr, "hiernet exec: node %s/%s of run %s: its peer (pid %ld) is not running\n",
                n->network, n->node, run->id, (long)n->peer.pid);
        return EXIT_ENVIRONMENT;
    }
    nsfd = openat(procfd, "ns/net", O_RDONLY | O_CLOEXEC);
    close(procfd);
    if (nsfd < 0 || fstat(nsfd, &theirs) < 0) {
        fprintf(stderr, "hiernet exec: node %s/%s of run %s: open /proc/%ld/ns/net: %s\n",
                n->network, n->node, run->id, (long)n->peer.pid, strerror(errno));
        if (nsfd >= 0) close(nsfd);
        return EXIT_ENVIRONMENT;
    }
    if (stat("/proc/self/ns/net", &ours) == 0 && ours.st_ino == theirs.st_ino &&
        ours.st_dev == theirs.st_dev) {
        close(nsfd);
        return 0;
    }
    if (setns(nsfd, CLONE_NEWNET) < 0) {
        fprintf(stderr,
                "hiernet exec: enter the network namespace of node %s/%s (peer pid %ld): "
                "%s (needs root or CAP_SYS_ADMIN)\n",
                n->network, n->node, (long)n->peer.pid, strerror(errno));
        close(nsfd);
        return EXIT_ENVIRONMENT;
    }
    close(nsfd);
    return 0;
}

/* Resolves RUN and NODE and enters the node; 0 or an exit code. */
static int exec_prepare(const char *run_name, const char *node_name)
{
    const struct registry_run_entry *run;
    const struct registry_node_entry *node;
    struct registry_list list;
    char err[512];
    int rc;

    if (registry_list(&list, err, sizeof err) < 0) {
        fprintf(stderr, "hiernet exec: %s\n", err);
        return EXIT_ENVIRONMENT;
    }
    rc = exec_find_run(&list, run_name, &run);
    if (rc == 0) rc = exec_find_node(run, node_name, &node);
    if (rc == 0) rc = exec_enter(run, node);
    registry_list_free(&list);
    return rc;
}

int cli_exec(int argc, char **argv)
{
    int first_cmd = 2, rc;

    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        fputs(exec_usage, stdout);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[2], "--")) first_cmd = 3;
    if (argc <= first_cmd) {
        fprintf(stderr, "hiernet exec: missing %s (see hiernet exec --help)\n",
                argc < 1   ? "RUN"
                : argc < 2 ? "NODE"
                           : "CMD");
        return EXIT_USAGE;
    }
    if ((rc = exec_prepare(argv[0], argv[1])) != 0) return rc;
    execvp(argv[first_cmd], argv + first_cmd);
    fprintf(stderr, "hiernet exec: %s: %s\n", argv[first_cmd], strerror(errno));
    return errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXECUTE;
}
