/*
 * Tests of the configuration loader (core/rv_config.c), its schema and the
 * rivet-config tool: every class of error with its exact message, size
 * units, booleans, environment overrides and the --dump round trip.
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

#include "rv_config.h"

#ifndef RIVET_CONFIG_BIN
#error "RIVET_CONFIG_BIN must name the rivet-config binary"
#endif

static char tmpdir[256];
static char file_path[512];

/* Every RIVET_* variable the schema reads, so tests start from defaults. */
static void clear_config_env(void)
{
    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        char name[300] = "RIVET_";
        size_t n = strlen(name);
        for (const char *p = f->key; *p; p++)
            name[n++] =
                (*p == '.')
                    ? '_'
                    : (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
        name[n] = '\0';
        unsetenv(name);
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
static rv_config_t load_ok(const char *yaml)
{
    char err[1024] = "";
    rv_config_t cfg;
    rv_status_t status =
        rv_config_load(write_yaml(yaml), &cfg, err, sizeof(err));
    if (status != RV_OK)
        fail_msg("unexpected error: %s", err);
    return cfg;
}

/*
 * Loads @p yaml; expects RV_ERR_CONFIG with exactly
 * "PATH:LINE:COL: error: WHAT", and @p cfg left untouched.
 */
static void expect_error(const char *yaml, int line, int col, const char *what)
{
    char err[1024] = "", expected[1024];
    rv_config_t cfg, before;
    const char *path = write_yaml(yaml);

    memset(&cfg, 0xab, sizeof(cfg));
    before = cfg;
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    snprintf(expected, sizeof(expected), "%s:%d:%d: error: %s", path, line, col,
             what);
    assert_string_equal(err, expected);
    assert_memory_equal(&cfg, &before, sizeof(cfg));
}

/* Loads defaults and environment; expects RV_ERR_CONFIG with @p expected. */
static void expect_env_error(const char *expected)
{
    char err[1024] = "";
    rv_config_t cfg;

    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    assert_string_equal(err, expected);
}

/* ---------------------------------------------------------------------- */

static void test_defaults(void **state)
{
    char err[256] = "";
    rv_config_t cfg;
    (void)state;

    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)), RV_OK);
    assert_int_equal(cfg.job.processes, 2);
    assert_int_equal(cfg.job.threads, 1);
    assert_int_equal(cfg.job.placement, RV_PLACEMENT_CORE);
    assert_false(cfg.job.output_prefix);
    assert_int_equal(cfg.job.service_threads, 0);
    assert_string_equal(cfg.transport.name, "ucx");
    assert_string_equal(cfg.transport.ucx.tls, "");
    assert_string_equal(cfg.transport.ucx.net_devices, "");
    assert_int_equal(cfg.transport.ucx.rndv_thresh, 0);
    assert_string_equal(cfg.transport.verbs.device, "");
    assert_int_equal(cfg.transport.verbs.port, 1);
    assert_int_equal(cfg.transport.verbs.gid_index, -1);
    assert_int_equal(cfg.transport.verbs.qp_sharing, RV_QP_SHARING_THREAD);
    assert_int_equal(cfg.transport.verbs.signal_interval, 64);
    assert_int_equal(cfg.memory.chunk, 2 << 20);
    assert_int_equal(cfg.memory.huge_pages, RV_HUGE_AUTO);
    assert_int_equal(cfg.am.path, RV_AM_PATH_SEND);
    assert_int_equal(cfg.am.aggregation, RV_AGG_NONE);
    assert_int_equal(cfg.am.flush_bytes, 4096);
    assert_int_equal(cfg.am.ovfl_limit, 1 << 20);
    assert_int_equal(cfg.am.on_full, RV_ON_FULL_FAIL);
    assert_int_equal(cfg.am.chunks_per_request, 2);
    assert_int_equal(cfg.am.max_chunks, 8);
    assert_int_equal(cfg.am.chunk_bytes, 2 << 20);
    assert_true(cfg.am.local_bypass);
    assert_int_equal(cfg.progress.mode, RV_PROGRESS_INLINE);
    assert_int_equal(cfg.rma.am_long_protocol, RV_AMLONG_REASSEMBLY);
    assert_int_equal(cfg.store.capacity, UINT64_C(1) << 30);
    assert_int_equal(cfg.store.rndv_threshold, 32 << 10);
    assert_string_equal(cfg.mcts.game, "hex");
    assert_int_equal(cfg.mcts.board_size, 11);
    assert_int_equal(cfg.mcts.simulations_per_leaf, 16);
    assert_int_equal(cfg.mcts.rollouts_per_move, 65536);

    /* An empty file and empty sections leave the defaults. */
    rv_config_t empty = load_ok("");
    assert_memory_equal(&empty, &cfg, sizeof(cfg));
    empty = load_ok("# nothing\njob:\ntransport:\n  ucx:\n");
    assert_memory_equal(&empty, &cfg, sizeof(cfg));
}

