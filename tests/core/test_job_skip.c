/*
 * A job whose every check is skipped: each process exits with the skip
 * status (job_test_status), and rivetrun must pass that status on, so that
 * ctest lists such a test as skipped rather than passed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "job_test.h"

static void test_nothing_to_run(void **state)
{
    (void)state;
    JOB_SKIP("this check needs a capability no transport has");
}

static void test_nothing_either(void **state)
{
    (void)state;
    JOB_SKIP("neither does this one");
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    const char *group = "job-skip";

    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_to_run),
        cmocka_unit_test(test_nothing_either),
    };
    size_t nchecks = sizeof(tests) / sizeof(tests[0]);
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
