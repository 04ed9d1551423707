/*
 * The store's hash tables under churn (store_hash.h): a table that keeps
 * a constant number of ids while they change, as the directory keeps its
 * tombstones, stops taking buckets once its ids fit; one that grows with
 * its ids still grows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store_hash.h"

typedef struct ent {
    unsigned char id[20]; /* an object id's size */
    UT_hash_handle hh;
} ent_t;

/* Ids from a fixed xorshift sequence, so that every run is the same. */
static void next_id(uint64_t *x, unsigned char id[20])
{
    for (size_t i = 0; i < 20; i += 8) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        memcpy(id + i, x, i + 8 <= 20 ? 8 : 4);
    }
}

/* @p adds ids added to a table that keeps the last @p keep of them, as
 * the directory keeps ST_TOMBSTONES; returns the most buckets it held. */
static unsigned churn(long adds, int keep)
{
    ent_t *head = NULL, **ring = calloc((size_t)keep, sizeof(*ring));
    assert_non_null(ring);
    uint64_t x = 88172645463325252ull;
    unsigned most = 0;
    int at = 0;
    for (long i = 0; i < adds; i++) {
        if (ring[at] != NULL) {
            HASH_DELETE(hh, head, ring[at]);
            free(ring[at]);
        }
        ent_t *e = calloc(1, sizeof(*e));
        assert_non_null(e);
        next_id(&x, e->id);
        ST_HASH_ADD(head, id, sizeof(e->id), e);
        ring[at] = e;
        at = (at + 1) % keep;
        if (head->hh.tbl->num_buckets > most)
            most = head->hh.tbl->num_buckets;
    }
    ent_t *e, *tmp;
    HASH_ITER(hh, head, e, tmp)
    {
        HASH_DELETE(hh, head, e);
        free(e);
    }
    free(ring);
    return most;
}

/* 16,394 ids changing 3 million times: plain uthash doubled to 32,768
 * buckets after about 1.6 million adds (and would go on); the rule keeps
 * the table where its ids put it. */
static void test_steady_churn(void **state)
{
    (void)state;
    unsigned most = churn(3000000, 16384 + 10);
    assert_true(most >= 8192);
    assert_int_equal(most, 16384);
}

/* A table whose ids grow still doubles with them: 200,000 ids end at
 * no more than 4 per bucket. */
static void test_growth(void **state)
{
    (void)state;
    unsigned most = churn(200000, 200000);
    assert_true(4u * most >= 200000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_churn),
        cmocka_unit_test(test_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
