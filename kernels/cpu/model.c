/* cpu/model.c — initialisation and the forward/backward passes of dense,
 * convolution (im2col + cblas_sgemm), max-pool and flatten layers with
 * softmax cross-entropy on OpenBLAS, over the layer table that
 * kernels/model_spec.c parses from a spec, and the order of resnet's layers
 * (batch norm, residual add, average pool: cpu/resnet_layers.c). See
 * kernels/model.h.
 *
 * Owns each model's layer table, spec copy and one workspace block. */
#include "kernels/model.h"
#include "kernels/cpu/resnet_layers.h"
#include "kernels/cpu/winograd.h"
#include "kernels/kern_error.h"
#include "kernels/model_spec.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rng.h"

/* GCC's -O2 cost model vectorises only loops without a remainder, which
 * leaves bias, ReLU and pooling loops scalar and branchy: on mixed-sign data
 * the branch misses cost 15% of an mlp step (measured). The dynamic model
 * vectorises them; builds at -O3 get the same without this. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* After the pragma: its functions are inlined into the loops below and must
 * carry the same options, or GCC keeps them as calls. */
#include "kernels/elementwise.h"

/* Convolution columns (im2col) of a whole batch are kept from the forward
 * pass for the backward one while all conv layers' columns fit in this many
 * bytes (cnn:lenet: up to batch 121). Past that, the columns are built in
 * chunks of MODEL_CONV_CHUNK_BYTES and rebuilt in the backward pass: keeping
 * is ~10% faster (measured on lenet), chunking bounds the memory per model. */
#ifndef MODEL_KEEP_COLUMNS_BYTES /* overridable to benchmark both paths */
#define MODEL_KEEP_COLUMNS_BYTES (16u << 20)
#endif
#define MODEL_CONV_CHUNK_BYTES (256u << 10)

struct model {
    char *spec;
    struct model_spec arch;             /* the layer table and parameter layout */
    int capacity;                       /* workspace batch size */
    float *workspace;                   /* one block holding everything below */
    float *act[MODEL_MAX_LAYERS];       /* per-layer outputs, kept for backward */
    int keep_columns;                   /* columns kept per layer, else one shared chunk */
    float *columns[MODEL_MAX_LAYERS];   /* conv: kept im2col columns of the batch */
    float *col;                         /* shared chunk of columns when not keeping */
    float *delta[2];                    /* ping-pong activation gradients */
    float *skip;                        /* residual: gradient of a block's input via its shortcut */
    float *bn_mean[MODEL_MAX_LAYERS];   /* batchnorm: the last training pass's batch mean, */
    float *bn_invstd[MODEL_MAX_LAYERS]; /* 1 / sqrt(biased variance + eps) */
    float *bn_var[MODEL_MAX_LAYERS];    /* and the biased variance */
    float *ones;                        /* all 1: bias gradients as GEMV row sums */
    float *wino;                        /* scratch of the Winograd convolutions */
};

