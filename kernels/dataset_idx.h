/* dataset_idx.h — IDX files mapped read-only, gzip decompressed via a cache.
 *
 * Internal to the dataset module (kernels/dataset.c). IDX: two zero bytes,
 * an element type byte, a dimension-count byte, that many big-endian u32
 * dimensions, then the elements big-endian (LeCun's MNIST format). A plain
 * IDX file is mapped where it lies; a gzip one is decompressed once into the
 * cache directory (temporary file + rename, under an flock of the directory)
 * and the cache entry is mapped; where the cache cannot be written (a peer
 * that gave up root), into an anonymous memory file of the process instead.
 * A struct dataset_idx owns its mapping. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define DATASET_IDX_MAX_DIMS 4

enum dataset_idx_type {
    DATASET_IDX_U8 = 0x08,
    DATASET_IDX_I8 = 0x09,
    DATASET_IDX_I16 = 0x0b,
    DATASET_IDX_I32 = 0x0c,
    DATASET_IDX_F32 = 0x0d,
    DATASET_IDX_F64 = 0x0e,
};

struct dataset_idx {
    void *map;
    size_t map_len;
    const uint8_t *data; /* first element */
    uint8_t type;
    int ndims;
    uint32_t dims[DATASET_IDX_MAX_DIMS];
    size_t count; /* dims[0] */
    size_t item;  /* elements per item: product of dims[1..] */
};

/* Maps `path` (plain or gzip). cache_dir: NULL for $HIERNET_CACHE or the
 * default. Errors name the file (or the cache directory) and the problem:
 * missing, bad magic, corrupt gzip, truncated, trailing bytes. */
int dataset_idx_open(const char *path, const char *cache_dir, struct dataset_idx *idx, char *err,
                     size_t errlen);
void dataset_idx_close(struct dataset_idx *idx);
