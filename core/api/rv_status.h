/**
 * @file rv_status.h
 * @brief rivet's single status type and leveled logging.
 *
 * Included by core/rivet.h and core/rv_transport.h; plugin authors and
 * applications never include it directly.
 */
#ifndef RIVET_RV_STATUS_H
#define RIVET_RV_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks a function of rivet's public API: librivet is built with hidden
 * visibility and exports exactly the functions so marked. */
#define RV_EXPORT __attribute__((visibility("default")))

/**
 * @brief Status of every rivet call. Zero is success, a positive value means
 * the operation was started and completes later, negative values are errors.
 */
typedef enum rv_status {
    RV_OK = 0,
    RV_INPROGRESS = 1,       /**< started; completion is reported later */
    RV_ERR_NO_MEMORY = -1,   /**< out of memory or registered memory */
    RV_ERR_INVALID = -2,     /**< invalid argument */
    RV_ERR_NOT_FOUND = -3,   /**< no such object, file, plugin or handler */
    RV_ERR_EXISTS = -4,      /**< already exists (e.g. handler id collision) */
    RV_ERR_UNSUPPORTED = -5, /**< not supported by this transport or build */
    RV_ERR_AGAIN = -6,       /**< resource temporarily full; try again */
    RV_ERR_IO = -7,          /**< system call failed */
    RV_ERR_TRANSPORT = -8,   /**< the transport reported an error */
    RV_ERR_CONFIG = -9,      /**< bad configuration */
    RV_ERR_TIMEOUT = -10,    /**< timed out */
    RV_ERR_PEER = -11,       /**< a peer process died or is unreachable */
    RV_ERR_TRUNCATED = -12,  /**< message shorter or longer than announced */
    RV_ERR_BOOTSTRAP = -13,  /**< the bootstrap (launcher or PMIx) failed */
    RV_ERR_NO_DEVICE = -14,  /**< no usable device */
    RV_ERR_CANCELED = -15,   /**< operation canceled */
} rv_status_t;

/** @brief A short, constant, lowercase description of @p status. */
RV_EXPORT const char *rv_status_str(rv_status_t status);

/** @brief Log levels, from quietest to loudest (RIVET_LOG_LEVEL). */
typedef enum rv_log_level {
    RV_LOG_FATAL = 0,
    RV_LOG_ERROR,
    RV_LOG_WARN,
    RV_LOG_INFO,
    RV_LOG_DEBUG,
    RV_LOG_TRACE,
} rv_log_level_t;

/** @brief The active level; RIVET_LOG_LEVEL (name or number) sets it. */
extern RV_EXPORT rv_log_level_t rv_log_level;

/**
 * @brief Sets the calling thread's log prefix (rank and worker thread).
 * @param rank   process rank, or -1 when not known yet
 * @param thread local worker thread index, or -1 for a non-worker thread
 */
RV_EXPORT void rv_log_set_identity(int rank, int thread);

/** @brief Writes one log line if @p level is enabled. Thread-safe. */
RV_EXPORT void rv_log(rv_log_level_t level, const char *file, int line, const char *fmt,
            ...) __attribute__((format(printf, 4, 5)));

#define rv_log_enabled(_level) ((_level) <= rv_log_level)
#define RV_LOG_(_level, ...)                                                   \
    do {                                                                       \
        if (rv_log_enabled(_level))                                            \
            rv_log(_level, __FILE__, __LINE__, __VA_ARGS__);                   \
    } while (0)
#define rv_error(...) RV_LOG_(RV_LOG_ERROR, __VA_ARGS__)
#define rv_warn(...)  RV_LOG_(RV_LOG_WARN, __VA_ARGS__)
#define rv_info(...)  RV_LOG_(RV_LOG_INFO, __VA_ARGS__)
#define rv_debug(...) RV_LOG_(RV_LOG_DEBUG, __VA_ARGS__)
#define rv_trace(...) RV_LOG_(RV_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
