/*
 * The remote memory layer's configuration table (rma.*), registered with
 * core when librivet is loaded; see rv_config.h for the conventions of a
 * table.
 */
#include <stddef.h>

#include "rma_config.h"

/* ENUM fields are read and written as int. */
_Static_assert(sizeof(rv_am_long_protocol_t) == sizeof(int), "enum size");

#define OFF(_member) offsetof(rv_rma_config_t, _member)

static const rv_config_field_t rma_fields[] = {
    {
        .name = "am_long_protocol",
        .type = RV_CFG_ENUM,
        .offset = OFF(am_long_protocol),
        .def = "reassembly",
        .values = "reassembly|put_sync_send",
        .help = "How AM Long (rv_put_handler) runs a handler after its "
                "payload lands: reassembly (payload and envelope injected "
                "back to back, matched at the target, as in GASNet-EX) or "
                "put_sync_send (put, wait for remote completion, then "
                "send).",
    },
    {.name = NULL},
};

static const rv_config_table_t rma_config_table = {
    .prefix = RMA_CONFIG_PREFIX,
    .help = "Remote memory: put, get, atomics and AM Long.",
    .fields = rma_fields,
    .size = sizeof(rv_rma_config_t),
};

RV_CONFIG_REGISTER_TABLE(rma_config_table)
