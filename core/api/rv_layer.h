/**
 * @file rv_layer.h
 * @brief For layers built on core (rivet's am and rma, or a user's own):
 * layer slots, the worker's transport, and the raw message send.
 *
 * A layer installs itself in a slot of the context (rv_layer_install)
 * before rv_job_run. Core keeps any number of slots, up to RV_LAYER_MAX,
 * each with the layer's per-context state and, once the job runs, its
 * per-worker state, and runs the layer's hooks at the job's stages: start
 * and progress in install order, quiesce, drain, stop and context_fini in
 * reverse install order (a layer is stopped before the layers it is built
 * on). A layer reads and writes its own state only; what it needs of a
 * lower layer it gets through that layer's public headers.
 *
 * The rv_tw_* functions are one-line dispatches to the operations of the
 * worker's transport (rv_transport.h), as UCX's uct_ep_* calls are: every
 * rule of rv_transport.h (completion convention, buffer reuse, threading)
 * applies to them unchanged.
 *
 * @note Thread mode: rv_layer_install from the main thread before
 * rv_job_run. rv_layer_find, rv_layer_context and rv_handler_find read
 * tables that do not change while a job runs: any thread. Everything that
 * takes an rv_worker_t is called from that worker's own thread.
 */
#ifndef RIVET_RV_LAYER_H
#define RIVET_RV_LAYER_H

#include "rivet.h"
#include "rv_stats.h"
#include "rv_transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief The transport's capabilities, including what it really uses
 * (known once rv_job_run has connected the workers; before the first job
 * each call queries the transport again, after a job they describe that
 * job).
 * @param [in] ctx the context
 * @return the capabilities; owned by the context, valid until
 *         rv_finalize (a call before the first job, or the next
 *         rv_job_run, rewrites them)
 * @note Any thread: the query is made under the context's lock, and
 *       while a job runs the struct is not rewritten.
 */
RV_EXPORT const rv_transport_caps_t *rv_context_caps(rv_context_t *ctx);

/**
 * @brief The transport worker of @p w, for the layers above core (which
 * usually reach it through rv_layer.h's rv_tw_* dispatchers instead).
 * @param [in] w the worker
 * @return the transport worker; owned by core, valid while the job runs
 * @note From @p w's own thread, like every operation on the transport
 *       worker.
 */
RV_EXPORT rv_tworker_t *rv_worker_tworker(rv_worker_t *w);
/**
 * @brief The transport of @p ctx, for the layers above core (to create
 * registered-memory allocators, for example).
 * @param [in]  ctx  the context
 * @param [out] tp_p the transport's process state; may be NULL
 * @return the transport's operations; owned by the plugin, valid until
 *         rv_finalize (the plugin is never unloaded)
 * @note Any thread; the process-level operations of the transport are
 *       thread-safe (rv_transport.h).
 */
RV_EXPORT const rv_transport_ops_t *rv_context_transport(rv_context_t *ctx,
                                                         rv_transport_t **tp_p);

/** Most layers one context holds. */
#define RV_LAYER_MAX 16

/**
 * @def RV_TSAN_RELEASE(p)
 * @brief Tells ThreadSanitizer that handing @p p to another thread through
 * a queue it cannot see into (liburcu's wait-free queue orders its
 * accesses with volatile loads and its own fences) releases what this
 * thread wrote before; the taker calls RV_TSAN_ACQUIRE(p) on the same
 * address. Nothing outside a TSan build.
 * @def RV_TSAN_ACQUIRE(p)
 * @brief The taker's side of RV_TSAN_RELEASE.
 */
#if defined(__SANITIZE_THREAD__)
#define RV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RV_TSAN 1
#endif
#endif
#ifdef RV_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define RV_TSAN_RELEASE(p) __tsan_release(p)
#define RV_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define RV_TSAN_RELEASE(p) ((void)(p))
#define RV_TSAN_ACQUIRE(p) ((void)(p))
#endif

/**
 * @brief The hooks of a layer. Every member but @c name may be NULL.
 *
 * The worker hooks run on the worker's own thread, each worker calling
 * its own; context_fini runs on the main thread.
 */
