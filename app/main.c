/* main.c — the hiernet command line: parses the command and its options and
 * hands over to the scenario runner. Exit codes: 0 success, 1 scenario error,
 * 2 usage or bad input, 3 environment. */
#include "app/cli.h"
#include "hiernet_version.h"
#include "app/scenario.h"

#include <ev.h>
#include <msgpack.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2

extern char **environ;

static const char main_usage[] =
    "usage: hiernet <command> [options]\n"
    "\n"
    "hiernet emulates hierarchical (terminal / edge / cloud) networks and runs\n"
    "distributed machine-learning algorithms, written as Lua scenario scripts,\n"
    "on peers placed in the emulated nodes.\n"
    "\n"
    "commands:\n"
    "  run SCENARIO.lua [options] [ARGS...]  run a scenario (see hiernet run --help)\n"
    "  draw SCENARIO.lua [--out FILE.dot]    the topology as Graphviz DOT (and SVG), nothing "
    "started\n"
    "  place SCENARIO.lua [--hosts FILE|slurm]\n"
    "                                        which machine each node would run on, nothing "
    "started\n"
    "  plot DIR... [--out OUTDIR]            plots of results directories (accuracy, loss, ...)\n"
    "  report DIR... [--out OUTDIR]          one HTML page of runs: summary, plots, topology\n"
    "  doctor [--hosts FILE|slurm]           privileges, kernel features, the backend auto picks\n"
    "  models [NAME]                         the model zoo and the device profiles\n"
    "  exec RUN NODE -- CMD...               run a command inside a node of a live run\n"
    "  clean [--hosts FILE|slurm]            remove what crashed runs left behind\n"
    "  agent                                 one machine's end of a run on several (started\n"
    "                                        by the controller over SSH or srun)\n"
    "  version                               print versions of hiernet and its libraries\n"
    "  help                                  this text\n"
    "\n"
    "exit codes: 0 success, 1 scenario error, 2 usage or bad input, 3 environment,\n"
    "130/143 interrupted by SIGINT/SIGTERM.\n";

static const char run_usage[] =
    "usage: hiernet run SCENARIO.lua [--set name=value]... [--out DIR]\n"
    "                   [--backend none|auto|kernel|user] [--dilation D|auto]\n"
    "                   [--dilation-max M] [--quiet]\n"
    "                   [--hosts FILE|slurm] [ARGS...]\n"
    "\n"
    "Runs the scenario as a task on the event loop. Results go to\n"
    "results/<scenario>-<timestamp>/ (or DIR): run.json (status, parameters,\n"
    "topology, versions, seed), log.txt, every hn.record CSV and, on the\n"
    "emulated backends, links.csv and tcp.csv (link and TCP counters).\n"
    "\n"
    "options:\n"
    "  --set name=value   value for hn.param(name, default), typed like the default;\n"
    "                     a value of another type, or a name the scenario never\n"
    "                     reads, ends the run with exit 2\n"
    "  --out DIR          results directory (created if missing)\n"
    "  --backend B        override every network's backend\n"
    "  --dilation D       time dilation, D >= 1 (overrides the networks'): the run goes\n"
    "                     D times slower than real time and reports emulated time\n"
    "  --dilation auto    measure the first compute commands (40 of them, 1 s at\n"
    "                     least) and the links' first 3 active samples: when the\n"
    "                     host kept up, go on at 1; when more than 2% of the\n"
    "                     commands were starved of CPU, or the links say the host\n"
    "                     cannot forward the run's traffic, start the scenario\n"
    "                     again at the dilation needed (the compute's bounded by its\n"
    "                     CPU demand), the probe's records in DIR/dilation-probe/;\n"
    "                     a rerun judges its links' samples again at its D and may\n"
    "                     start once more (2 reruns at most); run.json's dilation\n"
    "                     says which and why\n"
    "  --dilation-max M   the most auto may choose, 1..1000 (overrides the networks'\n"
    "                     dilation_max): a larger need is cut to M, the reason says\n"
    "                     so, and the run's overload verdict shows what the host\n"
    "                     could not keep up with; refused beside a numeric\n"
    "                     --dilation, noted at the end of a run never \"auto\"\n"
    "  --quiet            no log lines on stderr (they still go to log.txt)\n"
    "  --hosts FILE       machines to place the nodes on (overrides the networks' hosts=):\n"
    "                     'name address [cores=N] [mem=GiB] [user=NAME]' a line (user=: the\n"
    "                     SSH login); 'slurm': the current allocation's. The placement goes\n"
    "                     to run.json. A placement that needs other machines starts their\n"
    "                     agents (ssh -o BatchMode=yes, $HIERNET_SSH_CONFIG as ssh -F, the\n"
    "                     binary at this one's path or $HIERNET_REMOTE_BIN; srun for\n"
    "                     slurm), records their control RTT and clock offset in run.json,\n"
    "                     and builds each machine's part through its agent (backend none is\n"
    "                     refused, exit 3; docs/guide.md, Several machines)\n"
    "  ARGS               passed to the scenario chunk as ...\n";

