/* test_loopback_claim.c — backend none's 127.N.0.0/16 claims
 * (controller/loopback_claim.h): a claimed N is skipped by the next claim,
 * released by close, the search wraps from 254 to 1, and a claim survives
 * only as long as its fd (a child that never closed it lets it go when it
 * exits, as a SIGKILLed run does). */
#include "controller/loopback_claim.h"
#include "tests/unit/check.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* N values of this test start high: other runs on the machine tend to hold
 * 1 + pid mod 254, anywhere; the test only needs the claims to differ. */
static void test_claims_differ(void)
{
    unsigned a = 0, b = 0, c = 0;
    int fa = loopback_claim(200, &a);
    CHECK(fa >= 0);
    int fb = loopback_claim(a, &b);
    CHECK(fb >= 0 && b != a);
    close(fa);
    int fc = loopback_claim(a, &c);
    CHECK_MSG(fc >= 0 && c == a, "released %u, then claimed %u", a, c);
    close(fb);
    close(fc);
}

static void test_wraps(void)
{
    unsigned n = 0, m = 0;
    int f = loopback_claim(254, &n);
    CHECK(f >= 0 && n >= 1 && n <= 254);
    int g = loopback_claim(n, &m);
    CHECK_MSG(g >= 0 && m != n && m >= 1 && m <= 254, "after %u came %u", n, m);
    close(f);
    close(g);
}

static void test_released_by_exit(void)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t child = fork();
    if (child == 0) {
        unsigned n = 0;
        int fd = loopback_claim(100, &n);
        unsigned char byte = fd >= 0 ? (unsigned char)n : 0;
        if (write(ready[1], &byte, 1) != 1) _exit(1);
        pause(); /* holds the claim until killed */
        _exit(0);
    }
    unsigned char held = 0;
    CHECK(read(ready[0], &held, 1) == 1 && held != 0);
    unsigned n = 0;
    int fd = loopback_claim(held, &n);
    CHECK_MSG(fd >= 0 && n != held, "%u is held by the child, yet claimed", held);
    close(fd);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    fd = loopback_claim(held, &n);
    CHECK_MSG(fd >= 0 && n == held, "the killed child's %u was not released (got %u)", held, n);
    close(fd);
    close(ready[0]);
    close(ready[1]);
}

int main(void)
{
    test_claims_differ();
    test_wraps();
    test_released_by_exit();
    return check_report();
}
