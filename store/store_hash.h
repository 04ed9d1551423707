/*
 * The store's hash tables (uthash) with a growth rule for churn.
 *
 * uthash doubles a table's bucket array whenever one chain reaches
 * HASH_BKT_CAPACITY_THRESH (10) entries, whatever the table's load. A
 * table that keeps a constant number of ids while they change (the
 * directory's tombstones: ST_TOMBSTONES ids at every home, the oldest
 * forgotten as each new one comes) still meets such a chain now and then,
 * and doubles again: at 16,394 ids, from 16,384 to 32,768 buckets after
 * about 1.6 million adds, a step of 256 KiB that is never given back,
 * then 512 KiB, and so on. That is the step bench/soak.sh's store load
 * showed as resident memory rising in 252 KiB stairs.
 *
 * ST_HASH_ADD lets a table grow only while it holds more than 1.5 ids per
 * bucket: a table growing with its ids still doubles as before (a long
 * chain at that load means too few buckets), and one at a steady number
 * of ids settles at 0.75 to 1.5 ids per bucket, where a chain of 10 is a
 * rare slow lookup, not a reason to take memory.
 */
#ifndef RIVET_STORE_HASH_H
#define RIVET_STORE_HASH_H

#include <uthash.h>

/* Whether table @p tbl may double its buckets now. */
#define ST_HASH_MAY_GROW(tbl) (2u * (tbl)->num_items > 3u * (tbl)->num_buckets)

/* HASH_ADD(hh, head, keyfield, len, add), growing only under load. */
#define ST_HASH_ADD(head, keyfield, len, add)                                  \
    do {                                                                       \
        if ((head) != NULL)                                                    \
            (head)->hh.tbl->noexpand = !ST_HASH_MAY_GROW((head)->hh.tbl);      \
        HASH_ADD(hh, head, keyfield, len, add);                                \
    } while (0)

#endif
