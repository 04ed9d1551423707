/*
 * Fuzz target: the verbs plugin's receive path (vb_on_recv in
 * transports/verbs/verbs_am.c), fed what a peer can put in a receive
 * buffer: eager messages, RTSs of rendezvous messages (whose payload the
 * worker then reads and delivers), FINs of the worker's own rendezvous
 * sends, goodbyes, and whatever else fits. There is no RDMA device:
 * verbs_am.c is compiled here over stubs of the rest of the plugin
 * (posting, bounce memory, memory registration, the pool of rendezvous
 * memory), as tests/transport/test_verbs_am.c does, and the worker it runs
 * on is made by hand: worker 0 of a job of two processes of two threads.
 *
 * Before the input, the worker starts rendezvous sends of its own, whose
 * FINs the input may forge: to workers 1, 2 and 3 (slots 0, 1 and 2,
 * generation 1), and one to worker 1 answered at once, whose slot 3 a send
 * to worker 2 then takes again (generation 2). A FIN's cookie is
 * generation << 32 | slot.
 *
 * The input is a flags byte (bit 0: the pool serves rendezvous memory,
 * else it is malloc'ed and registered per message; bit 1: QPs shared by
 * the process's threads; bit 2: small sends go inline; bit 3: the program
 * keeps the payloads that stay valid until the end of their step), then
 * steps, each
 *
 *     [u8 ctl][u16 byte_len][byte_len bytes]
 *
 * a message of byte_len (modulo VB_RXBUF + 1) bytes in a receive buffer of
 * exactly that size, so that a read past what arrived is seen; then, by
 * ctl's bits 0-1, nothing, the oldest rendezvous read the worker posted
 * lands, it fails, or every one lands. A read lands by writing the ends of
 * the memory it was posted to. The program reads every byte it is given
 * (of a rendezvous payload over 1 MiB, its ends); each of the worker's
 * sends completes once, with RV_OK; and everything the worker took
 * (operations, rendezvous memory) is given back.
 *
 * The job here sets transport.verbs.max_message to 1 MiB (FUZZ_MAX_MSG):
 * an RTS announcing more is dropped, one announcing up to it is allocated,
 * read and delivered. With the default of 2 GiB, most of each run went
 * into mapping and poisoning the shadow memory of the gigabytes the RTSs
 * announced (about 700 inputs a second against some 10,000); the code
 * under test is the same for every length up to the bound.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "verbs_internal.h"

#define NPROCS 2
#define NTHREADS 2
#define NWORKERS (NPROCS * NTHREADS)
#define MAX_STEPS 256
#define MAX_LIVE 1024 /* operations, pool blocks, reads, kept messages */
#define NSENDS 5      /* the set-up's rendezvous sends */
#define SEND_LEN VB_RXBUF
#define READ_WHOLE ((size_t)1 << 20)   /* payloads read whole up to */
#define FUZZ_MAX_MSG ((size_t)1 << 20) /* transport.verbs.max_message */

enum {
    FLAG_POOL = 1u << 0,
    FLAG_SHARED = 1u << 1,
    FLAG_INLINE = 1u << 2,
    FLAG_KEEP = 1u << 3,
};

enum { READ_NONE, READ_ONE, READ_FAIL, READ_ALL };

/* A set of pointers the harness gave out or holds. */
typedef struct {
    void *p[MAX_LIVE];
    size_t n;
} set_t;

static void set_add(set_t *s, void *p)
{
    if (s->n == MAX_LIVE)
        abort();
    s->p[s->n++] = p;
}

static bool set_del(set_t *s, void *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i] == p) {
            s->p[i] = s->p[--s->n];
            return true;
        }
    return false;
}

/* A rendezvous read posted, not landed yet. */
typedef struct {
    vb_op_t *op;
    uint8_t *addr;
    size_t len;
} read_t;

