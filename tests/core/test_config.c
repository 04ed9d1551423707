/*
 * Tests of the configuration (core/rv_config_*.c), its tables and the
 * rivet-config tool: component tables (core's, the layers' registered
 * ones, one registered here, the plugins'), every class of error with its
 * exact message, size units, booleans, environment overrides, rv_config_set
 * and rv_config_get, and the --dump round trip.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "am_config.h"
#include "rma_config.h"
#include "rv_config.h"
#include "rv_config_internal.h"
#include "stderr_capture.h"
#include "ucx_config.h"
#include "verbs_config.h"

#ifndef RIVET_CONFIG_BIN
#error "RIVET_CONFIG_BIN must name the rivet-config binary"
#endif

#define OUT_MAX 65536 /* what a test reads of a command's output */

static char tmpdir[256];
static char file_path[512];

/* A layer's table, registered as librivet's layers register theirs. */
typedef enum { FLAVOUR_VANILLA, FLAVOUR_CHOCOLATE } flavour_t;
typedef struct {
    int64_t fanout;
    flavour_t flavour;
    char label[RV_CONFIG_STR_MAX];
} testlayer_config_t;

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
    {.name = NULL},
};

static const rv_config_table_t testlayer_table = {
    .prefix = "testlayer",
    .help = "A layer the configuration test registers.",
    .fields = testlayer_fields,
    .size = sizeof(testlayer_config_t),
};

RV_CONFIG_REGISTER_TABLE(testlayer_table)

/* Unsets every RIVET_* variable but the plugin path, so tests start from
 * defaults. */
static void clear_config_env(void)
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

/* Writes @p text to tmpdir/@p name; returns the path (static buffer). */
static const char *write_named(const char *name, const char *text)
{
    FILE *fp;

    snprintf(file_path, sizeof(file_path), "%s/%s", tmpdir, name);
    fp = fopen(file_path, "w");
    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
    return file_path;
}

static const char *write_yaml(const char *text)
{
    return write_named("t.yaml", text);
}

/* Loads @p yaml; expects success and returns the configuration. */
static rv_config_t *load_ok(const char *yaml)
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

/* Loads defaults and the environment; expects success. */
static rv_config_t *load_env(void)
{
    char err[1024] = "";
    rv_config_t *cfg = NULL;
    if (rv_config_load(NULL, &cfg, err, sizeof(err)) != RV_OK)
        fail_msg("unexpected error: %s", err);
    return cfg;
}

/*
 * Loads @p yaml; expects RV_ERR_CONFIG with exactly
 * "PATH:LINE:COL: error: WHAT", and the output argument left untouched.
 */
static void expect_error(const char *yaml, int line, int col, const char *what)
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

/* Loads defaults and environment; expects RV_ERR_CONFIG with @p expected. */
static void expect_env_error(const char *expected)
{
    char err[1024] = "";
    rv_config_t *cfg = NULL;

    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    assert_string_equal(err, expected);
    assert_null(cfg);
}

/* @p cfg as rv_config_dump writes it (free it). */
static char *dump_text(const rv_config_t *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);

    assert_non_null(mem);
    rv_config_dump(cfg, mem);
    assert_int_equal(fclose(mem), 0);
    return text;
}

static const rv_core_config_t *core(const rv_config_t *cfg)
{
    const rv_core_config_t *c = rv_core_config(cfg);
    assert_non_null(c);
    return c;
}

static const rv_am_config_t *am(const rv_config_t *cfg)
{
    const rv_am_config_t *c = rv_config_component(cfg, AM_CONFIG_PREFIX);
    assert_non_null(c);
    return c;
}

static const rv_ucx_config_t *ucx(const rv_config_t *cfg)
{
    const rv_ucx_config_t *c = rv_config_component(cfg, "transport.ucx");
    assert_non_null(c);
    return c;
}

static const rv_verbs_config_t *verbs(const rv_config_t *cfg)
{
    const rv_verbs_config_t *c = rv_config_component(cfg, "transport.verbs");
    assert_non_null(c);
    return c;
}

/* ---------------------------------------------------------------------- */
/* Components and tables                                                   */
/* ---------------------------------------------------------------------- */

static void test_defaults(void **state)
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
    assert_int_equal(am(cfg)->flush_bytes, 4096);
    assert_int_equal(am(cfg)->ovfl_limit, 1 << 20);
    assert_int_equal(am(cfg)->on_full, RV_ON_FULL_FAIL);
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
    assert_null(rv_config_component(cfg, "store"));
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

