#!/usr/bin/env bash
# Runs a command and checks its exit status and output (stdout + stderr).
# usage: expect.sh [--fail | --status N] -e REGEX [-e REGEX ...] [-x REGEX ...]
#                  -- CMD ARGS...
#   --fail      the command must exit non-zero (default: it must exit 0)
#   --status N  the command must exit with status N
#   -e REGEX    some output line must match (grep -E)
#   -x REGEX    no output line may match
# A command that exits 77 (skipped: what it needs is absent) makes this
# exit 77 too, unless --status asks for another status.
set -uo pipefail
want_fail=0
want_status=""
must=()
mustnot=()
while [ $# -gt 0 ]; do
  case $1 in
    --fail) want_fail=1; shift ;;
    --status) want_status=$2; shift 2 ;;
    -e) must+=("$2"); shift 2 ;;
    -x) mustnot+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "expect.sh: bad argument $1" >&2; exit 2 ;;
  esac
done
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
# A command that could not run (no device, no namespaces) is skipped, not
# failed nor passed.
if [ "$status" -eq 77 ] && [ -z "$want_status" ]; then
  exit 77
fi
ok=1
if [ -n "$want_status" ]; then
  [ "$status" -eq "$want_status" ] ||
    { echo "expect.sh: the command exited with status $status, $want_status was expected" >&2; ok=0; }
elif [ $want_fail -eq 1 ] && [ $status -eq 0 ]; then
  echo "expect.sh: the command succeeded, a failure was expected" >&2; ok=0
elif [ $want_fail -eq 0 ] && [ $status -ne 0 ]; then
  echo "expect.sh: the command exited with status $status" >&2; ok=0
fi
for re in "${must[@]}"; do
  printf '%s\n' "$out" | grep -Eq -- "$re" ||
    { echo "expect.sh: no output line matches: $re" >&2; ok=0; }
done
for re in "${mustnot[@]}"; do
  printf '%s\n' "$out" | grep -Eq -- "$re" &&
    { echo "expect.sh: an output line matches: $re" >&2; ok=0; }
done
[ $ok -eq 1 ]