static uint8_t flags;
static set_t ops;  /* vb_op_get's, not given back */
static set_t pool; /* the pool's blocks in use */
static set_t kept; /* payloads the program keeps (descs) */
static read_t reads[MAX_LIVE];
static size_t nreads;
static uint8_t bounce[VB_RXBUF];
static uint8_t sent[VB_RXBUF]; /* the last message sent */
static int send_done[NSENDS];
static volatile uint64_t sink; /* keeps the program's reads */

static void touch(const void *p, size_t len)
{
    fuzz_touch(&sink, p, len);
}

/* ---------------------------------------------------------------------- */
/* Stubs of the rest of the plugin                                         */

struct ibv_mr *vb_reg(rv_transport_t *tp, void *addr, size_t len)
{
    (void)tp;
    struct ibv_mr *mr = calloc(1, sizeof(*mr));
    if (mr == NULL)
        abort();
    mr->addr = addr;
    mr->length = len;
    mr->lkey = mr->rkey = 0x1234;
    return mr;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    free(mr);
    return 0;
}

rv_status_t vb_bounce(rv_tworker_t *tw, uint32_t peer, size_t len,
                      void **addr_p, uint32_t *lkey_p, rv_mem_unit_t **unit_p)
{
    (void)tw;
    if (peer >= NWORKERS || len > sizeof(bounce))
        abort();
    *addr_p = bounce;
    *lkey_p = 1;
    *unit_p = NULL;
    return RV_OK;
}

vb_op_t *vb_op_get(rv_tworker_t *tw, uint8_t kind, uint32_t peer,
                   rv_completion_fn cb, void *arg)
{
    vb_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        abort();
    op->owner = tw;
    op->kind = kind;
    op->peer = peer;
    op->cb = cb;
    op->arg = arg;
    set_add(&ops, op);
    return op;
}

void vb_op_put(rv_tworker_t *tw, vb_op_t *op)
{
    (void)tw;
    if (!set_del(&ops, op))
        abort(); /* given back twice, or never taken */
    if (op->mr != NULL)
        ibv_dereg_mr(op->mr);
    free(op);
}

/* A message sent (an RTS, a FIN): read whole, kept as the last one. */
rv_status_t vb_post_to(rv_tworker_t *tw, uint32_t peer, struct ibv_send_wr *wr,
                       bool signal, rv_mem_unit_t *unit)
{
    (void)tw;
    (void)signal;
    (void)unit;
    if (peer >= NWORKERS || wr->num_sge != 1 || wr->opcode != IBV_WR_SEND ||
        wr->sg_list[0].length > sizeof(sent))
        abort();
    memcpy(sent, (const void *)(uintptr_t)wr->sg_list[0].addr,
           wr->sg_list[0].length);
    return RV_OK;
}

/* A rendezvous read, posted: it lands when the input says so. */
rv_status_t vb_post(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr,
                    bool signal, rv_mem_unit_t *unit)
{
    (void)signal;
    (void)unit;
    if (lane >= vb_nlanes(tw) || wr->num_sge != 1 ||
        wr->opcode != IBV_WR_RDMA_READ || nreads == MAX_LIVE)
        abort();
    vb_op_t *op = (vb_op_t *)(uintptr_t)wr->wr_id;
    reads[nreads++] = (read_t){op, (uint8_t *)(uintptr_t)wr->sg_list[0].addr,
                               wr->sg_list[0].length};
    return RV_OK;
}

static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                         struct ibv_recv_wr **bad)
{
    (void)srq;
    (void)bad;
    if (wr->wr_id != 0 || wr->num_sge != 1)
        abort();
    return 0;
}

static struct ibv_mr pool_mr = {.lkey = 0x5678, .rkey = 0x5678};
static struct rv_tmem pool_tmem = {.mr = &pool_mr};
static rv_mem_chunk_t pool_chunk = {.tmem = &pool_tmem};

/* The pool of rendezvous memory: its blocks are malloc'ed and counted,
 * and freeing one it did not give is an error, as core's is. */
