/* json.c — minimal JSON writing (see json.h). */
#include "controller/json.h"

#include <math.h>

void json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void json_write_number(FILE *f, double v)
{
    if (!isfinite(v))
        fputs("null", f);
    else if (v == (double)(long long)v && fabs(v) < 1e15)
        fprintf(f, "%lld", (long long)v);
    else
        fprintf(f, "%.17g", v);
}
