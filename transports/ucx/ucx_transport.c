/*
 * UCX transport: process-level state and the ops table.
 *
 * transport.ucx.tls, .net_devices, .rndv_thresh, .tcp_seg_size and
 * .gid_index are applied through ucp_config_modify, so users configure UCX
 * from the job file without touching UCX_* variables (which still work,
 * and are overridden by the job file's values when both are set: rank 0
 * warns of each such override).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

rv_status_t rv_ucx_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return RV_OK;
    case UCS_INPROGRESS:
        return RV_INPROGRESS;
    case UCS_ERR_NO_MEMORY:
        return RV_ERR_NO_MEMORY;
    case UCS_ERR_INVALID_PARAM:
        return RV_ERR_INVALID;
    case UCS_ERR_NO_ELEM:
        return RV_ERR_NOT_FOUND;
    case UCS_ERR_UNSUPPORTED:
        return RV_ERR_UNSUPPORTED;
    case UCS_ERR_NO_RESOURCE:
        return RV_ERR_AGAIN;
    case UCS_ERR_TIMED_OUT:
        return RV_ERR_TIMEOUT;
    case UCS_ERR_CANCELED:
        return RV_ERR_CANCELED;
    case UCS_ERR_NO_DEVICE:
        return RV_ERR_NO_DEVICE;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
        return RV_ERR_PEER;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return RV_ERR_TRUNCATED;
    default:
        return RV_ERR_TRANSPORT;
    }
}

/* Sets UCX's @p name to @p value, the job file's key @p key. Where the
 * user set UCX's own variable @p env to something else, the job file
 * wins; rank 0 says so once, since an override the user does not see is
 * the one they spend an afternoon on. */
static rv_status_t config_set(ucp_config_t *cfg, const char *name,
                              const char *key, const char *value,
                              const char *env, bool warn)
{
    const char *user = getenv(env);
    if (warn && user != NULL && strcmp(user, value) != 0)
        rv_warn("%s: %s from the job's configuration overrides %s=%s of "
                "the environment (unset the key to keep UCX's)",
                key, value, env, user);
    ucs_status_t s = ucp_config_modify(cfg, name, value);
    if (s != UCS_OK) {
        rv_error("%s '%s' is not accepted by UCX (UCX_%s): %s", key, value,
                 name, ucs_status_string(s));
        return RV_ERR_CONFIG;
    }
    return RV_OK;
}

/* Whether UCX's transport list @p tls ("sm,self", "all", "^sm": all
 * but) can hold TCP. */
static bool tls_has_tcp(const char *tls)
{
    bool except = tls[0] == '^';
    char list[RV_CONFIG_STR_MAX], *save = NULL;

    snprintf(list, sizeof(list), "%s", except ? tls + 1 : tls);
    for (char *t = strtok_r(list, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "tcp") == 0)
            return !except;
        if (strcmp(t, "all") == 0 && !except)
            return true;
    }
    return except;
}

/* The transport list UCX will use: the job file's, else UCX_TLS, else
 * UCX's default. */
static const char *effective_tls(const rv_ucx_config_t *c)
{
    const char *env_tls = getenv("UCX_TLS");
    return c->tls[0] ? c->tls : env_tls ? env_tls : "all";
}

/* Reads UCX's configuration and applies the transport.ucx.* keys on top
 * of it (each one only when set, so UCX_* variables keep working). */
