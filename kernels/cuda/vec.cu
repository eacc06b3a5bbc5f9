/* cuda/vec.cu — vector operations on device buffers: fill, axpy, scale as
 * grid-stride kernels over size_t lengths (cuBLAS's level-1 calls take int
 * counts and accumulate dot products in float), and dot products in double
 * through a two-pass block reduction, matching kernels/cpu/vec.c. */
#include "kernels/cuda/cuda_internal.h"

__global__ void kern_fill_kernel(size_t n, float value, float *x)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = value;
}

/* x == y is allowed, hence no __restrict__. */
__global__ void kern_axpy_kernel(size_t n, float alpha, const float *x, float *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += alpha * x[i];
}

__global__ void kern_scale_kernel(size_t n, float alpha, float *x)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= alpha;
}

/* Sums a block's per-thread values in shared memory; thread 0 gets the total. */
__device__ double kern_block_sum(double v)
{
    __shared__ double part[KERN_CUDA_THREADS];
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    return part[0];
}

/* Pass 1: each block's share of sum x_i y_i into partial[blockIdx.x]. */
__global__ void kern_dot_kernel(size_t n, const float *x, const float *y, double *partial)
{
    double sum = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        sum += (double)x[i] * (double)y[i];
    double total = kern_block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/* Pass 2, one block: partial[0..count) into *out. */
__global__ void kern_sum_partials(const double *partial, unsigned count, double *out)
{
    double sum = 0;
    for (unsigned i = threadIdx.x; i < count; i += blockDim.x)
        sum += partial[i];
    double total = kern_block_sum(sum);
    if (threadIdx.x == 0) *out = total;
}

int kern_cuda_fill(struct kern_cuda_ctx *c, size_t n, float value, float *x, char *err,
                   size_t errlen)
{
    if (n == 0) return 0;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    kern_fill_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(n, value, x);
    return kern_cuda_finish(c, "fill", err, errlen);
}

int kern_cuda_axpy(struct kern_cuda_ctx *c, size_t n, float alpha, const float *x, float *y,
                   char *err, size_t errlen)
{
    if (n == 0) return 0;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    kern_axpy_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(n, alpha, x, y);
    return kern_cuda_finish(c, "axpy", err, errlen);
}

int kern_cuda_scale(struct kern_cuda_ctx *c, size_t n, float alpha, float *x, char *err,
                    size_t errlen)
{
    if (n == 0) return 0;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    kern_scale_kernel<<<kern_cuda_blocks(n), KERN_CUDA_THREADS, 0, c->stream>>>(n, alpha, x);
    return kern_cuda_finish(c, "scale", err, errlen);
}

int kern_cuda_dot(struct kern_cuda_ctx *c, size_t n, const float *x, const float *y, double *out,
                  char *err, size_t errlen)
{
    *out = 0;
    if (n == 0) return 0;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    unsigned blocks = kern_cuda_blocks(n);
    blocks = blocks > KERN_CUDA_REDUCE_BLOCKS ? KERN_CUDA_REDUCE_BLOCKS : blocks;
    double *total = c->reduce + KERN_CUDA_REDUCE_BLOCKS;
    kern_dot_kernel<<<blocks, KERN_CUDA_THREADS, 0, c->stream>>>(n, x, y, c->reduce);
    if (kern_cuda_launched("dot", err, errlen) < 0) return -1;
    kern_sum_partials<<<1, KERN_CUDA_THREADS, 0, c->stream>>>(c->reduce, blocks, total);
    if (kern_cuda_launched("dot", err, errlen) < 0) return -1;
    cudaError_t e = cudaMemcpyAsync(out, total, sizeof *out, cudaMemcpyDeviceToHost, c->stream);
    if (e != cudaSuccess) return kern_cuda_fail(err, errlen, "dot", e);
    return kern_cuda_finish(c, "dot", err, errlen);
}
