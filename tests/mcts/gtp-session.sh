#!/usr/bin/env bash
# Runs a GTP session from a file and compares the engine's answers with
# the expected ones, byte for byte.
#   gtp-session.sh SESSION EXPECTED -- COMMAND...
set -uo pipefail
session=$1 expected=$2
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" < "$session" > "$out"
status=$?
if [ $status -ne 0 ]; then
  echo "gtp-session.sh: the engine exited with status $status" >&2
  exit 1
fi
diff -u "$expected" "$out" || {
  echo "gtp-session.sh: the answers differ from $expected" >&2
  exit 1
}
echo "gtp-session.sh: $(grep -c . "$session") lines, every answer as expected"
