#!/usr/bin/env bash
# peer_death.c as a test: the job must end on its own, non-zero, with the
# transport naming the dead peer, device and port, rivetrun naming the rank
# that ended it and why, and no process of the job left behind.
#   peer_death.sh DEVICE -- RIVETRUN ARGS... PEER_DEATH_BIN [SECONDS]
# (the job command as tests/job_test.cmake's rivet_job_test builds it)
# With DEVICE "keepalive" (UCX, whose shared-memory and TCP transports do
# not see a peer whose segments and sockets outlive its runtime), the one
# to name the rank is rivetrun, whose heartbeats from it stopped
# (job.keepalive), within that many seconds and a few more.
set -uo pipefail
if [ $# -lt 3 ] || [ "$2" != -- ]; then
  echo "usage: peer_death.sh DEVICE -- RIVETRUN ARGS... PEER_DEATH_BIN [SECONDS]" >&2
  exit 2
fi
dev=$1
shift 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
t0=$(date +%s)
if [ "$dev" = keepalive ]; then
  keepalive=${RIVET_JOB_KEEPALIVE:-10}
  expect=(-e "^rivetrun: rank 1 [(]pid [0-9]+[)] stopped answering: no heartbeat for [0-9.]+ s while its process lives on .*job.keepalive: $keepalive s")
else
  expect=(-e "error: verbs: .* to worker [0-9]+ [(]rank 1[)] failed on $dev port [0-9]+: .*: the peer is dead or unreachable"
          -e "^rivetrun: rank 0 aborted: worker [0-9]+ [(]rank 1[)] failed: .* on $dev port [0-9]+ [(]dead or unreachable[)]")
fi
"$(dirname "$0")/../expect.sh" --fail "${expect[@]}" \
  -e "peer_death: rank 1 [(]pid [0-9]+[)] leaves without a goodbye" \
  -x "not found dead|did not end" \
  -- "$@" | tee "$log"
rc=${PIPESTATUS[0]}
took=$(( $(date +%s) - t0 ))
echo "peer_death: the job ended after $took s"
if [ "$dev" = keepalive ] && [ "$took" -gt $(( keepalive + 15 )) ]; then
  echo "peer_death: rivetrun took $took s to end it, with job.keepalive $keepalive s" >&2
  rc=1
fi
# Rank 1 lived on as "sleep 299.25" (AFTERLIFE_ARG) under the pid it
# printed. Only that process is looked at: other runs of this test on the
# machine have their own.
pid=$(sed -n 's/.*peer_death: rank 1 (pid \([0-9]*\)) leaves without a goodbye.*/\1/p' "$log" | head -n 1)
if [ -n "$pid" ] &&
   [ "$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline")" = "sleep 299.25 " ]; then
  echo "peer_death: a process of the job survived it (pid $pid)" >&2
  kill -KILL "$pid" 2>/dev/null
  rc=1
fi
exit $rc
