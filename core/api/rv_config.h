/**
 * @file rv_config.h
 * @brief A job's configuration: per-component tables of typed keys, filled
 * from defaults, a YAML file and RIVET_<SECTION>_<KEY> environment
 * overrides.
 *
 * Every component describes its keys in a table (rv_config_table_t) under
 * its own prefix and receives its own struct, filled by the loader, in the
 * manner of UCX's per-component ucs_config_field_t tables:
 * - core owns `job.*`, `transport.name`, `memory.*` and `progress.*`
 *   (rv_core_config_t, read with rv_core_config());
 * - a layer built into librivet (`am`, `rma`) registers its table before
 *   any configuration is loaded, with RV_CONFIG_REGISTER_TABLE, and reads
 *   its struct with rv_config_component();
 * - a transport plugin exports its table (prefix `transport.NAME`) in its
 *   ops table (rv_transport.h) and receives its struct in its init
 *   parameters.
 * The loader, the environment overlay, `rivet-config --dump` and
 * `rivet-config --reference` are driven by the tables, so adding a key to
 * a component is adding a field to its struct and a row to its table:
 * nothing of core changes.
 *
 * A key's environment variable is RIVET_ followed by the key in upper case
 * with dots turned into underscores (transport.ucx.tls ->
 * RIVET_TRANSPORT_UCX_TLS).
 */
#ifndef RIVET_RV_CONFIG_H
#define RIVET_RV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rv_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Size of a string value in a component's struct, NUL included. */
#define RV_CONFIG_STR_MAX 256

/** @brief job.placement */
typedef enum { RV_PLACEMENT_NONE, RV_PLACEMENT_CORE, RV_PLACEMENT_NUMA } rv_placement_t;
/** @brief progress.mode */
typedef enum { RV_PROGRESS_INLINE, RV_PROGRESS_THREAD, RV_PROGRESS_DYNAMIC } rv_progress_mode_t;
/** @brief memory.huge_pages */
typedef enum { RV_HUGE_AUTO, RV_HUGE_OFF, RV_HUGE_REQUIRE } rv_huge_pages_t;
/** @brief job.stats */
typedef enum { RV_STATS_OFF, RV_STATS_TEXT, RV_STATS_JSON } rv_stats_mode_t;

/**
 * @brief A loaded configuration: one struct per component. Opaque; made by
 * rv_config_load, freed by rv_config_free.
 * @note Single-threaded while it is changed (rv_config_set); once loaded,
 * any number of threads may read it.
 */
typedef struct rv_config rv_config_t;

/**
 * @brief Core's own keys (the table with the empty prefix), read through
 * rv_core_config(). A key a layer or a plugin adds changes nothing here.
 */
typedef struct rv_core_config {
    struct {
        int64_t processes;          /**< processes rivetrun starts */
        int64_t threads;            /**< worker threads per process */
        rv_placement_t placement;   /**< none | core | numa */
        int64_t service_threads;    /**< service threads per process */
        bool output_prefix;         /**< rivetrun prefixes output with rank */
        rv_stats_mode_t stats;      /**< off | text | json */
    } job;
    struct {
        char name[RV_CONFIG_STR_MAX]; /**< plugin name: ucx | verbs */
    } transport;
    struct {
        uint64_t chunk;             /**< registered chunk size */
        rv_huge_pages_t huge_pages; /**< auto | off | require */
    } memory;
    struct {
        rv_progress_mode_t mode;    /**< inline | thread | dynamic */
    } progress;
} rv_core_config_t;

/** @brief Kinds of values a table row holds. */
typedef enum rv_config_type {
    RV_CFG_INT,    /**< int64_t, decimal */
    RV_CFG_SIZE,   /**< uint64_t; accepts 4096, 4KiB, 2MiB, 1GiB, 4K */
    RV_CFG_BOOL,   /**< bool; true/false, yes/no, on/off, 1/0 */
    RV_CFG_STRING, /**< char[RV_CONFIG_STR_MAX] */
    RV_CFG_ENUM,   /**< an enum of int size; one of the names in values */
} rv_config_type_t;

/**
 * @brief One key of a component's table.
 *
 * `def` is written exactly as a user would write it in YAML (strings
 * double-quoted) and goes through the same parser as the file. `min`/`max`
 * bound INT and SIZE values (inclusive); for STRING rows they bound the
 * length in bytes (max 0 means RV_CONFIG_STR_MAX - 1). `values` lists ENUM
 * names, separated by '|', in the order of the C enum's values.
 */
typedef struct rv_config_field {
    const char *name;       /**< key under the table's prefix, e.g. "tls" */
    rv_config_type_t type;
    size_t offset;          /**< offset of the value in the component's struct */
    const char *def;        /**< default, as it would be written in YAML */
    int64_t min, max;       /**< inclusive range for INT and SIZE */
    const char *values;     /**< ENUM names separated by '|' */
    const char *later;      /**< non-NULL: not supported yet; says what brings it */
    const char *help;
} rv_config_field_t;

/** @brief A component's table of keys and the size of its struct. */
typedef struct rv_config_table {
    const char *prefix;     /**< "am", "transport.ucx"; "" for core's own */
    const char *help;       /**< one line: what the component is */
    const rv_config_field_t *fields; /**< terminated by a row whose name is NULL */
    size_t size;            /**< size of the component's struct */
} rv_config_table_t;

