/*
 * The verbs transport's rendezvous FIN, fed crafted messages through its
 * receive path (vb_on_recv), with no RDMA device: verbs_am.c is compiled
 * here over stubs of what it calls in the rest of the plugin (posting,
 * bounce memory, memory registration), and the worker it runs on is made
 * by hand.
 *
 * A FIN names its rendezvous send by a slot of the sender's table (index
 * and generation, carried by the RTS): one that names no slot, a slot
 * already answered, an earlier use of its slot, or a send to another
 * worker is dropped and counted, never followed as a pointer; so are
 * messages cut short, with a bad header or of an unknown type. The right
 * FIN completes its send once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "verbs_internal.h"

#define NRX 4 /* receive buffers the test uses */

/* ---------------------------------------------------------------------- */
/* Stubs of the rest of the plugin                                         */

static uint8_t sent[VB_RXBUF]; /* the last message posted */
static size_t sent_len;
static uint32_t sent_peer;
static uint8_t bounce[VB_RXBUF];

struct ibv_mr *vb_reg(rv_transport_t *tp, void *addr, size_t len)
{
    (void)tp;
    struct ibv_mr *mr = calloc(1, sizeof(*mr));
    if (mr != NULL) {
        mr->addr = addr;
        mr->length = len;
        mr->lkey = mr->rkey = 0x1234;
    }
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
    (void)peer;
    assert_true(len <= sizeof(bounce));
    *addr_p = bounce;
    *lkey_p = 1;
    *unit_p = NULL;
    return RV_OK;
}

vb_op_t *vb_op_get(rv_tworker_t *tw, uint8_t kind, uint32_t peer,
                   rv_completion_fn cb, void *arg)
{
    vb_op_t *op = calloc(1, sizeof(*op));
    if (op != NULL) {
        op->owner = tw;
        op->kind = kind;
        op->peer = peer;
        op->cb = cb;
        op->arg = arg;
    }
    return op;
}

void vb_op_put(rv_tworker_t *tw, vb_op_t *op)
{
    (void)tw;
    if (op->mr != NULL)
        ibv_dereg_mr(op->mr);
    free(op);
}

/* Records what is posted: the message's bytes and its destination. */
rv_status_t vb_post_to(rv_tworker_t *tw, uint32_t peer, struct ibv_send_wr *wr,
                       bool signal, rv_mem_unit_t *unit)
{
    (void)tw;
    (void)signal;
    (void)unit;
    assert_int_equal(wr->num_sge, 1);
    sent_len = wr->sg_list[0].length;
    memcpy(sent, (const void *)(uintptr_t)wr->sg_list[0].addr, sent_len);
    sent_peer = peer;
    return RV_OK;
}

rv_status_t vb_post(rv_tworker_t *tw, uint32_t lane, struct ibv_send_wr *wr,
                    bool signal, rv_mem_unit_t *unit)
{
    (void)lane;
    return vb_post_to(tw, 0, wr, signal, unit);
}

static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                         struct ibv_recv_wr **bad)
{
    (void)srq;
    (void)wr;
    (void)bad;
    return 0;
}

static rv_status_t no_general_alloc(struct rv_mem_general *gen, size_t len,
                                    size_t align, void **addr_p,
                                    const struct rv_mem_chunk **chunk_p)
{
    (void)gen;
    (void)len;
    (void)align;
    (void)addr_p;
    (void)chunk_p;
    return RV_ERR_NO_MEMORY; /* rendezvous memory: malloc'ed, registered */
}

/* ---------------------------------------------------------------------- */
/* A worker made by hand: worker 0 of a job of two                         */

static rv_transport_services_t svc = {.mem_general_alloc = no_general_alloc};
static struct rv_transport tp = {.svc = &svc,
                                 .rank = 0,
                                 .size = 2,
                                 .threads = 1,
                                 .max_message = VB_MAX_AM_SIZE};
static struct ibv_context ibctx;
static struct ibv_srq srq = {.context = &ibctx};
static struct ibv_mr rx_mr;
static rv_tworker_t *tw;

