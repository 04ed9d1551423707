/*
 * The UCX transport's configuration table (transport.ucx.*), exported in
 * the plugin's ops table; see rv_config.h for the conventions of a table.
 */
#include <stddef.h>
#include <stdint.h>

#include "ucx_config.h"

/* ENUM fields are read and written as int. */
_Static_assert(sizeof(rv_rma_emulation_t) == sizeof(int), "enum size");

#define OFF(_member) offsetof(rv_ucx_config_t, _member)

static const rv_config_field_t ucx_fields[] = {
    {
        .name = "tls",
        .type = RV_CFG_STRING,
        .offset = OFF(tls),
        .def = "\"\"",
        .help = "UCX transports to use, as UCX_TLS takes them (sm,self for "
                "shared memory; tcp,self for TCP; rc,sm,self for "
                "InfiniBand). Empty leaves UCX_TLS alone, so UCX picks.",
    },
    {
        .name = "net_devices",
        .type = RV_CFG_STRING,
        .offset = OFF(net_devices),
        .def = "\"\"",
        .help = "Network devices UCX may use, as UCX_NET_DEVICES takes them "
                "(lo, eth0, mlx5_0:1). Empty leaves UCX_NET_DEVICES alone.",
    },
    {
        .name = "rndv_thresh",
        .type = RV_CFG_SIZE,
        .offset = OFF(rndv_thresh),
        .def = "0",
        .min = 0,
        .max = INT64_MAX,
        .help = "Message size from which UCX switches active messages from "
                "eager to rendezvous (UCX_RNDV_THRESH). 0 keeps UCX's own "
                "choice (8256 B on shared memory with UCX 1.13).",
    },
    {
        .name = "tcp_seg_size",
        .type = RV_CFG_SIZE,
        .offset = OFF(tcp_seg_size),
        .def = "0",
        .min = 0,
        .max = 4 * 1024 * 1024,
        .help = "Segment size of UCX's TCP transport, for sending and "
                "receiving (UCX_TCP_TX_SEG_SIZE and UCX_TCP_RX_SEG_SIZE): a "
                "message above it travels in several segments. 0 keeps "
                "UCX's 8KiB; 128KiB halves a 32KiB fetch on loopback.",
    },
    {
        .name = "rma_emulation",
        .type = RV_CFG_ENUM,
        .offset = OFF(rma_emulation),
        .def = "auto",
        .values = "auto|on|off",
        .help = "Put, get and atomics carried by active messages instead of "
                "UCX's own RMA: auto does it for endpoints whose RMA would "
                "run over TCP, where UCX 1.13's put/get are pathologically "
                "slow (about 1 ms per get); on does it everywhere (for "
                "testing); off never.",
    },
    {
        .name = "gid_index",
        .type = RV_CFG_INT,
        .offset = OFF(gid_index),
        .def = "-1",
        .min = -1,
        .max = 255,
        .help = "GID table index UCX addresses InfiniBand/RoCE ports with "
                "(UCX_IB_GID_INDEX); -1 keeps UCX's choice. Soft-RoCE (rxe) "
                "with UCX 1.13 needs 0, the link-local RoCE v2 GID.",
    },
    {.name = NULL},
};

const rv_config_table_t rv_ucx_config_table = {
    .prefix = "transport.ucx",
    .help = "The UCX transport (librivet-ucx.so).",
    .fields = ucx_fields,
    .size = sizeof(rv_ucx_config_t),
};
