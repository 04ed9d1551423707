/*
 * Loading a configuration file: valid files, the shipped ones, and every
 * class of error in a file with its exact message and position
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

/* ---------------------------------------------------------------------- */
/* The file                                                                */
/* ---------------------------------------------------------------------- */

void test_valid_file(void **state)
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

void test_shipped_configs(void **state)
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

void test_unknown_keys(void **state)
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
    expect_error("nosuchlayer:\n  capacity: 1GiB\n", 1, 1,
                 "unknown section 'nosuchlayer' (rivet-config --reference "
                 "lists every key)");
    expect_error("job.threads: 3\n", 1, 1,
                 "job.threads: dotted keys are not accepted; write each "
                 "part as a nested mapping");
}

void test_bad_values(void **state)
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
                 "progress, retry_async, retry");

    char yaml[600] = "transport:\n  ucx:\n    tls: ";
    size_t n = strlen(yaml);
    memset(yaml + n, 'x', 300);
    strcpy(yaml + n + 300, "\n");
    expect_error(yaml, 3, 10,
                 "transport.ucx.tls: the value is too long (300 bytes; at "
                 "most 255)");
}

/* One load names every bad key of a file, each where it is, in the
 * file's order; the layers' own forms (mcts.c a number, store.rndv_threshold
 * a size or auto) are checked as they are read, by rv_config_set too. */
void test_every_error(void **state)
{
    char err[2048] = "", expected[2048];
    rv_config_t *cfg = NULL;
    const char *path = write_yaml("job:\n  threads: many\nmcts:\n  c: banana\n"
                                  "store:\n  rndv_threshold: lots\n"
                                  "  capacity: 1GiB\nam:\n  pth: write\n");

    (void)state;
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    assert_null(cfg);
    snprintf(expected, sizeof(expected),
             "%s:2:12: error: job.threads: expected an integer in 1..1024, "
             "got 'many'\n"
             "%s:4:6: error: mcts.c: 'banana' is not a number of 0 or more "
             "(e.g. 1.0)\n"
             "%s:6:19: error: store.rndv_threshold: 'lots' is neither a size "
             "(e.g. 32KiB) nor auto\n"
             "%s:9:3: error: unknown key 'am.pth'; did you mean 'am.path'?",
             path, path, path, path);
    assert_string_equal(err, expected);

    cfg = load_ok("mcts:\n  c: 0.5\nstore:\n  rndv_threshold: auto\n");
    assert_int_equal(rv_config_set(cfg, "mcts.c", "-1"), RV_ERR_CONFIG);
    assert_int_equal(rv_config_set(cfg, "store.rndv_threshold", "1Q"),
                     RV_ERR_CONFIG);
    char v[64];
    assert_int_equal(rv_config_get(cfg, "mcts.c", v, sizeof(v)), RV_OK);
    assert_string_equal(v, "0.5");
    assert_int_equal(rv_config_set(cfg, "store.rndv_threshold", "64KiB"),
                     RV_OK);
    rv_config_free(cfg);
}

void test_wrong_types(void **state)
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

void test_syntax_and_structure(void **state)
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

void test_later_keys(void **state)
{
    (void)state;
    /* Even the default value is refused: the key does nothing yet. */
    expect_error("testlayer:\n  turbo: 0\n", 2, 3,
                 "testlayer.turbo: not supported yet (the turbo "
                 "engine (a test))");
    setenv("RIVET_TESTLAYER_TURBO", "1", 1);
    expect_env_error("environment RIVET_TESTLAYER_TURBO: error: "
                     "testlayer.turbo: not supported yet (the turbo engine "
                     "(a test))");
    clear_config_env();
}

void test_missing_file(void **state)
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
