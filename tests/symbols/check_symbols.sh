#!/usr/bin/env bash
# Lists the dynamic symbols librivet.so defines and fails on any that is
# not public API: every one must be an rv_ name (not rv__, which marks
# internal helpers) declared with RV_EXPORT in a public header (the api/
# folders of the layers), so that nothing internal can become part of the
# ABI by accident.
#
#   check_symbols.sh LIBRIVET SOURCE_DIR
set -euo pipefail
lib=$1
src=$2
headers=$(ls "$src"/*/api/*.h)

# What the public headers export (RV_EXPORT declarations, functions and
# data), one name per line.
declared=$(cat $headers | tr '\n' ' ' | sed 's/\[[^]]*\]//g' |
           grep -oE 'RV_EXPORT[^;(]*\(?' |
           grep -oE '\brv_[a-z0-9_]+ *\(?$' | tr -d ' (' | sort -u)
[ -n "$declared" ] || { echo "no RV_EXPORT declarations in $src/*/api"; exit 1; }

# Linker-defined names, and the ODR indicators AddressSanitizer adds for
# exported data, are not rivet's.
defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' |
          grep -vE '^(_init|_fini|_edata|_end|__bss_start|__odr_asan\..*)$' |
          sort -u)
[ -n "$defined" ] || { echo "$lib defines no dynamic symbols"; exit 1; }

bad=$(comm -23 <(echo "$defined") <(echo "$declared"))
missing=$(comm -13 <(echo "$defined") <(echo "$declared"))
n=$(echo "$defined" | wc -l)
if [ -n "$bad" ]; then
    echo "librivet.so exports symbols that are not public API:"
    echo "$bad" | sed 's/^/  /'
    exit 1
fi
if [ -n "$missing" ]; then
    echo "declared RV_EXPORT in a public header but not defined by librivet.so:"
    echo "$missing" | sed 's/^/  /'
    exit 1
fi
echo "librivet.so exports $n symbols, all of them public API"
