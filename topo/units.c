/* units.c — parsing of the unit strings of link parameters (see units.h).
 *
 * Numbers are parsed by hand into a decimal mantissa and exponent rather than
 * with strtod(): the result is then exact ("1.5Gbit" is 1500000000, "0.1ms"
 * is 100000 ns) and independent of the process locale, which a host program
 * may have changed. */
#include "topo/units.h"
#include "common/quote.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A parsed decimal number: value = mantissa * 10^exponent. */
struct units_number {
    uint64_t mantissa;
    int exponent;
    int negative;
};

struct units_suffix {
    const char *name;
    int exponent; /* power of ten the suffix multiplies by */
};

static const struct units_suffix units_rate_suffixes[] = {{"bit", 0},  {"kbit", 3},  {"mbit", 6},
                                                          {"gbit", 9}, {"tbit", 12}, {NULL, 0}};
static const struct units_suffix units_time_suffixes[] = {
    {"ns", 0}, {"us", 3}, {"ms", 6}, {"s", 9}, {NULL, 0}};

static void units_fail(char *err, size_t errlen, const char *what, const char *text,
                       const char *why)
{
    char quoted[48];
    snprintf(err, errlen, "bad %s \"%s\": %s", what, quote_printable(text, quoted, sizeof quoted),
             why);
}

/* Reads the digits of an exponent; caps the magnitude so huge exponents are
 * reported as out of range rather than overflowing. */
static const char *units_parse_exponent(const char *p, int *exponent)
{
    int sign = 1, value = 0;
    if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)*p)) return NULL;
    for (; isdigit((unsigned char)*p); p++)
        if (value < 1000) value = value * 10 + (*p - '0');
    *exponent = sign * value;
    return p;
}

/* Adds one digit to the mantissa; returns -1 when more than 19 significant
 * digits would not fit in 64 bits. */
static int units_push_digit(struct units_number *n, int digit)
{
    if (n->mantissa == 0 && digit == 0) return 0;
    if (n->mantissa > (UINT64_MAX - 9) / 10) return -1;
    n->mantissa = n->mantissa * 10 + (uint64_t)digit;
    return 0;
}

/* Parses [+-]digits[.digits][e[+-]digits]; returns the first unparsed
 * character or NULL when there is no well-formed number. */
static const char *units_parse_number(const char *p, struct units_number *n)
{
    int digits = 0, exponent = 0;
    memset(n, 0, sizeof *n);
    if (*p == '+' || *p == '-') n->negative = *p++ == '-';
    for (; isdigit((unsigned char)*p); p++, digits++)
        if (units_push_digit(n, *p - '0') < 0) return NULL;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++, digits++) {
            if (units_push_digit(n, *p - '0') < 0) return NULL;
            n->exponent--;
        }
    if (digits == 0) return NULL;
    if (*p == 'e' || *p == 'E') {
        p = units_parse_exponent(p + 1, &exponent);
        if (!p) return NULL;
        n->exponent += exponent;
    }
    return p;
}

/* Finds the suffix (case-insensitive), allowing one space before it; no
 * suffix at all means empty_exp. */
static int units_match_suffix(const char *p, const struct units_suffix *table, int empty_exp,
                              int *exponent)
{
    int spaced = *p == ' ';
    p += spaced;
    if (*p == '\0') {
        *exponent = empty_exp;
        return spaced ? -1 : 0;
    }
    for (; table->name; table++)
        if (strcasecmp(p, table->name) == 0) {
            *exponent = table->exponent;
            return 0;
        }
    return -1;
}

/* mantissa * 10^exponent as an integer, rounded to nearest; -1 when it
 * exceeds max. */
static int units_scale(uint64_t mantissa, int exponent, uint64_t max, uint64_t *out)
{
    if (mantissa == 0) {
        *out = 0;
        return 0;
    }
    for (; exponent > 0; exponent--) {
        if (mantissa > max / 10) return -1;
        mantissa *= 10;
    }
    for (; exponent < 0 && mantissa > 0; exponent++)
        mantissa = exponent == -1 ? (mantissa + 5) / 10 : mantissa / 10;
    if (mantissa > max) return -1;
    *out = mantissa;
    return 0;
}

