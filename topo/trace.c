/* trace.c — link traces: parsing and the value at a time (see trace.h). */
#include "topo/trace.h"

#include "topo/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trace file larger than this is refused: 4 million Mahimahi lines of
 * up to 8 digits fit in it. */
#define TRACE_FILE_MAX (64u << 20)
#define TRACE_FIELDS_MAX 4

/* One line of the text, cut at its end, with its 1-based number. */
struct trace_lines {
    const char *p;
    size_t line;
    char buf[512];
};

static bool next_line(struct trace_lines *it, bool *too_long)
{
    *too_long = false;
    if (!*it->p) return false;
    const char *end = strchr(it->p, '\n');
    size_t len = end ? (size_t)(end - it->p) : strlen(it->p);
    it->line++;
    if (len >= sizeof it->buf) *too_long = true;
    size_t keep = *too_long ? sizeof it->buf - 1 : len;
    memcpy(it->buf, it->p, keep);
    it->buf[keep] = '\0';
    it->p += len + (end ? 1 : 0);
    return true;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* A blank line or a comment carries no sample. */
static bool is_blank(const char *s)
{
    return *s == '\0' || *s == '#';
}

static int fields_split(char *line, char *fields[TRACE_FIELDS_MAX + 1])
{
    int n = 0;
    for (char *f = line;; n++) {
        char *comma = strchr(f, ',');
        if (comma) *comma = '\0';
        if (n <= TRACE_FIELDS_MAX) fields[n] = trim(f);
        if (!comma) return n + 1;
        f = comma + 1;
    }
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *s && !*end && errno == 0 && isfinite(*out);
}

static int fail(char *err, size_t errlen, const char *name, size_t line, const char *fmt,
                const char *value)
{
    char what[256];
    snprintf(what, sizeof what, fmt, value);
    snprintf(err, errlen, "%s:%zu: %s", name, line, what);
    return -1;
}

static int grow_samples(struct topo_trace *t, size_t *cap)
{
    if (t->n_samples < *cap) return 0;
    size_t next = *cap ? *cap * 2 : 64;
    struct topo_trace_sample *s = realloc(t->samples, next * sizeof *s);
    if (!s) return -1;
    t->samples = s;
    *cap = next;
    return 0;
}

/* The sample of one CSV row whose columns are fields[0..n-1]. */
static int csv_sample(char **fields, int n, const char *name, size_t line,
                      struct topo_trace_sample *s, char *err, size_t errlen)
{
    char why[200];
    if (!parse_seconds(fields[0], &s->t_s) || s->t_s < 0)
        return fail(err, errlen, name, line, "time '%s' is not a number of seconds >= 0",
                    fields[0]);
    if (fields[1][0] == '-') return fail(err, errlen, name, line, "negative rate '%s'", fields[1]);
    if (topo_units_parse_rate(fields[1], &s->rate_bps, why, sizeof why) < 0)
        return fail(err, errlen, name, line, "%s", why);
    if (n > 2 && topo_units_parse_time(fields[2], &s->delay_ns, why, sizeof why) < 0)
        return fail(err, errlen, name, line, "%s", why);
    if (n > 3 && topo_units_parse_loss(fields[3], &s->loss, why, sizeof why) < 0)
        return fail(err, errlen, name, line, "%s", why);
    return 0;
}

/* Checks a row against the rows before it: the same columns, time on. */
static int csv_row_fits(const struct topo_trace *t, int n, int columns, double at, const char *name,
                        size_t line, char *err, size_t errlen)
{
    char v[64];
    if (n != columns) {
        snprintf(v, sizeof v, "%d fields, the first row has %d", n, columns);
        return fail(err, errlen, name, line, "%s", v);
    }
    if (!t->n_samples) return 0;
    double before = t->samples[t->n_samples - 1].t_s;
    snprintf(v, sizeof v, "%g after %g", at, before);
    if (at < before) return fail(err, errlen, name, line, "time goes backwards (%s)", v);
    if (at == before) return fail(err, errlen, name, line, "time repeats (%s)", v);
    return 0;
}

/* One row: a header (first row only), a sample, or an error. */
static int csv_line(struct topo_trace *t, size_t *cap, int *columns, char *text, const char *name,
                    size_t line, char *err, size_t errlen)
{
    char *fields[TRACE_FIELDS_MAX + 1];
    int n = fields_split(text, fields);
    double at;
    if (!t->n_samples && !*columns && !parse_seconds(fields[0], &at)) {
        *columns = -1; /* a header: its columns do not count */
        return 0;
    }
    if (n < 2 || n > TRACE_FIELDS_MAX)
        return fail(err, errlen, name, line, "%s: expected t,bw[,delay][,loss]",
                    n < 2 ? "one field" : "too many fields");
    if (*columns <= 0) *columns = n;
    struct topo_trace_sample s = {0};
    if (csv_sample(fields, n, name, line, &s, err, errlen) < 0) return -1;
    if (csv_row_fits(t, n, *columns, s.t_s, name, line, err, errlen) < 0) return -1;
    if (t->n_samples >= TOPO_TRACE_MAX_SAMPLES)
        return fail(err, errlen, name, line, "more than %s samples", "1000000");
    if (grow_samples(t, cap) < 0) return fail(err, errlen, name, line, "%s", "out of memory");
    t->samples[t->n_samples++] = s;
    return 0;
}

/* Samples at 0, 1, 2 repeat every 3 s: the last holds as long as the one before it. */
static double csv_period(const struct topo_trace *t)
{
    size_t n = t->n_samples;
    if (n < 2) return 0;
    return 2 * t->samples[n - 1].t_s - t->samples[n - 2].t_s;
}

int topo_trace_parse_csv(const char *text, const char *name, struct topo_trace *out, char *err,
                         size_t errlen)
{
    *out = (struct topo_trace){0};
    struct trace_lines it = {text, 0, {0}};
    size_t cap = 0;
    int columns = 0;
    bool too_long;
    while (next_line(&it, &too_long)) {
        char *s = trim(it.buf);
        if (is_blank(s)) continue;
        if (too_long) {
            topo_trace_free(out);
            return fail(err, errlen, name, it.line, "%s", "line too long");
        }
        if (csv_line(out, &cap, &columns, s, name, it.line, err, errlen) < 0) {
            topo_trace_free(out);
            return -1;
        }
    }
    if (!out->n_samples) return snprintf(err, errlen, "%s: empty trace: no sample", name), -1;
    out->has_delay = columns > 2;
    out->has_loss = columns > 3;
    out->period_s = csv_period(out);
    return 0;
}

/* ---- Mahimahi ---- */

static int mahimahi_add(struct topo_trace *t, size_t *cap, uint32_t ms)
{
    if (t->n_opportunities == *cap) {
        size_t next = *cap ? *cap * 2 : 1024;
        uint32_t *o = realloc(t->opportunities_ms, next * sizeof *o);
        if (!o) return -1;
        t->opportunities_ms = o;
        *cap = next;
    }
    t->opportunities_ms[t->n_opportunities++] = ms;
    return 0;
}

static int mahimahi_line(struct topo_trace *t, size_t *cap, const char *s, const char *name,
                         size_t line, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    unsigned long long ms = strtoull(s, &end, 10);
    if (*s == '-' || !isdigit((unsigned char)*s) || *end || errno || ms > UINT32_MAX)
        return fail(err, errlen, name, line, "'%s' is not a whole number of milliseconds", s);
    if (t->n_opportunities && ms < t->opportunities_ms[t->n_opportunities - 1]) {
        char v[64];
        snprintf(v, sizeof v, "%llu after %u", ms, t->opportunities_ms[t->n_opportunities - 1]);
        return fail(err, errlen, name, line, "time goes backwards (%s)", v);
    }
    if (t->n_opportunities >= TOPO_TRACE_MAX_OPPORTUNITIES)
        return fail(err, errlen, name, line, "more than %s opportunities", "4000000");
    if (mahimahi_add(t, cap, (uint32_t)ms) < 0)
        return fail(err, errlen, name, line, "%s", "out of memory");
    return 0;
}

/* The rate series: opportunities per bin as full frames per second. A bin
 * without any gets 1 Kbit/s, not 0 (a rate of 0 means unlimited). */
static int mahimahi_bins(struct topo_trace *t, double bin_s)
{
    double period_ms = t->opportunities_ms[t->n_opportunities - 1], bin_ms = bin_s * 1000;
    size_t n = (size_t)ceil(period_ms / bin_ms);
    if (n > TOPO_TRACE_MAX_SAMPLES) return -1;
    uint64_t *count = calloc(n, sizeof *count);
    t->samples = calloc(n, sizeof *t->samples);
    if (!count || !t->samples) return free(count), -1;
    /* An opportunity at the period is the next round's at 0 (Mahimahi's loop). */
    for (size_t i = 0; i < t->n_opportunities; i++)
        count[(size_t)(fmod(t->opportunities_ms[i], period_ms) / bin_ms)]++;
    for (size_t k = 0; k < n; k++) {
        double width_s = (k + 1 < n ? bin_ms : period_ms - k * bin_ms) / 1000;
        double bps = (double)count[k] * TOPO_TRACE_MAHIMAHI_FRAME_BYTES * 8 / width_s;
        t->samples[k] = (struct topo_trace_sample){k * bin_s, bps < 1000 ? 1000 : (uint64_t)bps};
    }
    free(count);
    t->n_samples = n;
    t->period_s = period_ms / 1000;
    return 0;
}

int topo_trace_parse_mahimahi(const char *text, const char *name, double bin_s,
                              struct topo_trace *out, char *err, size_t errlen)
{
    *out = (struct topo_trace){0};
    struct trace_lines it = {text, 0, {0}};
    size_t cap = 0;
    bool too_long;
    while (next_line(&it, &too_long)) {
        char *s = trim(it.buf);
        if (is_blank(s)) continue;
        if ((too_long && fail(err, errlen, name, it.line, "%s", "line too long")) ||
            mahimahi_line(out, &cap, s, name, it.line, err, errlen) < 0) {
            topo_trace_free(out);
            return -1;
        }
    }
    if (!out->n_opportunities) return snprintf(err, errlen, "%s: empty trace: no line", name), -1;
    if (!out->opportunities_ms[out->n_opportunities - 1]) {
        topo_trace_free(out);
        return snprintf(err, errlen, "%s: the last opportunity is at 0 ms: no period", name), -1;
    }
    if (!(bin_s >= 0.001) || mahimahi_bins(out, bin_s) < 0) {
        topo_trace_free(out);
        return snprintf(err, errlen, "%s: bin %g s gives too many bins (at least 1 ms)", name,
                        bin_s),
               -1;
    }
    return 0;
}

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errlen, "%s: %s", path, strerror(errno)), NULL;
    char *buf = malloc(TRACE_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, TRACE_FILE_MAX + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad || n > TRACE_FILE_MAX) {
        snprintf(err, errlen, "%s: %s", path,
                 !buf  ? "out of memory"
                 : bad ? "cannot be read"
                       : "larger than 64 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        snprintf(err, errlen, "%s: a binary file, not a trace", path);
        free(buf);
        return NULL;
    }
    return buf;
}

