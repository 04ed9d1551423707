/*
 * Tests of the configuration (core/config/rv_config_*.c), its tables and the
 * rivet-config tool: component tables (core's, the layers' registered
 * ones, one registered here, the plugins'), every class of error with its
 * exact message, size units, booleans, environment overrides, rv_config_set
 * and rv_config_get, and the --dump round trip.
 *
 * This file holds the group: its set-up, the helpers of config_test.h, the
 * layer table this program registers, and main; the checks are in the
 * test_config_*.c files config_test.h lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config_test.h"

char tmpdir[256];
static char file_path[512];

/* A layer's table, registered as librivet's layers register theirs. */
static const rv_config_field_t testlayer_fields[] = {
    {.name = "fanout", .type = RV_CFG_INT,
     .offset = offsetof(testlayer_config_t, fanout), .def = "4", .min = 1,
     .max = 64, .help = "How many children every node of the test has."},
    {.name = "flavour", .type = RV_CFG_ENUM,
     .offset = offsetof(testlayer_config_t, flavour), .def = "vanilla",
     .values = "vanilla|chocolate", .help = "Which flavour the test layer has."},
    {.name = "label", .type = RV_CFG_STRING,
     .offset = offsetof(testlayer_config_t, label), .def = "\"t\"",
     .help = "A string the test layer carries around."},
    {.name = "turbo", .type = RV_CFG_INT,
     .offset = offsetof(testlayer_config_t, turbo), .def = "0", .max = 9,
     .later = "the turbo engine (a test)",
     .help = "A key reserved for a part the test layer has not written."},
    {.name = NULL},
};

const rv_config_table_t testlayer_table = {
    .prefix = "testlayer",
    .help = "A layer the configuration test registers.",
    .fields = testlayer_fields,
    .size = sizeof(testlayer_config_t),
};

RV_CONFIG_REGISTER_TABLE(testlayer_table)

void clear_config_env(void)
{
    extern char **environ;
    char name[256];

    for (size_t i = 0; environ[i] != NULL;) {
        size_t len = strcspn(environ[i], "=");
        if (strncmp(environ[i], "RIVET_", 6) != 0 ||
            strncmp(environ[i], "RIVET_PLUGIN_PATH=", 18) == 0 ||
            len >= sizeof(name)) {
            i++;
            continue;
        }
        snprintf(name, sizeof(name), "%.*s", (int)len, environ[i]);
        unsetenv(name); /* environ shifts: look at index i again */
    }
}

static int group_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/rivet-test-config-XXXXXX",
             base != NULL && *base ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    clear_config_env();
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[600];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

const char *write_named(const char *name, const char *text)
{
    FILE *fp;

    snprintf(file_path, sizeof(file_path), "%s/%s", tmpdir, name);
    fp = fopen(file_path, "w");
    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
    return file_path;
}

const char *write_yaml(const char *text)
{
    return write_named("t.yaml", text);
}

rv_config_t *load_ok(const char *yaml)
{
    char err[1024] = "";
    rv_config_t *cfg = NULL;
    rv_status_t status =
        rv_config_load(write_yaml(yaml), &cfg, err, sizeof(err));
    if (status != RV_OK)
        fail_msg("unexpected error: %s", err);
    assert_non_null(cfg);
    return cfg;
}

rv_config_t *load_env(void)
{
    char err[1024] = "";
    rv_config_t *cfg = NULL;
    if (rv_config_load(NULL, &cfg, err, sizeof(err)) != RV_OK)
        fail_msg("unexpected error: %s", err);
    return cfg;
}

void expect_error(const char *yaml, int line, int col, const char *what)
{
    char err[1024] = "", expected[1024];
    rv_config_t *cfg = (rv_config_t *)&expected;
    const char *path = write_yaml(yaml);

    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    snprintf(expected, sizeof(expected), "%s:%d:%d: error: %s", path, line, col,
             what);
    assert_string_equal(err, expected);
    assert_ptr_equal(cfg, (rv_config_t *)&expected);
}

void expect_env_error(const char *expected)
{
    char err[1024] = "";
    rv_config_t *cfg = NULL;

    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    assert_string_equal(err, expected);
    assert_null(cfg);
}

char *dump_text(const rv_config_t *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);

    assert_non_null(mem);
    rv_config_dump(cfg, mem);
    assert_int_equal(fclose(mem), 0);
    return text;
}

