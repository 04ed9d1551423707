#!/usr/bin/env bash
# peer_death.c as a test: the job must end on its own, non-zero, with the
# transport naming the dead peer, device and port, rivetrun naming the rank
# that ended it and why, and no process of the job left behind.
#   peer_death.sh RIVETRUN JOB.yaml PEER_DEATH_BIN DEVICE
set -uo pipefail
run=$1 cfg=$2 prog=$3 dev=$4
t0=$(date +%s)
"$(dirname "$0")/../expect.sh" --fail \
  -e "error: verbs: .* to worker [0-9]+ [(]rank 1[)] failed on $dev port [0-9]+: .*: the peer is dead or unreachable" \
  -e "^rivetrun: rank 0 aborted: worker [0-9]+ [(]rank 1[)] failed: .* on $dev port [0-9]+ [(]dead or unreachable[)]" \
  -x "not found dead|did not end" \
  -- "$run" --timeout 300 -n 2 -c "$cfg" "$prog" 120
rc=$?
echo "peer_death: the job ended after $(( $(date +%s) - t0 )) s"
# rank 1 lived on as "sleep 299.25" (AFTERLIFE_ARG)
if pgrep -f '^sleep 299[.]25$'; then
  echo "peer_death: a process of the job survived it" >&2
  pkill -f '^sleep 299[.]25$'
  rc=1
fi
exit $rc
