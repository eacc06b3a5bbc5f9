/* spawn.c — starting a child process cheaply (see spawn.h). */
#include "controller/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWN_STACK (64 * 1024)

extern char **environ;

struct child_args {
    const struct spawn_spec *spec;
    int error;       /* written by the child before it gives up: shared memory */
    const char *step; /* which step failed */
};

/* Runs in the child, on its own stack, sharing our memory: system calls only. */
static int child_main(void *p)
{
    struct child_args *a = p;
    const struct spawn_spec *s = a->spec;
    sigset_t none;
    sigemptyset(&none);
    /* Dispositions are the child's own (no CLONE_SIGHAND). Exec resets the
     * handled ones; the controller ignores only SIGPIPE, which would survive.
     * libev blocks the signals it watches: unblock everything. */
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0); /* out of the terminal's group: Ctrl-C reaches the controller only */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (s->netns_fd >= 0 && setns(s->netns_fd, CLONE_NEWNET) < 0) {
        a->step = "setns";
        goto fail;
    }
    for (int i = 0; i < s->n_fds; i++) {
        int from = s->from[i] >= 0 ? s->from[i] : open("/dev/null", O_RDWR);
        if (from == s->to[i] ? fcntl(from, F_SETFD, 0) < 0 : dup2(from, s->to[i]) < 0) {
            a->step = "dup2";
            goto fail;
        }
    }
    if (strchr(s->path, '/'))
        execve(s->path, s->argv, s->envp);
    else
        execvpe(s->path, s->argv, s->envp);
    a->step = "exec";
fail:
    a->error = errno;
    _exit(127);
}

pid_t spawn_child(const struct spawn_spec *spec, char *err, size_t errlen)
{
    struct child_args args = {spec, 0, NULL};
    char *stack = malloc(SPAWN_STACK);
    if (!stack) return snprintf(err, errlen, "cannot start %s: out of memory", spec->path), -1;
    /* CLONE_VFORK: we resume once the child has exec'd or exited. */
    pid_t pid = clone(child_main, stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
    int clone_errno = errno;
    free(stack);
    if (pid < 0) {
        snprintf(err, errlen, "cannot start %s: %s", spec->path, strerror(clone_errno));
        return -1;
    }
    if (args.error) {
        waitpid(pid, NULL, 0); /* it has exited 127 */
        snprintf(err, errlen, "cannot start %s: %s: %s", spec->path, args.step,
                 strerror(args.error));
        return -1;
    }
    return pid;
}

/* ---- environments ---- */

static bool same_name(const char *a, const char *b)
{
    size_t n = strcspn(a, "=");
    return strncmp(a, b, n) == 0 && b[n] == '=';
}

char **spawn_env(const char *const *extra)
{
    size_t n_env = 0, n_extra = 0;
    while (environ[n_env]) n_env++;
    while (extra && extra[n_extra]) n_extra++;
    char **envp = calloc(n_env + n_extra + 1, sizeof *envp);
    if (!envp) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < n_env; i++) {
        bool replaced = false;
        for (size_t j = 0; j < n_extra && !replaced; j++) replaced = same_name(extra[j], environ[i]);
        if (!replaced) envp[n++] = environ[i];
    }
    for (size_t j = 0; j < n_extra; j++) envp[n++] = (char *)extra[j];
    envp[n] = NULL;
    return envp;
}

void spawn_env_free(char **envp)
{
    free(envp); /* the strings belong to environ and the caller */
}
