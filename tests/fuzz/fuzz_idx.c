/* fuzz_idx.c — libFuzzer target for IDX loading (kernels/dataset_idx.c and
 * the pair checks of kernels/dataset.c), which reads dataset files a
 * scenario names by path: any bytes, plain or gzip. The input is split in
 * two (its first byte gives the split) into an images file and a labels
 * file on /dev/shm, opened as an explicit IDX pair, and a dataset that
 * opens is read: a batch and its last sample, every element within the
 * mapping (ASan checks the copies), labels within the classes it found.
 * gzip inputs decompress into a private cache emptied after each input.
 * The files live in $HN_FUZZ_SCRATCH (tools/fuzz) or /dev/shm, in a
 * directory of this process removed at exit. */
#include "kernels/dataset.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_MAX_INPUT (1u << 20)

static char dir[4096], images[4200], labels[4200], cache[4200];

static void write_file(const char *path, const uint8_t *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) abort();
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w <= 0) abort();
        data += w;
        n -= (size_t)w;
    }
    close(fd);
}

static void empty_cache(void)
{
    DIR *d = opendir(cache);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' || strlen(e->d_name) > 2) unlinkat(dirfd(d), e->d_name, 0);
    if (d) closedir(d);
}

static void remove_scratch(void)
{
    empty_cache();
    rmdir(cache);
    unlink(images);
    unlink(labels);
    rmdir(dir);
}

static void read_some(struct dataset *ds)
{
    int dim = dataset_dim(ds), classes = dataset_classes(ds);
    float *x = malloc((size_t)dim * 4 * sizeof *x);
    int32_t y[4];
    char err[256];
    if (!x) return;
    if (dataset_next_batch(ds, 4, x, y, err, sizeof err) == 0)
        for (int i = 0; i < 4; i++)
            if (y[i] < 0 || y[i] >= classes) abort();
    size_t n = dataset_size(ds);
    if (n && dataset_read(ds, n - 1, 1, x, y, err, sizeof err) == 0 &&
        (y[0] < 0 || y[0] >= classes))
        abort();
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
    if (!dir[0]) {
        const char *base = getenv("HN_FUZZ_SCRATCH");
        snprintf(dir, sizeof dir, "%s/hn-fuzz-idx-%d", base && *base ? base : "/dev/shm",
                 (int)getpid());
        snprintf(images, sizeof images, "%s/images", dir);
        snprintf(labels, sizeof labels, "%s/labels", dir);
        snprintf(cache, sizeof cache, "%s/cache", dir);
        if (mkdir(dir, 0700) < 0) abort();
        atexit(remove_scratch);
    }
    size_t cut = 1 + (size - 1) * data[0] / 255;
    write_file(images, data + 1, cut - 1);
    write_file(labels, data + cut, size - cut);
    struct dataset_spec spec = {.name = "fuzz",
                                .images = images,
                                .labels = labels,
                                .shard = 1,
                                .shards = 2,
                                .cache_dir = cache};
    struct dataset *ds;
    char err[512];
    if (dataset_open(&spec, &ds, err, sizeof err) == 0) {
        read_some(ds);
        dataset_close(ds);
    } else if (!err[0]) {
        abort(); /* every failure names its cause */
    }
    empty_cache();
    return 0;
}
