/* dataset.c — dataset sources, partitions into shards, and the mini-batch
 * cursor. See kernels/dataset.h; IDX mapping and the cache are in
 * dataset_idx.c.
 *
 * Owns per dataset: the two IDX mappings or the synthetic arrays, the shard's
 * index list and its batch order. */
#include "kernels/dataset.h"
#include "kernels/kern_error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/dataset_idx.h"
#include "kernels/rng.h"

#define DATASET_MAX_CLASSES 65536
#define DIRICHLET_MAX_DRAWS 1000
#define DIRICHLET_MIN_SHARD 10

struct dataset {
    struct dataset_idx images, labels; /* IDX sources */
    float *synth_x;                    /* synthetic sources */
    int32_t *synth_y;
    size_t total;
    int dim, classes;
    uint32_t *indices; /* the shard: indices into the split */
    size_t count;
    uint32_t *order; /* batch order: a permutation of shard positions */
    size_t pos;
    uint64_t epoch;
    struct rng order_rng;
};

/* ---- samples ---- */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int32_t label_at(const struct dataset *ds, size_t i)
{
    if (ds->synth_y) return ds->synth_y[i];
    if (ds->labels.type == DATASET_IDX_U8) return ds->labels.data[i];
    return (int32_t)be32(ds->labels.data + 4 * i);
}

static void sample_copy(const struct dataset *ds, size_t i, float *dst)
{
    size_t dim = (size_t)ds->dim;
    if (ds->synth_x) {
        memcpy(dst, ds->synth_x + i * dim, dim * sizeof(float));
    } else if (ds->images.type == DATASET_IDX_U8) {
        const uint8_t *src = ds->images.data + i * dim;
        for (size_t j = 0; j < dim; j++)
            dst[j] = (float)src[j] / 255.0f; /* exact at 0 and 255 */
    } else {
        const uint8_t *src = ds->images.data + 4 * i * dim;
        for (size_t j = 0; j < dim; j++) {
            uint32_t bits = be32(src + 4 * j);
            memcpy(&dst[j], &bits, 4);
        }
    }
}

/* ---- sources ---- */

static int split_is_test(const char *split, int *test, char *err, size_t errlen)
{
    if (!split || strcmp(split, "train") == 0)
        *test = 0;
    else if (strcmp(split, "test") == 0)
        *test = 1;
    else
        return kern_fail(err, errlen, "dataset split \"%s\" is unknown (train, test)", split);
    return 0;
}

/* A directory of MNIST-style files: prefers the plain file, else .gz. */
static void mnist_file(const char *dir, int test, const char *kind, char *out, size_t outlen)
{
    const char *prefix = test ? "t10k" : "train";
    const char *dims = strcmp(kind, "images") == 0 ? "idx3" : "idx1";
    snprintf(out, outlen, "%s/%s-%s-%s-ubyte", dir, prefix, kind, dims);
    struct stat st;
    if (stat(out, &st) == 0) return;
    snprintf(out, outlen, "%s/%s-%s-%s-ubyte.gz", dir, prefix, kind, dims);
}

static void replace_in_name(char *path, const char *from, const char *to)
{
    char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char *hit = strstr(base, from);
    if (hit && strlen(from) == strlen(to)) memcpy(hit, to, strlen(to));
}

/* Resolves spec into an images and a labels path (see dataset.h). */
static int resolve_files(const struct dataset_spec *spec, int test, char *images, char *labels,
                         size_t len, char *err, size_t errlen)
{
    if (spec->images || spec->labels) {
        if (!spec->images || !spec->labels)
            return kern_fail(err, errlen, "dataset: an IDX pair needs both images and labels");
        snprintf(images, len, "%s", spec->images);
        snprintf(labels, len, "%s", spec->labels);
        return 0;
    }
    const char *name = spec->name;
    struct stat st;
    if (strcmp(name, "fashion-mnist") == 0)
        name = DATASET_FASHION_MNIST_DIR;
    else if (stat(name, &st) < 0)
        return kern_fail(err, errlen,
                         "dataset \"%s\" is unknown (fashion-mnist, synthetic, an IDX file or a "
                         "directory of them): %s",
                         name, strerror(errno));
    if (name != spec->name || S_ISDIR(st.st_mode)) {
        mnist_file(name, test, "images", images, len);
        mnist_file(name, test, "labels", labels, len);
        return 0;
    }
    snprintf(images, len, "%s", name);
    snprintf(labels, len, "%s", name);
    replace_in_name(labels, "images", "labels");
    replace_in_name(labels, "idx3", "idx1");
    if (strcmp(images, labels) == 0)
        return kern_fail(err, errlen,
                         "dataset file %s: cannot derive its labels file (no \"images\" "
                         "in the name); give images and labels",
                         images);
    return 0;
}

