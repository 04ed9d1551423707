/*
 * Core's own configuration table: job.*, transport.name, memory.* and
 * progress.*, into rv_core_config_t. Layers and transport plugins keep
 * their keys in tables of their own (rv_config.h).
 *
 * Conventions, for every table:
 * - a key's environment variable is RIVET_ followed by the key in upper
 *   case with dots turned into underscores (job.threads ->
 *   RIVET_JOB_THREADS);
 * - `def` is written exactly as a user would write it in YAML; it goes
 *   through the same parser as the file;
 * - `min`/`max` bound INT and SIZE values (inclusive); for STRING rows they
 *   bound the length in bytes (max 0 means RV_CONFIG_STR_MAX - 1);
 * - `values` lists ENUM names in the order of the C enum's values;
 * - `later` is non-NULL for keys reserved for a part not written yet;
 *   setting such a key is an error that names it;
 * - rows of one section are kept together, in the order `--dump` prints.
 *
 * Core's table has the empty prefix: its rows are named by their full key.
 */
#include <stddef.h>
#include <stdint.h>

#include "rv_config_internal.h"

/* ENUM fields are read and written as int. */
_Static_assert(sizeof(rv_placement_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_progress_mode_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_completers_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_huge_pages_t) == sizeof(int), "enum size");
_Static_assert(sizeof(rv_stats_mode_t) == sizeof(int), "enum size");

#define KIB (INT64_C(1) << 10)
#define MIB (INT64_C(1) << 20)
#define GIB (INT64_C(1) << 30)

#define OFF(_member) offsetof(rv_core_config_t, _member)

