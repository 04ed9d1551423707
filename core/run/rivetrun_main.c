/*
 * rivetrun: starts the processes of a job on this node and serves their
 * bootstrap (see rv_launch_proto.h).
 *
 *     rivetrun [options] -c job.yaml PROGRAM [ARGS...]
 *
 * rivetrun forks job.processes children. Each child makes itself a process
 * group leader, asks the kernel to kill it if rivetrun dies
 * (PR_SET_PDEATHSIG), binds itself per job.placement, exports its rank,
 * the bootstrap address and the job's token and execs PROGRAM
 * (run_children.c).
 *
 * A job only its own processes can join: the bootstrap socket lives in a
 * private directory (run_dir.c), and a process joins as rank r only with
 * the job's token, drawn afresh for every job, and only if it is the
 * process forked as r or one of its descendants (run_server.c).
 *
 * One poll() loop serves everything (run_loop.c): the bootstrap socket
 * (run_server.c), the children's output (prefixed "[rank] " line by line
 * when job.output_prefix is on; run_output.c), signals (a signalfd:
 * SIGCHLD, SIGINT, SIGTERM, SIGHUP) and the timeout. rivetrun never blocks
 * anywhere else, so a misbehaving child cannot make it hang.
 *
 * The job fails, and rivetrun ends it, when a rank exits non-zero, is
 * killed by a signal, aborts, or exits (even with 0) while the other ranks
 * wait for it in a collective it will never join. Ending a job means:
 * SIGTERM to every rank's process group, SIGKILL after a grace period, every
 * child reaped, every connection closed (so a rank blocked in a collective
 * sees end-of-file). rivetrun prints one line naming the failed rank and
 * exits with its code (128 + signal if it was killed).
 *
 * This file reads the options and the job's configuration, sets the
 * launcher up, runs the job and tears the launcher down.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "run_internal.h"
#include "rv_config.h"
#include "rv_version.h"

#define MAX_PROCESSES 65536
/* Longest --timeout, in seconds. */
#define MAX_TIMEOUT_S 1e9
#define EXIT_USAGE 1
/* parse_options: go on and run the job. */
#define OPTIONS_OK (-1)
/* Longest configuration error message. */
#define CONFIG_ERR_MAX 1024
/* Bootstrap connections open at once: a rank that leaves cleanly may
 * connect again before its old connection is swept, and a few strays are
 * refused without failing the job. */
#define CONNS_PER_RANK 2
#define CONNS_SPARE 16

/* The command line. */
typedef struct options {
    const char *config; /* -c, or NULL */
    long np;            /* -n, 0: job.processes */
    int prefix;         /* --prefix 1, --no-prefix 0, else -1 */
    double timeout_s;   /* --timeout, 0: none */
    const char *timeout_str;
    char *const *argv; /* the program and its arguments */
} options_t;

/* The job.* settings rivetrun takes from the configuration. */
typedef struct job_settings {
    int64_t processes;
    int64_t threads;
    rv_placement_t placement;
    bool output_prefix;
    int64_t keepalive_s; /* job.keepalive */
} job_settings_t;

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: rivetrun [options] -c job.yaml PROGRAM [ARGS...]\n"
        "\n"
        "Starts job.processes copies of PROGRAM on this node, bound per\n"
        "job.placement, and serves their bootstrap. Every process gets "
        "RIVET_RANK,\n"
        "RIVET_SIZE, RIVET_LOCAL_RANK, RIVET_LOCAL_SIZE, RIVET_BOOTSTRAP,\n"
        "RIVET_JOB_TOKEN and RIVET_CONFIG in its environment. If a process "
        "fails,\n"
        "rivetrun ends the others and exits with its code (128 + signal if it "
        "was\n"
        "killed).\n"
        "\n"
        "options:\n"
        "  -c, --config FILE    the job's YAML configuration (default: "
        "RIVET_CONFIG,\n"
        "                       else defaults and RIVET_* environment "
        "overrides)\n"
        "  -n, --np N           number of processes (overrides job.processes)\n"
        "      --timeout S      end the job after S seconds (exit code 124)\n"
        "      --prefix         prefix every output line with \"[rank] \"\n"
        "      --no-prefix      do not (both override job.output_prefix)\n"
        "  -h, --help           this help\n"
        "      --version        rivet's version\n");
}

/* ---------------------------------------------------------------------- */
/* Options and configuration                                               */
/* ---------------------------------------------------------------------- */

static int parse_np(const char *arg, long *np_p)
{
    char *end;
    long np;

    errno = 0;
    np = strtol(arg, &end, 10);
    if (errno != 0 || *end != '\0' || np < 1 || np > MAX_PROCESSES) {
        run_say("-n %s: expected a number of processes in [1, %d]", arg,
                MAX_PROCESSES);
        return -1;
    }
    *np_p = np;
    return 0;
}

static int parse_timeout(const char *arg, double *timeout_s_p)
{
    char *end;
    double s;

    errno = 0;
    s = strtod(arg, &end);
    if (errno != 0 || *end != '\0' || !(s > 0) || s > MAX_TIMEOUT_S) {
        run_say("--timeout %s: expected a positive number of seconds", arg);
        return -1;
    }
    *timeout_s_p = s;
    return 0;
}