typedef struct rv_layer_ops {
    const char *name; /**< for messages: "am", "rma" */
    /** After the worker connected to every peer, before any worker of the
     * job runs its function. Sets the worker's state with
     * rv_worker_layer_set. Every worker of the job has started the layers
     * installed before this one, and no worker starts the next layer
     * before every worker has started this one, so the start may send
     * through lower layers; it may receive this layer's messages from
     * quicker workers before it returns. An error ends the job
     * (rv_abort). */
    rv_status_t (*worker_start)(rv_worker_t *w);
    /** From every rv_progress, after the transport's progress, once the
     * layer's worker state is set; returns the events handled. Must
     * tolerate being re-entered from a handler. */
    unsigned (*progress)(rv_worker_t *w);
    /** After the worker's function returned: push out what is held back. */
    void (*worker_quiesce)(rv_worker_t *w);
    /** Every worker of the job quiesced: run what has landed, before the
     * endpoints close. */
    void (*worker_drain)(rv_worker_t *w);
    /** After disconnect, before the transport worker is destroyed: free
     * the worker's state. */
    void (*worker_stop)(rv_worker_t *w);
    /** In rv_finalize: free the per-context state. */
    void (*context_fini)(rv_context_t *ctx);
} rv_layer_ops_t;

/**
 * @brief Installs a layer in the next free slot of @p ctx.
 *
 * Installing the same @p ops again returns the slot it has (RV_OK) and
 * leaves its state unchanged, so a layer may install itself lazily from
 * each of its init calls.
 *
 * @param [in]  ctx        the context, before rv_job_run
 * @param [in]  ops        the layer's hooks; must outlive the context
 * @param [in]  ctx_state  the layer's per-context state (owned by the
 *                         layer, freed by its context_fini)
 * @param [out] slot_p     the slot, for rv_layer_context and
 *                         rv_worker_layer
 * @return RV_OK, RV_ERR_INVALID while a job runs, RV_ERR_NO_MEMORY when
 *         every slot is taken (both logged)
 * @note Main thread, before rv_job_run.
 */
RV_EXPORT rv_status_t rv_layer_install(rv_context_t *ctx,
                                       const rv_layer_ops_t *ops,
                                       void *ctx_state, int *slot_p);

/**
 * @brief The slot a layer is installed in.
 * @param [in] ctx the context
 * @param [in] ops the layer's hooks, as given to rv_layer_install
 * @return the slot, or -1 if @p ops is not installed
 * @note Any thread; the slots do not change while a job runs.
 */
RV_EXPORT int rv_layer_find(const rv_context_t *ctx, const rv_layer_ops_t *ops);

/**
 * @brief The per-context state of the layer in @p slot.
 * @param [in] ctx  the context
 * @param [in] slot a slot of rv_layer_install
 * @return the state given to rv_layer_install (owned by the layer), or
 *         NULL for a slot that is not in use
 * @note Any thread; the slots do not change while a job runs.
 */
RV_EXPORT void *rv_layer_context(rv_context_t *ctx, int slot);

/**
 * @brief The part of a worker that layers read inline. Core's worker
 * starts with it; use the functions below, never the fields.
 * @note Owned by core; read and written by the worker's own thread.
 */
typedef struct rv_worker_view {
    const rv_transport_ops_t *tops; /**< the transport's operations */
    rv_tworker_t *tw;               /**< the worker's transport worker */
    void *layer[RV_LAYER_MAX];      /**< per-slot layer state */
} rv_worker_view_t;

static inline const rv_worker_view_t *rv__worker_view(const rv_worker_t *w)
{
    return (const rv_worker_view_t *)(const void *)w;
}

/**
 * @brief The per-worker state of the layer in @p slot.
 * @param [in] w    the worker
 * @param [in] slot the layer's slot (0 .. RV_LAYER_MAX - 1, not checked)
 * @return the state its worker_start set (owned by the layer), or NULL
 *         before then, after its worker_stop, or on a job where the layer
 *         is not installed
 * @note From @p w's own thread.
 */
static inline void *rv_worker_layer(const rv_worker_t *w, int slot)
{
    return rv__worker_view(w)->layer[slot];
}

/**
 * @brief Sets the per-worker state of the layer in @p slot (from its
 * worker_start; NULL from its worker_stop).
 * @param [in] w     the worker
 * @param [in] slot  the layer's slot (not checked)
 * @param [in] state the layer's state; stays the layer's, which frees it
 * @note From @p w's own thread.
 */
static inline void rv_worker_layer_set(rv_worker_t *w, int slot, void *state)
{
    ((rv_worker_view_t *)(void *)w)->layer[slot] = state;
}

