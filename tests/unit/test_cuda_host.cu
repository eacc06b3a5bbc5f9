/* test_cuda_host.cu — the CUDA module's arithmetic without a GPU.
 *
 * kernels/cuda/dense_pass.cuh (the sequence of GEMMs, transposes and leading
 * dimensions of the logreg / mlp passes) runs here with a host executor that
 * implements cuBLAS's column-major sgemm / sgemv semantics by the book and
 * calls the element functions of kernels/elementwise.h, which the
 * GPU kernels and kernels/cpu/ call too. Gradients, losses and hits must
 * match kernels/cpu/model.c, which checks what the element functions do not
 * share with it: the order of GEMMs, transposes and leading dimensions.
 * (The optimizer updates are the element functions alone, the same on both
 * devices; test_optim checks them against hand-computed steps.)
 * The same for cnn:lenet's passes (kernels/cuda/lenet_pass.cuh: im2col,
 * col2im, pooling with argmax, flattening, the dense tail), with a host
 * executor that loops over the element functions lenet.cu's kernels call,
 * and for cnn:resnet20's (kernels/cuda/resnet20_pass.cuh: strided
 * convolutions, batch norm in training and evaluation mode with the batch
 * statistics in the gradient's tail, option-A residual adds, average
 * pooling), whose batch-norm channel functions run here as one lane and
 * as 4 threads sharing each channel (the GPU's blocks' scheme).
 * Layer ranges (the passes of split learning and pipelines): each model
 * is cut into 2 and 3 parts, each part on buffers of its own as on its own
 * GPU; the parts' outputs and input gradients must match model.c's
 * model_forward_range / model_backward_range (so CPU and CUDA parts can
 * feed each other), and the gradient the parts write must be the unsplit
 * pass's to the bit (same operations in the same order).
 * What this cannot see (kernel launch geometry, device memory) is
 * test_cuda.c's job on a machine with a GPU. Built only with CUDA. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/model.h"
#include "kernels/model_spec.h"
#include "kernels/rng.h"
}
#include "kernels/cuda/dense_pass.cuh"
#include "kernels/elementwise.h"
#include "kernels/cuda/lenet_pass.cuh"
#include "kernels/cuda/resnet20_pass.cuh"
#include "tests/unit/check.h"

static struct rng rng;
static char err[256];

/* cuBLAS semantics on the host: column-major, op() per flag, beta == 0
 * does not read C. */
struct host_exec {
    int gemm_colmajor(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc)
    {
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int p = 0; p < k; p++) {
                    float av = ta ? a[p + (size_t)i * lda] : a[i + (size_t)p * lda];
                    float bv = tb ? b[j + (size_t)p * ldb] : b[p + (size_t)j * ldb];
                    s += (double)av * bv;
                }
                float *cij = &c[i + (size_t)j * ldc];
                *cij = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * *cij));
            }
        }
        return 0;
    }

    int gemv_colmajor(int ta, int m, int n, float alpha, const float *a, int lda, const float *x,
                      float beta, float *y)
    {
        int rows = ta ? n : m, inner = ta ? m : n;
        for (int r = 0; r < rows; r++) {
            double s = 0;
            for (int q = 0; q < inner; q++)
                s += (double)(ta ? a[q + (size_t)r * lda] : a[r + (size_t)q * lda]) * x[q];
            y[r] = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * y[r]));
        }
        return 0;
    }

    int bias_relu(float *y, int rows, int cols, const float *b, int relu)
    {
        for (size_t i = 0; i < (size_t)rows * cols; i++)
            y[i] = kern_bias_relu(y[i], b[i % (size_t)cols], relu);
        return 0;
    }

    int relu_mask(float *dy, const float *y, size_t n)
    {
        for (size_t i = 0; i < n; i++)
            dy[i] = kern_relu_mask(dy[i], y[i]);
        return 0;
    }

    int softmax(const float *z, const int32_t *labels, int batch, int classes, float *d,
                double *row_loss, int *row_hit)
    {
        for (int r = 0; r < batch; r++)
            kern_softmax_xent_row(z + (size_t)r * classes, labels[r], classes, batch,
                                  d ? d + (size_t)r * classes : NULL, &row_loss[r], &row_hit[r]);
        return 0;
    }
};

/* conv_pass.cuh's operations: one loop iteration per GPU thread. */
struct host_conv_exec : host_exec {
    int im2col(const kern_conv_shape &s, const float *in, int batch, float *col)
    {
        size_t n = kern_conv_patch(s) * batch * kern_conv_plane(s);
        for (size_t t = 0; t < n; t++)
            col[t] = kern_im2col_value(s, in, batch, t);
        return 0;
    }

    int col2im(const kern_conv_shape &s, const float *col, int batch, float *dx)
    {
        size_t n = (size_t)s.in_c * batch * s.in_h * s.in_w;
        for (size_t t = 0; t < n; t++)
            dx[t] = kern_col2im_value(s, col, batch, t);
        return 0;
    }

    int bias_relu_planes(float *y, int channels, size_t plane, const float *b, int relu)
    {
        for (size_t i = 0; i < (size_t)channels * plane; i++)
            y[i] = kern_bias_relu(y[i], b[i / plane], relu);
        return 0;
    }
};

/* lenet_pass.cuh's extra operations. */
struct host_lenet_exec : host_conv_exec {
    int pool_forward(const kern_pool_shape &s, const float *x, int batch, float *y, uint8_t *argmax)
    {
        for (size_t o = 0; o < (size_t)s.channels * batch * s.out_h * s.out_w; o++)
            kern_pool_max(s, x, o, y, argmax);
        return 0;
    }

