#!/usr/bin/env bash
# Builds rivet's API reference with Doxygen into OUTDIR and fails on any
# warning (an undocumented public symbol, parameter or return value, or a
# malformed comment), printing them all.
#
#   check-docs.sh [--skip-code N] DOXYGEN DOXYFILE OUTDIR
#
# With --skip-code (ctest's SKIP_RETURN_CODE), a missing doxygen ends with
# status N, so that ctest reports the check as skipped, never as passed.
set -euo pipefail
skip=""
if [ "${1:-}" = --skip-code ]; then
    skip=$2
    shift 2
fi
[ $# -eq 3 ] || { echo "usage: $0 [--skip-code N] DOXYGEN DOXYFILE OUTDIR" >&2; exit 2; }
doxygen=$1
doxyfile=$2
out=$3

if [ -z "$doxygen" ] || ! command -v "$doxygen" >/dev/null 2>&1; then
    if [ -n "$skip" ]; then
        echo "doxygen not found: the API reference check is skipped" \
             "(scripts/install-deps.sh installs doxygen)"
        exit "$skip"
    fi
    echo "doxygen not found: install it (scripts/install-deps.sh) and" \
         "configure again (cmake -S . -B build)" >&2
    exit 1
fi

mkdir -p "$out"
log=$out/warnings.log
rm -f "$log"
# The output folder and the log are set here, after the Doxyfile's own,
# so that the target and the test do not write over each other.
status=0
{ cat "$doxyfile"
  echo "OUTPUT_DIRECTORY = \"$out\""
  echo "WARN_LOGFILE = \"$log\""
} | "$doxygen" - || status=$?

if [ -s "$log" ]; then
    n=$(grep -cE ': (warning|error):' "$log" || true)
    echo "doxygen: $n warning(s) in the public headers:" >&2
    cat "$log" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "doxygen failed (exit status $status)" >&2
    exit 1
fi
echo "API reference: $out/html/index.html (no warnings)"
