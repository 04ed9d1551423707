/*
 * Internal to core/'s configuration (never installed): the loaded
 * configuration's components, the table registry, values, key lookups and
 * suggestions, shared by
 *   rv_config_registry.c  registered tables and plugin tables;
 *   rv_config_core.c      core's own table;
 *   rv_config_load.c      the load pipeline: components, defaults,
 *                         environment, rv_config_set;
 *   rv_config_yaml.c      the YAML walk;
 *   rv_config_value.c     parsing and formatting of values;
 *   rv_config_keys.c      key and section lookups, suggestions;
 *   rv_config_dump.c      --dump and --reference.
 */
#ifndef RIVET_RV_CONFIG_INTERNAL_H
#define RIVET_RV_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_config.h"

#define RV_CFG_KEY_MAX 256   /* longest dotted key */
#define RV_CFG_MSG_MAX 1024  /* longest error message */
#define RV_CFG_MAX_TABLES 64 /* tables a process knows, plugins included */

/* Core's own table (rv_config_core.c). */
extern const rv_config_table_t rv__config_core_table;

/* One component of a loaded configuration: its table and its struct. */
typedef struct rv_config_comp {
    const rv_config_table_t *table;
    void *data; /* table->size bytes */
} rv_config_comp_t;

struct rv_config {
    rv_config_comp_t *comps; /* core's first, then in the order added */
    size_t ncomps, cap;
};

/* State of one load: where errors go and the configuration being filled. */
/* Keys whose values a load refused, remembered so that the checks of keys
 * against each other leave them out (rv_config_check.c). */
#define RV_CFG_FAILED_MAX 32

typedef struct rv_config_loader {
    const char *path;          /* the file, for messages */
    const unsigned char *text; /* its contents, for reader error positions */
    size_t text_len;
    char *errbuf; /* caller's buffer, or NULL to log */
    size_t errlen;
    rv_config_t *cfg;
    bool parsed; /* the file was YAML (its keys were read, some refused) */
    char failed[RV_CFG_FAILED_MAX][RV_CFG_KEY_MAX];
    int nfailed;
    bool failed_more; /* more refused than failed holds */
} rv_config_loader_t;

/* Remembers that the value of @p key was refused. */
void rv__config_failed(rv_config_loader_t *ld, const char *key);
/* Whether the value of @p key was refused (@p arg: the loader). */
bool rv__config_key_failed(const char *key, void *arg);

/*
 * rv_config_check, leaving out each check that weighs a key for which
 * @p skip (when not NULL) returns true: the keys a load refused keep
 * their defaults, and a check of them would blame the defaults.
 */
int rv__config_check(const rv_config_t *cfg,
                     bool (*skip)(const char *key, void *arg), void *arg,
                     char *errbuf, size_t errlen);

/* ---- registry (rv_config_registry.c) ---------------------------------- */

/*
 * The tables known to this process in the order --dump and --reference
 * show them: core's, the registered layers' (by prefix), then the plugins'
 * (by prefix): those loaded so far, or with @p all_plugins every plugin in
 * the plugin path (loading them; broken ones are skipped). Returns how many
 * were written to @p out (at most RV_CFG_MAX_TABLES).
 */
size_t rv__config_tables(const rv_config_table_t **out, bool all_plugins);

/*
 * The table of transport plugin @p name, loading the plugin once. Returns
 * RV_OK (*table_p NULL when the plugin has no keys), RV_ERR_NOT_FOUND when
 * there is no librivet-NAME.so, or another error with the reason in
 * @p why.
 */
rv_status_t rv__config_plugin_table(const char *name,
                                    const rv_config_table_t **table_p,
                                    char *why, size_t whylen);

/* Order of tables for --dump: core's, layers', then plugins'. */
int rv__config_table_cmp(const rv_config_table_t *a,
                         const rv_config_table_t *b);

/* ---- components (rv_config_load.c) ------------------------------------ */

/* The component of @p cfg under @p prefix, or NULL. */
rv_config_comp_t *rv__config_comp(const rv_config_t *cfg, const char *prefix);

/*
 * Adds @p table's component to @p cfg at its defaults, unless it holds it
 * already; *data_p (if not NULL) receives its struct. On failure writes the
 * reason to @p why.
 */
rv_status_t rv__config_attach(rv_config_t *cfg, const rv_config_table_t *table,
                              void **data_p, char *why, size_t whylen);

