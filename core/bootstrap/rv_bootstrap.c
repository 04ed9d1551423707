/*
 * Bootstrap selection and the singleton provider.
 *
 * The provider is chosen from the environment, most specific first:
 * RIVET_BOOTSTRAP (set by rivetrun), then PMIX_RANK / PMIX_NAMESPACE (set
 * by mpirun, prterun and srun for PMIx clients), else the process is a job
 * of one.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv_bootstrap.h"

static int env_set(const char *name)
{
    const char *value = getenv(name);
    return value != NULL && *value != '\0';
}

rv_status_t rv__bootstrap_create(rv_bootstrap_t **bs_p)
{
    rv_bootstrap_t *bs;
    rv_status_t status;

    if (env_set("RIVET_BOOTSTRAP"))
        status = rv__bootstrap_rivetrun_create(getenv("RIVET_BOOTSTRAP"), &bs);
    else if (env_set("PMIX_RANK") || env_set("PMIX_NAMESPACE"))
        status = rv__bootstrap_pmix_create(&bs);
    else
        status = rv__bootstrap_singleton_create(&bs);
    if (status != RV_OK)
        return status;

    rv_log_set_identity(bs->rank, -1);
    rv_debug("bootstrap %s: rank %d of %d (local %d of %d)", bs->ops->name,
             bs->rank, bs->size, bs->local_rank, bs->local_size);
    *bs_p = bs;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Singleton: rank 0 of 1; collectives are local.                          */
/* ---------------------------------------------------------------------- */

static rv_status_t singleton_allgather(rv_bootstrap_t *bs, const void *in,
                                       void *out, size_t len)
{
    (void)bs;
    if (len > 0 && in != out)
        memmove(out, in, len);
    return RV_OK;
}

static rv_status_t singleton_barrier(rv_bootstrap_t *bs)
{
    (void)bs;
    return RV_OK;
}

static void singleton_abort(rv_bootstrap_t *bs, int code, const char *why)
{
    (void)bs;
    rv_error("job aborted with code %d: %s", code, why ? why : "");
    /* An exit status is 8 bits and an abort must not look like success. */
    _exit(code > 0 && code < 256 ? code : 1);
}

static void singleton_fini(rv_bootstrap_t *bs)
{
    free(bs);
}

static const rv_bootstrap_ops_t singleton_ops = {
    .name = "singleton",
    .allgather = singleton_allgather,
    .barrier = singleton_barrier,
    .abort = singleton_abort,
    .fini = singleton_fini,
};

rv_status_t rv__bootstrap_singleton_create(rv_bootstrap_t **bs_p)
{
    rv_bootstrap_t *bs = calloc(1, sizeof(*bs));

    if (bs == NULL) {
        rv_error("bootstrap: out of memory");
        return RV_ERR_NO_MEMORY;
    }
    bs->ops = &singleton_ops;
    bs->rank = 0;
    bs->size = 1;
    bs->local_rank = 0;
    bs->local_size = 1;
    *bs_p = bs;
    return RV_OK;
}
