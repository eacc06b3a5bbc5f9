/* dataset_idx.c — IDX header validation, read-only mapping, and the shared
 * decompression cache for gzip files. See kernels/dataset_idx.h.
 *
 * Owns the mappings it returns and, while decompressing, one temporary file
 * (removed on every failure path) and one locked directory fd. */
#include "kernels/dataset_idx.h"
#include "kernels/kern_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "kernels/dataset.h"

/* 1 TiB of elements: far above any dataset, low enough that products of
 * dimensions cannot overflow size_t on the way. */
#define IDX_MAX_DATA_BYTES (1ull << 40)
#define IDX_COPY_CHUNK (1u << 20)

struct idx_header {
    uint8_t type;
    int ndims;
    uint32_t dims[DATASET_IDX_MAX_DIMS];
    size_t header_bytes, data_bytes;
};

static size_t type_size(uint8_t type)
{
    switch (type) {
    case DATASET_IDX_U8:
    case DATASET_IDX_I8:
        return 1;
    case DATASET_IDX_I16:
        return 2;
    case DATASET_IDX_I32:
    case DATASET_IDX_F32:
        return 4;
    case DATASET_IDX_F64:
        return 8;
    }
    return 0;
}

/* Checks the 4 magic bytes; on success h->ndims says how many dimension
 * words follow. */
static int header_magic(const char *path, const uint8_t *p, size_t avail, struct idx_header *h,
                        char *err, size_t errlen)
{
    if (avail < 4)
        return kern_fail(err, errlen, "dataset file %s: %zu bytes, too short for an IDX header",
                         path, avail);
    if (p[0] != 0 || p[1] != 0 || !type_size(p[2]) || p[3] < 1 || p[3] > DATASET_IDX_MAX_DIMS)
        return kern_fail(
            err, errlen,
            "dataset file %s: bad IDX magic %02x %02x %02x %02x (expected 00 00, a type "
            "byte and 1..%d dimensions)",
            path, p[0], p[1], p[2], p[3], DATASET_IDX_MAX_DIMS);
    h->type = p[2];
    h->ndims = p[3];
    h->header_bytes = 4 + 4 * (size_t)h->ndims;
    return 0;
}

static int header_dims(const char *path, const uint8_t *p, size_t avail, struct idx_header *h,
                       char *err, size_t errlen)
{
    if (avail < h->header_bytes)
        return kern_fail(err, errlen, "dataset file %s: truncated in the IDX header", path);
    size_t bytes = type_size(h->type);
    for (int i = 0; i < h->ndims; i++) {
        const uint8_t *d = p + 4 + 4 * i;
        h->dims[i] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        if (h->dims[i] != 0 && bytes > IDX_MAX_DATA_BYTES / h->dims[i])
            return kern_fail(err, errlen,
                             "dataset file %s: IDX dimensions describe over %llu bytes", path,
                             IDX_MAX_DATA_BYTES);
        bytes *= h->dims[i];
    }
    h->data_bytes = bytes;
    return 0;
}

static int header_parse(const char *path, const uint8_t *p, size_t avail, struct idx_header *h,
                        char *err, size_t errlen)
{
    if (header_magic(path, p, avail, h, err, errlen) < 0) return -1;
    return header_dims(path, p, avail, h, err, errlen);
}

/* Maps fd and validates it as a complete IDX file. */
static int map_validated(const char *path, int fd, struct dataset_idx *idx, char *err,
                         size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return kern_fail(err, errlen, "dataset file %s: %s", path, strerror(errno));
    size_t len = (size_t)st.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    if (map == MAP_FAILED)
        return kern_fail(err, errlen, "dataset file %s: mmap: %s", path, strerror(errno));
    struct idx_header h;
    int rc = header_parse(path, map, len, &h, err, errlen);
    if (rc == 0 && len < h.header_bytes + h.data_bytes)
        rc = kern_fail(err, errlen,
                       "dataset file %s: truncated: the header promises %zu data bytes, "
                       "the file holds %zu",
                       path, h.data_bytes, len - h.header_bytes);
    if (rc == 0 && len > h.header_bytes + h.data_bytes)
        rc = kern_fail(err, errlen, "dataset file %s: %zu bytes after the IDX data", path,
                       len - h.header_bytes - h.data_bytes);
    if (rc < 0) {
        if (map) munmap(map, len);
        return -1;
    }
    *idx = (struct dataset_idx){.map = map,
                                .map_len = len,
                                .data = (uint8_t *)map + h.header_bytes,
                                .type = h.type,
                                .ndims = h.ndims,
                                .count = h.dims[0],
                                .item = 1};
    for (int i = 0; i < h.ndims; i++) {
        idx->dims[i] = h.dims[i];
        idx->item *= i ? h.dims[i] : 1;
    }
    return 0;
}

