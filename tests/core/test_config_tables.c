/*
 * Component tables: core's, the layers' (this program's included) and the
 * plugins', their registration, and the plugins' components in a load
 * (config_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config_test.h"
#include "rv_transport.h"
#include "stderr_capture.h"

/* ---------------------------------------------------------------------- */
/* Components and tables                                                   */
/* ---------------------------------------------------------------------- */

/* Checks one table: rows named once, in the struct, without overlap. */
static void check_table(const rv_config_table_t *t)
{
    static const size_t type_size[] = {
        [RV_CFG_INT] = sizeof(int64_t), [RV_CFG_SIZE] = sizeof(uint64_t),
        [RV_CFG_BOOL] = sizeof(bool),   [RV_CFG_STRING] = RV_CONFIG_STR_MAX,
        [RV_CFG_ENUM] = sizeof(int),
    };
    unsigned char *used = calloc(1, t->size);

    assert_non_null(used);
    assert_non_null(t->help);
    for (const rv_config_field_t *f = t->fields; f->name != NULL; f++) {
        assert_non_null(f->def);
        assert_non_null(f->help);
        assert_true(strlen(f->help) > 20);
        if (f->type == RV_CFG_ENUM)
            assert_non_null(f->values);
        if (f->type == RV_CFG_INT || f->type == RV_CFG_SIZE)
            assert_true(f->min <= f->max);
        assert_true(f->offset + type_size[f->type] <= t->size);
        for (size_t i = 0; i < type_size[f->type]; i++) {
            if (used[f->offset + i])
                fail_msg("%s.%s overlaps another row", t->prefix, f->name);
            used[f->offset + i] = 1;
        }
    }
    free(used);
}

void test_tables(void **state)
{
    static const char *const expected[] = {
        "",      "am",        "mcts",          "rma",
        "store", "testlayer", "transport.ucx", "transport.verbs",
    };
    const rv_config_table_t *tables[RV_CFG_MAX_TABLES];
    size_t n = rv__config_tables(tables, true), rows = 0;
    (void)state;

    /* Core's, the layers' by prefix, then the plugins' by prefix. */
    assert_int_equal(n, sizeof(expected) / sizeof(expected[0]));
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(tables[i]->prefix, expected[i]);
        check_table(tables[i]);
        for (const rv_config_field_t *f = tables[i]->fields; f->name; f++)
            rows++;
    }
    /* Full keys are distinct across tables. */
    for (size_t i = 0; i < n; i++)
        for (const rv_config_field_t *f = tables[i]->fields; f->name; f++) {
            char key[RV_CFG_KEY_MAX];
            const rv_config_table_t *t;
            rv__config_full_key(tables[i], f, key, sizeof(key));
            assert_ptr_equal(rv__config_find_any(key, &t), f);
            assert_ptr_equal(t, tables[i]);
        }
    /* core 16, am 12, mcts 8, rma 1, store 3, testlayer 4, ucx 6, verbs 8 */
    assert_int_equal(rows, 58);

    /* Enum names follow the C enums, in every component. */
    assert_string_equal(rv_config_enum_name("job.placement", RV_PLACEMENT_NONE),
                        "none");
    assert_string_equal(rv_config_enum_name("job.placement", RV_PLACEMENT_NUMA),
                        "numa");
    assert_string_equal(rv_config_enum_name("job.stats", RV_STATS_JSON),
                        "json");
    assert_string_equal(
        rv_config_enum_name("progress.mode", RV_PROGRESS_DYNAMIC), "dynamic");
    assert_string_equal(
        rv_config_enum_name("progress.mode", RV_PROGRESS_DIRECT), "direct");
    assert_string_equal(
        rv_config_enum_name("progress.completers", RV_COMPLETERS_THREADS),
        "threads");
    assert_string_equal(rv_config_enum_name("am.path", RV_AM_PATH_WRITE),
                        "write");
    assert_string_equal(rv_config_enum_name("am.aggregation", RV_AGG_TRAD),
                        "trad");
    assert_string_equal(rv_config_enum_name("am.aggregation", RV_AGG_OVFL),
                        "ovfl");
    assert_string_equal(
        rv_config_enum_name("am.intranode", RV_AM_INTRANODE_MAPPED), "mapped");
    assert_string_equal(
        rv_config_enum_name("am.on_full", RV_ON_FULL_RETRY_ASYNC),
        "retry_async");
    assert_string_equal(rv_config_enum_name("am.on_full", RV_ON_FULL_PROGRESS),
                        "progress");
    assert_string_equal(
        rv_config_enum_name("rma.am_long_protocol", RV_AMLONG_PUT_SYNC_SEND),
        "put_sync_send");
    assert_string_equal(rv_config_enum_name("transport.verbs.qp_sharing",
                                            RV_QP_SHARING_PROCESS),
                        "process");
    assert_string_equal(
        rv_config_enum_name("memory.huge_pages", RV_HUGE_REQUIRE), "require");
    assert_string_equal(
        rv_config_enum_name("transport.ucx.rma_emulation", RV_RMA_EMU_OFF),
        "off");
    assert_string_equal(
        rv_config_enum_name("testlayer.flavour", FLAVOUR_CHOCOLATE),
        "chocolate");
    assert_null(rv_config_enum_name("job.placement", 3));
    assert_null(rv_config_enum_name("job.placement", -1));
    assert_null(rv_config_enum_name("job.threads", 0));
    assert_null(rv_config_enum_name("no.such.key", 0));
    assert_null(rv_config_enum_name("transport.ofi.mode", 0));
}

