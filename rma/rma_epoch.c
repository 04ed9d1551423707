/*
 * Distributed epoch-based reclamation (rv_epoch.h has the model).
 *
 * Epochs are a 64-bit counter starting at 1, never reused, so a token left
 * pinned in a stale epoch can never be mistaken for one in the current
 * epoch (Chapel's cyclic epochs cannot tell them apart).
 *
 * Safety argument. A token pinned in epoch p defers into limbo[p mod 4],
 * and the advance to epoch N frees limbo[(N-3) mod 4]: an object is freed
 * three advances after the epoch of the token that deferred it, not two.
 * Two are not enough: a reader pinned in p+1 may read an object just
 * before a writer still pinned in p unlinks it (the advance to p+1 only
 * needed the writer to be in p); the advance to p+2 needs the writer gone,
 * not the reader, and would free what the reader holds. (Across processes
 * it is worse: during an advance one process may already be in p+1 while
 * another is still in p.) Let G be the job's epoch when the object is
 * unlinked. While the deferring token is pinned in p the epoch cannot pass
 * p+1 (the advance to p+2 needs the token in p+1), so p >= G-1. Every
 * reader that could hold the object pinned no later than G, and the
 * advance to G+2 <= p+3 needs each of them gone. So freeing at p+3 is safe.
 * A block published late (after its list was taken) is freed by a later
 * reclamation of the same list, later still: late is always safe. Each
 * process's epoch is set by the reclaimer's advance call and read by pin;
 * a pin re-reads it after publishing the token, so a pinned token's epoch
 * is one the process had at that moment. The job-wide election flag is
 * held from the scan until every process has finished its advance, so
 * scans and advances never overlap.
 *
 * Limbo lists are multi-producer lists pushed with one atomic exchange
 * (wait-free): the pusher links the old head after the exchange, so a
 * reclaimer walking a list it took may find a link still being written
 * (UNLINKED) and waits for that one store. Blocks go back to their token
 * through a lock-free stack the token empties with one exchange.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rma_internal.h"
#include "rv_epoch.h"

#define EM_MAX 64      /* managers alive at once in a process */
#define BLOCK_OBJS 61  /* objects per block: 512-byte blocks */
#define BULK_OBJS 8192 /* objects per bulk delete call (64 KiB) */
#define NLIMBO 4       /* freed NLIMBO-1 advances after deferral */
#define UNLINKED ((em_block_t *)(uintptr_t)1)

typedef struct em_block {
    _Atomic(struct em_block *) next;
    rv_epoch_token_t *owner;
    uint64_t n;
    rv_gptr_t obj[BLOCK_OBJS];
} em_block_t;

struct rv_epoch_token {
    _Alignas(64) _Atomic uint64_t epoch; /* 0: not pinned */
    rv_epoch_manager_t *em;
    em_block_t *block; /* being filled, for block_epoch */
    uint64_t block_epoch;
    em_block_t *spare;              /* this thread's free blocks */
    _Atomic(em_block_t *) returned; /* given back by reclaimers */
    _Atomic uint64_t pins, deferred;
    struct rv_epoch_token *all_next; /* every token, never unlinked */
    struct rv_epoch_token *free_next;
};

struct rv_epoch_manager {
    uint32_t id;
    rv_context_t *ctx;
    rv_epoch_free_fn free_fn;
    void *arg;
    _Alignas(64) _Atomic uint64_t epoch;
    _Alignas(64) _Atomic(em_block_t *) limbo[NLIMBO];
    _Alignas(64) atomic_flag setting; /* this process's election */
    _Atomic(rv_epoch_token_t *) tokens;
    pthread_mutex_t lock; /* free_tokens */
    rv_epoch_token_t *free_tokens;
    /* the job-wide election word, in rank 0 */
    rv_rptr_t flag;
    _Atomic bool flag_known;
    uint64_t *flag_mem; /* rank 0: rv_mem_alloc'd by local 0 */
    uint64_t *scan;     /* the reclaimer's scan answers */
    _Atomic uint64_t attempts, elected, advanced, freed, bulk_sent;
};

