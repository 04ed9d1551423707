/**
 * @file rv_store.h
 * @brief rivet's object store: a distributed store of immutable objects
 * (after Plasma, the object store of Ray; see "Plasma over RDMA",
 * Tables 2.1-2.2), in registered memory, fetched between processes by
 * eager calls or by a zero-copy RDMA-read rendezvous.
 *
 * An object is named by a 20-byte id, created in the calling worker's
 * registered memory (rv_store_create), filled, then sealed: from then on
 * it is immutable and visible to every worker of the job. A get returns
 * read-only buffers of local objects at once; a remote object is fetched
 * into a local copy, exactly once per process however many threads ask
 * at the same time. Every process keeps its own store with reference
 * counts: rv_store_get takes a reference, rv_store_release gives it back,
 * and sealed objects nobody references are evicted (least recently used
 * first) when the process's store reaches store.capacity.
 *
 * Directory. Each object has a home worker, a hash of its id; sealing an
 * object registers the sealing process as a location at the home, and a
 * fetch asks the home for a location, then the owner for the bytes. Every
 * message is a call of the invocation layer: no external database.
 *
 * Transfer ("Plasma over RDMA", sections 3.2-3.4). Objects of up to
 * store.rndv_threshold bytes (data and metadata) travel eagerly in the
 * results of calls, in chunks of at most 256 KiB; larger ones are pinned by
 * their owner, read by the fetcher with one RDMA read straight into the
 * buffer of its new copy, and unpinned by a FIN call: no copy on either
 * side. An object in use (referenced, or pinned for a reader) is never
 * evicted or freed.
 *
 * Errors are reported and logged, and leave the store as it was: creating
 * an id that exists (RV_ERR_EXISTS), sealing, releasing or deleting an id
 * unknown here (RV_ERR_NOT_FOUND), a release without a get, a get of a
 * deleted object (RV_ERR_NOT_FOUND), a create that finds store.capacity
 * taken by objects in use (RV_ERR_NO_MEMORY, naming the capacity and
 * what holds it), a get that times out (RV_ERR_TIMEOUT).
 *
 * @note Thread mode: rv_store_init from the main thread before
 * rv_job_run, in every process (it initialises the rma and invocation
 * layers too). Every other call from a worker thread of rv_job_run, on its
 * own rv_worker_t; the threads of one process share its store, and any of
 * them may release or delete what another got or created. Calls that
 * wait progress the calling worker; none may be called from a handler.
 */
#ifndef RIVET_RV_STORE_H
#define RIVET_RV_STORE_H

#include "rv_rma.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of an object id. */
#define RV_OBJECT_ID_SIZE 20

/**
 * @brief An object id: 20 opaque bytes, as Plasma's. Its text form is 40
 * lowercase hexadecimal digits.
 * @note Plain data: any thread.
 */
typedef struct rv_object_id {
    uint8_t bytes[RV_OBJECT_ID_SIZE]; /**< the id's bytes */
} rv_object_id_t;

/**
 * @brief The 40-digit hexadecimal form of @p id.
 * @param [in]  id  the id
 * @param [out] hex 41 bytes: the digits and a terminating NUL
 * @note Any thread.
 */
RV_EXPORT void rv_object_id_to_hex(const rv_object_id_t *id, char hex[41]);

/**
 * @brief Parses the hexadecimal form of an id.
 * @param [in]  hex 40 hexadecimal digits (either case), NUL-terminated
 * @param [out] id  the id; set only on success
 * @return RV_OK; RV_ERR_INVALID for anything but 40 hexadecimal digits
 * @note Any thread.
 */
RV_EXPORT rv_status_t rv_object_id_from_hex(const char *hex,
                                            rv_object_id_t *id);

/**
 * @brief An id derived from @p len bytes at @p data (a 160-bit hash, not
 * a cryptographic one): the same bytes give the same id in every process.
 * @param [in]  data the bytes (a name, say)
 * @param [in]  len  their length
 * @param [out] id   the id
 * @note Any thread.
 */
RV_EXPORT void rv_object_id_of(const void *data, size_t len,
                               rv_object_id_t *id);

/**
 * @brief Initialises the layer (and the rma and invocation layers below
 * it) in @p ctx. Idempotent.
 * @param [in] ctx the context, before rv_job_run
 * @return RV_OK; RV_ERR_INVALID for a NULL @p ctx or while a job runs;
 *         RV_ERR_CONFIG for a bad store.* value (logged); RV_ERR_EXISTS
 *         when a handler name of the layer is taken; RV_ERR_NO_MEMORY;
 *         rv_rma_init's errors
 * @note Main thread, once in every process, before rv_job_run.
 */
RV_EXPORT rv_status_t rv_store_init(rv_context_t *ctx);