int model_create(const char *spec, int max_batch, struct model **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!spec) return kern_fail(err, errlen, "model spec is missing");
    struct model *m = calloc(1, sizeof *m);
    if (!m || !(m->spec = strdup(spec))) {
        free(m);
        return kern_fail(err, errlen, "model spec \"%s\": out of memory", spec);
    }
    if (model_spec_parse(spec, &m->arch, err, errlen) < 0) {
        model_destroy(m);
        return -1;
    }
    if (max_batch > 0 && model_reserve(m, max_batch, err, errlen) < 0) {
        model_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

void model_destroy(struct model *m)
{
    if (!m) return;
    free(m->workspace);
    free(m->spec);
    free(m);
}

const char *model_spec(const struct model *m)
{
    return m->spec;
}

const struct model_spec *model_layout(const struct model *m)
{
    return &m->arch;
}

size_t model_param_count(const struct model *m)
{
    return m->arch.param_count;
}

size_t model_trainable_count(const struct model *m)
{
    return m->arch.trainable_count;
}

int model_input_size(const struct model *m)
{
    return (int)m->arch.layers[0].in_size;
}

int model_classes(const struct model *m)
{
    return (int)m->arch.layers[m->arch.layer_count - 1].out_size;
}

/* ---- workspace ---- */

/* Channels from which a 3x3 stride-1 convolution runs as Winograd
 * F(2x2, 3x3) (cpu/winograd.c) rather than im2col + GEMM: its 16 GEMMs
 * have the input channels as inner dimension, and with one channel (a
 * first layer on grey images) they would be rank-1 updates, which BLAS
 * runs far below its peak (not measured against im2col here: resnet20's
 * first layer is the only such one, and needs no input gradient). */
#define MODEL_WINOGRAD_MIN_CHANNELS 8

static int conv_uses_winograd(const struct model_layer *l)
{
    return l->kind == MODEL_LAYER_CONV && l->kernel == 3 && l->stride == 1 && l->pad == 1 &&
           l->in_h == l->out_h && l->in_w == l->out_w && l->in_c >= MODEL_WINOGRAD_MIN_CHANNELS;
}

static struct wino_conv wino_conv_of(const struct model_layer *l)
{
    return (struct wino_conv){l->in_c, l->out_c, l->out_h, l->out_w};
}

/* The convolution columns of a layer per sample: none for Winograd's. */
static size_t layer_columns(const struct model_layer *l)
{
    return conv_uses_winograd(l) ? 0 : l->col_size;
}

/* Rounds a float count up to a 64-byte boundary so every buffer is aligned
 * for the vector loads of OpenBLAS and our own loops. */
static size_t aligned_floats(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

static size_t column_bytes_per_sample(const struct model *m)
{
    size_t floats = 0;
    for (int i = 0; i < m->arch.layer_count; i++)
        floats += layer_columns(&m->arch.layers[i]);
    return floats * sizeof(float);
}

static int keeps_columns(const struct model *m, size_t batch)
{
    return column_bytes_per_sample(m) * batch <= MODEL_KEEP_COLUMNS_BYTES;
}

/* Samples per im2col chunk of a conv layer: the batch when columns are kept. */
static int conv_chunk(const struct model_layer *l, int batch, int keep)
{
    if (keep) return batch;
    size_t per_sample = l->col_size * sizeof(float);
    size_t chunk = MODEL_CONV_CHUNK_BYTES / (per_sample ? per_sample : 1);
    return chunk < 1 ? 1 : chunk > (size_t)batch ? batch : (int)chunk;
}

/* Reserves n floats (64-byte aligned) at *used and points *slot at them
 * when base is given. */
static void carve(float *base, size_t *used, size_t n, float **slot)
{
    if (base) *slot = base + *used;
    *used += aligned_floats(n);
}

/* Lays the workspace out for `batch` samples from base and returns its size
 * in floats; base NULL only measures and leaves m untouched. One function for
 * both, so the sizes and the pointers can never disagree. */
static size_t workspace_layout(struct model *m, size_t batch, float *base)
{
    size_t used = 0, widest = 0, col = 0, ones = batch, wino = 0;
    int keep = keeps_columns(m, batch);
    float *unused;
    for (int i = 0; i < m->arch.layer_count; i++) {
        const struct model_layer *l = &m->arch.layers[i];
        carve(base, &used, l->out_size * batch, &m->act[i]);
        widest = l->in_size > widest ? l->in_size : widest;
        widest = l->out_size > widest ? l->out_size : widest;
        if (l->kind == MODEL_LAYER_BATCHNORM) {
            carve(base, &used, (size_t)l->out_c, &m->bn_mean[i]);
            carve(base, &used, (size_t)l->out_c, &m->bn_invstd[i]);
            carve(base, &used, (size_t)l->out_c, &m->bn_var[i]);
        }
        if (l->kind != MODEL_LAYER_CONV) continue;
        if (conv_uses_winograd(l)) {
            struct wino_conv cv = wino_conv_of(l);
            size_t need = wino_work_floats(&cv, (int)batch);
            wino = need > wino ? need : wino;
        }
        size_t chunk_cols = layer_columns(l) * (size_t)conv_chunk(l, (int)batch, keep);
        if (keep) carve(base, &used, chunk_cols, &m->columns[i]);
        col = chunk_cols > col ? chunk_cols : col;
        ones = batch * l->out_h * l->out_w > ones ? batch * l->out_h * l->out_w : ones;
    }
    carve(base, &used, keep ? 0 : col, keep ? &unused : &m->col);
    carve(base, &used, widest * batch, &m->delta[0]);
    carve(base, &used, widest * batch, &m->delta[1]);
    carve(base, &used, m->arch.arch == MODEL_ARCH_RESNET ? widest * batch : 0, &m->skip);
    carve(base, &used, ones, &m->ones);
    carve(base, &used, wino, &m->wino);
    for (size_t i = 0; base && i < ones; i++)
        m->ones[i] = 1.0f;
    if (base) m->keep_columns = keep;
    return used;
}

int model_reserve(struct model *m, int batch, char *err, size_t errlen)
{
    if (batch < 1 || batch > MODEL_MAX_BATCH)
        return kern_fail(err, errlen, "model \"%s\": batch %d is outside 1..%d", m->spec, batch,
                         MODEL_MAX_BATCH);
    if (batch <= m->capacity) return 0;
    void *block = NULL;
    size_t bytes = workspace_layout(m, (size_t)batch, NULL) * sizeof(float);
    if (posix_memalign(&block, 64, bytes) != 0)
        return kern_fail(err, errlen, "model \"%s\": cannot allocate %zu bytes of workspace",
                         m->spec, bytes);
    free(m->workspace);
    m->workspace = block;
    m->capacity = batch;
    workspace_layout(m, (size_t)batch, block);
    return 0;
}

/* ---- flops and shapes ---- */

/* Multiply-accumulates of a layer's forward GEMM per sample. */
static double layer_macs(const struct model_layer *l)
{
    if (l->kind == MODEL_LAYER_DENSE) return (double)l->in_size * l->out_size;
    if (l->kind == MODEL_LAYER_CONV) return (double)l->col_size * l->out_c;
    return 0;
}

double model_forward_flops(const struct model *m)
{
    double macs = 0;
    for (int i = 0; i < m->arch.layer_count; i++)
        macs += layer_macs(&m->arch.layers[i]);
    return 2 * macs;
}

double model_grad_flops(const struct model *m)
{
    /* Backward does the weight gradient for every layer and the input
     * gradient for all but the first (nobody needs d loss / d pixels). */
    double macs = 0;
    for (int i = 0; i < m->arch.layer_count; i++)
        macs += layer_macs(&m->arch.layers[i]) * (i == 0 ? 2 : 3);
    return 2 * macs;
}

static int shape_put(struct model_gemm_shape *s, int cap, int n, int ta, int tb, int rows, int cols,
                     int inner)
{
    if (n < cap) s[n] = (struct model_gemm_shape){ta, tb, rows, cols, inner};
    return n + 1;
}

/* The GEMMs of dense_forward/backward and conv_forward/backward, in the
 * order model_grad runs them; keep in step with those functions. */
static int winograd_shapes(const struct model_layer *l, int batch, int backward, int first_layer,
                           struct model_gemm_shape *s, int cap, int n)
{
    struct wino_conv cv = wino_conv_of(l);
    int step = wino_chunk_images(&cv, batch);
    for (int first = 0; first < batch; first += step) {
        int tiles = wino_tiles(&cv, batch - first < step ? batch - first : step);
        for (int xi = 0; xi < 16; xi++) {
            if (!backward) {
                n = shape_put(s, cap, n, 0, 0, l->out_c, tiles, l->in_c);
                continue;
            }
            n = shape_put(s, cap, n, 0, 1, l->out_c, l->in_c, tiles);
            if (!first_layer) n = shape_put(s, cap, n, 1, 0, l->in_c, tiles, l->out_c);
        }
    }
    return n;
}

static int conv_shapes(const struct model_layer *l, int batch, int keep, int backward,
                       int first_layer, struct model_gemm_shape *s, int cap, int n)
{
    if (conv_uses_winograd(l)) return winograd_shapes(l, batch, backward, first_layer, s, cap, n);
    int pixels = l->out_h * l->out_w, patch = l->in_c * l->kernel * l->kernel;
    int step = conv_chunk(l, batch, keep);
    for (int first = 0; first < batch; first += step) {
        int cols = (batch - first < step ? batch - first : step) * pixels;
        if (!backward) {
            n = shape_put(s, cap, n, 0, 0, l->out_c, cols, patch);
            continue;
        }
        n = shape_put(s, cap, n, 0, 1, l->out_c, patch, cols);
        if (!first_layer) n = shape_put(s, cap, n, 1, 0, patch, cols, l->out_c);
    }
    return n;
}

int model_gemm_shapes(const struct model *m, int batch, struct model_gemm_shape *s, int cap)
{
    /* As model_grad would run on this workspace, or on one made for batch. */
    int keep = batch <= m->capacity ? m->keep_columns : keeps_columns(m, (size_t)batch);
    int n = 0;
    for (int i = 0; i < m->arch.layer_count; i++) {
        const struct model_layer *l = &m->arch.layers[i];
        if (l->kind == MODEL_LAYER_DENSE)
            n = shape_put(s, cap, n, 0, 1, batch, l->out_c, l->in_c);
        else if (l->kind == MODEL_LAYER_CONV)
            n = conv_shapes(l, batch, keep, 0, i == 0, s, cap, n);
    }
    for (int i = m->arch.layer_count - 1; i >= 0; i--) {
        const struct model_layer *l = &m->arch.layers[i];
        if (l->kind == MODEL_LAYER_DENSE) {
            n = shape_put(s, cap, n, 1, 0, l->out_c, l->in_c, batch);
            if (i > 0) n = shape_put(s, cap, n, 0, 0, batch, l->in_c, l->out_c);
        } else if (l->kind == MODEL_LAYER_CONV) {
            n = conv_shapes(l, batch, keep, 1, i == 0, s, cap, n);
        }
    }
    return n;
}

/* ---- initialisation ---- */

static void fill_uniform(struct rng *r, float *p, size_t n, double bound)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((2.0 * rng_uniform(r) - 1.0) * bound);
}

/* Whether layer i's output reaches a ReLU: its own, or (resnet) that of
 * the batch norm it feeds or of the block's add after that. */
static int feeds_relu(const struct model *m, int i)
{
    return m->arch.layers[i].relu ||
           (i + 1 < m->arch.layer_count && m->arch.layers[i + 1].kind == MODEL_LAYER_BATCHNORM);
}

/* gamma 1, beta 0, running mean 0 and variance 1 (PyTorch's), whatever
 * the method: a batch norm with gamma 0 passes nothing, and the running
 * statistics are not parameters an init method chooses. */
static void init_batchnorms(const struct model *m, float *params)
{
    for (int i = 0; i < m->arch.layer_count; i++) {
        const struct model_layer *l = &m->arch.layers[i];
        if (l->kind != MODEL_LAYER_BATCHNORM) continue;
        for (int c = 0; c < l->out_c; c++) {
            params[l->weight_offset + c] = 1.0f;
            params[l->stat_offset + l->out_c + c] = 1.0f;
        }
    }
}

int model_init(const struct model *m, float *params, const char *method, uint64_t seed, char *err,
               size_t errlen)
{
    int he = 1, zeros = 0;
    if (!method || strcmp(method, "default") == 0)
        he = 1;
    else if (strcmp(method, "xavier") == 0)
        he = 0;
    else if (strcmp(method, "zeros") == 0)
        zeros = 1;
    else
        return kern_fail(err, errlen, "model \"%s\": unknown init \"%s\" (default, xavier, zeros)",
                         m->spec, method);
    memset(params, 0, m->arch.param_count * sizeof(float));
    init_batchnorms(m, params);
    if (zeros) return 0;
    struct rng r;
    rng_seed(&r, seed, 0x1417);
    for (int i = 0; i < m->arch.layer_count; i++) {
        const struct model_layer *l = &m->arch.layers[i];
        if (l->kind != MODEL_LAYER_DENSE && l->kind != MODEL_LAYER_CONV) continue;
        size_t weights = l->bias_offset - l->weight_offset;
        double area = l->kind == MODEL_LAYER_CONV ? (double)l->kernel * l->kernel : 1.0;
        double fan_in = l->in_c * area, fan_out = l->out_c * area;
        double bound =
            (he && feeds_relu(m, i)) ? sqrt(6.0 / fan_in) : sqrt(6.0 / (fan_in + fan_out));
        fill_uniform(&r, params + l->weight_offset, weights, bound);
    }
    return 0;
}

/* ---- elementwise helpers ---- */

/* y[r][c] += b[c], then ReLU when asked: one pass over the GEMM output. */
static void bias_relu_rows(float *y, size_t rows, int cols, const float *b, int relu)
{
    for (size_t r = 0; r < rows; r++) {
        float *row = y + r * cols;
        for (int c = 0; c < cols; c++)
            row[c] = kern_bias_relu(row[c], b[c], relu);
    }
}

/* The ReLU gradient: zero where the (post-ReLU) output was not positive. */
static void relu_mask(float *dy, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dy[i] = kern_relu_mask(dy[i], y[i]);
}

/* ---- dense ---- */

static void dense_forward(const struct model_layer *l, const float *params, const float *x,
                          float *y, int batch)
{
    int in = (int)l->in_size, out = (int)l->out_size;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in,
                params + l->weight_offset, in, 0.0f, y, out);
    bias_relu_rows(y, (size_t)batch, out, params + l->bias_offset, l->relu);
}