/**
 * @brief Registers a layer's table. Tables are registered before any
 * configuration is loaded (RV_CONFIG_REGISTER_TABLE does it when the library
 * holding the table is loaded); a configuration loaded earlier does not
 * hold the new component.
 *
 * @param [in] table lives as long as the process
 * @return RV_OK (also when @p table is registered already), RV_ERR_INVALID
 *         for a prefix that is empty, belongs to core or to the transport
 *         plugins (`transport.*`), RV_ERR_EXISTS for a prefix registered by
 *         another table, RV_ERR_NO_MEMORY when the registry is full; errors
 *         are logged
 * @note Thread-safe.
 */
RV_EXPORT rv_status_t rv_config_register(const rv_config_table_t *table);

/** @brief Registers @p _table (a static rv_config_table_t) when the library
 * or program holding it is loaded, as UCS_CONFIG_REGISTER_TABLE does. */
#define RV_CONFIG_REGISTER_TABLE(_table)                                       \
    static void rv_config_register_##_table(void)                              \
        __attribute__((constructor));                                          \
    static void rv_config_register_##_table(void)                              \
    {                                                                          \
        (void)rv_config_register(&(_table));                                   \
    }

/**
 * @brief Loads a configuration: defaults, then @p path (if not NULL), then
 * the environment overrides.
 *
 * It holds core's and every registered layer's component, the selected
 * transport's (when its plugin is found: a missing plugin is reported by
 * rv_init) and that of every plugin the file or the environment sets keys
 * of. A key under `transport.NAME` with no librivet-NAME.so is an error.
 *
 * @param [in]  path   YAML file, or NULL for defaults and environment only
 * @param [out] cfg_p  the configuration, set only on success; free it with
 *                     rv_config_free
 * @param [out] errbuf if not NULL, receives the error message on failure
 *                     ("file:line:col: error: message"); else the error is
 *                     logged
 * @param [in]  errlen size of @p errbuf
 * @return RV_OK, or RV_ERR_CONFIG / RV_ERR_NOT_FOUND / RV_ERR_IO /
 *         RV_ERR_NO_MEMORY
 */
RV_EXPORT rv_status_t rv_config_load(const char *path, rv_config_t **cfg_p,
                           char *errbuf, size_t errlen);

/** @brief Frees @p cfg (NULL is accepted). */
RV_EXPORT void rv_config_free(rv_config_t *cfg);

/**
 * @brief Sets @p key to @p value, written as in the environment
 * (`rv_config_set(cfg, "am.path", "write")`), with the same checks.
 *
 * Setting a key of a transport plugin that @p cfg does not hold yet adds
 * that plugin's component; setting transport.name adds the selected
 * plugin's.
 *
 * @return RV_OK, RV_ERR_CONFIG (unknown key, with a suggestion; bad value;
 *         key not supported yet; logged) or RV_ERR_INVALID (NULL argument).
 *         On error @p cfg is unchanged.
 */
RV_EXPORT rv_status_t rv_config_set(rv_config_t *cfg, const char *key, const char *value);

/**
 * @brief Writes the value of @p key into @p buf as text: strings as they
 * are, enums by name, integers and sizes in decimal, booleans true/false.
 *
 * A key of a plugin that @p cfg does not hold has its default (nothing in
 * the file or environment set it).
 *
 * @return RV_OK, RV_ERR_NOT_FOUND (no such key; @p buf is set to ""), or
 *         RV_ERR_TRUNCATED (@p buf holds what fits)
 */
RV_EXPORT rv_status_t rv_config_get(const rv_config_t *cfg, const char *key, char *buf,
                          size_t len);

/**
 * @brief The value of an INT, SIZE, BOOL (0 or 1) or ENUM (the index of its
 * name) key, as rv_config_get finds it.
 * @return RV_OK, RV_ERR_NOT_FOUND or RV_ERR_INVALID (a STRING key)
 */
RV_EXPORT rv_status_t rv_config_get_int(const rv_config_t *cfg, const char *key,
                              int64_t *value_p);

/**
 * @brief The struct of the component registered under @p prefix ("am",
 * "transport.ucx"), or NULL when @p cfg holds none.
 * @note The struct lives as long as @p cfg.
 */
RV_EXPORT const void *rv_config_component(const rv_config_t *cfg, const char *prefix);

/** @brief Core's own keys in @p cfg. */
RV_EXPORT const rv_core_config_t *rv_core_config(const rv_config_t *cfg);

/**
 * @brief Writes @p cfg as YAML that rv_config_load reads back unchanged:
 * every key of every component, plugins found in the plugin path included
 * (at their defaults when @p cfg does not hold them).
 */
RV_EXPORT void rv_config_dump(const rv_config_t *cfg, FILE *out);

/** @brief Writes every key of every component (registered layers and the
 * plugins found in the plugin path) as a Markdown reference table. */
RV_EXPORT void rv_config_print_reference(FILE *out);

/**
 * @brief Returns the name of enum value @p value of @p key (of any
 * component, plugins included), or NULL. The string lives as long as the
 * process.
 */
RV_EXPORT const char *rv_config_enum_name(const char *key, int value);

#ifdef __cplusplus
}
#endif
#endif
