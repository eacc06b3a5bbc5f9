/* check_lines.h — the C side of tests/lib/checks.sh's pass/fail: one line
 * per check, "ok: ..." or "FAIL: ...", for the netns drivers whose shell
 * script (or ctest) reads their output. Header only; check_failed is 1
 * once a check failed (the driver's exit status). */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static int check_failed;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s", ok ? "ok: " : "FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    if (!ok) check_failed = 1;
}
