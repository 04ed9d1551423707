/* Status strings, and the clock. */
#include <time.h>

#include "rv_status.h"

int64_t rv_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *rv_status_str(rv_status_t status)
{
    switch (status) {
    case RV_OK:
        return "success";
    case RV_INPROGRESS:
        return "operation in progress";
    case RV_ERR_NO_MEMORY:
        return "out of memory";
    case RV_ERR_INVALID:
        return "invalid argument";
    case RV_ERR_NOT_FOUND:
        return "not found";
    case RV_ERR_EXISTS:
        return "already exists";
    case RV_ERR_UNSUPPORTED:
        return "not supported";
    case RV_ERR_AGAIN:
        return "resource temporarily full";
    case RV_ERR_IO:
        return "input/output error";
    case RV_ERR_TRANSPORT:
        return "transport error";
    case RV_ERR_CONFIG:
        return "configuration error";
    case RV_ERR_TIMEOUT:
        return "timed out";
    case RV_ERR_PEER:
        return "peer process failed";
    case RV_ERR_TRUNCATED:
        return "message truncated";
    case RV_ERR_BOOTSTRAP:
        return "bootstrap failed";
    case RV_ERR_NO_DEVICE:
        return "no such device";
    case RV_ERR_CANCELED:
        return "operation canceled";
    }
    return "unknown status";
}
