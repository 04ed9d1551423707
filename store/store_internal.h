/*
 * The object store's internals: the process's table of objects, the
 * directory shards of the home workers, the gets in progress, and the
 * calls between them.
 */
#ifndef RIVET_STORE_INTERNAL_H
#define RIVET_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "store_hash.h"

#include "rv_layer.h"
#include "rv_store.h"
#include "store_config.h"

/* Largest metadata of an object. */
#define ST_META_MAX ((size_t)64 << 10)
/* Largest piece of an eager transfer (one call's result). */
#define ST_CHUNK ((size_t)256 << 10)
/* Bytes in front of an object's data in its memory: where the status
 * word of a one-call eager fetch lands (store_get.c). */
#define ST_HEAD 8
/* Copies of one object a home remembers. */
#define ST_MAX_LOCS 8
/* Deleted ids a home remembers, so that a get of one answers
 * RV_ERR_NOT_FOUND; an id deleted longer ago is forgotten (memory that
 * does not grow with the objects ever deleted). */
#define ST_TOMBSTONES 16384

/* ---------------------------------------------------------------------- */
/* Objects of a process                                                    */

typedef enum st_state {
    ST_CREATED,  /* being written by its creator */
    ST_FETCHING, /* a local copy being fetched */
    ST_SEALED,   /* immutable, readable */
} st_state_t;

typedef struct st_obj {
    UT_hash_handle hh;
    rv_object_id_t id;
    st_state_t state;
    uint8_t *base; /* the allocation: ST_HEAD bytes, then mem */
    uint8_t *mem;  /* [data][meta] */
    size_t data_size, meta_size;
    rv_rptr_t rptr;    /* of mem, for readers by RDMA */
    int alloc_local;   /* the local worker whose allocator holds mem */
    long refs;         /* references of this process */
    long pins;         /* remote readers between PIN and FIN */
    rv_tid_t *pinners; /* who holds each pin (pins of them), so that
                          only a reader's own FIN releases one */
    long pinners_cap;
    bool deleted;             /* freed as soon as refs and pins are 0 */
    bool located;             /* registered as a location at its home */
    bool transferring;        /* ST_FETCHING: its bytes are on the way */
    rv_status_t fetch_status; /* ST_FETCHING that failed: why */
    struct st_obj *lru_prev, *lru_next; /* unreferenced sealed objects */
    bool in_lru;
} st_obj_t;

/* Memory freed by another thread than its allocator's, freed by that
 * worker at its next progress. */
typedef struct st_frees {
    void **v;
    size_t n, cap;
} st_frees_t;

typedef struct st_proc {
    pthread_mutex_t lock;
    st_obj_t *objs;                /* by id */
    st_obj_t *lru_head, *lru_tail; /* least recently used first */
    uint64_t capacity, used;       /* bytes of data and metadata */
    rv_store_stats_t stats;
    st_frees_t *frees; /* per local worker */
    rv_tid_t *subs;    /* workers told of this process's seals */
    size_t nsubs, capsubs;
    size_t threshold;    /* eager up to this many bytes */
    bool auto_threshold; /* store.rndv_threshold: auto */
    rv_rptr_t cal_rptr;  /* the calibration's remote block */
    atomic_bool cal_have_rptr;
    atomic_int cal_results; /* answers of the calibration here */
    const rv_store_config_t *cfg;
    int threads;
    int running; /* workers started and not stopped */
    rv_rank_t rank;
} st_proc_t;

/* ---------------------------------------------------------------------- */
/* Directory entries, at their home worker                                */

typedef struct st_waiter {
    rv_tid_t tid;
    uint64_t token;
} st_waiter_t;

typedef struct st_dent {
    UT_hash_handle hh;
    rv_object_id_t id;
    uint64_t data_size, meta_size;
    rv_tid_t locs[ST_MAX_LOCS];
    unsigned nloc;
    bool deleted;
    bool in_tomb; /* deleted, in the home's ring of the last
                     ST_TOMBSTONES deletions (store_dir.c) */
    st_waiter_t *waiters;
    size_t nwait, capwait;
} st_dent_t;

/* The home's answer to a delete: the other processes' copies, which the
 * deleter tells to drop. */
typedef struct st_deleted {
    int32_t status;
    uint32_t nloc;
    rv_tid_t locs[ST_MAX_LOCS];
} st_deleted_t;

/* ---------------------------------------------------------------------- */
/* Gets in progress, per worker                                            */

typedef enum st_gstate {
    G_START,      /* look in the process's table */
    G_WAIT_LOCAL, /* another thread fetches or creates it */
    G_LOOKUP,     /* asking the home */
    G_WAIT_SEAL,  /* the home will say when it is sealed */
    G_PIN,        /* asking the owner to pin it */
    G_TRANSFER,   /* eager pieces or the RDMA read in flight */
    G_DONE,
} st_gstate_t;

/* The answer of a home or an owner about an object. */
typedef struct st_where {
    int32_t status; /* rv_status_t; 1: wait for the seal */
    rv_tid_t owner;
    uint64_t data_size, meta_size;
    rv_rptr_t rptr; /* PIN: the object's memory */
} st_where_t;

