/*
 * The process context: configuration, bootstrap, transport plugin.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv_config_internal.h"
#include "rv_core.h"
#include "rv_offload.h"
#include "rv_placement.h"

/* Removes `-c FILE`, `--config FILE` or `--config=FILE` from argv. */
static const char *take_config_arg(int *argc, char ***argv)
{
    if (argc == NULL || argv == NULL || *argv == NULL)
        return NULL;
    char **av = *argv;
    for (int i = 1; i < *argc; i++) {
        const char *file = NULL;
        int used = 0;
        if ((strcmp(av[i], "-c") == 0 || strcmp(av[i], "--config") == 0) &&
            i + 1 < *argc) {
            file = av[i + 1];
            used = 2;
        } else if (strncmp(av[i], "--config=", 9) == 0) {
            file = av[i] + 9;
            used = 1;
        }
        if (file == NULL)
            continue;
        memmove(&av[i], &av[i + used],
                (size_t)(*argc - i - used + 1) * sizeof(*av));
        *argc -= used;
        return file;
    }
    return NULL;
}

rv_status_t rv_init(int *argc, char ***argv, rv_context_t **ctx_p)
{
    const char *file = take_config_arg(argc, argv);
    if (file == NULL)
        file = getenv("RIVET_CONFIG");
    if (file != NULL && *file == '\0')
        file = NULL;

    rv_config_t *cfg;
    rv_status_t status = rv_config_load(file, &cfg, NULL, 0);
    if (status != RV_OK)
        return status;
    status = rv_init_config(cfg, ctx_p);
    rv_config_free(cfg);
    return status;
}

/* A transport's connection to @p peer broke for good: end the job. */
static void peer_failed(void *arg, uint32_t peer, const char *why)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    rv_context_t *ctx = arg;
    char msg[256];
    if (atomic_flag_test_and_set(&once))
        for (;;) /* another thread is ending the process */
            pause();
    snprintf(msg, sizeof(msg), "worker %u (rank %u) failed: %s", peer,
             peer / (uint32_t)ctx->core->job.threads, why);
    rv_abort(ctx, 1, msg);
}

/* The plugin's own struct: from the file and the environment when the
 * configuration holds it, else the plugin's defaults. */
static rv_status_t transport_config(rv_context_t *ctx, void **tconfig_p)
{
    char why[RV_CFG_MSG_MAX];
    rv_status_t status;

    *tconfig_p = NULL;
    if (ctx->ops->config == NULL)
        return RV_OK;
    status = rv__config_attach(ctx->config, ctx->ops->config, tconfig_p, why,
                               sizeof(why));
    if (status != RV_OK)
        rv_error("transport '%s': %s", ctx->core->transport.name, why);
    return status;
}

/* Busy-polling threads that outnumber the cores of their host take turns
 * in time slices: two workers per process on two cores made a ping-pong
 * 100 times slower (23.5 us a round trip instead of 0.23), without a
 * word. Said once per host, by its first process. Dynamic executors sleep
 * when idle; thread-mode executors poll as workers do. */
static void warn_oversubscribed(const rv_context_t *ctx)
{
    const rv_core_config_t *c = ctx->core;
    int per_process = (int)c->job.threads;
    int cores, busy;

    if (ctx->bs->local_rank != 0)
        return;
    if (c->progress.mode == RV_PROGRESS_THREAD)
        per_process += (int)c->progress.executors;
    busy = ctx->bs->local_size * per_process;
    cores = rv__placement_cores();
    if (cores > 0 && busy > cores)
        rv_warn("%d busy-polling threads on this host (%d processes x %d) "
                "share %d cores: each waits for the others' time slices, "
                "and a round trip can take 100 times longer; run fewer "
                "processes or job.threads per host",
                busy, ctx->bs->local_size, per_process, cores);
}

