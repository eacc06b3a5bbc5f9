/* test_json_read.c — the strict JSON reader (common/json_read.c):
 * values of every type, escapes and surrogates, and each kind of input it
 * must refuse, with the position and the reason in the message. */
#include "common/json_read.h"

#include "check.h"

static struct json_value *parse(const char *text, char *err, size_t errlen)
{
    return json_read(text, strlen(text), err, errlen);
}

static void test_values(void)
{
    char err[256];
    const char *text =
        " {\"a\": [1, -2.5e1, true, false, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\","
        " \"big\": 12345678901234567890, \"o\": {}} ";
    struct json_value *v = parse(text, err, sizeof err);
    CHECK_MSG(v != NULL, "%s", err);
    if (!v) return;
    CHECK(v->type == JSON_OBJECT && v->n == 4);
    const struct json_value *a = json_get(v, "a");
    CHECK(a && a->type == JSON_ARRAY && a->n == 5);
    CHECK(a->items[0].type == JSON_NUMBER && a->items[0].is_int && a->items[0].integer == 1);
    CHECK(!a->items[1].is_int && a->items[1].number == -25.0);
    CHECK(a->items[2].type == JSON_TRUE && a->items[3].type == JSON_FALSE &&
          a->items[4].type == JSON_NULL);
    const struct json_value *s = json_get(v, "s");
    CHECK(s && s->type == JSON_STRING);
    CHECK_STREQ(s->string, "x\xc3\xa9\xf0\x9f\x98\x80\n");
    CHECK(s->len == 8);
    const struct json_value *big = json_get(v, "big");
    CHECK(big && !big->is_int && big->number > 1.2e19); /* beyond int64: a double */
    CHECK(json_get(v, "o") && json_get(v, "o")->n == 0);
    CHECK(json_get(v, "missing") == NULL);
    json_free(v);

    v = parse("\"a\\u0000b\"", err, sizeof err);
    CHECK(v && v->len == 3 && v->string[1] == '\0');
    json_free(v);
}

/* Each bad input, and a piece of the message it must give. */
static void test_refusals(void)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "found the end"},
        {"{\"a\": 1,}", "expected a string key"},
        {"[1, 2,]", "expected a JSON value"},
        {"[1 2]", "expected ',' or ']'"},
        {"{\"a\" 1}", "expected ':'"},
        {"{\"a\": 1, \"a\": 2}", "duplicate key \"a\""},
        {"01", "unexpected text"},
        {"1.", "digit after '.'"},
        {"1e", "exponent"},
        {"-", "expected a digit"},
        {"1e999", "out of range"},
        {"NaN", "expected a JSON value"},
        {"[1] x", "unexpected text"},
        {"\"a\tb\"", "control character"},
        {"\"\\x\"", "invalid escape"},
        {"\"\\ud800\"", "without its low surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", "invalid UTF-8"},
        {"\"abc", "unterminated"},
        {"// c\n1", "expected a JSON value"},
        {"tru", "expected a JSON value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[256] = "";
        struct json_value *v = parse(cases[i].text, err, sizeof err);
        CHECK_MSG(v == NULL, "accepted '%s'", cases[i].text);
        json_free(v);
        CHECK_MSG(strstr(err, cases[i].want) != NULL, "'%s': got '%s', want '%s'", cases[i].text,
                  err, cases[i].want);
        CHECK_MSG(strncmp(err, "line 1, column ", 15) == 0, "'%s': no position in '%s'",
                  cases[i].text, err);
    }
}

static void test_position_and_depth(void)
{
    char err[256];
    struct json_value *v = parse("{\n  \"a\": [1,\n   x]}", err, sizeof err);
    CHECK(v == NULL);
    CHECK_MSG(strncmp(err, "line 3, column 4:", 17) == 0, "got '%s'", err);

    char deep[2 * JSON_READ_MAX_DEPTH + 8];
    size_t n = 0;
    for (int i = 0; i < JSON_READ_MAX_DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < JSON_READ_MAX_DEPTH; i++)
        deep[n++] = ']';
    v = json_read(deep, n, err, sizeof err);
    CHECK_MSG(v != NULL, "%s", err); /* exactly the limit is fine */
    json_free(v);
    char deeper[2 * JSON_READ_MAX_DEPTH + 8];
    memcpy(deeper + 1, deep, n);
    deeper[0] = '[';
    deeper[n + 1] = ']';
    v = json_read(deeper, n + 2, err, sizeof err);
    CHECK(v == NULL && strstr(err, "nested deeper"));
}

int main(void)
{
    test_values();
    test_refusals();
    test_position_and_depth();
    return check_report();
}
