/* fuzz_json.c — libFuzzer target for common/json_read.c, the strict JSON
 * reader of bytes hiernet does not control: the Mininet import's helper
 * output (lua/hiernet/mininet.lua) and results files (run.json,
 * summary.json). Any bytes: a document that parses must survive a write and
 * a second read unchanged in shape (json_write_value), and the first error
 * of one that does not names a line and column. */
#include "common/json.h"
#include "common/json_read.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Same types, lengths, keys, strings and integers; doubles as written. */
static int same(const struct json_value *a, const struct json_value *b)
{
    if (a->type != b->type || a->n != b->n) return 0;
    switch (a->type) {
    case JSON_NUMBER:
        return a->is_int == b->is_int &&
               (a->is_int ? a->integer == b->integer : a->number == b->number);
    case JSON_STRING:
        return a->len == b->len && memcmp(a->string, b->string, a->len) == 0;
    case JSON_ARRAY:
        for (size_t i = 0; i < a->n; i++)
            if (!same(&a->items[i], &b->items[i])) return 0;
        return 1;
    case JSON_OBJECT:
        for (size_t i = 0; i < a->n; i++)
            if (a->members[i].key_len != b->members[i].key_len ||
                memcmp(a->members[i].key, b->members[i].key, a->members[i].key_len) != 0 ||
                !same(&a->members[i].value, &b->members[i].value))
                return 0;
        return 1;
    default:
        return 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct json_value *root = json_read((const char *)data, size, err, sizeof err);
    if (!root) {
        if (strncmp(err, "line ", 5) != 0) abort();
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    json_write_value(f, root);
    fclose(f);
    struct json_value *again = json_read(text, len, err, sizeof err);
    if (!again || !same(root, again)) {
        fprintf(stderr, "round trip failed: %s\n%.*s\n", again ? "different" : err, (int)len, text);
        abort();
    }
    json_free(again);
    json_free(root);
    free(text);
    return 0;
}
