/*
 * The verbs transport: device selection, registered memory, remote keys,
 * and the ops table.
 *
 * Device selection (transport.verbs.*): `device` names one (mlx5_0, rxe0);
 * empty takes, among the devices with the port active, the one nearest
 * the calling thread: local to every CPU it may run on (the device's PCI
 * locality, i.e. its NUMA zone, as core's services tell), else to some,
 * else the first. `port` counts from 1. `gid_index` -1 picks, on RoCE, the
 * RoCE v2 GID of an IPv4 address (what routes between hosts), else index
 * 0; on InfiniBand the LID addresses the port and the GID is carried as
 * well.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verbs_internal.h"

/* The sysfs folder of a device's PCI function, under its ibdev_path. */
#define VB_SYSFS_DEVICE "/device"

struct ibv_mr *vb_reg(rv_transport_t *tp, void *addr, size_t len)
{
    struct ibv_mr *mr =
        ibv_reg_mr(tp->pd, addr, len ? len : 1,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    if (mr == NULL)
        rv_error("verbs: cannot register %zu bytes at %p on %s: %s (check "
                 "`ulimit -l`: locked memory)",
                 len, addr, tp->devname, strerror(errno));
    return mr;
}

/* How near @p dev is to the calling thread, as a score that orders
 * devices: rv_locality_t's values (every CPU the thread may run on is
 * local to the device; some are, or it cannot be told; none). The process
 * is already bound per job.placement. */
static int device_nearness(rv_transport_t *tp, struct ibv_device *dev)
{
    char dir[sizeof(dev->ibdev_path) + sizeof(VB_SYSFS_DEVICE)];
    snprintf(dir, sizeof(dir), "%s%s", dev->ibdev_path, VB_SYSFS_DEVICE);
    return (int)tp->svc->device_locality(dir);
}

static bool port_active(struct ibv_context *c, int port,
                        struct ibv_port_attr *attr)
{
    return ibv_query_port(c, (uint8_t)port, attr) == 0 &&
           attr->state == IBV_PORT_ACTIVE;
}

/* Opens @p dev and scores it (device_nearness; -1 when its port is not
 * active); *c_p is NULL when it cannot be opened. The device named by
 * transport.verbs.device must have its port active: RV_ERR_NO_DEVICE. */
static rv_status_t device_try(rv_transport_t *tp, struct ibv_device *dev,
                              int ndev, struct ibv_context **c_p, int *score_p)
{
    const char *name = ibv_get_device_name(dev);
    struct ibv_port_attr pa;
    struct ibv_context *c = ibv_open_device(dev);
    *c_p = NULL;
    if (c == NULL) {
        rv_error("verbs: cannot open %s: %s", name, strerror(errno));
        return RV_OK;
    }
    bool up = port_active(c, tp->port, &pa);
    if (tp->config.device[0] != '\0' && !up) {
        rv_error("verbs: port %d of %s is %s", tp->port, name,
                 ibv_query_port(c, (uint8_t)tp->port, &pa) == 0
                     ? ibv_port_state_str(pa.state)
                     : "missing");
        ibv_close_device(c);
        return RV_ERR_NO_DEVICE;
    }
    /* locality decides only between devices (and has core load the
     * node's topology, which one device does not need) */
    *score_p = !up        ? -1
               : ndev > 1 ? device_nearness(tp, dev)
                          : (int)RV_LOCALITY_PARTIAL;
    *c_p = c;
    return RV_OK;
}

static void no_device_error(rv_transport_t *tp, const char *names)
{
    const char *want = tp->config.device;
    if (want[0] != '\0')
        rv_error("verbs: no RDMA device '%s' (transport.verbs.device); "
                 "devices: %s",
                 want, names);
    else
        rv_error("verbs: no RDMA device has port %d active (devices: %s)",
                 tp->port, names);
}

/* Opens the configured device, or the best one with an active port. */
static rv_status_t open_device(rv_transport_t *tp)
{
    const char *want = tp->config.device;
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (list == NULL || num == 0) {
        rv_error("verbs: no RDMA device found (ibv_get_device_list: %s); "
                 "use transport.name: ucx on machines without one",
                 list == NULL ? strerror(errno) : "none");
        if (list != NULL)
            ibv_free_device_list(list);
        return RV_ERR_NO_DEVICE;
    }
    char names[256] = "";
    struct ibv_context *best = NULL, *c;
    int best_score = -1, score = -1;
    rv_status_t st = RV_OK;
    for (int i = 0; i < num && st == RV_OK; i++) {
        const char *name = ibv_get_device_name(list[i]);
        size_t used = strlen(names);
        snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "",
                 name);
        if (want[0] != '\0' && strcmp(want, name) != 0)
            continue;
        st = device_try(tp, list[i], num, &c, &score);
        if (c != NULL && score > best_score) {
            if (best != NULL)
                ibv_close_device(best);
            best = c;
            best_score = score;
        } else if (c != NULL) {
            ibv_close_device(c);
        }
    }
    ibv_free_device_list(list);
    if (st == RV_OK && (best == NULL || best_score < 0)) {
        no_device_error(tp, names);
        st = RV_ERR_NO_DEVICE;
    }
    if (st != RV_OK)
        goto err_best;
    tp->ibctx = best;
    snprintf(tp->devname, sizeof(tp->devname), "%s",
             ibv_get_device_name(best->device));
    port_active(best, tp->port, &tp->port_attr);
    return RV_OK;

err_best:
    if (best != NULL)
        ibv_close_device(best);
    return st;
}

