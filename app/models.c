/* models.c — `hiernet models`: the model zoo and the device profiles
 * (kernels/zoo.h, kernels/profile.h) as tables, or one of them in detail
 * with its step time on every built-in device. Reads and prints only. */
#include "app/cli.h"
#include "kernels/profile.h"
#include "kernels/zoo.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2
#define MODELS_DEFAULT_BATCH 32

static const char models_usage[] =
    "usage: hiernet models [NAME [--batch N]]\n"
    "\n"
    "Without NAME: the model zoo (architectures hiernet sizes and times from\n"
    "their layers: parameters, float32 gradient in MiB, GFLOPs per sample forward\n"
    "and forward+backward, input) and the built-in device profiles (sustained\n"
    "rates per op kind, memory bandwidth, the step times they measured).\n"
    "\n"
    "NAME: one zoo model or model spec (resnet50, mlp:784-128-10) with its FLOPs\n"
    "per op kind and its step time at the batch on every built-in profile; or one\n"
    "profile (a built-in name or a .profile file) with its figures.\n"
    "\n"
    "FLOPs count 2 per multiply-accumulate (docs/models.md gives the convention\n"
    "for norm, elementwise and embedding ops).\n"
    "\n"
    "options:\n"
    "  --batch N   samples per step for the step times (default 32)\n"
    "\n"
    "exit codes: 0 success, 2 usage or an unknown model or profile.\n";

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

static void print_zoo_row(const struct zoo_info *z)
{
    printf("%-14s %12llu %9.2f %10.3f %10.3f  %s\n", z->name, (unsigned long long)z->params,
           mib(zoo_grad_bytes(z)), zoo_forward_flops(z) / 1e9, zoo_grad_flops(z) / 1e9, z->input);
}

static void print_zoo(void)
{
    printf("model zoo (parameters and FLOPs derived from the layers; per sample)\n");
    printf("%-14s %12s %9s %10s %10s  %s\n", "name", "params", "grad MiB", "GFLOP fwd", "GFLOP f+b",
           "input");
    for (int i = 0; i < zoo_count(); i++) {
        struct zoo_info z;
        if (zoo_at(i, &z) == 0) print_zoo_row(&z);
    }
    printf("and the real architectures of hiernet's kernels, any model spec: logreg:IN-OUT,\n"
           "mlp:IN-H1-...-OUT, cnn:lenet (hiernet models mlp:784-128-10)\n");
}

static void print_measured(const struct device_profile *p)
{
    const char *model;
    int batch;
    double seconds;
    for (int i = 0; profile_measured_at(p, i, &model, &batch, &seconds) == 0; i++)
        printf("%s%s batch %d %.3g s", i ? ", " : "    measured: ", model, batch, seconds);
    if (profile_measured_count(p)) printf("\n");
}

static void print_profile_row(const struct device_profile *p)
{
    printf("%-12s", profile_name(p));
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        printf(" %11.4g", profile_rate(p, op) / 1e12);
    printf(" %8.1f  %s\n", profile_bandwidth(p) / 1e9, profile_about(p));
    print_measured(p);
}

static void print_profile_header(void)
{
    printf("%-12s", "name");
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        printf(" %11s", zoo_op_name(op));
    printf(" %8s  %s\n", "mem GB/s", "device");
}

static void print_profiles(void)
{
    printf("\ndevice profiles (sustained TFLOP/s per op kind; profiles/*.profile give the "
           "sources)\n");
    print_profile_header();
    for (int i = 0; i < profile_count(); i++) {
        struct device_profile *p;
        char err[512];
        if (profile_lookup(profile_at(i), &p, err, sizeof err) < 0) {
            fprintf(stderr, "hiernet models: %s\n", err);
            continue;
        }
        print_profile_row(p);
        profile_free(p);
    }
}

static void print_step_times(const struct zoo_info *z, int batch)
{
    printf("\nstep (forward+backward) at batch %d:\n", batch);
    for (int i = 0; i < profile_count(); i++) {
        struct device_profile *p;
        char err[512];
        const char *basis;
        if (profile_lookup(profile_at(i), &p, err, sizeof err) < 0) continue;
        double s = profile_grad_seconds(p, z, batch, &basis);
        printf("  %-12s %10.4g s  (%s)\n", profile_name(p), s, basis);
        profile_free(p);
    }
}

static void print_model(const struct zoo_info *z, int batch)
{
    printf("%s: %s%s, input %s\n", z->name, z->family,
           z->real ? " (real: hiernet computes it)" : "", z->input);
    printf("parameters %llu (float32 gradient %llu bytes, %.2f MiB)", (unsigned long long)z->params,
           (unsigned long long)zoo_grad_bytes(z), mib(zoo_grad_bytes(z)));
    if (z->buffers) printf(", plus %llu buffers", (unsigned long long)z->buffers);
    printf("\n\n%-12s %14s %14s\n", "op kind", "GFLOP forward", "GFLOP backward");
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        if (z->cost.forward[op] || z->cost.backward[op])
            printf("%-12s %14.4f %14.4f\n", zoo_op_name(op), z->cost.forward[op] / 1e9,
                   z->cost.backward[op] / 1e9);
    printf("%-12s %14.4f %14.4f\n", "total", zoo_forward_flops(z) / 1e9,
           (zoo_grad_flops(z) - zoo_forward_flops(z)) / 1e9);
    print_step_times(z, batch);
}

/* NAME: a model first, then a profile; one line naming both tries if neither. */
static int print_one(const char *name, int batch)
{
    struct zoo_info z;
    char model_err[1024], profile_err[1024];
    if (zoo_lookup(name, &z, model_err, sizeof model_err) == 0) {
        print_model(&z, batch);
        return 0;
    }
    struct device_profile *p;
    if (profile_lookup(name, &p, profile_err, sizeof profile_err) == 0) {
        print_profile_header();
        print_profile_row(p);
        profile_free(p);
        return 0;
    }
    /* A path can only be a profile: its own error says what is wrong. */
    if (strchr(name, '/') || strstr(name, ".profile"))
        fprintf(stderr, "hiernet models: %s\n", profile_err);
    else
        fprintf(stderr, "hiernet models: %s; nor a profile (see hiernet models)\n", model_err);
    return EXIT_USAGE;
}

static int parse_batch(const char *text, int *batch)
{
    char *end;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || *end || end == text || v < 1 || v > 65536) {
        fprintf(stderr, "hiernet models: --batch '%s' is not a whole number from 1 to 65536\n",
                text ? text : "");
        return -1;
    }
    *batch = (int)v;
    return 0;
}

int cli_models(int argc, char **argv)
{
    const char *name = NULL;
    int batch = MODELS_DEFAULT_BATCH;
    bool batch_given = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(models_usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--batch")) {
            if (parse_batch(i + 1 < argc ? argv[++i] : NULL, &batch) < 0) return EXIT_USAGE;
            batch_given = true;
        } else if (argv[i][0] == '-' || name) {
            fprintf(stderr,
                    "hiernet models: unexpected argument '%s' (see hiernet models --help)\n",
                    argv[i]);
            return EXIT_USAGE;
        } else {
            name = argv[i];
        }
    }
    if (name) return print_one(name, batch);
    if (batch_given) {
        /* The listing shows no step times: a batch would change nothing. */
        fputs("hiernet models: --batch needs a NAME (a model: its step time at that batch)\n",
              stderr);
        return EXIT_USAGE;
    }
    print_zoo();
    print_profiles();
    return 0;
}