static rv_handler_id_t global_id, scan_id, advance_id, delete_id;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(rv_epoch_manager_t *) table[EM_MAX];
static rv_epoch_manager_t *created; /* by local 0, for the rest */

static rv_epoch_manager_t *lookup(const void *args, size_t len)
{
    uint32_t id;
    if (len < sizeof(id))
        return NULL;
    memcpy(&id, args, sizeof(id));
    return id < EM_MAX ? atomic_load_explicit(&table[id], memory_order_acquire)
                       : NULL;
}

/* ---------------------------------------------------------------------- */
/* Blocks and limbo lists                                                  */

static em_block_t *block_get(rv_epoch_token_t *tok)
{
    if (tok->spare == NULL)
        tok->spare = atomic_exchange(&tok->returned, NULL);
    em_block_t *b = tok->spare;
    if (b != NULL) {
        tok->spare = atomic_load_explicit(&b->next, memory_order_relaxed);
    } else {
        b = malloc(sizeof(*b));
        if (b == NULL)
            return NULL;
        b->owner = tok;
    }
    b->n = 0;
    return b;
}

/* Wait-free push: exchange the head, then link the old one. */
static void list_push(_Atomic(em_block_t *) *head, em_block_t *b)
{
    atomic_store_explicit(&b->next, UNLINKED, memory_order_relaxed);
    em_block_t *old = atomic_exchange(head, b);
    atomic_store_explicit(&b->next, old, memory_order_release);
}

static em_block_t *list_next(em_block_t *b)
{
    em_block_t *n;
    while ((n = atomic_load_explicit(&b->next, memory_order_acquire)) ==
           UNLINKED)
        sched_yield(); /* its pusher is between two stores */
    return n;
}

