/**
 * @file rv_stats.h
 * @brief The counters printed at the end of a job (job.stats): each layer
 * and transport describes its counters once, in a table, and core prints
 * them as text or JSON and lists them all (`rivet-config
 * --stats-reference`).
 *
 * A table names its counters, each a uint64_t at an offset in a struct of
 * the owner's; rv_stats_print prints one such struct as one line:
 *
 *     [rivet r0] am worker 1: calls_sent 10, calls_received 12, ...
 *     {"rank":0,"worker":1,"calls_sent":10,"calls_received":12,...}
 *
 * Included by rv_layer.h and rv_transport.h.
 *
 * @note Thread mode: rv_stats_register before any configuration is loaded
 * (RV_STATS_REGISTER_TABLE does it when the library holding the table is
 * loaded); rv_stats_print from any thread (one line is one write).
 */
#ifndef RIVET_RV_STATS_H
#define RIVET_RV_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rv_config.h"
#include "rv_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief One counter of a table. */
typedef struct rv_stat {
    const char *name; /**< its key in JSON and its name in text */
    const char *help; /**< what it counts (the reference) */
    size_t offset;    /**< of its uint64_t in the owner's struct */
} rv_stat_t;

/** @brief The counters of one layer or transport. */
typedef struct rv_stats_table {
    const char *name;       /**< "am", "store", "verbs", ... */
    const char *index_key;  /**< what a line counts for, its JSON key
                                 ("worker"), or NULL for a process */
    const char *help;       /**< what a line is (the reference) */
    const rv_stat_t *stats; /**< ended by an entry whose name is NULL */
} rv_stats_table_t;

/**
 * @brief Prints @p counters, laid out as @p table says, as one line on
 * stderr: text ("[rivet rRANK] NAME INDEX_KEY INDEX: counter value, ...")
 * or one JSON object per line ({"rank":R,"INDEX_KEY":I,"counter":v,...}).
 * @param [in] mode     RV_STATS_TEXT or RV_STATS_JSON (RV_STATS_OFF: nothing)
 * @param [in] table    the table; lives as long as the process
 * @param [in] rank     the process's rank
 * @param [in] index    the worker's (or other unit's) index, ignored
 *                      when table->index_key is NULL
 * @param [in] counters the struct; read during the call only
 * @note Any thread.
 */
RV_EXPORT void rv_stats_print(rv_stats_mode_t mode,
                              const rv_stats_table_t *table, int rank,
                              uint64_t index, const void *counters);

/**
 * @brief Registers @p table for the reference (rivet-config
 * --stats-reference).
 * @param [in] table lives as long as the process
 * @return RV_OK (also when registered already), or RV_ERR_NO_MEMORY when
 *         the registry is full
 * @note Before any other thread runs (RV_STATS_REGISTER_TABLE).
 */
RV_EXPORT rv_status_t rv_stats_register(const rv_stats_table_t *table);

/**
 * @brief Prints every registered table's counters as a Markdown table,
 * the transport plugins' included (each plugin found is loaded).
 * @param [in] f where to print
 * @note Main thread.
 */
RV_EXPORT void rv_stats_print_reference(FILE *f);

/** Registers @p _table when the library holding it is loaded. */
#define RV_STATS_REGISTER_TABLE(_table)                                        \
    __attribute__((constructor)) static void rv_stats_register_##_table(void)  \
    {                                                                          \
        rv_stats_register(&(_table));                                          \
    }

#ifdef __cplusplus
}
#endif
#endif
