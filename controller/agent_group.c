/* agent_group.c — one network's agents, started and ended together (see agent_group.h). */
#include "controller/agent_group.h"

#include "common/json.h"
#include "controller/registry.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

struct agent_group {
    struct ev_loop *loop;
    struct agent_client **v;
    size_t n;
    size_t waiting; /* agents not ready yet, then agents not down yet */
    bool reported;
    char control_dir[PATH_MAX];
    agent_group_ready_fn on_ready;
    agent_group_one_fn on_hello;
    agent_group_down_fn on_down;
    void *ctx, *down_ctx;
    ev_idle later; /* runs the countdowns' callbacks from the loop (see group_down_one) */
};

static void group_ready_one(void *ctx, struct agent_client *ac)
{
    struct agent_group *g = ctx;
    if (g->reported || --g->waiting > 0) return;
    g->reported = true;
    g->on_ready(g->ctx, g, NULL);
}

static void group_hello_one(void *ctx, struct agent_client *ac)
{
    struct agent_group *g = ctx;
    if (!g->reported && g->on_hello) g->on_hello(g->ctx, g, ac);
}

static void group_failed(void *ctx, struct agent_client *ac, const char *why)
{
    struct agent_group *g = ctx;
    if (g->reported)
        return; /* later losses: each client ends its relayed peers (agent_relay_lost) */
    g->reported = true;
    g->on_ready(g->ctx, g, why);
}

/* The last one down calls on_down from the loop, never from here: this
 * runs inside agent_group_teardown (an agent already gone is down at once)
 * and inside the client's own callbacks, and on_down may free the group. */
static void group_down_one(void *ctx, struct agent_client *ac)
{
    struct agent_group *g = ctx;
    if (g->waiting > 0 && --g->waiting == 0) ev_idle_start(g->loop, &g->later);
}

/* ssh binds ControlPath DIR/SLOT (a machine's index, not %C's 40 hex
 * digits, so that a registry root under a test's temporary directory fits)
 * under a temporary name 17 characters longer, and a socket's path must fit
 * sun_path (108 bytes). */
#define CONTROL_DIR_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1 - 1 - 5 - 17)

/* The directory lives in the registry's root, named after this process
 * (REGISTRY_SSH_PREFIX), so that `hiernet clean` removes it once this
 * controller is gone, SIGKILLed included. */
static int make_control_dir(struct agent_group *g, char *err, size_t errlen)
{
    char root[REGISTRY_PATH_MAX];
    struct registry_proc self;
    if (registry_root_for_write(root, sizeof root, err, errlen) < 0) return -1;
    if (registry_proc_read(getpid(), &self) < 0)
        return snprintf(err, errlen, "read /proc/self/stat: %s", strerror(errno)), -1;
    int len =
        snprintf(g->control_dir, sizeof g->control_dir, "%s/" REGISTRY_SSH_PREFIX "%ld-%llu-XXXXXX",
                 root, (long)self.pid, self.start);
    if (len < 0 || (size_t)len > CONTROL_DIR_MAX) {
        snprintf(err, errlen,
                 "ssh control directory %s: %d characters, the most an ssh ControlPath "
                 "socket allows is %zu (set HIERNET_RUN_DIR to a shorter directory)",
                 g->control_dir, len, (size_t)CONTROL_DIR_MAX);
        g->control_dir[0] = '\0';
        return -1;
    }
    if (mkdtemp(g->control_dir)) return 0; /* mkdtemp makes it 0700: the sockets are ours */
    snprintf(err, errlen, "ssh control directory %s: %s", g->control_dir, strerror(errno));
    g->control_dir[0] = '\0';
    return -1;
}

/* Removes what a SIGKILLed ssh left (its ControlPath socket), then the directory. */
static void remove_control_dir(struct agent_group *g)
{
    if (!g->control_dir[0]) return;
    DIR *d = opendir(g->control_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[PATH_MAX + 256];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", g->control_dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(g->control_dir);
}

static int start_all(struct agent_group *g, const struct topo_machines *m,
                     const struct agent_client_options *o, char *err, size_t errlen)
{
    struct agent_client_options opts = *o;
    struct agent_client_hooks hooks = {group_ready_one, group_failed, group_down_one, g,
                                       group_hello_one};
    opts.control_dir = o->slurm ? NULL : g->control_dir;
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].local) continue;
        opts.control_slot = (unsigned)i;
        g->v[g->n] = agent_client_start(g->loop, &m->v[i], &opts, &hooks, err, errlen);
        if (!g->v[g->n]) return -1;
        g->n++;
        g->waiting++;
    }
    return 0;
}

