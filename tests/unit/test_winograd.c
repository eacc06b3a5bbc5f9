/* test_winograd.c — kernels/cpu/winograd.c's F(2x2, 3x3) convolution
 * against the direct definition (nested loops in double): forward, input
 * gradient and weight gradient, padding 1, on shapes whose channels and
 * sizes are no multiple of the tiles (odd maps get half-padding tiles),
 * batch 1 and 3, and one whose batch spans several chunks.
 *
 * Tolerance: each value within 2e-6 of the sum of the absolute values of
 * the products it adds up (about 17 float roundings of that magnitude; the
 * transforms add and halve a few times per tile). Measured: at most 5.4e-7
 * (the 2x3 weight gradient), 1e-7 typical. */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/cpu/winograd.h"
#include "kernels/rng.h"
#include "tests/unit/check.h"

#define REL_TOL 2e-6

struct shape {
    int c, k, h, w, batch;
};

/* x[c][b][y][x] of a C x B x H x W map, 0 in the padding. */
static double at(const float *m, struct shape s, int ch, int b, int y, int x)
{
    if (y < 0 || y >= s.h || x < 0 || x >= s.w) return 0;
    return m[(((size_t)ch * s.batch + b) * s.h + y) * s.w + x];
}

/* The largest |winograd - exact| / (sum |products| + tiny) over n values. */
static double worst(const float *got, const double *exact, const double *mag, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - exact[i]) / (mag[i] + 1e-30);
        w = e > w ? e : w;
    }
    return w;
}

static void direct_forward(struct shape s, const float *x, const float *wt, double *y, double *mag)
{
    for (int k = 0; k < s.k; k++)
        for (int b = 0; b < s.batch; b++)
            for (int i = 0; i < s.h; i++)
                for (int j = 0; j < s.w; j++) {
                    double sum = 0, abs = 0;
                    for (int c = 0; c < s.c; c++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                double p = wt[((size_t)k * s.c + c) * 9 + ky * 3 + kx] *
                                           at(x, s, c, b, i + ky - 1, j + kx - 1);
                                sum += p;
                                abs += fabs(p);
                            }
                    size_t o = (((size_t)k * s.batch + b) * s.h + i) * s.w + j;
                    y[o] = sum;
                    mag[o] = abs;
                }
}

static void direct_dx(struct shape s, const float *dy, const float *wt, double *dx, double *mag)
{
    for (int c = 0; c < s.c; c++)
        for (int b = 0; b < s.batch; b++)
            for (int i = 0; i < s.h; i++)
                for (int j = 0; j < s.w; j++) {
                    double sum = 0, abs = 0;
                    for (int k = 0; k < s.k; k++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                double p = wt[((size_t)k * s.c + c) * 9 + ky * 3 + kx] *
                                           at(dy, s, k, b, i - ky + 1, j - kx + 1);
                                sum += p;
                                abs += fabs(p);
                            }
                    size_t o = (((size_t)c * s.batch + b) * s.h + i) * s.w + j;
                    dx[o] = sum;
                    mag[o] = abs;
                }
}

static void direct_dw(struct shape s, const float *x, const float *dy, double *dw, double *mag)
{
    for (int k = 0; k < s.k; k++)
        for (int c = 0; c < s.c; c++)
            for (int t = 0; t < 9; t++) {
                double sum = 0, abs = 0;
                for (int b = 0; b < s.batch; b++)
                    for (int i = 0; i < s.h; i++)
                        for (int j = 0; j < s.w; j++) {
                            double p = at(dy, s, k, b, i, j) *
                                       at(x, s, c, b, i + t / 3 - 1, j + t % 3 - 1);
                            sum += p;
                            abs += fabs(p);
                        }
                dw[((size_t)k * s.c + c) * 9 + t] = sum;
                mag[((size_t)k * s.c + c) * 9 + t] = abs;
            }
}

static float *random_floats(struct rng *r, size_t n)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; p && i < n; i++)
        p[i] = rng_uniform_float(r) * 2.0f - 1.0f;
    return p;
}

static void check_shape(struct shape s)
{
    struct wino_conv cv = {s.c, s.k, s.h, s.w};
    size_t nx = (size_t)s.c * s.batch * s.h * s.w, ny = (size_t)s.k * s.batch * s.h * s.w;
    size_t nw = (size_t)s.k * s.c * 9, most = nx > ny ? nx : ny;
    most = most > nw ? most : nw;
    struct rng r;
    rng_seed(&r, (uint64_t)(s.c * 1000 + s.k * 100 + s.h * 10 + s.w), 7);
    float *x = random_floats(&r, nx), *wt = random_floats(&r, nw), *dy = random_floats(&r, ny);
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dw = malloc(nw * sizeof(float));
    float *work = malloc(wino_work_floats(&cv, s.batch) * sizeof(float));
    double *exact = malloc(most * sizeof(double)), *mag = malloc(most * sizeof(double));
    CHECK(x && wt && dy && y && dx && dw && work && exact && mag);
    if (!(x && wt && dy && y && dx && dw && work && exact && mag)) exit(1);

    wino_forward(&cv, wt, x, y, s.batch, work);
    direct_forward(s, x, wt, exact, mag);
    double e_y = worst(y, exact, mag, ny);
    wino_backward(&cv, wt, x, dy, dw, dx, s.batch, work);
    direct_dx(s, dy, wt, exact, mag);
    double e_dx = worst(dx, exact, mag, nx);
    direct_dw(s, x, dy, exact, mag);
    double e_dw = worst(dw, exact, mag, nw);
    printf("C %d K %d %dx%d batch %d (chunk %d): relative error y %.2e dx %.2e dw %.2e\n", s.c, s.k,
           s.h, s.w, s.batch, wino_chunk_images(&cv, s.batch), e_y, e_dx, e_dw);
    CHECK_MSG(e_y <= REL_TOL, "forward %.3g", e_y);
    CHECK_MSG(e_dx <= REL_TOL, "input gradient %.3g", e_dx);
    CHECK_MSG(e_dw <= REL_TOL, "weight gradient %.3g", e_dw);

    /* Without dx the weight gradient is the same, bit for bit. */
    float *dw2 = malloc(nw * sizeof(float));
    CHECK(dw2 != NULL);
    if (dw2) {
        wino_backward(&cv, wt, x, dy, dw2, NULL, s.batch, work);
        CHECK(memcmp(dw, dw2, nw * sizeof(float)) == 0);
    }
    free(dw2);
    free(x), free(wt), free(dy), free(y), free(dx), free(dw), free(work), free(exact), free(mag);
}

int main(void)
{
    struct shape shapes[] = {
        {3, 5, 7, 9, 1},    /* odd maps: last tile row and column half padding */
        {5, 3, 6, 5, 3},    /* even height, odd width, batch 3 */
        {1, 1, 1, 1, 1},    /* one pixel: a single tile, three quarters padding */
        {7, 11, 2, 3, 3},   /* narrower than a tile's input window */
        {17, 9, 13, 11, 3}, /* channels past a SIMD width */
        {64, 48, 14, 14, 3} /* several chunks: the weight gradient accumulates */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_shape(shapes[i]);
    struct wino_conv big = {64, 48, 14, 14};
    CHECK_MSG(wino_chunk_images(&big, 3) < 3, "the last shape must span chunks (%d per chunk)",
              wino_chunk_images(&big, 3));
    return check_report();
}