rv_status_t rv_init_config(const rv_config_t *cfg, rv_context_t **ctx_p)
{
    rv_status_t status;
    rv_context_t *ctx;
    void *tconfig;
    if (cfg == NULL)
        return RV_ERR_INVALID;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return RV_ERR_NO_MEMORY;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_cond_init(&ctx->cond, NULL);
    status = rv__config_dup(cfg, &ctx->config);
    if (status != RV_OK)
        goto err_free;
    ctx->core = rv_core_config(ctx->config);

    status = rv__bootstrap_create(&ctx->bs);
    if (status != RV_OK)
        goto err_free;
    rv_log_set_identity(ctx->bs->rank, -1);
    /* Once per job, not once per process. */
    if (ctx->bs->rank == 0)
        rv__config_env_check(ctx->config);
    warn_oversubscribed(ctx);

    status = rv__msg_init(ctx);
    if (status != RV_OK)
        goto err_bootstrap;

    status = rv__limits_check(ctx->bs->size, (int)ctx->core->job.threads);
    if (status != RV_OK)
        goto err_handlers;
    status = rv__plugin_load(ctx->core->transport.name, &ctx->plugin_handle,
                             &ctx->ops);
    if (status != RV_OK)
        goto err_handlers;
    status = transport_config(ctx, &tconfig);
    if (status != RV_OK)
        goto err_plugin;

    rv_transport_params_t params = {
        .config = ctx->config,
        .tconfig = tconfig,
        .rank = ctx->bs->rank,
        .size = ctx->bs->size,
        .threads = (int)ctx->core->job.threads,
        .peer_failed = peer_failed,
        .peer_failed_arg = ctx,
        .services = &rv__transport_services,
    };
    if (ctx->core->progress.mode == RV_PROGRESS_INLINE)
        status = ctx->ops->init(&params, &ctx->tp);
    else /* the progress engine's offloading wraps the plugin */
        status = rv__offload_init(ctx, ctx->ops, &params, &ctx->ops, &ctx->tp);
    if (status != RV_OK) {
        rv_error("transport '%s' failed to start: %s",
                 ctx->core->transport.name, rv_status_str(status));
        goto err_plugin;
    }
    ctx->ops->query(ctx->tp, &ctx->caps);
    /* After the transport's start: UCX's own handler, if it set one, wins. */
    rv__crash_handlers_install(ctx->bs->rank);
    rv_info("job of %d processes x %d threads, bootstrap %s, transport %s",
            ctx->bs->size, (int)ctx->core->job.threads, ctx->bs->ops->name,
            ctx->caps.description);
    *ctx_p = ctx;
    return RV_OK;

err_plugin:
    /* The plugin stays loaded: UCX registers atexit hooks. */
err_handlers:
    for (size_t i = 0; i < ctx->nhandlers; i++) {
        free(ctx->handlers[i].name);
        if (ctx->handlers[i].flags & RV_HANDLER_OWNS_ARG)
            free(ctx->handlers[i].arg);
    }
    free(ctx->handlers);
err_bootstrap:
    ctx->bs->ops->fini(ctx->bs);
err_free:
    pthread_mutex_destroy(&ctx->lock);
    pthread_cond_destroy(&ctx->cond);
    rv_config_free(ctx->config);
    free(ctx);
    return status;
}

void rv_finalize(rv_context_t *ctx)
{
    if (ctx == NULL)
        return;
    rv__layers_fini(ctx);
    ctx->ops->fini(ctx->tp);
    ctx->bs->ops->fini(ctx->bs);
    for (size_t i = 0; i < ctx->nhandlers; i++) {
        free(ctx->handlers[i].name);
        if (ctx->handlers[i].flags & RV_HANDLER_OWNS_ARG)
            free(ctx->handlers[i].arg);
    }
    free(ctx->handlers);
    free(ctx->host_of);
    pthread_mutex_destroy(&ctx->lock);
    pthread_cond_destroy(&ctx->cond);
    /* The plugin is not dlclose'd: UCX keeps atexit handlers in it. */
    rv_config_free(ctx->config);
    free(ctx);
}

void rv_abort(rv_context_t *ctx, int code, const char *why)
{
    rv_error("aborting the job: %s", why);
    ctx->bs->ops->abort(ctx->bs, code, why);
    _Exit(code ? code : 1);
}

rv_rank_t rv_rank(const rv_context_t *ctx)
{
    return ctx->bs->rank;
}
rv_rank_t rv_size(const rv_context_t *ctx)
{
    return ctx->bs->size;
}
int rv_threads(const rv_context_t *ctx)
{
    return (int)ctx->core->job.threads;
}

uint32_t rv_nworkers(const rv_context_t *ctx)
{
    return (uint32_t)ctx->bs->size * (uint32_t)ctx->core->job.threads;
}

int rv_nhosts(const rv_context_t *ctx)
{
    return ctx->host_of != NULL ? ctx->nhosts : -1;
}

int rv_rank_host(const rv_context_t *ctx, rv_rank_t rank)
{
    if (ctx->host_of == NULL || rank < 0 || rank >= rv_size(ctx))
        return -1;
    return ctx->host_of[rank];
}

const rv_config_t *rv_context_config(const rv_context_t *ctx)
{
    return ctx->config;
}

const char *rv_bootstrap_name(const rv_context_t *ctx)
{
    return ctx->bs->ops->name;
}

const rv_transport_caps_t *rv_context_caps(rv_context_t *ctx)
{
    /* While a job runs, its workers read what rv_job_run queried once:
     * querying here would rewrite the struct under their feet. */
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->caps_valid)
        ctx->ops->query(ctx->tp, &ctx->caps);
    pthread_mutex_unlock(&ctx->lock);
    return &ctx->caps;
}

const char *rv_context_describe(rv_context_t *ctx)
{
    return rv_context_caps(ctx)->description;
}

const rv_transport_ops_t *rv_context_transport(rv_context_t *ctx,
                                               rv_transport_t **tp_p)
{
    if (tp_p != NULL)
        *tp_p = ctx->tp;
    return ctx->ops;
}

rv_status_t rv_bootstrap_barrier(rv_context_t *ctx)
{
    return ctx->bs->ops->barrier(ctx->bs);
}

rv_status_t rv_bootstrap_allgather(rv_context_t *ctx, void *out, const void *in,
                                   size_t len)
{
    return ctx->bs->ops->allgather(ctx->bs, in, out, len);
}
