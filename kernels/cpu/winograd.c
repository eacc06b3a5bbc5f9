/* cpu/winograd.c — F(2x2, 3x3) convolutions (see winograd.h).
 *
 * Lavin & Gray (CVPR 2016, arXiv:1509.09308): every 2x2 output tile is
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A
 * for a 4x4 input tile d (overlapping by 2) and the 3x3 filter g, so summed
 * over input channels each of the 16 tile positions xi is one GEMM
 *   M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T),  U = G g G^T, V = B^T d B,
 * with 16 multiplications per tile instead of im2col's 36: 2.25x fewer.
 * The backward passes are the adjoints of the same factorisation (the
 * exact gradient of the function computed, hence of the convolution):
 *   dM = A dY A^T,  dU[xi] = dM[xi] V[xi]^T,  dV[xi] = U[xi]^T dM[xi],
 *   dg = G^T dU G,  dx = the sum over tiles of B dV B^T,
 * which shares dM between both GEMMs and needs no col2im.
 *
 * The batch runs in chunks of whole images whose transformed tiles (V and
 * M) stay within WINO_CHUNK_BYTES, so the transforms and the GEMMs work in
 * cache (1 MiB: 256 KiB and 4 MiB were slower, tools/bench/kernels). A
 * map of odd size gets a last tile row or column half in the padding, whose
 * inputs are zero and whose outputs are dropped. */
#include "kernels/cpu/winograd.h"

#include <assert.h>
#include <cblas.h>
#include <string.h>

/* As in cpu/model.c: GCC's -O2 cost model leaves these loops scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* The transforms' loops touch disjoint buffers (planes, the split row, the
 * step buffers, the tiles); GCC cannot prove it for this many pointers and
 * left them scalar (perf); with this a resnet20 step went from 207 to
 * 174 ms. */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTOR_LOOP _Pragma("GCC ivdep")
#else
#define VECTOR_LOOP
#endif

#define WINO_TILE 16     /* 4 x 4 positions xi per tile */
#ifndef WINO_CHUNK_BYTES /* overridable to measure other sizes */
#define WINO_CHUNK_BYTES (1024u << 10)
#endif

/* Tiles of a map and the scratch laid out in `work`. */
struct wino_plan {
    int th, tw, tiles; /* tile rows, columns, per image */
    int chunk;         /* images per chunk */
    float *u, *du;     /* 16 x K x C: transformed filter and its gradient */
    float *steps;      /* 4 x 2 x (th + 1) x tw: a transform's row step */
    float *row;        /* 2 tw + 2: one image row split in even | odd columns */
    float *v, *m;      /* 16 x C x T and 16 x K x T of one chunk */
};

static size_t aligned(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

int wino_tiles(const struct wino_conv *cv, int images)
{
    return images * ((cv->h + 1) / 2) * ((cv->w + 1) / 2);
}

int wino_chunk_images(const struct wino_conv *cv, int batch)
{
    assert(cv->in_c >= 1 && cv->out_c >= 1 && cv->h >= 1 && cv->w >= 1 && batch >= 1);
    size_t per_image =
        (size_t)WINO_TILE * wino_tiles(cv, 1) * (cv->in_c + cv->out_c) * sizeof(float);
    size_t n = WINO_CHUNK_BYTES / per_image;
    return n < 1 ? 1 : n > (size_t)batch ? batch : (int)n;
}

/* Lays the scratch out from work (NULL: only sizes it); returns its floats. */
static size_t plan_layout(const struct wino_conv *cv, int batch, float *work, struct wino_plan *p)
{
    p->th = (cv->h + 1) / 2;
    p->tw = (cv->w + 1) / 2;
    p->tiles = p->th * p->tw;
    p->chunk = wino_chunk_images(cv, batch);
    size_t filter = (size_t)WINO_TILE * cv->out_c * cv->in_c;
    size_t chunk_tiles = (size_t)p->chunk * p->tiles;
    size_t sizes[] = {filter,
                      filter,
                      8 * (size_t)(p->th + 1) * p->tw,
                      2 * (size_t)p->tw + 2,
                      WINO_TILE * cv->in_c * chunk_tiles,
                      WINO_TILE * cv->out_c * chunk_tiles};
    float **slots[] = {&p->u, &p->du, &p->steps, &p->row, &p->v, &p->m};
    size_t used = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *slots[i] = work ? work + used : NULL;
        used += aligned(sizes[i]);
    }
    return used;
}