/* dy is masked in place; dx may be NULL for the first layer. */
static void dense_backward(const struct model *m, const struct model_layer *l, const float *params,
                           const float *x, const float *y, float *dy, float *grad, float *dx,
                           int batch)
{
    int in = (int)l->in_size, out = (int)l->out_size;
    if (l->relu) relu_mask(dy, y, (size_t)batch * out);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 0.0f,
                grad + l->weight_offset, in);
    cblas_sgemv(CblasRowMajor, CblasTrans, batch, out, 1.0f, dy, out, m->ones, 1, 0.0f,
                grad + l->bias_offset, 1);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out,
                    params + l->weight_offset, in, 0.0f, dx, in);
}

/* ---- convolution, pooling, flattening (channel-major activations) ----
 *
 * Between convolution layers activations are stored C x B x H x W: channel
 * outermost, then the batch. im2col builds col[K][S*OH*OW] for a chunk of S
 * samples, K = C*k*k rows ordered (c, ky, kx), each row the shifted input
 * planes, so every copy is a contiguous run of an image row; the GEMM
 * W[COUT][K] x col then writes the chunk's output columns in place. The
 * model input B x 1 x 28 x 28 already is this layout (one channel). */

static int conv_patch(const struct model_layer *l)
{
    return l->in_c * l->kernel * l->kernel;
}