static void test_schema(void **state)
{
    static const size_t type_size[] = {
        [RV_CFG_INT] = sizeof(int64_t), [RV_CFG_SIZE] = sizeof(uint64_t),
        [RV_CFG_BOOL] = sizeof(bool),   [RV_CFG_STRING] = RV_CONFIG_STR_MAX,
        [RV_CFG_ENUM] = sizeof(int),
    };
    unsigned char used[sizeof(rv_config_t)] = {0};
    size_t rows = 0;
    (void)state;

    for (const rv_config_field_t *f = rv_config_schema; f->key != NULL; f++) {
        rows++;
        assert_non_null(f->def);
        assert_non_null(f->help);
        assert_true(strlen(f->help) > 20);
        if (f->type == RV_CFG_ENUM)
            assert_non_null(f->values);
        if (f->type == RV_CFG_INT || f->type == RV_CFG_SIZE)
            assert_true(f->min <= f->max);
        /* Rows name distinct fields that do not overlap. */
        assert_true(f->offset + type_size[f->type] <= sizeof(rv_config_t));
        for (size_t i = 0; i < type_size[f->type]; i++) {
            if (used[f->offset + i])
                fail_msg("%s overlaps another row", f->key);
            used[f->offset + i] = 1;
        }
        for (const rv_config_field_t *g = rv_config_schema; g < f; g++)
            assert_string_not_equal(f->key, g->key);
    }
    /* One row per field of rv_config_t. */
    assert_int_equal(rows, 35);

    /* Enum names follow the C enums. */
    assert_string_equal(rv_config_enum_name("job.placement", RV_PLACEMENT_NONE),
                        "none");
    assert_string_equal(rv_config_enum_name("job.placement", RV_PLACEMENT_NUMA),
                        "numa");
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
    assert_null(rv_config_enum_name("job.placement", 3));
    assert_null(rv_config_enum_name("job.placement", -1));
    assert_null(rv_config_enum_name("job.threads", 0));
    assert_null(rv_config_enum_name("no.such.key", 0));
}

static void test_valid_file(void **state)
{
    (void)state;
    rv_config_t cfg = load_ok("# a job\n"
                              "job:\n"
                              "  processes: 4\n"
                              "  threads: 8\n"
                              "  placement: NUMA\n"
                              "  output_prefix: yes\n"
                              "transport:\n"
                              "  name: ucx\n"
                              "  ucx:\n"
                              "    tls: 'sm,self'\n"
                              "    net_devices: \"lo\"\n"
                              "    rndv_thresh: 64KiB\n");
    assert_int_equal(cfg.job.processes, 4);
    assert_int_equal(cfg.job.threads, 8);
    assert_int_equal(cfg.job.placement, RV_PLACEMENT_NUMA);
    assert_true(cfg.job.output_prefix);
    assert_string_equal(cfg.transport.name, "ucx");
    assert_string_equal(cfg.transport.ucx.tls, "sm,self");
    assert_string_equal(cfg.transport.ucx.net_devices, "lo");
    assert_int_equal(cfg.transport.ucx.rndv_thresh, 64 << 10);

    /* Flow style and anchors are YAML too. */
    cfg = load_ok("job: {threads: &n 3, processes: *n}\n");
    assert_int_equal(cfg.job.threads, 3);
    assert_int_equal(cfg.job.processes, 3);
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
        rv_config_t cfg;
        snprintf(path, sizeof(path), "%s/%s", RIVET_CONFIGS_DIR, files[i].name);
        if (rv_config_load(path, &cfg, err, sizeof(err)) != RV_OK)
            fail_msg("%s", err);
        assert_int_equal(cfg.job.processes, 2);
        assert_int_equal(cfg.job.threads, 1);
        assert_int_equal(cfg.job.placement, RV_PLACEMENT_CORE);
        assert_string_equal(cfg.transport.name, "ucx");
        assert_string_equal(cfg.transport.ucx.tls, files[i].tls);
        assert_string_equal(cfg.transport.ucx.net_devices, files[i].devices);
    }
}

