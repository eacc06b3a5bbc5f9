/* dataset.h — training data for the peers: IDX files (Fashion-MNIST or any
 * pair), a seeded synthetic generator, partitions into shards, and batches.
 *
 * A struct dataset is one split ("train" or "test") of one source, the shard
 * of it this peer holds (a list of sample indices into the split) and the
 * cursor of its mini-batch order. It owns the index arrays and its read-only
 * mappings of the data; samples are converted to float only when copied out
 * (pixels of unsigned-byte IDX files scaled to [0, 1]; labels are int32
 * class indices), so a thousand peers share one copy of the data.
 *
 * Gzip-compressed IDX files are decompressed once into a cache directory
 * (spec->cache_dir, else $HIERNET_CACHE, else /var/cache/hiernet/datasets),
 * written to a temporary file and renamed into place under an flock of the
 * directory, then mapped read-only; uncompressed IDX files are mapped where
 * they are. Cache entries are named after the source file and a hash of its
 * path, size and mtime, so a changed source gets a new entry.
 *
 * Sources (spec->name):
 *   "fashion-mnist"  /usr/share/datasets/fashion-mnist (Debian's
 *                    dataset-fashion-mnist), splits train (60000) and test
 *                    (10000), 784 pixels, 10 classes
 *   "synthetic"      Gaussian clusters: per class a centre uniform in
 *                    [0, 1]^dim, samples centre + noise * N(0, I), labels
 *                    uniform; deterministic in synthetic.seed, train and test
 *                    drawn from the same centres
 *   a directory      holding MNIST-style train-/t10k-{images-idx3,labels-idx1}
 *                    -ubyte[.gz] files
 *   an images file   its labels file found by replacing "images" with
 *                    "labels" and "idx3" with "idx1" in the file name
 *   spec->images and spec->labels set: that pair (name is then only a label)
 * IDX element types: unsigned byte (images scaled by 1/255, labels as is),
 * float32 (images as is) and int32 (labels).
 *
 * Partitions (of the whole split, computed identically by every peer from the
 * seed, each peer keeping its own shard `shard` of `shards`, 1-based):
 *   shuffle    seeded permutation, then shard i gets the i-th contiguous slice;
 *              the shards are disjoint and cover the split
 *   sample     floor(N / shards) indices drawn uniformly with replacement,
 *              an independent stream per shard
 *   dirichlet  non-IID label skew: for every class, shard proportions drawn
 *              from Dirichlet(alpha) split that class's shuffled indices;
 *              redrawn (deterministically) until every shard holds at least
 *              min(10, N / shards) samples. Small alpha: few classes per
 *              shard; large alpha: close to uniform
 * shards = 0 means the whole split in file order.
 *
 * Batches cycle through the shard in a seeded order, reshuffled every epoch;
 * a batch that crosses an epoch boundary continues into the next order. The
 * cursor makes dataset_next_batch one thread at a time per dataset; reads
 * (dataset_read and the accessors) may run concurrently.
 * Errors name the file (or spec) and the problem; nothing is printed. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DATASET_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DATASET_DEFAULT_CACHE "/var/cache/hiernet/datasets"

struct dataset_synthetic {
    size_t n;     /* samples in the split; 0: 10000 train, 2000 test */
    int dim;      /* features; 0: 32 */
    int classes;  /* 0: 10 */
    double noise; /* standard deviation around the centres; <= 0: 0.5 */
    uint64_t seed;
};

struct dataset_spec {
    const char *name;   /* see above */
    const char *split;  /* "train" (NULL) or "test" */
    const char *images; /* explicit IDX pair, overrides name */
    const char *labels;
    int shard, shards;     /* 1-based shard of shards; shards = 0: whole split */
    const char *partition; /* "shuffle" (NULL), "sample", "dirichlet" */
    double alpha;          /* dirichlet concentration, > 0 (0: 0.5) */
    uint64_t seed;         /* partition and batch order */
    const char *cache_dir; /* NULL: $HIERNET_CACHE or DATASET_DEFAULT_CACHE */
    struct dataset_synthetic synthetic;
};

struct dataset;

/* Makes the decompression cache ($HIERNET_CACHE or DATASET_DEFAULT_CACHE)
 * writable by uid:gid, the user peers run as after giving up root: creates
 * it when missing (theirs then), or hands over hiernet's own default
 * directory while it belongs to root; any other existing directory is left
 * as it is. A cache the peers cannot write is no error: gzip files are then
 * decompressed into each peer's memory. Called by a root controller. */
int dataset_cache_grant(uid_t uid, gid_t gid, char *err, size_t errlen);

int dataset_open(const struct dataset_spec *spec, struct dataset **out, char *err, size_t errlen);
void dataset_close(struct dataset *ds);

size_t dataset_size(const struct dataset *ds);    /* samples in this shard */
size_t dataset_total(const struct dataset *ds);   /* samples in the split */
int dataset_dim(const struct dataset *ds);        /* floats per sample */
int dataset_classes(const struct dataset *ds);    /* max label + 1 over the split */
uint64_t dataset_epoch(const struct dataset *ds); /* completed passes of next_batch */

/* Index into the split of shard position i (< dataset_size). */
uint32_t dataset_index(const struct dataset *ds, size_t i);

/* Label counts of the shard: counts[c] for c < dataset_classes(). */
void dataset_class_counts(const struct dataset *ds, size_t *counts);

/* Copies the next `batch` samples of the shuffled order: x gets
 * batch * dataset_dim() floats, labels batch class indices. */
int dataset_next_batch(struct dataset *ds, int batch, float *x, int32_t *labels, char *err,
                       size_t errlen);

/* Copies shard positions [first, first + count) in shard order, for
 * evaluation passes that must see every sample once. */
int dataset_read(const struct dataset *ds, size_t first, size_t count, float *x, int32_t *labels,
                 char *err, size_t errlen);
