/* kern_error.c — the kernels library's error messages (see kern_error.h). */
#include "kernels/kern_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

/* errno survives: a caller may still tell causes apart after the message. */
int kern_fail(char *err, size_t errlen, const char *fmt, ...)
{
    int saved = errno;
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    errno = saved;
    return -1;
}
