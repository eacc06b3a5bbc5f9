/* check_no_checks.c — check.h's own test: a test that ran no check must fail.
 * Built and run by tests/unit/CMakeLists.txt (unit.check_no_checks), which
 * expects check_report()'s complaint and a non-zero exit. */
#include "tests/unit/check.h"

int main(void)
{
    return check_report();
}