static rv_status_t pool_alloc(struct rv_mem_general *gen, size_t len,
                              size_t align, void **addr_p,
                              const struct rv_mem_chunk **chunk_p)
{
    (void)gen;
    (void)align;
    if (!(flags & FLAG_POOL))
        return RV_ERR_NO_MEMORY;
    void *p = malloc(len);
    if (p == NULL)
        return RV_ERR_NO_MEMORY;
    set_add(&pool, p);
    *addr_p = p;
    *chunk_p = &pool_chunk;
    return RV_OK;
}

static void pool_free(struct rv_mem_general *gen, void *addr)
{
    (void)gen;
    if (!set_del(&pool, addr))
        abort(); /* core: "was not allocated here, or was freed already" */
    free(addr);
}

/* ---------------------------------------------------------------------- */
/* The program and the worker                                              */

/*
 * Core's am_recv: reads every byte of the message, but of a rendezvous
 * payload larger than READ_WHOLE only the first and last READ_WHOLE / 2
 * bytes: the worker allocated it for the length the RTS announced (up to
 * 2 GiB), and reading it whole would take seconds an input; a payload
 * shorter than its length ends before its last bytes all the same. Keeps
 * a payload that stays valid when the flags say so.
 */
static rv_status_t on_recv(void *arg, const rv_am_rx_t *rx, void *desc)
{
    (void)arg;
    if (rx->src >= NWORKERS || rx->hdr_len > VB_MAX_HDR)
        abort();
    touch(rx->hdr, rx->hdr_len);
    if (rx->len <= READ_WHOLE) {
        touch(rx->data, rx->len);
    } else {
        touch(rx->data, READ_WHOLE / 2);
        touch((const uint8_t *)rx->data + rx->len - READ_WHOLE / 2,
              READ_WHOLE / 2);
    }
    if (rx->persistent && (flags & FLAG_KEEP)) {
        set_add(&kept, desc);
        return RV_INPROGRESS;
    }
    return RV_OK;
}

static void on_send_done(void *arg, rv_status_t status)
{
    int *calls = arg;
    if (++*calls > 1 || status != RV_OK)
        abort(); /* a send completed twice, or as failed by a FIN */
}

static rv_transport_services_t svc = {.mem_general_alloc = pool_alloc,
                                      .mem_general_free = pool_free};
static struct rv_transport tp;
static struct ibv_context ibctx;
static struct ibv_srq srq = {.context = &ibctx};
static struct ibv_mr rx_mr;
static rv_tworker_t *tw;

/* Delivers @p len bytes of @p msg in a receive buffer of that size. */
static void receive(const void *msg, size_t len)
{
    tw->rx = fuzz_copy(msg, len);
    struct ibv_wc wc = {.wr_id = 0, .byte_len = (uint32_t)len};
    vb_on_recv(tw, &wc);
    fuzz_free(tw->rx, len);
    tw->rx = NULL;
}

/* The oldest rendezvous read lands (its ends written), or fails. */
static void read_lands(rv_status_t st)
{
    read_t r = reads[0];
    memmove(reads, reads + 1, --nreads * sizeof(reads[0]));
    if (st == RV_OK && r.len > 0) {
        size_t n = r.len < 64 ? r.len : 64;
        memset(r.addr, 0x5a, n);
        memset(r.addr + r.len - n, 0xa5, n);
    }
    vb_read_done(tw, r.op, st);
}

/* Starts a rendezvous send to @p peer; returns the cookie of its RTS. */
static uint64_t rndv_send(int i, uint32_t peer)
{
    static uint8_t payload[SEND_LEN];
    uint64_t hdr = 42;
    struct iovec iov = {.iov_base = payload, .iov_len = sizeof(payload)};
    vb_wire_t m;
    vb_rts_t rts;
    if (vb_am_send(tw, peer, &hdr, sizeof(hdr), &iov, 1, 0, on_send_done,
                   &send_done[i]) != RV_INPROGRESS)
        abort();
    memcpy(&m, sent, sizeof(m));
    memcpy(&rts, sent + sizeof(m) + m.hdr_len, sizeof(rts));
    if (m.type != VB_RTS)
        abort();
    return rts.cookie;
}

