#!/usr/bin/env bash
# The progress engine's modes measured as Endo and Taura measure software
# offloading (round-trip latency, injection overhead, message rate with a
# window of 256 per requester, idle CPU), every mode in the same run:
#   inline   a transport worker per worker thread (rivet's default)
#   direct   the requesters share one transport worker under a lock (the
#            paper's direct injection)
#   thread   one spinning executor per process posts the requesters'
#            commands (static offloading)
#   dynamic  as thread, the executor sleeps when idle (dynamic offloading)
# and, beside them, the baseline UCX's users reach for first:
#   ucx-multi  plain UCX (bench/ucx_mt_get.c), the requesters sharing one
#            UCP worker of UCS_THREAD_MODE_MULTI, locked by UCX itself
#            (round trip and message rate; no idle figure)
#
#   bench/offload.sh [-r REPS] [-t SECS] [-q "1 2 4 8"] [-b BUILD_DIR]
#                    [-n NAME] [-m] [-p]
#
#   -n  the results' name (default offload): NAME.csv, NAME-runs.csv, ...
#   -m  label the run with the machine: every CSV line ends with a column
#       machine ("N cores, CPU model", from nproc and /proc/cpuinfo), for
#       runs on a machine other than the usual 2-core one
#   -p  no runs: the medians, the summary and the PNGs from the runs
#       already written (a run on a machine without gnuplot, or one cut
#       short, finished here)
#
# Writes bench/results/offload.csv with the columns
#   mode,executors,requesters,size,metric,value
# (metric rtt_us, inject_us, msg_rate_mps, idle_cpu_pct; medians over REPS
# runs), every run to bench/results/offload-runs.csv, and PNGs
# offload-rtt.png, offload-inject.png, offload-rate.png, offload-idle.png.
# Thread and dynamic modes run a second time with a completer thread beside
# each executor (progress.completers: threads): both runs go to
# bench/results/offload-completers.csv, with the columns
#   mode,completers,requesters,size,metric,value
# (completers executors or threads), and the summary compares them.
# This machine has 2 cores: with 2 processes, every run of an offloading
# mode (a requester and an executor per process, at least) is
# oversubscribed; the summary says so.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init offload
reps=3
secs=1
requesters="1 2 4 8"
outname=offload
label=0
plot_only=0
while getopts "r:t:q:b:n:mph" o; do
  case $o in
    r) reps=$OPTARG ;;
    t) secs=$OPTARG ;;
    q) requesters=$OPTARG ;;
    b) build=$OPTARG ;;
    n) outname=$OPTARG ;;
    m) label=1 ;;
    p) plot_only=1 ;;
    *) usage ;;
  esac
done
runs=$results/$outname-runs.csv
csv=$results/$outname.csv
cruns=$results/$outname-completers-runs.csv
ccsv=$results/$outname-completers.csv
cores=$(nproc)
modes="inline direct thread dynamic"
prog=$build/bin/rv-offload
base=$build/bin/ucx-mt-get
for p in "$prog" "$base"; do
  [ $plot_only -eq 1 ] || [ -x "$p" ] ||
    { echo "offload: build first ($p missing)" >&2; exit 1; }
done

# One job: mode, requesters, progress.completers; prints the
# program's "metric,size,value" rows.
run_job() {
  local mode=$1 q=$2 completers=$3 rtt=""
  [ "$q" = 1 ] && rtt=--rtt
  RIVET_PROGRESS_MODE=$mode RIVET_JOB_THREADS=$q RIVET_PROGRESS_EXECUTORS=1 \
    RIVET_PROGRESS_COMPLETERS=$completers \
    timeout 120 "$build/bin/rivetrun" -c "$top/configs/offload.yaml" "$prog" \
    -t "$secs" $rtt | grep -E '^[a-z_]+,[0-9]+,' ||
    { echo "offload: $mode x$q ($completers as completers) failed" >&2; exit 1; }
}

# The baseline with q requesters: the two processes meet in a temporary
# folder; the transports of configs/offload.yaml (sm,self), unpinned as
# its placement (none) leaves rivet's.
run_base() {
  local q=$1 rtt="" d
  [ "$q" = 1 ] && rtt=--rtt
  d=$(mktemp -d)
  UCX_TLS=sm,self timeout 120 "$base" -r 1 -d "$d" &
  local server=$!
  UCX_TLS=sm,self timeout 120 "$base" -r 0 -d "$d" -q "$q" -t "$secs" $rtt ||
    { echo "offload: ucx-multi x$q failed" >&2; kill "$server"; exit 1; }
  wait "$server"
  rm -rf "$d"
}