int topo_trace_load(const char *path, const char *format, double bin_s, struct topo_trace *out,
                    char *err, size_t errlen)
{
    bool mahimahi = strcmp(format, "mahimahi") == 0;
    if (!mahimahi && strcmp(format, "csv") != 0)
        return snprintf(err, errlen, "format '%s' is neither csv nor mahimahi", format), -1;
    char *text = read_file(path, err, errlen);
    if (!text) return -1;
    int rc = mahimahi ? topo_trace_parse_mahimahi(text, path, bin_s, out, err, errlen)
                      : topo_trace_parse_csv(text, path, out, err, errlen);
    free(text);
    return rc;
}

void topo_trace_free(struct topo_trace *t)
{
    free(t->samples);
    free(t->opportunities_ms);
    *t = (struct topo_trace){0};
}

/* ---- values over time ---- */

static bool trace_loops(const struct topo_trace *t, bool loop)
{
    return loop && t->period_s > 0;
}

/* The last sample at or before x (the time within a round), -1 if none. */
static long sample_before(const struct topo_trace *t, double x)
{
    long lo = 0, hi = (long)t->n_samples - 1, found = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (t->samples[mid].t_s <= x)
            found = mid, lo = mid + 1;
        else
            hi = mid - 1;
    }
    return found;
}