    int pool_backward(const kern_pool_shape &s, const float *dy, const float *y,
                      const uint8_t *argmax, int batch, int relu_below, float *dx)
    {
        for (size_t t = 0; t < (size_t)s.channels * batch * s.in_h * s.in_w; t++)
            dx[t] = kern_pool_grad(s, dy, y, argmax, relu_below, t);
        return 0;
    }

    int flatten(const float *x, int batch, int channels, size_t plane, float *y)
    {
        for (size_t t = 0; t < (size_t)batch * channels * plane; t++)
            y[t] = x[kern_flatten_source(batch, channels, plane, t)];
        return 0;
    }

    int unflatten(const float *dy, int batch, int channels, size_t plane, float *dx)
    {
        for (size_t t = 0; t < (size_t)batch * channels * plane; t++)
            dx[kern_flatten_source(batch, channels, plane, t)] = dy[t];
        return 0;
    }
};

/* resnet20_pass.cuh's extra operations; a batch norm's channel is one
 * lane, whose sums are the totals. */
struct host_resnet_exec : host_conv_exec {
    int bn_forward(const kern_bn_forward &a)
    {
        kern_one_lane sum;
        for (int c = 0; c < a.channels; c++)
            kern_bn_forward_channel(a, c, 0, 1, sum);
        return 0;
    }

    int bn_backward(const kern_bn_backward &a)
    {
        kern_one_lane sum;
        for (int c = 0; c < a.channels; c++)
            kern_bn_backward_channel(a, c, 0, 1, sum);
        return 0;
    }

    int bn_statistics(int channels, const float *mean, const float *var, double unbias, float *out)
    {
        for (int t = 0; t < 2 * channels; t++)
            out[t] = kern_bn_statistic(mean, var, channels, unbias, t);
        return 0;
    }

    int residual_forward(const kern_residual_shape &r, const float *x, const float *skip, int batch,
                         float *y)
    {
        for (size_t t = 0; t < (size_t)r.c * batch * r.h * r.w; t++)
            y[t] = kern_residual_value(r, x, skip, batch, t);
        return 0;
    }

    int residual_backward(const kern_residual_shape &r, const float *y, const float *dy, int batch,
                          float *dx, float *dskip)
    {
        for (size_t u = 0; u < (size_t)r.src_c * batch * r.src_h * r.src_w; u++)
            dskip[u] = kern_residual_skip_grad(r, y, dy, batch, u);
        for (size_t t = 0; dx && t < (size_t)r.c * batch * r.h * r.w; t++)
            dx[t] = kern_relu_mask(dy[t], y[t]);
        return 0;
    }

    int add(float *y, const float *x, size_t n)
    {
        for (size_t i = 0; i < n; i++)
            y[i] += x[i];
        return 0;
    }

    int avgpool_forward(const kern_avgpool_shape &p, const float *x, int batch, float *y)
    {
        for (size_t o = 0; o < (size_t)p.channels * batch; o++)
            y[o] = kern_avgpool_value(p, x, batch, o);
        return 0;
    }

    int avgpool_backward(const kern_avgpool_shape &p, const float *dy, int batch, float *dx)
    {
        for (size_t t = 0; t < (size_t)p.channels * batch * p.plane; t++)
            dx[t] = kern_avgpool_grad(p, dy, batch, t);
        return 0;
    }
};

/* The GPU's way through a batch norm, on threads: LANES workers share each
 * channel (every LANES-th value), and a sum is every worker's value
 * totalled behind a barrier, as resnet.cu's block sum does with
 * __syncthreads (other order of additions, so close to the one-lane
 * executor, not equal). Checks what one lane cannot: the strided loops,
 * the functor called by every lane, lane 0 alone writing the statistics. */
enum { LANES = 4 };

struct lane_sum {
    pthread_barrier_t *barrier;
    double *slots;
    int lane;
    double operator()(double v)
    {
        slots[lane] = v;
        pthread_barrier_wait(barrier);
        double total = 0;
        for (int i = 0; i < LANES; i++)
            total += slots[i];
        pthread_barrier_wait(barrier); /* slots is reused by the next sum */
        return total;
    }
};

template <class S>
static void bn_channel(const kern_bn_forward &a, int c, int lane, int lanes, S &sum)
{
    kern_bn_forward_channel(a, c, lane, lanes, sum);
}

template <class S>
static void bn_channel(const kern_bn_backward &a, int c, int lane, int lanes, S &sum)
{
    kern_bn_backward_channel(a, c, lane, lanes, sum);
}

template <class A> struct lane_job {
    const A *a;
    pthread_barrier_t *barrier;
    double *slots;
    int lane;
};

template <class A> static void *lane_main(void *arg)
{
    lane_job<A> *j = (lane_job<A> *)arg;
    lane_sum sum = {j->barrier, j->slots, j->lane};
    for (int c = 0; c < j->a->channels; c++)
        bn_channel(*j->a, c, j->lane, LANES, sum);
    return NULL;
}