size_t wino_work_floats(const struct wino_conv *cv, int batch)
{
    struct wino_plan p;
    return plan_layout(cv, batch, NULL, &p);
}

/* ---- filter ---- */

/* U = G g G^T, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]: u[xi][k][c]. */
static void filter_transform(const struct wino_conv *cv, const float *weights, float *u)
{
    size_t pairs = (size_t)cv->out_c * cv->in_c;
    for (size_t kc = 0; kc < pairs; kc++) {
        const float *g = weights + kc * 9;
        float t[4][3]; /* G g */
        for (int j = 0; j < 3; j++) {
            t[0][j] = g[j];
            t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
            t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
            t[3][j] = g[6 + j];
        }
        for (int i = 0; i < 4; i++) {
            float *row = u + (size_t)(4 * i) * pairs + kc;
            row[0] = t[i][0];
            row[pairs] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
            row[2 * pairs] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
            row[3 * pairs] = t[i][2];
        }
    }
}

/* dg = G^T dU G (the adjoint of filter_transform) into dweights. */
static void filter_gradient(const struct wino_conv *cv, const float *du, float *dweights)
{
    size_t pairs = (size_t)cv->out_c * cv->in_c;
    for (size_t kc = 0; kc < pairs; kc++) {
        float t[4][3]; /* dU G, row by row */
        for (int i = 0; i < 4; i++) {
            const float *x = du + (size_t)(4 * i) * pairs + kc;
            float x0 = x[0], x1 = x[pairs], x2 = x[2 * pairs], x3 = x[3 * pairs];
            t[i][0] = x0 + 0.5f * (x1 + x2);
            t[i][1] = 0.5f * (x1 - x2);
            t[i][2] = 0.5f * (x1 + x2) + x3;
        }
        float *g = dweights + kc * 9;
        for (int j = 0; j < 3; j++) {
            g[j] = t[0][j] + 0.5f * (t[1][j] + t[2][j]);
            g[3 + j] = 0.5f * (t[1][j] - t[2][j]);
            g[6 + j] = 0.5f * (t[1][j] + t[2][j]) + t[3][j];
        }
    }
}

/* ---- tiles ----
 *
 * Each transform is separable: one 1-D combination along the rows, one
 * along the columns. The row step runs per image row, on the row split
 * into its even and odd columns (a window at column 2tx then reads E[tx],
 * O[tx], E[tx+1], O[tx+1] with unit stride); its results are stored per
 * row parity, with rows of tw tiles, so that the column step (rows 2ty,
 * 2ty+1, 2ty+2, 2ty+3 = even[ty], odd[ty], even[ty+1], odd[ty+1]) is one
 * flat loop over all of a plane's tiles, t and t + tw. Stride-2 accesses
 * kept GCC's vectoriser out, and loops per tile row (4 to 14 tiles) left
 * the transforms about 85 ms of a 174 ms resnet20 step (perf; 154 ms so). */

/* Plane row src (w values) into a padded row's halves, one column of
 * padding on the left: plane column x is padded column x + 1. Only ever
 * writes the same cells, so the padding stays as the caller zeroed it. */
static void split_padded_row(const float *restrict src, int w, float *restrict dst, int half)
{
    float *restrict even = dst, *restrict odd = dst + half;
    VECTOR_LOOP
    for (int j = 0; 2 * j < w; j++)
        odd[j] = src[2 * j];
    VECTOR_LOOP
    for (int j = 1; 2 * j - 1 < w; j++)
        even[j] = src[2 * j - 1];
}

/* The inverse: padded row src's columns 1 .. w back to a plane row. */
static void join_padded_row(const float *restrict src, int half, float *restrict dst, int w)
{
    const float *restrict even = src, *restrict odd = src + half;
    VECTOR_LOOP
    for (int j = 0; 2 * j < w; j++)
        dst[2 * j] = odd[j];
    VECTOR_LOOP
    for (int j = 1; 2 * j - 1 < w; j++)
        dst[2 * j - 1] = even[j];
}

/* Unpadded rows (outputs and their gradient, 2 tw columns): column x in
 * E[x / 2] or O[x / 2]. */
static void split_row(const float *restrict src, int w, float *restrict dst, int half)
{
    VECTOR_LOOP
    for (int j = 0; 2 * j < w; j++)
        dst[j] = src[2 * j];
    VECTOR_LOOP
    for (int j = 0; 2 * j + 1 < w; j++)
        dst[half + j] = src[2 * j + 1];
}

