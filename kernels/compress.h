/* compress.h — gradient compression with error feedback, and its wire format.
 *
 * Methods:
 *   topk  keep the k = round(ratio * n) (at least 1) entries of largest
 *         magnitude, as indices + values; ties go to the lower index
 *   int8  q = round(x / scale) in [-127, 127] with one per-tensor scale
 *         = max |x| / 127; decoded q * scale
 *   sign  one bit per element and one scale = mean |x|; decoded +scale or
 *         -scale (signSGD with a magnitude, 1-bit SGD)
 *
 * Error feedback: with a residual tensor r (zero at start), encoding x sends
 * C = compress(x + r) and sets r = (x + r) - decompress(C), so what one step
 * drops is sent by later steps and the sum of decoded tensors tracks the sum
 * of inputs. Pass residual = NULL for plain compression.
 *
 * Serialized form (the tensor payload sent between peers), little-endian:
 *
 *   offset size
 *   0      2    magic "HC"
 *   2      1    version = 1
 *   3      1    method: 1 topk, 2 int8, 3 sign
 *   4      4    u32 k: topk entries kept; 0 for int8 and sign
 *   8      8    u64 n: element count of the dense tensor
 *   16          body
 *     topk: u32 index[k], strictly ascending, each < n; then f32 value[k]
 *           (16 + 8k bytes in all)
 *     int8: f32 scale; then i8 q[n]                       (20 + n bytes)
 *     sign: f32 scale; then ceil(n / 8) bytes, element i in byte i / 8,
 *           bit i % 8 (LSB first), 1 = negative           (20 + ceil(n/8))
 *
 * Decoding validates everything (magic, version, method, exact length,
 * index order and range, finite scale) because the bytes come off the
 * network. The codec owns nothing: buffers belong to the caller; topk
 * encoding allocates and frees one n-element scratch array per call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum compress_method { COMPRESS_TOPK = 1, COMPRESS_INT8 = 2, COMPRESS_SIGN = 3 };

#define COMPRESS_HEADER_BYTES 16

/* "topk", "int8", "sign"; the error quotes the name. */
int compress_method_parse(const char *name, enum compress_method *out, char *err, size_t errlen);
const char *compress_method_name(enum compress_method method);

/* Entries topk keeps of n for `ratio` (in (0, 1]). */
size_t compress_topk_count(size_t n, double ratio);

/* Exact serialized size of a tensor of n elements (ratio matters for topk
 * only); 0 if method or ratio is invalid. */
size_t compress_size(enum compress_method method, size_t n, double ratio);

/* Compresses x (n elements) into out (capacity cap, at least
 * compress_size()), *len = bytes written. residual: NULL, or n floats of
 * error-feedback state updated in place (must not overlap x). */
int compress_encode(enum compress_method method, double ratio, const float *x, float *residual,
                    size_t n, void *out, size_t cap, size_t *len, char *err, size_t errlen);

/* Header fields of a serialized tensor, checked for shape and length only. */
struct compress_info {
    enum compress_method method;
    uint64_t n;
    uint32_t k;
};
int compress_inspect(const void *buf, size_t len, struct compress_info *info, char *err,
                     size_t errlen);

/* Decompresses into the dense tensor out of n elements (n must match the
 * header). add = false overwrites out; add = true adds the decoded values to
 * it, which sums compressed gradients without a temporary. */
int compress_decode(const void *buf, size_t len, float *out, size_t n, bool add, char *err,
                    size_t errlen);
