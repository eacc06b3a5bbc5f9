/* part_end.c — hn-part-end: builds one machine's part of a network with
 * part_build (controller/part_build.h), as the agent will, for the cluster
 * tests (issue 20):
 *
 *   hn-part-end PART_FILE MACHINE PEER_PATH
 *
 * Run on the machine (over SSH in the test). Once built it prints
 * "registry ID", one "node NAME pid PID" per host of the machine (its
 * peer, inside the node's namespace) and "built"; then it holds the part
 * until its stdin closes (the SSH session's end) or SIGTERM/SIGINT, and
 * releases it with part_release, printing "released" (stdin closed during
 * the build: once built). Exit 0, or 1 with
 * one line on stderr. */
#include "controller/part_build.h"

#include "common/container.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct holder {
    struct ev_loop *loop;
    struct part_run *run;
    ev_io input;
    ev_signal term, intr;
    int rc;
    bool closing; /* stdin closed or a signal came: release once built */
};

static void on_released(void *ctx)
{
    struct holder *h = ctx;
    printf("released\n");
    fflush(stdout);
    ev_break(h->loop, EVBREAK_ALL);
}

static void release(struct holder *h)
{
    ev_io_stop(h->loop, &h->input);
    ev_signal_stop(h->loop, &h->term);
    ev_signal_stop(h->loop, &h->intr);
    h->closing = true;
    if (h->run) part_release(h->run, on_released, h); /* else once built (on_built) */
    h->run = NULL;
}

static void on_input(EV_P_ ev_io *w, int revents)
{
    (void)revents;
    struct holder *h = container_of(w, struct holder, input);
    char buf[256];
    ssize_t n = read(w->fd, buf, sizeof buf);
    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN))) return;
    release(h); /* EOF: the session is gone */
}

static void on_signal(EV_P_ ev_signal *w, int revents)
{
    (void)revents;
    struct holder *h = w->data;
    release(h);
}

static void on_built(void *ctx, struct part_run *run, const struct net_error *error)
{
    struct holder *h = ctx;
    if (error) {
        fprintf(stderr, "hn-part-end: %s\n", error->message);
        h->rc = 1;
        ev_break(h->loop, EVBREAK_ALL);
        return;
    }
    const struct topo_network *net = part_model(run)->net;
    printf("registry %s\n", part_registry_id(run));
    for (size_t i = 0; i < net->n_nodes; i++)
        if (topo_node_local_host(&net->nodes[i]))
            printf("node %s pid %ld\n", net->nodes[i].name,
                   (long)peer_client_pid(netrun_peer(part_netrun(run), (int)i)));
    printf("built\n");
    fflush(stdout);
    if (h->closing)
        part_release(run, on_released, h);
    else
        h->run = run;
}

static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc(size ? (size_t)size : 1)) && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    *len = (size_t)size;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: hn-part-end PART_FILE MACHINE PEER_PATH\n");
        return 2;
    }
    size_t len;
    void *bytes = read_file(argv[1], &len);
    if (!bytes) return fprintf(stderr, "hn-part-end: cannot read %s\n", argv[1]), 1;
    struct holder h = {.loop = ev_default_loop(0)};
    struct part_build_opts opts = {argv[2], argv[3], on_built, NULL, &h};
    struct net_error error;
    struct part_run *run;
    if (part_build(h.loop, bytes, len, &opts, &run, &error) < 0) {
        fprintf(stderr, "hn-part-end: %s\n", error.message);
        free(bytes);
        return 1;
    }
    free(bytes);
    ev_io_init(&h.input, on_input, STDIN_FILENO, EV_READ);
    ev_io_start(h.loop, &h.input);
    ev_signal_init(&h.term, on_signal, SIGTERM);
    ev_signal_init(&h.intr, on_signal, SIGINT);
    h.term.data = h.intr.data = &h;
    ev_signal_start(h.loop, &h.term);
    ev_signal_start(h.loop, &h.intr);
    ev_run(h.loop, 0);
    return h.rc;
}
