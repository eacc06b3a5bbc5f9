/* check.h — the tiny assertion kit of hiernet's C unit tests.
 *
 * CHECK(cond) records a failure with file:line and goes on; a test's main()
 * ends with `return check_report();`, which prints "N passed, N failed" and
 * returns non-zero when anything failed or when no check ran at all (a test
 * that asserted nothing proves nothing: a loop that never iterated, a case
 * left out by a condition). CHECK_SKIP(why) exits 77, which ctest counts as
 * skipped (SKIP_RETURN_CODE). */
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            check_passed++;                                                                        \
        } else {                                                                                   \
            check_failed++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (cond) {                                                                                \
            check_passed++;                                                                        \
        } else {                                                                                   \
            check_failed++;                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_STREQ(a, b) CHECK_MSG(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))
#define CHECK_NEAR(a, b, tol)                                                                      \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", (double)(a),      \
              (double)(b), (double)(tol))
#define CHECK_CONTAINS(hay, needle)                                                                \
    CHECK_MSG(strstr((hay), (needle)) != NULL, "\"%s\" lacks \"%s\"", (hay), (needle))

#define CHECK_SKIP(why)                                                                            \
    do {                                                                                           \
        printf("SKIP: %s\n", (why));                                                               \
        exit(77);                                                                                  \
    } while (0)

/* The path of a program the build made (HIERNET_BIN_DIR/name, set by
 * ctest) into buf, or the test is skipped saying why. */
static inline void check_bin_path(const char *name, char *buf, size_t cap)
{
    const char *dir = getenv("HIERNET_BIN_DIR");
    if (!dir) CHECK_SKIP("HIERNET_BIN_DIR is not set (run through ctest)");
    snprintf(buf, cap, "%s/%s", dir, name);
    if (access(buf, X_OK) != 0) {
        printf("SKIP: %s is not built\n", buf);
        exit(77);
    }
}

static inline int check_report(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    if (check_passed + check_failed == 0) {
        fprintf(stderr, "no check ran: a test must assert something\n");
        return 1;
    }
    return check_failed ? 1 : 0;
}
