/**
 * @file rv_transport.h
 * @brief The transport interface: what a plugin (librivet-NAME.so)
 * implements and what the layers above core/ call for network operations.
 *
 * A plugin exports one symbol, `rv_transport_ops` (a const rv_transport_ops_t),
 * found with dlsym after dlopen. Every member is set; an operation a
 * transport cannot do points to a stub returning RV_ERR_UNSUPPORTED.
 *
 * Completion convention, for every operation taking a callback (as in
 * libuv): RV_OK means the operation completed before returning and the
 * callback will NOT be called; RV_INPROGRESS means the callback will be
 * called exactly once, from the worker's progress; an error means the
 * callback will never be called. A callback never runs before the call
 * that started its operation has returned.
 *
 * What a plugin may use of core: the installed headers (this one, and
 * rv_regmem.h for the types of the registered-memory allocators), the
 * services table core passes to init (rv_transport_services_t), through
 * which it calls core, and logging (rv_log and its macros, rv_status_str).
 * It calls no other function of librivet, so it builds against the
 * installed headers alone and RV_TRANSPORT_ABI_VERSION covers what it
 * uses.
 *
 * @note Thread mode: a transport (rv_transport_t) is shared by the
 * threads of a process and its operations (those taking an
 * rv_transport_t: query, memory registration, remote key packing) are
 * thread-safe: worker threads call them at once while they start. A
 * transport worker (rv_tworker_t) belongs to one thread at a time
 * (single-threaded), like a ucp_worker in UCS_THREAD_MODE_SINGLE: core
 * creates, uses and destroys it on its worker's thread, with one
 * exception, address_release. init and fini run on the main thread.
 */
#ifndef RIVET_RV_TRANSPORT_H
#define RIVET_RV_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rv_config.h"
#include "rv_stats.h"
#include "rv_status.h"
#include "rv_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The version of this interface: the ops table, the parameters and the
 * services table below, and the layouts of the rv_regmem.h structures the
 * services take. A plugin built for another version is not loaded.
 */
#define RV_TRANSPORT_ABI_VERSION 5

/** The AM header bytes every transport carries at least
 * (rv_transport_caps_t.max_am_header): core's message header and the
 * largest header extension of rv_sendx. */
#define RV_TRANSPORT_AM_HEADER_MIN 64

/** @brief A plugin's process state, made by init, freed by fini; defined
 * by the plugin. @note Thread-safe. */
typedef struct rv_transport rv_transport_t;
/** @brief A plugin's per-thread state: a transport worker, made by
 * worker_create, freed by worker_destroy; defined by the plugin.
 * @note Single-threaded. */
typedef struct rv_tworker rv_tworker_t;
/** @brief Registered memory, made by mem_alloc or mem_register, freed by
 * mem_deregister; defined by the plugin. @note Used through the
 * transport's thread-safe operations. */
typedef struct rv_tmem rv_tmem_t;
/** @brief An unpacked remote key, made by rkey_unpack for one transport
 * worker, freed by rkey_destroy on it; defined by the plugin.
 * @note Single-threaded: used on its transport worker's thread. */
typedef struct rv_trkey rv_trkey_t;

/** @brief What a transport can do (query fills it).
 * @note Filled by the transport, then read-only for its users. */
typedef struct rv_transport_caps {
    size_t max_am_header;  /**< largest AM header in bytes */
    size_t max_am_size;    /**< largest AM payload in bytes */
    size_t eager_limit;    /**< payloads above this go by rendezvous */
    bool ordered_am;       /**< AMs between two workers arrive in order */
    bool ordered_puts;     /**< puts to one peer land in issue order */
    bool atomics64;        /**< 64-bit fetch-add and compare-swap */
    bool rdma_read;        /**< get is one-sided in hardware */
    bool mem_alloc_mapped; /**< mem_alloc memory is load/store to peers */
    /** One-sided operations (put, get, atomics, flush) to a peer complete
     * only while the peer's worker progresses: they travel as messages its
     * CPU handles (RMA emulated over active messages, or a software RMA
     * protocol such as UCX's over TCP). False where the network or the
     * kernel completes them without the target (RDMA, shared memory).
     * Like the lanes in description, it describes the endpoints of the
     * running (or last) job. */
    bool rma_target_progress;
    char description[512]; /**< what is actually in use, for the user */
    /** The transport's atomics on this process's memory are atomic with
     * respect to the CPU's atomics on it: shared memory, or atomics that
     * this process's CPU applies (RMA emulated over active messages).
     * False where a NIC applies them and is atomic only among its own
     * operations (libibverbs' IBV_ATOMIC_HCA, which Soft-RoCE and most
     * InfiniBand and RoCE adapters report): the layers above then send
     * even a process's atomics on its own memory through the transport,
     * on its loopback connection, as OpenSHMEM implementations over
     * such NICs do. False is always safe. */
    bool atomics_cpu_coherent;
    /** mem_alloc memory is load/store to the peers on this host (UCX's
     * shared-memory transports), whatever reaches other hosts: a store
     * through a remote key of such a peer is a store to its memory. */
    bool mem_alloc_host_mapped;
} rv_transport_caps_t;

