/* main.c — the hiernet command line: parses the command and its options and
 * hands over to the scenario runner. Exit codes: 0 success, 1 scenario error,
 * 2 usage or bad input, 3 environment. */
#include "controller/cli.h"
#include "hiernet_version.h"
#include "lua/scenario.h"

#include <ev.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2

static const char main_usage[] =
    "usage: hiernet <command> [options]\n"
    "\n"
    "hiernet emulates hierarchical (terminal / edge / cloud) networks and runs\n"
    "distributed machine-learning algorithms, written as Lua scenario scripts,\n"
    "on peers placed in the emulated nodes.\n"
    "\n"
    "commands:\n"
    "  run SCENARIO.lua [options] [ARGS...]  run a scenario (see hiernet run --help)\n"
    "  doctor                                privileges, kernel features, the backend auto picks\n"
    "  exec RUN NODE -- CMD...               run a command inside a node of a live run\n"
    "  clean                                 remove what crashed runs left behind\n"
    "  version                               print versions of hiernet and its libraries\n"
    "  help                                  this text\n"
    "\n"
    "exit codes: 0 success, 1 scenario error, 2 usage or bad input, 3 environment,\n"
    "130/143 interrupted by SIGINT/SIGTERM.\n";

static const char run_usage[] =
    "usage: hiernet run SCENARIO.lua [--set name=value]... [--out DIR]\n"
    "                   [--backend none|auto|kernel|user] [--quiet] [ARGS...]\n"
    "\n"
    "Runs the scenario as a task on the event loop. Results go to\n"
    "results/<scenario>-<timestamp>/ (or DIR): run.json (status, parameters,\n"
    "topology, versions, seed), log.txt and every hn.record CSV.\n"
    "\n"
    "options:\n"
    "  --set name=value   value for hn.param(name, default), typed like the default\n"
    "  --out DIR          results directory (created if missing)\n"
    "  --backend B        override every network's backend\n"
    "  --quiet            no log lines on stderr (they still go to log.txt)\n"
    "  ARGS               passed to the scenario chunk as ...\n";

static void print_version(void)
{
    printf("hiernet %s (git %s)\n", HIERNET_VERSION, HIERNET_GIT);
    printf("libev %d.%d, msgpack-c %s\n", ev_version_major(), ev_version_minor(),
           msgpack_version());
}

/* Takes the value of an option: "--out DIR" or "--out=DIR". */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=') return argv[*i] + n + 1;
    if (strcmp(argv[*i], name) != 0) return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "hiernet run: %s needs a value (see hiernet run --help)\n", name);
        exit(EXIT_USAGE);
    }
    return argv[++*i];
}

static int cmd_run(int argc, char **argv)
{
    struct scenario_options o = {0};
    const char **sets = calloc((size_t)argc, sizeof *sets);
    const char **args = calloc((size_t)argc, sizeof *args);
    if (!sets || !args) return 1;
    const char *v;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(run_usage, stdout);
            free(sets);
            free(args);
            return 0;
        } else if ((v = option_value(argc, argv, &i, "--set"))) {
            sets[o.n_sets++] = v;
        } else if ((v = option_value(argc, argv, &i, "--out"))) {
            o.out_dir = v;
        } else if ((v = option_value(argc, argv, &i, "--backend"))) {
            o.backend = v;
        } else if (!strcmp(argv[i], "--quiet")) {
            o.quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1] == '-' && !o.path) {
            fprintf(stderr, "hiernet run: unknown option '%s' (see hiernet run --help)\n", argv[i]);
            free(sets);
            free(args);
            return EXIT_USAGE;
        } else if (!o.path) {
            o.path = argv[i];
        } else {
            args[o.n_args++] = argv[i];
        }
    }
    if (!o.path) {
        fprintf(stderr, "hiernet run: missing SCENARIO.lua (see hiernet run --help)\n");
        free(sets);
        free(args);
        return EXIT_USAGE;
    }
    o.sets = sets;
    o.args = args;
    int code = scenario_run(&o);
    free(sets);
    free(args);
    return code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(main_usage, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(main_usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        print_version();
        return 0;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "clean")) return cli_clean(argc - 2, argv + 2);
    if (!strcmp(cmd, "exec")) return cli_exec(argc - 2, argv + 2);
    if (!strcmp(cmd, "doctor")) return cli_doctor(argc - 2, argv + 2);
    fprintf(stderr, "hiernet: unknown command '%s' (see hiernet --help)\n", cmd);
    return EXIT_USAGE;
}
