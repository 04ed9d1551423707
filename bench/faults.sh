#!/usr/bin/env bash
# The fault table: every scenario of tests/faults over every transport the
# build can run, through ctest, into bench/results/faults.csv:
#   scenario,transport,end_s,exit,named,left,result
# end_s: seconds from the fault (or the signal to rivetrun) to the end of
# the job (for sigkill-rivetrun: to the last process of the job gone);
# transport: the configuration, "-mpirun" added when mpirun launched it
# (ucx-hosts: two hosts, scripts/multinode.sh, under mpirun, and
# ucx-hosts-srun under Slurm's srun; skipped where namespaces cannot be
# made);
# named: the launcher's line naming the rank, or its signal; left: what the
# job left behind ("nothing"); result: ctest's verdict.
#
#   bench/faults.sh [-B BUILD] [-o CSV]
# Over verbs, only where the build's RDMA device exists (else those rows
# say "skipped"): make check-verbs runs the same tests in its guest.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init faults
out=$here/results/faults.csv
while getopts B:o:h opt; do
  case $opt in
    B) build=$OPTARG ;;
    o) out=$OPTARG ;;
    *) usage ;;
  esac
done
[ -f "$build/CTestTestfile.cmake" ] ||
  fail "$build is not a configured build (make build)"
cmake --build "$build" -j "$(nproc)" > /dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(cd "$build" && ctest -R '^faults-' -V > "$log" 2>&1) || true

# ctest -V prefixes a test's output with its number; "Start N: NAME" and
# "N/M Test #N: NAME ... Passed" tie the number to the name and verdict.
{
  echo "scenario,transport,end_s,exit,named,left,result"
  awk '
    match($0, /Start +[0-9]+: faults-/) {
      split($0, a, /Start +/); split(a[2], b, ": "); name[b[1]] = b[2]
    }
    match($0, /^[0-9]+: faults-summary: /) {
      n = substr($0, 1, index($0, ":") - 1)
      summary[n] = substr($0, RLENGTH + 1)
    }
    match($0, /Test +#[0-9]+: faults-/) {
      s = $0; sub(/.*Test +#/, "", s); n = s; sub(/:.*/, "", n)
      v = s; sub(/.*\.\.\. */, "", v); sub(/ .*/, "", v)
      sub(/^\*+/, "", v); verdict[n] = v
    }
    END {
      for (n in name) {
        t = name[n]; sub(/^faults-/, "", t)
        if (match(t, /-(ucx-shm|ucx-tcp|ucx-hosts|verbs)(-mpirun|-srun)?$/)) {
          tp = substr(t, RSTART + 1); sc = substr(t, 1, RSTART - 1)
        }
        split(summary[n], f, ",")
        printf "%s,%s,%s,%s,%s,%s,%s\n", sc, tp, f[2], f[3], f[4], f[5],
          verdict[n] == "" ? "not run" : verdict[n]
      }
    }' "$log" | sort -t, -k2,2 -k1,1
} > "$out"
echo "$0: wrote $out"
column -s, -t < "$out"
