#!/usr/bin/env bash
# Compares librivet's ABI, as its public headers declare it, with the last
# release's, committed in abi/librivet.abi (libabigail: abidw, abidiff).
#
#   check-abi.sh LIBRIVET SOURCE_DIR            compare (ctest abi)
#   check-abi.sh LIBRIVET SOURCE_DIR --update   write abi/librivet.abi (at
#                                               a release)
#
# An incompatible change (a removed or changed function or variable, a
# type whose size or layout changed) fails unless the library's soname
# changed too, which announces it; an addition passes and is listed, for
# CHANGELOG.md. abidiff flags as incompatible only what is certainly so
# (a removed symbol); a function whose parameter's or return value's type
# changed it reports as changed, and that fails here too, unless
# abi/suppressions.txt names the change with the reason it is compatible.
# Exits 77 (skipped) where libabigail is not installed.
set -euo pipefail
lib=$1
src=$2
ref=$src/abi/librivet.abi
SKIP=77
command -v abidw > /dev/null && command -v abidiff > /dev/null || {
  echo "check-abi: libabigail's abidw and abidiff are not installed" \
       "(Debian: abigail-tools)"
  exit $SKIP
}
hd=()
for d in core am rma store mcts; do hd+=(--hd "$src/$d/api"); done
# No paths, locations or compilation directories: the dump says what the
# ABI is, not where it was built.
dump() {
  abidw --no-corpus-path --no-show-locs --no-comp-dir-path \
    --drop-private-types --drop-undefined-syms "${hd[@]}" --out-file "$2" "$1"
}
if [ "${3:-}" = --update ]; then
  dump "$lib" "$ref"
  echo "check-abi: wrote $ref"
  exit 0
fi
[ -f "$ref" ] || { echo "check-abi: no $ref: run with --update at a release"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dump "$lib" "$work/now.abi"
soname() { sed -n "s/.*soname='\([^']*\)'.*/\1/p" "$1" | head -n 1; }
set +e
supp=()
[ -f "$src/abi/suppressions.txt" ] && supp=(--suppressions "$src/abi/suppressions.txt")
abidiff "${supp[@]}" "$ref" "$work/now.abi" > "$work/diff" 2>&1
rc=$?
set -e
cat "$work/diff"
# abidiff's status is a bit mask: 1 error, 2 usage, 4 a change, 8 an
# incompatible change.
if [ $((rc & 3)) -ne 0 ]; then
  echo "check-abi: abidiff failed (status $rc)"
  exit 1
fi
# Removed or changed functions and variables, from the summary lines
# ("Functions changes summary: 0 Removed, 2 Changed (4 filtered out), ...").
harmful=$(awk '/changes summary:/ { for (i = 1; i <= NF; i++)
                 if (($(i) == "Removed," || $(i) == "Changed" || $(i) == "Changed,") && $(i - 1) > 0) n++ }
               END { print n + 0 }' "$work/diff")
if [ $((rc & 8)) -ne 0 ] || [ "$harmful" -gt 0 ]; then
  if [ "$(soname "$ref")" != "$(soname "$work/now.abi")" ]; then
    echo "check-abi: incompatible with $(soname "$ref"), announced by the" \
         "new soname $(soname "$work/now.abi")"
    exit 0
  fi
  echo "check-abi: an incompatible change to the ABI of $(soname "$ref")" \
       "(above): keep the old symbol (RV_DEPRECATED) or change the soname," \
       "and say it in CHANGELOG.md"
  exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
  echo "check-abi: compatible additions (above): list them in CHANGELOG.md"
else
  echo "check-abi: the ABI of $(soname "$ref") is unchanged"
fi
exit 0