static void blend(const struct topo_trace_sample *a, const struct topo_trace_sample *b, double f,
                  struct topo_trace_sample *out)
{
    out->rate_bps =
        (uint64_t)llround((double)a->rate_bps + f * ((double)b->rate_bps - (double)a->rate_bps));
    out->delay_ns =
        (uint64_t)llround((double)a->delay_ns + f * ((double)b->delay_ns - (double)a->delay_ns));
    out->loss = a->loss + f * (b->loss - a->loss);
}

void topo_trace_at(const struct topo_trace *t, enum topo_trace_interp interp, bool loop, double t_s,
                   struct topo_trace_sample *out)
{
    bool loops = trace_loops(t, loop);
    double x = loops ? fmod(t_s, t->period_s) : t_s;
    long i = sample_before(t, x);
    size_t last = t->n_samples - 1;
    const struct topo_trace_sample *a, *b;
    double ta, tb;
    if (interp == TOPO_TRACE_STEP || (!loops && (i < 0 || (size_t)i == last))) {
        *out = t->samples[i < 0 ? 0 : i];
    } else {
        /* A looped trace runs from its last sample into the next round's first. */
        a = i < 0 ? &t->samples[last] : &t->samples[i];
        b = (size_t)i == last || i < 0 ? &t->samples[0] : &t->samples[i + 1];
        ta = i < 0 ? a->t_s - t->period_s : a->t_s;
        tb = (size_t)i == last ? b->t_s + t->period_s : b->t_s;
        blend(a, b, tb > ta ? (x - ta) / (tb - ta) : 0, out);
    }
    out->t_s = t_s;
}

