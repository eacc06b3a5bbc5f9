/* fuzz_frame.c — libFuzzer target for the data-plane frame decoder
 * (peer/frame.c), which reads bytes from other peers: the prefix, then the
 * header; a header that decodes must survive an encode/decode round trip
 * unchanged (version and flags included), and its flags must be known ones. */
#include "peer/frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void round_trip(const struct frame_header *h)
{
    uint8_t buf[FRAME_PREFIX_BYTES + FRAME_HEADER_MAX];
    size_t n = frame_encode(h, buf, sizeof buf);
    if (n == 0) return; /* too large to encode: fine, the decoder accepted it within limits */
    char err[128];
    uint32_t len = frame_prefix_decode(buf, err, sizeof err);
    if (len == 0 || FRAME_PREFIX_BYTES + len != n) abort();
    struct frame_header again;
    if (frame_header_decode(buf + FRAME_PREFIX_BYTES, len, &again, err, sizeof err) != 0) abort();
    if (again.type != h->type || again.id != h->id || again.count != h->count ||
        again.bytes != h->bytes || again.has_range != h->has_range ||
        (h->has_range && again.offset != h->offset) || again.version != h->version ||
        again.flags != h->flags || strcmp(again.from, h->from) != 0 ||
        strcmp(again.to, h->to) != 0 || strcmp(again.as, h->as) != 0 ||
        strcmp(again.error, h->error) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[128];
    if (size >= FRAME_PREFIX_BYTES) frame_prefix_decode(data, err, sizeof err);
    /* The header decoder gets what follows a prefix, of any length. */
    const uint8_t *header = size >= FRAME_PREFIX_BYTES ? data + FRAME_PREFIX_BYTES : data;
    size_t len = size >= FRAME_PREFIX_BYTES ? size - FRAME_PREFIX_BYTES : size;
    struct frame_header h;
    memset(&h, 0, sizeof h);
    if (frame_header_decode(header, len, &h, err, sizeof err) == 0) {
        if (h.flags & ~(uint64_t)FRAME_FLAGS_KNOWN) abort();
        round_trip(&h);
    }
    return 0;
}
