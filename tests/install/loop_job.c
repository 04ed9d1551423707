/* A job of one process over the out-of-tree "loop" transport: every worker
 * thread sends MESSAGES messages of varied sizes to every worker, itself
 * included, and checks that each sender's messages arrive complete, intact
 * and in order. Built against an installed rivet; exits 0 when every check
 * passed, and worker 0 prints a summary the install test looks for. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rivet.h>

#define MESSAGES 500     /* per sender and receiver */
#define MAX_WORKERS 16
#define SIZE_STEP 97     /* payload sizes cycle through multiples of it */
#define SIZE_STEPS 11

typedef struct {
    uint32_t src;        /* the sender's local index */
    uint32_t seq;
} head_t;

/* Per receiving worker; each is written by its own thread only. */
static struct {
    uint32_t next[MAX_WORKERS]; /* next sequence number, by sender */
    unsigned bad;
} got[MAX_WORKERS];

static rv_handler_id_t data_id;

static size_t size_of(uint32_t seq)
{
    return sizeof(head_t) + (seq % SIZE_STEPS) * SIZE_STEP;
}

static uint8_t byte_of(uint32_t src, uint32_t seq, size_t i)
{
    return (uint8_t)(src * 31u + seq * 7u + i);
}

static rv_status_t on_data(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    int me = rv_worker_local(w);
    head_t h;
    (void)arg;
    if (msg->len < sizeof(h)) {
        got[me].bad++;
        return RV_OK;
    }
    memcpy(&h, msg->data, sizeof(h));
    const uint8_t *body = (const uint8_t *)msg->data;
    bool ok = h.src < MAX_WORKERS && h.seq == got[me].next[h.src] &&
              msg->len == size_of(h.seq);
    for (size_t i = sizeof(h); ok && i < msg->len; i++)
        ok = body[i] == byte_of(h.src, h.seq, i);
    if (!ok)
        got[me].bad++;
    else
        got[me].next[h.src]++;
    return RV_OK;
}

static bool all_arrived(int me, int threads)
{
    for (int s = 0; s < threads; s++)
        if (got[me].next[s] < MESSAGES)
            return false;
    return true;
}

static int body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    int me = rv_worker_local(w), threads = rv_threads(ctx);
    uint8_t buf[sizeof(head_t) + SIZE_STEPS * SIZE_STEP];
    (void)arg;
    for (uint32_t seq = 0; seq < MESSAGES; seq++) {
        head_t h = {.src = (uint32_t)me, .seq = seq};
        memcpy(buf, &h, sizeof(h));
        for (size_t i = sizeof(h); i < size_of(seq); i++)
            buf[i] = byte_of(h.src, seq, i);
        for (int d = 0; d < threads; d++)
            if (rv_send(w, rv_tid_make(ctx, 0, d), data_id, buf,
                        size_of(seq), NULL) != RV_OK)
                return 1;
    }
    while (!all_arrived(me, threads) && got[me].bad == 0)
        rv_progress(w);
    if (rv_barrier(w) != RV_OK || got[me].bad != 0)
        return 1;
    if (me == 0)
        printf("loop job: %d workers exchanged %d messages each, in order, "
               "over %s\n", threads, MESSAGES * threads,
               rv_context_describe(ctx));
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int threads = rv_threads(ctx);
    if (rv_size(ctx) != 1 || threads < 2 || threads > MAX_WORKERS) {
        fprintf(stderr, "loop job: one process of 2 to %d threads, please\n",
                MAX_WORKERS);
        rv_finalize(ctx);
        return 1;
    }
    rv_status_t st = rv_handler_register(ctx, "loop.data", on_data, NULL, 0,
                                         &data_id);
    if (st == RV_OK)
        st = rv_job_run(ctx, body, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
