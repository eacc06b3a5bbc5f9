/* proc.c — programs run inside a node (see proc.h). */
#include "controller/proc.h"

#include "common/container.h"
#include "controller/reaper.h"
#include "controller/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct capture {
    ev_io watcher;
    int fd;
    char *data;
    size_t len, cap, dropped;
};

struct proc {
    struct ev_loop *loop;
    pid_t pid;
    bool exited, finished;
    int status;
    ev_child child;
    struct capture out, err;
    proc_done_fn done;
    void *ctx;
    bool end_with_program;
};

/* ---- completion ---- */

static void maybe_finish(struct proc *p)
{
    if (p->finished || !p->exited || p->out.fd >= 0 || p->err.fd >= 0) return;
    p->finished = true;
    int st = p->status;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    if (p->done)
        p->done(p->ctx, p, code, p->out.data ? p->out.data : "", p->out.len,
                p->err.data ? p->err.data : "", p->err.len);
}

static void on_child(EV_P_ ev_child *w, int revents)
{
    struct proc *p = container_of(w, struct proc, child);
    ev_child_stop(EV_A_ w);
    p->exited = true;
    p->status = w->rstatus;
    /* The group outlives its leader while members remain, and its id is
     * not reused meanwhile: this reaches exactly what the program left. */
    if (p->end_with_program) kill(-p->pid, SIGKILL);
    maybe_finish(p);
}

/* ---- capture ---- */

static void capture_close(struct proc *p, struct capture *c)
{
    if (c->fd < 0) return;
    ev_io_stop(p->loop, &c->watcher);
    close(c->fd);
    c->fd = -1;
}

static void capture_append(struct capture *c, const char *buf, size_t n)
{
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n + 1 && cap < PROC_OUTPUT_MAX + 1)
            cap *= 2;
        if (cap > PROC_OUTPUT_MAX + 1) cap = PROC_OUTPUT_MAX + 1;
        char *grown = realloc(c->data, cap);
        if (grown) c->data = grown, c->cap = cap;
    }
    size_t room = c->cap > c->len + 1 ? c->cap - c->len - 1 : 0;
    size_t take = n < room ? n : room;
    if (take) memcpy(c->data + c->len, buf, take);
    c->len += take;
    c->dropped += n - take;
    if (c->data) c->data[c->len] = '\0';
}

static void on_output(struct proc *p, struct capture *c)
{
    char buf[16384];
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n > 0) {
        capture_append(c, buf, (size_t)n);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    capture_close(p, c);
    maybe_finish(p);
}

static void on_stdout(EV_P_ ev_io *w, int revents)
{
    struct proc *p = container_of(w, struct proc, out.watcher);
    on_output(p, &p->out);
}

static void on_stderr(EV_P_ ev_io *w, int revents)
{
    struct proc *p = container_of(w, struct proc, err.watcher);
    on_output(p, &p->err);
}

static void capture_start(struct proc *p, struct capture *c, int fd,
                          void (*cb)(struct ev_loop *, ev_io *, int))
{
    c->fd = fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    ev_io_init(&c->watcher, cb, fd, EV_READ);
    ev_io_start(p->loop, &c->watcher);
}

/* ---- lifecycle ---- */

struct proc *proc_spawn(struct ev_loop *loop, const struct proc_spec *spec, char *const argv[],
                        proc_done_fn done, void *ctx, char *err, size_t errlen)
{
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) < 0)
        return snprintf(err, errlen, "pipe: %s", strerror(errno)), NULL;
    if (pipe2(err_pipe, O_CLOEXEC) < 0) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        return snprintf(err, errlen, "pipe: %s", strerror(errno)), NULL;
    }
    struct proc *p = calloc(1, sizeof *p);
    char **envp = spawn_env(NULL);
    pid_t pid = -1;
    if (p && envp) {
        /* In an emulated node (root), under an init of its own: whatever the
         * program starts ends with it, and with the controller. */
        struct spawn_spec s = {.path = argv[0],
                               .argv = argv,
                               .envp = envp,
                               .netns_fd = spec->netns_fd,
                               .from = {-1, out_pipe[1], err_pipe[1]},
                               .to = {0, 1, 2},
                               .n_fds = 3,
                               .pid_namespace = spec->netns_fd >= 0,
                               .end_with_program = spec->end_with_program,
                               .cwd = spec->cwd};
        pid = spawn_child(&s, err, errlen);
    } else {
        snprintf(err, errlen, "cannot start %s: out of memory", argv[0]);
    }
    spawn_env_free(envp);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (pid < 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        free(p);
        return NULL;
    }
    p->loop = loop;
    p->pid = pid;
    p->end_with_program = spec->end_with_program;
    p->done = done;
    p->ctx = ctx;
    capture_start(p, &p->out, out_pipe[0], on_stdout);
    capture_start(p, &p->err, err_pipe[0], on_stderr);
    ev_child_init(&p->child, on_child, pid, 0);
    ev_child_start(loop, &p->child);
    return p;
}

pid_t proc_pid(const struct proc *p)
{
    return p->pid;
}

bool proc_finished(const struct proc *p)
{
    return p->finished;
}

/* The child leads its own process group: signal the group so that what it
 * started (a shell's children) goes too. */
static void signal_group(pid_t pid, int sig)
{
    if (kill(-pid, sig) < 0) kill(pid, sig);
}

void proc_kill(struct proc *p, int sig)
{
    if (!p->exited) signal_group(p->pid, sig);
}

void proc_set_done(struct proc *p, proc_done_fn done, void *ctx)
{
    p->done = done;
    p->ctx = ctx;
}

void proc_free(struct proc *p)
{
    if (!p) return;
    capture_close(p, &p->out);
    capture_close(p, &p->err);
    /* Unfinished: the child or something it started still holds the pipes. */
    if (!p->finished) signal_group(p->pid, SIGKILL);
    if (!p->exited) { /* SIGKILLed above, unless finished: it is exiting */
        ev_child_stop(p->loop, &p->child);
        reaper_take(p->loop, p->pid, NULL);
    }
    free(p->out.data);
    free(p->err.data);
    free(p);
}
