#!/usr/bin/env bash
# Rollouts per second of the distributed tree search on 11x11 Hex (Seriema,
# section 5.3.3 and its Fig. 3), for the configurations that fit this
# machine, beside a plain sequential UCT with the same playouts and no
# rivet calls (rivet-mcts --uct) in the same run, and the game's random
# playout alone (rivet-mcts --playouts) at 11x11 and 7x7.
#
#   bench/mcts-scaling.sh [-r REPS] [-n ROLLOUTS] [-p PLAYOUTS] [-b BUILD_DIR]
#                         [-P PEERS_DIR] [-s]
#
# Each configuration analyses the empty 11x11 board with ROLLOUTS rollouts
# (default 100,000; mcts.simulations_per_leaf 16, so 16 playouts each),
# REPS times (default 5), the configurations interleaved. Configurations:
# 1 worker (the framework), 1 process x 2 threads and 2 processes x 1
# thread, under trad and ovfl aggregation, with mcts.owner random and
# hash, mcts.remote_only off and on; and the sequential UCT. Every
# worker is pinned to a core of its own (job.placement core).
# Every run goes to bench/results/mcts-scaling-runs.csv, the medians to
# bench/results/mcts-scaling.csv with the columns
#   config,aggregation,owner,remote_only,workers,rollouts_per_s,speedup_vs_uct,speedup_vs_1worker,states,machine
# (config: PxT, or uct for the baseline; the speed-ups are the median's
# over the sequential UCT's, the headline, and over one framework
# worker's (1x1 trad random); states counts the repetitions' machine
# states; machine is lscpu's model name), and a plot to
# bench/results/mcts-scaling.png. In each repetition, after the
# configurations, PLAYOUTS (default 1,000,000) random playouts of the
# empty board in one pinned worker at 11x11 and 7x7 (rivet-mcts
# --playouts): every run to bench/results/mcts-playouts-runs.csv, the
# medians to bench/results/mcts-playouts.csv with the columns
#   size,playouts,playouts_per_s,states,machine
# -P PEERS_DIR (or $PEERS_DIR): the folder holding the machine-state probe
# c2c-probe.c, run before and after each repetition (bench/machine-state.sh;
# its figures to bench/results/mcts-scaling-state.csv); without it the
# state is "unprobed". With -s it only summarizes earlier runs files.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init mcts-scaling
. "$here/machine-state.sh"
reps=5
rollouts=100000
playouts=1000000
peers=${PEERS_DIR:-}
summary_only=0
while getopts "r:n:p:b:P:sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    n) rollouts=$OPTARG ;;
    p) playouts=$OPTARG ;;
    b) build=$OPTARG ;;
    P) peers=$OPTARG ;;
    s) summary_only=1 ;;
    *) usage ;;
  esac
done

pruns=$results/mcts-playouts-runs.csv
pcsv=$results/mcts-playouts.csv
states=$results/mcts-scaling-state.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# config aggregation owner remote_only processes threads
configs="uct trad random false 1 1
1x1 trad random false 1 1
1x2 trad random false 1 2
1x2 trad random true 1 2
2x1 trad random false 2 1
2x1 trad random true 2 1
1x2 ovfl random false 1 2
2x1 ovfl random false 2 1
1x2 trad hash false 1 2
2x1 trad hash false 2 1
2x1 ovfl hash false 2 1"

run_one() {
  local config=$1 agg=$2 owner=$3 remote=$4 np=$5 nt=$6 extra=""
  [ "$config" = uct ] && extra=--uct
  RIVET_JOB_PROCESSES=$np RIVET_JOB_THREADS=$nt RIVET_AM_AGGREGATION=$agg \
  RIVET_MCTS_OWNER=$owner RIVET_MCTS_REMOTE_ONLY=$remote \
  RIVET_MCTS_SIMULATIONS_PER_LEAF=16 \
    timeout 300 "$build/bin/rivetrun" --timeout 280 \
    -c "$top/configs/mcts.yaml" "$build/bin/rivet-mcts" --size 11 \
    --rollouts "$rollouts" $extra 2>&1
}

