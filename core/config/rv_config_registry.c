/*
 * The registry of configuration tables: core's own, those the layers
 * register when librivet is loaded (RV_CONFIG_REGISTER_TABLE, as UCX's
 * UCS_CONFIG_REGISTER_TABLE), and those of the transport plugins, read from
 * their ops table when a configuration first needs them.
 *
 * Core knows no layer: a layer's table is whatever it registers. Core does
 * know the transport namespace: `transport.NAME.*` belongs to the plugin in
 * librivet-NAME.so, found by the plugin loader (rv_plugin.c). A plugin
 * loaded for its table stays loaded, as a plugin loaded to run does (UCX
 * keeps atexit handlers in it), so its table lives as long as the process.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rv_config_internal.h"
#include "rv_core.h"

#define TRANSPORT_PREFIX "transport."
#define TRANSPORT_PREFIX_LEN (sizeof(TRANSPORT_PREFIX) - 1)
#define PLUGIN_NAME_MAX 64 /* longest transport name kept in the registry */

/* A transport plugin whose table was read (NULL: it has no keys). */
typedef struct plugin_entry {
    char name[PLUGIN_NAME_MAX];
    const rv_config_table_t *table;
} plugin_entry_t;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static const rv_config_table_t *layer_tables[RV_CFG_MAX_TABLES]; /* by prefix */
static size_t nlayers;
static plugin_entry_t plugins[RV_CFG_MAX_TABLES];
static size_t nplugins;

/* ---------------------------------------------------------------------- */
/* Layers                                                                  */
/* ---------------------------------------------------------------------- */

/* True if @p prefix's first component is a section of core's table. */
static bool core_section(const char *prefix)
{
    size_t len = strcspn(prefix, ".");

    for (const rv_config_field_t *f = rv__config_core_table.fields;
         f->name != NULL; f++) {
        if (strncmp(f->name, prefix, len) == 0 && f->name[len] == '.')
            return true;
    }
    return false;
}

rv_status_t rv_config_register(const rv_config_table_t *table)
{
    rv_status_t status = RV_OK;
    size_t i;

    /* Core's sections include "transport": the plugins' namespace. */
    if (table == NULL || table->prefix == NULL || table->fields == NULL ||
        table->prefix[0] == '\0' || core_section(table->prefix)) {
        rv_error("configuration table '%s': a layer's prefix must be a "
                 "name of its own, neither core's sections nor transport.*",
                 table != NULL && table->prefix != NULL ? table->prefix : "");
        return RV_ERR_INVALID;
    }

    pthread_mutex_lock(&registry_lock);
    for (i = 0; i < nlayers; i++) {
        int cmp = strcmp(layer_tables[i]->prefix, table->prefix);
        if (cmp == 0 && layer_tables[i] == table)
            goto out; /* registered already */
        if (cmp == 0) {
            rv_error("configuration table '%s' is registered twice",
                     table->prefix);
            status = RV_ERR_EXISTS;
            goto out;
        }
        if (cmp > 0)
            break;
    }
    if (nlayers == RV_CFG_MAX_TABLES) {
        rv_error("configuration table '%s': more than %d tables", table->prefix,
                 RV_CFG_MAX_TABLES);
        status = RV_ERR_NO_MEMORY;
        goto out;
    }
    memmove(&layer_tables[i + 1], &layer_tables[i],
            (nlayers - i) * sizeof(layer_tables[0]));
    layer_tables[i] = table;
    nlayers++;
out:
    pthread_mutex_unlock(&registry_lock);
    return status;
}

/* ---------------------------------------------------------------------- */
/* Plugins                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    bool found;
} name_query_t;

static void match_name(const char *name, void *arg)
{
    name_query_t *q = arg;
    if (strcmp(name, q->name) == 0)
        q->found = true;
}

/* Inserts a plugin's table into the cache, by name, unless another thread
 * did. Called locked. */
static void plugin_cache(const char *name, const rv_config_table_t *table)
{
    size_t i = 0;

    if (nplugins == RV_CFG_MAX_TABLES)
        return; /* not cached: read again next time */
    while (i < nplugins && strcmp(plugins[i].name, name) < 0)
        i++;
    if (i < nplugins && strcmp(plugins[i].name, name) == 0)
        return;
    memmove(&plugins[i + 1], &plugins[i], (nplugins - i) * sizeof(plugins[0]));
    snprintf(plugins[i].name, sizeof(plugins[i].name), "%s", name);
    plugins[i].table = table;
    nplugins++;
}

