/* reaper.c — children reaped from the loop (see reaper.h). */
#include "controller/reaper.h"

#include "common/container.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>

struct reaped_child {
    ev_child watcher;
    struct ev_loop *loop;
    struct reaper_group *group;
    struct reaped_child *prev, *next;
};

static struct reaped_child *children; /* not reaped yet; the loop's thread only */

static void child_forget(struct reaped_child *c)
{
    ev_child_stop(c->loop, &c->watcher);
    if (c->prev)
        c->prev->next = c->next;
    else
        children = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->group) c->group->pending--;
    free(c);
}

static void on_reaped(EV_P_ ev_child *w, int revents)
{
    (void)revents;
    child_forget(container_of(w, struct reaped_child, watcher));
}

void reaper_take(struct ev_loop *loop, pid_t pid, struct reaper_group *group)
{
    /* Gone already: reaped now, or by libev, whose SIGCHLD handler reaps
     * every child and whose event for the owner's watcher the owner
     * dropped by stopping it. */
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return;
    struct reaped_child *c = malloc(sizeof *c);
    if (!c) {
        waitpid(pid, NULL, 0); /* no memory for a watcher: as before, here */
        return;
    }
    *c = (struct reaped_child){.loop = loop, .group = group, .next = children};
    if (children) children->prev = c;
    children = c;
    if (group) group->pending++;
    ev_child_init(&c->watcher, on_reaped, pid, 0);
    ev_child_start(loop, &c->watcher);
}

void reaper_wait(const struct reaper_group *group)
{
    struct reaped_child *c = children;
    while (c) {
        struct reaped_child *next = c->next;
        if (!group || c->group == group) {
            /* ECHILD if libev reaped it after all: its watcher has not run */
            waitpid(c->watcher.pid, NULL, 0);
            child_forget(c);
        }
        c = next;
    }
}
