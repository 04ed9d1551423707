/*
 * Fuzz target: the UCX plugin's RMA emulation as a worker receives it
 * (rv_ucx_emu_recv_cb in transports/ucx/ucx_emu.c, and the target side in
 * ucx_emu_target.c): the emulation messages (UCP AM id RV_UCX_AM_RMA) that
 * peers send it, puts, get and atomic requests, flushes, and the replies
 * to its own requests. Both files are compiled here over stubs of UCP and
 * of the rest of the plugin, and the worker they run on is made by hand:
 * worker TID of NWORKERS, with two live regions registered and a third
 * registered then removed (its memory freed, so that a touch is seen).
 *
 * Before the input, the worker starts real emulated operations of its
 * own, whose replies the input may forge: a get and a compare-and-swap
 * to worker 0, a fetch-add to worker 2, a flush of worker 3, a worker-wide
 * flush (one part to worker 0, one to worker 2), and a get to worker 3
 * answered at once, whose slot a get to worker 2 then takes again (so
 * that a reply naming its earlier generation is reachable). Slots are
 * taken in order from 0; a request's cookie is generation << 32 | slot.
 *
 * The input is a sequence of messages, each
 *
 *     [u8 header length][the header][u16 payload length][the payload]
 *
 * delivered eagerly (no rendezvous: its data would come through UCX's
 * ucp_am_recv_data_nbx). The header (emu_hdr_t when it has that length:
 * a kind, its sender, region, address, length, operands and cookie) is
 * taken as it is, lies included, but for one thing: its raddr is read as
 * an offset from the harness's base of region h.region (of region 0 for
 * an id the harness did not register), so that an input names the same
 * bytes in every run whatever malloc returned; every address stays
 * reachable. Every byte the worker sends (a get's reply data) is read,
 * regions, replies' data and payloads are exact buffers, and each of the
 * worker's own operations must complete at most once, with RV_OK or an
 * error of rv_status_t.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ucx_emu.h"

#define NWORKERS 4
#define TID 1        /* the receiving worker */
#define MAX_MSGS 256 /* messages an input may carry */
#define MAX_OPS 64   /* ucx_op_t out at once */

/* The harness's regions: two live, the third removed. */
#define NREGIONS 3
static const size_t region_len[NREGIONS] = {256, 64, 64};

/* The worker's own operations, by what the set-up starts. */
enum {
    OP_GET0,   /* get 16 bytes from worker 0 */
    OP_CSWAP0, /* compare-and-swap on worker 0 */
    OP_FADD2,  /* fetch-add on worker 2 */
    OP_FLUSH3, /* flush of worker 3 */
    OP_GET3,   /* get from worker 3, answered in the set-up */
    OP_GET2,   /* get 8 bytes from worker 2, on OP_GET3's slot */
    OP_FLUSH,  /* the worker-wide flush */
    NOPS
};

typedef struct {
    int calls;
    rv_status_t status;
    uint64_t result; /* atomics */
} done_t;

static rv_transport_t tp;
static struct rv_tworker *tw;
static uint8_t *region[NREGIONS];
static uint64_t region_base[NREGIONS];
static uint8_t fake_eps[NWORKERS]; /* ucp_ep_h of worker i: &fake_eps[i] */
static ucx_op_t *live[MAX_OPS];    /* operations taken, not given back */
static size_t nlive;
static done_t done[NOPS];
static uint8_t *get_dst[NOPS]; /* the gets' destinations, exact */
static volatile uint64_t sink; /* keeps the reads of what is sent */

static void touch(const void *p, size_t len)
{
    fuzz_touch(&sink, p, len);
}

/* ---------------------------------------------------------------------- */
/* Stubs of UCP and of the rest of the plugin                             */

const char *ucs_status_string(ucs_status_t status)
{
    (void)status;
    return "a UCS status";
}

/*
 * Every send completes at once (NULL), as UCX's eager sends of small
 * messages do; the header and every byte of the data are read, as UCX
 * copies them, so that a reply sent from outside a region is seen.
 */
ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void *header,
                                 size_t header_length, const void *buffer,
                                 size_t count, const ucp_request_param_t *param)
{
    size_t peer = (size_t)((uint8_t *)ep - fake_eps);
    emu_hdr_t h;

    if (peer >= NWORKERS || id != RV_UCX_AM_RMA || header_length != sizeof(h) ||
        (param->op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE))
        abort(); /* sent where, or what, no worker could receive */
    memcpy(&h, header, sizeof(h));
    if (h.src != TID)
        abort(); /* a message that names another sender than its own */
    touch(header, header_length);
    touch(buffer, count);
    return NULL;
}

/* Eager messages only: rendezvous data is never received or released,
 * and no request is ever returned to be freed. */