static int check_idx_pair(struct dataset *ds, const char *images, const char *labels, char *err,
                          size_t errlen)
{
    const struct dataset_idx *im = &ds->images, *lb = &ds->labels;
    if (im->type != DATASET_IDX_U8 && im->type != DATASET_IDX_F32)
        return kern_fail(err, errlen,
                         "dataset file %s: IDX type 0x%02x unsupported for images "
                         "(unsigned byte or float32)",
                         images, im->type);
    if ((lb->type != DATASET_IDX_U8 && lb->type != DATASET_IDX_I32) || lb->ndims != 1)
        return kern_fail(err, errlen,
                         "dataset file %s: labels must be a 1-D IDX of unsigned byte or int32",
                         labels);
    if (im->count != lb->count)
        return kern_fail(err, errlen, "dataset files %s and %s: %zu images but %zu labels", images,
                         labels, im->count, lb->count);
    if (im->count == 0 || im->count > UINT32_MAX || im->item == 0 || im->item > INT32_MAX)
        return kern_fail(err, errlen, "dataset file %s: %zu items of %zu elements is unusable",
                         images, im->count, im->item);
    ds->total = im->count;
    ds->dim = (int)im->item;
    return 0;
}

/* classes = max label + 1; rejects negative or absurd labels. */
static int scan_labels(struct dataset *ds, const char *what, char *err, size_t errlen)
{
    int32_t max = -1;
    for (size_t i = 0; i < ds->total; i++) {
        int32_t y = label_at(ds, i);
        if (y < 0 || y >= DATASET_MAX_CLASSES)
            return kern_fail(err, errlen, "dataset file %s: label %d of item %zu is outside 0..%d",
                             what, (int)y, i, DATASET_MAX_CLASSES - 1);
        max = y > max ? y : max;
    }
    ds->classes = (int)max + 1;
    return 0;
}

static int open_idx_source(struct dataset *ds, const struct dataset_spec *spec, int test, char *err,
                           size_t errlen)
{
    char images[4096], labels[4096];
    if (resolve_files(spec, test, images, labels, sizeof images, err, errlen) < 0 ||
        dataset_idx_open(images, spec->cache_dir, &ds->images, err, errlen) < 0 ||
        dataset_idx_open(labels, spec->cache_dir, &ds->labels, err, errlen) < 0 ||
        check_idx_pair(ds, images, labels, err, errlen) < 0)
        return -1;
    return scan_labels(ds, labels, err, errlen);
}

static int open_synthetic(struct dataset *ds, const struct dataset_synthetic *cfg, int test,
                          char *err, size_t errlen)
{
    size_t n = cfg->n ? cfg->n : test ? 2000 : 10000;
    int dim = cfg->dim > 0 ? cfg->dim : 32, classes = cfg->classes > 0 ? cfg->classes : 10;
    double noise = cfg->noise > 0 ? cfg->noise : 0.5;
    if (n > UINT32_MAX || dim > (1 << 24) || classes > DATASET_MAX_CLASSES ||
        (double)n * dim > 1e10)
        return kern_fail(err, errlen, "dataset synthetic: n %zu, dim %d, classes %d too large", n,
                         dim, classes);
    float *centres = malloc((size_t)classes * dim * sizeof(float));
    ds->synth_x = malloc(n * dim * sizeof(float));
    ds->synth_y = malloc(n * sizeof(int32_t));
    if (!centres || !ds->synth_x || !ds->synth_y) {
        free(centres);
        return kern_fail(err, errlen, "dataset synthetic: cannot allocate %zu x %d floats", n, dim);
    }
    struct rng r;
    /* Train and test share the centres (stream 1) and differ in samples. */
    rng_seed(&r, cfg->seed, 1);
    for (size_t i = 0; i < (size_t)classes * dim; i++)
        centres[i] = rng_uniform_float(&r);
    rng_seed(&r, cfg->seed, 2 + (uint64_t)test);
    for (size_t i = 0; i < n; i++) {
        int32_t y = (int32_t)rng_below(&r, (uint64_t)classes);
        ds->synth_y[i] = y;
        for (int j = 0; j < dim; j++)
            ds->synth_x[i * dim + j] =
                centres[(size_t)y * dim + j] + (float)(noise * rng_normal(&r));
    }
    free(centres);
    ds->total = n;
    ds->dim = dim;
    ds->classes = classes;
    return 0;
}

/* ---- partitions ---- */