template <class A> static int run_lanes(const A &a)
{
    pthread_barrier_t barrier;
    double slots[LANES];
    pthread_t threads[LANES];
    lane_job<A> jobs[LANES];
    pthread_barrier_init(&barrier, NULL, LANES);
    for (int i = 0; i < LANES; i++) {
        jobs[i] = lane_job<A>{&a, &barrier, slots, i};
        CHECK(pthread_create(&threads[i], NULL, lane_main<A>, &jobs[i]) == 0);
    }
    for (int i = 0; i < LANES; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    return 0;
}

struct host_lanes_exec : host_resnet_exec {
    int bn_forward(const kern_bn_forward &a)
    {
        return run_lanes(a);
    }
    int bn_backward(const kern_bn_backward &a)
    {
        return run_lanes(a);
    }
};

static float *random_floats(size_t n, float lo, float hi)
{
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * rng_uniform_float(&rng);
    return p;
}

static double scaled_error(const float *got, const float *want, size_t n)
{
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        worst = d > worst ? d : worst;
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    }
    return worst / scale;
}

/* The row-major to column-major swap, every transpose, padded strides. */
static void test_gemm_mapping(void)
{
    const int m = 7, n = 5, k = 6, pad = 2;
    host_exec e;
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
            size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb;
            size_t nc = (size_t)m * ldc;
            float *a = random_floats(na, -1, 1), *b = random_floats(nb, -1, 1);
            float *c = random_floats(nc, -1, 1), *want = (float *)malloc(nc * sizeof(float));
            memcpy(want, c, nc * sizeof(float));
            kern_gemm_rowmajor(e, ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, c, ldc);
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, want,
                        ldc);
            double e_ = scaled_error(c, want, nc);
            CHECK_MSG(e_ < 1e-6, "ta=%d tb=%d: scaled error %g", ta, tb, e_);
            free(a);
            free(b);
            free(c);
            free(want);
        }
    }
}

struct host_buffers {
    kern_dense_buffers b;
    void *blocks[4 * MODEL_MAX_LAYERS + 16]; /* resnet: activations, 3 per batch norm, the rest */
    int count;
};

static void *host_alloc(host_buffers *h, size_t bytes)
{
    if (h->count == (int)(sizeof h->blocks / sizeof h->blocks[0])) abort(); /* the test's bug */
    return h->blocks[h->count++] = calloc(1, bytes ? bytes : 1);
}

static void buffers_create(host_buffers *h, const kern_dense_layout &l, int cap)
{
    h->count = 0;
    h->b.x = (float *)host_alloc(h, (size_t)cap * l.inputs * sizeof(float));
    h->b.labels = (int32_t *)host_alloc(h, (size_t)cap * sizeof(int32_t));
    for (int i = 0; i < l.count; i++)
        h->b.act[i] = (float *)host_alloc(h, (size_t)cap * l.out[i] * sizeof(float));
    for (int i = 0; i < 2; i++)
        h->b.delta[i] = (float *)host_alloc(h, (size_t)cap * l.widest * sizeof(float));
    h->b.ones = (float *)host_alloc(h, (size_t)cap * sizeof(float));
    for (int i = 0; i < cap; i++)
        h->b.ones[i] = 1.0f;
    h->b.row_loss = (double *)host_alloc(h, (size_t)cap * sizeof(double));
    h->b.row_hit = (int *)host_alloc(h, (size_t)cap * sizeof(int));
}

static void buffers_destroy(host_buffers *h)
{
    for (int i = 0; i < h->count; i++)
        free(h->blocks[i]);
}

static void test_dense(const char *spec, const int *sizes, int count, int batch)
{
    kern_dense_layout l;
    struct model *ref;
    CHECK(kern_dense_layout_build(sizes, count, &l) == 0);
    CHECK(model_create(spec, batch, &ref, err, sizeof err) == 0);
    CHECK(l.params == model_param_count(ref));
    CHECK(l.inputs == model_input_size(ref) && l.classes == model_classes(ref));

    float *params = (float *)malloc(l.params * sizeof(float));
    float *grad = (float *)malloc(l.params * sizeof(float));
    float *want = (float *)malloc(l.params * sizeof(float)), want_loss;
    CHECK(model_init(ref, params, NULL, 11, err, sizeof err) == 0);
    host_buffers h;
    buffers_create(&h, l, batch);
    for (size_t i = 0; i < (size_t)batch * l.inputs; i++)
        h.b.x[i] = rng_uniform_float(&rng);
    for (int i = 0; i < batch; i++)
        h.b.labels[i] = (int32_t)rng_below(&rng, (uint64_t)l.classes);

    host_exec e;
    CHECK(kern_dense_pass(e, l, h.b, params, batch, grad) == 0);
    CHECK(model_grad(ref, params, h.b.x, h.b.labels, batch, want, &want_loss, err, sizeof err) ==
          0);
    double loss = 0;
    for (int i = 0; i < batch; i++)
        loss += h.b.row_loss[i];
    CHECK_MSG(fabs(loss / batch - want_loss) < 1e-6 * fabs(want_loss), "%s: loss %g vs %g", spec,
              loss / batch, want_loss);
    double ge = scaled_error(grad, want, l.params);
    CHECK_MSG(ge < 1e-5, "%s batch %d: gradient scaled error %g", spec, batch, ge);

    /* Forward only (evaluation): hits as model_eval counts them. */
    struct model_score score = {};
    CHECK(kern_dense_pass(e, l, h.b, params, batch, (float *)NULL) == 0);
    CHECK(model_eval(ref, params, h.b.x, h.b.labels, (size_t)batch, &score, err, sizeof err) == 0);
    size_t hits = 0;
    for (int i = 0; i < batch; i++)
        hits += (size_t)h.b.row_hit[i];
    CHECK_MSG(hits == score.correct, "%s: %zu vs %zu hits", spec, hits, score.correct);

    buffers_destroy(&h);
    free(params);
    free(grad);
    free(want);
    model_destroy(ref);
}

