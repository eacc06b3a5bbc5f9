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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWN_STACK (64 * 1024)

extern char **environ;

struct child_args {
    const struct spawn_spec *spec;
    int error;        /* written by the child before it gives up: shared memory */
    const char *step; /* which step failed */
};

/* Everything before exec: signal state, process group, parent-death
 * signal, namespace, working directory, file descriptors. System calls only. */
static int child_setup(struct child_args *a)
{
    const struct spawn_spec *s = a->spec;
    sigset_t none;
    sigemptyset(&none);
    /* Dispositions are the child's own (no CLONE_SIGHAND). Exec resets the
     * handled ones; the controller ignores only SIGPIPE, which would survive.
     * libev blocks the signals it watches: unblock everything. */
    /* Signals are blocked across the clone: a handler of the controller's
     * (libev's SIGCHLD) must never run here, on memory we share with it. */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_DFL &&
            old.sa_handler != SIG_IGN)
            signal(sig, SIG_DFL);
    }
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0); /* out of the terminal's group: Ctrl-C reaches the controller only */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (s->netns_fd >= 0 && setns(s->netns_fd, CLONE_NEWNET) < 0) {
        a->step = "setns";
        return -1;
    }
    if (s->cwd && chdir(s->cwd) < 0) {
        a->step = "chdir";
        return -1;
    }
    for (int i = 0; i < s->n_fds; i++) {
        int from = s->from[i] >= 0 ? s->from[i] : open("/dev/null", O_RDWR | O_CLOEXEC);
        if (from == s->to[i] ? fcntl(from, F_SETFD, 0) < 0 : dup2(from, s->to[i]) < 0) {
            a->step = "dup2";
            return -1;
        }
    }
    return 0;
}

static void child_exec(struct child_args *a)
{
    const struct spawn_spec *s = a->spec;
    if (strchr(s->path, '/'))
        execve(s->path, s->argv, s->envp);
    else
        execvpe(s->path, s->argv, s->envp);
    a->step = "exec";
    a->error = errno;
    _exit(127);
}

/* Runs in the child, on its own stack, sharing our memory: system calls only. */
static int child_main(void *p)
{
    struct child_args *a = p;
    if (child_setup(a) < 0) {
        a->error = errno;
        _exit(127);
    }
    child_exec(a);
    return 127;
}

/* ---- a program under its own init (spec->pid_namespace) ---- */

static volatile pid_t init_program; /* the init's only direct child */

static void init_forward(int sig)
{
    if (init_program > 0) kill(init_program, sig);
}

static const int init_forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof init_forwarded / sizeof *init_forwarded)

/* A fork by raw system call: glibc's fork() runs its atfork handlers and
 * takes its locks, which after our raw clones would deadlock on state
 * copied from the controller (a futex nobody will release). */
static pid_t raw_fork(unsigned long flags)
{
    return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

/* pid 1 of the new namespace, a forked copy of the controller that never
 * execs: it keeps only the program's descriptors (a copy of a peer's
 * control socket would hide that peer's EOF), starts the program, passes
 * signals on, reaps every orphan until none is left (or, with
 * end_with_program, until the program itself has ended) and exits with the
 * program's status. System calls only. */
static void init_main(struct child_args *a)
{
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL); /* libev's handlers are not ours */
    if (child_setup(a) < 0) _exit(127);
    syscall(SYS_close_range, 3, ~0U, 0);
    struct sigaction sa = {.sa_handler = init_forward};
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaction(init_forwarded[i], &sa, NULL);
    pid_t child = raw_fork(0);
    if (child == 0) {
        for (size_t i = 0; i < N_FORWARDED; i++)
            signal(init_forwarded[i], SIG_DFL);
        child_exec(a);
    }
    if (child < 0) _exit(127);
    init_program = child;
    int status = 0, main_status = 0;
    pid_t pid;
    while ((pid = (pid_t)syscall(SYS_wait4, -1, &status, 0, NULL)) > 0 ||
           (pid < 0 && errno == EINTR)) {
        if (pid != child) continue;
        main_status = status;
        if (a->spec->end_with_program) break; /* our exit kills the namespace's rest */
    }
    _exit(WIFEXITED(main_status) ? WEXITSTATUS(main_status) : 128 + WTERMSIG(main_status));
}

/* A full fork (the init never execs, so it cannot share our memory). An
 * exec failure in the program shows as exit status 127, not as err. */
static pid_t spawn_with_init(const struct spawn_spec *spec, char *err, size_t errlen)
{
    struct child_args args = {spec, 0, NULL};
    pid_t pid = raw_fork(CLONE_NEWPID);
    if (pid == 0) init_main(&args);
    if (pid < 0) snprintf(err, errlen, "cannot start %s: %s", spec->path, strerror(errno));
    return pid;
}

pid_t spawn_child(const struct spawn_spec *spec, char *err, size_t errlen)
{
    if (spec->pid_namespace) return spawn_with_init(spec, err, errlen);
    struct child_args args = {spec, 0, NULL};
    char *stack = malloc(SPAWN_STACK);
    if (!stack) return snprintf(err, errlen, "cannot start %s: out of memory", spec->path), -1;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* the child unblocks once it is safe (child_setup) */
    /* CLONE_VFORK: we resume once the child has exec'd or exited. */
    pid_t pid = clone(child_main, stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
    int clone_errno = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
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
    while (environ[n_env])
        n_env++;
    while (extra && extra[n_extra])
        n_extra++;
    char **envp = calloc(n_env + n_extra + 1, sizeof *envp);
    if (!envp) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < n_env; i++) {
        bool replaced = false;
        for (size_t j = 0; j < n_extra && !replaced; j++)
            replaced = same_name(extra[j], environ[i]);
        if (!replaced) envp[n++] = environ[i];
    }
    for (size_t j = 0; j < n_extra; j++)
        envp[n++] = (char *)extra[j];
    envp[n] = NULL;
    return envp;
}

void spawn_env_free(char **envp)
{
    free(envp); /* the strings belong to environ and the caller */
}