/* Returns OPTIONS_OK, or the code rivetrun exits with. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"np", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 'T'},
        {"prefix", no_argument, NULL, 'P'},
        {"no-prefix", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    /* "+": the options end at PROGRAM; its own options are its own. */
    while ((opt = getopt_long(argc, argv, "+c:n:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            o->config = optarg;
            break;
        case 'n':
            if (parse_np(optarg, &o->np) != 0)
                return EXIT_USAGE;
            break;
        case 'T':
            if (parse_timeout(optarg, &o->timeout_s) != 0)
                return EXIT_USAGE;
            o->timeout_str = optarg;
            break;
        case 'P':
        case 'N':
            o->prefix = opt == 'P';
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("rivetrun (rivet) %s\n", rv_version(NULL, NULL, NULL));
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        run_say("no program to run");
        usage(stderr);
        return EXIT_USAGE;
    }
    o->argv = argv + optind;
    return OPTIONS_OK;
}

/* Loads the configuration at @p path (NULL: defaults and environment) and
 * takes the settings rivetrun needs. The only place where rivetrun reads
 * the configuration. */
static int job_settings_load(const char *path, job_settings_t *job)
{
    char errbuf[CONFIG_ERR_MAX] = "";
    rv_config_t *cfg;

    if (rv_config_load(path, &cfg, errbuf, sizeof(errbuf)) != RV_OK) {
        run_say("%s", errbuf[0] ? errbuf : "cannot load the configuration");
        return -1;
    }
    /* The launcher reads core's keys only. */
    const rv_core_config_t *core = rv_core_config(cfg);
    job->processes = core->job.processes;
    job->threads = core->job.threads;
    job->placement = core->job.placement;
    job->output_prefix = core->job.output_prefix;
    job->keepalive_s = core->job.keepalive;
    rv_config_free(cfg);
    return 0;
}

/* The job: the configuration, overridden by the command line. */
static int configure(launcher_t *l, const options_t *o)
{
    static char config_abs[PATH_MAX];
    const char *config = o->config;
    const char *env = getenv("RIVET_CONFIG");
    job_settings_t job;

    if (config == NULL && env != NULL && *env != '\0')
        config = env;
    if (job_settings_load(config, &job) != 0)
        return -1;
    if (config != NULL) {
        if (realpath(config, config_abs) == NULL) {
            run_say("%s: %m", config);
            return -1;
        }
        l->config_abs = config_abs;
    }
    if (o->np == 0 && (job.processes < 1 || job.processes > MAX_PROCESSES)) {
        run_say("job.processes %" PRId64 " is out of [1, %d]", job.processes,
                MAX_PROCESSES);
        return -1;
    }
    l->size = o->np != 0 ? (int)o->np : (int)job.processes;
    l->threads =
        job.threads > 0 && job.threads < INT_MAX ? (int)job.threads : 1;
    l->placement = job.placement;
    l->prefix = o->prefix >= 0 ? o->prefix : job.output_prefix;
    l->argv = o->argv;
    l->timeout_s = o->timeout_s;
    l->timeout_str = o->timeout_str;
    l->keepalive_ms = job.keepalive_s * 1000;
    l->self = getpid();
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Set-up, the job, teardown                                               */
/* ---------------------------------------------------------------------- */

static int signals_open(launcher_t *l)
{
    sigset_t mask;

    /* Signals are read from a signalfd: block them before the first fork,
     * so that no SIGCHLD is missed; children restore the old mask. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &l->old_mask);
    signal(SIGPIPE, SIG_IGN);
    l->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (l->sig_fd < 0) {
        run_say("signalfd failed: %m");
        return -1;
    }
    return 0;
}

/* Draws the job's token from the kernel's random source. */
static int token_make(launcher_t *l)
{
    size_t got = 0;

    /* A token of zeros reads as none: draw again (once in 2^128 jobs). */
    while (got < sizeof(l->token) || rv__launch_token_none(l->token)) {
        ssize_t n;

        if (got == sizeof(l->token))
            got = 0;
        n = getrandom(l->token + got, sizeof(l->token) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            run_say("cannot draw the job's token (getrandom): %m");
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

static int launcher_setup(launcher_t *l)
{
    l->ranks = calloc((size_t)l->size, sizeof(*l->ranks));
    l->max_conns = CONNS_PER_RANK * l->size + CONNS_SPARE;
    l->conns = calloc((size_t)l->max_conns, sizeof(*l->conns));
    if (l->ranks == NULL || l->conns == NULL) {
        run_say("out of memory");
        goto err_alloc;
    }
    run_output_init(l);
    if (token_make(l) != 0 || signals_open(l) != 0)
        goto err_alloc;
    if (run_server_open(l) != 0)
        goto err_signals;
    return 0;

err_signals:
    close(l->sig_fd);
    l->sig_fd = -1;
err_alloc:
    free(l->conns);
    l->conns = NULL;
    free(l->ranks);
    l->ranks = NULL;
    return -1;
}

static void launcher_teardown(launcher_t *l)
{
    run_server_close(l);
    close(l->sig_fd);
    l->sig_fd = -1;
    run_output_fini(l);
    free(l->ranks);
    l->ranks = NULL;
}

/* Runs the job to its end; returns rivetrun's exit code. */
static int run_job(launcher_t *l)
{
    run_children_start(l);
    if (run_loop(l) != 0)
        l->exit_code = 1;
    run_children_finish(l);
    /* What the ranks wrote last comes out before rivetrun ends. */
    for (int r = 0; r < l->size; r++)
        run_output_read_rank(l, r);
    return l->exit_code;
}

int main(int argc, char **argv)
{
    static launcher_t launcher;
    launcher_t *l = &launcher;
    options_t opts = {.prefix = -1};
    int code = parse_options(argc, argv, &opts);

    if (code != OPTIONS_OK)
        return code;
    l->listen_fd = l->sig_fd = -1;
    if (configure(l, &opts) != 0 || launcher_setup(l) != 0)
        return 1;
    code = run_job(l);
    launcher_teardown(l);
    return code;
}
