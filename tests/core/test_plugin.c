/*
 * The transport plugin loader: loads by name, and explains a missing or
 * broken plugin (what was searched, what is available) instead of crashing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rv_core.h"

/* Runs rv__plugin_load with stderr captured into err. */
static rv_status_t load_capture(const char *name, char *err, size_t len,
                                const rv_transport_ops_t **ops)
{
    void *handle = NULL;
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    rv_status_t st = rv__plugin_load(name, &handle, ops);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, len - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    fprintf(stderr, "%s", err); /* keep it visible in the test log */
    return st;
}

static void test_load_ucx(void **state)
{
    const rv_transport_ops_t *ops = NULL;
    char err[4096];
    (void)state;
    assert_int_equal(load_capture("ucx", err, sizeof(err), &ops), RV_OK);
    assert_non_null(ops);
    assert_string_equal(ops->name, "ucx");
    assert_int_equal(ops->abi_version, RV_TRANSPORT_ABI_VERSION);
    /* Every operation is set (unsupported ones point to a stub). */
    const void *const *slot = (const void *const *)&ops->init;
    const void *const *last = (const void *const *)&ops->flush;
    for (; slot <= last; slot++)
        assert_non_null(*slot);
}

static void test_unknown_name_lists_available(void **state)
{
    const rv_transport_ops_t *ops = NULL;
    char err[4096];
    (void)state;
    assert_int_equal(load_capture("nosuch", err, sizeof(err), &ops),
                     RV_ERR_NOT_FOUND);
    assert_null(ops);
    assert_non_null(strstr(err, "no transport plugin 'nosuch' "
                                "(librivet-nosuch.so)"));
    assert_non_null(strstr(err, "available transports: "));
    assert_non_null(strstr(err, "ucx"));
    assert_non_null(strstr(err, "RIVET_PLUGIN_PATH"));
}

static void test_name_with_path_rejected(void **state)
{
    const rv_transport_ops_t *ops = NULL;
    char err[4096];
    (void)state;
    assert_int_equal(load_capture("../ucx", err, sizeof(err), &ops),
                     RV_ERR_CONFIG);
    assert_non_null(strstr(err, "is not a plugin name"));
}

static void test_plugin_without_symbol(void **state)
{
    const rv_transport_ops_t *ops = NULL;
    char err[4096];
    (void)state;
    setenv("RIVET_PLUGIN_PATH", FAKE_PLUGIN_DIR, 1);
    assert_int_equal(load_capture("nosymbol", err, sizeof(err), &ops),
                     RV_ERR_NOT_FOUND);
    assert_non_null(strstr(err, "is not a rivet transport (no symbol "
                                "rv_transport_ops)"));
    unsetenv("RIVET_PLUGIN_PATH");
}

static void test_plugin_wrong_abi(void **state)
{
    const rv_transport_ops_t *ops = NULL;
    char err[4096];
    (void)state;
    setenv("RIVET_PLUGIN_PATH", "/nonexistent:" FAKE_PLUGIN_DIR, 1);
    assert_int_equal(load_capture("wrongabi", err, sizeof(err), &ops),
                     RV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "rebuild the plugin"));
    unsetenv("RIVET_PLUGIN_PATH");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_ucx),
        cmocka_unit_test(test_unknown_name_lists_available),
        cmocka_unit_test(test_name_with_path_rejected),
        cmocka_unit_test(test_plugin_without_symbol),
        cmocka_unit_test(test_plugin_wrong_abi),
    };
    return cmocka_run_group_tests_name("plugin", tests, NULL, NULL);
}
