#!/usr/bin/env bash
# am.routing measured: Bale's histogram and index-gather kernels (rv-histo,
# rv-ig) at 2 to 32 workers across two hosts, under each routing, with
# the memory each worker's batches took.
#
#   bench/routing.sh [-w "2 4 8 16 32"] [-R "direct host twohop"]
#                    [-n UPDATES] [-r REPS] [-b BUILD_DIR] [-P PEERS_DIR]
#
# The two hosts are network namespaces made by scripts/multinode.sh (root;
# mpirun), half the processes on each; UCX shared memory within a host,
# TCP between them (configs/routing.yaml: am.aggregation trad). Workers W
# run as 2 processes of 1 thread (W = 2) or W/2 processes of 2 threads.
# This machine has 2 cores: past 2 workers every run is oversubscribed,
# the workers not pinned; an idle worker yields its core after a short
# spin (core's progress), which is what lets 32 of them share 2 cores.
# The rates are then rates of a shared machine, comparable between
# routings at the same size, not between sizes.
#
# Each kernel runs with RIVET_JOB_STATS=json: every worker reports the
# destinations its calls were batched for (batch_dests: those that had a
# batch buffer), the batch buffers it made (they are kept for reuse, so
# this is the most it held) and its answers' buffers; each process its
# peak resident memory (getrusage). Written, medians over REPS runs:
#   bench/results/routing.csv
#     routing,processes,threads,dest_buffers_per_worker,
#     buffer_bytes_per_worker,rss_kib,histo_rate_per_worker,
#     ig_rate_per_worker,machine_state
#   (memory columns: means over the workers or processes, the larger of
#   the two kernels'; rates in updates or requests per second per worker)
#   bench/results/routing-runs.csv, every run;
#   bench/results/routing-model.csv, memory per worker at 1,024 hosts x
#   32 workers under each routing, from the measured cost of one
#   destination (see the end of this script);
#   bench/results/routing.png.
set -uo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init routing
. "$here/machine-state.sh"
workers="2 4 8 16 32"
routings="direct host twohop"
n=200000
reps=3
peers=""
while getopts "w:R:n:r:b:P:h" o; do
  case $o in
    w) workers=$OPTARG ;;
    R) routings=$OPTARG ;;
    n) n=$OPTARG ;;
    r) reps=$OPTARG ;;
    b) build=$OPTARG ;;
    P) peers=$OPTARG ;;
    *) usage ;;
  esac
done
model=$results/routing-model.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_probe_init "$peers" "$tmp" || exit 1
probes=$tmp/probes.csv

echo "app,routing,processes,threads,rep,rate_per_worker,dest_buffers_per_worker,buffer_bytes_per_worker,rss_kib,status,machine_state" > "$runs"

# One run: prints its row of routing-runs.csv.
run_one() { # app routing processes threads rep
  local app=$1 routing=$2 np=$3 nt=$4 rep=$5 out=$tmp/out err=$tmp/err
  local before after state status=ok
  before=$(machine_probe "$probes" "$app,$routing,$np,$nt,$rep,before")
  RV_BENCH_RSS=1 RIVET_JOB_STATS=json RIVET_AM_ROUTING=$routing \
    RIVET_JOB_THREADS=$nt timeout 300 "$top/scripts/multinode.sh" \
    --timeout 280 -n "$np" -c "$top/configs/routing.yaml" \
    "$build/bin/rv-$app" -n "$n" > "$out" 2> "$err" || status=failed
  after=$(machine_probe "$probes" "$app,$routing,$np,$nt,$rep,after")
  state=$(machine_state_of "$before" "$after")
  local rate
  rate=$(sed -n 's/.*rate_per_worker=\([0-9.]*\).*/\1/p' "$out" | head -1)
  [ -n "$rate" ] || { status=failed; rate=0; }
  [ "$status" = ok ] || grep -E "FAILED|rror|rivetrun|mpirun" "$err" |
    head -3 >&2
  awk -v pre="$app,$routing,$np,$nt,$rep,$rate" -v st="$status" \
      -v ms="$state" '
    /"batch_dests":/ {
      s = $0; sub(/.*"batch_dests":/, "", s); split(s, a, /[,}]/); d += a[1]
      s = $0; sub(/.*"batch_buffer_bytes":/, "", s); split(s, a, /[,}]/)
      b += a[1]
      s = $0; sub(/.*"reply_buffer_bytes":/, "", s); split(s, a, /[,}]/)
      b += a[1]; nw++ }
    /rv-bale: rank .* rss_kib=/ {
      s = $0; sub(/.*rss_kib=/, "", s); r += s; np++ }
    END {
      printf "%s,%.2f,%.0f,%.0f,%s,%s\n", pre, nw ? d / nw : 0,
             nw ? b / nw : 0, np ? r / np : 0, st, ms }' "$err"
}

for w in $workers; do
  if [ "$w" -le 2 ]; then np=2; nt=1; else np=$((w / 2)); nt=2; fi
  for rep in $(seq "$reps"); do
    for routing in $routings; do
      for app in histo ig; do
        row=$(run_one "$app" "$routing" "$np" "$nt" "$rep")
        echo "$row" >> "$runs"
        echo "routing: $row"
      done
    done
  done
