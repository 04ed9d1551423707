/*
 * Fuzz target: the object store's calls from other workers, as the
 * target runs them: the directory's handlers at an object's home
 * (store/store_dir.c: rivet.store.add, lookup, found, del, drop, sub and
 * sealed) and the owner's side of a fetch (store/store_get.c: eager, pin,
 * chunk and fin), each reached through am's call execution (am_run_call)
 * by its handler id, as a call decoded from a batch, a ring or a local
 * block reaches it, on a worker whose store holds objects of its own and
 * gets of its own in progress.
 *
 * The store is installed in a context of its own (rv_store_init, with
 * rma and am below it), and every input starts and stops am's and the
 * store's workers on one worker as rv_job_run does, over a transport of
 * the harness's: what the worker sends (the answers, the calls the
 * handlers make) leaves at once and goes nowhere. rma's worker is not
 * started: the objects' memory is the harness's, of exactly their size,
 * so that a read past one is seen; they are put in the table as
 * rv_store_create puts them there, then sealed by rv_store_seal, their
 * bytes a pattern that tells each byte's object and offset, so that a
 * result holding bytes of another place is seen too. A result buffer of
 * a call from this process is exactly the length its caller gave, so
 * that a handler writing past it is seen.
 *
 * The input is: the objects (a count, low 3 bits, then per object: the
 * id (u8, one of a few, so that calls name them), how it is (u8: bits
 * 0-1 sealed, being created or being fetched here, bit 2 held by a get
 * here), data bytes (u16, at most 8 KiB), metadata bytes (u8)); whether
 * the worker subscribed to seals (u8, bit 0); the gets in progress (a
 * count, low 2 bits, then per get: the id (u8) and whether it waits for
 * the seal (u8)); then operations, each an op byte (low 2 bits the
 * operation) and its operands:
 *
 *   0 call    handler (u8: one of the 11, or an id nothing has), source
 *             worker (u8), mode (u8), result length (u16), then the
 *             arguments: with mode bit 0 the handler's own struct (its
 *             bytes from the input, the id by index, a token of a get
 *             and piece offsets and lengths made small unless mode bit
 *             4 says raw), else a length (u8) and that many bytes. Mode
 *             bits 2-3: a plain call; rv_call_return from a thread of
 *             this process (the result straight into the caller's
 *             buffer); rv_call_return from another process (the result
 *             answered by am); or any call header flags (u32)
 *   1 step    the worker's progress (rv_progress without a transport)
 *   2 answer  get (u8), then an st_where_t: the home's answer to the
 *             lookup of that get, if it waits for one
 *   3 seal    object (u8): an object being created here is sealed
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_internal.h"
#include "fuzz.h"
#include "rv_core.h"
#include "store_internal.h"

#define NPROCS 2
#define NTHREADS 2
#define NWORKERS (NPROCS * NTHREADS)
#define ME 0   /* the worker that runs the calls: rank 0, thread 0 */
#define NIDS 8 /* the ids inputs name */
#define MAX_OBJS 8
#define MAX_GETS 4
#define DATA_MAX 8192
#define ARGS_MAX 256

/* The arguments of the store's calls, as store_dir.c and store_get.c lay
 * them out (the input may give any other length too). */
typedef struct {
    rv_object_id_t id;
    uint64_t data_size, meta_size;
    uint32_t add;
} add_args_t;
typedef struct {
    rv_object_id_t id;
    uint64_t token;
    uint32_t wait;
} lookup_args_t;
typedef struct {
    uint64_t token;
    st_where_t where;
} found_args_t;
typedef struct {
    rv_object_id_t id;
    uint64_t data_size;
    rv_rank_t owner;
} sealed_args_t;
typedef struct {
    rv_object_id_t id;
    uint64_t off, len;
} piece_args_t;

enum {
    H_ADD,
    H_LOOKUP,
    H_FOUND,
    H_DEL,
    H_DROP,
    H_SUB,
    H_SEALED,
    H_EAGER,
    H_PIN,
    H_CHUNK,
    H_FIN,
    H_NONE,
    H_COUNT
};

static rv_context_t ctx;
static rv_bootstrap_t bs = {.size = NPROCS};
static rv_transport_ops_t ops;
static rv_object_id_t ids[NIDS];
static volatile uint64_t sink;

