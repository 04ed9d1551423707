/*
 * ucx-mt-get: the baseline users of UCX reach for first when several
 * threads must communicate, beside rivet's progress engine in
 * bench/offload.sh: the requesters of a process share one UCP worker
 * created with UCS_THREAD_MODE_MULTI, and UCX locks it for them on every
 * call (ucp_get_nbx, ucp_worker_progress). The same measurements as
 * rv-offload, the same way: rank 1 serves, the threads of rank 0 are the
 * requesters.
 *
 *   ucx-mt-get -r 0|1 -d DIR [-q REQUESTERS] [-t SECS] [-W N] [--rtt]
 *
 * The two processes meet through DIR: rank 1 writes its worker's address,
 * its region's address and remote key to DIR/rank1 and serves until
 * DIR/done appears; rank 0 reads them. UCX_TLS chooses the transports, as
 * the job file does for rv-offload (offload.sh sets sm,self for both).
 *
 * Rank 0 prints CSV rows `metric,size,value` as rv-offload does:
 *   rtt_us        (--rtt) round trip of an 8-byte active message to rank
 *                 1, whose handler replies on the reply endpoint
 *   msg_rate_mps  million 8-byte gets completed per second by all
 *                 requesters together, each with W in flight
 *   inject_us     time inside ucp_get_nbx, averaged
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#define REGION (1u << 20)
#define AM_PING 7
#define AM_PONG 8

static int rank = -1, requesters = 1, do_rtt;
static const char *dir;
static double secs = 1.0;
static long window = 256;

static ucp_context_h context;
static ucp_worker_h worker;
static ucp_ep_h ep;
static ucp_rkey_h rkey;
static uint64_t remote_base;
static _Atomic long pongs;
static _Atomic uint64_t total_ops, total_inject_ns, total_calls;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

_Noreturn static void die(const char *what, ucs_status_t s)
{
    fprintf(stderr, "ucx-mt-get: rank %d: %s: %s\n", rank, what,
            ucs_status_string(s));
    exit(1);
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* Writes @p len bytes to DIR/@p name at once (a rename: the reader never
 * sees half a file). */
static void put_file(const char *name, const void *data, size_t len)
{
    char tmp[4200], final[4096];
    path_of(final, sizeof(final), name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", final);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0 ||
        rename(tmp, final) != 0) {
        perror(final);
        exit(1);
    }
}

/* DIR/@p name once it exists, malloc'ed; *len_p its length. */
static void *get_file(const char *name, size_t *len_p)
{
    char path[4096];
    path_of(path, sizeof(path), name);
    for (int i = 0; i < 60000; i++) {
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            void *data = malloc(1 << 16);
            *len_p = fread(data, 1, 1 << 16, f);
            fclose(f);
            return data;
        }
        usleep(1000);
    }
    fprintf(stderr, "ucx-mt-get: rank %d: no %s\n", rank, path);
    exit(1);
}

static ucs_status_t on_ping(void *arg, const void *header, size_t header_len,
                            void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    (void)header_len;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_AM_SEND_FLAG_EAGER};
    void *req = ucp_am_send_nbx(param->reply_ep, AM_PONG, NULL, 0, data, len,
                                &p);
    if (UCS_PTR_IS_ERR(req))
        die("ucp_am_send_nbx (pong)", UCS_PTR_STATUS(req));
    if (req != NULL)
        ucp_request_free(req); /* completes on its own; nothing waits */
    return UCS_OK;
}

static ucs_status_t on_pong(void *arg, const void *header, size_t header_len,
                            void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    (void)header_len;
    (void)data;
    (void)len;
    (void)param;
    atomic_fetch_add(&pongs, 1);
    return UCS_OK;
}

static void set_handler(unsigned id, ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t h = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                              UCP_AM_HANDLER_PARAM_FIELD_CB,
                                .id = id,
                                .cb = cb};
    ucs_status_t s = ucp_worker_set_am_recv_handler(worker, &h);
    if (s != UCS_OK)
        die("ucp_worker_set_am_recv_handler", s);
}