struct conv_chunk {
    int first, count; /* samples */
    int total;        /* batch: planes are [c][total][h][w] */
};

/* Outputs o in [0, out) whose input o * stride + shift falls inside
 * [0, in): rows or columns of a window row that read the image, not the
 * zero padding. */
static void valid_range(int in, int out, int stride, int shift, int *lo, int *hi)
{
    int last = in - 1 - shift; /* the largest o * stride that reads inside */
    *lo = shift < 0 ? (-shift + stride - 1) / stride : 0;
    *hi = last < 0 ? 0 : last / stride + 1;
    *hi = *hi > out ? out : *hi;
    *hi = *hi < *lo ? *lo : *hi;
}

/* window_row's copy for a stride above 1: every stride-th input. */
static void window_strided(float *restrict p, float *restrict c, int width, int stride, bool gather)
{
    for (int j = 0; j < width; j++) {
        if (gather)
            c[j] = p[j * stride];
        else
            p[j * stride] += c[j];
    }
}

/* One row (c, ky, kx) of col against the input planes shifted by
 * (ky - pad, kx - pad), for every sample: im2col copies the valid window of
 * the planes into col (it zeroes the chunk's columns once up front, which is
 * one fast memset instead of a few tiny ones per image row); col2im, the
 * adjoint, adds col back into the planes. Always inlined with `gather`
 * constant, so each use keeps its own tight loop. */
