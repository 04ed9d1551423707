#!/usr/bin/env bash
# Runs a test that depends on the machine's RDMA devices, or reports it
# skipped to ctest (exit status 77, the SKIP_RETURN_CODE of such tests)
# when the machine cannot run it, saying why.
#
#   rdma_device.sh DEVICE -- CMD ARGS...   CMD needs the device DEVICE
#   rdma_device.sh --none -- CMD ARGS...   CMD needs a machine without any
#
# With RIVET_TEST_REQUIRE_RDMA=1 (make check-verbs sets it in its guest), a
# missing DEVICE is a failure, not a skip: there the device is the point of
# the run, and a run that skipped every test must not look green.
set -uo pipefail
readonly SKIP=77
readonly SYSFS=/sys/class/infiniband

if [ $# -lt 3 ] || [ "$2" != -- ]; then
    echo "usage: rdma_device.sh DEVICE|--none -- CMD ARGS..." >&2
    exit 2
fi
want=$1
shift 2

if [ "$want" = --none ]; then
    devices=$(ls "$SYSFS" 2> /dev/null | tr '\n' ' ')
    if [ -n "$devices" ]; then
        echo "skipped: this machine has RDMA devices ($devices), the test needs none"
        exit $SKIP
    fi
elif [ ! -e "$SYSFS/$want" ]; then
    if [ "${RIVET_TEST_REQUIRE_RDMA:-0}" = 1 ]; then
        echo "rdma_device.sh: no RDMA device $want ($SYSFS/$want), which this run requires" >&2
        exit 1
    fi
    echo "skipped: no RDMA device $want ($SYSFS/$want); configure with" \
         "-DRIVET_TEST_RDMA_DEVICE=NAME to use another"
    exit $SKIP
fi
exec "$@"
