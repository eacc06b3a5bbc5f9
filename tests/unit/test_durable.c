/* test_durable.c — crash-proof results files (controller/durable.h) and the
 * marking of a dead run's run.json (run_json_mark_crashed, controller/run.h):
 * exclusive creation that refuses planted links and ignores the umask,
 * atomic replacement that leaves no temp file (also when the writer gives
 * up), the loop's variant whose fsyncs the sync thread does, the sync
 * thread, and which run.json files a sweep may rewrite. */
#include "controller/durable.h"
#include "common/json_read.h"
#include "controller/run.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void write_text(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *name)
{
    static char buf[8192];
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

static int entries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static void test_create(void)
{
    char path[128], target[128];
    mode_t old = umask(0);
    int fd = durable_create(dir, "a.csv", 1);
    umask(old);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0644);
    CHECK(write(fd, "x\n", 2) == 2);
    durable_sync_later(fd);
    durable_sync_later(fd); /* twice: queued once */
    durable_sync_forget(fd);
    close(fd);
    CHECK(durable_create(dir, "a.csv", 1) < 0 && errno == EEXIST); /* never overwritten */
    snprintf(target, sizeof target, "%s/victim", dir);
    write_text("victim", "precious");
    snprintf(path, sizeof path, "%s/link.csv", dir);
    CHECK(symlink(target, path) == 0);
    CHECK(durable_create(dir, "link.csv", 1) < 0 && errno == EEXIST); /* a link is refused */
    CHECK_STREQ(read_text("victim"), "precious");
    unlink(path);
    unlink(target);
}

static int fill_hello(FILE *f, void *ctx)
{
    fputs(ctx, f);
    return 0;
}

static int fill_fail(FILE *f, void *ctx)
{
    fputs("half", f);
    return -1;
}

