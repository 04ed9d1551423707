/* A program built outside the tree against an installed rivet. Rank 0
 * sends a greeting to every other rank's worker 0, which prints it. */
#include <stdio.h>
#include <string.h>

#include <rivet.h>

static volatile int greeted;

static rv_status_t on_hello(rv_worker_t *w, rv_msg_t *msg, void *arg)
{
    (void)arg;
    printf("worker %u got \"%.*s\" from worker %u\n", rv_worker_tid(w),
           (int)msg->len, (const char *)msg->data, msg->src);
    greeted = 1;
    return RV_OK;
}

static rv_handler_id_t hello;

static int body(rv_worker_t *w, void *arg)
{
    rv_context_t *ctx = rv_worker_context(w);
    (void)arg;
    if (rv_worker_tid(w) == 0) {
        const char *text = "hello from an installed rivet";
        for (int r = 1; r < rv_size(ctx); r++)
            if (rv_send(w, rv_tid_make(ctx, r, 0), hello, text, strlen(text),
                        NULL) != RV_OK)
                return 1;
    } else if (rv_worker_local(w) == 0) {
        while (!greeted)
            rv_progress(w);
    }
    return rv_barrier(w) == RV_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    unsigned major, minor, patch;
    const char *v = rv_version(&major, &minor, &patch);
    /* The installed library is the one the installed headers describe. */
    if (major != RV_VERSION_MAJOR || minor != RV_VERSION_MINOR ||
        patch != RV_VERSION_PATCH || RV_VERSION < RV_VERSION_OF(0, 2, 0)) {
        fprintf(stderr, "rivet %s runs, the headers say %d.%d.%d\n", v,
                RV_VERSION_MAJOR, RV_VERSION_MINOR, RV_VERSION_PATCH);
        return 1;
    }
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (rv_handler_register(ctx, "hello.greet", on_hello, NULL, 0, &hello))
        return 1;
    rv_status_t st = rv_job_run(ctx, body, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
