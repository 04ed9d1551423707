/*
 * The configuration load pipeline: core's and the registered layers'
 * components at their defaults, then the YAML file (rv_config_yaml.c),
 * which adds the component of every transport plugin it sets keys of,
 * then the components of the plugins the environment sets keys of and of
 * the selected transport, then the RIVET_* environment overrides.
 *
 * Errors read like a compiler's, "FILE:LINE:COL: error: KEY: what is
 * wrong"; for an environment override the location is "environment
 * RIVET_X_Y". Only the first error is reported.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h> /* environ */

#include "rv_config_internal.h"
#include "rv_core.h"

#define ENV_TRANSPORT "RIVET_TRANSPORT_"
#define ENV_TRANSPORT_NAME "RIVET_TRANSPORT_NAME"
#define ENV_NAME_MAX (RV_CFG_KEY_MAX + 8) /* "RIVET_" and a key */
#define TRANSPORT_PREFIX "transport."

void rv__config_report(rv_config_loader_t *ld, const char *fmt, ...)
{
    char raw[RV_CFG_MSG_MAX], msg[RV_CFG_MSG_MAX];
    size_t n = 0;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);

    /* One line, whatever the keys and values quoted in it contain. */
    for (const unsigned char *p = (const unsigned char *)raw;
         *p != '\0' && n + 5 < sizeof(msg); p++) {
        if (*p == '\n')
            n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\\n");
        else if (*p == '\t')
            n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\\x%02x", *p);
        else
            msg[n++] = (char)*p;
    }
    msg[n] = '\0';

    /* Each error on a line of its own after those before it: a load
     * reports every bad key of a file, not only the first. */
    if (ld->errbuf != NULL && ld->errlen > 0) {
        size_t used = strnlen(ld->errbuf, ld->errlen - 1);
        /* Whole lines only: the first error (cut to fit if it must), then
         * each later one that fits entirely. */
        if (used == 0)
            snprintf(ld->errbuf, ld->errlen, "%s", msg);
        else if (used + 1 + strlen(msg) < ld->errlen)
            snprintf(ld->errbuf + used, ld->errlen - used, "\n%s", msg);
    } else if (ld->errbuf == NULL) {
        rv_error("%s", msg);
    }
}

/* ---------------------------------------------------------------------- */
/* Components                                                              */
/* ---------------------------------------------------------------------- */

/* An empty configuration (no component), or NULL when out of memory. */
static rv_config_t *config_new(void)
{
    return calloc(1, sizeof(rv_config_t));
}

void rv_config_free(rv_config_t *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->ncomps; i++)
        free(cfg->comps[i].data);
    free(cfg->comps);
    free(cfg);
}

rv_config_comp_t *rv__config_comp(const rv_config_t *cfg, const char *prefix)
{
    for (size_t i = 0; i < cfg->ncomps; i++) {
        if (strcmp(cfg->comps[i].table->prefix, prefix) == 0)
            return &cfg->comps[i];
    }
    return NULL;
}

/* Appends a component holding @p data (which it then owns). */
static rv_status_t comp_append(rv_config_t *cfg, const rv_config_table_t *t,
                               void *data)
{
    if (cfg->ncomps == cfg->cap) {
        size_t cap = cfg->cap ? 2 * cfg->cap : 8;
        rv_config_comp_t *bigger = realloc(cfg->comps, cap * sizeof(*bigger));
        if (bigger == NULL)
            return RV_ERR_NO_MEMORY;
        cfg->comps = bigger;
        cfg->cap = cap;
    }
    cfg->comps[cfg->ncomps].table = t;
    cfg->comps[cfg->ncomps].data = data;
    cfg->ncomps++;
    return RV_OK;
}

