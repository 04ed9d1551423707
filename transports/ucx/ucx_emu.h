/*
 * What the two halves of RMA emulated over active messages share: the
 * message header and kinds (ucx_emu.c, the initiator and the protocol;
 * ucx_emu_target.c, the target side). Internal to the UCX plugin.
 */
#ifndef RIVET_UCX_EMU_H
#define RIVET_UCX_EMU_H

#include "ucx_internal.h"

enum {
    EMU_PUT = 1,
    EMU_GET_REQ,
    EMU_GET_REP,
    EMU_AMO_REQ,
    EMU_AMO_REP,
    EMU_FLUSH_REQ,
    EMU_FLUSH_REP,
};

enum { EMU_AMO_FADD = 1, EMU_AMO_CSWAP };

enum { EMU_FENCED = 1u }; /* emu_hdr_t.flags */

/* An operation held at the target behind a fence. */
typedef struct ucx_emu_deferred {
    struct ucx_emu_deferred *next;
    size_t length;
    void *data; /* a copy of eager data, or the rendezvous descriptor */
    bool rndv;
    char hdr[]; /* emu_hdr_t */
} ucx_emu_deferred_t;

typedef struct {
    uint8_t op;
    uint8_t amo;
    int16_t status;  /* replies: rv_status_t */
    uint32_t src;    /* initiating worker */
    uint32_t region; /* target region id */
    uint32_t flags;  /* EMU_FENCED */
    uint64_t raddr;
    uint64_t len;
    uint64_t v1, v2; /* atomic operands; v1 carries the old value back */
    uint64_t cookie; /* the initiator's op */
} emu_hdr_t;

_Static_assert(sizeof(emu_hdr_t) <= RV_UCX_MAX_HDR + sizeof(uint32_t),
               "emulation header must fit an op's header storage");

/* Counts a message dropped for reason @p kind (RV_UCX_DROP_*) and logs it
 * the first time for its sender @p src. */
void rv_ucx_emu_drop(struct rv_tworker *tw, unsigned kind, uint32_t src,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Replies to request @p req with kind @p op, @p status and @p len bytes
 * of @p data (sent from there: it must stay until the send completes). */
void rv_ucx_emu_reply(struct rv_tworker *tw, const emu_hdr_t *req, uint8_t op,
                      rv_status_t status, const void *data, size_t len);
/* Receives rendezvous data @p desc of @p len bytes into @p dst; @p cb
 * runs when it landed (at once when it already has). */
void rv_ucx_emu_recv_into(struct rv_tworker *tw, void *desc, void *dst,
                          size_t len, ucp_am_recv_data_nbx_callback_t cb,
                          void *arg);
/* Runs, or holds behind a fence, request @p h from a worker of the job. */
ucs_status_t rv_ucx_emu_on_request(struct rv_tworker *tw, const emu_hdr_t *h,
                                   void *data, size_t length, bool rndv);

#endif
