/* test_dataset.c — kernels/dataset: IDX files written to a temporary
 * directory (plain, gzip, float32, good, truncated, bad magic, corrupt gzip,
 * trailing bytes, mismatched pair) give the right data or an error naming the
 * file; the decompression cache; the synthetic generator; shuffle, sample and
 * dirichlet partitions; the batch cursor; the shard mapped in when it
 * opens (no page fault reading it); Fashion-MNIST when installed. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "kernels/dataset.h"
#include "tests/unit/check.h"

static char tmp[256], cache[300];
static char err[1024];

/* ---- writing IDX files ---- */

static size_t idx_bytes(uint8_t type, int ndims, const uint32_t *dims, const void *data,
                        uint8_t *out)
{
    size_t elem = type == 0x08 ? 1 : 4, n = 1;
    out[0] = out[1] = 0;
    out[2] = type;
    out[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++) {
        out[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        out[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        out[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        out[7 + 4 * i] = (uint8_t)dims[i];
        n *= dims[i];
    }
    size_t header = 4 + 4 * (size_t)ndims;
    const uint8_t *src = data;
    for (size_t i = 0; i < n * elem; i += elem) /* big-endian elements */
        for (size_t b = 0; b < elem; b++)
            out[header + i + b] = src[i + elem - 1 - b];
    return header + n * elem;
}

static void write_file(const char *path, const void *data, size_t len, int gzip)
{
    if (gzip) {
        gzFile gz = gzopen(path, "wb");
        gzwrite(gz, data, (unsigned)len);
        gzclose(gz);
        return;
    }
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

static const char *path_of(const char *name)
{
    static char paths[64][512]; /* enough for every path one test holds */
    static int next;
    char *p = paths[next++ % 64];
    snprintf(p, 512, "%s/%s", tmp, name);
    return p;
}

/* n images of 2x3 unsigned bytes, pixel 0 of image i = i, labels i % 3. */
static void write_pair(const char *images, const char *labels, uint32_t n, int gzip)
{
    static uint8_t pix[256 * 6], lab[256], buf[4096];
    for (uint32_t i = 0; i < n; i++) {
        for (int j = 0; j < 6; j++)
            pix[i * 6 + j] = (uint8_t)(j ? 255 - j * 10 : (int)i);
        lab[i] = (uint8_t)(i % 3);
    }
    uint32_t dims[3] = {n, 2, 3};
    write_file(images, buf, idx_bytes(0x08, 3, dims, pix, buf), gzip);
    write_file(labels, buf, idx_bytes(0x08, 1, dims, lab, buf), gzip);
}

static struct dataset *open_pair(const char *images, const char *labels)
{
    struct dataset_spec spec = {
        .name = "pair", .images = images, .labels = labels, .cache_dir = cache};
    struct dataset *ds = NULL;
    err[0] = 0;
    if (dataset_open(&spec, &ds, err, sizeof err) < 0) return NULL;
    return ds;
}

static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return n;
}

/* ---- good files ---- */

static void check_pair_contents(struct dataset *ds, uint32_t n)
{
    CHECK(dataset_total(ds) == n && dataset_size(ds) == n);
    CHECK(dataset_dim(ds) == 6 && dataset_classes(ds) == 3);
    float x[6 * 4];
    int32_t y[4];
    CHECK(dataset_read(ds, 1, 4, x, y, err, sizeof err) == 0);
    CHECK_NEAR(x[0], 1.0 / 255.0, 1e-7);
    CHECK_NEAR(x[1], 245.0 / 255.0, 1e-7);
    CHECK_NEAR(x[6 * 3], 4.0 / 255.0, 1e-7);
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 0 && y[3] == 1);
    CHECK(dataset_read(ds, n - 1, 2, x, y, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "beyond");
}

static void test_good_files(void)
{
    const char *im = path_of("a-images-idx3-ubyte"), *lb = path_of("a-labels-idx1-ubyte");
    write_pair(im, lb, 10, 0);
    struct dataset *ds = open_pair(im, lb);
    CHECK_MSG(ds != NULL, "%s", err);
    if (ds) check_pair_contents(ds, 10);
    dataset_close(ds);

    const char *gim = path_of("b-images-idx3-ubyte.gz"), *glb = path_of("b-labels-idx1-ubyte.gz");
    write_pair(gim, glb, 10, 1);
    ds = open_pair(gim, glb);
    CHECK_MSG(ds != NULL, "%s", err);
    if (ds) check_pair_contents(ds, 10);
    dataset_close(ds);
    CHECK(count_files(cache, "b-images-idx3-ubyte-") == 1);
    CHECK(count_files(cache, "b-labels-idx1-ubyte-") == 1);
    CHECK(count_files(cache, ".tmp") == 0);

    /* A second open maps the same cache entry instead of rewriting it. */
    struct stat before, after;
    char entry[600];
    DIR *d = opendir(cache);
    struct dirent *e;
    entry[0] = 0;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "b-images", 8) == 0)
            snprintf(entry, sizeof entry, "%s/%s", cache, e->d_name);
    closedir(d);
    CHECK(stat(entry, &before) == 0);
    ds = open_pair(gim, glb);
    CHECK(ds != NULL);
    dataset_close(ds);
    CHECK(stat(entry, &after) == 0 && after.st_ino == before.st_ino &&
          after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);

    /* The labels file is derived from an images file name. */
    struct dataset_spec spec = {.name = gim, .cache_dir = cache};
    CHECK(dataset_open(&spec, &ds, err, sizeof err) == 0);
    if (ds) check_pair_contents(ds, 10);
    dataset_close(ds);
}

static void test_float_images(void)
{
    static uint8_t buf[4096];
    float pix[3 * 2] = {0.5f, -1.25f, 3.0f, 0.0f, 1e-3f, 7.0f};
    int32_t lab[3] = {4, 0, 2};
    uint32_t dims[2] = {3, 2};
    const char *im = path_of("f-images"), *lb = path_of("f-labels");
    write_file(im, buf, idx_bytes(0x0d, 2, dims, pix, buf), 0);
    write_file(lb, buf, idx_bytes(0x0c, 1, dims, lab, buf), 0);
    struct dataset *ds = open_pair(im, lb);
    CHECK_MSG(ds != NULL, "%s", err);
    if (!ds) return;
    float x[6];
    int32_t y[3];
    CHECK(dataset_read(ds, 0, 3, x, y, err, sizeof err) == 0);
    CHECK(memcmp(x, pix, sizeof pix) == 0);
    CHECK(y[0] == 4 && y[2] == 2 && dataset_classes(ds) == 5);
    dataset_close(ds);
}

/* ---- broken files ---- */

static void expect_error(const char *images, const char *labels, const char *named,
                         const char *problem)
{
    struct dataset *ds = open_pair(images, labels);
    CHECK_MSG(ds == NULL, "opening %s should fail", named);
    dataset_close(ds);
    printf("error: %s\n", err);
    CHECK_CONTAINS(err, named);
    CHECK_CONTAINS(err, problem);
}

static void test_broken_files(void)
{
    const char *lb = path_of("ok-labels"), *im = path_of("ok-images");
    write_pair(im, lb, 10, 0);
    static uint8_t buf[4096], pix[60];
    uint32_t dims[3] = {10, 2, 3};
    size_t len = idx_bytes(0x08, 3, dims, pix, buf);

    expect_error(path_of("missing-images"), lb, path_of("missing-images"), "No such file");

    const char *p = path_of("trunc-images");
    write_file(p, buf, len - 7, 0);
    expect_error(p, lb, p, "truncated");

    p = path_of("trunc-images.gz");
    write_file(p, buf, len - 7, 1);
    expect_error(p, lb, p, "truncated");

    p = path_of("trail-images");
    memcpy(buf + len, "xyz", 3);
    write_file(p, buf, len + 3, 0);
    expect_error(p, lb, p, "after the IDX data");

    p = path_of("magic-images");
    write_file(p, "hello, world", 12, 0);
    expect_error(p, lb, p, "bad IDX magic");

    p = path_of("empty-images");
    write_file(p, "", 0, 0);
    expect_error(p, lb, p, "too short");

    /* Gzip magic followed by garbage. */
    p = path_of("garbage-images.gz");
    static const uint8_t garbage[] = {0x1f, 0x8b, 8,    0,    0,    0,    0,    0,
                                      0,    3,    0xff, 0xff, 0xff, 0x13, 0x37, 0x42,
                                      0x42, 0x42, 0x42, 0x42, 0x42, 0x42};
    write_file(p, garbage, sizeof garbage, 0);
    expect_error(p, lb, p, "gzip");

    /* A good gzip file cut in half. */
    const char *good = path_of("good-images.gz");
    write_pair(good, path_of("good-labels.gz"), 200, 1);
    FILE *f = fopen(good, "rb");
    size_t glen = fread(buf, 1, sizeof buf, f);
    fclose(f);
    p = path_of("halfgz-images.gz");
    write_file(p, buf, glen / 2, 0);
    expect_error(p, lb, p, "truncated gzip");

    /* One flipped byte in the deflate data or the CRC trailer. */
    p = path_of("crc-images.gz");
    buf[glen - 6] ^= 0x55;
    write_file(p, buf, glen, 0);
    expect_error(p, lb, p, "gzip");

    /* Images and labels that disagree on the count. */
    const char *lb5 = path_of("five-labels");
    write_pair(path_of("five-images"), lb5, 5, 0);
    expect_error(im, lb5, "10 images but 5 labels", lb5);

    CHECK(count_files(cache, ".tmp") == 0);
    CHECK(count_files(cache, "garbage") == 0 && count_files(cache, "halfgz") == 0);
}

static void test_cache_env(void)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/env-cache/nested", tmp);
    setenv("HIERNET_CACHE", dir, 1);
    const char *im = path_of("e-images.gz"), *lb = path_of("e-labels.gz");
    write_pair(im, lb, 4, 1);
    struct dataset_spec spec = {.name = "e", .images = im, .labels = lb};
    struct dataset *ds;
    CHECK_MSG(dataset_open(&spec, &ds, err, sizeof err) == 0, "%s", err);
    dataset_close(ds);
    CHECK(count_files(dir, "e-images") == 1);
    unsetenv("HIERNET_CACHE");

    struct dataset_spec bad = {.name = "no-such-dataset"};
    CHECK(dataset_open(&bad, &ds, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"no-such-dataset\"");
    struct dataset_spec split = {.name = "synthetic", .split = "valid"};
    CHECK(dataset_open(&split, &ds, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"valid\"");
}

/* ---- synthetic ---- */

static struct dataset *synthetic(const char *split, size_t n, int shard, int shards,
                                 const char *partition, double alpha, uint64_t seed)
{
    struct dataset_spec spec = {.name = "synthetic",
                                .split = split,
                                .shard = shard,
                                .shards = shards,
                                .partition = partition,
                                .alpha = alpha,
                                .seed = seed,
                                .synthetic = {.n = n, .dim = 32, .classes = 10, .seed = 11}};
    struct dataset *ds = NULL;
    if (dataset_open(&spec, &ds, err, sizeof err) < 0) fprintf(stderr, "synthetic: %s\n", err);
    return ds;
}

/* Nearest class mean (from train) classifies test well: the clusters are
 * learnable, and train and test share their centres. */
static void test_synthetic(void)
{
    struct dataset *train = synthetic("train", 2000, 0, 0, NULL, 0, 0);
    struct dataset *test = synthetic("test", 500, 0, 0, NULL, 0, 0);
    struct dataset *again = synthetic("train", 2000, 0, 0, NULL, 0, 0);
    CHECK(train && test && again);
    if (!train || !test || !again) return;
    enum { D = 32 };
    CHECK(dataset_total(train) == 2000 && dataset_dim(train) == D && dataset_classes(train) == 10);
    static float x[2000 * D], x2[2000 * D];
    static int32_t y[2000], y2[2000];
    double mean[10][D] = {{0}};
    size_t counts[10];
    CHECK(dataset_read(train, 0, 2000, x, y, err, sizeof err) == 0);
    CHECK(dataset_read(again, 0, 2000, x2, y2, err, sizeof err) == 0);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    dataset_class_counts(train, counts);
    for (int i = 0; i < 2000; i++)
        for (int j = 0; j < D; j++)
            mean[y[i]][j] += x[i * D + j] / (double)counts[y[i]];
    CHECK(dataset_read(test, 0, 500, x, y, err, sizeof err) == 0);
    int right = 0;
    for (int i = 0; i < 500; i++) {
        int best = 0;
        double best_d = INFINITY;
        for (int c = 0; c < 10; c++) {
            double d = 0;
            for (int j = 0; j < D; j++)
                d += (x[i * D + j] - mean[c][j]) * (x[i * D + j] - mean[c][j]);
            if (d < best_d) {
                best_d = d;
                best = c;
            }
        }
        right += best == y[i];
    }
    printf("synthetic: nearest-mean test accuracy %.3f\n", right / 500.0);
    CHECK(right > 0.8 * 500 && right < 500);
    dataset_close(train);
    dataset_close(test);
    dataset_close(again);
}

/* ---- partitions ---- */

static void test_shuffle(void)
{
    enum { N = 1003, S = 7 };
    static int seen[N];
    memset(seen, 0, sizeof seen);
    for (int s = 1; s <= S; s++) {
        struct dataset *ds = synthetic("train", N, s, S, "shuffle", 0, 5);
        struct dataset *same = synthetic("train", N, s, S, "shuffle", 0, 5);
        struct dataset *other = synthetic("train", N, s, S, "shuffle", 0, 6);
        CHECK(ds && same && other);
        if (!ds || !same || !other) return;
        size_t n = dataset_size(ds);
        CHECK(n == N / S || n == N / S + 1);
        int equal = 1, differs = 0;
        for (size_t i = 0; i < n; i++) {
            seen[dataset_index(ds, i)]++;
            equal &= dataset_index(ds, i) == dataset_index(same, i);
            differs |= dataset_index(ds, i) != dataset_index(other, i);
        }
        CHECK(equal && differs);
        dataset_close(ds);
        dataset_close(same);
        dataset_close(other);
    }
    int once = 1;
    for (int i = 0; i < N; i++)
        once &= seen[i] == 1;
    CHECK_MSG(once, "shuffle shards are not disjoint and complete");
}

static void test_sample(void)
{
    struct dataset *a = synthetic("train", 1000, 2, 4, "sample", 0, 9);
    struct dataset *b = synthetic("train", 1000, 2, 4, "sample", 0, 9);
    struct dataset *c = synthetic("train", 1000, 3, 4, "sample", 0, 9);
    struct dataset *whole = synthetic("train", 1000, 1, 1, "sample", 0, 9);
    CHECK(a && b && c && whole);
    if (!a || !b || !c || !whole) return;
    CHECK(dataset_size(a) == 250 && dataset_size(whole) == 1000);
    int equal = 1, differs = 0;
    for (size_t i = 0; i < 250; i++) {
        equal &= dataset_index(a, i) == dataset_index(b, i);
        differs |= dataset_index(a, i) != dataset_index(c, i);
    }
    CHECK(equal && differs);
    /* With replacement: a bootstrap of 1000 from 1000 repeats ~37% of them. */
    static int hits[1000];
    int distinct = 0;
    for (size_t i = 0; i < 1000; i++)
        distinct += hits[dataset_index(whole, i)]++ == 0;
    CHECK(distinct > 550 && distinct < 750);
    dataset_close(a);
    dataset_close(b);
    dataset_close(c);
    dataset_close(whole);
}

/* Mean over shards of the largest class's share; checks coverage too. */
static double dirichlet_skew(double alpha, uint64_t seed)
{
    enum { N = 5000, S = 10 };
    static int seen[N];
    memset(seen, 0, sizeof seen);
    double skew = 0;
    int once = 1;
    for (int s = 1; s <= S; s++) {
        struct dataset *ds = synthetic("train", N, s, S, "dirichlet", alpha, seed);
        CHECK(ds != NULL);
        if (!ds) return NAN;
        size_t counts[10], max = 0;
        dataset_class_counts(ds, counts);
        for (int c = 0; c < 10; c++)
            max = counts[c] > max ? counts[c] : max;
        CHECK(dataset_size(ds) >= 10);
        skew += (double)max / (double)dataset_size(ds) / S;
        for (size_t i = 0; i < dataset_size(ds); i++)
            seen[dataset_index(ds, i)]++;
        dataset_close(ds);
    }
    for (int i = 0; i < N; i++)
        once &= seen[i] == 1;
    CHECK_MSG(once, "dirichlet shards are not disjoint and complete");
    return skew;
}

static void test_dirichlet(void)
{
    double small = dirichlet_skew(0.1, 3), large = dirichlet_skew(1000, 3);
    printf("dirichlet: mean largest-class share %.3f at alpha 0.1, %.3f at alpha 1000\n", small,
           large);
    CHECK(small > 0.5);
    CHECK(large < 0.15);
    struct dataset *a = synthetic("train", 2000, 4, 10, "dirichlet", 0.3, 8);
    struct dataset *b = synthetic("train", 2000, 4, 10, "dirichlet", 0.3, 8);
    CHECK(a && b && dataset_size(a) == dataset_size(b));
    int equal = 1;
    for (size_t i = 0; a && b && i < dataset_size(a); i++)
        equal &= dataset_index(a, i) == dataset_index(b, i);
    CHECK(equal);
    dataset_close(a);
    dataset_close(b);

    struct dataset *ds;
    struct dataset_spec spec = {.name = "synthetic", .shard = 0, .shards = 4};
    CHECK(dataset_open(&spec, &ds, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "shard 0 of 4");
    spec.shard = 5;
    CHECK(dataset_open(&spec, &ds, err, sizeof err) == -1);
    spec.shard = 1;
    spec.partition = "stratified";
    CHECK(dataset_open(&spec, &ds, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"stratified\"");
    spec.partition = "dirichlet";
    spec.alpha = -1;
    CHECK(dataset_open(&spec, &ds, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "alpha");
}

/* ---- batches ---- */

/* 20 images whose first pixel is their index; shard 2 of 2 holds 10. Each
 * run of 10 consecutive batch samples is one epoch: a permutation of the
 * shard, reshuffled between epochs, the same for the same seed. */
static void test_batches(void)
{
    const char *im = path_of("bt-images"), *lb = path_of("bt-labels");
    write_pair(im, lb, 20, 0);
    int orders[2][30];
    for (int run = 0; run < 2; run++) {
        struct dataset_spec spec = {.name = "bt",
                                    .images = im,
                                    .labels = lb,
                                    .shard = 2,
                                    .shards = 2,
                                    .seed = 4,
                                    .cache_dir = cache};
        struct dataset *ds;
        CHECK_MSG(dataset_open(&spec, &ds, err, sizeof err) == 0, "%s", err);
        if (!ds) return;
        float x[4 * 6];
        int32_t y[4];
        int got = 0;
        while (got < 30) {
            int batch = 30 - got < 4 ? 30 - got : 4;
            CHECK(dataset_next_batch(ds, batch, x, y, err, sizeof err) == 0);
            for (int b = 0; b < batch; b++) {
                int index = (int)lrintf(x[b * 6] * 255.0f);
                CHECK(y[b] == index % 3);
                orders[run][got++] = index;
            }
        }
        CHECK(dataset_epoch(ds) == 2);
        CHECK(dataset_next_batch(ds, 0, x, y, err, sizeof err) == -1);
        int in_shard[20] = {0};
        for (size_t i = 0; i < dataset_size(ds); i++)
            in_shard[dataset_index(ds, i)] = 1;
        for (int e = 0; e < 3; e++) {
            int count[20] = {0}, ok = 1;
            for (int i = 0; i < 10; i++)
                count[orders[run][e * 10 + i]]++;
            for (int i = 0; i < 20; i++)
                ok &= count[i] == in_shard[i];
            CHECK_MSG(ok, "epoch %d is not a permutation of the shard", e);
        }
        CHECK(memcmp(orders[run], orders[run] + 10, 10 * sizeof(int)) != 0);
        dataset_close(ds);
    }
    CHECK(memcmp(orders[0], orders[1], sizeof orders[0]) == 0);
}

/* Is the Fashion-MNIST package (tools/setup installs it) there? */
/* ---- the shard mapped in at load ---- */

/* The minor page faults of this process so far. */
static long minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
}

/* A shard is mapped in when the dataset opens: reading every sample of it
 * afterwards takes no page fault (a grad would take them otherwise, as CPU
 * time a slow node's speed multiplies). 2048 images of 28x28 bytes: 1.6 MB,
 * hundreds of pages, read in batches into buffers touched beforehand. */
static void test_shard_prefaulted(void)
{
    enum { N = 2048, DIM = 784, BATCH = 256 };
    uint8_t *pix = malloc((size_t)N * DIM), *lab = malloc(N), *buf = malloc((size_t)N * DIM + 64);
    float *x = malloc(sizeof(float) * BATCH * DIM);
    int32_t y[BATCH];
    CHECK(pix && lab && buf && x);
    if (!pix || !lab || !buf || !x) return;
    for (size_t i = 0; i < (size_t)N * DIM; i++)
        pix[i] = (uint8_t)(i * 7);
    for (int i = 0; i < N; i++)
        lab[i] = (uint8_t)(i % 10);
    uint32_t dims[3] = {N, 28, 28};
    const char *images = path_of("big-images"), *labels = path_of("big-labels");
    write_file(images, buf, idx_bytes(0x08, 3, dims, pix, buf), 0);
    write_file(labels, buf, idx_bytes(0x08, 1, dims, lab, buf), 0);
    struct dataset *ds = open_pair(images, labels);
    CHECK_MSG(ds != NULL, "%s", err);
    memset(x, 0, sizeof(float) * BATCH * DIM);
    memset(y, 0, sizeof y);
    long before = minor_faults();
    for (int b = 0; ds && b < N / BATCH; b++)
        CHECK(dataset_next_batch(ds, BATCH, x, y, err, sizeof err) == 0);
    long faults = minor_faults() - before;
    CHECK_MSG(faults == 0, "reading the shard took %ld page faults after the load", faults);
    dataset_close(ds);
    free(pix);
    free(lab);
    free(buf);
    free(x);
}

static int fashion_mnist_installed(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", DATASET_FASHION_MNIST_DIR);
    return access(path, R_OK) == 0;
}

static void test_fashion_mnist(void)
{
    struct dataset_spec spec = {
        .name = "fashion-mnist", .split = "test", .cache_dir = cache, .shard = 3, .shards = 10};
    struct dataset *ds;
    CHECK_MSG(dataset_open(&spec, &ds, err, sizeof err) == 0, "%s", err);
    if (!ds) return;
    CHECK(dataset_total(ds) == 10000 && dataset_size(ds) == 1000);
    CHECK(dataset_dim(ds) == 784 && dataset_classes(ds) == 10);
    static float x[784];
    int32_t y;
    CHECK(dataset_next_batch(ds, 1, x, &y, err, sizeof err) == 0);
    float max = 0;
    for (int i = 0; i < 784; i++)
        max = x[i] > max ? x[i] : max;
    CHECK(max > 0.5f && max <= 1.0f && y >= 0 && y < 10);
    dataset_close(ds);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/hiernet-test-dataset-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) CHECK_SKIP("cannot create a temporary directory");
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    test_good_files();
    test_float_images();
    test_broken_files();
    test_cache_env();
    test_synthetic();
    test_shuffle();
    test_sample();
    test_dirichlet();
    test_batches();
    test_shard_prefaulted();
    int fashion = fashion_mnist_installed();
    if (fashion) test_fashion_mnist();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    /* A part left out is a skip, not a pass: the parts that ran still fail
     * the test when one of their checks failed. */
    int status = check_report();
    if (status || fashion) return status;
    CHECK_SKIP("Fashion-MNIST not installed (tools/setup installs dataset-fashion-mnist)");
}