static void test_unknown_keys(void **state)
{
    (void)state;
    /* Misspelled key: nearest full path. */
    expect_error("am:\n  agregation: ovfl\n", 2, 3,
                 "unknown key 'am.agregation'; did you mean "
                 "'am.aggregation'?");
    expect_error("job:\n  processes: 2\n  theads: 4\n", 3, 3,
                 "unknown key 'job.theads'; did you mean 'job.threads'?");
    /* Right name, wrong section: the last component finds it. */
    expect_error("transport:\n  tls: tcp,self\n", 2, 3,
                 "unknown key 'transport.tls'; did you mean "
                 "'transport.ucx.tls'?");
    expect_error("threads: 4\n", 1, 1,
                 "unknown key 'threads'; did you mean 'job.threads'?");
    /* Misspelled sections, top level and nested. */
    expect_error("tranport:\n  name: ucx\n", 1, 1,
                 "unknown section 'tranport'; did you mean 'transport'?");
    expect_error("transport:\n  ucxx:\n    tls: tcp\n", 2, 3,
                 "unknown section 'transport.ucxx'; did you mean "
                 "'transport.ucx'?");
    /* Nothing close. */
    expect_error("job:\n  threads: 2\nzzzzzz: 1\n", 3, 1,
                 "unknown key 'zzzzzz' (rivet-config --reference lists "
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
    expect_error("transport:\n  name: \"\"\n", 2, 9,
                 "transport.name: the value must not be empty");

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
        rv_config_t cfg = load_ok(yaml);
        if (cfg.transport.ucx.rndv_thresh != sizes[i].bytes)
            fail_msg("'%s' gave %llu, expected %llu", sizes[i].text,
                     (unsigned long long)cfg.transport.ucx.rndv_thresh,
                     (unsigned long long)sizes[i].bytes);
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
        rv_config_t cfg = load_ok(yaml);
        if (cfg.job.output_prefix != bools[i].value)
            fail_msg("'%s' read as %d", bools[i].text,
                     (int)cfg.job.output_prefix);
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
    expect_error("store:\n  capacity: 1GiB\n", 2, 3,
                 "store.capacity: not supported yet (the object store "
                 "(store/))");
    /* Even the default value is refused: the key does nothing yet. */
    expect_error("progress:\n  mode: inline\n", 2, 3,
                 "progress.mode: not supported yet (the progress "
                 "engine (core/))");
}

static void test_missing_file(void **state)
{
    char err[512] = "", path[512];
    rv_config_t cfg;
    (void)state;

    snprintf(path, sizeof(path), "%s/no-such-file.yaml", tmpdir);
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)),
                     RV_ERR_NOT_FOUND);
    char expected[600];
    snprintf(expected, sizeof(expected),
             "cannot open %s: No such file or directory", path);
    assert_string_equal(err, expected);

    /* Without errbuf the error is logged and the status still returned. */
    assert_int_equal(rv_config_load(path, &cfg, NULL, 0), RV_ERR_NOT_FOUND);
}

static void test_env_override(void **state)
{
    (void)state;
    const char *path = write_yaml("job:\n  threads: 4\n  processes: 3\n"
                                  "transport:\n  ucx:\n    tls: sm,self\n");
    char err[1024] = "";
    rv_config_t cfg;

    setenv("RIVET_JOB_THREADS", "8", 1);
    setenv("RIVET_TRANSPORT_UCX_TLS", "tcp,self", 1);
    setenv("RIVET_TRANSPORT_UCX_RNDV_THRESH", "16k", 1);
    setenv("RIVET_JOB_PLACEMENT", "none", 1);
    setenv("RIVET_JOB_OUTPUT_PREFIX", "on", 1);
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)), RV_OK);
    assert_int_equal(cfg.job.threads, 8);
    assert_int_equal(cfg.job.processes, 3); /* from the file */
    assert_string_equal(cfg.transport.ucx.tls, "tcp,self");
    assert_int_equal(cfg.transport.ucx.rndv_thresh, 16384);
    assert_int_equal(cfg.job.placement, RV_PLACEMENT_NONE);
    assert_true(cfg.job.output_prefix);

    /* An empty variable sets an empty string. */
    setenv("RIVET_TRANSPORT_UCX_TLS", "", 1);
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)), RV_OK);
    assert_string_equal(cfg.transport.ucx.tls, "");
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

    /* A file error comes before the environment is looked at. */
    setenv("RIVET_JOB_THREADS", "0", 1);
    expect_error("job:\n  threads: 9999\n", 2, 12,
                 "job.threads: 9999 is out of range; expected an integer in "
                 "1..1024");
    clear_config_env();
}