static inline __attribute__((always_inline)) void window_row(const struct model_layer *l,
                                                             float *restrict plane,
                                                             float *restrict col, int count, int ky,
                                                             int kx, bool gather)
{
    int x_lo, x_hi, y_lo, y_hi, ow = l->out_w, iw = l->in_w, s = l->stride;
    valid_range(l->in_w, ow, s, kx - l->pad, &x_lo, &x_hi);
    valid_range(l->in_h, l->out_h, s, ky - l->pad, &y_lo, &y_hi);
    size_t in_plane = (size_t)l->in_h * iw, out_plane = (size_t)l->out_h * ow;
    int width = x_hi - x_lo, in_x = x_lo * s + kx - l->pad;
    for (int b = 0; b < count; b++) {
        for (int oy = y_lo; oy < y_hi; oy++) {
            float *restrict p =
                plane + (size_t)b * in_plane + (size_t)(oy * s + ky - l->pad) * iw + in_x;
            float *restrict c = col + (size_t)b * out_plane + (size_t)oy * ow + x_lo;
            if (s != 1) /* resnet's two downsampling convs: strided, rare */
                window_strided(p, c, width, s, gather);
            else if (gather)
                for (int j = 0; j < width; j++)
                    c[j] = p[j];
            else
                for (int j = 0; j < width; j++)
                    p[j] += c[j];
        }
    }
}

static void im2col(const struct model_layer *l, const float *in, float *col, struct conv_chunk c)
{
    size_t cols = (size_t)c.count * l->out_h * l->out_w, plane = (size_t)l->in_h * l->in_w;
    int k = l->kernel;
    if (l->pad) memset(col, 0, cols * (size_t)conv_patch(l) * sizeof(float));
    for (int ch = 0; ch < l->in_c; ch++) {
        const float *src = in + ((size_t)ch * c.total + c.first) * plane;
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++, col += cols)
                window_row(l, (float *)src, col, c.count, ky, kx, true); /* only read */
    }
}

/* Writes the chunk's samples of dx (zeroed first) from d col. */
static void col2im(const struct model_layer *l, const float *col, float *dx, struct conv_chunk c)
{
    size_t cols = (size_t)c.count * l->out_h * l->out_w, plane = (size_t)l->in_h * l->in_w;
    int k = l->kernel;
    for (int ch = 0; ch < l->in_c; ch++) {
        float *dst = dx + ((size_t)ch * c.total + c.first) * plane;
        memset(dst, 0, (size_t)c.count * plane * sizeof(float));
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++, col += cols)
                window_row(l, dst, (float *)col, c.count, ky, kx, false); /* only read */
    }
}

/* y[c][j] += b[c] over rows of a channel-major map, with ReLU when asked. */
static void bias_relu_planes(float *y, int channels, size_t n, const float *b, int relu)
{
    for (int c = 0; c < channels; c++) {
        float *row = y + c * n, bias = b[c];
        for (size_t j = 0; j < n; j++)
            row[j] = kern_bias_relu(row[j], bias, relu);
    }
}

/* im2col + one GEMM per chunk of samples. */
static void conv_forward_columns(struct model *m, int index, const float *params, const float *x,
                                 float *y, int batch)
{
    const struct model_layer *l = &m->arch.layers[index];
    int pixels = l->out_h * l->out_w, n = batch * pixels, patch = conv_patch(l);
    int step = conv_chunk(l, batch, m->keep_columns);
    float *col = m->keep_columns ? m->columns[index] : m->col;
    for (int first = 0; first < batch; first += step) {
        struct conv_chunk c = {first, batch - first < step ? batch - first : step, batch};
        im2col(l, x, col, c);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, l->out_c, c.count * pixels, patch,
                    1.0f, params + l->weight_offset, patch, col, c.count * pixels, 0.0f,
                    y + (size_t)first * pixels, n);
    }
}

static void conv_forward(struct model *m, int index, const float *params, const float *x, float *y,
                         int batch)
{
    const struct model_layer *l = &m->arch.layers[index];
    if (conv_uses_winograd(l)) {
        struct wino_conv cv = wino_conv_of(l);
        wino_forward(&cv, params + l->weight_offset, x, y, batch, m->wino);
    } else {
        conv_forward_columns(m, index, params, x, y, batch);
    }
    /* A conv without bias (resnet's) has no ReLU either: its batch norm has. */
    if (l->bias)
        bias_relu_planes(y, l->out_c, (size_t)batch * l->out_h * l->out_w, params + l->bias_offset,
                         l->relu);
}

/* The weight gradient and dx (NULL: not wanted) by GEMMs against the
 * forward pass's columns when they were kept, else each chunk's rebuilt;
 * either way the buffer then receives d col, which col2im folds into dx. */
static void conv_backward_columns(struct model *m, int index, const float *params, const float *x,
                                  const float *dy, float *grad, float *dx, int batch)
{
    const struct model_layer *l = &m->arch.layers[index];
    int pixels = l->out_h * l->out_w, n = batch * pixels, patch = conv_patch(l);
    int step = conv_chunk(l, batch, m->keep_columns);
    float *col = m->keep_columns ? m->columns[index] : m->col;
    for (int first = 0; first < batch; first += step) {
        struct conv_chunk c = {first, batch - first < step ? batch - first : step, batch};
        const float *dy_chunk = dy + (size_t)first * pixels;
        if (!m->keep_columns) im2col(l, x, col, c);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, l->out_c, patch, c.count * pixels,
                    1.0f, dy_chunk, n, col, c.count * pixels, first ? 1.0f : 0.0f,
                    grad + l->weight_offset, patch);
        if (!dx) continue;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch, c.count * pixels, l->out_c,
                    1.0f, params + l->weight_offset, patch, dy_chunk, n, 0.0f, col,
                    c.count * pixels);
        col2im(l, col, dx, c);
    }
}

/* dy arrives masked by the ReLU when `masked` (a following pool did it).
 * dx may be NULL for the first layer. */
