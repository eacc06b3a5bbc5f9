/* record.c — CSV result writers (see record.h). */
#include "controller/record.h"

#include "controller/durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct record {
    int fd;
    bool sync; /* a results file: handed to the sync thread after each row */
    char *name;
    char **columns;
    size_t n_columns;
    char *row; /* the row being built, reused */
    size_t row_len, row_cap;
    record_row_fn sink; /* record_open_sink: rows go here, fd is -1 */
    void *sink_ctx;
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

static int row_push(struct record *r, const char *bytes, size_t n)
{
    if (r->row_len + n > r->row_cap) {
        size_t cap = r->row_cap ? r->row_cap : 256;
        while (cap < r->row_len + n)
            cap *= 2;
        char *grown = realloc(r->row, cap);
        if (!grown) return -1;
        r->row = grown;
        r->row_cap = cap;
    }
    memcpy(r->row + r->row_len, bytes, n);
    r->row_len += n;
    return 0;
}

/* RFC 4180: quote cells holding separators, quotes or line breaks. */
static int row_cell(struct record *r, const char *cell)
{
    if (!strpbrk(cell, ",\"\r\n")) return row_push(r, cell, strlen(cell));
    if (row_push(r, "\"", 1) < 0) return -1;
    for (const char *p = cell; *p; p++) {
        if (*p == '"' && row_push(r, "\"", 1) < 0) return -1; /* a quote is doubled */
        if (row_push(r, p, 1) < 0) return -1;
    }
    return row_push(r, "\"", 1);
}

/* The whole row goes out in one write(2) on an O_APPEND file: once it
 * returns, the row is in the file for every reader and survives the death
 * of this process (SIGKILL included); a crash never leaves half a row
 * (short of a full disk). */
static int write_row(struct record *r, const char *const *cells, size_t n)
{
    r->row_len = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i) rc = row_push(r, ",", 1);
        if (rc == 0 && cells[i]) rc = row_cell(r, cells[i]);
    }
    if (rc == 0) rc = row_push(r, "\n", 1);
    if (rc < 0) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t done = 0; done < r->row_len;) {
        ssize_t w = write(r->fd, r->row + done, r->row_len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        done += (size_t)w;
    }
    if (r->sync) durable_sync_later(r->fd);
    return 0;
}

static void record_free(struct record *r)
{
    for (size_t i = 0; i < r->n_columns; i++)
        free(r->columns[i]);
    free(r->columns);
    free(r->name);
    free(r->row);
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

/* A record without a file: name and columns copied, nothing else. */
static struct record *record_new(const char *name, const char *const *columns, size_t n_columns,
                                 char *err, size_t errlen)
{
    if (!record_name_valid(name)) {
        snprintf(err, errlen, "record name '%s' is not a valid file name ([A-Za-z0-9_.-]+)", name);
        return NULL;
    }
    struct record *r = calloc(1, sizeof *r);
    if (r) r->fd = -1;
    if (!r || !(r->name = strdup(name)) || copy_columns(r, columns, n_columns) < 0) {
        snprintf(err, errlen, "record '%s': out of memory", name);
        if (r) record_free(r);
        return NULL;
    }
    return r;
}

struct record *record_open_sink(const char *name, const char *const *columns, size_t n_columns,
                                record_row_fn fn, void *ctx, char *err, size_t errlen)
{
    struct record *r = record_new(name, columns, n_columns, err, errlen);
    if (!r) return NULL;
    r->sink = fn;
    r->sink_ctx = ctx;
    return r;
}

struct record *record_open(const char *dir, const char *name, const char *const *columns,
                           size_t n_columns, char *err, size_t errlen)
{
    struct record *r = record_new(name, columns, n_columns, err, errlen);
    if (!r) return NULL;
    char file[160];
    snprintf(file, sizeof file, "%s.csv", name);
    /* No directory (hiernet draw): rows go nowhere. Otherwise never
     * overwrite another record of this run, nor follow a planted link. */
    r->fd = dir ? durable_create(dir, file, 1) : open("/dev/null", O_WRONLY | O_CLOEXEC);
    r->sync = dir != NULL;
    if (r->fd < 0) {
        snprintf(err, errlen, "record '%s': cannot create %s/%s: %s", name, dir ? dir : "", file,
                 errno == EEXIST ? "a record of that name already exists in this run"
                                 : strerror(errno));
        record_free(r);
        return NULL;
    }
    if (write_row(r, columns, n_columns) < 0) {
        snprintf(err, errlen, "record '%s': cannot write %s/%s: %s", name, dir ? dir : "", file,
                 strerror(errno));
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
    if (r->sink) {
        r->sink(r->sink_ctx, cells, r->n_columns);
        return 0;
    }
    if (r->fd < 0 || write_row(r, cells, r->n_columns) < 0) {
        snprintf(err, errlen, "record '%s': write failed: %s", r->name, strerror(errno));
        return -1;
    }
    return 0;
}

void record_close(struct record *r)
{
    if (!r) return;
    if (r->fd >= 0) {
        if (r->sync) durable_sync_forget(r->fd);
        close(r->fd);
    }
    record_free(r);
}
