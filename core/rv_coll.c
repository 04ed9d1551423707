/*
 * Collectives among a running job's workers: rv_coll_allreduce and
 * rv_coll_allgather, up and down a binomial tree rooted at worker 0.
 *
 * Worker r's parent is r with its lowest set bit cleared; its children
 * are r + 2^k for every 2^k below that bit (every k for worker 0), and
 * its subtree is the contiguous range [r, r + lowbit(r)), which is what
 * makes a gather a concatenation. A worker waits for its children's
 * contributions (combined as they arrive, by inline handlers that never
 * wait), adds its own, sends the result up, and waits for the final
 * result to come down, which it passes on to its children.
 *
 * A child may report epoch e + 1 before its parent has entered it (the
 * parent forwarded e's result and went on with its own work), never
 * e + 2 (that needs e + 1's result, which needs the parent): the slots
 * for the two epochs are kept apart by parity.
 *
 * Every worker checks its children's contributions against its own
 * call's shape (which collective, its type, operation and size), so a
 * worker that calls another collective, or the same with another size,
 * is found by its parent wherever it is in the tree: the job ends naming
 * both calls, as MPI's erroneous programs do not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_core.h"

#define RV_HANDLER_COLL_UP "rivet.coll.up"
#define RV_HANDLER_COLL_DOWN "rivet.coll.down"

enum { COLL_REDUCE, COLL_GATHER };

/* The header extension of a contribution going up. */
typedef struct {
    uint64_t epoch;
    uint32_t kind;     /* COLL_REDUCE | COLL_GATHER */
    uint32_t type, op; /* reduce */
    uint32_t len;      /* reduce: bytes; gather: bytes per worker */
    uint32_t first;    /* gather: the first worker of the block */
    uint32_t nworkers; /* gather: workers in the block */
} coll_up_t;

static uint32_t lowbit(uint32_t r)
{
    return r & -r;
}

/* The end of @p r's subtree among @p n workers. */
static uint32_t subtree_end(uint32_t r, uint32_t n)
{
    uint64_t end = r == 0 ? n : (uint64_t)r + lowbit(r);
    return end > n ? n : (uint32_t)end;
}

static unsigned children(uint32_t r, uint32_t n)
{
    unsigned c = 0;
    for (uint32_t step = 1; r + step < subtree_end(r, n); step <<= 1)
        c++;
    return c;
}