static void join_row(const float *restrict src, int half, float *restrict dst, int w)
{
    VECTOR_LOOP
    for (int j = 0; 2 * j < w; j++)
        dst[2 * j] = src[j];
    VECTOR_LOOP
    for (int j = 0; 2 * j + 1 < w; j++)
        dst[2 * j + 1] = src[half + j];
}

/* Row r's slice of step buffer j (parity-major: rows 0, 2, 4, .. then
 * 1, 3, 5, ..), rows of tw; `rows` rows per parity. */
static float *step_row(const struct wino_plan *p, int j, int r, int rows)
{
    return p->steps + ((size_t)(2 * j + r % 2) * rows + r / 2) * p->tw;
}

/* V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], for every tile
 * of one plane into v[xi * stride + tile]. Padded rows 0 and past h are
 * the zero padding. */
static void input_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *plane,
                        float *v, size_t stride)
{
    int tw = p->tw, half = tw + 1, rows = p->th + 1;
    memset(p->row, 0, (size_t)2 * half * sizeof(float));
    for (int r = 0; r < 2 * rows; r++) {
        float *restrict h0 = step_row(p, 0, r, rows), *restrict h1 = step_row(p, 1, r, rows);
        float *restrict h2 = step_row(p, 2, r, rows), *restrict h3 = step_row(p, 3, r, rows);
        if (r < 1 || r > cv->h) {
            memset(h0, 0, tw * sizeof(float)), memset(h1, 0, tw * sizeof(float));
            memset(h2, 0, tw * sizeof(float)), memset(h3, 0, tw * sizeof(float));
            continue;
        }
        split_padded_row(plane + (size_t)(r - 1) * cv->w, cv->w, p->row, half);
        const float *restrict e = p->row, *restrict o = p->row + half;
        VECTOR_LOOP
        for (int tx = 0; tx < tw; tx++) { /* d B */
            h0[tx] = e[tx] - e[tx + 1];
            h1[tx] = o[tx] + e[tx + 1];
            h2[tx] = e[tx + 1] - o[tx];
            h3[tx] = o[tx] - o[tx + 1];
        }
    }
    for (int j = 0; j < 4; j++) { /* B^T (d B), rows even[t], odd[t], even[t+tw], odd[t+tw] */
        const float *restrict a = step_row(p, j, 0, rows), *restrict b = step_row(p, j, 1, rows);
        float *restrict o0 = v + (size_t)j * stride, *restrict o1 = o0 + 4 * stride;
        float *restrict o2 = o1 + 4 * stride, *restrict o3 = o2 + 4 * stride;
        VECTOR_LOOP
        for (int t = 0; t < p->tiles; t++) {
            o0[t] = a[t] - a[t + tw];
            o1[t] = b[t] + a[t + tw];
            o2[t] = a[t + tw] - b[t];
            o3[t] = b[t] - b[t + tw];
        }
    }
}

/* Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], for every tile of one plane from
 * m[xi * stride + tile]; the 2 th x 2 tw result is clipped to h x w. */
static void output_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *m,
                         size_t stride, float *plane)
{
    int tw = p->tw, rows = p->th;
    for (int j = 0; j < 4; j++) { /* A^T M: output rows 2ty and 2ty + 1 */
        const float *restrict a = m + (size_t)j * stride, *restrict b = a + 4 * stride;
        const float *restrict c = b + 4 * stride, *restrict d = c + 4 * stride;
        float *restrict s0 = step_row(p, j, 0, rows), *restrict s1 = step_row(p, j, 1, rows);
        VECTOR_LOOP
        for (int t = 0; t < p->tiles; t++) {
            s0[t] = a[t] + b[t] + c[t];
            s1[t] = b[t] - c[t] - d[t];
        }
    }
    for (int y = 0; y < cv->h; y++) { /* (A^T M) A, row by row */
        const float *restrict s0 = step_row(p, 0, y, rows), *restrict s1 = step_row(p, 1, y, rows);
        const float *restrict s2 = step_row(p, 2, y, rows), *restrict s3 = step_row(p, 3, y, rows);
        float *restrict e = p->row, *restrict o = p->row + tw;
        VECTOR_LOOP
        for (int tx = 0; tx < tw; tx++) {
            e[tx] = s0[tx] + s1[tx] + s2[tx];
            o[tx] = s1[tx] - s2[tx] - s3[tx];
        }
        join_row(p->row, tw, plane + (size_t)y * cv->w, cv->w);
    }
}

/* dM = A dY A^T (the adjoint of output_tiles) for every tile of one plane
 * of dy: rows past h and the odd column past w are zero, clipped outputs
 * having no gradient. */
