/* What the helpers of job_test.h count, one for the whole test program. */
#include "job_test.h"

atomic_int failures;
pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
int job_checks_skipped;
