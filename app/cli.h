/* cli.h — the hiernet subcommands that live in app/ (main.c
 * dispatches to them): clean.c, exec.c, doctor.c, models.c, agent.c.
 *
 * Each takes the arguments after the command name (argv[0] is the first of
 * them, as main.c's cmd_run), answers --help, prints one-line errors naming
 * the value, and returns the process exit code: 0 success, 2 usage or bad
 * input, 3 environment (missing privilege or feature, run not alive). */
#pragma once

int cli_clean(int argc, char **argv);
int cli_exec(int argc, char **argv);
int cli_doctor(int argc, char **argv);
int cli_models(int argc, char **argv);
int cli_agent(int argc, char **argv);

/* The effective capability set from /proc/self/status (0 when unreadable):
 * doctor's privilege lines and the agent's hello. */
unsigned long long cli_cap_effective(void);
