#!/usr/bin/env bash
# The library's C files as .clang-format writes them: every .c and .h of
# the layers and transports (core, am, rma, store, mcts, transports),
# public headers included. Lists the files that differ and fails; `-i`
# rewrites them instead. Exits 77 (skipped) where clang-format is missing.
#
#   scripts/check-format.sh [-i] [SOURCE_DIR]
set -euo pipefail
fix=0
if [ "${1:-}" = -i ]; then fix=1; shift; fi
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cf=$(command -v clang-format || true)
if [ -z "$cf" ]; then
    echo "check-format: clang-format is not installed: skipped"
    exit 77
fi
cd "$top"
mapfile -t files < <(find core am rma store mcts transports \
    -name '*.[ch]' | sort)
bad=()
for f in "${files[@]}"; do
    if [ $fix -eq 1 ]; then
        "$cf" -i "$f"
    elif ! "$cf" --dry-run -Werror "$f" > /dev/null 2>&1; then
        bad+=("$f")
    fi
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "check-format: ${#bad[@]} of ${#files[@]} files differ from" \
         ".clang-format (scripts/check-format.sh -i rewrites them):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "check-format: ${#files[@]} files as .clang-format writes them"