static int map_path(const char *path, struct dataset_idx *idx, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kern_fail(err, errlen, "dataset file %s: %s", path, strerror(errno));
    int rc = map_validated(path, fd, idx, err, errlen);
    close(fd);
    return rc;
}

/* ---- the cache ---- */

static const char *cache_dir_of(const char *requested)
{
    if (requested && *requested) return requested;
    const char *env = getenv("HIERNET_CACHE");
    return env && *env ? env : DATASET_DEFAULT_CACHE;
}

/* mkdir -p; on failure errno still says why (strerror may change it). */
static int mkdir_parents(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return kern_fail(err, errlen, "dataset cache %s: path too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/') continue;
        char end = *p;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            int error = errno;
            kern_fail(err, errlen, "dataset cache %s: mkdir %s: %s", dir, path, strerror(error));
            errno = error;
            return -1;
        }
        if (!end) return 0;
        *p = '/';
    }
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* <dir>/<name without .gz>-<hash of real path, size, mtime>.idx */
static int cache_entry_path(const char *src, const struct stat *st, const char *dir, char *out,
                            size_t outlen, char *err, size_t errlen)
{
    char real[4096];
    if (!realpath(src, real))
        return kern_fail(err, errlen, "dataset file %s: %s", src, strerror(errno));
    uint64_t h = fnv1a(0xcbf29ce484222325ull, real, strlen(real));
    h = fnv1a(h, &st->st_size, sizeof st->st_size);
    h = fnv1a(h, &st->st_mtim, sizeof st->st_mtim);
    const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    size_t stem = strlen(base);
    if (stem > 3 && strcmp(base + stem - 3, ".gz") == 0) stem -= 3;
    if (snprintf(out, outlen, "%s/%.*s-%016llx.idx", dir, (int)stem, base, (unsigned long long)h) >=
        (int)outlen)
        return kern_fail(err, errlen, "dataset cache %s: path too long", dir);
    return 0;
}

/* gzerror() prefixes its message with the name given to gzdopen ("<fd:6>:
 * "), which means nothing to a user; the caller names the file instead. */
static const char *gz_message(gzFile gz, int *zerr)
{
    const char *msg = gzerror(gz, zerr);
    const char *colon = msg[0] == '<' ? strstr(msg, ": ") : NULL;
    return colon ? colon + 2 : msg;
}

/* Reads exactly len bytes; 0 on success, else -1 with err naming the source:
 * a gzip error, or a clean end of data meaning truncation. */
static int gz_read_exact(gzFile gz, const char *path, void *buf, size_t len, size_t expected,
                         size_t *done, char *err, size_t errlen)
{
    while (len > 0) {
        int n = gzread(gz, buf, (unsigned)(len < IDX_COPY_CHUNK ? len : IDX_COPY_CHUNK));
        int zerr = Z_OK;
        const char *msg = gz_message(gz, &zerr);
        if (zerr == Z_BUF_ERROR)
            return kern_fail(err, errlen, "dataset file %s: truncated gzip data (%s)", path, msg);
        if (n < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))
            return kern_fail(err, errlen, "dataset file %s: corrupt gzip data (%s)", path, msg);
        if (n == 0)
            return kern_fail(err, errlen,
                             "dataset file %s: truncated: the IDX header promises %zu "
                             "bytes, the gzip stream holds %zu",
                             path, expected, *done);
        buf = (uint8_t *)buf + n;
        len -= (size_t)n;
        *done += (size_t)n;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len, const char *what, char *err,
                     size_t errlen)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return kern_fail(err, errlen, "dataset cache %s: write: %s", what, strerror(errno));
        buf = (const uint8_t *)buf + n;
        len -= (size_t)n;
    }
    return 0;
}

