/*
 * The --dump round trip, and the rivet-config tool: --dump, --check,
 * --reference (config_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "config_test.h"

#ifndef RIVET_CONFIG_BIN
#error "RIVET_CONFIG_BIN must name the rivet-config binary"
#endif

#define OUT_MAX 65536 /* what a test reads of a command's output */

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

void test_dump_round_trip(void **state)
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
    assert_non_null(strstr(text, "\n  # testlayer.turbo: 0  (not supported "
                                 "yet: the turbo engine (a test))\n"));
    assert_non_null(strstr(text, "\ntestlayer:\n  fanout: 4\n"));
    assert_null(strstr(text, "nosuchlayer"));
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

void test_tool(void **state)
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

    /* Keys that parse alone but not together, and a transport that is
     * not installed: --check names every one, not only the first. */
    path = write_named("cross.yaml", "job:\n  threads: 2\n"
                                     "transport:\n  name: infiniband\n"
                                     "progress:\n  mode: dynamic\n"
                                     "  executors: 4\n");
    snprintf(cmd, sizeof(cmd), "'%s' -c '%s' --check 2>&1 >/dev/null",
             RIVET_CONFIG_BIN, path);
    out = run(cmd, &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, "error: transport.name: no transport "
                                "'infiniband' is installed"));
    assert_non_null(strstr(out, "the installed ones: ucx, verbs"));
    assert_non_null(strstr(out, "error: progress.executors: 4 is more than "
                                "job.threads (2)"));
    free(out);

    /* With values refused too, one pass still names them all, the keys
     * weighed together included; a check of a refused key is left out
     * (job.threads took its default, which is not what the file says). */
    path = write_named("all.yaml", "job:\n  threads: 1\n"
                                   "transport:\n  name: infiniband\n"
                                   "progress:\n  mode: thread\n"
                                   "  executors: 3\n"
                                   "store:\n  rndv_threshold: banana\n");
    snprintf(cmd, sizeof(cmd), "'%s' -c '%s' --check 2>&1 >/dev/null",
             RIVET_CONFIG_BIN, path);
    out = run(cmd, &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, ":9:19: error: store.rndv_threshold: 'banana'"));
    assert_non_null(strstr(out, "error: transport.name: no transport "
                                "'infiniband' is installed"));
    assert_non_null(strstr(out, "error: progress.executors: 3 is more than "
                                "job.threads (1)"));
    free(out);
    snprintf(cmd, sizeof(cmd),
             "RIVET_JOB_THREADS=many '%s' -c '%s' --check 2>&1 >/dev/null",
             RIVET_CONFIG_BIN, path);
    out = run(cmd, &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, "environment RIVET_JOB_THREADS: error: "
                                "job.threads:"));
    assert_non_null(strstr(out, "'infiniband' is installed"));
    assert_null(strstr(out, "progress.executors"));
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

void test_tool_reference(void **state)
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
    assert_non_null(strstr(out, "| `progress.mode` | enum | `inline` | "
                                "`inline`, `thread`, `dynamic`, `direct` |"));
    assert_non_null(strstr(out, "| `progress.executors` | integer | `1` | "));
    /* Every key of rivet's own components is built. */
    assert_null(strstr(out, "*Not supported yet"));
    assert_non_null(strstr(out, "| `store.rndv_threshold` | string | "));
    assert_null(strstr(out, "nosuchlayer."));
    free(out);
}
