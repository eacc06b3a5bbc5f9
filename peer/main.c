/* main.c — hiernet-peer: the command line and start-up of the peer server.
 *
 * The controller starts one peer per host node, inside the node's network
 * namespace, with one end of a socketpair as the control channel
 * (docs/design-notes.md "Peers are forked by a template, not exec'd"). Exit status: 0 on EOF of the
 * control fd, 1 on a runtime error, 2 on bad arguments. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hiernet_version.h"
#include "kernels/device.h"
#include "kernels/profile.h"
#include "kernels/vec.h"
#include "common/privdrop.h"
#include "proto/protocol.h"
#include "peer/server.h"
#include "peer/template.h"
#include "proto/names.h"

static const char peer_usage[] =
    "usage: hiernet-peer --control-fd N --node NAME [options]\n"
    "       hiernet-peer --template --control-fd N [PADDING]\n"
    "\n"
    "The peer server of hiernet: holds tensors, computes, and answers MessagePack-RPC\n"
    "requests on the control fd until that fd reaches EOF. Started by `hiernet`.\n"
    "\n"
    "  --control-fd N    connected stream socket of the control channel (required)\n"
    "  --node NAME       name of the node the peer serves (required)\n"
    "  --addr A          the node's address for the data plane (IPv4 or IPv6)\n"
    "  --data-port P     TCP port of the data plane (default 7000; 0: any free port,\n"
    "                    which stats reports as data_port)\n"
    "  --threads T       BLAS threads per compute command (default 1)\n"
    "  --speed S         emulated device speed relative to this host, > 0 (default 1)\n"
    "  --dilation D      time dilation, >= 1 (default 1): a compute command completes\n"
    "                    at its start + D * its CPU time / S, and every duration the\n"
    "                    peer reports (ms, queue_ms, ...) is real time / D\n"
    "  --device D        where compute commands run: cpu (default) or cuda (GPU 0 as\n"
    "                    CUDA_VISIBLE_DEVICES orders them); a device that cannot be\n"
    "                    opened ends the peer at start (status 1)\n"
    "  --profile P       device profile (a built-in name or a .profile file): grads\n"
    "                    of a model made with compute = \"profile\" take its time\n"
    "  --data-auth       data connections must prove the network's secret, which\n"
    "                    arrives with the `peers` command (never on this line)\n"
    "  --user UID:GID    give up root for this uid and gid once set up (listening\n"
    "                    socket bound, device open); the peer always runs with no\n"
    "                    new privileges and no capabilities after its set-up\n"
    "  --template        fork peers on request from the SOCK_SEQPACKET control fd\n"
    "                    instead (how hiernet starts many peers fast)\n"
    "  --help            this text\n"
    "  --version         version\n";

/* One line on stderr, exit status 2. */
static int peer_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int peer_usage_error(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hiernet-peer: %s (see --help)\n", line);
    return 2;
}

static bool peer_parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

static bool peer_parse_double(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end) return false;
    *out = v;
    return true;
}

enum {
    OPT_CONTROL_FD = 256,
    OPT_NODE,
    OPT_ADDR,
    OPT_DATA_PORT,
    OPT_THREADS,
    OPT_SPEED,
    OPT_DILATION,
    OPT_DEVICE,
    OPT_PROFILE,
    OPT_USER,
    OPT_DATA_AUTH,
    OPT_HELP,
    OPT_VERSION
};

static const struct option peer_options[] = {
    {"control-fd", required_argument, NULL, OPT_CONTROL_FD},
    {"node", required_argument, NULL, OPT_NODE},
    {"addr", required_argument, NULL, OPT_ADDR},
    {"data-port", required_argument, NULL, OPT_DATA_PORT},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"speed", required_argument, NULL, OPT_SPEED},
    {"dilation", required_argument, NULL, OPT_DILATION},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"user", required_argument, NULL, OPT_USER},
    {"data-auth", no_argument, NULL, OPT_DATA_AUTH},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* The options main() acts on itself rather than the server. */
struct peer_options {
    struct peer_config cfg;
    enum kern_device device;
    struct privdrop_target user; /* --user: who the peer becomes after set-up */
};

