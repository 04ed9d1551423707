/*
 * The object store's configuration keys (store.*): its struct, filled by
 * core's loader from the table in store_config.c.
 */
#ifndef RIVET_STORE_CONFIG_H
#define RIVET_STORE_CONFIG_H

#include "rivet.h"
#include "rv_config.h"

#define STORE_CONFIG_PREFIX "store"

/* The effective store.* keys of a job. */
typedef struct rv_store_config {
    uint64_t capacity;                      /* bytes per process */
    char rndv_threshold[RV_CONFIG_STR_MAX]; /* a size, or auto */
    bool preallocate;                       /* capacity ready at start */
} rv_store_config_t;

/* The store.* keys of @p ctx's configuration. */
/* store.rndv_threshold: a size (4096, 32KiB, 1M), or auto (*out 0 and
 * *autop true: store_calib.c measures it at job start); RV_ERR_CONFIG
 * (logged) otherwise. */
rv_status_t store_parse_threshold(const char *text, size_t *out, bool *autop);

static inline const rv_store_config_t *store_config(const rv_context_t *ctx)
{
    return rv_config_component(rv_context_config(ctx), STORE_CONFIG_PREFIX);
}

#endif