/* Host buffers for a lenet pass of `cap` samples, NaN-poisoned so a read
 * of anything the pass did not write shows in the results. */
static void lenet_buffers_create(host_buffers *h, kern_lenet_buffers *b, const kern_lenet_layout &l,
                                 int cap)
{
    h->count = 0;
    kern_dense_buffers *d = &b->dense;
    size_t c = (size_t)cap;
    float **floats[] = {&b->x,      &b->conv[0],  &b->pool[0],  &b->conv[1], &b->pool[1],
                        &b->col,    &b->dinput,   &d->x,        &d->act[0],  &d->act[1],
                        &d->act[2], &d->delta[0], &d->delta[1], &d->ones};
    size_t sizes[] = {c * l.inputs,
                      c * l.conv[0].out_c * kern_conv_plane(l.conv[0]),
                      c * l.pool[0].channels * l.pool[0].out_h * l.pool[0].out_w,
                      c * l.conv[1].out_c * kern_conv_plane(l.conv[1]),
                      c * l.pool[1].channels * l.pool[1].out_h * l.pool[1].out_w,
                      c * l.col_per_sample,
                      c * l.delta_per_sample,
                      c * l.features,
                      c * l.dense.out[0],
                      c * l.dense.out[1],
                      c * l.dense.out[2],
                      c * l.delta_per_sample,
                      c * l.delta_per_sample,
                      c * l.pixels_per_sample};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *floats[i] = (float *)host_alloc(h, sizes[i] * sizeof(float));
        for (size_t j = 0; j < sizes[i]; j++)
            (*floats[i])[j] = i + 1 == sizeof sizes / sizeof sizes[0] ? 1.0f : NAN;
    }
    for (int i = 0; i < 2; i++)
        b->argmax[i] = (uint8_t *)host_alloc(h, sizes[2 * i + 2]);
    d->labels = (int32_t *)host_alloc(h, c * sizeof(int32_t));
    d->row_loss = (double *)host_alloc(h, c * sizeof(double));
    d->row_hit = (int *)host_alloc(h, c * sizeof(int));
}

/* lenet_pass.cuh against model.c: loss, every gradient element, hits. Some
 * images get ties in their pooling windows (flat regions), where the
 * routing rule matters. */
static void test_lenet(int batch)
{
    kern_lenet_layout l;
    kern_lenet_layout_build(&l);
    struct model *ref;
    CHECK(model_create("cnn:lenet", batch, &ref, err, sizeof err) == 0);
    CHECK(l.params == model_param_count(ref));
    CHECK(l.inputs == model_input_size(ref) && l.classes == model_classes(ref));
    CHECK(l.features == 400 && l.conv[1].out_h == 10 && l.pool[1].out_h == 5);

    float *params = (float *)malloc(l.params * sizeof(float));
    float *grad = (float *)malloc(l.params * sizeof(float));
    float *want = (float *)malloc(l.params * sizeof(float)), want_loss;
    CHECK(model_init(ref, params, NULL, 5, err, sizeof err) == 0);
    for (size_t i = 0; i < l.params; i++) /* non-zero biases, so they are tested */
        params[i] += 0.01f * (rng_uniform_float(&rng) - 0.5f);
    host_buffers h;
    kern_lenet_buffers b;
    lenet_buffers_create(&h, &b, l, batch);
    for (size_t i = 0; i < (size_t)batch * l.inputs; i++)
        b.x[i] = i % 784 < 200 ? 0.5f : rng_uniform_float(&rng);
    for (int i = 0; i < batch; i++)
        b.dense.labels[i] = (int32_t)rng_below(&rng, (uint64_t)l.classes);

    host_lenet_exec e;
    CHECK(kern_lenet_pass(e, l, b, params, batch, grad) == 0);
    CHECK(model_grad(ref, params, b.x, b.dense.labels, batch, want, &want_loss, err, sizeof err) ==
          0);
    double loss = 0;
    for (int i = 0; i < batch; i++)
        loss += b.dense.row_loss[i];
    CHECK_MSG(fabs(loss / batch - want_loss) < 1e-6 * fabs(want_loss), "lenet: loss %g vs %g",
              loss / batch, want_loss);
    double ge = scaled_error(grad, want, l.params);
    CHECK_MSG(ge < 1e-5, "lenet batch %d: gradient scaled error %g", batch, ge);
    /* Per layer too: a small layer's error would hide under the largest. */
    const size_t bounds[] = {
        0, l.conv[0].bias, l.conv[1].weight, l.conv[1].bias, l.dense.weight[0], l.params};
    for (int i = 0; i + 1 < 6; i++) {
        double le = scaled_error(grad + bounds[i], want + bounds[i], bounds[i + 1] - bounds[i]);
        CHECK_MSG(le < 1e-5, "lenet batch %d: parameters %zu..%zu scaled error %g", batch,
                  bounds[i], bounds[i + 1], le);
    }

    struct model_score score = {};
    CHECK(kern_lenet_pass(e, l, b, params, batch, (float *)NULL) == 0);
    CHECK(model_eval(ref, params, b.x, b.dense.labels, (size_t)batch, &score, err, sizeof err) ==
          0);
    size_t hits = 0;
    double eval_loss = 0;
    for (int i = 0; i < batch; i++) {
        hits += (size_t)b.dense.row_hit[i];
        eval_loss += b.dense.row_loss[i];
    }
    CHECK_MSG(hits == score.correct, "lenet: %zu vs %zu hits", hits, score.correct);
    CHECK_NEAR(eval_loss, score.loss_sum, 1e-6 * score.loss_sum);

    buffers_destroy(&h);
    free(params);
    free(grad);
    free(want);
    model_destroy(ref);
}