/*
 * Adds transport plugin @p name's component (see rv__config_plugin_table).
 * RV_ERR_NOT_FOUND: no such plugin; other errors carry a reason in @p why.
 */
rv_status_t rv__config_attach_plugin(rv_config_t *cfg, const char *name,
                                     char *why, size_t whylen);

/* A copy of @p src, completed with registered tables it lacks. */
rv_status_t rv__config_dup(const rv_config_t *src, rv_config_t **dst_p);

/* Reports one error of a load: into the caller's buffer, else to the log. */
void rv__config_report(rv_config_loader_t *ld, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the file (rv_config_yaml.c) -------------------------------------- */

/* Reads ld->path into ld->cfg. */
rv_status_t rv__config_load_file(rv_config_loader_t *ld);

/* ---- values (rv_config_value.c) --------------------------------------- */

/*
 * Parses @p text (@p len bytes; @p is_null for a YAML null such as an
 * empty value or ~) as the value of row @p f and stores it into the
 * component struct @p base. On failure writes the reason, without the key,
 * to @p why and leaves @p base unchanged.
 */
bool rv__config_parse(const rv_config_field_t *f, const char *text, size_t len,
                      bool is_null, void *base, char *why, size_t whylen);

/* Fills @p data (table->size bytes) with @p table's defaults. */
rv_status_t rv__config_defaults(const rv_config_table_t *table, void *data,
                                char *why, size_t whylen);

/* Writes @p v in the largest binary unit that divides it: 4096 -> "4KiB". */
void rv__config_format_size(uint64_t v, char *buf, size_t len);

/* The @p index-th name of an ENUM row's values, as a pointer into them and
 * a length; false past the last name. */
bool rv__config_enum_span(const rv_config_field_t *f, int index,
                          const char **name, size_t *len);

/* The longest a STRING row's value may be, in bytes. */
int64_t rv__config_string_max(const rv_config_field_t *f);

/* Units sizes accept, for messages and the reference. */
#define RV_CFG_SIZE_UNITS_TEXT                                                 \
    "K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (binary multiples)"

/* ---- keys (rv_config_keys.c) ------------------------------------------ */

/* "prefix.name", or "name" for core's table. */
void rv__config_full_key(const rv_config_table_t *t, const rv_config_field_t *f,
                         char *buf, size_t len);

/* The row of @p table whose full key is @p key, or NULL. */
const rv_config_field_t *rv__config_table_field(const rv_config_table_t *table,
                                                const char *key);

/* The row of @p key among @p cfg's components and the component. */
const rv_config_field_t *rv__config_find(const rv_config_t *cfg,
                                         const char *key,
                                         rv_config_comp_t **comp_p);

/* The row of @p key in any table known to the process (loading the plugin
 * of a `transport.NAME.*` key), and its table; NULL if none. */
const rv_config_field_t *rv__config_find_any(const char *key,
                                             const rv_config_table_t **table_p);

/* True if @p section names a section of @p cfg: a key starts with it and a
 * dot. */
bool rv__config_is_section(const rv_config_t *cfg, const char *section);

/*
 * If @p key is `transport.NAME` or lies under it, and NAME is not a key of
 * core's, writes NAME to @p name and returns true: the key belongs to a
 * transport plugin.
 */
bool rv__config_plugin_of(const char *key, char *name, size_t len);

/* "RIVET_TRANSPORT_UCX_TLS" for "transport.ucx.tls". */
void rv__config_env_name(const char *key, char *buf, size_t len);

/*
 * Writes the message of an unknown key or section: "unknown key 'K'; did
 * you mean 'S'?", naming the missing librivet-NAME.so for a key of a
 * transport without a plugin.
 */
void rv__config_unknown(const char *key, bool section, char *buf, size_t len);

/* Levenshtein distance between @p a and @p b when at most @p limit, else
 * limit + 1 (longer than RV_CFG_KEY_MAX: far), and how far a name of
 * @p len characters may be from a suggestion. */
size_t rv__config_distance(const char *a, const char *b, size_t limit);
size_t rv__config_distance_limit(size_t len);

/* ---- the environment (rv_config_env.c) -------------------------------- */

/* Warns once for each RIVET_* variable of the environment that is neither
 * the variable of a key of @p cfg nor one rivet reads otherwise, with the
 * nearest key's variable when one is close: it is ignored, and a
 * misspelled variable would otherwise go unnoticed (UCX warns so of its
 * own unused UCX_* variables). Returns how many it warned of. */
int rv__config_env_check(const rv_config_t *cfg);

#endif