/* Gives a reclaimed block back to its token (lock-free stack). */
static void block_return(em_block_t *b)
{
    rv_epoch_token_t *tok = b->owner;
    em_block_t *head = atomic_load(&tok->returned);
    do {
        atomic_store_explicit(&b->next, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak(&tok->returned, &head, b));
}

static void publish(rv_epoch_token_t *tok)
{
    if (tok->block != NULL && tok->block->n > 0)
        list_push(&tok->em->limbo[tok->block_epoch % NLIMBO], tok->block);
    else if (tok->block != NULL)
        block_return(tok->block);
    tok->block = NULL;
}

/* ---------------------------------------------------------------------- */
/* Tokens                                                                  */

rv_epoch_token_t *rv_epoch_register(rv_epoch_manager_t *em)
{
    pthread_mutex_lock(&em->lock);
    rv_epoch_token_t *tok = em->free_tokens;
    if (tok != NULL)
        em->free_tokens = tok->free_next;
    pthread_mutex_unlock(&em->lock);
    if (tok != NULL)
        return tok;
    if (posix_memalign((void **)&tok, 64, sizeof(*tok)) != 0)
        return NULL;
    memset(tok, 0, sizeof(*tok));
    tok->em = em;
    rv_epoch_token_t *head = atomic_load(&em->tokens);
    do {
        tok->all_next = head;
    } while (!atomic_compare_exchange_weak(&em->tokens, &head, tok));
    return tok;
}

void rv_epoch_deregister(rv_epoch_token_t *tok)
{
    if (tok == NULL)
        return;
    rv_epoch_manager_t *em = tok->em;
    atomic_store(&tok->epoch, 0);
    publish(tok);
    pthread_mutex_lock(&em->lock);
    tok->free_next = em->free_tokens;
    em->free_tokens = tok;
    pthread_mutex_unlock(&em->lock);
}

void rv_epoch_pin(rv_epoch_token_t *tok)
{
    rv_epoch_manager_t *em = tok->em;
    uint64_t e = atomic_load(&em->epoch), now;
    /* publish, then check the process's epoch did not move meanwhile (the
     * seq_cst store orders the token before the re-read and before every
     * access the caller makes under the pin) */
    for (;;) {
        atomic_store(&tok->epoch, e);
        now = atomic_load(&em->epoch);
        if (now == e)
            break;
        e = now;
    }
    atomic_store_explicit(
        &tok->pins, atomic_load_explicit(&tok->pins, memory_order_relaxed) + 1,
        memory_order_relaxed);
}

void rv_epoch_unpin(rv_epoch_token_t *tok)
{
    atomic_store_explicit(&tok->epoch, 0, memory_order_release);
    /* an epoch went by: the block's list may be reclaimed next, so it
     * should be in it (a token that idles otherwise keeps at most one
     * block until it pins again, deregisters or rv_epoch_clear) */
    if (tok->block != NULL &&
        tok->block_epoch !=
            atomic_load_explicit(&tok->em->epoch, memory_order_relaxed))
        publish(tok);
}

void rv_epoch_defer_delete(rv_epoch_token_t *tok, rv_gptr_t obj)
{
    uint64_t e = atomic_load_explicit(&tok->epoch, memory_order_relaxed);
    if (obj == RV_GPTR_NULL)
        return;
    if (e == 0) {
        rv_error("rv_epoch_defer_delete: the token is not pinned; the "
                 "object is kept in the current epoch's list");
        e = atomic_load(&tok->em->epoch);
    }
    if (tok->block != NULL &&
        (tok->block_epoch != e || tok->block->n == BLOCK_OBJS))
        publish(tok);
    if (tok->block == NULL) {
        tok->block = block_get(tok);
        tok->block_epoch = e;
        if (tok->block == NULL) {
            rv_error("rv_epoch_defer_delete: out of memory; object leaked");
            return;
        }
    }
    tok->block->obj[tok->block->n++] = obj;
    atomic_store_explicit(
        &tok->deferred,
        atomic_load_explicit(&tok->deferred, memory_order_relaxed) + 1,
        memory_order_relaxed);
}

/* ---------------------------------------------------------------------- */
/* Reclamation at each process                                             */

typedef struct {
    uint32_t id;
    uint32_t all; /* clear: every list and partial block */
    uint64_t epoch;
} em_args_t;

/* Whether every token of this process is unpinned or in @p epoch. */
static bool scan_local(rv_epoch_manager_t *em, uint64_t epoch)
{
    for (rv_epoch_token_t *t = atomic_load(&em->tokens); t != NULL;
         t = t->all_next) {
        uint64_t e = atomic_load(&t->epoch);
        if (e != 0 && e != epoch)
            return false;
    }
    return true;
}

static void free_local(rv_worker_t *w, rv_epoch_manager_t *em,
                       const rv_gptr_t *obj, size_t n)
{
    for (size_t i = 0; i < n; i++)
        em->free_fn(w, rv_gptr_addr(obj[i]), em->arg);
    atomic_fetch_add_explicit(&em->freed, n, memory_order_relaxed);
}

typedef struct {
    rv_gptr_t *obj;
    size_t n, cap;
} em_bucket_t;

/* Frees the objects of @p list: this process's own at once, the others'
 * scattered by owning rank and sent in bulk; waits until every owner has
 * freed them. The blocks go back to their tokens. */
static rv_status_t reclaim_list(rv_worker_t *w, rv_epoch_manager_t *em,
                                em_block_t *list)
{
    rv_context_t *ctx = em->ctx;
    int me = rv_rank(ctx), np = rv_size(ctx);
    em_bucket_t *bucket = calloc((size_t)np, sizeof(*bucket));
    rv_status_t st = bucket != NULL ? RV_OK : RV_ERR_NO_MEMORY;
    while (list != NULL) {
        em_block_t *b = list;
        list = list_next(b);
        for (uint64_t i = 0; i < b->n && st == RV_OK; i++) {
            rv_rank_t r = rv_gptr_rank(b->obj[i]);
            if (r == me) {
                free_local(w, em, &b->obj[i], 1);
                continue;
            }
            if (r >= np) {
                rv_error("rv_epoch: deferred object %#llx names rank %d of "
                         "%d; not freed",
                         (unsigned long long)b->obj[i], r, np);
                continue;
            }
            em_bucket_t *k = &bucket[r];
            if (k->n == k->cap) {
                size_t cap = k->cap ? 2 * k->cap : 256;
                rv_gptr_t *o = realloc(k->obj, cap * sizeof(*o));
                if (o == NULL) {
                    st = RV_ERR_NO_MEMORY;
                    break;
                }
                k->obj = o;
                k->cap = cap;
            }
            k->obj[k->n++] = b->obj[i];
        }
        block_return(b);
    }
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    em_args_t a = {.id = em->id};
    for (int r = 0; bucket != NULL && r < np; r++) {
        rv_tid_t to = rv_tid_make(ctx, r, rv_worker_local(w));
        for (size_t off = 0; off < bucket[r].n && st == RV_OK;
             off += BULK_OBJS) {
            size_t n =
                bucket[r].n - off < BULK_OBJS ? bucket[r].n - off : BULK_OBJS;
            st = rv_call_buffer(w, to, delete_id, &a, sizeof(a),
                                bucket[r].obj + off, n * sizeof(rv_gptr_t),
                                &sync, RV_NOTIFY_CONSUMED);
            if (st == RV_OK)
                atomic_fetch_add_explicit(&em->bulk_sent, 1,
                                          memory_order_relaxed);
        }
    }
    rv_status_t wst = rv_sync_wait(w, &sync);
    for (int r = 0; bucket != NULL && r < np; r++)
        free(bucket[r].obj);
    free(bucket);
    if (st != RV_OK)
        rv_error("rv_epoch: reclamation failed: %s; objects leaked",
                 rv_status_str(st));
    return st != RV_OK ? st : wst;
}

/* Moves this process to @p epoch and frees what that made safe (with
 * @p all, everything deferred: rv_epoch_clear). */
static rv_status_t advance_local(rv_worker_t *w, rv_epoch_manager_t *em,
                                 uint64_t epoch, bool all)
{
    em_block_t *list;
    if (!all) {
        atomic_store(&em->epoch, epoch);
        list = atomic_exchange(&em->limbo[(epoch + 1) % NLIMBO], NULL);
        return reclaim_list(w, em, list);
    }
    /* quiescent: partial blocks of every token too */
    for (rv_epoch_token_t *t = atomic_load(&em->tokens); t != NULL;
         t = t->all_next)
        publish(t);
    rv_status_t st = RV_OK;
    for (int i = 0; i < NLIMBO; i++) {
        rv_status_t s =
            reclaim_list(w, em, atomic_exchange(&em->limbo[i], NULL));
        if (st == RV_OK)
            st = s;
    }
    return st;
}

static rv_status_t on_scan(rv_worker_t *w, rv_call_t *call, void *arg)
{
    em_args_t a;
    rv_epoch_manager_t *em = lookup(call->args, call->args_len);
    (void)w;
    (void)arg;
    if (em == NULL || call->args_len != sizeof(a) ||
        call->ret_len < sizeof(uint64_t))
        return RV_ERR_INVALID;
    memcpy(&a, call->args, sizeof(a));
    uint64_t ok = scan_local(em, a.epoch);
    memcpy(call->ret, &ok, sizeof(ok));
    call->ret_len = sizeof(ok);
    return RV_OK;
}

static rv_status_t on_advance(rv_worker_t *w, rv_call_t *call, void *arg)
{
    em_args_t a;
    rv_epoch_manager_t *em = lookup(call->args, call->args_len);
    (void)arg;
    if (em == NULL || call->args_len != sizeof(a))
        return RV_ERR_INVALID;
    memcpy(&a, call->args, sizeof(a));
    return advance_local(w, em, a.epoch, a.all != 0);
}

static rv_status_t on_delete(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rv_epoch_manager_t *em = lookup(call->args, call->args_len);
    (void)arg;
    if (em == NULL || call->buf_len % sizeof(rv_gptr_t) != 0)
        return RV_ERR_INVALID;
    size_t n = call->buf_len / sizeof(rv_gptr_t);
    rv_gptr_t *obj = malloc(call->buf_len + 1);
    if (obj == NULL)
        return RV_ERR_NO_MEMORY;
    memcpy(obj, call->buf, call->buf_len); /* no alignment promised */
    free_local(w, em, obj, n);
    free(obj);
    return RV_OK;
}

static rv_status_t on_global(rv_worker_t *w, rv_call_t *call, void *arg)
{
    rv_epoch_manager_t *em = lookup(call->args, call->args_len);
    (void)w;
    (void)arg;
    if (em == NULL || em->flag_mem == NULL || call->ret_len < sizeof(rv_rptr_t))
        return RV_ERR_INVALID;
    memcpy(call->ret, &em->flag, sizeof(rv_rptr_t));
    call->ret_len = sizeof(rv_rptr_t);
    return RV_OK;
}

rv_status_t rma_epoch_register(rv_context_t *ctx)
{
    rv_status_t st =
        rv_am_register(ctx, "rivet.epoch.global", on_global, NULL, &global_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.epoch.scan", on_scan, NULL, &scan_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.epoch.advance", on_advance, NULL,
                            &advance_id);
    if (st == RV_OK)
        st = rv_am_register(ctx, "rivet.epoch.delete", on_delete, NULL,
                            &delete_id);
    return st;
}

/* ---------------------------------------------------------------------- */
/* The job-wide election and the reclaimer                                 */

static rv_status_t global_flag(rv_worker_t *w, rv_epoch_manager_t *em)
{
    if (atomic_load_explicit(&em->flag_known, memory_order_acquire))
        return RV_OK;
    rv_rptr_t p = {0};
    em_args_t a = {.id = em->id};
    rv_status_t st =
        rv_call_return(w, rv_tid_make(em->ctx, 0, rv_worker_local(w)),
                       global_id, &a, sizeof(a), &p, sizeof(p), NULL, 0);
    if (st == RV_OK && p.addr == 0)
        st = RV_ERR_NOT_FOUND;
    if (st != RV_OK)
        return st;
    em->flag = p; /* only the elected thread of this process writes it */
    atomic_store_explicit(&em->flag_known, true, memory_order_release);
    return RV_OK;
}

/* Takes the process's and the job's election flags; RV_ERR_AGAIN if
 * another holds one. With @p wait, waits (progressing) until it has. */
static rv_status_t elect(rv_worker_t *w, rv_epoch_manager_t *em, bool wait)
{
    uint64_t me = (uint64_t)rv_worker_tid(w) + 1, old = 0;
    while (atomic_flag_test_and_set(&em->setting)) {
        if (!wait)
            return RV_ERR_AGAIN;
        if (rv_progress(w) == 0)
            sched_yield();
    }
    rv_status_t st = global_flag(w, em);
    while (st == RV_OK) {
        st = rv_atomic_cswap(w, em->flag, 0, me, &old, NULL);
        if (st != RV_OK || old == 0 || !wait)
            break;
        if (rv_progress(w) == 0)
            sched_yield();
    }
    if (st == RV_OK && old == 0)
        return RV_OK;
    atomic_flag_clear(&em->setting);
    return st != RV_OK ? st : RV_ERR_AGAIN;
}

static rv_status_t unelect(rv_worker_t *w, rv_epoch_manager_t *em)
{
    uint64_t me = (uint64_t)rv_worker_tid(w) + 1, old = 0;
    rv_status_t st = rv_atomic_cswap(w, em->flag, me, 0, &old, NULL);
    if (st == RV_OK && old != me) {
        rv_error("rv_epoch: the election word held %llu, not %llu",
                 (unsigned long long)old, (unsigned long long)me);
        st = RV_ERR_INVALID;
    }
    atomic_flag_clear(&em->setting);
    return st;
}

/* Runs the advance (or clear) at every process, this one inline, the
 * others in parallel, and waits until all have freed their objects. */
static rv_status_t advance_all(rv_worker_t *w, rv_epoch_manager_t *em,
                               uint64_t epoch, bool all)
{
    rv_context_t *ctx = em->ctx;
    int me = rv_rank(ctx);
    em_args_t a = {.id = em->id, .all = all, .epoch = epoch};
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    rv_status_t st = RV_OK;
    for (int r = 0; r < rv_size(ctx) && st == RV_OK; r++)
        if (r != me)
            st = rv_call(w, rv_tid_make(ctx, r, rv_worker_local(w)), advance_id,
                         &a, sizeof(a), &sync, RV_NOTIFY_CONSUMED);
    rv_status_t lst = advance_local(w, em, epoch, all);
    rv_status_t wst = rv_sync_wait(w, &sync);
    return st != RV_OK ? st : lst != RV_OK ? lst : wst;
}

rv_status_t rv_epoch_try_reclaim(rv_worker_t *w, rv_epoch_manager_t *em,
                                 uint64_t *epoch_p)
{
    atomic_fetch_add_explicit(&em->attempts, 1, memory_order_relaxed);
    rv_status_t st = elect(w, em, false);
    if (st != RV_OK) {
        /* someone else reclaims and may be waiting for this worker */
        rv_progress(w);
        return st;
    }
    atomic_fetch_add_explicit(&em->elected, 1, memory_order_relaxed);

    /* Under the flag every process has the job's epoch. */
    rv_context_t *ctx = em->ctx;
    int me = rv_rank(ctx), np = rv_size(ctx);
    uint64_t epoch = atomic_load(&em->epoch);
    em_args_t a = {.id = em->id, .epoch = epoch};
    rv_sync_t sync;
    rv_sync_init(&sync, 0);
    for (int r = 0; r < np && st == RV_OK; r++) {
        em->scan[r] = 0;
        if (r != me)
            st = rv_call_return(w, rv_tid_make(ctx, r, rv_worker_local(w)),
                                scan_id, &a, sizeof(a), &em->scan[r],
                                sizeof(uint64_t), &sync, 0);
    }
    bool safe = scan_local(em, epoch);
    rv_status_t wst = rv_sync_wait(w, &sync);
    if (st == RV_OK)
        st = wst;
    for (int r = 0; r < np && st == RV_OK; r++)
        if (r != me && em->scan[r] != 1)
            safe = false;
    if (st == RV_OK && safe) {
        st = advance_all(w, em, epoch + 1, false);
        if (st == RV_OK) {
            atomic_fetch_add_explicit(&em->advanced, 1, memory_order_relaxed);
            if (epoch_p != NULL)
                *epoch_p = epoch + 1;
        }
    }
    rv_status_t ust = unelect(w, em);
    if (st == RV_OK && !safe)
        st = RV_ERR_AGAIN;
    return st != RV_OK ? st : ust;
}

rv_status_t rv_epoch_clear(rv_worker_t *w, rv_epoch_manager_t *em)
{
    rv_status_t st = elect(w, em, true);
    if (st != RV_OK)
        return st;
    st = advance_all(w, em, 0, true);
    rv_status_t ust = unelect(w, em);
    return st != RV_OK ? st : ust;
}

/* ---------------------------------------------------------------------- */
/* Creation, destruction, statistics                                       */

static void manager_free(rv_worker_t *w, rv_epoch_manager_t *em)
{
    for (rv_epoch_token_t *t = atomic_load(&em->tokens), *next; t != NULL;
         t = next) {
        next = t->all_next;
        if (t->block != NULL)
            free(t->block);
        em_block_t *b = t->spare, *bn;
        for (; b != NULL; b = bn) {
            bn = atomic_load(&b->next);
            free(b);
        }
        for (b = atomic_load(&t->returned); b != NULL; b = bn) {
            bn = atomic_load(&b->next);
            free(b);
        }
        free(t);
    }
    if (em->flag_mem != NULL)
        rv_mem_free(w, em->flag_mem);
    free(em->scan);
    pthread_mutex_destroy(&em->lock);
    free(em);
}

rv_status_t rv_epoch_manager_create(rv_worker_t *w, rv_epoch_free_fn free_fn,
                                    void *arg, rv_epoch_manager_t **em_p)
{
    rv_context_t *ctx = rv_worker_context(w);
    rv_status_t st = RV_OK;
    *em_p = NULL;
    if (delete_id == 0) {
        rv_error("rv_epoch_manager_create: call rv_rma_init before "
                 "rv_job_run");
        return RV_ERR_INVALID;
    }
    if (rv_size(ctx) - 1 > (int)RV_GPTR_MAX_RANK) {
        rv_error("rv_epoch_manager_create: %d processes; global pointers "
                 "name at most %u",
                 rv_size(ctx), RV_GPTR_MAX_RANK + 1);
        return RV_ERR_UNSUPPORTED;
    }
    int local = rv_worker_local(w);
    if (local == 0) {
        rv_epoch_manager_t *em = calloc(1, sizeof(*em));
        uint32_t id = 0;
        pthread_mutex_lock(&table_lock);
        while (id < EM_MAX && atomic_load(&table[id]) != NULL)
            id++;
        pthread_mutex_unlock(&table_lock);
        if (em != NULL) {
            em->id = id;
            em->ctx = ctx;
            em->free_fn = free_fn;
            em->arg = arg;
            atomic_init(&em->epoch, 1);
            atomic_flag_clear(&em->setting);
            pthread_mutex_init(&em->lock, NULL);
            em->scan = calloc((size_t)rv_size(ctx), sizeof(uint64_t));
            if (rv_rank(ctx) == 0) {
                em->flag_mem = rv_mem_alloc(w, 64, &em->flag);
                if (em->flag_mem != NULL) {
                    *em->flag_mem = 0;
                    atomic_store(&em->flag_known, true);
                }
            }
        }
        if (em == NULL || em->scan == NULL || id == EM_MAX ||
            (rv_rank(ctx) == 0 && em->flag_mem == NULL)) {
            rv_error("rv_epoch_manager_create: %s",
                     id == EM_MAX ? "too many managers alive"
                                  : "out of memory");
            if (em != NULL)
                manager_free(w, em);
            em = NULL;
            st = RV_ERR_NO_MEMORY;
        } else {
            atomic_store_explicit(&table[id], em, memory_order_release);
        }
        pthread_mutex_lock(&table_lock);
        created = em;
        pthread_mutex_unlock(&table_lock);
    }
    /* every process's instance exists after this barrier; the second
     * keeps local 0 from starting another creation before all read */
    rv_status_t bst = rv_barrier(w);
    pthread_mutex_lock(&table_lock);
    *em_p = created;
    pthread_mutex_unlock(&table_lock);
    rv_status_t bst2 = rv_barrier(w);
    if (*em_p == NULL)
        st = RV_ERR_NO_MEMORY;
    return st != RV_OK ? st : bst != RV_OK ? bst : bst2;
}

rv_status_t rv_epoch_manager_destroy(rv_worker_t *w, rv_epoch_manager_t *em)
{
    rv_status_t st = rv_barrier(w);
    if (rv_worker_tid(w) == 0 && st == RV_OK)
        st = rv_epoch_clear(w, em);
    rv_status_t bst = rv_barrier(w);
    if (rv_worker_local(w) == 0) {
        atomic_store(&table[em->id], NULL);
        manager_free(w, em);
    }
    return st != RV_OK ? st : bst;
}

void rv_epoch_stats(rv_epoch_manager_t *em, rv_epoch_stats_t *s)
{
    memset(s, 0, sizeof(*s));
    s->epoch = atomic_load(&em->epoch);
    for (rv_epoch_token_t *t = atomic_load(&em->tokens); t != NULL;
         t = t->all_next) {
        s->pins += atomic_load_explicit(&t->pins, memory_order_relaxed);
        s->deferred += atomic_load_explicit(&t->deferred, memory_order_relaxed);
    }
    s->attempts = atomic_load(&em->attempts);
    s->elected = atomic_load(&em->elected);
    s->advanced = atomic_load(&em->advanced);
    s->freed = atomic_load(&em->freed);
    s->bulk_sent = atomic_load(&em->bulk_sent);
}