ucs_status_ptr_t ucp_am_recv_data_nbx(ucp_worker_h worker, void *data_desc,
                                      void *buffer, size_t count,
                                      const ucp_request_param_t *param)
{
    (void)worker;
    (void)data_desc;
    (void)buffer;
    (void)count;
    (void)param;
    abort();
}

void ucp_am_data_release(ucp_worker_h worker, void *data)
{
    (void)worker;
    (void)data;
    abort();
}

void ucp_request_free(void *request)
{
    (void)request;
    abort();
}

/* The worker's own flush: nothing outstanding at UCP's level. */
ucs_status_ptr_t ucp_worker_flush_nbx(ucp_worker_h worker,
                                      const ucp_request_param_t *param)
{
    (void)worker;
    (void)param;
    return NULL;
}

rv_status_t rv_ucx_status(ucs_status_t status)
{
    return status == UCS_OK ? RV_OK : RV_ERR_TRANSPORT;
}

/*
 * Operations are fresh allocations filled with garbage, as the plugin's
 * free list hands back used ones: a field the emulation does not set is
 * not zero, and one used after it was given back is seen.
 */
ucx_op_t *rv_ucx_op_get(struct rv_tworker *w, rv_completion_fn cb, void *arg)
{
    ucx_op_t *op = malloc(sizeof(*op));
    if (op == NULL || nlive == MAX_OPS)
        abort();
    memset(op, 0xa5, sizeof(*op));
    op->tw = w;
    op->cb = cb;
    op->arg = arg;
    op->result_p = NULL;
    live[nlive++] = op;
    return op;
}

void rv_ucx_op_put(struct rv_tworker *w, ucx_op_t *op)
{
    (void)w;
    for (size_t i = 0; i < nlive; i++)
        if (live[i] == op) {
            live[i] = live[--nlive];
            free(op);
            return;
        }
    abort(); /* given back twice, or never taken */
}

/* ---------------------------------------------------------------------- */
/* The worker and its own operations                                       */

/* Completes one of the worker's operations: once, with a status a
 * program can be given. */
static void on_done(void *arg, rv_status_t status)
{
    done_t *d = arg;
    if (++d->calls > 1)
        abort(); /* an operation completed twice */
    if (status != RV_OK &&
        (status > RV_ERR_NO_MEMORY || status < RV_ERR_CANCELED))
        abort(); /* a status that is no rv_status_t error */
    d->status = status;
}

static bool *bools(void)
{
    bool *b = calloc(NWORKERS, sizeof(bool));
    if (b == NULL)
        abort();
    return b;
}

static void worker_make(void)
{
    tw = calloc(1, sizeof(*tw));
    if (tw == NULL)
        abort();
    tw->tp = &tp;
    tw->tid = TID;
    tw->nworkers = NWORKERS;
    tw->eps = calloc(NWORKERS, sizeof(*tw->eps));
    tw->emulate = bools();
    tw->emu_dirty = bools();
    tw->emu_fence = bools();
    tw->emu_puts_landing = calloc(NWORKERS, sizeof(*tw->emu_puts_landing));
    tw->emu_flush_waiting = calloc(NWORKERS, sizeof(*tw->emu_flush_waiting));
    tw->emu_deferred = calloc(NWORKERS, sizeof(*tw->emu_deferred));
    tw->emu_deferred_tail = calloc(NWORKERS, sizeof(*tw->emu_deferred_tail));
    if (tw->eps == NULL || tw->emu_puts_landing == NULL ||
        tw->emu_flush_waiting == NULL || tw->emu_deferred == NULL ||
        tw->emu_deferred_tail == NULL || rv_ucx_emu_worker_init(tw) != RV_OK)
        abort();
    for (uint32_t i = 0; i < NWORKERS; i++) {
        tw->eps[i] = (ucp_ep_h)&fake_eps[i];
        tw->emulate[i] = true;
    }
}

static void regions_make(void)
{
    pthread_rwlock_init(&tp.regions_lock, NULL);
    for (int r = 0; r < NREGIONS; r++) {
        uint32_t id;
        region[r] = fuzz_alloc(region_len[r]);
        for (size_t i = 0; i < region_len[r]; i++)
            region[r][i] = (uint8_t)(r * 64 + i);
        region_base[r] = (uintptr_t)region[r];
        if (rv_ucx_region_add(&tp, region_base[r], region_len[r], &id) !=
                RV_OK ||
            id != (uint32_t)r)
            abort();
    }
    rv_ucx_region_remove(&tp, NREGIONS - 1);
    fuzz_free(region[NREGIONS - 1], region_len[NREGIONS - 1]);
    region[NREGIONS - 1] = NULL;
}

/* Feeds the worker one eager message of @p hdr_len header bytes and
 * @p len payload bytes, each in a buffer of its exact size. */