static void test_tables(void **state)
{
    static const char *const expected[] = {
        "", "am", "rma", "testlayer", "transport.ucx", "transport.verbs",
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
    /* core 10, am 9, rma 1, testlayer 3, ucx 5, verbs 5 */
    assert_int_equal(rows, 33);

    /* Enum names follow the C enums, in every component. */
    assert_string_equal(rv_config_enum_name("job.placement", RV_PLACEMENT_NONE),
                        "none");
    assert_string_equal(rv_config_enum_name("job.placement", RV_PLACEMENT_NUMA),
                        "numa");
    assert_string_equal(rv_config_enum_name("job.stats", RV_STATS_JSON),
                        "json");
    assert_string_equal(
        rv_config_enum_name("progress.mode", RV_PROGRESS_DYNAMIC), "dynamic");
    assert_string_equal(rv_config_enum_name("am.path", RV_AM_PATH_WRITE),
                        "write");
    assert_string_equal(rv_config_enum_name("am.aggregation", RV_AGG_TRAD),
                        "trad");
    assert_string_equal(rv_config_enum_name("am.aggregation", RV_AGG_OVFL),
                        "ovfl");
    assert_string_equal(
        rv_config_enum_name("am.on_full", RV_ON_FULL_RETRY_ASYNC),
        "retry_async");
    assert_string_equal(
        rv_config_enum_name("rma.am_long_protocol", RV_AMLONG_PUT_SYNC_SEND),
        "put_sync_send");
    assert_string_equal(rv_config_enum_name("transport.verbs.qp_sharing",
                                            RV_QP_SHARING_PROCESS),
                        "process");
    assert_string_equal(
        rv_config_enum_name("memory.huge_pages", RV_HUGE_REQUIRE), "require");
    assert_string_equal(rv_config_enum_name("transport.ucx.rma_emulation",
                                            RV_RMA_EMU_OFF),
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

static void test_registration(void **state)
{
    static const rv_config_field_t late_fields[] = {
        {.name = "depth", .type = RV_CFG_INT, .offset = 0, .def = "1",
         .min = 0, .max = 9, .help = "A key registered after a load."},
        {.name = NULL},
    };
    static const rv_config_table_t late = {
        .prefix = "latelayer", .help = "Registered late.",
        .fields = late_fields, .size = sizeof(int64_t)};
    static const rv_config_table_t twin = {
        .prefix = "testlayer", .help = "Another table with a taken prefix.",
        .fields = late_fields, .size = sizeof(int64_t)};
    static const rv_config_table_t bad[] = {
        {.prefix = "", .help = "core's", .fields = late_fields, .size = 8},
        {.prefix = "job", .help = "core's", .fields = late_fields, .size = 8},
        {.prefix = "memory.x", .help = "core's", .fields = late_fields,
         .size = 8},
        {.prefix = "transport.mine", .help = "a plugin's",
         .fields = late_fields, .size = 8},
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

static void test_plugin_tables(void **state)
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
             "transport ABI 103, this rivet needs 3; rebuild the plugin",
             FAKE_PLUGIN_DIR);
    expect_error("transport:\n  wrongabi:\n    x: 1\n", 2, 3, expected);
    unsetenv("RIVET_PLUGIN_PATH");
}

/* ---------------------------------------------------------------------- */
/* The file                                                                */
/* ---------------------------------------------------------------------- */

static void test_valid_file(void **state)
{
    (void)state;
    rv_config_t *cfg = load_ok("# a job\n"
                               "job:\n"
                               "  processes: 4\n"
                               "  threads: 8\n"
                               "  placement: NUMA\n"
                               "  output_prefix: yes\n"
                               "  stats: json\n"
                               "transport:\n"
                               "  name: ucx\n"
                               "  ucx:\n"
                               "    tls: 'sm,self'\n"
                               "    net_devices: \"lo\"\n"
                               "    rndv_thresh: 64KiB\n"
                               "am:\n"
                               "  aggregation: ovfl\n"
                               "rma:\n"
                               "  am_long_protocol: put_sync_send\n");
    assert_int_equal(core(cfg)->job.processes, 4);
    assert_int_equal(core(cfg)->job.threads, 8);
    assert_int_equal(core(cfg)->job.placement, RV_PLACEMENT_NUMA);
    assert_true(core(cfg)->job.output_prefix);
    assert_int_equal(core(cfg)->job.stats, RV_STATS_JSON);
    assert_string_equal(core(cfg)->transport.name, "ucx");
    assert_string_equal(ucx(cfg)->tls, "sm,self");
    assert_string_equal(ucx(cfg)->net_devices, "lo");
    assert_int_equal(ucx(cfg)->rndv_thresh, 64 << 10);
    assert_int_equal(am(cfg)->aggregation, RV_AGG_OVFL);
    assert_int_equal(((const rv_rma_config_t *)rv_config_component(
                          cfg, RMA_CONFIG_PREFIX))
                         ->am_long_protocol,
                     RV_AMLONG_PUT_SYNC_SEND);
    rv_config_free(cfg);

    /* Flow style and anchors are YAML too. */
    cfg = load_ok("job: {threads: &n 3, processes: *n}\n");
    assert_int_equal(core(cfg)->job.threads, 3);
    assert_int_equal(core(cfg)->job.processes, 3);
    rv_config_free(cfg);
}

static void test_shipped_configs(void **state)
{
    static const struct {
        const char *name, *tls, *devices;
    } files[] = {
        {"pingpong-shm.yaml", "sm,self", ""},
        {"pingpong-tcp.yaml", "tcp,self", "lo"},
        {"test-ucx-shm.yaml", "sm,self", ""},
        {"test-ucx-tcp.yaml", "tcp,self", "lo"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[512], err[1024] = "";
        rv_config_t *cfg;
        snprintf(path, sizeof(path), "%s/%s", RIVET_CONFIGS_DIR, files[i].name);
        if (rv_config_load(path, &cfg, err, sizeof(err)) != RV_OK)
            fail_msg("%s", err);
        assert_int_equal(core(cfg)->job.processes, 2);
        assert_int_equal(core(cfg)->job.threads, 1);
        assert_int_equal(core(cfg)->job.placement, RV_PLACEMENT_CORE);
        assert_string_equal(core(cfg)->transport.name, "ucx");
        assert_string_equal(ucx(cfg)->tls, files[i].tls);
        assert_string_equal(ucx(cfg)->net_devices, files[i].devices);
        rv_config_free(cfg);
    }
    /* The others load too (their plugins' keys included). */
    static const char *const others[] = {"test-ucx-rc.yaml", "test-verbs.yaml"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        char path[512], err[1024] = "";
        rv_config_t *cfg;
        snprintf(path, sizeof(path), "%s/%s", RIVET_CONFIGS_DIR, others[i]);
        if (rv_config_load(path, &cfg, err, sizeof(err)) != RV_OK)
            fail_msg("%s", err);
        rv_config_free(cfg);
    }
}

static void test_unknown_keys(void **state)
{
    (void)state;
    /* Misspelled key: nearest full path, in any component's table. */
    expect_error("am:\n  agregation: ovfl\n", 2, 3,
                 "unknown key 'am.agregation'; did you mean "
                 "'am.aggregation'?");
    expect_error("job:\n  processes: 2\n  theads: 4\n", 3, 3,
                 "unknown key 'job.theads'; did you mean 'job.threads'?");
    expect_error("rma:\n  am_long_protocl: reassembly\n", 2, 3,
                 "unknown key 'rma.am_long_protocl'; did you mean "
                 "'rma.am_long_protocol'?");
    expect_error("testlayer:\n  fanuot: 3\n", 2, 3,
                 "unknown key 'testlayer.fanuot'; did you mean "
                 "'testlayer.fanout'?");
    /* Right name, wrong section: the last component finds it, across
     * tables (a plugin's key under core's section). */
    expect_error("transport:\n  tls: tcp,self\n", 2, 3,
                 "unknown key 'transport.tls'; did you mean "
                 "'transport.ucx.tls'?");
    expect_error("transport:\n  qp_sharing: process\n", 2, 3,
                 "unknown key 'transport.qp_sharing'; did you mean "
                 "'transport.verbs.qp_sharing'?");
    expect_error("threads: 4\n", 1, 1,
                 "unknown key 'threads'; did you mean 'job.threads'?");
    expect_error("job:\n  flush_bytes: 4KiB\n", 2, 3,
                 "unknown key 'job.flush_bytes'; did you mean "
                 "'am.flush_bytes'?");
    /* Misspelled sections. */
    expect_error("tranport:\n  name: ucx\n", 1, 1,
                 "unknown section 'tranport'; did you mean 'transport'?");
    expect_error("amm:\n  path: write\n", 1, 1,
                 "unknown section 'amm'; did you mean 'am'?");
    /* Nothing close; the layers that do not exist have no keys. */
    expect_error("job:\n  threads: 2\nzzzzzz: 1\n", 3, 1,
                 "unknown key 'zzzzzz' (rivet-config --reference lists "
                 "every key)");
    expect_error("store:\n  capacity: 1GiB\n", 1, 1,
                 "unknown section 'store' (rivet-config --reference lists "
                 "every key)");
    expect_error("job.threads: 3\n", 1, 1,
                 "job.threads: dotted keys are not accepted; write each "
                 "part as a nested mapping");
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_error("job:\n  placement: nmua\n", 2, 14,
                 "job.placement: bad value 'nmua'; expected one of none, "
                 "core, numa");
    expect_error("job:\n  threads: 0\n", 2, 12,
                 "job.threads: 0 is out of range; expected an integer in "
                 "1..1024");
    expect_error("job:\n  processes: 4097\n", 2, 14,
                 "job.processes: 4097 is out of range; expected an integer "
                 "in 1..4096");
    expect_error("job:\n  threads: 99999999999999999999\n", 2, 12,
                 "job.threads: 99999999999999999999 is out of range; "
                 "expected an integer in 1..1024");
    expect_error("job:\n  threads: many\n", 2, 12,
                 "job.threads: expected an integer in 1..1024, got 'many'");
    expect_error("job:\n  threads: 2.5\n", 2, 12,
                 "job.threads: expected an integer in 1..1024, got '2.5'");
    /* Quoted control characters do not break the message's one line. */
    expect_error("job:\n  threads: \"1\\n2\"\n", 2, 12,
                 "job.threads: expected an integer in 1..1024, got '1\\n2'");
    expect_error("job:\n  threads:\n", 2, 11,
                 "job.threads: missing value; expected an integer in "
                 "1..1024");
    expect_error("job:\n  output_prefix: maybe\n", 2, 18,
                 "job.output_prefix: expected true or false (or yes/no, "
                 "on/off, 1/0), got 'maybe'");
    expect_error("job:\n  stats: yes\n", 2, 10,
                 "job.stats: bad value 'yes'; expected one of off, text, "
                 "json");
    expect_error("transport:\n  name: \"\"\n", 2, 9,
                 "transport.name: the value must not be empty");
    expect_error("am:\n  on_full: later\n", 2, 12,
                 "am.on_full: bad value 'later'; expected one of fail, "
                 "retry, retry_async");

    char yaml[600] = "transport:\n  ucx:\n    tls: ";
    size_t n = strlen(yaml);
    memset(yaml + n, 'x', 300);
    strcpy(yaml + n + 300, "\n");
    expect_error(yaml, 3, 10,
                 "transport.ucx.tls: the value is too long (300 bytes; at "
                 "most 255)");
}

static void test_wrong_types(void **state)
{
    (void)state;
    expect_error("job:\n  threads:\n    a: 1\n", 3, 5,
                 "job.threads: expected a single value, got a mapping");
    expect_error("job:\n  threads: [1, 2]\n", 2, 12,
                 "job.threads: expected a single value, got a sequence");
    expect_error("job: 4\n", 1, 6,
                 "job: expected a mapping (the section's keys), got a "
                 "scalar");
    expect_error("transport:\n  ucx: [tcp]\n", 2, 8,
                 "transport.ucx: expected a mapping (the section's keys), "
                 "got a sequence");
    expect_error("hello\n", 1, 1,
                 "expected a mapping of sections (job:, transport:, ...) at "
                 "the top level, got a scalar");
    expect_error("- job\n", 1, 1,
                 "expected a mapping of sections (job:, transport:, ...) at "
                 "the top level, got a sequence");
    expect_error("job:\n  [a]: 1\n", 2, 3,
                 "job: expected a name as key, got a sequence");
}

static void test_sizes(void **state)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } sizes[] = {
        {"0", 0},
        {"4096", 4096},
        {"4KiB", 4096},
        {"4kib", 4096},
        {"4KB", 4096},
        {"4K", 4096},
        {"4k", 4096},
        {"4 KiB", 4096},
        {"100B", 100},
        {"2MiB", 2 << 20},
        {"2M", 2 << 20},
        {"1GiB", UINT64_C(1) << 30},
        {"1G", UINT64_C(1) << 30},
        {"1gb", UINT64_C(1) << 30},
        {"3TiB", UINT64_C(3) << 40},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char yaml[128];
        snprintf(yaml, sizeof(yaml),
                 "transport:\n  ucx:\n    rndv_thresh: %s\n", sizes[i].text);
        rv_config_t *cfg = load_ok(yaml);
        if (ucx(cfg)->rndv_thresh != sizes[i].bytes)
            fail_msg("'%s' gave %llu, expected %llu", sizes[i].text,
                     (unsigned long long)ucx(cfg)->rndv_thresh,
                     (unsigned long long)sizes[i].bytes);
        rv_config_free(cfg);
    }

    expect_error("transport:\n  ucx:\n    rndv_thresh: 4XB\n", 3, 18,
                 "transport.ucx.rndv_thresh: bad size '4XB': unknown unit "
                 "'XB'; expected bytes or a number with a unit K, KB, KiB, "
                 "M, MB, MiB, G, GB, GiB, T, TB, TiB (binary multiples)");
    expect_error("transport:\n  ucx:\n    rndv_thresh: -4K\n", 3, 18,
                 "transport.ucx.rndv_thresh: expected a size (bytes, or a "
                 "number with a unit such as 4KiB, 2MiB, 1GiB), got '-4K'");
    expect_error("transport:\n  ucx:\n    rndv_thresh: 16EiB\n", 3, 18,
                 "transport.ucx.rndv_thresh: size '16EiB' is too large");
    expect_error("transport:\n  ucx:\n    rndv_thresh: 8EiB\n", 3, 18,
                 "transport.ucx.rndv_thresh: 8EiB is out of range; expected "
                 "a size in 0..9223372036854775807");
}

static void test_bools(void **state)
{
    static const struct {
        const char *text;
        bool value;
    } bools[] = {
        {"true", true},    {"True", true}, {"TRUE", true}, {"yes", true},
        {"on", true},      {"ON", true},   {"1", true},    {"false", false},
        {"False", false},  {"no", false},  {"off", false}, {"0", false},
        {"\"yes\"", true},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
        char yaml[128];
        snprintf(yaml, sizeof(yaml), "job:\n  output_prefix: %s\n",
                 bools[i].text);
        rv_config_t *cfg = load_ok(yaml);
        if (core(cfg)->job.output_prefix != bools[i].value)
            fail_msg("'%s' read as %d", bools[i].text,
                     (int)core(cfg)->job.output_prefix);
        rv_config_free(cfg);
    }
}

static void test_syntax_and_structure(void **state)
{
    (void)state;
    /* libyaml's own problem text and position. */
    expect_error("job:\n  threads: 4\n    processes: 2\n", 3, 14,
                 "invalid YAML: mapping values are not allowed in this "
                 "context");
    expect_error("job:\n  threads: \"4\n", 3, 1,
                 "invalid YAML: found unexpected end of stream (while "
                 "scanning a quoted scalar at line 2, column 12)");
    expect_error("job:\n  threads: *n\n", 2, 12,
                 "invalid YAML: found undefined alias");
    /* Duplicates, which libyaml itself accepts. */
    expect_error("job:\n  threads: 4\n  threads: 8\n", 3, 3,
                 "job.threads: duplicate key (first given at line 2, "
                 "column 3)");
    expect_error("job:\n  threads: 4\ntransport:\n  name: ucx\njob:\n"
                 "  processes: 2\n",
                 5, 1, "job: duplicate key (first given at line 1, column 1)");
    expect_error("job:\n  threads: 4\n---\njob:\n  threads: 8\n", 4, 1,
                 "a second YAML document; a configuration is one document");
}

static void test_later_keys(void **state)
{
    (void)state;
    /* Even the default value is refused: the key does nothing yet. */
    expect_error("progress:\n  mode: inline\n", 2, 3,
                 "progress.mode: not supported yet (the progress "
                 "engine (core/))");
    setenv("RIVET_PROGRESS_MODE", "thread", 1);
    expect_env_error("environment RIVET_PROGRESS_MODE: error: progress.mode: "
                     "not supported yet (the progress engine (core/))");
    clear_config_env();
}

static void test_missing_file(void **state)
{
    char err[512] = "", path[512];
    rv_config_t *cfg = NULL;
    (void)state;

    snprintf(path, sizeof(path), "%s/no-such-file.yaml", tmpdir);
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)),
                     RV_ERR_NOT_FOUND);
    assert_null(cfg);
    char expected[600];
    snprintf(expected, sizeof(expected),
             "cannot open %s: No such file or directory", path);
    assert_string_equal(err, expected);

    /* Without errbuf the error is logged and the status still returned. */
    assert_int_equal(rv_config_load(path, &cfg, NULL, 0), RV_ERR_NOT_FOUND);
    assert_int_equal(rv_config_load(path, NULL, NULL, 0), RV_ERR_INVALID);
}

