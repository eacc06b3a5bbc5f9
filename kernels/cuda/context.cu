/* cuda/context.cu — the module's entry point (the ops table), device
 * discovery, contexts (stream + cuBLAS handle per GPU), memory, and the
 * error helpers the other .cu files use. Owns each context's stream, handle
 * and reduction scratch. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_internal.h"

#ifndef HIERNET_CUDA_ARCHITECTURES
#define HIERNET_CUDA_ARCHITECTURES "unknown"
#endif

int kern_cuda_fail(char *err, size_t errlen, const char *what, cudaError_t e)
{
    return kern_fail(err, errlen, "cuda %s: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

int kern_cuda_blas_fail(char *err, size_t errlen, const char *what, cublasStatus_t s)
{
    return kern_fail(err, errlen, "cublas %s: %s (%s)", what, cublasGetStatusString(s),
                     cublasGetStatusName(s));
}

int kern_cuda_enter(struct kern_cuda_ctx *c, char *err, size_t errlen)
{
    cudaError_t e = cudaSetDevice(c->ordinal);
    return e == cudaSuccess ? 0 : kern_cuda_fail(err, errlen, "set device", e);
}

int kern_cuda_launched(const char *what, char *err, size_t errlen)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : kern_cuda_fail(err, errlen, what, e);
}

int kern_cuda_finish(struct kern_cuda_ctx *c, const char *what, char *err, size_t errlen)
{
    if (kern_cuda_launched(what, err, errlen) < 0) return -1;
    cudaError_t e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? 0 : kern_cuda_fail(err, errlen, what, e);
}

/* ---- discovery ---- */

/* Without a driver the runtime says "CUDA driver version is insufficient",
 * which reads as if an upgrade would help; say what is actually missing. */
static const char *driver_hint(cudaError_t e)
{
    if (e != cudaErrorInsufficientDriver && e != cudaErrorNoDevice) return "";
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver) {
        dlclose(driver);
        return "";
    }
    return "; no NVIDIA driver is installed (libcuda.so.1 cannot be loaded)";
}

static int device_count(int *count, char *why, size_t whylen)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e == cudaSuccess) return 0;
    *count = 0;
    cudaGetLastError(); /* not sticky, but keep later calls clean */
    return kern_fail(why, whylen, "%s (%s)%s", cudaGetErrorString(e), cudaGetErrorName(e),
                     driver_hint(e));
}

/* ---- contexts ---- */

/* Launched once per context: proves the module has code this GPU can run
 * before any real work, so an unsupported architecture fails at start. */
__global__ void kern_probe(int *out)
{
    if (out) *out = 1;
}

static int check_image(int ordinal, char *err, size_t errlen)
{
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, kern_probe);
    if (e == cudaSuccess) return 0;
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal);
    cudaGetLastError();
    return kern_fail(err, errlen,
                     "cuda: GPU %d (sm_%d%d) cannot run this build's kernels (built for "
                     "CUDA architectures %s; rebuild with -DCMAKE_CUDA_ARCHITECTURES=%d%d): "
                     "%s",
                     ordinal, major, minor, HIERNET_CUDA_ARCHITECTURES, major, minor,
                     cudaGetErrorString(e));
}

static void describe_device(int ordinal, char *out, size_t outlen)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
        cudaGetLastError();
        snprintf(out, outlen, "cuda:%d", ordinal);
        return;
    }
    snprintf(out, outlen, "cuda:%d %s (sm_%d%d, %zu MiB)", ordinal, prop.name, prop.major,
             prop.minor, prop.totalGlobalMem >> 20);
}

static void ctx_destroy(struct kern_cuda_ctx *c)
{
    if (!c) return;
    cudaSetDevice(c->ordinal);
    if (c->blas) cublasDestroy(c->blas);
    if (c->reduce) cudaFree(c->reduce);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError();
    free(c);
}

