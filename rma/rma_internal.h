/* Internal to rma/: the parts' handler registrations, run by rv_rma_init. */
#ifndef RIVET_RMA_INTERNAL_H
#define RIVET_RMA_INTERNAL_H

#include "rivet.h"

rv_status_t rma_gptr_register(rv_context_t *ctx);
rv_status_t rma_epoch_register(rv_context_t *ctx);

#endif
