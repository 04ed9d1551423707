#!/usr/bin/env bash
# rivet-store stage as a person runs it, checked on disk:
#   stage-check.sh HOSTS RIVET_STORE -- LAUNCHER...
# runs LAUNCHER RIVET_STORE stage --to OUT-%h with a 3 MiB random file, a
# small one, and a file that does not exist, and checks that the job
# failed naming the missing file, and that exactly HOSTS folders OUT-*
# were made, each holding both files byte for byte, with their
# permissions, and nothing else (no temporary file left behind).
set -uo pipefail
hosts=$1 store=$2
shift 2
[ "$1" = "--" ] && shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c $((3 << 20)) /dev/urandom > "$tmp/big.bin"
printf 'a small file\n' > "$tmp/small.txt"
chmod 0640 "$tmp/small.txt"
"$@" "$store" stage --to "$tmp/out-%h" "$tmp/big.bin" "$tmp/missing" \
  "$tmp/small.txt" > "$tmp/log" 2>&1
status=$?
[ $status -eq 77 ] && { cat "$tmp/log"; exit 77; }
fail() { cat "$tmp/log"; echo "stage-check.sh: $*" >&2; exit 1; }
[ $status -ne 0 ] || fail "the job succeeded with a file missing"
grep -q "$tmp/missing: cannot read it" "$tmp/log" || fail "the missing file was not named"
n=$(find "$tmp" -maxdepth 1 -name 'out-*' -type d | wc -l)
[ "$n" -eq "$hosts" ] || fail "$n folders for $hosts hosts"
for d in "$tmp"/out-*; do
  for f in big.bin small.txt; do
    cmp -s "$tmp/$f" "$d/$f" || fail "$d/$f differs from the file put"
    [ "$(stat -c %a "$tmp/$f")" = "$(stat -c %a "$d/$f")" ] ||
      fail "$d/$f has mode $(stat -c %a "$d/$f"), the file put $(stat -c %a "$tmp/$f")"
  done
  [ "$(ls -A "$d" | wc -l)" -eq 2 ] || fail "$d holds more than the two files: $(ls -A "$d")"
done
lines=$(grep -c "^staged $tmp/out-.*/big.bin 3145728 B sha256 " "$tmp/log")
[ "$lines" -eq "$hosts" ] || fail "$lines lines say big.bin was staged, for $hosts hosts"
echo "stage-check.sh: both files on each of the $hosts hosts, the missing one named"
