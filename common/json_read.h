/* json_read.h — a small, strict JSON reader (RFC 8259) into a tree.
 *
 * It reads bytes hiernet does not control: the output of the Mininet helper
 * (lua/hiernet/mininet.lua runs a user's Python file) and results files
 * (run.json, summary.json) that `hiernet plot` and `hiernet report` are
 * pointed at. Hence strict: one value and nothing after it but whitespace,
 * no comments, no trailing commas, no NaN/Infinity, numbers by the RFC's
 * grammar and within double range, strings of valid UTF-8 without raw
 * control characters, \u escapes with paired surrogates, no duplicate keys
 * in an object, at most JSON_READ_MAX_DEPTH levels of nesting. Errors name
 * the line and column and what was expected.
 *
 * Self-contained (libc only), so a fuzz target can build it alone.
 * json_read returns a tree the caller owns and frees with json_free. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define JSON_READ_MAX_DEPTH 64

enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
};

struct json_member;

struct json_value {
    enum json_type type;
    /* JSON_NUMBER: the value; is_int when written without fraction or
     * exponent and within int64 (then integer holds it exactly). */
    double number;
    long long integer;
    bool is_int;
    /* JSON_STRING: decoded UTF-8, NUL-terminated; len excludes the NUL
     * (a string may hold \u0000, so use len). */
    char *string;
    size_t len;
    /* JSON_ARRAY: items[0..n); JSON_OBJECT: members[0..n) in document order. */
    struct json_value *items;
    struct json_member *members;
    size_t n;
};

struct json_member {
    char *key; /* decoded, NUL-terminated */
    size_t key_len;
    struct json_value value;
};

/* Parses text[0..len) (need not be NUL-terminated). Returns the root, or
 * NULL with err = "line L, column C: what went wrong". */
struct json_value *json_read(const char *text, size_t len, char *err, size_t errlen);
void json_free(struct json_value *root);
/* The member named key of an object, or NULL (also when v is no object). */
const struct json_value *json_get(const struct json_value *v, const char *key);