static void start(void)
{
    ucp_params_t cp = {.field_mask = UCP_PARAM_FIELD_FEATURES |
                                     UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                       .features = UCP_FEATURE_RMA | UCP_FEATURE_AM,
                       .mt_workers_shared = 1};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_MULTI};
    ucp_worker_attr_t wa = {.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE};
    ucs_status_t s = ucp_init(&cp, NULL, &context);
    if (s != UCS_OK)
        die("ucp_init", s);
    if ((s = ucp_worker_create(context, &wp, &worker)) != UCS_OK)
        die("ucp_worker_create", s);
    if ((s = ucp_worker_query(worker, &wa)) != UCS_OK)
        die("ucp_worker_query", s);
    if (wa.thread_mode != UCS_THREAD_MODE_MULTI)
        die("the worker is not multi-threaded (UCX built without it?)",
            UCS_ERR_UNSUPPORTED);
    set_handler(AM_PING, on_ping);
    set_handler(AM_PONG, on_pong);
}

/* Rank 1: the region, its key and the worker's address to DIR/rank1;
 * then serves until DIR/done. */
static void serve(void)
{
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                             UCP_MEM_MAP_PARAM_FIELD_FLAGS,
                               .length = REGION,
                               .flags = UCP_MEM_MAP_ALLOCATE};
    ucp_mem_attr_t ma = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
    ucp_mem_h memh;
    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    void *rkey_buf;
    ucs_status_t s = ucp_mem_map(context, &mp, &memh);
    if (s != UCS_OK || (s = ucp_mem_query(memh, &ma)) != UCS_OK)
        die("ucp_mem_map", s);
    memset(ma.address, 1, REGION);
    if ((s = ucp_rkey_pack(context, memh, &rkey_buf, &rkey_len)) != UCS_OK ||
        (s = ucp_worker_get_address(worker, &addr, &addr_len)) != UCS_OK)
        die("ucp_rkey_pack / ucp_worker_get_address", s);
    /* [u64 base][u64 rkey_len][rkey][address] */
    size_t len = 16 + rkey_len + addr_len;
    uint8_t *msg = malloc(len);
    uint64_t base = (uintptr_t)ma.address, rl = rkey_len;
    memcpy(msg, &base, 8);
    memcpy(msg + 8, &rl, 8);
    memcpy(msg + 16, rkey_buf, rkey_len);
    memcpy(msg + 16 + rkey_len, addr, addr_len);
    put_file("rank1", msg, len);
    free(msg);
    ucp_rkey_buffer_release(rkey_buf);
    ucp_worker_release_address(worker, addr);

    char done[4096];
    path_of(done, sizeof(done), "done");
    for (unsigned n = 0;; n++) {
        ucp_worker_progress(worker);
        if ((n & 0xfff) == 0 && access(done, F_OK) == 0)
            break;
    }
    ucp_mem_unmap(context, memh);
}

static void wait_req(void *req, const char *what)
{
    if (UCS_PTR_IS_ERR(req))
        die(what, UCS_PTR_STATUS(req));
    if (req == NULL)
        return;
    while (ucp_request_check_status(req) == UCS_INPROGRESS)
        ucp_worker_progress(worker);
    ucp_request_free(req);
}

static double rtt_us(long iters)
{
    uint64_t payload = 0;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_AM_SEND_FLAG_REPLY |
                                      UCP_AM_SEND_FLAG_EAGER};
    double t0 = 0;
    for (long i = -iters / 10; i < iters; i++) {
        if (i == 0)
            t0 = now_s();
        long want = atomic_load(&pongs) + 1;
        wait_req(ucp_am_send_nbx(ep, AM_PING, NULL, 0, &payload,
                                 sizeof(payload), &p),
                 "ucp_am_send_nbx (ping)");
        while (atomic_load(&pongs) < want)
            ucp_worker_progress(worker);
    }
    return (now_s() - t0) / (double)iters * 1e6;
}

/* A requester's count. Atomic: a get completes in whichever thread's
 * ucp_worker_progress finds it, not only its requester's. */
typedef struct {
    _Atomic long inflight;
    _Atomic uint64_t done;
} rate_state_t;

