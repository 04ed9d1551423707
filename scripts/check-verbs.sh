#!/usr/bin/env bash
# make check-verbs: rivet on a real kernel RDMA device. On a machine without
# an RDMA NIC, scripts/rdma-vm.sh boots a qemu guest with a Soft-RoCE
# device (rxe0), and this script runs in it the tests of BUILD_DIR that
# need one: `ctest -L '^(verbs|ucx-rc)$'`, the labels of the verbs and
# ucx-rc transport configurations. They are registered by the build itself
# (tests/job_test.cmake), in every build: on the host, without a device,
# they report a skip; in the guest a missing device is a failure. They are:
#   rdma-device                the device: rxe0, port active
#   conformance-verbs-2x{1,2}  the transport conformance suite over rivet's
#                              own libibverbs transport (configs/test-verbs.yaml)
#   am-verbs-2x2, rma-verbs-2x1, epoch-verbs-2x2
#                              the invocation layer, remote memory and epoch
#                              tests switched to verbs by the job file alone
#   *-verbs-shared-2x2         conformance, am, rma and epoch with queue
#                              pairs shared by the threads of a process
#                              (transport.verbs.qp_sharing: process)
#   demo-pingpong-verbs        rv-pingpong over verbs, briefly, with the
#                              device chosen by the transport
#   peer-death-verbs[-shared]  a rank whose process image vanishes (its
#                              queue pairs with it) while rank 0 sends to
#                              it: the job ends naming it, within the
#                              transport's retry timeout, and no process
#                              of the job survives (QPs per thread, 2x1,
#                              and shared by a process's threads, 2x2)
#   conformance-ucx-rc-2x{1,2} the conformance suite over UCX's InfiniBand
#                              transports (configs/test-ucx-rc.yaml:
#                              rc_verbs), 2 processes of 1 and 2 threads
#   {am,rma,epoch}-ucx-rc-2x2  the layers' tests over the same
#   demo-*-ucx-rc              rv-pingpong, rv-am-bw and rv-rma-bw over the
#                              same configuration, briefly
# Then it boots two such guests wired together (scripts/rdma-hosts.sh),
# each with its own rxe0 on the link between them, and runs in the first
# `ctest -L '^rdma-hosts$'`: jobs of 4 processes, 2 on each host, under
# Open MPI's mpirun:
#   {conformance,am,rma}-verbs-hosts-4x1     over rivet's verbs transport
#   conformance-ucx-rc-hosts-4x1             over UCX's rc_verbs
# Under software emulation the guest's user space can stall for tens of
# seconds while its kernel moves Soft-RoCE's packets (4 busy processes on
# 2 emulated vCPUs): rivetrun then finds every rank's heartbeats late, and
# a 10 s keepalive ended quiesce-verbs-4x1 in most runs. The guest's jobs
# run with job.keepalive 60 s (RIVET_JOB_KEEPALIVE; a test that sets its
# own keeps it), and a test that fails runs once more (ctest --repeat
# until-pass:2); both runs are in the log, and the summary counts the
# tests that needed it.
# and ends with the summary of both. ctest's logs are BUILD_DIR/check-verbs/
# LastTest-one-host.log and BUILD_DIR/Testing/Temporary/LastTest.log (the
# two hosts'); the guests' output is in BUILD_DIR/check-verbs/.
#
#   scripts/check-verbs.sh [BUILD_DIR]        (default: build)
#
# BUILD_DIR is brought up to date first (made with make build when it does
# not exist). The guest image is built once and cached (scripts/rdma-vm.sh
# image). The tests are sized for a 2-vCPU guest under software emulation:
# 2 processes, 1-2 threads, generous timeouts. When the guest cannot be
# built or booted, this fails, saying why; it fails too when a test fails
# or none ran.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

# The ctest labels of the transport configurations that need the device.
labels='^(verbs|ucx-rc)$'
# ...and of the jobs across two RDMA hosts (scripts/rdma-hosts.sh).
hosts_labels='^rdma-hosts$'
# The device the guest brings up (scripts/rdma-vm.sh).
guest_device=rxe0