static void conv_backward(struct model *m, int index, const float *params, const float *x,
                          float *dy, float *grad, float *dx, int batch, int masked)
{
    const struct model_layer *l = &m->arch.layers[index];
    int n = batch * l->out_h * l->out_w;
    if (l->relu && !masked) relu_mask(dy, m->act[index], (size_t)n * l->out_c);
    if (l->bias)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, l->out_c, n, 1.0f, dy, n, m->ones, 1, 0.0f,
                    grad + l->bias_offset, 1);
    if (conv_uses_winograd(l)) {
        struct wino_conv cv = wino_conv_of(l);
        wino_backward(&cv, params + l->weight_offset, x, dy, grad + l->weight_offset, dx, batch,
                      m->wino);
    } else {
        conv_backward_columns(m, index, params, x, dy, grad, dx, batch);
    }
}

/* Max pooling with window = stride = 2 over C x B planes. */
static void pool_forward(const struct model_layer *l, const float *x, float *y, int batch)
{
    size_t planes = (size_t)l->in_c * batch;
    int w = l->in_w;
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * l->in_h * w;
        float *out = y + p * l->out_h * l->out_w;
        for (int oy = 0; oy < l->out_h; oy++, out += l->out_w) {
            const float *r0 = in + (size_t)(2 * oy) * w, *r1 = r0 + w;
            for (int ox = 0; ox < l->out_w; ox++) {
                float a = r0[2 * ox] > r0[2 * ox + 1] ? r0[2 * ox] : r0[2 * ox + 1];
                float b = r1[2 * ox] > r1[2 * ox + 1] ? r1[2 * ox] : r1[2 * ox + 1];
                out[ox] = a > b ? a : b;
            }
        }
    }
}

/* Routes each output gradient to the first input of its window that equals
 * the max (recomputed from x and y rather than stored), writing every input
 * once so dx needs no separate clearing. With relu_below, x is a ReLU output
 * and a window whose max is 0 gets no gradient: that is the ReLU's mask,
 * applied here on a quarter of the elements instead of in a pass of its own. */
static void pool_backward(const struct model_layer *l, const float *x, const float *y,
                          const float *dy, float *dx, int batch, int relu_below)
{
    size_t planes = (size_t)l->in_c * batch;
    int w = l->in_w;
    if (l->in_h % 2 || w % 2) /* odd edges get no window: clear them */
        memset(dx, 0, planes * l->in_h * w * sizeof(float));
    for (size_t p = 0; p < planes; p++) {
        size_t in_base = p * l->in_h * w, out_base = p * l->out_h * l->out_w;
        for (int oy = 0; oy < l->out_h; oy++) {
            for (int ox = 0; ox < l->out_w; ox++) {
                size_t o = out_base + (size_t)oy * l->out_w + ox;
                size_t i = in_base + (size_t)(2 * oy) * w + 2 * ox;
                /* Arithmetic, not branches: where the max sits is random,
                 * and branching on it made this a quarter of a lenet step
                 * (measured); GCC keeps float selects as jumps. */
                float m = y[o], g = dy[o] * (float)(!relu_below | (m > 0.0f));
                int e0 = x[i] == m, e1 = !e0 & (x[i + 1] == m);
                int e2 = !(e0 | e1) & (x[i + w] == m), e3 = !(e0 | e1 | e2);
                dx[i] = g * (float)e0;
                dx[i + 1] = g * (float)e1;
                dx[i + w] = g * (float)e2;
                dx[i + w + 1] = g * (float)e3;
            }
        }
    }
}

/* C x B x HW -> B x (C*HW): each sample's features in (c, y, x) order. */
static void flatten_forward(const struct model_layer *l, const float *x, float *y, int batch)
{
    size_t plane = (size_t)l->in_h * l->in_w;
    for (int c = 0; c < l->in_c; c++)
        for (int b = 0; b < batch; b++)
            memcpy(y + (size_t)b * l->out_size + c * plane, x + ((size_t)c * batch + b) * plane,
                   plane * sizeof(float));
}

static void flatten_backward(const struct model_layer *l, const float *dy, float *dx, int batch)
{
    size_t plane = (size_t)l->in_h * l->in_w;
    for (int c = 0; c < l->in_c; c++)
        for (int b = 0; b < batch; b++)
            memcpy(dx + ((size_t)c * batch + b) * plane, dy + (size_t)b * l->out_size + c * plane,
                   plane * sizeof(float));
}

/* ---- softmax cross-entropy ---- */

/* Adds each row's loss to *loss_sum and its hit to *correct; when dlogits is
 * non-NULL writes (softmax - onehot) / batch, the gradient of the mean. */
static void softmax_xent(const float *logits, const int32_t *labels, int batch, int classes,
                         float *dlogits, double *loss_sum, size_t *correct)
{
    for (int b = 0; b < batch; b++) {
        double loss;
        int hit;
        kern_softmax_xent_row(logits + (size_t)b * classes, labels[b], classes, batch,
                              dlogits ? dlogits + (size_t)b * classes : NULL, &loss, &hit);
        *loss_sum += loss;
        *correct += (size_t)hit;
    }
}

/* ---- passes ---- */