static const char draw_usage[] =
    "usage: hiernet draw SCENARIO.lua [--set name=value]... [--out FILE.dot]\n"
    "                    [--hosts FILE|slurm] [ARGS...]\n"
    "\n"
    "Runs the scenario up to its first net:start() and prints that network as\n"
    "a Graphviz DOT graph instead of starting it: nothing is created. Nodes are\n"
    "coloured by tier, switches are boxes, links are labelled with their\n"
    "parameters. With --out the DOT goes to FILE, and an SVG beside it when\n"
    "Graphviz's dot is installed. A scenario that starts no network is drawn\n"
    "whole at its end. With --hosts (or a network's hosts=) nodes are coloured by\n"
    "the machine they are placed on and the links cut between machines are dashed.\n";

static const char place_usage[] =
    "usage: hiernet place SCENARIO.lua [--hosts FILE|slurm] [--set name=value]...\n"
    "                     [--out FILE] [ARGS...]\n"
    "\n"
    "Runs the scenario up to its first net:start() and prints where that network's\n"
    "nodes would run: the machines (cores, nodes, load), each node's machine, and\n"
    "the links cut between machines with their configured delay and bandwidth.\n"
    "Without machines (--hosts or a network's hosts=) every node is placed here.\n"
    "Nothing is created. "
    "With --out the tables go to FILE instead of stdout.\n";

static void print_version(void)
{
    printf("hiernet %s (git %s)\n", HIERNET_VERSION, HIERNET_GIT);
    printf("libev %d.%d, msgpack-c %s\n", ev_version_major(), ev_version_minor(),
           msgpack_version());
}

/* Takes the value of an option: "--out DIR" or "--out=DIR". cmd (run, draw,
 * place) names the subcommand in the usage error. */
static const char *option_value(const char *cmd, int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=') return argv[*i] + n + 1;
    if (strcmp(argv[*i], name) != 0) return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "hiernet %s: %s needs a value (see hiernet %s --help)\n", cmd, name, cmd);
        exit(EXIT_USAGE);
    }
    return argv[++*i];
}

/* argv[i] is an option of run alone (draw and place create nothing, so a
 * backend, a dilation or quiet would be taken and ignored). */
static bool run_only_option(const char *cmd, const char *arg)
{
    static const char *const run_only[] = {"--backend", "--dilation", "--dilation-max", "--quiet"};
    if (!strcmp(cmd, "run")) return false;
    for (size_t k = 0; k < sizeof run_only / sizeof *run_only; k++) {
        size_t n = strlen(run_only[k]);
        if (!strncmp(arg, run_only[k], n) && (arg[n] == '\0' || arg[n] == '=')) return true;
    }
    return false;
}

/* Parses the options shared by run, draw and place into o (sets/args point
 * into argv). Returns -1 to go on, else the exit code (--help, bad usage). */
