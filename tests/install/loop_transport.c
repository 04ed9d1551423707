/*
 * librivet-loop.so: a transport plugin built outside rivet's tree, against
 * the installed headers alone (the install test builds it, installs it
 * where rivet looks for plugins and runs a job over it).
 *
 * It serves a job of one process: an active message from one worker thread
 * to another is copied into memory from core's registered-memory
 * allocators (reached through the services table, as every plugin reaches
 * core) and queued for the destination, whose progress delivers it.
 * Registration is bookkeeping, since every worker shares the address
 * space, and counted (loop_transport.h): the unit tests of core's
 * registered-memory allocators build this file into their own process and
 * read the counts. One-sided operations are unsupported: each of them
 * returns the shared stub's RV_ERR_UNSUPPORTED, as rv_transport.h asks of
 * an operation a transport cannot do.
 *
 * Threads: the transport is shared by the workers; a worker's queue is
 * protected by its mutex, since any worker appends to it.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS under -std=c11 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include <rv_regmem.h>
#include <rv_transport.h>

#include "loop_transport.h"

#define LOOP_MAX_HDR 64             /* AM header bytes */
#define LOOP_MAX_AM ((size_t)1 << 30) /* largest payload */
#define LOOP_POLL 64                /* messages one progress call delivers */

typedef struct loop_msg {
    struct loop_msg *next;
    uint32_t src;
    size_t hdr_len;
    size_t len;
    uint8_t hdr[LOOP_MAX_HDR];
    uint8_t data[];
} loop_msg_t;

struct rv_transport {
    const rv_transport_services_t *svc;
    const rv_config_t *config; /* the job's, valid until fini */
    uint32_t nworkers;
    rv_mem_chunk_allocator_t *chunks;
    rv_mem_general_t *pool;         /* messages: any thread allocates,
                                       their receiver frees */
    rv_tworker_t *_Atomic *workers; /* by worker id */
    _Atomic uint64_t closed;        /* disconnect calls, over every job */
};

struct rv_tworker {
    rv_transport_t *tp;
    uint32_t tid;
    rv_am_recv_fn am_recv;
    void *am_arg;
    pthread_mutex_t lock;
    loop_msg_t *head, *tail;        /* queued for this worker */
};

/* ---------------------------------------------------------------------- */
/* The shared stub                                                         */

static rv_status_t unsupported(const char *op)
{
    rv_debug("loop: %s is not supported", op);
    return RV_ERR_UNSUPPORTED;
}

static rv_status_t loop_rkey_unpack(rv_tworker_t *tw, uint32_t peer,
                                    const void *buf, size_t len,
                                    rv_trkey_t **rkey_p)
{
    (void)tw, (void)peer, (void)buf, (void)len, (void)rkey_p;
    return unsupported("rkey_unpack");
}

static void loop_rkey_destroy(rv_tworker_t *tw, rv_trkey_t *rkey)
{
    (void)tw, (void)rkey;
}

static rv_status_t loop_put(rv_tworker_t *tw, uint32_t peer, uint64_t raddr,
                            rv_trkey_t *rkey, const void *src, size_t len,
                            rv_completion_fn cb, void *arg)
{
    (void)tw, (void)peer, (void)src, (void)len, (void)raddr, (void)rkey;
    (void)cb, (void)arg;
    return unsupported("put");
}

static rv_status_t loop_get(rv_tworker_t *tw, uint32_t peer, void *dst,
                            size_t len, uint64_t raddr, rv_trkey_t *rkey,
                            rv_completion_fn cb, void *arg)
{
    (void)tw, (void)peer, (void)dst, (void)len, (void)raddr, (void)rkey;
    (void)cb, (void)arg;
    return unsupported("get");
}

static rv_status_t loop_fadd64(rv_tworker_t *tw, uint32_t peer,
                               uint64_t value, uint64_t raddr,
                               rv_trkey_t *rkey, uint64_t *result,
                               rv_completion_fn cb, void *arg)
{
    (void)tw, (void)peer, (void)value, (void)raddr, (void)rkey;
    (void)result, (void)cb, (void)arg;
    return unsupported("atomic_fadd64");
}

static rv_status_t loop_cswap64(rv_tworker_t *tw, uint32_t peer,
                                uint64_t compare, uint64_t swap,
                                uint64_t raddr, rv_trkey_t *rkey,
                                uint64_t *result, rv_completion_fn cb,
                                void *arg)
{
    (void)tw, (void)peer, (void)compare, (void)swap, (void)raddr;
    (void)rkey, (void)result, (void)cb, (void)arg;
    return unsupported("atomic_cswap64");
}

static rv_status_t loop_fence(rv_tworker_t *tw, uint32_t peer)
{
    (void)tw, (void)peer;
    return unsupported("fence");
}

