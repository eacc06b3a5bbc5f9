/* cuda/optim.cu — sgd, momentum, nesterov and adam updates on device
 * buffers, one grid-stride kernel per method over the element functions of
 * elementwise.h. The state arrays belong to the caller (kernels/cuda_backend.c
 * keeps them per optimizer); the method numbers are enum optim_method
 * (only the enum is used from optim.h: the module links no hiernet code). */
#include "kernels/cuda/cuda_internal.h"
#include "kernels/elementwise.h"
#include "kernels/optim.h"

__global__ void kern_sgd_kernel(size_t n, float *p, const float *g, float lr, float wd)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kern_sgd(&p[i], g[i], lr, wd);
}

__global__ void kern_momentum_kernel(size_t n, float *p, const float *g, float *v, float lr,
                                     float mu, float wd, int nesterov)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kern_momentum(&p[i], g[i], &v[i], lr, mu, wd, nesterov);
}

__global__ void kern_adam_kernel(size_t n, float *p, const float *g, float *m, float *s,
                                 struct kern_cuda_optim_step h)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kern_adam(&p[i], g[i], &m[i], &s[i], h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.c1,
                  h.c2);
}

int kern_cuda_optim_step(struct kern_cuda_ctx *c, const struct kern_cuda_optim_step *h,
                         float *params, const float *grad, float *first, float *second, size_t n,
                         char *err, size_t errlen)
{
    if (n == 0) return 0;
    if (kern_cuda_enter(c, err, errlen) < 0) return -1;
    unsigned blocks = kern_cuda_blocks(n);
    switch (h->method) {
    case OPTIM_SGD:
        kern_sgd_kernel<<<blocks, KERN_CUDA_THREADS, 0, c->stream>>>(n, params, grad, h->lr,
                                                                     h->weight_decay);
        break;
    case OPTIM_MOMENTUM:
    case OPTIM_NESTEROV:
        kern_momentum_kernel<<<blocks, KERN_CUDA_THREADS, 0, c->stream>>>(
            n, params, grad, first, h->lr, h->momentum, h->weight_decay,
            h->method == OPTIM_NESTEROV);
        break;
    case OPTIM_ADAM:
        kern_adam_kernel<<<blocks, KERN_CUDA_THREADS, 0, c->stream>>>(n, params, grad, first,
                                                                      second, *h);
        break;
    default:
        return kern_fail(err, errlen, "cuda optimizer: unknown method %d", h->method);
    }
    static const char *const names[] = {"sgd", "momentum", "nesterov", "adam"};
    return kern_cuda_finish(c, names[h->method], err, errlen);
}
