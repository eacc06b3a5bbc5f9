/* durable.c — crash-proof results files (see durable.h). */
#include "controller/durable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DURABLE_MODE 0644
#define DURABLE_DIRTY_MAX 256 /* files queued at once; beyond, a file waits for its close */

int durable_create(const char *dir, const char *name, int append)
{
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : 0);
    int fd = open(path, flags, DURABLE_MODE);
    /* The umask may only take permissions away; never add group or other
     * write access either (a umask of 0 would give 0644 already). */
    if (fd >= 0) fchmod(fd, DURABLE_MODE & ~(mode_t)022);
    return fd;
}

void durable_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

/* ---- atomic replacement ---- */

/* A temp file beside dir/name, made by mkostemp: unique, exclusive. */
static FILE *durable_temp(const char *dir, const char *name, char *tmp, size_t tmplen)
{
    if (snprintf(tmp, tmplen, "%s/.%s.XXXXXX", dir, name) >= (int)tmplen) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return NULL;
    fchmod(fd, DURABLE_MODE & ~(mode_t)022);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved;
    }
    return f;
}

static int replace_file(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx),
                        void *ctx, bool sync, char *err, size_t errlen)
{
    char tmp[4200], path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = durable_temp(dir, name, tmp, sizeof tmp);
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    err[0] = '\0';
    int rc = fill(f, ctx);
    if (rc == 0 && (fflush(f) != 0 || ferror(f) || (sync && fsync(fileno(f)) != 0))) rc = -1;
    int saved = errno;
    if (fclose(f) != 0 && rc == 0) rc = -1, saved = errno;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1, saved = errno;
    if (rc < 0) {
        if (!err[0]) snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
        unlink(tmp);
        return -1;
    }
    if (sync) durable_sync_dir(dir); /* the rename itself */
    return 0;
}

int durable_replace(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx), void *ctx,
                    char *err, size_t errlen)
{
    return replace_file(dir, name, fill, ctx, true, err, errlen);
}

int durable_replace_unsynced(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx),
                             void *ctx, char *err, size_t errlen)
{
    return replace_file(dir, name, fill, ctx, false, err, errlen);
}

/* ---- the sync thread ---- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* dirty fds arrived */
    pthread_cond_t idle; /* an fdatasync ended */
    int dirty[DURABLE_DIRTY_MAX];
    bool owned[DURABLE_DIRTY_MAX]; /* the thread closes it after its sync */
    size_t n_dirty;
    int syncing; /* the fd inside fdatasync now, or -1 */
    bool started, failed;
} syncer = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER,
            .idle = PTHREAD_COND_INITIALIZER,
            .syncing = -1};

static void *syncer_main(void *unused)
{
    pthread_mutex_lock(&syncer.lock);
    for (;;) {
        while (syncer.n_dirty == 0)
            pthread_cond_wait(&syncer.wake, &syncer.lock);
        int fd = syncer.dirty[0];
        bool owned = syncer.owned[0];
        --syncer.n_dirty;
        memmove(syncer.dirty, syncer.dirty + 1, syncer.n_dirty * sizeof *syncer.dirty);
        memmove(syncer.owned, syncer.owned + 1, syncer.n_dirty * sizeof *syncer.owned);
        syncer.syncing = fd;
        pthread_mutex_unlock(&syncer.lock);
        fdatasync(fd); /* one call covers every row written before it */
        if (owned) close(fd);
        pthread_mutex_lock(&syncer.lock);
        syncer.syncing = -1;
        pthread_cond_broadcast(&syncer.idle);
    }
    return NULL;
}

/* Starts the thread on first use, with every signal blocked: signals are
 * the event loop's. */
static bool syncer_start_locked(void)
{
    if (syncer.started || syncer.failed) return syncer.started;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    syncer.started = pthread_create(&thread, &attr, syncer_main, NULL) == 0;
    syncer.failed = !syncer.started;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return syncer.started;
}

/* Queues fd for the thread (owned: it closes fd after the sync); false
 * when there is no thread or no room. */
static bool sync_queue(int fd, bool owned)
{
    pthread_mutex_lock(&syncer.lock);
    bool queued = false;
    for (size_t i = 0; i < syncer.n_dirty && !queued && !owned; i++)
        queued = syncer.dirty[i] == fd;
    if (!queued && syncer_start_locked() && syncer.n_dirty < DURABLE_DIRTY_MAX) {
        syncer.owned[syncer.n_dirty] = owned;
        syncer.dirty[syncer.n_dirty++] = fd;
        pthread_cond_signal(&syncer.wake);
        queued = true;
    }
    pthread_mutex_unlock(&syncer.lock);
    return queued;
}

void durable_sync_later(int fd)
{
    if (fd < 0) return;
    /* No thread (or a full list): the kernel holds the data already; it
     * reaches the disk with the next sync, at the latest at close. */
    sync_queue(fd, false);
}

/* fd (opened for the purpose) synced and closed by the thread, or here
 * when it cannot be queued. */
static void sync_and_close_later(int fd)
{
    if (fd < 0 || sync_queue(fd, true)) return;
    fdatasync(fd);
    close(fd);
}

int durable_replace_sync_later(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx),
                               void *ctx, char *err, size_t errlen)
{
    if (replace_file(dir, name, fill, ctx, false, err, errlen) < 0) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sync_and_close_later(open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)); /* the new content */
    sync_and_close_later(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)); /* the rename */
    return 0;
}

void durable_sync_forget(int fd)
{
    if (fd < 0) return;
    pthread_mutex_lock(&syncer.lock);
    for (size_t i = 0; i < syncer.n_dirty; i++) {
        if (syncer.dirty[i] != fd) continue;
        memmove(syncer.dirty + i, syncer.dirty + i + 1,
                (syncer.n_dirty - i - 1) * sizeof *syncer.dirty);
        syncer.n_dirty--;
        break;
    }
    while (syncer.syncing == fd)
        pthread_cond_wait(&syncer.idle, &syncer.lock);
    pthread_mutex_unlock(&syncer.lock);
    fdatasync(fd);
}

/* ---- after a crash ---- */

/* Length of fd's content up to and with its last '\n' (0 when none). */
static off_t whole_lines_length(int fd, off_t size)
{
    char buf[4096];
    for (off_t end = size; end > 0;) {
        off_t start = end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
        ssize_t n = pread(fd, buf, (size_t)(end - start), start);
        if (n != end - start) return size; /* unreadable: leave it */
        for (ssize_t i = n - 1; i >= 0; i--)
            if (buf[i] == '\n') return start + i + 1;
        end = start;
    }
    return 0;
}

static bool trim_file(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char last;
    bool cut = false;
    if (fd < 0) return false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
        cut = ftruncate(fd, whole_lines_length(fd, st.st_size)) == 0 && fsync(fd) == 0;
    close(fd);
    return cut;
}

static bool is_results_text(const char *name)
{
    size_t n = strlen(name);
    return !strcmp(name, "log.txt") || (n > 4 && !strcmp(name + n - 4, ".csv"));
}

unsigned durable_trim_partial_lines(const char *dir)
{
    DIR *d = opendir(dir);
    unsigned cut = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && is_results_text(e->d_name))
            cut += trim_file(dirfd(d), e->d_name);
    if (d) closedir(d);
    return cut;
}
