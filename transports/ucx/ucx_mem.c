/*
 * UCX registered memory and remote keys.
 *
 * mem_alloc asks UCX to allocate (UCP_MEM_MAP_ALLOCATE): on shared memory
 * transports UCX then places the region in a segment that peers map, so
 * their put/get become plain loads and stores. mem_register only registers
 * existing memory, which on shm goes through CMA or copies instead.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ucx_internal.h"

/* Linux 5.14; older kernels refuse it and reads fault pages in. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

static rv_status_t mem_map(rv_transport_t *tp, void *addr, size_t len,
                           bool allocate, rv_tmem_t **mem_p)
{
    rv_tmem_t *mem = calloc(1, sizeof(*mem));
    if (mem == NULL)
        return RV_ERR_NO_MEMORY;

    ucp_mem_map_params_t p = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                      UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = addr,
        .length = len ? len : 1,
        .flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0,
    };
    ucs_status_t s = ucp_mem_map(tp->context, &p, &mem->memh);
    if (s != UCS_OK) {
        rv_error("cannot %s %zu bytes with UCX: %s",
                 allocate ? "allocate" : "register", len, ucs_status_string(s));
        free(mem);
        return rv_ucx_status(s);
    }
    ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS |
                                         UCP_MEM_ATTR_FIELD_LENGTH};
    ucp_mem_query(mem->memh, &attr);
    mem->addr = attr.address;
    mem->len = attr.length;
    mem->allocated = allocate;
    rv_status_t status =
        rv_ucx_region_add(tp, (uintptr_t)mem->addr, mem->len, &mem->region);
    if (status != RV_OK) {
        ucp_mem_unmap(tp->context, mem->memh);
        free(mem);
        return status;
    }
    *mem_p = mem;
    return RV_OK;
}

rv_status_t rv_ucx_mem_alloc(rv_transport_t *tp, size_t len, rv_tmem_t **mem_p,
                             void **addr_p)
{
    rv_tmem_t *mem = NULL;
    rv_status_t status = mem_map(tp, NULL, len, true, &mem);
    if (status != RV_OK)
        return status;
    *mem_p = mem;
    *addr_p = mem->addr;
    return RV_OK;
}

rv_status_t rv_ucx_mem_register(rv_transport_t *tp, void *addr, size_t len,
                                rv_tmem_t **mem_p)
{
    if (addr == NULL)
        return RV_ERR_INVALID;
    return mem_map(tp, addr, len, false, mem_p);
}

void rv_ucx_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem)
{
    rv_ucx_region_remove(tp, mem->region);
    ucs_status_t s = ucp_mem_unmap(tp->context, mem->memh);
    if (s != UCS_OK)
        rv_warn("ucp_mem_unmap: %s", ucs_status_string(s));
    free(mem);
}

/* A packed key is [ucx_rkey_hdr_t][UCX's packed rkey]: the header lets the
 * emulated RMA of ucx_emu.c name and check the region. */
rv_status_t rv_ucx_rkey_pack(rv_transport_t *tp, rv_tmem_t *mem, void **buf_p,
                             size_t *len_p)
{
    void *ucx_buf;
    size_t ucx_len;
    ucs_status_t s = ucp_rkey_pack(tp->context, mem->memh, &ucx_buf, &ucx_len);
    if (s != UCS_OK) {
        rv_error("ucp_rkey_pack: %s", ucs_status_string(s));
        return rv_ucx_status(s);
    }
    ucx_rkey_hdr_t hdr = {.magic = RV_UCX_RKEY_MAGIC,
                          .region = mem->region,
                          .base = (uintptr_t)mem->addr,
                          .len = mem->len};
    uint8_t *buf = malloc(sizeof(hdr) + ucx_len);
    if (buf == NULL) {
        ucp_rkey_buffer_release(ucx_buf);
        return RV_ERR_NO_MEMORY;
    }
    memcpy(buf, &hdr, sizeof(hdr));
    memcpy(buf + sizeof(hdr), ucx_buf, ucx_len);
    ucp_rkey_buffer_release(ucx_buf);
    *buf_p = buf;
    *len_p = sizeof(hdr) + ucx_len;
    return RV_OK;
}

void rv_ucx_rkey_buffer_release(rv_transport_t *tp, void *buf)
{
    (void)tp;
    free(buf);
}

/*
 * On shared memory UCX maps the peer's segment into this process
 * (ucp_rkey_ptr gives its address here), and put and get are memcpy to or
 * from that mapping (ucx_rma.c does them itself, in one call). Each page
 * of a fresh mapping faults on its first touch, one trap per 4 KiB page
 * (fault-around does not apply): a 4 MiB read from a region not read
 * before ran at 2.4 GB/s, and at 6.6 GB/s once its pages were mapped.
 * Mapping the whole region's pages at once when its key is unpacked costs
 * about an eighth of those faults, once per region and reader. Keys of
 * memory not mapped here (network transports) have no pointer.
 */
static void map_region(rv_trkey_t *rkey)
{
    void *p;
    rkey->mapped = NULL;
    if (rkey->len == 0 || ucp_rkey_ptr(rkey->rkey, rkey->base, &p) != UCS_OK)
        return;
    rkey->mapped = p;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p & ~(page - 1);
    size_t len = (size_t)((uintptr_t)p + rkey->len - start);
    if (madvise((void *)start, len, MADV_POPULATE_READ) != 0)
        rv_debug("populating a peer's mapped region of %zu bytes: %m", len);
}

rv_status_t rv_ucx_rkey_unpack(struct rv_tworker *tw, uint32_t peer,
                               const void *buf, size_t len, rv_trkey_t **rkey_p)
{
    ucx_rkey_hdr_t hdr;
    if (peer >= tw->nworkers || tw->eps[peer] == NULL)
        return RV_ERR_INVALID;
    if (len < sizeof(hdr)) {
        rv_error("a remote key of worker %u is %zu bytes: truncated", peer,
                 len);
        return RV_ERR_TRUNCATED;
    }
    memcpy(&hdr, buf, sizeof(hdr));
    if (hdr.magic != RV_UCX_RKEY_MAGIC) {
        rv_error("a remote key of worker %u was not packed by rivet's UCX "
                 "transport",
                 peer);
        return RV_ERR_INVALID;
    }
    rv_trkey_t *rkey = malloc(sizeof(*rkey));
    if (rkey == NULL)
        return RV_ERR_NO_MEMORY;
    rkey->region = hdr.region;
    rkey->base = hdr.base;
    rkey->len = hdr.len;
    ucs_status_t s = ucp_ep_rkey_unpack(
        tw->eps[peer], (const uint8_t *)buf + sizeof(hdr), &rkey->rkey);
    if (s != UCS_OK) {
        rv_error("cannot unpack a remote key of worker %u: %s", peer,
                 ucs_status_string(s));
        free(rkey);
        return rv_ucx_status(s);
    }
    map_region(rkey);
    *rkey_p = rkey;
    return RV_OK;
}

void rv_ucx_rkey_destroy(struct rv_tworker *tw, rv_trkey_t *rkey)
{
    (void)tw;
    ucp_rkey_destroy(rkey->rkey);
    free(rkey);
}
