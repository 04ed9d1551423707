/*
 * The verbs transport's configuration table (transport.verbs.*), exported
 * in the plugin's ops table; see rv_config.h for the conventions of a
 * table.
 */
#include <stddef.h>
#include <stdint.h>

#include "verbs_config.h"

/* ENUM fields are read and written as int. */
_Static_assert(sizeof(rv_qp_sharing_t) == sizeof(int), "enum size");

#define OFF(_member) offsetof(rv_verbs_config_t, _member)

static const rv_config_field_t verbs_fields[] = {
    {
        .name = "device",
        .type = RV_CFG_STRING,
        .offset = OFF(device),
        .def = "\"\"",
        .help = "RDMA device to open (mlx5_0, rxe0). Empty takes the first "
                "device with an active port.",
    },
    {
        .name = "port",
        .type = RV_CFG_INT,
        .offset = OFF(port),
        .def = "1",
        .min = 1,
        .max = 255,
        .help = "Port number on the device (ports count from 1).",
    },
    {
        .name = "gid_index",
        .type = RV_CFG_INT,
        .offset = OFF(gid_index),
        .def = "-1",
        .min = -1,
        .max = 255,
        .help = "GID table index used for addressing; -1 picks a RoCE v2 "
                "IPv4 GID when there is one. Soft-RoCE usually needs 0.",
    },
    {
        .name = "qp_sharing",
        .type = RV_CFG_ENUM,
        .offset = OFF(qp_sharing),
        .def = "thread",
        .values = "thread|process",
        .help = "thread: every worker thread has its own queue pair to each "
                "peer (no locks, more QPs); process: the threads of a "
                "process share one queue pair per peer.",
    },
    {
        .name = "signal_interval",
        .type = RV_CFG_INT,
        .offset = OFF(signal_interval),
        .def = "64",
        .min = 1,
        .max = 16384,
        .help = "Selective signaling: one send in this many asks for a "
                "completion; the others are reclaimed by the flush-number "
                "protocol (Seriema section 4.1).",
    },
    {
        .name = "timeout",
        .type = RV_CFG_INT,
        .offset = OFF(timeout),
        .def = "18",
        .min = 1,
        .max = 31,
        .help = "Local ACK timeout of a queue pair, in the IB encoding: a "
                "packet not acknowledged is resent after 4.096 us << "
                "timeout (18: 1.07 s, as UCX_RC_TIMEOUT's 1 s; 14: 67 ms).",
    },
    {
        .name = "retry_count",
        .type = RV_CFG_INT,
        .offset = OFF(retry_count),
        .def = "6",
        .min = 1,
        .max = 6,
        .help = "Resends of an unacknowledged packet before the peer is "
                "declared dead (transport retry counter exceeded): about "
                "(retry_count + 1) x timeout. At most 6: Soft-RoCE takes 7 "
                "as retry for ever, and a dead peer would hang its senders.",
    },
    {
        .name = "max_message",
        .type = RV_CFG_SIZE,
        .offset = OFF(max_message),
        .def = "2GiB",
        .min = 64 * 1024,
        .max = (int64_t)1 << 31,
        .help = "Largest message a worker sends or receives. A receiver "
                "allocates and registers what a rendezvous request "
                "announces, so one announcing more is dropped and counted "
                "(malformed), and a send of more is refused (invalid); "
                "every process of a job reads the same value.",
    },
    {.name = NULL},
};

const rv_config_table_t rv_verbs_config_table = {
    .prefix = "transport.verbs",
    .help = "rivet's own libibverbs transport (librivet-verbs.so).",
    .fields = verbs_fields,
    .size = sizeof(rv_verbs_config_t),
};
