/* clean_hosts.c — `hiernet clean --hosts FILE|slurm`: `hiernet clean` on
 * every machine of a hosts file, one line per machine.
 *
 * The controller's own machine runs this binary's `clean` directly, every
 * other one over SSH (or srun) with the command line an agent gets
 * (controller/agent_client.h: BatchMode, HIERNET_SSH_CONFIG, the remote
 * binary). Machine after machine, blocking: a command line tool with no
 * event loop. Each line is the machine and the last line its clean printed
 * (its summary), or why it failed. Also what clean and doctor share of
 * --hosts: its parsing (cli_hosts_option) and reading (cli_hosts_read). */
#include "app/cli.h"
#include "controller/agent_client.h"
#include "controller/hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_ENVIRONMENT 3

extern char **environ;

/* The last non-empty line of text (len bytes) into out. */
static void last_line(const char *text, size_t len, char *out, size_t cap)
{
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    size_t start = len;
    while (start > 0 && text[start - 1] != '\n')
        start--;
    snprintf(out, cap, "%.*s", (int)(len - start), text + start);
}

/* Reads the child's stdout and stderr (one pipe: both) to its end. */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        size_t keep = (size_t)n;
        if (len + keep > cap) { /* keep the tail: the summary is last */
            size_t drop = len + keep - cap;
            memmove(buf, buf + drop, len - drop);
            len -= drop;
        }
        memcpy(buf + len, chunk, keep);
        len += keep;
    }
    return len;
}

/* Runs argv, its output in out (its last line); the wait status or -1. */
static int run_capture(char *const *argv, char *out, size_t cap)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) return snprintf(out, cap, "pipe: %s", strerror(errno)), -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return snprintf(out, cap, "%s: %s", argv[0], strerror(rc)), -1;
    }
    static char text[65536];
    size_t len = read_all(fds[0], text, sizeof text);
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    last_line(text, len, out, cap);
    return status;
}

static int clean_machine(const struct topo_machine *m, bool slurm)
{
    struct agent_client_options o;
    char *argv[40], store[8192], self[PATH_MAX], line[1024];
    const char *words[] = {"clean", NULL};
    agent_client_options_default(&o);
    o.slurm = slurm;
    ssize_t n = m->local ? readlink("/proc/self/exe", self, sizeof self - 1) : 0;
    if (m->local && n > 0) {
        self[n] = '\0';
        argv[0] = self, argv[1] = "clean", argv[2] = NULL;
    } else if (m->local || agent_client_argv(m, &o, words, argv, 40, store, sizeof store) < 0) {
        printf("%s: failed: cannot make the command line\n", m->name);
        return -1;
    }
    int status = run_capture(argv, line, sizeof line);
    bool ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok)
        printf("%s: %s\n", m->name, line);
    else if (status >= 0 && WIFEXITED(status))
        printf("%s: failed (exit %d): %s\n", m->name, WEXITSTATUS(status), line);
    else
        printf("%s: failed: %s\n", m->name, line);
    fflush(stdout);
    return ok ? 0 : -1;
}

bool cli_hosts_read(const char *cmd, const char *spec, struct topo_machines *m)
{
    char err[512];
    if (hosts_load(spec, m, err, sizeof err) == 0) return true;
    fprintf(stderr, "hiernet %s: --hosts: %s\n", cmd, err);
    topo_machines_free(m);
    return false;
}

int cli_hosts_option(const char *cmd, const char *usage, int argc, char **argv, const char **spec)
{
    *spec = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!*spec && !strncmp(argv[i], "--hosts=", 8)) {
            *spec = argv[i] + 8;
            continue;
        }
        if (!*spec && !strcmp(argv[i], "--hosts")) {
            if (i + 1 == argc) {
                fprintf(stderr, "hiernet %s: --hosts needs a value (see hiernet %s --help)\n", cmd,
                        cmd);
                return 2;
            }
            *spec = argv[++i];
            continue;
        }
        fprintf(stderr, "hiernet %s: unknown argument '%s' (see hiernet %s --help)\n", cmd, argv[i],
                cmd);
        return 2;
    }
    return -1;
}

int cli_clean_hosts(const char *spec)
{
    struct topo_machines m;
    if (!cli_hosts_read("clean", spec, &m)) return 2;
    int failures = 0;
    for (size_t i = 0; i < m.n; i++)
        failures += clean_machine(&m.v[i], !strcmp(m.source, "slurm")) < 0;
    topo_machines_free(&m);
    return failures ? EXIT_ENVIRONMENT : 0;
}