/* The state of one input. */
static rv_worker_t w;
static rv_sync_t user, callers; /* of the gets; of this process's calls */
static rv_store_buf_t gbufs[MAX_GETS];
static rv_status_t gstatus[MAX_GETS];
static struct {
    uint8_t *base;
    size_t len;
} allocs[MAX_OBJS]; /* the objects' memory */
static unsigned nallocs;

static void touch(const void *p, size_t len)
{
    fuzz_touch(&sink, p, len);
}

/* The transport: what is sent leaves at once, its bytes read as the
 * transport would read them. It registers no memory: am's allocators
 * only ask what it can do (calls go over send without batches, so they
 * never take a chunk), and rma's worker, which would, is not started. */
static void t_query(rv_transport_t *tp, rv_transport_caps_t *caps)
{
    (void)tp;
    memset(caps, 0, sizeof(*caps));
}

static rv_status_t t_mem_register(rv_transport_t *tp, void *addr, size_t len,
                                  rv_tmem_t **mem_p)
{
    (void)tp;
    (void)addr;
    (void)len;
    (void)mem_p;
    return RV_ERR_UNSUPPORTED;
}

static rv_status_t t_am_send(rv_tworker_t *tw, uint32_t peer, const void *hdr,
                             size_t hdr_len, const struct iovec *iov,
                             size_t iovcnt, unsigned flags, rv_completion_fn cb,
                             void *arg)
{
    (void)tw;
    (void)peer;
    (void)flags;
    (void)cb;
    (void)arg;
    touch(hdr, hdr_len);
    for (size_t i = 0; i < iovcnt; i++)
        touch(iov[i].iov_base, iov[i].iov_len);
    return RV_OK;
}

/* rv_store_subscribe's callback. */
static void on_seal(rv_worker_t *wk, const rv_object_id_t *id, size_t data_size,
                    rv_rank_t owner, void *arg)
{
    (void)wk;
    (void)arg;
    touch(id, sizeof(*id));
    sink += data_size + owner;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    rv_config_t *config;
    char why[256];
    (void)argc;
    (void)argv;
    rv_log_level = RV_LOG_FATAL; /* drops are counted, not read */
    /* The keys this target depends on, whatever the environment says:
     * calls leave at once over send (no batches, rings or local queues
     * hold anything for later), no service threads. */
    static const char *keys[][2] = {
        {"job.threads", "2"},           {"job.service_threads", "0"},
        {"job.stats", "off"},           {"am.path", "send"},
        {"am.aggregation", "none"},     {"am.local_bypass", "false"},
        {"store.capacity", "1MiB"},     {"store.rndv_threshold", "32KiB"},
        {"store.preallocate", "false"},
    };
    if (rv_config_load(NULL, &config, why, sizeof(why)) != RV_OK)
        abort();
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (rv_config_set(config, keys[i][0], keys[i][1]) != RV_OK)
            abort();
    ops.query = t_query;
    ops.mem_register = t_mem_register;
    ops.am_send = t_am_send;
    ctx.config = config;
    ctx.core = rv_core_config(config);
    ctx.bs = &bs;
    ctx.ops = &ops;
    if (rv_store_init(&ctx) != RV_OK)
        abort();
    for (int i = 0; i < NIDS; i++) {
        char name[16];
        int n = snprintf(name, sizeof(name), "object-%d", i);
        rv_object_id_of(name, (size_t)n, &ids[i]);
    }
    return 0;
}

/* Byte @p i of the object with id @p k (data, then metadata): never 0,
 * and different for another object or offset nearby. */
FUZZ_NOCOV static uint8_t pattern(unsigned k, size_t i)
{
    return (uint8_t)(((i * 7 + k * 31 + (i >> 8)) % 255) + 1);
}

/* The bytes of object @p k from offset @p off: written when it is made,
 * checked in what a fetch was served. */
FUZZ_NOCOV static void pattern_fill(uint8_t *p, unsigned k, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = pattern(k, i);
}

FUZZ_NOCOV static bool pattern_holds(const uint8_t *p, unsigned k, size_t off,
                                     size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != pattern(k, off + i))
            return false;
    return true;
}