/* ---------------------------------------------------------------------- */
/* Environment                                                             */
/* ---------------------------------------------------------------------- */

static void test_env_override(void **state)
{
    (void)state;
    const char *path = write_yaml("job:\n  threads: 4\n  processes: 3\n"
                                  "transport:\n  ucx:\n    tls: sm,self\n");
    char err[1024] = "";
    rv_config_t *cfg;

    setenv("RIVET_JOB_THREADS", "8", 1);
    setenv("RIVET_TRANSPORT_UCX_TLS", "tcp,self", 1);
    setenv("RIVET_TRANSPORT_UCX_RNDV_THRESH", "16k", 1);
    setenv("RIVET_JOB_PLACEMENT", "none", 1);
    setenv("RIVET_JOB_OUTPUT_PREFIX", "on", 1);
    setenv("RIVET_AM_PATH", "write", 1);
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)), RV_OK);
    assert_int_equal(core(cfg)->job.threads, 8);
    assert_int_equal(core(cfg)->job.processes, 3); /* from the file */
    assert_string_equal(ucx(cfg)->tls, "tcp,self");
    assert_int_equal(ucx(cfg)->rndv_thresh, 16384);
    assert_int_equal(core(cfg)->job.placement, RV_PLACEMENT_NONE);
    assert_true(core(cfg)->job.output_prefix);
    assert_int_equal(am(cfg)->path, RV_AM_PATH_WRITE);
    rv_config_free(cfg);

    /* An empty variable sets an empty string. */
    setenv("RIVET_TRANSPORT_UCX_TLS", "", 1);
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)), RV_OK);
    assert_string_equal(ucx(cfg)->tls, "");
    rv_config_free(cfg);
    clear_config_env();

    /* A bad value names the variable. */
    setenv("RIVET_JOB_THREADS", "0", 1);
    expect_env_error("environment RIVET_JOB_THREADS: error: job.threads: 0 is "
                     "out of range; expected an integer in 1..1024");
    setenv("RIVET_JOB_THREADS", "lots", 1);
    expect_env_error("environment RIVET_JOB_THREADS: error: job.threads: "
                     "expected an integer in 1..1024, got 'lots'");
    clear_config_env();
    setenv("RIVET_JOB_PLACEMENT", "socket", 1);
    expect_env_error("environment RIVET_JOB_PLACEMENT: error: job.placement: "
                     "bad value 'socket'; expected one of none, core, numa");
    clear_config_env();
    setenv("RIVET_TRANSPORT_UCX_RNDV_THRESH", "8 parsecs", 1);
    expect_env_error("environment RIVET_TRANSPORT_UCX_RNDV_THRESH: error: "
                     "transport.ucx.rndv_thresh: bad size '8 parsecs': "
                     "unknown unit 'parsecs'; expected bytes or a number "
                     "with a unit K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, "
                     "TiB (binary multiples)");
    clear_config_env();
    setenv("RIVET_AM_AGGREGATION", "batched", 1);
    expect_env_error("environment RIVET_AM_AGGREGATION: error: am.aggregation: "
                     "bad value 'batched'; expected one of none, trad, ovfl");
    clear_config_env();
    /* A plugin the environment names is checked too. */
    setenv("RIVET_TRANSPORT_VERBS_QP_SHARING", "node", 1);
    expect_env_error("environment RIVET_TRANSPORT_VERBS_QP_SHARING: error: "
                     "transport.verbs.qp_sharing: bad value 'node'; expected "
                     "one of thread, process");
    clear_config_env();

    /* A file error comes before the environment is looked at. */
    setenv("RIVET_JOB_THREADS", "0", 1);
    expect_error("job:\n  threads: 9999\n", 2, 12,
                 "job.threads: 9999 is out of range; expected an integer in "
                 "1..1024");
    clear_config_env();
}