if [ $plot_only -eq 0 ]; then
# The machine, on every line of a labelled run's CSVs (written line by
# line, so that a run cut short keeps its label).
hl="" lab=""
if [ $label -eq 1 ]; then
  model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo | tr -d ,)
  hl=",machine" lab=",$cores cores ${model:-unknown CPU}"
fi
echo "rep,mode,executors,requesters,size,metric,value$hl" >"$runs"
echo "rep,mode,completers,requesters,size,metric,value$hl" >"$cruns"
for rep in $(seq 1 "$reps"); do
  for q in $requesters; do
    for mode in $modes; do
      out=$(run_job "$mode" "$q" executors)
      k=1; [ "$mode" = inline ] && k=$q
      printf '%s\n' "$out" |
        awk -F, -v l="$lab" -v r="$rep" -v m="$mode" -v k="$k" -v q="$q" \
          '{print r "," m "," k "," q "," $2 "," $1 "," $3 l}' >>"$runs"
      case $mode in thread|dynamic) ;; *) continue ;; esac
      # The same mode with separate completer threads, beside it.
      printf '%s\n' "$out" |
        awk -F, -v l="$lab" -v r="$rep" -v m="$mode" -v q="$q" \
          '{print r "," m ",executors," q "," $2 "," $1 "," $3 l}' >>"$cruns"
      run_job "$mode" "$q" threads |
        awk -F, -v l="$lab" -v r="$rep" -v m="$mode" -v q="$q" \
          '{print r "," m ",threads," q "," $2 "," $1 "," $3 l}' >>"$cruns"
    done
    run_base "$q" |
      awk -F, -v l="$lab" -v r="$rep" -v q="$q" \
        '{print r ",ucx-multi,1," q "," $2 "," $1 "," $3 l}' >>"$runs"
  done
done

fi # plot_only

# Medians over the repetitions (of the runs written so far, with -p), the
# machine's label kept where the runs have one.
medians() { # runs-file header out-file
  local head=$2
  head -1 "$1" | grep -q ',machine$' && head="$head,machine"
  echo "$head" >"$3"
  tail -n +2 "$1" | awk -F, "$median_awk"'{k=$2","$3","$4","$5","$6; v[k]=v[k]" "$7
    if (NF >= 8) lab[k]="," $8
    if (!(k in seen)) { seen[k]=1; order[n++]=k } }
    END { for (i = 0; i < n; i++) print order[i] "," median(v[order[i]]) lab[order[i]] }' >>"$3"
}
medians "$runs" "mode,executors,requesters,size,metric,value" "$csv"
medians "$cruns" "mode,completers,requesters,size,metric,value" "$ccsv"
# A labelled run's cores are the machine's it ran on, also with -p.
lc=$(awk -F, 'NR == 2 && NF >= 7 {print $7 + 0}' "$csv")
[ -n "$lc" ] && [ "$lc" -gt 0 ] && cores=$lc