/* Applies one option to cfg; returns 0, or the exit status for an error. */
static int peer_apply_option(int opt, const char *value, struct peer_options *o)
{
    struct peer_config *cfg = &o->cfg;
    char why[128];
    long n;
    unsigned char addr[sizeof(struct in6_addr)];
    switch (opt) {
    case OPT_CONTROL_FD:
        if (!peer_parse_long(value, 0, INT32_MAX, &n))
            return peer_usage_error("--control-fd: '%s' is not a file descriptor number", value);
        cfg->control_fd = (int)n;
        return 0;
    case OPT_NODE:
        cfg->node = value;
        return 0;
    case OPT_ADDR:
        if (inet_pton(AF_INET, value, addr) != 1 && inet_pton(AF_INET6, value, addr) != 1)
            return peer_usage_error("--addr: '%s' is not an IPv4 or IPv6 address", value);
        cfg->addr = value;
        return 0;
    case OPT_DATA_PORT:
        if (!peer_parse_long(value, 0, 65535, &n))
            return peer_usage_error("--data-port: '%s' is not a port (0-65535)", value);
        cfg->data_port = (int)n;
        return 0;
    case OPT_THREADS:
        if (!peer_parse_long(value, 1, 1024, &n))
            return peer_usage_error("--threads: '%s' is not a thread count (1-1024)", value);
        cfg->threads = (int)n;
        return 0;
    case OPT_SPEED:
        if (!peer_parse_double(value, &cfg->speed) || !isfinite(cfg->speed) || cfg->speed <= 0)
            return peer_usage_error("--speed: '%s' is not a positive number", value);
        return 0;
    case OPT_PROFILE:
        cfg->profile_name = value;
        return 0;
    case OPT_DILATION:
        if (!peer_parse_double(value, &cfg->dilation) || !isfinite(cfg->dilation) ||
            cfg->dilation < 1)
            return peer_usage_error("--dilation: '%s' is not a number >= 1", value);
        return 0;
    case OPT_DEVICE:
        if (kern_device_parse(value, &o->device, why, sizeof why) < 0)
            return peer_usage_error("--device: %s", why);
        return 0;
    case OPT_DATA_AUTH:
        cfg->data_auth = true;
        return 0;
    case OPT_USER:
        if (privdrop_parse(value, &o->user, why, sizeof why) < 0)
            return peer_usage_error("--user: %s", why);
        return 0;
    }
    return peer_usage_error("internal: unhandled option %d", opt);
}

/* Checks what the options alone cannot. */
static int peer_check_config(const struct peer_config *cfg)
{
    if (cfg->control_fd < 0) return peer_usage_error("--control-fd is required");
    if (!cfg->node) return peer_usage_error("--node is required");
    if (!cfg->node[0] || strlen(cfg->node) > HN_NODE_NAME_MAX)
        return peer_usage_error("--node: the name must have 1 to %d bytes", HN_NODE_NAME_MAX);
    if (fcntl(cfg->control_fd, F_GETFD) < 0)
        return peer_usage_error("--control-fd %d: %s", cfg->control_fd, strerror(errno));
    return 0;
}

/* Fills o from argv. Returns -1 to go on, else the exit status. */
static int peer_parse_args(int argc, char **argv, struct peer_options *o)
{
    *o = (struct peer_options){
        .cfg = {.control_fd = -1, .data_port = 7000, .threads = 1, .speed = 1.0, .dilation = 1.0},
        .device = KERN_DEVICE_CPU};
    opterr = 0; /* our own one-line messages */
    int opt;
    while ((opt = getopt_long(argc, argv, ":", peer_options, NULL)) != -1) {
        int status = 0;
        if (opt == OPT_HELP) {
            fputs(peer_usage, stdout);
            return 0;
        }
        if (opt == OPT_VERSION) {
            printf("hiernet-peer %s (%s)\n", HIERNET_VERSION, HIERNET_GIT);
            return 0;
        }
        if (opt == ':')
            status = peer_usage_error("%s needs a value", argv[optind - 1]);
        else if (opt == '?')
            status = peer_usage_error("unknown option '%s'", argv[optind - 1]);
        else
            status = peer_apply_option(opt, optarg, o);
        if (status) return status;
    }
    if (optind < argc) return peer_usage_error("unexpected argument '%s'", argv[optind]);
    int status = peer_check_config(&o->cfg);
    return status ? status : -1;
}

/* Tells the controller why the peer ends before serving: a "fatal"
 * notification on the control channel (its start error then names the
 * cause, not just the exit status), and a line on stderr. */
static void peer_fatal(const struct peer_config *cfg, const char *message)
{
    fprintf(stderr, "hiernet-peer[%s]: %s\n", cfg->node, message);
    proto_write_fatal(cfg->control_fd, message);
}

/* The --profile's device profile (kernels/profile.h), read before the
 * peer serves: a bad one is a usage error naming it. */
static int peer_load_profile(struct peer_config *cfg)
{
    char err[512], message[600];
    if (!cfg->profile_name) return 0;
    if (profile_lookup(cfg->profile_name, &cfg->profile, err, sizeof err) == 0) return 0;
    snprintf(message, sizeof message, "--profile: %s", err);
    peer_fatal(cfg, message);
    return -1;
}

/* Opens the compute device before anything else: a peer that cannot
 * compute where it was asked to fails its start, it never falls back. */
