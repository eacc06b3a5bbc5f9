/* profile.c — device profiles: parsing the profile text (built-in or a
 * file), and the emulated times computed from it (see profile.h). Owns each
 * struct device_profile it creates and its table of measured steps. */
#include "kernels/profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/number.h"
#include "kernels/kern_error.h"
#include "kernels/profile_sources.h"

#define PROFILE_NAME_MAX 64
#define PROFILE_ABOUT_MAX 160
#define PROFILE_MEASURED_MAX 64
#define PROFILE_FILE_MAX (64 * 1024) /* a profile is a page of text */

struct profile_measured {
    char model[PROFILE_NAME_MAX];
    int batch;
    double seconds;
};

struct device_profile {
    char name[PROFILE_NAME_MAX];
    char about[PROFILE_ABOUT_MAX];
    double rate[ZOO_OP_COUNT]; /* FLOP/s; 0 until the file gives it */
    double bandwidth;          /* bytes/s */
    struct profile_measured measured[PROFILE_MEASURED_MAX];
    int measured_count;
};

/* Where a parse is: the file as the user knows it and the line. */
struct parse_at {
    const char *file;
    int line;
    char *err;
    size_t errlen;
};

/* ---- one line ---- */

static const struct profile_measured *measured_find(const struct device_profile *p,
                                                    const char *model, int batch);

static int key_rate(struct device_profile *p, char *args, const struct parse_at *at)
{
    char *save;
    char *kind = strtok_r(args, " \t", &save), *value = strtok_r(NULL, " \t", &save);
    int op = kind ? zoo_op_parse(kind) : -1;
    if (op < 0)
        return kern_fail(at->err, at->errlen,
                         "%s:%d: rate: unknown op kind '%s' (conv, depthwise, dense, attention, "
                         "norm, elementwise, embedding)",
                         at->file, at->line, kind ? kind : "");
    if (!value || strtok_r(NULL, " \t", &save) || number_parse_positive(value, &p->rate[op]) < 0)
        return kern_fail(at->err, at->errlen, "%s:%d: rate %s: expected one FLOP/s figure > 0",
                         at->file, at->line, kind);
    return 0;
}

static int key_measured(struct device_profile *p, char *args, const struct parse_at *at)
{
    char *save;
    char *model = strtok_r(args, " \t", &save), *batch = strtok_r(NULL, " \t", &save),
         *seconds = strtok_r(NULL, " \t", &save);
    if (p->measured_count == PROFILE_MEASURED_MAX)
        return kern_fail(at->err, at->errlen, "%s:%d: more than %d measured steps", at->file,
                         at->line, PROFILE_MEASURED_MAX);
    struct profile_measured *m = &p->measured[p->measured_count];
    struct zoo_info z;
    char zoo_err[16];
    if (!seconds || strtok_r(NULL, " \t", &save))
        return kern_fail(at->err, at->errlen, "%s:%d: measured: expected MODEL BATCH SECONDS",
                         at->file, at->line);
    if (zoo_lookup(model, &z, zoo_err, sizeof zoo_err) < 0 || strlen(model) >= PROFILE_NAME_MAX)
        return kern_fail(at->err, at->errlen, "%s:%d: measured: unknown model '%s'", at->file,
                         at->line, model);
    char *end;
    long b = strtol(batch, &end, 10);
    if (*end || b < 1 || b > 65536 || number_parse_positive(seconds, &m->seconds) < 0)
        return kern_fail(at->err, at->errlen,
                         "%s:%d: measured %s: batch '%s' or seconds '%s' is not a positive number",
                         at->file, at->line, model, batch, seconds);
    if (measured_find(p, model, (int)b))
        return kern_fail(at->err, at->errlen, "%s:%d: measured %s %ld: given twice", at->file,
                         at->line, model, b);
    snprintf(m->model, sizeof m->model, "%s", model);
    m->batch = (int)b;
    p->measured_count++;
    return 0;
}

static int key_about(struct device_profile *p, char *args, const struct parse_at *at)
{
    if (!*args || strlen(args) >= sizeof p->about)
        return kern_fail(at->err, at->errlen,
                         "%s:%d: about: expected a description of up to %d "
                         "characters",
                         at->file, at->line, PROFILE_ABOUT_MAX - 1);
    strcpy(p->about, args);
    return 0;
}

static int key_bandwidth(struct device_profile *p, char *args, const struct parse_at *at)
{
    if (number_parse_positive(args, &p->bandwidth) < 0)
        return kern_fail(at->err, at->errlen, "%s:%d: bandwidth: expected bytes/s > 0, got '%s'",
                         at->file, at->line, args);
    return 0;
}

/* Strips the comment and the surrounding blanks, in place. */
static char *line_content(char *line)
{
    line[strcspn(line, "#")] = '\0';
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strlen(line);
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
        line[--n] = '\0';
    return line;
}

static int parse_line(struct device_profile *p, char *line, const struct parse_at *at)
{
    char *text = line_content(line);
    if (!*text) return 0;
    size_t key_len = strcspn(text, " \t");
    char *args = text + key_len;
    if (*args) *args++ = '\0';
    while (*args == ' ' || *args == '\t')
        args++;
    if (!strcmp(text, "rate")) return key_rate(p, args, at);
    if (!strcmp(text, "measured")) return key_measured(p, args, at);
    if (!strcmp(text, "about")) return key_about(p, args, at);
    if (!strcmp(text, "bandwidth")) return key_bandwidth(p, args, at);
    return kern_fail(at->err, at->errlen,
                     "%s:%d: unknown key '%s' (about, rate, bandwidth, measured)", at->file,
                     at->line, text);
}

/* ---- a whole profile ---- */

static int check_complete(const struct device_profile *p, const struct parse_at *at)
{
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        if (p->rate[op] == 0)
            return kern_fail(at->err, at->errlen, "%s: no rate for '%s'", at->file,
                             zoo_op_name(op));
    if (p->bandwidth == 0) return kern_fail(at->err, at->errlen, "%s: no bandwidth", at->file);
    if (!p->about[0]) return kern_fail(at->err, at->errlen, "%s: no about line", at->file);
    return 0;
}

/* Parses text (len bytes, a private copy: lines are cut in place). */
static int parse_text(struct device_profile *p, char *text, const char *file, char *err,
                      size_t errlen)
{
    struct parse_at at = {file, 0, err, errlen};
    char *next = text;
    while (next) {
        char *line = next;
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        at.line++;
        if (parse_line(p, line, &at) < 0) return -1;
    }
    at.line = 0;
    return check_complete(p, &at);
}

static int profile_parse(const char *name, const char *text, size_t len, const char *file,
                         struct device_profile **out, char *err, size_t errlen)
{
    struct device_profile *p = calloc(1, sizeof *p);
    char *copy = malloc(len + 1);
    if (!p || !copy) {
        free(p);
        free(copy);
        return kern_fail(err, errlen, "%s: out of memory", file);
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    snprintf(p->name, sizeof p->name, "%s", name);
    int rc = parse_text(p, copy, file, err, errlen);
    free(copy);
    if (rc < 0) {
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* ---- built-in or file ---- */

static int is_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 8 && !strcmp(s + n - 8, ".profile"));
}

/* Reads at most PROFILE_FILE_MAX bytes of path into *text (caller frees). */
static int read_profile_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kern_fail(err, errlen, "profile \"%s\": %s", path, strerror(errno));
    char *buf = malloc(PROFILE_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, PROFILE_FILE_MAX + 1, f) : 0;
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed || n > PROFILE_FILE_MAX) {
        free(buf);
        return kern_fail(err, errlen, "profile \"%s\": %s", path,
                         failed ? "cannot be read" : "larger than 64 KiB");
    }
    *text = buf;
    *len = n;
    return 0;
}

static int lookup_file(const char *path, struct device_profile **out, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    if (read_profile_file(path, &text, &len, err, errlen) < 0) return -1;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char name[PROFILE_NAME_MAX];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(base, "."), base);
    int rc = profile_parse(name, text, len, path, out, err, errlen);
    free(text);
    return rc;
}

