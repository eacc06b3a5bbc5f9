/* kern_error.h — the one error convention of the kernels library: functions
 * return -1 and leave a one-line message in a caller-supplied buffer. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" { /* the CUDA module (.cu, compiled as C++) uses it too */
#endif

/* Formats the message into err (when err is non-NULL) and returns -1. */
int kern_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