static bool gid_is_ipv4(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static rv_status_t choose_gid(rv_transport_t *tp)
{
    int want = tp->config.gid_index;
    tp->roce = tp->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (want < 0) {
        want = 0;
        for (int i = 0; tp->roce && i < tp->port_attr.gid_tbl_len; i++) {
            struct ibv_gid_entry e;
            if (ibv_query_gid_ex(tp->ibctx, (uint32_t)tp->port, (uint32_t)i, &e,
                                 0) == 0 &&
                e.gid_type == IBV_GID_TYPE_ROCE_V2 && gid_is_ipv4(&e.gid)) {
                want = i;
                break;
            }
        }
    }
    static const union ibv_gid zero;
    if (want >= tp->port_attr.gid_tbl_len ||
        ibv_query_gid(tp->ibctx, (uint8_t)tp->port, want, &tp->gid) != 0 ||
        (tp->roce && memcmp(&tp->gid, &zero, sizeof(zero)) == 0)) {
        rv_error("verbs: GID index %d of %s port %d is %s "
                 "(transport.verbs.gid_index; the table has %d entries, see "
                 "`ibv_devinfo -v`)",
                 want, tp->devname, tp->port,
                 want >= tp->port_attr.gid_tbl_len ? "out of range" : "empty",
                 tp->port_attr.gid_tbl_len);
        return RV_ERR_CONFIG;
    }
    tp->gid_index = want;
    const uint8_t *r = tp->gid.raw;
    snprintf(tp->gid_text, sizeof(tp->gid_text),
             "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
             "%02x%02x:%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
             r[11], r[12], r[13], r[14], r[15]);
    return RV_OK;
}

static void vb_fini(rv_transport_t *tp)
{
    if (tp->shared_qps)
        vb_shared_fini(tp);
    ibv_dealloc_pd(tp->pd);
    ibv_close_device(tp->ibctx);
    free(tp);
}

/* Whether core's services table has every member this plugin calls (the
 * last of them in the table's order: mem_general_free). */
static bool services_usable(const rv_transport_services_t *svc)
{
    if (RV_TRANSPORT_SERVICES_HAS(svc, mem_general_free))
        return true;
    rv_error("verbs: this rivet's core offers plugins too few services "
             "(version %u); use the rivet the plugin was built with",
             svc != NULL ? svc->version : 0);
    return false;
}

static void transport_setup(rv_transport_t *tp,
                            const rv_transport_params_t *params)
{
    tp->svc = params->services;
    tp->config = *(const rv_verbs_config_t *)params->tconfig;
    tp->job_config = params->config;
    tp->stats = params->config != NULL
                    ? rv_core_config(params->config)->job.stats
                    : RV_STATS_OFF;
    tp->rank = params->rank;
    tp->size = params->size;
    tp->threads = params->threads;
    tp->peer_failed = params->peer_failed;
    tp->peer_failed_arg = params->peer_failed_arg;
    tp->port = tp->config.port;
    tp->signal_interval = (uint32_t)tp->config.signal_interval;
    tp->max_message = (size_t)tp->config.max_message;
    tp->shared_qps = tp->config.qp_sharing == RV_QP_SHARING_PROCESS;
    tp->nworkers = (uint32_t)(tp->size * tp->threads);
}

static rv_status_t vb_init(const rv_transport_params_t *params,
                           rv_transport_t **tp_p)
{
    if (!services_usable(params->services))
        return RV_ERR_UNSUPPORTED;
    if (params->tconfig == NULL) {
        rv_error("verbs: started without its transport.verbs configuration");
        return RV_ERR_INVALID;
    }
    rv_transport_t *tp = calloc(1, sizeof(*tp));
    if (tp == NULL)
        return RV_ERR_NO_MEMORY;
    transport_setup(tp, params);
    rv_status_t st = RV_ERR_CONFIG;
    if (tp->signal_interval > VB_SQ_DEPTH / 2) {
        rv_error("verbs: transport.verbs.signal_interval %u exceeds half the "
                 "send queue (%d)",
                 tp->signal_interval, VB_SQ_DEPTH / 2);
        goto err_free;
    }
    if ((st = open_device(tp)) != RV_OK)
        goto err_free;
    if (ibv_query_device(tp->ibctx, &tp->dev) != 0) {
        rv_error("verbs: cannot query %s: %s", tp->devname, strerror(errno));
        st = RV_ERR_NO_DEVICE;
        goto err_device;
    }
    if ((st = choose_gid(tp)) != RV_OK)
        goto err_device;
    if ((tp->pd = ibv_alloc_pd(tp->ibctx)) == NULL) {
        rv_error("verbs: cannot allocate a protection domain on %s: %s",
                 tp->devname, strerror(errno));
        st = RV_ERR_NO_DEVICE;
        goto err_device;
    }
    if (tp->shared_qps && (st = vb_shared_init(tp)) != RV_OK)
        goto err_pd;
    rv_debug("verbs: %s port %d (%s), GID %d %s, MTU %d", tp->devname, tp->port,
             tp->roce ? "RoCE" : "InfiniBand", tp->gid_index, tp->gid_text,
             vb_mtu_bytes(tp->port_attr.active_mtu));
    *tp_p = tp;
    return RV_OK;

err_pd:
    ibv_dealloc_pd(tp->pd);
err_device:
    ibv_close_device(tp->ibctx);
err_free:
    free(tp);
    return st;
}

static void vb_query(rv_transport_t *tp, rv_transport_caps_t *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->max_am_header = VB_MAX_HDR;
    caps->max_am_size = tp->max_message;
    caps->eager_limit = VB_RXBUF - sizeof(vb_wire_t) - VB_MAX_HDR;
    caps->ordered_am = true;
    caps->ordered_puts = true; /* RC executes writes in order */
    caps->atomics64 = tp->dev.atomic_cap != IBV_ATOMIC_NONE;
    /* IBV_ATOMIC_HCA (Soft-RoCE, most adapters): the HCA's atomics are
     * atomic only among themselves. */
    caps->atomics_cpu_coherent = tp->dev.atomic_cap == IBV_ATOMIC_GLOB;
    caps->rdma_read = true;
    caps->mem_alloc_mapped = false;
    caps->rma_target_progress = false; /* the responder's HCA executes them */
    snprintf(caps->description, sizeof(caps->description),
             "verbs %s port %d (%s, GID index %d %s, MTU %d), RC queue pairs "
             "%s, signal interval %u%s",
             tp->devname, tp->port, tp->roce ? "RoCE" : "InfiniBand",
             tp->gid_index, tp->gid_text,
             vb_mtu_bytes(tp->port_attr.active_mtu),
             tp->shared_qps ? "shared by the threads of a process"
                            : "per worker pair",
             tp->signal_interval,
             caps->atomics64 ? "" : ", no atomics on this device");
}

/* ---------------------------------------------------------------------- */
/* Registered memory and remote keys                                       */

rv_status_t vb_mem_register(rv_transport_t *tp, void *addr, size_t len,
                            rv_tmem_t **mem_p)
{
    rv_tmem_t *mem = calloc(1, sizeof(*mem));
    if (mem == NULL)
        return RV_ERR_NO_MEMORY;
    mem->mr = vb_reg(tp, addr, len);
    if (mem->mr == NULL) {
        free(mem);
        return RV_ERR_NO_MEMORY;
    }
    mem->addr = addr;
    mem->len = len;
    *mem_p = mem;
    return RV_OK;
}

static rv_status_t vb_mem_alloc(rv_transport_t *tp, size_t len,
                                rv_tmem_t **mem_p, void **addr_p)
{
    void *p = NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (posix_memalign(&p, page, (len + page - 1) / page * page) != 0)
        return RV_ERR_NO_MEMORY;
    rv_status_t st = vb_mem_register(tp, p, len, mem_p);
    if (st != RV_OK) {
        free(p);
        return st;
    }
    (*mem_p)->allocated = true;
    *addr_p = p;
    return RV_OK;
}

void vb_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem)
{
    (void)tp;
    if (mem == NULL)
        return;
    ibv_dereg_mr(mem->mr);
    if (mem->allocated)
        free(mem->addr);
    free(mem);
}

