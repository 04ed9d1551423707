/*
 * A mock transport for tests of core's registered-memory allocators: the
 * memory operations only, registrations kept as bookkeeping (counted, live
 * ones listed, overlaps between live ones counted), the rest of the ops
 * NULL; and a check those tests share. Include after <cmocka.h>.
 *
 * The mock's state is one per file that includes this header.
 */
#ifndef RIVET_TESTS_MOCK_TRANSPORT_H
#define RIVET_TESTS_MOCK_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rv_regmem.h"
#include "rv_transport.h"

/* ---------------------------------------------------------------------- */
/* Mock transport                                                          */

struct rv_tmem {
    void *addr;
    size_t len;
    bool allocated;
};

#define MAX_REGS 4096

static struct {
    pthread_mutex_t lock;
    bool mapped; /* caps.mem_alloc_mapped */
    int registers, allocs, deregisters, packs, releases;
    int overlaps; /* a registration overlapping a live one */
    struct rv_tmem *live[MAX_REGS];
    int nlive;
} mock = {.lock = PTHREAD_MUTEX_INITIALIZER};

static inline void mock_reset(bool mapped)
{
    pthread_mutex_lock(&mock.lock);
    mock.mapped = mapped;
    mock.registers = mock.allocs = mock.deregisters = 0;
    mock.packs = mock.releases = mock.overlaps = 0;
    mock.nlive = 0;
    pthread_mutex_unlock(&mock.lock);
}

static void mock_query(rv_transport_t *tp, rv_transport_caps_t *caps)
{
    (void)tp;
    memset(caps, 0, sizeof(*caps));
    caps->mem_alloc_mapped = mock.mapped;
    snprintf(caps->description, sizeof(caps->description), "mock");
}

static rv_status_t mock_track(void *addr, size_t len, bool allocated,
                              rv_tmem_t **mem_p)
{
    struct rv_tmem *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return RV_ERR_NO_MEMORY;
    m->addr = addr;
    m->len = len;
    m->allocated = allocated;
    pthread_mutex_lock(&mock.lock);
    for (int i = 0; i < mock.nlive; i++) {
        char *a = mock.live[i]->addr;
        if ((char *)addr < a + mock.live[i]->len && a < (char *)addr + len)
            mock.overlaps++;
    }
    if (mock.nlive < MAX_REGS)
        mock.live[mock.nlive++] = m;
    if (allocated)
        mock.allocs++;
    else
        mock.registers++;
    pthread_mutex_unlock(&mock.lock);
    *mem_p = m;
    return RV_OK;
}

static rv_status_t mock_mem_alloc(rv_transport_t *tp, size_t len,
                                  rv_tmem_t **mem_p, void **addr_p)
{
    (void)tp;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return RV_ERR_NO_MEMORY;
    memset(p, 0, 4096); /* like a transport that touches its memory */
    rv_status_t st = mock_track(p, len, true, mem_p);
    if (st != RV_OK) {
        munmap(p, len);
        return st;
    }
    *addr_p = p;
    return RV_OK;
}

static rv_status_t mock_mem_register(rv_transport_t *tp, void *addr, size_t len,
                                     rv_tmem_t **mem_p)
{
    (void)tp;
    return mock_track(addr, len, false, mem_p);
}

static void mock_mem_deregister(rv_transport_t *tp, rv_tmem_t *mem)
{
    (void)tp;
    pthread_mutex_lock(&mock.lock);
    for (int i = 0; i < mock.nlive; i++) {
        if (mock.live[i] == mem) {
            mock.live[i] = mock.live[--mock.nlive];
            break;
        }
    }
    mock.deregisters++;
    pthread_mutex_unlock(&mock.lock);
    if (mem->allocated)
        munmap(mem->addr, mem->len);
    free(mem);
}

static rv_status_t mock_rkey_pack(rv_transport_t *tp, rv_tmem_t *mem,
                                  void **buf_p, size_t *len_p)
{
    (void)tp;
    void **buf = malloc(sizeof(void *));
    if (buf == NULL)
        return RV_ERR_NO_MEMORY;
    *buf = mem;
    pthread_mutex_lock(&mock.lock);
    mock.packs++;
    pthread_mutex_unlock(&mock.lock);
    *buf_p = buf;
    *len_p = sizeof(void *);
    return RV_OK;
}

static void mock_rkey_buffer_release(rv_transport_t *tp, void *buf)
{
    (void)tp;
    pthread_mutex_lock(&mock.lock);
    mock.releases++;
    pthread_mutex_unlock(&mock.lock);
    free(buf);
}

/* Only what the allocators use; the rest stays NULL. */
static const rv_transport_ops_t mock_ops = {
    .name = "mock",
    .abi_version = RV_TRANSPORT_ABI_VERSION,
    .query = mock_query,
    .mem_alloc = mock_mem_alloc,
    .mem_register = mock_mem_register,
    .mem_deregister = mock_mem_deregister,
    .rkey_pack = mock_rkey_pack,
    .rkey_buffer_release = mock_rkey_buffer_release,
};

/* ---------------------------------------------------------------------- */
/* Checks                                                                  */

/* The next unit @p c hands out is @p want, recycled; it goes back at once. */
static inline void expect_recycled(rv_mem_circular_t *c, rv_mem_unit_t *want)
{
    rv_mem_unit_t *x;
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, want);
    rv_mem_circular_free(c, x);
}

#endif