/* Dumps @p cfg, loads the dump back and compares the structs. */
static void round_trip(const rv_config_t *cfg)
{
    char path[512], err[1024] = "";
    rv_config_t back;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/dump.yaml", tmpdir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    rv_config_dump(cfg, fp);
    assert_int_equal(fclose(fp), 0);
    memset(&back, 0x5a, sizeof(back));
    if (rv_config_load(path, &back, err, sizeof(err)) != RV_OK)
        fail_msg("reloading the dump: %s", err);
    assert_memory_equal(&back, cfg, sizeof(back));
}

static void test_dump_round_trip(void **state)
{
    char err[1024] = "";
    rv_config_t cfg;
    (void)state;

    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)), RV_OK);
    round_trip(&cfg);

    cfg = load_ok("job:\n  processes: 16\n  threads: 3\n  placement: numa\n"
                  "  output_prefix: true\n"
                  "transport:\n  name: ucx\n  ucx:\n    tls: rc,sm,self\n"
                  "    net_devices: mlx5_0:1\n    rndv_thresh: 12288\n");
    round_trip(&cfg);

    /* Strings that need quoting and escapes, set from the environment. */
    setenv("RIVET_TRANSPORT_UCX_TLS", "a \"quoted\" \\ value: # not a comment",
           1);
    setenv("RIVET_TRANSPORT_UCX_NET_DEVICES", "tab\there\nnewline\x01", 1);
    setenv("RIVET_TRANSPORT_UCX_RNDV_THRESH", "1000000", 1);
    assert_int_equal(rv_config_load(NULL, &cfg, err, sizeof(err)), RV_OK);
    clear_config_env();
    assert_string_equal(cfg.transport.ucx.tls,
                        "a \"quoted\" \\ value: # not a comment");
    round_trip(&cfg);

    /* Sizes are written in their largest exact binary unit. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    cfg.transport.ucx.rndv_thresh = 8192;
    rv_config_dump(&cfg, mem);
    assert_int_equal(fclose(mem), 0);
    assert_non_null(strstr(text, "\n    rndv_thresh: 8KiB\n"));
    assert_non_null(strstr(text, "\nam:\n  path: send\n  aggregation: none\n"));
    assert_non_null(strstr(text, "\nrma:\n  am_long_protocol: reassembly\n"));
    assert_non_null(strstr(text, "\n  verbs:\n    device: \"\"\n    port: 1\n"));
    assert_non_null(
        strstr(text, "\nmemory:\n  chunk: 2MiB\n  huge_pages: auto\n"));
    assert_non_null(strstr(text, "# store.capacity: 1GiB"));
    free(text);
}

/* Runs @p cmd through the shell; returns its output and exit status. */
static char *run(const char *cmd, int *status)
{
    char *out = calloc(1, 65536);
    size_t len = 0, n;
    FILE *pp;

    assert_non_null(out);
    pp = popen(cmd, "r");
    assert_non_null(pp);
    while (len < 65535 && (n = fread(out + len, 1, 65535 - len, pp)) > 0)
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
    assert_non_null(strstr(out, "transport:\n  name: \"ucx\"\n  ucx:\n"
                                "    tls: \"tcp,self\"\n"
                                "    net_devices: \"\"\n"
                                "    rndv_thresh: 2MiB\n"));
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

    snprintf(cmd, sizeof(cmd), "'%s' --reference 2>&1", RIVET_CONFIG_BIN);
    out = run(cmd, &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "| key | type | default | range / values | "
                                "environment variable | description |\n"));
    assert_non_null(strstr(out, "| `job.placement` | enum | `core` | `none`, "
                                "`core`, `numa` | `RIVET_JOB_PLACEMENT` |"));
    assert_non_null(strstr(out, "| `am.aggregation` | enum | `none` | "
                                "`none`, `trad`, `ovfl` | "
                                "`RIVET_AM_AGGREGATION` | none: every call"));
    assert_non_null(strstr(out, "| `store.capacity` | size | "));
    assert_non_null(strstr(out, "*Not supported yet"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_schema),
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
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_tool),
    };
    return cmocka_run_group_tests_name("config", tests, group_setup,
                                       group_teardown);
}