static int ctx_setup(struct kern_cuda_ctx *c, char *err, size_t errlen)
{
    cudaError_t e;
    cublasStatus_t s;
    if (kern_cuda_enter(c, err, errlen) < 0 || check_image(c->ordinal, err, errlen) < 0) return -1;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return kern_cuda_fail(err, errlen, "create stream", e);
    if ((e = cudaMalloc(&c->reduce, (KERN_CUDA_REDUCE_BLOCKS + 1) * sizeof(double))) != cudaSuccess)
        return kern_cuda_fail(err, errlen, "allocate reduction scratch", e);
    if ((s = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS)
        return kern_cuda_blas_fail(err, errlen, "create handle", s);
    /* Full fp32 GEMMs: TF32 would make cuda gradients differ from cpu ones
     * by ~1e-3, visibly changing training curves between devices. */
    if ((s = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        return kern_cuda_blas_fail(err, errlen, "configure handle", s);
    return 0;
}

static int ctx_create(int ordinal, struct kern_cuda_ctx **out, char *describe, size_t describelen,
                      char *err, size_t errlen)
{
    *out = NULL;
    struct kern_cuda_ctx *c = (struct kern_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return kern_fail(err, errlen, "cuda: out of memory");
    c->ordinal = ordinal;
    /* Waiting threads sleep instead of spinning: a peer's cpu_ms must not
     * fill up with busy-waiting on the GPU. The flag can only be given as
     * the device's primary context starts (cudaSetDevice starts it since
     * CUDA 12); if another context already started it, it keeps its flags. */
#if CUDART_VERSION >= 12000
    cudaInitDevice(ordinal, cudaDeviceScheduleBlockingSync, 0);
#else
    if (cudaSetDevice(ordinal) == cudaSuccess) cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
#endif
    cudaGetLastError();
    if (ctx_setup(c, err, errlen) < 0) {
        ctx_destroy(c);
        return -1;
    }
    describe_device(ordinal, describe, describelen);
    *out = c;
    return 0;
}

/* ---- memory ---- */

static int mem_alloc(struct kern_cuda_ctx *c, size_t n, float **out, char *err, size_t errlen)
{
    *out = NULL;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    cudaError_t e = cudaMalloc((void **)out, (n ? n : 1) * sizeof(float));
    if (e == cudaSuccess) return 0;
    *out = NULL;
    cudaGetLastError();
    return kern_fail(err, errlen, "cuda: cannot allocate %zu floats (%zu MiB): %s", n,
                     (n * sizeof(float)) >> 20, cudaGetErrorString(e));
}

static void mem_free(struct kern_cuda_ctx *c, float *p)
{
    if (!p) return;
    cudaSetDevice(c->ordinal);
    cudaFree(p);
}

static int mem_copy(struct kern_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                    enum kern_cuda_copy kind, char *err, size_t errlen)
{
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    static const char *const names[] = {"copy to device", "copy to host", "copy on device"};
    if (bytes == 0) return 0;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kinds[kind], c->stream);
    if (e != cudaSuccess) return kern_cuda_fail(err, errlen, names[kind], e);
    return kern_cuda_finish(c, names[kind], err, errlen);
}

/* ---- the entry point ---- */

static const struct kern_cuda_ops ops = {
    KERN_CUDA_ABI,
    sizeof(struct kern_cuda_ops),
    HIERNET_CUDA_ARCHITECTURES,
    device_count,
    ctx_create,
    ctx_destroy,
    mem_alloc,
    mem_free,
    mem_copy,
    kern_cuda_fill,
    kern_cuda_axpy,
    kern_cuda_scale,
    kern_cuda_dot,
    kern_cuda_sgemm,
    kern_cuda_dense_create,
    kern_cuda_dense_destroy,
    kern_cuda_dense_reserve,
    kern_cuda_dense_run,
    kern_cuda_lenet_create,
    kern_cuda_lenet_destroy,
    kern_cuda_lenet_reserve,
    kern_cuda_lenet_run,
    kern_cuda_dense_forward_range,
    kern_cuda_dense_backward_range,
    kern_cuda_lenet_forward_range,
    kern_cuda_lenet_backward_range,
    kern_cuda_optim_step,
    kern_cuda_resnet_create,
    kern_cuda_resnet_destroy,
    kern_cuda_resnet_reserve,
    kern_cuda_resnet_run,
    kern_cuda_resnet_forward_range,
    kern_cuda_resnet_backward_range,
};

extern "C" __attribute__((visibility("default"))) const struct kern_cuda_ops *hiernet_cuda_ops(void)
{
    return &ops;
}
