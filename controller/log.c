/* log.c — the controller library's message sink (see log.h). Owns only the
 * sink pointer. */
#include "controller/log.h"

#include "common/log_line.h"

#include <stdarg.h>
#include <stdio.h>

static ctl_log_sink log_sink;
static void *log_ctx;

void ctl_log_set(ctl_log_sink sink, void *ctx)
{
    log_sink = sink;
    log_ctx = ctx;
}

void ctl_log(const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (log_sink)
        log_sink(log_ctx, line);
    else
        log_line_write("hiernet", line);
}