/* Host buffers for a resnet pass of `cap` samples, NaN-poisoned (all bits
 * set) like lenet's, but for the ones. */
static void resnet_buffers_create(host_buffers *h, kern_resnet_buffers *b,
                                  const struct model_spec &s, int cap)
{
    h->count = 0;
    kern_resnet_buffers_carve(s, (size_t)cap, b, [&](size_t bytes) {
        void *p = host_alloc(h, bytes);
        memset(p, 0xff, bytes);
        return p;
    });
    for (int i = 0; i < cap; i++)
        b->ones[i] = 1.0f;
}

/* model_init's parameters, moved off their defaults (gamma 1, beta 0,
 * running mean 0 and variance 1), so every term of batch norm counts. */
static float *resnet_params(const struct model *ref, uint64_t seed)
{
    size_t np = model_param_count(ref), nt = model_trainable_count(ref);
    float *params = (float *)malloc(np * sizeof(float));
    CHECK(model_init(ref, params, NULL, seed, err, sizeof err) == 0);
    const struct model_spec *s = model_layout(ref);
    for (size_t i = 0; i < nt; i++)
        params[i] += 0.05f * (rng_uniform_float(&rng) - 0.5f);
    for (int i = 0; i < s->layer_count; i++) {
        const struct model_layer &l = s->layers[i];
        for (int c = 0; l.kind == MODEL_LAYER_BATCHNORM && c < l.out_c; c++) {
            params[l.stat_offset + c] = 0.2f * (rng_uniform_float(&rng) - 0.5f);
            params[l.stat_offset + l.out_c + c] = 0.5f + rng_uniform_float(&rng);
        }
    }
    return params;
}

/* The scaled error of each row's parameters' gradient (conv, batch norm,
 * dense): a small layer's error would hide under the largest. */
static void check_rows(const struct model_spec &s, size_t trainable, const float *grad,
                       const float *want, int batch)
{
    for (int i = 0; i < s.layer_count; i++) {
        const struct model_layer &l = s.layers[i];
        if (l.kind != MODEL_LAYER_CONV && l.kind != MODEL_LAYER_BATCHNORM &&
            l.kind != MODEL_LAYER_DENSE)
            continue;
        size_t end = trainable;
        for (int j = i + 1; j < s.layer_count && end == trainable; j++)
            if (s.layers[j].kind == MODEL_LAYER_CONV || s.layers[j].kind == MODEL_LAYER_BATCHNORM ||
                s.layers[j].kind == MODEL_LAYER_DENSE)
                end = s.layers[j].weight_offset;
        double le =
            scaled_error(grad + l.weight_offset, want + l.weight_offset, end - l.weight_offset);
        CHECK_MSG(le < 1e-5, "resnet20 batch %d: row %d's gradient scaled error %g", batch, i + 1,
                  le);
    }
}

/* resnet20_pass.cuh against model.c: loss, every gradient element (the
 * batch statistics in its tail too), then evaluation with the running
 * statistics: hits and loss. */
static void test_resnet(int batch)
{
    struct model *ref;
    CHECK(model_create("cnn:resnet20", batch, &ref, err, sizeof err) == 0);
    const struct model_spec &s = *model_layout(ref);
    CHECK(kern_resnet_runs(s) && s.layer_count == 49);
    size_t np = model_param_count(ref), nt = model_trainable_count(ref);
    float *params = resnet_params(ref, 5), want_loss;
    float *grad = (float *)malloc(np * sizeof(float)), *want = (float *)malloc(np * sizeof(float));
    host_buffers h;
    kern_resnet_buffers b;
    resnet_buffers_create(&h, &b, s, batch);
    for (size_t i = 0; i < (size_t)batch * s.layers[0].in_size; i++)
        b.x[i] = rng_uniform_float(&rng);
    for (int i = 0; i < batch; i++)
        b.labels[i] = (int32_t)rng_below(&rng, 10);

    host_resnet_exec e;
    CHECK(kern_resnet_pass(e, s, b, params, batch, grad) == 0);
    CHECK(model_grad(ref, params, b.x, b.labels, batch, want, &want_loss, err, sizeof err) == 0);
    double loss = 0;
    for (int i = 0; i < batch; i++)
        loss += b.row_loss[i];
    CHECK_MSG(fabs(loss / batch - want_loss) < 1e-5 * fabs(want_loss), "resnet20: loss %g vs %g",
              loss / batch, want_loss);
    double ge = scaled_error(grad, want, nt), se = scaled_error(grad + nt, want + nt, np - nt);
    CHECK_MSG(ge < 1e-5, "resnet20 batch %d: gradient scaled error %g", batch, ge);
    CHECK_MSG(se < 1e-5, "resnet20 batch %d: batch statistics scaled error %g", batch, se);
    printf("resnet20 batch %d: gradient scaled error %.2g, batch statistics %.2g\n", batch, ge, se);
    check_rows(s, nt, grad, want, batch);

    /* The same pass with batch norm on LANES threads (the GPU's scheme). */
    host_lanes_exec lanes;
    float *lanes_grad = (float *)malloc(np * sizeof(float));
    CHECK(kern_resnet_pass(lanes, s, b, params, batch, lanes_grad) == 0);
    double le = scaled_error(lanes_grad, want, nt),
           lse = scaled_error(lanes_grad + nt, want + nt, np - nt);
    CHECK_MSG(le < 1e-5 && lse < 1e-5,
              "resnet20 batch %d on %d lanes: gradient scaled error %g, "
              "statistics %g",
              batch, LANES, le, lse);
    check_rows(s, nt, lanes_grad, want, batch);
    free(lanes_grad);

    struct model_score score = {};
    CHECK(kern_resnet_pass(lanes, s, b, params, batch, (float *)NULL) == 0);
    CHECK(model_eval(ref, params, b.x, b.labels, (size_t)batch, &score, err, sizeof err) == 0);
    size_t hits = 0;
    double eval_loss = 0;
    for (int i = 0; i < batch; i++) {
        hits += (size_t)b.row_hit[i];
        eval_loss += b.row_loss[i];
    }
    CHECK_MSG(hits == score.correct, "resnet20: %zu vs %zu hits", hits, score.correct);
    CHECK_NEAR(eval_loss, score.loss_sum, 1e-5 * score.loss_sum);

    buffers_destroy(&h);
    free(params);
    free(grad);
    free(want);
    model_destroy(ref);
}

