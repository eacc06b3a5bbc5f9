/* cpu/winograd.c — F(2x2, 3x3) convolutions (see winograd.h).
 *
 * Lavin & Gray (arXiv:1509.09308, section 4): every 2x2 output tile is
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
 * cache. Each plane goes through a small zero-bordered copy first: the
 * transforms then read 4x4 windows without bounds checks, and maps of odd
 * size simply get a last tile half in the padding. */
#include "kernels/cpu/winograd.h"

#include <cblas.h>
#include <string.h>

/* As in cpu/model.c: GCC's -O2 cost model leaves these loops scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* The loops over a row's tiles touch disjoint buffers (planes, padded
 * copies, transform rows); GCC cannot prove it for this many pointers and
 * left them scalar (perf: half of the transforms' time). */
#define VECTOR_LOOP _Pragma("GCC ivdep")

#define WINO_TILE 16 /* 4 x 4 positions xi per tile */
#ifndef WINO_CHUNK_BYTES /* overridable to measure other sizes */
#define WINO_CHUNK_BYTES (1u << 20)
#endif

/* Tiles of a map and the scratch laid out in `work`. */
struct wino_plan {
    int th, tw, tiles;        /* tile rows, columns, per image */
    int pad_w;                /* row length of the zero-bordered input copy */
    int chunk;                /* images per chunk */
    float *u, *du;            /* 16 x K x C: transformed filter and its gradient */
    float *in_pad, *out_pad;  /* (2 th + 2) x pad_w input copy; 2 th x 2 tw output */
    float *dx_pad, *rows;     /* like in_pad, accumulating dx; 16 x pad_w of row sums */
    float *v, *m;             /* 16 x C x T and 16 x K x T of one chunk */
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
    size_t per_image = (size_t)WINO_TILE * wino_tiles(cv, 1) * (cv->in_c + cv->out_c) * 4;
    size_t n = WINO_CHUNK_BYTES / per_image;
    return n < 1 ? 1 : n > (size_t)batch ? batch : (int)n;
}

/* Lays the scratch out from work (NULL: only sizes it); returns its floats. */
static size_t plan_layout(const struct wino_conv *cv, int batch, float *work, struct wino_plan *p)
{
    p->th = (cv->h + 1) / 2;
    p->tw = (cv->w + 1) / 2;
    p->tiles = p->th * p->tw;
    p->pad_w = 2 * p->tw + 2;
    p->chunk = wino_chunk_images(cv, batch);
    size_t filter = (size_t)WINO_TILE * cv->out_c * cv->in_c, pad = (2 * p->th + 2) * p->pad_w;
    size_t chunk_tiles = (size_t)p->chunk * p->tiles;
    size_t sizes[] = {filter, filter, pad, 4 * (size_t)p->th * p->tw, pad, 16 * (size_t)p->pad_w,
                      WINO_TILE * cv->in_c * chunk_tiles, WINO_TILE * cv->out_c * chunk_tiles};
    float **slots[] = {&p->u, &p->du, &p->in_pad, &p->out_pad, &p->dx_pad, &p->rows, &p->v, &p->m};
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
 * A tile's window starts at an even column, so every padded row is kept
 * split into its even and odd columns (E | O, each half pad_w / 2 long):
 * the window's columns 2tx .. 2tx+3 are then E[tx], O[tx], E[tx+1],
 * O[tx+1], and every loop below runs over tx with unit stride, which GCC
 * vectorises; the interleaved form (stride-2 accesses) stayed scalar and
 * made the transforms a third of a resnet20 step (perf). The split happens
 * once per pixel, in the copy between a plane and its padded form. */

/* Plane row src (w values) into padded row dst's halves, one column of
 * padding on the left: plane column x is padded column x + 1. */
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

/* Unpadded rows (an output or output-gradient row of 2 tw values): plane
 * column x in E[x / 2] or O[x / 2]. */
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

/* V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], for every tile
 * of one plane into v[xi * stride + tile]: the rows' combination over whole
 * padded rows, then the columns' per tile. */
static void input_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *plane,
                        float *v, size_t stride)
{
    int pw = p->pad_w, half = pw / 2, tw = p->tw;
    for (int y = 0; y < cv->h; y++)
        split_padded_row(plane + (size_t)y * cv->w, cv->w, p->in_pad + (size_t)(y + 1) * pw, half);
    float *restrict t0 = p->rows, *restrict t1 = t0 + pw, *restrict t2 = t1 + pw,
                    *restrict t3 = t2 + pw;
    for (int ty = 0; ty < p->th; ty++, v += tw) {
        const float *r0 = p->in_pad + (size_t)(2 * ty) * pw, *r1 = r0 + pw, *r2 = r1 + pw,
                    *r3 = r2 + pw;
        VECTOR_LOOP
        for (int j = 0; j < pw; j++) {
            t0[j] = r0[j] - r2[j];
            t1[j] = r1[j] + r2[j];
            t2[j] = r2[j] - r1[j];
            t3[j] = r1[j] - r3[j];
        }
        const float *t[4] = {t0, t1, t2, t3};
        for (int i = 0; i < 4; i++) {
            const float *restrict e = t[i], *restrict o = t[i] + half;
            float *restrict o0 = v + (size_t)(4 * i) * stride, *restrict o1 = o0 + stride,
                            *restrict o2 = o1 + stride, *restrict o3 = o2 + stride;
            VECTOR_LOOP
            for (int tx = 0; tx < tw; tx++) {
                o0[tx] = e[tx] - e[tx + 1];
                o1[tx] = o[tx] + e[tx + 1];
                o2[tx] = e[tx + 1] - o[tx];
                o3[tx] = o[tx] - o[tx + 1];
            }
        }
    }
}

/* Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], for every tile of one plane from
 * m[xi * stride + tile]; the 2 th x 2 tw result is clipped to h x w. */
static void output_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *m,
                         size_t stride, float *plane)
{
    int tw = p->tw, ow = 2 * tw;
    for (int ty = 0; ty < p->th; ty++, m += tw) {
        float *restrict s0 = p->rows, *restrict s1 = s0 + 4 * tw; /* A^T M: 2 rows x 4 cols */
        for (int j = 0; j < 4; j++) {
            const float *restrict a = m + (size_t)j * stride, *restrict b = a + 4 * stride;
            const float *restrict c = b + 4 * stride, *restrict d = c + 4 * stride;
            VECTOR_LOOP
            for (int tx = 0; tx < tw; tx++) {
                s0[j * tw + tx] = a[tx] + b[tx] + c[tx];
                s1[j * tw + tx] = b[tx] - c[tx] - d[tx];
            }
        }
        float *restrict y0 = p->out_pad + (size_t)(2 * ty) * ow, *restrict y1 = y0 + ow;
        VECTOR_LOOP
        for (int tx = 0; tx < tw; tx++) {
            y0[tx] = s0[tx] + s0[tw + tx] + s0[2 * tw + tx];
            y0[tw + tx] = s0[tw + tx] - s0[2 * tw + tx] - s0[3 * tw + tx];
            y1[tx] = s1[tx] + s1[tw + tx] + s1[2 * tw + tx];
            y1[tw + tx] = s1[tw + tx] - s1[2 * tw + tx] - s1[3 * tw + tx];
        }
    }
    for (int y = 0; y < cv->h; y++)
        join_row(p->out_pad + (size_t)y * ow, tw, plane + (size_t)y * cv->w, cv->w);
}

/* One row (E | O) of A g times A^T: (e, e + o, e - o, -o) per tile. */
static void gradient_row(const float *restrict r, int tw, float *restrict dm, size_t stride)
{
    float *restrict o0 = dm, *restrict o1 = o0 + stride, *restrict o2 = o1 + stride,
                    *restrict o3 = o2 + stride;
    VECTOR_LOOP
    for (int tx = 0; tx < tw; tx++) {
        float e = r[tx], o = r[tw + tx];
        o0[tx] = e;
        o1[tx] = e + o;
        o2[tx] = e - o;
        o3[tx] = -o;
    }
}

/* dM = A dY A^T (the adjoint of output_tiles) for every tile of one plane
 * of dy; out_pad's cells past h x w stay zero: clipped outputs have no
 * gradient. */
static void gradient_tiles(const struct wino_conv *cv, const struct wino_plan *p,
                           const float *plane, float *dm, size_t stride)
{
    int tw = p->tw, ow = 2 * tw;
    for (int y = 0; y < cv->h; y++)
        split_row(plane + (size_t)y * cv->w, cv->w, p->out_pad + (size_t)y * ow, tw);
    float *restrict a = p->rows, *restrict b = a + 2 * tw; /* rows of A g */
    for (int ty = 0; ty < p->th; ty++, dm += tw) {
        const float *restrict g0 = p->out_pad + (size_t)(2 * ty) * ow, *restrict g1 = g0 + ow;
        /* A g: rows g0, g0 + g1, g0 - g1, -g1 (each E | O), then A^T per row */
        gradient_row(g0, tw, dm, stride);
        VECTOR_LOOP
        for (int j = 0; j < ow; j++) {
            a[j] = g0[j] + g1[j];
            b[j] = g0[j] - g1[j];
        }
        gradient_row(a, tw, dm + 4 * stride, stride);
        gradient_row(b, tw, dm + 8 * stride, stride);
        VECTOR_LOOP
        for (int j = 0; j < ow; j++)
            a[j] = -g1[j];
        gradient_row(a, tw, dm + 12 * stride, stride);
    }
}

