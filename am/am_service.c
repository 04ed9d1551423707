/*
 * Service threads (job.service_threads > 0, Seriema §4.3).
 *
 * In Seriema a service thread owns the receive queue and runs "service"
 * calls itself: the slow, rare calls that set things up, such as handing
 * out messenger chunks, which would otherwise stall a worker in the
 * middle of its stream of calls. rivet's transports give every worker its
 * own receive path (a UCX worker per thread), so ordinary calls keep
 * running on their worker; what moves to the service threads is the work
 * of service calls. A worker's handler for a service call hands a job to
 * the process's service queue and goes on with its calls; a service
 * thread runs the job (allocating, binding, faulting in and registering
 * ring chunks costs milliseconds); the worker finishes it (records the
 * chunks and answers the caller) the next time it progresses, through a
 * wait-free outbox. Service threads sleep on a condition variable when
 * there is nothing to do: they never compete with workers for a core.
 */
#include <stdlib.h>

#include "am_internal.h"

static void *service_main(void *arg)
{
    am_service_t *svc = arg;
    rv_log_set_identity(-1, -1);
    pthread_mutex_lock(&svc->lock);
    for (;;) {
        while (svc->head == NULL && !svc->stop)
            pthread_cond_wait(&svc->cond, &svc->lock);
        am_sjob_t *job = svc->head;
        if (job == NULL)
            break; /* stopping, and nothing left */
        svc->head = job->next;
        if (svc->head == NULL)
            svc->tail = NULL;
        pthread_mutex_unlock(&svc->lock);
        job->run(job);
        cds_wfcq_node_init(&job->node);
        RV_TSAN_RELEASE(job);
        cds_wfcq_enqueue(&job->aw->outbox_head, &job->aw->outbox_tail,
                         &job->node);
        pthread_mutex_lock(&svc->lock);
    }
    pthread_mutex_unlock(&svc->lock);
    return NULL;
}

void am_service_init(am_proc_t *proc)
{
    pthread_mutex_init(&proc->svc.lock, NULL);
    pthread_cond_init(&proc->svc.cond, NULL);
}

void am_service_fini(am_proc_t *proc)
{
    pthread_mutex_destroy(&proc->svc.lock);
    pthread_cond_destroy(&proc->svc.cond);
}

rv_status_t am_service_start(am_worker_t *aw)
{
    am_service_t *svc = &aw->proc->svc;
    int want =
        (int)rv_core_config(rv_context_config(aw->ctx))->job.service_threads;
    rv_status_t st = RV_OK;
    __cds_wfcq_init(&aw->outbox_head, &aw->outbox_tail);
    atomic_init(&aw->service_pending, 0);
    pthread_mutex_lock(&svc->lock);
    if (svc->users++ == 0 && want > 0) {
        svc->stop = false;
        for (svc->nthreads = 0; svc->nthreads < want; svc->nthreads++)
            if (pthread_create(&svc->threads[svc->nthreads], NULL, service_main,
                               svc) != 0) {
                rv_error("cannot start service thread %d", svc->nthreads);
                st = RV_ERR_NO_MEMORY;
                break;
            }
    }
    pthread_mutex_unlock(&svc->lock);
    return st;
}

void am_service_stop(am_worker_t *aw)
{
    am_service_t *svc = &aw->proc->svc;
    pthread_mutex_lock(&svc->lock);
    int n = --svc->users == 0 ? svc->nthreads : 0;
    if (n > 0) {
        svc->stop = true;
        pthread_cond_broadcast(&svc->cond);
    }
    pthread_mutex_unlock(&svc->lock);
    for (int i = 0; i < n; i++)
        pthread_join(svc->threads[i], NULL);
    if (n > 0)
        svc->nthreads = 0;
}

void am_service_submit(am_worker_t *aw, am_sjob_t *job)
{
    am_service_t *svc = &aw->proc->svc;
    job->aw = aw;
    job->next = NULL;
    if (svc->nthreads == 0) {
        job->run(job);
        job->done(job);
        return;
    }
    atomic_fetch_add(&aw->service_pending, 1);
    pthread_mutex_lock(&svc->lock);
    if (svc->tail != NULL)
        svc->tail->next = job;
    else
        svc->head = job;
    svc->tail = job;
    pthread_cond_signal(&svc->cond);
    pthread_mutex_unlock(&svc->lock);
}

unsigned am_service_poll(am_worker_t *aw)
{
    unsigned n = 0;
    if (atomic_load_explicit(&aw->service_pending, memory_order_relaxed) == 0)
        return 0;
    struct cds_wfcq_node *node;
    while ((node = __cds_wfcq_dequeue_nonblocking(&aw->outbox_head,
                                                  &aw->outbox_tail)) != NULL &&
           node != CDS_WFCQ_WOULDBLOCK) {
        am_sjob_t *job = caa_container_of(node, am_sjob_t, node);
        RV_TSAN_ACQUIRE(job);
        job->done(job);
        atomic_fetch_sub(&aw->service_pending, 1);
        n++;
    }
    return n;
}
