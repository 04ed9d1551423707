/*
 * The configuration test: one CMocka group ("config") over several files,
 * one for each part of the configuration:
 *
 *   test_config.c         the group: set-up, the helpers below, the layer
 *                         table this program registers, every component's
 *                         defaults, main
 *   test_config_tables.c  component tables: core's, the layers' and the
 *                         plugins', registration
 *   test_config_file.c    loading a file: valid files, shipped files, and
 *                         every class of error with its exact message
 *   test_config_values.c  values: sizes, booleans, the environment,
 *                         rv_config_set and rv_config_get
 *   test_config_dump.c    the --dump round trip and the rivet-config tool
 *
 * Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_CONFIG_TEST_H
#define RIVET_TESTS_CONFIG_TEST_H

#include <stdint.h>

#include "am_config.h"
#include "rma_config.h"
#include "rv_config.h"
#include "rv_config_internal.h"
#include "ucx_config.h"
#include "verbs_config.h"

/* A layer's table, registered as librivet's layers register theirs. */
typedef enum { FLAVOUR_VANILLA, FLAVOUR_CHOCOLATE } flavour_t;
typedef struct {
    int64_t fanout;
    flavour_t flavour;
    char label[RV_CONFIG_STR_MAX];
    int64_t turbo;
} testlayer_config_t;

extern const rv_config_table_t testlayer_table;

/* The group's temporary folder, where the tests write their files. */
extern char tmpdir[256];

/* Unsets every RIVET_* variable but the plugin path, so tests start from
 * defaults. */
void clear_config_env(void);

/* Writes @p text to tmpdir/@p name; returns the path (static buffer). */
const char *write_named(const char *name, const char *text);
const char *write_yaml(const char *text);

/* Loads @p yaml; expects success and returns the configuration. */
rv_config_t *load_ok(const char *yaml);

/* Loads defaults and the environment; expects success. */
rv_config_t *load_env(void);

/*
 * Loads @p yaml; expects RV_ERR_CONFIG with exactly
 * "PATH:LINE:COL: error: WHAT", and the output argument left untouched.
 */
void expect_error(const char *yaml, int line, int col, const char *what);

/* Loads defaults and environment; expects RV_ERR_CONFIG with @p expected. */
void expect_env_error(const char *expected);

/* @p cfg as rv_config_dump writes it (free it). */
char *dump_text(const rv_config_t *cfg);

/* Every component's struct, which must be there. */
static inline const rv_core_config_t *core(const rv_config_t *cfg)
{
    const rv_core_config_t *c = rv_core_config(cfg);
    assert_non_null(c);
    return c;
}

static inline const rv_am_config_t *am(const rv_config_t *cfg)
{
    const rv_am_config_t *c = rv_config_component(cfg, AM_CONFIG_PREFIX);
    assert_non_null(c);
    return c;
}

static inline const rv_ucx_config_t *ucx(const rv_config_t *cfg)
{
    const rv_ucx_config_t *c = rv_config_component(cfg, "transport.ucx");
    assert_non_null(c);
    return c;
}

static inline const rv_verbs_config_t *verbs(const rv_config_t *cfg)
{
    const rv_verbs_config_t *c = rv_config_component(cfg, "transport.verbs");
    assert_non_null(c);
    return c;
}

/* The checks, in the files above. A file whose checks capture stderr has
 * its own teardown: stderr_capture.h keeps one capture per file. */
void test_defaults(void **state);

void test_tables(void **state);
void test_registration(void **state);
void test_plugin_tables(void **state);
void test_distance_bounded(void **state);
int config_tables_teardown(void **state);

void test_valid_file(void **state);
void test_shipped_configs(void **state);
void test_unknown_keys(void **state);
void test_bad_values(void **state);
void test_every_error(void **state);
void test_wrong_types(void **state);
void test_syntax_and_structure(void **state);
void test_later_keys(void **state);
void test_missing_file(void **state);

void test_sizes(void **state);
void test_bools(void **state);
void test_env_override(void **state);
void test_env_stats(void **state);
void test_set(void **state);
void test_get(void **state);
int config_values_teardown(void **state);

void test_dump_round_trip(void **state);
void test_tool(void **state);
void test_tool_reference(void **state);

#endif
