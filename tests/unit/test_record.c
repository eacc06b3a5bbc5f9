/* test_record.c — controller/record.c's sink records (record_open_sink):
 * every row reaches the callback with its cells as given, empty cells
 * NULL, nothing for the header; a bad name is refused as for a file. */
#include "check.h"
#include "controller/record.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct seen {
    int rows;
    char last[3][16];
    bool last_null; /* the third cell of the last row was NULL */
};

static void on_row(void *ctx, const char *const *cells, size_t n)
{
    struct seen *s = ctx;
    s->rows++;
    CHECK(n == 3);
    for (size_t i = 0; i < 2; i++)
        snprintf(s->last[i], sizeof s->last[i], "%s", cells[i]);
    s->last_null = cells[2] == NULL;
    if (cells[2]) snprintf(s->last[2], sizeof s->last[2], "%s", cells[2]);
}

int main(void)
{
    static const char *const columns[] = {"time_s", "link", "bytes"};
    struct seen s = {0};
    char err[256];
    struct record *r = record_open_sink("links", columns, 3, on_row, &s, err, sizeof err);
    CHECK(r && s.rows == 0); /* no header row */
    CHECK(record_columns(r) == 3 && record_column(r, "bytes") == 2);
    CHECK(record_add(r, (const char *const[]){"1.000", "h1-s1", "1042"}, err, sizeof err) == 0);
    CHECK(s.rows == 1 && !strcmp(s.last[1], "h1-s1") && !strcmp(s.last[2], "1042"));
    CHECK(record_add(r, (const char *const[]){"2.000", "s1-h2", NULL}, err, sizeof err) == 0);
    CHECK(s.rows == 2 && !strcmp(s.last[0], "2.000") && s.last_null);
    record_close(r);
    CHECK(!record_open_sink("../x", columns, 3, on_row, &s, err, sizeof err));
    CHECK_STREQ(err, "record name '../x' is not a valid file name ([A-Za-z0-9_.-]+)");
    return check_report();
}
