/*
 * The offload command queue full (core/progress/rv_offload_queue.h): a requester
 * that finds it full is told so (offq_reserve false) and waits for the
 * executor, and no command is lost or run twice on the way.
 *
 *   full       one thread: OFFQ_SIZE reservations succeed, the next fails;
 *              the executor takes one command and a reservation succeeds
 *              again, in the slot freed.
 *   flood      REQUESTERS threads publish COMMANDS commands each, as fast
 *              as they can, to one executor that takes them slowly at
 *              first, so that the queue is full many times (counted, and
 *              required): every command arrives exactly once, and each
 *              requester's in order.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rv_offload_queue.h"

#define REQUESTERS 4
#define COMMANDS 200000u
/* The executor pauses this often in its first commands, to fill the queue. */
#define SLOW_START (4 * OFFQ_SIZE)

typedef struct cmd {
    offq_slot_t slot;
    uint32_t from, n;
} cmd_t;

static offq_t q;
static cmd_t ring[OFFQ_SIZE];
static atomic_ulong full_events;

static void test_full(void **state)
{
    uint32_t count = 0, old = 0;
    (void)state;
    offq_init(&q);
    for (uint32_t i = 0; i < OFFQ_SIZE; i++) {
        assert_true(offq_reserve(&q, &count, &old));
        assert_int_equal(count, i);
        offq_publish(&q, &ring[count & (OFFQ_SIZE - 1)].slot, count, old);
    }
    assert_false(offq_reserve(&q, &count, &old));
    assert_true(offq_ready(&q, &ring[q.next & (OFFQ_SIZE - 1)].slot));
    offq_pop(&q);
    assert_true(offq_reserve(&q, &count, &old));
    assert_int_equal(count, OFFQ_SIZE);
    assert_false(offq_reserve(&q, &count, &old));
}

static void *requester(void *arg)
{
    uint32_t from = (uint32_t)(uintptr_t)arg, count = 0, old = 0;
    for (uint32_t n = 0; n < COMMANDS; n++) {
        while (!offq_reserve(&q, &count, &old)) {
            atomic_fetch_add(&full_events, 1);
            sched_yield();
        }
        cmd_t *c = &ring[count & (OFFQ_SIZE - 1)];
        c->from = from;
        c->n = n;
        offq_publish(&q, &c->slot, count, old);
    }
    return NULL;
}

static void test_flood(void **state)
{
    pthread_t t[REQUESTERS];
    uint32_t next[REQUESTERS] = {0};
    (void)state;
    offq_init(&q);
    for (unsigned i = 0; i < OFFQ_SIZE; i++)
        atomic_init(&ring[i].slot.seq, 0);
    for (uintptr_t i = 0; i < REQUESTERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, requester, (void *)i), 0);
    for (uint64_t got = 0; got < (uint64_t)REQUESTERS * COMMANDS; got++) {
        cmd_t *c = &ring[q.next & (OFFQ_SIZE - 1)];
        while (!offq_ready(&q, &c->slot))
            sched_yield();
        assert_true(c->from < REQUESTERS);
        /* in order per requester: none lost, none twice */
        assert_int_equal(c->n, next[c->from]);
        next[c->from]++;
        offq_pop(&q);
        if (got < SLOW_START && got % 64 == 0)
            usleep(100);
    }
    for (int i = 0; i < REQUESTERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(next[i], COMMANDS);
    }
    assert_true(atomic_load(&full_events) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_flood),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