static void test_env_stats(void **state)
{
    static const struct {
        const char *job_stats, *stats;
        rv_stats_mode_t want;
    } cases[] = {
        {"json", NULL, RV_STATS_JSON}, {"text", NULL, RV_STATS_TEXT},
        {NULL, "1", RV_STATS_TEXT},    {NULL, "json", RV_STATS_JSON},
        {NULL, "0", RV_STATS_OFF},     {NULL, "", RV_STATS_OFF},
        {"off", "1", RV_STATS_OFF},    {NULL, NULL, RV_STATS_OFF},
    };
    (void)state;

    /* job.stats, and RIVET_STATS as another spelling of RIVET_JOB_STATS. */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].job_stats != NULL)
            setenv("RIVET_JOB_STATS", cases[i].job_stats, 1);
        if (cases[i].stats != NULL)
            setenv("RIVET_STATS", cases[i].stats, 1);
        rv_config_t *cfg = load_env();
        if (core(cfg)->job.stats != cases[i].want)
            fail_msg("RIVET_JOB_STATS %s, RIVET_STATS %s: job.stats %d",
                     cases[i].job_stats ? cases[i].job_stats : "unset",
                     cases[i].stats ? cases[i].stats : "unset",
                     (int)core(cfg)->job.stats);
        rv_config_free(cfg);
        clear_config_env();
    }
}

