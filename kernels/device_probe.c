/* device_probe.c — the devices by name, whether this build has them and
 * whether they can run here (kernels/device.h), and the CUDA module loaded
 * with dlopen on first use (kern_cuda_module, kernels/backend.h): all that a
 * start-up check needs, without the kernels themselves, so the controller
 * checks a node's device without linking OpenBLAS.
 *
 * Owns the loaded CUDA module, which is never unloaded: the CUDA runtime
 * does not support being unloaded while the process lives. */
#include "kernels/device.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/kern_error.h"

/* ---- names ---- */

static const char *const device_names[] = {"cpu", "cuda"};

const char *kern_device_name(enum kern_device device)
{
    return (unsigned)device < 2 ? device_names[device] : "?";
}

int kern_device_parse(const char *name, enum kern_device *out, char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++) {
        if (name && strcmp(name, device_names[i]) == 0) {
            *out = (enum kern_device)i;
            return 0;
        }
    }
    return kern_fail(err, errlen, "device \"%s\" is unknown (cpu, cuda)", name ? name : "");
}

int kern_device_built(enum kern_device device)
{
#ifdef HIERNET_HAVE_CUDA
    return device == KERN_DEVICE_CPU || device == KERN_DEVICE_CUDA;
#else
    return device == KERN_DEVICE_CPU;
#endif
}

/* ---- the CUDA module ---- */

#ifdef HIERNET_HAVE_CUDA
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const struct kern_cuda_ops *cuda_ops;
static char cuda_load_error[768];

/* <directory of the running executable>/libhiernet_cuda.so */
static int module_beside_exe(char *out, size_t outlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    return snprintf(out, outlen, "%s/%s", exe, KERN_CUDA_MODULE_NAME) < (int)outlen ? 0 : -1;
}

/* Loads one module file and checks that it is this build's. */
static void module_open(const char *path)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        /* dlerror names a missing dependency (libcublas.so.13) without the module. */
        kern_fail(cuda_load_error, sizeof cuda_load_error, "cannot load the CUDA kernels (%s): %s",
                  path, dlerror());
        return;
    }
    kern_cuda_entry_fn entry = (kern_cuda_entry_fn)dlsym(handle, KERN_CUDA_ENTRY);
    const struct kern_cuda_ops *ops = entry ? entry() : NULL;
    if (!ops || ops->abi != KERN_CUDA_ABI || ops->size != sizeof *ops) {
        kern_fail(cuda_load_error, sizeof cuda_load_error,
                  "cannot load the CUDA kernels: %s is not this build's CUDA module "
                  "(interface %d, expected %d); rebuild or unset HIERNET_CUDA_MODULE",
                  path, ops ? ops->abi : -1, KERN_CUDA_ABI);
        dlclose(handle);
        return;
    }
    cuda_ops = ops;
}

static void module_load(void)
{
    const char *env = getenv("HIERNET_CUDA_MODULE");
    if (env && *env) {
        module_open(env);
        return;
    }
    char beside[PATH_MAX + 64];
    if (module_beside_exe(beside, sizeof beside) == 0 && access(beside, F_OK) == 0) {
        module_open(beside);
        return;
    }
    if (access(HIERNET_CUDA_MODULE_PATH, F_OK) == 0) {
        module_open(HIERNET_CUDA_MODULE_PATH);
        return;
    }
    kern_fail(cuda_load_error, sizeof cuda_load_error,
              "cannot load the CUDA kernels: %s is neither beside the executable nor at %s "
              "(set HIERNET_CUDA_MODULE to its path)",
              KERN_CUDA_MODULE_NAME, HIERNET_CUDA_MODULE_PATH);
}

const struct kern_cuda_ops *kern_cuda_module(char *why, size_t whylen)
{
    pthread_once(&cuda_once, module_load);
    if (!cuda_ops) kern_fail(why, whylen, "%s", cuda_load_error);
    return cuda_ops;
}
#else
const struct kern_cuda_ops *kern_cuda_module(char *why, size_t whylen)
{
    kern_fail(why, whylen, "this build has no CUDA support");
    return NULL;
}
#endif

int kern_device_available(enum kern_device device, char *why, size_t whylen)
{
    if (why && whylen) why[0] = '\0';
    if (device == KERN_DEVICE_CPU) return 1;
    if (device != KERN_DEVICE_CUDA) {
        kern_fail(why, whylen, "device %d is unknown", (int)device);
        return 0;
    }
#ifndef HIERNET_HAVE_CUDA
    kern_fail(why, whylen, "this build has no CUDA support");
    return 0;
#else
    const struct kern_cuda_ops *ops = kern_cuda_module(why, whylen);
    if (!ops) return 0;
    char reason[512];
    int count = 0;
    if (ops->device_count(&count, reason, sizeof reason) < 0) {
        kern_fail(why, whylen, "no CUDA device: %s", reason);
        return 0;
    }
    if (count < 1) {
        kern_fail(why, whylen, "no CUDA device: the CUDA runtime found none");
        return 0;
    }
    return 1;
#endif
}
