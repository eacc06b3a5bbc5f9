/* machines.c — the machines file's parser (see machines.h). */
#include "topo/machines.h"

#include "common/quote.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MACHINE_MAX_TOKENS 8 /* name, address and the three keys leave room for one bad extra */
#define MACHINE_LINE_MAX 1024
#define MACHINE_CORES_MAX 1048576
#define MACHINE_MEM_MAX 1048576.0 /* GiB: a petabyte of memory is a typo */

/* A field of letters, digits and the characters of extra, 1 to size - 1
 * bytes, not starting with one of bad_first. */
static bool field_ok(const char *s, size_t size, const char *extra, const char *bad_first)
{
    size_t n = strlen(s);
    if (n == 0 || n >= size || strchr(bad_first, s[0])) return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || strchr(extra, s[i]))) return false;
    return true;
}

/* A name: a host name's label rules, as ssh and Slurm accept them. */
static bool name_ok(const char *s)
{
    return field_ok(s, TOPO_MACHINE_NAME_MAX, "_.-", "-.");
}

/* An address: a DNS name, an IPv4 or an IPv6 address (checked for its
 * characters only: resolving is the connection's business). */
static bool address_ok(const char *s)
{
    return field_ok(s, TOPO_MACHINE_ADDR_MAX, "_.-:%", "-");
}

static bool user_ok(const char *s)
{
    return field_ok(s, TOPO_MACHINE_USER_MAX, "_.-", "-");
}

static int fail(char *err, size_t errlen, const char *source, int line, const char *what,
                const char *value)
{
    char quoted[96];
    quote_printable(value, quoted, sizeof quoted);
    char at[300];
    if (line > 0)
        snprintf(at, sizeof at, "%s:%d", source, line);
    else
        snprintf(at, sizeof at, "%s", source);
    if (value[0])
        snprintf(err, errlen, "%s: %s '%s'", at, what, quoted);
    else
        snprintf(err, errlen, "%s: %s", at, what);
    return -1;
}

/* The duplicate checks: names and addresses are each unique in a list. */
static int check_unique(const struct topo_machines *m, const struct topo_machine *x, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *what = NULL;
        if (strcmp(m->v[i].name, x->name) == 0)
            what = "name";
        else if (strcmp(m->v[i].address, x->address) == 0)
            what = "address";
        if (!what) continue;
        char msg[96];
        if (m->v[i].line > 0)
            snprintf(msg, sizeof msg, "duplicate machine %s (first on line %d)", what,
                     m->v[i].line);
        else
            snprintf(msg, sizeof msg, "duplicate machine %s", what);
        return fail(err, errlen, m->source, x->line, msg, what[0] == 'n' ? x->name : x->address);
    }
    return 0;
}

static int append(struct topo_machines *m, const struct topo_machine *x, char *err, size_t errlen)
{
    if (check_unique(m, x, err, errlen) < 0) return -1;
    if (m->n == TOPO_MACHINES_MAX)
        return fail(err, errlen, m->source, x->line, "more machines than the limit of 4096 at",
                    x->name);
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        struct topo_machine *v = realloc(m->v, cap * sizeof *v);
        if (!v) return fail(err, errlen, m->source, x->line, "out of memory at machine", x->name);
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = *x;
    return 0;
}

/* cores=N: an integer from 1 to MACHINE_CORES_MAX. */
static int parse_cores(const char *v, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > MACHINE_CORES_MAX) return -1;
    *out = (int)n;
    return 0;
}

/* mem=GiB: a positive number, fractions allowed ("0.5"). */
static int parse_mem(const char *v, double *out)
{
    char *end;
    errno = 0;
    double g = strtod(v, &end);
    if (errno || end == v || *end || !(g > 0 && g <= MACHINE_MEM_MAX)) return -1;
    *out = g;
    return 0;
}

/* One key=value token of a machine's line. */
static int parse_key(struct topo_machines *m, struct topo_machine *x, char *tok, unsigned *seen,
                     char *err, size_t errlen)
{
    static const char *const keys[] = {"cores", "mem", "user"};
    char *eq = strchr(tok, '=');
    unsigned k = 0;
    if (eq) {
        *eq = '\0';
        while (k < 3 && strcmp(keys[k], tok) != 0)
            k++;
    }
    if (!eq || k == 3) {
        if (eq) *eq = '=';
        return fail(err, errlen, m->source, x->line, "unknown key (cores=N, mem=GiB, user=NAME) in",
                    tok);
    }
    if (*seen & (1u << k)) return fail(err, errlen, m->source, x->line, "repeated key", tok);
    *seen |= 1u << k;
    const char *v = eq + 1;
    if (k == 0 && parse_cores(v, &x->cores) < 0)
        return fail(err, errlen, m->source, x->line, "cores must be an integer from 1, got", v);
    if (k == 1 && parse_mem(v, &x->mem_gib) < 0)
        return fail(err, errlen, m->source, x->line, "mem must be a positive number of GiB, got",
                    v);
    if (k == 2 && !user_ok(v)) return fail(err, errlen, m->source, x->line, "bad user name", v);
    if (k == 2) snprintf(x->user, sizeof x->user, "%s", v);
    return 0;
}

