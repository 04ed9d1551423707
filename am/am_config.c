/*
 * The invocation layer's configuration table (am.*), registered with core
 * when librivet is loaded; see rv_config.h for the conventions of a table.
 */
#include <stddef.h>
#include <stdint.h>

#include "am_config.h"

/* ENUM fields are read and written as int. */
_Static_assert(sizeof(rv_am_path_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_aggregation_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_on_full_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_am_routing_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_am_intranode_t) == sizeof(int), "enum size");

#define KIB (INT64_C(1) << 10)
#define MIB (INT64_C(1) << 20)
#define GIB (INT64_C(1) << 30)

#define OFF(_member) offsetof(rv_am_config_t, _member)

static const rv_config_field_t am_fields[] = {
    {
        .name = "path",
        .type = RV_CFG_ENUM,
        .offset = OFF(path),
        .def = "send",
        .values = "send|write",
        .help = "send: calls travel as transport active messages (no "
                "setup); write: calls are RDMA-written into one-sided "
                "messenger rings in the receiver's NUMA zone.",
    },
    {
        .name = "aggregation",
        .type = RV_CFG_ENUM,
        .offset = OFF(aggregation),
        .def = "none",
        .values = "none|trad|ovfl",
        .help = "none: every call is sent at once; trad: calls are batched "
                "and flushed at am.flush_bytes, on explicit flush and when "
                "idle; ovfl: calls are batched only while the ring cannot "
                "take them, up to am.ovfl_limit.",
    },
    {
        .name = "flush_bytes",
        .type = RV_CFG_SIZE,
        .offset = OFF(flush_bytes),
        .def = "8KiB",
        .min = 64,
        .max = 64 * MIB,
        .help = "With trad aggregation, a batch is sent once it holds this "
                "many bytes. One its messenger cannot take then (on the "
                "write path the first, while the destination grants its "
                "ring) gathers calls past it, up to its buffer (4 times "
                "this, at least 256 KiB), and leaves whole.",
    },
    {
        .name = "ovfl_limit",
        .type = RV_CFG_SIZE,
        .offset = OFF(ovfl_limit),
        .def = "1MiB",
        .min = 0,
        .max = GIB,
        .help = "With ovfl aggregation, the most bytes batched per "
                "destination while its ring is full; beyond it am.on_full "
                "applies.",
    },
    {
        .name = "on_full",
        .type = RV_CFG_ENUM,
        .offset = OFF(on_full),
        .def = "progress",
        .values = "fail|progress|retry_async|retry",
        .help = "When a messenger ring is full: progress (the call waits, "
                "running incoming calls, until it can go), fail (the call "
                "returns RV_ERR_AGAIN), retry_async (the call is queued in "
                "registered memory and sent later in FIFO order); retry is "
                "progress's name before 0.3. Calls made by handlers are "
                "always queued.",
    },
    {
        .name = "chunks_per_request",
        .type = RV_CFG_INT,
        .offset = OFF(chunks_per_request),
        .def = "2",
        .min = 1,
        .max = 64,
        .help = "Chunks a sender asks for each time it grows a messenger "
                "ring.",
    },
    {
        .name = "max_chunks",
        .type = RV_CFG_INT,
        .offset = OFF(max_chunks),
        .def = "8",
        .min = 1,
        .max = AM_MAX_CHUNKS_LIMIT,
        .help = "Most chunks one messenger ring grows to.",
    },
    {
        .name = "chunk_bytes",
        .type = RV_CFG_SIZE,
        .offset = OFF(chunk_bytes),
        .def = "2MiB",
        .min = 4 * KIB,
        .max = GIB,
        .help = "Size of one messenger ring chunk.",
    },
    {
        .name = "local_bypass",
        .type = RV_CFG_BOOL,
        .offset = OFF(local_bypass),
        .def = "true",
        .help = "Calls between threads of one process go through a "
                "lockless in-memory queue instead of the transport; false "
                "forces them through the transport, to measure the "
                "difference.",
    },
    {
        .name = "max_nesting",
        .type = RV_CFG_INT,
        .offset = OFF(max_nesting),
        .def = "8",
        .min = 1,
        .max = 1024,
        .help = "Most call handlers on one worker's stack at once. A "
                "handler that waits (rv_sync_wait, a call with sync NULL "
                "and RV_NOTIFY_CONSUMED, rv_call_return) progresses, and "
                "that progress runs further calls only while fewer "
                "handlers than this are running; at the limit it only "
                "completes what was sent and receives, so the stack stays "
                "bounded. Waits nested deeper than this that can only end "
                "by running a call here deadlock.",
    },
    {
        .name = "routing",
        .type = RV_CFG_ENUM,
        .offset = OFF(routing),
        .def = "direct",
        .values = "direct|host|twohop",
        .help = "Which worker a worker batches its calls for. direct: each "
                "destination worker (buffers per destination: right for "
                "jobs of up to a few hundred workers); host: calls to "
                "another host go, batched per host, to one worker there, "
                "which hands them on (YGM's node-remote routing); twohop: "
                "the processes on a grid, a call goes first to the "
                "sender's thread in the process of the sender's row and "
                "the destination's column, which forwards it down the "
                "column, and the destination's process hands it to the "
                "destination thread (Bale's two-hop conveyor): buffers per "
                "worker grow as the square root of the processes. Routed "
                "are the small "
                "calls of rv_call (no synchronizer or flag) and "
                "rv_call_return, batched as under am.aggregation trad "
                "whatever it says; other calls go direct.",
    },
    {
        .name = "intranode",
        .type = RV_CFG_ENUM,
        .offset = OFF(intranode),
        .def = "transport",
        .values = "transport|mapped",
        .help = "How calls reach workers of other processes of the same "
                "host. transport: as am.path says; mapped: where the "
                "transport maps registered memory into the processes of a "
                "host (UCX shared memory), written into one-sided "
                "messenger rings in the destination's memory, as am.path "
                "write does, whatever am.path says for other hosts. A "
                "ring mapped into the caller's process is written in "
                "place under aggregation none and ovfl: calls are "
                "serialized straight into it, each byte copied once "
                "(job.stats: runs_in_place).",
    },
    {.name = NULL},
};

static const rv_config_table_t am_config_table = {
    .prefix = AM_CONFIG_PREFIX,
    .help = "Remote invocation: calls, messenger rings and aggregation.",
    .fields = am_fields,
    .size = sizeof(rv_am_config_t),
};

RV_CONFIG_REGISTER_TABLE(am_config_table)