static rv_status_t loop_flush(rv_tworker_t *tw, uint32_t peer,
                              rv_completion_fn cb, void *arg)
{
    (void)tw, (void)peer, (void)cb, (void)arg;
    return unsupported("flush");
}

/* ---------------------------------------------------------------------- */
/* The transport and registered memory                                     */

static void loop_fini(rv_transport_t *tp)
{
    tp->svc->mem_general_destroy(tp->pool);
    tp->svc->mem_chunk_allocator_destroy(tp->chunks);
    free((void *)tp->workers);
    free(tp);
}

static rv_status_t loop_init(const rv_transport_params_t *params,
                             rv_transport_t **tp_p)
{
    const rv_transport_services_t *svc = params->services;
    if (!RV_TRANSPORT_SERVICES_HAS(svc, mem_general_free)) {
        rv_error("loop: this rivet's core offers plugins too few services");
        return RV_ERR_UNSUPPORTED;
    }
    if (params->size != 1) {
        rv_error("loop: serves a job of one process, not %d (rivetrun -n 1)",
                 params->size);
        return RV_ERR_UNSUPPORTED;
    }
    rv_transport_t *tp = calloc(1, sizeof(*tp));
    if (tp == NULL)
        return RV_ERR_NO_MEMORY;
    tp->svc = svc;
    tp->config = params->config;
    tp->nworkers = (uint32_t)params->threads;
    tp->workers = calloc(tp->nworkers, sizeof(*tp->workers));
    rv_status_t st = RV_ERR_NO_MEMORY;
    if (tp->workers == NULL)
        goto err_free;
    rv_mem_chunk_params_t cp;
    svc->mem_chunk_params_init(&cp, tp->config, &LOOP_OPS, tp, -1);
    if (!loop_mem.mapped)
        cp.source = RV_MEM_SOURCE_MMAP; /* registered by loop_mem_register */
    if ((st = svc->mem_chunk_allocator_create(&cp, &tp->chunks)) != RV_OK)
        goto err_free;
    if ((st = svc->mem_general_create(tp->chunks, &tp->pool)) != RV_OK)
        goto err_chunks;
    *tp_p = tp;
    return RV_OK;

err_chunks:
    svc->mem_chunk_allocator_destroy(tp->chunks);
err_free:
    free((void *)tp->workers);
    free(tp);
    return st;
}

/* @p tp is NULL when an allocator of a unit test asks (loop_transport.h). */
static void loop_query(rv_transport_t *tp, rv_transport_caps_t *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->max_am_header = LOOP_MAX_HDR;
    caps->max_am_size = LOOP_MAX_AM;
    caps->eager_limit = LOOP_MAX_AM;
    caps->ordered_am = true;
    pthread_mutex_lock(&loop_mem.lock);
    caps->mem_alloc_mapped = loop_mem.mapped;
    pthread_mutex_unlock(&loop_mem.lock);
    snprintf(caps->description, sizeof(caps->description),
             "loop: in-memory queues between the %u threads of a process",
             tp != NULL ? tp->nworkers : 0);
}

/* ---------------------------------------------------------------------- */
/* Registered memory: bookkeeping, counted (loop_transport.h)              */

loop_mem_t loop_mem = {.lock = PTHREAD_MUTEX_INITIALIZER};

void loop_mem_reset(bool mapped)
{
    pthread_mutex_lock(&loop_mem.lock);
    loop_mem.mapped = mapped;
    loop_mem.registers = loop_mem.allocs = loop_mem.deregisters = 0;
    loop_mem.packs = loop_mem.releases = loop_mem.overlaps = 0;
    loop_mem.nlive = 0;
    pthread_mutex_unlock(&loop_mem.lock);
}

bool loop_mem_registered(const void *p, size_t len)
{
    bool ok = false;
    pthread_mutex_lock(&loop_mem.lock);
    for (int i = 0; i < loop_mem.nlive && !ok; i++) {
        const char *a = loop_mem.live[i]->addr;
        ok = (const char *)p >= a &&
             (const char *)p + len <= a + loop_mem.live[i]->len;
    }
    pthread_mutex_unlock(&loop_mem.lock);
    return ok;
}

/* Records a registration of [addr, addr+len), counting an overlap with a
 * live one (an allocator that registers memory twice). */
static rv_status_t mem_track(void *addr, size_t len, bool allocated,
                             rv_tmem_t **mem_p)
{
    struct rv_tmem *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return RV_ERR_NO_MEMORY;
    *m = (struct rv_tmem){.addr = addr, .len = len, .allocated = allocated};
    pthread_mutex_lock(&loop_mem.lock);
    for (int i = 0; i < loop_mem.nlive; i++) {
        char *a = loop_mem.live[i]->addr;
        if ((char *)addr < a + loop_mem.live[i]->len && a < (char *)addr + len)
            loop_mem.overlaps++;
    }
    if (loop_mem.nlive < LOOP_MAX_REGS)
        loop_mem.live[loop_mem.nlive++] = m;
    if (allocated)
        loop_mem.allocs++;
    else
        loop_mem.registers++;
    pthread_mutex_unlock(&loop_mem.lock);
    *mem_p = m;
    return RV_OK;
}