rv_status_t rv__config_attach(rv_config_t *cfg, const rv_config_table_t *table,
                              void **data_p, char *why, size_t whylen)
{
    rv_config_comp_t *comp = rv__config_comp(cfg, table->prefix);
    rv_status_t status;
    void *data;

    if (comp != NULL)
        goto out;
    data = malloc(table->size > 0 ? table->size : 1);
    if (data == NULL) {
        snprintf(why, whylen, "out of memory");
        return RV_ERR_NO_MEMORY;
    }
    status = rv__config_defaults(table, data, why, whylen);
    if (status == RV_OK)
        status = comp_append(cfg, table, data);
    if (status != RV_OK) {
        if (status == RV_ERR_NO_MEMORY)
            snprintf(why, whylen, "out of memory");
        free(data);
        return status;
    }
    comp = &cfg->comps[cfg->ncomps - 1];
out:
    if (data_p != NULL)
        *data_p = comp->data;
    return RV_OK;
}

rv_status_t rv__config_attach_plugin(rv_config_t *cfg, const char *name,
                                     char *why, size_t whylen)
{
    const rv_config_table_t *table;
    rv_status_t status = rv__config_plugin_table(name, &table, why, whylen);

    if (status != RV_OK || table == NULL)
        return status;
    return rv__config_attach(cfg, table, NULL, why, whylen);
}

/* Adds core's and the registered layers' components that @p cfg lacks. */
static rv_status_t attach_builtin(rv_config_t *cfg, char *why, size_t whylen)
{
    const rv_config_table_t *tables[RV_CFG_MAX_TABLES];
    size_t n = rv__config_tables(tables, false);

    for (size_t i = 0; i < n; i++) {
        if (strncmp(tables[i]->prefix, TRANSPORT_PREFIX,
                    strlen(TRANSPORT_PREFIX)) == 0)
            continue; /* plugins come when needed */
        rv_status_t status =
            rv__config_attach(cfg, tables[i], NULL, why, whylen);
        if (status != RV_OK)
            return status;
    }
    return RV_OK;
}

rv_status_t rv__config_dup(const rv_config_t *src, rv_config_t **dst_p)
{
    rv_config_t *dst = config_new();
    char why[RV_CFG_MSG_MAX];
    rv_status_t status = RV_OK;

    if (dst == NULL)
        return RV_ERR_NO_MEMORY;
    for (size_t i = 0; i < src->ncomps && status == RV_OK; i++) {
        const rv_config_comp_t *c = &src->comps[i];
        void *data = malloc(c->table->size > 0 ? c->table->size : 1);
        if (data == NULL) {
            status = RV_ERR_NO_MEMORY;
            break;
        }
        memcpy(data, c->data, c->table->size);
        status = comp_append(dst, c->table, data);
        if (status != RV_OK)
            free(data);
    }
    if (status == RV_OK)
        status = attach_builtin(dst, why, sizeof(why));
    if (status != RV_OK) {
        rv_config_free(dst);
        return status;
    }
    *dst_p = dst;
    return RV_OK;
}

const void *rv_config_component(const rv_config_t *cfg, const char *prefix)
{
    rv_config_comp_t *comp;

    if (cfg == NULL || prefix == NULL)
        return NULL;
    comp = rv__config_comp(cfg, prefix);
    return comp != NULL ? comp->data : NULL;
}

const rv_core_config_t *rv_core_config(const rv_config_t *cfg)
{
    return rv_config_component(cfg, rv__config_core_table.prefix);
}

/* ---------------------------------------------------------------------- */
/* Environment                                                             */
/* ---------------------------------------------------------------------- */

/* Adds plugin @p name's component to the configuration @p arg when a
 * variable RIVET_TRANSPORT_<NAME>_* is set. A plugin that does not load is
 * left to rv_init to report, if the job selects it. */
static void env_plugin(const char *name, void *arg)
{
    rv_config_t *cfg = arg;
    char key[RV_CFG_KEY_MAX], prefix[ENV_NAME_MAX], why[RV_CFG_MSG_MAX];
    size_t plen;

    /* "transport.ucx." -> "RIVET_TRANSPORT_UCX_" */
    snprintf(key, sizeof(key), TRANSPORT_PREFIX "%s.", name);
    rv__config_env_name(key, prefix, sizeof(prefix));
    plen = strlen(prefix);
    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, prefix, plen) != 0)
            continue;
        if (rv__config_attach_plugin(cfg, name, why, sizeof(why)) != RV_OK)
            rv_debug("configuration: %s is set, but %s", *e, why);
        return;
    }
}