/* ---- layer ranges ---- */

enum { SPLIT_MAX_PARTS = 3 };

/* One part's buffers of a dense stack, and the range calls on them. */
struct dense_part {
    const kern_dense_layout *l;
    host_buffers h;
    float *dx; /* d loss / d the part's input */
    void create(const kern_dense_layout &layout, int cap)
    {
        l = &layout;
        buffers_create(&h, layout, cap);
        dx = (float *)host_alloc(&h, (size_t)cap * layout.widest * sizeof(float));
    }
    void destroy()
    {
        buffers_destroy(&h);
    }
    float *input(int i)
    {
        return kern_dense_input(h.b, i);
    }
    float *dinput()
    {
        return dx;
    }
    float *output(int i)
    {
        return h.b.act[i];
    }
    float *delta()
    {
        return h.b.delta[0];
    }
    int32_t *labels()
    {
        return h.b.labels;
    }
    double *row_loss()
    {
        return h.b.row_loss;
    }
    int *row_hit()
    {
        return h.b.row_hit;
    }
    int forward(host_exec &e, const float *p, int first, int last, int batch)
    {
        return kern_dense_forward_range(e, *l, h.b, p, first, last, batch);
    }
    int backward(host_exec &e, const float *p, float *g, int first, int last, int batch)
    {
        return kern_dense_backward_range(e, *l, h.b, p, g, batch, first, last, first ? dx : NULL);
    }
    int pass(host_exec &e, const float *p, float *g, int batch)
    {
        return kern_dense_pass(e, *l, h.b, p, batch, g);
    }
};

struct lenet_part {
    const kern_lenet_layout *l;
    host_buffers h;
    kern_lenet_buffers b;
    void create(const kern_lenet_layout &layout, int cap)
    {
        l = &layout;
        lenet_buffers_create(&h, &b, layout, cap);
    }
    void destroy()
    {
        buffers_destroy(&h);
    }
    float *input(int i)
    {
        return kern_lenet_input(b, i);
    }
    float *dinput()
    {
        return b.dinput;
    }
    float *output(int i)
    {
        return kern_lenet_output(b, i);
    }
    float *delta()
    {
        return b.dense.delta[0];
    }
    int32_t *labels()
    {
        return b.dense.labels;
    }
    double *row_loss()
    {
        return b.dense.row_loss;
    }
    int *row_hit()
    {
        return b.dense.row_hit;
    }
    int forward(host_lenet_exec &e, const float *p, int first, int last, int batch)
    {
        return kern_lenet_forward_range(e, *l, b, p, first, last, batch);
    }
    int backward(host_lenet_exec &e, const float *p, float *g, int first, int last, int batch)
    {
        return kern_lenet_backward_range(e, *l, b, p, g, batch, first, last,
                                         first ? b.dinput : NULL);
    }
    int pass(host_lenet_exec &e, const float *p, float *g, int batch)
    {
        return kern_lenet_pass(e, *l, b, p, batch, g);
    }
};

struct resnet_part {
    const struct model_spec *l;
    host_buffers h;
    kern_resnet_buffers b;
    void create(const struct model_spec &layout, int cap)
    {
        l = &layout;
        resnet_buffers_create(&h, &b, layout, cap);
    }
    void destroy()
    {
        buffers_destroy(&h);
    }
    float *input(int i)
    {
        return kern_resnet_input(b, i);
    }
    float *dinput()
    {
        return b.dinput;
    }
    float *output(int i)
    {
        return b.act[i];
    }
    float *delta()
    {
        return b.delta[0];
    }
    int32_t *labels()
    {
        return b.labels;
    }
    double *row_loss()
    {
        return b.row_loss;
    }
    int *row_hit()
    {
        return b.row_hit;
    }
    int forward(host_resnet_exec &e, const float *p, int first, int last, int batch)
    {
        return kern_resnet_forward_range(e, *l, b, p, first, last, batch, 1);
    }
    int backward(host_resnet_exec &e, const float *p, float *g, int first, int last, int batch)
    {
        return kern_resnet_backward_range(e, *l, b, p, g, batch, first, last,
                                          first ? b.dinput : NULL);
    }
    int pass(host_resnet_exec &e, const float *p, float *g, int batch)
    {
        return kern_resnet_pass(e, *l, b, p, batch, g);
    }
};

/* A model's parts: starts[k] is part k's first row (starts[0] = 0), the
 * last part ends at the last row. */
struct split_case {
    const char *spec;
    int parts;
    int starts[SPLIT_MAX_PARTS];
};

