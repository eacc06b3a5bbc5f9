/* json.h — minimal JSON writing to a FILE*, for run.json and summaries.
 * Owns nothing; the caller owns the stream. */
#pragma once

#include <stdio.h>

/* Writes s as a JSON string literal (quotes and escapes included). */
void json_write_string(FILE *f, const char *s);
/* Writes a number; NaN and infinities (not JSON) become null. */
void json_write_number(FILE *f, double v);
