#!/usr/bin/env bash
# Model-checks the dynamic offloading mode's sleep/wake protocol
# (core/progress/rv_offload.pml) with SPIN, with the executor as completer and with
# a completer thread: for 2 and 3 requesters (2 with a completer thread), no assertion
# violation (no lost wake-up) and no invalid end state (no deadlock); and
# the protocol without the futex's compare must fail, so that the check is
# known to be able to fail. A search that did not cover the whole state
# space (cut at pan's depth limit) is a failure, not a pass. Skipped (77)
# where spin is not installed.
set -euo pipefail
model=$(realpath "${1:?usage: offload_model.sh MODEL.pml}")
command -v spin >/dev/null || { echo "spin is not installed: skipped"; exit 77; }
cc=${CC:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# The depth limit of pan's search (its -m); the deepest path of these
# models is about 150 steps. OFFLOAD_MODEL_DEPTH lowers it to show that a
# truncated search fails the check.
depth=${OFFLOAD_MODEL_DEPTH:-100000}

# Runs SPIN's exhaustive safety search and prints its summary; leaves the
# number of errors it found in $errors, and in $complete whether pan
# explored the whole state space: a search cut short at its depth limit
# ("max search depth too small"), out of memory, or stopped early finds
# nothing in what it did not visit, so it proves nothing.
check() {
  spin "$@" -a "$model" >/dev/null
  "$cc" -O2 -DSAFETY -o pan pan.c
  ./pan -m"$depth" >out.txt 2>&1 || true
  grep -E "assertion violated|errors:|states, stored|too small|not completed|out of memory" \
    out.txt | sed 's/^/  /'
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' out.txt)
  complete=1
  if grep -Eq "max search depth too small|Search not completed|out of memory" out.txt ||
     ! grep -q "^Full statespace search" out.txt; then
    complete=0
  fi
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
    elif [ "$complete" != 1 ]; then
      echo "FAIL: the search with $r requesters, $what, did not cover the whole state space"
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