void test_registration(void **state)
{
    static const rv_config_field_t late_fields[] = {
        {.name = "depth",
         .type = RV_CFG_INT,
         .offset = 0,
         .def = "1",
         .min = 0,
         .max = 9,
         .help = "A key registered after a load."},
        {.name = NULL},
    };
    static const rv_config_table_t late = {.prefix = "latelayer",
                                           .help = "Registered late.",
                                           .fields = late_fields,
                                           .size = sizeof(int64_t)};
    static const rv_config_table_t twin = {
        .prefix = "testlayer",
        .help = "Another table with a taken prefix.",
        .fields = late_fields,
        .size = sizeof(int64_t)};
    static const rv_config_table_t bad[] = {
        {.prefix = "", .help = "core's", .fields = late_fields, .size = 8},
        {.prefix = "job", .help = "core's", .fields = late_fields, .size = 8},
        {.prefix = "memory.x",
         .help = "core's",
         .fields = late_fields,
         .size = 8},
        {.prefix = "transport.mine",
         .help = "a plugin's",
         .fields = late_fields,
         .size = 8},
    };
    const testlayer_config_t *tl;
    rv_config_t *cfg, *before;
    char *text;
    (void)state;

    /* The table registered by this program's constructor: file, then
     * environment, both through the layer's own struct. */
    setenv("RIVET_TESTLAYER_LABEL", "from the environment", 1);
    cfg = load_ok("testlayer:\n  fanout: 16\n  flavour: chocolate\n");
    clear_config_env();
    tl = rv_config_component(cfg, "testlayer");
    assert_non_null(tl);
    assert_int_equal(tl->fanout, 16);
    assert_int_equal(tl->flavour, FLAVOUR_CHOCOLATE);
    assert_string_equal(tl->label, "from the environment");
    text = dump_text(cfg);
    assert_non_null(strstr(text, "\n# A layer the configuration test "
                                 "registers.\ntestlayer:\n  fanout: 16\n"
                                 "  flavour: chocolate\n"));
    free(text);
    rv_config_free(cfg);
    expect_error("testlayer:\n  fanout: 65\n", 2, 11,
                 "testlayer.fanout: 65 is out of range; expected an integer "
                 "in 1..64");

    /* Registering again is harmless; a taken or reserved prefix is not. */
    assert_int_equal(rv_config_register(&testlayer_table), RV_OK);
    capture_begin();
    assert_int_equal(rv_config_register(&twin), RV_ERR_EXISTS);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(rv_config_register(&bad[i]), RV_ERR_INVALID);
    assert_int_equal(rv_config_register(NULL), RV_ERR_INVALID);
    char err[4096];
    capture_end(err, sizeof(err));
    assert_non_null(strstr(err, "configuration table 'testlayer' is "
                                "registered twice"));
    assert_non_null(strstr(err, "configuration table 'transport.mine': a "
                                "layer's prefix must be a name of its own"));

    /* A table registered after a load is in later loads only. */
    before = load_env();
    assert_int_equal(rv_config_register(&late), RV_OK);
    assert_null(rv_config_component(before, "latelayer"));
    cfg = load_ok("latelayer:\n  depth: 7\n");
    assert_int_equal(*(const int64_t *)rv_config_component(cfg, "latelayer"),
                     7);
    rv_config_free(cfg);
    rv_config_free(before);
}