static struct bn_pass bn_pass_of(const struct model *m, int index, const float *params, int batch)
{
    const struct model_layer *l = &m->arch.layers[index];
    return (struct bn_pass){.channels = l->out_c,
                            .n = (size_t)batch * l->out_h * l->out_w,
                            .gamma = params + l->weight_offset,
                            .beta = params + l->bias_offset,
                            .mean = m->bn_mean[index],
                            .invstd = m->bn_invstd[index],
                            .relu = l->relu};
}

static struct residual_source residual_source_of(const struct model *m, const struct model_layer *l)
{
    if (l->skip_from < 0) return (struct residual_source){m->arch.in_c, m->arch.in_h, m->arch.in_w};
    const struct model_layer *from = &m->arch.layers[l->skip_from];
    return (struct residual_source){from->out_c, from->out_h, from->out_w};
}

/* The output of layer index, or x when index comes before the pass's first
 * layer (the whole model's input, or a layer range's: model_forward_range
 * refuses ranges whose shortcuts reach further back). */
static const float *layer_output_or_input(const struct model *m, int index, int first,
                                          const float *x)
{
    return index < first ? x : m->act[index];
}

/* Layers first..last on x, the input of layer first. Batch norms normalise
 * by the batch's statistics when `training`, by their running statistics
 * (in params) otherwise. */
static const float *forward_layers(struct model *m, const float *params, const float *x, int first,
                                   int last, int batch, bool training)
{
    const float *in = x;
    for (int i = first; i <= last; i++) {
        const struct model_layer *l = &m->arch.layers[i];
        float *out = m->act[i];
        if (l->kind == MODEL_LAYER_DENSE) {
            dense_forward(l, params, in, out, batch);
        } else if (l->kind == MODEL_LAYER_CONV) {
            conv_forward(m, i, params, in, out, batch);
        } else if (l->kind == MODEL_LAYER_POOL) {
            pool_forward(l, in, out, batch);
        } else if (l->kind == MODEL_LAYER_FLATTEN) {
            flatten_forward(l, in, out, batch);
        } else if (l->kind == MODEL_LAYER_BATCHNORM) {
            struct bn_pass bn = bn_pass_of(m, i, params, batch);
            if (training)
                bn_forward_train(&bn, in, out, m->bn_var[i]);
            else
                bn_forward_eval(&bn, in, out, params + l->stat_offset,
                                params + l->stat_offset + l->out_c);
        } else if (l->kind == MODEL_LAYER_RESIDUAL) {
            residual_forward(l, residual_source_of(m, l), in,
                             layer_output_or_input(m, l->skip_from, first, x), out, batch);
        } else {
            avgpool_forward(l, in, out, batch);
        }
        in = out;
    }
    return in;
}

/* A conv layer whose ReLU mask the pool above it applies (pool_backward). */
static int relu_masked_by_pool(const struct model *m, int i)
{
    return i + 1 < m->arch.layer_count && m->arch.layers[i + 1].kind == MODEL_LAYER_POOL &&
           m->arch.layers[i].relu;
}

/* Layer i's backward pass: dy (d loss / d its output) to dx (d loss / d its
 * input; NULL for the first layer) and its parameters' gradient. A residual
 * layer also leaves the gradient of its shortcut in m->skip. */
static void layer_backward(struct model *m, int i, int first, const float *params, const float *x,
                           float *grad, float *dy, float *dx, int batch)
{
    const struct model_layer *l = &m->arch.layers[i];
    const float *in = i > first ? m->act[i - 1] : x;
    if (l->kind == MODEL_LAYER_DENSE) {
        dense_backward(m, l, params, in, m->act[i], dy, grad, dx, batch);
    } else if (l->kind == MODEL_LAYER_CONV) {
        conv_backward(m, i, params, in, dy, grad, dx, batch, relu_masked_by_pool(m, i));
    } else if (l->kind == MODEL_LAYER_POOL) {
        pool_backward(l, in, m->act[i], dy, dx, batch, i > 0 && relu_masked_by_pool(m, i - 1));
    } else if (l->kind == MODEL_LAYER_FLATTEN) {
        flatten_backward(l, dy, dx, batch);
    } else if (l->kind == MODEL_LAYER_BATCHNORM) {
        struct bn_pass bn = bn_pass_of(m, i, params, batch);
        bn_backward(&bn, in, m->act[i], dy, dx, grad + l->weight_offset, grad + l->bias_offset);
    } else if (l->kind == MODEL_LAYER_RESIDUAL) {
        residual_backward(l, residual_source_of(m, l), m->act[i], dy, m->skip, batch);
        memcpy(dx, dy, l->out_size * (size_t)batch * sizeof(float));
    } else {
        avgpool_backward(l, dy, dx, batch);
    }
}