static void on_later(EV_P_ ev_idle *w, int revents)
{
    struct agent_group *g = w->data;
    ev_idle_stop(g->loop, w);
    if (!g->reported) {
        g->reported = true;
        g->on_ready(g->ctx, g, NULL);
    } else if (g->on_down) {
        g->on_down(g->down_ctx, g);
    }
}

struct agent_group *agent_group_start(struct ev_loop *loop, const struct topo_machines *m,
                                      const struct agent_client_options *o,
                                      agent_group_ready_fn on_ready, void *ctx, char *err,
                                      size_t errlen)
{
    struct agent_group_hooks hooks = {NULL, on_ready, ctx};
    return agent_group_start_each(loop, m, o, &hooks, err, errlen);
}

struct agent_group *agent_group_start_each(struct ev_loop *loop, const struct topo_machines *m,
                                           const struct agent_client_options *o,
                                           const struct agent_group_hooks *hooks, char *err,
                                           size_t errlen)
{
    struct agent_group *g = calloc(1, sizeof *g);
    if (g) g->v = calloc(m->n ? m->n : 1, sizeof *g->v);
    if (!g || !g->v) {
        free(g);
        return snprintf(err, errlen, "out of memory"), NULL;
    }
    g->loop = loop;
    g->on_ready = hooks->on_ready;
    g->on_hello = hooks->on_hello;
    g->ctx = hooks->ctx;
    ev_idle_init(&g->later, on_later);
    g->later.data = g;
    if ((!o->slurm && make_control_dir(g, err, errlen) < 0) ||
        start_all(g, m, o, err, errlen) < 0) {
        agent_group_free(g);
        return NULL;
    }
    if (g->n == 0) ev_idle_start(loop, &g->later);
    return g;
}

void agent_group_teardown(struct agent_group *g, agent_group_down_fn on_down, void *ctx)
{
    g->on_down = on_down;
    g->down_ctx = ctx;
    g->reported = true;
    g->waiting = g->n;
    if (g->n == 0) return ev_idle_start(g->loop, &g->later);
    for (size_t i = 0; i < g->n; i++)
        agent_client_teardown(g->v[i]);
}

void agent_group_free(struct agent_group *g)
{
    if (!g) return;
    ev_idle_stop(g->loop, &g->later);
    for (size_t i = 0; i < g->n; i++)
        agent_client_free(g->v[i]);
    remove_control_dir(g);
    free(g->v);
    free(g);
}

size_t agent_group_count(const struct agent_group *g)
{
    return g->n;
}

struct agent_client *agent_group_agent(const struct agent_group *g, size_t i)
{
    return i < g->n ? g->v[i] : NULL;
}

void agent_group_describe(const struct agent_group *g, size_t i, char *buf, size_t cap)
{
    const struct agent_hello_reply *h = agent_client_hello(g->v[i]);
    struct clock_offset c = {0};
    double hello_s, ready_s;
    agent_client_clock(g->v[i], &c);
    agent_client_start_times(g->v[i], &hello_s, &ready_s);
    snprintf(buf, cap,
             "%s: control RTT %.3f ms, clock offset %.3f ms +- %.3f ms, hiernet %s, underlay %s "
             "%s mtu %lld; hello %.3f s, ready %.3f s after its ssh started",
             agent_client_machine(g->v[i]), c.rtt_ms, c.offset_ms, c.error_ms, h->version,
             h->underlay_device[0] ? h->underlay_device : "?",
             h->underlay_address[0] ? h->underlay_address : "?", (long long)h->underlay_mtu,
             hello_s, ready_s);
}

static void write_one(struct agent_client *ac, const char *network, FILE *f)
{
    const struct agent_hello_reply *h = agent_client_hello(ac);
    struct clock_offset c = {0};
    agent_client_clock(ac, &c);
    fputs("{\"network\": ", f);
    json_write_string(f, network);
    fputs(", \"machine\": ", f);
    json_write_string(f, agent_client_machine(ac));
    fputs(", \"version\": ", f);
    json_write_string(f, h->version);
    /* to the microsecond: the nanoseconds below are noise of one round trip */
    fprintf(f, ", \"control_rtt_ms\": %.3f, \"clock_offset_ms\": %.3f, \"clock_error_ms\": %.3f",
            c.rtt_ms, c.offset_ms, c.error_ms);
    fputs(", \"underlay\": ", f);
    json_write_string(f, h->underlay_address);
    fputs(", \"underlay_device\": ", f);
    json_write_string(f, h->underlay_device);
    fprintf(f, ", \"mtu\": %lld, \"features\": ", (long long)h->underlay_mtu);
    json_write_string(f, h->features);
    fputs("}", f);
}

void agent_group_write_json(const struct agent_group *g, const char *network, FILE *f)
{
    for (size_t i = 0; i < g->n; i++) {
        if (i) fputs(", ", f);
        write_one(g->v[i], network, f);
    }
}