/**
 * @brief The NUMA node the worker thread is bound to (job.placement).
 * @param [in] w the worker
 * @return the node, or -1 when the thread is not bound to one
 * @note Any thread (it does not change while the job runs).
 */
RV_EXPORT int rv_worker_numa_node(const rv_worker_t *w);

/**
 * @brief Whether the worker is inside an RV_HANDLER_INLINE handler, where
 * nothing may wait or progress.
 * @param [in] w the worker
 * @return true inside such a handler
 * @note From @p w's own thread.
 */
RV_EXPORT bool rv_worker_in_callback(const rv_worker_t *w);

/**
 * @brief How many rv_progress calls of @p w are on the stack: 0 in the
 * worker's own code, 1 or more inside anything run from progress
 * (handlers, layer hooks). Code that runs at depth 1 or more must not
 * wait for room to send: a wait progresses, and progress runs the next
 * handler, whose send may wait in turn (rv_sendx with sync NULL copies
 * instead).
 * @param [in] w the worker
 * @return the depth
 * @note From @p w's own thread.
 */
RV_EXPORT unsigned rv_worker_progress_depth(const rv_worker_t *w);

/**
 * @brief Consecutive rv_progress calls that found nothing to do (reset by
 * one that did); a layer uses it to act when its worker goes idle.
 * @param [in] w the worker
 * @return the count
 * @note From @p w's own thread.
 */
RV_EXPORT unsigned rv_worker_idle_polls(const rv_worker_t *w);

/** @brief Why a layer dropped a message it received. */
typedef enum rv_drop {
    RV_DROP_UNKNOWN_HANDLER, /**< no handler has its id */
    RV_DROP_MALFORMED,       /**< truncated or a bad header */
} rv_drop_t;

/**
 * @brief Counts a message the layer dropped in the worker's statistics
 * (rv_worker_stats_t.rx_unknown_handler or rx_malformed). The layer logs
 * why.
 * @param [in] w   the worker that received the message
 * @param [in] why which counter
 * @note From @p w's own thread.
 */
RV_EXPORT void rv_worker_count_drop(rv_worker_t *w, rv_drop_t why);

/** @brief A registered handler, as rv_handler_find returns it. Owned by
 * the context: read-only, valid until rv_finalize. */
typedef struct rv_handler_info {
    rv_handler_id_t id; /**< the id its name hashes to */
    rv_handler_fn fn;   /**< the handler */
    void *arg;          /**< its argument, as registered */
    unsigned flags;     /**< RV_HANDLER_* flags, as registered */
    char *name;         /**< its name (the context's copy) */
} rv_handler_info_t;

/**
 * @brief The handler registered under @p id.
 * @param [in] ctx the context
 * @param [in] id  a handler id
 * @return the handler, or NULL; the table does not change while a job
 *         runs, so the pointer stays valid until rv_finalize
 * @note Any thread while a job runs (the table is read without locks);
 *       not concurrently with rv_handler_register.
 */
RV_EXPORT const rv_handler_info_t *rv_handler_find(const rv_context_t *ctx,
                                                   rv_handler_id_t id);

/** rv_send_raw flag: never wait and never hold the caller's payload: the
 * message leaves at once, or from a copy freed on completion (what a
 * handler's reply needs, so that it does not progress into further calls
 * while it waits). @p cb is not used. */
#define RV_SEND_COPY (1u << 8)

/**
 * @brief Sends a message as rv_sendx does, with transport send @p flags
 * (RV_AM_SEND_IMMEDIATE) and a completion of the caller's.
 * @param [in] w        the sending worker
 * @param [in] dest     the destination worker
 * @param [in] h        the handler's id
 * @param [in] xhdr     header extension, copied: reusable on return
 * @param [in] xhdr_len its length, at most RV_MSG_XHDR_MAX
 * @param [in] iov      the payload's pieces; the array is reusable on
 *                      return, the bytes once the send completed (RV_OK
 *                      returned, or @p cb ran)
 * @param [in] iovcnt   number of pieces
 * @param [in] flags    0, RV_AM_SEND_IMMEDIATE or RV_SEND_COPY (then
 *                      the payload is reusable on return, which is RV_OK
 *                      or an error)
 * @param [in] cb       run once, from @p w's progress, when the call
 *                      returned RV_INPROGRESS; may be NULL with
 *                      RV_AM_SEND_IMMEDIATE or RV_SEND_COPY
 * @param [in] arg      @p cb's argument
 * @return RV_OK (done: @p cb will not run), RV_INPROGRESS (@p cb will run
 *         once the payload may be reused), RV_ERR_AGAIN (only with
 *         RV_AM_SEND_IMMEDIATE: nothing was sent) or an error:
 *         RV_ERR_INVALID (not logged) for an extension or payload too
 *         large or a @p dest outside the job, or the transport's; after an
 *         error @p cb never runs.
 * @note From @p w's own thread. Unlike rv_sendx it makes no copy inside
 *       an RV_HANDLER_INLINE handler.
 */
