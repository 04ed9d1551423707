/*
 * The replay program of a fuzz target, built with the project's compiler
 * without libFuzzer: a CMocka test per committed input (the target's seed
 * corpus and the inputs of the crashes found on the way, each of which
 * once failed), fed to the target once each. It is how the normal suite
 * runs the fuzz targets' inputs where clang is not installed, and under
 * the sanitizers of make check-asan.
 *
 * Usage: rv-fuzz-NAME DIR... (a missing folder holds no inputs).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fuzz.h"

#define MAX_INPUTS 4096

/* The entry point a target without set-up of its own lacks. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Feeds one file to the target. */
static void test_input(void **state)
{
    const char *path = *state;
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t len = 0, cap = 0, n;

    assert_non_null(f);
    do {
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 8192;
            data = realloc(data, cap);
            assert_non_null(data);
        }
        n = fread(data + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    /* Exactly the file's bytes, as libFuzzer gives them. */
    uint8_t *exact = fuzz_copy(data, len);
    free(data);
    assert_int_equal(LLVMFuzzerTestOneInput(exact, len), 0);
    fuzz_free(exact, len);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct CMUnitTest *)a)->name,
                  ((const struct CMUnitTest *)b)->name);
}

/* Adds a test for every regular file of @p dir. */
static size_t add_dir(const char *dir, struct CMUnitTest *tests, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL)
        return n;
    while ((e = readdir(d)) != NULL && n < MAX_INPUTS) {
        char *path;
        if (e->d_name[0] == '.' || e->d_type == DT_DIR)
            continue;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
            abort();
        tests[n++] = (struct CMUnitTest){.name = path,
                                         .test_func = test_input,
                                         .initial_state = path};
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    static struct CMUnitTest tests[MAX_INPUTS];
    size_t n = 0;
    int failed;

    for (int i = 1; i < argc; i++)
        n = add_dir(argv[i], tests, n);
    if (n == 0) {
        fprintf(stderr, "no inputs in the folders given\n");
        return 1;
    }
    qsort(tests, n, sizeof(tests[0]), by_name);
    LLVMFuzzerInitialize(&argc, &argv);
    failed = _cmocka_run_group_tests("fuzz-replay", tests, n, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        free((void *)tests[i].name);
    return failed;
}
