/* profile_sources.h — the built-in device profiles as text, compiled into
 * the binaries by cmake/embed_profiles.cmake from profiles/NAME.profile.
 * kernels/profile.c is the only reader. */
#pragma once

#include <stddef.h>

struct profile_source {
    const char *name; /* "rtx2080ti": the file name without .profile */
    const char *text;
    size_t len;
};

/* Sorted by name, ended by an entry whose name is NULL. */
extern const struct profile_source profile_sources[];