/* ---------------------------------------------------------------------- */
/* rv_config_set, rv_config_get                                            */
/* ---------------------------------------------------------------------- */

/* rv_config_set, expecting RV_ERR_CONFIG and @p expected in the log. */
static void expect_set_error(rv_config_t *cfg, const char *key,
                             const char *value, const char *expected)
{
    char err[4096], *before = dump_text(cfg), *after;

    capture_begin();
    assert_int_equal(rv_config_set(cfg, key, value), RV_ERR_CONFIG);
    capture_end(err, sizeof(err));
    if (strstr(err, expected) == NULL)
        fail_msg("expected '%s' in '%s'", expected, err);
    after = dump_text(cfg);
    assert_string_equal(after, before);
    free(after);
    free(before);
}

static void test_set(void **state)
{
    rv_config_t *cfg = load_env();
    (void)state;

    assert_int_equal(rv_config_set(cfg, "am.path", "write"), RV_OK);
    assert_int_equal(am(cfg)->path, RV_AM_PATH_WRITE);
    assert_int_equal(rv_config_set(cfg, "job.threads", "4"), RV_OK);
    assert_int_equal(core(cfg)->job.threads, 4);
    assert_int_equal(rv_config_set(cfg, "transport.ucx.rndv_thresh", "64K"),
                     RV_OK);
    assert_int_equal(ucx(cfg)->rndv_thresh, 64 << 10);
    assert_int_equal(rv_config_set(cfg, "transport.ucx.tls", ""), RV_OK);
    /* A plugin's key brings in its component; so does selecting it. */
    assert_null(rv_config_component(cfg, "transport.verbs"));
    assert_int_equal(rv_config_set(cfg, "transport.verbs.port", "2"), RV_OK);
    assert_int_equal(verbs(cfg)->port, 2);
    rv_config_free(cfg);
    cfg = load_env();
    assert_int_equal(rv_config_set(cfg, "transport.name", "verbs"), RV_OK);
    assert_int_equal(verbs(cfg)->signal_interval, 64);

    expect_set_error(cfg, "am.pth", "write",
                     "rv_config_set: error: unknown key 'am.pth'; did you "
                     "mean 'am.path'?");
    expect_set_error(cfg, "am.path", "read",
                     "rv_config_set: error: am.path: bad value 'read'; "
                     "expected one of send, write");
    expect_set_error(cfg, "job.threads", "0",
                     "rv_config_set: error: job.threads: 0 is out of range; "
                     "expected an integer in 1..1024");
    expect_set_error(cfg, "progress.mode", "thread",
                     "rv_config_set: error: progress.mode: not supported yet "
                     "(the progress engine (core/))");
    expect_set_error(cfg, "transport.ofi.provider", "verbs",
                     "rv_config_set: error: unknown key "
                     "'transport.ofi.provider': no transport plugin "
                     "librivet-ofi.so (available transports: ucx, verbs)");
    rv_config_free(cfg);
    /* A key the plugin does not have leaves its component out. */
    cfg = load_ok("transport:\n  name: verbs\n");
    expect_set_error(cfg, "transport.ucx.tlss", "tcp",
                     "rv_config_set: error: unknown key 'transport.ucx.tlss'; "
                     "did you mean 'transport.ucx.tls'?");
    assert_null(rv_config_component(cfg, "transport.ucx"));
    expect_set_error(cfg, "transport.ucxx.tls", "tcp",
                     "rv_config_set: error: unknown key 'transport.ucxx.tls': "
                     "no transport plugin librivet-ucxx.so; did you mean "
                     "'transport.ucx'?");
    assert_int_equal(rv_config_set(NULL, "am.path", "send"), RV_ERR_INVALID);
    assert_int_equal(rv_config_set(cfg, NULL, "send"), RV_ERR_INVALID);
    assert_int_equal(rv_config_set(cfg, "am.path", NULL), RV_ERR_INVALID);
    rv_config_free(cfg);
}

