#!/usr/bin/env bash
# A job across two hosts made on this machine, under Open MPI's mpirun or
# under Slurm's srun:
#
#   [RIVET_TEST_MN_LAUNCHER=mpirun|srun] scripts/multinode.sh
#       [--timeout SECONDS] [-n PROCESSES] [-c JOB.yaml] PROGRAM [ARGS...]
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
# Half the PROCESSES (default 4) run on each host, the first half on the
# first. The job file goes to every process as RIVET_CONFIG, and so do the
# RIVET_*, UCX_* and sanitizer variables of the environment. The job ends
# after --timeout seconds (default 280). The namespaces and everything in
# them go at the end, whatever happened.
#
# mpirun (the default) starts on the first host; its rsh agent is this
# script, which starts Open MPI's daemon on the second host inside that
# host's namespaces, as ssh would on another machine.
#
# srun: a Slurm cluster of the two hosts, made for the job and gone with
# it: munged and slurmctld on the first host, a slurmd on each, every one
# with its files in a folder of the run (the slurm.conf written below).
# srun launches the processes with Slurm's PMIx plugin (--mpi=pmix), so
# each host's slurmstepd is the PMIx server of its processes, as under a
# batch system; each host has a temporary folder of its own (TmpFS), as
# hosts do, where the plugin keeps its sockets.
#
# Needs root, iproute2's `ip netns`, util-linux's `unshare` and mpirun
# (srun: slurmctld, slurmd, srun and munged); where one is missing, or the
# namespaces cannot be made (a container without the privilege), it says
# why and exits 77 (a test skipped).
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

# --slurm-head PROCESSES TIMEOUT PROGRAM [ARGS...]: on the first host, the
# Slurm cluster of both hosts, then the job under srun. Everything it
# starts is in the first host's PID namespace (the second host's is nested
# in it), so all of it ends when this does.
if [ "${1:-}" = --slurm-head ]; then
  np=$2 timeout=$3
  shift 3
  d=$RIVET_TEST_MN_DIR
  export SLURM_CONF=$d/slurm.conf
  read -r first second <<< "$RIVET_TEST_MN_HOSTS"
  munged -F --force --socket="$d/munge.sock" --key-file="$d/munge.key" \
    --pid-file="$d/munged.pid" --log-file="$d/munged.log" \
    --seed-file="$d/munged.seed" > /dev/null 2>&1 &
  slurmctld -D -i > /dev/null 2>&1 &
  slurmd -D -N "${first%%=*}" > /dev/null 2>&1 &
  "$self" --enter "${second%%=*}" "${second#*=}" \
    slurmd -D -N "${second%%=*}" > /dev/null 2>&1 &
  # Both nodes registered and idle, as a job's allocation would find them.
  up=
  for _ in $(seq 1 120); do
    if sinfo -h -o '%T %D' 2> /dev/null | grep -qx 'idle 2'; then
      up=1
      break
    fi
    sleep 0.25
  done
  if [ -z "$up" ]; then
    echo "multinode: the Slurm cluster did not come up in 30 s:" >&2
    tail -n 5 "$d"/*.log >&2 || true
    exit 1
  fi
  rc=0
  timeout -s TERM "$timeout" srun --mpi=pmix -N 2 -n "$np" \
    --ntasks-per-node=$((np / 2)) --distribution=block \
    --kill-on-bad-exit=1 "$@" < /dev/null || rc=$?
  [ "$rc" -ne 124 ] || echo "multinode: the job ran past ${timeout} s" >&2
  exit $rc
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
launcher=${RIVET_TEST_MN_LAUNCHER:-mpirun}
case $launcher in
  mpirun)
    mpirun=$(command -v mpirun || true)
    [ -n "$mpirun" ] || skip "no mpirun (apt-get install openmpi-bin)" ;;
  srun)
    for tool in slurmctld slurmd srun sinfo munged; do
      command -v $tool > /dev/null \
        || skip "no $tool (apt-get install slurmctld slurmd slurm-client munge)"
    done ;;
  *) echo "$0: RIVET_TEST_MN_LAUNCHER=$launcher: mpirun or srun" >&2; exit 2 ;;
esac

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

# write_slurm_conf: the cluster's key and configuration, in the run's
# folder. Every daemon's state, logs, spool and temporary folder is there
# (%n: the node's name), so nothing of the machine's Slurm is used.
# slurmd runs no cgroup plugin of its own (proctrack/linuxproc, task/none:
# the hosts share the machine's kernel), but it loads one at start; in a
# host's namespaces /sys is that network namespace's sysfs, with no cgroup
# mounted, so cgroup/v1 mounts what it needs there, in the host's own mount
# namespace. config_overrides: the hosts are given more CPUs than the
# machine has, so that a job may oversubscribe it as mpirun's does.
write_slurm_conf() {
  head -c 1024 /dev/urandom > "$dir/munge.key"
  chmod 400 "$dir/munge.key"
  mkdir -p "$dir/state" "$dir/spool-${hosts[0]}" "$dir/spool-${hosts[1]}" \
    "$dir/tmp-${hosts[0]}" "$dir/tmp-${hosts[1]}"
  cat > "$dir/slurm.conf" << EOF
ClusterName=rivet
SlurmctldHost=${hosts[0]}
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
TmpFS=$dir/tmp-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
KillWait=2
SlurmdParameters=config_overrides
NodeName=${hosts[0]} CPUs=64 State=UNKNOWN
NodeName=${hosts[1]} CPUs=64 State=UNKNOWN
PartitionName=hosts Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=yes\nCgroupMountpoint=/sys/fs/cgroup\n' \
    > "$dir/cgroup.conf"
}

export RIVET_TEST_MN_DIR=$dir
export RIVET_TEST_MN_HOSTS="${hosts[0]}=${nss[0]} ${hosts[1]}=${nss[1]}"
[ -z "$job" ] || export RIVET_CONFIG=$job
launch_pass RIVET_TEST_MN_
echo "multinode: hosts ${hosts[0]} (10.231.0.1) and ${hosts[1]} (10.231.0.2)," \
  "$((np / 2)) processes each, under $launcher"

rc=0
if [ "$launcher" = srun ]; then
  write_slurm_conf
  "$self" --enter "${hosts[0]}" "${nss[0]}" \
    "$self" --slurm-head "$np" "$timeout" "$@" < /dev/null &
  child=$!
  wait "$child" || rc=$?
  exit $rc
fi

# Open MPI's daemons find each other over the veth pair (their out-of-band
# channel would take any interface); the job's processes are placed in
# order, the first half on the first host.
"$self" --enter "${hosts[0]}" "${nss[0]}" \
  "$mpirun" --allow-run-as-root --timeout "$timeout" \
  --mca plm_rsh_agent "$self --agent" \
  --mca oob_tcp_if_include "10.231.0.0/24" \
  --host "${hosts[0]}:$((np / 2)),${hosts[1]}:$((np / 2))" --map-by slot \
  -np "$np" "${pass[@]}" "$@" < /dev/null &
child=$!
wait "$child" || rc=$?
exit $rc