static rv_handler_id_t handler_of(unsigned h)
{
    const rv_handler_id_t *all[] = {&st_h.add,    &st_h.lookup, &st_h.found,
                                    &st_h.del,    &st_h.drop,   &st_h.sub,
                                    &st_h.sealed, &st_h.eager,  &st_h.pin,
                                    &st_h.chunk,  &st_h.fin};
    return h < H_NONE ? *all[h] : rv_handler_id("fuzz.none");
}

/* The length of handler @p h's own arguments. */
static size_t args_size(unsigned h)
{
    switch (h) {
    case H_ADD:
        return sizeof(add_args_t);
    case H_LOOKUP:
        return sizeof(lookup_args_t);
    case H_FOUND:
        return sizeof(found_args_t);
    case H_SUB:
        return sizeof(rv_tid_t);
    case H_SEALED:
        return sizeof(sealed_args_t);
    case H_CHUNK:
        return sizeof(piece_args_t);
    default:
        return sizeof(rv_object_id_t);
    }
}

/* Handler @p h's arguments from the input at @p args; their length. The
 * id an object call names, by index, in *@p k (NIDS: none). */
static size_t read_args(fuzz_in_t *in, unsigned h, uint8_t mode, uint8_t *args,
                        unsigned *k)
{
    *k = NIDS;
    if (!(mode & 1)) {
        size_t len = fuzz_u8(in);
        fuzz_take(in, args, len);
        return len;
    }
    size_t len = args_size(h);
    fuzz_take(in, args, len);
    bool raw = mode & 0x10;
    if (h == H_FOUND) {
        found_args_t a;
        memcpy(&a, args, sizeof(a));
        if (!raw)
            a.token %= MAX_GETS + 1; /* the tokens of the gets: 1, 2... */
        memcpy(args, &a, sizeof(a));
    } else if (h != H_SUB) {
        /* Every other call names an object first. */
        *k = args[0] % NIDS;
        memcpy(args, &ids[*k], sizeof(rv_object_id_t));
    }
    if (h == H_CHUNK && !raw) {
        piece_args_t a;
        memcpy(&a, args, sizeof(a));
        a.off %= DATA_MAX + 512;
        a.len %= DATA_MAX + 512;
        memcpy(args, &a, sizeof(a));
    }
    return len;
}

/* The result of an eager fetch or a piece, as a caller of this process
 * received it in @p ret: nothing (zeros, as am gave it to the handler),
 * or bytes of the object named, at their place in it. */
static void check_result(unsigned h, unsigned k, const uint8_t *args,
                         const uint8_t *ret, size_t ret_len)
{
    st_proc_t *p = st_of(&w)->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, &ids[k]);
    size_t size = o != NULL ? o->data_size + o->meta_size : 0;
    pthread_mutex_unlock(&p->lock);
    size_t off = 0, len = 0;
    if (h == H_EAGER && ret_len >= ST_HEAD) {
        int64_t status;
        memcpy(&status, ret, sizeof(status));
        if (status != RV_OK)
            return;
        off = 0;
        len = size;
        ret += ST_HEAD;
        ret_len -= ST_HEAD;
    } else if (h == H_CHUNK && ret_len > 0 && ret[0] != 0) {
        piece_args_t a;
        memcpy(&a, args, sizeof(a));
        off = a.off;
        len = a.len;
    } else {
        return;
    }
    if (o == NULL || off > size || len > size - off || len > ret_len)
        abort(); /* served bytes of no object, or past its end */
    if (!pattern_holds(ret, k, off, len))
        abort(); /* bytes from outside the object */
}

/* A call from worker @p src, run as am runs a decoded call: with the
 * worker inside progress, as a handler runs. */
