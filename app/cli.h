/* cli.h — the hiernet subcommands that live in app/ (main.c
 * dispatches to them): clean.c, exec.c, doctor.c, models.c, agent.c,
 * clean_hosts.c, doctor_hosts.c.
 *
 * Each takes the arguments after the command name (argv[0] is the first of
 * them, as main.c's cmd_run), answers --help, prints one-line errors naming
 * the value, and returns the process exit code: 0 success, 2 usage or bad
 * input, 3 environment (missing privilege or feature, run not alive). */
#pragma once

#include "topo/machines.h"

#include <stdbool.h>
#include <stddef.h>

int cli_clean(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_doctor(int argc, char **argv);
int cli_models(int argc, char **argv);
int cli_agent(int argc, char **argv);
/* clean --hosts SPEC (clean_hosts.c), doctor --hosts SPEC (doctor_hosts.c). */
int cli_clean_hosts(const char *spec);
/* hosts_load(spec) for subcommand cmd: false after one line on stderr
 * (the file's line and value), with m freed. */
bool cli_hosts_read(const char *cmd, const char *spec, struct topo_machines *m);
int cli_doctor_hosts(const char *spec);
/* The arguments of `hiernet CMD [--hosts FILE|slurm]` (clean, doctor):
 * -1 when CMD goes on, *spec then the --hosts value or NULL; else the exit
 * code: 0 after usage on stdout (--help), 2 after one line on stderr. */
int cli_hosts_option(const char *cmd, const char *usage, int argc, char **argv, const char **spec);

/* The effective capability set from /proc/self/status (0 when unreadable):
 * doctor's privilege lines and the agent's hello. */
unsigned long long cli_cap_effective(void);
#define CLI_CAP_NET_ADMIN 12 /* linux/capability.h */
#define CLI_CAP_SYS_ADMIN 21
/* The kernel features emu_nl_probe finds here, space-separated ("veth
 * bridge htb"), into out: doctor --hosts' own row. -1 with err when the
 * probe cannot run (no privilege); out is then "". */
int cli_feature_names(char *out, size_t cap, char *err, size_t errlen);
/* The same from features already probed (the agent's hello, from
 * host_probe's, which its part's build reuses). */
struct emu_nl_features;
void cli_feature_names_of(const struct emu_nl_features *f, char *out, size_t cap);
