/*
 * A check of core's circular sub-allocator that several tests share.
 * Include after <cmocka.h>.
 */
#ifndef RIVET_TESTS_MEM_CHECK_H
#define RIVET_TESTS_MEM_CHECK_H

#include "rv_regmem.h"

/* The next unit @p c hands out is @p want, recycled; it goes back at once. */
static inline void expect_recycled(rv_mem_circular_t *c, rv_mem_unit_t *want)
{
    rv_mem_unit_t *x;
    assert_int_equal(rv_mem_circular_alloc(c, &x), RV_OK);
    assert_ptr_equal(x, want);
    rv_mem_circular_free(c, x);
}

#endif