static rv_status_t vb_rkey_pack(rv_transport_t *tp, rv_tmem_t *mem,
                                void **buf_p, size_t *len_p)
{
    (void)tp;
    vb_rkey_wire_t *w = malloc(sizeof(*w));
    if (w == NULL)
        return RV_ERR_NO_MEMORY;
    *w = (vb_rkey_wire_t){.magic = VB_RKEY_MAGIC,
                          .rkey = mem->mr->rkey,
                          .base = (uintptr_t)mem->addr,
                          .len = mem->len};
    *buf_p = w;
    *len_p = sizeof(*w);
    return RV_OK;
}

static void vb_rkey_buffer_release(rv_transport_t *tp, void *buf)
{
    (void)tp;
    free(buf);
}

static rv_status_t vb_rkey_unpack(rv_tworker_t *tw, uint32_t peer,
                                  const void *buf, size_t len,
                                  rv_trkey_t **rkey_p)
{
    vb_rkey_wire_t w;
    (void)tw;
    if (len != sizeof(w))
        return RV_ERR_INVALID;
    memcpy(&w, buf, sizeof(w));
    if (w.magic != VB_RKEY_MAGIC) {
        rv_error("verbs: a remote key from worker %u is not a verbs key", peer);
        return RV_ERR_INVALID;
    }
    rv_trkey_t *k = malloc(sizeof(*k));
    if (k == NULL)
        return RV_ERR_NO_MEMORY;
    *k = (rv_trkey_t){.rkey = w.rkey, .base = w.base, .len = w.len};
    *rkey_p = k;
    return RV_OK;
}