/* Memory the transport maps itself (caps.mem_alloc_mapped): shared and
 * touched, as a transport's own segment is. */
static rv_status_t loop_mem_alloc(rv_transport_t *tp, size_t len,
                                  rv_tmem_t **mem_p, void **addr_p)
{
    (void)tp;
    if (!loop_mem.mapped)
        return unsupported("mem_alloc");
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return RV_ERR_NO_MEMORY;
    memset(p, 0, len < 4096 ? len : 4096);
    rv_status_t st = mem_track(p, len, true, mem_p);
    if (st != RV_OK) {
        munmap(p, len);
        return st;
    }
    *addr_p = p;
    return RV_OK;
}

static rv_status_t loop_mem_register(rv_transport_t *tp, void *addr,
                                     size_t len, rv_tmem_t **mem_p)
{
    (void)tp;
    return mem_track(addr, len, false, mem_p);
}

static void loop_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem)
{
    (void)tp;
    pthread_mutex_lock(&loop_mem.lock);
    for (int i = 0; i < loop_mem.nlive; i++) {
        if (loop_mem.live[i] == mem) {
            loop_mem.live[i] = loop_mem.live[--loop_mem.nlive];
            break;
        }
    }
    loop_mem.deregisters++;
    pthread_mutex_unlock(&loop_mem.lock);
    if (mem->allocated)
        munmap(mem->addr, mem->len);
    free(mem);
}

/* The key names the registration (one address space: the job's one
 * process); nothing unpacks it, since one-sided operations are
 * unsupported. */
static rv_status_t loop_rkey_pack(rv_transport_t *tp, rv_tmem_t *mem,
                                  void **buf_p, size_t *len_p)
{
    (void)tp;
    rv_tmem_t **key = malloc(sizeof(*key));
    if (key == NULL)
        return RV_ERR_NO_MEMORY;
    *key = mem;
    pthread_mutex_lock(&loop_mem.lock);
    loop_mem.packs++;
    pthread_mutex_unlock(&loop_mem.lock);
    *buf_p = key;
    *len_p = sizeof(*key);
    return RV_OK;
}

static void loop_rkey_buffer_release(rv_transport_t *tp, void *buf)
{
    (void)tp;
    pthread_mutex_lock(&loop_mem.lock);
    loop_mem.releases++;
    pthread_mutex_unlock(&loop_mem.lock);
    free(buf);
}

/* ---------------------------------------------------------------------- */
/* Workers                                                                 */

static rv_status_t loop_worker_create(rv_transport_t *tp,
                                      const rv_tworker_params_t *params,
                                      rv_tworker_t **tw_p)
{
    if (params->tid >= tp->nworkers)
        return RV_ERR_INVALID;
    rv_tworker_t *tw = calloc(1, sizeof(*tw));
    if (tw == NULL)
        return RV_ERR_NO_MEMORY;
    tw->tp = tp;
    tw->tid = params->tid;
    tw->am_recv = params->am_recv;
    tw->am_arg = params->am_arg;
    pthread_mutex_init(&tw->lock, NULL);
    atomic_store(&tp->workers[tw->tid], tw);
    *tw_p = tw;
    return RV_OK;
}

static void loop_worker_destroy(rv_tworker_t *tw)
{
    atomic_store(&tw->tp->workers[tw->tid], NULL);
    for (loop_msg_t *m = tw->head, *n; m != NULL; m = n) {
        n = m->next;
        tw->tp->svc->mem_general_free(tw->tp->pool, m);
    }
    pthread_mutex_destroy(&tw->lock);
    free(tw);
}

/* The address of a worker is its id. */
static rv_status_t loop_worker_address(rv_tworker_t *tw, void **addr_p,
                                       size_t *len_p)
{
    uint32_t *a = malloc(sizeof(*a));
    if (a == NULL)
        return RV_ERR_NO_MEMORY;
    *a = tw->tid;
    *addr_p = a;
    *len_p = sizeof(*a);
    return RV_OK;
}

static void loop_address_release(rv_tworker_t *tw, void *addr)
{
    (void)tw;
    free(addr);
}

static rv_status_t loop_connect(rv_tworker_t *tw, uint32_t peer,
                                const void *addr, size_t len)
{
    uint32_t tid;
    if (len != sizeof(tid))
        return RV_ERR_INVALID;
    memcpy(&tid, addr, sizeof(tid));
    if (tid != peer || atomic_load(&tw->tp->workers[peer]) == NULL) {
        rv_error("loop: worker %u is not a worker of this process", peer);
        return RV_ERR_PEER;
    }
    return RV_OK;
}