static void get_done(void *req, ucs_status_t status, void *arg)
{
    rate_state_t *s = arg;
    if (status != UCS_OK)
        die("a get", status);
    s->inflight--;
    s->done++;
    ucp_request_free(req);
}

/* One requester: `window` 8-byte gets in flight for `secs`, as
 * rv-offload's rate(). */
static void *requester(void *arg)
{
    uint64_t *buf = calloc((size_t)window, sizeof(uint64_t));
    rate_state_t s = {0, 0};
    uint64_t calls = 0;
    double inject = 0, t_end = now_s() + secs;
    size_t slot = 0;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                             UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb.send = get_done,
                             .user_data = &s};
    (void)arg;
    while (now_s() < t_end) {
        for (long room = window - s.inflight; room > 0; room--) {
            uint64_t off = (uint64_t)(slot % (REGION / 8)) * 8;
            double a = now_s();
            void *req = ucp_get_nbx(ep, &buf[slot++ % (size_t)window], 8,
                                    remote_base + off, rkey, &p);
            inject += now_s() - a;
            calls++;
            if (UCS_PTR_IS_ERR(req))
                die("ucp_get_nbx", UCS_PTR_STATUS(req));
            if (req == NULL)
                s.done++;
            else
                s.inflight++;
        }
        ucp_worker_progress(worker);
    }
    while (s.inflight > 0)
        ucp_worker_progress(worker);
    atomic_fetch_add(&total_ops, s.done);
    atomic_fetch_add(&total_inject_ns, (uint64_t)(inject * 1e9));
    atomic_fetch_add(&total_calls, calls);
    free(buf);
    return NULL;
}

/* Rank 0: connects, measures, says done. */
static void request(void)
{
    size_t len;
    uint8_t *msg = get_file("rank1", &len);
    uint64_t rl;
    memcpy(&remote_base, msg, 8);
    memcpy(&rl, msg + 8, 8);
    ucp_ep_params_t epp = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                           .address = (ucp_address_t *)(msg + 16 + rl)};
    ucs_status_t s = ucp_ep_create(worker, &epp, &ep);
    if (s != UCS_OK || (s = ucp_ep_rkey_unpack(ep, msg + 16, &rkey)) != UCS_OK)
        die("ucp_ep_create / ucp_ep_rkey_unpack", s);
    free(msg);

    if (do_rtt)
        printf("rtt_us,8,%.3f\n", rtt_us(5000));
    pthread_t *t = calloc((size_t)requesters, sizeof(*t));
    for (int i = 0; i < requesters; i++)
        if (pthread_create(&t[i], NULL, requester, NULL) != 0)
            die("pthread_create", UCS_ERR_NO_RESOURCE);
    for (int i = 0; i < requesters; i++)
        pthread_join(t[i], NULL);
    free(t);
    printf("msg_rate_mps,8,%.4f\n", (double)total_ops / secs / 1e6);
    printf("inject_us,8,%.4f\n",
           (double)total_inject_ns / 1e3 /
               (double)(total_calls + !total_calls));
    fflush(stdout);
    ucp_rkey_destroy(rkey);
    ucp_request_param_t cp = {.op_attr_mask = 0};
    wait_req(ucp_ep_close_nbx(ep, &cp), "ucp_ep_close_nbx");
    put_file("done", "", 0);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"rtt", no_argument, NULL, 'R'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "r:d:q:t:W:", opts, NULL)) != -1) {
        switch (c) {
        case 'r': rank = atoi(optarg); break;
        case 'd': dir = optarg; break;
        case 'q': requesters = atoi(optarg); break;
        case 't': secs = atof(optarg); break;
        case 'W': window = atol(optarg); break;
        case 'R': do_rtt = 1; break;
        default: rank = -1; optind = argc; break;
        }
    }
    if ((rank != 0 && rank != 1) || dir == NULL || requesters < 1 ||
        secs <= 0 || window < 1) {
        fprintf(stderr, "usage: %s -r 0|1 -d DIR [-q REQUESTERS] [-t SECS] "
                        "[-W N] [--rtt]\n", argv[0]);
        return 2;
    }
    start();
    if (rank == 1)
        serve();
    else
        request();
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    return 0;
}