static const rv_config_field_t core_fields[] = {
    /* ------------------------------------------------------------------ */
    /* job: what rivetrun starts and where it puts it                      */
    /* ------------------------------------------------------------------ */
    {
        .name = "job.processes",
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
        .name = "job.threads",
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
        .name = "job.placement",
        .type = RV_CFG_ENUM,
        .offset = OFF(job.placement),
        .def = "core",
        .values = "none|core|numa",
        .help = "How processes and threads are bound: none (the OS "
                "decides), core (every worker thread of the node gets its "
                "own core, round robin; each process is bound to its "
                "threads' cores), numa (each process is bound to one NUMA "
                "zone, round robin; its threads float inside it). "
                "Busy-polling processes that share a core slow each other "
                "down by an order of magnitude or more.",
    },
    {
        .name = "job.output_prefix",
        .type = RV_CFG_BOOL,
        .offset = OFF(job.output_prefix),
        .def = "false",
        .help = "Whether rivetrun prefixes every line a process writes to "
                "stdout and stderr with the rank that wrote it.",
    },
    {
        .name = "job.service_threads",
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
    {
        .name = "job.stats",
        .type = RV_CFG_ENUM,
        .offset = OFF(job.stats),
        .def = "off",
        .values = "off|text|json",
        .help = "Counters every worker prints to stderr at the end of the "
                "job (calls and bytes sent and received, local calls, "
                "transmissions, largest batch, ring-full events, ring "
                "growths, chunks granted, detours; the UCX and verbs "
                "transports add a line per worker with the messages they "
                "dropped): off; text, one line per worker; json, one JSON "
                "object per line.",
    },
    {
        .name = "job.keepalive",
        .type = RV_CFG_INT,
        .offset = OFF(job.keepalive),
        .def = "10",
        .min = 0,
        .max = 86400,
        .help = "Seconds rivetrun waits for a heartbeat of a rank that "
                "joined the job before it ends the job naming that rank; "
                "0: never. Every process sends one a second from a thread "
                "of its own, whatever the program does, so only a rank "
                "whose runtime is gone while its process lives on (its "
                "image replaced, or frozen outside rivet) misses them; a "
                "process stopped by a debugger or SIGSTOP is not counted. "
                "Under mpirun or srun the launcher watches the processes "
                "and this key does nothing.",
    },

    /* ------------------------------------------------------------------ */
    /* transport: which plugin moves the bytes (its keys are its own)      */
    /* ------------------------------------------------------------------ */
    {
        .name = "transport.name",
        .type = RV_CFG_STRING,
        .offset = OFF(transport.name),
        .def = "\"ucx\"",
        .min = 1,
        .help = "Transport plugin to load (librivet-NAME.so): ucx or verbs. "
                "Changing the transport is an edit of this key, never a "
                "rebuild.",
    },

    /* ------------------------------------------------------------------ */
    /* memory: registered memory chunks                                    */
    /* ------------------------------------------------------------------ */
    {
        .name = "memory.chunk",
        .type = RV_CFG_SIZE,
        .offset = OFF(memory.chunk),
        .def = "2MiB",
        .min = 4 * KIB,
        .max = GIB,
        .help = "Size of the chunks the per-NUMA-zone allocators map, bind "
                "to their zone and register with the transport once each; "
                "a multiple of 4KiB. Huge pages are used only when it is a "
                "multiple of their size (2MiB, or 1GiB).",
    },
    {
        .name = "memory.huge_pages",
        .type = RV_CFG_ENUM,
        .offset = OFF(memory.huge_pages),
        .def = "auto",
        .values = "auto|off|require",
        .help = "auto: use 1 GiB or 2 MiB huge pages when reserved (as "
                "root: /proc/sys/vm/nr_hugepages), else transparent huge "
                "pages, else normal pages (reported once at info level); "
                "off: normal pages only; require: fail when no huge pages "
                "are available. Memory the transport allocates itself "
                "(UCX on shared memory) has the transport's pages.",
    },
    {
        .name = "memory.limit",
        .type = RV_CFG_SIZE,
        .offset = OFF(memory.limit),
        .def = "0",
        .min = 0,
        .max = INT64_MAX,
        .help = "Most registered memory a process maps in chunks, for "
                "every allocator together (remote memory, messenger rings, "
                "the object store's buffers); 0: no limit but the "
                "machine's. A chunk that would pass it is refused: the call "
                "that needed it fails with RV_ERR_NO_MEMORY and an error "
                "naming this key, and nothing already accepted is lost.",
    },

    /* ------------------------------------------------------------------ */
    /* progress                                                            */
    /* ------------------------------------------------------------------ */
    {
        .name = "progress.mode",
        .type = RV_CFG_ENUM,
        .offset = OFF(progress.mode),
        .def = "inline",
        .values = "inline|thread|dynamic|direct",
        .help = "inline: every worker thread owns a transport worker, posts "
                "and progresses it. thread: the worker threads enqueue "
                "commands that progress.executors executor threads post "
                "and complete, spinning (static offloading). dynamic: as "
                "thread, but an idle executor sleeps and the requester "
                "that enqueues next wakes it (dynamic offloading, Endo and "
                "Taura). direct: the worker threads share the executors' "
                "transport workers under a lock and post themselves (the "
                "paper's direct injection; a baseline for comparison).",
    },
    {
        .name = "progress.executors",
        .type = RV_CFG_INT,
        .offset = OFF(progress.executors),
        .def = "1",
        .min = 1,
        .max = 256,
        .help = "Transport workers per process in the thread, dynamic and "
                "direct modes, each with its executor thread; worker thread "
                "t uses executor t mod executors. At most job.threads.",
    },
    {
        .name = "progress.completers",
        .type = RV_CFG_ENUM,
        .offset = OFF(progress.completers),
        .def = "executors",
        .values = "executors|threads",
        .help = "thread and dynamic: who polls the executors' transport "
                "workers for completions and messages. executors: each "
                "executor, between the commands it posts. threads: a "
                "completer thread beside each executor, which then only "
                "posts (Endo and Taura's completers); the two share the "
                "worker under a lock. In dynamic mode an idle completer "
                "sleeps too, and the executor wakes it when it posts.",
    },
    {
        .name = "progress.spin_us",
        .type = RV_CFG_INT,
        .offset = OFF(progress.spin_us),
        .def = "50",
        .min = 0,
        .max = 1000000,
        .help = "dynamic: microseconds an idle executor keeps polling "
                "before it sleeps, so that a reply arriving soon after a "
                "request is picked up at once.",
    },
    {
        .name = "progress.sleep_us",
        .type = RV_CFG_INT,
        .offset = OFF(progress.sleep_us),
        .def = "1000",
        .min = 1,
        .max = 1000000,
        .help = "dynamic: how long an idle executor sleeps before it polls "
                "the network for messages nobody asked for, doubled after "
                "each sleep that ends with nothing (up to 8 times this); "
                "an enqueued command, or a worker thread polling for "
                "messages, wakes it at once.",
    },

    {.name = NULL},
};

const rv_config_table_t rv__config_core_table = {
    .prefix = "",
    .help = "rivet's core: the job, its transport, registered memory and "
            "progress.",
    .fields = core_fields,
    .size = sizeof(rv_core_config_t),
};
