#!/usr/bin/env bash
# Calls through the local bypass (rv-local-call): to oneself, and to the
# other thread of one process, beside the floor they are held to in the
# same run: a function call plus a queue append.
#
#   bench/local-call.sh [-r REPS] [-n CALLS] [-b BUILD_DIR] [-s]
#
# One process with two worker threads pinned to cores 0 and 1
# (configs/pingpong-shm.yaml, job.threads 2), CALLS (default 10,000,000)
# 8-byte calls per worker and target. Every run goes to
# bench/results/local-call-runs.csv, the medians to
# bench/results/local-call.csv with the columns
#   target,threads,rivet_ns,rivet_call_ns,baseline_ns,ratio
# (nanoseconds per call: rivet_ns from the first call until every call
# ran, rivet_call_ns the caller's loop alone, baseline_ns the function
# call plus queue append; ratio = rivet_ns / baseline_ns, the median of
# the per-run ratios). With -s, it only summarizes an earlier runs file.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init local-call
reps=5
calls=10000000
summary_only=0
while getopts "r:n:b:sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    n) calls=$OPTARG ;;
    b) build=$OPTARG ;;
    s) summary_only=1 ;;
    *) usage ;;
  esac
done


if [ $summary_only -eq 0 ]; then
  [ -x "$build/bin/rv-local-call" ] || fail "$build/bin/rv-local-call not built"
  echo "rep,target,threads,rivet_ns,rivet_call_ns,baseline_ns,ratio" > "$runs"
  for rep in $(seq 1 "$reps"); do
    out=$(RIVET_JOB_THREADS=2 timeout 300 "$build/bin/rivetrun" --timeout 280 \
          -n 1 -c "$top/configs/pingpong-shm.yaml" \
          "$build/bin/rv-local-call" -n "$calls" --csv 2>&1) ||
      { echo "$out" | tail -20 >&2; fail "run $rep failed"; }
    rows=$(echo "$out" | grep -E '^(self|other),')
    [ "$(echo "$rows" | wc -l)" -eq 2 ] || { echo "$out" >&2; fail "no result"; }
    echo "$rows" | sed "s/^/$rep,/" >> "$runs"
    echo "$rows" | sed "s/^/  repetition $rep: /"
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

{
  echo "target,threads,rivet_ns,rivet_call_ns,baseline_ns,ratio"
  tail -n +2 "$runs" | awk -F, "$median_awk"'
    {
      k = $2 "," $3
      if (!(k in r)) order[++nk] = k
      r[k] = r[k] " " $4; c[k] = c[k] " " $5; b[k] = b[k] " " $6
      q[k] = q[k] " " $7
    }
    END {
      for (i = 1; i <= nk; i++) {
        k = order[i]
        printf "%s,%.2f,%.2f,%.2f,%.3f\n", k, median(r[k]), median(c[k]),
               median(b[k]), median(q[k])
      }
    }'
} > "$csv"

echo
echo "ns per call (medians): rivet, end to end and the caller alone; a function call plus a queue append; ratio"
awk -F, 'NR > 1 {
  printf "  %-5s %d threads  rivet %6.2f ns (calls %6.2f ns)  baseline %6.2f ns  ratio %.2f\n",
    $1, $2, $3, $4, $5, $6
}' "$csv"
