/* overload.c — the run's overload account (see overload.h). */
#include "controller/overload.h"

#include "controller/json.h"
#include "proto/protocol.h"
#include "topo/names.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Stretch histogram: bin i holds stretches in [STRETCH_STEP^i, STRETCH_STEP^(i+1)). */
#define STRETCH_STEP 1.05
#define STRETCH_BINS 160

struct cpu_sample {
    uint64_t busy, total; /* jiffies of all cores */
    bool valid;
};

struct overload_node {
    char name[2 * HN_NODE_NAME_SIZE]; /* "network/node" */
    double speed;
    bool cpu_device;
    uint64_t commands, overruns;
};

struct overload {
    struct ev_loop *loop;
    ev_timer sampler;
    struct cpu_sample first, last;
    double peak;
    struct overload_node *nodes;
    size_t n_nodes, cap_nodes;
    uint64_t stretch[STRETCH_BINS]; /* every timed command of a CPU node: 1 when on time */
};

/* ---- the host: /proc/stat ---- */

static struct cpu_sample read_cpu(void)
{
    struct cpu_sample s = {0};
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return s;
    unsigned long long v[8] = {0}; /* user nice system idle iowait irq softirq steal */
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (got < 4) return s;
    s.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* guest time is inside user */
    s.total = s.busy + v[3] + v[4];
    s.valid = true;
    return s;
}

static double busy_share(const struct cpu_sample *a, const struct cpu_sample *b)
{
    if (!a->valid || !b->valid || b->total <= a->total) return -1;
    return (double)(b->busy - a->busy) / (double)(b->total - a->total);
}

static void on_sample(EV_P_ ev_timer *w, int revents)
{
    struct overload *o = w->data;
    struct cpu_sample now = read_cpu();
    double share = busy_share(&o->last, &now);
    if (share > o->peak) o->peak = share;
    if (now.valid) o->last = now;
}

struct overload *overload_new(struct ev_loop *loop)
{
    struct overload *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->loop = loop;
    o->first = o->last = read_cpu();
    o->peak = -1;
    ev_timer_init(&o->sampler, on_sample, 1.0, 1.0);
    o->sampler.data = o;
    ev_timer_start(loop, &o->sampler);
    ev_unref(loop); /* sampling never keeps a run alive */
    return o;
}

void overload_free(struct overload *o)
{
    if (!o) return;
    ev_ref(o->loop);
    ev_timer_stop(o->loop, &o->sampler);
    free(o->nodes);
    free(o);
}

/* ---- the peers ---- */

int overload_add_node(struct overload *o, const char *network, const char *node, double speed,
                      bool cpu_device)
{
    if (o->n_nodes == o->cap_nodes) {
        size_t cap = o->cap_nodes ? 2 * o->cap_nodes : 64;
        struct overload_node *grown = realloc(o->nodes, cap * sizeof *grown);
        if (!grown) return -1;
        o->nodes = grown;
        o->cap_nodes = cap;
    }
    struct overload_node *n = &o->nodes[o->n_nodes];
    *n = (struct overload_node){.speed = speed > 0 ? speed : 1, .cpu_device = cpu_device};
    snprintf(n->name, sizeof n->name, "%s/%s", network, node);
    return (int)o->n_nodes++;
}

static int stretch_bin(double stretch)
{
    if (!(stretch > 1)) return 0;
    int bin = (int)floor(log(stretch) / log(STRETCH_STEP));
    return bin < STRETCH_BINS ? bin : STRETCH_BINS - 1;
}

void overload_note_reply(struct overload *o, int id, const msgpack_object *result, bool timed)
{
    if (!o || id < 0 || (size_t)id >= o->n_nodes || result->type != MSGPACK_OBJECT_MAP) return;
    struct proto_args args;
    proto_args_init(&args, result);
    bool overrun = false;
    double ms = 0, cpu_ms = 0;
    if (proto_arg_bool(&args, "overrun", &overrun) != 1) return; /* not a compute command */
    struct overload_node *n = &o->nodes[id];
    n->commands++;
    n->overruns += overrun;
    if (!timed || !n->cpu_device) return;
    double stretch = 1;
    if (overrun && proto_arg_f64(&args, "ms", &ms) == 1 &&
        proto_arg_f64(&args, "cpu_ms", &cpu_ms) == 1 && cpu_ms > 0)
        stretch = ms / (cpu_ms / n->speed); /* both emulated: the dilation cancels */
    o->stretch[stretch_bin(stretch)]++;
}

