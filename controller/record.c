/* record.c — CSV result writers (see record.h). */
#include "controller/record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct record {
    FILE *f;
    char *name;
    char **columns;
    size_t n_columns;
};

int record_name_valid(const char *name)
{
    if (!name[0] || name[0] == '.' || strlen(name) > 128) return 0;
    for (const char *p = name; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

/* RFC 4180: quote cells holding separators, quotes or line breaks. */
static void write_cell(FILE *f, const char *cell)
{
    if (!strpbrk(cell, ",\"\r\n")) {
        fputs(cell, f);
        return;
    }
    fputc('"', f);
    for (const char *p = cell; *p; p++) {
        if (*p == '"') fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

static int write_row(FILE *f, const char *const *cells, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        if (cells[i]) write_cell(f, cells[i]);
    }
    fputc('\n', f);
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

static void record_free(struct record *r)
{
    for (size_t i = 0; i < r->n_columns; i++) free(r->columns[i]);
    free(r->columns);
    free(r->name);
    free(r);
}

static int copy_columns(struct record *r, const char *const *columns, size_t n)
{
    r->columns = calloc(n ? n : 1, sizeof *r->columns);
    if (!r->columns) return -1;
    r->n_columns = n;
    for (size_t i = 0; i < n; i++)
        if (!(r->columns[i] = strdup(columns[i]))) return -1;
    return 0;
}

struct record *record_open(const char *dir, const char *name, const char *const *columns,
                           size_t n_columns, char *err, size_t errlen)
{
    if (!record_name_valid(name)) {
        snprintf(err, errlen, "record name '%s' is not a valid file name ([A-Za-z0-9_.-]+)", name);
        return NULL;
    }
    struct record *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(name)) || copy_columns(r, columns, n_columns) < 0) {
        snprintf(err, errlen, "record '%s': out of memory", name);
        if (r) record_free(r);
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.csv", dir ? dir : "", name);
    /* No directory (hiernet draw): rows go nowhere. Otherwise never
     * overwrite another record of this run. */
    r->f = dir ? fopen(path, "wxe") : fopen("/dev/null", "we");
    if (!r->f) {
        snprintf(err, errlen, "record '%s': cannot create %s: %s", name, path,
                 errno == EEXIST ? "a record of that name already exists in this run"
                                 : strerror(errno));
        record_free(r);
        return NULL;
    }
    if (write_row(r->f, columns, n_columns) < 0) {
        snprintf(err, errlen, "record '%s': cannot write %s", name, path);
        record_close(r);
        return NULL;
    }
    return r;
}

size_t record_columns(const struct record *r)
{
    return r->n_columns;
}

const char *record_name(const struct record *r)
{
    return r->name;
}

int record_column(const struct record *r, const char *name)
{
    for (size_t i = 0; i < r->n_columns; i++)
        if (strcmp(r->columns[i], name) == 0) return (int)i;
    return -1;
}

int record_add(struct record *r, const char *const *cells, char *err, size_t errlen)
{
    if (!r->f || write_row(r->f, cells, r->n_columns) < 0) {
        snprintf(err, errlen, "record '%s': write failed: %s", r->name, strerror(errno));
        return -1;
    }
    return 0;
}

void record_close(struct record *r)
{
    if (!r) return;
    if (r->f) fclose(r->f);
    record_free(r);
}