static void test_get(void **state)
{
    rv_config_t *cfg = load_ok("job:\n  output_prefix: true\n"
                               "transport:\n  ucx:\n    tls: sm,self\n"
                               "am:\n  chunk_bytes: 128KiB\n"
                               "  aggregation: trad\n");
    char buf[64];
    int64_t v;
    (void)state;

    assert_int_equal(rv_config_get(cfg, "job.threads", buf, sizeof(buf)),
                     RV_OK);
    assert_string_equal(buf, "1");
    assert_int_equal(rv_config_get(cfg, "job.output_prefix", buf, sizeof(buf)),
                     RV_OK);
    assert_string_equal(buf, "true");
    assert_int_equal(rv_config_get(cfg, "am.chunk_bytes", buf, sizeof(buf)),
                     RV_OK);
    assert_string_equal(buf, "131072");
    assert_int_equal(rv_config_get(cfg, "am.aggregation", buf, sizeof(buf)),
                     RV_OK);
    assert_string_equal(buf, "trad");
    assert_int_equal(rv_config_get(cfg, "transport.ucx.tls", buf, sizeof(buf)),
                     RV_OK);
    assert_string_equal(buf, "sm,self");
    assert_int_equal(
        rv_config_get(cfg, "transport.verbs.qp_sharing", buf, sizeof(buf)),
        RV_OK);
    assert_string_equal(buf, "thread");
    assert_int_equal(rv_config_get(cfg, "transport.ucx.tls", buf, 4),
                     RV_ERR_TRUNCATED);
    assert_string_equal(buf, "sm,");
    assert_int_equal(rv_config_get(cfg, "am.nothing", buf, sizeof(buf)),
                     RV_ERR_NOT_FOUND);
    assert_string_equal(buf, "");

    assert_int_equal(rv_config_get_int(cfg, "am.aggregation", &v), RV_OK);
    assert_int_equal(v, RV_AGG_TRAD);
    assert_int_equal(rv_config_get_int(cfg, "am.chunk_bytes", &v), RV_OK);
    assert_int_equal(v, 128 << 10);
    assert_int_equal(rv_config_get_int(cfg, "job.output_prefix", &v), RV_OK);
    assert_int_equal(v, 1);
    assert_int_equal(rv_config_get_int(cfg, "transport.ucx.gid_index", &v),
                     RV_OK);
    assert_int_equal(v, -1);
    assert_int_equal(rv_config_get_int(cfg, "transport.ucx.tls", &v),
                     RV_ERR_INVALID);
    assert_int_equal(rv_config_get_int(cfg, "job.nothing", &v),
                     RV_ERR_NOT_FOUND);
    assert_int_equal(rv_config_get_int(cfg, "transport.ofi.x", &v),
                     RV_ERR_NOT_FOUND);
    rv_config_free(cfg);
}

