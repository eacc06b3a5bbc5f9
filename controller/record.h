/* record.h — CSV result writers (hn.record) in a run's results directory.
 *
 * A record is one CSV file with a fixed header. Every row is written with
 * one write(2) before record_add returns, so a run that is interrupted or
 * killed (SIGKILL included) keeps every row written so far, whole; the sync
 * thread of durable.h then puts it on the disk within milliseconds. The
 * file is created exclusively, never through a symbolic link.
 * Owns its file descriptor and a copy of the column names. */
#pragma once

#include <stddef.h>

struct record;

/* Creates DIR/NAME.csv and writes the header. NAME is [A-Za-z0-9_.-]+.
 * A NULL dir discards the rows (a run that keeps no results). */
struct record *record_open(const char *dir, const char *name, const char *const *columns,
                           size_t n_columns, char *err, size_t errlen);
/* A record whose rows go to fn(ctx, cells, n_columns) instead of a file
 * (cells as given to record_add, valid during the call): how `hiernet
 * agent` turns links.csv's rows into `stats` messages. The header is not
 * passed on. fn may be called from record_add only. */
typedef void (*record_row_fn)(void *ctx, const char *const *cells, size_t n_cells);
struct record *record_open_sink(const char *name, const char *const *columns, size_t n_columns,
                                record_row_fn fn, void *ctx, char *err, size_t errlen);
size_t record_columns(const struct record *r);
/* Index of a column, or -1. */
int record_column(const struct record *r, const char *name);
const char *record_name(const struct record *r);
/* Writes one row of n_columns cells (NULL = empty) in one write(2). */
int record_add(struct record *r, const char *const *cells, char *err, size_t errlen);
void record_close(struct record *r);
/* True for names usable as file stems: [A-Za-z0-9_.-]+, not starting with '.'. */
int record_name_valid(const char *name);