static uint32_t *identity(size_t n)
{
    uint32_t *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = (uint32_t)i;
    return v;
}

static int partition_shuffle(struct dataset *ds, int shard, int shards, uint64_t seed)
{
    uint32_t *perm = identity(ds->total);
    if (!perm) return -1;
    struct rng r;
    rng_seed(&r, seed, 0x5348);
    rng_shuffle_u32(&r, perm, ds->total);
    size_t lo = ds->total * (size_t)(shard - 1) / shards, hi = ds->total * (size_t)shard / shards;
    /* Keep only this shard's slice: a peer must not hold the whole split. */
    ds->count = hi - lo;
    ds->indices = malloc((ds->count ? ds->count : 1) * sizeof *perm);
    if (ds->indices) memcpy(ds->indices, perm + lo, ds->count * sizeof *perm);
    free(perm);
    return ds->indices ? 0 : -1;
}

static int partition_sample(struct dataset *ds, int shard, int shards, uint64_t seed)
{
    size_t n = ds->total / shards ? ds->total / shards : 1;
    ds->indices = malloc(n * sizeof *ds->indices);
    if (!ds->indices) return -1;
    struct rng r;
    rng_seed(&r, seed, 0x53414d00 + (uint64_t)shard);
    for (size_t i = 0; i < n; i++)
        ds->indices[i] = (uint32_t)rng_below(&r, ds->total);
    ds->count = n;
    return 0;
}

/* Split indices grouped by class (counting sort), each class's run shuffled.
 * starts[c]..starts[c + 1] delimit class c. */
static uint32_t *group_by_class(const struct dataset *ds, size_t *starts, struct rng *r)
{
    uint32_t *grouped = malloc(ds->total * sizeof *grouped);
    size_t *fill = calloc((size_t)ds->classes, sizeof *fill);
    if (!grouped || !fill) {
        free(grouped);
        free(fill);
        return NULL;
    }
    memset(starts, 0, ((size_t)ds->classes + 1) * sizeof *starts);
    for (size_t i = 0; i < ds->total; i++)
        starts[label_at(ds, i) + 1]++;
    for (int c = 0; c < ds->classes; c++)
        starts[c + 1] += starts[c];
    for (size_t i = 0; i < ds->total; i++) {
        int32_t y = label_at(ds, i);
        grouped[starts[y] + fill[y]++] = (uint32_t)i;
    }
    for (int c = 0; c < ds->classes; c++)
        rng_shuffle_u32(r, grouped + starts[c], starts[c + 1] - starts[c]);
    free(fill);
    return grouped;
}

/* Draws Dirichlet(alpha) proportions for one class in log space (see
 * rng_log_gamma) and turns them into cut points of its m samples:
 * cuts[s]..cuts[s + 1] go to shard s. */
static void dirichlet_cuts(struct rng *r, double alpha, int shards, size_t m, double *logs,
                           size_t *cuts)
{
    double max = -INFINITY, sum = 0, cumulative = 0;
    for (int s = 0; s < shards; s++) {
        logs[s] = rng_log_gamma(r, alpha);
        max = logs[s] > max ? logs[s] : max;
    }
    for (int s = 0; s < shards; s++)
        sum += exp(logs[s] - max);
    cuts[0] = 0;
    for (int s = 0; s < shards; s++) {
        cumulative += exp(logs[s] - max) / sum;
        size_t c = (size_t)floor(cumulative * (double)m + 0.5);
        cuts[s + 1] = s + 1 == shards ? m : c > m ? m : c < cuts[s] ? cuts[s] : c;
    }
}

/* One draw of all classes' cuts; returns the smallest shard size. */
static size_t dirichlet_draw(struct rng *r, double alpha, int shards, int classes,
                             const size_t *starts, size_t *cuts, double *logs, size_t *sizes)
{
    memset(sizes, 0, (size_t)shards * sizeof *sizes);
    for (int c = 0; c < classes; c++) {
        size_t *row = cuts + (size_t)c * (shards + 1);
        dirichlet_cuts(r, alpha, shards, starts[c + 1] - starts[c], logs, row);
        for (int s = 0; s < shards; s++)
            sizes[s] += row[s + 1] - row[s];
    }
    size_t min = sizes[0];
    for (int s = 1; s < shards; s++)
        min = sizes[s] < min ? sizes[s] : min;
    return min;
}