static void deliver(const void *hdr, size_t hdr_len, const void *payload,
                    size_t len)
{
    uint8_t *h = fuzz_copy(hdr, hdr_len), *p = fuzz_copy(payload, len);
    ucp_am_recv_param_t param = {.recv_attr = 0, .reply_ep = NULL};
    ucs_status_t s = rv_ucx_emu_recv_cb(tw, h, hdr_len, p, len, &param);
    if (s == UCS_INPROGRESS)
        abort(); /* eager data kept that UCX did not let it keep */
    fuzz_free(p, len);
    fuzz_free(h, hdr_len);
}

static void get(int i, uint32_t peer, size_t len, uint64_t off)
{
    rv_trkey_t rkey = {.region = 0};
    get_dst[i] = fuzz_alloc(len);
    if (rv_ucx_emu_get(tw, peer, get_dst[i], len, off, &rkey, on_done,
                       &done[i]) != RV_INPROGRESS)
        abort();
}

/* The worker's own operations, whose replies the input may forge. */
static void ops_start(void)
{
    rv_trkey_t rkey = {.region = 0};

    memset(done, 0, sizeof(done));
    get(OP_GET0, 0, 16, 0); /* slot 0 */
    if (rv_ucx_emu_atomic(tw, 0, true, 1, 2, 8, &rkey, &done[OP_CSWAP0].result,
                          on_done, &done[OP_CSWAP0]) != RV_INPROGRESS ||
        rv_ucx_emu_atomic(tw, 2, false, 5, 0, 16, &rkey, &done[OP_FADD2].result,
                          on_done, &done[OP_FADD2]) != RV_INPROGRESS ||
        rv_ucx_emu_flush(tw, 3, on_done, &done[OP_FLUSH3]) != RV_INPROGRESS)
        abort();           /* slots 1, 2 and 3 */
    get(OP_GET3, 3, 8, 0); /* slot 4, answered here */
    uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    emu_hdr_t rep = {
        .op = EMU_GET_REP, .src = 3, .len = 8, .cookie = (uint64_t)1 << 32 | 4};
    deliver(&rep, sizeof(rep), data, sizeof(data));
    if (done[OP_GET3].calls != 1 || done[OP_GET3].status != RV_OK)
        abort();
    get(OP_GET2, 2, 8, 32); /* slot 4 again, generation 2 */
    /* Workers 0 and 2 have had atomics: slots 5 and 6. */
    if (rv_ucx_emu_flush_all(tw, on_done, &done[OP_FLUSH]) != RV_INPROGRESS)
        abort();
}

static void teardown(void)
{
    rv_ucx_emu_worker_fini(tw);
    for (uint32_t i = 0; i < NWORKERS; i++)
        while (tw->emu_flush_waiting[i] != NULL) {
            ucx_flush_wait_t *fw = tw->emu_flush_waiting[i];
            tw->emu_flush_waiting[i] = fw->next;
            free(fw);
        }
    while (nlive > 0) /* operations never answered */
        free(live[--nlive]);
    for (int i = 0; i < NOPS; i++)
        if (get_dst[i] != NULL) {
            fuzz_free(get_dst[i], i == OP_GET0 ? 16 : 8);
            get_dst[i] = NULL;
        }
    free(tw->eps);
    free(tw->emulate);
    free(tw->emu_dirty);
    free(tw->emu_fence);
    free(tw->emu_puts_landing);
    free(tw->emu_flush_waiting);
    free(tw->emu_deferred);
    free(tw->emu_deferred_tail);
    free(tw);
    for (int r = 0; r < NREGIONS; r++)
        if (region[r] != NULL)
            fuzz_free(region[r], region_len[r]);
    free(tp.regions);
    pthread_rwlock_destroy(&tp.regions_lock);
    memset(&tp, 0, sizeof(tp));
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
    tp.stats = RV_STATS_OFF;
    regions_make();
    worker_make();
    ops_start();
    for (int n = 0; n < MAX_MSGS && in.left > 0; n++) {
        uint8_t hdr[UINT8_MAX];
        size_t hdr_len = fuzz_u8(&in), len;
        fuzz_take(&in, hdr, hdr_len);
        if (hdr_len == sizeof(emu_hdr_t)) {
            emu_hdr_t h;
            memcpy(&h, hdr, sizeof(h));
            h.raddr += region_base[h.region < NREGIONS ? h.region : 0];
            memcpy(hdr, &h, sizeof(h));
        }
        len = fuzz_u16(&in);
        uint8_t *payload = malloc(len ? len : 1);
        if (payload == NULL)
            abort();
        fuzz_take(&in, payload, len);
        deliver(hdr, hdr_len, payload, len);
        free(payload);
    }
    teardown();
    return 0;
}
