/* common/number.h: a positive finite number read from a whole word.
 *
 * atof takes "5x" as 5 and "nan" (whose comparisons are all false, so a
 * check "<= 0" lets it through) as a number; a device profile's figures
 * and `hiernet agent --idle-timeout` want neither.
 * Header-only: kernels/ and app/ both use it. */
#pragma once

#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* 0 with the value in out, or -1 when word is not all of one positive,
 * finite number (out untouched). */
static inline int number_parse_positive(const char *word, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(word, &end);
    if (end == word || *end || errno || !isfinite(v) || v <= 0) return -1;
    *out = v;
    return 0;
}
