/* durable.h — files of a results directory that a crash can neither lose
 * nor tear.
 *
 * Three tools, one per kind of file:
 *
 *   - durable_create: a new file, created exclusively (O_EXCL) and without
 *     following symbolic links, mode 0644 whatever the umask allows beyond
 *     it: a symlink planted in a shared results directory can never make
 *     the controller write elsewhere, and nobody else may write the file.
 *   - durable_replace: a whole file replaced atomically (a uniquely named
 *     temp file beside it, written, fsync'd, renamed over the old one, the
 *     directory fsync'd): a reader, or the next run after a crash, sees the
 *     old or the new content, never half of one (run.json).
 *   - durable_sync_later: an append-only file (a CSV, log.txt) whose writes
 *     are already in the kernel (write(2) returned, so they survive the
 *     death of any process) is handed to a background thread that
 *     fdatasyncs it, so rows also reach the disk within milliseconds
 *     without the event loop waiting for the device. durable_sync_forget
 *     must be called before such an fd is closed.
 *
 * Owns the sync thread (started on first use, lives as long as the
 * process) and its list of dirty descriptors; the descriptors themselves
 * belong to the callers. */
#pragma once

#include <stddef.h>
#include <stdio.h>

/* Creates dir/name (O_CREAT | O_EXCL | O_NOFOLLOW, 0644) for writing;
 * append makes every write land at the end. Returns the fd, or -1 with
 * errno (EEXIST also for a symlink in the way). */
int durable_create(const char *dir, const char *name, int append);

/* Writes dir/name through fill(f, ctx) and replaces it atomically, as
 * described above. fill returns 0, or -1 to abandon the write (err then
 * holds what it said, or a generic message). Returns 0 or -1 with err. */
int durable_replace(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx), void *ctx,
                    char *err, size_t errlen);

/* durable_replace without the fsyncs: atomic against the death of any
 * process (the rename), not against a power loss. For files that describe
 * what a power loss ends anyway (the registry's processes and cgroups), so
 * that the event loop does not wait for the device. */
int durable_replace_unsynced(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx),
                             void *ctx, char *err, size_t errlen);

/* durable_replace for the event loop: the temp file written and renamed
 * over dir/name here, so that a reader and a crash of any process see the
 * new content whole at once; its fsync and the directory's on the sync
 * thread, milliseconds later, instead of here. Only a power loss inside
 * those milliseconds can find the rename on disk before the data (ext4's
 * default data=ordered with auto_da_alloc flushes a file that replaces
 * another by rename with the rename's commit). Returns 0 or -1 with err. */
int durable_replace_sync_later(const char *dir, const char *name, int (*fill)(FILE *f, void *ctx),
                               void *ctx, char *err, size_t errlen);

/* fd has new data: the sync thread fdatasyncs it soon. Cheap (a lock and a
 * signal); safe to call after every write. */
void durable_sync_later(int fd);

/* Stops syncing fd (waits while the thread is inside an fdatasync of it),
 * then fdatasyncs it once more on the caller's thread. Call before close. */
void durable_sync_forget(int fd);

/* After a crash: cuts a partial last line off every regular *.csv and
 * log.txt in dir. One write(2) per row is not atomic against SIGKILL when
 * the row crosses a page of the file (the kernel copies page by page and
 * stops between pages for a fatal signal), so the row being written at the
 * kill may be on file in part; it never returned to the writer, so it is
 * not part of the results. Returns how many files were cut. */
unsigned durable_trim_partial_lines(const char *dir);

/* Syncs the directory entry of a file just created in dir. */
void durable_sync_dir(const char *dir);