/* ---------------------------------------------------------------------- */
/* Dump                                                                    */
/* ---------------------------------------------------------------------- */

/* Every component, of the configuration and of its dump reloaded. */
static const char *const every_component[] = {
    "", "am", "rma", "testlayer", "transport.ucx", "transport.verbs",
};

/* Dumps @p cfg, loads the dump back: the same text, the same structs. */
static void round_trip(const rv_config_t *cfg)
{
    char path[512], err[1024] = "";
    char *text = dump_text(cfg), *again;
    rv_config_t *back = NULL;

    snprintf(path, sizeof(path), "%s/dump.yaml", tmpdir);
    write_named("dump.yaml", text);
    if (rv_config_load(path, &back, err, sizeof(err)) != RV_OK)
        fail_msg("reloading the dump: %s", err);
    again = dump_text(back);
    assert_string_equal(again, text);
    for (size_t i = 0; i < sizeof(every_component) / sizeof(every_component[0]);
         i++) {
        const rv_config_table_t *tables[RV_CFG_MAX_TABLES];
        size_t n = rv__config_tables(tables, true), size = 0;
        const void *mine = rv_config_component(cfg, every_component[i]);
        const void *theirs = rv_config_component(back, every_component[i]);
        for (size_t j = 0; j < n; j++)
            if (strcmp(tables[j]->prefix, every_component[i]) == 0)
                size = tables[j]->size;
        assert_non_null(theirs); /* the dump names every component */
        if (mine != NULL)
            assert_memory_equal(theirs, mine, size);
    }
    free(again);
    free(text);
    rv_config_free(back);
}

static void test_dump_round_trip(void **state)
{
    rv_config_t *cfg;
    char *text;
    (void)state;

    cfg = load_env();
    round_trip(cfg);
    rv_config_free(cfg);

    /* Every component away from its defaults. */
    cfg = load_ok("job:\n  processes: 16\n  threads: 3\n  placement: numa\n"
                  "  output_prefix: true\n  service_threads: 2\n"
                  "  stats: text\n"
                  "transport:\n  name: verbs\n  ucx:\n    tls: rc,sm,self\n"
                  "    net_devices: mlx5_0:1\n    rndv_thresh: 12288\n"
                  "    rma_emulation: on\n    gid_index: 3\n"
                  "  verbs:\n    device: rxe0\n    port: 2\n"
                  "    gid_index: 1\n    qp_sharing: process\n"
                  "    signal_interval: 16\n"
                  "memory:\n  chunk: 4MiB\n  huge_pages: off\n"
                  "am:\n  path: write\n  aggregation: ovfl\n"
                  "  flush_bytes: 8KiB\n  ovfl_limit: 64KiB\n"
                  "  on_full: retry_async\n  chunks_per_request: 1\n"
                  "  max_chunks: 4\n  chunk_bytes: 128KiB\n"
                  "  local_bypass: false\n"
                  "rma:\n  am_long_protocol: put_sync_send\n"
                  "testlayer:\n  fanout: 2\n  flavour: chocolate\n"
                  "  label: \"x: y\"\n");
    round_trip(cfg);
    rv_config_free(cfg);

    /* Strings that need quoting and escapes, set from the environment. */
    setenv("RIVET_TRANSPORT_UCX_TLS", "a \"quoted\" \\ value: # not a comment",
           1);
    setenv("RIVET_TRANSPORT_UCX_NET_DEVICES", "tab\there\nnewline\x01", 1);
    setenv("RIVET_TRANSPORT_UCX_RNDV_THRESH", "1000000", 1);
    cfg = load_env();
    clear_config_env();
    assert_string_equal(ucx(cfg)->tls, "a \"quoted\" \\ value: # not a comment");
    round_trip(cfg);

    /* Sizes are written in their largest exact binary unit; every
     * component has its section, plugins not held at their defaults. */
    assert_int_equal(rv_config_set(cfg, "transport.ucx.rndv_thresh", "8192"),
                     RV_OK);
    text = dump_text(cfg);
    assert_non_null(strstr(text, "\n    rndv_thresh: 8KiB\n"));
    assert_non_null(strstr(text, "\n# Remote invocation: calls, messenger "
                                 "rings and aggregation.\n"
                                 "am:\n  path: send\n  aggregation: none\n"));
    assert_non_null(strstr(text, "\nrma:\n  am_long_protocol: reassembly\n"));
    assert_non_null(strstr(text, "\n  verbs:\n    device: \"\"\n    port: 1\n"));
    assert_non_null(
        strstr(text, "\nmemory:\n  chunk: 2MiB\n  huge_pages: auto\n"));
    assert_non_null(strstr(text, "\n  stats: off\n"));
    assert_non_null(strstr(text, "\n# progress.mode: inline  (not supported "
                                 "yet: the progress engine (core/))\n"));
    assert_non_null(strstr(text, "\ntestlayer:\n  fanout: 4\n"));
    assert_null(strstr(text, "store"));
    free(text);
    rv_config_free(cfg);
}

