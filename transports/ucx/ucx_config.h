/*
 * The UCX transport's configuration keys (transport.ucx.*): its struct and
 * enums, filled by core's loader from the table in ucx_config.c, which the
 * plugin exports in its ops table.
 */
#ifndef RIVET_UCX_CONFIG_H
#define RIVET_UCX_CONFIG_H

#include <stdint.h>

#include "rv_config.h"

typedef enum {
    RV_RMA_EMU_AUTO,
    RV_RMA_EMU_ON,
    RV_RMA_EMU_OFF
} rv_rma_emulation_t;

/* The effective transport.ucx.* keys of a job. */
typedef struct rv_ucx_config {
    char tls[RV_CONFIG_STR_MAX];         /* UCX_TLS */
    char net_devices[RV_CONFIG_STR_MAX]; /* UCX_NET_DEVICES */
    uint64_t rndv_thresh;                /* 0 = UCX's choice */
    uint64_t tcp_seg_size;               /* 0 = UCX's choice */
    rv_rma_emulation_t rma_emulation;    /* auto | on | off */
    int64_t gid_index;                   /* -1 = UCX's choice */
} rv_ucx_config_t;

extern const rv_config_table_t rv_ucx_config_table;

#endif
