/* test_common.c — common/'s shared pieces: the intrusive FIFO (fifo.h)
 * keeps order through interleaved pushes and pops and empties cleanly; the
 * growable buffer (growbuf.h) keeps every byte across growth from fixed
 * storage and from nothing, stops for good once failed, and frees back to
 * its fixed storage; the log writer (log_line.h) writes exactly
 * "prefix: message\n" in one line, cut to LOG_LINE_MAX - 1 bytes. */
#include "common/container.h"
#include "common/fifo.h"
#include "common/growbuf.h"
#include "common/log_line.h"
#include "tests/unit/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct item {
    int value;
    struct fifo_link link;
};

static int pop_value(struct fifo *q)
{
    struct fifo_link *l = fifo_pop(q);
    return l ? container_of(l, struct item, link)->value : -1;
}

static void test_fifo(void)
{
    struct fifo q = {0};
    struct item items[5];
    for (int i = 0; i < 5; i++)
        items[i].value = i;
    CHECK(fifo_empty(&q) && !fifo_first(&q) && !fifo_pop(&q));
    fifo_push(&q, &items[0].link);
    fifo_push(&q, &items[1].link);
    CHECK(fifo_first(&q) == &items[0].link);
    CHECK(pop_value(&q) == 0);
    fifo_push(&q, &items[2].link);
    CHECK(pop_value(&q) == 1 && pop_value(&q) == 2);
    CHECK(fifo_empty(&q) && q.tail == NULL);
    /* An item popped can be queued again, behind the others. */
    fifo_push(&q, &items[3].link);
    fifo_push(&q, &items[0].link);
    fifo_push(&q, &items[4].link);
    CHECK(pop_value(&q) == 3 && pop_value(&q) == 0 && pop_value(&q) == 4 && pop_value(&q) == -1);
}

/* Appends 0, 1, 2, ... (mod 251) up to n bytes in pieces of `step`. */
static void fill(struct growbuf *b, size_t n, size_t step)
{
    unsigned char piece[97];
    for (size_t at = 0; at < n; at += step) {
        size_t k = n - at < step ? n - at : step;
        for (size_t i = 0; i < k; i++)
            piece[i] = (unsigned char)((at + i) % 251);
        CHECK(growbuf_append(b, piece, k));
    }
}

static bool holds_fill(const struct growbuf *b, size_t n)
{
    if (b->len != n) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)b->data[i] != i % 251) return false;
    return true;
}

static void test_growbuf(void)
{
    char fixed[64];
    struct growbuf b;
    growbuf_init(&b, fixed, sizeof fixed);
    fill(&b, 60, 7);
    CHECK(b.data == fixed && holds_fill(&b, 60)); /* still in the fixed storage */
    b.len = 0;
    fill(&b, 20000, 97); /* grows out of it, several times */
    CHECK(b.data != fixed && b.cap >= 20000 && holds_fill(&b, 20000));
    growbuf_free(&b);
    CHECK(b.data == fixed && b.len == 0 && b.cap == sizeof fixed && !b.failed);

    struct growbuf z = {0}; /* zeroed: empty, nothing allocated */
    CHECK(growbuf_append(&z, NULL, 0) && z.data == NULL);
    CHECK(growbuf_write(&z, "abc", 3) == 0 && z.len == 3 && memcmp(z.data, "abc", 3) == 0);
    z.failed = true; /* as after a failed allocation: nothing more goes in */
    CHECK(!growbuf_append(&z, "d", 1) && growbuf_write(&z, "d", 1) == -1 && z.len == 3);
    growbuf_free(&z);
    CHECK(z.data == NULL && z.len == 0 && z.cap == 0 && !z.failed);
}

static void log_printf(const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line_vprintf(prefix, fmt, ap);
    va_end(ap);
}

/* What the writers put on stderr, read back from a temporary file. */
static void test_log_line(void)
{
    char path[] = "/tmp/hn-test-common-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    unlink(path);
    int saved = dup(STDERR_FILENO);
    CHECK(saved >= 0 && dup2(fd, STDERR_FILENO) == STDERR_FILENO);
    char *long_msg = malloc(LOG_LINE_MAX + 100);
    CHECK(long_msg != NULL);
    if (!long_msg) return;
    memset(long_msg, 'x', LOG_LINE_MAX + 99);
    long_msg[LOG_LINE_MAX + 99] = '\0';
    log_line_write("hiernet", "plain");
    log_printf("hiernet-peer[t1]", "%d of %s", 3, "four");
    log_printf("p", "%s", long_msg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *want = malloc(2 * LOG_LINE_MAX);
    char *got = calloc(1, 3 * LOG_LINE_MAX);
    CHECK(want && got);
    if (want && got) {
        int n =
            snprintf(want, 2 * LOG_LINE_MAX, "hiernet: plain\nhiernet-peer[t1]: 3 of four\np: ");
        memset(want + n, 'x', LOG_LINE_MAX - 1);
        strcpy(want + n + LOG_LINE_MAX - 1, "\n");
        ssize_t r = pread(fd, got, 3 * LOG_LINE_MAX - 1, 0);
        CHECK_MSG(r == (ssize_t)strlen(want), "read %zd bytes, want %zu", r, strlen(want));
        CHECK(strcmp(got, want) == 0);
    }
    free(want);
    free(got);
    free(long_msg);
    close(fd);
}

int main(void)
{
    test_fifo();
    test_growbuf();
    test_log_line();
    return check_report();
}