static void builtin_names(char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; profile_sources[i].name && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "",
                                 profile_sources[i].name);
}

int profile_lookup(const char *name_or_path, struct device_profile **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!name_or_path || !*name_or_path) return kern_fail(err, errlen, "profile name is missing");
    if (is_path(name_or_path)) return lookup_file(name_or_path, out, err, errlen);
    for (int i = 0; profile_sources[i].name; i++) {
        const struct profile_source *s = &profile_sources[i];
        if (strcmp(s->name, name_or_path)) continue;
        char file[PROFILE_NAME_MAX + 32];
        snprintf(file, sizeof file, "profiles/%s.profile", s->name);
        return profile_parse(s->name, s->text, s->len, file, out, err, errlen);
    }
    char names[512];
    builtin_names(names, sizeof names);
    return kern_fail(err, errlen,
                     "profile \"%s\": no built-in profile of that name (%s; or give "
                     "a path to a .profile file)",
                     name_or_path, names);
}

void profile_free(struct device_profile *p)
{
    free(p);
}

/* ---- answers ---- */

const char *profile_name(const struct device_profile *p)
{
    return p->name;
}

const char *profile_about(const struct device_profile *p)
{
    return p->about;
}

double profile_rate(const struct device_profile *p, enum zoo_op op)
{
    return (unsigned)op < ZOO_OP_COUNT ? p->rate[op] : 0;
}

double profile_bandwidth(const struct device_profile *p)
{
    return p->bandwidth;
}

int profile_measured_count(const struct device_profile *p)
{
    return p->measured_count;
}

int profile_measured_at(const struct device_profile *p, int i, const char **model, int *batch,
                        double *seconds)
{
    if (i < 0 || i >= p->measured_count) return -1;
    *model = p->measured[i].model;
    *batch = p->measured[i].batch;
    *seconds = p->measured[i].seconds;
    return 0;
}

static const struct profile_measured *measured_find(const struct device_profile *p,
                                                    const char *model, int batch)
{
    for (int i = 0; i < p->measured_count; i++)
        if (p->measured[i].batch == batch && !strcmp(p->measured[i].model, model))
            return &p->measured[i];
    return NULL;
}

/* Seconds of `flops` per sample (by op kind) over batch samples at the
 * profile's rates. */
static double flops_seconds(const struct device_profile *p, const double *flops, int batch)
{
    double seconds = 0;
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        seconds += flops[op] * batch / p->rate[op];
    return seconds;
}

/* The whole model's forward + backward by FLOPs. */
static double grad_flops_seconds(const struct device_profile *p, const struct zoo_info *z,
                                 int batch)
{
    double seconds = 0;
    for (int op = 0; op < ZOO_OP_COUNT; op++)
        seconds += (z->cost.forward[op] + z->cost.backward[op]) * batch / p->rate[op];
    return seconds;
}

double profile_grad_seconds(const struct device_profile *p, const struct zoo_info *z, int batch,
                            const char **basis)
{
    const struct profile_measured *m = measured_find(p, z->name, batch);
    if (basis) *basis = m ? "measured" : "flops";
    return m ? m->seconds : grad_flops_seconds(p, z, batch);
}

double profile_pass_seconds(const struct device_profile *p, const struct zoo_info *z,
                            const struct zoo_cost *range, bool backward, int batch,
                            const char **basis)
{
    double seconds = flops_seconds(p, backward ? range->backward : range->forward, batch);
    const struct profile_measured *m = measured_find(p, z->name, batch);
    if (basis) *basis = m ? "measured" : "flops";
    if (!m) return seconds;
    double whole = grad_flops_seconds(p, z, batch);
    return whole > 0 ? seconds * m->seconds / whole : 0;
}

double profile_add_seconds(const struct device_profile *p, uint64_t elements)
{
    return 12.0 * (double)elements / p->bandwidth;
}

int profile_count(void)
{
    int n = 0;
    while (profile_sources[n].name)
        n++;
    return n;
}

const char *profile_at(int i)
{
    return i >= 0 && i < profile_count() ? profile_sources[i].name : NULL;
}
