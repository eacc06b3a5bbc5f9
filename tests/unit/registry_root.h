/* registry_root.h — a private run registry for a unit test: a temporary
 * root made and named through REGISTRY_ENV_ROOT (controller/registry.h),
 * and removed with whatever the test left in it. */
#pragma once

#include "controller/registry.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Makes root (a buffer of len bytes) from template and points the registry
 * there; false when the directory cannot be made. */
static inline bool registry_root_make(char *root, size_t len, const char *template)
{
    snprintf(root, len, "%s", template);
    if (!mkdtemp(root)) return false;
    setenv(REGISTRY_ENV_ROOT, root, 1);
    return true;
}

static inline void registry_root_remove(const char *root)
{
    char err[256], path[512];
    DIR *dir = opendir(root);
    struct dirent *d;
    while (dir && (d = readdir(dir)) != NULL) {
        if (d->d_name[0] == '.' && (!d->d_name[1] || d->d_name[1] == '.')) continue;
        snprintf(path, sizeof path, "%s/%s", root, d->d_name);
        registry_dir_remove(path, err, sizeof err);
    }
    if (dir) closedir(dir);
    rmdir(root);
}
