/* json.c — minimal JSON writing (see json.h). */
#include "common/json.h"

#include "common/json_read.h"

#include <math.h>
#include <string.h>

void json_write_string(FILE *f, const char *s)
{
    json_write_string_len(f, s, strlen(s));
}

void json_write_string_len(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)s + len;
         p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void json_write_string_or_null(FILE *f, const char *s)
{
    if (s && s[0])
        json_write_string(f, s);
    else
        fputs("null", f);
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

void json_write_value(FILE *f, const struct json_value *v)
{
    switch (v->type) {
    case JSON_NULL:
        fputs("null", f);
        break;
    case JSON_FALSE:
        fputs("false", f);
        break;
    case JSON_TRUE:
        fputs("true", f);
        break;
    case JSON_NUMBER:
        if (v->is_int) {
            fprintf(f, "%lld", v->integer);
        } else {
            /* Read back as what it was: a number with a fraction or exponent. */
            char text[40];
            snprintf(text, sizeof text, "%.17g", v->number);
            fputs(text, f);
            if (!strpbrk(text, ".e")) fputs(".0", f);
        }
        break;
    case JSON_STRING:
        json_write_string_len(f, v->string, v->len);
        break;
    case JSON_ARRAY:
        fputc('[', f);
        for (size_t i = 0; i < v->n; i++) {
            if (i) fputs(", ", f);
            json_write_value(f, &v->items[i]);
        }
        fputc(']', f);
        break;
    case JSON_OBJECT:
        fputc('{', f);
        for (size_t i = 0; i < v->n; i++) {
            if (i) fputs(", ", f);
            json_write_string_len(f, v->members[i].key, v->members[i].key_len);
            fputs(": ", f);
            json_write_value(f, &v->members[i].value);
        }
        fputc('}', f);
        break;
    }
}
