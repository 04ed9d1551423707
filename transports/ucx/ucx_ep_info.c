/*
 * What UCX says of an endpoint (ucp_ep_print_info), read once when it
 * connects: the transports its lanes use (shown to the user), whether its
 * RMA would run over TCP (then rivet emulates RMA), and, at log level
 * info, its lanes and AM protocols by size (recorded by the benchmarks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

/* What ucp_ep_print_info says of @p ep (malloc'ed), or NULL. */
char *rv_ucx_ep_info(ucp_ep_h ep)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (f == NULL)
        return NULL;
    ucp_ep_print_info(ep, f);
    fclose(f);
    return text;
}

/* The "tl/dev" of an ep_info lane line ("lane[1]:  3:cma/memory.0 md[3]
 * -> ... rma_bw#0"), or NULL if @p line is not one. */
static const char *lane_tl(const char *line, size_t *len_p)
{
    const char *p = strstr(line, "lane[");
    if (p == NULL || (p = strchr(p, ':')) == NULL)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == ':')
        p++;
    size_t n = strcspn(p, " \t\n");
    if (n == 0 || n > 48)
        return NULL;
    *len_p = n;
    return p;
}

/* Records which UCX transports an endpoint to another process uses, e.g.
 * "posix/memory, cma/memory", for the user. */
void rv_ucx_record_lanes(rv_transport_t *tp, const char *info)
{
    char out[sizeof(tp->lanes)];
    size_t used = 0, n;
    out[0] = '\0';
    for (const char *line = info; line && *line;) {
        const char *eol = strchrnul(line, '\n');
        const char *tl = lane_tl(line, &n);
        if (tl != NULL && tl < eol) {
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)n, tl);
            if (strstr(out, name) == NULL)
                used += (size_t)snprintf(
                    out + used, used < sizeof(out) ? sizeof(out) - used : 0,
                    "%s%s", used ? ", " : "", name);
        }
        line = *eol ? eol + 1 : eol;
    }
    if (out[0] != '\0')
        snprintf(tp->lanes, sizeof(tp->lanes), "%s", out);
}

/* True when UCX would carry @p info's RMA over TCP, or has no RMA lane
 * (then it emulates RMA itself, as slowly). */
bool rv_ucx_rma_needs_emulation(const char *info)
{
    bool native = false;
    size_t n;
    for (const char *line = info; line && *line;) {
        const char *eol = strchrnul(line, '\n');
        const char *tl = lane_tl(line, &n);
        const char *rma = strstr(line, "rma");
        if (tl != NULL && tl < eol && rma != NULL && rma < eol &&
            strncmp(tl, "tcp", 3) != 0)
            native = true;
        line = *eol ? eol + 1 : eol;
    }
    return !native;
}

/* At log level info, logs the lanes and the AM protocol by size
 * (ucp_ep_print_info's "lane[" and "am_send:" lines) of the endpoint to
 * @p peer_rank, so that a benchmark can record which protocol it ran. */
void rv_ucx_log_ep_info(int peer_rank, const char *info)
{
    if (!rv_log_enabled(RV_LOG_INFO) || info == NULL)
        return;
    for (const char *line = info; *line;) {
        const char *eol = strchrnul(line, '\n');
        const char *p = line + strspn(line, "# \t");
        if (p < eol &&
            (strncmp(p, "lane[", 5) == 0 || strncmp(p, "am_send:", 8) == 0))
            rv_info("ucx endpoint to rank %d: %.*s", peer_rank, (int)(eol - p),
                    p);
        line = *eol ? eol + 1 : eol;
    }
}
