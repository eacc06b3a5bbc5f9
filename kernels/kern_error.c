/* kern_error.c — the kernels library's error messages (see kern_error.h). */
#include "kernels/kern_error.h"

#include <stdarg.h>
#include <stdio.h>

int kern_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
