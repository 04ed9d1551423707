/*
 * The verbs transport's configuration keys (transport.verbs.*): its struct
 * and enums, filled by core's loader from the table in verbs_config.c,
 * which the plugin exports in its ops table.
 */
#ifndef RIVET_VERBS_CONFIG_H
#define RIVET_VERBS_CONFIG_H

#include <stdint.h>

#include "rv_config.h"

typedef enum { RV_QP_SHARING_THREAD, RV_QP_SHARING_PROCESS } rv_qp_sharing_t;

/* The effective transport.verbs.* keys of a job. */
typedef struct rv_verbs_config {
    char device[RV_CONFIG_STR_MAX]; /* "" = the first with an active port */
    int64_t port;
    int64_t gid_index;          /* -1 = a RoCE v2 IPv4 GID if any */
    rv_qp_sharing_t qp_sharing; /* thread | process */
    int64_t signal_interval;    /* one send in this many is signaled */
    int64_t timeout;            /* local ACK timeout, IB encoding */
    int64_t retry_count;        /* resends before "retry exceeded" */
    uint64_t max_message;       /* largest message, bytes (RTS bound) */
} rv_verbs_config_t;

extern const rv_config_table_t rv_verbs_config_table;

#endif
