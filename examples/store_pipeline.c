/*
 * store_pipeline: producers and consumers through the object store. Every
 * worker produces FRAMES frames of FRAME_BYTES bytes, named
 * "frame <worker> <k>", and consumes the frames of the next worker, which
 * sits in another process when the job has more than one. A frame is
 * created in the store with its producer and number as metadata, written
 * in place (its last 8 bytes a checksum of the others) and sealed; the
 * consumer gets it by name (waiting until its producer seals it), checks
 * the metadata and the checksum, and releases it.
 * Frames above store.rndv_threshold travel by one-sided reads of the
 * producer's registered memory; smaller ones in calls.
 *
 *   rivetrun -n 2 -c job.yaml ./store_pipeline [frames per worker]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rivet.h>
#include <rv_store.h>

#define FRAME_BYTES (256 * 1024)
#define WAIT_MS 30000 /* a frame not sealed by then is an error */

static long frames = 16;

typedef struct {
    uint32_t producer, k;
} frame_meta_t;

static void frame_id(rv_tid_t producer, long k, rv_object_id_t *id)
{
    char name[64];
    int n = snprintf(name, sizeof(name), "frame %u %ld", producer, k);
    rv_object_id_of(name, (size_t)n, id); /* same name, same id anywhere */
}

static uint64_t checksum(const uint8_t *p, size_t n) /* FNV-1a */
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static rv_status_t produce(rv_worker_t *w, long k)
{
    rv_object_id_t id;
    uint8_t *data;
    frame_meta_t meta = {rv_worker_tid(w), (uint32_t)k};
    frame_id(rv_worker_tid(w), k, &id);
    /* The store's memory, written in place: no copy on the way in. The
     * metadata is copied now. */
    rv_status_t st = rv_store_create(w, &id, FRAME_BYTES, &meta, sizeof(meta),
                                     (void **)&data);
    if (st != RV_OK)
        return st;
    for (size_t i = 0; i < FRAME_BYTES; i++)
        data[i] = (uint8_t)(i * 7 + (size_t)k + rv_worker_tid(w));
    uint64_t sum = checksum(data, FRAME_BYTES - sizeof(sum));
    memcpy(data + FRAME_BYTES - sizeof(sum), &sum, sizeof(sum));
    return rv_store_seal(w, &id); /* immutable and visible to the job */
}

static rv_status_t consume(rv_worker_t *w, rv_tid_t producer, long k)
{
    rv_object_id_t id;
    rv_store_buf_t buf;
    uint64_t sum;
    frame_id(producer, k, &id);
    rv_status_t st = rv_store_get(w, &id, 1, WAIT_MS, &buf, NULL);
    if (st != RV_OK)
        return st;
    memcpy(&sum, (const uint8_t *)buf.data + buf.data_size - sizeof(sum),
           sizeof(sum));
    frame_meta_t want = {producer, (uint32_t)k}, meta = {0, 0};
    if (buf.meta_size == sizeof(meta))
        memcpy(&meta, buf.meta, sizeof(meta));
    bool ok = buf.data_size == FRAME_BYTES && meta.producer == want.producer &&
              meta.k == want.k &&
              sum == checksum(buf.data, buf.data_size - sizeof(sum));
    /* The view is valid until the reference is given back. */
    rv_store_release(w, &id);
    return ok ? RV_OK : RV_ERR_TRUNCATED;
}

static int body(rv_worker_t *w, void *arg)
{
    uint32_t nw = rv_nworkers(rv_worker_context(w));
    rv_tid_t me = rv_worker_tid(w), from = (rv_tid_t)((me + 1) % nw);
    uint64_t bad = 0, total;
    (void)arg;

    /* Produce and consume in turn, so that gets wait for frames their
     * producers have not sealed yet as often as they find them. */
    for (long k = 0; k < frames; k++) {
        rv_status_t st = produce(w, k);
        if (st == RV_OK)
            st = consume(w, from, k);
        if (st != RV_OK && bad++ == 0)
            fprintf(stderr, "worker %u, frame %ld: %s\n", me, k,
                    rv_status_str(st));
    }
    /* No worker leaves while another may still fetch its frames. */
    if (rv_coll_allreduce(w, &total, &bad, 1, RV_COLL_U64, RV_COLL_SUM) !=
        RV_OK)
        return 1;
    if (me == 0)
        printf("store_pipeline: %u workers passed %ld frames of %d KiB each, "
               "%llu failed: %s\n",
               nw, frames, FRAME_BYTES / 1024, (unsigned long long)total,
               total == 0 ? "ok" : "WRONG");
    return total == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        frames = atol(argv[1]);
    if (frames < 1 || rv_store_init(ctx) != RV_OK) /* store.* keys */
        return 1;
    rv_status_t st = rv_job_run(ctx, body, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