/* Runs @p cmd through the shell; returns its output and exit status. */
static char *run(const char *cmd, int *status)
{
    char *out = calloc(1, OUT_MAX);
    size_t len = 0, n;
    FILE *pp;

    assert_non_null(out);
    pp = popen(cmd, "r");
    assert_non_null(pp);
    while (len < OUT_MAX - 1 &&
           (n = fread(out + len, 1, OUT_MAX - 1 - len, pp)) > 0)
        len += n;
    int rc = pclose(pp);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return out;
}

static void test_tool(void **state)
{
    char cmd[1200], expected[800];
    const char *path;
    char *out;
    int status;
    (void)state;

    path = write_named("tool.yaml", "job:\n  threads: 4\n"
                                    "transport:\n  ucx:\n    tls: tcp,self\n"
                                    "    rndv_thresh: 2MiB\n");
    snprintf(cmd, sizeof(cmd), "'%s' -c '%s' --dump 2>&1", RIVET_CONFIG_BIN,
             path);
    out = run(cmd, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "job:\n  processes: 2\n  threads: 4\n"
                                "  placement: core\n"));
    assert_non_null(strstr(out, "transport:\n  name: \"ucx\"\n"
                                "  # The UCX transport (librivet-ucx.so).\n"
                                "  ucx:\n"
                                "    tls: \"tcp,self\"\n"
                                "    net_devices: \"\"\n"
                                "    rndv_thresh: 2MiB\n"));
    assert_non_null(strstr(out, "\n  verbs:\n"));
    free(out);

    /* The environment applies to the dump too. */
    snprintf(cmd, sizeof(cmd), "RIVET_JOB_PROCESSES=7 '%s' -c '%s' --dump 2>&1",
             RIVET_CONFIG_BIN, path);
    out = run(cmd, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "  processes: 7\n"));
    free(out);

    snprintf(cmd, sizeof(cmd), "'%s' -c '%s' --check 2>&1", RIVET_CONFIG_BIN,
             path);
    out = run(cmd, &status);
    assert_int_equal(status, 0);
    snprintf(expected, sizeof(expected), "%s: ok\n", path);
    assert_string_equal(out, expected);
    free(out);

    /* Errors go to stderr only, with exit status 1. */
    path = write_named("bad.yaml", "am:\n  agregation: ovfl\n");
    snprintf(cmd, sizeof(cmd), "'%s' -c '%s' --check 2>&1 >/dev/null",
             RIVET_CONFIG_BIN, path);
    out = run(cmd, &status);
    assert_int_equal(status, 1);
    snprintf(expected, sizeof(expected),
             "%s:2:3: error: unknown key 'am.agregation'; did you mean "
             "'am.aggregation'?\n",
             path);
    assert_string_equal(out, expected);
    free(out);

    snprintf(cmd, sizeof(cmd), "'%s' --help", RIVET_CONFIG_BIN);
    out = run(cmd, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "usage: rivet-config"));
    free(out);

    snprintf(cmd, sizeof(cmd), "'%s' 2>&1", RIVET_CONFIG_BIN);
    out = run(cmd, &status);
    assert_int_equal(status, 1);
    free(out);
}

static void test_tool_reference(void **state)
{
    char cmd[1200];
    char *out;
    int status;
    (void)state;

    /* Every key of every component, the plugins' included. */
    snprintf(cmd, sizeof(cmd), "'%s' --reference 2>&1", RIVET_CONFIG_BIN);
    out = run(cmd, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "| key | type | default | range / values | "
                                "environment variable | description |\n"));
    assert_non_null(strstr(out, "| `job.placement` | enum | `core` | `none`, "
                                "`core`, `numa` | `RIVET_JOB_PLACEMENT` |"));
    assert_non_null(strstr(out, "| `job.stats` | enum | `off` | `off`, "
                                "`text`, `json` | `RIVET_JOB_STATS` |"));
    assert_non_null(strstr(out, "| `am.aggregation` | enum | `none` | "
                                "`none`, `trad`, `ovfl` | "
                                "`RIVET_AM_AGGREGATION` | none: every call"));
    assert_non_null(strstr(out, "| `rma.am_long_protocol` | enum | "));
    assert_non_null(strstr(out, "| `transport.ucx.tls` | string | "));
    assert_non_null(strstr(out, "| `transport.verbs.qp_sharing` | enum | "));
    assert_non_null(strstr(out, "*Not supported yet"));
    assert_null(strstr(out, "store."));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_tables),
        cmocka_unit_test_teardown(test_registration, capture_teardown),
        cmocka_unit_test(test_plugin_tables),
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_shipped_configs),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_bools),
        cmocka_unit_test(test_syntax_and_structure),
        cmocka_unit_test(test_later_keys),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_env_override),
        cmocka_unit_test(test_env_stats),
        cmocka_unit_test_teardown(test_set, capture_teardown),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_tool),
        cmocka_unit_test(test_tool_reference),
    };
    return cmocka_run_group_tests_name("config", tests, group_setup,
                                       group_teardown);
}