/**
 * @brief Creates object @p id of @p data_size bytes with a copy of
 * @p meta_size bytes of metadata, in registered memory of the calling
 * worker's NUMA zone, and returns its writable buffer. Nobody else sees it
 * before rv_store_seal.
 * @param [in]  w         the calling worker
 * @param [in]  id        the new object's id
 * @param [in]  data_size its bytes (0 is allowed)
 * @param [in]  meta      its metadata, copied; may be NULL when
 *                        @p meta_size is 0
 * @param [in]  meta_size bytes of metadata, at most 64 KiB
 * @param [out] data      the object's buffer, @p data_size bytes; the
 *                        store's: write it until rv_store_seal or
 *                        rv_store_abort, never free it
 * @return RV_OK; RV_ERR_EXISTS when this process holds @p id already
 *         (created, fetched or being fetched); RV_ERR_NO_MEMORY when
 *         store.capacity cannot take it even after evicting every
 *         unreferenced object (logged with what holds the store);
 *         RV_ERR_INVALID for bad arguments or a job without the layer
 * @note From @p w's own thread. The creator holds a reference until it
 *       seals (or aborts); a sealed object it created has none left: get
 *       it to keep using it.
 */
RV_EXPORT rv_status_t rv_store_create(rv_worker_t *w, const rv_object_id_t *id,
                                      size_t data_size, const void *meta,
                                      size_t meta_size, void **data);

/**
 * @brief Seals object @p id created by this process: immutable, and
 * visible to the whole job (its home learns its location, waiting gets
 * and subscribers are told).
 * @param [in] w  the calling worker
 * @param [in] id an object this process created and has not sealed
 * @return RV_OK; RV_ERR_NOT_FOUND when this process has no unsealed
 *         object @p id (logged); the calls' errors
 * @note From @p w's own thread; any thread of the creating process.
 */
RV_EXPORT rv_status_t rv_store_seal(rv_worker_t *w, const rv_object_id_t *id);

/**
 * @brief Drops object @p id created and not sealed by this process; its
 * memory is freed.
 * @param [in] w  the calling worker
 * @param [in] id the object
 * @return RV_OK; RV_ERR_NOT_FOUND when this process has no unsealed
 *         object @p id (logged)
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_store_abort(rv_worker_t *w, const rv_object_id_t *id);

/**
 * @brief A sealed object as a get returns it: read-only views of the
 * store's memory, valid until the reference is released.
 */
typedef struct rv_store_buf {
    const void *data; /**< the object's bytes */
    size_t data_size; /**< their length */
    const void *meta; /**< its metadata (NULL when there is none) */
    size_t meta_size; /**< their length */
} rv_store_buf_t;

/** rv_store_get's timeout: wait as long as it takes. */
#define RV_STORE_WAIT_FOREVER (-1)

/**
 * @brief Gets objects @p ids[0..n): each becomes a reference of this
 * process (released with rv_store_release), local objects at once,
 * remote ones fetched into local copies. An object not sealed anywhere
 * yet is waited for, up to @p timeout_ms.
 * @param [in]  w          the calling worker
 * @param [in]  ids        the ids; the same id may appear more than once
 *                         (one reference each)
 * @param [in]  n          how many
 * @param [in]  timeout_ms 0: do not wait for objects not sealed yet;
 *                         RV_STORE_WAIT_FOREVER; else milliseconds
 * @param [out] bufs       n views, filled for the objects got; the others
 *                         are zeroed
 * @param [out] status     NULL, or n statuses: RV_OK for each object got,
 *                         RV_ERR_TIMEOUT for one not sealed in time,
 *                         RV_ERR_NOT_FOUND for one deleted (an id's
 *                         home remembers the last 16,384 ids deleted
 *                         there; one deleted longer ago is waited for
 *                         like an id never made), a transport error for
 *                         one whose owner failed
 * @return RV_OK when every object was got, else the first error of
 *         @p status (the objects got are referenced all the same)
 * @note From @p w's own thread; waits, progressing.
 */
RV_EXPORT rv_status_t rv_store_get(rv_worker_t *w, const rv_object_id_t *ids,
                                   size_t n, int64_t timeout_ms,
                                   rv_store_buf_t *bufs, rv_status_t *status);

/**
 * @brief rv_store_get without waiting: @p sync gets one operation per
 * object, completed once its view and status are filled (the operation's
 * status is the object's). Overlap many fetches this way.
 * @param [in]     w          the calling worker
 * @param [in]     ids        as rv_store_get; copied
 * @param [in]     n          how many
 * @param [in]     timeout_ms as rv_store_get
 * @param [out]    bufs       as rv_store_get; the caller's, valid until
 *                            @p sync completes
 * @param [out]    status     as rv_store_get (may be NULL); the caller's
 * @param [in,out] sync       the synchronizer
 * @return RV_OK once the gets started (their results come through
 *         @p sync and @p status); RV_ERR_INVALID for bad arguments
 * @note From @p w's own thread; the gets progress when @p w progresses.
 */