/* Sums wrap for the integer types (no signed overflow), as documented. */
static inline uint64_t coll_add_u(uint64_t a, uint64_t b)
{
    return a + b;
}
static inline int64_t coll_add_i(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline double coll_add_d(double a, double b)
{
    return a + b;
}
#define coll_add(a, b)                                                         \
    _Generic((a), uint64_t                                                     \
             : coll_add_u, int64_t                                             \
             : coll_add_i, double                                              \
             : coll_add_d)(a, b)

#define COMBINE(T, a, b, count, op)                                            \
    do {                                                                       \
        T *x_ = (T *)(a);                                                      \
        const T *y_ = (const T *)(b);                                          \
        for (size_t i_ = 0; i_ < (count); i_++) {                              \
            T v_;                                                              \
            memcpy(&v_, &y_[i_], sizeof(v_));                                  \
            if ((op) == RV_COLL_SUM)                                           \
                x_[i_] = coll_add(x_[i_], v_);                                 \
            else if ((op) == RV_COLL_MIN ? v_ < x_[i_] : v_ > x_[i_])          \
                x_[i_] = v_;                                                   \
        }                                                                      \
    } while (0)

/* acc = acc op in, @p len bytes of @p type elements. */
static void combine(void *acc, const void *in, size_t len, uint32_t type,
                    uint32_t op)
{
    size_t count = len / 8;
    switch (type) {
    case RV_COLL_U64:
        COMBINE(uint64_t, acc, in, count, op);
        break;
    case RV_COLL_I64:
        COMBINE(int64_t, acc, in, count, op);
        break;
    default:
        COMBINE(double, acc, in, count, op);
        break;
    }
}

/* A collective's call in words: "rv_coll_allreduce of 4 u64 (sum)". */
static void shape_str(uint32_t kind, uint32_t type, uint32_t op, uint32_t len,
                      char *buf, size_t size)
{
    static const char *const types[] = {"u64", "i64", "double"};
    static const char *const ops[] = {"sum", "min", "max"};
    if (kind == COLL_GATHER)
        snprintf(buf, size, "rv_coll_allgather of %u bytes", len);
    else
        snprintf(buf, size, "rv_coll_allreduce of %u %s (%s)", len / 8,
                 type < 3 ? types[type] : "?", op < 3 ? ops[op] : "?");
}

/* Checks worker @p who's call @p h of the slot's collective against the
 * shape the slot holds (taking it when it holds none): a different one
 * ends the job, naming both. */
static void shape_check(rv_worker_t *w, rv_coll_slot_t *s, const coll_up_t *h,
                        uint32_t who)
{
    if (!s->shaped) {
        s->shaped = true;
        s->kind = h->kind;
        s->type = h->type;
        s->op = h->op;
        s->len = h->len;
        s->shaper = who;
        return;
    }
    if (s->kind == h->kind && s->len == h->len &&
        (h->kind == COLL_GATHER || (s->type == h->type && s->op == h->op)))
        return;
    char a[80], b[80], why[320];
    shape_str(s->kind, s->type, s->op, s->len, a, sizeof(a));
    shape_str(h->kind, h->type, h->op, h->len, b, sizeof(b));
    snprintf(why, sizeof(why),
             "collective %llu: worker %u called %s, worker %u %s; every "
             "worker makes the same collectives in the same order, with the "
             "same size, type and operation",
             (unsigned long long)s->epoch, s->shaper, a, who, b);
    rv_abort(w->ctx, 1, why);
}

/* The slot of @p epoch, emptied when it held an older one. */
static rv_coll_slot_t *slot_of(rv_worker_t *w, uint64_t epoch, size_t need)
{
    rv_coll_slot_t *s = &w->coll.slot[epoch & 1];
    if (s->epoch != epoch) {
        s->epoch = epoch;
        s->arrived = 0;
        s->shaped = false;
    }
    if (s->cap < need) {
        uint8_t *b = realloc(s->buf, need);
        if (b == NULL)
            return NULL;
        s->buf = b;
        s->cap = need;
    }
    return s;
}

/* A child's contribution: combined into the slot of its epoch. */
static rv_status_t on_up(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    coll_up_t h;
    (void)arg;
    if (msg->xhdr_len != sizeof(h)) {
        rv_error("dropped a malformed collective contribution from worker "
                 "%u",
                 msg->src);
        return RV_OK;
    }
    memcpy(&h, msg->xhdr, sizeof(h));
    uint32_t me = w->tid;
    size_t need =
        h.kind == COLL_REDUCE
            ? h.len
            : (size_t)(subtree_end(me, rv_nworkers(w->ctx)) - me) * h.len;
    size_t at = h.kind == COLL_REDUCE ? 0 : (size_t)(h.first - me) * h.len;
    size_t bytes = h.kind == COLL_REDUCE ? h.len : (size_t)h.nworkers * h.len;
    /* The header is checked against the message before it sizes a
     * buffer: a forged one must not allocate what it names. */
    bool fits = h.len > 0 && need <= RV_COLL_MAX_BYTES && h.first >= me &&
                at + bytes <= need && msg->len == bytes;
    rv_coll_slot_t *s = fits ? slot_of(w, h.epoch, need) : NULL;
    if (s == NULL) {
        rv_error("cannot take a collective contribution from worker %u (%zu "
                 "bytes)",
                 msg->src, msg->len);
        return RV_OK;
    }
    shape_check(w, s, &h, msg->src);
    /* The worker's own contribution is combined last (coll_run), so the
     * first child's bytes are copied, later ones combined. */
    if (h.kind == COLL_REDUCE && s->arrived > 0)
        combine(s->buf, msg->data, bytes, h.type, h.op);
    else
        memcpy(s->buf + at, msg->data, bytes);
    s->arrived++;
    return RV_OK;
}

/* The result coming down: into the waiting caller's buffer. */
static rv_status_t on_down(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    uint64_t epoch;
    (void)arg;
    if (msg->xhdr_len != sizeof(epoch)) {
        rv_error("dropped a malformed collective result from worker %u",
                 msg->src);
        return RV_OK;
    }
    memcpy(&epoch, msg->xhdr, sizeof(epoch));
    /* Only a worker below the root waiting for this epoch's result takes
     * one: never into the buffer of a collective that returned (or none,
     * before the first). */
    if (epoch != w->coll.epoch || epoch == w->coll.released || w->tid == 0 ||
        w->coll.out == NULL || msg->len != w->coll.out_len) {
        rv_error("dropped a collective result from worker %u for epoch %lu "
                 "(%zu bytes), expected epoch %lu (%zu bytes)",
                 msg->src, (unsigned long)epoch, msg->len,
                 (unsigned long)w->coll.epoch, w->coll.out_len);
        return RV_OK;
    }
    memcpy(w->coll.out, msg->data, msg->len);
    w->coll.released = epoch;
    return RV_OK;
}

/* Waits for the children, sends up, waits for the result, sends down.
 * @p mine: this worker's part (reduce: elements; gather: its bytes). */
static rv_status_t coll_run(rv_worker_t *w, coll_up_t *h, const void *mine,
                            void *out, size_t out_len)
{
    uint32_t n = rv_nworkers(w->ctx), me = w->tid;
    uint64_t epoch = h->epoch = ++w->coll.epoch;
    size_t need = h->kind == COLL_REDUCE
                      ? h->len
                      : (size_t)(subtree_end(me, n) - me) * h->len;
    rv_coll_slot_t *s = slot_of(w, epoch, need);
    if (s == NULL)
        return RV_ERR_NO_MEMORY;
    shape_check(w, s, h, me);
    w->coll.out = out;
    w->coll.out_len = out_len;
    unsigned want = children(me, n);
    while (s->arrived < want)
        rv_progress(w);
    if (h->kind == COLL_GATHER)
        memcpy(s->buf, mine, h->len);
    else if (want > 0)
        combine(s->buf, mine, h->len, h->type, h->op);
    else
        memcpy(s->buf, mine, h->len);
    rv_status_t st;
    if (me != 0) {
        h->first = me;
        h->nworkers = subtree_end(me, n) - me;
        st = rv_sendx(w, me & (me - 1), w->ctx->coll_up_id, h, sizeof(*h),
                      &(struct iovec){.iov_base = s->buf, .iov_len = need}, 1,
                      NULL);
        if (st != RV_OK)
            return st;
        while (w->coll.released != epoch)
            rv_progress(w);
    } else {
        memcpy(out, s->buf, out_len);
    }
    /* Down to the children, largest subtree first. */
    uint32_t steps[32];
    unsigned k = 0;
    for (uint32_t step = 1; me + step < subtree_end(me, n); step <<= 1)
        steps[k++] = step;
    while (k-- > 0) {
        st = rv_sendx(
            w, me + steps[k], w->ctx->coll_down_id, &epoch, sizeof(epoch),
            &(struct iovec){.iov_base = out, .iov_len = out_len}, 1, NULL);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}

static bool coll_refused(rv_worker_t *w, const char *what)
{
    if (w->progress_depth == 0 && !w->in_callback)
        return false;
    rv_error("%s called from a handler; collectives are called from the "
             "worker's own code",
             what);
    return true;
}

rv_status_t rv_coll_allreduce(rv_worker_t *w, void *out, const void *in,
                              size_t count, rv_coll_type_t type,
                              rv_coll_op_t op)
{
    if (coll_refused(w, "rv_coll_allreduce"))
        return RV_ERR_INVALID;
    if (count == 0 || count > RV_COLL_MAX_BYTES / 8 || type > RV_COLL_DOUBLE ||
        op > RV_COLL_MAX) {
        rv_error("rv_coll_allreduce of %zu elements of type %d, operation "
                 "%d: 1 to %u elements of a known type and operation",
                 count, (int)type, (int)op, RV_COLL_MAX_BYTES / 8);
        return RV_ERR_INVALID;
    }
    coll_up_t h = {.kind = COLL_REDUCE,
                   .type = type,
                   .op = op,
                   .len = (uint32_t)(count * 8)};
    return coll_run(w, &h, in, out, count * 8);
}

rv_status_t rv_coll_allgather(rv_worker_t *w, void *out, const void *in,
                              size_t len)
{
    if (coll_refused(w, "rv_coll_allgather"))
        return RV_ERR_INVALID;
    size_t n = rv_nworkers(w->ctx);
    if (len == 0 || len > RV_COLL_MAX_BYTES / n) {
        rv_error("rv_coll_allgather of %zu bytes per worker: 1 to %zu", len,
                 RV_COLL_MAX_BYTES / n);
        return RV_ERR_INVALID;
    }
    uintptr_t o = (uintptr_t)out, i = (uintptr_t)in;
    if (o < i + len && i < o + n * len) {
        rv_error("rv_coll_allgather: the result (%zu bytes at %p) overlaps "
                 "this worker's bytes (%zu at %p)",
                 n * len, out, len, in);
        return RV_ERR_INVALID;
    }
    coll_up_t h = {.kind = COLL_GATHER, .len = (uint32_t)len};
    return coll_run(w, &h, in, out, n * len);
}

/* The names before 0.3 (rv_coll.h), source first. */
rv_status_t rv_allreduce(rv_worker_t *w, const void *in, void *out,
                         size_t count, rv_coll_type_t type, rv_coll_op_t op)
{
    return rv_coll_allreduce(w, out, in, count, type, op);
}

rv_status_t rv_allgather(rv_worker_t *w, const void *in, size_t len, void *out)
{
    return rv_coll_allgather(w, out, in, len);
}

void rv__coll_fini(rv_worker_t *w)
{
    for (int i = 0; i < 2; i++) {
        free(w->coll.slot[i].buf);
        w->coll.slot[i].buf = NULL;
        w->coll.slot[i].cap = 0;
    }
}

rv_status_t rv__coll_init(rv_context_t *ctx)
{
    rv_status_t st = rv_handler_register(ctx, RV_HANDLER_COLL_UP, on_up, NULL,
                                         RV_HANDLER_INLINE, &ctx->coll_up_id);
    if (st != RV_OK)
        return st;
    return rv_handler_register(ctx, RV_HANDLER_COLL_DOWN, on_down, NULL,
                               RV_HANDLER_INLINE, &ctx->coll_down_id);
}