/** @brief An active message as the transport delivers it to the core.
 * The plugin's, valid during the am_recv callback. */
typedef struct rv_am_rx {
    uint32_t src;    /**< the sending worker */
    const void *hdr; /**< the header; valid during the callback */
    size_t hdr_len;  /**< bytes of @c hdr, as sent */
    void *data;      /**< the payload */
    size_t len;      /**< bytes of @c data, as received */
    bool persistent; /**< data stays valid after the callback */
    /** The transport calls from inside its own receive callback and can
     * hold the message: am_recv may return RV_ERR_AGAIN to have it
     * delivered again later, from progress, with deferrable false. */
    bool deferrable;
} rv_am_rx_t;

/**
 * @brief Called by the transport, from worker progress, for every AM.
 * @param [in] arg  rv_tworker_params_t.am_arg
 * @param [in] rx   the message; valid during the call
 * @param [in] desc the plugin's handle on the payload, for am_release
 * @return RV_OK when done with rx->data; RV_INPROGRESS (only when
 *         rx->persistent) to keep it until am_release(@p desc);
 *         RV_ERR_AGAIN (only when rx->deferrable) to have it delivered
 *         again later. Messages of one sender are delivered in order.
 * @note On the transport worker's thread, inside its progress.
 */
typedef rv_status_t (*rv_am_recv_fn)(void *arg, const rv_am_rx_t *rx,
                                     void *desc);

/**
 * @brief Completion of a non-blocking operation: called exactly once, from
 * the progress of the transport worker that started it, never before the
 * call that started it has returned.
 * @param [in] arg    the argument given with the callback
 * @param [in] status RV_OK, or the error the operation ended with
 */
typedef void (*rv_completion_fn)(void *arg, rv_status_t status);

/* ---------------------------------------------------------------------- */
/* Services core offers a transport                                        */

/** @brief How near a device is to the calling thread (device_locality).
 * The values are ordered: a larger one is nearer. */
typedef enum rv_locality {
    /** None of the CPUs the thread may run on is local to the device. */
    RV_LOCALITY_NONE = 0,
    /** Some are; or core could not load the node's topology, so it cannot
     * tell. */
    RV_LOCALITY_PARTIAL = 1,
    /** Every CPU the thread may run on is local to the device: the device
     * is attached to the thread's NUMA zone. A device the kernel gives no
     * locality for (a virtual one such as Soft-RoCE) is local to every
     * CPU, as is every device of a machine with one NUMA zone. */
    RV_LOCALITY_FULL = 2,
} rv_locality_t;

/** The services version of this header: raised when members are
 * appended to rv_transport_services_t. */
#define RV_TRANSPORT_SERVICES_VERSION 1

/** @brief Whether the services table @p svc has member @p member: tables
 * of an older core are shorter (their size says how long). */
#define RV_TRANSPORT_SERVICES_HAS(svc, member)                                 \
    ((svc) != NULL &&                                                          \
     (svc)->size >=                                                            \
         offsetof(rv_transport_services_t, member) + sizeof((svc)->member))

/* The allocators' types are in rv_regmem.h, which includes this header;
 * include rv_regmem.h to call the services that take them. */
struct rv_transport_ops;
struct rv_mem_chunk;
struct rv_mem_chunk_allocator;
struct rv_mem_chunk_params;
struct rv_mem_circular;
struct rv_mem_circular_params;
struct rv_mem_general;
struct rv_mem_linear;
struct rv_mem_stats;
struct rv_mem_unit;

