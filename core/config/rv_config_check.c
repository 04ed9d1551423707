/*
 * rv_config_check: what no single key's parser can see, checked before a
 * job starts rather than at its launch: keys against each other, and the
 * transport named against the plugins that can be loaded. rivet-config
 * --check reports every problem it finds this way, not only the first.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rv_config_internal.h"
#include "rv_core.h"

/* Appends one problem, a line, to the caller's buffer. */
static void problem(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (buf == NULL || *used + 1 >= len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    *used += (size_t)n < len - *used ? (size_t)n : len - *used - 1;
    if (*used + 1 < len) {
        buf[(*used)++] = '\n';
        buf[*used] = '\0';
    }
}

typedef bool (*skip_fn)(const char *key, void *arg);

/* Whether any of the NULL-terminated @p keys is to be left out. */
static bool skipped(skip_fn skip, void *arg, const char *const *keys)
{
    for (; skip != NULL && *keys != NULL; keys++)
        if (skip(*keys, arg))
            return true;
    return false;
}

/* transport.name names a plugin that can be loaded. */
static int check_transport(const rv_core_config_t *core, char *buf, size_t len,
                           size_t *used)
{
    const rv_config_table_t *table;
    char why[RV_CFG_MSG_MAX], names[256];
    const char *name = core->transport.name;
    rv_status_t st;

    if (name[0] == '\0')
        return 0;
    st = rv__config_plugin_table(name, &table, why, sizeof(why));
    if (st == RV_OK)
        return 0;
    if (st == RV_ERR_NOT_FOUND) {
        rv__plugin_names(names, sizeof(names));
        problem(buf, len, used,
                "transport.name: no transport '%s' is installed "
                "(librivet-%s.so); the installed ones: %s",
                name, name, names);
    } else {
        problem(buf, len, used, "transport.name: '%s' cannot be loaded: %s",
                name, why);
    }
    return 1;
}

/* Executors are shared by worker threads (rv_offload.c). */
static int check_progress(const rv_core_config_t *core, char *buf, size_t len,
                          size_t *used)
{
    if (core->progress.mode == RV_PROGRESS_INLINE ||
        core->progress.executors <= core->job.threads)
        return 0;
    problem(buf, len, used,
            "progress.executors: %lld is more than job.threads (%lld): "
            "executors are shared by a process's worker threads, so there "
            "can be at most as many",
            (long long)core->progress.executors, (long long)core->job.threads);
    return 1;
}

int rv__config_check(const rv_config_t *cfg, skip_fn skip, void *arg,
                     char *errbuf, size_t errlen)
{
    static const char *const transport_keys[] = {"transport.name", NULL};
    static const char *const progress_keys[] = {
        "progress.mode", "progress.executors", "job.threads", NULL};
    const rv_core_config_t *core = rv_core_config(cfg);
    size_t used = 0;
    int n = 0;

    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (core == NULL)
        return 0;
    if (!skipped(skip, arg, transport_keys))
        n += check_transport(core, errbuf, errlen, &used);
    if (!skipped(skip, arg, progress_keys))
        n += check_progress(core, errbuf, errlen, &used);
    return n;
}

int rv_config_check(const rv_config_t *cfg, char *errbuf, size_t errlen)
{
    return rv__config_check(cfg, NULL, NULL, errbuf, errlen);
}