/* Delivers up to LOOP_POLL queued messages, taking them one at a time: a
 * handler may progress again, and must find the next message in turn. */
static unsigned loop_progress(rv_tworker_t *tw)
{
    unsigned n = 0;
    for (; n < LOOP_POLL; n++) {
        pthread_mutex_lock(&tw->lock);
        loop_msg_t *m = tw->head;
        if (m != NULL && (tw->head = m->next) == NULL)
            tw->tail = NULL;
        pthread_mutex_unlock(&tw->lock);
        if (m == NULL)
            break;
        rv_am_rx_t rx = {.src = m->src, .hdr = m->hdr, .hdr_len = m->hdr_len,
                         .data = m->data, .len = m->len, .persistent = true};
        if (tw->am_recv(tw->am_arg, &rx, m) != RV_INPROGRESS)
            tw->tp->svc->mem_general_free(tw->tp->pool, m);
    }
    return n;
}

/* Every worker stops sending once all of them have entered disconnect;
 * then what is queued here is delivered. Jobs never overlap, so the
 * calls of job k bring `closed` to k * nworkers. */
static rv_status_t loop_disconnect(rv_tworker_t *tw)
{
    rv_transport_t *tp = tw->tp;
    uint64_t ticket = atomic_fetch_add(&tp->closed, 1) + 1;
    uint64_t all = (ticket + tp->nworkers - 1) / tp->nworkers * tp->nworkers;
    while (atomic_load(&tp->closed) < all)
        if (loop_progress(tw) == 0)
            sched_yield();
    while (loop_progress(tw) > 0)
        ;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Active messages                                                         */

/* Copies the message into the pool and queues it for @p peer: the header,
 * the iov array and the payload may be reused on return (RV_OK). */
static rv_status_t loop_am_send(rv_tworker_t *tw, uint32_t peer,
                                const void *hdr, size_t hdr_len,
                                const struct iovec *iov, size_t iovcnt,
                                unsigned flags, rv_completion_fn cb,
                                void *arg)
{
    rv_transport_t *tp = tw->tp;
    rv_tworker_t *dst;
    size_t len = 0;
    loop_msg_t *m;
    (void)flags, (void)cb, (void)arg;
    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (peer >= tp->nworkers || hdr_len > LOOP_MAX_HDR || len > LOOP_MAX_AM ||
        (dst = atomic_load(&tp->workers[peer])) == NULL)
        return RV_ERR_INVALID;
    rv_status_t st = tp->svc->mem_general_alloc(tp->pool, sizeof(*m) + len,
                                                0, (void **)&m, NULL);
    if (st != RV_OK)
        return st;
    *m = (loop_msg_t){.src = tw->tid, .hdr_len = hdr_len, .len = len};
    memcpy(m->hdr, hdr, hdr_len);
    for (size_t i = 0, off = 0; i < iovcnt; off += iov[i].iov_len, i++)
        memcpy(m->data + off, iov[i].iov_base, iov[i].iov_len);
    pthread_mutex_lock(&dst->lock);
    if (dst->tail != NULL)
        dst->tail->next = m;
    else
        dst->head = m;
    dst->tail = m;
    pthread_mutex_unlock(&dst->lock);
    return RV_OK;
}

static void loop_am_release(rv_tworker_t *tw, void *desc)
{
    tw->tp->svc->mem_general_free(tw->tp->pool, desc);
}

__attribute__((visibility("default"))) const rv_transport_ops_t LOOP_OPS = {
        .name = "loop",
        .abi_version = RV_TRANSPORT_ABI_VERSION,
        .init = loop_init,
        .fini = loop_fini,
        .query = loop_query,
        .worker_create = loop_worker_create,
        .worker_destroy = loop_worker_destroy,
        .worker_address = loop_worker_address,
        .address_release = loop_address_release,
        .connect = loop_connect,
        .disconnect = loop_disconnect,
        .progress = loop_progress,
        .am_send = loop_am_send,
        .am_release = loop_am_release,
        .mem_alloc = loop_mem_alloc,
        .mem_register = loop_mem_register,
        .mem_deregister = loop_mem_deregister,
        .rkey_pack = loop_rkey_pack,
        .rkey_buffer_release = loop_rkey_buffer_release,
        .rkey_unpack = loop_rkey_unpack,
        .rkey_destroy = loop_rkey_destroy,
        .put = loop_put,
        .get = loop_get,
        .atomic_fadd64 = loop_fadd64,
        .atomic_cswap64 = loop_cswap64,
        .fence = loop_fence,
        .flush = loop_flush,
};