/* The device parts (P: dense_part or lenet_part over executor E), each fed
 * by the one before it, against model.c's ranges fed the same way: every
 * cut's activation and input gradient to float tolerance, the gradient
 * against model.c's and, bit for bit, against the device's unsplit pass. */
template <class P, class E, class L>
static void check_split(const split_case &sc, const L &layout, E &e, const float *params, size_t np,
                        const float *x, const int32_t *labels, int batch)
{
    struct model *cpu[SPLIT_MAX_PARTS] = {};
    float *cpu_in[SPLIT_MAX_PARTS + 1]; /* part k's input on the CPU; [parts]: the logits */
    P part[SPLIT_MAX_PARTS], whole;
    int first[SPLIT_MAX_PARTS], last[SPLIT_MAX_PARTS], n = sc.parts;
    for (int k = 0; k < n; k++) {
        CHECK(model_create(sc.spec, batch, &cpu[k], err, sizeof err) == 0);
        part[k].create(layout, batch);
    }
    const struct model_spec *rows = model_layout(cpu[0]);
    for (int k = 0; k < n; k++) {
        first[k] = sc.starts[k];
        last[k] = k + 1 < n ? sc.starts[k + 1] - 1 : rows->layer_count - 1;
    }
    size_t in0 = (size_t)batch * rows->layers[0].in_size;
    cpu_in[0] = (float *)malloc(in0 * sizeof(float));
    memcpy(cpu_in[0], x, in0 * sizeof(float));
    memcpy(part[0].input(0), x, in0 * sizeof(float));
    for (int k = 0; k < n; k++) {
        size_t nout = (size_t)batch * rows->layers[last[k]].out_size;
        cpu_in[k + 1] = (float *)malloc(nout * sizeof(float));
        CHECK(part[k].forward(e, params, first[k], last[k], batch) == 0);
        CHECK(model_forward_range(cpu[k], params, first[k], last[k], cpu_in[k], batch,
                                  cpu_in[k + 1], err, sizeof err) == 0);
        double fe = scaled_error(part[k].output(last[k]), cpu_in[k + 1], nout);
        CHECK_MSG(fe < 1e-5, "%s part %d (rows %d-%d): output scaled error %g", sc.spec, k + 1,
                  first[k] + 1, last[k] + 1, fe);
        if (k + 1 < n) memcpy(part[k + 1].input(first[k + 1]), part[k].output(last[k]), nout * 4);
    }
    /* The loss on the last part, then backward from it. */
    P &tail = part[n - 1];
    int classes = (int)rows->layers[rows->layer_count - 1].out_size;
    size_t nlogits = (size_t)batch * classes;
    float *cpu_dy = (float *)malloc(nlogits * sizeof(float)), loss;
    float *grad = (float *)calloc(np, sizeof(float)), *cpu_grad = (float *)calloc(np, 4);
    float *full = (float *)calloc(np, sizeof(float));
    memcpy(tail.labels(), labels, (size_t)batch * sizeof(int32_t));
    CHECK(e.softmax(tail.output(last[n - 1]), tail.labels(), batch, classes, tail.delta(),
                    tail.row_loss(), tail.row_hit()) == 0);
    CHECK(model_loss(cpu[n - 1], cpu_in[n], labels, batch, cpu_dy, &loss, err, sizeof err) == 0);
    for (int k = n - 1; k >= 0; k--) {
        size_t nin = (size_t)batch * rows->layers[first[k]].in_size;
        float *cpu_dx = k ? (float *)malloc(nin * sizeof(float)) : NULL;
        CHECK(part[k].backward(e, params, grad, first[k], last[k], batch) == 0);
        CHECK(model_backward_range(cpu[k], params, first[k], last[k], cpu_in[k], cpu_dy, batch,
                                   cpu_dx, cpu_grad, err, sizeof err) == 0);
        free(cpu_dy);
        cpu_dy = cpu_dx;
        if (!k) break;
        double de = scaled_error(part[k].dinput(), cpu_dx, nin);
        CHECK_MSG(de < 1e-5, "%s part %d (rows %d-%d): input gradient scaled error %g", sc.spec,
                  k + 1, first[k] + 1, last[k] + 1, de);
        memcpy(part[k - 1].delta(), part[k].dinput(), nin * sizeof(float));
    }
    double ge = scaled_error(grad, cpu_grad, np);
    CHECK_MSG(ge < 1e-5, "%s in %d parts: gradient scaled error %g against model.c", sc.spec, n,
              ge);
    whole.create(layout, batch);
    memcpy(whole.input(0), x, in0 * sizeof(float));
    memcpy(whole.labels(), labels, (size_t)batch * sizeof(int32_t));
    CHECK(whole.pass(e, params, full, batch) == 0);
    CHECK_MSG(memcmp(grad, full, np * sizeof(float)) == 0,
              "%s in %d parts: gradient differs from the unsplit pass's", sc.spec, n);
    whole.destroy();
    for (int k = 0; k < n; k++) {
        part[k].destroy();
        model_destroy(cpu[k]);
    }
    for (int k = 0; k <= n; k++)
        free(cpu_in[k]);
    free(grad);
    free(cpu_grad);
    free(full);
}