static int completions;
static rv_status_t completion_status;

static void on_complete(void *arg, rv_status_t status)
{
    (void)arg;
    completions++;
    completion_status = status;
}

static int setup(void **state)
{
    (void)state;
    ibctx.ops.post_srq_recv = post_srq_recv;
    tw = calloc(1, sizeof(*tw));
    tw->tp = &tp;
    tw->tid = 0;
    tw->nworkers = 2;
    tw->nprocs = 2;
    tw->peers = calloc(2, sizeof(*tw->peers));
    tw->rx = calloc(NRX, VB_RXBUF);
    tw->rx_mr = &rx_mr;
    tw->srq = &srq;
    completions = 0;
    return tw->peers == NULL || tw->rx == NULL;
}

static int teardown(void **state)
{
    (void)state;
    vb_rndv_fini(tw);
    free(tw->peers);
    free(tw->rx);
    free(tw);
    return 0;
}

/* Starts a rendezvous send of @p len bytes to worker 1; returns the
 * cookie its RTS carries. */
static uint64_t rndv_send(size_t len)
{
    static uint8_t payload[3 * VB_RXBUF];
    uint64_t hdr = 42;
    struct iovec iov = {.iov_base = payload, .iov_len = len};
    assert_true(len <= sizeof(payload));
    assert_int_equal(
        vb_am_send(tw, 1, &hdr, sizeof(hdr), &iov, 1, 0, on_complete, NULL),
        RV_INPROGRESS);
    vb_wire_t m;
    vb_rts_t rts;
    memcpy(&m, sent, sizeof(m));
    assert_int_equal(sent_peer, 1);
    assert_int_equal(m.type, VB_RTS);
    assert_int_equal(sent_len, sizeof(m) + m.hdr_len + sizeof(rts));
    memcpy(&rts, sent + sizeof(m) + m.hdr_len, sizeof(rts));
    return rts.cookie;
}

/* Delivers @p len bytes of @p msg to the worker as a received message. */
static void receive(const void *msg, size_t len)
{
    static uint32_t next;
    uint32_t i = next++ % NRX;
    memcpy(tw->rx + (size_t)i * VB_RXBUF, msg, len);
    struct ibv_wc wc = {.wr_id = i, .byte_len = (uint32_t)len};
    vb_on_recv(tw, &wc);
}

/* A FIN from worker @p src naming @p cookie, with @p hdr_len header
 * bytes. */
static void receive_fin(uint32_t src, uint64_t cookie, uint8_t hdr_len)
{
    uint8_t msg[sizeof(vb_wire_t) + sizeof(cookie)];
    vb_wire_t m = {.src = src, .type = VB_FIN, .hdr_len = hdr_len};
    memcpy(msg, &m, sizeof(m));
    memcpy(msg + sizeof(m), &cookie, sizeof(cookie));
    receive(msg, sizeof(m) + hdr_len);
}

/* ---------------------------------------------------------------------- */

static void test_forged_fins(void **state)
{
    (void)state;
    uint64_t cookie = rndv_send(2 * VB_RXBUF);
    uint32_t index = (uint32_t)cookie, gen = (uint32_t)(cookie >> 32);

    receive_fin(1, (uint64_t)gen << 32 | 5000, 8);        /* no such slot */
    receive_fin(1, UINT64_C(0xdeadbeefdeadbeef), 8);      /* a pointer? */
    receive_fin(0, cookie, 8);                            /* wrong worker */
    receive_fin(1, (uint64_t)(gen + 1) << 32 | index, 8); /* later use */
    assert_int_equal(completions, 0);
    assert_int_equal(tw->drops[VB_DROP_STALE_FIN], 4);

    receive_fin(1, cookie, 8); /* the receiver's own */
    assert_int_equal(completions, 1);
    assert_int_equal(completion_status, RV_OK);

    receive_fin(1, cookie, 8); /* a duplicate */
    assert_int_equal(completions, 1);
    assert_int_equal(tw->drops[VB_DROP_STALE_FIN], 5);

    /* The slot serves the next send, under a new generation: the old
     * FIN does not complete it. */
    uint64_t again = rndv_send(VB_RXBUF + 1);
    assert_int_equal((uint32_t)again, index);
    assert_int_not_equal(again, cookie);
    receive_fin(1, cookie, 8);
    assert_int_equal(completions, 1);
    receive_fin(1, again, 8);
    assert_int_equal(completions, 2);
    assert_int_equal(tw->drops[VB_DROP_STALE_FIN], 6);
    assert_int_equal(tw->drops[VB_DROP_MALFORMED], 0);
}