/* Streams the gzip file into out_fd, validating the IDX header, the length
 * and the gzip CRC (checked by zlib when the stream's end is read). */
static int gz_copy_idx(gzFile gz, const char *path, int out_fd, const char *tmp, uint8_t *buf,
                       char *err, size_t errlen)
{
    struct idx_header h;
    size_t done = 0;
    if (gz_read_exact(gz, path, buf, 4, 4, &done, err, errlen) < 0 ||
        header_magic(path, buf, 4, &h, err, errlen) < 0 ||
        gz_read_exact(gz, path, buf + 4, h.header_bytes - 4, h.header_bytes, &done, err, errlen) <
            0 ||
        header_dims(path, buf, h.header_bytes, &h, err, errlen) < 0 ||
        write_all(out_fd, buf, h.header_bytes, tmp, err, errlen) < 0)
        return -1;
    size_t total = h.header_bytes + h.data_bytes;
    while (done < total) {
        size_t want = total - done < IDX_COPY_CHUNK ? total - done : IDX_COPY_CHUNK;
        if (gz_read_exact(gz, path, buf, want, total, &done, err, errlen) < 0 ||
            write_all(out_fd, buf, want, tmp, err, errlen) < 0)
            return -1;
    }
    int extra = gzread(gz, buf, 1);
    int zerr = Z_OK;
    const char *msg = gz_message(gz, &zerr);
    if (zerr == Z_BUF_ERROR)
        return kern_fail(err, errlen, "dataset file %s: truncated gzip data (%s)", path, msg);
    if (extra < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))
        return kern_fail(err, errlen, "dataset file %s: corrupt gzip data (%s)", path, msg);
    if (extra > 0)
        return kern_fail(err, errlen, "dataset file %s: data continues after the %zu IDX bytes",
                         path, total);
    return 0;
}

static int decompress_file(const char *path, int src_fd, int out_fd, const char *tmp, char *err,
                           size_t errlen)
{
    int fd = dup(src_fd);
    gzFile gz = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    uint8_t *buf = malloc(IDX_COPY_CHUNK);
    int rc = -1;
    if (!gz || !buf) {
        if (fd >= 0 && !gz) close(fd);
        kern_fail(err, errlen, "dataset file %s: cannot start decompression", path);
    } else {
        gzbuffer(gz, 1u << 17);
        rc = gz_copy_idx(gz, path, out_fd, tmp, buf, err, errlen);
    }
    if (rc == 0 && fdatasync(out_fd) < 0)
        rc = kern_fail(err, errlen, "dataset cache %s: fsync: %s", tmp, strerror(errno));
    if (gz) gzclose(gz);
    free(buf);
    return rc;
}

/* The cache cannot be written by this process (a peer that gave up root,
 * a read-only or foreign directory): not an error, the file is then
 * decompressed into memory instead. */
static bool cache_unwritable(int error)
{
    return error == EACCES || error == EPERM || error == EROFS;
}

/* Decompresses into a temporary file beside `entry` and renames it into
 * place, so readers only ever see a complete entry. 1 when the directory
 * takes no file (cache_unwritable). */
static int cache_fill(const char *path, int src_fd, const char *dir, const char *entry, char *err,
                      size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir);
    int out = mkstemp(tmp);
    if (out < 0 && cache_unwritable(errno)) return 1;
    if (out < 0) return kern_fail(err, errlen, "dataset cache %s: %s", dir, strerror(errno));
    fchmod(out, 0644);
    int rc = decompress_file(path, src_fd, out, tmp, err, errlen);
    close(out);
    if (rc == 0 && rename(tmp, entry) < 0)
        rc = kern_fail(err, errlen, "dataset cache %s: rename: %s", entry, strerror(errno));
    if (rc < 0) unlink(tmp);
    return rc;
}

/* Maps the cache entry if it exists and is valid; returns 1 if mapped. */
static int cache_try(const char *entry, struct dataset_idx *idx)
{
    char ignored[8];
    if (access(entry, R_OK) < 0) return 0;
    return map_path(entry, idx, ignored, sizeof ignored) == 0;
}