RV_EXPORT rv_status_t rv_send_raw(rv_worker_t *w, rv_tid_t dest,
                                  rv_handler_id_t h, const void *xhdr,
                                  size_t xhdr_len, const struct iovec *iov,
                                  size_t iovcnt, unsigned flags,
                                  rv_completion_fn cb, void *arg);

/* ---------------------------------------------------------------------- */
/* The worker's transport (rv_transport.h's operations, dispatched)        */

/**
 * @brief rv_transport_ops_t.put on the worker's transport worker: writes
 * @p len bytes at @p src to @p raddr of @p peer's process.
 * @param [in] w     the calling worker
 * @param [in] peer  the worker whose endpoint carries the put
 * @param [in] raddr the address in @p peer's process (the destination)
 * @param [in] rkey  @p raddr's remote key, unpacked for this worker
 *                   (rv_tw_rkey_unpack)
 * @param [in] src   local bytes; reusable on RV_OK or once @p cb ran
 *                   (local completion)
 * @param [in] len   bytes
 * @param [in] cb    completion, as rv_transport.h's convention says
 * @param [in] arg   @p cb's argument
 * @return RV_OK (complete, @p cb will not run), RV_INPROGRESS (@p cb will
 *         run from progress) or an error (@p cb never runs)
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_put(rv_worker_t *w, uint32_t peer,
                                    uint64_t raddr, rv_trkey_t *rkey,
                                    const void *src, size_t len,
                                    rv_completion_fn cb, void *arg)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->put(v->tw, peer, raddr, rkey, src, len, cb, arg);
}

/**
 * @brief rv_transport_ops_t.get on the worker's transport worker: reads
 * @p len bytes at @p raddr of @p peer's process into @p dst.
 * @param [in]  w     the calling worker
 * @param [in]  peer  the worker whose endpoint carries the get
 * @param [out] dst   local bytes, complete on RV_OK or once @p cb ran; not
 *                    to be touched meanwhile
 * @param [in]  len   bytes
 * @param [in]  raddr the address in @p peer's process
 * @param [in]  rkey  @p raddr's remote key, unpacked for this worker
 * @param [in]  cb    completion
 * @param [in]  arg   @p cb's argument
 * @return RV_OK, RV_INPROGRESS or an error, as rv_tw_put
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_get(rv_worker_t *w, uint32_t peer, void *dst,
                                    size_t len, uint64_t raddr,
                                    rv_trkey_t *rkey, rv_completion_fn cb,
                                    void *arg)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->get(v->tw, peer, dst, len, raddr, rkey, cb, arg);
}

/**
 * @brief rv_transport_ops_t.atomic_fadd64 on the worker's transport
 * worker: adds @p value to the 64-bit word at @p raddr.
 * @param [in]  w      the calling worker
 * @param [in]  peer   the worker whose endpoint carries it
 * @param [in]  value  what to add
 * @param [in]  raddr  the word, 8-aligned, in @p peer's process
 * @param [in]  rkey   its remote key, unpacked for this worker
 * @param [out] result the old value, written before completion; may be
 *                     NULL; must stay valid until then
 * @param [in]  cb     completion
 * @param [in]  arg    @p cb's argument
 * @return RV_OK, RV_INPROGRESS or an error, as rv_tw_put
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_atomic_fadd64(rv_worker_t *w, uint32_t peer,
                                              uint64_t value, uint64_t raddr,
                                              rv_trkey_t *rkey,
                                              uint64_t *result,
                                              rv_completion_fn cb, void *arg)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->atomic_fadd64(v->tw, peer, value, raddr, rkey, result, cb,
                                  arg);
}

/**
 * @brief rv_transport_ops_t.atomic_cswap64 on the worker's transport
 * worker: stores @p swap at @p raddr if it holds @p compare.
 * @param [in]  w       the calling worker
 * @param [in]  peer    the worker whose endpoint carries it
 * @param [in]  compare the expected value
 * @param [in]  swap    the new value
 * @param [in]  raddr   the word, 8-aligned, in @p peer's process
 * @param [in]  rkey    its remote key, unpacked for this worker
 * @param [out] result  the old value (equal to @p compare if it swapped),
 *                      written before completion; must stay valid until
 *                      then
 * @param [in]  cb      completion
 * @param [in]  arg     @p cb's argument
 * @return RV_OK, RV_INPROGRESS or an error, as rv_tw_put
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_atomic_cswap64(rv_worker_t *w, uint32_t peer,
                                               uint64_t compare, uint64_t swap,
                                               uint64_t raddr, rv_trkey_t *rkey,
                                               uint64_t *result,
                                               rv_completion_fn cb, void *arg)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->atomic_cswap64(v->tw, peer, compare, swap, raddr, rkey,
                                   result, cb, arg);
}

/**
 * @brief rv_transport_ops_t.fence on the worker's transport worker:
 * operations issued after it to @p peer land after those issued before.
 * @param [in] w    the calling worker
 * @param [in] peer a worker, or UINT32_MAX (RV_TID_ALL) for every peer
 * @return RV_OK or the transport's error
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_fence(rv_worker_t *w, uint32_t peer)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->fence(v->tw, peer);
}

/**
 * @brief rv_transport_ops_t.flush on the worker's transport worker:
 * completes, at their targets, the operations issued so far to @p peer.
 * @param [in] w    the calling worker
 * @param [in] peer a worker, or UINT32_MAX (RV_TID_ALL) for every peer
 * @param [in] cb   completion, once they all are complete remotely
 * @param [in] arg  @p cb's argument
 * @return RV_OK, RV_INPROGRESS or an error, as rv_tw_put
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_flush(rv_worker_t *w, uint32_t peer,
                                      rv_completion_fn cb, void *arg)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->flush(v->tw, peer, cb, arg);
}

/**
 * @brief rv_transport_ops_t.rkey_ptr on the worker's transport worker:
 * where [@p raddr, @p raddr + @p len) of @p peer's region is mapped in
 * this process, so that the layer stores into it itself.
 * @param [in] w     the calling worker
 * @param [in] peer  a worker of the process the region belongs to
 * @param [in] rkey  the region's key, unpacked by @p w
 * @param [in] raddr the range's address in @p peer's process
 * @param [in] len   its bytes
 * @return the address here, valid while @p rkey lives, or NULL when the
 *         range is not mapped here (another host, a transport that maps
 *         nothing, an offloaded transport, a range outside the region):
 *         use rv_tw_put then
 * @note From @p w's own thread.
 */
