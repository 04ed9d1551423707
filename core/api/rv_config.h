/**
 * @file rv_config.h
 * @brief A job's configuration: typed structs filled from a YAML file,
 * defaults and RIVET_<SECTION>_<KEY> environment overrides.
 *
 * Every field here has one row in the schema table (core/rv_config_schema.c)
 * that gives its key, type, default, range and help text. The loader, the
 * environment overlay, `rivet-config --dump` and the README's reference are
 * all driven by that table.
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

#define RV_CONFIG_STR_MAX 256

typedef enum { RV_PLACEMENT_NONE, RV_PLACEMENT_CORE, RV_PLACEMENT_NUMA } rv_placement_t;
typedef enum { RV_PROGRESS_INLINE, RV_PROGRESS_THREAD, RV_PROGRESS_DYNAMIC } rv_progress_mode_t;
typedef enum { RV_AM_PATH_SEND, RV_AM_PATH_WRITE } rv_am_path_t;
typedef enum { RV_AGG_NONE, RV_AGG_TRAD, RV_AGG_OVFL } rv_aggregation_t;
typedef enum { RV_ON_FULL_FAIL, RV_ON_FULL_RETRY, RV_ON_FULL_RETRY_ASYNC } rv_on_full_t;
typedef enum { RV_AMLONG_REASSEMBLY, RV_AMLONG_PUT_SYNC_SEND } rv_am_long_protocol_t;
typedef enum { RV_QP_SHARING_THREAD, RV_QP_SHARING_PROCESS } rv_qp_sharing_t;
typedef enum { RV_HUGE_AUTO, RV_HUGE_OFF, RV_HUGE_REQUIRE } rv_huge_pages_t;
typedef enum { RV_RMA_EMU_AUTO, RV_RMA_EMU_ON, RV_RMA_EMU_OFF } rv_rma_emulation_t;

/** @brief The effective configuration of a job. Plain data; copy freely. */
typedef struct rv_config {
    struct {
        int64_t processes;          /**< processes rivetrun starts */
        int64_t threads;            /**< worker threads per process */
        rv_placement_t placement;   /**< none | core | numa */
        int64_t service_threads;    /**< service threads per process */
        bool output_prefix;         /**< rivetrun prefixes output with rank */
    } job;
    struct {
        char name[RV_CONFIG_STR_MAX]; /**< plugin name: ucx | verbs */
        struct {
            char tls[RV_CONFIG_STR_MAX];         /**< UCX_TLS */
            char net_devices[RV_CONFIG_STR_MAX]; /**< UCX_NET_DEVICES */
            uint64_t rndv_thresh;                /**< 0 = UCX's choice */
            rv_rma_emulation_t rma_emulation;    /**< auto | on | off */
            int64_t gid_index;                   /**< -1 = UCX's choice */
        } ucx;
        struct {
            char device[RV_CONFIG_STR_MAX];
            int64_t port;
            int64_t gid_index;
            rv_qp_sharing_t qp_sharing;
            int64_t signal_interval;
        } verbs;
    } transport;
    struct {
        uint64_t chunk;             /**< registered chunk size */
        rv_huge_pages_t huge_pages; /**< auto | off | require */
    } memory;
    struct {
        rv_am_path_t path;
        rv_aggregation_t aggregation;
        uint64_t flush_bytes;
        uint64_t ovfl_limit;
        rv_on_full_t on_full;
        int64_t chunks_per_request;
        int64_t max_chunks;
        uint64_t chunk_bytes;
        bool local_bypass;
    } am;
    struct {
        rv_progress_mode_t mode;
    } progress;
    struct {
        rv_am_long_protocol_t am_long_protocol;
    } rma;
    struct {
        uint64_t capacity;
        uint64_t rndv_threshold;
    } store;
    struct {
        char game[RV_CONFIG_STR_MAX];
        int64_t board_size;
        int64_t simulations_per_leaf;
        int64_t rollouts_per_move;
    } mcts;
} rv_config_t;

/** @brief Kinds of values a schema row holds. */
typedef enum rv_config_type {
    RV_CFG_INT,    /**< int64_t, decimal */
    RV_CFG_SIZE,   /**< uint64_t; accepts 4096, 4KiB, 2MiB, 1GiB, 4K */
    RV_CFG_BOOL,   /**< bool; true/false, yes/no, on/off, 1/0 */
    RV_CFG_STRING, /**< char[RV_CONFIG_STR_MAX] */
    RV_CFG_ENUM,   /**< int; one of the names in values, in order */
} rv_config_type_t;

/** @brief One key of the schema table. */
typedef struct rv_config_field {
    const char *key;        /**< dotted path, e.g. "transport.ucx.tls" */
    rv_config_type_t type;
    size_t offset;          /**< offset of the field in rv_config_t */
    const char *def;        /**< default, as it would be written in YAML */
    int64_t min, max;       /**< inclusive range for INT and SIZE */
    const char *values;     /**< ENUM names separated by '|' */
    const char *later;      /**< non-NULL: not supported yet; says what brings it */
    const char *help;
} rv_config_field_t;

/** @brief The schema table, terminated by a row whose key is NULL. */
extern RV_EXPORT const rv_config_field_t rv_config_schema[];

/**
 * @brief Fills @p cfg with defaults, then @p path (if not NULL), then the
 * environment overrides.
 *
 * @param [in]  path   YAML file, or NULL for defaults and environment only
 * @param [out] cfg    the effective configuration; set only on success
 * @param [out] errbuf if not NULL, receives the error message on failure
 *                     ("file:line:col: message"); also logged at error level
 *                     unless @p errbuf is given
 * @param [in]  errlen size of @p errbuf
 * @return RV_OK, or RV_ERR_CONFIG / RV_ERR_NOT_FOUND / RV_ERR_IO
 */
RV_EXPORT rv_status_t rv_config_load(const char *path, rv_config_t *cfg, char *errbuf,
                           size_t errlen);

/** @brief Writes @p cfg as YAML that rv_config_load reads back unchanged. */
RV_EXPORT void rv_config_dump(const rv_config_t *cfg, FILE *out);

/** @brief Writes the schema as a Markdown reference table. */
RV_EXPORT void rv_config_print_reference(FILE *out);

/** @brief Returns the name of enum field value @p value of @p key. */
RV_EXPORT const char *rv_config_enum_name(const char *key, int value);

#ifdef __cplusplus
}
#endif
#endif