/* Without a usable cache: decompressed into an anonymous file of this
 * process only (not shared with other peers, so each holds its own copy). */
static int decompress_to_memory(const char *path, int fd, struct dataset_idx *idx, char *err,
                                size_t errlen)
{
    int out = memfd_create("hiernet-dataset", MFD_CLOEXEC);
    if (out < 0) return kern_fail(err, errlen, "dataset file %s: memfd: %s", path, strerror(errno));
    int rc = decompress_file(path, fd, out, "(memory)", err, errlen);
    if (rc == 0) rc = map_validated(path, out, idx, err, errlen);
    close(out);
    return rc;
}

/* Fills the cache entry under the directory's lock and maps it: 0, -1, or
 * 1 when the cache cannot be written. */
static int cache_fill_locked(const char *path, int fd, const char *dir, const char *entry,
                             struct dataset_idx *idx, char *err, size_t errlen)
{
    if (mkdir_parents(dir, err, errlen) < 0) return cache_unwritable(errno) ? 1 : -1;
    /* The lock makes concurrent starters wait for the first one's entry
     * instead of each decompressing the same file. */
    int lock = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0 || flock(lock, LOCK_EX) < 0) {
        int error = errno;
        kern_fail(err, errlen, "dataset cache %s: lock: %s", dir, strerror(error));
        if (lock >= 0) close(lock);
        return cache_unwritable(error) ? 1 : -1;
    }
    int rc = 0;
    if (!cache_try(entry, idx)) {
        rc = cache_fill(path, fd, dir, entry, err, errlen);
        if (rc == 0) rc = map_path(entry, idx, err, errlen);
    }
    close(lock); /* releases the flock */
    return rc;
}

static int open_gzip(const char *path, int fd, const char *requested_dir, struct dataset_idx *idx,
                     char *err, size_t errlen)
{
    const char *dir = cache_dir_of(requested_dir);
    char entry[4200];
    struct stat st;
    if (fstat(fd, &st) < 0)
        return kern_fail(err, errlen, "dataset file %s: %s", path, strerror(errno));
    if (cache_entry_path(path, &st, dir, entry, sizeof entry, err, errlen) < 0) return -1;
    if (cache_try(entry, idx)) return 0;
    int rc = cache_fill_locked(path, fd, dir, entry, idx, err, errlen);
    if (rc != 1) return rc;
    if (err && errlen) err[0] = '\0'; /* an unwritable cache is no error */
    return decompress_to_memory(path, fd, idx, err, errlen);
}

int dataset_cache_grant(uid_t uid, gid_t gid, char *err, size_t errlen)
{
    const char *dir = cache_dir_of(NULL);
    struct stat st;
    bool existed = lstat(dir, &st) == 0;
    if (!existed && mkdir_parents(dir, err, errlen) < 0) return -1;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return kern_fail(err, errlen, "dataset cache %s: not a directory", dir);
    /* hiernet's own directory, or one made just now; never someone's else. */
    bool ours = !existed || (st.st_uid == 0 && strcmp(dir, DATASET_DEFAULT_CACHE) == 0);
    if (!ours || (st.st_uid == uid && st.st_gid == gid)) return 0;
    if (chown(dir, uid, gid) < 0)
        return kern_fail(err, errlen, "dataset cache %s: chown: %s", dir, strerror(errno));
    return 0;
}

int dataset_idx_open(const char *path, const char *cache_dir, struct dataset_idx *idx, char *err,
                     size_t errlen)
{
    memset(idx, 0, sizeof *idx);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kern_fail(err, errlen, "dataset file %s: %s", path, strerror(errno));
    uint8_t magic[2] = {0, 0};
    ssize_t n = pread(fd, magic, 2, 0);
    int rc;
    if (n < 0)
        rc = kern_fail(err, errlen, "dataset file %s: %s", path, strerror(errno));
    else if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b)
        rc = open_gzip(path, fd, cache_dir, idx, err, errlen);
    else
        rc = map_validated(path, fd, idx, err, errlen);
    close(fd);
    return rc;
}

void dataset_idx_close(struct dataset_idx *idx)
{
    if (idx->map) munmap(idx->map, idx->map_len);
    memset(idx, 0, sizeof *idx);
}