static int dirichlet_collect(struct dataset *ds, int shard, int shards, const uint32_t *grouped,
                             const size_t *starts, const size_t *cuts, size_t size)
{
    ds->indices = malloc((size ? size : 1) * sizeof *ds->indices);
    if (!ds->indices) return -1;
    ds->count = 0;
    for (int c = 0; c < ds->classes; c++) {
        const size_t *row = cuts + (size_t)c * (shards + 1);
        for (size_t j = row[shard - 1]; j < row[shard]; j++)
            ds->indices[ds->count++] = grouped[starts[c] + j];
    }
    return 0;
}

static int partition_dirichlet(struct dataset *ds, int shard, int shards, double alpha,
                               uint64_t seed, char *err, size_t errlen)
{
    size_t classes = (size_t)ds->classes;
    size_t *starts = malloc((classes + 1) * sizeof *starts);
    size_t *cuts = malloc(classes * (shards + 1) * sizeof *cuts);
    size_t *sizes = malloc((size_t)shards * sizeof *sizes);
    double *logs = malloc((size_t)shards * sizeof *logs);
    struct rng r;
    rng_seed(&r, seed, 0xd1c1);
    uint32_t *grouped = starts && cuts && sizes && logs ? group_by_class(ds, starts, &r) : NULL;
    int rc =
        grouped ? 0 : kern_fail(err, errlen, "dataset: out of memory in the dirichlet partition");
    size_t want =
        ds->total / shards < DIRICHLET_MIN_SHARD ? ds->total / shards : DIRICHLET_MIN_SHARD;
    want = want ? want : 1;
    /* Redraw until no shard is (nearly) empty; the draws continue one rng
     * stream, so every peer ends on the same accepted draw. */
    for (int draw = 1; rc == 0; draw++) {
        if (dirichlet_draw(&r, alpha, shards, ds->classes, starts, cuts, logs, sizes) >= want)
            break;
        if (draw == DIRICHLET_MAX_DRAWS)
            rc =
                kern_fail(err, errlen,
                          "dataset: dirichlet alpha %g left a shard under %zu samples in %d draws; "
                          "raise alpha or lower shards",
                          alpha, want, DIRICHLET_MAX_DRAWS);
    }
    if (rc == 0 && dirichlet_collect(ds, shard, shards, grouped, starts, cuts, sizes[shard - 1]))
        rc = kern_fail(err, errlen, "dataset: out of memory in the dirichlet partition");
    free(grouped);
    free(starts);
    free(cuts);
    free(sizes);
    free(logs);
    return rc;
}

static int partition(struct dataset *ds, const struct dataset_spec *spec, char *err, size_t errlen)
{
    const char *how = spec->partition ? spec->partition : "shuffle";
    int known = !strcmp(how, "shuffle") || !strcmp(how, "sample") || !strcmp(how, "dirichlet");
    if (!known)
        return kern_fail(err, errlen,
                         "dataset partition \"%s\" is unknown (shuffle, sample, dirichlet)", how);
    if (spec->shards == 0) {
        ds->indices = identity(ds->total);
        ds->count = ds->total;
        return ds->indices ? 0 : kern_fail(err, errlen, "dataset: out of memory");
    }
    if (spec->shards < 0 || (size_t)spec->shards > ds->total || spec->shard < 1 ||
        spec->shard > spec->shards)
        return kern_fail(err, errlen, "dataset: shard %d of %d is invalid for %zu samples",
                         spec->shard, spec->shards, ds->total);
    double alpha = spec->alpha == 0 ? 0.5 : spec->alpha;
    if (!strcmp(how, "dirichlet") && !(alpha > 0 && alpha < 1e6))
        return kern_fail(err, errlen, "dataset: dirichlet alpha %g must be in (0, 1e6)", alpha);
    int rc;
    if (!strcmp(how, "shuffle"))
        rc = partition_shuffle(ds, spec->shard, spec->shards, spec->seed);
    else if (!strcmp(how, "sample"))
        rc = partition_sample(ds, spec->shard, spec->shards, spec->seed);
    else
        return partition_dirichlet(ds, spec->shard, spec->shards, alpha, spec->seed, err, errlen);
    return rc == 0 ? 0 : kern_fail(err, errlen, "dataset: out of memory");
}

/* ---- lifecycle ---- */

/* Bytes of one sample's image in its IDX source. */
static size_t sample_bytes(const struct dataset *ds)
{
    return (size_t)ds->dim * (ds->images.type == DATASET_IDX_U8 ? 1 : 4);
}

/* Maps in the shard's pages of a mapped source now, while the dataset is
 * loaded: each page's first touch is a page fault, and taken during
 * training it would be a grad's CPU time, which a slow node's speed
 * multiplies (at speed 0.02 the first batches of a fresh peer took twice
 * their steady time). A read of one byte per page is enough. */