RV_EXPORT rv_status_t rv_store_get_async(rv_worker_t *w,
                                         const rv_object_id_t *ids, size_t n,
                                         int64_t timeout_ms,
                                         rv_store_buf_t *bufs,
                                         rv_status_t *status, rv_sync_t *sync);

/**
 * @brief Gives back one reference of this process to object @p id; its
 * views may not be used after.
 * @param [in] w  the calling worker
 * @param [in] id the object
 * @return RV_OK; RV_ERR_NOT_FOUND when this process holds no reference to
 *         @p id (logged)
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_store_release(rv_worker_t *w,
                                       const rv_object_id_t *id);

/**
 * @brief Deletes object @p id from the whole job: this process's copy
 * now, the others' as soon as nobody references them; gets that start
 * after it returns fail with RV_ERR_NOT_FOUND. A copy whose fetch
 * completes while the delete runs is dropped as soon as its home hears of
 * it (rv_quiesce orders the two).
 * @param [in] w  the calling worker
 * @param [in] id a sealed object
 * @return RV_OK; RV_ERR_AGAIN when this process still references it
 *         (nothing deleted); RV_ERR_NOT_FOUND when the job has no sealed
 *         object @p id (logged); the calls' errors
 * @note From @p w's own thread; waits for the home's answer.
 */
RV_EXPORT rv_status_t rv_store_delete(rv_worker_t *w, const rv_object_id_t *id);

/**
 * @brief Whether this process holds sealed object @p id (created here or
 * fetched), without taking a reference.
 * @param [in]  w   the calling worker
 * @param [in]  id  the object
 * @param [out] has the answer
 * @return RV_OK; RV_ERR_INVALID for bad arguments
 * @note From @p w's own thread.
 */
RV_EXPORT rv_status_t rv_store_contains(rv_worker_t *w,
                                        const rv_object_id_t *id, bool *has);

/** What a subscription covers. */
typedef enum rv_store_scope {
    RV_STORE_SCOPE_RANK, /**< objects sealed by this process */
    RV_STORE_SCOPE_JOB,  /**< objects sealed anywhere in the job */
} rv_store_scope_t;

/**
 * @brief Called on the subscribing worker, from its progress, once for
 * every object sealed in the subscription's scope after it was made.
 * @param w         the subscribing worker
 * @param id        the object sealed; valid during the call
 * @param data_size its size
 * @param owner     the process that sealed it
 * @param arg       the subscription's argument
 */
typedef void (*rv_store_seal_fn)(rv_worker_t *w, const rv_object_id_t *id,
                                 size_t data_size, rv_rank_t owner, void *arg);

/**
 * @brief Subscribes worker @p w to the seals of @p scope: @p fn runs for
 * each, in @p w's progress (a handler: it may call, not wait).
 * @param [in] w     the subscribing worker
 * @param [in] scope RV_STORE_SCOPE_RANK or RV_STORE_SCOPE_JOB
 * @param [in] fn    the callback
 * @param [in] arg   passed to it; the caller's
 * @return RV_OK once every process knows the subscription (seals after
 *         the return are seen, each exactly once); RV_ERR_INVALID for bad
 *         arguments; RV_ERR_EXISTS when @p w subscribed already
 * @note From @p w's own thread; waits, progressing. One subscription per
 *       worker, for the rest of the job.
 */
RV_EXPORT rv_status_t rv_store_subscribe(rv_worker_t *w, rv_store_scope_t scope,
                                         rv_store_seal_fn fn, void *arg);

/**
 * @brief Counters of this process's store (all its workers).
 */
typedef struct rv_store_stats {
    uint64_t objects;       /**< sealed objects held now */
    uint64_t bytes;         /**< their bytes (data and metadata) */
    uint64_t hits;          /**< gets served from this process */
    uint64_t fetches_eager; /**< remote objects fetched eagerly */
    uint64_t fetches_rndv;  /**< remote objects fetched by RDMA read */
    uint64_t evictions;     /**< objects evicted for room */
    uint64_t pinned_bytes;  /**< bytes pinned for remote readers now */
    uint64_t served;        /**< fetches served to other processes */
} rv_store_stats_t;

/**
 * @brief This process's counters.
 * @param [in]  w     a worker of the process
 * @param [out] stats the counters; zeroed on a job without the layer
 * @note From @p w's own thread.
 */
RV_EXPORT void rv_store_stats(rv_worker_t *w, rv_store_stats_t *stats);

/**
 * @brief The eager/rendezvous threshold in force (store.rndv_threshold, or
 * what `auto` chose at job start).
 * @param [in] w a worker of the job
 * @return bytes of data and metadata up to which fetches are eager
 * @note From @p w's own thread.
 */
RV_EXPORT size_t rv_store_rndv_threshold(rv_worker_t *w);

#ifdef __cplusplus
}
#endif

#endif /* RIVET_RV_STORE_H */
