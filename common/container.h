/* common/container.h: container_of, the one definition every module uses to
 * get from an embedded member (an ev watcher, a queue node) back to the
 * struct that holds it. Header only; no state. */
#pragma once

#include <stddef.h>

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif
