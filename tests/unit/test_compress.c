/* test_compress.c — kernels/compress: hand-checked encodings of each method,
 * exact topk error feedback, bounded int8 error, sign scale and bits, error
 * feedback tracking the sum of inputs over many steps, and the decoder's
 * rejection of malformed payloads. */
#include "kernels/compress.h"
#include "kernels/rng.h"
#include "tests/unit/check.h"

static uint8_t buf[1 << 16];

static void test_sizes(void)
{
    char err[256];
    enum compress_method m;
    CHECK(compress_method_parse("sign", &m, err, sizeof err) == 0 && m == COMPRESS_SIGN);
    CHECK(compress_method_parse("fp16", &m, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "\"fp16\"");
    CHECK(compress_topk_count(100, 0.01) == 1);
    CHECK(compress_topk_count(1000, 0.1) == 100);
    CHECK(compress_topk_count(10, 1e-9) == 1);
    CHECK(compress_size(COMPRESS_TOPK, 1000, 0.1) == 16 + 800);
    CHECK(compress_size(COMPRESS_INT8, 1000, 0) == 20 + 1000);
    CHECK(compress_size(COMPRESS_SIGN, 1001, 0) == 20 + 126);
    CHECK(compress_size(COMPRESS_TOPK, 10, 1.5) == 0);
    float x[4] = {1, 2, 3, 4};
    size_t len;
    CHECK(compress_encode(COMPRESS_TOPK, 0, x, NULL, 4, buf, sizeof buf, &len, err, sizeof err) ==
          -1);
    CHECK_CONTAINS(err, "ratio");
    CHECK(compress_encode(COMPRESS_INT8, 0, x, NULL, 4, buf, 23, &len, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "24 needed");
}

static void test_topk_by_hand(void)
{
    char err[256];
    float x[6] = {0.1f, -5.0f, 2.0f, -2.0f, 0.0f, 3.0f}, r[6] = {0}, out[6];
    size_t len;
    /* k = round(0.5 * 6) = 3: -5 and 3, then the tie 2 / -2 goes to index 2. */
    CHECK(compress_encode(COMPRESS_TOPK, 0.5, x, r, 6, buf, sizeof buf, &len, err, sizeof err) ==
          0);
    CHECK(len == 16 + 24);
    uint32_t idx[3];
    memcpy(idx, buf + 16, 12);
    CHECK(idx[0] == 1 && idx[1] == 2 && idx[2] == 5);
    struct compress_info info;
    CHECK(compress_inspect(buf, len, &info, err, sizeof err) == 0);
    CHECK(info.method == COMPRESS_TOPK && info.n == 6 && info.k == 3);
    CHECK(compress_decode(buf, len, out, 6, false, err, sizeof err) == 0);
    float want[6] = {0, -5, 2, 0, 0, 3}, want_r[6] = {0.1f, 0, 0, -2, 0, 0};
    CHECK(memcmp(out, want, sizeof want) == 0);
    CHECK(memcmp(r, want_r, sizeof want_r) == 0);
    /* add = true accumulates into the target. */
    CHECK(compress_decode(buf, len, out, 6, true, err, sizeof err) == 0);
    CHECK(out[1] == -10.0f && out[0] == 0.0f);
}

/* residual_new + decoded == x + residual_old, bit for bit, every step. */
static void test_topk_exact_feedback(void)
{
    enum { N = 5000 };
    static float x[N], r[N], in[N], out[N];
    char err[256];
    struct rng g;
    rng_seed(&g, 5, 0);
    int exact = 1;
    for (int step = 0; step < 20; step++) {
        for (int i = 0; i < N; i++) {
            x[i] = (float)rng_normal(&g);
            in[i] = x[i] + r[i];
        }
        size_t len;
        CHECK(compress_encode(COMPRESS_TOPK, 0.05, x, r, N, buf, sizeof buf, &len, err,
                              sizeof err) == 0);
        CHECK(compress_decode(buf, len, out, N, false, err, sizeof err) == 0);
        float kept_min = INFINITY, dropped_max = 0;
        int kept = 0;
        for (int i = 0; i < N; i++) {
            exact &= r[i] + out[i] == in[i];
            if (out[i] != 0.0f) {
                kept++;
                kept_min = fminf(kept_min, fabsf(in[i]));
            } else {
                dropped_max = fmaxf(dropped_max, fabsf(in[i]));
            }
        }
        CHECK(kept == 250);
        CHECK(kept_min >= dropped_max);
    }
    CHECK(exact);
}

static void test_int8(void)
{
    char err[256];
    /* scale = 1/127; q = rint(127 x): 127, -64 (−63.5 to even), 32, 0. */
    float x[4] = {1.0f, -0.5f, 0.25f, 0.0f}, r[4] = {0}, out[4];
    size_t len;
    CHECK(compress_encode(COMPRESS_INT8, 0, x, r, 4, buf, sizeof buf, &len, err, sizeof err) == 0);
    CHECK(len == 24);
    float scale;
    memcpy(&scale, buf + 16, 4);
    CHECK(scale == 1.0f / 127.0f);
    CHECK((int8_t)buf[20] == 127 && (int8_t)buf[21] == -64 && (int8_t)buf[22] == 32 &&
          buf[23] == 0);
    CHECK(compress_decode(buf, len, out, 4, false, err, sizeof err) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK(fabsf(out[i] - x[i]) <= scale / 2);
        CHECK_NEAR(r[i] + out[i], x[i], 1e-7);
    }

    enum { N = 4096 };
    static float y[N], yr[N], yin[N], yout[N];
    struct rng g;
    rng_seed(&g, 9, 0);
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < N; i++) {
            y[i] = (float)(rng_normal(&g) * 3.0);
            yin[i] = y[i] + yr[i];
        }
        CHECK(compress_encode(COMPRESS_INT8, 0, y, yr, N, buf, sizeof buf, &len, err, sizeof err) ==
              0);
        CHECK(compress_decode(buf, len, yout, N, false, err, sizeof err) == 0);
        memcpy(&scale, buf + 16, 4);
        double worst = 0, worst_sum = 0;
        for (int i = 0; i < N; i++) {
            worst = fmax(worst, fabs(yout[i] - yin[i]));
            worst_sum = fmax(worst_sum, fabs(yr[i] + yout[i] - yin[i]) / fmax(fabs(yin[i]), 1));
        }
        CHECK_MSG(worst <= scale * 0.5001, "int8 error %g > scale/2 %g", worst, scale / 2);
        CHECK_MSG(worst_sum < 1e-6, "int8 residual + decoded off by %g", worst_sum);
    }

    /* A NaN input is refused and leaves the residual untouched. */
    float bad[2] = {1.0f, NAN}, br[2] = {0.5f, 0.25f};
    CHECK(compress_encode(COMPRESS_INT8, 0, bad, br, 2, buf, sizeof buf, &len, err, sizeof err) ==
          -1);
    CHECK_CONTAINS(err, "non-finite");
    CHECK(br[0] == 0.5f && br[1] == 0.25f);
}

static void test_sign(void)
{
    char err[256];
    /* scale = mean |x| = 2; negatives at 1 and 3 -> bits 0b01010. */
    float x[5] = {1, -2, 3, -4, 0}, r[5] = {0}, out[5];
    size_t len;
    CHECK(compress_encode(COMPRESS_SIGN, 0, x, r, 5, buf, sizeof buf, &len, err, sizeof err) == 0);
    CHECK(len == 21);
    float scale;
    memcpy(&scale, buf + 16, 4);
    CHECK(scale == 2.0f);
    CHECK(buf[20] == 0x0a);
    CHECK(compress_decode(buf, len, out, 5, false, err, sizeof err) == 0);
    float want[5] = {2, -2, 2, -2, 2}, want_r[5] = {-1, 0, 1, -2, -2};
    CHECK(memcmp(out, want, sizeof want) == 0);
    CHECK(memcmp(r, want_r, sizeof want_r) == 0);
}

/* Gradients with a small per-coordinate mean under heavy noise: without
 * feedback the dropped mass grows with the step count, with feedback the
 * gap between the input sum and the decoded sum is the last residual and
 * stays bounded (topk at 1%: a coordinate waits ~100 steps, a random walk
 * of ~10 sigma, hence its larger bound). */
static void test_feedback_tracks_sum(enum compress_method method, double ratio, double bound)
{
    enum { N = 2000, STEPS = 400 };
    static float g[N], r[N], out[N], mean[N];
    static double sum_in[N], sum_ef[N], sum_plain[N];
    char err[256];
    struct rng rg;
    rng_seed(&rg, 77, (uint64_t)method);
    memset(r, 0, sizeof r);
    memset(sum_in, 0, sizeof sum_in);
    memset(sum_ef, 0, sizeof sum_ef);
    memset(sum_plain, 0, sizeof sum_plain);
    for (int i = 0; i < N; i++)
        mean[i] = (float)(0.05 * rng_normal(&rg));
    int ok = 1;
    for (int t = 0; t < STEPS && ok; t++) {
        for (int i = 0; i < N; i++) {
            g[i] = mean[i] + (float)rng_normal(&rg);
            sum_in[i] += g[i];
        }
        size_t len;
        ok &= compress_encode(method, ratio, g, r, N, buf, sizeof buf, &len, err, sizeof err) == 0;
        ok &= compress_decode(buf, len, out, N, false, err, sizeof err) == 0;
        for (int i = 0; i < N; i++)
            sum_ef[i] += out[i];
        ok &=
            compress_encode(method, ratio, g, NULL, N, buf, sizeof buf, &len, err, sizeof err) == 0;
        ok &= compress_decode(buf, len, out, N, false, err, sizeof err) == 0;
        for (int i = 0; i < N; i++)
            sum_plain[i] += out[i];
    }
    CHECK_MSG(ok, "%s: %s", compress_method_name(method), err);
    double gap_ef = 0, gap_plain = 0, gap_vs_residual = 0;
    for (int i = 0; i < N; i++) {
        gap_ef += (sum_in[i] - sum_ef[i]) * (sum_in[i] - sum_ef[i]);
        gap_plain += (sum_in[i] - sum_plain[i]) * (sum_in[i] - sum_plain[i]);
        gap_vs_residual = fmax(gap_vs_residual, fabs(sum_in[i] - sum_ef[i] - r[i]));
    }
    gap_ef = sqrt(gap_ef / N);
    gap_plain = sqrt(gap_plain / N);
    printf("%s: rms gap of summed outputs after %d steps: %.3g with feedback, %.3g without\n",
           compress_method_name(method), STEPS, gap_ef, gap_plain);
    CHECK_MSG(gap_vs_residual < 1e-2, "sum gap differs from residual by %g", gap_vs_residual);
    CHECK_MSG(gap_ef < bound, "%s feedback gap %g", compress_method_name(method), gap_ef);
    CHECK_MSG(gap_ef * 3 < gap_plain, "%s feedback %g vs plain %g", compress_method_name(method),
              gap_ef, gap_plain);
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void test_decode_rejects(void)
{
    char err[256];
    float x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, out[10];
    size_t len;
    CHECK(compress_encode(COMPRESS_TOPK, 0.3, x, NULL, 10, buf, sizeof buf, &len, err,
                          sizeof err) == 0);
    static uint8_t copy[256];
    memcpy(copy, buf, len);

    CHECK(compress_decode(copy, len - 1, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "expected");
    CHECK(compress_decode(copy, 8, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "header");
    CHECK(compress_decode(copy, len, out, 11, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "10 elements");

    copy[0] = 'X';
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "magic");
    copy[0] = 'H';
    copy[2] = 9;
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "version");
    copy[2] = 1;
    copy[3] = 7;
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "method");
    copy[3] = COMPRESS_TOPK;

    /* Indices 7, 8, 9 -> swap to 8, 7 (out of order), then 10 (out of range);
     * the target must stay untouched. */
    for (int i = 0; i < 10; i++)
        out[i] = 42.0f;
    put32(copy + 16, 8);
    put32(copy + 20, 7);
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "out of order");
    put32(copy + 16, 7);
    put32(copy + 20, 8);
    put32(copy + 24, 10);
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == -1);
    CHECK(out[0] == 42.0f && out[9] == 42.0f);
    put32(copy + 24, 9);
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == 0);
    CHECK(out[0] == 0.0f && out[9] == 10.0f);

    /* k larger than n */
    put32(copy + 4, 11);
    CHECK(compress_decode(copy, len, out, 10, false, err, sizeof err) == -1);

    /* sign: padding bits set; int8: NaN scale; both with a huge n. */
    CHECK(compress_encode(COMPRESS_SIGN, 0, x, NULL, 10, buf, sizeof buf, &len, err, sizeof err) ==
          0);
    buf[21] |= 0x80;
    CHECK(compress_decode(buf, len, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "padding");
    CHECK(compress_encode(COMPRESS_INT8, 0, x, NULL, 10, buf, sizeof buf, &len, err, sizeof err) ==
          0);
    float nan = NAN;
    memcpy(buf + 16, &nan, 4);
    CHECK(compress_decode(buf, len, out, 10, false, err, sizeof err) == -1);
    CHECK_CONTAINS(err, "scale");
    put32(buf + 8, 0xffffffffu);
    put32(buf + 12, 0xffffffffu);
    CHECK(compress_decode(buf, len, out, 10, false, err, sizeof err) == -1);
}

int main(void)
{
    test_sizes();
    test_topk_by_hand();
    test_topk_exact_feedback();
    test_int8();
    test_sign();
    test_feedback_tracks_sum(COMPRESS_TOPK, 0.01, 8.0);
    test_feedback_tracks_sum(COMPRESS_INT8, 0, 0.05);
    test_feedback_tracks_sum(COMPRESS_SIGN, 0, 2.0);
    test_decode_rejects();
    return check_report();
}