/**
 * @brief What core does for a transport: the placement query and the
 * allocators of registered memory (rv_regmem.h). A plugin calls core through
 * this table only (and logs with rv_log), so that
 * RV_TRANSPORT_ABI_VERSION covers everything it uses of core.
 *
 * Each allocator member is the rv_regmem.h function of the same name without
 * its rv_ prefix (mem_general_alloc is rv_mem_general_alloc) and is
 * documented there, with the thread mode of its object: chunk and general
 * allocators are thread-safe; a circular allocator and the linear
 * allocators over it belong to one thread. The chunk allocator registers
 * its memory through the ops table and transport given in its parameters
 * (the plugin's own rv_transport_ops and state).
 *
 * @note Owned by core: the table is constant and stays valid while the
 *       plugin is loaded, so the plugin may keep the pointer it got in
 *       rv_transport_params_t from init until fini returns. Every member is
 *       set; device_locality may be called from any thread.
 */
typedef struct rv_transport_services {
    /** RV_TRANSPORT_SERVICES_VERSION of the core that filled the table. */
    uint32_t version;
    /** sizeof(rv_transport_services_t) in that core: members are only
     * ever appended, so a plugin tests for a newer member with
     * RV_TRANSPORT_SERVICES_HAS. */
    uint32_t size;

    /* placement -------------------------------------------------------- */
    /**
     * @brief How near a device is to the CPUs the calling thread may run
     * on (its binding per job.placement), from the device's PCI locality.
     * @param [in] sysfs_dir the device's folder in sysfs, whose local_cpus
     *             file the kernel fills: "/sys/class/infiniband/mlx5_0/device"
     *             or "/sys/bus/pci/devices/0000:3b:00.0", for example
     * @return the locality; RV_LOCALITY_PARTIAL when it cannot be told
     */
    rv_locality_t (*device_locality)(const char *sysfs_dir);

    /* registered memory: chunk allocator (one per NUMA zone) ------------ */
    /** As rv_mem_chunk_params_init(). */
    void (*mem_chunk_params_init)(struct rv_mem_chunk_params *params,
                                  const rv_config_t *cfg,
                                  const struct rv_transport_ops *ops,
                                  rv_transport_t *tp, int numa_node);
    /** As rv_mem_chunk_allocator_create(). */
    rv_status_t (*mem_chunk_allocator_create)(
        const struct rv_mem_chunk_params *params,
        struct rv_mem_chunk_allocator **alloc_p);
    /** As rv_mem_chunk_allocator_destroy(). */
    void (*mem_chunk_allocator_destroy)(struct rv_mem_chunk_allocator *alloc);
    /** As rv_mem_chunk_alloc(). */
    rv_status_t (*mem_chunk_alloc)(struct rv_mem_chunk_allocator *alloc,
                                   size_t nchunks,
                                   struct rv_mem_chunk **chunk_p);
    /** As rv_mem_chunk_free(). */
    void (*mem_chunk_free)(struct rv_mem_chunk_allocator *alloc,
                           struct rv_mem_chunk *chunk);
    /** As rv_mem_chunk_allocator_trim(). */
    void (*mem_chunk_allocator_trim)(struct rv_mem_chunk_allocator *alloc);
    /** As rv_mem_chunk_size(). */
    size_t (*mem_chunk_size)(const struct rv_mem_chunk_allocator *alloc);
    /** As rv_mem_chunk_alignment(). */
    size_t (*mem_chunk_alignment)(const struct rv_mem_chunk_allocator *alloc);
    /** As rv_mem_chunk_stats(). */
    struct rv_mem_stats (*mem_chunk_stats)(
        struct rv_mem_chunk_allocator *alloc);

    /* registered memory: circular allocator (units recycled on completion) */
    /** As rv_mem_circular_create(). */
    rv_status_t (*mem_circular_create)(
        const struct rv_mem_circular_params *params,
        struct rv_mem_circular **circ_p);
    /** As rv_mem_circular_destroy(). */
    void (*mem_circular_destroy)(struct rv_mem_circular *circ);
    /** As rv_mem_circular_alloc(). */
    rv_status_t (*mem_circular_alloc)(struct rv_mem_circular *circ,
                                      struct rv_mem_unit **unit_p);
    /** As rv_mem_circular_free(). */
    void (*mem_circular_free)(struct rv_mem_circular *circ,
                              struct rv_mem_unit *unit);
    /** As rv_mem_circular_unit_size(). */
    size_t (*mem_circular_unit_size)(const struct rv_mem_circular *circ);
    /** As rv_mem_circular_unit_alignment(). */
    size_t (*mem_circular_unit_alignment)(const struct rv_mem_circular *circ);
    /** As rv_mem_circular_stats(). */
    struct rv_mem_stats (*mem_circular_stats)(
        const struct rv_mem_circular *circ);

    /* registered memory: linear allocator over a circular one ----------- */
    /** As rv_mem_linear_create(). */
    rv_status_t (*mem_linear_create)(struct rv_mem_circular *circ,
                                     struct rv_mem_linear **lin_p);
    /** As rv_mem_linear_destroy(). */
    void (*mem_linear_destroy)(struct rv_mem_linear *lin);
    /** As rv_mem_linear_alloc(). */
    rv_status_t (*mem_linear_alloc)(struct rv_mem_linear *lin, size_t len,
                                    size_t align, void **addr_p,
                                    struct rv_mem_unit **unit_p);
    /** As rv_mem_linear_retire(). */
    void (*mem_linear_retire)(struct rv_mem_linear *lin);

    /* registered memory: general allocator (best fit, any size) --------- */
    /** As rv_mem_general_create(). */
    rv_status_t (*mem_general_create)(struct rv_mem_chunk_allocator *chunks,
                                      struct rv_mem_general **gen_p);
    /** As rv_mem_general_destroy(). */
    void (*mem_general_destroy)(struct rv_mem_general *gen);
    /** As rv_mem_general_alloc(). */
    rv_status_t (*mem_general_alloc)(struct rv_mem_general *gen, size_t len,
                                     size_t align, void **addr_p,
                                     const struct rv_mem_chunk **chunk_p);
    /** As rv_mem_general_free(). */
    void (*mem_general_free)(struct rv_mem_general *gen, void *addr);
    /** As rv_mem_general_lookup(). */
    const struct rv_mem_chunk *(*mem_general_lookup)(struct rv_mem_general *gen,
                                                     const void *addr);
    /** As rv_mem_general_trim(). */
    void (*mem_general_trim)(struct rv_mem_general *gen);
    /** As rv_mem_general_stats(). */
    struct rv_mem_stats (*mem_general_stats)(struct rv_mem_general *gen);
} rv_transport_services_t;