# playout_rate SIZE -> the game's random playout alone, per second
playout_rate() {
  RIVET_JOB_PROCESSES=1 RIVET_JOB_THREADS=1 \
    timeout 300 "$build/bin/rivetrun" --timeout 280 \
    -c "$top/configs/mcts.yaml" "$build/bin/rivet-mcts" --size "$1" \
    --playouts "$playouts" 2>&1
}

if [ $summary_only -eq 0 ]; then
  [ -x "$build/bin/rivet-mcts" ] || fail "$build/bin/rivet-mcts not built"
  machine_probe_init "$peers" "$tmp" || exit 1
  machine=$(machine_model)
  echo "rep,config,aggregation,owner,remote_only,workers,rollouts_per_s,state,machine" > "$runs"
  echo "rep,size,playouts,playouts_per_s,state,machine" > "$pruns"
  echo "rep,when,$machine_state_header" > "$states"
  for rep in $(seq 1 "$reps"); do
    s0=$(machine_probe "$states" "$rep,before")
    : > "$tmp/runs"
    : > "$tmp/pruns"
    while read -r config agg owner remote np nt; do
      out=$(run_one "$config" "$agg" "$owner" "$remote" "$np" "$nt") ||
        { echo "$out" | tail -20 >&2; fail "$config $agg $owner failed"; }
      rate=$(echo "$out" | sed -n 's/.* s: \([0-9]*\) rollouts\/s.*/\1/p')
      [ -n "$rate" ] || { echo "$out" >&2; fail "no rate from $config"; }
      echo "$rep,$config,$agg,$owner,$remote,$((np * nt)),$rate" >> "$tmp/runs"
      printf "  repetition %d: %-4s %-4s %-6s remote_only %-5s %8d rollouts/s\n" \
        "$rep" "$config" "$agg" "$owner" "$remote" "$rate"
    done <<< "$configs"
    for size in 11 7; do
      out=$(playout_rate "$size") ||
        { echo "$out" | tail -20 >&2; fail "playouts at ${size}x$size failed"; }
      rate=$(echo "$out" | sed -n 's/.* s: \([0-9]*\) playouts\/s.*/\1/p')
      [ -n "$rate" ] || { echo "$out" >&2; fail "no playout rate at $size"; }
      echo "$rep,$size,$playouts,$rate" >> "$tmp/pruns"
      printf "  repetition %d: playouts alone, %sx%s %10d playouts/s\n" \
        "$rep" "$size" "$size" "$rate"
    done
    st=$(machine_state_of "$s0" "$(machine_probe "$states" "$rep,after")")
    echo "  repetition $rep: machine state $st"
    awk -v s=",$st,$machine" '{ print $0 s }' "$tmp/runs" >> "$runs"
    awk -v s=",$st,$machine" '{ print $0 s }' "$tmp/pruns" >> "$pruns"
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

# medians NKEY VALUE RUNS -> per key (columns 2 .. NKEY + 1, in first-seen
# order): the key, the median of column VALUE, the count of each machine
# state (column VALUE + 1; "unprobed" when absent) and the machine
# (column VALUE + 2).
medians() {
  tail -n +2 "$3" | awk -F, -v nk="$1" -v vc="$2" "$median_awk"'
    {
      k = $2; for (i = 3; i <= nk + 1; i++) k = k "," $i
      if (!(k in r)) order[++n] = k
      r[k] = r[k] " " $vc
      st = $(vc + 1) == "" ? "unprobed" : $(vc + 1)
      if (!((k, st) in cnt)) sts[k] = sts[k] " " st
      cnt[k, st]++
      m[k] = $(vc + 2) == "" ? "unknown" : $(vc + 2)
    }
    END {
      for (i = 1; i <= n; i++) {
        k = order[i]; split(substr(sts[k], 2), a, " "); s = ""
        for (j = 1; j in a; j++) s = s (j > 1 ? " " : "") a[j] ":" cnt[k, a[j]]
        printf "%s,%.0f,%s,%s\n", k, median(r[k]), s, m[k]
      }
    }'
}