/*
 * Adds the components of the plugins the environment sets keys of, and of
 * the selected transport (RIVET_TRANSPORT_NAME, else transport.name).
 */
static void attach_plugins(rv_config_loader_t *ld)
{
    const char *name = getenv(ENV_TRANSPORT_NAME);
    char why[RV_CFG_MSG_MAX];

    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, ENV_TRANSPORT, strlen(ENV_TRANSPORT)) == 0 &&
            strncmp(*e, ENV_TRANSPORT_NAME "=",
                    strlen(ENV_TRANSPORT_NAME) + 1) != 0) {
            rv__plugin_foreach(env_plugin, ld->cfg);
            break;
        }
    }
    if (name == NULL)
        name = rv_core_config(ld->cfg)->transport.name;
    if (*name != '\0' &&
        rv__config_attach_plugin(ld->cfg, name, why, sizeof(why)) != RV_OK)
        rv_debug("configuration: transport '%s': %s", name, why);
}

/* Applies the RIVET_* variables of every component. */
static rv_status_t env_overlay(rv_config_loader_t *ld)
{
    rv_status_t status = RV_OK;

    for (size_t i = 0; i < ld->cfg->ncomps; i++) {
        const rv_config_comp_t *c = &ld->cfg->comps[i];
        for (const rv_config_field_t *f = c->table->fields; f->name != NULL;
             f++) {
            char key[RV_CFG_KEY_MAX], name[ENV_NAME_MAX];
            char why[RV_CFG_MSG_MAX / 2];
            const char *value;

            rv__config_full_key(c->table, f, key, sizeof(key));
            rv__config_env_name(key, name, sizeof(name));
            value = getenv(name);
            if (value == NULL)
                continue;
            if (f->later != NULL) {
                rv__config_report(ld,
                                  "environment %s: error: %s: not supported "
                                  "yet (%s)",
                                  name, key, f->later);
                rv__config_failed(ld, key);
                status = RV_ERR_CONFIG;
            } else if (!rv__config_parse(f, value, strlen(value), false,
                                         c->data, why, sizeof(why))) {
                rv__config_report(ld, "environment %s: error: %s: %s", name,
                                  key, why);
                rv__config_failed(ld, key);
                status = RV_ERR_CONFIG;
            }
        }
    }
    return status;
}

/*
 * RIVET_STATS is read as another spelling of RIVET_JOB_STATS, which wins
 * when both are set: empty or 0 is off, json is json, any other value
 * (1, yes, text) is text.
 */
static void env_stats_alias(rv_config_loader_t *ld)
{
    const char *v = getenv("RIVET_STATS");
    rv_core_config_t *core =
        rv__config_comp(ld->cfg, rv__config_core_table.prefix)->data;

    if (v == NULL || getenv("RIVET_JOB_STATS") != NULL)
        return;
    if (*v == '\0' || strcmp(v, "0") == 0 || strcasecmp(v, "off") == 0)
        core->job.stats = RV_STATS_OFF;
    else if (strcasecmp(v, "json") == 0)
        core->job.stats = RV_STATS_JSON;
    else
        core->job.stats = RV_STATS_TEXT;
}

void rv__config_failed(rv_config_loader_t *ld, const char *key)
{
    if (ld->nfailed < RV_CFG_FAILED_MAX)
        snprintf(ld->failed[ld->nfailed++], RV_CFG_KEY_MAX, "%s", key);
    else
        ld->failed_more = true;
}

bool rv__config_key_failed(const char *key, void *arg)
{
    const rv_config_loader_t *ld = arg;
    /* Past RV_CFG_FAILED_MAX refusals, any key may be among them. */
    if (ld->failed_more)
        return true;
    for (int i = 0; i < ld->nfailed; i++)
        if (strcmp(ld->failed[i], key) == 0)
            return true;
    return false;
}

/*
 * A load that refused some values still reports what the keys it took
 * make together (rv_config_check), so that one pass over a file names
 * every problem in it; the checks of refused keys are left out. A file
 * that is not YAML is left there: none of its keys were read.
 */
