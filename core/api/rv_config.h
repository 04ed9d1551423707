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
 *
 * @note Thread mode: the registry of tables is thread-safe. A
 * configuration (rv_config_t) is single-threaded while it is changed
 * (rv_config_set); once loaded, any number of threads may read it.
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

/** @brief job.placement: how processes and worker threads are bound. */
typedef enum {
    RV_PLACEMENT_NONE, /**< `none`: the OS decides */
    RV_PLACEMENT_CORE, /**< `core`: every worker thread of the node gets a
                            core of its own, round robin */
    RV_PLACEMENT_NUMA  /**< `numa`: each process is bound to one NUMA zone,
                            round robin; its threads float inside it */
} rv_placement_t;
/** @brief progress.mode: who posts to and progresses the transport. */
typedef enum {
    RV_PROGRESS_INLINE,  /**< `inline`: each worker thread, in rv_progress */
    RV_PROGRESS_THREAD,  /**< `thread`: spinning executor threads post the
                              worker threads' commands (static offloading) */
    RV_PROGRESS_DYNAMIC, /**< `dynamic`: as thread, executors sleep when
                              idle (dynamic offloading) */
    RV_PROGRESS_DIRECT   /**< `direct`: worker threads share the executors'
                              transport workers under a lock (baseline) */
} rv_progress_mode_t;
/** @brief progress.completers: who polls the offloaded transport workers
 * for completions and messages. */
typedef enum {
    RV_COMPLETERS_EXECUTORS, /**< `executors`: each executor polls its own
                                  worker between commands */
    RV_COMPLETERS_THREADS    /**< `threads`: a completer thread per executor
                                  polls, the executor only posts */
} rv_completers_t;
/** @brief memory.huge_pages: what backs registered chunks (see
 * rv_mem_chunk_allocator_create). */
typedef enum {
    RV_HUGE_AUTO,   /**< `auto`: huge pages when there are, else
                         transparent huge pages, else normal pages */
    RV_HUGE_OFF,    /**< `off`: normal pages only */
    RV_HUGE_REQUIRE /**< `require`: huge pages or an error */
} rv_huge_pages_t;
/** @brief job.stats: the counters each worker prints at the end of a
 * job. */
typedef enum {
    RV_STATS_OFF,  /**< `off`: none */
    RV_STATS_TEXT, /**< `text`: a line of text per worker */
    RV_STATS_JSON  /**< `json`: a JSON object per worker */
} rv_stats_mode_t;

/**
 * @brief A loaded configuration: one struct per component. Opaque; made by
 * rv_config_load, freed by rv_config_free (the context keeps its own copy,
 * rv_context_config).
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
        int64_t processes;        /**< processes rivetrun starts */
        int64_t threads;          /**< worker threads per process */
        rv_placement_t placement; /**< none | core | numa */
        int64_t service_threads;  /**< service threads per process */
        bool output_prefix;       /**< rivetrun prefixes output with rank */
        rv_stats_mode_t stats;    /**< off | text | json */
        int64_t keepalive;        /**< s without a rank's beat; 0: off */
    } job;                        /**< `job.*`: the shape of the job */
    struct {
        char name[RV_CONFIG_STR_MAX]; /**< plugin name: ucx | verbs */
    } transport; /**< `transport.name`: which plugin (its own keys are
                      its component's, `transport.NAME.*`) */
    struct {
        uint64_t chunk;             /**< registered chunk size */
        rv_huge_pages_t huge_pages; /**< auto | off | require */
        uint64_t limit;             /**< registered bytes per process; 0:
                                         no limit */
    } memory;                       /**< `memory.*`: registered memory */
    struct {
        rv_progress_mode_t mode;    /**< inline | thread | dynamic | direct */
        int64_t executors;          /**< transport workers per process */
        int64_t spin_us;            /**< dynamic: polling before sleep */
        int64_t sleep_us;           /**< dynamic: longest sleep */
        rv_completers_t completers; /**< executors | threads */
    } progress;                     /**< `progress.*`: how workers progress */
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
    const char *name;      /**< key under the table's prefix, e.g. "tls" */
    rv_config_type_t type; /**< the value's kind, which fixes its C type
                                in the struct */
    size_t offset;         /**< offset of the value in the component's struct */
    const char *def;       /**< default, as it would be written in YAML */
    /** @{ */
    int64_t min, max; /**< inclusive range for INT and SIZE; length
                           bounds for STRING */
    /** @} */
    const char *values; /**< ENUM names separated by '|' */
    const char *later;  /**< non-NULL: not supported yet; says what brings it */
    const char *help;   /**< one sentence for the reference and
                             --dump */
    /** STRING rows whose text has a form of its own (a number, "a size
     * or auto"): returns true if @p value has it, else writes why into
     * @p why (@p why_len bytes) and returns false; the value is then
     * refused as any bad value is, where it was read (file, line and
     * column; the variable; rv_config_set), and rivet-config --check
     * reports it. NULL: any text within the length bounds. */
    bool (*check)(const char *value, char *why, size_t why_len);
} rv_config_field_t;