static void test_replace(void)
{
    char err[256];
    int before = entries();
    CHECK(durable_replace(dir, "r.json", fill_hello, "one", err, sizeof err) == 0);
    CHECK(durable_replace(dir, "r.json", fill_hello, "two", err, sizeof err) == 0);
    CHECK_STREQ(read_text("r.json"), "two");
    CHECK(durable_replace(dir, "r.json", fill_fail, NULL, err, sizeof err) < 0);
    CHECK_STREQ(read_text("r.json"), "two"); /* the old content stays */
    CHECK(entries() == before + 1);          /* and no temp file is left */
    CHECK(durable_replace("/nonexistent-dir", "r.json", fill_hello, "x", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "/nonexistent-dir");
    /* The unsynced variant keeps the same atomicity. */
    CHECK(durable_replace_unsynced(dir, "r.json", fill_hello, "three", err, sizeof err) == 0);
    CHECK_STREQ(read_text("r.json"), "three");
    CHECK(durable_replace_unsynced(dir, "r.json", fill_fail, NULL, err, sizeof err) < 0);
    CHECK_STREQ(read_text("r.json"), "three");
    CHECK(entries() == before + 1);
}

/* Open descriptors of this process. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* The loop's variant: the new content at once, the same atomicity, and the
 * descriptors it opened for the sync thread closed by it. */
static void test_replace_sync_later(void)
{
    char err[256];
    int before = entries(), fds = open_fds();
    for (int i = 0; i < 300; i++) { /* more than the thread's list holds at once */
        char text[16];
        snprintf(text, sizeof text, "v%d", i);
        CHECK(durable_replace_sync_later(dir, "s.json", fill_hello, text, err, sizeof err) == 0);
    }
    CHECK_STREQ(read_text("s.json"), "v299");
    CHECK(durable_replace_sync_later(dir, "s.json", fill_fail, NULL, err, sizeof err) < 0);
    CHECK_STREQ(read_text("s.json"), "v299");
    CHECK(entries() == before + 1);
    for (int i = 0; i < 500 && open_fds() != fds; i++)
        usleep(10000);
    CHECK(open_fds() == fds);
}

static const char *status_of(const char *name)
{
    static char status[32];
    char err[128], *text = read_text(name);
    struct json_value *root = json_read(text, strlen(text), err, sizeof err);
    const struct json_value *s = root ? json_get(root, "status") : NULL;
    snprintf(status, sizeof status, "%s", s && s->type == JSON_STRING ? s->string : "?");
    json_free(root);
    return status;
}

static void test_mark_crashed(void)
{
    char err[256];
    write_text("run.json",
               "{\n  \"scenario\": \"s.lua\",\n  \"status\": \"running\",\n"
               "  \"start_time\": \"2024-05-01T12:00:00.000Z\",\n  \"end_time\": null,\n"
               "  \"params\": {\"lr\": 0.5, \"n\": 3, \"x\": -0.0},\n  \"error\": null,\n"
               "  \"pid\": 4242\n}\n");
    write_text("steps.csv", "a\n1\n2,3"); /* the row being written at the kill */
    write_text("log.txt", "one\n");
    CHECK(run_json_mark_crashed(dir, 4343, "test", err, sizeof err) == 0); /* another pid */
    CHECK_STREQ(read_text("steps.csv"), "a\n1\n2,3");                      /* not its run */
    CHECK_STREQ(status_of("run.json"), "running");
    CHECK(run_json_mark_crashed(dir, 4242, "test", err, sizeof err) == 1);
    CHECK_STREQ(status_of("run.json"), "crashed");
    CHECK_STREQ(read_text("steps.csv"), "a\n1\n"); /* whole rows only */
    CHECK_STREQ(read_text("log.txt"), "one\n");
    char *text = read_text("run.json");
    CHECK_CONTAINS(text, "\"params\": {\"lr\": 0.5, \"n\": 3, \"x\": -0.0}"); /* kept as read */
    CHECK_CONTAINS(text, "controller (pid 4242) ended without finishing the run");
    CHECK_CONTAINS(text, "marked by test");
    CHECK(!strstr(text, "\"end_time\": null"));
    CHECK(run_json_mark_crashed(dir, 4242, "test", err, sizeof err) == 0); /* only once */
    write_text("run.json", "{\"status\": \"running\", \"pid\": 4242, oops}");
    CHECK(run_json_mark_crashed(dir, 4242, "test", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "is no JSON");
    CHECK_CONTAINS(read_text("run.json"), "oops"); /* left as it is */
    unlink(strcat(strcpy((char[128]){0}, dir), "/run.json"));
    CHECK(run_json_mark_crashed(dir, 4242, "test", err, sizeof err) == 0); /* no run.json */
}

/* Partial last lines go; whole files, other names and a file of one
 * partial line (cut to empty) behave. */
static void test_trim(void)
{
    char sub[96];
    snprintf(sub, sizeof sub, "%s/trim", dir);
    CHECK(mkdir(sub, 0755) == 0);
    char big[6000];
    memset(big, 'x', sizeof big);
    big[4000] = '\n';
    big[sizeof big - 1] = '\0';
    const struct {
        const char *name, *text;
        size_t want;
    } cases[] = {
        {"a.csv", "h\n1,2\n3,", 6}, {"b.csv", "h\n", 2},           {"c.csv", "partial", 0},
        {"log.txt", big, 4001},     {"note.md", "no newline", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s", sub, cases[i].name);
        FILE *f = fopen(path, "w");
        fputs(cases[i].text, f);
        fclose(f);
    }
    CHECK(durable_trim_partial_lines(sub) == 3);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[160];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", sub, cases[i].name);
        CHECK(stat(path, &st) == 0 && (size_t)st.st_size == cases[i].want);
    }
    CHECK(durable_trim_partial_lines(sub) == 0); /* once */
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hiernet-test-durable-XXXXXX");
    if (!mkdtemp(dir)) CHECK_SKIP("cannot make a temporary directory");
    test_create();
    test_replace();
    test_replace_sync_later();
    test_mark_crashed();
    test_trim();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return check_report();
}