static void add_into(float *restrict y, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

/* Layers last..first backwards, after forward_layers over the same range:
 * expects d loss / d (layer last's output) in m->delta[0] and leaves d loss
 * / d x in dx_out (NULL: not wanted, as for the model's first layer). A
 * block's input receives the gradient of both its paths: the shortcut's
 * waits in m->skip (blocks do not nest, so one buffer serves) until the
 * main path's reaches it. */
static void backward_layers(struct model *m, const float *params, const float *x, int first,
                            int last, float *grad, int batch, float *dx_out)
{
    float *dy = m->delta[0], *dx = m->delta[1];
    int skip_to = -2; /* the layer whose output m->skip's gradient belongs to */
    for (int i = last; i >= first; i--) {
        const struct model_layer *l = &m->arch.layers[i];
        if (i == first) dx = dx_out;
        layer_backward(m, i, first, params, x, grad, dy, dx, batch);
        if (l->kind == MODEL_LAYER_RESIDUAL) skip_to = l->skip_from;
        if (dx && skip_to == i - 1) {
            add_into(dx, m->skip, l->in_size * (size_t)batch);
            skip_to = -2;
        }
        float *t = dy;
        dy = dx;
        dx = t;
    }
}

/* The tail of grad past the trainable parameters: each batch norm's batch
 * mean and unbiased variance (what PyTorch folds into its running
 * statistics), for the optimizer step to fold in (kernels/model.h). */
static void write_batch_statistics(const struct model *m, int first, int last, float *grad,
                                   int batch)
{
    for (int i = first; i <= last; i++) {
        const struct model_layer *l = &m->arch.layers[i];
        if (l->kind != MODEL_LAYER_BATCHNORM) continue;
        double n = (double)batch * l->out_h * l->out_w;
        double unbias = n > 1 ? n / (n - 1) : 1.0;
        for (int c = 0; c < l->out_c; c++) {
            grad[l->stat_offset + c] = m->bn_mean[i][c];
            grad[l->stat_offset + l->out_c + c] = (float)(m->bn_var[i][c] * unbias);
        }
    }
}

static int check_labels(const struct model *m, const int32_t *labels, size_t n, char *err,
                        size_t errlen)
{
    int classes = model_classes(m);
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return kern_fail(err, errlen, "model \"%s\": label %d of sample %zu is outside 0..%d",
                             m->spec, (int)labels[i], i, classes - 1);
    return 0;
}

int model_grad(struct model *m, const float *params, const float *x, const int32_t *labels,
               int batch, float *grad, float *loss, char *err, size_t errlen)
{
    if (model_reserve(m, batch, err, errlen) < 0 ||
        check_labels(m, labels, (size_t)batch, err, errlen) < 0)
        return -1;
    int last = m->arch.layer_count - 1;
    const float *logits = forward_layers(m, params, x, 0, last, batch, true);
    double loss_sum = 0;
    size_t correct = 0;
    softmax_xent(logits, labels, batch, model_classes(m), m->delta[0], &loss_sum, &correct);
    backward_layers(m, params, x, 0, last, grad, batch, NULL);
    write_batch_statistics(m, 0, last, grad, batch);
    *loss = (float)(loss_sum / batch);
    return 0;
}

int model_eval(struct model *m, const float *params, const float *x, const int32_t *labels,
               size_t n, struct model_score *score, char *err, size_t errlen)
{
    int chunk = m->capacity > MODEL_EVAL_MIN_BATCH ? m->capacity : MODEL_EVAL_MIN_BATCH;
    if (model_reserve(m, chunk, err, errlen) < 0 || check_labels(m, labels, n, err, errlen) < 0)
        return -1;
    size_t in = (size_t)model_input_size(m);
    for (size_t done = 0; done < n;) {
        int batch = n - done < (size_t)chunk ? (int)(n - done) : chunk;
        const float *logits =
            forward_layers(m, params, x + done * in, 0, m->arch.layer_count - 1, batch, false);
        softmax_xent(logits, labels + done, batch, model_classes(m), NULL, &score->loss_sum,
                     &score->correct);
        done += (size_t)batch;
        score->samples += (size_t)batch;
    }
    return 0;
}

/* ---- layer ranges (split learning, pipelines) ---- */

int model_forward_range(struct model *m, const float *params, int first, int last, const float *x,
                        int batch, float *y, char *err, size_t errlen)
{
    if (model_spec_range_check(&m->arch, first, last, err, errlen) < 0 ||
        model_reserve(m, batch, err, errlen) < 0)
        return -1;
    const float *out = forward_layers(m, params, x, first, last, batch, true);
    memcpy(y, out, m->arch.layers[last].out_size * (size_t)batch * sizeof(float));
    return 0;
}

int model_backward_range(struct model *m, const float *params, int first, int last, const float *x,
                         const float *dy, int batch, float *dx, float *grad, char *err,
                         size_t errlen)
{
    if (model_spec_range_check(&m->arch, first, last, err, errlen) < 0) return -1;
    if (batch < 1 || batch > m->capacity)
        return kern_fail(err, errlen,
                         "model \"%s\": backward over batch %d without its forward pass", m->spec,
                         batch);
    memcpy(m->delta[0], dy, m->arch.layers[last].out_size * (size_t)batch * sizeof(float));
    backward_layers(m, params, x, first, last, grad, batch, first ? dx : NULL);
    write_batch_statistics(m, first, last, grad, batch);
    return 0;
}

int model_loss(const struct model *m, const float *logits, const int32_t *labels, int batch,
               float *dlogits, float *loss, char *err, size_t errlen)
{
    if (check_labels(m, labels, (size_t)batch, err, errlen) < 0) return -1;
    double loss_sum = 0;
    size_t correct = 0;
    softmax_xent(logits, labels, batch, model_classes(m), dlogits, &loss_sum, &correct);
    *loss = (float)(loss_sum / batch);
    return 0;
}