static int parse_scenario_options(const char *cmd, const char *usage, int argc, char **argv,
                                  struct scenario_options *o, const char **sets, const char **args)
{
    const char *v;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (run_only_option(cmd, argv[i])) {
            fprintf(stderr,
                    "hiernet %s: '%s' is an option of hiernet run: %s creates nothing "
                    "(see hiernet %s --help)\n",
                    cmd, argv[i], cmd, cmd);
            return EXIT_USAGE;
        } else if ((v = option_value(cmd, argc, argv, &i, "--set"))) {
            sets[o->n_sets++] = v;
        } else if ((v = option_value(cmd, argc, argv, &i, "--out"))) {
            o->out_dir = v;
        } else if ((v = option_value(cmd, argc, argv, &i, "--backend"))) {
            o->backend = v;
        } else if ((v = option_value(cmd, argc, argv, &i, "--dilation"))) {
            o->dilation = v;
        } else if ((v = option_value(cmd, argc, argv, &i, "--dilation-max"))) {
            o->dilation_max = v;
        } else if ((v = option_value(cmd, argc, argv, &i, "--hosts"))) {
            o->hosts = v;
        } else if (!strcmp(argv[i], "--quiet")) {
            o->quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1] == '-' && !o->path) {
            fprintf(stderr, "hiernet %s: unknown option '%s' (see hiernet %s --help)\n", cmd,
                    argv[i], cmd);
            return EXIT_USAGE;
        } else if (!o->path) {
            o->path = argv[i];
        } else {
            args[o->n_args++] = argv[i];
        }
    }
    if (!o->path) {
        fprintf(stderr, "hiernet %s: missing SCENARIO.lua (see hiernet %s --help)\n", cmd, cmd);
        return EXIT_USAGE;
    }
    o->sets = sets;
    o->args = args;
    return -1;
}

/* dot -Tsvg, when Graphviz is installed: the SVG goes beside the DOT file. */
static void render_svg(const char *dot_path)
{
    char svg[4096];
    size_t n = strlen(dot_path);
    if (n > 4 && !strcmp(dot_path + n - 4, ".dot"))
        snprintf(svg, sizeof svg, "%.*s.svg", (int)(n - 4), dot_path);
    else
        snprintf(svg, sizeof svg, "%s.svg", dot_path);
    pid_t pid;
    char *argv[] = {"dot", "-Tsvg", (char *)dot_path, "-o", svg, NULL};
    if (posix_spawnp(&pid, "dot", NULL, NULL, argv, environ) != 0) return; /* no Graphviz */
    int status;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        fprintf(stderr, "hiernet draw: wrote %s and %s\n", dot_path, svg);
}

static int cmd_scenario(const char *cmd, int argc, char **argv)
{
    bool place = !strcmp(cmd, "place"), draw = place || !strcmp(cmd, "draw");
    struct scenario_options o = {0};
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    const char **args = calloc((size_t)argc + 1, sizeof *args);
    int code = 1;
    if (sets && args) {
        code = parse_scenario_options(cmd,
                                      place  ? place_usage
                                      : draw ? draw_usage
                                             : run_usage,
                                      argc, argv, &o, sets, args);
        if (code < 0) {
            o.draw = draw;
            o.place = place;
            o.draw_out = draw ? o.out_dir : NULL;
            code = scenario_run(&o);
            if (draw && !place && code == 0 && o.draw_out) render_svg(o.draw_out);
        }
    }
    free(sets);
    free(args);
    return code;
}

/* hiernet plot / report: tools of the embedded Lua library
 * (lua/hiernet/plot.lua, report.lua), which parse their own options. */
static int cmd_tool(const char *module, int argc, char **argv)
{
    struct scenario_options o = {0};
    o.tool = module;
    o.args = (const char *const *)argv;
    o.n_args = (size_t)argc;
    o.quiet = true;
    return scenario_run(&o);
}

/* A network holds a namespace fd, a netlink socket and a control socket per
 * node: 1000 nodes need more than the usual soft limit of 1024 fds. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    raise_fd_limit();
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
    if (!strcmp(cmd, "run") || !strcmp(cmd, "draw") || !strcmp(cmd, "place"))
        return cmd_scenario(cmd, argc - 2, argv + 2);
    if (!strcmp(cmd, "plot")) return cmd_tool("hiernet.plot", argc - 2, argv + 2);
    if (!strcmp(cmd, "report")) return cmd_tool("hiernet.report", argc - 2, argv + 2);
    if (!strcmp(cmd, "clean")) return cli_clean(argc - 2, argv + 2);
    if (!strcmp(cmd, "exec")) return cli_exec(argc - 2, argv + 2);
    if (!strcmp(cmd, "doctor")) return cli_doctor(argc - 2, argv + 2);
    if (!strcmp(cmd, "models")) return cli_models(argc - 2, argv + 2);
    if (!strcmp(cmd, "agent")) return cli_agent(argc - 2, argv + 2);
    fprintf(stderr, "hiernet: unknown command '%s' (see hiernet --help)\n", cmd);
    return EXIT_USAGE;
}