static void gradient_tiles(const struct wino_conv *cv, const struct wino_plan *p,
                           const float *plane, float *dm, size_t stride)
{
    int tw = p->tw, rows = p->th;
    memset(p->row, 0, (size_t)2 * tw * sizeof(float));
    for (int y = 0; y < 2 * rows; y++) { /* g A^T: e, e + o, e - o, -o per tile */
        float *restrict g0 = step_row(p, 0, y, rows), *restrict g1 = step_row(p, 1, y, rows);
        float *restrict g2 = step_row(p, 2, y, rows), *restrict g3 = step_row(p, 3, y, rows);
        if (y >= cv->h) {
            memset(g0, 0, tw * sizeof(float)), memset(g1, 0, tw * sizeof(float));
            memset(g2, 0, tw * sizeof(float)), memset(g3, 0, tw * sizeof(float));
            continue;
        }
        split_row(plane + (size_t)y * cv->w, cv->w, p->row, tw);
        const float *restrict e = p->row, *restrict o = p->row + tw;
        VECTOR_LOOP
        for (int tx = 0; tx < tw; tx++) {
            g0[tx] = e[tx];
            g1[tx] = e[tx] + o[tx];
            g2[tx] = e[tx] - o[tx];
            g3[tx] = -o[tx];
        }
    }
    for (int j = 0; j < 4; j++) { /* A (g A^T): rows a, a + b, a - b, -b */
        const float *restrict a = step_row(p, j, 0, rows), *restrict b = step_row(p, j, 1, rows);
        float *restrict o0 = dm + (size_t)j * stride, *restrict o1 = o0 + 4 * stride;
        float *restrict o2 = o1 + 4 * stride, *restrict o3 = o2 + 4 * stride;
        VECTOR_LOOP
        for (int t = 0; t < p->tiles; t++) {
            o0[t] = a[t];
            o1[t] = a[t] + b[t];
            o2[t] = a[t] - b[t];
            o3[t] = -b[t];
        }
    }
}

/* dx = the sum over tiles of B dV B^T (the adjoint of input_tiles) for one
 * plane, from dv[xi * stride + tile]. Tiles overlap by two rows and two
 * columns: tile row ty's last two rows land on tile row ty + 1's first two
 * (t - tw below), and in a row each tile's last two columns on the next
 * tile's first two (E[tx + 1], O[tx + 1]: a second loop, so that neither
 * carries a dependence from one tx to the next). */
static void scatter_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *dv,
                          size_t stride, float *plane)
{
    int tw = p->tw, half = tw + 1, rows = p->th + 1, tiles = p->tiles;
    for (int j = 0; j < 4; j++) { /* B dV: rows x0, x1 - x2 + x3, x1 + x2 - x0, -x3 */
        const float *restrict x0 = dv + (size_t)j * stride, *restrict x1 = x0 + 4 * stride;
        const float *restrict x2 = x1 + 4 * stride, *restrict x3 = x2 + 4 * stride;
        float *restrict even = step_row(p, j, 0, rows), *restrict odd = step_row(p, j, 1, rows);
        VECTOR_LOOP
        for (int t = 0; t < tiles; t++) {
            even[t] = x0[t];
            odd[t] = x1[t] - x2[t] + x3[t];
        }
        memset(even + tiles, 0, tw * sizeof(float)), memset(odd + tiles, 0, tw * sizeof(float));
        VECTOR_LOOP
        for (int t = 0; t < tiles; t++) {
            even[t + tw] += x1[t] + x2[t] - x0[t];
            odd[t + tw] -= x3[t];
        }
    }
    for (int r = 1; r <= cv->h; r++) { /* (B dV) B^T, padded row by row */
        const float *restrict z0 = step_row(p, 0, r, rows), *restrict z1 = step_row(p, 1, r, rows);
        const float *restrict z2 = step_row(p, 2, r, rows), *restrict z3 = step_row(p, 3, r, rows);
        float *restrict e = p->row, *restrict o = p->row + half;
        e[tw] = o[tw] = 0.0f;
        VECTOR_LOOP
        for (int tx = 0; tx < tw; tx++) {
            e[tx] = z0[tx];
            o[tx] = z1[tx] - z2[tx] + z3[tx];
        }
        VECTOR_LOOP
        for (int tx = 0; tx < tw; tx++) {
            e[tx + 1] += z1[tx] + z2[tx] - z0[tx];
            o[tx + 1] -= z3[tx];
        }
        join_padded_row(p->row, half, plane + (size_t)(r - 1) * cv->w, cv->w);
    }
}