/* The end of the segment x is in, within a round (a looped trace's round
 * ends at its period). */
static double segment_end(const struct topo_trace *t, bool loops, double x, bool *flat)
{
    long i = sample_before(t, x);
    size_t last = t->n_samples - 1;
    if (i >= 0 && (size_t)i == last) {
        *flat = !loops || t->samples[last].rate_bps == t->samples[0].rate_bps;
        return loops ? t->period_s : INFINITY;
    }
    const struct topo_trace_sample *a = &t->samples[i < 0 ? (loops ? last : 0) : i];
    const struct topo_trace_sample *b = &t->samples[i + 1];
    *flat = a->rate_bps == b->rate_bps && a->delay_ns == b->delay_ns && a->loss == b->loss;
    return b->t_s;
}

double topo_trace_next_change(const struct topo_trace *t, enum topo_trace_interp interp, bool loop,
                              double t_s, double step_s)
{
    bool loops = trace_loops(t, loop);
    double base = loops ? floor(t_s / t->period_s) * t->period_s : 0;
    bool flat;
    double end = segment_end(t, loops, t_s - base, &flat);
    if (isinf(end)) return INFINITY;
    end += base;
    double next = interp == TOPO_TRACE_LINEAR && !flat && t_s + step_s < end ? t_s + step_s : end;
    /* Rounding at a round's edge must not stall the player. */
    return next > t_s + 1e-9 ? next : t_s + (step_s > 0 ? step_s : 1e-3);
}
