/*
 * What UCX says of a worker (ucp_worker_print_info: where its atomics
 * run) and of an endpoint (ucp_ep_print_info), read once when it
 * connects: the transports its lanes use (shown to the user, by class of
 * processes that UCX reaches the same way), whether its
 * RMA would run over TCP (then rivet emulates RMA), and, at log level
 * info, its lanes and AM protocols by size (recorded by the benchmarks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

/* What UCX's @p print says of @p obj (malloc'ed), or NULL. */
static char *print_text(void (*print)(void *obj, FILE *f), void *obj)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (f == NULL)
        return NULL;
    print(obj, f);
    fclose(f);
    return text;
}

static void ep_print(void *ep, FILE *f)
{
    ucp_ep_print_info(ep, f);
}

static void worker_print(void *worker, FILE *f)
{
    ucp_worker_print_info(worker, f);
}

/* What ucp_ep_print_info says of @p ep (malloc'ed), or NULL. */
char *rv_ucx_ep_info(ucp_ep_h ep)
{
    return print_text(ep_print, ep);
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

/* The UCX transports of @p info's lanes, each once, in @p out: "posix/memory,
 * cma/memory". */
static void lanes_of(const char *info, char *out, size_t size)
{
    size_t used = 0, n;
    out[0] = '\0';
    for (const char *line = info; line && *line;) {
        const char *eol = strchrnul(line, '\n');
        const char *tl = lane_tl(line, &n);
        if (tl != NULL && tl < eol) {
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)n, tl);
            if (strstr(out, name) == NULL)
                used +=
                    (size_t)snprintf(out + used, used < size ? size - used : 0,
                                     "%s%s", used ? ", " : "", name);
        }
        line = *eol ? eol + 1 : eol;
    }
}

/*
 * Counts process @p peer_rank in its class. On a cluster UCX builds the
 * endpoints to the processes of the same host of shared memory and those
 * to other hosts of the network, so one description would be wrong for
 * half the job: the user is shown each class, and the capabilities hold
 * for every class (ucx_transport.c). Ranks come in increasing order, once
 * per job; a later job of the same context (same processes) is not
 * counted again.
 */
bool rv_ucx_record_lanes(rv_transport_t *tp, int peer_rank, const char *info,
                         bool emulated)
{
    char lanes[sizeof(tp->classes[0].lanes)];
    bool made = false;
    if (peer_rank <= tp->described_upto)
        return false;
    tp->described_upto = peer_rank;
    lanes_of(info, lanes, sizeof(lanes));
    if (lanes[0] == '\0')
        return false;
    rv_ucx_peer_class_t *c = NULL;
    for (unsigned i = 0; i < tp->nclasses && c == NULL; i++)
        if (strcmp(tp->classes[i].lanes, lanes) == 0 &&
            tp->classes[i].emulated == emulated)
            c = &tp->classes[i];
    if (c == NULL) {
        if (tp->nclasses == RV_UCX_MAX_CLASSES) {
            tp->classes_full = true;
            return false;
        }
        c = &tp->classes[tp->nclasses++];
        snprintf(c->lanes, sizeof(c->lanes), "%s", lanes);
        c->emulated = emulated;
        c->first = peer_rank;
        made = true;
    }
    c->nranks++;
    c->last = peer_rank;
    return made;
}

void rv_ucx_describe_classes(const rv_transport_t *tp, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < tp->nclasses; i++) {
        const rv_ucx_peer_class_t *c = &tp->classes[i];
        char who[48];
        if (c->nranks == 1)
            snprintf(who, sizeof(who), "rank %d", c->first);
        else
            snprintf(who, sizeof(who), "%d ranks, %d..%d", c->nranks, c->first,
                     c->last);
        used +=
            (size_t)snprintf(out + used, used < len ? len - used : 0,
                             "%s%s (%s%s)", i ? "; " : "", c->lanes, who,
                             c->emulated ? "; RMA over active messages" : "");
    }
    if (tp->classes_full)
        snprintf(out + used, used < len ? len - used : 0, "; others");
}

/*
 * True when the UCP worker that @p worker_info describes
 * (ucp_worker_print_info: "atomics: 0:self/memory0, 1:sysv/memory") runs
 * atomics on a network device: UCX then takes every atomic of the worker
 * there, even to a peer on the same host or to itself (UCX_ATOMIC_MODE
 * device, or guess finding a device), and a NIC's atomics need not be
 * atomic with the CPU's. The CPU's transports (shared memory, self), or
 * none (UCX's atomics in software, applied by the target's CPU, as over
 * TCP or a device without them, such as Soft-RoCE under UCX 1.13), are
 * not. A transport not known here counts as a device: sending atomics
 * through UCX is always safe, only slower.
 */
bool rv_ucx_atomics_on_device(const char *worker_info)
{
    static const char *const cpu[] = {"self",  "sysv", "posix",
                                      "xpmem", "knem", "cma"};
    const char *p = worker_info ? strstr(worker_info, "atomics:") : NULL;
    if (p == NULL)
        return false;
    const char *eol = strchrnul(p, '\n');
    for (p += strlen("atomics:"); p < eol; p++) {
        /* each entry: "N:tl/dev", comma-separated */
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL)
            break;
        const char *tl = colon + 1;
        size_t n = strcspn(tl, "/, \n");
        bool known = false;
        for (size_t i = 0; i < sizeof(cpu) / sizeof(cpu[0]); i++)
            known |= strlen(cpu[i]) == n && strncmp(tl, cpu[i], n) == 0;
        if (!known)
            return true;
        p = memchr(tl, ',', (size_t)(eol - tl));
        if (p == NULL)
            break;
    }
    return false;
}

/* What ucp_worker_print_info says of @p worker (malloc'ed), or NULL. */
char *rv_ucx_worker_info(ucp_worker_h worker)
{
    return print_text(worker_print, worker);
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