static inline void *rv_tw_rkey_ptr(rv_worker_t *w, uint32_t peer,
                                   rv_trkey_t *rkey, uint64_t raddr, size_t len)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->rkey_ptr == NULL
               ? NULL
               : v->tops->rkey_ptr(v->tw, peer, rkey, raddr, len);
}

/**
 * @brief rv_transport_ops_t.rkey_unpack for the worker's transport
 * worker: makes a packed remote key of @p peer's process usable by @p w.
 * @param [in]  w      the calling worker
 * @param [in]  peer   a worker of the process the key belongs to
 * @param [in]  buf    the packed key (rv_mem_chunk_t.rkey of the owner);
 *                     reusable on return
 * @param [in]  len    its length
 * @param [out] rkey_p the unpacked key; set only on success. @p w's:
 *                     destroy it with rv_tw_rkey_destroy on the same
 *                     worker.
 * @return RV_OK or the transport's error
 * @note From @p w's own thread.
 */
static inline rv_status_t rv_tw_rkey_unpack(rv_worker_t *w, uint32_t peer,
                                            const void *buf, size_t len,
                                            rv_trkey_t **rkey_p)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    return v->tops->rkey_unpack(v->tw, peer, buf, len, rkey_p);
}

/**
 * @brief rv_transport_ops_t.rkey_destroy for the worker's transport
 * worker: frees a key of rv_tw_rkey_unpack.
 * @param [in] w    the worker that unpacked it
 * @param [in] rkey the key; invalid afterwards
 * @note From @p w's own thread, before the job ends.
 */
static inline void rv_tw_rkey_destroy(rv_worker_t *w, rv_trkey_t *rkey)
{
    const rv_worker_view_t *v = rv__worker_view(w);
    v->tops->rkey_destroy(v->tw, rkey);
}

#ifdef __cplusplus
}
#endif
#endif
