#!/usr/bin/env bash
# Model-checks the dynamic offloading mode's sleep/wake protocol
# (core/rv_offload.pml) with SPIN, with the executor as completer and with
# a completer thread: for 2 and 3 requesters (2 with a completer thread), no assertion
# violation (no lost wake-up) and no invalid end state (no deadlock); and
# the protocol without the futex's compare must fail, so that the check is
# known to be able to fail. Skipped (77) where spin is not installed.
set -euo pipefail
model=$(realpath "${1:?usage: offload_model.sh MODEL.pml}")
command -v spin >/dev/null || { echo "spin is not installed: skipped"; exit 77; }
cc=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Runs SPIN's exhaustive safety search and prints its summary; leaves the
# number of errors it found in $errors.
check() {
  spin "$@" -a "$model" >/dev/null
  "$cc" -O2 -DSAFETY -o pan pan.c
  ./pan -m100000 >out.txt 2>&1 || true
  grep -E "assertion violated|errors:|states, stored" out.txt | sed 's/^/  /'
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' out.txt)
}

status=0
# With a completer thread, 3 requesters take 2.7e8 states (9 minutes):
# the check runs 2.
for variant in "" -DCOMPLETER; do
  what="the executor completing" requesters="2 3" broken=-DLOST_WAKEUP
  [ -n "$variant" ] && what="a completer thread" requesters=2 broken=-DLOST_CWAKEUP
  for r in $requesters; do
    echo "$r requesters, $what:"
    check -DR=$r $variant
    if [ "$errors" != 0 ]; then
      echo "FAIL: the protocol has an error with $r requesters, $what"
      status=1
    fi
  done
  echo "2 requesters, $what, sleeping without the futex's compare:"
  check -DR=2 $broken $variant
  if [ "$errors" = 0 ]; then
    echo "FAIL: SPIN did not find the lost wake-up of the broken protocol"
    status=1
  fi
done
[ $status = 0 ] && echo "PASS: no lost wake-up, no deadlock; the broken variant is caught"
exit $status
