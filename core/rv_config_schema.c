/*
 * The configuration schema: one row per field of rv_config_t.
 *
 * The loader (rv_config.c), the environment overlay, `rivet-config --dump`
 * and `rivet-config --reference` are all driven by this table, in the manner
 * of UCX's ucs_config_field_t tables. Adding a key is adding a field to
 * rv_config_t and a row here; nothing else needs to change.
 *
 * Conventions:
 * - `key` is the dotted path of the field in the YAML file; its environment
 *   variable is RIVET_ followed by the key in upper case with dots turned
 *   into underscores (transport.ucx.tls -> RIVET_TRANSPORT_UCX_TLS).
 * - `def` is written exactly as a user would write it in YAML; it goes
 *   through the same parser as the file.
 * - `min`/`max` bound INT and SIZE values (inclusive). For STRING rows they
 *   bound the length in bytes (max 0 means RV_CONFIG_STR_MAX - 1).
 * - `values` lists ENUM names in the order of the C enum's values.
 * - `later` is non-NULL for keys that are reserved for a layer not written
 *   yet; setting such a key is an error that names the layer.
 * - Rows of one section are kept together, in the order `--dump` prints.
 */
#include <stddef.h>
#include <stdint.h>

#include "rv_config.h"

/* ENUM fields are read and written as int. */
_Static_assert(sizeof(rv_placement_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_progress_mode_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_am_path_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_aggregation_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_on_full_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_am_long_protocol_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_qp_sharing_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_huge_pages_t) == sizeof(int), "enum size");

#define KIB (INT64_C(1) << 10)
#define MIB (INT64_C(1) << 20)
#define GIB (INT64_C(1) << 30)
#define TIB (INT64_C(1) << 40)

#define OFF(_member) offsetof(rv_config_t, _member)

#define LATER_PROGRESS "the progress engine (core/)"
#define LATER_STORE "the object store (store/)"
#define LATER_MCTS "distributed MCTS (mcts/)"

