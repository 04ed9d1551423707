/*
 * job.stats: the registry of the layers' and transports' counter tables
 * (rv_stats.h), and the one printer of their lines, as text or JSON.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_config_internal.h"
#include "rv_stats.h"

#define RV_STATS_MAX_TABLES 32
#define RV_STATS_LINE 4096

static const rv_stats_table_t *tables[RV_STATS_MAX_TABLES];
static size_t ntables;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

rv_status_t rv_stats_register(const rv_stats_table_t *table)
{
    rv_status_t st = RV_OK;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < ntables && tables[i] != table)
        i++;
    if (i == ntables) {
        if (ntables == RV_STATS_MAX_TABLES)
            st = RV_ERR_NO_MEMORY;
        else
            tables[ntables++] = table;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

void rv_stats_print(rv_stats_mode_t mode, const rv_stats_table_t *table,
                    int rank, uint64_t index, const void *counters)
{
    if (mode == RV_STATS_OFF)
        return;
    /* One line, written at once: the lines of the job's processes and
     * threads, all on stderr, do not interleave within a line. */
    char line[RV_STATS_LINE];
    size_t n = 0;
    bool json = mode == RV_STATS_JSON;
#define PUT(...)                                                               \
    do {                                                                       \
        int k_ = snprintf(line + n, n < sizeof(line) ? sizeof(line) - n : 0,   \
                          __VA_ARGS__);                                        \
        n += k_ > 0 ? (size_t)k_ : 0;                                          \
    } while (0)
    if (json) {
        PUT("{\"rank\":%d", rank);
        if (table->index_key != NULL)
            PUT(",\"%s\":%" PRIu64, table->index_key, index);
    } else {
        PUT("[rivet r%d] %s", rank, table->name);
        if (table->index_key != NULL)
            PUT(" %s %" PRIu64, table->index_key, index);
        PUT(":");
    }
    for (const rv_stat_t *s = table->stats; s->name != NULL; s++) {
        uint64_t v;
        memcpy(&v, (const char *)counters + s->offset, sizeof(v));
        if (json)
            PUT(",\"%s\":%" PRIu64, s->name, v);
        else
            PUT("%s %s %" PRIu64, s == table->stats ? "" : ",", s->name, v);
    }
    PUT(json ? "}\n" : "\n");
#undef PUT
    if (n >= sizeof(line)) { /* cut: still one line */
        n = sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    fwrite(line, 1, n, stderr);
}

static int table_cmp(const void *a, const void *b)
{
    return strcmp((*(const rv_stats_table_t *const *)a)->name,
                  (*(const rv_stats_table_t *const *)b)->name);
}

void rv_stats_print_reference(FILE *f)
{
    /* The plugins register their tables when loaded: load them all, as
     * the reference of the configuration keys does. */
    const rv_config_table_t *all[RV_CFG_MAX_TABLES];
    (void)rv__config_tables(all, true);
    pthread_mutex_lock(&lock);
    const rv_stats_table_t *sorted[RV_STATS_MAX_TABLES];
    size_t n = ntables;
    memcpy(sorted, tables, n * sizeof(*sorted));
    pthread_mutex_unlock(&lock);
    qsort(sorted, n, sizeof(*sorted), table_cmp);
    fprintf(f, "| table | one line per | counter | what it counts |\n"
               "|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++)
        for (const rv_stat_t *s = sorted[i]->stats; s->name != NULL; s++)
            fprintf(f, "| `%s` | %s | `%s` | %s |\n", sorted[i]->name,
                    sorted[i]->help, s->name, s->help);
}