/* mantissa * 10^exponent as a double (for fractions such as loss). */
static double units_to_double(const struct units_number *n)
{
    double value = (double)n->mantissa;
    int e = n->exponent;
    for (; e > 0 && value < 1e300; e--)
        value *= 10;
    for (; e < 0 && value > 0; e++)
        value /= 10;
    return value;
}

int topo_units_parse_rate(const char *text, uint64_t *bits_per_second, char *err, size_t errlen)
{
    struct units_number n;
    const char *rest = text ? units_parse_number(text, &n) : NULL;
    int exponent;
    uint64_t value;

    if (!rest || units_match_suffix(rest, units_rate_suffixes, 0, &exponent) < 0) {
        units_fail(err, errlen, "rate", text,
                   "expected a number with unit bit, Kbit, Mbit, Gbit or Tbit (e.g. \"10Mbit\")");
        return -1;
    }
    if (n.negative && n.mantissa) {
        units_fail(err, errlen, "rate", text, "must be positive");
        return -1;
    }
    if (units_scale(n.mantissa, n.exponent + exponent, TOPO_UNITS_RATE_MAX_BPS, &value) < 0) {
        units_fail(err, errlen, "rate", text, "above the maximum of 10Tbit");
        return -1;
    }
    if (value == 0) {
        units_fail(err, errlen, "rate", text, "must be positive");
        return -1;
    }
    *bits_per_second = value;
    return 0;
}

int topo_units_parse_time(const char *text, uint64_t *nanoseconds, char *err, size_t errlen)
{
    struct units_number n;
    const char *rest = text ? units_parse_number(text, &n) : NULL;
    int exponent;
    uint64_t value;

    if (!rest || units_match_suffix(rest, units_time_suffixes, 9, &exponent) < 0) {
        units_fail(err, errlen, "time", text,
                   "expected a number with unit ns, us, ms or s (e.g. \"5ms\")");
        return -1;
    }
    if (n.negative && n.mantissa) {
        units_fail(err, errlen, "time", text, "must not be negative");
        return -1;
    }
    if (units_scale(n.mantissa, n.exponent + exponent, TOPO_UNITS_TIME_MAX_NS, &value) < 0) {
        units_fail(err, errlen, "time", text, "above the maximum of 3600s");
        return -1;
    }
    *nanoseconds = value;
    return 0;
}

int topo_units_parse_loss(const char *text, double *fraction, char *err, size_t errlen)
{
    struct units_number n;
    const char *rest = text ? units_parse_number(text, &n) : NULL;
    int percent = rest && strcmp(rest, "%") == 0;
    double value;

    if (!rest || (*rest && !percent)) {
        units_fail(err, errlen, "loss", text,
                   "expected a percentage like \"0.5%\" or a fraction in [0, 1]");
        return -1;
    }
    value = units_to_double(&n) / (percent ? 100.0 : 1.0);
    if ((n.negative && n.mantissa) || value > 1.0) {
        units_fail(err, errlen, "loss", text,
                   percent ? "must be between 0% and 100%" : "a fraction must be between 0 and 1");
        return -1;
    }
    *fraction = value;
    return 0;
}

/* Byte suffixes of a queue size, as a multiplier; no suffix means packets. */
static int units_queue_multiplier(const char *p, uint64_t *multiplier)
{
    static const struct {
        const char *name;
        uint64_t multiplier;
    } table[] = {{"b", 1},      {"kb", 1000},     {"mb", 1000000},
                 {"kib", 1024}, {"mib", 1048576}, {NULL, 0}};
    int spaced = *p == ' ';
    p += spaced;
    if (*p == '\0') {
        *multiplier = 0;
        return spaced ? -1 : 0;
    }
    for (int i = 0; table[i].name; i++)
        if (strcasecmp(p, table[i].name) == 0) {
            *multiplier = table[i].multiplier;
            return 0;
        }
    return -1;
}

/* "bdp", "2bdp", "0.5 bdp": 1 with *multiple set, 0 when text is not a BDP
 * queue, -1 when it is one with a bad multiple. */
