#!/usr/bin/env bash
# Two RDMA hosts on a machine without an RDMA NIC: two Soft-RoCE guests of
# scripts/rdma-vm.sh wired together, and jobs across them under Open MPI's
# mpirun.
#
#   scripts/rdma-hosts.sh [--share DIR]... -- CMD [ARGS...]
#       Boots guest 1 (rivet-rdma-vm1, 192.168.78.1) and guest 2
#       (rivet-rdma-vm2, 192.168.78.2), each with a virtio NIC on one
#       qemu socket network (a wire between the two, no bridge or root
#       needed) and its own rxe0 on that NIC, so the two rxe devices talk
#       RoCE v2 over a link as two machines' NICs do. CMD runs as root in
#       guest 1; guest 2 runs what guest 1's mpirun starts there. The
#       shares are as for rdma-vm.sh run (both guests get them); the exit
#       status is CMD's.
#   scripts/rdma-hosts.sh [--timeout S] [-n PROCESSES] [-c JOB.yaml]
#                         PROGRAM [ARGS...]
#       Inside guest 1 (the test launcher of the verbs-hosts and
#       ucx-rc-hosts configurations): the job under mpirun, half the
#       processes on each guest, in order, with the job file as
#       RIVET_CONFIG and the RIVET_*, UCX_* and sanitizer variables passed
#       on. Anywhere else it says so and exits 77 (a test skipped).
#
# Guest 1 starts Open MPI's daemon on guest 2 as ssh would, through an rsh
# agent that hands the command to guest 2 in a folder both guests share
# (one file per command; guest 2 runs it and writes its output and exit
# status beside it), and the daemons then talk over the wire. Guests are
# slow under software emulation (rdma-vm.sh): give jobs generous timeouts.
set -euo pipefail

SKIP=77
self=$(readlink -f "$0")
here=$(dirname "$self")
me=$(basename "$0")

# --- guest 2: runs the commands guest 1's agent hands over ---------------
if [ "${1:-}" = --serve ]; then
    x=$2
    mkdir -p "$x/exec"
    echo "$(hostname)" > "$x/ready2"
    n=0
    while [ ! -e "$x/stop" ]; do
        for f in "$x"/exec/*.cmd; do
            [ -e "$f" ] || continue
            id=${f%.cmd}
            mv "$f" "$id.taken" || continue
            ( bash -c "$(cat "$id.taken")" > "$id.out" 2>&1 < /dev/null
              echo $? > "$id.rc.tmp"; mv "$id.rc.tmp" "$id.rc" ) &
            n=$((n + 1))
        done
        sleep 0.2
    done
    echo "rdma-hosts: guest 2 ran $n commands"
    exit 0
fi

# --- guest 1: mpirun's rsh agent -----------------------------------------
# --agent [OPTIONS] HOST COMMAND: COMMAND is one shell line.
if [ "${1:-}" = --agent ]; then
    shift
    while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
    host=$1
    shift
    [ "$host" != "$(hostname)" ] || exec bash -c "$*"
    x=${RIVET_TEST_RH_DIR:?}
    id=$x/exec/$(date +%s%N)-$$
    printf '%s\n' "$*" > "$id.tmp"
    mv "$id.tmp" "$id.cmd"
    # Its output when it ends: a shared 9p folder tells no one of the
    # other guest's writes (no inotify), and Open MPI carries the job's
    # own output over its daemons, not over this.
    while [ ! -e "$id.rc" ]; do sleep 0.2; done
    cat "$id.out" 2> /dev/null || true
    exit "$(cat "$id.rc")"
fi

# --- guest 1: runs CMD once guest 2 serves --------------------------------
if [ "${1:-}" = --run ]; then
    x=$2
    shift 2
    for _ in $(seq 600); do [ -e "$x/ready2" ] && break; sleep 0.5; done
    [ -e "$x/ready2" ] || { echo "$me: guest 2 never came up" >&2; exit 125; }
    echo "rdma-hosts: $(hostname) and $(cat "$x/ready2") are up"
    export RIVET_TEST_RH_DIR=$x
    rc=0
    "$@" || rc=$?
    touch "$x/stop"
    exit $rc
fi

# --- on the machine: the two guests --------------------------------------
if [ "${1:-}" = --share ] || [ "${1:-}" = -- ]; then
    shares=()
    while [ $# -gt 0 ]; do
        case $1 in
            --share) shares+=(--share "$2"); shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    [ $# -gt 0 ] || { echo "$me: no command" >&2; exit 2; }
    # What both guests need, made once before either boots.
    "$here/install-deps.sh" qemu-system-x86 ||
        { echo "$me: the machine needs qemu-system-x86" >&2; exit 125; }
    "$here/rdma-vm.sh" image
    x=$(mktemp -d "${TMPDIR:-/tmp}/rivet-rdma-hosts.XXXXXX")
    chmod 755 "$x"
    port=$((20000 + $$ % 20000))
    g2=""
    trap '[ -z "$g2" ] || kill $g2 2> /dev/null; rm -rf "$x"' EXIT
    # The first guest listens on the wire; the second connects to it.
    "$here/rdma-vm.sh" run --host 1 "listen=$port" "${shares[@]}" \
        --share "$x" -- "$self" --run "$x" "$@" &
    g1=$!
    sleep 2
    "$here/rdma-vm.sh" run --host 2 "connect=$port" "${shares[@]}" \
        --share "$x" -- "$self" --serve "$x" > "$x.guest2.log" 2>&1 &
    g2=$!
    rc=0
    wait $g1 || rc=$?
    touch "$x/stop"
    for _ in $(seq 100); do kill -0 $g2 2> /dev/null || break; sleep 0.2; done
    kill $g2 2> /dev/null || true
    wait $g2 2> /dev/null || true
    g2=""
    echo "--- rdma-hosts: guest 2's output:"
    sed 's/^/[guest 2] /' "$x.guest2.log" | tail -20
    rm -f "$x.guest2.log"
    exit $rc
fi

# --- guest 1: the test launcher ------------------------------------------
. "$here/launch-opts.sh"
timeout=900
np=4
job=
launch_opts "$@"
set -- "${launch_rest[@]}"
[ $# -gt 0 ] || { echo "$me: no program" >&2; exit 2; }
if [ -z "${RIVET_TEST_RH_DIR:-}" ] || [ ! -e "$RIVET_TEST_RH_DIR/ready2" ]; then
    echo "$me: not inside the two guests of scripts/rdma-hosts.sh" \
        "(make check-verbs runs these tests there): skipped" >&2
    exit $SKIP
fi
if [ $((np % 2)) -ne 0 ]; then
    echo "$me: -n $np: two hosts need an even number of processes" >&2
    exit 2
fi
[ -z "$job" ] || export RIVET_CONFIG=$job
launch_pass RIVET_TEST_RH_
exec mpirun --allow-run-as-root --timeout "$timeout" \
    --mca plm_rsh_agent "$self --agent" \
    --mca oob_tcp_if_include 192.168.78.0/24 \
    --host "rivet-rdma-vm1:$((np / 2)),rivet-rdma-vm2:$((np / 2))" \
    --map-by slot --display-map -np "$np" "${pass[@]}" "$@" < /dev/null
