#!/usr/bin/env bash
# The sizes the style asks of the library's code: no source file over
# MAX_FILE lines (default 800), and no function of the layers named with
# -f (default am) over MAX_FN lines (default 60, the opening brace to the
# closing one). A function is what .clang-format lays out as one: a line
# that is "{" alone opens its body and the next line that is "}" alone
# closes it; its name is read from the line with its parameter list.
#
#   scripts/check-sizes.sh [-r ROOT] [-f LAYER,...] [-F MAX_FILE] [-n MAX_FN]
#                          [-l]
#
# -l lists every function over MAX_FN lines in the whole library too, for
# information (only the -f layers fail). Exits 1 when a limit is passed,
# naming each file or function and its length.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
layers=am
max_file=800
max_fn=60
list_all=0
while getopts r:f:F:n:lh opt; do
  case $opt in
    r) root=$OPTARG ;;
    f) layers=$OPTARG ;;
    F) max_file=$OPTARG ;;
    n) max_fn=$OPTARG ;;
    l) list_all=1 ;;
    *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
cd "$root"
# The library: every layer's and plugin's sources, not tests or benchmarks.
lib_dirs=(core am rma store mcts transports)
mapfile -t files < <(find "${lib_dirs[@]}" -name '*.[ch]' | sort)
[ ${#files[@]} -gt 0 ] || { echo "check-sizes: no sources under $root" >&2; exit 2; }

fail=0
while read -r n f; do
  [ "$f" = total ] && continue
  if [ "$n" -gt "$max_file" ]; then
    echo "file over $max_file lines: $f ($n)"
    fail=1
  fi
done < <(wc -l "${files[@]}")

# Prints "LINES FILE:LINE NAME" for every function body of the files given.
functions() {
  awk '
    FNR == 1 { sig = ""; start = 0 }
    /^[A-Za-z_].*\(/ { sig = $0; sigline = FNR }
    /^\{$/ { start = FNR; next }
    /^\}$/ && start {
      name = sig; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
      print FNR - start + 1, FILENAME ":" sigline, name
      start = 0
    }' "$@"
}

IFS=, read -r -a checked <<< "$layers"
for l in "${checked[@]}"; do
  mapfile -t lf < <(find "$l" -name '*.c' | sort)
  while read -r n where name; do
    if [ "$n" -gt "$max_fn" ]; then
      echo "function over $max_fn lines: $name ($where, $n lines)"
      fail=1
    fi
  done < <(functions "${lf[@]}")
done
if [ $list_all -eq 1 ]; then
  echo "every function of the library over $max_fn lines (information):"
  functions $(printf '%s\n' "${files[@]}" | grep '\.c$') |
    awk -v m="$max_fn" '$1 > m' | sort -rn
fi
exit $fail