/** @brief Process-level parameters for init. */
typedef struct rv_transport_params {
    /** The job's configuration, for core's keys (rv_core_config); valid
     * until fini. */
    const rv_config_t *config;
    /** The plugin's own struct, filled from its table (ops.config): its
     * defaults, the file and the environment; NULL when the plugin has no
     * table. Valid until fini. */
    const void *tconfig;
    rv_rank_t rank; /**< this process */
    rv_rank_t size; /**< processes in the job */
    int threads;    /**< worker threads per process */
    /**
     * Called by a transport that finds the connection to worker @p peer
     * broken for good (a dead or unreachable peer, a queue pair in error):
     * @p why says how, in a few words. Any thread, at most once per
     * process is enough. The core ends the job naming the peer's rank (as
     * GASNet-EX and MPI's default error handler do), so an operation that
     * will never complete cannot hang it. It does not return.
     */
    void (*peer_failed)(void *arg, uint32_t peer, const char *why);
    void *peer_failed_arg; /**< @c peer_failed's first argument */
    /** What core does for the transport; never NULL. Core's, constant:
     * the plugin may keep the pointer until fini returns. */
    const rv_transport_services_t *services;
} rv_transport_params_t;

/** @brief Parameters of one transport worker (worker_create copies what
 * it keeps). */
typedef struct rv_tworker_params {
    uint32_t tid;          /**< global id of the owning worker thread */
    uint32_t nworkers;     /**< workers in the job (peer ids 0..n-1) */
    int numa_node;         /**< the thread's NUMA node, or -1 */
    rv_am_recv_fn am_recv; /**< AM dispatch into the core */
    void *am_arg;          /**< @c am_recv's first argument */
} rv_tworker_params_t;