# --- inside the guest ----------------------------------------------------
if [ "${1:-}" = --in-guest ]; then
    build=$2
    echo "=== RDMA devices"
    ibv_devices
    ibv_devinfo -d $guest_device ||
        { echo "check-verbs: no $guest_device in the guest"; exit 1; }
    # UCX 1.13 on Soft-RoCE needs the link-local GID: the job file says so
    # (transport.ucx.gid_index: 0 in configs/test-ucx-rc.yaml).
    echo "=== ctest -L '$labels'"
    cd "$build"
    RIVET_JOB_KEEPALIVE=${RIVET_JOB_KEEPALIVE:-60} \
    RIVET_TEST_REQUIRE_RDMA=1 ctest -L "$labels" --no-tests=error \
        --repeat until-pass:2 --output-on-failure 2>&1 |
        tee check-verbs/ctest.log
    exit "${PIPESTATUS[0]}"
fi
if [ "${1:-}" = --in-hosts ]; then
    cd "$2"
    echo "=== ctest -L '$hosts_labels' (two hosts)"
    RIVET_JOB_KEEPALIVE=${RIVET_JOB_KEEPALIVE:-60} \
    RIVET_TEST_REQUIRE_RDMA=1 ctest -L "$hosts_labels" --no-tests=error \
        --repeat until-pass:2 --output-on-failure 2>&1 |
        tee check-verbs/ctest-hosts.log
    exit "${PIPESTATUS[0]}"
fi

# --- on the host ---------------------------------------------------------
t0=$(now)
build=${1:-build}
case $build in /*) ;; *) build=$top/$build ;; esac
if [ -f "$build/CMakeCache.txt" ]; then
    cmake --build "$build" -j "$(nproc)"
else
    echo "check-verbs: $build is not configured; building rivet (make build)"
    make -C "$top" build BUILD="$build"
fi
build=$(cd "$build" && pwd -P)
top=$(cd "$top" && pwd -P)

# The build's tests expect the guest's device by name (their job files and
# output checks name it): a build configured for another one cannot run
# there.
device=$(sed -n 's/^RIVET_TEST_RDMA_DEVICE:[A-Z]*=//p' "$build/CMakeCache.txt")
if [ "$device" != "$guest_device" ]; then
    echo "check-verbs: $build runs its RDMA tests on ${device:-no device}," \
         "the guest has $guest_device: configure a build with" \
         "-DRIVET_TEST_RDMA_DEVICE=$guest_device for it" >&2
    exit 1
fi
n=$(cd "$build" && ctest -N -L "$labels" | sed -n 's/^Total Tests: //p')
if [ "${n:-0}" -eq 0 ]; then
    echo "check-verbs: $build registers no test labelled $labels" \
         "(configured with BUILD_TESTING off?)" >&2
    exit 1
fi
echo "check-verbs: $n tests of $build to run in the guest"

"$here/rdma-vm.sh" image

mkdir -p "$build/check-verbs"
rm -f "$build/check-verbs/ctest.log"
shares=(--share "$top")
case $build/ in "$top"/*) ;; *) shares+=(--share "$build") ;; esac
rm -f "$build/check-verbs/ctest-hosts.log"
rc=0 rc2=0
"$here/rdma-vm.sh" run "${shares[@]}" -- \
    "$top/scripts/check-verbs.sh" --in-guest "$build" || rc=$?
cp "$build/Testing/Temporary/LastTest.log" \
    "$build/check-verbs/LastTest-one-host.log" 2> /dev/null || true
"$here/rdma-hosts.sh" "${shares[@]}" -- \
    "$top/scripts/check-verbs.sh" --in-hosts "$build" || rc2=$?
# ctest's own summaries are in the guests' output above; repeat them last,
# with the time, so the run ends on lines saying how it went.
echo "check-verbs: $(since "$t0") s in all (logs: $build/check-verbs/)"
summary() { # log what rc
    local sum failed total skipped
    sum=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' \
        "$1" 2> /dev/null | tail -1 || true)
    if [ -z "$sum" ]; then
        echo "check-verbs: $2: the tests did not run (exit status $3; see above)"
        return 1
    fi
    failed=$(echo "$sum" | sed -E 's/.*, ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
    total=$(echo "$sum" | sed -E 's/.* out of ([0-9]+).*/\1/')
    skipped=$(grep -c '(Skipped)$' "$1" || true)
    again=$(grep -cE 'Test +#[0-9]+: .*\*\*\*(Failed|Timeout)' "$1" || true)
    echo "check-verbs: $2: $((total - failed - skipped)) passed, $failed" \
         "failed, $skipped skipped; $again failed runs repeated (see the log)"
    [ "$3" -eq 0 ]
}
ok=0
summary "$build/check-verbs/ctest.log" "one host" $rc || ok=1
summary "$build/check-verbs/ctest-hosts.log" "two hosts" $rc2 || ok=1
exit $ok