static void op_call(fuzz_in_t *in)
{
    unsigned h = fuzz_u8(in) % H_COUNT, k;
    rv_tid_t src = fuzz_u8(in) % NWORKERS;
    uint8_t mode = fuzz_u8(in);
    size_t ret_len = fuzz_u16(in);
    uint8_t buf[ARGS_MAX];
    size_t len = read_args(in, h, mode, buf, &k);
    uint8_t *args = fuzz_copy(buf, len);
    uint8_t *ret = NULL;
    am_call_t c = {.handler = handler_of(h),
                   .args = args,
                   .args_len = len,
                   .hdr = {.args_len = (uint32_t)len}};
    switch ((mode >> 2) & 3) {
    case 0: /* rv_call */
        break;
    case 1: /* rv_call_return from a thread of this process */
        src %= NTHREADS;
        ret = fuzz_alloc(ret_len);
        c.local = true;
        c.hdr.flags = AM_LOCAL | AM_NOTIFY | AM_RETURN;
        c.hdr.sync = (uintptr_t)&callers;
        c.hdr.ret = (uintptr_t)ret;
        c.hdr.ret_len = (uint32_t)ret_len;
        atomic_fetch_add(&callers.pending, 1);
        break;
    case 2: /* rv_call_return from another process */
        c.hdr.flags = AM_NOTIFY | AM_RETURN;
        c.hdr.sync = 0x5e;
        c.hdr.ret = 0x7e7;
        c.hdr.ret_len = (uint32_t)ret_len;
        break;
    default: /* whatever a header may say */
        fuzz_take(in, &c.hdr.flags, sizeof(c.hdr.flags));
        c.hdr.ret_len = (uint32_t)ret_len;
        c.hdr.root = src;
        break;
    }
    c.src = src;
    am_worker_t *aw = am_of(&w);
    w.progress_depth++;
    am_run_call(aw, &c);
    am_owed_flush(aw); /* as the local poll does after a block */
    w.progress_depth--;
    if (ret != NULL) {
        if (k < NIDS && (mode & 1))
            check_result(h, k, args, ret, ret_len);
        touch(ret, ret_len);
        fuzz_free(ret, ret_len);
    }
    fuzz_free(args, len);
}

/* Frees the objects' memory that the store let go, as rv_mem_free does
 * from the worker's progress (st_frees_run): the memory is the
 * harness's. */
static void frees_run(void)
{
    st_frees_t *f = &st_of(&w)->proc->frees[rv_worker_local(&w)];
    for (size_t i = 0; i < f->n; i++) {
        for (unsigned j = 0; j < nallocs; j++) {
            if (allocs[j].base == f->v[i]) {
                fuzz_free(allocs[j].base, allocs[j].len);
                allocs[j] = allocs[--nallocs];
                break;
            }
        }
    }
    f->n = 0;
}

/* The worker's progress: what rv_progress runs after the transport's. */
static void step(void)
{
    frees_run();
    w.progress_depth++;
    rv__layers_progress(&w);
    w.progress_depth--;
}

static void op_answer(fuzz_in_t *in)
{
    unsigned k = fuzz_u8(in);
    st_where_t where;
    fuzz_take(in, &where, sizeof(where));
    st_get_t *g = st_of(&w)->gets;
    for (unsigned i = 0; g != NULL && i < k % MAX_GETS; i++)
        g = g->next;
    if (g == NULL || g->state != G_LOOKUP || rv_sync_done(&g->op))
        return;
    /* As rivet.am.done writes the result into the caller's buffer. */
    g->where = where;
    rv_sync_complete(&g->op, RV_OK);
}

static void op_seal(fuzz_in_t *in)
{
    const rv_object_id_t *id = &ids[fuzz_u8(in) % NIDS];
    st_proc_t *p = st_of(&w)->proc;
    pthread_mutex_lock(&p->lock);
    st_obj_t *o = st_find(p, id);
    bool created = o != NULL && o->state == ST_CREATED;
    pthread_mutex_unlock(&p->lock);
    if (created)
        rv_store_seal(&w, id);
}

/* An object of this process: being created (as rv_store_create leaves
 * it, in memory of the harness's), sealed (rv_store_seal) and perhaps
 * held by a get here (rv_store_get), or being fetched (the entry a get
 * makes for it). */
