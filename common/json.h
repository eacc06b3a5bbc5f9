/* json.h — minimal JSON writing to a FILE*, for run.json and summaries.
 * Owns nothing; the caller owns the stream and the values. */
#pragma once

#include <stddef.h>
#include <stdio.h>

struct json_value;

/* Writes s as a JSON string literal (quotes and escapes included). */
void json_write_string(FILE *f, const char *s);
/* Writes s as a JSON string literal, or null when s is NULL or empty
 * (a field that has no value yet). */
void json_write_string_or_null(FILE *f, const char *s);
/* Writes a number; NaN and infinities (not JSON) become null. */
void json_write_number(FILE *f, double v);
/* Writes len bytes as a JSON string literal (NUL bytes become \u0000). */
void json_write_string_len(FILE *f, const char *s, size_t len);
/* Writes a tree read by json_read (common/json_read.h), compactly;
 * integers as read, other numbers so that they read back the same. */
void json_write_value(FILE *f, const struct json_value *v);