void test_plugin_tables(void **state)
{
    rv_config_t *cfg;
    char buf[64];
    (void)state;

    /* The selected plugin's keys, in its own struct; another plugin is
     * not loaded for nothing. */
    cfg = load_ok("transport:\n  name: verbs\n  verbs:\n    port: 2\n"
                  "    qp_sharing: process\n");
    assert_int_equal(verbs(cfg)->port, 2);
    assert_int_equal(verbs(cfg)->qp_sharing, RV_QP_SHARING_PROCESS);
    assert_int_equal(verbs(cfg)->signal_interval, 64);
    assert_int_equal(verbs(cfg)->timeout, 18);
    assert_int_equal(verbs(cfg)->retry_count, 6);
    assert_int_equal(verbs(cfg)->max_message, (uint64_t)1 << 31);
    assert_null(rv_config_component(cfg, "transport.ucx"));
    rv_config_free(cfg);

    /* Keys of a plugin that is not selected bring its component in. */
    cfg = load_ok("transport:\n  ucx:\n    tls: tcp\n  verbs:\n"
                  "    device: rxe0\n");
    assert_string_equal(ucx(cfg)->tls, "tcp");
    assert_string_equal(verbs(cfg)->device, "rxe0");
    rv_config_free(cfg);
    setenv("RIVET_TRANSPORT_VERBS_GID_INDEX", "3", 1);
    cfg = load_env();
    assert_int_equal(verbs(cfg)->gid_index, 3);
    assert_string_equal(ucx(cfg)->tls, "");
    rv_config_free(cfg);
    clear_config_env();
    setenv("RIVET_TRANSPORT_NAME", "verbs", 1);
    cfg = load_ok("transport:\n  name: ucx\n");
    assert_string_equal(core(cfg)->transport.name, "verbs");
    assert_int_equal(verbs(cfg)->port, 1);
    assert_null(rv_config_component(cfg, "transport.ucx"));
    rv_config_free(cfg);
    clear_config_env();

    /* A transport without a plugin loads (rv_init reports it); keys under
     * it do not. */
    cfg = load_ok("transport:\n  name: ofi\n");
    assert_string_equal(core(cfg)->transport.name, "ofi");
    assert_int_equal(rv_config_get(cfg, "transport.ucx.tls", buf, sizeof(buf)),
                     RV_OK);
    assert_string_equal(buf, "");
    rv_config_free(cfg);
    expect_error("transport:\n  ofi:\n    provider: verbs\n", 2, 3,
                 "unknown section 'transport.ofi': no transport plugin "
                 "librivet-ofi.so (available transports: ucx, verbs)");
    expect_error("transport:\n  ucxx:\n    tls: tcp\n", 2, 3,
                 "unknown section 'transport.ucxx': no transport plugin "
                 "librivet-ucxx.so; did you mean 'transport.ucx'?");
    expect_error("transport:\n  ucx:\n    tsl: tcp\n", 3, 5,
                 "unknown key 'transport.ucx.tsl'; did you mean "
                 "'transport.ucx.tls'?");
    expect_error("transport:\n  verbs:\n    port: 0\n", 3, 11,
                 "transport.verbs.port: 0 is out of range; expected an "
                 "integer in 1..255");

    /* A plugin of another ABI is named, with what to do. */
    char expected[1024];
    setenv("RIVET_PLUGIN_PATH", FAKE_PLUGIN_DIR, 1);
    snprintf(expected, sizeof(expected),
             "transport.wrongabi: %s/librivet-wrongabi.so implements "
             "transport ABI %d, this rivet needs %d; rebuild the plugin",
             FAKE_PLUGIN_DIR, RV_TRANSPORT_ABI_VERSION + 100,
             RV_TRANSPORT_ABI_VERSION);
    expect_error("transport:\n  wrongabi:\n    x: 1\n", 2, 3, expected);
    unsetenv("RIVET_PLUGIN_PATH");
}

/* Levenshtein distance by the whole table, to check the bounded one. */
static size_t distance_ref(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), d[16][16];

    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The bounded distance is the distance when within the limit, else one
 * past it, on random words of a small alphabet (many near each other);
 * and a suggestion's tie broken by the full distance still finds the
 * nearer key. */
void test_distance_bounded(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char a[16], b[16], buf[256];

    (void)state;
    for (int round = 0; round < 20000; round++) {
        size_t la, lb, limit, ref;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        la = (x >> 33) % 13;
        lb = (x >> 40) % 13;
        limit = (x >> 50) % 7;
        for (size_t i = 0; i < 15; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            a[i] = (char)('a' + (x >> 60) % 3);
            b[i] = (char)('a' + (x >> 56) % 3);
        }
        a[la] = b[lb] = '\0';
        ref = distance_ref(a, b);
        assert_int_equal(rv__config_distance(a, b, limit),
                         ref <= limit ? ref : limit + 1);
        assert_int_equal(rv__config_distance(a, b, SIZE_MAX / 2), ref);
    }
    rv__config_unknown("transport.tls", false, buf, sizeof(buf));
    assert_string_equal(buf, "unknown key 'transport.tls'; did you mean "
                             "'transport.ucx.tls'?");
    rv__config_unknown("transport.gid_index", false, buf, sizeof(buf));
    assert_string_equal(buf, "unknown key 'transport.gid_index'; did you "
                             "mean 'transport.ucx.gid_index'?");
}

int config_tables_teardown(void **state)
{
    return capture_teardown(state);
}