static rv_status_t ucx_config(const rv_ucx_config_t *c, bool warn,
                              ucp_config_t **cfg_p)
{
    ucp_config_t *cfg;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg);
    if (s != UCS_OK) {
        rv_error("cannot read the UCX configuration: %s", ucs_status_string(s));
        return rv_ucx_status(s);
    }
    char v[32];
    rv_status_t status = RV_OK;
    if (c->tls[0] != '\0')
        status = config_set(cfg, "TLS", "transport.ucx.tls", c->tls, "UCX_TLS",
                            warn);
    if (status == RV_OK && c->net_devices[0] != '\0')
        status = config_set(cfg, "NET_DEVICES", "transport.ucx.net_devices",
                            c->net_devices, "UCX_NET_DEVICES", warn);
    if (status == RV_OK && c->rndv_thresh != 0) {
        snprintf(v, sizeof(v), "%llu", (unsigned long long)c->rndv_thresh);
        status = config_set(cfg, "RNDV_THRESH", "transport.ucx.rndv_thresh", v,
                            "UCX_RNDV_THRESH", warn);
    }
    /* UCX 1.13 hands keys it does not know to its transports' tables by
     * their names without the table's prefix: "TCP_TX_SEG_SIZE" is
     * accepted and ignored, "TX_SEG_SIZE" reaches the TCP transport. */
    /* Only where TCP can be used: with tls: sm,self UCX warns of the two
     * keys on every run ("invalid configurations"), while a job file that
     * keeps the key for when it switches to tcp is what we ask for. */
    if (status == RV_OK && c->tcp_seg_size != 0 &&
        tls_has_tcp(effective_tls(c))) {
        snprintf(v, sizeof(v), "%llu", (unsigned long long)c->tcp_seg_size);
        status = config_set(cfg, "TX_SEG_SIZE", "transport.ucx.tcp_seg_size", v,
                            "UCX_TCP_TX_SEG_SIZE", warn);
        if (status == RV_OK)
            status =
                config_set(cfg, "RX_SEG_SIZE", "transport.ucx.tcp_seg_size", v,
                           "UCX_TCP_RX_SEG_SIZE", warn);
    }
    if (status == RV_OK && c->gid_index >= 0) {
        /* UCX 1.13 takes the IB iface's GID index under its short name;
         * "IB_GID_INDEX" is reported invalid and ignored. */
        snprintf(v, sizeof(v), "%lld", (long long)c->gid_index);
        status = config_set(cfg, "GID_INDEX", "transport.ucx.gid_index", v,
                            "UCX_IB_GID_INDEX", warn);
    }
    if (status != RV_OK) {
        ucp_config_release(cfg);
        return status;
    }
    *cfg_p = cfg;
    return RV_OK;
}

static rv_status_t ucx_init(const rv_transport_params_t *params,
                            rv_transport_t **tp_p)
{
    const rv_ucx_config_t *c = params->tconfig;
    ucp_config_t *cfg = NULL;
    if (c == NULL) {
        rv_error("ucx: started without its transport.ucx configuration");
        return RV_ERR_INVALID;
    }
    rv_transport_t *tp = calloc(1, sizeof(*tp));
    if (tp == NULL)
        return RV_ERR_NO_MEMORY;
    tp->config = *c;
    tp->stats = params->config != NULL
                    ? rv_core_config(params->config)->job.stats
                    : RV_STATS_OFF;
    pthread_rwlock_init(&tp->regions_lock, NULL);
    tp->rank = params->rank;
    tp->size = params->size;
    tp->described_upto = -1;
    tp->threads = params->threads;
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    snprintf(tp->version, sizeof(tp->version), "%u.%u.%u", major, minor,
             release);
    rv_status_t status = ucx_config(c, params->rank == 0, &cfg);
    if (status != RV_OK)
        goto err_free;
    const char *tls = effective_tls(c);
    snprintf(tp->tls, sizeof(tp->tls), "%.*s", (int)sizeof(tp->tls) - 1, tls);

    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_AMO64,
        .mt_workers_shared = 1,
        .estimated_num_eps = (size_t)params->size * (size_t)params->threads,
        .name = "rivet",
    };
    ucs_status_t s = ucp_init(&up, cfg, &tp->context);
    ucp_config_release(cfg);
    if (s != UCS_OK) {
        rv_error("UCX failed to start with transports '%s': %s. Check "
                 "transport.ucx.tls (ucx_info -d lists what this machine has)",
                 tp->tls, ucs_status_string(s));
        status = rv_ucx_status(s);
        goto err_free;
    }
    *tp_p = tp;
    return RV_OK;

err_free:
    pthread_rwlock_destroy(&tp->regions_lock);
    free(tp);
    return status;
}