get() { # mode [completers] requesters size metric [file]
  if [ $# -ge 5 ]; then
    awk -F, -v m="$1" -v c="$2" -v q="$3" -v s="$4" -v x="$5" \
      '$1==m && $2==c && $3==q && $4==s && $5==x {print $6}' "$6"
  else
    awk -F, -v m="$1" -v q="$2" -v s="$3" -v x="$4" \
      '$1==m && $3==q && $4==s && $5==x {print $6}' "$csv"
  fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }

echo
echo "progress engine (UCX shm, 2 processes, $cores cores: a run of q requesters has 2 x (q + 1)"
echo "threads, 2 x (q + 2) with completer threads; past $cores it is oversubscribed)"
printf '%-9s %12s %12s %12s %12s\n' mode "rtt 8B us" "rate@4 M/s" "inject@4 us" "idle cpu %"
for m in $modes ucx-multi; do
  printf '%-9s %12s %12s %12s %12s\n' "$m" "$(get $m 1 8 rtt_us)" \
    "$(get $m 4 8 msg_rate_mps)" "$(get $m 4 8 inject_us)" "$(get $m 1 0 idle_cpu_pct)"
done
echo
echo "message rate (8-byte reads, million/s) by requester threads"
qs=$(awk -F, 'NR > 1 {print $3}' "$csv" | sort -nu)
printf '%-9s' mode; for q in $qs; do printf ' %8s' "q=$q"; done; echo
for m in $modes ucx-multi; do
  printf '%-9s' "$m"; for q in $qs; do printf ' %8s' "$(get $m $q 8 msg_rate_mps)"; done; echo
done
echo
echo "targets (same run):"
echo "  dynamic / direct message rate at 4 requesters: $(ratio "$(get dynamic 4 8 msg_rate_mps)" "$(get direct 4 8 msg_rate_mps)") (target >= 3)"
echo "  dynamic / inline round trip at 8 B:            $(ratio "$(get dynamic 1 8 rtt_us)" "$(get inline 1 8 rtt_us)") (target <= 1.5)"
echo "  dynamic / ucx-multi message rate at 4 requesters: $(ratio "$(get dynamic 4 8 msg_rate_mps)" "$(get ucx-multi 4 8 msg_rate_mps)")"
echo "  direct / ucx-multi message rate at 4 requesters:  $(ratio "$(get direct 4 8 msg_rate_mps)" "$(get ucx-multi 4 8 msg_rate_mps)") (rivet's lock against UCX's)"
echo "  dynamic idle CPU: $(get dynamic 1 0 idle_cpu_pct) % of a core (target < 2); thread: $(get thread 1 0 idle_cpu_pct) %"

echo
echo "completers: each executor polling its own worker, or a completer thread beside it (same run)"
printf '%-8s %-10s %12s %12s %12s %12s\n' mode completers "rtt 8B us" "rate@2 M/s" "rate@4 M/s" "idle cpu %"
for m in thread dynamic; do
  for c in executors threads; do
    printf '%-8s %-10s %12s %12s %12s %12s\n' "$m" "$c" "$(get $m $c 1 8 rtt_us "$ccsv")" \
      "$(get $m $c 2 8 msg_rate_mps "$ccsv")" "$(get $m $c 4 8 msg_rate_mps "$ccsv")" \
      "$(get $m $c 1 0 idle_cpu_pct "$ccsv")"
  done
done

command -v gnuplot >/dev/null || { echo "offload: no gnuplot, no plots"; exit 0; }
plot() { # name title ylabel xlabel metric x(size|requesters) axis-settings [jitter]
  local name=$1 what=$2 ylab=$3 xlab=$4 metric=$5 xcol=$6 logx=$7 jitter=${8:-0}
  local data=$results/.$outname-$name.dat
  : >"$data"
  for m in $modes ucx-multi; do
    echo "# $m" >>"$data"
    if [ "$xcol" = size ]; then
      awk -F, -v m="$m" -v x="$metric" '$1==m && $3==1 && $5==x {print $4, $6}' "$csv" | sort -n >>"$data"
    else
      awk -F, -v m="$m" -v x="$metric" '$1==m && $5==x {print $3, $6}' "$csv" | sort -n >>"$data"
    fi
    printf '\n\n' >>"$data"
  done
  # jitter: each mode's points moved sideways by a few percent of x, so
  # that equal values (every polling mode at 100 % of a core) stay visible.
  gnuplot <<GP
set terminal pngcairo size 900,560
set output "$results/$outname-$name.png"
set title "$what\nrivet's progress modes and plain UCX (ucx-multi), UCX shm, 2 processes${machine:+, $machine}" noenhanced
set xlabel "$xlab"; set ylabel "$ylab"; set grid
set key outside right top
set offsets graph 0.03, graph 0.03, 0, 0
$logx
plot for [i=0:4] "$data" index i using (\$1 * (1 + $jitter * (i - 2))):2 with linespoints lw 2 ps 1.5 pt int(i + 4) dt int(i + 1) title word("$modes ucx-multi", i+1)
GP
  rm -f "$data"
}
# A labelled run names its machine in each plot's title.
machine=$(awk -F, 'NR == 2 && NF >= 7 {print $7}' "$csv")
plot rtt "Round trip of a remote read, by size (one requester)" \
  "round trip (us)" "message size" rtt_us size \
  'set logscale x 2; set xtics ("8 B" 8, "64 B" 64, "512 B" 512, "4 KiB" 4096, "32 KiB" 32768, "64 KiB" 65536)'
# The requester counts of the run, from the CSV.
xt="set xtics ($(awk -F, 'NR > 1 {print $3}' "$csv" | sort -nu | paste -sd,))"
plot inject "Time a requester spends posting a read" \
  "time in the post call (us)" "requester threads" inject_us requesters "$xt"
plot rate "Message rate of 8-byte reads" "8-byte reads (million/s)" \
  "requester threads (window 256 each)" msg_rate_mps requesters "$xt; set logscale y"
plot idle "CPU a process uses while idle (lines offset sideways so equal values stay visible)" \
  "CPU over an idle second (% of a core)" "requester threads" idle_cpu_pct \
  requesters "$xt; set yrange [-5:105]" 0.03
echo "wrote $csv and $outname-*.png"
