#!/usr/bin/env bash
# A job across two hosts made on this machine, under Open MPI's mpirun:
#
#   scripts/multinode.sh [--timeout SECONDS] [-n PROCESSES] [-c JOB.yaml]
#                        PROGRAM [ARGS...]
#
# Each host is a set of Linux namespaces of its own: network (one end of a
# veth pair, 10.231.0.1 and 10.231.0.2, and its own loopback), UTS (its
# own hostname), IPC (its own SysV segments), PID, and mount (its own
# /dev/shm, and an /etc/hosts that names both hosts). Nothing outside them
# is used, and UCX sees what it sees between two machines: its shared
# memory transports reach only the processes of the same host (UCX compares
# the peers' IPC and PID namespaces), so it must go over TCP between hosts.
# The file system is shared, as a cluster's home directories are.
#
# mpirun starts on the first host, with half the PROCESSES (default 4)
# there; its rsh agent is this script, which starts Open MPI's daemon on
# the second host inside that host's namespaces, as ssh would on another
# machine. The job file goes to every process as RIVET_CONFIG, and so do
# the RIVET_*, UCX_* and sanitizer variables of the environment. mpirun
# ends the job after --timeout seconds (default 280). The namespaces and
# everything in them go at the end, whatever happened.
#
# Needs root, iproute2's `ip netns`, util-linux's `unshare` and mpirun;
# where one is missing, or the namespaces cannot be made (a container
# without the privilege), it says why and exits 77 (a test skipped).
set -euo pipefail

SKIP=77
self=$(readlink -f "$0")

# --agent [OPTIONS] HOST COMMAND: mpirun's rsh agent. COMMAND is one shell
# line (Open MPI quotes it for the remote shell).
if [ "${1:-}" = --agent ]; then
  shift
  while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
  host=$1
  shift
  ns=
  for pair in $RIVET_TEST_MN_HOSTS; do
    [ "${pair%%=*}" = "$host" ] && ns=${pair#*=}
  done
  [ -n "$ns" ] || { echo "multinode: no host $host" >&2; exit 1; }
  exec "$self" --enter "$host" "$ns" sh -c "$*"
fi

# --enter HOST NETNS COMMAND...: COMMAND on that host, in a PID namespace
# whose processes all die with it (--kill-child).
if [ "${1:-}" = --enter ]; then
  host=$2 ns=$3
  shift 3
  exec ip netns exec "$ns" unshare --uts --ipc --mount --pid --fork \
    --mount-proc --kill-child "$self" --inside "$host" "$@"
fi

# --inside HOST COMMAND...: the host's name, /dev/shm and /etc/hosts (in
# its own mount namespace: the machine's are untouched).
if [ "${1:-}" = --inside ]; then
  host=$2
  shift 2
  hostname "$host"
  mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm
  mount --bind "$RIVET_TEST_MN_DIR/hosts" /etc/hosts
  exec "$@"
fi

. "$(dirname "$self")/launch-opts.sh"
timeout=280
np=4
job=
launch_opts "$@"
set -- "${launch_rest[@]}"
[ $# -gt 0 ] || { echo "$0: no program" >&2; exit 2; }
if [ $((np % 2)) -ne 0 ] || [ "$np" -lt 2 ]; then
  echo "$0: -n $np: two hosts need an even number of processes" >&2
  exit 2
fi

skip() { echo "multinode: $*: skipped" >&2; exit $SKIP; }
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
command -v ip > /dev/null || skip "no ip (apt-get install iproute2)"
command -v unshare > /dev/null || skip "no unshare (util-linux)"
mpirun=$(command -v mpirun || true)
[ -n "$mpirun" ] || skip "no mpirun (apt-get install openmpi-bin)"

# Names unique to this run (ctest may run several): namespaces, veth ends
# (at most 15 characters) and hosts.
id=$$
hosts=(rv$id-a rv$id-b)
nss=(rvmn${id}a rvmn${id}b)
dir=$(mktemp -d)
cleanup() {
  for ns in "${nss[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
# Killed (ctest's timeout, ^C): the first host's unshare is killed, which
# kills its PID namespace's first process (--kill-child), and with it
# every process of both hosts (the second's namespace is nested in it).
child=
stop() { [ -z "$child" ] || kill -KILL "$child" 2> /dev/null; exit "$1"; }
trap 'stop 143' TERM
trap 'stop 130' INT

ip netns add "${nss[0]}" 2> /dev/null || skip "cannot make a network namespace"
ip netns add "${nss[1]}"
ip link add "${nss[0]}" type veth peer name "${nss[1]}"
for i in 0 1; do
  ip link set "${nss[$i]}" netns "${nss[$i]}"
  ip -n "${nss[$i]}" addr add "10.231.0.$((i + 1))/24" dev "${nss[$i]}"
  ip -n "${nss[$i]}" link set "${nss[$i]}" up
  ip -n "${nss[$i]}" link set lo up
done
printf '127.0.0.1 localhost\n10.231.0.1 %s\n10.231.0.2 %s\n' \
  "${hosts[0]}" "${hosts[1]}" > "$dir/hosts"

export RIVET_TEST_MN_DIR=$dir
export RIVET_TEST_MN_HOSTS="${hosts[0]}=${nss[0]} ${hosts[1]}=${nss[1]}"
[ -z "$job" ] || export RIVET_CONFIG=$job
launch_pass RIVET_TEST_MN_
echo "multinode: hosts ${hosts[0]} (10.231.0.1) and ${hosts[1]} (10.231.0.2)," \
  "$((np / 2)) processes each"

# Open MPI's daemons find each other over the veth pair (their out-of-band
# channel would take any interface); the job's processes are placed in
# order, the first half on the first host.
rc=0
"$self" --enter "${hosts[0]}" "${nss[0]}" \
  "$mpirun" --allow-run-as-root --timeout "$timeout" \
  --mca plm_rsh_agent "$self --agent" \
  --mca oob_tcp_if_include "10.231.0.0/24" \
  --host "${hosts[0]}:$((np / 2)),${hosts[1]}:$((np / 2))" --map-by slot \
  -np "$np" "${pass[@]}" "$@" < /dev/null &
child=$!
wait "$child" || rc=$?
exit $rc