# The speed-ups beside each median: over the sequential UCT's and over
# one framework worker's.
medians 5 7 "$runs" | awk -F, -v OFS=, '
  { row[NR] = $0; rate[NR] = $6
    if ($1 == "uct") uct = $6
    if ($1 == "1x1" && $2 == "trad" && $3 == "random" && $4 == "false") one = $6 }
  END {
    print "config,aggregation,owner,remote_only,workers,rollouts_per_s,speedup_vs_uct,speedup_vs_1worker,states,machine"
    for (i = 1; i <= NR; i++) {
      split(row[i], f, ",")
      printf "%s,%s,%s,%s,%s,%s,%.2f,%.2f,%s,%s\n", f[1], f[2], f[3], f[4],
        f[5], f[6], (uct > 0 ? rate[i] / uct : 0), (one > 0 ? rate[i] / one : 0),
        f[7], f[8]
    }
  }' > "$csv"
if [ -s "$pruns" ]; then
  { echo "size,playouts,playouts_per_s,states,machine"
    medians 2 4 "$pruns"; } > "$pcsv"
fi

rate() { # config aggregation owner remote_only
  awk -F, -v c="$1" -v a="$2" -v o="$3" -v r="$4" \
    '$1 == c && $2 == a && $3 == o && $4 == r { print $6 }' "$csv"
}
speedup() { # config aggregation owner remote_only -> over UCT, over 1 worker
  awk -F, -v c="$1" -v a="$2" -v o="$3" -v r="$4" \
    '$1 == c && $2 == a && $3 == o && $4 == r { print $7, $8 }' "$csv"
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.2f", (y > 0 ? x / y : 0) }'; }

echo
nreps=$(awk -F, 'NR > 1 && $1 + 0 > m { m = $1 + 0 } END { print m + 0 }' "$runs")
echo "rollouts/s on 11x11 Hex, 16 playouts per leaf (medians of $nreps;" \
     "$(awk -F, 'NR == 2 { print $10 }' "$csv")):"
awk -F, 'NR > 1 { printf "  %-4s %-4s %-6s remote_only %-5s %8d rollouts/s  %5.2f x UCT  %5.2f x 1 worker  (%s)\n", $1, $2, $3, $4, $6, $7, $8, $9 }' "$csv"
if [ -s "$pcsv" ]; then
  echo "the random playout alone, one core:"
  awk -F, 'NR > 1 { printf "  %sx%s: %d playouts/s (%s)\n", $1, $1, $3, $4 }' "$pcsv"
fi
echo
echo "speed-up of 2 workers over the sequential UCT (the headline), and" \
     "over 1 framework worker beside it:"
for c in 1x2 2x1; do
  read -r vs_uct vs_one <<< "$(speedup $c trad random false)"
  echo "  $c trad random: $vs_uct x UCT; $vs_one x 1 worker (target: x 1 worker >= 1.8)"
done
echo "other targets (ratios in this run):"
for c in 1x2 2x1; do
  echo "  remote_only on / off ($c): $(ratio "$(rate $c trad random true)" \
    "$(rate $c trad random false)") (target >= 0.90)"
done
echo "  1 worker / sequential UCT: $(ratio "$(rate 1x1 trad random false)" \
  "$(rate uct trad random false)") (target >= 0.9)"

if command -v gnuplot > /dev/null; then
  awk -F, 'NR > 1 {
    label = ($1 == "uct") ? "UCT (no rivet)" : $1 " " $2 " " $3 ($4 == "true" ? " remote" : "")
    printf "\"%s\" %s\n", label, $6 / 1000
  }' "$csv" > "$results/mcts-scaling.dat"
  gnuplot <<EOF
set terminal pngcairo size 1000,560 font "sans,10"
set output "$png"
set title "Distributed MCTS on 11x11 Hex: rollouts per second (16 playouts per leaf)"
set ylabel "thousand rollouts / s"
set style fill solid 0.6 border -1
set boxwidth 0.7
set xtics rotate by -35 left
set yrange [0:*]
set grid ytics
unset key
plot "$results/mcts-scaling.dat" using 0:2:xtic(1) with boxes lc rgb "#3b6ea8"
EOF
  rm -f "$results/mcts-scaling.dat"
  echo "plot: $png"
fi
