/* json_read.c — a small, strict JSON reader (see json_read.h). */
#include "common/json_read.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    const char *start, *p, *end;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
};

/* Growable byte buffer for decoded strings. */
struct buf {
    char *data;
    size_t len, cap;
};

static int fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the first error with its line and column (columns count bytes). */
static int fail(struct reader *r, const char *fmt, ...)
{
    if (r->failed) return -1;
    r->failed = true;
    int line = 1, column = 1;
    for (const char *q = r->start; q < r->p && q < r->end; q++) {
        if (*q == '\n')
            line++, column = 1;
        else
            column++;
    }
    int n = snprintf(r->err, r->errlen, "line %d, column %d: ", line, column);
    if (n < 0 || (size_t)n >= r->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int buf_push(struct buf *b, const char *bytes, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static void skip_space(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int parse_value(struct reader *r, struct json_value *v);

/* ---- literals and numbers ---- */

static int parse_literal(struct reader *r, struct json_value *v, const char *word,
                         enum json_type type)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return fail(r, "expected a JSON value");
    r->p += n;
    v->type = type;
    return 0;
}

static const char *skip_digits(const char *p, const char *end)
{
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(struct reader *r, struct json_value *v)
{
    const char *p = r->p, *end = r->end;
    bool integral = true;
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0')
        p++;
    else if (p < end && *p >= '1' && *p <= '9')
        p = skip_digits(p, end);
    else
        return fail(r, "expected a digit");
    if (p < end && *p == '.') {
        integral = false;
        const char *digits = ++p;
        if ((p = skip_digits(p, end)) == digits)
            return r->p = p, fail(r, "expected a digit after '.'");
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integral = false;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *digits = p;
        if ((p = skip_digits(p, end)) == digits) return r->p = p, fail(r, "expected an exponent");
    }
    char text[512];
    size_t n = (size_t)(p - r->p);
    if (n >= sizeof text) return fail(r, "number too long (%zu characters)", n);
    memcpy(text, r->p, n);
    text[n] = '\0';
    v->type = JSON_NUMBER;
    v->number = strtod(text, NULL);
    if (!isfinite(v->number)) return fail(r, "number %s is out of range", text);
    if (integral) {
        errno = 0;
        long long i = strtoll(text, NULL, 10);
        v->is_int = errno == 0;
        v->integer = i;
    }
    r->p = p;
    return 0;
}

/* ---- strings ---- */

static int hex4(struct reader *r, unsigned *out)
{
    if (r->end - r->p < 4) return fail(r, "expected four hex digits after \\u");
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return fail(r, "expected four hex digits after \\u");
        u = u * 16 + (unsigned)d;
    }
    r->p += 4;
    *out = u;
    return 0;
}

static int push_utf8(struct buf *b, unsigned cp)
{
    char out[4];
    size_t n;
    if (cp < 0x80)
        out[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
        out[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    else
        out[0] = (char)(0xf0 | cp >> 18), out[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), out[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    return buf_push(b, out, n);
}

/* \uXXXX, with a high surrogate followed by its low one. */
static int parse_unicode_escape(struct reader *r, struct buf *b)
{
    unsigned cp, low;
    if (hex4(r, &cp) < 0) return -1;
    if (cp >= 0xdc00 && cp <= 0xdfff) return fail(r, "lone low surrogate \\u%04x", cp);
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
            return fail(r, "high surrogate \\u%04x without its low surrogate", cp);
        r->p += 2;
        if (hex4(r, &low) < 0) return -1;
        if (low < 0xdc00 || low > 0xdfff)
            return fail(r, "high surrogate \\u%04x without its low surrogate", cp);
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    return push_utf8(b, cp) < 0 ? fail(r, "out of memory") : 0;
}

static int parse_escape(struct reader *r, struct buf *b)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (r->p >= r->end) return fail(r, "unterminated string");
    char c = *r->p++;
    if (c == 'u') return parse_unicode_escape(r, b);
    const char *k = strchr(from, c);
    if (!k || !c) return r->p--, fail(r, "invalid escape '\\%c'", c);
    return buf_push(b, &to[k - from], 1) < 0 ? fail(r, "out of memory") : 0;
}

/* Length of the valid UTF-8 sequence at p (no overlongs, no surrogates,
 * nothing above U+10FFFF), or 0. */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    size_t n = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (!n || (size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && p[1] < 0xa0) return 0; /* overlong */
    if (c == 0xed && p[1] > 0x9f) return 0; /* surrogate */
    if (c == 0xf0 && p[1] < 0x90) return 0; /* overlong */
    if (c == 0xf4 && p[1] > 0x8f) return 0; /* above U+10FFFF */
    return n;
}

/* At the opening quote; leaves a malloc'd, NUL-terminated string in *out. */
static int parse_string(struct reader *r, char **out, size_t *len)
{
    struct buf b = {0};
    r->p++;
    for (;;) {
        const char *run = r->p;
        while (r->p < r->end && (unsigned char)*r->p >= 0x20 && (unsigned char)*r->p < 0x80 &&
               *r->p != '"' && *r->p != '\\')
            r->p++;
        if (r->p > run && buf_push(&b, run, (size_t)(r->p - run)) < 0) goto oom;
        if (r->p >= r->end) goto fail_unterminated;
        unsigned char c = (unsigned char)*r->p;
        if (c == '"') break;
        if (c == '\\') {
            r->p++;
            if (parse_escape(r, &b) < 0) goto fail;
        } else if (c < 0x20) {
            fail(r, "control character 0x%02x in a string (escape it)", c);
            goto fail;
        } else {
            size_t n = utf8_sequence((const unsigned char *)r->p, (const unsigned char *)r->end);
            if (!n) {
                fail(r, "invalid UTF-8 in a string");
                goto fail;
            }
            if (buf_push(&b, r->p, n) < 0) goto oom;
            r->p += n;
        }
    }
    r->p++;
    if (!b.data && buf_push(&b, "", 0) < 0) goto oom;
    *out = b.data;
    *len = b.len;
    return 0;
fail_unterminated:
    fail(r, "unterminated string");
    goto fail;
oom:
    fail(r, "out of memory");
fail:
    free(b.data);
    return -1;
}

/* ---- containers ---- */

static void free_value(struct json_value *v);

static int enter(struct reader *r)
{
    if (++r->depth > JSON_READ_MAX_DEPTH)
        return fail(r, "nested deeper than %d levels", JSON_READ_MAX_DEPTH);
    r->p++;
    skip_space(r);
    return 0;
}

/* After an element: ',' goes on (returns 1), the closer ends (returns 0). */
static int next_element(struct reader *r, char closer, const char *what)
{
    skip_space(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        skip_space(r);
        return 1;
    }
    if (r->p < r->end && *r->p == closer) {
        r->p++;
        r->depth--;
        return 0;
    }
    return fail(r, "expected ',' or '%c' in %s", closer, what);
}

/* Room for element n of an array's items or an object's members (cap
 * doubling), zeroed so that a failed parse frees only what it made. */
static int grow_one(struct reader *r, void **items, size_t *cap, size_t n, size_t size)
{
    if (n == *cap) {
        size_t more = *cap ? *cap * 2 : 4;
        void *grown = realloc(*items, more * size);
        if (!grown) return fail(r, "out of memory");
        *items = grown;
        *cap = more;
    }
    memset((char *)*items + n * size, 0, size);
    return 0;
}

static int parse_array(struct reader *r, struct json_value *v)
{
    v->type = JSON_ARRAY;
    if (enter(r) < 0) return -1;
    if (r->p < r->end && *r->p == ']') return r->p++, r->depth--, 0;
    size_t cap = 0;
    for (int more = 1; more > 0;) {
        if (grow_one(r, (void **)&v->items, &cap, v->n, sizeof *v->items) < 0) return -1;
        v->n++;
        if (parse_value(r, &v->items[v->n - 1]) < 0) return -1;
        if ((more = next_element(r, ']', "an array")) < 0) return -1;
    }
    return 0;
}

static int compare_keys(const void *a, const void *b)
{
    const struct json_member *x = *(const struct json_member *const *)a,
                             *y = *(const struct json_member *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Sorting pointers keeps this O(n log n) for objects with many members. */
static int check_duplicate_keys(struct reader *r, const struct json_value *v)
{
    if (v->n < 2) return 0;
    const struct json_member **sorted = malloc(v->n * sizeof *sorted);
    if (!sorted) return fail(r, "out of memory");
    for (size_t i = 0; i < v->n; i++)
        sorted[i] = &v->members[i];
    qsort(sorted, v->n, sizeof *sorted, compare_keys);
    const char *dup = NULL;
    for (size_t i = 1; i < v->n && !dup; i++)
        if (compare_keys(&sorted[i - 1], &sorted[i]) == 0) dup = sorted[i]->key;
    int rc = dup ? fail(r, "duplicate key \"%.64s\" in an object", dup) : 0;
    free(sorted);
    return rc;
}

static int parse_member(struct reader *r, struct json_member *m)
{
    if (r->p >= r->end || *r->p != '"') return fail(r, "expected a string key in an object");
    if (parse_string(r, &m->key, &m->key_len) < 0) return -1;
    skip_space(r);
    if (r->p >= r->end || *r->p != ':') return fail(r, "expected ':' after an object key");
    r->p++;
    skip_space(r);
    return parse_value(r, &m->value);
}

static int parse_object(struct reader *r, struct json_value *v)
{
    v->type = JSON_OBJECT;
    if (enter(r) < 0) return -1;
    if (r->p < r->end && *r->p == '}') return r->p++, r->depth--, 0;
    size_t cap = 0;
    for (int more = 1; more > 0;) {
        if (grow_one(r, (void **)&v->members, &cap, v->n, sizeof *v->members) < 0) return -1;
        v->n++;
        if (parse_member(r, &v->members[v->n - 1]) < 0) return -1;
        if ((more = next_element(r, '}', "an object")) < 0) return -1;
    }
    return check_duplicate_keys(r, v);
}

static int parse_value(struct reader *r, struct json_value *v)
{
    if (r->p >= r->end) return fail(r, "expected a JSON value, found the end");
    switch (*r->p) {
    case '{':
        return parse_object(r, v);
    case '[':
        return parse_array(r, v);
    case '"':
        v->type = JSON_STRING;
        return parse_string(r, &v->string, &v->len);
    case 't':
        return parse_literal(r, v, "true", JSON_TRUE);
    case 'f':
        return parse_literal(r, v, "false", JSON_FALSE);
    case 'n':
        return parse_literal(r, v, "null", JSON_NULL);
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) return parse_number(r, v);
        return fail(r, "expected a JSON value");
    }
}

/* ---- public ---- */

static void free_value(struct json_value *v)
{
    for (size_t i = 0; v->items && i < v->n; i++)
        free_value(&v->items[i]);
    for (size_t i = 0; v->members && i < v->n; i++) {
        free(v->members[i].key);
        free_value(&v->members[i].value);
    }
    free(v->items);
    free(v->members);
    free(v->string);
}

void json_free(struct json_value *root)
{
    if (!root) return;
    free_value(root);
    free(root);
}

struct json_value *json_read(const char *text, size_t len, char *err, size_t errlen)
{
    struct reader r = {text, text, text + len, 0, err, errlen, false};
    struct json_value *root = calloc(1, sizeof *root);
    if (!root) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    skip_space(&r);
    if (parse_value(&r, root) == 0) {
        skip_space(&r);
        if (r.p == r.end) return root;
        fail(&r, "unexpected text after the JSON value");
    }
    json_free(root);
    return NULL;
}

const struct json_value *json_get(const struct json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < v->n; i++)
        if (v->members[i].key_len == n && memcmp(v->members[i].key, key, n) == 0)
            return &v->members[i].value;
    return NULL;
}