static int units_parse_bdp(const char *text, double *multiple)
{
    size_t len = text ? strlen(text) : 0;
    if (len < 3 || strcasecmp(text + len - 3, "bdp") != 0) return 0;
    if (len == 3) return *multiple = 1, 1;
    char number[64];
    size_t nlen = len - 3 - (text[len - 4] == ' ');
    if (nlen == 0 || nlen >= sizeof number) return -1;
    memcpy(number, text, nlen);
    number[nlen] = '\0';
    struct units_number n;
    const char *rest = units_parse_number(number, &n);
    if (!rest || *rest || n.negative) return -1;
    *multiple = units_to_double(&n);
    return *multiple > 0 && *multiple <= 1000 ? 1 : -1;
}

/* A packet count or a size in bytes ("100", "64KB"), named `what` in errors;
 * `expected` says what else would have been taken. */
static int units_parse_count_or_size(const char *text, const char *what, const char *expected,
                                     struct topo_units_queue *queue, char *err, size_t errlen)
{
    struct units_number n;
    const char *rest = text ? units_parse_number(text, &n) : NULL;
    uint64_t multiplier;
    double value;

    if (!rest || units_queue_multiplier(rest, &multiplier) < 0) {
        units_fail(err, errlen, what, text, expected);
        return -1;
    }
    /* Doubles are exact for every integer in range, and KiB is no power of ten. */
    value = units_to_double(&n) * (double)(multiplier ? multiplier : 1);
    if (value > (double)TOPO_UNITS_QUEUE_MAX) {
        units_fail(err, errlen, what, text, "above the maximum of 1000000000");
        return -1;
    }
    if (!multiplier && value != floor(value)) {
        units_fail(err, errlen, what, text, "a packet count must be a whole number");
        return -1;
    }
    if (n.negative || value < 0.5) {
        units_fail(err, errlen, what, text, "must be positive");
        return -1;
    }
    queue->packets = multiplier ? 0 : (uint64_t)value;
    queue->bytes = multiplier ? (uint64_t)(value + 0.5) : 0;
    queue->bdp = 0;
    return 0;
}

int topo_units_parse_queue(const char *text, struct topo_units_queue *queue, char *err,
                           size_t errlen)
{
    double multiple = 0;
    int bdp = units_parse_bdp(text, &multiple);
    if (bdp < 0) {
        units_fail(
            err, errlen, "queue", text,
            "a bandwidth-delay multiple must be a number above 0, at most 1000, like \"2bdp\"");
        return -1;
    }
    if (bdp) {
        *queue = (struct topo_units_queue){.bdp = multiple};
        return 0;
    }
    return units_parse_count_or_size(text, "queue",
                                     "expected a packet count like \"100\", a size with unit B, "
                                     "KB, MB, KiB or MiB, or a bandwidth-delay multiple like "
                                     "\"bdp\" or \"2bdp\"",
                                     queue, err, errlen);
}

int topo_units_parse_threshold(const char *text, struct topo_units_queue *threshold, char *err,
                               size_t errlen)
{
    return units_parse_count_or_size(
        text, "ecn_threshold",
        "expected a packet count like \"64\" or a size with unit B, KB, MB, KiB or MiB", threshold,
        err, errlen);
}

/* Picks the largest unit that keeps the value >= 1 and prints it with as
 * few decimals as represent it exactly (up to 3). */
static void units_format(uint64_t value, const struct units_suffix *table, const char *const *names,
                         char *buf, size_t buflen)
{
    int best = 0;
    uint64_t scale = 1, best_scale = 1;
    for (int i = 0; table[i].name; i++, scale = 1) {
        for (int e = 0; e < table[i].exponent; e++)
            scale *= 10;
        if (value >= scale) {
            best = i;
            best_scale = scale;
        }
    }
    if (value % best_scale == 0)
        snprintf(buf, buflen, "%" PRIu64 "%s", value / best_scale, names[best]);
    else
        snprintf(buf, buflen, "%.3g%s", (double)value / (double)best_scale, names[best]);
}

void topo_units_format_rate(uint64_t bits_per_second, char *buf, size_t buflen)
{
    static const char *const names[] = {"bit", "Kbit", "Mbit", "Gbit", "Tbit"};
    units_format(bits_per_second, units_rate_suffixes, names, buf, buflen);
}

void topo_units_format_time(uint64_t nanoseconds, char *buf, size_t buflen)
{
    static const char *const names[] = {"ns", "us", "ms", "s"};
    units_format(nanoseconds, units_time_suffixes, names, buf, buflen);
}