static void test_malformed(void **state)
{
    (void)state;
    uint64_t cookie = rndv_send(2 * VB_RXBUF);
    uint8_t msg[64] = {0};
    vb_wire_t m = {.src = 1, .type = 9};

    receive_fin(1, cookie, 0); /* a FIN without its cookie */
    receive_fin(1, cookie, 4); /* with half of it */
    receive(msg, 4);           /* shorter than a header */
    memcpy(msg, &m, sizeof(m));
    receive(msg, sizeof(m)); /* of an unknown type */
    m.type = VB_EAGER;
    m.src = 7;
    memcpy(msg, &m, sizeof(m));
    receive(msg, sizeof(m)); /* from no worker of the job */
    /* An RTS announcing more than any message may hold: dropped before
     * the receiver allocates and registers it. */
    m = (vb_wire_t){.src = 1, .type = VB_RTS, .len = UINT32_MAX};
    vb_rts_t rts = {0};
    memcpy(msg, &m, sizeof(m));
    memcpy(msg + sizeof(m), &rts, sizeof(rts));
    receive(msg, sizeof(m) + sizeof(rts));
    assert_int_equal(tw->drops[VB_DROP_MALFORMED], 6);
    assert_int_equal(tw->drops[VB_DROP_STALE_FIN], 0);
    assert_int_equal(completions, 0);

    receive_fin(1, cookie, 8);
    assert_int_equal(completions, 1);
}

/* transport.verbs.max_message bounds both ends: an RTS announcing one
 * byte more is dropped before the receiver allocates it, a send of one
 * byte more is refused, and a message of exactly the bound goes. */
static void test_max_message(void **state)
{
    (void)state;
    tp.max_message = 2 * VB_RXBUF;
    uint8_t msg[64] = {0};
    vb_wire_t m = {.src = 1, .type = VB_RTS, .len = 2 * VB_RXBUF + 1};
    vb_rts_t rts = {0};
    memcpy(msg, &m, sizeof(m));
    memcpy(msg + sizeof(m), &rts, sizeof(rts));
    receive(msg, sizeof(m) + sizeof(rts));
    assert_int_equal(tw->drops[VB_DROP_MALFORMED], 1);

    static uint8_t payload[2 * VB_RXBUF + 1];
    uint64_t hdr = 42;
    struct iovec iov = {.iov_base = payload, .iov_len = sizeof(payload)};
    assert_int_equal(
        vb_am_send(tw, 1, &hdr, sizeof(hdr), &iov, 1, 0, on_complete, NULL),
        RV_ERR_INVALID);
    uint64_t cookie = rndv_send(2 * VB_RXBUF);
    receive_fin(1, cookie, 8);
    assert_int_equal(completions, 1);
    tp.max_message = VB_MAX_AM_SIZE;
}

/* More sends in flight than the table's first size: it grows, and every
 * FIN, in any order, completes its own send once. */
static void test_table_grows(void **state)
{
    enum { N = 200 };
    static uint64_t cookies[N];
    (void)state;
    for (int i = 0; i < N; i++)
        cookies[i] = rndv_send(VB_RXBUF + (size_t)i);
    for (int i = N; i-- > 0;) {
        receive_fin(1, cookies[i], 8);
        receive_fin(1, cookies[i], 8);
    }
    assert_int_equal(completions, N);
    assert_int_equal(tw->drops[VB_DROP_STALE_FIN], N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forged_fins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_message, setup, teardown),
    };
    return cmocka_run_group_tests_name("verbs_am", tests, NULL, NULL);
}
