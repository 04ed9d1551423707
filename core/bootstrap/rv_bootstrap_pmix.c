/*
 * The PMIx bootstrap provider, for jobs started by mpirun, prterun or srun.
 *
 * Rank and job size come from PMIx_Init and PMIX_JOB_SIZE; the local rank
 * and size from PMIX_LOCAL_RANK and PMIX_LOCAL_SIZE. An allgather puts this
 * rank's bytes under a key that names the round ("rivet.ag.<seq>"), commits,
 * fences with PMIX_COLLECT_DATA and gets every rank's value. Keys are never
 * reused, so a fast rank's next round cannot be confused with this one.
 * PMIx error codes are translated here and never leave this file.
 *
 * Thread mode: serialized (one collective at a time).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#include "rv_bootstrap.h"

typedef struct rv_bootstrap_pmix {
    rv_bootstrap_t super; /* first: the provider is a bootstrap */
    pmix_proc_t self;     /* namespace and rank */
    pmix_proc_t wildcard; /* the whole namespace */
    uint64_t seq;         /* allgather rounds so far */
} rv_bootstrap_pmix_t;

static rv_bootstrap_pmix_t *to_pmix(rv_bootstrap_t *bs)
{
    return (rv_bootstrap_pmix_t *)bs;
}

/* Gets integer @p key of @p proc; PMIx stores these with various widths. */
static pmix_status_t pmix_get_int(const pmix_proc_t *proc, const char *key,
                                  uint64_t *value_p)
{
    pmix_value_t *val = NULL;
    pmix_status_t rc;

    rc = PMIx_Get(proc, key, NULL, 0, &val);
    if (rc != PMIX_SUCCESS)
        return rc;
    switch (val->type) {
    case PMIX_UINT8:
        *value_p = val->data.uint8;
        break;
    case PMIX_UINT16:
        *value_p = val->data.uint16;
        break;
    case PMIX_UINT32:
        *value_p = val->data.uint32;
        break;
    case PMIX_UINT64:
        *value_p = val->data.uint64;
        break;
    case PMIX_SIZE:
        *value_p = val->data.size;
        break;
    case PMIX_UINT:
        *value_p = val->data.uint;
        break;
    case PMIX_PROC_RANK:
        *value_p = val->data.rank;
        break;
    case PMIX_INT:
        rc = val->data.integer < 0 ? PMIX_ERR_BAD_PARAM : PMIX_SUCCESS;
        *value_p = (uint64_t)val->data.integer;
        break;
    case PMIX_INT32:
        rc = val->data.int32 < 0 ? PMIX_ERR_BAD_PARAM : PMIX_SUCCESS;
        *value_p = (uint64_t)val->data.int32;
        break;
    default:
        rc = PMIX_ERR_BAD_PARAM;
        break;
    }
    PMIX_VALUE_RELEASE(val);
    return rc;
}

static rv_status_t pmix_fence(rv_bootstrap_pmix_t *pbs, bool collect,
                              const char *what)
{
    pmix_info_t info;
    pmix_status_t rc;
    bool flag = true;

    if (collect) {
        PMIX_INFO_CONSTRUCT(&info);
        PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
        rc = PMIx_Fence(&pbs->wildcard, 1, &info, 1);
        PMIX_INFO_DESTRUCT(&info);
    } else {
        rc = PMIx_Fence(&pbs->wildcard, 1, NULL, 0);
    }
    if (rc != PMIX_SUCCESS) {
        rv_error("bootstrap: PMIx_Fence (%s) failed: %s", what,
                 PMIx_Error_string(rc));
        return RV_ERR_BOOTSTRAP;
    }
    return RV_OK;
}

/* A barrier is a fence that collects data, although there is none to
 * collect: under Slurm's PMIx plugin (22.05, with OpenPMIx 4.2) a fence
 * without PMIX_COLLECT_DATA let a process through before the others had
 * entered it (measured: rank 1 left its barrier 300 ms before rank 0
 * entered), so a job's workers ran ahead of its stages; Open MPI's server
 * and the PMIx standard make either a barrier. */
static rv_status_t pmix_barrier(rv_bootstrap_t *bs)
{
    return pmix_fence(to_pmix(bs), true, "barrier");
}