/* Adds one row of B dV (4 columns of tw tiles) times B^T into a padded
 * row (E | O): per tile x0, x1 - x2 + x3, x1 + x2 - x0, -x3 at its 4
 * columns, the last two on the next tile's first two. */
static void scatter_row(const float *restrict c, int tw, float *restrict row, int half)
{
    const float *restrict x0 = c, *restrict x1 = c + tw, *restrict x2 = x1 + tw,
                          *restrict x3 = x2 + tw;
    float *restrict e = row, *restrict o = row + half;
    VECTOR_LOOP
    for (int tx = 0; tx < tw; tx++) {
        e[tx] += x0[tx];
        o[tx] += x1[tx] - x2[tx] + x3[tx];
    }
    VECTOR_LOOP
    for (int tx = 0; tx < tw; tx++) {
        e[tx + 1] += x1[tx] + x2[tx] - x0[tx];
        o[tx + 1] -= x3[tx];
    }
}

/* dx = the sum over tiles of B dV B^T (the adjoint of input_tiles) for one
 * plane, from dv[xi * stride + tile]: tiles overlap, so they accumulate in
 * dx_pad, whose interior is the plane's gradient. Each tile's right half
 * lands on the next tile's left half: two loops, so neither carries a
 * dependence from one tx to the next. */
static void scatter_tiles(const struct wino_conv *cv, const struct wino_plan *p, const float *dv,
                          size_t stride, float *plane)
{
    int pw = p->pad_w, half = pw / 2, tw = p->tw;
    memset(p->dx_pad, 0, (size_t)(2 * p->th + 2) * pw * sizeof(float));
    float *restrict c = p->rows; /* 4 rows x 4 columns of B dV, tw tiles each */
    for (int ty = 0; ty < p->th; ty++, dv += tw) {
        /* rows of B dV: x0, x1 - x2 + x3, x1 + x2 - x0, -x3 (x_r: dV's row r) */
        for (int j = 0; j < 4; j++) {
            const float *restrict x0 = dv + (size_t)j * stride, *restrict x1 = x0 + 4 * stride;
            const float *restrict x2 = x1 + 4 * stride, *restrict x3 = x2 + 4 * stride;
            float *restrict c0 = c + j * tw, *restrict c1 = c0 + 4 * tw, *restrict c2 = c1 + 4 * tw,
                            *restrict c3 = c2 + 4 * tw;
            VECTOR_LOOP
            for (int tx = 0; tx < tw; tx++) {
                c0[tx] = x0[tx];
                c1[tx] = x1[tx] - x2[tx] + x3[tx];
                c2[tx] = x1[tx] + x2[tx] - x0[tx];
                c3[tx] = -x3[tx];
            }
        }
        for (int i = 0; i < 4; i++)
            scatter_row(c + 4 * i * tw, tw, p->dx_pad + (size_t)(2 * ty + i) * pw, half);
    }
    for (int y = 0; y < cv->h; y++)
        join_padded_row(p->dx_pad + (size_t)(y + 1) * pw, half, plane + (size_t)y * cv->w, cv->w);
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
static void chunk_input_tiles(const struct wino_conv *cv, const struct wino_plan *p,
                              const float *x, int batch, struct wino_chunk c)
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
    memset(p.in_pad, 0, (size_t)(2 * p.th + 2) * p.pad_w * sizeof(float));
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
static void chunk_gemms(const struct wino_conv *cv, const struct wino_plan *p, int n, int first_chunk,
                        int want_dx)
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
    struct wino_plan p;
    plan_layout(cv, batch, work, &p);
    filter_transform(cv, weights, p.u);
    memset(p.in_pad, 0, (size_t)(2 * p.th + 2) * p.pad_w * sizeof(float));
    memset(p.out_pad, 0, (size_t)4 * p.th * p.tw * sizeof(float));
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
                              (size_t)cv->in_c * c.tiles, dx + plane_offset(cv, ch, batch, first + b));
    }
    filter_gradient(cv, p.du, dweights);
}