/** @brief A component's table of keys and the size of its struct. */
typedef struct rv_config_table {
    const char *prefix; /**< "am", "transport.ucx"; "" for core's own */
    const char *help;   /**< one line: what the component is */
    const rv_config_field_t
        *fields; /**< terminated by a row whose name is NULL */
    size_t size; /**< size of the component's struct */
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
 * or program holding it is loaded, as UCS_CONFIG_REGISTER_TABLE does (a
 * constructor calling rv_config_register; its errors are logged). */
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
 * @param [out] errbuf if not NULL, receives the error messages on failure,
 *                     one per line ("file:line:col: error: message"):
 *                     every bad key of the file and of the environment,
 *                     not only the first; else they are logged
 * @param [in]  errlen size of @p errbuf
 * @return RV_OK, or RV_ERR_CONFIG / RV_ERR_NOT_FOUND / RV_ERR_IO /
 *         RV_ERR_NO_MEMORY; RV_ERR_INVALID (not logged) for a NULL
 *         @p cfg_p
 * @note Thread-safe: it reads the environment and the table registry.
 */
RV_EXPORT rv_status_t rv_config_load(const char *path, rv_config_t **cfg_p,
                                     char *errbuf, size_t errlen);

/**
 * @brief Frees a configuration of rv_config_load (never the context's own,
 * which rv_finalize frees).
 * @param [in] cfg the configuration; NULL is accepted
 * @note No other thread may use @p cfg meanwhile or afterwards.
 */
RV_EXPORT void rv_config_free(rv_config_t *cfg);

/**
 * @brief Sets @p key to @p value, written as in the environment
 * (`rv_config_set(cfg, "am.path", "write")`), with the same checks.
 *
 * Setting a key of a transport plugin that @p cfg does not hold yet adds
 * that plugin's component; setting transport.name adds the selected
 * plugin's.
 *
 * @param [in,out] cfg   the configuration
 * @param [in]     key   the full key, "am.path"
 * @param [in]     value its value as text, as in the environment; copied
 * @return RV_OK, RV_ERR_CONFIG (unknown key, with a suggestion; bad value;
 *         key not supported yet; logged) or RV_ERR_INVALID (NULL argument).
 *         On error @p cfg is unchanged.
 * @note Single-threaded: no other thread may read @p cfg meanwhile. The
 *       context's copy (rv_context_config) is read-only.
 */
RV_EXPORT rv_status_t rv_config_set(rv_config_t *cfg, const char *key,
                                    const char *value);

/**
 * @brief Writes the value of @p key into @p buf as text: strings as they
 * are, enums by name, integers and sizes in decimal, booleans true/false.
 *
 * A key of a plugin that @p cfg does not hold has its default (nothing in
 * the file or environment set it).
 *
 * @param [in]  cfg the configuration
 * @param [in]  key the full key, "transport.ucx.tls"
 * @param [out] buf the value, NUL-terminated (when @p len > 0)
 * @param [in]  len size of @p buf
 * @return RV_OK, RV_ERR_NOT_FOUND (no such key, or a NULL @p cfg or
 *         @p key; @p buf is set to ""), or RV_ERR_TRUNCATED (@p buf holds
 *         what fits)
 * @note Any thread, while no thread changes @p cfg.
 */
RV_EXPORT rv_status_t rv_config_get(const rv_config_t *cfg, const char *key,
                                    char *buf, size_t len);

/**
 * @brief Reads a size as SIZE keys take it (4096, 4KiB, 2MiB, 1GiB, 4K;
 * units case-insensitive), for a layer's STRING key that also takes words
 * (store.rndv_threshold: a size or auto).
 * @param [in]  text the text
 * @param [out] out  the size in bytes; set only on success
 * @return RV_OK, or RV_ERR_INVALID (not logged) for a NULL argument or text
 *         that is not a size
 * @note Any thread.
 */
RV_EXPORT rv_status_t rv_config_parse_size(const char *text, uint64_t *out);

/**
 * @brief The value of an INT, SIZE, BOOL (0 or 1) or ENUM (the index of its
 * name) key, as rv_config_get finds it.
 * @param [in]  cfg     the configuration
 * @param [in]  key     the full key
 * @param [out] value_p the value; set only on success
 * @return RV_OK, RV_ERR_NOT_FOUND (no such key, or a NULL argument) or
 *         RV_ERR_INVALID (a STRING key)
 * @note Any thread, while no thread changes @p cfg.
 */
RV_EXPORT rv_status_t rv_config_get_int(const rv_config_t *cfg, const char *key,
                                        int64_t *value_p);

/**
 * @brief The struct of the component registered under @p prefix.
 * @param [in] cfg    the configuration; may be NULL
 * @param [in] prefix the component's prefix: "am", "transport.ucx"; ""
 *                    for core's (rv_core_config)
 * @return the struct (cast it to the component's type), or NULL when
 *         @p cfg holds none or an argument is NULL; owned by @p cfg and
 *         valid as long as it is
 * @note Any thread, while no thread changes @p cfg.
 */
RV_EXPORT const void *rv_config_component(const rv_config_t *cfg,
                                          const char *prefix);

/**
 * @brief Core's own keys in @p cfg.
 * @param [in] cfg a configuration of rv_config_load or rv_context_config
 * @return the struct, owned by @p cfg and valid as long as it is; NULL
 *         for a NULL @p cfg
 * @note Any thread, while no thread changes @p cfg.
 */
RV_EXPORT const rv_core_config_t *rv_core_config(const rv_config_t *cfg);

/**
 * @brief Writes @p cfg as YAML that rv_config_load reads back unchanged:
 * every key of every component, plugins found in the plugin path included
 * (at their defaults when @p cfg does not hold them), with each
 * component's one-line help, and the keys not supported yet, as comments.
 * @param [in] cfg the configuration; NULL writes nothing
 * @param [in] out where to write; NULL writes nothing
 * @note Any thread, while no thread changes @p cfg. Out of memory is
 *       logged and the dump cut short.
 */
RV_EXPORT void rv_config_dump(const rv_config_t *cfg, FILE *out);

/**
 * @brief Checks what no single key's parser can: the keys against each
 * other (progress.executors at most job.threads when work is offloaded)
 * and transport.name against the plugins that can be loaded (naming the
 * installed ones). rv_config_load has already checked every key alone.
 * @param [in] cfg the configuration (NULL: nothing to check)
 * @param [out] errbuf one line per problem found, NUL-terminated (cut
 *                     short if @p errlen is too small); may be NULL
 * @param [in] errlen size of @p errbuf
 * @return the number of problems found (0: none)
 * @note Any thread, while no thread changes @p cfg. It may load the
 *       transport plugin named, as rv_init would.
 */
RV_EXPORT int rv_config_check(const rv_config_t *cfg, char *errbuf,
                              size_t errlen);

/**
 * @brief Writes every key of every component (core, the registered layers
 * and the plugins found in the plugin path) as a Markdown reference table:
 * type, default, range or values, environment variable and help.
 * @param [in] out where to write
 * @note Thread-safe. Out of memory is logged and the table cut short.
 */
RV_EXPORT void rv_config_print_reference(FILE *out);

/**
 * @brief The name of an enum value of a key.
 * @param [in] key   a full key of any component, plugins included
 *                   ("memory.huge_pages")
 * @param [in] value the C enum's value
 * @return the name ("auto"), or NULL when @p key is no ENUM key, @p value
 *         is out of range or memory runs out; the string lives as long as
 *         the process and is never freed by the caller
 * @note Thread-safe.
 */
RV_EXPORT const char *rv_config_enum_name(const char *key, int value);

#ifdef __cplusplus
}
#endif
#endif