done

# Medians per (routing, shape); memory columns the larger kernel's.
awk -F, -v OFS=, '
  function median(list,   v, k, i, j, t) {
    k = split(list, v, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
      if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return k == 0 ? 0 : (k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2)
  }
  NR == 1 { next }
  $10 == "ok" {
    key = $2 OFS $3 OFS $4
    if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
    rate[key, $1] = rate[key, $1] " " $6
    dests[key, $1] = dests[key, $1] " " $7
    bytes[key, $1] = bytes[key, $1] " " $8
    rss[key, $1] = rss[key, $1] " " $9
    st[key] = st[key] == "" || st[key] == $11 ? $11 : "mixed"
  }
  END {
    print "routing,processes,threads,dest_buffers_per_worker,buffer_bytes_per_worker,rss_kib,histo_rate_per_worker,ig_rate_per_worker,machine_state"
    for (i = 1; i <= nk; i++) {
      k = order[i]
      d = median(dests[k, "histo"]); d2 = median(dests[k, "ig"])
      b = median(bytes[k, "histo"]); b2 = median(bytes[k, "ig"])
      r = median(rss[k, "histo"]); r2 = median(rss[k, "ig"])
      printf "%s,%.2f,%.0f,%.0f,%.0f,%.0f,%s\n", k, (d > d2 ? d : d2),
             (b > b2 ? b : b2), (r > r2 ? r : r2), median(rate[k, "histo"]),
             median(rate[k, "ig"]), st[k]
    }
  }' "$runs" > "$csv"
cat "$csv"

# The model at 1,024 hosts x 32 workers (N = 32,768), one process of 32
# threads per host. What a worker's batches hold grows with its
# destinations: D x (the bytes per destination measured under that
# routing at the largest size run: buffer_bytes / dest_buffers; a hop
# carries more calls at once than a plain destination). Destinations per
# worker:
#   direct  N - 32 (the workers of other processes; its own process's
#           it reaches by the local bypass, with no buffer);
#   host    1,023: one proxy per other host (its own host's workers are
#           in its process);
#   twohop  the 1,024 processes on a grid of C = 32 columns and 32
#           rows, each thread its own plane: C - 1 destinations in its
#           row and 31 in its column (62 in all).
# Beside the buffers, the invocation layer keeps 116 B per worker of the
# job whatever the routing (five pointer tables and an append cursor:
# 3.6 MiB at N = 32,768) and a 240-byte am_dest_t per destination; the
# transport's endpoints (all-to-all at job start) are not counted.
awk -F, -v OFS=, '
  NR > 1 && $2 * $3 >= big[$1] && $4 > 0 {
    big[$1] = $2 * $3; per[$1] = $5 / $4 }
  END {
    N = 32768; T = 32; H = 1024; C = 32
    print "routing,hosts,workers_per_host,dest_buffers_per_worker,bytes_per_dest_buffer,buffer_mib_per_worker,tables_mib_per_worker"
    d["direct"] = N - T; d["host"] = H - 1; d["twohop"] = (C - 1) + (H / C - 1)
    split("direct host twohop", names, " ")
    for (i = 1; i <= 3; i++) {
      r = names[i]
      printf "%s,%d,%d,%d,%.0f,%.1f,%.1f\n", r, H, T, d[r], per[r],
             d[r] * per[r] / 1048576, (116 * N + 240 * d[r]) / 1048576
    }
  }' "$csv" > "$model"
cat "$model"

command -v gnuplot > /dev/null || { echo "routing: no gnuplot, no plot"; exit 0; }
for r in $routings; do
  awk -F, -v r="$r" 'NR > 1 && $1 == r {
    printf "%d %.1f %.3f %.3f\n", $2 * $3, $5 / 1024, $7 / 1e6, $8 / 1e6 }' \
    "$csv" > "$tmp/$r.dat"
done
plots_mem="" plots_rate=""
for r in $routings; do
  plots_mem="$plots_mem \"$tmp/$r.dat\" using 1:2 with linespoints title \"$r\","
  plots_rate="$plots_rate \"$tmp/$r.dat\" using 1:3 with linespoints title \"$r histo\", \"$tmp/$r.dat\" using 1:4 with linespoints dt 2 title \"$r ig\","
done
gnuplot << GP
set terminal pngcairo size 1100,450
set output "$results/routing.png"
set multiplot layout 1,2 title "am.routing: rv-histo and rv-ig across two hosts (network namespaces), 2 cores, oversubscribed past 2 workers"
set logscale x 2
set xtics (2, 4, 8, 16, 32)
set xlabel "workers"
set ylabel "batch buffers per worker (KiB)"
set key top left
plot ${plots_mem%,}
set ylabel "rate per worker (M updates or requests / s)"
plot ${plots_rate%,}
unset multiplot
GP
echo "wrote $csv, $model and routing.png"