typedef struct st_get {
    struct st_get *next;
    rv_object_id_t id;
    st_gstate_t state;
    uint64_t token;
    int64_t deadline_ns; /* 0: none; INT64_MAX: forever */
    rv_store_buf_t *buf;
    rv_status_t *status;
    rv_sync_t *user; /* completed when done */
    st_obj_t *obj;   /* the entry this get fetches into */
    bool fetcher;    /* this get fetches obj */
    st_where_t where;
    rv_sync_t op;      /* the step in flight */
    bool found;        /* rivet.store.found came (it may overtake
                          the lookup's answer) */
    st_where_t fwhere; /* what it said */
    bool eager;        /* the transfer is by calls */
    bool pinned;       /* the owner pinned it for this get */
    unsigned retries;  /* lookups again after a copy went */
} st_get_t;

typedef struct st_worker {
    rv_worker_t *w;
    st_proc_t *proc;
    st_dent_t *dir;   /* the ids homed here */
    st_dent_t **tomb; /* the last ST_TOMBSTONES deleted ids */
    uint32_t tomb_at; /* the oldest of them, replaced next */
    st_get_t *gets;   /* in progress */
    uint64_t next_token;
    rv_store_seal_fn sub_fn;
    void *sub_arg;
    bool subscribed;
    /* Copies dropped (evicted) while the table was locked: their homes
     * are told once it is not (a call may progress, and the progress runs
     * handlers that take the lock). */
    rv_object_id_t *drops;
    size_t ndrops, capdrops;
    bool busy; /* in the progress hook */
} st_worker_t;

extern int st_slot;

static inline st_worker_t *st_of(const rv_worker_t *w)
{
    return st_slot < 0 ? NULL : rv_worker_layer(w, st_slot);
}

/* The handlers of the store's calls. */
typedef struct st_handlers {
    rv_handler_id_t add, lookup, found, del, drop, pin, fin, eager, chunk, sub,
        sealed;
} st_handlers_t;
extern st_handlers_t st_h;

/* Room for one more element in the array at *@p vp (@p n used, *@p cap
 * allocated, @p elem bytes each), doubling it; false when out of memory
 * (the array is unchanged). */
static inline bool st_grow(void *vp, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return true;
    void *v;
    memcpy(&v, vp, sizeof(v));
    size_t c = *cap ? 2 * *cap : 8;
    if ((v = realloc(v, c * elem)) == NULL)
        return false;
    memcpy(vp, &v, sizeof(v));
    *cap = c;
    return true;
}

/* store_id.c: the home worker of @p id. */
rv_tid_t st_home(const rv_object_id_t *id, uint32_t nworkers);
rv_status_t st_not_initialised(const char *what);

/* store_obj.c: the process's table (callers hold proc->lock) */
st_obj_t *st_find(st_proc_t *p, const rv_object_id_t *id);
/* Room for @p size bytes in store.capacity, evicting unreferenced
 * objects, least recently used first (their homes are told by
 * st_drops_flush). */
rv_status_t st_reserve(st_worker_t *sw, size_t size);
/* Tells the homes of the copies dropped; without the lock. */
void st_drops_flush(st_worker_t *sw);
void st_lru_remove(st_proc_t *p, st_obj_t *o);
void st_lru_push(st_proc_t *p, st_obj_t *o);
/* A reference or pin dropped: back on the LRU list, or freed when
 * deleted. */
void st_unused_check(st_worker_t *sw, st_obj_t *o);
/* Removes @p o from the table and frees its memory (on its allocator's
 * thread). */
void st_obj_free(st_worker_t *sw, st_obj_t *o);
void st_frees_run(st_worker_t *sw);
void st_view(const st_obj_t *o, rv_store_buf_t *buf);

/* store_dir.c: the home's side, and telling the home */
void st_dir_fini(st_worker_t *sw);
rv_status_t st_dir_register(rv_context_t *ctx);
/* Tells @p id's home that this process holds a copy of @p o (@p add) or
 * dropped its copy of @p id. */
void st_tell_home(st_worker_t *sw, const rv_object_id_t *id, const st_obj_t *o,
                  bool add);
/* Tells the subscribers of this process that @p o was sealed. */
void st_tell_subscribers(st_worker_t *sw, const st_obj_t *o);

/* store_calib.c: store.rndv_threshold auto, from each worker's start */
void st_calibrate(rv_worker_t *w);
rv_status_t st_calib_register(rv_context_t *ctx);

/* store_get.c: gets, and the owner's side of fetches */
rv_status_t st_get_start(st_worker_t *sw, const rv_object_id_t *id,
                         int64_t timeout_ms, rv_store_buf_t *buf,
                         rv_status_t *status, rv_sync_t *user);
unsigned st_gets_progress(st_worker_t *sw);
void st_gets_fini(st_worker_t *sw);
rv_status_t st_fetch_register(rv_context_t *ctx);
/* The home said @p token's object is sealed (or deleted). */
void st_get_found(st_worker_t *sw, uint64_t token, const st_where_t *where);

#endif