static void worker_make(void)
{
    tp = (struct rv_transport){.svc = &svc,
                               .rank = 0,
                               .size = NPROCS,
                               .threads = NTHREADS,
                               .stats = RV_STATS_OFF,
                               .shared_qps = flags & FLAG_SHARED,
                               .nworkers = NWORKERS,
                               .max_message = FUZZ_MAX_MSG};
    ibctx.ops.post_srq_recv = post_srq_recv;
    tw = calloc(1, sizeof(*tw));
    if (tw == NULL)
        abort();
    tw->tp = &tp;
    tw->tid = 0;
    tw->nworkers = NWORKERS;
    tw->nprocs = NPROCS;
    tw->peers = calloc(NWORKERS, sizeof(*tw->peers));
    if (tw->peers == NULL)
        abort();
    tw->rx_mr = &rx_mr;
    tw->srq = &srq;
    tw->max_inline = flags & FLAG_INLINE ? VB_MAX_INLINE_WANT : 0;
    tw->am_recv = on_recv;

    memset(send_done, 0, sizeof(send_done));
    rndv_send(0, 1);                   /* slot 0 */
    rndv_send(1, 2);                   /* slot 1 */
    rndv_send(2, 3);                   /* slot 2 */
    uint64_t cookie = rndv_send(3, 1); /* slot 3, answered here */
    uint8_t fin[sizeof(vb_wire_t) + sizeof(cookie)];
    vb_wire_t m = {.src = 1, .type = VB_FIN, .hdr_len = sizeof(cookie)};
    memcpy(fin, &m, sizeof(m));
    memcpy(fin + sizeof(m), &cookie, sizeof(cookie));
    receive(fin, sizeof(fin));
    if (send_done[3] != 1)
        abort();
    rndv_send(4, 2); /* slot 3 again, generation 2 */
}

static void release_kept(void)
{
    while (kept.n > 0)
        vb_am_release(tw, kept.p[--kept.n]);
}

static void teardown(void)
{
    release_kept();
    while (nreads > 0) /* reads that never landed: their messages are held */
        vb_op_put(tw, reads[--nreads].op);
    for (uint32_t i = 0; i < NWORKERS; i++)
        vb_held_drop(tw, &tw->peers[i]);
    for (uint32_t i = 0; i < tw->rndv_nslots; i++) { /* sends never FINed */
        vb_op_t *op = tw->rndv_slots[i].op;
        if (op == NULL)
            continue;
        if (op->mr != NULL)
            free(op->bounce);
        else
            pool_free(NULL, op->bounce);
        vb_op_put(tw, op);
    }
    vb_rndv_fini(tw);
    if (ops.n != 0 || pool.n != 0)
        abort(); /* an operation or rendezvous memory the worker lost */
    free(tw->peers);
    free(tw);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    rv_log_level = RV_LOG_FATAL; /* drops are counted, not read */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};

    LLVMFuzzerInitialize(NULL, NULL);
    flags = fuzz_u8(&in);
    worker_make();
    for (int n = 0; n < MAX_STEPS && in.left > 0; n++) {
        static uint8_t msg[VB_RXBUF];
        uint8_t ctl = fuzz_u8(&in);
        size_t len = fuzz_u16(&in) % (VB_RXBUF + 1);
        fuzz_take(&in, msg, len);
        receive(msg, len);
        switch (ctl & 3) {
        case READ_ONE:
        case READ_FAIL:
            if (nreads > 0)
                read_lands((ctl & 3) == READ_ONE ? RV_OK : RV_ERR_TRANSPORT);
            break;
        case READ_ALL:
            while (nreads > 0)
                read_lands(RV_OK);
            break;
        }
        release_kept();
    }
    teardown();
    return 0;
}