/* Reads plugin @p name's table, loading the plugin. Called unlocked: the
 * plugin's constructors run meanwhile. */
static rv_status_t plugin_read(const char *name,
                               const rv_config_table_t **table_p, char *why,
                               size_t whylen)
{
    const rv_transport_ops_t *ops;
    char prefix[PLUGIN_NAME_MAX + TRANSPORT_PREFIX_LEN];
    void *handle;
    rv_status_t status;

    if (strlen(name) >= PLUGIN_NAME_MAX) {
        snprintf(why, whylen, "'%s' is too long for a transport name", name);
        return RV_ERR_CONFIG;
    }
    status = rv__plugin_find(name, &handle, &ops, why, whylen);
    if (status == RV_ERR_NOT_FOUND) {
        name_query_t q = {.name = name, .found = false};
        rv__plugin_foreach(match_name, &q);
        if (q.found) /* there, but broken: say why */
            status = RV_ERR_UNSUPPORTED;
    }
    if (status != RV_OK)
        return status;

    snprintf(prefix, sizeof(prefix), TRANSPORT_PREFIX "%s", name);
    if (ops->config != NULL &&
        (ops->config->prefix == NULL || ops->config->fields == NULL ||
         strcmp(ops->config->prefix, prefix) != 0)) {
        snprintf(why, whylen,
                 "librivet-%s.so's configuration table has prefix '%s'; a "
                 "transport's keys go under '%s'",
                 name, ops->config->prefix ? ops->config->prefix : "", prefix);
        return RV_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&registry_lock);
    plugin_cache(name, ops->config);
    pthread_mutex_unlock(&registry_lock);
    *table_p = ops->config;
    return RV_OK;
}

rv_status_t rv__config_plugin_table(const char *name,
                                    const rv_config_table_t **table_p,
                                    char *why, size_t whylen)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nplugins; i++) {
        if (strcmp(plugins[i].name, name) == 0) {
            *table_p = plugins[i].table;
            pthread_mutex_unlock(&registry_lock);
            return RV_OK;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return plugin_read(name, table_p, why, whylen);
}

/* Reads the table of every plugin found; broken plugins are skipped. */
static void read_one(const char *name, void *arg)
{
    const rv_config_table_t *table;
    char why[RV_CFG_MSG_MAX];

    (void)arg;
    if (rv__config_plugin_table(name, &table, why, sizeof(why)) != RV_OK)
        rv_debug("configuration: skipping transport plugin '%s': %s", name,
                 why);
}

/* ---------------------------------------------------------------------- */
/* Order                                                                   */
/* ---------------------------------------------------------------------- */

/* 0 for core's table, 1 for a layer's, 2 for a plugin's. */
static int table_class(const rv_config_table_t *t)
{
    if (t->prefix[0] == '\0')
        return 0;
    return strncmp(t->prefix, TRANSPORT_PREFIX, TRANSPORT_PREFIX_LEN) == 0 ? 2
                                                                           : 1;
}

int rv__config_table_cmp(const rv_config_table_t *a, const rv_config_table_t *b)
{
    int ca = table_class(a), cb = table_class(b);

    if (ca != cb)
        return ca - cb;
    return strcmp(a->prefix, b->prefix);
}

size_t rv__config_tables(const rv_config_table_t **out, bool all_plugins)
{
    size_t n = 0;

    if (all_plugins)
        rv__plugin_foreach(read_one, NULL);
    pthread_mutex_lock(&registry_lock);
    out[n++] = &rv__config_core_table;
    for (size_t i = 0; i < nlayers && n < RV_CFG_MAX_TABLES; i++)
        out[n++] = layer_tables[i];
    /* Plugins are kept by name, so their prefixes are in order too. */
    for (size_t i = 0; i < nplugins && n < RV_CFG_MAX_TABLES; i++) {
        if (plugins[i].table != NULL)
            out[n++] = plugins[i].table;
    }
    pthread_mutex_unlock(&registry_lock);
    return n;
}