void overload_note_batch(struct overload *o, int id, const msgpack_object *result)
{
    if (!o || result->type != MSGPACK_OBJECT_MAP) return;
    struct proto_args args;
    proto_args_init(&args, result);
    const msgpack_object *list = proto_args_get(&args, "results");
    if (!list || list->type != MSGPACK_OBJECT_ARRAY) return;
    for (uint32_t i = 0; i < list->via.array.size; i++) {
        const msgpack_object *r = &list->via.array.ptr[i];
        if (r->type != MSGPACK_OBJECT_MAP) continue;
        struct proto_args ra;
        proto_args_init(&ra, r);
        overload_note_reply(o, id, r, proto_args_get(&ra, "transfer") == NULL);
    }
}

/* ---- the report ---- */

static double stretch_percentile(const struct overload *o, double p)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < STRETCH_BINS; i++)
        total += o->stretch[i];
    if (!total) return 1;
    for (int i = 0; i < STRETCH_BINS; i++) {
        seen += o->stretch[i];
        if ((double)seen >= p * (double)total) return i ? pow(STRETCH_STEP, i + 1) : 1;
    }
    return pow(STRETCH_STEP, STRETCH_BINS);
}

static void report_nodes(const struct overload *o, struct overload_report *r)
{
    double worst = -1;
    for (size_t i = 0; i < o->n_nodes; i++) {
        const struct overload_node *n = &o->nodes[i];
        r->commands += n->commands;
        r->overruns += n->overruns;
        double share = n->commands ? (double)n->overruns / (double)n->commands : 0;
        if (n->overruns && share > worst) {
            worst = share;
            const char *slash = strchr(n->name, '/');
            snprintf(r->worst_node, sizeof r->worst_node, "%s", slash ? slash + 1 : n->name);
            r->worst_node_overrun_share = share;
        }
    }
    r->overrun_share = r->commands ? (double)r->overruns / (double)r->commands : 0;
}

void overload_report(struct overload *o, double dilation, struct overload_report *r)
{
    memset(r, 0, sizeof *r);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r->host_cores = cores > 0 ? (int)cores : 1;
    r->dilation = dilation;
    struct cpu_sample now = read_cpu();
    r->host_cpu_saturation = busy_share(&o->first, &now);
    double tail = busy_share(&o->last, &now); /* the part-second since the last sample */
    r->host_cpu_peak = o->peak > tail ? o->peak : tail;
    if (r->host_cpu_peak < r->host_cpu_saturation) r->host_cpu_peak = r->host_cpu_saturation;
    report_nodes(o, r);
    r->stretch_p95 = stretch_percentile(o, 0.95);
    r->limited = r->overrun_share > OVERLOAD_WARN_SHARE;
    r->suggested_dilation = dilation;
    if (r->limited)
        r->suggested_dilation = ceil(dilation * r->stretch_p95 * OVERLOAD_DILATION_MARGIN);
}

void overload_write_json(FILE *f, const struct overload_report *r)
{
    fputs("{\"host_cpu_saturation\": ", f);
    json_write_number(f, r->host_cpu_saturation >= 0 ? r->host_cpu_saturation : NAN);
    fputs(", \"host_cpu_peak\": ", f);
    json_write_number(f, r->host_cpu_peak >= 0 ? r->host_cpu_peak : NAN);
    fprintf(f, ", \"host_cores\": %d, \"commands\": %llu, \"overruns\": %llu, \"overrun_share\": ",
            r->host_cores, (unsigned long long)r->commands, (unsigned long long)r->overruns);
    json_write_number(f, r->overrun_share);
    fputs(", \"worst_node\": ", f);
    if (r->worst_node[0])
        json_write_string(f, r->worst_node);
    else
        fputs("null", f);
    fputs(", \"worst_node_overrun_share\": ", f);
    json_write_number(f, r->worst_node_overrun_share);
    fputs(", \"stretch_p95\": ", f);
    json_write_number(f, r->stretch_p95);
    fputs(", \"dilation\": ", f);
    json_write_number(f, r->dilation);
    fputs(", \"suggested_dilation\": ", f);
    json_write_number(f, r->suggested_dilation);
    fprintf(f, ", \"limited\": %s}", r->limited ? "true" : "false");
}

bool overload_warning(const struct overload_report *r, char *buf, size_t len)
{
    if (!r->limited) return false;
    snprintf(buf, len,
             "warning: this run was limited by the host's CPU: %.0f%% of compute commands "
             "overran; use fewer nodes, lower speeds, or dilation = %g",
             100 * r->overrun_share, r->suggested_dilation);
    return true;
}
