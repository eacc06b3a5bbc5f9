/* growbuf.c — the growable byte buffer (see growbuf.h). */
#include "common/growbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The first allocation of a buffer without fixed storage. */
#define GROWBUF_FIRST 4096

void growbuf_init(struct growbuf *b, char *fixed, size_t size)
{
    size = fixed ? size : 0;
    *b = (struct growbuf){.data = fixed, .cap = size, .fixed = fixed, .fixed_size = size};
}

/* Room for `more` bytes after len; false (and failed) when out of memory. */
static bool growbuf_reserve(struct growbuf *b, size_t more)
{
    if (more <= b->cap - b->len) return true;
    size_t cap = b->cap ? b->cap : GROWBUF_FIRST;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true; /* unreachable in practice */
            return false;
        }
        cap *= 2;
    }
    char *grown = b->data == b->fixed ? malloc(cap) : realloc(b->data, cap);
    if (!grown) {
        b->failed = true;
        return false;
    }
    if (b->data == b->fixed && b->len) memcpy(grown, b->fixed, b->len);
    b->data = grown;
    b->cap = cap;
    return true;
}

bool growbuf_append(struct growbuf *b, const void *bytes, size_t len)
{
    if (b->failed) return false;
    if (len == 0) return true; /* bytes may then be NULL, which memcpy must not see */
    if (!growbuf_reserve(b, len)) return false;
    memcpy(b->data + b->len, bytes, len);
    b->len += len;
    return true;
}

int growbuf_write(void *buffer, const char *bytes, size_t len)
{
    return growbuf_append(buffer, bytes, len) ? 0 : -1;
}

void growbuf_free(struct growbuf *b)
{
    if (b->data != b->fixed) free(b->data);
    growbuf_init(b, b->fixed, b->fixed_size);
}
