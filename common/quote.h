/* common/quote.h: a user's value made safe to quote in a one-line error.
 *
 * Error messages quote the value at fault; a value may hold newlines or
 * control characters (a node name "a\nb"), which would break the message
 * over lines or into the terminal. quote_printable copies it with every
 * unprintable byte as '?' and cuts it to the buffer with "...".
 * Header-only: topo/ and the controller both use it. */
#pragma once

#include <ctype.h>
#include <stddef.h>
#include <string.h>

/* Writes the printable quote of text into buf (buflen >= 4); returns buf. */
static inline const char *quote_printable(const char *text, char *buf, size_t buflen)
{
    size_t i = 0;
    for (; text && text[i] && i + 4 < buflen; i++)
        buf[i] = isprint((unsigned char)text[i]) ? text[i] : '?';
    if (text && text[i]) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}
