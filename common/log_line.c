/* log_line.c — log lines on stderr (see log_line.h). */
#include "common/log_line.h"

#include <stdio.h>

void log_line_write(const char *prefix, const char *text)
{
    /* stderr is unbuffered: one call is one write(), whole lines only. */
    fprintf(stderr, "%s: %s\n", prefix, text);
}

void log_line_vprintf(const char *prefix, const char *fmt, va_list ap)
{
    char line[LOG_LINE_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    log_line_write(prefix, line);
}