static struct kern_ctx *peer_open_device(const struct peer_options *o)
{
    struct kern_ctx *ctx;
    char err[900], message[1024];
    if (kern_ctx_create(o->device, &ctx, err, sizeof err) == 0) return ctx;
    snprintf(message, sizeof message, "cannot compute on %s: %s", kern_device_name(o->device), err);
    peer_fatal(&o->cfg, message);
    return NULL;
}

/* Set-up is over: the listener is bound, the device open. What remains
 * (tensors, frames, datasets under /usr/share) needs no privilege. */
static int peer_drop_root(const struct peer_options *o, pid_t parent)
{
    char err[256], message[320];
    if (privdrop_apply(&o->user, parent, err, sizeof err) == 0) return 0;
    snprintf(message, sizeof message, "cannot give up root: %s", err);
    peer_fatal(&o->cfg, message);
    return -1;
}

static int peer_main(int argc, char **argv)
{
    struct peer_options options;
    pid_t parent = getppid(); /* the controller: forked with CLONE_PARENT, or spawned */
    int status = peer_parse_args(argc, argv, &options);
    if (status >= 0) return status;
    struct peer_config cfg = options.cfg;
    char err[256];
    /* Before any thread exists (BLAS, the worker, a GPU runtime), so that
     * every thread inherits it. */
    if (privdrop_prepare(err, sizeof err) < 0) {
        peer_fatal(&cfg, err);
        return 1;
    }

    /* A vanished controller must show up as EPIPE on write, not kill the peer. */
    signal(SIGPIPE, SIG_IGN);
    vec_set_threads(cfg.threads);
    if (peer_load_profile(&cfg) < 0) return 2;
    cfg.kern = peer_open_device(&options);
    if (!cfg.kern) {
        profile_free(cfg.profile);
        return 1;
    }
    /* A loop of our own rather than ev_default_loop, which would install a
     * SIGCHLD handler. */
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    if (!loop) {
        fprintf(stderr, "hiernet-peer[%s]: cannot create the event loop\n", cfg.node);
        kern_ctx_destroy(cfg.kern);
        return 1;
    }
    struct peer_server *server = peer_server_create(loop, &cfg);
    if (!server || peer_drop_root(&options, parent) < 0 || !peer_server_start(server)) {
        if (server && !peer_server_destroy(server)) _exit(1);
        ev_loop_destroy(loop);
        kern_ctx_destroy(cfg.kern);
        profile_free(cfg.profile);
        return 1;
    }
    status = peer_server_run(server);
#ifndef __SANITIZE_ADDRESS__
    /* The controller is done with us (EOF): the kernel frees everything
     * faster than freeing it piece by piece, and a thousand peers stopping
     * at once do this side by side. Sanitizer builds free all, so that
     * their leak check still sees what the peer owns. */
    if (status == 0) _exit(0);
#endif
    /* A job still computing cannot be interrupted; the process ends around it. */
    if (!peer_server_destroy(server)) _exit(status);
    ev_loop_destroy(loop);
    kern_ctx_destroy(cfg.kern);
    profile_free(cfg.profile);
    return status;
}

/* "--template --control-fd N [PADDING]": serve fork requests
 * (peer/template.h). PADDING, any text, makes room for the peers'
 * command lines, which are written over these strings. */
static int template_main(int argc, char **argv)
{
    long fd;
    if ((argc != 4 && argc != 5) || strcmp(argv[2], "--control-fd") != 0 ||
        !peer_parse_long(argv[3], 0, INT32_MAX, &fd))
        return peer_usage_error("--template takes --control-fd N and an optional padding");
    char *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
    /* The template keeps root (each fork enters a node's namespace) but no
     * exec of it or of its peers can gain a privilege. */
    char err[128];
    if (privdrop_prepare(err, sizeof err) < 0) {
        fprintf(stderr, "hiernet-peer: template: %s\n", err);
        return 1;
    }
    return peer_template_serve((int)fd, peer_main, argv[0], (size_t)(end - argv[0]));
}

/* glibc's malloc starts by mmapping every block over 128 KiB and raises
 * that threshold only as such blocks are freed; until then each compute
 * output of a model's size (every grad writes a new tensor) is fresh pages,
 * page-faulted on first write inside the command, whose CPU time a slow
 * node's speed multiplies: at speed 0.02 a fresh peer's first four grads of
 * mlp:784-128-10 took 100 faults and 1.5x their time each. Starting at the
 * ceiling glibc's own adjustment reaches (32 MiB; the trim threshold twice
 * that, as it sets it) puts the steady state first. */
static void peer_malloc_steady(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char **argv)
{
    peer_malloc_steady();
    if (argc > 1 && strcmp(argv[1], "--template") == 0) return template_main(argc, argv);
    return peer_main(argc, argv);
}