static void vb_rkey_destroy(rv_tworker_t *tw, rv_trkey_t *rkey)
{
    (void)tw;
    free(rkey);
}

__attribute__((visibility("default")))
const rv_transport_ops_t rv_transport_ops = {
    .name = "verbs",
    .abi_version = RV_TRANSPORT_ABI_VERSION,
    .config = &rv_verbs_config_table,
    .init = vb_init,
    .fini = vb_fini,
    .query = vb_query,
    .worker_create = vb_worker_create,
    .worker_destroy = vb_worker_destroy,
    .worker_address = vb_worker_address,
    .address_release = vb_address_release,
    .connect = vb_connect,
    .disconnect = vb_disconnect,
    .progress = vb_progress,
    .am_send = vb_am_send,
    .am_release = vb_am_release,
    .mem_alloc = vb_mem_alloc,
    .mem_register = vb_mem_register,
    .mem_deregister = vb_mem_deregister,
    .rkey_pack = vb_rkey_pack,
    .rkey_buffer_release = vb_rkey_buffer_release,
    .rkey_unpack = vb_rkey_unpack,
    .rkey_destroy = vb_rkey_destroy,
    .put = vb_put,
    .get = vb_get,
    .atomic_fadd64 = vb_atomic_fadd64,
    .atomic_cswap64 = vb_atomic_cswap64,
    .fence = vb_fence,
    .flush = vb_flush,
};
