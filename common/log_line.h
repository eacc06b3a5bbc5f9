/* common/log_line.h: the one writer of log lines on stderr, as
 * "PREFIX: message\n" in a single call, so that the lines of the many
 * processes and threads sharing a stderr (peers, hiernet-linkd, the
 * controller's threads) never mix. Used by the controller library's default
 * sink (controller/log.h), hiernet-linkd and the peer. No state. */
#pragma once

#include <stdarg.h>

/* Longer messages are cut to this many bytes less one. */
#define LOG_LINE_MAX 2048

/* Writes "prefix: text\n". */
void log_line_write(const char *prefix, const char *text);
/* Formats the message, then writes it as log_line_write. */
void log_line_vprintf(const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