/* ---- passes ---- */

struct wino_chunk {
    int first, count; /* images */
    size_t tiles;     /* count x tiles per image: T of the GEMMs */
};

static size_t plane_offset(const struct wino_conv *cv, int channel, int batch, int image)
{
    return ((size_t)channel * batch + image) * cv->h * cv->w;
}

/* V of the chunk's images from x. */
static void chunk_input_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *x,
                              int batch, struct wino_chunk c)
{
    size_t stride = (size_t)cv->in_c * c.tiles;
    for (int ch = 0; ch < cv->in_c; ch++)
        for (int b = 0; b < c.count; b++)
            input_tiles(cv, p, x + plane_offset(cv, ch, batch, c.first + b),
                        p->v + ch * c.tiles + (size_t)b * p->tiles, stride);
}

void wino_forward(const struct wino_conv *cv, const float *weights, const float *x, float *y,
                  int batch, float *work)
{
    struct wino_plan p;
    plan_layout(cv, batch, work, &p);
    filter_transform(cv, weights, p.u);
    int in_c = cv->in_c, out_c = cv->out_c;
    for (int first = 0; first < batch; first += p.chunk) {
        int count = batch - first < p.chunk ? batch - first : p.chunk;
        struct wino_chunk c = {first, count, (size_t)count * p.tiles};
        int n = (int)c.tiles;
        chunk_input_tiles(cv, &p, x, batch, c);
        for (int xi = 0; xi < WINO_TILE; xi++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out_c, n, in_c, 1.0f,
                        p.u + (size_t)xi * out_c * in_c, in_c, p.v + (size_t)xi * in_c * n, n, 0.0f,
                        p.m + (size_t)xi * out_c * n, n);
        for (int k = 0; k < out_c; k++)
            for (int b = 0; b < count; b++)
                output_tiles(cv, &p, p.m + k * c.tiles + (size_t)b * p.tiles,
                             (size_t)out_c * c.tiles, y + plane_offset(cv, k, batch, first + b));
    }
}

/* dU += dM V^T for the chunk, then (with dx) dV = U^T dM into V's place,
 * each xi's V read by the first GEMM before the second overwrites it. */
static void chunk_gemms(const struct wino_conv *cv, const struct wino_plan *p, int n,
                        int first_chunk, int want_dx)
{
    int in_c = cv->in_c, out_c = cv->out_c;
    for (int xi = 0; xi < WINO_TILE; xi++) {
        float *v = p->v + (size_t)xi * in_c * n, *dm = p->m + (size_t)xi * out_c * n;
        float *du = p->du + (size_t)xi * out_c * in_c;
        const float *u = p->u + (size_t)xi * out_c * in_c;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out_c, in_c, n, 1.0f, dm, n, v, n,
                    first_chunk ? 0.0f : 1.0f, du, in_c);
        if (want_dx)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in_c, n, out_c, 1.0f, u, in_c, dm,
                        n, 0.0f, v, n);
    }
}

void wino_backward(const struct wino_conv *cv, const float *weights, const float *x,
                   const float *dy, float *dweights, float *dx, int batch, float *work)
{
    assert(batch >= 1); /* with none, no chunk would write p.du that dweights reads */
    struct wino_plan p;
    plan_layout(cv, batch, work, &p);
    filter_transform(cv, weights, p.u);
    for (int first = 0; first < batch; first += p.chunk) {
        int count = batch - first < p.chunk ? batch - first : p.chunk;
        struct wino_chunk c = {first, count, (size_t)count * p.tiles};
        chunk_input_tiles(cv, &p, x, batch, c);
        for (int k = 0; k < cv->out_c; k++)
            for (int b = 0; b < count; b++)
                gradient_tiles(cv, &p, dy + plane_offset(cv, k, batch, first + b),
                               p.m + k * c.tiles + (size_t)b * p.tiles,
                               (size_t)cv->out_c * c.tiles);
        chunk_gemms(cv, &p, (int)c.tiles, first == 0, dx != NULL);
        for (int ch = 0; dx && ch < cv->in_c; ch++)
            for (int b = 0; b < count; b++)
                scatter_tiles(cv, &p, p.v + ch * c.tiles + (size_t)b * p.tiles,
                              (size_t)cv->in_c * c.tiles,
                              dx + plane_offset(cv, ch, batch, first + b));
    }
    filter_gradient(cv, p.du, dweights);
}
