#!/usr/bin/env bash
# am.intranode measured across two hosts: Bale's histogram and
# index-gather kernels (rv-histo, rv-ig) with the calls between processes
# of one host sent as the job's am.path says (transport: UCX's active
# messages over shared memory) or written into rings in the memory those
# processes map (mapped); calls to the other host go over TCP either way.
#
#   bench/intranode.sh [-n PROCESSES] [-t THREADS] [-u UPDATES] [-r REPS]
#                      [-b BUILD_DIR] [-P PEERS_DIR]
#
# The two hosts are network namespaces made by scripts/multinode.sh (root;
# mpirun), half the processes on each (default 4 processes of 1 thread: 2
# per host, the cores of this machine); configs/routing.yaml (am.path
# send, am.aggregation trad). The two settings alternate within each
# repetition, so that both see the same machine; -P PEERS_DIR (or
# $PEERS_DIR), the folder holding c2c-probe.c, labels each run with the
# machine's state (bench/machine-state.sh). Written:
#   bench/results/intranode-runs.csv, every run:
#     app,intranode,processes,threads,rep,rate_per_worker,status,
#     machine_state
#   bench/results/intranode.csv, medians over REPS runs:
#     app,processes,threads,transport_rate_per_worker,
#     mapped_rate_per_worker,ratio,machine_state
#   (rates in updates or requests per second per worker; ratio: mapped
#   over transport)
#   bench/results/intranode.png.
set -uo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init intranode
. "$here/machine-state.sh"
np=4
nt=1
n=10000000
reps=7
peers=${PEERS_DIR:-}
while getopts "n:t:u:r:b:P:h" o; do
  case $o in
    n) np=$OPTARG ;;
    t) nt=$OPTARG ;;
    u) n=$OPTARG ;;
    r) reps=$OPTARG ;;
    b) build=$(bench_abs "$OPTARG") ;;
    P) peers=$OPTARG ;;
    *) usage ;;
  esac
done
[ -x "$build/bin/rv-histo" ] || fail "no $build/bin/rv-histo: build first"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_probe_init "$peers" "$tmp" || exit 1
probes=$tmp/probes.csv

echo "app,intranode,processes,threads,rep,rate_per_worker,status,machine_state" > "$runs"

# One run: prints its row of intranode-runs.csv.
run_one() { # app intranode rep
  local app=$1 mode=$2 rep=$3 out=$tmp/out err=$tmp/err status=ok
  local before after rate
  before=$(machine_probe "$probes" "$app,$mode,$rep,before")
  RIVET_AM_INTRANODE=$mode RIVET_JOB_THREADS=$nt timeout 300 \
    "$top/scripts/multinode.sh" --timeout 280 -n "$np" \
    -c "$top/configs/routing.yaml" "$build/bin/rv-$app" -n "$n" \
    > "$out" 2> "$err" || status=failed
  after=$(machine_probe "$probes" "$app,$mode,$rep,after")
  rate=$(sed -n 's/.*rate_per_worker=\([0-9.]*\).*/\1/p' "$out" | head -1)
  [ -n "$rate" ] || { status=failed; rate=0; }
  [ "$status" = ok ] || grep -E "FAILED|rror|mpirun" "$err" | head -3 >&2
  echo "$app,$mode,$np,$nt,$rep,$rate,$status,$(machine_state_of "$before" "$after")"
}

for rep in $(seq "$reps"); do
  for app in histo ig; do
    # Alternate which setting goes first.
    modes="transport mapped"
    [ $((rep % 2)) -eq 0 ] && modes="mapped transport"
    for mode in $modes; do
      row=$(run_one "$app" "$mode" "$rep")
      echo "$row" >> "$runs"
      echo "intranode: $row"
    done
  done
done

awk -F, -v OFS=, "$median_awk"'
  NR == 1 { next }
  $7 == "ok" {
    key = $1 OFS $3 OFS $4
    if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
    rate[key, $2] = rate[key, $2] " " $6
    st[key] = st[key] == "" || st[key] == $8 ? $8 : "mixed"
  }
  END {
    print "app,processes,threads,transport_rate_per_worker,mapped_rate_per_worker,ratio,machine_state"
    for (i = 1; i <= nk; i++) {
      k = order[i]
      t = median(rate[k, "transport"]); m = median(rate[k, "mapped"])
      printf "%s,%.0f,%.0f,%.2f,%s\n", k, t, m, (t > 0 ? m / t : 0), st[k]
    }
  }' "$runs" > "$csv"
cat "$csv"

gnuplot <<EOF || echo "intranode: no plot (gnuplot failed)" >&2
set terminal pngcairo size 800,500
set output "$png"
set datafile separator ","
set title "am.intranode across two hosts ($np processes of $nt thread(s))"
set ylabel "million updates or requests per second per worker"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top right
set yrange [0:*]
plot "$csv" every ::1 using (\$4/1e6):xtic(1) title "transport (UCX active messages)", \
     "" every ::1 using (\$5/1e6) title "mapped (rings in mapped memory)"
EOF