static void make_object(fuzz_in_t *in)
{
    unsigned k = fuzz_u8(in) % NIDS;
    uint8_t how = fuzz_u8(in);
    size_t data_size = fuzz_u16(in) % (DATA_MAX + 1);
    size_t meta_size = fuzz_u8(in), total = data_size + meta_size;
    st_worker_t *sw = st_of(&w);
    st_proc_t *p = sw->proc;
    pthread_mutex_lock(&p->lock);
    if (st_find(p, &ids[k]) != NULL ||
        ((how & 3) != 2 && st_reserve(sw, total) != RV_OK)) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    st_obj_t *o = calloc(1, sizeof(*o));
    if (o == NULL)
        abort();
    o->id = ids[k];
    if ((how & 3) == 2) {
        o->state = ST_FETCHING;
        o->transferring = true;
    } else {
        uint8_t *base = fuzz_alloc(ST_HEAD + total);
        allocs[nallocs].base = base;
        allocs[nallocs].len = ST_HEAD + total;
        nallocs++;
        memset(base, 0, ST_HEAD);
        pattern_fill(base + ST_HEAD, k, total);
        o->state = ST_CREATED;
        o->base = base;
        o->mem = base + ST_HEAD;
        o->data_size = data_size;
        o->meta_size = meta_size;
        o->rptr = (rv_rptr_t){.addr = (uintptr_t)o->mem};
        o->alloc_local = rv_worker_local(&w);
        o->refs = 1;
    }
    HASH_ADD(hh, p->objs, id.bytes, RV_OBJECT_ID_SIZE, o);
    pthread_mutex_unlock(&p->lock);
    if ((how & 3) == 1 || (how & 3) == 2)
        return;
    rv_store_seal(&w, &ids[k]);
    if (how & 4) {
        rv_store_buf_t b;
        rv_store_get(&w, &ids[k], 1, 0, &b, NULL);
    }
}

/* Whether the layer in slot @p i runs on the worker: all but rma. */
static bool started(int i)
{
    return strcmp(ctx.layers[i].ops->name, "rma") != 0;
}

static void setup(fuzz_in_t *in)
{
    memset(&w, 0, sizeof(w));
    w.ctx = &ctx;
    w.tid = ME;
    w.numa_node = -1;
    w.view.tops = &ops;
    /* As rv_job_run starts them (rv__layers_start), bottom up. */
    for (int i = 0; i < ctx.nlayers; i++)
        if (started(i) && ctx.layers[i].ops->worker_start(&w) != RV_OK)
            abort();
    rv_sync_init(&user, 0);
    rv_sync_init(&callers, 0);

    unsigned nobj = fuzz_u8(in) % MAX_OBJS;
    for (unsigned i = 0; i < nobj; i++)
        make_object(in);
    if (fuzz_u8(in) & 1) {
        /* What rv_store_subscribe leaves, without its calls. */
        st_worker_t *sw = st_of(&w);
        sw->sub_fn = on_seal;
        sw->subscribed = true;
    }
    unsigned ngets = fuzz_u8(in) % MAX_GETS;
    for (unsigned i = 0; i < ngets; i++) {
        const rv_object_id_t *id = &ids[fuzz_u8(in) % NIDS];
        int64_t timeout = fuzz_u8(in) & 1 ? RV_STORE_WAIT_FOREVER : 0;
        rv_store_get_async(&w, id, 1, timeout, &gbufs[i], &gstatus[i], &user);
    }
}

/* The job ends: the layers stop as rv_job_run stops them, top down. */
static void teardown(void)
{
    st_proc_t *p = st_of(&w)->proc;
    frees_run();
    /* The stop frees the table's entries but not the record of who
     * pinned them (store_worker_stop): freed here, so that this leak
     * does not stand in front of what the input may find. */
    for (st_obj_t *o = p->objs; o != NULL; o = o->hh.next) {
        free(o->pinners);
        o->pinners = NULL;
    }
    for (int i = ctx.nlayers - 1; i >= 0; i--)
        if (started(i))
            ctx.layers[i].ops->worker_stop(&w);
    /* The objects' memory goes with the job, as rma's allocator's. */
    for (unsigned j = 0; j < nallocs; j++)
        fuzz_free(allocs[j].base, allocs[j].len);
    nallocs = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};

    if (ctx.nlayers == 0)
        LLVMFuzzerInitialize(NULL, NULL);
    setup(&in);
    while (in.left > 0) {
        switch (fuzz_u8(&in) & 3) {
        case 0:
            op_call(&in);
            break;
        case 1:
            step();
            break;
        case 2:
            op_answer(&in);
            break;
        default:
            op_seal(&in);
            break;
        }
    }
    step();
    teardown();
    return 0;
}