/* ---------------------------------------------------------------------- */
/* Defaults                                                                */
/* ---------------------------------------------------------------------- */

void test_defaults(void **state)
{
    rv_config_t *cfg = load_env(), *other;
    const rv_rma_config_t *rma;
    const testlayer_config_t *tl;
    char *text, *other_text;
    int64_t v;
    (void)state;

    assert_int_equal(core(cfg)->job.processes, 2);
    assert_int_equal(core(cfg)->job.threads, 1);
    assert_int_equal(core(cfg)->job.placement, RV_PLACEMENT_CORE);
    assert_false(core(cfg)->job.output_prefix);
    assert_int_equal(core(cfg)->job.service_threads, 0);
    assert_int_equal(core(cfg)->job.stats, RV_STATS_OFF);
    assert_string_equal(core(cfg)->transport.name, "ucx");
    assert_int_equal(core(cfg)->memory.chunk, 2 << 20);
    assert_int_equal(core(cfg)->memory.huge_pages, RV_HUGE_AUTO);
    assert_int_equal(core(cfg)->progress.mode, RV_PROGRESS_INLINE);
    assert_int_equal(am(cfg)->path, RV_AM_PATH_SEND);
    assert_int_equal(am(cfg)->aggregation, RV_AGG_NONE);
    assert_int_equal(am(cfg)->flush_bytes, 8192);
    assert_int_equal(am(cfg)->ovfl_limit, 1 << 20);
    assert_int_equal(am(cfg)->on_full, RV_ON_FULL_PROGRESS);
    assert_int_equal(am(cfg)->chunks_per_request, 2);
    assert_int_equal(am(cfg)->max_chunks, 8);
    assert_int_equal(am(cfg)->chunk_bytes, 2 << 20);
    assert_true(am(cfg)->local_bypass);
    rma = rv_config_component(cfg, RMA_CONFIG_PREFIX);
    assert_non_null(rma);
    assert_int_equal(rma->am_long_protocol, RV_AMLONG_REASSEMBLY);
    tl = rv_config_component(cfg, "testlayer");
    assert_non_null(tl);
    assert_int_equal(tl->fanout, 4);
    assert_string_equal(tl->label, "t");

    /* The selected transport's component, and no other plugin's... */
    assert_string_equal(ucx(cfg)->tls, "");
    assert_string_equal(ucx(cfg)->net_devices, "");
    assert_int_equal(ucx(cfg)->rndv_thresh, 0);
    assert_int_equal(ucx(cfg)->rma_emulation, RV_RMA_EMU_AUTO);
    assert_int_equal(ucx(cfg)->gid_index, -1);
    assert_null(rv_config_component(cfg, "transport.verbs"));
    assert_null(rv_config_component(cfg, "nosuchlayer"));
    assert_int_equal(rv_config_get_int(cfg, "store.capacity", &v), RV_OK);
    assert_int_equal(v, 1 << 30);
    /* ...whose keys still read as their defaults. */
    assert_int_equal(rv_config_get_int(cfg, "transport.verbs.port", &v), RV_OK);
    assert_int_equal(v, 1);

    /* An empty file and empty sections leave the defaults. */
    text = dump_text(cfg);
    other = load_ok("");
    other_text = dump_text(other);
    assert_string_equal(other_text, text);
    free(other_text);
    rv_config_free(other);
    other = load_ok("# nothing\njob:\ntransport:\n  ucx:\nam:\n");
    other_text = dump_text(other);
    assert_string_equal(other_text, text);
    free(other_text);
    rv_config_free(other);
    free(text);
    rv_config_free(cfg);
    rv_config_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_tables),
        cmocka_unit_test_teardown(test_registration, config_tables_teardown),
        cmocka_unit_test(test_plugin_tables),
        cmocka_unit_test(test_distance_bounded),
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_shipped_configs),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_every_error),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_bools),
        cmocka_unit_test(test_syntax_and_structure),
        cmocka_unit_test(test_later_keys),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_env_override),
        cmocka_unit_test(test_env_stats),
        cmocka_unit_test_teardown(test_set, config_values_teardown),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_tool),
        cmocka_unit_test(test_tool_reference),
    };
    return cmocka_run_group_tests_name("config", tests, group_setup,
                                       group_teardown);
}
