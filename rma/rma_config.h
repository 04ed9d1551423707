/*
 * The remote memory layer's configuration keys (rma.*): its struct and
 * enums, filled by core's loader from the table in rma_config.c.
 */
#ifndef RIVET_RMA_CONFIG_H
#define RIVET_RMA_CONFIG_H

#include "rivet.h"

#define RMA_CONFIG_PREFIX "rma"

typedef enum {
    RV_AMLONG_REASSEMBLY,
    RV_AMLONG_PUT_SYNC_SEND
} rv_am_long_protocol_t;

/* The effective rma.* keys of a job. */
typedef struct rv_rma_config {
    rv_am_long_protocol_t am_long_protocol; /* reassembly | put_sync_send */
} rv_rma_config_t;

/* The rma.* keys of @p ctx's configuration. */
static inline const rv_rma_config_t *rma_config(const rv_context_t *ctx)
{
    return rv_config_component(rv_context_config(ctx), RMA_CONFIG_PREFIX);
}

#endif
