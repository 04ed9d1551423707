/*
 * Values: sizes and their units, booleans, overrides from the
 * environment, rv_config_set and rv_config_get (config_test.h).
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
#include "stderr_capture.h"

/* ---------------------------------------------------------------------- */
/* Sizes and booleans                                                      */
/* ---------------------------------------------------------------------- */

void test_sizes(void **state)
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

void test_bools(void **state)
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

/* ---------------------------------------------------------------------- */
/* Environment                                                             */
/* ---------------------------------------------------------------------- */

void test_env_override(void **state)
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

    /* A file's errors come first, then the environment's: one load names
     * every problem. */
    setenv("RIVET_JOB_THREADS", "0", 1);
    path = write_yaml("job:\n  threads: 9999\n");
    char want[1024];
    cfg = NULL;
    assert_int_equal(rv_config_load(path, &cfg, err, sizeof(err)),
                     RV_ERR_CONFIG);
    assert_null(cfg);
    snprintf(want, sizeof(want),
             "%s:2:12: error: job.threads: 9999 is out of range; expected an "
             "integer in 1..1024\nenvironment RIVET_JOB_THREADS: error: "
             "job.threads: 0 is out of range; expected an integer in 1..1024",
             path);
    assert_string_equal(err, want);
    clear_config_env();
}

void test_env_stats(void **state)
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

void test_set(void **state)
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
    expect_set_error(cfg, "testlayer.turbo", "1",
                     "rv_config_set: error: testlayer.turbo: not supported "
                     "yet (the turbo engine (a test))");
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

void test_get(void **state)
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

int config_values_teardown(void **state)
{
    return capture_teardown(state);
}
