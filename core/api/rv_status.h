/**
 * @file rv_status.h
 * @brief rivet's single status type, leveled logging and clock.
 *
 * Included by rivet.h and rv_transport.h; plugin authors and applications
 * never include it directly.
 *
 * @note Thread mode: everything here may be called from any thread.
 */
#ifndef RIVET_RV_STATUS_H
#define RIVET_RV_STATUS_H

#include <stdarg.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks a function of rivet's public API: librivet is built with hidden
 * visibility and exports exactly the functions so marked. */
#define RV_EXPORT __attribute__((visibility("default")))

/** Marks a public name kept for one minor release after it was renamed or
 * replaced: using it warns at compile time with @p msg (what to use
 * instead). CHANGELOG.md lists each with how to migrate. */
#define RV_DEPRECATED(msg) __attribute__((deprecated(msg)))

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

/**
 * @brief A short, constant, lowercase description of a status.
 * @param [in] status any value, including one that is not an rv_status_t
 * @return a static string ("unknown status" for a value that is not one of
 *         rv_status_t); never freed, never NULL
 * @note Thread-safe.
 */
RV_EXPORT const char *rv_status_str(rv_status_t status);

/** @brief Log levels, from quietest to loudest (RIVET_LOG_LEVEL). */
typedef enum rv_log_level {
    RV_LOG_FATAL = 0, /**< the process cannot go on */
    RV_LOG_ERROR,     /**< an operation failed; what the user can do */
    RV_LOG_WARN,      /**< something is wrong but rivet carries on (the
                           default level) */
    RV_LOG_INFO,      /**< one-time facts about the job (transport in use,
                           page sizes chosen) */
    RV_LOG_DEBUG,     /**< set-up details; every line also names its
                           source file and line */
    RV_LOG_TRACE,     /**< per-operation detail */
} rv_log_level_t;

/**
 * @brief The active level: messages above it are not written.
 *
 * Set when librivet is loaded from RIVET_LOG_LEVEL (a name: fatal, error,
 * warn, info, debug, trace; or its number), RV_LOG_WARN by default.
 * @note A plain variable: a program may change it from its main thread
 *       before it starts worker threads; it is not meant to change while
 *       they run.
 */
extern RV_EXPORT rv_log_level_t rv_log_level;

/**
 * @brief Sets the calling thread's log prefix: "[rivet rR.tT]".
 *
 * rv_init sets it for the main thread and rv_job_run for each worker
 * thread; a thread of the program's own may set its own.
 * @param [in] rank   process rank, or -1 when not known yet (no prefix)
 * @param [in] thread local worker thread index, or -1 for a non-worker
 *                    thread
 * @note Thread-local: it changes the calling thread's prefix only.
 */
RV_EXPORT void rv_log_set_identity(int rank, int thread);

/**
 * @brief Writes one log line to standard error, with the calling thread's
 * prefix and the level's name, in a single write(2) so that the lines of
 * threads and processes do not interleave. Lines longer than about 1 KiB
 * are cut. Callers use the macros below, which test the level first.
 * @param [in] level the line's level (it is written whatever the active
 *                   level; the macros check it)
 * @param [in] file  the source file, shown at RV_LOG_DEBUG and above
 * @param [in] line  the source line, shown with @p file
 * @param [in] fmt   printf format of the message, without a newline
 * @param [in] ...   the format's arguments
 * @note Thread-safe.
 */
RV_EXPORT void rv_log(rv_log_level_t level, const char *file, int line,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** Whether messages of level @p _level are written now. */
#define rv_log_enabled(_level) ((_level) <= rv_log_level)
/** Writes a message of level @p _level, printf-style, if that level is
 * enabled (the arguments are not evaluated otherwise). */
#define RV_LOG_(_level, ...)                                                   \
    do {                                                                       \
        if (rv_log_enabled(_level))                                            \
            rv_log(_level, __FILE__, __LINE__, __VA_ARGS__);                   \
    } while (0)
/**
 * @brief rivet's clock: nanoseconds of CLOCK_MONOTONIC, from an unspecified
 *        start, never going back; what rivet's timeouts, keepalives and
 *        statistics measure with (a vDSO call on Linux, no system call).
 * @return the time in nanoseconds
 * @note Thread-safe.
 */
RV_EXPORT int64_t rv_time_ns(void);

/** Logs an error, printf-style: once, where it is detected, with what the
 * user can do about it. */
#define rv_error(...) RV_LOG_(RV_LOG_ERROR, __VA_ARGS__)
/** Logs a warning, printf-style. */
#define rv_warn(...) RV_LOG_(RV_LOG_WARN, __VA_ARGS__)
/** Logs an informational message, printf-style. */
#define rv_info(...) RV_LOG_(RV_LOG_INFO, __VA_ARGS__)
/** Logs a debugging message, printf-style. */
#define rv_debug(...) RV_LOG_(RV_LOG_DEBUG, __VA_ARGS__)
/** Logs a trace message, printf-style. */
#define rv_trace(...) RV_LOG_(RV_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