static void shard_prefault(const struct dataset *ds)
{
    if (ds->synth_x || !ds->images.data) return;
    const size_t page = 4096, bytes = sample_bytes(ds);
    volatile uint8_t sink = 0;
    for (size_t k = 0; k < ds->count; k++) {
        size_t i = ds->indices[k];
        const uint8_t *first = ds->images.data + i * bytes;
        for (size_t off = 0; off < bytes; off += page)
            sink ^= first[off];
        if (bytes) sink ^= first[bytes - 1];
        sink ^= ds->labels.data[i * (ds->labels.type == DATASET_IDX_U8 ? 1 : 4)];
    }
    (void)sink;
}

static int order_init(struct dataset *ds, const struct dataset_spec *spec, char *err, size_t errlen)
{
    ds->order = identity(ds->count);
    if (!ds->order) return kern_fail(err, errlen, "dataset: out of memory");
    /* Its own stream per shard, so shards do not walk in lockstep. */
    rng_seed(&ds->order_rng, spec->seed, 0x0badc0de00000000ull + (uint64_t)spec->shard);
    rng_shuffle_u32(&ds->order_rng, ds->order, ds->count);
    return 0;
}

int dataset_open(const struct dataset_spec *spec, struct dataset **out, char *err, size_t errlen)
{
    *out = NULL;
    int test = 0;
    if (!spec->name && !spec->images) return kern_fail(err, errlen, "dataset: no name given");
    if (split_is_test(spec->split, &test, err, errlen) < 0) return -1;
    struct dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return kern_fail(err, errlen, "dataset: out of memory");
    int synthetic = !spec->images && spec->name && strcmp(spec->name, "synthetic") == 0;
    int rc = synthetic ? open_synthetic(ds, &spec->synthetic, test, err, errlen)
                       : open_idx_source(ds, spec, test, err, errlen);
    if (rc == 0) rc = partition(ds, spec, err, errlen);
    if (rc == 0) rc = order_init(ds, spec, err, errlen);
    if (rc < 0) {
        dataset_close(ds);
        return -1;
    }
    shard_prefault(ds);
    *out = ds;
    return 0;
}

void dataset_close(struct dataset *ds)
{
    if (!ds) return;
    dataset_idx_close(&ds->images);
    dataset_idx_close(&ds->labels);
    free(ds->synth_x);
    free(ds->synth_y);
    free(ds->indices);
    free(ds->order);
    free(ds);
}

/* ---- access ---- */

size_t dataset_size(const struct dataset *ds)
{
    return ds->count;
}

size_t dataset_total(const struct dataset *ds)
{
    return ds->total;
}

int dataset_dim(const struct dataset *ds)
{
    return ds->dim;
}

int dataset_classes(const struct dataset *ds)
{
    return ds->classes;
}

uint64_t dataset_epoch(const struct dataset *ds)
{
    return ds->epoch;
}

uint32_t dataset_index(const struct dataset *ds, size_t i)
{
    return ds->indices[i];
}

void dataset_class_counts(const struct dataset *ds, size_t *counts)
{
    memset(counts, 0, (size_t)ds->classes * sizeof *counts);
    for (size_t i = 0; i < ds->count; i++)
        counts[label_at(ds, ds->indices[i])]++;
}

int dataset_next_batch(struct dataset *ds, int batch, float *x, int32_t *labels, char *err,
                       size_t errlen)
{
    if (batch < 1) return kern_fail(err, errlen, "dataset: batch %d must be positive", batch);
    if (ds->count == 0) return kern_fail(err, errlen, "dataset: the shard is empty");
    for (int b = 0; b < batch; b++) {
        if (ds->pos == ds->count) {
            rng_shuffle_u32(&ds->order_rng, ds->order, ds->count);
            ds->pos = 0;
            ds->epoch++;
        }
        uint32_t index = ds->indices[ds->order[ds->pos++]];
        sample_copy(ds, index, x + (size_t)b * ds->dim);
        labels[b] = label_at(ds, index);
    }
    return 0;
}

int dataset_read(const struct dataset *ds, size_t first, size_t count, float *x, int32_t *labels,
                 char *err, size_t errlen)
{
    if (first > ds->count || count > ds->count - first)
        return kern_fail(err, errlen, "dataset: read of [%zu, %zu) beyond the shard's %zu samples",
                         first, first + count, ds->count);
    for (size_t i = 0; i < count; i++) {
        uint32_t index = ds->indices[first + i];
        sample_copy(ds, index, x + i * ds->dim);
        labels[i] = label_at(ds, index);
    }
    return 0;
}
