#!/usr/bin/env bash
# A transport plugin's door is its ops table: it must export the symbol
# rv_transport_ops and nothing else (rivet_add_transport builds it with
# hidden visibility), so that no helper of one plugin can clash with
# another's, or with an application's, once loaded.
#
#   check_plugin_symbols.sh PLUGIN.so
set -euo pipefail
lib=$1
# Linker-defined names, and the ODR indicators AddressSanitizer adds for
# exported data, are not the plugin's.
defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' |
          grep -vE '^(_init|_fini|_edata|_end|__bss_start|__odr_asan\..*)$' |
          sort -u)
if [ "$defined" != rv_transport_ops ]; then
    echo "$(basename "$lib") exports more or other than rv_transport_ops:"
    echo "${defined:-(nothing)}" | sed 's/^/  /'
    exit 1
fi
echo "$(basename "$lib") exports rv_transport_ops alone"