/**
 * @brief The operations of a transport plugin: the table it exports as
 * `rv_transport_ops` (RV_TRANSPORT_OPS_SYMBOL). Every member is set.
 *
 * Operations taking a completion follow the convention at the top of this
 * file (RV_OK: done, the callback will not run; RV_INPROGRESS: it will
 * run once, from the worker's progress; an error: it never runs). Peers
 * are worker ids, 0 .. nworkers - 1; RV_TID_ALL means
 * every peer where an operation says so.
 * @note Thread mode: members taking an rv_transport_t are thread-safe;
 *       those taking an rv_tworker_t are called on that worker's thread,
 *       except address_release.
 */
typedef struct rv_transport_ops {
    const char *name; /**< the plugin's name: librivet-NAME.so */
    int abi_version;  /**< RV_TRANSPORT_ABI_VERSION */
    /** The plugin's configuration keys, under prefix "transport.<name>",
     * or NULL for none: the loader reads them from the job file and the
     * environment, and init receives the filled struct as params->tconfig. */
    const rv_config_table_t *config;

    /* lifecycle ------------------------------------------------------- */
    /**
     * Starts the transport in this process (rv_init, main thread).
     * @param [in]  params the job's parameters and core's services; the
     *                     struct is valid during the call only, what it
     *                     points to until fini returns
     * @param [out] tp_p   the plugin's state; set only on success
     * @return RV_OK, or an error (RV_ERR_NO_DEVICE, RV_ERR_TRANSPORT, ...),
     *         logged by the plugin with its cause; rv_init fails with it
     */
    rv_status_t (*init)(const rv_transport_params_t *params,
                        rv_transport_t **tp_p);
    /** Frees @p tp (rv_finalize, main thread), after every transport
     * worker was destroyed. */
    void (*fini)(rv_transport_t *tp);
    /** Fills @p caps with what the transport can do and, once workers are
     * connected, what it really uses (description). Thread-safe: core
     * calls it from the main thread and from worker threads. */
    void (*query)(rv_transport_t *tp, rv_transport_caps_t *caps);

    /* workers and connections ----------------------------------------- */
    /** Creates the transport worker of one worker thread, on that thread
     * (rv_job_run). @p params is valid during the call only; the worker is
     * set in @p *tw_p only on success; an error ends the job. */
    rv_status_t (*worker_create)(rv_transport_t *tp,
                                 const rv_tworker_params_t *params,
                                 rv_tworker_t **tw_p);
    /** Destroys the worker; disconnect first, or endpoints are dropped. */
    void (*worker_destroy)(rv_tworker_t *tw);
    /** Packs the worker's address; release it with address_release. */
    rv_status_t (*worker_address)(rv_tworker_t *tw, void **addr_p,
                                  size_t *len_p);
    /** Frees an address of worker_address. Core calls it from the main
     * thread of rv_job_run while the worker's own thread progresses
     * @p tw, so it must not touch what progress uses. */
    void (*address_release)(rv_tworker_t *tw, void *addr);
    /** Connects to worker @p peer given its packed address. */
    rv_status_t (*connect)(rv_tworker_t *tw, uint32_t peer, const void *addr,
                           size_t len);
    /** Closes every endpoint, progressing until the peers (which do the
     * same at the same time) acknowledge or a timeout passes. */
    rv_status_t (*disconnect)(rv_tworker_t *tw);
    /** Makes progress; returns the number of events handled. */
    unsigned (*progress)(rv_tworker_t *tw);

    /* active messages ------------------------------------------------- */
    /**
     * Sends @p hdr and the payload described by @p iov to @p peer. The
     * header (at most caps.max_am_header bytes) and the iov array may be
     * reused when the call returns; the payload buffers when it returns
     * RV_OK or when @p cb runs.
     */
    rv_status_t (*am_send)(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                           size_t hdr_len, const struct iovec *iov,
                           size_t iovcnt, unsigned flags, rv_completion_fn cb,
                           void *arg);
    /** am_send flag: complete now or return RV_ERR_AGAIN; never queue. */
#define RV_AM_SEND_IMMEDIATE 1u
    /** Releases a payload kept by returning RV_INPROGRESS from am_recv. */
    void (*am_release)(rv_tworker_t *tw, void *desc);

    /* registered memory ----------------------------------------------- */
    /** Allocates @p len bytes of registered memory, as close to the peers
     * as the transport can make it (on shm: mapped into them). */
    rv_status_t (*mem_alloc)(rv_transport_t *tp, size_t len, rv_tmem_t **mem_p,
                             void **addr_p);
    /** Registers existing memory. */
    rv_status_t (*mem_register)(rv_transport_t *tp, void *addr, size_t len,
                                rv_tmem_t **mem_p);
    /** Deregisters (and, if mem_alloc'ed, frees) @p mem. */
    void (*mem_deregister)(rv_transport_t *tp, rv_tmem_t *mem);
    /** Packs the remote key of @p mem; release with rkey_buffer_release. */
    rv_status_t (*rkey_pack)(rv_transport_t *tp, rv_tmem_t *mem, void **buf_p,
                             size_t *len_p);
    /** Frees a packed key of rkey_pack (core keeps a chunk's packed key
     * while the chunk lives and frees it before mem_deregister). */
    void (*rkey_buffer_release)(rv_transport_t *tp, void *buf);
    /** Unpacks a remote key of worker @p peer's process for use by @p tw. */
    rv_status_t (*rkey_unpack)(rv_tworker_t *tw, uint32_t peer, const void *buf,
                               size_t len, rv_trkey_t **rkey_p);
    /** Frees a key of rkey_unpack, on the worker that unpacked it. */
    void (*rkey_destroy)(rv_tworker_t *tw, rv_trkey_t *rkey);

    /* one-sided operations ---------------------------------------------- */
    /** Writes @p len bytes at @p src to @p raddr at @p peer. @p src may be
     * reused on RV_OK or when @p cb runs (local completion). */
    rv_status_t (*put)(rv_tworker_t *tw, uint32_t peer, uint64_t raddr,
                       rv_trkey_t *rkey, const void *src, size_t len,
                       rv_completion_fn cb, void *arg);
    /** Reads @p len bytes at @p raddr of @p peer into @p dst: they are
     * there on RV_OK or when @p cb runs. */
    rv_status_t (*get)(rv_tworker_t *tw, uint32_t peer, void *dst, size_t len,
                       uint64_t raddr, rv_trkey_t *rkey, rv_completion_fn cb,
                       void *arg);
    /** Atomically adds @p value at @p raddr; the old value goes to
     * @p *result (if not NULL) before completion. */
    rv_status_t (*atomic_fadd64)(rv_tworker_t *tw, uint32_t peer,
                                 uint64_t value, uint64_t raddr,
                                 rv_trkey_t *rkey, uint64_t *result,
                                 rv_completion_fn cb, void *arg);
    /** Swaps in @p swap if the value at @p raddr equals @p compare; the old
     * value goes to @p *result. */
    rv_status_t (*atomic_cswap64)(rv_tworker_t *tw, uint32_t peer,
                                  uint64_t compare, uint64_t swap,
                                  uint64_t raddr, rv_trkey_t *rkey,
                                  uint64_t *result, rv_completion_fn cb,
                                  void *arg);
    /** Orders: operations after the fence to @p peer land after earlier
     * ones (RV_TID_ALL: all peers). */
    rv_status_t (*fence)(rv_tworker_t *tw, uint32_t peer);
    /** Completes, remotely, every operation issued so far to @p peer
     * (RV_TID_ALL: all peers). */
    rv_status_t (*flush)(rv_tworker_t *tw, uint32_t peer, rv_completion_fn cb,
                         void *arg);

    /* mapped memory (since version 5) ---------------------------------- */
    /** The address in this process at which [@p raddr, @p raddr + @p len)
     * of @p peer's region behind @p rkey is mapped (a peer on this host
     * over shared memory), or NULL when it is not mapped here or the range
     * leaves the region. Stores through it are stores to the peer's
     * memory, ordered as the CPU orders them; the pointer is valid while
     * @p rkey lives. NULL (the op itself) where memory is never mapped. */
    void *(*rkey_ptr)(rv_tworker_t *tw, uint32_t peer, rv_trkey_t *rkey,
                      uint64_t raddr, size_t len);
} rv_transport_ops_t;

/** @brief The symbol every plugin exports. */
#define RV_TRANSPORT_OPS_SYMBOL "rv_transport_ops"

#ifdef __cplusplus
}
#endif
#endif
