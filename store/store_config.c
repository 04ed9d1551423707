/*
 * The object store's configuration table (store.*), registered with core
 * when librivet is loaded; see rv_config.h for the conventions of a table.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "store_config.h"

#define OFF(_member) offsetof(rv_store_config_t, _member)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

static bool threshold_value(const char *text, size_t *out, bool *autop)
{
    uint64_t v = 0;
    *autop = strcmp(text, "auto") == 0;
    if (!*autop && (rv_config_parse_size(text, &v) != RV_OK || v > SIZE_MAX))
        return false;
    *out = (size_t)v;
    return true;
}

static bool check_threshold(const char *text, char *why, size_t why_len)
{
    size_t v;
    bool autop;
    if (threshold_value(text, &v, &autop))
        return true;
    snprintf(why, why_len, "'%s' is neither a size (e.g. 32KiB) nor auto",
             text);
    return false;
}

rv_status_t store_parse_threshold(const char *text, size_t *out, bool *autop)
{
    char why[128];
    if (threshold_value(text, out, autop))
        return RV_OK;
    check_threshold(text, why, sizeof(why));
    rv_error("store.rndv_threshold: %s", why);
    return RV_ERR_CONFIG;
}

static const rv_config_field_t store_fields[] = {
    {
        .name = "capacity",
        .type = RV_CFG_SIZE,
        .offset = OFF(capacity),
        .def = "1GiB",
        .min = 1 * MIB,
        .max = 1024 * GIB,
        .help = "Bytes of objects (data and metadata) each process holds; "
                "unreferenced sealed objects are evicted, least recently "
                "used first, to stay under it.",
    },
    {
        .name = "rndv_threshold",
        .type = RV_CFG_STRING,
        .offset = OFF(rndv_threshold),
        .def = "32KiB",
        .help = "Objects up to this size (data and metadata) are fetched "
                "eagerly in calls, larger ones by an RDMA read straight "
                "into the new copy; a size (e.g. 32KiB), or auto: chosen "
                "by a short calibration at job start.",
        .check = check_threshold,
    },
    {
        .name = "preallocate",
        .type = RV_CFG_BOOL,
        .offset = OFF(preallocate),
        .def = "false",
        .help = "Whether each worker makes its share of store.capacity "
                "ready at job start (registered and faulted in, as Ray's "
                "preallocate_plasma_memory), so that creates and fetches "
                "never wait for new memory.",
    },
    {.name = NULL},
};

static const rv_config_table_t store_config_table = {
    .prefix = STORE_CONFIG_PREFIX,
    .help = "The object store: capacity, its preallocation and the "
            "eager/rendezvous threshold.",
    .fields = store_fields,
    .size = sizeof(rv_store_config_t),
};

RV_CONFIG_REGISTER_TABLE(store_config_table)