static rv_status_t pmix_allgather(rv_bootstrap_t *bs, const void *in, void *out,
                                  size_t len)
{
    rv_bootstrap_pmix_t *pbs = to_pmix(bs);
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_value_t value;
    pmix_status_t rc;
    rv_status_t status;

    if (len == 0)
        return pmix_fence(pbs, false, "allgather of 0 bytes");

    snprintf(key, sizeof(key), "rivet.ag.%llu", (unsigned long long)pbs->seq++);
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = (char *)(uintptr_t)in;
    value.data.bo.size = len;
    /* PMIx_Put copies the value: @p in may be reused on return. */
    rc = PMIx_Put(PMIX_GLOBAL, key, &value);
    if (rc != PMIX_SUCCESS) {
        rv_error("bootstrap: PMIx_Put(%s, %zu bytes) failed: %s", key, len,
                 PMIx_Error_string(rc));
        return RV_ERR_BOOTSTRAP;
    }
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        rv_error("bootstrap: PMIx_Commit failed: %s", PMIx_Error_string(rc));
        return RV_ERR_BOOTSTRAP;
    }
    status = pmix_fence(pbs, true, "allgather");
    if (status != RV_OK)
        return status;

    for (int r = 0; r < bs->size; r++) {
        pmix_proc_t proc;
        pmix_value_t *val = NULL;

        PMIX_LOAD_PROCID(&proc, pbs->self.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&proc, key, NULL, 0, &val);
        if (rc != PMIX_SUCCESS) {
            rv_error("bootstrap: PMIx_Get(%s) of rank %d failed: %s", key, r,
                     PMIx_Error_string(rc));
            return RV_ERR_BOOTSTRAP;
        }
        if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != len) {
            rv_error("bootstrap: rank %d contributed %zu bytes to allgather "
                     "%s, expected %zu (do all ranks call the same "
                     "collectives?)",
                     r, val->type == PMIX_BYTE_OBJECT ? val->data.bo.size : 0,
                     key, len);
            PMIX_VALUE_RELEASE(val);
            return RV_ERR_BOOTSTRAP;
        }
        memcpy((char *)out + (size_t)r * len, val->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(val);
    }
    return RV_OK;
}

static void pmix_abort(rv_bootstrap_t *bs, int code, const char *why)
{
    pmix_status_t rc;

    (void)bs;
    if (code <= 0 || code > 255)
        code = 1;
    rc = PMIx_Abort(code, why ? why : "", NULL, 0);
    if (rc != PMIX_SUCCESS)
        rv_error("bootstrap: PMIx_Abort failed: %s; exiting with code %d",
                 PMIx_Error_string(rc), code);
    _exit(code);
}

static void pmix_fini(rv_bootstrap_t *bs)
{
    pmix_status_t rc = PMIx_Finalize(NULL, 0);

    if (rc != PMIX_SUCCESS)
        rv_warn("bootstrap: PMIx_Finalize failed: %s", PMIx_Error_string(rc));
    free(to_pmix(bs));
}

static const rv_bootstrap_ops_t pmix_ops = {
    .name = "pmix",
    .allgather = pmix_allgather,
    .barrier = pmix_barrier,
    .abort = pmix_abort,
    .fini = pmix_fini,
};

rv_status_t rv__bootstrap_pmix_create(rv_bootstrap_t **bs_p)
{
    rv_bootstrap_pmix_t *pbs;
    uint64_t size, local_rank, local_size;
    pmix_status_t rc;

    pbs = calloc(1, sizeof(*pbs));
    if (pbs == NULL) {
        rv_error("bootstrap: out of memory");
        return RV_ERR_NO_MEMORY;
    }

    rc = PMIx_Init(&pbs->self, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        rv_error("bootstrap: PMIx_Init failed: %s (PMIX_RANK or "
                 "PMIX_NAMESPACE is set, but no PMIx server answers; unset "
                 "them to run as a single process)",
                 PMIx_Error_string(rc));
        goto err_free;
    }
    PMIX_LOAD_PROCID(&pbs->wildcard, pbs->self.nspace, PMIX_RANK_WILDCARD);

    rc = pmix_get_int(&pbs->wildcard, PMIX_JOB_SIZE, &size);
    if (rc != PMIX_SUCCESS || size == 0 || size > INT32_MAX) {
        rv_error("bootstrap: PMIx_Get(PMIX_JOB_SIZE) failed: %s",
                 rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "bad value");
        goto err_finalize;
    }
    if (pbs->self.rank >= size) {
        rv_error("bootstrap: PMIx rank %u is outside the job size %llu",
                 pbs->self.rank, (unsigned long long)size);
        goto err_finalize;
    }
    /* Local rank and size are optional: without them, assume one node. */
    rc = pmix_get_int(&pbs->self, PMIX_LOCAL_RANK, &local_rank);
    if (rc != PMIX_SUCCESS) {
        rv_debug("bootstrap: no PMIX_LOCAL_RANK (%s)", PMIx_Error_string(rc));
        local_rank = pbs->self.rank;
    }
    rc = pmix_get_int(&pbs->wildcard, PMIX_LOCAL_SIZE, &local_size);
    if (rc != PMIX_SUCCESS || local_size == 0 || local_size > size) {
        rv_debug("bootstrap: no PMIX_LOCAL_SIZE (%s)",
                 rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "bad value");
        local_size = size;
    }
    if (local_rank >= local_size)
        local_rank = 0;

    pbs->super.ops = &pmix_ops;
    pbs->super.rank = (int)pbs->self.rank;
    pbs->super.size = (int)size;
    pbs->super.local_rank = (int)local_rank;
    pbs->super.local_size = (int)local_size;
    *bs_p = &pbs->super;
    return RV_OK;

err_finalize:
    PMIx_Finalize(NULL, 0);
err_free:
    free(pbs);
    return RV_ERR_BOOTSTRAP;
}