static void report_cross_key(rv_config_loader_t *ld)
{
    char problems[2048];
    if (ld->path != NULL && !ld->parsed)
        return;
    if (rv__config_check(ld->cfg, rv__config_key_failed, ld, problems,
                         sizeof(problems)) == 0)
        return;
    for (char *save = NULL, *line = strtok_r(problems, "\n", &save);
         line != NULL; line = strtok_r(NULL, "\n", &save))
        rv__config_report(ld, "%s: error: %s",
                          ld->path != NULL ? ld->path : "environment", line);
}

/* ---------------------------------------------------------------------- */
/* Entry points                                                            */
/* ---------------------------------------------------------------------- */

rv_status_t rv_config_load(const char *path, rv_config_t **cfg_p, char *errbuf,
                           size_t errlen)
{
    rv_config_loader_t ld = {
        .path = path,
        .errbuf = errbuf,
        .errlen = errlen,
    };
    char why[RV_CFG_MSG_MAX];
    rv_status_t status;

    if (cfg_p == NULL)
        return RV_ERR_INVALID;
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    ld.cfg = config_new();
    if (ld.cfg == NULL) {
        rv__config_report(&ld, "cannot load the configuration: out of memory");
        return RV_ERR_NO_MEMORY;
    }
    status = attach_builtin(ld.cfg, why, sizeof(why));
    if (status != RV_OK)
        rv__config_report(&ld, "table: error: %s", why);
    if (status == RV_OK && path != NULL)
        status = rv__config_load_file(&ld);
    if (status == RV_OK || (status == RV_ERR_CONFIG && ld.parsed)) {
        attach_plugins(&ld);
        rv_status_t env = env_overlay(&ld);
        status = status != RV_OK ? status : env;
    }
    if (status == RV_ERR_CONFIG)
        report_cross_key(&ld);
    if (status != RV_OK) {
        rv_config_free(ld.cfg);
        return status;
    }
    env_stats_alias(&ld);
    *cfg_p = ld.cfg;
    return RV_OK;
}

/* The row of @p key in @p cfg, adding the component of the transport
 * plugin it belongs to when that plugin has it. */
static const rv_config_field_t *set_find(rv_config_t *cfg, const char *key,
                                         rv_config_comp_t **comp_p)
{
    const rv_config_field_t *f = rv__config_find(cfg, key, comp_p);
    const rv_config_table_t *table;
    char name[RV_CFG_KEY_MAX], why[RV_CFG_MSG_MAX];

    if (f != NULL || !rv__config_plugin_of(key, name, sizeof(name)) ||
        rv__config_plugin_table(name, &table, why, sizeof(why)) != RV_OK ||
        table == NULL || rv__config_table_field(table, key) == NULL ||
        rv__config_attach(cfg, table, NULL, why, sizeof(why)) != RV_OK)
        return f;
    return rv__config_find(cfg, key, comp_p);
}

rv_status_t rv_config_set(rv_config_t *cfg, const char *key, const char *value)
{
    char why[RV_CFG_MSG_MAX];
    const rv_config_field_t *f;
    rv_config_comp_t *comp;

    if (cfg == NULL || key == NULL || value == NULL)
        return RV_ERR_INVALID;
    f = set_find(cfg, key, &comp);
    if (f == NULL) {
        rv__config_unknown(key, false, why, sizeof(why));
        rv_error("rv_config_set: error: %s", why);
        return RV_ERR_CONFIG;
    }
    if (f->later != NULL) {
        rv_error("rv_config_set: error: %s: not supported yet (%s)", key,
                 f->later);
        return RV_ERR_CONFIG;
    }
    if (!rv__config_parse(f, value, strlen(value), false, comp->data, why,
                          sizeof(why))) {
        rv_error("rv_config_set: error: %s: %s", key, why);
        return RV_ERR_CONFIG;
    }
    /* The selected transport's keys come with it, as rv_config_load's. */
    if (comp->table == &rv__config_core_table &&
        f->offset == offsetof(rv_core_config_t, transport.name) &&
        rv__config_attach_plugin(cfg, value, why, sizeof(why)) != RV_OK)
        rv_debug("configuration: transport '%s': %s", value, why);
    return RV_OK;
}
