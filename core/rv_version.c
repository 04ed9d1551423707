/*
 * The library's version (rv_version.h): the numbers this librivet was
 * built with, whatever headers the program that loaded it saw.
 */
#include <stddef.h>

#include "rv_version.h"

#define STR_(_x) #_x
#define STR(_x) STR_(_x)

const char *rv_version(unsigned *major, unsigned *minor, unsigned *patch)
{
    if (major != NULL)
        *major = RV_VERSION_MAJOR;
    if (minor != NULL)
        *minor = RV_VERSION_MINOR;
    if (patch != NULL)
        *patch = RV_VERSION_PATCH;
    return STR(RV_VERSION_MAJOR) "." STR(RV_VERSION_MINOR) "." STR(
        RV_VERSION_PATCH);
}
