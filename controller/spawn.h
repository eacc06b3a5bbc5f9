/* spawn.h — starting a child process (peer, linkd, node program) cheaply.
 *
 * The child is made with clone(CLONE_VM | CLONE_VFORK), as posix_spawn
 * does: it shares the controller's memory until it execs, so nothing is
 * copied, however large the controller is (a 1000-node start forks a
 * thousand peers). Before exec it resets its signal state, leaves the
 * terminal's process group, asks for SIGKILL when the controller dies,
 * enters a network namespace if given, changes directory if asked and moves
 * file descriptors into place.
 * Only system calls run in the child. Owns nothing once it returns. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

struct spawn_spec {
    const char *path; /* executable; searched in PATH when it has no '/' */
    char *const *argv;
    char *const *envp; /* the child's whole environment */
    int netns_fd;      /* namespace to enter, or -1 */
    /* dup2(from[i], to[i]) for each i < n_fds, in order; -1 = open /dev/null */
    int from[4], to[4];
    int n_fds;
    /* Run the program under a small init in a new PID namespace: when the
     * program ends, or the init is killed (the controller died: the init has
     * PDEATHSIG), the kernel kills everything the program started, however
     * it detached. Signals sent to the init (other than SIGKILL) are passed
     * to the program; its exit status becomes the init's (a death by signal
     * N as 128 + N). Needs CAP_SYS_ADMIN; costs a full fork. */
    int pid_namespace;
    /* With pid_namespace: the init exits as soon as the program has, which
     * makes the kernel kill whatever the program left running, instead of
     * waiting for those to end. */
    int end_with_program;
    const char *cwd; /* working directory of the program, or NULL: ours */
};

/* Returns the child's pid, or -1 with err set when it could not be started
 * or could not exec (the child then exited 127). */
pid_t spawn_child(const struct spawn_spec *spec, char *err, size_t errlen);

/* environ plus the NAME=value settings in extra (NULL-terminated, may be
 * NULL), the later ones replacing same-named ones. The array and strings
 * live in storage until spawn_env_free. */
char **spawn_env(const char *const *extra);
void spawn_env_free(char **envp);