/* Splits a line (comment cut) into tokens; returns their count, or -1 when
 * there are too many, with *extra the first token past the limit (the
 * message quotes it: strtok_r has cut the line by then). */
static int split(char *line, char **tok, const char **extra)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t;
         t = strtok_r(NULL, " \t\r", &save)) {
        if (n == MACHINE_MAX_TOKENS) return *extra = t, -1;
        tok[n++] = t;
    }
    return n;
}

static int parse_line(struct topo_machines *m, char *line, int lineno, char *err, size_t errlen)
{
    char *tok[MACHINE_MAX_TOKENS];
    const char *extra = "";
    int n = split(line, tok, &extra);
    if (n == 0) return 0;
    struct topo_machine x = {.line = lineno};
    if (n < 0) return fail(err, errlen, m->source, lineno, "more than 8 fields: the 9th is", extra);
    if (!name_ok(tok[0]))
        return fail(err, errlen, m->source, lineno,
                    "bad machine name (letters, digits, '_', '-', '.'; at most 63)", tok[0]);
    snprintf(x.name, sizeof x.name, "%s", tok[0]);
    if (n < 2) return fail(err, errlen, m->source, lineno, "no address for machine", tok[0]);
    if (!address_ok(tok[1]))
        return fail(err, errlen, m->source, lineno, "bad address (a host name or IP)", tok[1]);
    snprintf(x.address, sizeof x.address, "%s", tok[1]);
    unsigned seen = 0;
    for (int i = 2; i < n; i++)
        if (parse_key(m, &x, tok[i], &seen, err, errlen) < 0) return -1;
    return append(m, &x, err, errlen);
}

int topo_machines_parse(const char *text, size_t len, const char *source, struct topo_machines *out,
                        char *err, size_t errlen)
{
    snprintf(out->source, sizeof out->source, "%s", source);
    char line[MACHINE_LINE_MAX];
    int lineno = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = (nl ? (size_t)(nl - text) : len) - pos;
        lineno++;
        if (memchr(text + pos, '\0', n))
            return fail(err, errlen, source, lineno, "a NUL byte in the line", "");
        if (n >= sizeof line)
            return fail(err, errlen, source, lineno, "line longer than 1023 bytes", "");
        memcpy(line, text + pos, n);
        line[n] = '\0';
        if (parse_line(out, line, lineno, err, errlen) < 0) return -1;
        pos += n + 1;
    }
    if (out->n == 0) return fail(err, errlen, source, 0, "lists no machine", "");
    return 0;
}

int topo_machines_add(struct topo_machines *m, const char *name, const char *address, int cores,
                      char *err, size_t errlen)
{
    struct topo_machine x = {.cores = cores};
    if (!name_ok(name)) return fail(err, errlen, m->source, 0, "bad machine name", name);
    if (!address_ok(address)) return fail(err, errlen, m->source, 0, "bad address", address);
    snprintf(x.name, sizeof x.name, "%s", name);
    snprintf(x.address, sizeof x.address, "%s", address);
    return append(m, &x, err, errlen);
}

void topo_machines_free(struct topo_machines *m)
{
    free(m->v);
    m->v = NULL;
    m->n = m->cap = 0;
}

int topo_machines_find(const struct topo_machines *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i].name, name) == 0) return (int)i;
    return -1;
}

double topo_machine_capacity(const struct topo_machine *m)
{
    return m->cores > 0 ? m->cores : 1;
}

/* One "N" or "N(xR)" of the spec at *p; moves *p past it. */
static int slurm_group(const char **p, long *cpus, long *repeat)
{
    char *end;
    *cpus = strtol(*p, &end, 10);
    if (end == *p || *cpus < 1 || *cpus > MACHINE_CORES_MAX) return -1;
    *repeat = 1;
    if (strncmp(end, "(x", 2) == 0) {
        const char *r = end + 2;
        *repeat = strtol(r, &end, 10);
        if (end == r || *end != ')' || *repeat < 1) return -1;
        end++;
    }
    *p = end;
    return 0;
}

int topo_machines_slurm_cpus(const char *spec, int *cpus, size_t n)
{
    size_t k = 0;
    for (const char *p = spec; k < n;) {
        long c, r;
        if (slurm_group(&p, &c, &r) < 0) return -1;
        for (long i = 0; i < r && k < n; i++)
            cpus[k++] = (int)c;
        if (*p == '\0') break;
        if (*p++ != ',') return -1;
    }
    return k == n ? 0 : -1;
}