static void test_split_dense(void)
{
    static const int sizes[] = {784, 64, 32, 10};
    static const split_case cases[] = {{"mlp:784-64-32-10", 2, {0, 1}},
                                       {"mlp:784-64-32-10", 2, {0, 2}},
                                       {"mlp:784-64-32-10", 3, {0, 1, 2}}};
    kern_dense_layout l;
    CHECK(kern_dense_layout_build(sizes, 4, &l) == 0);
    enum { BATCH = 5 };
    float *params = random_floats(l.params, -0.1f, 0.1f);
    float *x = random_floats((size_t)BATCH * l.inputs, 0.0f, 1.0f);
    int32_t labels[BATCH];
    for (int i = 0; i < BATCH; i++)
        labels[i] = (int32_t)rng_below(&rng, (uint64_t)l.classes);
    host_exec e;
    for (const split_case &c : cases)
        check_split<dense_part>(c, l, e, params, l.params, x, labels, BATCH);
    free(params);
    free(x);
}

/* Cuts between conv and pool, pool and conv, flatten and dense, and
 * inside the dense stack. */
static void test_split_lenet(void)
{
    static const split_case cases[] = {{"cnn:lenet", 2, {0, 1}},
                                       {"cnn:lenet", 2, {0, 2}},
                                       {"cnn:lenet", 2, {0, 5}},
                                       {"cnn:lenet", 3, {0, 3, 6}},
                                       {"cnn:lenet", 3, {0, 4, 7}}};
    kern_lenet_layout l;
    kern_lenet_layout_build(&l);
    enum { BATCH = 3 };
    float *params = random_floats(l.params, -0.2f, 0.2f);
    float *x = random_floats((size_t)BATCH * l.inputs, 0.0f, 1.0f);
    for (size_t i = 0; i < (size_t)BATCH * l.inputs; i++) /* flat regions: pooling ties */
        x[i] = i % 784 < 200 ? 0.5f : x[i];
    int32_t labels[BATCH];
    for (int i = 0; i < BATCH; i++)
        labels[i] = (int32_t)rng_below(&rng, (uint64_t)l.classes);
    /* The widths lenet.cu copies in and out are the layer table's. */
    struct model *ref;
    CHECK(model_create("cnn:lenet", 1, &ref, err, sizeof err) == 0);
    const struct model_spec *rows = model_layout(ref);
    CHECK(rows->layer_count == KERN_LENET_LAYERS);
    CHECK(kern_lenet_width(l, -1) == rows->layers[0].in_size);
    for (int i = 0; i < KERN_LENET_LAYERS; i++)
        CHECK_MSG(kern_lenet_width(l, i) == rows->layers[i].out_size, "row %d: width %zu, not %zu",
                  i + 1, kern_lenet_width(l, i), rows->layers[i].out_size);
    model_destroy(ref);
    host_lenet_exec e;
    for (const split_case &c : cases)
        check_split<lenet_part>(c, l, e, params, l.params, x, labels, BATCH);
    free(params);
    free(x);
}

/* Cuts after the stem, inside stage 1, before each downsampling block
 * (whose shortcut then reads the part's input: option A's subsampling and
 * channel padding across a cut), before the average pool and before the
 * dense layer. Rows 0-based: blocks start at 2, 7, ..., 42; 17 and 32
 * halve the map. */
static void test_split_resnet(void)
{
    static const split_case cases[] = {{"cnn:resnet20", 2, {0, 7}},
                                       {"cnn:resnet20", 2, {0, 17}},
                                       {"cnn:resnet20", 3, {0, 2, 47}},
                                       {"cnn:resnet20", 3, {0, 32, 48}}};
    struct model *ref;
    CHECK(model_create("cnn:resnet20", 1, &ref, err, sizeof err) == 0);
    const struct model_spec &s = *model_layout(ref);
    for (const split_case &c : cases)
        for (int k = 0; k < c.parts; k++)
            CHECK(model_spec_range_check(&s, c.starts[k],
                                         k + 1 < c.parts ? c.starts[k + 1] - 1 : s.layer_count - 1,
                                         err, sizeof err) == 0);
    enum { BATCH = 2 };
    float *params = resnet_params(ref, 9);
    float *x = random_floats((size_t)BATCH * s.layers[0].in_size, 0.0f, 1.0f);
    int32_t labels[BATCH];
    for (int i = 0; i < BATCH; i++)
        labels[i] = (int32_t)rng_below(&rng, 10);
    host_resnet_exec e;
    for (const split_case &c : cases)
        check_split<resnet_part>(c, s, e, params, model_param_count(ref), x, labels, BATCH);
    free(params);
    free(x);
    model_destroy(ref);
}

static void test_layout_limits(void)
{
    kern_dense_layout l;
    int sizes[KERN_DENSE_MAX_LAYERS + 2];
    for (int i = 0; i < KERN_DENSE_MAX_LAYERS + 2; i++)
        sizes[i] = 2;
    CHECK(kern_dense_layout_build(sizes, 1, &l) == -1);
    CHECK(kern_dense_layout_build(sizes, KERN_DENSE_MAX_LAYERS + 1, &l) == 0);
    CHECK(kern_dense_layout_build(sizes, KERN_DENSE_MAX_LAYERS + 2, &l) == -1);
}

int main(void)
{
    rng_seed(&rng, 99, 1);
    test_gemm_mapping();
    test_layout_limits();
    static const int logreg[] = {784, 10}, mlp[] = {784, 64, 32, 10}, tiny[] = {5, 3, 4};
    test_dense("logreg:784-10", logreg, 2, 16);
    test_dense("mlp:784-64-32-10", mlp, 4, 16);
    test_dense("mlp:5-3-4", tiny, 3, 1);
    test_dense("mlp:5-3-4", tiny, 3, 7);
    test_lenet(1);
    test_lenet(3);
    test_resnet(1);
    test_resnet(3);
    test_split_dense();
    test_split_lenet();
    test_split_resnet();
    return check_report();
}