const rv_config_field_t rv_config_schema[] = {
    /* ------------------------------------------------------------------ */
    /* job: what rivetrun starts and where it puts it                      */
    /* ------------------------------------------------------------------ */
    {
        .key = "job.processes",
        .type = RV_CFG_INT,
        .offset = OFF(job.processes),
        .def = "2",
        .min = 1,
        .max = 4096,
        .help = "Number of processes (ranks) rivetrun starts on this node. "
                "Ignored when the job is started by mpirun, prterun or srun, "
                "which decide the process count themselves.",
    },
    {
        .key = "job.threads",
        .type = RV_CFG_INT,
        .offset = OFF(job.threads),
        .def = "1",
        .min = 1,
        .max = 1024,
        .help = "Worker threads per process. Every worker thread has its own "
                "transport worker and global thread id; calls target "
                "threads.",
    },
    {
        .key = "job.placement",
        .type = RV_CFG_ENUM,
        .offset = OFF(job.placement),
        .def = "core",
        .values = "none|core|numa",
        .help = "How processes and threads are bound: none (the OS "
                "decides), core (every worker thread of the node gets its "
                "own core, round robin; each process is bound to its "
                "threads' cores), numa (each process is bound to one NUMA "
                "zone, round robin; its threads float inside it). "
                "Busy-polling processes that share a core run 10-40x slower.",
    },
    {
        .key = "job.output_prefix",
        .type = RV_CFG_BOOL,
        .offset = OFF(job.output_prefix),
        .def = "false",
        .help = "Whether rivetrun prefixes every line a process writes to "
                "stdout and stderr with the rank that wrote it.",
    },
    {
        .key = "job.service_threads",
        .type = RV_CFG_INT,
        .offset = OFF(job.service_threads),
        .def = "0",
        .min = 0,
        .max = 64,
        .help = "Service threads per process that run the work of service "
                "calls (setting up and growing messenger rings: allocating, "
                "binding and registering chunks) on behalf of the worker "
                "threads, sleeping when there is none; 0: workers do it "
                "themselves when the call arrives.",
    },

    /* ------------------------------------------------------------------ */
    /* transport: which plugin moves the bytes, and its knobs              */
    /* ------------------------------------------------------------------ */
    {
        .key = "transport.name",
        .type = RV_CFG_STRING,
        .offset = OFF(transport.name),
        .def = "\"ucx\"",
        .min = 1,
        .help = "Transport plugin to load (librivet-NAME.so): ucx or verbs. "
                "Changing the transport is an edit of this key, never a "
                "rebuild.",
    },
    {
        .key = "transport.ucx.tls",
        .type = RV_CFG_STRING,
        .offset = OFF(transport.ucx.tls),
        .def = "\"\"",
        .help = "UCX transports to use, as UCX_TLS takes them (sm,self for "
                "shared memory; tcp,self for TCP; rc,sm,self for "
                "InfiniBand). Empty leaves UCX_TLS alone, so UCX picks.",
    },
    {
        .key = "transport.ucx.net_devices",
        .type = RV_CFG_STRING,
        .offset = OFF(transport.ucx.net_devices),
        .def = "\"\"",
        .help = "Network devices UCX may use, as UCX_NET_DEVICES takes them "
                "(lo, eth0, mlx5_0:1). Empty leaves UCX_NET_DEVICES alone.",
    },
    {
        .key = "transport.ucx.rndv_thresh",
        .type = RV_CFG_SIZE,
        .offset = OFF(transport.ucx.rndv_thresh),
        .def = "0",
        .min = 0,
        .max = INT64_MAX,
        .help = "Message size from which UCX switches active messages from "
                "eager to rendezvous (UCX_RNDV_THRESH). 0 keeps UCX's own "
                "choice (8256 B on shared memory with UCX 1.13).",
    },
    {
        .key = "transport.ucx.rma_emulation",
        .type = RV_CFG_ENUM,
        .offset = OFF(transport.ucx.rma_emulation),
        .def = "auto",
        .values = "auto|on|off",
        .help = "Put, get and atomics carried by active messages instead of "
                "UCX's own RMA: auto does it for endpoints whose RMA would "
                "run over TCP, where UCX 1.13's put/get are pathologically "
                "slow (about 1 ms per get); on does it everywhere (for "
                "testing); off never.",
    },
    {
        .key = "transport.ucx.gid_index",
        .type = RV_CFG_INT,
        .offset = OFF(transport.ucx.gid_index),
        .def = "-1",
        .min = -1,
        .max = 255,
        .help = "GID table index UCX addresses InfiniBand/RoCE ports with "
                "(UCX_IB_GID_INDEX); -1 keeps UCX's choice. Soft-RoCE (rxe) "
                "with UCX 1.13 needs 0, the link-local RoCE v2 GID.",
    },
    {
        .key = "transport.verbs.device",
        .type = RV_CFG_STRING,
        .offset = OFF(transport.verbs.device),
        .def = "\"\"",
        .help = "RDMA device to open (mlx5_0, rxe0). Empty takes the first "
                "device with an active port.",
    },
    {
        .key = "transport.verbs.port",
        .type = RV_CFG_INT,
        .offset = OFF(transport.verbs.port),
        .def = "1",
        .min = 1,
        .max = 255,
        .help = "Port number on the device (ports count from 1).",
    },
    {
        .key = "transport.verbs.gid_index",
        .type = RV_CFG_INT,
        .offset = OFF(transport.verbs.gid_index),
        .def = "-1",
        .min = -1,
        .max = 255,
        .help = "GID table index used for addressing; -1 picks a RoCE v2 "
                "IPv4 GID when there is one. Soft-RoCE usually needs 0.",
    },
    {
        .key = "transport.verbs.qp_sharing",
        .type = RV_CFG_ENUM,
        .offset = OFF(transport.verbs.qp_sharing),
        .def = "thread",
        .values = "thread|process",
        .help = "thread: every worker thread has its own queue pair to each "
                "peer (no locks, more QPs); process: the threads of a "
                "process share one queue pair per peer.",
    },
    {
        .key = "transport.verbs.signal_interval",
        .type = RV_CFG_INT,
        .offset = OFF(transport.verbs.signal_interval),
        .def = "64",
        .min = 1,
        .max = 16384,
        .help = "Selective signaling: one send in this many asks for a "
                "completion; the others are reclaimed by the flush-number "
                "protocol (Seriema section 4.1).",
    },

    /* ------------------------------------------------------------------ */
    /* memory: registered memory chunks                                    */
    /* ------------------------------------------------------------------ */
    {
        .key = "memory.chunk",
        .type = RV_CFG_SIZE,
        .offset = OFF(memory.chunk),
        .def = "2MiB",
        .min = 4 * KIB,
        .max = GIB,
        .later = NULL,
        .help = "Size of the chunks the per-NUMA-zone allocators map, bind "
                "to their zone and register with the transport once each; "
                "a multiple of 4KiB. Huge pages are used only when it is a "
                "multiple of their size (2MiB, or 1GiB).",
    },
    {
        .key = "memory.huge_pages",
        .type = RV_CFG_ENUM,
        .offset = OFF(memory.huge_pages),
        .def = "auto",
        .values = "auto|off|require",
        .later = NULL,
        .help = "auto: use 1 GiB or 2 MiB huge pages when reserved (as "
                "root: /proc/sys/vm/nr_hugepages), else transparent huge "
                "pages, else normal pages (reported once at info level); "
                "off: normal pages only; require: fail when no huge pages "
                "are available. Memory the transport allocates itself "
                "(UCX on shared memory) has the transport's pages.",
    },

    /* ------------------------------------------------------------------ */
    /* am: remote invocation                                               */
    /* ------------------------------------------------------------------ */
    {
        .key = "am.path",
        .type = RV_CFG_ENUM,
        .offset = OFF(am.path),
        .def = "send",
        .values = "send|write",
        .help = "send: calls travel as transport active messages (no "
                "setup); write: calls are RDMA-written into one-sided "
                "messenger rings in the receiver's NUMA zone.",
    },
    {
        .key = "am.aggregation",
        .type = RV_CFG_ENUM,
        .offset = OFF(am.aggregation),
        .def = "none",
        .values = "none|trad|ovfl",
        .help = "none: every call is sent at once; trad: calls are batched "
                "and flushed at am.flush_bytes, on explicit flush and when "
                "idle; ovfl: calls are batched only while the ring cannot "
                "take them, up to am.ovfl_limit.",
    },
    {
        .key = "am.flush_bytes",
        .type = RV_CFG_SIZE,
        .offset = OFF(am.flush_bytes),
        .def = "4KiB",
        .min = 64,
        .max = 64 * MIB,
        .help = "With trad aggregation, a batch is sent once it holds this "
                "many bytes.",
    },
    {
        .key = "am.ovfl_limit",
        .type = RV_CFG_SIZE,
        .offset = OFF(am.ovfl_limit),
        .def = "1MiB",
        .min = 0,
        .max = GIB,
        .help = "With ovfl aggregation, the most bytes batched per "
                "destination while its ring is full; beyond it am.on_full "
                "applies.",
    },
    {
        .key = "am.on_full",
        .type = RV_CFG_ENUM,
        .offset = OFF(am.on_full),
        .def = "fail",
        .values = "fail|retry|retry_async",
        .help = "When a messenger ring is full: fail (the call returns "
                "RV_ERR_AGAIN), retry (the call blocks, progressing), "
                "retry_async (the call is queued in registered memory and "
                "sent later in FIFO order).",
    },
    {
        .key = "am.chunks_per_request",
        .type = RV_CFG_INT,
        .offset = OFF(am.chunks_per_request),
        .def = "2",
        .min = 1,
        .max = 64,
        .help = "Chunks a sender asks for each time it grows a messenger "
                "ring.",
    },
    {
        .key = "am.max_chunks",
        .type = RV_CFG_INT,
        .offset = OFF(am.max_chunks),
        .def = "8",
        .min = 1,
        .max = 4096,
        .help = "Most chunks one messenger ring grows to.",
    },
    {
        .key = "am.chunk_bytes",
        .type = RV_CFG_SIZE,
        .offset = OFF(am.chunk_bytes),
        .def = "2MiB",
        .min = 4 * KIB,
        .max = GIB,
        .help = "Size of one messenger ring chunk.",
    },
    {
        .key = "am.local_bypass",
        .type = RV_CFG_BOOL,
        .offset = OFF(am.local_bypass),
        .def = "true",
        .help = "Calls between threads of one process go through a "
                "lockless in-memory queue instead of the transport; false "
                "forces them through the transport, to measure the "
                "difference.",
    },

    /* ------------------------------------------------------------------ */
    /* progress, rma, store, mcts                                          */
    /* ------------------------------------------------------------------ */
    {
        .key = "progress.mode",
        .type = RV_CFG_ENUM,
        .offset = OFF(progress.mode),
        .def = "inline",
        .values = "inline|thread|dynamic",
        .later = LATER_PROGRESS,
        .help = "inline: worker threads progress the transport themselves; "
                "thread: a dedicated progress thread does; dynamic: "
                "requesters enqueue commands that an executor posts, "
                "sleeping when idle (after Endo and Taura).",
    },
    {
        .key = "rma.am_long_protocol",
        .type = RV_CFG_ENUM,
        .offset = OFF(rma.am_long_protocol),
        .def = "reassembly",
        .values = "reassembly|put_sync_send",
        .help = "How AM Long (rv_put_handler) runs a handler after its "
                "payload lands: reassembly (payload and envelope injected "
                "back to back, matched at the target, as in GASNet-EX) or "
                "put_sync_send (put, wait for remote completion, then "
                "send).",
    },
    {
        .key = "store.capacity",
        .type = RV_CFG_SIZE,
        .offset = OFF(store.capacity),
        .def = "1GiB",
        .min = MIB,
        .max = TIB,
        .later = LATER_STORE,
        .help = "Registered memory each rank's object store holds; "
                "unreferenced sealed objects are evicted (LRU) beyond it.",
    },
    {
        .key = "store.rndv_threshold",
        .type = RV_CFG_SIZE,
        .offset = OFF(store.rndv_threshold),
        .def = "32KiB",
        .min = 0,
        .max = GIB,
        .later = LATER_STORE,
        .help = "Objects up to this size are fetched eagerly in messages; "
                "larger ones are RDMA-read straight into the fetcher's "
                "buffer.",
    },
    {
        .key = "mcts.game",
        .type = RV_CFG_STRING,
        .offset = OFF(mcts.game),
        .def = "\"hex\"",
        .min = 1,
        .later = LATER_MCTS,
        .help = "Game to play or analyse; hex is built in.",
    },
    {
        .key = "mcts.board_size",
        .type = RV_CFG_INT,
        .offset = OFF(mcts.board_size),
        .def = "11",
        .min = 2,
        .max = 26,
        .later = LATER_MCTS,
        .help = "Side of the board (11 plays 11x11 hex).",
    },
    {
        .key = "mcts.simulations_per_leaf",
        .type = RV_CFG_INT,
        .offset = OFF(mcts.simulations_per_leaf),
        .def = "16",
        .min = 1,
        .max = 65536,
        .later = LATER_MCTS,
        .help = "Random playouts run from each new leaf before its result "
                "is backpropagated.",
    },
    {
        .key = "mcts.rollouts_per_move",
        .type = RV_CFG_INT,
        .offset = OFF(mcts.rollouts_per_move),
        .def = "65536",
        .min = 1,
        .max = INT64_C(1) << 40,
        .later = LATER_MCTS,
        .help = "Rollouts the whole job spends choosing one move.",
    },

    {.key = NULL},
};
