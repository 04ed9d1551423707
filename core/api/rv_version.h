/**
 * @file rv_version.h
 * @brief rivet's version: of the headers a program is built against
 * (macros) and of the library it runs with (rv_version).
 *
 * The version is MAJOR.MINOR.PATCH. Before 1.0 a minor release may change
 * the API; CHANGELOG.md lists every change to a public header with how to
 * migrate, and a renamed or removed name keeps a deprecated alias for one
 * minor release (RV_DEPRECATED). The library's soname changes when its ABI
 * does (librivet.so.MAJOR from 1.0; librivet.so.0 before), and the build
 * compares the ABI with the last release's (tests: abi).
 *
 * These three numbers are the one place the version is written: the build
 * reads them from here.
 */
#ifndef RIVET_RV_VERSION_H
#define RIVET_RV_VERSION_H

#include "rv_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RV_VERSION_MAJOR 0 /**< incompatible API changes (from 1.0) */
#define RV_VERSION_MINOR 2 /**< added calls; before 1.0, any change */
#define RV_VERSION_PATCH 0 /**< fixes only */

/** The version as one number, for comparisons in the preprocessor:
 * `#if RV_VERSION >= RV_VERSION_OF(0, 2, 0)`. */
#define RV_VERSION_OF(_major, _minor, _patch)                                  \
    ((_major)*10000 + (_minor)*100 + (_patch))
/** The headers' version as one number. */
#define RV_VERSION                                                             \
    RV_VERSION_OF(RV_VERSION_MAJOR, RV_VERSION_MINOR, RV_VERSION_PATCH)

/**
 * @brief The version of the library the program runs with, which may be
 * newer than the headers it was built against (RV_VERSION_*).
 * @param [out] major if not NULL, the major number
 * @param [out] minor if not NULL, the minor number
 * @param [out] patch if not NULL, the patch number
 * @return "MAJOR.MINOR.PATCH", a static string (not to be freed)
 * @note Any thread, before rv_init too.
 */
RV_EXPORT const char *rv_version(unsigned *major, unsigned *minor,
                                 unsigned *patch);

#ifdef __cplusplus
}
#endif

#endif