static void ucx_fini(rv_transport_t *tp)
{
    ucp_cleanup(tp->context);
    pthread_rwlock_destroy(&tp->regions_lock);
    free(tp->regions);
    free(tp);
}

static void ucx_query(rv_transport_t *tp, rv_transport_caps_t *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->max_am_header = RV_UCX_MAX_HDR;
    caps->max_am_size = SIZE_MAX;
    caps->eager_limit = tp->config.rndv_thresh ? tp->config.rndv_thresh : 8192;
    caps->ordered_am = true;
    caps->ordered_puts = false;
    caps->atomics64 = true;
    /* What holds for every class of peers: on a cluster, a get is
     * one-sided only if it is so to every host, and memory is mapped into
     * the peers only if they all share this host. */
    bool tcp = false, emulated = false, mapped = tp->nclasses > 0;
    bool host_mapped = false;
    for (unsigned i = 0; i < tp->nclasses; i++) {
        const rv_ucx_peer_class_t *c = &tp->classes[i];
        bool shm = strstr(c->lanes, "posix") != NULL ||
                   strstr(c->lanes, "sysv") != NULL;
        tcp |= strstr(c->lanes, "tcp") != NULL;
        emulated |= c->emulated;
        mapped &= shm;
        /* A class with shared-memory lanes is of this host's peers. */
        host_mapped |= shm;
    }
    caps->mem_alloc_host_mapped = host_mapped;
    caps->rdma_read = !emulated && !tcp;
    caps->mem_alloc_mapped = mapped && !tp->classes_full;
    caps->rma_target_progress = emulated || tcp || tp->classes_full;
    /* UCX's device atomics are the NIC's (atomic only among themselves);
     * its CPU and software atomics, and rivet's emulation, are applied by
     * the target's CPU. A job that emulates RMA to some peers (TCP to
     * other hosts) while UCX runs device atomics mixes both: the device's
     * is taken for this process's own, those peers' stay CPU atomics. */
    caps->atomics_cpu_coherent =
        !atomic_load_explicit(&tp->amo_device, memory_order_relaxed);
    int n = snprintf(caps->description, sizeof(caps->description),
                     "ucx %s, tls %s%s", tp->version, tp->tls,
                     tp->nclasses > 0 ? "; to peers: " : "");
    if (n > 0 && (size_t)n < sizeof(caps->description))
        rv_ucx_describe_classes(tp, caps->description + n,
                                sizeof(caps->description) - (size_t)n);
}

__attribute__((visibility("default")))
const rv_transport_ops_t rv_transport_ops = {
    .name = "ucx",
    .abi_version = RV_TRANSPORT_ABI_VERSION,
    .config = &rv_ucx_config_table,
    .init = ucx_init,
    .fini = ucx_fini,
    .query = ucx_query,
    .worker_create = rv_ucx_worker_create,
    .worker_destroy = rv_ucx_worker_destroy,
    .worker_address = rv_ucx_worker_address,
    .address_release = rv_ucx_address_release,
    .connect = rv_ucx_connect,
    .disconnect = rv_ucx_disconnect,
    .progress = rv_ucx_progress,
    .am_send = rv_ucx_am_send,
    .am_release = rv_ucx_am_release,
    .mem_alloc = rv_ucx_mem_alloc,
    .mem_register = rv_ucx_mem_register,
    .mem_deregister = rv_ucx_mem_deregister,
    .rkey_pack = rv_ucx_rkey_pack,
    .rkey_buffer_release = rv_ucx_rkey_buffer_release,
    .rkey_unpack = rv_ucx_rkey_unpack,
    .rkey_destroy = rv_ucx_rkey_destroy,
    .put = rv_ucx_put,
    .get = rv_ucx_get,
    .atomic_fadd64 = rv_ucx_atomic_fadd64,
    .atomic_cswap64 = rv_ucx_atomic_cswap64,
    .fence = rv_ucx_fence,
    .flush = rv_ucx_flush,
    .rkey_ptr = rv_ucx_rkey_ptr,
};
