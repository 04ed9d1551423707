/*
 * The invocation layer's configuration keys (am.*): its struct and enums,
 * filled by core's loader from the table in am_config.c.
 */
#ifndef RIVET_AM_CONFIG_H
#define RIVET_AM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "rivet.h"

#define AM_CONFIG_PREFIX "am"
/* The most chunks a ring may have (am.max_chunks' range). */
#define AM_MAX_CHUNKS_LIMIT 4096

typedef enum { RV_AM_PATH_SEND, RV_AM_PATH_WRITE } rv_am_path_t;
typedef enum { RV_AGG_NONE, RV_AGG_TRAD, RV_AGG_OVFL } rv_aggregation_t;
typedef enum {
    RV_ON_FULL_FAIL,
    RV_ON_FULL_PROGRESS,
    RV_ON_FULL_RETRY_ASYNC,
    RV_ON_FULL_RETRY /* progress's name before 0.3, read as progress */
} rv_on_full_t;
typedef enum {
    RV_AM_INTRANODE_TRANSPORT,
    RV_AM_INTRANODE_MAPPED
} rv_am_intranode_t;
typedef enum {
    RV_ROUTE_DIRECT,
    RV_ROUTE_HOST,
    RV_ROUTE_TWOHOP
} rv_am_routing_t;

/* The effective am.* keys of a job. */
typedef struct rv_am_config {
    rv_am_path_t path;            /* send | write */
    rv_aggregation_t aggregation; /* none | trad | ovfl */
    uint64_t flush_bytes;         /* trad: a batch leaves at this size */
    uint64_t ovfl_limit;          /* ovfl: most bytes held per destination */
    rv_on_full_t on_full;         /* fail | progress | retry_async */
    int64_t chunks_per_request;   /* chunks a ring grows by */
    int64_t max_chunks;           /* most chunks of one ring */
    uint64_t chunk_bytes;         /* size of a ring chunk */
    bool local_bypass;           /* calls within a process skip the transport */
    int64_t max_nesting;         /* call handlers stacked on one worker */
    rv_am_routing_t routing;     /* direct | host | twohop */
    rv_am_intranode_t intranode; /* transport | mapped */
} rv_am_config_t;

/* The am.* keys of @p ctx's configuration. */
static inline const rv_am_config_t *am_config(const rv_context_t *ctx)
{
    return rv_config_component(rv_context_config(ctx), AM_CONFIG_PREFIX);
}

#endif
