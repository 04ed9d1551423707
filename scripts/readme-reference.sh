#!/usr/bin/env bash
# Checks (or, with --update, rewrites) the configuration reference in FILE
# (docs/guide/configuration.md) against `rivet-config --reference`.
# Usage: readme-reference.sh RIVET_CONFIG_BIN FILE [--update]
set -euo pipefail
bin=$1
readme=$2
begin='<!-- config-reference:begin'
end='<!-- config-reference:end -->'
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
awk -v b="$begin" -v e="$end" -v bin="$bin" '
  index($0, b) == 1 { print; while ((bin " --reference") | getline l) print l;
                      skip = 1; next }
  index($0, e) == 1 { skip = 0 }
  !skip { print }' "$readme" > "$tmp"
if [ "${3:-}" = --update ]; then
  cp "$tmp" "$readme"
  echo "updated $readme"
elif ! diff -u "$readme" "$tmp"; then
  echo "$readme's configuration reference is stale: run make readme" >&2
  exit 1
fi
