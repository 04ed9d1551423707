#!/usr/bin/env bash
# Resources running out before the first message, each a clear error that
# names the limit and how to raise it, never a crash inside UCX:
#
#   limits.sh nofile RIVETRUN CONFIG PROGRAM
#       a soft open-file limit too small is raised to the hard limit and
#       the job runs; a hard limit too small stops every rank with an error
#       naming 'ulimit -n' and the count the job needs, and no rank dies
#       of a signal (UCX aborted with an assertion in this case before);
#   limits.sh devshm RIVETRUN CONFIG PROGRAM
#       /dev/shm of 512 KiB (a private tmpfs in a mount namespace of the
#       test's own): the job fails naming /dev/shm's free space and how to
#       enlarge it. Skipped (77) where mount namespaces cannot be made.
set -u
what=$1 rivetrun=$2 config=$3 program=$4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }
job() { timeout 60 "$rivetrun" -n 2 -c "$config" "$program" > "$out" 2>&1; }

case $what in
nofile)
  hard=$(ulimit -Hn)
  if [ "$hard" != unlimited ] && [ "$hard" -lt 64 ]; then
    echo "the hard open-file limit is $hard already: skipped"; exit 77
  fi
  (ulimit -Sn 12; job) || fail "a soft limit of 12 was not raised"
  (ulimit -n 12; job) && fail "a job with 12 descriptors ran"
  grep -q "may open only 12 file descriptors (ulimit -n" "$out" ||
    fail "no error naming the limit"
  grep -q "raise the limit (ulimit -n [0-9]" "$out" ||
    fail "no command that raises it"
  grep -Eq "killed by signal|Assertion" "$out" && fail "a rank crashed"
  ;;
devshm)
  unshare -m true 2> /dev/null || { echo "no mount namespaces: skipped"; exit 77; }
  unshare -m sh -c 'mount -t tmpfs -o size=512k rivet-test /dev/shm &&
    timeout 60 "$@"' sh "$rivetrun" -n 2 -c "$config" "$program" \
    > "$out" 2>&1 && fail "a job ran in 512 KiB of /dev/shm"
  grep -q "/dev/shm has [0-9]* KiB free of 512 KiB" "$out" ||
    fail "no error naming /dev/shm's free space"
  grep -q "enlarge /dev/shm" "$out" || fail "no way to raise it named"
  grep -Eq "killed by signal|Assertion" "$out" && fail "a rank crashed"
  ;;
*) echo "usage: $0 nofile|devshm RIVETRUN CONFIG PROGRAM"; exit 2 ;;
esac
echo "ok: $what"
cat "$out" | grep -E "rivet.*error" | head -3
