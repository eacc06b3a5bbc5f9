/* log.h — where the controller library's own messages go (a peer's stray
 * response, a cgroup that would not go, a warning about the dataset
 * cache): to the sink the program sets, which for a run is the runtime's
 * log (log.txt, and stderr unless --quiet). Library code never writes to
 * stderr itself. Without a sink, messages go to stderr as "hiernet: ...",
 * which suits the CLI subcommands and the unit tests.
 *
 * The sink is process-wide, set once while single-threaded (before a
 * network starts); ctl_log may be called from any thread after that. */
#pragma once

typedef void (*ctl_log_sink)(void *ctx, const char *line);

/* NULL restores stderr. */
void ctl_log_set(ctl_log_sink sink, void *ctx);

/* One line, without a trailing newline. */
void ctl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
