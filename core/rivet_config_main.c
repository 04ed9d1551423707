/*
 * rivet-config: validates a job configuration and prints the effective one
 * (defaults, then the file, then RIVET_* environment overrides), or the
 * reference of every key: core's, every layer's and every transport
 * plugin's found in the plugin path.
 *
 *     rivet-config -c job.yaml --check
 *     rivet-config -c job.yaml --dump
 *     RIVET_JOB_THREADS=4 rivet-config --dump
 *     rivet-config --reference > docs/config.md
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_config.h"
#include "rv_stats.h"
#include "rv_version.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: rivet-config [-c FILE] --dump | --check\n"
            "       rivet-config --reference | --stats-reference\n"
            "\n"
            "Reads a rivet job configuration: defaults, then FILE, then the\n"
            "environment overrides RIVET_<SECTION>_<KEY> (RIVET_JOB_THREADS\n"
            "overrides job.threads).\n"
            "\n"
            "  -c, --config FILE  the YAML configuration file\n"
            "  -d, --dump         print the effective configuration as YAML\n"
            "      --check        validate it and print 'FILE: ok'\n"
            "  -r, --reference    print every key as a Markdown table\n"
            "      --stats-reference\n"
            "                     print every job.stats counter as a "
            "Markdown table\n"
            "  -h, --help         print this help\n"
            "      --version      print rivet's version\n"
            "\n"
            "Errors go to stderr as FILE:LINE:COL: error: KEY: message, and\n"
            "the exit status is 1.\n");
}

enum {
    ACTION_NONE,
    ACTION_DUMP,
    ACTION_CHECK,
    ACTION_REFERENCE,
    ACTION_STATS_REFERENCE
};

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"dump", no_argument, NULL, 'd'},
        {"check", no_argument, NULL, 'k'},
        {"reference", no_argument, NULL, 'r'},
        {"stats-reference", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    int action = ACTION_NONE;
    char err[8192];
    rv_config_t *cfg;
    int opt;

    while ((opt = getopt_long(argc, argv, "c:drh", options, NULL)) != -1) {
        int next = ACTION_NONE;
        switch (opt) {
        case 'c':
            path = optarg;
            continue;
        case 'd':
            next = ACTION_DUMP;
            break;
        case 'k':
            next = ACTION_CHECK;
            break;
        case 'r':
            next = ACTION_REFERENCE;
            break;
        case 's':
            next = ACTION_STATS_REFERENCE;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("rivet-config (rivet) %s\n", rv_version(NULL, NULL, NULL));
            return 0;
        default:
            fprintf(stderr, "try 'rivet-config --help'\n");
            return 1;
        }
        if (action != ACTION_NONE && action != next) {
            fprintf(stderr, "rivet-config: --dump, --check, --reference and "
                            "--stats-reference are exclusive\n");
            return 1;
        }
        action = next;
    }
    if (optind < argc) {
        fprintf(stderr,
                "rivet-config: unexpected argument '%s'; the file "
                "goes after -c\n",
                argv[optind]);
        return 1;
    }
    if (action == ACTION_NONE) {
        fprintf(stderr, "rivet-config: say what to do: --dump, --check or "
                        "--reference\n");
        usage(stderr);
        return 1;
    }
    if (action == ACTION_STATS_REFERENCE) {
        rv_stats_print_reference(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (action == ACTION_REFERENCE) {
        rv_config_print_reference(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }

    if (rv_config_load(path, &cfg, err, sizeof(err)) != RV_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const char *name = path != NULL ? path : "defaults and environment";
    if (action == ACTION_CHECK) {
        /* Every problem the keys make together, not only the first. */
        char problems[2048];
        int n = rv_config_check(cfg, problems, sizeof(problems));
        rv_config_free(cfg);
        if (n > 0) {
            for (char *line = strtok(problems, "\n"); line != NULL;
                 line = strtok(NULL, "\n"))
                fprintf(stderr, "%s: error: %s\n", name, line);
            return 1;
        }
        printf("%s: ok\n", name);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    rv_config_dump(cfg, stdout);
    rv_config_free(cfg);
    return fflush(stdout) == 0 ? 0 : 1;
}
