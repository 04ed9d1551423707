/*
 * Fuzz target: core's message header (rv__msg_recv in core/rv_msg.c), as a
 * transport hands it an active message: a header of any length, a payload
 * of the length that arrived, and a core header whose handler id and
 * length may lie. Behind the header run core's own handlers (the barrier,
 * the collectives' contributions and results) and two of a program's
 * kinds: one that keeps the payload and one that runs inline, each reading
 * every byte it was given.
 *
 * The input is: a flags byte (the payload stays valid after the callback,
 * the message may be deferred, the worker and sender, and whether the
 * worker has finished a collective), the length of the transport header,
 * the header, then the payload. A message deferred (RV_ERR_AGAIN) is
 * delivered again from progress, as the transports do. The result buffer
 * of a collective that has returned belongs to the program again: no
 * message may write into it; and no message may make a worker hold more
 * for a collective than the largest collective takes.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rv_coll.h"
#include "rv_core.h"

#define NPROCS 2
#define NTHREADS 2
#define NWORKERS (NPROCS * NTHREADS)
#define HDR_MAX (sizeof(rv_msg_hdr_t) + RV_MSG_XHDR_MAX + 8)

enum {
    FLAG_PERSISTENT = 1u << 0,
    FLAG_DEFERRABLE = 1u << 1,
    /* bits 2-3: the receiving worker; bits 4-6: the sender */
    FLAG_COLL_DONE = 1u << 7,
};

#define COLL_OUT 8 /* bytes of the finished collective's result */

static rv_context_t ctx;
static rv_bootstrap_t bs = {.size = NPROCS};
static rv_core_config_t core;
static rv_transport_ops_t ops;
static volatile uint64_t sink; /* keeps the handlers' reads */

/* Reads every byte a handler was given, as a program's handler may. */
static void touch(const rv_msg_t *msg)
{
    sink += msg->src;
    fuzz_touch(&sink, msg->data, msg->len);
    fuzz_touch(&sink, msg->xhdr, msg->xhdr_len);
}

static rv_status_t on_keep(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    touch(msg);
    rv_msg_release(w, msg);
    return RV_INPROGRESS;
}

static rv_status_t on_inline(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)w;
    (void)arg;
    touch(msg);
    return RV_OK;
}

/* The transport's release of a kept payload: the harness frees it. */
static void release(rv_tworker_t *tw, void *desc)
{
    (void)tw;
    (void)desc;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    rv_log_level = RV_LOG_FATAL; /* drops are counted, not read */
    core.job.threads = NTHREADS;
    ops.am_release = release;
    ctx.bs = &bs;
    ctx.core = &core;
    ctx.ops = &ops;
    if (rv__msg_init(&ctx) != RV_OK ||
        rv_handler_register(&ctx, "fuzz.keep", on_keep, NULL,
                            RV_HANDLER_KEEP_DATA, NULL) != RV_OK ||
        rv_handler_register(&ctx, "fuzz.inline", on_inline, NULL,
                            RV_HANDLER_INLINE, NULL) != RV_OK)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    rv_worker_t w = {.ctx = &ctx};
    uint8_t flags, *hdr, out[COLL_OUT] = {0}, zeros[COLL_OUT] = {0};
    rv_am_rx_t rx;
    rv_status_t status;

    if (ctx.nhandlers == 0)
        LLVMFuzzerInitialize(NULL, NULL);
    flags = fuzz_u8(&in);
    w.tid = (flags >> 2) % NWORKERS;
    w.view.tops = &ops;
    if (flags & FLAG_COLL_DONE) {
        /* Its first collective returned, its result in out. */
        w.coll.epoch = w.coll.released = 1;
        w.coll.out = out;
        w.coll.out_len = sizeof(out);
    }
    rx.src = (flags >> 4) % NWORKERS;
    rx.hdr_len = fuzz_u8(&in) % (HDR_MAX + 1);
    /* Exactly the bytes that arrived, so that a read past them is seen. */
    {
        uint8_t whole[HDR_MAX];
        fuzz_take(&in, whole, rx.hdr_len);
        hdr = fuzz_copy(whole, rx.hdr_len);
    }
    rx.hdr = hdr;
    rx.len = in.left;
    rx.data = fuzz_copy(in.p, rx.len);
    rx.persistent = flags & FLAG_PERSISTENT;
    rx.deferrable = flags & FLAG_DEFERRABLE;

    status = rv__msg_recv(&w, &rx, rx.data);
    if (status == RV_ERR_AGAIN) {
        rx.deferrable = false;
        status = rv__msg_recv(&w, &rx, rx.data);
    }
    if (status != RV_OK && !(status == RV_INPROGRESS && rx.persistent))
        abort(); /* a status the transport may not be given */
    if (memcmp(out, zeros, sizeof(out)) != 0)
        abort(); /* a message wrote into a returned collective's result */
    for (int i = 0; i < 2; i++)
        if (w.coll.slot[i].cap > RV_COLL_MAX_BYTES)
            abort(); /* a header sized a buffer beyond any collective */
    fuzz_free(rx.data, rx.len);
    fuzz_free(hdr, rx.hdr_len);
    rv__coll_fini(&w);
    return 0;
}
